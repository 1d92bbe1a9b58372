"""Soft and hard attention (chapter 2, ``book/ch2_soft_hard.ipynb``).

What this file builds, in the order the chapter derives it:

- ``softmax`` and ``masked_softmax``: turn scores into weights; always max-shifted, and a
  query row with no allowed key gets all-zero weights (never NaN).
- Score functions ``dot_score``, ``scaled_dot_score``, ``general_score``,
  ``additive_score``, ``cosine_score``: how well each query matches each key.
- ``attention``: soft attention, ``softmax(score(q, k)) @ v``, with an optional mask.
- ``hard_attention``, ``reinforce_grad``, ``gumbel_softmax``: pick one key instead of
  averaging, and the two ways to train through that choice (score function / relaxation).
- Small PyTorch models: a hard-attention classifier trained with REINFORCE next to its
  soft-attention twin, a query-dependent aspect-sentiment model, and a multi-hop memory
  network, each with a synthetic task generated here and a ``train_*`` function.

Using the trained models (each ``train_*`` takes a few seconds on one CPU thread)::

    model, history = train_hard_attention(baseline="running")  # or "none"; history["accuracy"]
    soft, soft_history = train_soft_attention()                 # the soft twin, same task
    aspect_model, _ = train_aspect_model()
    words, weights, p_pos = aspect_attention(aspect_model, "the food is good but the service is bad", "food")
    memnet, _ = train_memory_network()
    hop_weights, answer = memory_attention(memnet, ["john has the apple", "john is in the garden"],
                                           "where is the apple")      # hop_weights (hops, S)
    grads = reinforce_grad_samples(scores, lambda z: rewards[z], 10_000, rng, baseline="mean")

Conventions (``shared/DESIGN.md``): queries are rows; ``q`` is ``(..., n_q, d)``, ``k`` is
``(..., n_k, d)``, ``v`` is ``(..., n_k, d_v)``; weights are ``(..., n_q, n_k)`` with rows
summing to 1. Masks are boolean, broadcastable to ``(..., n_q, n_k)``, True = "may attend".
NumPy functions keep the floating dtype of their input (float32 stays float32).

Equations are cited by their labels in the chapter (MyST ``:label:``, rendered as numbers):

- ``ch2-softmax``: ``softmax(s)_j = exp(s_j - max s) / sum_l exp(s_l - max s)``
- ``ch2-masked-softmax``: the max and the sum run over allowed keys only; empty rows give 0
- ``ch2-dot`` ``q.k``; ``ch2-scaled-dot`` ``q.k / sqrt(d)``; ``ch2-general`` ``q W k``;
  ``ch2-additive`` ``v . tanh(q W_q + k W_k)``; ``ch2-cosine`` ``q.k / (|q| |k|)``
- ``ch2-soft-attention``: ``o_i = sum_j a_ij v_j`` with ``a_i = softmax(score(q_i, K))``
- ``ch2-hard-attention``: ``o_i = v_{z_i}``, ``z_i ~ Categorical(a_i)`` (or ``argmax a_i``)
- ``ch2-baseline``: REINFORCE with a baseline, ``g = (R - b) grad_s log p(z)``, with
  ``grad_s log p(z) = onehot(z) - softmax(s)`` for a softmax policy
- ``ch2-gumbel-softmax``: ``y = softmax((s + g) / tau)``, ``g = -log(-log u)``, ``u ~ U(0, 1)``
- ``ch2-memory-hop``: one hop of the memory network, ``u_k = u_{k-1} + sum_i p_i c_i``
"""

from __future__ import annotations

import inspect
import math
from typing import Callable

import numpy as np

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
]


# ----------------------------------------------------------------------------------------
# helpers


def _as_float(x, name: str) -> np.ndarray:
    """``x`` as a floating array; float32/float64 are kept, anything else becomes float64."""
    x = np.asarray(x)
    if x.dtype == bool or not np.issubdtype(x.dtype, np.number):
        raise TypeError(f"expected {name} to be a numeric array, got dtype {x.dtype}")
    if np.issubdtype(x.dtype, np.complexfloating):
        raise TypeError(f"expected {name} to be a real array, got dtype {x.dtype}")
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    return x


def _check_mask(mask, shape: tuple, name: str = "scores") -> np.ndarray:
    """Validate a boolean mask broadcastable to ``shape`` (True = may attend)."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(
            f"expected a boolean mask (True = may attend), got dtype {mask.dtype}: "
            "use mask.astype(bool), or `mask == 1` if 1 marks the keys that may be attended"
        )
    try:
        out = np.broadcast_shapes(mask.shape, shape)
    except ValueError:
        out = None
    if out != tuple(shape):
        raise ValueError(
            f"expected a mask broadcastable to the {name} shape {tuple(shape)}, "
            f"got mask of shape {mask.shape}"
        )
    return mask


def _check_qk(q: np.ndarray, k: np.ndarray, width_q: int | None = None) -> None:
    """Queries ``(..., n_q, d_q)`` and keys ``(..., n_k, d_k)`` with compatible batch dims."""
    if q.ndim < 2 or k.ndim < 2:
        raise ValueError(
            f"expected queries (..., n_q, d) and keys (..., n_k, d) with at least 2 dims, "
            f"got q of shape {q.shape} and k of shape {k.shape}"
        )
    try:
        np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except ValueError:
        raise ValueError(
            f"expected the batch dims of queries and keys to broadcast, got q of shape "
            f"{q.shape} and k of shape {k.shape}"
        ) from None
    if width_q is not None and k.shape[-1] != width_q:
        raise ValueError(
            f"expected keys of width {width_q} to match queries, got {k.shape[-1]}: "
            f"q has shape {q.shape}, k has shape {k.shape}"
        )


# ----------------------------------------------------------------------------------------
# softmax


def softmax(scores, axis: int = -1) -> np.ndarray:
    """Max-shifted softmax along ``axis``, eq. ``ch2-softmax``.

    scores: (..., n) real array (float32 stays float32; ints become float64).
    Returns weights of the same shape, non-negative, summing to 1 along ``axis``.
    Entries equal to ``-inf`` get weight exactly 0; a slice that is all ``-inf`` gets all
    zeros (not NaN), the same convention as a fully masked row in ``masked_softmax``.
    """
    scores = _as_float(scores, "scores")
    if scores.ndim == 0:
        raise ValueError("expected scores with at least 1 dim, got a scalar")
    m = np.max(scores, axis=axis, keepdims=True)  # (..., 1, ...)
    m = np.where(np.isfinite(m), m, 0.0).astype(scores.dtype, copy=False)
    # one full-size buffer, worked in place: shift, exponentiate, normalise
    e = scores - m  # <= 0 everywhere, so exp cannot overflow
    np.exp(e, out=e)
    total = np.sum(e, axis=axis, keepdims=True)
    e /= np.where(total > 0, total, 1.0).astype(scores.dtype, copy=False)
    return e


def masked_softmax(scores, mask=None) -> np.ndarray:
    """Softmax over the last axis that gives masked-out keys exactly zero weight, eq. ``ch2-masked-softmax``.

    scores: (..., n_q, n_k) real array.
    mask:   boolean, broadcastable to (..., n_q, n_k), True = "may attend"; None = all.
    Returns weights (..., n_q, n_k): rows sum to 1 over the allowed keys, masked entries
    are exactly 0, and a row with no allowed key is all zeros (no NaN, no warning).
    """
    scores = _as_float(scores, "scores")
    if scores.ndim == 0:
        raise ValueError("expected scores of shape (..., n_q, n_k), got a scalar")
    if mask is None:
        return softmax(scores, axis=-1)
    mask = _check_mask(mask, scores.shape)
    # max over the allowed keys only, so a large masked score cannot shift the row
    m = np.max(scores, axis=-1, keepdims=True, where=mask, initial=-np.inf)  # (..., n_q, 1)
    m = np.where(np.isfinite(m), m, 0.0).astype(scores.dtype, copy=False)  # empty row: shift 0
    # one full-size buffer, worked in place: shift, exponentiate the allowed keys, zero the rest
    e = scores - m  # (..., n_q, n_k)
    np.exp(e, out=e, where=mask)  # allowed keys: in (0, 1]
    np.copyto(e, 0.0, where=~mask)  # masked keys: exactly 0 (even if their score was +-inf)
    total = np.sum(e, axis=-1, keepdims=True)  # (..., n_q, 1)
    e /= np.where(total > 0, total, 1.0).astype(scores.dtype, copy=False)
    return e


# ----------------------------------------------------------------------------------------
# score functions: all map q (..., n_q, d_q), k (..., n_k, d_k) to (..., n_q, n_k)


def dot_score(q, k) -> np.ndarray:
    """Dot-product score ``s_ij = q_i . k_j``, eq. ``ch2-dot``.

    q: (..., n_q, d), k: (..., n_k, d)  ->  scores (..., n_q, n_k).
    """
    q, k = _as_float(q, "q"), _as_float(k, "k")
    _check_qk(q, k, q.shape[-1])
    return q @ np.swapaxes(k, -1, -2)  # (..., n_q, d) @ (..., d, n_k) -> (..., n_q, n_k)


def scaled_dot_score(q, k) -> np.ndarray:
    """Scaled dot-product score ``s_ij = q_i . k_j / sqrt(d)``, eq. ``ch2-scaled-dot``.

    q: (..., n_q, d), k: (..., n_k, d)  ->  scores (..., n_q, n_k).
    Dividing by sqrt(d) keeps the score variance near 1 for unit-variance q, k.
    """
    q, k = _as_float(q, "q"), _as_float(k, "k")
    _check_qk(q, k, q.shape[-1])
    # scale q (n_q * d numbers) rather than the scores (n_q * n_k numbers)
    q = q * np.asarray(1.0 / math.sqrt(q.shape[-1]), dtype=q.dtype)
    return q @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)


def general_score(q, k, w) -> np.ndarray:
    """Bilinear ("general", Luong) score ``s_ij = q_i W k_j``, eq. ``ch2-general``.

    q: (..., n_q, d_q), k: (..., n_k, d_k), w: (d_q, d_k)  ->  scores (..., n_q, n_k).
    """
    q, k, w = _as_float(q, "q"), _as_float(k, "k"), _as_float(w, "w")
    _check_qk(q, k)
    if w.shape != (q.shape[-1], k.shape[-1]):
        raise ValueError(
            f"expected w of shape (d_q, d_k) = ({q.shape[-1]}, {k.shape[-1]}), got {w.shape}: "
            f"q has shape {q.shape}, k has shape {k.shape}"
        )
    qw = q @ w  # (..., n_q, d_k)
    return qw @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)


def additive_score(q, k, w_q, w_k, v) -> np.ndarray:
    """Additive (Bahdanau) score ``s_ij = v . tanh(q_i W_q + k_j W_k)``, eq. ``ch2-additive``.

    q: (..., n_q, d_q), k: (..., n_k, d_k), w_q: (d_q, d_att), w_k: (d_k, d_att),
    v: (d_att,)  ->  scores (..., n_q, n_k).
    Builds a (..., n_q, n_k, d_att) intermediate: fine for the sizes of this course.
    """
    q, k = _as_float(q, "q"), _as_float(k, "k")
    w_q, w_k, v = _as_float(w_q, "w_q"), _as_float(w_k, "w_k"), _as_float(v, "v")
    _check_qk(q, k)
    if w_q.ndim != 2 or w_q.shape[0] != q.shape[-1]:
        raise ValueError(
            f"expected w_q of shape (d_q, d_att) with d_q = {q.shape[-1]} (the width of q "
            f"{q.shape}), got {w_q.shape}"
        )
    d_att = w_q.shape[1]
    if w_k.shape != (k.shape[-1], d_att):
        raise ValueError(
            f"expected w_k of shape (d_k, d_att) = ({k.shape[-1]}, {d_att}) to match k "
            f"{k.shape} and w_q {w_q.shape}, got {w_k.shape}"
        )
    if v.shape != (d_att,):
        raise ValueError(f"expected v of shape (d_att,) = ({d_att},) to match w_q {w_q.shape}, got {v.shape}")
    qp = (q @ w_q)[..., :, None, :]  # (..., n_q, 1, d_att)
    kp = (k @ w_k)[..., None, :, :]  # (..., 1, n_k, d_att)
    return np.tanh(qp + kp) @ v  # (..., n_q, n_k, d_att) @ (d_att,) -> (..., n_q, n_k)


def cosine_score(q, k) -> np.ndarray:
    """Cosine-similarity score ``s_ij = q_i . k_j / (|q_i| |k_j|)``, eq. ``ch2-cosine``.

    q: (..., n_q, d), k: (..., n_k, d)  ->  scores (..., n_q, n_k) in [-1, 1].
    A zero query or key vector has score 0 with everything.
    """
    q, k = _as_float(q, "q"), _as_float(k, "k")
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


# ----------------------------------------------------------------------------------------
# soft attention


def _check_score_params(score, score_fn, q, k, score_params: dict) -> None:
    """Say which parameters a score function wants, instead of Python's bare TypeError."""
    try:
        signature = inspect.signature(score_fn)
    except (TypeError, ValueError):  # a callable without an inspectable signature
        return
    try:
        signature.bind(q, k, **score_params)
    except TypeError:
        wanted = list(signature.parameters)[2:]
        hint = " (pass the additive vector as v_att=..., since v names the values)" if score == "additive" else ""
        raise TypeError(
            f"score {score!r} takes the parameters {wanted} after q and k{hint}; got {sorted(score_params)}"
        ) from None


def attention(q, k, v, mask=None, score="scaled_dot", **score_params):
    """Soft attention ``o_i = sum_j softmax(score(q_i, K))_j v_j``, eq. ``ch2-soft-attention``.

    q:    (..., n_q, d_q) queries
    k:    (..., n_k, d_k) keys
    v:    (..., n_k, d_v) values (one per key)
    mask: boolean, broadcastable to (..., n_q, n_k), True = may attend; None = all keys.
    score: a name in ``SCORES`` ("dot", "scaled_dot", "general", "additive", "cosine")
        or a callable ``score(q, k, **score_params) -> (..., n_q, n_k)``.
    score_params: the score's weights, e.g. ``w=...`` for "general";
        ``w_q=..., w_k=..., v=...`` is not possible for "additive" because ``v`` names the
        values here, so pass the additive vector as ``v_att=...``.
    Returns ``(output, weights)``: output (..., n_q, d_v), weights (..., n_q, n_k).
    A query with no allowed key gets all-zero weights and a zero output.
    """
    q, k, v = _as_float(q, "q"), _as_float(k, "k"), _as_float(v, "v")
    if isinstance(score, str):
        if score not in SCORES:
            raise ValueError(f"unknown score {score!r}: expected one of {sorted(SCORES)} or a callable")
        score_fn = SCORES[score]
    elif callable(score):
        score_fn = score
    else:
        raise TypeError(f"expected score to be a name in {sorted(SCORES)} or a callable, got {score!r}")
    if v.ndim < 2 or k.ndim < 2 or v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"expected one value per key: values (..., n_k, d_v) with n_k = {k.shape[-2] if k.ndim >= 2 else '?'} "
            f"as in keys {k.shape}, got values of shape {v.shape}"
        )
    if score == "additive" and "v_att" in score_params:
        score_params = dict(score_params)
        score_params["v"] = score_params.pop("v_att")
    _check_score_params(score, score_fn, q, k, score_params)
    scores = score_fn(q, k, **score_params)  # (..., n_q, n_k)
    weights = masked_softmax(scores, mask)  # (..., n_q, n_k), rows sum to 1 (or 0)
    try:
        output = weights @ v.astype(weights.dtype, copy=False)  # (..., n_q, d_v)
    except ValueError:
        raise ValueError(
            f"expected the batch dims of values {v.shape} to broadcast with the weights "
            f"{weights.shape} (from q {q.shape}, k {k.shape})"
        ) from None
    return output, weights


# ----------------------------------------------------------------------------------------
# hard attention and its gradients


def hard_attention(weights, values, rng=None):
    """Hard attention: each query takes exactly one value, eq. ``ch2-hard-attention``.

    weights: (..., n_q, n_k) attention weights (rows sum to 1, or 0 for an empty row)
    values:  (..., n_k, d_v)
    rng:     None -> ``index = argmax`` of each row (deterministic, ties go to the first);
             a ``numpy.random.Generator`` -> one sample per query from Categorical(row), by
             inverse-CDF sampling: ``u = rng.random(weights.shape[:-1])`` drawn once, then
             the first j whose cumulative weight exceeds ``u * row_sum`` (the grader relies on
             this exact recipe to reproduce a student's samples from the same seed).
    Returns ``(output, index)``: output (..., n_q, d_v) = ``values[..., index, :]`` and
    index (..., n_q) of ints. A row whose weights are all zero (a fully masked query) gets
    index -1 and a zero output, matching the soft convention.
    """
    weights, values = _as_float(weights, "weights"), _as_float(values, "values")
    if weights.ndim < 2 or values.ndim < 2 or values.shape[-2] != weights.shape[-1]:
        raise ValueError(
            f"expected weights (..., n_q, n_k) and values (..., n_k, d_v) with the same n_k, "
            f"got weights of shape {weights.shape} and values of shape {values.shape}"
        )
    if np.any(weights < 0):
        raise ValueError("expected non-negative weights (probabilities), got a negative entry")
    n_k = weights.shape[-1]
    total = weights.sum(axis=-1)  # (..., n_q)
    if rng is None:
        index = np.argmax(weights, axis=-1)  # (..., n_q)
    else:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"expected rng to be None or a numpy.random.Generator, got {type(rng).__name__}")
        # inverse-CDF sampling, one uniform per query: z = #{j : cdf_j <= u * total}
        cdf = np.cumsum(weights, axis=-1)  # (..., n_q, n_k)
        u = rng.random(weights.shape[:-1]) * total  # (..., n_q)
        index = np.sum(cdf <= u[..., None], axis=-1)  # (..., n_q)
        index = np.minimum(index, n_k - 1)  # guard against u * total rounding to total
    empty = total <= 0  # (..., n_q)
    index = np.where(empty, -1, index)
    onehot = (np.arange(n_k) == index[..., None]).astype(values.dtype)  # (..., n_q, n_k)
    output = onehot @ values  # (..., n_q, d_v); an empty row selects nothing -> zeros
    return output, index


def reinforce_grad(scores, index, reward, baseline=0.0) -> np.ndarray:
    """Score-function (REINFORCE) gradient estimate for a softmax policy, eq. ``ch2-baseline``.

    scores:   (..., n) logits of the policy ``p = softmax(scores)``
    index:    (...) the sampled choice z (ints in [0, n))
    reward:   scalar or (...) the reward R(z) obtained
    baseline: scalar or (...) b, any quantity independent of z (e.g. a running mean of R)
    Returns (..., n): ``(R - b) * d log p(z) / d scores = (R - b) * (onehot(z) - p)``.
    Averaged over z ~ p it is an unbiased estimate of ``d E[R] / d scores`` for any b.
    """
    scores = _as_float(scores, "scores")
    if scores.ndim == 0:
        raise ValueError("expected scores of shape (..., n), got a scalar")
    index = np.asarray(index)
    if not np.issubdtype(index.dtype, np.integer):
        raise TypeError(f"expected integer indices, got dtype {index.dtype}")
    if index.shape != scores.shape[:-1]:
        raise ValueError(
            f"expected one index per row of scores: index of shape {scores.shape[:-1]}, "
            f"got {index.shape} (scores have shape {scores.shape})"
        )
    n = scores.shape[-1]
    if np.any((index < 0) | (index >= n)):
        raise ValueError(f"expected indices in [0, {n}), got values from {index.min()} to {index.max()}")
    advantage = np.asarray(reward, dtype=scores.dtype) - np.asarray(baseline, dtype=scores.dtype)
    try:
        advantage = np.broadcast_to(advantage, index.shape)  # (...)
    except ValueError:
        raise ValueError(
            f"expected reward and baseline to be scalars or of shape {index.shape} (one per "
            f"row of scores {scores.shape}), got reward {np.shape(reward)}, baseline {np.shape(baseline)}"
        ) from None
    p = softmax(scores, axis=-1)  # (..., n)
    onehot = (np.arange(n) == index[..., None]).astype(scores.dtype)  # (..., n)
    return advantage[..., None] * (onehot - p)  # (..., n)


def reinforce_grad_samples(scores, reward_fn, n, rng, baseline=0.0) -> np.ndarray:
    """``n`` independent REINFORCE estimates for one categorical choice (baseline demo).

    scores:    (k,) logits of the policy ``p = softmax(scores)``
    reward_fn: maps an int array of choices (n,) to rewards (n,), e.g. ``lambda z: r[z]``
    n:         number of samples
    rng:       numpy.random.Generator
    baseline:  a float, or "mean" for the exact expected reward ``E_p[R]`` (the baseline
               a learned/running-mean baseline converges to; computed here by enumerating
               the k choices, so ``reward_fn`` must accept ``np.arange(k)``)
    Returns (n, k): row s is ``(R(z_s) - b) * (onehot(z_s) - p)``. Its mean over rows is
    an unbiased estimate of ``d E[R] / d scores``; compare the per-coordinate variance of
    ``baseline=0`` against ``baseline="mean"`` to see the variance reduction.
    """
    scores = _as_float(scores, "scores")
    if scores.ndim != 1:
        raise ValueError(f"expected scores of shape (k,), got {scores.shape}")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"expected a positive integer number of samples, got n={n!r}")
    p = softmax(scores)  # (k,)
    if isinstance(baseline, str):
        if baseline != "mean":
            raise ValueError(f"expected baseline to be a number or 'mean', got {baseline!r}")
        baseline = float(p @ np.asarray(reward_fn(np.arange(scores.shape[0])), dtype=np.float64))
    z = rng.choice(scores.shape[0], size=n, p=p / p.sum())  # (n,)
    reward = np.asarray(reward_fn(z), dtype=scores.dtype)  # (n,)
    if reward.shape != (n,):
        raise ValueError(f"expected reward_fn to return one reward per sample, shape ({n},), got {reward.shape}")
    return reinforce_grad(np.broadcast_to(scores, (n, scores.shape[0])), z, reward, baseline)  # (n, k)


def gumbel_softmax(scores, tau, rng, hard=False) -> np.ndarray:
    """Gumbel-softmax (concrete) relaxation of a categorical sample, eq. ``ch2-gumbel-softmax``.

    scores: (..., n) logits; ``-inf`` marks a choice that is never taken.
    tau:    temperature > 0; as tau -> 0 the sample approaches a one-hot vector.
    rng:    numpy.random.Generator for the Gumbel noise.
    hard:   if True return the one-hot ``argmax`` of the relaxed sample (in NumPy there is
            no straight-through gradient; this is the forward value of the ST estimator).
    Returns (..., n): rows sum to 1; ``argmax`` of a row is distributed as
    Categorical(softmax(scores)) for every tau (the Gumbel-max trick).
    """
    scores = _as_float(scores, "scores")
    if scores.ndim == 0:
        raise ValueError("expected scores of shape (..., n), got a scalar")
    if np.ndim(tau) != 0 or not tau > 0:
        raise ValueError(f"expected a positive scalar temperature tau, got {tau!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"expected rng to be a numpy.random.Generator, got {type(rng).__name__}")
    u = rng.random(scores.shape)  # (..., n) in [0, 1)
    tiny = np.finfo(np.float64).tiny
    g = -np.log(-np.log(np.clip(u, tiny, 1.0 - 1e-16))).astype(scores.dtype)  # Gumbel(0, 1)
    y = softmax((scores + g) / np.asarray(tau, dtype=scores.dtype), axis=-1)  # (..., n)
    if hard:
        y = (np.arange(scores.shape[-1]) == np.argmax(y, axis=-1)[..., None]).astype(scores.dtype)
    return y


# ========================================================================================
# PyTorch models trained in the chapter. Each ``train_*`` function is seeded, runs on one
# CPU thread in a few seconds, and returns ``(model, history)``; ``history`` is a dict of
# lists (one entry per logged step) that the book plots directly.

import torch  # noqa: E402  (the NumPy half above does not need torch)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

__all__ += [
    "make_marker_data",
    "HardAttentionClassifier",
    "SoftAttentionClassifier",
    "train_hard_attention",
    "train_soft_attention",
    "classifier_accuracy",
    "ASPECTS",
    "ASPECT_VOCAB",
    "make_aspect_data",
    "encode_sentence",
    "AspectSentimentModel",
    "train_aspect_model",
    "aspect_attention",
    "MEMORY_VOCAB",
    "make_memory_data",
    "MemoryNetwork",
    "train_memory_network",
    "memory_attention",
]


def _batches(n_train: int, batch_size: int, steps: int, seed: int):
    """Yield ``steps`` index tensors (batch_size,), walking through random permutations of
    ``range(n_train)`` epoch after epoch."""
    rng = np.random.default_rng(seed)
    order = np.empty(0, dtype=np.int64)
    for _ in range(steps):
        if len(order) < batch_size:
            order = np.concatenate([order, rng.permutation(n_train)])
        batch, order = order[:batch_size], order[batch_size:]
        yield torch.as_tensor(batch)


class _ThreadsAndSeed:
    """Run a block on one CPU thread with torch seeded; restore the thread count after."""

    def __init__(self, seed: int):
        self.seed = seed

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)
        torch.manual_seed(self.seed)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)


# ----------------------------------------------------------------------------------------
# 1. hard attention trained with REINFORCE, next to its soft twin
#
# The task: a sequence of n tokens, each a class c in [0, C) written either plainly (token c)
# or "marked" (token C + c). Exactly one position is marked; the label is its class. The
# other positions are distractors of random classes, so a model that looks at one random
# position is right with probability about 1/C (chance). Finding the marker is the job of
# the attention.


def make_marker_data(n: int, seed: int, seq_len: int = 10, num_classes: int = 4):
    """Synthetic "find the marked token" classification data.

    n: number of sequences; seed: for numpy's default_rng.
    Returns ``(tokens, labels, marker)``: tokens LongTensor (n, seq_len) with values in
    [0, 2 * num_classes) (token c: class c plain; token C + c: class c marked), labels
    LongTensor (n,) in [0, num_classes), marker LongTensor (n,) = the marked position.
    """
    if n < 1 or seq_len < 2 or num_classes < 2:
        raise ValueError(f"expected n >= 1, seq_len >= 2, num_classes >= 2, got {n}, {seq_len}, {num_classes}")
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, num_classes, size=(n, seq_len))  # (n, seq_len) distractors
    labels = rng.integers(0, num_classes, size=n)  # (n,)
    marker = rng.integers(0, seq_len, size=n)  # (n,)
    tokens[np.arange(n), marker] = num_classes + labels  # the marked token carries the label
    return torch.as_tensor(tokens), torch.as_tensor(labels), torch.as_tensor(marker)


class _MarkerClassifier(nn.Module):
    """What the hard classifier and its soft twin share: the two pathways of a glimpse network.

    "Where" (the scorer) sees the whole token, its class and whether it is marked; "what"
    (the value) sees only the class, so looking at the wrong place cannot be made up for by
    the classifier. The two models differ only in how the scores become a value to classify.
    """

    def __init__(self, vocab_size: int, num_classes: int, d_model: int = 32):
        super().__init__()
        self.num_classes = num_classes
        if vocab_size != 2 * num_classes:
            raise ValueError(
                f"expected vocab_size = 2 * num_classes = {2 * num_classes} (plain and marked tokens), got {vocab_size}"
            )
        self.class_embed = nn.Embedding(num_classes, d_model)  # what the token is
        self.flag_embed = nn.Embedding(2, d_model)  # plain (0) or marked (1)
        self.scorer = nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh(), nn.Linear(d_model, 1))
        self.value_embed = nn.Embedding(num_classes, d_model)
        self.classify = nn.Linear(d_model, num_classes)

    def keys(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, n) -> (B, n, d): class embedding + marked/plain embedding."""
        return self.class_embed(tokens % self.num_classes) + self.flag_embed(tokens // self.num_classes)

    def scores(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, n) -> scores s = MLP(keys) (B, n)."""
        return self.scorer(self.keys(tokens)).squeeze(-1)  # (B, n, d) -> (B, n)


class HardAttentionClassifier(_MarkerClassifier):
    """Look at ONE position, chosen by a learned policy, and classify from it alone.

    tokens (B, n) -> keys e = embed_class(c) + embed_flag(marked) (B, n, d) -> scores
    s = MLP(e) (B, n) -> policy
    softmax(s) -> position z (sampled in training, argmax at test) -> value
    embed_class(token_z mod C) (B, d) -> logits (B, C).
    The choice z is not differentiable: the scorer is trained with REINFORCE, eq. ``ch2-baseline``.
    """

    def forward(self, tokens: torch.Tensor, sample: bool = False):
        """tokens (B, n) -> (logits (B, C), index (B,), log_prob (B,), weights (B, n)).

        ``weights`` is the policy softmax(s); ``log_prob`` is log p(index), the quantity
        REINFORCE differentiates. ``sample=False`` takes the argmax position.
        """
        s = self.scores(tokens)  # (B, n)
        log_p = F.log_softmax(s, dim=-1)  # (B, n)
        if sample:
            index = torch.distributions.Categorical(logits=s).sample()  # (B,)
        else:
            index = s.argmax(dim=-1)  # (B,)
        rows = torch.arange(tokens.shape[0])
        glimpse = self.value_embed(tokens[rows, index] % self.num_classes)  # (B, d): the one value let through
        return self.classify(glimpse), index, log_p[rows, index], log_p.exp()


class SoftAttentionClassifier(_MarkerClassifier):
    """The soft twin: the same two pathways, but classify from the weighted average of all
    the values instead of one of them.

    tokens (B, n) -> weights softmax(MLP(keys)) (B, n), keys as in the hard model -> context
    sum_j a_j embed_class(token_j mod C) (B, d) -> logits (B, C). Trained by backpropagation.
    """

    def forward(self, tokens: torch.Tensor):
        """tokens (B, n) -> (logits (B, C), weights (B, n))."""
        weights = torch.softmax(self.scores(tokens), dim=-1)  # (B, n)
        values = self.value_embed(tokens % self.num_classes)  # (B, n, d)
        context = (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, n) @ (B, n, d) -> (B, d)
        return self.classify(context), weights


@torch.no_grad()
def classifier_accuracy(model: nn.Module, tokens: torch.Tensor, labels: torch.Tensor) -> float:
    """Accuracy of a marker classifier (hard: argmax position, no sampling) on (tokens, labels)."""
    model.eval()
    logits = model(tokens)[0]  # (N, C)
    model.train()
    return float((logits.argmax(-1) == labels).float().mean())


def train_hard_attention(
    baseline: str = "running",
    seed: int = 0,
    steps: int = 400,
    batch_size: int = 64,
    lr: float = 0.01,
    seq_len: int = 10,
    num_classes: int = 4,
    d_model: int = 32,
    momentum: float = 0.9,
    entropy_bonus: float = 0.0,
    reward_kind: str = "log_likelihood",
    log_every: int = 20,
):
    """Train ``HardAttentionClassifier`` on the marker task with REINFORCE.

    baseline: "running" (b = exponential moving average of the reward, factor ``momentum``)
        or "none" (b = 0), to show what a baseline does to learning.
    reward_kind: "log_likelihood" (default, as in Xu et al. 2015): R = log p(label | glimpse)
        from the classifier, always negative, so without a baseline every sampled position
        is pushed down and learning often stalls at chance; "accuracy": R = 1 if the
        classifier, looking only at the sampled position, is right, else 0.
    entropy_bonus: weight of the policy entropy added to the objective (0 = plain REINFORCE).
    Loss per batch: cross-entropy of the classifier on the glimpse (differentiable) plus the
    REINFORCE surrogate ``-(R - b) log p(z)``, eq. ``ch2-baseline``; b never depends on z.
    Returns ``(model, history)``; history has lists "step", "reward" (mean batch reward),
    "baseline", "accuracy" (held-out, argmax position), "hit_rate" (fraction of held-out
    sequences whose argmax position IS the marker), each logged every ``log_every`` steps,
    plus "chance" = 1 / num_classes. With seq_len=40, num_classes=8, steps=300 the
    baseline matters: seeds 0-3 all learn with "running", two of four stall with "none".
    """
    if baseline not in ("running", "none"):
        raise ValueError(f"expected baseline 'running' or 'none', got {baseline!r}")
    if reward_kind not in ("log_likelihood", "accuracy"):
        raise ValueError(f"expected reward_kind 'log_likelihood' or 'accuracy', got {reward_kind!r}")
    with _ThreadsAndSeed(seed):
        tokens, labels, _ = make_marker_data(steps * batch_size, seed, seq_len, num_classes)
        test_tokens, test_labels, test_marker = make_marker_data(1000, seed + 10_000, seq_len, num_classes)
        model = HardAttentionClassifier(2 * num_classes, num_classes, d_model)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        b = 0.0
        history = {"step": [], "reward": [], "baseline": [], "accuracy": [], "hit_rate": [], "chance": 1.0 / num_classes}
        for step in range(steps):
            batch = slice(step * batch_size, (step + 1) * batch_size)
            x, y = tokens[batch], labels[batch]  # (B, n), (B,)
            logits, index, log_prob, policy = model(x, sample=True)
            if reward_kind == "log_likelihood":  # Xu et al. (2015): log p(label | glimpse)
                reward = -F.cross_entropy(logits.detach(), y, reduction="none")  # (B,)
            else:
                reward = (logits.argmax(-1) == y).float()  # (B,)
            advantage = reward - b  # (B,); b does not depend on z, so the estimate stays unbiased
            entropy = -(policy * torch.log(policy.clamp_min(1e-12))).sum(-1).mean()  # keeps exploring
            loss = F.cross_entropy(logits, y) - (advantage * log_prob).mean() - entropy_bonus * entropy
            opt.zero_grad()
            loss.backward()
            opt.step()
            if baseline == "running":
                b = momentum * b + (1 - momentum) * float(reward.mean())
            if step % log_every == 0 or step == steps - 1:
                with torch.no_grad():
                    model.eval()
                    test_logits, test_index, _, _ = model(test_tokens)
                    model.train()
                history["step"].append(step)
                history["reward"].append(float(reward.mean()))
                history["baseline"].append(b)
                history["accuracy"].append(float((test_logits.argmax(-1) == test_labels).float().mean()))
                history["hit_rate"].append(float((test_index == test_marker).float().mean()))
    return model, history


def train_soft_attention(
    seed: int = 0,
    steps: int = 400,
    batch_size: int = 64,
    lr: float = 0.01,
    seq_len: int = 10,
    num_classes: int = 4,
    d_model: int = 32,
    log_every: int = 20,
):
    """Train ``SoftAttentionClassifier`` (the soft twin) on the same marker task by backprop.

    Returns ``(model, history)``; history has lists "step", "loss", "accuracy" (held-out),
    "marker_weight" (mean held-out weight on the marker position), logged every
    ``log_every`` steps, plus "chance" = 1 / num_classes.
    """
    with _ThreadsAndSeed(seed):
        tokens, labels, _ = make_marker_data(steps * batch_size, seed, seq_len, num_classes)
        test_tokens, test_labels, test_marker = make_marker_data(1000, seed + 10_000, seq_len, num_classes)
        model = SoftAttentionClassifier(2 * num_classes, num_classes, d_model)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        history = {"step": [], "loss": [], "accuracy": [], "marker_weight": [], "chance": 1.0 / num_classes}
        for step in range(steps):
            batch = slice(step * batch_size, (step + 1) * batch_size)
            logits, _ = model(tokens[batch])
            loss = F.cross_entropy(logits, labels[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % log_every == 0 or step == steps - 1:
                with torch.no_grad():
                    test_logits, test_weights = model(test_tokens)
                history["step"].append(step)
                history["loss"].append(loss.item())
                history["accuracy"].append(float((test_logits.argmax(-1) == test_labels).float().mean()))
                history["marker_weight"].append(float(test_weights[torch.arange(1000), test_marker].mean()))
    return model, history


# ----------------------------------------------------------------------------------------
# 2. query-dependent attention: aspect sentiment
#
# Reviews like "the food is good but the service is bad". The query is the aspect; the
# label is the sentiment of that aspect's adjective. Each word is encoded with the two words
# before it (a causal window of 3), so only the adjective's encoding knows both the aspect
# and the sentiment: the weights must move to the adjective of the aspect asked about.

ASPECTS = ("food", "service", "price", "ambience")
_POSITIVE = ("good", "great", "excellent", "lovely", "fine")
_NEGATIVE = ("bad", "awful", "terrible", "poor", "slow")
_CONNECTORS = ("but", "and", "while")
ASPECT_VOCAB = ("<pad>", "the", "is", "was", ",") + ASPECTS + _POSITIVE + _NEGATIVE + _CONNECTORS
_ASPECT_INDEX = {w: i for i, w in enumerate(ASPECT_VOCAB)}


def encode_sentence(sentence: str, length: int | None = None) -> torch.Tensor:
    """Lower-case, split on spaces, map words to ``ASPECT_VOCAB`` ids; pad with 0 to ``length``.

    Returns LongTensor (length,) (or (n_words,) when length is None).
    """
    words = sentence.lower().replace(",", " , ").split()
    unknown = [w for w in words if w not in _ASPECT_INDEX]
    if unknown:
        raise ValueError(f"unknown words {unknown} in {sentence!r}: the model knows only {list(ASPECT_VOCAB[1:])}")
    if length is not None and len(words) > length:
        raise ValueError(f"sentence has {len(words)} words, more than length={length}")
    ids = [_ASPECT_INDEX[w] for w in words] + [0] * ((length or len(words)) - len(words))
    return torch.tensor(ids, dtype=torch.long)


def make_aspect_data(n: int, seed: int):
    """Synthetic reviews with 2 or 3 aspects, each with its own sentiment, and one question.

    Returns a dict: "sentences" list[str] (n), "tokens" LongTensor (n, L) (0 = padding),
    "aspect" LongTensor (n,) (index into ``ASPECTS``: the aspect asked about), "label"
    LongTensor (n,) (1 = positive, 0 = negative, for that aspect), "adjective" LongTensor (n,)
    (position of that aspect's adjective: where the attention should look).
    """
    rng = np.random.default_rng(seed)
    sentences, aspect, label, adjective = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(2, 4))
        chosen = rng.choice(len(ASPECTS), size=k, replace=False)
        polarity = rng.integers(0, 2, size=k)
        verb = ("is", "was")[int(rng.integers(0, 2))]
        words, adj_pos = [], []
        for i, (a, pol) in enumerate(zip(chosen, polarity)):
            if i > 0:
                words.append("," if (i < k - 1) else str(rng.choice(_CONNECTORS)))
            adj = str(rng.choice(_POSITIVE if pol else _NEGATIVE))
            words += ["the", ASPECTS[a], verb, adj]
            adj_pos.append(len(words) - 1)
        q = int(rng.integers(0, k))
        sentences.append(" ".join(words))
        aspect.append(int(chosen[q]))
        label.append(int(polarity[q]))
        adjective.append(adj_pos[q])
    length = max(len(s.split()) for s in sentences)
    tokens = torch.stack([encode_sentence(s, length) for s in sentences])  # (n, L)
    return {
        "sentences": sentences,
        "tokens": tokens,
        "aspect": torch.tensor(aspect),
        "label": torch.tensor(label),
        "adjective": torch.tensor(adjective),
    }


class AspectSentimentModel(nn.Module):
    """Aspect-conditioned attention over words, then a sentiment classifier.

    tokens (B, L), aspect (B,) -> word encodings h = tanh(conv3(embed)) (B, L, d) (each word
    sees itself and the two words before it) -> query q = aspect embedding (B, d) ->
    scaled dot scores h q / sqrt(d) (B, L), padding masked -> weights (B, L) ->
    context sum_j a_j h_j (B, d) -> logits (B, 2).
    """

    def __init__(self, vocab_size: int = len(ASPECT_VOCAB), num_aspects: int = len(ASPECTS), d_model: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.window = nn.Conv1d(d_model, d_model, kernel_size=3)
        self.query = nn.Embedding(num_aspects, d_model)
        self.classify = nn.Linear(d_model, 2)

    def forward(self, tokens: torch.Tensor, aspect: torch.Tensor):
        """tokens (B, L), aspect (B,) -> (logits (B, 2), weights (B, L))."""
        e = self.embed(tokens).transpose(1, 2)  # (B, d, L)
        h = torch.tanh(self.window(F.pad(e, (2, 0)))).transpose(1, 2)  # (B, L, d), causal window
        q = self.query(aspect)  # (B, d)
        scores = (h @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(h.shape[-1])  # (B, L)
        scores = scores.masked_fill(tokens == 0, float("-inf"))  # padding never attended
        weights = torch.softmax(scores, dim=-1)  # (B, L)
        context = (weights.unsqueeze(1) @ h).squeeze(1)  # (B, d)
        return self.classify(context), weights


def train_aspect_model(
    seed: int = 0, steps: int = 300, batch_size: int = 64, lr: float = 0.01, train_size: int = 4000, log_every: int = 10
):
    """Train ``AspectSentimentModel`` on ``train_size`` reviews from ``make_aspect_data``.

    Returns ``(model, history)``; history has lists "step", "loss", "accuracy" (held-out
    sentiment accuracy), "adjective_weight" (mean held-out weight on the queried aspect's
    adjective), logged every ``log_every`` steps, plus "chance" = 0.5.
    """
    with _ThreadsAndSeed(seed):
        data = make_aspect_data(train_size, seed)
        test = make_aspect_data(1000, seed + 10_000)
        model = AspectSentimentModel()
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        history = {"step": [], "loss": [], "accuracy": [], "adjective_weight": [], "chance": 0.5}
        for step, batch in enumerate(_batches(train_size, batch_size, steps, seed)):
            logits, _ = model(data["tokens"][batch], data["aspect"][batch])
            loss = F.cross_entropy(logits, data["label"][batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % log_every == 0 or step == steps - 1:
                with torch.no_grad():
                    test_logits, test_weights = model(test["tokens"], test["aspect"])
                history["step"].append(step)
                history["loss"].append(loss.item())
                history["accuracy"].append(float((test_logits.argmax(-1) == test["label"]).float().mean()))
                history["adjective_weight"].append(float(test_weights[torch.arange(1000), test["adjective"]].mean()))
    return model, history


@torch.no_grad()
def aspect_attention(model: AspectSentimentModel, sentence: str, aspect: str):
    """Where the model looks in ``sentence`` when asked about ``aspect``.

    sentence: words from ``ASPECT_VOCAB``, e.g. "the food is good but the service is bad"
    aspect:   one of ``ASPECTS``
    Returns ``(words, weights, p_positive)``: the list of n words, a NumPy array (n,) of
    attention weights over them (summing to 1), and the predicted probability that the
    sentiment about ``aspect`` is positive.
    """
    if aspect not in ASPECTS:
        raise ValueError(f"unknown aspect {aspect!r}: expected one of {ASPECTS}")
    tokens = encode_sentence(sentence).unsqueeze(0)  # (1, n)
    logits, weights = model(tokens, torch.tensor([ASPECTS.index(aspect)]))  # (1, 2), (1, n)
    words = sentence.lower().replace(",", " , ").split()
    return words, weights[0].double().numpy(), float(torch.softmax(logits[0], -1)[1])


# ----------------------------------------------------------------------------------------
# 3. multi-hop attention: an end-to-end memory network (Sukhbaatar et al., 2015)
#
# A story of short sentences ("mary is in the kitchen", "mary has the apple", ...) and a
# question "where is the apple". No single sentence answers it: hop 1 must find who has the
# apple, hop 2 (whose query now carries "mary") must find where mary is.

_PEOPLE = ("mary", "john", "sandra", "daniel")
_OBJECTS = ("apple", "football", "milk", "book")
LOCATIONS = ("kitchen", "garden", "office", "hallway", "bedroom")
MEMORY_VOCAB = ("<pad>", "is", "in", "the", "has", "where") + _PEOPLE + _OBJECTS + LOCATIONS
_MEMORY_INDEX = {w: i for i, w in enumerate(MEMORY_VOCAB)}
_SENTENCE_WORDS = 5  # the longest sentence, "mary is in the kitchen"
__all__ += ["LOCATIONS"]


def _encode_memory_words(text: str, length: int = _SENTENCE_WORDS) -> list[int]:
    words = text.lower().replace("?", "").split()
    unknown = [w for w in words if w not in _MEMORY_INDEX]
    if unknown:
        raise ValueError(f"unknown words {unknown} in {text!r}: the model knows only {list(MEMORY_VOCAB[1:])}")
    if len(words) > length:
        raise ValueError(f"{text!r} has {len(words)} words, more than {length}")
    return [_MEMORY_INDEX[w] for w in words] + [0] * (length - len(words))


def make_memory_data(n: int, seed: int, num_people: int = 3, num_objects: int = 2):
    """Two-supporting-fact stories: who has the object, and where that person is.

    Each story has ``num_people`` sentences "P is in the L" and ``num_objects`` sentences
    "P has the O", shuffled; the question is "where is the O" for one object.
    Returns a dict: "stories" list of lists of sentences, "questions" list[str],
    "memory" LongTensor (n, S, W) word ids (S = num_people + num_objects sentences of
    W = 5 words, 0 = padding), "query" LongTensor (n, W), "answer" LongTensor (n,) (index
    into ``LOCATIONS``), "support" LongTensor (n, 2): the index of the sentence "P has the
    O" (what hop 1 should find) and of "P is in the L" (what hop 2 should find).
    """
    if not (1 <= num_people <= len(_PEOPLE) and 1 <= num_objects <= len(_OBJECTS)):
        raise ValueError(f"expected 1..{len(_PEOPLE)} people and 1..{len(_OBJECTS)} objects, got {num_people}, {num_objects}")
    rng = np.random.default_rng(seed)
    stories, questions, memory, query, answer, support = [], [], [], [], [], []
    for _ in range(n):
        people = rng.choice(len(_PEOPLE), size=num_people, replace=False)
        places = rng.integers(0, len(LOCATIONS), size=num_people)
        objects = rng.choice(len(_OBJECTS), size=num_objects, replace=False)
        holders = rng.integers(0, num_people, size=num_objects)  # index into people
        sentences = [f"{_PEOPLE[p]} is in the {LOCATIONS[l]}" for p, l in zip(people, places)]
        sentences += [f"{_PEOPLE[people[h]]} has the {_OBJECTS[o]}" for o, h in zip(objects, holders)]
        order = rng.permutation(len(sentences))  # order[new] = old
        position = np.argsort(order)  # position[old] = new
        q = int(rng.integers(0, num_objects))
        stories.append([sentences[i] for i in order])
        questions.append(f"where is the {_OBJECTS[objects[q]]}")
        memory.append([_encode_memory_words(sentences[i]) for i in order])
        query.append(_encode_memory_words(questions[-1]))
        answer.append(int(places[holders[q]]))
        support.append([int(position[num_people + q]), int(position[holders[q]])])
    return {
        "stories": stories,
        "questions": questions,
        "memory": torch.tensor(memory),
        "query": torch.tensor(query),
        "answer": torch.tensor(answer),
        "support": torch.tensor(support),
    }


class MemoryNetwork(nn.Module):
    """End-to-end memory network with ``hops`` rounds of attention over the sentences, eq. ``ch2-memory-hop``.

    memory (B, S, W), query (B, W) word ids. Embeddings E_0, ..., E_hops (each (V, d)) are
    shared between adjacent hops, as in the paper: hop k uses keys A_k = E_{k-1} and values
    C_k = E_k, and the question is embedded with B = E_0.
    u_0 = sum of the question's word embeddings (B, d). Hop k: keys m_s = sum of the words
    of sentence s under A_k (B, S, d), values c_s under C_k (B, S, d); weights
    p = softmax(m u_{k-1}) (B, S); u_k = u_{k-1} + sum_s p_s c_s (B, d).
    Answer logits = W u_hops (B, num_answers). Padding words embed to 0.
    """

    def __init__(self, vocab_size: int = len(MEMORY_VOCAB), num_answers: int = len(LOCATIONS), d_model: int = 32, hops: int = 2):
        super().__init__()
        self.embeds = nn.ModuleList(nn.Embedding(vocab_size, d_model, padding_idx=0) for _ in range(hops + 1))
        self.answer = nn.Linear(d_model, num_answers)
        # small embeddings (std 0.1, as in the paper): with N(0, 1) the first scores are so
        # large that the softmax saturates on a random sentence and training stalls
        for embed in self.embeds:
            nn.init.normal_(embed.weight, std=0.1)
            with torch.no_grad():
                embed.weight[0].zero_()

    def forward(self, memory: torch.Tensor, query: torch.Tensor):
        """memory (B, S, W), query (B, W) -> (logits (B, num_answers), weights (B, hops, S))."""
        u = self.embeds[0](query).sum(dim=1)  # (B, W, d) -> (B, d)
        hop_weights = []
        for key_embed, value_embed in zip(self.embeds[:-1], self.embeds[1:]):
            m = key_embed(memory).sum(dim=2)  # (B, S, W, d) -> (B, S, d)
            c = value_embed(memory).sum(dim=2)  # (B, S, d)
            p = torch.softmax((m @ u.unsqueeze(-1)).squeeze(-1), dim=-1)  # (B, S)
            u = u + (p.unsqueeze(1) @ c).squeeze(1)  # (B, d)
            hop_weights.append(p)
        return self.answer(u), torch.stack(hop_weights, dim=1)  # (B, A), (B, hops, S)


def train_memory_network(
    seed: int = 0,
    steps: int = 600,
    batch_size: int = 64,
    lr: float = 0.01,
    hops: int = 2,
    train_size: int = 4000,
    log_every: int = 50,
):
    """Train ``MemoryNetwork`` on ``train_size`` stories from ``make_memory_data``.

    Returns ``(model, history)``; history has lists "step", "loss", "accuracy" (held-out
    answer accuracy) and "support_weight" (list of ``hops`` numbers per log: the mean
    held-out weight of hop 1 on the "has" sentence and of hop 2 on the location sentence;
    only the first two hops have a designated supporting fact), plus "chance" =
    1 / len(LOCATIONS).
    """
    with _ThreadsAndSeed(seed):
        data = make_memory_data(train_size, seed)
        test = make_memory_data(1000, seed + 10_000)
        model = MemoryNetwork(hops=hops)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        history = {"step": [], "loss": [], "accuracy": [], "support_weight": [], "chance": 1.0 / len(LOCATIONS)}
        rows = torch.arange(1000)
        for step, batch in enumerate(_batches(train_size, batch_size, steps, seed)):
            logits, _ = model(data["memory"][batch], data["query"][batch])
            loss = F.cross_entropy(logits, data["answer"][batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % log_every == 0 or step == steps - 1:
                with torch.no_grad():
                    test_logits, test_weights = model(test["memory"], test["query"])  # (N, A), (N, hops, S)
                history["step"].append(step)
                history["loss"].append(loss.item())
                history["accuracy"].append(float((test_logits.argmax(-1) == test["answer"]).float().mean()))
                history["support_weight"].append(
                    [float(test_weights[rows, k, test["support"][:, k]].mean()) for k in range(min(hops, 2))]
                )
    return model, history


@torch.no_grad()
def memory_attention(model: MemoryNetwork, story: list[str], question: str):
    """Per-hop attention of a trained ``MemoryNetwork`` on one story.

    story: list of S sentences from ``MEMORY_VOCAB`` words, e.g. ["mary has the apple", ...]
    question: e.g. "where is the apple"
    Returns ``(weights, answer)``: NumPy array (hops, S) of weights over the sentences (each
    row sums to 1) and the predicted location (a string from ``LOCATIONS``).
    """
    memory = torch.tensor([[_encode_memory_words(s) for s in story]])  # (1, S, W)
    query = torch.tensor([_encode_memory_words(question)])  # (1, W)
    logits, weights = model(memory, query)  # (1, A), (1, hops, S)
    return weights[0].double().numpy(), LOCATIONS[int(logits.argmax())]
