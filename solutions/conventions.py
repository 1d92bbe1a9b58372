"""The conventions every chapter shares, written once (see ``docs/conventions.md``).

- ``as_float``: the one float conversion (float32/float64 kept, ints become float64).
- ``check_mask``, ``check_shape``, ``check_int``, ``check_batch``: argument validators
  whose errors name the argument, the expected shape in named dimensions and what was
  received; ``check_attention``: all of them for the ``(q, k, v, mask)`` of an
  attention function, and ``check_projections`` for the weight matrices that make
  q, k, v from a sequence, so that a function's validation is one line.
- ``masked_softmax`` (NumPy) and ``masked_softmax_torch`` (its differentiable twin): the
  max-shifted softmax over the last axis, with masks where True = "may attend"; a row
  with no allowed key gets all-zero weights, never NaN.
- ``masked_softmax_into``: the same masked softmax worked in place on a scores buffer,
  the step that cache-blocked attention repeats block by block.
- ``query_blocks``, ``run_blocks``, ``flatten_batch``, ``BLOCK_BYTES``, ``TILE_BYTES``:
  how the attention functions cut their work into cache-sized blocks of query rows and
  share them out over NumPy's BLAS threads.

Chapter modules import from here instead of carrying their own copies.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

__all__ = [
    "as_float",
    "check_int",
    "check_shape",
    "check_batch",
    "check_mask",
    "check_attention",
    "check_projections",
    "softmax",
    "masked_softmax",
    "masked_softmax_into",
    "masked_softmax_torch",
    "BLOCK_BYTES",
    "TILE_BYTES",
    "SHIFT_FREE_BOUND",
    "dot_scores_within",
    "flatten_batch",
    "query_blocks",
    "run_blocks",
]

#: Bytes of scores per block in the attention functions: 4 MiB (2**20 float32 scores). A
#: block's scores, and the weights made from them in place, stay in the last-level cache
#: while every pass runs over them, and a block holds enough query rows (256 at n_k
#: = 4096) that its matrix products and NumPy calls run at full speed. Measured with
#: bench/attention.py on the 2-core AMD EPYC of CI (L2 1 MiB per core, L3 32 MiB): at
#: n_k = 4096, blocks of 512 KiB (32 rows) took 1.4x the time of 4 MiB blocks; at n_k
#: = 512, every size from 512 KiB to 8 MiB was within 5 % of the others.
BLOCK_BYTES = 2**22
#: Bytes of scores per tile in ``online_softmax_attention``: 512 KiB. Its scores are
#: transient (the weights are never kept), so a smaller tile keeps its peak memory low
#: (about 2 MiB at n = 4096, d = 64) at no cost in speed on that machine.
TILE_BYTES = 2**19


# --------------------------------------------------------------------------------------
# validators


def as_float(x, name: str) -> np.ndarray:
    """``x`` as a real floating array: float32/float64 are kept, other numbers become
    float64."""
    x = np.asarray(x)
    if x.dtype == bool or not np.issubdtype(x.dtype, np.number):
        raise TypeError(f"expected {name} to be a numeric array, got dtype {x.dtype}")
    if np.issubdtype(x.dtype, np.complexfloating):
        raise TypeError(f"expected {name} to be a real array, got dtype {x.dtype}")
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    return x


def check_int(value, name: str, minimum: int) -> int:
    """An integer ``>= minimum`` (bools are not integers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"expected {name} to be an integer, got {value!r} of type "
            f"{type(value).__name__}"
        )
    if value < minimum:
        raise ValueError(f"expected {name} >= {minimum}, got {name}={value}")
    return int(value)


def check_shape(
    x: np.ndarray, expected: tuple, name: str, dims: str, context: str = ""
) -> None:
    """Raise unless ``x.shape == expected``; ``dims`` names the axes, e.g.
    ``"(d_dec, d_att)"``.

    A transposed 2-D weight gets "did you transpose <name>?"; ``context`` says where the
    expected sizes come from (e.g. "s_prev is (3, 4)").
    """
    if x.shape == tuple(expected):
        return
    hint = (
        f" (did you transpose {name}?)"
        if x.ndim == 2 and x.shape[::-1] == tuple(expected)
        else ""
    )
    where = f": {context}" if context else ""
    raise ValueError(
        f"expected {name} of shape {dims} = {tuple(expected)}, got "
        f"{x.shape}{where}{hint}"
    )


def check_batch(*arrays: tuple[str, np.ndarray]) -> tuple:
    """The broadcast batch shape (all axes but the last two) of named ``(..., n, d)``
    arrays."""
    for name, x in arrays:
        if x.ndim < 2:
            raise ValueError(
                f"expected {name} of shape (..., n, d) with at least 2 dims, got "
                f"{x.shape}"
            )
    try:
        return np.broadcast_shapes(*(x.shape[:-2] for _, x in arrays))
    except ValueError:
        shapes = ", ".join(f"{name} {x.shape}" for name, x in arrays)
        raise ValueError(
            f"expected the batch dims (all but the last two) to broadcast, got {shapes}"
        ) from None


def check_mask(
    mask, shape: tuple, name: str = "scores", context: str = ""
) -> np.ndarray:
    """A boolean mask (True = may attend) broadcastable to ``shape``, returned as an
    array.

    ``name`` says what ``shape`` is ("scores", "(..., n_q, n_kv)"); ``context`` is added
    to the error (e.g. "one mask for all heads").
    """
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(
            f"expected a boolean mask (True = may attend), got dtype {mask.dtype}: "
            "use mask.astype(bool), or `mask == 1` if 1 marks the keys that may be "
            "attended"
        )
    try:
        out = np.broadcast_shapes(mask.shape, shape)
    except ValueError:
        out = None
    if out != tuple(shape):
        raise ValueError(
            f"expected a mask broadcastable to the {name} shape {tuple(shape)}, got "
            f"mask of shape {mask.shape}" + (f" ({context})" if context else "")
        )
    return mask


def check_attention(q, k, v, mask=None, same_width: bool = False):
    """The validated ``(q, k, v, mask)`` of an attention function.

    q: (..., n_q, d_q), k: (..., n_k, d_k), v: (..., n_k, d_v), as float arrays
    (``as_float``) with batch dims that broadcast; ``same_width`` demands d_q = d_k (a
    dot-product score). v takes the dtype of q and k, the precision of the scores
    (float32 stays float32).
    mask: None, or a boolean mask broadcastable to the scores (..., n_q, n_k), returned
    broadcast to that shape (a read-only view, no copy).
    """
    q, k, v = as_float(q, "q"), as_float(k, "k"), as_float(v, "v")
    batch = check_batch(("q", q), ("k", k))  # the batch dims of the scores
    if same_width and q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"expected keys of width {q.shape[-1]} to match queries, got "
            f"{k.shape[-1]}: q has shape {q.shape}, k has shape {k.shape}"
        )
    if v.ndim < 2 or v.shape[-2] != k.shape[-2]:
        raise ValueError(
            "expected one value per key: values (..., n_k, d_v) with n_k = "
            f"{k.shape[-2]} as in keys {k.shape}, got values of shape {v.shape}"
        )
    if k.shape[-2] == 0:
        raise ValueError(
            "expected at least one key (n_k >= 1): a softmax over no keys has no "
            f"weights, got keys of shape {k.shape}"
        )
    check_batch(("q", q), ("k", k), ("v", v))
    if mask is not None:
        scores = batch + (q.shape[-2], k.shape[-2])
        mask = np.broadcast_to(check_mask(mask, scores), scores)
    return q, k, v.astype(np.result_type(q, k), copy=False), mask


def check_projections(
    *projections: tuple[str, np.ndarray, str, object],
) -> list[np.ndarray]:
    """The float weights of projections ``x @ w``, each given as
    ``(x_name, x, w_name, w)``.

    x: an already checked ``(..., n, d_in)`` array; w must be ``(d_in, d_out)``: 2-D,
    with as many rows as x has features. Returns the weights as float arrays
    (``as_float``), in order.
    """
    weights = []
    for x_name, x, w_name, w in projections:
        w = as_float(w, w_name)
        if w.ndim != 2 or w.shape[0] != x.shape[-1]:
            raise ValueError(
                f"expected {w_name} of shape (d_in, d_out) with d_in = {x.shape[-1]} "
                f"(the width of {x_name} {x.shape}), got {w.shape}: the projection is "
                f"{x_name} @ {w_name}"
            )
        weights.append(w)
    return weights


# --------------------------------------------------------------------------------------
# softmax


def _row_shift(scores: np.ndarray, mask, axis: int = -1) -> np.ndarray:
    """The max of each row over its allowed entries; 0 for a row with none (no
    inf - inf)."""
    if mask is None:
        m = np.max(scores, axis=axis, keepdims=True)
    else:
        m = np.max(scores, axis=axis, keepdims=True, where=mask, initial=-np.inf)
    return np.where(np.isfinite(m), m, 0.0).astype(scores.dtype, copy=False)


#: scores bounded by this in absolute value are exponentiated without the max shift:
#: e^60 ~ 1e26 and e^-60 ~ 1e-26, far inside float32 ({eq}`ch4-cauchy-schwarz`)
SHIFT_FREE_BOUND = 60.0


def dot_scores_within(q: np.ndarray, k: np.ndarray, bound: float) -> bool:
    """True when every ``|q_i . k_j| <= bound`` is guaranteed by Cauchy-Schwarz,
    ``|q_i . k_j| <= max_i |q_i| max_j |k_j|`` (O((n_q + n_k) d) work, no scores
    formed). False for NaN or infinite inputs."""
    sq = lambda x: np.einsum("...i,...i->...", x, x).max(initial=0.0)  # noqa: E731
    return bool(np.sqrt(sq(q)) * np.sqrt(sq(k)) <= bound)


def masked_softmax_into(
    scores: np.ndarray, mask=None, axis: int = -1, shift: bool = True
) -> np.ndarray:
    """Turn a float ``scores`` buffer into masked-softmax weights IN PLACE and return
    it.

    The same formula as ``masked_softmax`` without any allocation of the scores' size:
    shift by the row max of the allowed entries, exponentiate, zero the masked entries,
    divide by the row sum (rows with nothing allowed stay all zero). ``mask`` must
    already be a validated boolean array broadcastable to ``scores`` (or None).
    ``shift=False`` skips the max shift (two passes over the buffer): only for a caller
    that knows every score lies in [-60, 60], where exp neither overflows nor
    underflows.
    """
    if shift:  # then <= 0 on allowed entries
        np.subtract(scores, _row_shift(scores, mask, axis), out=scores)
    if mask is None:
        np.exp(scores, out=scores)  # in (0, 1]; -inf scores give exactly 0
    else:
        np.exp(scores, out=scores, where=mask)
        np.copyto(
            scores, 0.0, where=~mask
        )  # masked keys: exactly 0 (even if their score was +-inf)
    total = np.sum(scores, axis=axis, keepdims=True)  # (..., 1)
    # empty rows: 0
    scale = np.divide(1.0, total, out=np.zeros_like(total), where=total > 0)
    # a multiply is cheaper than a divide per entry
    np.multiply(scores, scale, out=scores)
    return scores


def softmax(scores, axis: int = -1) -> np.ndarray:
    """Max-shifted softmax along ``axis``, {eq}`ch2-softmax`.

    scores: (..., n) real array (float32 stays float32; ints become float64).
    Returns weights of the same shape, non-negative, summing to 1 along ``axis``.
    Entries equal to ``-inf`` get weight exactly 0; a slice that is all ``-inf`` gets
    all zeros (not NaN), the convention of a fully masked row (``docs/conventions.md``).
    """
    scores = as_float(scores, "scores")
    if scores.ndim == 0:
        raise ValueError("expected scores with at least 1 dim, got a scalar")
    return masked_softmax_into(scores.copy(), None, axis=axis)


def masked_softmax(scores, mask=None) -> np.ndarray:
    """Softmax over the last axis that gives masked-out keys exactly zero weight,
    {eq}`ch2-masked-softmax`.

    scores: (..., n_q, n_k) real array.
    mask:   boolean, broadcastable to (..., n_q, n_k), True = "may attend"; None = all.
    Returns weights (..., n_q, n_k): rows sum to 1 over the allowed keys, masked entries
    are exactly 0, and a row with no allowed key is all zeros (no NaN, no warning).
    The max runs over the allowed keys only, so a large masked score cannot shift a row.
    """
    scores = as_float(scores, "scores")
    if scores.ndim == 0:
        raise ValueError("expected scores of shape (..., n_q, n_k), got a scalar")
    if mask is not None:
        mask = check_mask(mask, scores.shape)
    return masked_softmax_into(scores.copy(), mask)


def masked_softmax_torch(scores, mask=None):
    """The torch twin of ``masked_softmax`` over the last axis (differentiable).

    scores: tensor (..., n_k); mask: bool tensor broadcastable to it, True = may attend,
    or None. Max-shifted; masked entries are exactly 0 and a row with no allowed key is
    all zeros, with zero (finite) gradients there.
    """
    if mask is None:
        return scores.softmax(dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    empty = ~mask.any(dim=-1, keepdim=True)  # rows with nothing allowed
    # finite there, so the softmax stays NaN-free
    scores = scores.masked_fill(empty, 0.0)
    return scores.softmax(dim=-1).masked_fill(~mask, 0.0)


# --------------------------------------------------------------------------------------
# cache blocking


def flatten_batch(x: np.ndarray, batch: tuple) -> np.ndarray:
    """(..., a, b) broadcast to batch + (a, b), as (prod(batch), a, b); a view when it
    can be."""
    return np.broadcast_to(x, batch + x.shape[-2:]).reshape(
        (math.prod(batch),) + x.shape[-2:]
    )


def query_blocks(pairs: int, n_q: int, rows: int) -> list[tuple[slice, slice]]:
    """(pair slice, query-row slice) blocks of about ``rows`` query rows covering
    (pairs, n_q).

    A pair is one (batch, head) problem; when a pair has at most ``rows`` queries a
    block holds several whole pairs, otherwise a slab of ``rows`` query rows of one
    pair.
    """
    if rows >= n_q:  # several whole pairs per block
        step = max(1, rows // max(n_q, 1))
        return [
            (slice(p, min(p + step, pairs)), slice(0, n_q))
            for p in range(0, pairs, step)
        ]
    return [
        (slice(p, p + 1), slice(r, min(r + rows, n_q)))
        for p in range(pairs)
        for r in range(0, n_q, rows)
    ]


def run_blocks(work, blocks: list) -> None:
    """``work(block)`` for every block: in turn, or on as many threads as NumPy's BLAS
    may use (threadpoolctl limits apply), each block's matrix products, and its torch
    ops if torch is loaded, then single-threaded.

    NumPy releases the GIL inside ufuncs and matmul, so the threads run in parallel; the
    blocks write disjoint slices of the output, so the result does not depend on the
    order.
    """
    blas = _numpy_blas()
    threads = (
        1
        if len(blocks) < 4
        else max((lib.num_threads for lib in blas.lib_controllers), default=1)
    )
    if threads == 1:
        for block in blocks:
            work(block)
        return
    with blas.limit(limits=1), _torch_threads(1), ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(work, blocks):
            pass  # re-raises the first exception of a block


@contextlib.contextmanager
def _torch_threads(count: int):
    """torch's intra-op thread count set to ``count`` inside, restored after; nothing
    when torch is not loaded (blocks that use torch import it first).

    A thread takes torch's process-wide count when it first runs a torch op, so the
    pool's fresh workers each run torch.softmax (fast_attention) on one thread instead
    of opening an OpenMP team of their own: 2 workers x 2 torch threads on 2 cores
    measured 2.5x the two BLAS products alone under load, against 1.45x pinned. While
    the pool runs, a thread that runs its first torch op elsewhere in the process also
    gets ``count``.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@functools.cache
def _numpy_blas() -> ThreadpoolController:
    """NumPy's BLAS, found once (a threadpoolctl scan of the loaded libraries takes
    ms)."""
    return ThreadpoolController().select(user_api="blas")
