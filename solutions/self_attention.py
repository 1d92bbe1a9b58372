"""Self-attention (chapter 4, ``book/ch4_self_attention.ipynb``).

What this file builds, in the order the chapter derives it:

- ``self_attention``: queries, keys and values all come from the same sequence ``x``
  through three trainable matrices, then scaled dot-product attention (chapter 2's
  ``attention``, imported, not copied).
- Masks, boolean with True = "may attend": ``causal_mask`` (no peeking at the future),
  ``local_mask`` (restricted self-attention with a window r), ``padding_mask`` (ignore
  the padding after each sequence's valid length).
- ``sinusoidal_positions``: the fixed positional encoding of Vaswani et al., and
  ``offset_rotation``: the matrix that moves an encoding k positions along,
  {eq}`ch4-rotation`.
- ``rotary``: rotary position embeddings (RoPE, Su et al. 2021): each query and key is
  rotated by its own position, so that their score depends on the offset only,
  {eq}`ch4-rope`.
- ``online_softmax_attention``: the flash-style algorithm; keys in blocks with a running
  max and a running sum, never materialising the ``(n_q, n_k)`` weight matrix (its
  tiled, threaded twin for speed:
  ``solutions.fast_attention.fast_online_softmax_attention``).
- ``peak_memory``: the peak number of bytes NumPy allocates while a call runs
  (``tracemalloc``), to compare the naive and blocked algorithms.

Conventions (``docs/conventions.md``): rows are items, ``x`` is ``(..., n, d)``, weights
are ``(..., n_q, n_k)`` with rows summing to 1 (or 0 for a query with no allowed key),
and weight matrices are used as ``x @ w``. Float32 input stays float32.

Equations of the chapter, by label:

- {eq}`ch4-qkv`: ``Q = X W_q``, ``K = X W_k``, ``V = X W_v``
- {eq}`ch4-self-attention`: ``SelfAttention(X) = softmax(Q K^T / sqrt(d_k)) V``
- {eq}`ch4-causal`: causal mask ``M_ij = [j <= i]``; {eq}`ch4-local`: local mask
  ``M_ij = [|i - j| <= r]``
- {eq}`ch4-pe`: ``PE[t, 2i] = sin(t w_i)``, ``PE[t, 2i+1] = cos(t w_i)``,
  ``w_i = 10000^(-2i/d)``
- {eq}`ch4-rotation`: ``PE[t + k] = PE[t] @ R(k)``, ``R(k)`` block-diagonal with 2x2
  rotations by ``k w_i``
- {eq}`ch4-rope`: ``rotary(x, t) = x @ R(t)``, so
  ``rotary(q, t) . rotary(k, s) = q R(t - s) k^T``
- {eq}`ch4-online`: online softmax: ``m' = max(m, max_j s_j)``,
  ``l' = l e^(m - m') + sum_j e^(s_j - m')``,
  ``o' = o e^(m - m') + sum_j e^(s_j - m') v_j``, and at the end ``o / l``
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np

from solutions.conventions import (
    as_float,
    check_attention,
    check_int,
    check_projections,
)
from solutions.soft_hard import attention

__all__ = [
    "self_attention",
    "causal_mask",
    "local_mask",
    "padding_mask",
    "sinusoidal_positions",
    "offset_rotation",
    "rotary",
    "online_softmax_attention",
    "peak_memory",
]


# --------------------------------------------------------------------------------------
# self-attention, eqs. ch4-qkv and ch4-self-attention


def _check_self_attention(x, w_q, w_k, w_v):
    """x (..., n, d_in) and the three projections (d_in, d_k), (d_in, d_k), (d_in,
    d_v)."""
    x = as_float(x, "x")
    if x.ndim < 2:
        raise ValueError(f"expected x of shape (..., n, d_in), got {x.shape}")
    w_q, w_k, w_v = check_projections(
        ("x", x, "w_q", w_q), ("x", x, "w_k", w_k), ("x", x, "w_v", w_v)
    )
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(
            "expected w_q and w_k to project to the same width d_k (queries are "
            f"compared with keys), got w_q {w_q.shape} and w_k {w_k.shape}"
        )
    return x, w_q, w_k, w_v


def self_attention(x, w_q, w_k, w_v, mask=None):
    """Scaled dot-product self-attention of a sequence with itself, {eq}`ch4-qkv` and
    {eq}`ch4-self-attention`.

    x:    (..., n, d_in) the sequence; every item is a query, a key and a value
    w_q:  (d_in, d_k) query projection, used as ``x @ w_q``
    w_k:  (d_in, d_k) key projection
    w_v:  (d_in, d_v) value projection
    mask: boolean, broadcastable to (..., n, n), True = may attend; None = all.
    Returns ``(output, weights)``: output (..., n, d_v), weights (..., n, n).
    Without positional information the result is permutation-equivariant: permuting the
    rows of ``x`` (and the mask accordingly) permutes the rows of the output.
    """
    x, w_q, w_k, w_v = _check_self_attention(x, w_q, w_k, w_v)
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (..., n, d_k), (..., n, d_k), (..., n, d_v)
    # (..., n, d_v), (..., n, n)
    return attention(q, k, v, mask=mask, score="scaled_dot")


# --------------------------------------------------------------------------------------
# masks, eqs. ch4-causal and ch4-local; True = may attend


def causal_mask(n):
    """Causal (lower-triangular) mask, {eq}`ch4-causal`: query i may attend to keys j
    <= i.

    n: sequence length.  Returns a boolean (n, n) array, ``mask[i, j] = j <= i``.
    """
    n = check_int(n, "n", 0)
    i = np.arange(n)[:, None]  # (n, 1) queries
    j = np.arange(n)[None, :]  # (1, n) keys
    return j <= i  # (n, n)


def local_mask(n, window):
    """Restricted self-attention mask, {eq}`ch4-local`: query i sees keys with |i - j|
    <= window.

    n: sequence length; window: r >= 0 (r = 0 lets each item see only itself).
    Returns a boolean (n, n) band matrix. Each query sees at most 2r + 1 keys, so the
    cost is O(r n d) instead of O(n^2 d) and information needs O(n / r) layers to cross
    the sequence.
    """
    n = check_int(n, "n", 0)
    if (
        isinstance(window, (int, np.integer))
        and not isinstance(window, bool)
        and window < 0
    ):
        raise ValueError(
            "expected a window r >= 0 (query i sees keys i - r .. i + r), got "
            f"window={window}"
        )
    window = check_int(window, "window", 0)
    i = np.arange(n)[:, None]  # (n, 1)
    j = np.arange(n)[None, :]  # (1, n)
    return np.abs(i - j) <= window  # (n, n)


def padding_mask(valid_lens, n):
    """Key mask that hides the padding at the end of each sequence of a batch.

    valid_lens: (...) integers in [0, n]: how many leading items of each sequence are
    real.
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


# --------------------------------------------------------------------------------------
# positions, eqs. ch4-pe and ch4-rotation


def _frequencies(d: int, base: float = 10000.0) -> np.ndarray:
    """w_i = base^(-2i/d) for i = 0 .. ceil(d/2) - 1, eq. ch4-pe (base 10000)."""
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (ceil(d/2),)


def sinusoidal_positions(n, d):
    """Sinusoidal positional encoding, {eq}`ch4-pe`.

    n: number of positions t = 0 .. n-1; d: encoding width (odd d drops the last
    cosine).
    Returns float64 (n, d): ``PE[t, 2i] = sin(t w_i)``, ``PE[t, 2i+1] = cos(t w_i)``
    with ``w_i = 10000^(-2i/d)``. Added to the inputs of self-attention, it breaks the
    permutation equivariance; ``offset_rotation`` shows that offsets act linearly.
    """
    n = check_int(n, "n", 0)
    d = check_int(d, "d", 1)
    # (n, ceil(d/2))
    angles = np.arange(n, dtype=np.float64)[:, None] * _frequencies(d)[None, :]
    pe = np.empty((n, d))  # (n, d)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d // 2])
    return pe


def offset_rotation(k, d):
    """The fixed matrix R(k) with ``PE[t + k] = PE[t] @ R(k)`` for every t,
    {eq}`ch4-rotation`.

    k: the offset (any integer, negative too); d: even encoding width.
    Returns float64 (d, d), block-diagonal: for frequency pair i, columns (2i, 2i+1)
    hold the rotation by angle ``k w_i``, since
    ``[sin(w(t+k)), cos(w(t+k))]``
    ``= [sin wt, cos wt] @ [[cos wk, -sin wk], [sin wk, cos wk]]``.
    R(k) does not depend on t: a relative offset is the same linear map at every
    position.
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


def rotary(x, positions, base=10000.0):
    """Rotary position embedding (RoPE), {eq}`ch4-rope`: row t of ``x`` times R(t).

    x:         (..., n, d) queries or keys, d even (pairs of features are rotated)
    positions: (n,) or broadcastable to (..., n): the integer position of each row
    base:      > 1, the frequencies are ``w_i = base^(-2i/d)`` as in {eq}`ch4-pe`.
    Returns an array like ``x`` (float32 stays float32): feature pair (2i, 2i + 1) of
    row t rotated by the angle ``t w_i``, ``[a, b] -> [a cos + b sin, -a sin + b cos]``,
    which is ``x[t] @ offset_rotation(t, d)``. Since ``R(t) R(s)^T = R(t - s)``, the
    score of a rotated query at t and a rotated key at s is ``q R(t - s) k^T``: it
    depends on the positions only through the offset t - s.
    """
    x = as_float(x, "x")
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(
            f"expected x of shape (..., n, d) with an even d (features are rotated in "
            f"pairs), got {x.shape}"
        )
    positions = np.asarray(positions)
    if not np.issubdtype(positions.dtype, np.integer):
        raise TypeError(f"expected integer positions, got dtype {positions.dtype}")
    if (
        isinstance(base, bool)
        or not isinstance(base, (int, float, np.number))
        or not base > 1
    ):
        raise ValueError(
            "expected a number base > 1 (base^(-2i/d) are the frequencies), got "
            f"{base!r}"
        )
    try:
        np.broadcast_shapes(positions.shape, x.shape[:-1])
    except ValueError:
        raise ValueError(
            f"expected positions broadcastable to x's rows {x.shape[:-1]}, got shape "
            f"{positions.shape}"
        ) from None
    # (..., n, d/2)
    angle = positions[..., None] * _frequencies(x.shape[-1], float(base))
    c, s = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., n, d/2): the two features of each pair
    out = np.empty(
        np.broadcast_shapes(x.shape, angle.shape[:-1] + x.shape[-1:]), dtype=x.dtype
    )
    out[..., 0::2] = a * c + b * s  # the columns of R(t), as in offset_rotation
    out[..., 1::2] = b * c - a * s
    return out


# --------------------------------------------------------------------------------------
# efficient attention, eq. ch4-online


def online_softmax_attention(q, k, v, block_size=128, mask=None):
    """Scaled dot-product attention computed over blocks of keys with an online softmax,
    {eq}`ch4-online`.

    q:    (..., n_q, d_k) queries
    k:    (..., n_k, d_k) keys
    v:    (..., n_k, d_v) values
    block_size: how many keys to process at once (need not divide n_k).
    mask: boolean, broadcastable to (..., n_q, n_k), True = may attend; None = all.
    Returns the output (..., n_q, d_v), equal to ``attention(q, k, v, mask)[0]`` up to
    rounding; a query with no allowed key gets a zero output (``docs/conventions.md``).

    Only (n_q x block_size) scores exist at any time: for each query we carry the
    running max m of its scores, the running sum l of ``exp(s - m)`` and the running
    unnormalised output o. When a block raises the max from m to m', the old sum and
    output are rescaled by ``exp(m - m')``; dividing by l happens once, at the end. The
    weights are never formed, so none are returned. The same computation on cache-sized
    tiles of query rows, on threads:
    ``solutions.fast_attention.fast_online_softmax_attention``.
    """
    q, k, v, mask = check_attention(q, k, v, mask, same_width=True)  # (conventions.py)
    block_size = check_int(block_size, "block_size", 1)
    q = q / q.dtype.type(math.sqrt(q.shape[-1]))  # scores s = q k / sqrt(d_k)
    # running max, (..., n_q, 1)
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=v.dtype)
    l = np.zeros_like(m)  # noqa: E741  (the l of the formula) running sum of exp(s - m)
    # running sum of exp(s - m) v
    o = np.zeros(q.shape[:-1] + v.shape[-1:], dtype=v.dtype)
    for start in range(0, k.shape[-2], block_size):
        keys = slice(start, start + block_size)
        # (..., n_q, b), this block's scores
        s = q @ np.swapaxes(k[..., keys, :], -1, -2)
        if mask is not None:
            s = np.where(mask[..., keys], s, -np.inf)  # masked keys: exp(-inf) = 0
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # m' = max(m, max_j s_j)
        shift = np.where(np.isfinite(m_new), m_new, 0)  # m' = -inf: nothing allowed yet
        s -= shift
        np.exp(s, out=s)  # exp(s_j - m'), in place: one block of scores at a time
        rescale = np.exp(m - shift)  # exp(m - m'), 0 while m = -inf
        l = l * rescale + s.sum(axis=-1, keepdims=True)  # noqa: E741
        o = o * rescale + s @ v[..., keys, :]
        m = m_new
    return o / np.where(l > 0, l, 1)  # l = 0 only for a query with no allowed key


def peak_memory(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` and measure the peak memory it allocates.

    Returns ``(result, peak_bytes)``, where ``peak_bytes`` is the highest amount of
    memory traced by Python's ``tracemalloc`` during the call, above what was allocated
    before it (NumPy reports its array buffers to tracemalloc, so temporaries are
    counted).
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
