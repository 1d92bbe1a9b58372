"""Fast attention: the same results as the plain references, computed for speed.

The chapters' references (``solutions.soft_hard.attention``,
``solutions.self_attention.online_softmax_attention``) are written as their equations, for
the reader. This module computes the same two things the way a kernel would, and is what
the benchmark (``bench/attention.py``) and the timing figures of chapter 4 call:

- ``fast_attention``: soft attention in cache-sized blocks of query rows (``BLOCK_BYTES`` of
  scores per block), each block's scores turned into weights in place while they are in
  cache, the blocks shared out over NumPy's BLAS threads. Without a mask, the weights of
  finite dot scores come from PyTorch's fused softmax on the same memory; otherwise from
  NumPy, the max shift skipped when Cauchy-Schwarz bounds every scaled dot score by
  ``SHIFT_FREE_BOUND`` (60), {eq}`ch4-cauchy-schwarz`.
- ``fast_online_softmax_attention``: the online softmax of {eq}`ch4-online` on tiles of
  ``TILE_BYTES`` of scores (query rows x key block), the FlashAttention tiling, on the same
  threads, with the same shift-free shortcut.

Both are tested equal to the plain references (``tests/test_fast_attention.py``): masks,
fully masked rows, large scores, float32 and float64, broadcast batches, 1 and 2 threads.
Conventions: ``docs/conventions.md``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from solutions.conventions import (
    BLOCK_BYTES,
    SHIFT_FREE_BOUND,
    TILE_BYTES,
    as_float,
    check_attention,
    check_batch,
    check_int,
    dot_scores_within,
    flatten_batch,
    masked_softmax_into,
    query_blocks,
    run_blocks,
)
from solutions.soft_hard import _score_function

__all__ = ["fast_attention", "fast_online_softmax_attention"]


def fast_attention(q, k, v, mask=None, score="scaled_dot", block_rows="auto", **score_params):
    """``solutions.soft_hard.attention`` in cache-sized blocks of query rows, on threads.

    Arguments and result as for ``attention`` (``(output, weights)``), plus
    block_rows: how many query rows to process at once: "auto" (``BLOCK_BYTES`` of scores
        per block), an int >= 1, or None for one block holding the whole array (each
        softmax step is then a full pass over memory).
    Every block size and thread count gives the same result up to rounding.
    """
    q, k, v, mask = check_attention(q, k, v, mask)
    batch = check_batch(("q", q), ("k", k))  # the batch dims of the scores and weights
    batch_out = check_batch(("q", q), ("k", k), ("v", v))  # the output's (v may add some)
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    score_fn = _score_function(score, q, k, score_params)
    try:  # the scores' dtype, from one query and one key
        dtype = as_float(score_fn(q[..., :1, :], k[..., :1, :]), "scores").dtype
    except ValueError:
        score_fn(q, k)  # the same complaint, naming the full shapes
        raise
    v = v.astype(dtype, copy=False)
    dot = score in ("dot", "scaled_dot")
    if score == "scaled_dot":  # scale q (n_q d numbers) rather than the scores (n_q n_k)
        q = q * dtype.type(1.0 / math.sqrt(q.shape[-1]))
    if block_rows is None:
        block_rows = max(n_q, 1)
    elif block_rows == "auto":
        block_rows = max(1, BLOCK_BYTES // (max(n_k, 1) * dtype.itemsize))
    else:
        block_rows = check_int(block_rows, "block_rows", 1)

    weights = np.empty(batch + (n_q, n_k), dtype)  # (..., n_q, n_k)
    output = np.empty(batch + (n_q, d_v), dtype) if batch_out == batch else None
    q3, k3 = flatten_batch(q, batch), flatten_batch(k, batch)  # (P, n_q, d), (P, n_k, d)
    v3 = flatten_batch(v, batch) if output is not None else None  # (P, n_k, d_v)
    m3 = None if mask is None else flatten_batch(mask, batch)  # (P, n_q, n_k)
    pairs = math.prod(batch)  # P, spelled out: -1 cannot be inferred when n_q = 0
    w3 = weights.reshape((pairs, n_q, n_k))  # (P, n_q, n_k), a view

    # The exp over the n_q n_k scores is the one cost beyond the two products, and NumPy's
    # float32 exp is slow here (1.5-2 ns a number: 0.45-0.7x the two products at 1 thread).
    # torch.softmax does max, exp, sum and scale in one vectorised kernel, in place on the
    # same memory (torch.from_numpy shares it), at 0.3x the two products: fast_attention went
    # from 1.5-2.0x its two products to 1.25-1.5x at 1 thread (bench/attention.py). Its rows
    # differ from the reference's only where the reference special-cases them (no allowed
    # key, +-inf scores), so it takes unmasked dot scores that are all finite.
    # |q.k| <= |q| |k| (Cauchy-Schwarz, {eq}`ch4-cauchy-schwarz`) tells, once per call on
    # O((n_q + n_k) d) numbers and before the threads start (checked in every block, it
    # cost the 2-thread run 0.5x the two products), that every score is finite, or, for
    # NumPy's softmax, that every |score| <= 60: exp(score) then lies in [1e-26, 1e26], far
    # from overflow and underflow, and the max shift (two passes over the scores) can go.
    fused = m3 is None and dot and dot_scores_within(q3, k3, np.finfo(dtype).max / 2)
    shift = not fused and not (dot and dot_scores_within(q3, k3, SHIFT_FREE_BOUND))

    def attend(block):
        p, r = block
        w = w3[p, r]  # (P_b, r_b, n_k): this block's slice of the weights
        if dot:
            np.matmul(q3[p, r], np.swapaxes(k3[p], -1, -2), out=w)  # scores, written in place
        else:
            w[...] = score_fn(q3[p, r], k3[p])
        if fused:
            t = torch.from_numpy(w)  # the same memory, no copy
            torch.softmax(t, dim=-1, out=t)
        else:
            masked_softmax_into(w, None if m3 is None else m3[p, r], shift=shift)
        if output is not None:
            np.matmul(w, v3[p], out=output.reshape((pairs, n_q, d_v))[p, r])  # (P_b, r_b, d_v)

    # Blocks of query rows, so that one block of scores stays in cache while it becomes
    # weights ([max, subtract,] exp, sum, scale, in place) and meets V: the (..., n_q, n_k)
    # array then crosses memory once, instead of once per step as in the unblocked form.
    run_blocks(attend, query_blocks(w3.shape[0], n_q, block_rows))
    if output is None:  # v has batch dims the scores lack: one matmul over the broadcast
        output = weights @ v  # (..., n_q, d_v)
    return output, weights


def fast_online_softmax_attention(q, k, v, block_size=128, mask=None):
    """``solutions.self_attention.online_softmax_attention`` on cache-sized tiles, on threads.

    Arguments and result as for ``online_softmax_attention``. Query rows are taken
    ``TILE_BYTES`` of scores at a time, so the running max m, sum l, output o and the tile
    of scores stay in cache (the FlashAttention tiling); the query blocks share out NumPy's
    BLAS threads like ``fast_attention``'s. When Cauchy-Schwarz bounds every scaled score
    by 60, m stays 0 and nothing is ever rescaled.
    """
    q, k, v, mask = check_attention(q, k, v, mask, same_width=True)
    block_size = check_int(block_size, "block_size", 1)
    batch = check_batch(("q", q), ("k", k), ("v", v))
    dtype = v.dtype
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = flatten_batch(np.broadcast_to(mask, batch + (n_q, n_k)), batch)  # (P, n_q, n_k)

    scale = dtype.type(1.0 / math.sqrt(q.shape[-1]))  # the 1/sqrt(d_k) of eq. ch4-self-attention
    q3, k3, v3 = (flatten_batch(x.astype(dtype, copy=False), batch) for x in (q, k, v))
    output = np.empty(batch + (n_q, d_v), dtype)
    o3 = output.reshape((-1, n_q, d_v))  # (P, n_q, d_v), a view

    # every |s| = scale |q.k| <= scale |q| |k| <= 60 (Cauchy-Schwarz,
    # {eq}`ch4-cauchy-schwarz`): exp(s) is safe as it is, so m can stay 0 and nothing ever
    # needs rescaling. Checked once, before the threads start, as in fast_attention.
    bounded = dot_scores_within(q3, k3, SHIFT_FREE_BOUND / float(scale))

    def attend(block):
        p, r = block
        qb = q3[p, r] * scale  # (P_b, r_b, d_k), scaled here: no copy of all of q
        m = np.full(qb.shape[:-1] + (1,), -np.inf, dtype=dtype)  # running max of the scores
        l = np.zeros_like(m)  # noqa: E741  (the l of the formula) running sum of exp(s - m)
        o = np.zeros(qb.shape[:-1] + (d_v,), dtype=dtype)  # running sum of exp(s - m) v
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
