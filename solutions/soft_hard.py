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

Conventions (``shared/DESIGN.md``): queries are rows; ``q`` is ``(..., n_q, d)``, ``k`` is
``(..., n_k, d)``, ``v`` is ``(..., n_k, d_v)``; weights are ``(..., n_q, n_k)`` with rows
summing to 1. Masks are boolean, broadcastable to ``(..., n_q, n_k)``, True = "may attend".
NumPy functions keep the floating dtype of their input (float32 stays float32).

Equation numbers refer to the chapter:

- (2.1) ``softmax(s)_j = exp(s_j - max s) / sum_l exp(s_l - max s)``
- (2.2) masked softmax: ``s_j -> -inf`` where the mask is False; empty rows give 0
- (2.3) dot ``q.k``; (2.4) scaled dot ``q.k / sqrt(d)``; (2.5) general ``q W k``;
  (2.6) additive ``v . tanh(q W_q + k W_k)``; (2.7) cosine ``q.k / (|q| |k|)``
- (2.8) soft attention ``o_i = sum_j a_ij v_j`` with ``a_i = softmax(score(q_i, K))``
- (2.9) hard attention ``o_i = v_{z_i}``, ``z_i ~ Categorical(a_i)`` (or ``argmax a_i``)
- (2.10) REINFORCE ``grad_s E[R] = E[(R - b) grad_s log p(z)]``, with
  ``grad_s log p(z) = onehot(z) - softmax(s)``
- (2.11) Gumbel-softmax ``y = softmax((s + g) / tau)``, ``g = -log(-log u)``, ``u ~ U(0, 1)``
"""

from __future__ import annotations

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
    """Max-shifted softmax along ``axis``, eq. (2.1).

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
    e = np.exp(scores - m)  # in (0, 1]: no overflow
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0).astype(scores.dtype, copy=False)


def masked_softmax(scores, mask=None) -> np.ndarray:
    """Softmax over the last axis that gives masked-out keys exactly zero weight, eq. (2.2).

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
    neg_inf = np.asarray(-np.inf, dtype=scores.dtype)
    m = np.max(np.where(mask, scores, neg_inf), axis=-1, keepdims=True)  # (..., n_q, 1)
    m = np.where(np.isfinite(m), m, 0.0).astype(scores.dtype, copy=False)  # empty row: shift 0
    e = np.exp(np.where(mask, scores - m, neg_inf))  # (..., n_q, n_k), 0 where masked
    total = np.sum(e, axis=-1, keepdims=True)  # (..., n_q, 1)
    return e / np.where(total > 0, total, 1.0).astype(scores.dtype, copy=False)


# ----------------------------------------------------------------------------------------
# score functions: all map q (..., n_q, d_q), k (..., n_k, d_k) to (..., n_q, n_k)


def dot_score(q, k) -> np.ndarray:
    """Dot-product score ``s_ij = q_i . k_j``, eq. (2.3).

    q: (..., n_q, d), k: (..., n_k, d)  ->  scores (..., n_q, n_k).
    """
    q, k = _as_float(q, "q"), _as_float(k, "k")
    _check_qk(q, k, q.shape[-1])
    return q @ np.swapaxes(k, -1, -2)  # (..., n_q, d) @ (..., d, n_k) -> (..., n_q, n_k)


def scaled_dot_score(q, k) -> np.ndarray:
    """Scaled dot-product score ``s_ij = q_i . k_j / sqrt(d)``, eq. (2.4).

    q: (..., n_q, d), k: (..., n_k, d)  ->  scores (..., n_q, n_k).
    Dividing by sqrt(d) keeps the score variance near 1 for unit-variance q, k.
    """
    q, k = _as_float(q, "q"), _as_float(k, "k")
    _check_qk(q, k, q.shape[-1])
    # scale q (n_q * d numbers) rather than the scores (n_q * n_k numbers)
    q = q * np.asarray(1.0 / math.sqrt(q.shape[-1]), dtype=q.dtype)
    return q @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)


def general_score(q, k, w) -> np.ndarray:
    """Bilinear ("general", Luong) score ``s_ij = q_i W k_j``, eq. (2.5).

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
    """Additive (Bahdanau) score ``s_ij = v . tanh(q_i W_q + k_j W_k)``, eq. (2.6).

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
    """Cosine-similarity score ``s_ij = q_i . k_j / (|q_i| |k_j|)``, eq. (2.7).

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


def attention(q, k, v, mask=None, score="scaled_dot", **score_params):
    """Soft attention ``o_i = sum_j softmax(score(q_i, K))_j v_j``, eq. (2.8).

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
    """Hard attention: each query takes exactly one value, eq. (2.9).

    weights: (..., n_q, n_k) attention weights (rows sum to 1, or 0 for an empty row)
    values:  (..., n_k, d_v)
    rng:     None -> ``index = argmax`` of each row (deterministic, ties go to the first);
             a ``numpy.random.Generator`` -> one sample per query from Categorical(row).
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
    """Score-function (REINFORCE) gradient estimate for a softmax policy, eq. (2.10).

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
    """Gumbel-softmax (concrete) relaxation of a categorical sample, eq. (2.11).

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
    if not np.isscalar(tau) or not tau > 0:
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
