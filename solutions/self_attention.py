"""Self-attention (chapter 4, ``book/ch4_self_attention.ipynb``).

What this file builds, in the order the chapter derives it:

- ``self_attention``: queries, keys and values all come from the same sequence ``x``
  through three trainable matrices, then scaled dot-product attention (chapter 2's
  ``attention``, imported, not copied).
- Masks, boolean with True = "may attend": ``causal_mask`` (no peeking at the future),
  ``local_mask`` (restricted self-attention with a window r), ``padding_mask`` (ignore
  the padding after each sequence's valid length).
- ``sinusoidal_positions``: the fixed positional encoding of Vaswani et al., and
  ``offset_rotation``: the matrix that moves an encoding k positions along, {eq}`ch4-rotation`.
- ``online_softmax_attention``: the flash-style algorithm; keys in blocks with a running
  max and a running sum, never materialising the ``(n_q, n_k)`` weight matrix.
- ``peak_memory``: the peak number of bytes NumPy allocates while a call runs
  (``tracemalloc``), to compare the naive and blocked algorithms.

Conventions (``docs/conventions.md``): rows are items, ``x`` is ``(..., n, d)``, weights are
``(..., n_q, n_k)`` with rows summing to 1 (or 0 for a query with no allowed key), and
weight matrices are used as ``x @ w``. Float32 input stays float32.

Equations of the chapter, by label:

- {eq}`ch4-qkv`: ``Q = X W_q``, ``K = X W_k``, ``V = X W_v``
- {eq}`ch4-self-attention`: ``SelfAttention(X) = softmax(Q K^T / sqrt(d_k)) V``
- {eq}`ch4-causal`: causal mask ``M_ij = [j <= i]``; {eq}`ch4-local`: local mask ``M_ij = [|i - j| <= r]``
- {eq}`ch4-pe`: ``PE[t, 2i] = sin(t w_i)``, ``PE[t, 2i+1] = cos(t w_i)``, ``w_i = 10000^(-2i/d)``
- {eq}`ch4-rotation`: ``PE[t + k] = PE[t] @ R(k)``, ``R(k)`` block-diagonal with 2x2 rotations by ``k w_i``
- {eq}`ch4-online`: online softmax: ``m' = max(m, max_j s_j)``, ``l' = l e^(m - m') + sum_j e^(s_j - m')``,
  ``o' = o e^(m - m') + sum_j e^(s_j - m') v_j``, and at the end ``o / l``
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np

from solutions.conventions import (
    SHIFT_FREE_BOUND,
    TILE_BYTES,
    as_float,
    check_batch,
    check_int,
    check_mask,
    dot_scores_within,
    flatten_batch,
    query_blocks,
    run_blocks,
)
from solutions.soft_hard import attention

__all__ = [
    "self_attention",
    "causal_mask",
    "local_mask",
    "padding_mask",
    "sinusoidal_positions",
    "offset_rotation",
    "online_softmax_attention",
    "peak_memory",
]


# ----------------------------------------------------------------------------------------
# self-attention, eqs. ch4-qkv and ch4-self-attention


def self_attention(x, w_q, w_k, w_v, mask=None):
    """Scaled dot-product self-attention of a sequence with itself, {eq}`ch4-qkv` and {eq}`ch4-self-attention`.

    x:    (..., n, d_in) the sequence; every item is a query, a key and a value
    w_q:  (d_in, d_k) query projection, used as ``x @ w_q``
    w_k:  (d_in, d_k) key projection
    w_v:  (d_in, d_v) value projection
    mask: boolean, broadcastable to (..., n, n), True = may attend; None = all.
    Returns ``(output, weights)``: output (..., n, d_v), weights (..., n, n).
    Without positional information the result is permutation-equivariant: permuting the
    rows of ``x`` (and the mask accordingly) permutes the rows of the output.
    """
    x = as_float(x, "x")
    w_q, w_k, w_v = as_float(w_q, "w_q"), as_float(w_k, "w_k"), as_float(w_v, "w_v")
    if x.ndim < 2:
        raise ValueError(f"expected x of shape (..., n, d_in), got {x.shape}")
    d_in = x.shape[-1]
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        if w.ndim != 2 or w.shape[0] != d_in:
            raise ValueError(
                f"expected {name} of shape (d_in, d_out) with d_in = {d_in} (the width of x "
                f"{x.shape}), got {w.shape}: the projection is x @ {name}"
            )
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(
            f"expected w_q and w_k to project to the same width d_k (queries are compared with "
            f"keys), got w_q {w_q.shape} and w_k {w_k.shape}"
        )
    q = x @ w_q  # (..., n, d_k)
    k = x @ w_k  # (..., n, d_k)
    v = x @ w_v  # (..., n, d_v)
    return attention(q, k, v, mask=mask, score="scaled_dot")  # (..., n, d_v), (..., n, n)


# ----------------------------------------------------------------------------------------
# masks, eqs. ch4-causal and ch4-local; True = may attend


def causal_mask(n):
    """Causal (lower-triangular) mask, {eq}`ch4-causal`: query i may attend to keys j <= i.

    n: sequence length.  Returns a boolean (n, n) array, ``mask[i, j] = j <= i``.
    """
    n = check_int(n, "n", 0)
    i = np.arange(n)[:, None]  # (n, 1) queries
    j = np.arange(n)[None, :]  # (1, n) keys
    return j <= i  # (n, n)


def local_mask(n, window):
    """Restricted self-attention mask, {eq}`ch4-local`: query i sees keys with |i - j| <= window.

    n: sequence length; window: r >= 0 (r = 0 lets each item see only itself).
    Returns a boolean (n, n) band matrix. Each query sees at most 2r + 1 keys, so the cost
    is O(r n d) instead of O(n^2 d) and information needs O(n / r) layers to cross the
    sequence.
    """
    n = check_int(n, "n", 0)
    if isinstance(window, (int, np.integer)) and not isinstance(window, bool) and window < 0:
        raise ValueError(
            f"expected a window r >= 0 (query i sees keys i - r .. i + r), got window={window}"
        )
    window = check_int(window, "window", 0)
    i = np.arange(n)[:, None]  # (n, 1)
    j = np.arange(n)[None, :]  # (1, n)
    return np.abs(i - j) <= window  # (n, n)


def padding_mask(valid_lens, n):
    """Key mask that hides the padding at the end of each sequence of a batch.

    valid_lens: (...) integers in [0, n]: how many leading items of each sequence are real.
    n:          the padded length.
    Returns a boolean (..., 1, n) array, ``mask[..., 0, j] = j < valid_lens[...]``: it
    broadcasts against weights (..., n_q, n) so every query ignores the padded keys. For
    multi-head weights (B, h, n_q, n) pass it to ``multihead_attention``, which adds the
    head axis, or insert it yourself with ``mask[:, None]``.
    """
    n = check_int(n, "n", 0)
    valid_lens = np.asarray(valid_lens)
    if not np.issubdtype(valid_lens.dtype, np.integer):
        raise TypeError(f"expected integer valid lengths, got dtype {valid_lens.dtype}")
    if valid_lens.size and (valid_lens.min() < 0 or valid_lens.max() > n):
        raise ValueError(
            f"expected valid lengths in [0, n] = [0, {n}], got values from "
            f"{valid_lens.min()} to {valid_lens.max()}"
        )
    j = np.arange(n)  # (n,) key positions
    return (j < valid_lens[..., None])[..., None, :]  # (..., 1, n)


# ----------------------------------------------------------------------------------------
# positions, eqs. ch4-pe and ch4-rotation


def _frequencies(d: int) -> np.ndarray:
    """w_i = 10000^(-2i/d) for i = 0 .. ceil(d/2) - 1, eq. ch4-pe."""
    return 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (ceil(d/2),)


def sinusoidal_positions(n, d):
    """Sinusoidal positional encoding, {eq}`ch4-pe`.

    n: number of positions t = 0 .. n-1; d: encoding width (odd d drops the last cosine).
    Returns float64 (n, d): ``PE[t, 2i] = sin(t w_i)``, ``PE[t, 2i+1] = cos(t w_i)`` with
    ``w_i = 10000^(-2i/d)``. Added to the inputs of self-attention, it breaks the
    permutation equivariance; ``offset_rotation`` shows that offsets act linearly.
    """
    n = check_int(n, "n", 0)
    d = check_int(d, "d", 1)
    angles = np.arange(n, dtype=np.float64)[:, None] * _frequencies(d)[None, :]  # (n, ceil(d/2))
    pe = np.empty((n, d))  # (n, d)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d // 2])
    return pe


def offset_rotation(k, d):
    """The fixed matrix R(k) with ``PE[t + k] = PE[t] @ R(k)`` for every t, {eq}`ch4-rotation`.

    k: the offset (any integer, negative too); d: even encoding width.
    Returns float64 (d, d), block-diagonal: for frequency pair i, columns (2i, 2i+1) hold
    the rotation by angle ``k w_i``, since
    ``[sin(w(t+k)), cos(w(t+k))] = [sin wt, cos wt] @ [[cos wk, -sin wk], [sin wk, cos wk]]``.
    R(k) does not depend on t: a relative offset is the same linear map at every position.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"expected an integer offset k, got {k!r}")
    d = check_int(d, "d", 2)
    if d % 2:
        raise ValueError(f"expected an even width d (sin/cos pairs), got d={d}")
    angle = k * _frequencies(d)  # (d/2,)
    c, s = np.cos(angle), np.sin(angle)
    r = np.zeros((d, d))
    idx = np.arange(0, d, 2)
    r[idx, idx] = c  # sin(w(t+k)) = sin(wt) cos(wk) + cos(wt) sin(wk)
    r[idx + 1, idx] = s
    r[idx, idx + 1] = -s  # cos(w(t+k)) = cos(wt) cos(wk) - sin(wt) sin(wk)
    r[idx + 1, idx + 1] = c
    return r


# ----------------------------------------------------------------------------------------
# efficient attention, eq. ch4-online


def online_softmax_attention(q, k, v, block_size=128, mask=None):
    """Scaled dot-product attention computed over blocks of keys with an online softmax.

    q:    (..., n_q, d_k) queries
    k:    (..., n_k, d_k) keys
    v:    (..., n_k, d_v) values
    block_size: how many keys to process at once (need not divide n_k).
    mask: boolean, broadcastable to (..., n_q, n_k), True = may attend; None = all.
    Returns the output (..., n_q, d_v), equal to ``attention(q, k, v, mask)[0]`` up to
    rounding; a query with no allowed key gets a zero output (``docs/conventions.md``).

    Only a tile of (query rows) x (block_size keys) scores exists at any time, {eq}`ch4-online`: for each query we carry the running max m of its scores, the
    running sum l of ``exp(s - m)`` and the running unnormalised output o. When a block
    raises the max from m to m', the old sum and output are rescaled by ``exp(m - m')``;
    dividing by l happens once, at the end. The weights themselves are never formed, so
    none are returned. Query rows are taken ``TILE_BYTES`` of scores at a time, so m, l, o
    and the tile stay in cache (the FlashAttention tiling); the query blocks share out
    NumPy's BLAS threads like ``attention``'s.
    """
    q, k, v = as_float(q, "q"), as_float(k, "k"), as_float(v, "v")
    block_size = check_int(block_size, "block_size", 1)
    batch = check_batch(("q", q), ("k", k), ("v", v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"expected queries and keys of the same width d_k, got q {q.shape} and k {k.shape}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"expected one value per key, got k {k.shape} and v {v.shape}")
    dtype = np.result_type(q, k, v)
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = check_mask(mask, batch + (n_q, n_k), name="(..., n_q, n_k)")
        mask = flatten_batch(np.broadcast_to(mask, batch + (n_q, n_k)), batch)  # (P, n_q, n_k)

    scale = dtype.type(1.0 / math.sqrt(q.shape[-1]))  # the 1/sqrt(d_k) of eq. ch4-self-attention
    q3, k3, v3 = (flatten_batch(x.astype(dtype, copy=False), batch) for x in (q, k, v))  # (P, n, d)
    output = np.empty(batch + (n_q, d_v), dtype)
    o3 = output.reshape((-1, n_q, d_v))  # (P, n_q, d_v), a view

    def attend(block):
        p, r = block
        qb = q3[p, r] * scale  # (P_b, r_b, d_k), scaled here: no copy of all of q
        m = np.full(qb.shape[:-1] + (1,), -np.inf, dtype=dtype)  # running max of the scores
        l = np.zeros_like(m)  # noqa: E741  (the l of the formula) running sum of exp(s - m)
        o = np.zeros(qb.shape[:-1] + (d_v,), dtype=dtype)  # running sum of exp(s - m) v
        # every |s| <= |q| |k| <= 60 (Cauchy-Schwarz, {eq}`ch4-cauchy-schwarz`): exp(s) is
        # safe as it is, so m can stay 0 and nothing ever needs rescaling
        bounded = dot_scores_within(qb, k3[p], SHIFT_FREE_BOUND)
        for start in range(0, n_k, block_size):
            keys = slice(start, min(start + block_size, n_k))
            s = qb @ np.swapaxes(k3[p, keys], -1, -2)  # (P_b, r_b, b)
            if mask is not None:
                np.copyto(s, -np.inf, where=~mask[p, r, keys])
            if bounded:
                np.exp(s, out=s)  # p = exp(s), 0 where masked
                l += s.sum(axis=-1, keepdims=True)  # noqa: E741
                o += s @ v3[p, keys]
                continue
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # (P_b, r_b, 1)
            # a row with nothing allowed so far keeps m = -inf: shift by 0 there (no inf - inf)
            shift = np.where(np.isfinite(m_new), m_new, dtype.type(0))
            np.subtract(s, shift, out=s)
            np.exp(s, out=s)  # p = exp(s - m'), 0 where masked
            rescale = np.exp(m - shift)  # (P_b, r_b, 1): exp(m - m'), 0 while m = -inf
            l = l * rescale + s.sum(axis=-1, keepdims=True)  # noqa: E741
            o = o * rescale + s @ v3[p, keys]  # (P_b, r_b, d_v)
            m = m_new
        o3[p, r] = o / np.where(l > 0, l, dtype.type(1))  # l = 0 only for a fully masked row

    rows = max(1, TILE_BYTES // (min(block_size, max(n_k, 1)) * dtype.itemsize))
    run_blocks(attend, query_blocks(o3.shape[0], n_q, rows))
    return output


def peak_memory(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` and measure the peak memory it allocates.

    Returns ``(result, peak_bytes)``, where ``peak_bytes`` is the highest amount of memory
    traced by Python's ``tracemalloc`` during the call, above what was allocated before
    it (NumPy reports its array buffers to tracemalloc, so temporaries are counted).
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    try:
        result = fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak - before
