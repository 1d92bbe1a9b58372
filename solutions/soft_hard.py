"""Soft and hard attention (chapter 2, ``book/ch2_soft_hard.ipynb``).

What this file builds, in the order the chapter derives it:

- ``softmax`` and ``masked_softmax``: turn scores into weights; always max-shifted, and
  a query row with no allowed key gets all-zero weights (never NaN).
- Score functions ``dot_score``, ``scaled_dot_score``, ``general_score``,
  ``additive_score``, ``cosine_score``: how well each query matches each key.
- ``attention``: soft attention, ``softmax(score(q, k)) @ v``, with an optional mask,
  written as its equation; the cache-blocked, multi-threaded version of the same
  computation is ``solutions.fast_attention.fast_attention``, tested equal to this one.
- ``hard_attention``, ``reinforce_grad``, ``gumbel_softmax``: pick one key instead of
  averaging, and the two ways to train through that choice (score function
  / relaxation).
- Small PyTorch models: a hard-attention classifier trained with REINFORCE next to its
  soft-attention twin, a query-dependent aspect-sentiment model, and a multi-hop memory
  network, each with a synthetic task and a ``train_*`` function (in
  ``soft_hard_models``).

Using the trained models (each ``train_*`` takes a few seconds on one CPU thread)::

    # baseline="none" too; history["accuracy"]
    model, history = train_hard_attention(baseline="running")
    soft, soft_history = train_soft_attention()  # the soft twin, same task
    aspect_model, _ = train_aspect_model()
    words, weights, p_pos = aspect_attention(
        aspect_model, "the food is good but the service is bad", "food"
    )
    memnet, _ = train_memory_network()
    hop_weights, answer = memory_attention(  # hop_weights (hops, S)
        memnet, ["john has the apple", "john is in the garden"], "where is the apple"
    )
    grads = reinforce_grad_samples(
        scores, lambda z: rewards[z], 10_000, rng, baseline="mean"
    )

The PyTorch models live in ``solutions/soft_hard_models.py`` and are re-exported here,
so ``from solutions.soft_hard import train_hard_attention`` works.

Conventions (``docs/conventions.md``): queries are rows; ``q`` is ``(..., n_q, d)``,
``k`` is ``(..., n_k, d)``, ``v`` is ``(..., n_k, d_v)``; weights are
``(..., n_q, n_k)`` with rows summing to 1. Masks are boolean, broadcastable to
``(..., n_q, n_k)``, True = "may attend". NumPy functions keep the floating dtype of
their input (float32 stays float32). ``softmax`` and ``masked_softmax`` are defined
once, in ``solutions.conventions``.

Equations are cited by their labels in the chapter (MyST ``:label:``, rendered as
numbers):

- {eq}`ch2-softmax`: ``softmax(s)_j = exp(s_j - max s) / sum_l exp(s_l - max s)``
- {eq}`ch2-masked-softmax`: the max and the sum run over allowed keys only; empty rows
  give 0
- {eq}`ch2-dot` ``q.k``; {eq}`ch2-scaled-dot` ``q.k / sqrt(d)``; {eq}`ch2-general`
  ``q W k``; {eq}`ch2-additive` ``v . tanh(q W_q + k W_k)``; {eq}`ch2-cosine`
  ``q.k / (|q| |k|)``
- {eq}`ch2-soft-attention`: ``o_i = sum_j a_ij v_j`` with
  ``a_i = softmax(score(q_i, K))``
- {eq}`ch2-hard-attention`: ``o_i = v_{z_i}``, ``z_i ~ Categorical(a_i)`` (or
  ``argmax a_i``)
- {eq}`ch2-baseline`: REINFORCE with a baseline, ``g = (R - b) grad_s log p(z)``, with
  ``grad_s log p(z) = onehot(z) - softmax(s)`` for a softmax policy
- {eq}`ch2-gumbel-softmax`: ``y = softmax((s + g) / tau)``, ``g = -log(-log u)``,
  ``u ~ U(0, 1)``
- {eq}`ch2-memory-hop`: one hop of the memory network, ``u_k = u_{k-1} + sum_i p_i c_i``
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import numpy as np

from solutions import soft_hard_models
from solutions.conventions import (
    as_float,
    check_attention,
    check_batch,
    masked_softmax,
    softmax,
)

# the chapter's torch models, re-exported
from solutions.soft_hard_models import *  # noqa: F403

__all__ = [
    "softmax",
    "masked_softmax",
    "dot_score",
    "scaled_dot_score",
    "general_score",
    "additive_score",
    "cosine_score",
    "SCORES",
    "attention",
    "hard_attention",
    "reinforce_grad",
    "reinforce_grad_samples",
    "gumbel_softmax",
    *soft_hard_models.__all__,
]


def _check_qk(q: np.ndarray, k: np.ndarray, width_q: int | None = None) -> None:
    """Queries ``(..., n_q, d_q)`` and keys ``(..., n_k, d_k)`` with compatible batch
    dims."""
    check_batch(("q", q), ("k", k))
    if width_q is not None and k.shape[-1] != width_q:
        raise ValueError(
            f"expected keys of width {width_q} to match queries, got {k.shape[-1]}: "
            f"q has shape {q.shape}, k has shape {k.shape}"
        )


# --------------------------------------------------------------------------------------
# score functions: all map q (..., n_q, d_q), k (..., n_k, d_k) to (..., n_q, n_k)


def dot_score(q, k) -> np.ndarray:
    """Dot-product score ``s_ij = q_i . k_j``, {eq}`ch2-dot`.

    q: (..., n_q, d), k: (..., n_k, d)  ->  scores (..., n_q, n_k).
    """
    q, k = as_float(q, "q"), as_float(k, "k")
    _check_qk(q, k, q.shape[-1])
    # (..., n_q, d) @ (..., d, n_k) -> (..., n_q, n_k)
    return q @ np.swapaxes(k, -1, -2)


def scaled_dot_score(q, k) -> np.ndarray:
    """Scaled dot-product score ``s_ij = q_i . k_j / sqrt(d)``, {eq}`ch2-scaled-dot`.

    q: (..., n_q, d), k: (..., n_k, d)  ->  scores (..., n_q, n_k).
    Dividing by sqrt(d) keeps the score variance near 1 for unit-variance q, k.
    """
    q, k = as_float(q, "q"), as_float(k, "k")
    _check_qk(q, k, q.shape[-1])
    # scale q (n_q * d numbers) rather than the scores (n_q * n_k numbers)
    q = q * np.asarray(1.0 / math.sqrt(q.shape[-1]), dtype=q.dtype)
    return q @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)


def general_score(q, k, w) -> np.ndarray:
    """Bilinear ("general", Luong) score ``s_ij = q_i W k_j``, {eq}`ch2-general`.

    q: (..., n_q, d_q), k: (..., n_k, d_k), w: (d_q, d_k)  ->  scores (..., n_q, n_k).
    """
    q, k, w = as_float(q, "q"), as_float(k, "k"), as_float(w, "w")
    _check_qk(q, k)
    if w.shape != (q.shape[-1], k.shape[-1]):
        raise ValueError(
            f"expected w of shape (d_q, d_k) = ({q.shape[-1]}, {k.shape[-1]}), got "
            f"{w.shape}: q has shape {q.shape}, k has shape {k.shape}"
        )
    qw = q @ w  # (..., n_q, d_k)
    return qw @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)


def additive_score(q, k, w_q, w_k, v) -> np.ndarray:
    """Additive (Bahdanau) score ``s_ij = v . tanh(q_i W_q + k_j W_k)``,
    {eq}`ch2-additive`.

    q: (..., n_q, d_q), k: (..., n_k, d_k), w_q: (d_q, d_att), w_k: (d_k, d_att),
    v: (d_att,)  ->  scores (..., n_q, n_k).
    Builds a (..., n_q, n_k, d_att) intermediate: fine for the sizes of this course.
    """
    q, k = as_float(q, "q"), as_float(k, "k")
    w_q, w_k, v = as_float(w_q, "w_q"), as_float(w_k, "w_k"), as_float(v, "v")
    _check_qk(q, k)
    if w_q.ndim != 2 or w_q.shape[0] != q.shape[-1]:
        raise ValueError(
            f"expected w_q of shape (d_q, d_att) with d_q = {q.shape[-1]} (the width "
            f"of q {q.shape}), got {w_q.shape}"
        )
    d_att = w_q.shape[1]
    if w_k.shape != (k.shape[-1], d_att):
        raise ValueError(
            f"expected w_k of shape (d_k, d_att) = ({k.shape[-1]}, {d_att}) to match k "
            f"{k.shape} and w_q {w_q.shape}, got {w_k.shape}"
        )
    if v.shape != (d_att,):
        raise ValueError(
            f"expected v of shape (d_att,) = ({d_att},) to match w_q {w_q.shape}, got "
            f"{v.shape}"
        )
    qp = (q @ w_q)[..., :, None, :]  # (..., n_q, 1, d_att)
    kp = (k @ w_k)[..., None, :, :]  # (..., 1, n_k, d_att)
    return np.tanh(qp + kp) @ v  # (..., n_q, n_k, d_att) @ (d_att,) -> (..., n_q, n_k)


def cosine_score(q, k) -> np.ndarray:
    """Cosine-similarity score ``s_ij = q_i . k_j / (|q_i| |k_j|)``, {eq}`ch2-cosine`.

    q: (..., n_q, d), k: (..., n_k, d)  ->  scores (..., n_q, n_k) in [-1, 1].
    A zero query or key vector has score 0 with everything.
    """
    q, k = as_float(q, "q"), as_float(k, "k")
    _check_qk(q, k, q.shape[-1])
    qn = np.linalg.norm(q, axis=-1, keepdims=True)  # (..., n_q, 1)
    kn = np.linalg.norm(k, axis=-1, keepdims=True)  # (..., n_k, 1)
    q = q / np.where(qn > 0, qn, 1.0).astype(q.dtype, copy=False)
    k = k / np.where(kn > 0, kn, 1.0).astype(k.dtype, copy=False)
    return q @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)


SCORES: dict[str, Callable[..., np.ndarray]] = {
    "dot": dot_score,
    "scaled_dot": scaled_dot_score,
    "general": general_score,
    "additive": additive_score,
    "cosine": cosine_score,
}


# --------------------------------------------------------------------------------------
# soft attention


def _check_score_params(score, score_fn, q, k, score_params: dict) -> None:
    """Say which parameters a score function wants, instead of Python's bare
    TypeError."""
    try:
        signature = inspect.signature(score_fn)
    except (TypeError, ValueError):  # a callable without an inspectable signature
        return
    try:
        signature.bind(q, k, **score_params)
    except TypeError:
        wanted = list(signature.parameters)[2:]
        hint = (
            " (pass the additive vector as v_att=..., since v names the values)"
            if score == "additive"
            else ""
        )
        raise TypeError(
            f"score {score!r} takes the parameters {wanted} after q and k{hint}; got "
            f"{sorted(score_params)}"
        ) from None


def _score_function(score, q: np.ndarray, k: np.ndarray, score_params: dict):
    """``score(q, k) -> (..., n_q, n_k)`` for ``attention``: the function a score name
    stands for, with its parameters bound after checking them against its signature."""
    if isinstance(score, str):
        if score not in SCORES:
            raise ValueError(
                f"unknown score {score!r}: expected one of {sorted(SCORES)} or a "
                "callable"
            )
        score_fn = SCORES[score]
    elif callable(score):
        score_fn = score
    else:
        raise TypeError(
            f"expected score to be a name in {sorted(SCORES)} or a callable, got "
            f"{score!r}"
        )
    if score == "additive" and "v_att" in score_params:
        score_params = {
            ("v" if name == "v_att" else name): value
            for name, value in score_params.items()
        }
    _check_score_params(score, score_fn, q, k, score_params)
    return lambda q, k: score_fn(q, k, **score_params)


def attention(q, k, v, mask=None, score="scaled_dot", **score_params):
    """Soft attention ``o_i = sum_j softmax(score(q_i, K))_j v_j``,
    {eq}`ch2-soft-attention`.

    q:    (..., n_q, d_q) queries
    k:    (..., n_k, d_k) keys
    v:    (..., n_k, d_v) values (one per key)
    mask: boolean, broadcastable to (..., n_q, n_k), True = may attend; None = all keys.
    score: a name in ``SCORES`` ("dot", "scaled_dot", "general", "additive", "cosine")
        or a callable ``score(q, k, **score_params) -> (..., n_q, n_k)``.
    score_params: the score's weights, e.g. ``w=...`` for "general";
        ``w_q=..., w_k=..., v=...`` is not possible for "additive" because ``v`` names
        the values here, so pass the additive vector as ``v_att=...``.
    Returns ``(output, weights)``: output (..., n_q, d_v), weights (..., n_q, n_k).
    A query with no allowed key gets all-zero weights and a zero output
    (``docs/conventions.md``). The same computation in cache-sized blocks of query rows,
    shared out over threads: ``solutions.fast_attention.fast_attention``.
    """
    # shapes, dtypes and mask (conventions.py)
    q, k, v, mask = check_attention(q, k, v, mask)
    scores = _score_function(score, q, k, score_params)(q, k)  # (..., n_q, n_k)
    weights = masked_softmax(scores, mask)  # (..., n_q, n_k), {eq}`ch2-masked-softmax`
    return weights @ v, weights  # (..., n_q, d_v): o_i = sum_j a_ij v_j


# --------------------------------------------------------------------------------------
# hard attention and its gradients


def hard_attention(weights, values, rng=None):
    """Hard attention: each query takes exactly one value, {eq}`ch2-hard-attention`.

    weights: (..., n_q, n_k) attention weights (rows sum to 1, or 0 for an empty row)
    values:  (..., n_k, d_v)
    rng:     None -> ``index = argmax`` of each row (deterministic, ties go to the
             first);
             a ``numpy.random.Generator`` -> one sample per query from Categorical(row),
             by inverse-CDF sampling: ``u = rng.random(weights.shape[:-1])`` drawn once,
             then the first j whose cumulative weight exceeds ``u * row_sum`` (the
             grader relies on this exact recipe to reproduce a student's samples from
             the same seed).
    Returns ``(output, index)``: output (..., n_q, d_v) = ``values[..., index, :]`` and
    index (..., n_q) of ints. A row whose weights are all zero (a fully masked query)
    gets index -1 and a zero output, matching the soft convention.
    """
    weights, values = as_float(weights, "weights"), as_float(values, "values")
    if weights.ndim < 2 or values.ndim < 2 or values.shape[-2] != weights.shape[-1]:
        raise ValueError(
            "expected weights (..., n_q, n_k) and values (..., n_k, d_v) with the same "
            f"n_k, got weights of shape {weights.shape} and values of shape "
            f"{values.shape}"
        )
    if np.any(weights < 0):
        raise ValueError(
            "expected non-negative weights (probabilities), got a negative entry"
        )
    n_k = weights.shape[-1]
    total = weights.sum(axis=-1)  # (..., n_q)
    if rng is None:
        index = np.argmax(weights, axis=-1)  # (..., n_q)
    else:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                "expected rng to be None or a numpy.random.Generator, got "
                f"{type(rng).__name__}"
            )
        # inverse-CDF sampling, one uniform per query: z = #{j : cdf_j <= u * total}
        cdf = np.cumsum(weights, axis=-1)  # (..., n_q, n_k)
        u = rng.random(weights.shape[:-1]) * total  # (..., n_q)
        index = np.sum(cdf <= u[..., None], axis=-1)  # (..., n_q)
        index = np.minimum(index, n_k - 1)  # guard against u * total rounding to total
    empty = total <= 0  # (..., n_q)
    index = np.where(empty, -1, index)
    # (..., n_q, n_k)
    onehot = (np.arange(n_k) == index[..., None]).astype(values.dtype)
    output = onehot @ values  # (..., n_q, d_v); an empty row selects nothing -> zeros
    return output, index


def reinforce_grad(scores, index, reward, baseline=0.0) -> np.ndarray:
    """Score-function (REINFORCE) gradient estimate for a softmax policy,
    {eq}`ch2-baseline`.

    scores:   (..., n) logits of the policy ``p = softmax(scores)``
    index:    (...) the sampled choice z (ints in [0, n))
    reward:   scalar or (...) the reward R(z) obtained
    baseline: scalar or (...) b, any quantity independent of z
              (e.g. a running mean of R)
    Returns (..., n): ``(R - b) * d log p(z) / d scores = (R - b) * (onehot(z) - p)``.
    Averaged over z ~ p it is an unbiased estimate of ``d E[R] / d scores`` for any b.
    """
    scores = as_float(scores, "scores")
    if scores.ndim == 0:
        raise ValueError("expected scores of shape (..., n), got a scalar")
    index = np.asarray(index)
    if not np.issubdtype(index.dtype, np.integer):
        raise TypeError(f"expected integer indices, got dtype {index.dtype}")
    if index.shape != scores.shape[:-1]:
        raise ValueError(
            "expected one index per row of scores: index of shape "
            f"{scores.shape[:-1]}, got {index.shape} (scores have shape {scores.shape})"
        )
    n = scores.shape[-1]
    if np.any((index < 0) | (index >= n)):
        raise ValueError(
            f"expected indices in [0, {n}), got values from {index.min()} to "
            f"{index.max()}"
        )
    advantage = np.asarray(reward, dtype=scores.dtype) - np.asarray(
        baseline, dtype=scores.dtype
    )
    try:
        advantage = np.broadcast_to(advantage, index.shape)  # (...)
    except ValueError:
        raise ValueError(
            f"expected reward and baseline to be scalars or of shape {index.shape} "
            f"(one per row of scores {scores.shape}), got reward {np.shape(reward)}, "
            f"baseline {np.shape(baseline)}"
        ) from None
    p = softmax(scores, axis=-1)  # (..., n)
    onehot = (np.arange(n) == index[..., None]).astype(scores.dtype)  # (..., n)
    return advantage[..., None] * (onehot - p)  # (..., n)


def reinforce_grad_samples(scores, reward_fn, n, rng, baseline=0.0) -> np.ndarray:
    """``n`` independent REINFORCE estimates for one categorical choice (baseline demo).

    scores:    (k,) logits of the policy ``p = softmax(scores)``
    reward_fn: maps an int array of choices (n,) to rewards (n,), e.g.
    ``lambda z: r[z]``
    n:         number of samples
    rng:       numpy.random.Generator
    baseline:  a float, or "mean" for the exact expected reward ``E_p[R]`` (the baseline
               a learned/running-mean baseline converges to; computed here by
               enumerating the k choices, so ``reward_fn`` must accept ``np.arange(k)``)
    Returns (n, k): row s is ``(R(z_s) - b) * (onehot(z_s) - p)``. Its mean over rows is
    an unbiased estimate of ``d E[R] / d scores``; compare the per-coordinate variance
    of ``baseline=0`` against ``baseline="mean"`` to see the variance reduction.
    """
    scores = as_float(scores, "scores")
    if scores.ndim != 1:
        raise ValueError(f"expected scores of shape (k,), got {scores.shape}")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"expected a positive integer number of samples, got n={n!r}")
    p = softmax(scores)  # (k,)
    if isinstance(baseline, str):
        if baseline != "mean":
            raise ValueError(
                f"expected baseline to be a number or 'mean', got {baseline!r}"
            )
        baseline = float(
            p @ np.asarray(reward_fn(np.arange(scores.shape[0])), dtype=np.float64)
        )
    z = rng.choice(scores.shape[0], size=n, p=p / p.sum())  # (n,)
    reward = np.asarray(reward_fn(z), dtype=scores.dtype)  # (n,)
    if reward.shape != (n,):
        raise ValueError(
            f"expected reward_fn to return one reward per sample, shape ({n},), got "
            f"{reward.shape}"
        )
    return reinforce_grad(
        np.broadcast_to(scores, (n, scores.shape[0])), z, reward, baseline
    )  # (n, k)


def gumbel_softmax(scores, tau, rng, hard=False) -> np.ndarray:
    """Gumbel-softmax (concrete) relaxation of a categorical sample,
    {eq}`ch2-gumbel-softmax`.

    scores: (..., n) logits; ``-inf`` marks a choice that is never taken.
    tau:    temperature > 0; as tau -> 0 the sample approaches a one-hot vector.
    rng:    numpy.random.Generator for the Gumbel noise.
    hard:   if True return the one-hot ``argmax`` of the relaxed sample (in NumPy
            there is no straight-through gradient; this is the forward value of the
            ST estimator).
    Returns (..., n): rows sum to 1; ``argmax`` of a row is distributed as
    Categorical(softmax(scores)) for every tau (the Gumbel-max trick).
    """
    scores = as_float(scores, "scores")
    if scores.ndim == 0:
        raise ValueError("expected scores of shape (..., n), got a scalar")
    if np.ndim(tau) != 0 or not tau > 0:
        raise ValueError(f"expected a positive scalar temperature tau, got {tau!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"expected rng to be a numpy.random.Generator, got {type(rng).__name__}"
        )
    u = rng.random(scores.shape)  # (..., n) in [0, 1)
    tiny = np.finfo(np.float64).tiny
    # Gumbel(0, 1)
    g = -np.log(-np.log(np.clip(u, tiny, 1.0 - 1e-16))).astype(scores.dtype)
    y = softmax((scores + g) / np.asarray(tau, dtype=scores.dtype), axis=-1)  # (..., n)
    if hard:
        y = (np.arange(scores.shape[-1]) == np.argmax(y, axis=-1)[..., None]).astype(
            scores.dtype
        )
    return y
