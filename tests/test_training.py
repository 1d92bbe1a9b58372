"""Tests for ``solutions/training.py``: the one seeded training loop of every torch model."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from solutions.training import seeded, train_loop


def _regression(seed: int, steps: int = 30, lr: float = 0.05, **kwargs):
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(64, 3, generator=gen)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(64, generator=gen)

    def batch_loss(model, step):
        rows = torch.arange(step % 4 * 16, step % 4 * 16 + 16)
        return ((model(x[rows]).squeeze(-1) - y[rows]) ** 2).mean()

    return train_loop(lambda: nn.Linear(3, 1), batch_loss, steps=steps, seed=seed, lr=lr, **kwargs)


def test_same_seed_same_history_other_seed_other_history():
    model_a, history_a = _regression(seed=3)
    model_b, history_b = _regression(seed=3)
    _, history_c = _regression(seed=4)
    assert len(history_a["loss"]) == 30 and history_a == history_b
    assert history_a["loss"] != history_c["loss"]
    assert torch.equal(model_a.weight, model_b.weight)
    assert not model_a.training  # returned in eval mode
    assert history_a["loss"][-1] < 0.2 * history_a["loss"][0]  # and it does train


def test_seeded_uses_one_deterministic_thread_and_restores_the_settings():
    torch.set_num_threads(2)
    before = torch.are_deterministic_algorithms_enabled()
    with pytest.raises(RuntimeError, match="inside"):
        with seeded(0):
            assert torch.get_num_threads() == 1
            assert torch.are_deterministic_algorithms_enabled()
            raise RuntimeError("inside")
    assert torch.get_num_threads() == 2
    assert torch.are_deterministic_algorithms_enabled() == before


def test_evaluate_and_logs_are_recorded_at_the_logged_steps_only():
    calls = []

    def evaluate(model):
        calls.append(model.training)
        return {"weight_norm": float(model.weight.norm())}

    _, history = _regression(seed=0, steps=25, evaluate=evaluate, log_every=10)
    assert history["step"] == [0, 10, 20, 24]  # every 10th step and the last
    assert len(history["weight_norm"]) == 4 and len(history["loss"]) == 25
    assert calls == [False] * 4  # evaluated in eval mode


def test_grad_clip_bounds_the_gradient_norm_the_optimizer_sees():
    seen = []

    def big_loss(model, step):
        if step > 0:  # the gradient of the previous step, as clipped before optimizer.step()
            seen.append(float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()))
        return 1e3 * model(torch.ones(1, 3)).sum()

    train_loop(lambda: nn.Linear(3, 1), big_loss, steps=2, seed=5, lr=0.1, grad_clip=0.5)
    train_loop(lambda: nn.Linear(3, 1), big_loss, steps=2, seed=5, lr=0.1)
    assert seen[0] == pytest.approx(0.5, rel=1e-5) and seen[1] == pytest.approx(2000.0, rel=1e-5)


def test_steps_must_be_positive():
    with pytest.raises(ValueError, match="steps >= 1"):
        _regression(seed=0, steps=0)


class _Scalar(nn.Module):
    """One parameter w (starting at 1.0); ``batch_loss`` below is w^2, so the gradient 2w
    changes from step to step and Adam's betas matter from the second step on."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([1.0]))


def _square(model, step):
    return (model.w**2).sum()


def _hand_adam(steps, lr, betas, eps=1e-8):
    """Adam (Kingma & Ba, Algorithm 1) on w^2 from w = 1, in float64 by hand."""
    w, m, v = 1.0, 0.0, 0.0
    for t in range(1, steps + 1):
        g = 2 * w
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        w -= lr * (m / (1 - betas[0] ** t)) / ((v / (1 - betas[1] ** t)) ** 0.5 + eps)
    return w


def test_betas_reach_adam_and_change_the_updates_as_a_hand_computed_adam_step_says():
    default, _ = train_loop(_Scalar, _square, steps=3, seed=0, lr=0.1)
    zero, _ = train_loop(_Scalar, _square, steps=3, seed=0, lr=0.1, betas=(0.0, 0.0))
    assert default.w.item() == pytest.approx(_hand_adam(3, 0.1, (0.9, 0.999)), rel=1e-6)
    assert zero.w.item() == pytest.approx(_hand_adam(3, 0.1, (0.0, 0.0)), rel=1e-6)
    assert abs(default.w.item() - zero.w.item()) > 1e-3  # the two are told apart


def test_eps_reaches_adam():
    # eps = 2: the first step is lr * g / (|g| + eps) = 0.1 * 2 / 4, not ~0.1 * 2 / 2
    model, _ = train_loop(_Scalar, _square, steps=1, seed=0, lr=0.1, eps=2.0)
    assert model.w.item() == pytest.approx(1.0 - 0.05, rel=1e-6)


def test_a_zero_lr_schedule_leaves_the_parameters_unchanged():
    start = _regression(seed=7, steps=1, lr_schedule=lambda step: 0.0)[0]
    with seeded(7):
        fresh = nn.Linear(3, 1)  # the initial parameters of seed 7
    assert torch.equal(start.weight, fresh.weight) and torch.equal(start.bias, fresh.bias)
    model, history = _regression(seed=7, steps=20, lr_schedule=lambda step: 0.0)
    assert torch.equal(model.weight, fresh.weight) and torch.equal(model.bias, fresh.bias)
    assert history["lr"] == [0.0] * 20


def test_the_optimizer_steps_at_lr_times_the_schedule_of_each_step():
    used = []

    def record(optimizer, args, kwargs):  # runs right before every optimizer.step()
        used.append(optimizer.param_groups[0]["lr"])

    def schedule(step):  # warmup for 3 steps, then 1/sqrt
        return min((step + 1) / 3, (3 / (step + 1)) ** 0.5)

    handle = register_optimizer_step_pre_hook(record)
    try:
        _, history = _regression(seed=0, steps=8, lr_schedule=schedule)
    finally:
        handle.remove()
    expected = [0.05 * schedule(step) for step in range(8)]
    assert used == pytest.approx(expected, rel=1e-12) and history["lr"] == used
    assert len(set(used)) == 8  # the rate really changes from step to step
    _, constant = _regression(seed=0, steps=3)
    assert "lr" not in constant  # no schedule, no "lr" history


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "fast"])
def test_a_schedule_must_return_a_finite_non_negative_number(bad):
    with pytest.raises((ValueError, TypeError), match=r"lr_schedule\(0\) returned"):
        _regression(seed=0, steps=2, lr_schedule=lambda step: bad)
