"""Tests for ``solutions/training.py``: the one seeded training loop of every torch model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from solutions.training import seeded, train_loop


def _regression(seed: int, steps: int = 30, **kwargs):
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(64, 3, generator=gen)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(64, generator=gen)

    def batch_loss(model, step):
        rows = torch.arange(step % 4 * 16, step % 4 * 16 + 16)
        return ((model(x[rows]).squeeze(-1) - y[rows]) ** 2).mean()

    return train_loop(
        lambda: nn.Linear(3, 1), batch_loss, steps=steps, seed=seed, lr=0.05, **kwargs
    )


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
