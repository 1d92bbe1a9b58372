"""Tests for solutions/pooling.py, each against an independent oracle, in float64.

Oracles: explicit Python loops for pooling, a direct Gaussian-kernel computation for
Nadaraya-Watson, a per-point loop for the leave-one-out loss, central finite differences
and torch autograd for its derivative.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions.pooling import (
    attention_pool,
    average_pool,
    fit_bandwidth,
    gaussian_kernel,
    loo_loss_and_grad,
    max_pool,
    nadaraya_watson,
    nadaraya_watson_weights,
)


def toy_regression(n=50, seed=0):
    """The chapter's toy data: y = 2 sin(x) + x^0.8 + noise on sorted x in [0, 5)."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 5, n))
    return x, 2 * np.sin(x) + x**0.8 + rng.normal(0, 0.5, n)


# ----------------------------------------------------------------------------------------
# average and max pooling vs loops


def loop_pools(x, mask):
    """Average and max over present items, by explicit loops over (batch, item)."""
    flat_x = x.reshape(-1, *x.shape[-2:])
    flat_m = np.broadcast_to(mask, x.shape[:-1]).reshape(-1, x.shape[-2])
    avg, mx = [], []
    for seq, present in zip(flat_x, flat_m):
        items = [seq[j] for j in range(len(seq)) if present[j]]
        avg.append(sum(items) / len(items) if items else np.zeros(x.shape[-1]))
        mx.append(np.max(items, axis=0) if items else np.zeros(x.shape[-1]))
    out_shape = x.shape[:-2] + (x.shape[-1],)
    return np.reshape(avg, out_shape), np.reshape(mx, out_shape)


@settings(max_examples=50, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 6), st.integers(1, 5)),
    seed=st.integers(0, 2**32 - 1),
)
def test_masked_pooling_matches_loops(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape) * 10
    mask = rng.random(shape[:-1]) < 0.6
    avg_ref, max_ref = loop_pools(x, mask)
    np.testing.assert_allclose(average_pool(x, mask), avg_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(max_pool(x, mask), max_ref)


def test_pooling_without_mask_is_mean_and_max():
    x = np.random.default_rng(1).normal(size=(2, 5, 3))
    np.testing.assert_allclose(average_pool(x), x.mean(axis=1), rtol=1e-15)
    np.testing.assert_array_equal(max_pool(x), x.max(axis=1))


def test_fully_masked_sequence_pools_to_zero_without_warnings():
    x = -np.ones((2, 4, 3))  # negative: a wrong max pool would return -1 or -inf
    mask = np.array([[True, False, False, False], [False] * 4])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        avg, mx = average_pool(x, mask), max_pool(x, mask)
    np.testing.assert_array_equal(avg, [[-1, -1, -1], [0, 0, 0]])
    np.testing.assert_array_equal(mx, [[-1, -1, -1], [0, 0, 0]])


def test_pooling_broadcasts_mask_and_keeps_float32():
    x = np.random.default_rng(2).normal(size=(2, 3, 5, 4)).astype(np.float32)
    mask = np.array([True, True, False, True, False])  # one padding pattern for all
    assert average_pool(x, mask).dtype == np.float32 and max_pool(x, mask).dtype == np.float32
    np.testing.assert_allclose(average_pool(x, mask), x[..., mask, :].mean(axis=-2), rtol=1e-6)


def test_pooling_rejects_bad_masks_naming_the_shapes():
    with pytest.raises(ValueError, match=r"\(2, 5\).*got mask of shape \(2, 3\).*x \(2, 5, 3\)"):
        average_pool(np.zeros((2, 5, 3)), np.ones((2, 3), bool))
    with pytest.raises(ValueError, match=r"\(5,\)"):
        max_pool(np.zeros(5), None)
    with pytest.raises(TypeError, match="boolean"):
        max_pool(np.zeros((2, 5, 3)), np.ones((2, 5)))


# ----------------------------------------------------------------------------------------
# Nadaraya-Watson vs a direct Gaussian-kernel computation


def direct_nadaraya_watson(x_query, x_keys, y, h):
    """sum_j K(x - x_j) y_j / sum_j K(x - x_j) with the normalised Gaussian density."""
    xq, xk = np.atleast_2d(x_query.T).T, np.atleast_2d(x_keys.T).T  # (n, d)
    d = xq.shape[1]
    dist2 = ((xq[:, None, :] - xk[None, :, :]) ** 2).sum(-1)
    k = np.exp(-dist2 / (2 * h**2)) / (math.sqrt(2 * math.pi) * h) ** d
    w = k / k.sum(axis=1, keepdims=True)
    return w, w @ y


@pytest.mark.parametrize("h", [0.2, 0.7, 3.0])
def test_nadaraya_watson_matches_direct_kernel_computation(h):
    x, y = toy_regression()
    xq = np.linspace(-1, 6, 30)
    w_ref, pred_ref = direct_nadaraya_watson(xq, x, y, h)
    w = nadaraya_watson_weights(xq, x, h)
    assert w.shape == (30, 50)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-13)
    np.testing.assert_allclose(w, w_ref, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(nadaraya_watson(xq, x, y, h), pred_ref, rtol=1e-10)


def test_nadaraya_watson_with_vector_inputs_and_outputs():
    rng = np.random.default_rng(3)
    xk, xq, y = rng.normal(size=(20, 3)), rng.normal(size=(7, 3)), rng.normal(size=(20, 2))
    w_ref, pred_ref = direct_nadaraya_watson(xq, xk, y, 0.8)
    np.testing.assert_allclose(nadaraya_watson_weights(xq, xk, 0.8), w_ref, rtol=1e-10)
    np.testing.assert_allclose(nadaraya_watson(xq, xk, y, 0.8), pred_ref, rtol=1e-10)


def test_nadaraya_watson_keeps_float32():
    x, y = toy_regression()
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    w = nadaraya_watson_weights(x32, x32, 0.5)
    assert w.dtype == np.float32 and nadaraya_watson(x32, x32, y32, 0.5).dtype == np.float32
    np.testing.assert_allclose(w, nadaraya_watson_weights(x, x, 0.5), rtol=1e-4, atol=1e-6)


def test_tiny_bandwidth_gives_nearest_neighbour_not_nan():
    x, y = toy_regression()
    xq = np.array([0.3, 2.5, 4.9, 100.0])  # 100 is far from every key
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        w = nadaraya_watson_weights(xq, x, 1e-4)
    nearest = np.abs(xq[:, None] - x[None, :]).argmin(axis=1)
    np.testing.assert_array_equal(w.argmax(axis=1), nearest)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    np.testing.assert_allclose(nadaraya_watson(xq, x, y, 1e-4), y[nearest], rtol=1e-9)


def test_gaussian_kernel_values_and_bandwidth_checks():
    u = np.array([0.0, 1.0, 2.0])
    np.testing.assert_allclose(gaussian_kernel(u, 1.0), np.exp(-(u**2) / 2), rtol=1e-15)
    np.testing.assert_allclose(gaussian_kernel(u, 2.0), np.exp(-(u**2) / 8), rtol=1e-15)
    for bad in (0.0, -1.0, np.nan, np.array([1.0, 2.0])):
        with pytest.raises(ValueError, match="bandwidth"):
            gaussian_kernel(u, bad)


def test_nadaraya_watson_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"width 2 to match queries, got 3.*\(4, 2\).*\(5, 3\)"):
        nadaraya_watson_weights(np.zeros((4, 2)), np.zeros((5, 3)), 1.0)
    with pytest.raises(ValueError, match=r"\(5,\) or \(5, d_y\).*got \(4,\)"):
        nadaraya_watson(np.zeros(3), np.zeros(5), np.zeros(4), 1.0)


def test_attention_pool_matches_loop_and_checks_shapes():
    rng = np.random.default_rng(4)
    w = rng.dirichlet(np.ones(6), size=(2, 4))  # (2, 4, 6), rows sum to 1
    v = rng.normal(size=(2, 6, 3))
    ref = np.array(
        [[sum(w[b, i, j] * v[b, j] for j in range(6)) for i in range(4)] for b in range(2)]
    )
    np.testing.assert_allclose(attention_pool(w, v), ref, rtol=1e-12)
    np.testing.assert_allclose(attention_pool(w[0], v[0, :, 0]), ref[0, :, 0], rtol=1e-12)
    with pytest.raises(ValueError, match=r"n_k = 6.*\(2, 3, 6\)"):
        attention_pool(w, v.swapaxes(-1, -2))


# ----------------------------------------------------------------------------------------
# leave-one-out loss, its analytic gradient, and fitting the bandwidth


def loop_loo_loss(x, y, h):
    """(1/n) sum_i (prediction of point i from the other points - y_i)^2, one point at a time."""
    errors = []
    for i in range(len(x)):
        others = np.arange(len(x)) != i
        _, pred = direct_nadaraya_watson(x[i : i + 1], x[others], y[others], h)
        errors.append((pred[0] - y[i]) ** 2)
    return float(np.mean(errors))


@pytest.mark.parametrize("h", [0.15, 0.4, 1.0, 2.5])
def test_loo_loss_matches_loop_and_gradient_matches_finite_differences(h):
    x, y = toy_regression()
    loss, grad = loo_loss_and_grad(x, y, h)
    assert math.isclose(loss, loop_loo_loss(x, y, h), rel_tol=1e-10)
    eps = 1e-5 * h
    fd = (loo_loss_and_grad(x, y, h + eps)[0] - loo_loss_and_grad(x, y, h - eps)[0]) / (2 * eps)
    # central differences: O(eps^2) truncation + O(1e-16 / eps) rounding, far below 1e-6
    assert math.isclose(grad, fd, rel_tol=1e-6, abs_tol=1e-8), (grad, fd)


def test_loo_gradient_matches_autograd_with_vector_targets():
    rng = np.random.default_rng(5)
    x, y, h = rng.normal(size=(15, 2)), rng.normal(size=(15, 3)), 0.6
    ht = torch.tensor(h, dtype=torch.float64, requires_grad=True)
    xt, yt = torch.tensor(x), torch.tensor(y)
    scores = -(torch.cdist(xt, xt) ** 2) / (2 * ht**2)
    scores = scores.masked_fill(torch.eye(15, dtype=torch.bool), float("-inf"))
    loss_t = ((torch.softmax(scores, dim=1) @ yt - yt) ** 2).mean()
    loss_t.backward()
    loss, grad = loo_loss_and_grad(x, y, h)
    assert math.isclose(loss, loss_t.item(), rel_tol=1e-10)
    assert math.isclose(grad, float(ht.grad), rel_tol=1e-8)


def test_fit_bandwidth_reduces_the_loo_loss():
    x, y = toy_regression()
    h, history = fit_bandwidth(x, y, init=1.5, steps=60, lr=0.1)
    assert len(history) == 61
    assert history[-1] < 0.6 * history[0]
    assert math.isclose(history[-1], loo_loss_and_grad(x, y, h)[0], rel_tol=1e-12)
    assert np.all(np.diff(history) < 1e-12)  # small steps: the loss never goes up
    # it moved towards a minimum: the gradient there is much smaller than at the start
    assert abs(loo_loss_and_grad(x, y, h)[1]) < 0.2 * abs(loo_loss_and_grad(x, y, 1.5)[1])


def test_fit_bandwidth_with_too_large_a_learning_rate_says_so():
    x, y = toy_regression()
    with pytest.raises(ValueError, match="smaller learning rate"):
        fit_bandwidth(x, y, init=1.5, steps=10, lr=100.0)


def test_loo_rejects_bad_inputs():
    with pytest.raises(ValueError, match="at least 2 points"):
        loo_loss_and_grad(np.zeros(1), np.zeros(1), 1.0)
    with pytest.raises(ValueError, match=r"\(4,\) or \(4, d_y\).*got \(3,\)"):
        loo_loss_and_grad(np.zeros(4), np.zeros(3), 1.0)
