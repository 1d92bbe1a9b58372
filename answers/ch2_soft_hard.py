"""Answer key of assignment 2 (``ch2_soft_hard``): the next steps after soft and hard attention.

The chapter (``book/ch2_soft_hard.ipynb``) shows the masked softmax, soft attention and hard
attention forward, and derives the softmax's Jacobian, d alpha_j / d S_l = alpha_j (delta_jl -
alpha_l), and the REINFORCE score d log p_z / d s_j = delta_zj - p_j. The assignment asks for
what it does not compute:

- ``softmax_backward``: the vector-Jacobian product of the (masked) softmax;
- ``attention_backward``: dQ, dK, dV of scaled dot-product attention with a mask;
- ``sparsemax``: the Euclidean projection of each row of scores onto the probability simplex
  (Martins & Astudillo, 2016), a softmax with exact zeros;
- ``sparsemax_backward``: its vector-Jacobian product.

Conventions (``docs/conventions.md``): queries are rows, weights are (..., n_q, n_k) with rows
summing to 1 over the allowed keys; masks are boolean, True = may attend, broadcastable to
(..., n_q, n_k); a row with no allowed key has all-zero weights, a zero output and passes no
gradient. Equation numbers (1)-(7) are those of the assignment's task text.
"""

from __future__ import annotations

import math

import numpy as np

from solutions.conventions import masked_softmax

__all__ = ["softmax_backward", "attention_backward", "sparsemax", "sparsemax_backward"]


def softmax_backward(weights, grad_weights):
    """The gradient of a loss with respect to the scores, given its gradient with respect to
    the softmax weights: dS_ij = P_ij (dP_ij - sum_l P_il dP_il), eq. (1).

    weights:      (..., n_q, n_k) P = masked_softmax(S), rows summing to 1 (or all 0)
    grad_weights: (..., n_q, n_k) dP = dL/dP
    Returns dS (..., n_q, n_k) = dL/dS. From dP_i/dS_j = P_i (delta_ij - P_j): a masked key
    (P = 0) and a fully masked row get exactly 0.
    """
    p = np.asarray(weights, dtype=float)
    dp = np.asarray(grad_weights, dtype=float)
    inner = np.sum(p * dp, axis=-1, keepdims=True)  # (..., n_q, 1): sum_l P_il dP_il
    return p * (dp - inner)  # (..., n_q, n_k), eq. (1)


def _sum_to(x, shape):
    """``x`` summed over the leading axes that broadcasting added or stretched, to ``shape``:
    the gradient of an input that was broadcast is the sum over its copies."""
    extra = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(extra))) if extra > 0 else x
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(axis=stretched, keepdims=True) if stretched else x


def attention_backward(q, k, v, grad_out, mask=None):
    """dQ, dK, dV of scaled dot-product attention O = softmax(Q K^T / sqrt(d), mask) V.

    q:        (..., n_q, d) queries
    k:        (..., n_k, d) keys
    v:        (..., n_k, d_v) values
    grad_out: (..., n_q, d_v) dO = dL/dO
    mask:     boolean, broadcastable to (..., n_q, n_k), True = may attend; None = all
    The leading (batch) axes of q, k, v broadcast against each other.
    Returns (dq, dk, dv), each of the shape of its input (summed over the batch axes it was
    broadcast along):
      dV = P^T dO (2),  dP = dO V^T (3),  dS = softmax_backward(P, dP) (1),
      dQ = dS K / sqrt(d) (4),  dK = dS^T Q / sqrt(d) (5).
    """
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    d_out = np.asarray(grad_out, dtype=float)
    scale = 1.0 / math.sqrt(q.shape[-1])
    kt = np.swapaxes(k, -1, -2)  # (..., d, n_k)
    p = masked_softmax(q @ kt * scale, mask)  # (..., n_q, n_k), the forward's weights
    pt = np.swapaxes(p, -1, -2)  # (..., n_k, n_q)
    dv = pt @ d_out  # (..., n_k, d_v), eq. (2)
    dp = d_out @ np.swapaxes(v, -1, -2)  # (..., n_q, n_k), eq. (3)
    ds = softmax_backward(p, dp)  # (..., n_q, n_k), eq. (1)
    dq = ds @ k * scale  # (..., n_q, d), eq. (4)
    dk = np.swapaxes(ds, -1, -2) @ q * scale  # (..., n_k, d), eq. (5)
    return _sum_to(dq, q.shape), _sum_to(dk, k.shape), _sum_to(dv, v.shape)


def sparsemax(scores, mask=None):
    """Sparsemax over the last axis: the point of the probability simplex nearest to each
    row of scores (Martins & Astudillo, 2016), p_i = max(z_i - tau, 0), eq. (6).

    scores: (..., n_q, n_k) real array
    mask:   boolean, broadcastable to (..., n_q, n_k), True = may attend; None = all
    Returns weights (..., n_q, n_k): rows sum to 1 over the allowed keys, with exact zeros;
    masked keys get 0 and a row with no allowed key is all zeros.
    With z sorted in decreasing order, the support size is
    k = max{j : 1 + j z_(j) > z_(1) + ... + z_(j)} and tau = (z_(1) + ... + z_(k) - 1) / k.
    """
    z = np.asarray(scores, dtype=float)
    allowed = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask, z.shape)
    z = np.where(allowed, z, -np.inf)  # a masked key never enters the support
    z_sorted = -np.sort(-z, axis=-1)  # (..., n_q, n_k), decreasing
    j = np.arange(1, z.shape[-1] + 1)  # (n_k,): 1, 2, ..., n_k
    with np.errstate(invalid="ignore"):  # -inf - -inf in a fully masked row
        cumsum = np.cumsum(z_sorted, axis=-1)  # (..., n_q, n_k)
        in_support = 1 + j * z_sorted > cumsum  # (..., n_q, n_k), true for j <= k
    k = in_support.sum(axis=-1, keepdims=True)  # (..., n_q, 1), 0 for a fully masked row
    top_k = np.take_along_axis(cumsum, np.maximum(k - 1, 0), axis=-1)  # (..., n_q, 1)
    tau = np.where(k > 0, top_k - 1, 0.0) / np.maximum(k, 1)  # (..., n_q, 1); 0 if k = 0
    return np.where(allowed, np.maximum(z - tau, 0.0), 0.0)  # (..., n_q, n_k)


def sparsemax_backward(weights, grad_weights):
    """The gradient with respect to the scores of sparsemax, given the gradient with respect
    to its weights: on the support S = {j : P_j > 0} of each row,
    dS_i = dP_i - (1/|S|) sum_{j in S} dP_j, and 0 off the support, eq. (7).

    weights:      (..., n_q, n_k) P = sparsemax(z), rows summing to 1 (or all 0)
    grad_weights: (..., n_q, n_k) dP = dL/dP
    Returns dS (..., n_q, n_k). A row with no support (fully masked) gets 0.
    """
    p = np.asarray(weights, dtype=float)
    dp = np.asarray(grad_weights, dtype=float)
    support = p > 0  # (..., n_q, n_k)
    size = support.sum(axis=-1, keepdims=True)  # (..., n_q, 1): |S|
    mean = np.sum(np.where(support, dp, 0.0), axis=-1, keepdims=True) / np.maximum(size, 1)
    return np.where(support, dp - mean, 0.0)  # (..., n_q, n_k), eq. (7)
