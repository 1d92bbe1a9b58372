"""Fast attention: the same results as the plain references, computed for speed.

The chapters' references (``solutions.soft_hard.attention``,
``solutions.self_attention.online_softmax_attention``) are written as their equations,
for the reader. This module computes the same two things the way a kernel would, and is
what the benchmark (``bench/attention.py``) and the timing figures of chapter 4 call:

- ``fast_attention``: soft attention in cache-sized blocks of query rows
  (``BLOCK_BYTES`` of scores per block, or ``SCRATCH_BYTES`` in a reused per-thread
  buffer with ``need_weights=False``), each block's scores turned into weights in place
  while they are in cache, the blocks shared out over NumPy's BLAS threads. Without a
  mask, dot scores that Cauchy-Schwarz bounds by ``SHIFT_FREE_BOUND`` (60),
  {eq}`ch4-cauchy-schwarz`, are exponentiated unshifted with torch's exp2 in place (log2
  e folded into the queries' scale); other finite ones go through PyTorch's fused
  softmax on the same memory; masks and other scores take NumPy's softmax, unshifted
  under the same bound.
- ``fast_online_softmax_attention``: the online softmax of {eq}`ch4-online` on tiles of
  ``TILE_BYTES`` of scores (query rows x key block), the FlashAttention tiling, on the
  same threads, with the same shift-free shortcut.

Both are tested equal to the plain references (``tests/test_fast_attention.py``): masks,
fully masked rows, large scores, float32 and float64, broadcast batches, 1 and 2
threads.
Conventions: ``docs/conventions.md``.
"""

from __future__ import annotations

import math
import threading

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

#: Bytes of scores per block when ``fast_attention`` keeps no weights: 1 MiB, one core's
#: L2 cache on the 2-core AMD EPYC of CI, so that a block's scores stay there from the
#: first matrix product to the second (they never reach memory). Measured with the
#: interleaved timing of bench/attention.py at B=8, h=8, n=512, d=64, float32, 1 thread,
#: load 1.8-1.9, medians of 21 rounds: blocks of 128, 256, 512 and 1024 query rows (256
#: KiB to 2 MiB) took 1.26, 1.15, 1.14 and 1.12x the two BLAS products alone; 128 rows
#: lose on the products' speed and the per-block calls.
SCRATCH_BYTES = 2**20
LOG2E = math.log2(math.e)  # e^s = 2^(s log2 e)


def fast_attention(
    q,
    k,
    v,
    mask=None,
    score="scaled_dot",
    block_rows="auto",
    need_weights=True,
    **score_params,
):
    """``solutions.soft_hard.attention`` in cache-sized blocks of query rows, on
    threads.

    Arguments and result as for ``attention`` (``(output, weights)``), plus
    block_rows: how many query rows to process at once: "auto" (``BLOCK_BYTES`` of
        scores per block, or ``SCRATCH_BYTES`` when the weights are not kept), an int
        >= 1, or None for one block holding the whole array (each softmax step is then a
        full pass over memory).
    need_weights: False returns ``(output, None)``, as PyTorch's ``need_weights=False``:
        the (..., n_q, n_k) weights array is then never made (each block's weights live
        in a per-thread scratch buffer), unless v has batch dims the scores lack, where
        the output is one product of the weights with v.
    Every block size and thread count gives the same result up to rounding.
    """
    if not isinstance(need_weights, (bool, np.bool_)):
        raise TypeError(
            f"expected need_weights to be True or False, got {need_weights!r} "
            f"of type {type(need_weights).__name__}"
        )
    q, k, v, mask = check_attention(q, k, v, mask)
    batch = check_batch(("q", q), ("k", k))  # the batch dims of the scores and weights
    # the output's (v may add some)
    batch_out = check_batch(("q", q), ("k", k), ("v", v))
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    score_fn = _score_function(score, q, k, score_params)
    try:  # the scores' dtype, from one query and one key
        dtype = as_float(score_fn(q[..., :1, :], k[..., :1, :]), "scores").dtype
    except ValueError:
        score_fn(q, k)  # the same complaint, naming the full shapes
        raise
    v = v.astype(dtype, copy=False)
    keep = need_weights or batch_out != batch  # is the (..., n_q, n_k) array made?
    if block_rows is None:
        block_rows = max(n_q, 1)
    elif block_rows == "auto":
        block_bytes = BLOCK_BYTES if keep else SCRATCH_BYTES
        block_rows = max(1, block_bytes // (max(n_k, 1) * dtype.itemsize))
    else:
        block_rows = check_int(block_rows, "block_rows", 1)

    # (P, n_q, d), (P, n_k, d)
    q3, k3 = flatten_batch(q, batch), flatten_batch(k, batch)
    m3 = None if mask is None else flatten_batch(mask, batch)  # (P, n_q, n_k)
    pairs = math.prod(batch)  # P, spelled out: -1 cannot be inferred when n_q = 0
    weights = np.empty(batch + (n_q, n_k), dtype) if keep else None  # (..., n_q, n_k)
    w3 = weights.reshape((pairs, n_q, n_k)) if keep else None  # (P, n_q, n_k), a view
    output = np.empty(batch + (n_q, d_v), dtype) if batch_out == batch else None
    o3 = None if output is None else output.reshape((pairs, n_q, d_v))  # a view
    v3 = None if output is None else flatten_batch(v, batch)  # (P, n_k, d_v)

    # How a block's scores become weights, chosen once per call from
    # |q.k| <= |q| |k| (Cauchy-Schwarz, {eq}`ch4-cauchy-schwarz`), on O((n_q + n_k) d)
    # numbers and before the threads start (checked in every block, it cost the 2-thread
    # run 0.5x the two products):
    # - "exp2": unmasked dot scores all within SHIFT_FREE_BOUND (60): exp(s) lies in
    #   [1e-26, 1e26], the max shift can go, and e^s = 2^(s log2 e) with log2 e folded
    #   into the query scale (n_q d multiplies, not n_q n_k): torch's exp2 costs 0.6 ns
    #   a float32 here against 1.0 for its exp and for torch.softmax, 1.4 for NumPy's
    #   exp (one thread, a (512, 512) block in cache). Without kept weights, 1 / the row
    #   sums scales the (n_q, d_v) output instead of the (n_q, n_k) weights.
    # - "torch": other unmasked, finite dot scores: torch.softmax in place (one fused
    #   max/exp/sum/scale kernel, shifted); its rows differ from the reference's only
    #   where the reference special-cases them (no allowed key, +-inf scores).
    # - "numpy": masks, other scores, non-finite inputs: NumPy's masked_softmax_into,
    #   the reference's special cases included, the shift skipped under the same bound.
    dot = score in ("dot", "scaled_dot")
    scale = 1.0 / math.sqrt(q.shape[-1]) if score == "scaled_dot" else 1.0
    bounded = dot and dot_scores_within(q3, k3, SHIFT_FREE_BOUND / scale)
    if dot and m3 is None and bounded:
        kernel, scale = "exp2", scale * LOG2E
    elif dot and m3 is None and dot_scores_within(q3, k3, np.finfo(dtype).max / 2):
        kernel = "torch"  # the unscaled bound: the scaled scores are finite too
    else:
        kernel = "numpy"
    local = threading.local()  # each worker's scratch buffers, reused by all its blocks

    def scratch(name, shape):
        """This thread's buffer ``name`` as an array of ``shape`` (no allocation per
        block: a fresh array's pages are zeroed by the kernel on first touch)."""
        size = math.prod(shape)
        flat = getattr(local, name, None)
        if flat is None or flat.size < size:
            flat = np.empty(size, dtype)
            setattr(local, name, flat)
        return flat[:size].reshape(shape)

    def attend(block):
        p, r = block
        # one pair: 2-D products (a stack of one measured slower)
        if p.stop - p.start == 1:
            p = p.start
        qb = q3[p, r]  # (P_b, r_b, d), or (r_b, d) for one pair
        # this block's scores: a slice of the weights, or this thread's scratch, which
        # stays in the per-core L2 cache from the first product to the second
        # (P_b, r_b, n_k)
        s = w3[p, r] if keep else scratch("scores", qb.shape[:-1] + (n_k,))
        if dot:
            # the scale on the r_b d queries, not on the r_b n_k scores
            if scale != 1.0:
                qb = np.multiply(
                    qb, dtype.type(scale), out=scratch("queries", qb.shape)
                )
            np.matmul(qb, np.swapaxes(k3[p], -1, -2), out=s)
        else:
            s[...] = score_fn(qb, k3[p])
        out = o3[p, r] if o3 is not None else None  # (P_b, r_b, d_v)
        if kernel == "exp2":
            t = torch.from_numpy(s)  # the same memory, no copy
            t.exp2_()  # e^score, as 2^(score log2 e): the queries carry the log2 e
            # 1 / the row sums, (P_b, r_b, 1), all finite (every e^s >= 1e-26), applied
            # as a multiply: cheaper than a divide per entry (NumPy's broadcast divide
            # of the output took 3x torch's mul_ here)
            inverse = t.sum(dim=-1, keepdim=True).reciprocal_()
            if keep:  # normalise the weights that are returned, then the second product
                t.mul_(inverse)
            if out is not None:
                np.matmul(s, v3[p], out=out)
                if not keep:  # r_b d_v multiplies instead of r_b n_k
                    torch.from_numpy(out).mul_(inverse)
            return
        if kernel == "torch":
            t = torch.from_numpy(s)
            torch.softmax(t, dim=-1, out=t)
        else:
            masked_softmax_into(s, None if m3 is None else m3[p, r], shift=not bounded)
        if out is not None:
            np.matmul(s, v3[p], out=out)

    # Blocks of query rows, so that one block of scores stays in cache while it becomes
    # weights and meets V: the (..., n_q, n_k) array then crosses memory once (kept
    # weights) or never (a scratch block), instead of once per step as in the unblocked
    # form.
    run_blocks(attend, query_blocks(pairs, n_q, block_rows))
    # v has batch dims the scores lack: one matmul over the broadcast
    if output is None:
        output = weights @ v  # (..., n_q, d_v)
    return output, (weights if need_weights else None)


def fast_online_softmax_attention(q, k, v, block_size=128, mask=None):
    """``solutions.self_attention.online_softmax_attention`` on cache-sized tiles, on
    threads.

    Arguments and result as for ``online_softmax_attention``. Query rows are taken
    ``TILE_BYTES`` of scores at a time, so the running max m, sum l, output o and the
    tile of scores stay in cache (the FlashAttention tiling); the query blocks share out
    NumPy's BLAS threads like ``fast_attention``'s. When Cauchy-Schwarz bounds every
    scaled score by 60, m stays 0 and nothing is ever rescaled.
    """
    q, k, v, mask = check_attention(q, k, v, mask, same_width=True)
    block_size = check_int(block_size, "block_size", 1)
    batch = check_batch(("q", q), ("k", k), ("v", v))
    dtype = v.dtype
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    if mask is not None:
        # (P, n_q, n_k)
        mask = flatten_batch(np.broadcast_to(mask, batch + (n_q, n_k)), batch)

    # the 1/sqrt(d_k) of eq. ch4-self-attention
    scale = dtype.type(1.0 / math.sqrt(q.shape[-1]))
    q3, k3, v3 = (flatten_batch(x.astype(dtype, copy=False), batch) for x in (q, k, v))
    output = np.empty(batch + (n_q, d_v), dtype)
    o3 = output.reshape((-1, n_q, d_v))  # (P, n_q, d_v), a view

    # every |s| = scale |q.k| <= scale |q| |k| <= 60 (Cauchy-Schwarz,
    # {eq}`ch4-cauchy-schwarz`): exp(s) is safe as it is, so m can stay 0 and nothing
    # ever needs rescaling. Checked once, before the threads start, as in
    # fast_attention.
    bounded = dot_scores_within(q3, k3, SHIFT_FREE_BOUND / float(scale))
    # shift-free, e^s is taken as 2^(s log2 e) with the log2 e in the queries' scale:
    # torch's exp2 costs 0.6 ns a float32 here against 1.4 for NumPy's exp (as in
    # fast_attention)
    q_scale = dtype.type(float(scale) * LOG2E) if bounded else scale

    def attend(block):
        p, r = block
        qb = q3[p, r] * q_scale  # (P_b, r_b, d_k), scaled here: no copy of all of q
        # running max of the scores
        m = np.full(qb.shape[:-1] + (1,), -np.inf, dtype=dtype)
        # the l of the formula: the running sum of exp(s - m)
        l = np.zeros_like(m)  # noqa: E741
        o = np.zeros(qb.shape[:-1] + (d_v,), dtype=dtype)  # running sum of exp(s - m) v
        for start in range(0, n_k, block_size):
            keys = slice(start, min(start + block_size, n_k))
            s = qb @ np.swapaxes(k3[p, keys], -1, -2)  # (P_b, r_b, b)
            if mask is not None:
                np.copyto(s, -np.inf, where=~mask[p, r, keys])
            if bounded:
                t = torch.from_numpy(s)  # the same memory
                t.exp2_()  # p = exp(s) = 2^(s log2 e), 0 where masked
                l += t.sum(dim=-1, keepdim=True).numpy()  # noqa: E741
                o += s @ v3[p, keys]
                continue
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # (P_b, r_b, 1)
            # a row with nothing allowed so far keeps m = -inf: shift by 0 there (no
            # inf - inf)
            shift = np.where(np.isfinite(m_new), m_new, dtype.type(0))
            np.subtract(s, shift, out=s)
            np.exp(s, out=s)  # p = exp(s - m'), 0 where masked
            rescale = np.exp(m - shift)  # (P_b, r_b, 1): exp(m - m'), 0 while m = -inf
            l = l * rescale + s.sum(axis=-1, keepdims=True)  # noqa: E741
            o = o * rescale + s @ v3[p, keys]  # (P_b, r_b, d_v)
            m = m_new
        # l = 0 only for a fully masked row
        o3[p, r] = o / np.where(l > 0, l, dtype.type(1))

    rows = max(1, TILE_BYTES // (min(block_size, max(n_k, 1)) * dtype.itemsize))
    run_blocks(attend, query_blocks(o3.shape[0], n_q, rows))
    return output
