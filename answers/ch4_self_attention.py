"""Answer key of assignment ``ch4_self_attention``: the next steps of chapter 4.

The chapter (``book/ch4_self_attention.ipynb``) builds self-attention, the causal, padding
and local masks, sinusoidal and rotary positions, and the online-softmax forward pass. The
assignment asks for what it names or derives but does not build:

- ``window_global_mask``: Longformer's sliding window with global tokens (Beltagy et al.
  2020), the band ``|i - j| <= window`` of {eq}`ch4-local` widened by rows AND columns of
  global positions.
- ``alibi_slopes`` and ``alibi_attention``: ALiBi (Press et al. 2022), which the page only
  mentions: a fixed penalty ``-m_h |i - j|`` added to every score of head h.
- ``relative_position_bucket``: T5's bucketed relative positions (Raffel et al. 2020):
  exact buckets for small offsets, logarithmic ones up to ``max_distance``, one clipped
  bucket beyond.
- ``online_softmax_backward``: the backward pass of the page's online-softmax attention
  {eq}`ch4-online` by recomputation (FlashAttention-2, Dao 2023): from the row
  log-sum-exps alone, each block of weights is recomputed, never stored.

``attention_forward`` (not graded) gives the forward output and the log-sum-exps that the
backward cases take as inputs. Conventions (``docs/conventions.md``): rows are items,
weights ``(..., n_q, n_k)``, masks boolean with True = "may attend", a query with no
allowed key gets a zero output (and a log-sum-exp of -inf).
"""

from __future__ import annotations

import math

import numpy as np

from solutions.conventions import masked_softmax

__all__ = [
    "window_global_mask",
    "alibi_slopes",
    "alibi_attention",
    "relative_position_bucket",
    "attention_forward",
    "online_softmax_backward",
]


# --------------------------------------------------------------------------------------
# task 1: sliding window with global tokens


def window_global_mask(n, window, global_positions):
    """Longformer's attention pattern as a boolean mask.

    n: sequence length; window: half-width r >= 0 of the band (as ``local_mask``: 2r + 1
    keys in the middle of the sequence); global_positions: (g,) int positions in [0, n).
    Returns (n, n) bool, True where |i - j| <= window, or i or j is a global position
    (a global token attends to every position, and every position attends to it).
    """
    i = np.arange(n)[:, None]  # (n, 1) queries
    j = np.arange(n)[None, :]  # (1, n) keys
    is_global = np.zeros(n, dtype=bool)
    is_global[np.asarray(global_positions, dtype=int)] = True  # (n,)
    band = np.abs(i - j) <= window  # (n, n), eq. ch4-local
    return band | is_global[:, None] | is_global[None, :]  # (n, n)


# --------------------------------------------------------------------------------------
# task 2: ALiBi


def _power_of_two_slopes(num_heads):
    """(H,) the geometric slopes 2^(-8h/H), h = 1..H, for H a power of two."""
    h = np.arange(1, num_heads + 1, dtype=np.float64)  # (H,)
    return 2.0 ** (-8.0 * h / num_heads)


def alibi_slopes(num_heads):
    """ALiBi's head slopes m_h (Press et al. 2022).

    num_heads: H >= 1. Returns (H,) float: 2^(-8h/H) for h = 1..H when H is a power of
    two; otherwise the slopes of the largest power of two P < H, followed by the odd-
    numbered slopes (h = 1, 3, 5, ...) of 2P heads, the first H - P of them.
    """
    if num_heads & (num_heads - 1) == 0:
        return _power_of_two_slopes(num_heads)
    p = 1 << (num_heads.bit_length() - 1)  # the largest power of two below H
    extra = _power_of_two_slopes(2 * p)[0::2][: num_heads - p]  # (H - P,)
    return np.concatenate([_power_of_two_slopes(p), extra])  # (H,)


def alibi_attention(q, k, v, slopes, mask=None):
    """Scaled dot-product attention with ALiBi's linear distance penalty, per head.

    q, k: (..., H, n, d); v: (..., H, n, d_v); slopes: (H,) the m_h;
    mask: boolean, broadcastable to (..., H, n, n), True = may attend; None = all.
    Score of head h, query i, key j: s_hij = q_hi . k_hj / sqrt(d) - m_h |i - j|.
    Returns (output (..., H, n, d_v), weights (..., H, n, n)).
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n = q.shape[-2]
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])  # (n, n)
    bias = -np.asarray(slopes, dtype=np.float64)[:, None, None] * distance  # (H, n, n)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + bias  # (..., H, n, n)
    weights = masked_softmax(scores, mask)  # (..., H, n, n)
    return weights @ v, weights  # (..., H, n, d_v)


# --------------------------------------------------------------------------------------
# task 3: T5's relative position buckets


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """T5's bucket of each relative position (Raffel et al. 2020).

    relative_position: int array (...), memory (key) position minus query position, j - i.
    bidirectional: True: half the buckets for keys before the query (and the offset 0),
        half, offset by num_buckets // 2, for keys after it; False: keys after the query
        all fall in bucket 0.
    num_buckets, max_distance: ints, num_buckets // 2 (bidirectional) or num_buckets is
        the B of each half, max_distance > B // 2.
    Returns int64 (...) in [0, num_buckets): with distance r >= 0 and E = B // 2,
    bucket r for r < E, else min(B - 1, E + floor(log(r / E) / log(max_distance / E)
    * (B - E))), plus the offset of its half.
    """
    rel = np.asarray(relative_position, dtype=np.int64)
    offset = np.zeros(rel.shape, dtype=np.int64)  # (...)
    if bidirectional:
        num_buckets //= 2
        offset = np.where(rel > 0, num_buckets, 0)  # keys after the query: second half
        distance = np.abs(rel)  # (...)
    else:
        distance = -np.minimum(rel, 0)  # keys after the query: distance 0
    exact = num_buckets // 2
    with np.errstate(divide="ignore"):  # log(0) where the exact bucket is used anyway
        log_ratio = np.log(distance / exact) / math.log(max_distance / exact)  # (...)
    large = exact + np.floor(log_ratio * (num_buckets - exact))
    large = np.minimum(np.where(distance < exact, 0, large), num_buckets - 1)
    return offset + np.where(distance < exact, distance, large).astype(np.int64)  # (...)


# --------------------------------------------------------------------------------------
# task 4: the backward pass of online-softmax attention


def _scaled_scores(q, k, mask):
    """(..., n_q, n_k) scores q k^T / sqrt(d), -inf where masked."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    return s if mask is None else np.where(mask, s, -np.inf)


def attention_forward(q, k, v, mask=None):
    """The forward pass and its row statistics (not graded: the backward's inputs).

    q: (..., n_q, d), k: (..., n_k, d), v: (..., n_k, d_v); mask: boolean, broadcastable
    to (..., n_q, n_k). Returns (out (..., n_q, d_v), logsumexp (..., n_q)):
    L_i = log sum_j exp(s_ij), -inf for a query with no allowed key (whose output is 0).
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = _scaled_scores(q, k, mask)  # (..., n_q, n_k)
    top = s.max(axis=-1, keepdims=True)  # (..., n_q, 1)
    shift = np.where(np.isfinite(top), top, 0.0)
    total = np.exp(s - shift).sum(axis=-1, keepdims=True)  # (..., n_q, 1)
    with np.errstate(divide="ignore"):
        lse = (np.log(total) + shift)[..., 0]  # (..., n_q)
    return masked_softmax(s, mask) @ v, lse


def online_softmax_backward(q, k, v, out, logsumexp, grad_out, block_size=128, mask=None):
    """Gradients of attention by recomputation, one block of keys at a time.

    q: (..., n_q, d), k: (..., n_k, d), v: (..., n_k, d_v): the forward's inputs;
    out: (..., n_q, d_v) its output O; logsumexp: (..., n_q) its row statistics L;
    grad_out: (..., n_q, d_v) dO, the gradient of the loss with respect to O;
    block_size: keys per block (need not divide n_k); mask as in the forward.
    Returns (dq (..., n_q, d), dk (..., n_k, d), dv (..., n_k, d_v)), with, per block J,
    P = exp(S - L) (0 where masked), dV_J = P^T dO, dP = dO V_J^T, D = rowsum(dO * O),
    dS = P * (dP - D), dQ += dS K_J / sqrt(d), dK_J = dS^T Q / sqrt(d).
    """
    q, k, v, out, lse, d_out = (
        np.asarray(a, dtype=np.float64) for a in (q, k, v, out, logsumexp, grad_out)
    )
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    if mask is not None:  # any broadcastable mask, e.g. (n_q, 1), sliced by key blocks below
        whole = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], n_k)
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), whole)  # a view, no copy
    # L = -inf (no allowed key): shift by 0, its scores are all -inf, so P = 0
    lse = np.where(np.isfinite(lse), lse, 0.0)[..., None]  # (..., n_q, 1)
    delta = (d_out * out).sum(axis=-1, keepdims=True)  # (..., n_q, 1), D_i = dO_i . O_i
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for start in range(0, n_k, block_size):
        keys = slice(start, start + block_size)
        block_mask = None if mask is None else mask[..., keys]
        s = _scaled_scores(q, k[..., keys, :], block_mask)  # (..., n_q, b)
        p = np.exp(s - lse)  # (..., n_q, b), the recomputed weights
        dv[..., keys, :] = np.swapaxes(p, -1, -2) @ d_out  # (..., b, d_v)
        dp = d_out @ np.swapaxes(v[..., keys, :], -1, -2)  # (..., n_q, b)
        ds = p * (dp - delta)  # (..., n_q, b), the softmax backward
        dq += ds @ k[..., keys, :] * scale  # (..., n_q, d)
        dk[..., keys, :] = np.swapaxes(ds, -1, -2) @ q * scale  # (..., b, d)
    return dq, dk, dv
