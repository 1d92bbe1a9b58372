"""Tests for solutions/fast_attention.py: every fast version equals its plain reference.

The oracles are the plain references themselves (``soft_hard.attention``,
``self_attention.online_softmax_attention``), which tests/test_soft_hard.py and
tests/test_self_attention.py check against PyTorch: masks, fully masked rows, large
scores, float32 and float64, broadcast batches, every block size and 1 or 2 threads.
"""

import itertools
import math
import threading
from unittest.mock import patch

import numpy as np
import pytest
import torch
from attention_problems import online_problem
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from solutions import fast_attention as fast
from solutions.fast_attention import fast_attention, fast_online_softmax_attention
from solutions.self_attention import (
    causal_mask,
    online_softmax_attention,
    padding_mask,
    peak_memory,
)
from solutions.soft_hard import attention, masked_softmax


def _blocking_problem(seed, batch=(2, 3), n_q=13, n_k=11, d=5, d_v=4):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=batch + (n_q, d))
    k = rng.normal(size=batch + (n_k, d))
    v = rng.normal(size=batch + (n_k, d_v))
    mask = rng.random(batch + (n_q, n_k)) < 0.6
    mask[0, 1, 4] = False  # a fully masked query row
    return q, k, v, mask


# ----------------------------------------------------------------------------------------
# fast_attention == attention


def _fast(q, k, v, need_weights, **kwargs):
    """``fast_attention(..., need_weights=need_weights)``: the weights are None exactly when
    they were not asked for."""
    out, w = fast_attention(q, k, v, need_weights=need_weights, **kwargs)
    assert (w is None) == (not need_weights)
    return out, w


def _assert_weights(w, w_ref, **tolerances):
    """The returned weights equal the reference's (nothing to compare when none were asked
    for: ``_fast`` checked that they are None)."""
    if w is not None:
        np.testing.assert_allclose(w, w_ref, **tolerances)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("block_rows", [1, 2, 5, 7, 12, 13, 14, 26, 40, 1000, "auto", None])
@pytest.mark.parametrize("masked", [False, True])
def test_fast_attention_equals_plain_for_dividing_and_non_dividing_blocks(
    block_rows, masked, need_weights
):
    q, k, v, mask = _blocking_problem(0)
    mask = mask if masked else None
    out_ref, w_ref = attention(q, k, v, mask=mask)
    out, w = _fast(q, k, v, need_weights, mask=mask, block_rows=block_rows)
    _assert_weights(w, w_ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(out, out_ref, rtol=1e-13, atol=1e-15)
    assert out.shape == out_ref.shape and out.dtype == np.float64
    if masked:
        assert np.all(out[0, 1, 4] == 0)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("score", ["dot", "scaled_dot", "general", "additive", "cosine"])
def test_fast_attention_equals_plain_for_every_score(score, need_weights):
    q, k, v, mask = _blocking_problem(1, d=6)
    rng = np.random.default_rng(2)
    params = {
        "general": {"w": rng.normal(size=(6, 6))},
        "additive": {
            "w_q": rng.normal(size=(6, 3)),
            "w_k": rng.normal(size=(6, 3)),
            "v_att": rng.normal(size=3),
        },
    }.get(score, {})
    for m in (mask, None):
        out_ref, w_ref = attention(q, k, v, mask=m, score=score, **params)
        out, w = _fast(q, k, v, need_weights, mask=m, score=score, block_rows=3, **params)
        _assert_weights(w, w_ref, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(out, out_ref, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("need_weights", [True, False])
def test_fast_attention_broadcasts_batches_and_masks_like_the_plain_one(need_weights):
    rng = np.random.default_rng(3)
    q = rng.normal(size=(3, 9, 4))  # (h, n_q, d): shared by the batch
    k = rng.normal(size=(2, 1, 8, 4))  # (B, 1, n_k, d): shared by the heads
    v = rng.normal(size=(2, 3, 8, 5))
    mask = rng.random((2, 1, 1, 8)) < 0.7  # a padding mask (B, 1, 1, n_k)
    out_ref, w_ref = attention(q, k, v, mask=mask)
    for rows in (1, 4, 9, 20):
        out, w = _fast(q, k, v, need_weights, mask=mask, block_rows=rows)
        _assert_weights(w, w_ref, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(out, out_ref, rtol=1e-13, atol=1e-15)
    assert out.shape == (2, 3, 9, 5) and (w is None or w.shape == (2, 3, 9, 8))
    # values with batch dims the scores lack: the weights keep the scores' batch dims
    out, w = _fast(q[0], k[0, 0], v, need_weights, block_rows=2)  # q (9, 4), k (8, 4)
    out_ref, w_ref = attention(q[0], k[0, 0], v)  # v (2, 3, 8, 5)
    assert out.shape == (2, 3, 9, 5) and (w is None or w.shape == (9, 8))
    _assert_weights(w, w_ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(out, out_ref, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("need_weights", [True, False])
def test_fast_attention_gives_the_plain_result_on_one_and_two_blas_threads(need_weights):
    q, k, v, mask = _blocking_problem(4, batch=(4, 4), n_q=40, n_k=30)
    for m in (mask, None):  # NumPy's softmax, and the unmasked exp2 kernel
        out_ref, w_ref = attention(q, k, v, mask=m)
        for threads in (1, 2):
            with threadpool_limits(threads, user_api="blas"):  # 80 blocks
                out, w = _fast(q, k, v, need_weights, mask=m, block_rows=8)
            _assert_weights(w, w_ref, rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(out, out_ref, rtol=1e-13, atol=1e-15)


def _numpy_softmax_calls(monkeypatch):
    """Record every call of NumPy's masked_softmax_into made by fast_attention (its max
    shift flag): the unmasked dot-score kernels make none."""
    calls = []
    real = fast.masked_softmax_into
    monkeypatch.setattr(
        fast,
        "masked_softmax_into",
        lambda w, m, shift: calls.append(shift) or real(w, m, shift=shift),
    )
    return calls


def _torch_kernel_calls(monkeypatch):
    """Record every torch kernel fast_attention runs on a block: ("softmax" or "exp2",
    called on the main thread?, torch's intra-op thread count there)."""
    calls = []
    real_softmax, real_exp2 = torch.softmax, torch.Tensor.exp2_

    def record(name):
        main = threading.current_thread() is threading.main_thread()
        calls.append((name, main, torch.get_num_threads()))

    monkeypatch.setattr(
        torch, "softmax", lambda *a, **kw: record("softmax") or real_softmax(*a, **kw)
    )
    monkeypatch.setattr(torch.Tensor, "exp2_", lambda t: record("exp2") or real_exp2(t))
    return calls


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bound", [1.0, 59.0, 61.0, 1e4])
def test_fast_attention_skips_the_max_shift_only_where_cauchy_schwarz_bounds_the_scores(
    monkeypatch, dtype, bound, need_weights, bounded_scores
):
    """|q.k / sqrt(d)| <= |q| |k| / sqrt(d): below SHIFT_FREE_BOUND = 60 every exp lies in
    [1e-26, 1e26] and the shift is skipped; above it the shifted path runs. With a mask
    that is NumPy's softmax with or without its shift; without one, torch's exp2 in place
    (shift-free) or torch.softmax (shifted). Either way the weights equal the max-shifted
    softmax of the exact scores (float64 oracle)."""
    q, k, v, mask = bounded_scores(bound, n_q=6, n_k=7, seed=5)
    shifts, kernels = _numpy_softmax_calls(monkeypatch), _torch_kernel_calls(monkeypatch)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for m in (mask, None):
        shifts.clear(), kernels.clear()
        out, w = _fast(*(x.astype(dtype) for x in (q, k, v)), need_weights, mask=m)
        if m is not None:
            assert set(shifts) == {bound > fast.SHIFT_FREE_BOUND} and kernels == []
        else:
            kernel = "softmax" if bound > fast.SHIFT_FREE_BOUND else "exp2"
            assert shifts == [] and {name for name, _, _ in kernels} == {kernel}
        w_ref = masked_softmax(scores, m)  # float64, max-shifted
        assert out.dtype == dtype and (w is None or (w.dtype == dtype and np.isfinite(w).all()))
        _assert_weights(w, w_ref, rtol=rtol, atol=1e-30)
        np.testing.assert_allclose(out, w_ref @ v, rtol=rtol, atol=10 * rtol)
    assert np.all(out[1, 3] != 0)  # unmasked: query 3 of item 1 attends again


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_attention_equals_plain_on_huge_scores_and_keeps_the_dtype(dtype, need_weights):
    """Scores near +-1e4 (exp overflows without the shift), a masked key with a score far
    above every allowed one, and a fully masked row: both give the same finite weights."""
    q, k, v, mask = _blocking_problem(6, n_q=20, n_k=17)
    q, k, v = (100 * q).astype(dtype), (100 * k).astype(dtype), v.astype(dtype)
    k[..., 0, :] = 1e3 * q[..., 0, :].astype(np.float64).clip(-1, 1)  # a huge score for query 0
    mask[..., 0, 0] = False  # ... that is masked: it must not shift the row
    out_ref, w_ref = attention(q, k, v, mask=mask)
    out, w = _fast(q, k, v, need_weights, mask=mask, block_rows=6)
    assert out.dtype == dtype and np.all(np.isfinite(out))
    if w is not None:
        assert w.dtype == dtype and np.all(np.isfinite(w))
        np.testing.assert_array_equal(w == 0, w_ref == 0)  # the same entries underflow
    rtol = 1e-5 if dtype == np.float32 else 1e-13
    _assert_weights(w, w_ref, rtol=rtol, atol=1e-7 if dtype == np.float32 else 1e-15)
    np.testing.assert_allclose(out, out_ref, rtol=rtol, atol=1e-5 if dtype == np.float32 else 1e-13)
    assert np.all(out[0, 1, 4] == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
@pytest.mark.parametrize("threads", [1, 2])
def test_fast_attention_unmasked_kernels_equal_plain(monkeypatch, dtype, score, threads):
    """Unmasked, finite dot scores go through torch in place (no NumPy softmax call): exp2
    where Cauchy-Schwarz bounds them by 60 (q x 1), torch.softmax otherwise (q x 15: exp
    of the largest dot scores would overflow float32 without a shift). Every block size,
    1 and 2 threads (50 blocks at block_rows=4: shared out over 2 workers), weights kept or
    not; the dtype is kept and float32 agrees with the float64 reference to float32
    rounding."""
    calls, kernels = _numpy_softmax_calls(monkeypatch), _torch_kernel_calls(monkeypatch)
    q, k, v, _ = _blocking_problem(7, batch=(5, 2), n_q=20, n_k=33, d=8)
    rtol, atol = (1e-12, 1e-15) if dtype == np.float64 else (2e-4, 1e-6)
    seen = set()
    for q_scale in (1.0, 15.0):
        scale = 1 / math.sqrt(8) if score == "scaled_dot" else 1.0
        bounded = fast.dot_scores_within(q * q_scale * scale, k, fast.SHIFT_FREE_BOUND)
        out_ref, w_ref = attention(q * q_scale, k, v, score=score)
        for rows, need_weights in itertools.product((1, 4, 7, 20, None), (True, False)):
            kernels.clear()
            with threadpool_limits(threads, user_api="blas"):
                out, w = _fast(
                    *(x.astype(dtype) for x in (q * q_scale, k, v)),
                    need_weights,
                    score=score,
                    block_rows=rows,
                )
            assert {name for name, _, _ in kernels} == {"exp2" if bounded else "softmax"}
            seen.add(bounded)
            assert out.dtype == dtype and (w is None or w.dtype == dtype)
            _assert_weights(w, w_ref, rtol=rtol, atol=atol)
            np.testing.assert_allclose(out, out_ref, rtol=rtol, atol=10 * atol)
            if w is not None:
                np.testing.assert_allclose(w.sum(-1), 1.0, rtol=10 * rtol)
    assert calls == [] and seen == {True, False}  # both kernels ran


@pytest.mark.parametrize("need_weights", [True, False])
def test_fast_attention_pool_workers_run_torch_on_one_thread_and_restore_its_count(
    monkeypatch, need_weights
):
    """On 2 BLAS threads the blocks run on a pool of 2 workers; each must run its torch
    kernel (exp2 here: every score is within the bound) with torch's intra-op count at 1
    (2 workers each opening a 2-thread OpenMP team oversubscribe 2 cores), each on its own
    scratch buffer when the weights are not kept, and the caller's torch count must be
    back afterwards."""
    kernels = _torch_kernel_calls(monkeypatch)
    q, k, v, _ = _blocking_problem(9, batch=(4, 4), n_q=40, n_k=30)
    out_ref, w_ref = attention(q, k, v)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with threadpool_limits(2, user_api="blas"):
            out, w = _fast(q, k, v, need_weights, block_rows=8)  # 80 blocks
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
    assert len(kernels) == 80 and {name for name, _, _ in kernels} == {"exp2"}
    assert not any(main for _, main, _ in kernels)
    assert {count for _, _, count in kernels} == {1}
    _assert_weights(w, w_ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(out, out_ref, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("threads", [1, 2])
def test_fast_attention_without_weights_never_makes_the_weights_array(threads):
    """need_weights=False: the blocks' scores live in one scratch buffer per worker
    (SCRATCH_BYTES = 512 KiB each), so the peak stays below one (n, n) float32 matrix of
    4 MiB, while the call that returns weights holds all four of them (16 MiB)."""
    rng = np.random.default_rng(11)
    n, d = 1024, 16
    q, k, v = (rng.normal(size=(4, n, d)).astype(np.float32) for _ in range(3))
    with threadpool_limits(threads, user_api="blas"):
        (out, w), peak = peak_memory(fast_attention, q, k, v, need_weights=False)
        (out_kept, _), peak_kept = peak_memory(fast_attention, q, k, v)
    assert w is None and out.dtype == np.float32
    out_ref = attention(*(x.astype(np.float64) for x in (q, k, v)))[0]
    for result in (out, out_kept):  # float32 rounding, in a different order for each
        np.testing.assert_allclose(result, out_ref, rtol=1e-4, atol=1e-6)
    assert peak < n * n * 4 <= 4 * n * n * 4 <= peak_kept


# inf * 0 in that row, in the reference and in the fast version (whose workers do not see
# np.errstate): NaN, as it should be
@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan, 1e30])
def test_fast_attention_non_finite_scores_take_numpy_softmax_like_the_plain_one(
    monkeypatch, bad, need_weights
):
    """A query whose Cauchy-Schwarz bound is not finite in float32 (inf, nan, or 1e30
    entries, whose products overflow) sends the call to NumPy's softmax, which treats its
    rows exactly as the reference does (NaN where the reference gives NaN)."""
    calls = _numpy_softmax_calls(monkeypatch)
    q, k, v, _ = (x.astype(np.float32) for x in _blocking_problem(8, n_q=6, n_k=9))
    q[1, 0, 2, 3] = bad
    out_ref, w_ref = attention(q, k, v)
    out, w = _fast(q, k, v, need_weights, block_rows=2)
    assert calls and all(calls)  # NumPy's softmax ran, with the max shift
    if w is not None:
        np.testing.assert_array_equal(np.isnan(w), np.isnan(w_ref))
        assert np.all(np.isfinite(w[0])) and np.all(np.isfinite(w[1, 1]))  # rows untouched
    _assert_weights(w, w_ref, rtol=1e-5, atol=1e-7)  # NaN == NaN here
    np.testing.assert_array_equal(np.isnan(out), np.isnan(out_ref))
    np.testing.assert_allclose(out, out_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_fast_attention_takes_no_queries_like_the_plain_one(masked, need_weights):
    q, k, v, mask = _blocking_problem(10)
    q, mask = q[..., :0, :], (mask[..., :0, :] if masked else None)  # 0 queries
    out_ref, w_ref = attention(q, k, v, mask=mask)
    out, w = _fast(q, k, v, need_weights, mask=mask)
    assert out.shape == out_ref.shape == (2, 3, 0, 4)
    assert w is None or w.shape == w_ref.shape == (2, 3, 0, 11)


def test_fast_attention_validates_like_the_plain_one():
    q, k, v, _ = _blocking_problem(5)
    with pytest.raises(ValueError, match="block_rows >= 1"):
        fast_attention(q, k, v, block_rows=0)
    with pytest.raises(TypeError, match="block_rows to be an integer"):
        fast_attention(q, k, v, block_rows=2.5)
    with pytest.raises(TypeError, match="need_weights to be True or False, got 'no'"):
        fast_attention(q, k, v, need_weights="no")
    for bad in (
        dict(v=v[..., :5, :]),  # one value per key
        dict(k=k[..., :3]),  # widths differ
        dict(k=k[..., :0, :], v=v[..., :0, :]),  # no keys: a softmax over nothing
        dict(mask=np.ones((4, 5), bool)),  # a mask of the wrong shape
        dict(score="bilinear"),
    ):
        args = dict(q=q, k=k, v=v) | bad
        with pytest.raises(ValueError) as plain:
            attention(**args)
        for need_weights in (True, False):
            with pytest.raises(ValueError) as ours:
                fast_attention(**args, need_weights=need_weights)
            assert str(ours.value) == str(plain.value)
        if "k" in bad and bad["k"].shape[-2] == 0:
            assert "at least one key" in str(plain.value)


# ----------------------------------------------------------------------------------------
# fast_online_softmax_attention == online_softmax_attention


@pytest.mark.parametrize("block_size", [1, 3, 8, 16, 24, 25, 100])
@pytest.mark.parametrize("with_mask", [False, True])
def test_fast_online_softmax_equals_plain_for_every_block_size(block_size, with_mask):
    q, k, v, mask = online_problem(block_size, batch=(2, 3), d=8, d_v=5, p_keep=0.3, q_scale=4)
    if with_mask:
        mask[0, 1, 4] = False  # a fully masked row
        mask[1, 2, 7, :20] = False  # a row whose only keys sit in the last block
    else:
        mask = None
    ref = online_softmax_attention(q, k, v, block_size=block_size, mask=mask)
    out = fast_online_softmax_attention(q, k, v, block_size=block_size, mask=mask)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-13)
    if with_mask:
        assert np.all(out[0, 1, 4] == 0.0)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n_q=st.integers(1, 12),
    n_k=st.integers(1, 40),
    block_size=st.integers(1, 45),
    p_keep=st.floats(0.0, 1.0),
    dtype=st.sampled_from([np.float32, np.float64]),
    threads=st.sampled_from([1, 2]),
)
def test_fast_online_softmax_equals_plain_one_query_row_per_tile_on_threads(
    seed, n_q, n_k, block_size, p_keep, dtype, threads
):
    """What only the fast version does: tiles of query rows shared out over threads. With a
    tile of one row (TILE_BYTES patched to 1) there are 3 n_q >= 3 tiles, on 2 threads
    whenever there are at least 4; float32 stays float32 and agrees with the plain version
    to float32 rounding. The plain version alone is checked against attention on the same
    kind of problem in tests/test_self_attention.py."""
    q, k, v, mask = (
        x.astype(dtype) if x.dtype != bool else x
        for x in online_problem(seed, batch=(3,), n_q=n_q, n_k=n_k, p_keep=p_keep)
    )
    with patch.object(fast, "TILE_BYTES", 1), threadpool_limits(threads, user_api="blas"):
        out = fast_online_softmax_attention(q, k, v, block_size=block_size, mask=mask)
    ref = online_softmax_attention(q, k, v, block_size=block_size, mask=mask)
    assert out.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    assert np.all(out[~mask.any(-1)] == 0.0)


def test_fast_online_softmax_accepts_broadcast_masks_and_threads():
    rng = np.random.default_rng(1)
    q, k, v = (
        rng.normal(size=(3, 2, 6, 4)),
        rng.normal(size=(3, 2, 11, 4)),
        rng.normal(size=(3, 2, 11, 4)),
    )
    rows = np.array([True, False, True, True, False, True])[:, None]  # (n_q, 1)
    for mask in (padding_mask(np.array([11, 0, 5]), 11)[:, None], causal_mask(11)[:6], rows):
        ref = online_softmax_attention(q, k, v, block_size=4, mask=mask)
        for threads in (1, 2):
            with threadpool_limits(threads, user_api="blas"):
                out = fast_online_softmax_attention(q, k, v, block_size=4, mask=mask)
            np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-13)


def test_fast_online_softmax_keeps_float32_and_a_small_peak():
    rng = np.random.default_rng(3)
    n, d = 2048, 16
    q, k, v = (rng.normal(size=(n, d)).astype(np.float32) for _ in range(3))
    out, peak = peak_memory(fast_online_softmax_attention, q, k, v, block_size=64)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, attention(q, k, v)[0], rtol=1e-4, atol=1e-5)
    assert peak < n * n * 4 / 10  # far below one (n, n) float32 matrix


def test_fast_online_softmax_validates_like_the_plain_one():
    q, k, v = np.ones((4, 3)), np.ones((5, 3)), np.ones((5, 2))
    for args in (
        (np.ones((4, 2)), k, v),
        (q, k, np.ones((6, 2))),
        (q, np.ones((0, 3)), np.ones((0, 2))),  # no keys
        (q, k, v, 0),
        (q, k, v, 128, np.ones((4, 4), dtype=bool)),
    ):
        with pytest.raises(ValueError) as plain:
            online_softmax_attention(*args)
        with pytest.raises(ValueError) as ours:
            fast_online_softmax_attention(*args)
        assert str(ours.value) == str(plain.value)
