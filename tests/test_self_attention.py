"""solutions.self_attention against independent oracles (PyTorch's fused attention, loops,
complex exponentials, naive attention) in float64, plus the properties chapter 4 proves."""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions.fast_attention import fast_online_softmax_attention
from solutions.self_attention import (
    causal_mask,
    local_mask,
    offset_rotation,
    online_softmax_attention,
    padding_mask,
    peak_memory,
    rotary,
    self_attention,
    sinusoidal_positions,
)
from solutions.soft_hard import attention

SETTINGS = settings(max_examples=30, deadline=None)


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def random_problem(seed, batch=(2,), n=7, d_in=6, d_k=4, d_v=5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=batch + (n, d_in))
    w_q, w_k = rng.normal(size=(d_in, d_k)), rng.normal(size=(d_in, d_k))
    w_v = rng.normal(size=(d_in, d_v))
    return rng, x, w_q, w_k, w_v


def sdpa_self_attention(x, w_q, w_k, w_v, mask=None, is_causal=False):
    """The oracle: project in torch and call the fused scaled_dot_product_attention."""
    q, k, v = t(x) @ t(w_q), t(x) @ t(w_k), t(x) @ t(w_v)
    m = None if mask is None else t(mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=is_causal).numpy()


def torch_weights(q, k, mask=None):
    """Reference weights: masked_fill(-inf) then torch.softmax."""
    scores = t(q) @ t(k).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~t(mask), float("-inf"))
    return torch.softmax(scores, dim=-1).numpy()


# ----------------------------------------------------------------------------------------
# self_attention vs torch


@SETTINGS
@given(seed=st.integers(0, 2**31), n=st.integers(1, 9), b=st.integers(1, 3), d_k=st.integers(1, 6))
def test_self_attention_matches_torch_sdpa_with_random_masks(seed, n, b, d_k):
    rng, x, w_q, w_k, w_v = random_problem(seed, batch=(b,), n=n, d_k=d_k)
    mask = rng.random((b, n, n)) < 0.6
    mask[:, np.arange(n), rng.integers(0, n, size=n)] = (
        True  # every query sees a key: SDPA gives NaN otherwise
    )
    out, weights = self_attention(x, w_q, w_k, w_v, mask=mask)
    np.testing.assert_allclose(
        out, sdpa_self_attention(x, w_q, w_k, w_v, mask), rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(
        weights, torch_weights(x @ w_q, x @ w_k, mask), rtol=1e-10, atol=1e-14
    )


@pytest.mark.parametrize("n", [1, 5, 16])
def test_causal_mask_matches_torch_is_causal(n):
    _, x, w_q, w_k, w_v = random_problem(n, batch=(3, 2), n=n)
    out, weights = self_attention(x, w_q, w_k, w_v, mask=causal_mask(n))
    np.testing.assert_allclose(
        out, sdpa_self_attention(x, w_q, w_k, w_v, is_causal=True), rtol=1e-10, atol=1e-12
    )
    assert np.all(weights[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0.0)


def test_padding_mask_matches_sdpa_key_padding():
    rng, x, w_q, w_k, w_v = random_problem(3, batch=(4,), n=6)
    lens = np.array([6, 1, 3, 4])
    out, weights = self_attention(
        x, w_q, w_k, w_v, mask=padding_mask(lens, 6)
    )  # (4, 1, 6) broadcasts
    keep = np.arange(6)[None, None, :] < lens[:, None, None]  # (4, 1, 6), built independently
    np.testing.assert_allclose(
        out, sdpa_self_attention(x, w_q, w_k, w_v, keep), rtol=1e-10, atol=1e-12
    )
    for i, n_valid in enumerate(lens):
        assert np.all(weights[i, :, n_valid:] == 0.0)


def test_self_attention_is_attention_on_projections():
    _, x, w_q, w_k, w_v = random_problem(4)
    out, weights = self_attention(x, w_q, w_k, w_v)
    ref_out, ref_w = attention(x @ w_q, x @ w_k, x @ w_v)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12)
    np.testing.assert_allclose(weights, ref_w, rtol=1e-12)


def test_float32_stays_float32():
    _, x, w_q, w_k, w_v = random_problem(5)
    out, weights = self_attention(*(a.astype(np.float32) for a in (x, w_q, w_k, w_v)))
    assert out.dtype == np.float32 and weights.dtype == np.float32


# ----------------------------------------------------------------------------------------
# properties


@SETTINGS
@given(seed=st.integers(0, 2**31), n=st.integers(1, 8), p_keep=st.floats(0.0, 1.0))
def test_weights_rows_sum_to_one_and_masked_positions_are_exactly_zero(seed, n, p_keep):
    rng, x, w_q, w_k, w_v = random_problem(seed, n=n)
    mask = rng.random((2, n, n)) < p_keep
    out, weights = self_attention(x, w_q, w_k, w_v, mask=mask)
    assert np.all(weights[~mask] == 0.0)
    rows = mask.any(axis=-1)
    np.testing.assert_allclose(weights.sum(-1)[rows], 1.0, rtol=1e-12)
    assert np.all(weights.sum(-1)[~rows] == 0.0) and np.all(out[~rows] == 0.0)
    assert np.all(np.isfinite(out))


def test_fully_masked_row_gives_zero_weights_and_zero_output():
    _, x, w_q, w_k, w_v = random_problem(6, n=4)
    mask = np.ones((4, 4), dtype=bool)
    mask[2] = False
    out, weights = self_attention(x, w_q, w_k, w_v, mask=mask)
    assert np.all(weights[:, 2] == 0.0) and np.all(out[:, 2] == 0.0)
    assert np.all(np.isfinite(out))


@SETTINGS
@given(seed=st.integers(0, 2**31), n=st.integers(2, 9))
def test_self_attention_without_positions_is_permutation_equivariant(seed, n):
    rng, x, w_q, w_k, w_v = random_problem(seed, n=n)
    perm = rng.permutation(n)
    out, weights = self_attention(x, w_q, w_k, w_v)
    out_p, weights_p = self_attention(x[:, perm], w_q, w_k, w_v)
    np.testing.assert_allclose(out_p, out[:, perm], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[:, perm][:, :, perm], rtol=1e-10, atol=1e-14)


def test_sinusoidal_positions_break_permutation_equivariance():
    rng, x, w_q, w_k, w_v = random_problem(7, n=6)
    pe = sinusoidal_positions(6, x.shape[-1])
    perm = np.array([1, 0, 2, 3, 4, 5])
    out, _ = self_attention(x + pe, w_q, w_k, w_v)
    out_p, _ = self_attention(x[:, perm] + pe, w_q, w_k, w_v)
    assert not np.allclose(out_p, out[:, perm])


def test_causal_output_at_t_does_not_depend_on_later_inputs():
    _, x, w_q, w_k, w_v = random_problem(8, n=9)
    out, _ = self_attention(x, w_q, w_k, w_v, mask=causal_mask(9))
    for t_ in range(9):
        changed = x.copy()
        changed[:, t_ + 1 :] = np.random.default_rng(t_).normal(size=changed[:, t_ + 1 :].shape)
        out_c, _ = self_attention(changed, w_q, w_k, w_v, mask=causal_mask(9))
        np.testing.assert_array_equal(out_c[:, : t_ + 1], out[:, : t_ + 1])


# ----------------------------------------------------------------------------------------
# masks vs loops


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_causal_mask_matches_loop(n):
    expected = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            expected[i, j] = j <= i
    mask = causal_mask(n)
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, expected)


@pytest.mark.parametrize("n, window", [(1, 0), (6, 0), (6, 1), (7, 2), (5, 4), (5, 10)])
def test_local_mask_matches_loop(n, window):
    expected = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(max(0, i - window), min(n, i + window + 1)):
            expected[i, j] = True
    mask = local_mask(n, window)
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, expected)
    assert mask.sum(-1).max() <= 2 * window + 1


def test_local_mask_rejects_negative_window():
    with pytest.raises(ValueError, match="window"):
        local_mask(5, -1)
    with pytest.raises(TypeError):
        local_mask(5, 1.5)


def test_padding_mask_matches_loop():
    lens = np.array([[0, 3], [5, 1]])
    mask = padding_mask(lens, 5)
    assert mask.shape == (2, 2, 1, 5) and mask.dtype == bool
    for a in range(2):
        for b in range(2):
            for j in range(5):
                assert mask[a, b, 0, j] == (j < lens[a, b])


def test_padding_mask_rejects_lengths_outside_range():
    with pytest.raises(ValueError, match=r"\[0, 4\]"):
        padding_mask(np.array([2, 5]), 4)
    with pytest.raises(TypeError):
        padding_mask(np.array([1.5]), 4)


# ----------------------------------------------------------------------------------------
# positions


@pytest.mark.parametrize("n, d", [(1, 2), (10, 8), (7, 5), (50, 32)])
def test_sinusoidal_positions_match_formula(n, d):
    pe = sinusoidal_positions(n, d)
    assert pe.shape == (n, d) and pe.dtype == np.float64
    for pos in range(n):
        for col in range(d):
            freq = 1.0 / 10000 ** ((col - col % 2) / d)
            expected = math.sin(pos * freq) if col % 2 == 0 else math.cos(pos * freq)
            assert pe[pos, col] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("k", [0, 1, 5, -3, 40])
def test_sinusoidal_offset_is_a_fixed_rotation_per_frequency_pair(k):
    n, d = 100, 16
    pe = sinusoidal_positions(n, d)
    z = pe[:, 1::2] + 1j * pe[:, 0::2]  # pair i as cos + i sin = exp(i t w_i)
    ts = np.arange(max(0, -k), min(n, n - k))  # t and t + k both in range
    rotation = z[ts + k] / z[ts]  # must be exp(i k w_i), the same for every t
    freqs = 10000.0 ** (-np.arange(0, d, 2) / d)
    np.testing.assert_allclose(
        rotation, np.broadcast_to(np.exp(1j * k * freqs), rotation.shape), atol=1e-9
    )
    r = offset_rotation(k, d)
    np.testing.assert_allclose(pe[ts] @ r, pe[ts + k], atol=1e-9)
    np.testing.assert_allclose(r @ r.T, np.eye(d), atol=1e-12)  # orthogonal: a rotation
    assert np.linalg.det(r) == pytest.approx(1.0)


def test_offset_rotation_rejects_odd_width():
    with pytest.raises(ValueError, match="even"):
        offset_rotation(1, 5)


# ----------------------------------------------------------------------------------------
# online softmax


@pytest.mark.parametrize("block_size", [1, 3, 8, 16, 24, 25, 100])
@pytest.mark.parametrize("with_mask", [False, True])
def test_online_softmax_equals_naive_for_dividing_and_non_dividing_blocks(block_size, with_mask):
    rng = np.random.default_rng(block_size)
    q, k, v = (
        rng.normal(size=(2, 3, 10, 8)),
        rng.normal(size=(2, 3, 24, 8)),
        rng.normal(size=(2, 3, 24, 5)),
    )
    q *= 4.0  # large scores: the running max matters
    mask = None
    if with_mask:
        mask = rng.random((2, 3, 10, 24)) < 0.3
        mask[0, 1, 4] = False  # a fully masked row
        mask[1, 2, 7, :20] = False  # a row whose only keys sit in the last block
    ref = attention(q, k, v, mask=mask)[0]
    out = online_softmax_attention(q, k, v, block_size=block_size, mask=mask)
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)
    if with_mask:
        assert np.all(out[0, 1, 4] == 0.0)


@SETTINGS
@given(
    seed=st.integers(0, 2**31),
    n_q=st.integers(1, 12),
    n_k=st.integers(1, 40),
    block_size=st.integers(1, 45),
    p_keep=st.floats(0.0, 1.0),
)
def test_online_softmax_equals_naive_property(seed, n_q, n_k, block_size, p_keep):
    rng = np.random.default_rng(seed)
    q, k, v = (
        rng.normal(size=(2, n_q, 4)) * 3,
        rng.normal(size=(2, n_k, 4)),
        rng.normal(size=(2, n_k, 3)),
    )
    mask = rng.random((2, n_q, n_k)) < p_keep
    out = online_softmax_attention(q, k, v, block_size=block_size, mask=mask)
    np.testing.assert_allclose(out, attention(q, k, v, mask=mask)[0], rtol=1e-10, atol=1e-10)
    assert np.all(out[~mask.any(-1)] == 0.0)


@pytest.mark.parametrize("online", [online_softmax_attention, fast_online_softmax_attention])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bound", [1.0, 59.0, 61.0, 1e4])
def test_online_softmax_is_exact_with_and_without_the_running_max(
    online, dtype, bound, bounded_scores
):
    """Scores bounded below and above SHIFT_FREE_BOUND = 60 (where the fast version keeps
    m = 0 and never rescales, and above which its running max runs): the plain and the fast
    online softmax give the max-shifted attention of the exact scores (float64 oracle),
    fully masked rows 0."""
    q, k, v, mask = bounded_scores(bound, n_q=20, n_k=23, seed=6)
    reference, _ = attention(q, k, v, mask=mask)  # float64
    out = online(q.astype(dtype), k.astype(dtype), v.astype(dtype), block_size=4, mask=mask)
    assert out.dtype == dtype and np.all(np.isfinite(out))
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, reference, rtol=rtol, atol=10 * rtol)
    assert np.all(out[1, 3] == 0)


def test_online_softmax_accepts_broadcast_masks():
    rng = np.random.default_rng(1)
    q, k, v = (
        rng.normal(size=(3, 2, 6, 4)),
        rng.normal(size=(3, 2, 11, 4)),
        rng.normal(size=(3, 2, 11, 4)),
    )
    for mask in (
        padding_mask(np.array([11, 0, 5]), 11)[:, None],
        causal_mask(11)[:6],
        np.arange(11) < 4,
    ):
        out = online_softmax_attention(q, k, v, block_size=4, mask=mask)
        np.testing.assert_allclose(out, attention(q, k, v, mask=mask)[0], rtol=1e-10, atol=1e-10)
    # a key-broadcast mask (..., n_q, 1) switches whole query rows on or off
    rows = np.array([True, False, True, True, False, True])[:, None]
    out = online_softmax_attention(q, k, v, block_size=4, mask=rows)
    np.testing.assert_allclose(out, attention(q, k, v, mask=rows)[0], rtol=1e-10, atol=1e-10)


def test_online_softmax_keeps_float32():
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(5, 8)).astype(np.float32) for _ in range(3))
    out = online_softmax_attention(q, k, v, block_size=3)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, attention(q, k, v)[0], rtol=1e-5, atol=1e-6)


def test_online_softmax_never_materialises_the_score_matrix():
    rng = np.random.default_rng(3)
    n, d = 2048, 16
    q, k, v = rng.normal(size=(n, d)), rng.normal(size=(n, d)), rng.normal(size=(n, d))
    _, peak_online = peak_memory(online_softmax_attention, q, k, v, block_size=64)
    _, peak_naive = peak_memory(attention, q, k, v)
    assert peak_naive >= n * n * 8  # the naive path holds at least one (n, n) float64 matrix
    assert peak_online < n * n * 8 / 10


def test_peak_memory_counts_numpy_buffers():
    result, peak = peak_memory(np.ones, 1_000_000)
    assert result.shape == (1_000_000,) and peak >= 8_000_000


# ----------------------------------------------------------------------------------------
# errors that name the shapes


def test_self_attention_rejects_mismatched_widths():
    _, x, w_q, w_k, w_v = random_problem(9)
    with pytest.raises(ValueError, match=r"w_q.*\(5, 4\)"):
        self_attention(x, w_q[:5], w_k, w_v)
    with pytest.raises(ValueError, match=r"same width d_k"):
        self_attention(x, w_q, w_k[:, :3], w_v)
    with pytest.raises(ValueError, match=r"mask"):
        self_attention(x, w_q, w_k, w_v, mask=np.ones((3, 7), dtype=bool))


def test_online_softmax_rejects_bad_shapes_and_block_size():
    q, k, v = np.ones((4, 3)), np.ones((5, 3)), np.ones((5, 2))
    with pytest.raises(ValueError, match=r"\(4, 2\).*\(5, 3\)"):
        online_softmax_attention(np.ones((4, 2)), k, v)
    with pytest.raises(ValueError, match=r"one value per key"):
        online_softmax_attention(q, k, np.ones((6, 2)))
    with pytest.raises(ValueError, match="block_size"):
        online_softmax_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match=r"\(4, 5\)"):
        online_softmax_attention(q, k, v, mask=np.ones((4, 4), dtype=bool))
    with pytest.raises(TypeError, match="boolean"):
        online_softmax_attention(q, k, v, mask=np.ones((4, 5)))


# ----------------------------------------------------------------------------------------
# rotary position embeddings, eq. ch4-rope


def complex_rotary(x, positions, base=10000.0):
    """Independent oracle: feature pair (a, b) as the complex number b + i a, multiplied by
    e^(i t w) (rotating [a, b] -> [a cos + b sin, -a sin + b cos])."""
    d = x.shape[-1]
    w = base ** (-np.arange(0, d, 2) / d)
    z = (x[..., 1::2] + 1j * x[..., 0::2]) * np.exp(1j * np.asarray(positions)[..., None] * w)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.imag, z.real
    return out


@SETTINGS
@given(seed=st.integers(0, 2**31), n=st.integers(1, 9), half=st.integers(1, 8))
def test_rotary_matches_complex_rotation_and_offset_rotation(seed, n, half):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, n, 2 * half))
    positions = rng.integers(-50, 500, size=n)
    out = rotary(x, positions)
    np.testing.assert_allclose(out, complex_rotary(x, positions), rtol=1e-12, atol=1e-12)
    for t, pos in enumerate(positions):  # row t is x[t] @ R(pos) of eq. ch4-rotation
        np.testing.assert_allclose(
            out[:, t], x[:, t] @ offset_rotation(int(pos), 2 * half), rtol=1e-12, atol=1e-12
        )
    # a rotation keeps lengths, and position 0 is the identity
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    np.testing.assert_array_equal(rotary(x, np.zeros(n, dtype=int)), x)


@SETTINGS
@given(
    seed=st.integers(0, 2**31),
    shift=st.integers(-1000, 1000),
    base=st.sampled_from([10.0, 500.0, 10000.0]),
)
def test_rotary_scores_depend_only_on_the_offset(seed, shift, base):
    rng = np.random.default_rng(seed)
    n, d = 6, 8
    q, k = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    positions = np.sort(rng.choice(200, size=n, replace=False))
    scores = rotary(q, positions, base) @ rotary(k, positions, base).T  # (n, n)
    shifted = rotary(q, positions + shift, base) @ rotary(k, positions + shift, base).T
    np.testing.assert_allclose(shifted, scores, rtol=1e-9, atol=1e-9)
    # and each score is q_t R(t - s) k_s^T, a function of the offset t - s alone
    omega = base ** (-np.arange(0, d, 2) / d)
    for t in range(n):
        for s in range(n):
            angle = (positions[t] - positions[s]) * omega  # (d/2,)
            a_q, b_q, a_k, b_k = q[t, 0::2], q[t, 1::2], k[s, 0::2], k[s, 1::2]
            expected = np.sum(
                (a_q * a_k + b_q * b_k) * np.cos(angle) + (b_q * a_k - a_q * b_k) * np.sin(angle)
            )
            assert scores[t, s] == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_rotary_scores_change_with_the_offset_and_keep_float32():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(1, 16)), rng.normal(size=(1, 16))
    scores = [(rotary(q, np.array([t])) @ rotary(k, np.array([0])).T).item() for t in range(8)]
    assert np.ptp(scores) > 0.5  # positions matter: not a constant
    assert rotary(q.astype(np.float32), np.arange(1)).dtype == np.float32
    batched = rotary(rng.normal(size=(3, 4, 5, 6)), np.arange(5))  # (B, h, n, d_h)
    assert batched.shape == (3, 4, 5, 6)


@pytest.mark.parametrize(
    "x, positions, base, error, words",
    [
        (np.ones((3, 5)), np.arange(3), 10000.0, ValueError, "even d"),
        (np.ones(4), np.arange(1), 10000.0, ValueError, "(..., n, d)"),
        (np.ones((3, 4)), np.arange(3) * 0.5, 10000.0, TypeError, "integer positions"),
        (np.ones((3, 4)), np.arange(4), 10000.0, ValueError, "broadcastable"),
        (np.ones((3, 4)), np.arange(3), 1.0, ValueError, "base > 1"),
        (np.ones((3, 4)), np.arange(3), True, ValueError, "base > 1"),
        (np.array([["a", "b"]]), np.arange(1), 10000.0, TypeError, "numeric"),
    ],
)
def test_rotary_rejects_bad_input_with_a_reason(x, positions, base, error, words):
    with pytest.raises(error, match=re.escape(words)):
        rotary(x, positions, base)
