"""The one training loop for every PyTorch model of the course (chapters 2, 3, 5 and 6).

- ``seeded(seed)``: a context in which torch is seeded, runs on ONE CPU thread and uses
  deterministic algorithms, so machine load or core count cannot change a result; the
  thread count and the deterministic flag are restored on exit.
- ``train_loop(build_model, batch_loss, steps=..., seed=..., lr=...)``: builds the model
  inside ``seeded(seed)``, runs ``steps`` Adam updates on ``batch_loss(model, step)``
  (optionally with Adam's ``betas``/``eps`` and a learning-rate schedule), optionally
  clips the gradient norm and evaluates every ``log_every`` steps, and returns
  ``(model, history)`` with the model in eval mode.

``history`` is a dict of lists: ``history["loss"]`` has one float per step; when
``evaluate`` is given, ``history["step"]`` lists the logged steps and every key that
``evaluate`` (or ``batch_loss``) reports has one entry per logged step; with an
``lr_schedule``, ``history["lr"]`` has the learning rate of every step. Conventions:
``docs/conventions.md`` (seeding).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["seeded", "train_loop"]


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with ``torch.manual_seed(seed)``, one CPU thread and deterministic
    algorithms.

    Restores the previous thread count and deterministic-algorithms setting afterwards,
    even if the block raises.
    """
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


def _multiplier(lr_schedule: Callable[[int], float], step: int) -> float:
    """``lr_schedule(step)`` as a float, refused unless finite and non-negative."""
    value = lr_schedule(step)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"lr_schedule({step}) returned {value!r}; expected a number (a multiplier "
            "of lr)"
        ) from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(
            f"lr_schedule({step}) returned {value}; expected a finite multiplier >= 0"
        )
    return value


def train_loop(
    build_model: Callable[[], nn.Module],
    batch_loss: Callable[[nn.Module, int], torch.Tensor | tuple[torch.Tensor, dict]],
    *,
    steps: int,
    seed: int,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    lr_schedule: Callable[[int], float] | None = None,
    grad_clip: float | None = None,
    evaluate: Callable[[nn.Module], dict] | None = None,
    log_every: int = 0,
    print_every: int = 0,
) -> tuple[nn.Module, dict]:
    """Train a fresh model with Adam, seeded and single-threaded; return
    ``(model, history)``.

    build_model: ``() -> nn.Module``, called inside ``seeded(seed)`` so the initial
        parameters depend only on ``seed``.
    batch_loss: ``(model, step) -> loss`` or ``(loss, logs)``: the scalar loss of step
        ``step`` (draw the batch from an RNG seeded by ``seed``, or from ``step``), and
        optionally a dict of floats to record at logged steps.
    steps: number of updates; lr: Adam's learning rate; betas, eps: Adam's (defaults:
    torch's).
    lr_schedule: ``step -> multiplier``: step ``step`` (0-based, as in ``batch_loss``)
        uses the learning rate ``lr * lr_schedule(step)``, e.g. warmup then
        1/sqrt(step); None = the constant ``lr``.
    grad_clip: max gradient norm (None = no clipping).
    evaluate: ``model -> dict`` of held-out metrics, called in eval mode under
        ``torch.no_grad()`` at every ``log_every``-th step and at the last step.
    print_every: print the loss every that many steps (0 = silent).
    Returns the model in eval mode and ``history``: "loss" (``steps`` floats, the
    training loss of every step), "lr" (``steps`` floats) with an ``lr_schedule``, plus
    "step" and one list per reported key when there are logs.
    """
    if steps < 1:
        raise ValueError(f"expected steps >= 1, got {steps}")
    with seeded(seed):
        model = build_model()
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=eps)
        history: dict[str, list] = (
            {"loss": []} if lr_schedule is None else {"loss": [], "lr": []}
        )
        start = time.perf_counter()
        model.train()
        for step in range(steps):
            out = batch_loss(model, step)
            loss, logs = out if isinstance(out, tuple) else (out, {})
            optimizer.zero_grad()
            loss.backward()
            if grad_clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            if lr_schedule is not None:
                rate = lr * _multiplier(lr_schedule, step)
                for group in optimizer.param_groups:
                    group["lr"] = rate
                history["lr"].append(rate)
            optimizer.step()
            history["loss"].append(loss.item())
            if print_every and (step + 1) % print_every == 0:
                print(
                    f"step {step + 1}: loss {loss.item():.4f} "
                    f"({time.perf_counter() - start:.1f} s)"
                )
            last = step == steps - 1
            if (evaluate is not None or logs) and (
                last or (log_every and step % log_every == 0)
            ):
                if evaluate is not None:
                    model.eval()
                    with torch.no_grad():
                        logs = {**logs, **evaluate(model)}
                    model.train()
                history.setdefault("step", []).append(step)
                for key, value in logs.items():
                    history.setdefault(key, []).append(value)
        model.eval()
    return model, history
