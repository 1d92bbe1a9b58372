"""Tests for solutions/soft_hard.py, each against an independent oracle, in float64.

Oracles: torch.nn.functional.scaled_dot_product_attention, torch.softmax, einsum/torch
re-implementations and a torch nn additive-attention module, autograd gradients of exact
categorical expectations, and chi-square goodness-of-fit for the samplers.
"""

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions import shipped
from solutions.soft_hard import (
    ASPECTS,
    LOCATIONS,
    additive_score,
    aspect_attention,
    attention,
    classifier_accuracy,
    cosine_score,
    dot_score,
    general_score,
    gumbel_softmax,
    hard_attention,
    make_aspect_data,
    make_marker_data,
    make_memory_data,
    masked_softmax,
    memory_attention,
    reinforce_grad,
    reinforce_grad_samples,
    scaled_dot_score,
    softmax,
    train_hard_attention,
    train_soft_attention,
)
from solutions.training import seeded


@pytest.fixture(autouse=True)
def _seeded_single_thread():
    """Every test here runs inside ``seeded(0)``: torch seeded, one thread, deterministic
    algorithms (``docs/conventions.md``), so neither load nor core count changes a result."""
    with seeded(0):
        yield


def chi2_upper(df: int, z: float = 3.719) -> float:
    """Upper quantile of chi-square(df) at one-sided normal level z (3.719 ~ p = 1e-4),
    by the Wilson-Hilferty approximation (accurate to a few % for df >= 2)."""
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


def chi2_stat(counts: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    """Pearson statistic of observed counts vs probabilities; cells with p = 0 must be empty."""
    n = counts.sum()
    assert np.all(counts[probs == 0] == 0), "a zero-probability outcome was sampled"
    keep = probs > 0
    expected = n * probs[keep]
    return float(np.sum((counts[keep] - expected) ** 2 / expected)), int(keep.sum()) - 1


def random_mask(rng, shape, p=0.6, empty_rows=1):
    """A boolean mask with some fully masked rows (rows along the last axis)."""
    mask = rng.random(shape) < p
    flat = mask.reshape(-1, shape[-1])
    for r in rng.choice(flat.shape[0], size=min(empty_rows, flat.shape[0]), replace=False):
        flat[r] = False
    return flat.reshape(shape)


def t(x):
    return torch.tensor(np.array(x))


# ----------------------------------------------------------------------------------------
# softmax and masked_softmax


def test_softmax_matches_torch_and_is_max_shifted():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(3, 4, 7)) * 5
    np.testing.assert_allclose(softmax(s), torch.softmax(t(s), -1).numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        softmax(s, axis=1), torch.softmax(t(s), 1).numpy(), rtol=1e-12, atol=1e-15
    )
    big = np.array([[1000.0, 999.0, -1000.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        w = softmax(big)
    np.testing.assert_allclose(w, torch.softmax(t(big), -1).numpy(), rtol=1e-12)


def test_softmax_keeps_float32_and_all_neg_inf_row_is_zero():
    s = np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]], dtype=np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        w = softmax(s)
    assert w.dtype == np.float32
    np.testing.assert_allclose(w[0], torch.softmax(torch.tensor(s[0]), -1).numpy(), rtol=1e-6)
    assert np.all(w[1] == 0)


def test_masked_softmax_matches_torch_on_rows_with_an_allowed_key():
    rng = np.random.default_rng(1)
    s = rng.normal(size=(2, 5, 6))
    mask = random_mask(rng, s.shape, empty_rows=2)
    w = masked_softmax(s, mask)
    ref = torch.softmax(t(s).masked_fill(~t(mask), float("-inf")), -1).numpy()
    ok = mask.any(-1)
    np.testing.assert_allclose(w[ok], ref[ok], rtol=1e-12, atol=1e-15)
    assert np.all(w[~ok] == 0)
    assert np.all(w[~mask] == 0)


def test_fully_masked_row_gives_zero_weights_without_warnings():
    s = np.array([[1.0, 2.0], [3.0, 4.0]])
    mask = np.array([[True, False], [False, False]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            w = masked_softmax(s, mask)
    np.testing.assert_array_equal(w, [[1.0, 0.0], [0.0, 0.0]])


def test_masked_softmax_with_extreme_scores_never_nan():
    s = np.array([[1e300, -1e300, 0.0], [-1e308, -1e308, 5.0]])
    mask = np.array([[False, True, True], [True, True, False]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        w = masked_softmax(s, mask)
    assert np.all(np.isfinite(w))
    np.testing.assert_allclose(w.sum(-1), 1.0)
    assert w[0, 0] == 0 and w[1, 2] == 0


@settings(max_examples=60, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 6)),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1e-3, 1.0, 30.0, 1e4]),
    dtype=st.sampled_from([np.float64, np.float32]),
)
def test_masked_softmax_properties(shape, seed, scale, dtype):
    rng = np.random.default_rng(seed)
    s = (rng.normal(size=shape) * scale).astype(dtype)
    mask = rng.random(shape) < 0.5
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        w = masked_softmax(s, mask)
    assert w.dtype == dtype
    assert np.all(w[~mask] == 0)  # masked positions: exactly zero
    assert np.all(w >= 0)
    sums = w.sum(-1)
    has_key = mask.any(-1)
    np.testing.assert_allclose(sums[has_key], 1.0, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert np.all(sums[~has_key] == 0)  # fully masked rows: all zero


def test_masked_softmax_broadcasts_a_key_padding_mask():
    rng = np.random.default_rng(2)
    s = rng.normal(size=(2, 3, 4))
    pad = np.array([[True, True, False, False], [True, True, True, True]])[
        :, None, :
    ]  # (B, 1, n_k)
    w = masked_softmax(s, pad)
    assert w.shape == s.shape
    assert np.all(w[0, :, 2:] == 0)
    np.testing.assert_allclose(w.sum(-1), 1.0)


def test_masked_softmax_rejects_bad_masks():
    s = np.zeros((2, 3, 4))
    with pytest.raises(ValueError, match=r"\(2, 3, 4\).*\(3, 5\)"):
        masked_softmax(s, np.ones((3, 5), bool))
    with pytest.raises(ValueError, match=r"\(2, 3, 4\).*\(4, 3, 4\)"):
        masked_softmax(s, np.ones((4, 3, 4), bool))  # would enlarge the output
    with pytest.raises(TypeError, match="boolean"):
        masked_softmax(s, np.ones((3, 4)))


# ----------------------------------------------------------------------------------------
# score functions vs direct torch/einsum oracles


@pytest.fixture
def qk():
    rng = np.random.default_rng(3)
    return rng.normal(size=(2, 3, 5, 6)), rng.normal(size=(2, 3, 7, 6)), rng


def test_dot_and_scaled_dot_scores_match_einsum(qk):
    q, k, _ = qk
    ref = torch.einsum("bhqd,bhkd->bhqk", t(q), t(k)).numpy()
    np.testing.assert_allclose(dot_score(q, k), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scaled_dot_score(q, k), ref / math.sqrt(6), rtol=1e-12, atol=1e-12)


def test_general_score_matches_einsum(qk):
    q, k, rng = qk
    k = k[..., :4]
    w = rng.normal(size=(6, 4))
    ref = torch.einsum("bhqd,de,bhke->bhqk", t(q), t(w), t(k)).numpy()
    np.testing.assert_allclose(general_score(q, k, w), ref, rtol=1e-12, atol=1e-12)


class TorchAdditiveAttentionScore(nn.Module):
    """The Bahdanau scorer written the usual nn way: v^T tanh(W_q q + W_k k)."""

    def __init__(self, d_q, d_k, d_att):
        super().__init__()
        self.W_q = nn.Linear(d_q, d_att, bias=False)
        self.W_k = nn.Linear(d_k, d_att, bias=False)
        self.v = nn.Linear(d_att, 1, bias=False)

    def forward(self, q, k):
        feats = self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3)  # (..., n_q, n_k, d_att)
        return self.v(torch.tanh(feats)).squeeze(-1)


def test_additive_score_matches_torch_module(qk):
    q, k, _ = qk
    k = k[..., :3]  # d_k = 3 differs from d_q = 6
    torch.manual_seed(0)
    module = TorchAdditiveAttentionScore(6, 3, 8).double()
    with torch.no_grad():
        ref = module(t(q), t(k)).numpy()
    w_q = module.W_q.weight.detach().numpy().T  # nn.Linear stores (out, in); we use x @ w
    w_k = module.W_k.weight.detach().numpy().T
    v = module.v.weight.detach().numpy()[0]
    np.testing.assert_allclose(additive_score(q, k, w_q, w_k, v), ref, rtol=1e-12, atol=1e-12)


def test_cosine_score_matches_torch_cosine_similarity(qk):
    q, k, _ = qk
    ref = F.cosine_similarity(t(q).unsqueeze(-2), t(k).unsqueeze(-3), dim=-1).numpy()
    np.testing.assert_allclose(cosine_score(q, k), ref, rtol=1e-12, atol=1e-12)
    q0 = q.copy()
    q0[0, 0, 0] = 0.0  # a zero query scores 0 against everything, not NaN
    assert np.all(cosine_score(q0, k)[0, 0, 0] == 0)


def test_scores_keep_float32_and_agree_with_float64(qk):
    q, k, rng = qk
    w, w_q, w_k, v = (
        rng.normal(size=(6, 6)),
        rng.normal(size=(6, 4)),
        rng.normal(size=(6, 4)),
        rng.normal(size=4),
    )
    calls = [
        (dot_score, ()),
        (scaled_dot_score, ()),
        (cosine_score, ()),
        (general_score, (w,)),
        (additive_score, (w_q, w_k, v)),
    ]
    for score, params in calls:
        f32 = score(
            q.astype(np.float32), k.astype(np.float32), *(p.astype(np.float32) for p in params)
        )
        assert f32.dtype == np.float32, score.__name__
        np.testing.assert_allclose(f32, score(q, k, *params), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("score", [dot_score, scaled_dot_score, cosine_score])
def test_scores_reject_mismatched_widths_naming_the_shapes(score):
    with pytest.raises(
        ValueError, match=r"expected keys of width 16 to match queries, got 8.*\(4, 16\).*\(5, 8\)"
    ):
        score(np.zeros((4, 16)), np.zeros((5, 8)))


def test_general_and_additive_scores_reject_bad_weight_shapes():
    q, k = np.zeros((4, 6)), np.zeros((5, 3))
    with pytest.raises(ValueError, match=r"\(6, 3\).*got \(3, 6\)"):
        general_score(q, k, np.zeros((3, 6)))
    with pytest.raises(ValueError, match=r"w_k.*\(3, 8\).*got \(6, 8\)"):
        additive_score(q, k, np.zeros((6, 8)), np.zeros((6, 8)), np.zeros(8))
    with pytest.raises(ValueError, match=r"v.*\(8,\).*got \(7,\)"):
        additive_score(q, k, np.zeros((6, 8)), np.zeros((3, 8)), np.zeros(7))


# ----------------------------------------------------------------------------------------
# attention vs torch's scaled_dot_product_attention


@pytest.mark.parametrize("mask_shape", [None, (5, 7), (2, 1, 1, 7), (2, 3, 5, 7)])
def test_attention_matches_torch_sdpa(mask_shape):
    rng = np.random.default_rng(4)
    q, k, v = (
        rng.normal(size=(2, 3, 5, 8)),
        rng.normal(size=(2, 3, 7, 8)),
        rng.normal(size=(2, 3, 7, 4)),
    )
    mask = None if mask_shape is None else random_mask(rng, mask_shape, empty_rows=1)
    out, w = attention(q, k, v, mask)
    assert out.shape == (2, 3, 5, 4) and w.shape == (2, 3, 5, 7)
    ref = F.scaled_dot_product_attention(
        t(q), t(k), t(v), attn_mask=None if mask is None else t(mask)
    ).numpy()
    full = np.ones((2, 3, 5, 7), bool) if mask is None else np.broadcast_to(mask, (2, 3, 5, 7))
    ok = full.any(-1)  # SDPA gives NaN on fully masked rows: compare those against zeros instead
    np.testing.assert_allclose(out[ok], ref[ok], rtol=1e-10, atol=1e-12)
    assert np.all(out[~ok] == 0) and np.all(w[~ok] == 0)
    ref_w = torch.softmax(
        (t(q) @ t(k).transpose(-1, -2) / math.sqrt(8)).masked_fill(~t(full), float("-inf")), -1
    )
    np.testing.assert_allclose(w[ok], ref_w.numpy()[ok], rtol=1e-10, atol=1e-14)


def test_attention_with_causal_mask_matches_sdpa_is_causal():
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(3, 6, 4)), rng.normal(size=(3, 6, 4)), rng.normal(size=(3, 6, 2))
    out, w = attention(q, k, v, np.tril(np.ones((6, 6), bool)))
    ref = F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)
    assert np.all(np.triu(w[0], 1) == 0)


@pytest.mark.parametrize("score, sdpa_scale", [("dot", 1.0), ("scaled_dot", None)])
def test_attention_dot_scores_match_sdpa_scale(score, sdpa_scale):
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(4, 5)), rng.normal(size=(6, 5)), rng.normal(size=(6, 3))
    out, _ = attention(q, k, v, score=score)
    ref = F.scaled_dot_product_attention(t(q)[None], t(k)[None], t(v)[None], scale=sdpa_scale)[
        0
    ].numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)


def test_attention_with_general_additive_and_callable_scores():
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(2, 4, 5)), rng.normal(size=(2, 6, 3)), rng.normal(size=(2, 6, 2))
    w_g = rng.normal(size=(5, 3))
    out, w = attention(q, k, v, score="general", w=w_g)
    expected_w = torch.softmax(torch.einsum("bqd,de,bke->bqk", t(q), t(w_g), t(k)), -1).numpy()
    np.testing.assert_allclose(w, expected_w, rtol=1e-12)
    np.testing.assert_allclose(out, expected_w @ v, rtol=1e-12)
    w_q, w_k, v_att = rng.normal(size=(5, 8)), rng.normal(size=(3, 8)), rng.normal(size=8)
    _, w_add = attention(q, k, v, score="additive", w_q=w_q, w_k=w_k, v_att=v_att)
    np.testing.assert_allclose(w_add, softmax(additive_score(q, k, w_q, w_k, v_att)), rtol=1e-12)
    _, w_call = attention(q, k, v, score=lambda a, b: dot_score(a, b @ np.eye(3, 5)))
    np.testing.assert_allclose(w_call, softmax(q @ (k @ np.eye(3, 5)).swapaxes(-1, -2)), rtol=1e-12)


def test_attention_keeps_float32():
    rng = np.random.default_rng(8)
    q, k, v = (rng.normal(size=s).astype(np.float32) for s in [(3, 4), (5, 4), (5, 2)])
    out, w = attention(q, k, v)
    assert out.dtype == np.float32 and w.dtype == np.float32
    out64, _ = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64))
    np.testing.assert_allclose(out, out64, rtol=1e-5, atol=1e-6)


def test_attention_rejects_bad_shapes_naming_them():
    q, k = np.zeros((2, 4, 8)), np.zeros((2, 6, 8))
    with pytest.raises(ValueError, match=r"n_k = 6.*\(2, 6, 8\).*\(2, 5, 3\)"):
        attention(q, k, np.zeros((2, 5, 3)))
    with pytest.raises(ValueError, match=r"width 8 to match queries, got 7"):
        attention(q, np.zeros((2, 6, 7)), np.zeros((2, 6, 3)))
    with pytest.raises(ValueError, match=r"unknown score 'bilinear'"):
        attention(q, k, np.zeros((2, 6, 3)), score="bilinear")
    with pytest.raises(ValueError, match=r"\(2, 4, 6\).*\(4, 5\)"):
        attention(q, k, np.zeros((2, 6, 3)), mask=np.ones((4, 5), bool))


def test_attention_names_the_parameters_a_score_needs():
    q, k, v = np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2))
    with pytest.raises(TypeError, match=r"score 'general' takes the parameters \['w'\]"):
        attention(q, k, v, score="general")
    with pytest.raises(TypeError, match=r"v_att"):
        attention(q, k, v, score="additive", w_q=np.zeros((4, 3)), w_k=np.zeros((4, 3)))


@settings(max_examples=40, deadline=None)
@given(
    n_q=st.integers(1, 4),
    n_k=st.integers(1, 4),
    d_q=st.integers(1, 6),
    d_k=st.integers(1, 6),
    batch=st.integers(1, 3),
)
def test_attention_with_mismatched_widths_raises_naming_both_shapes(n_q, n_k, d_q, d_k, batch):
    q, k, v = np.zeros((batch, n_q, d_q)), np.zeros((batch, n_k, d_k)), np.zeros((batch, n_k, 2))
    if d_q == d_k:
        out, w = attention(q, k, v)
        assert out.shape == (batch, n_q, 2) and w.shape == (batch, n_q, n_k)
        np.testing.assert_allclose(w.sum(-1), 1.0)
        return
    with pytest.raises(ValueError) as info:
        attention(q, k, v)
    message = str(info.value)
    assert str(q.shape) in message and str(k.shape) in message
    assert f"width {d_q}" in message and f"got {d_k}" in message


# ----------------------------------------------------------------------------------------
# hard attention


def test_hard_attention_without_rng_takes_the_argmax():
    rng = np.random.default_rng(9)
    w = softmax(rng.normal(size=(2, 4, 6)))
    values = rng.normal(size=(2, 6, 3))
    out, index = hard_attention(w, values)
    np.testing.assert_array_equal(index, w.argmax(-1))
    for b in range(2):
        for i in range(4):
            np.testing.assert_array_equal(out[b, i], values[b, w[b, i].argmax()])


def test_hard_attention_sampling_frequencies_match_weights():
    rng = np.random.default_rng(10)
    probs = np.array([0.5, 0.25, 0.15, 0.1, 0.0])
    n = 40_000
    weights = np.broadcast_to(probs, (n, 5))  # n queries sharing one distribution
    values = np.arange(5.0)[:, None]  # (n_k, 1): the output says which key was taken
    out, index = hard_attention(weights, values, rng=np.random.default_rng(11))
    np.testing.assert_array_equal(out[:, 0], index)
    stat, df = chi2_stat(np.bincount(index, minlength=5), probs)
    assert stat < chi2_upper(df), (stat, chi2_upper(df))
    del rng


def test_hard_attention_fully_masked_row_gives_zero_output():
    w = masked_softmax(np.zeros((2, 3)), np.array([[True, True, False], [False, False, False]]))
    values = np.ones((3, 4))
    for rng in (None, np.random.default_rng(0)):
        out, index = hard_attention(w, values, rng)
        assert index[1] == -1 and np.all(out[1] == 0)
        assert index[0] in (0, 1) and np.all(out[0] == 1)


def test_hard_attention_rejects_mismatched_values():
    with pytest.raises(ValueError, match=r"\(4, 6\).*\(5, 3\)"):
        hard_attention(np.full((4, 6), 1 / 6), np.zeros((5, 3)))


# ----------------------------------------------------------------------------------------
# REINFORCE


def exact_grad_expected_reward(scores, rewards):
    """d/ds sum_z softmax(s)_z r_z by autograd (the oracle)."""
    s = torch.tensor(scores, requires_grad=True)
    (torch.softmax(s, -1) * torch.as_tensor(rewards)).sum().backward()
    return s.grad.numpy()


def test_reinforce_grad_matches_autograd_of_log_prob():
    rng = np.random.default_rng(12)
    scores = rng.normal(size=(3, 5))
    index = np.array([0, 4, 2])
    reward, baseline = np.array([1.0, -2.0, 0.5]), 0.3
    s = torch.tensor(scores, requires_grad=True)
    logp = torch.log_softmax(s, -1)[torch.arange(3), torch.as_tensor(index)]
    (torch.as_tensor(reward - baseline) * logp).sum().backward()
    np.testing.assert_allclose(
        reinforce_grad(scores, index, reward, baseline), s.grad.numpy(), rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize("baseline", [0.0, 2.0, -7.5])
def test_reinforce_grad_is_exactly_unbiased_for_any_baseline(baseline):
    # enumerate the categorical: sum_z p(z) g(z) must equal the true gradient exactly
    scores = np.array([0.3, -1.2, 2.0, 0.0])
    rewards = np.array([1.0, 3.0, -0.5, 2.0])
    p = softmax(scores)
    expectation = sum(
        p[z] * reinforce_grad(scores, np.array(z), rewards[z], baseline) for z in range(4)
    )
    np.testing.assert_allclose(
        expectation, exact_grad_expected_reward(scores, rewards), rtol=1e-12, atol=1e-14
    )


def test_reinforce_monte_carlo_mean_converges_and_baseline_reduces_variance():
    scores = np.array([0.5, -0.5, 1.0, 0.0, -1.0])
    rewards = 10.0 + np.array([1.0, 0.0, 2.0, -1.0, 0.5])  # a large common offset: b should help
    exact = exact_grad_expected_reward(scores, rewards)
    n = 20_000
    samples = {}
    for b in (0.0, "mean"):
        g = reinforce_grad_samples(
            scores, lambda z: rewards[z], n, np.random.default_rng(13), baseline=b
        )
        assert g.shape == (n, 5)
        se = g.std(axis=0, ddof=1) / math.sqrt(n)
        # the mean of n iid estimates is within 5 standard errors of the truth (per coordinate,
        # a 5.7e-7 two-sided chance of failing for a correct estimator; the seed fixes it anyway)
        assert np.all(np.abs(g.mean(axis=0) - exact) < 5 * se + 1e-12), (g.mean(0), exact, se)
        samples[b] = g
    var_none = samples[0.0].var(axis=0).sum()
    var_mean = samples["mean"].var(axis=0).sum()
    assert var_mean < 0.05 * var_none, (var_mean, var_none)


def test_reinforce_grad_rejects_bad_indices_and_shapes():
    with pytest.raises(ValueError, match=r"index of shape \(3,\), got \(2,\)"):
        reinforce_grad(np.zeros((3, 4)), np.array([0, 1]), 1.0)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        reinforce_grad(np.zeros((3, 4)), np.array([0, 1, 4]), 1.0)


# ----------------------------------------------------------------------------------------
# Gumbel-softmax


def test_gumbel_softmax_rows_sum_to_one_and_hard_is_one_hot():
    rng = np.random.default_rng(14)
    scores = rng.normal(size=(6, 5))
    for tau in (0.1, 1.0, 10.0):
        y = gumbel_softmax(scores, tau, rng)
        np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-12)
        assert np.all(y >= 0)
    y_hard = gumbel_softmax(scores, 0.5, rng, hard=True)
    assert set(np.unique(y_hard)) <= {0.0, 1.0}
    np.testing.assert_array_equal(y_hard.sum(-1), 1.0)
    assert gumbel_softmax(scores.astype(np.float32), 1.0, rng).dtype == np.float32


def test_gumbel_softmax_argmax_frequencies_match_softmax():
    scores = np.array([1.0, 0.0, -1.0, 0.5, -np.inf])
    probs = softmax(scores)
    n = 40_000
    y = gumbel_softmax(np.broadcast_to(scores, (n, 5)), 0.7, np.random.default_rng(15))
    stat, df = chi2_stat(np.bincount(y.argmax(-1), minlength=5), probs)
    assert stat < chi2_upper(df), (stat, chi2_upper(df))


def test_gumbel_softmax_low_temperature_is_nearly_one_hot():
    y = gumbel_softmax(np.zeros((200, 4)), 0.01, np.random.default_rng(16))
    assert np.mean(y.max(-1) > 0.99) > 0.95


def test_gumbel_softmax_rejects_bad_temperature():
    with pytest.raises(ValueError, match="tau"):
        gumbel_softmax(np.zeros(3), 0.0, np.random.default_rng(0))


# ----------------------------------------------------------------------------------------
# the trained models (seeded, CPU)


def test_marker_data_label_is_the_marked_token():
    tokens, labels, marker = make_marker_data(50, seed=0, seq_len=8, num_classes=3)
    assert tokens.shape == (50, 8)
    np.testing.assert_array_equal(tokens[torch.arange(50), marker], labels + 3)
    assert int((tokens >= 3).sum()) == 50  # exactly one marked token per sequence


# The trainers' histories are logged only at the first and the last step here (log_every
# beyond the last step): evaluating never draws a random number, so the run is the same
# as with the default logging, at a fraction of the cost.


@pytest.fixture(scope="module")
def hard_model():
    return train_hard_attention(baseline="running", seed=0, log_every=400)


@pytest.mark.slow
def test_reinforce_classifier_beats_chance_by_a_clear_margin(hard_model):
    """A property every seed has, checked on seed 0. Over training seeds 0-19, under each of
    the 6 CPU settings (ATEN_CPU_CAPABILITY avx512 / avx2 / default x MKL_CBWR unset /
    COMPATIBLE): held-out accuracy 1.000 and argmax-is-the-marker rate 1.000 for every
    seed. Thresholds 0.9 and 0.6: margins 0.1 and 0.4 below the worst seed."""
    model, history = hard_model
    tokens, labels, marker = make_marker_data(2000, seed=123)
    acc = classifier_accuracy(model, tokens, labels)
    assert acc >= 0.9 > history["chance"] + 0.5, acc
    with torch.no_grad():
        _, index, _, weights = model(tokens)
    assert float((index == marker).float().mean()) > 0.6  # it looks where the marker is
    assert np.allclose(weights.sum(-1).numpy(), 1.0, atol=1e-5)


@pytest.mark.slow
def test_reinforce_with_running_baseline_learns_the_long_marker_task():
    """The configuration the chapter studies: 40 positions, 8 classes, chance = 1/8, 300
    steps. Not every run learns, so this asserts a count over seeds: at least 1 of seeds
    0 and 1. Measured over seeds 0-19 under each of the 6 CPU settings (ATEN_CPU_CAPABILITY
    avx512 / avx2 / default x MKL_CBWR unset / COMPATIBLE): 18 of 20 learn, with held-out
    accuracy 1.000, hit rate 1.000 and a final baseline of -0.0018 to -0.0009; 2 stall at
    chance (accuracy at most 0.140, hit rate at most 0.002, baseline -2.10 to -2.09):
    REINFORCE can lock onto a wrong position before the baseline helps. Seeds 0 and 1
    both learn under all 6 settings: a margin of one seed over k = 1 (at the measured 18
    of 20, two seeds drawn at random would both stall with probability 0.01); seed 1 is
    trained only if seed 0 fails, so the test costs one run, as the single-seed test it
    replaces did. Each learner's thresholds 0.9 / 0.9 / -0.5 sit 0.1, 0.1 and 0.5 from the
    learners' worst, and far from the stalled runs."""
    tokens, labels, _ = make_marker_data(2000, seed=321, seq_len=40, num_classes=8)
    learned = []
    for seed in range(2):
        if any(learned):  # the count is met: another run could not change it
            break
        model, history = train_hard_attention(
            "running", seq_len=40, num_classes=8, steps=300, seed=seed, log_every=300
        )
        learned.append(
            classifier_accuracy(model, tokens, labels) >= 0.9
            and history["hit_rate"][-1] >= 0.9
            # the running mean tracks a reward that rose towards 0
            and history["baseline"][-1] > -0.5
        )
    assert sum(learned) >= 1, learned


@pytest.mark.slow
def test_soft_attention_twin_learns_the_marker_task():
    """A property every seed has, checked on seed 0. Over seeds 0-19, under each of the 6
    CPU settings: held-out accuracy 1.000 for every seed, gain of the weight on the marker
    0.794 / 0.899 / 0.956 (min / median / max). Thresholds 0.95 and 0.3: margins 0.05 and
    0.49 below the worst seed."""
    model, history = train_soft_attention(seed=0, log_every=400)
    tokens, labels, marker = make_marker_data(2000, seed=123)
    assert classifier_accuracy(model, tokens, labels) >= 0.95
    assert history["marker_weight"][-1] > history["marker_weight"][0] + 0.3


@pytest.fixture(scope="module")
def aspect_model():
    """The recipe of the chapter's shipped aspect model, retrained here: the page reads the
    shipped weights; a run of the recipe on this machine must meet what the page states of
    it (another CPU follows another trajectory, so not the shipped numbers)."""
    return shipped.RECIPES["ch2_aspect"].train()


def test_aspect_data_label_follows_the_queried_adjective():
    data = make_aspect_data(20, seed=1)
    for sentence, a, label, pos in zip(
        data["sentences"], data["aspect"], data["label"], data["adjective"]
    ):
        words = sentence.split()
        assert words[pos - 2] == ASPECTS[a]  # "... the <aspect> is <adjective>"
        assert (words[pos] in ("good", "great", "excellent", "lovely", "fine")) == bool(label)


@pytest.mark.slow
def test_aspect_weights_peak_on_the_adjective_of_the_aspect_asked_about(aspect_model):
    """The recipe (seed 0), retrained. Over training seeds 0-19: held-out accuracy 1.000 /
    1.000 / 1.000 (min / median / max), and every seed peaks on the right adjective with the
    right sentiment for all 7 (sentence, aspect) pairs below; seeds 0-5 under each of the 6
    CPU settings: the same, and for the 5 pairs of the chapter too. Threshold 0.95: margin
    0.05."""
    model, history = aspect_model
    assert history["accuracy"][-1] >= 0.95
    for sentence, expect in [
        ("the food is good but the service is bad", {"food": ("good", 1), "service": ("bad", 0)}),
        (
            "the service was excellent and the food was awful",
            {"food": ("awful", 0), "service": ("excellent", 1)},
        ),
        (
            "the price is poor , the food is great while the ambience is slow",
            {"food": ("great", 1), "price": ("poor", 0), "ambience": ("slow", 0)},
        ),
    ]:
        for aspect, (adjective, positive) in expect.items():
            words, weights, p_positive = aspect_attention(model, sentence, aspect)
            assert len(words) == len(weights) and np.isclose(weights.sum(), 1.0)
            assert words[int(np.argmax(weights))] == adjective, (sentence, aspect, weights.round(2))
            assert (p_positive > 0.5) == bool(positive)


def test_aspect_attention_rejects_unknown_words_and_aspects(aspect_model):
    model, _ = aspect_model
    with pytest.raises(ValueError, match="unknown aspect 'wine'"):
        aspect_attention(model, "the food is good", "wine")
    with pytest.raises(ValueError, match=r"unknown words \['pizza'\]"):
        aspect_attention(model, "the pizza is good", "food")


@pytest.mark.slow
def test_memory_network_hops_follow_the_two_supporting_facts():
    """The recipe of the chapter's shipped memory network (seed 0), retrained. Over
    training seeds 0-19 (min / median / max): held-out and test accuracy 1.000 / 1.000 /
    1.000, hop 1 on the "has" sentence 1.000 / 1.000 / 1.000, hop 2 on the location
    sentence 0.832 / 1.000 / 1.000 (seeds 2 and 7: 0.832, 0.856; the answer is still right:
    hop 2 may split its weight), and every seed passes the story below; seeds 0-5 under
    each of the 6 CPU settings: the same numbers (seed 0: 1.000 throughout). Thresholds
    0.95, 0.9 (hop 1) and 0.75 (hop 2): margins 0.05, 0.1 and 0.082 below the worst seed."""
    model, history = shipped.RECIPES["ch2_memory"].train()
    assert history["accuracy"][-1] >= 0.95 > history["chance"] + 0.5
    test = make_memory_data(500, seed=77)
    with torch.no_grad():
        logits, weights = model(test["memory"], test["query"])  # (N, A), (N, hops, S)
    assert float((logits.argmax(-1) == test["answer"]).float().mean()) >= 0.95
    hop1 = weights[:, 0].argmax(-1) == test["support"][:, 0]  # "<person> has the <object>"
    hop2 = weights[:, 1].argmax(-1) == test["support"][:, 1]  # "<person> is in the <place>"
    assert float(hop1.float().mean()) >= 0.9 and float(hop2.float().mean()) >= 0.75
    story = [
        "mary is in the kitchen",
        "john has the apple",
        "john is in the garden",
        "mary has the milk",
    ]
    hop_weights, answer = memory_attention(model, story, "where is the apple")
    assert hop_weights.shape == (2, 4) and np.allclose(hop_weights.sum(-1), 1.0)
    assert answer == "garden" and answer in LOCATIONS
    assert hop_weights[0].argmax() == 1 and hop_weights[1].argmax() == 2
