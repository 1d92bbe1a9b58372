"""Chapter plug-in: Attention as pooling (assignment ``ch1_pooling``).

Its checks (inputs from a seed, reference, tolerance, hints, known mistakes), registered
with ``autograder.checking.checks.register``; the grader core never names this module. The
references are the answer key's (``answers/ch1_pooling.py``): the chapter shows the
Gaussian kernel, the prediction and the derivative in one scalar bandwidth; the tasks ask
for another kernel, the derivative in the query, one bandwidth per dimension and its
leave-one-out gradient.
"""

from __future__ import annotations

import numpy as np

from answers import ch1_pooling as key
from autograder.checking.checks import (
    HINT_MAX_SHIFT,
    Case,
    Chapter,
    Check,
    Mistake,
    distinct_sizes,
    normal,
    register,
)
from solutions import conventions, pooling

# ----------------------------------------------------------------------------------------
# task 1: epanechnikov_weights


def _clear_of_the_edge(x_query, x_keys, bandwidth) -> bool:
    """No key within a relative 1e-6 of the kernel's edge u = 1, where two correct
    implementations (u^2 as d^2 / h^2 or as (d / h)^2) may round K to 0 or to a few ulps,
    and a query whose only key it is to a row of zeros or a one-hot row."""
    u2 = key._sq_dist(x_query, x_keys) / float(bandwidth) ** 2
    return bool(np.all(np.abs(1.0 - u2) > 1e-6))


def _clear(rng, draw):
    """``draw(rng)`` -> (x_query, x_keys, h), drawn again until clear of the kernel's edge."""
    while True:
        args = draw(rng)
        if _clear_of_the_edge(*args):
            return args


def _epanechnikov_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 8, 2)
    grid = np.arange(5.0)  # keys 1 apart, queries within 0.2 of one of them, h = 0.3
    return [
        Case(
            "1-d points", _clear(rng, lambda r: (r.uniform(0, 5, n_q), r.uniform(0, 5, n_k), 0.8))
        ),
        Case("2-d points", _clear(rng, lambda r: (normal(r, n_q, 2), normal(r, n_k, 2), 1.3))),
        Case(
            "a query with no key within h",
            _clear(rng, lambda r: (np.array([40.0, 0.5]), r.uniform(0, 1, 6), 0.3)),
        ),
        Case(
            "one query, one key",
            _clear(rng, lambda r: (r.uniform(0, 0.5, 1), r.uniform(0, 0.5, 1), 0.7)),
        ),
        Case(
            "bandwidth smaller than the gaps (one key per query, or none)",
            _clear(
                rng,
                lambda r: (
                    np.concatenate([grid[:3] + r.uniform(-0.2, 0.2, 3), [7.5]]),
                    grid,
                    0.3,
                ),
            ),
        ),
        Case(
            "3-d points, every key within h",
            _clear(rng, lambda r: (normal(r, n_k, 3), normal(r, n_q, 3), 9.0)),
        ),
        Case(
            "(n, 1) points (d = 1 as an axis of its own)",
            _clear(rng, lambda r: (r.uniform(0, 3, (n_q, 1)), r.uniform(0, 3, (n_k, 1)), 1.1)),
        ),
    ]


def _epanechnikov_kernel(x_query, x_keys, bandwidth, kernel, axis=-1, guard=True):
    """A wrong variant's weights: ``kernel(u2)`` normalised over ``axis``."""
    k = kernel(key._sq_dist(x_query, x_keys) / float(bandwidth) ** 2)
    total = k.sum(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return k / (np.where(total != 0, total, 1.0) if guard else total)


def _clip(u2):
    return np.maximum(0.0, 1.0 - u2)


# ----------------------------------------------------------------------------------------
# task 2: nadaraya_watson_query_grad


def _query_grad_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 8, 2)
    xk = rng.uniform(0, 5, n_k)
    return [
        Case("1-d points, scalar targets", (rng.uniform(0, 5, n_q), xk, np.sin(xk), 0.6)),
        Case(
            "2-d points, scalar targets",
            (normal(rng, n_q, 2), normal(rng, n_k, 2), normal(rng, n_k), 0.9),
        ),
        Case(
            "3-d points, vector targets (d_y = 2)",
            (normal(rng, n_q, 3), normal(rng, n_k, 3), normal(rng, n_k, 2), 1.3),
        ),
        Case(
            "1-d points, vector targets (d_y = 3)",
            (rng.uniform(0, 5, n_q), xk, normal(rng, n_k, 3), 0.7),
        ),
        Case(
            "query far from every key",
            (np.array([-30.0, 0.5]), rng.uniform(0, 1, 5), normal(rng, 5), 0.05),
        ),
        Case("one key", (normal(rng, 3, 2), normal(rng, 1, 2), normal(rng, 1), 0.8)),
        Case(
            "one query (n_q = 1), vector targets",
            (normal(rng, 1, 2), normal(rng, n_k, 2), normal(rng, n_k, 2), 1.1),
        ),
        Case(
            "(n, 1) points and (n_k, 1) targets (d = d_y = 1)",
            (rng.uniform(0, 5, (n_q, 1)), xk[:, None], np.cos(xk)[:, None], 0.6),
        ),
    ]


def _query_grad_magnitudes(x_query, x_keys, y_values, bandwidth):
    """The Jacobian's magnitude, per entry: the size of the terms it sums,
    (1/h^2) sum_j a_j (|y_j| + |f(x)|) |x_j - x|, times 1 + the largest softmax exponent.

    Far from every key the Jacobian is a difference of nearly equal terms (the nearest key's
    weight is 1 up to rounding, its residual y_j - f(x) about 0) times |x_j - x| / h^2, a
    large number: a correct implementation that computes sum_j a_j y_j (x_j - x) - f(x)
    sum_j a_j (x_j - x), or log-domain weights, is a few ulps of those terms away
    (``bench/seed_scan.py``: 20 times the default atol of 1e-9 at h = 0.05, 30 away)."""
    xq, xk = key._points(x_query), key._points(x_keys)  # (n_q, d), (n_k, d)
    y = np.asarray(y_values, dtype=np.float64)
    y2 = y[:, None] if y.ndim == 1 else y  # (n_k, d_y)
    h2 = float(bandwidth) ** 2
    scores = -key._sq_dist(xq, xk) / (2 * h2)  # (n_q, n_k)
    a = conventions.masked_softmax(scores)  # (n_q, n_k)
    exponent = np.max(np.abs(scores), axis=1)  # (n_q,), the largest |s_ij| of each row
    f = np.abs(a @ y2)  # (n_q, d_y)
    dist = np.abs(xk[None, :, :] - xq[:, None, :])  # (n_q, n_k, d)
    terms = (
        np.einsum("qk,ky,qkd->qyd", a, np.abs(y2), dist)
        + f[:, :, None] * np.einsum("qk,qkd->qd", a, dist)[:, None, :]
    )  # (n_q, d_y, d)
    mag = terms / h2 * (1 + exponent)[:, None, None]
    mag = mag[:, 0, :] if y.ndim == 1 else mag
    return (mag[..., 0] if np.ndim(x_query) == 1 else mag,)


def _query_grad_without_normaliser(x_query, x_keys, y_values, bandwidth):
    """(1/h^2) sum_j a_j y_j (x_j - x): the softmax's normaliser not differentiated."""
    xq, xk = key._points(x_query), key._points(x_keys)  # (n_q, d), (n_k, d)
    y = np.asarray(y_values, dtype=float)
    y2 = y[:, None] if y.ndim == 1 else y  # (n_k, d_y)
    a = pooling.nadaraya_watson_weights(x_query, x_keys, bandwidth)  # (n_q, n_k)
    offset = xk[None, :, :] - xq[:, None, :]  # (n_q, n_k, d)
    jac = np.einsum("qk,ky,qkd->qyd", a, y2, offset) / float(bandwidth) ** 2
    jac = jac[:, 0, :] if y.ndim == 1 else jac
    return jac[..., 0] if np.ndim(x_query) == 1 else jac


# ----------------------------------------------------------------------------------------
# task 3: nadaraya_watson_ard


def _ard_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 8, 2)
    far = np.array([[40.0, -40.0], [0.2, 0.1]])
    scales = normal(rng, n_k, 2) * np.array([1.0, 100.0])
    return [
        Case(
            "2-d points, scalar targets",
            (normal(rng, n_q, 2), normal(rng, n_k, 2), normal(rng, n_k), rng.uniform(0.3, 1.5, 2)),
        ),
        Case(
            "3-d points, vector targets",
            (
                normal(rng, n_q, 3),
                normal(rng, n_k, 3),
                normal(rng, n_k, 2),
                rng.uniform(0.4, 1.6, 3),
            ),
        ),
        Case(
            "an irrelevant dimension (a very wide bandwidth)",
            (normal(rng, n_q, 2), normal(rng, n_k, 2), normal(rng, n_k), np.array([0.5, 1e3])),
        ),
        Case(
            "query far from every key",
            (far, normal(rng, 5, 2), normal(rng, 5), np.array([0.1, 0.2])),
        ),
        Case(
            "one dimension (d = 1)",
            (
                rng.uniform(0, 5, (n_q, 1)),
                rng.uniform(0, 5, (n_k, 1)),
                normal(rng, n_k),
                np.array([0.7]),
            ),
        ),
        Case(
            "one key",
            (normal(rng, 3, 2), normal(rng, 1, 2), normal(rng, 1, 2), np.array([0.6, 1.7])),
        ),
        Case(
            "one query (n_q = 1), (n_k, 1) targets",
            (normal(rng, 1, 2), normal(rng, n_k, 2), normal(rng, n_k, 1), np.array([0.8, 1.2])),
        ),
        Case(
            "dimensions on different scales",
            (
                normal(rng, n_q, 2) * np.array([1.0, 100.0]),
                scales,
                normal(rng, n_k),
                np.array([0.5, 60.0]),
            ),
        ),
    ]


def _ard_with_scores(score):
    """A wrong variant: softmax(score(diff2, h)) @ y, diff2 (n_q, n_k, d), h (d,)."""

    def outputs(x_query, x_keys, y_values, bandwidths):
        h = np.asarray(bandwidths, dtype=float)
        diff2 = (key._points(x_query)[:, None, :] - key._points(x_keys)[None, :, :]) ** 2
        return conventions.masked_softmax(score(diff2, h)) @ np.asarray(y_values, dtype=float)

    return outputs


# ----------------------------------------------------------------------------------------
# task 4: loo_loss_and_grad_ard


def _bisect_first(x, y, h, low, high):
    """Bisection on the sign of dL/dh_1 (h_2.. fixed) over [low, high]; None when dL/dh_1
    does not go from negative to positive there."""
    loo = key.loo_loss_and_grad_ard

    def slope(h1):
        return loo(x, y, np.concatenate([[h1], h[1:]]))[1][0]

    if not slope(low) < 0 < slope(high):
        return None
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if slope(mid) < 0 else (low, mid)
    return high * (1 + 1e-4)


def _near_optimum_ard(rng, d):
    """Inputs (12, d) and bandwidths with dL/dh_1 about 1e-5 of the loss (the first bandwidth
    just off the minimum along it, the others where they were drawn): there the gradient's
    terms cancel and a finite difference's error is mostly far over the tolerance."""
    while True:
        x = np.sort(rng.uniform(0, 5, (12, d)), axis=0)
        y = np.sin(2 * x[:, 0]) + 0.3 * x[:, 1:].sum(axis=1) + 0.05 * normal(rng, 12)
        h = np.concatenate([[1.0], rng.uniform(0.8, 2.5, d - 1)])
        h1 = _bisect_first(x, y, h, 0.05, 3.0)
        if h1 is not None:
            return x, y, np.concatenate([[h1], h[1:]])


def _loo_ard_magnitudes(x, y, bandwidths):
    """(loss, gradient (d,)) magnitudes: the size of the terms the LOO loss and each
    dL/dh_l sum, times 1 + the largest softmax exponent (weights), since exp turns an
    exponent's rounding error (a few ulps of |s_ij|) into a relative error of the weight.

    dL/dh_l = 2 mean(err_i dpred_il) nearly cancels at an optimum in h_l, and dpred_il is
    itself a difference, sum_j a_ij g_ijl y_j - (sum_j a_ij g_ijl) f_i: the rounding error of
    a correct implementation is a few ulps of the absolute terms, not of the tiny result
    (the page's scalar check, ``_loo_magnitudes`` before these tasks, measured it)."""
    xs = key._points(x)  # (n, d)
    y = np.asarray(y, dtype=np.float64)
    y2 = y[:, None] if y.ndim == 1 else y  # (n, d_y)
    h, n = np.asarray(bandwidths, dtype=np.float64), xs.shape[0]
    off = ~np.eye(n, dtype=bool)
    diff2 = (xs[:, None, :] - xs[None, :, :]) ** 2  # (n, n, d)
    scores = np.where(off, -(diff2 / (2 * h * h)).sum(-1), 0.0)  # (n, n)
    weights = conventions.masked_softmax(scores, off)  # (n, n)
    top = np.max(np.where(off, scores, -np.inf), axis=1)  # (n,), the max shift
    exponent = np.max(np.abs(top) + (weights * np.abs(scores)).sum(1))
    pred = weights @ y2  # (n, d_y)
    err = np.abs(pred - y2)  # (n, d_y)
    wg = weights[:, :, None] * diff2 / h**3  # (n, n, d), a_ij ds_ij/dh_l
    loss = np.mean(err * err) + 2 * np.mean(err * (weights @ np.abs(y2) + np.abs(y2)))
    terms = (
        np.einsum("ijl,jk->ikl", wg, np.abs(y2)) + wg.sum(1)[:, None, :] * np.abs(pred)[:, :, None]
    )
    grad = 2 * np.einsum("ik,ikl->l", err, terms) / err.size  # (d,)
    return loss * (1 + exponent), grad * (1 + exponent)


def _loo_ard_cases(rng):
    n = int(rng.integers(6, 10))
    x = rng.uniform(0, 5, (n, 2))
    return [
        Case(
            "one bandwidth (d = 1) near the optimum (a finite difference is not accurate enough)",
            _near_optimum_ard(rng, 1),
        ),
        Case("2-d inputs", (x, np.sin(x[:, 0]) + 0.1 * normal(rng, n), rng.uniform(0.4, 1.5, 2))),
        Case(
            "3-d inputs, vector targets",
            (normal(rng, 7, 3), normal(rng, 7, 2), rng.uniform(0.5, 1.5, 3)),
        ),
        Case(
            "two points (n = 2)",
            (np.array([[0.0, 0.5], [1.0, -0.5]]), np.array([1.0, -1.0]), np.array([0.8, 1.3])),
        ),
        Case(
            "an irrelevant dimension (a very wide bandwidth)",
            (x, np.cos(x[:, 1]) + 0.1 * normal(rng, n), np.array([40.0, 0.6])),
        ),
        Case(
            "2-d inputs, the first bandwidth near its optimum",
            _near_optimum_ard(rng, 2),
        ),
        Case(
            "(n, 1) targets (d_y = 1)",
            (x, np.sin(x[:, :1]) + 0.1 * normal(rng, n, 1), rng.uniform(0.4, 1.5, 2)),
        ),
    ]


def _loo_ard_variant(x, y, bandwidths, keep_diagonal=False, g_of=None, outputs_mean=True):
    """A wrong variant of the LOO loss and gradient: the diagonal kept, another g_ijl, or a
    sum over the outputs instead of a mean."""
    h = np.asarray(bandwidths, dtype=float)
    y = np.asarray(y, dtype=float)
    y2 = y[:, None] if y.ndim == 1 else y
    n = y2.shape[0]
    scores, diff2 = key._ard_scores(x, x, h)
    allowed = np.ones((n, n), bool) if keep_diagonal else ~np.eye(n, dtype=bool)
    a = conventions.masked_softmax(scores, allowed)
    pred = a @ y2
    err = pred - y2
    g = diff2 / h**3 if g_of is None else g_of(diff2, h)
    ag = a[:, :, None] * g
    dpred = np.einsum("ijl,jk->ikl", ag, y2) - ag.sum(axis=1)[:, None, :] * pred[:, :, None]
    count = err.size if outputs_mean else n
    return float(np.sum(err**2) / count), 2 * np.einsum("ik,ikl->l", err, dpred) / count


CHAPTER = register(
    Chapter(
        "ch1_pooling",
        # measured 2026-12-03 (`python -m autograder.grading.measure`, then in budgets.py): the
        # solved notebook graded in a warm sandbox took 1.86, 0.10, 0.10 s (2 CPUs, load average
        # 3.9); T = the slowest
        reference_seconds=1.9,
        checks=(
            Check(
                "epanechnikov_weights",
                key.epanechnikov_weights,
                _epanechnikov_cases,
                outputs=("weights",),
                hints={
                    "nan": "a query with no key within h has an all-zero kernel row: its weights "
                    "are a row of zeros, and the normalisation must not divide 0 by 0 there",
                    "transposed": "queries are rows: weights[i, j] is how much query i looks at key j",
                    "values": "each row is K(u_ij) / sum_l K(u_il) with K(u) = max(0, 1 - u^2) and "
                    "u_ij = |x_i - x_j| / h",
                },
                mistakes=(
                    Mistake(
                        "u is the distance divided by the bandwidth: K(u) = max(0, 1 - |x_i - x_j|^2 / h^2)",
                        lambda xq, xk, h: key.epanechnikov_weights(xq, xk, 1.0),
                    ),
                    Mistake(
                        "the kernel is max(0, 1 - u^2): without the clipping at 0, keys farther than "
                        "h get negative weights",
                        lambda xq, xk, h: _epanechnikov_kernel(xq, xk, h, lambda u2: 1.0 - u2),
                    ),
                    Mistake(
                        "the Epanechnikov kernel uses u^2, not |u|: K(u) = max(0, 1 - u^2)",
                        lambda xq, xk, h: _epanechnikov_kernel(
                            xq, xk, h, lambda u2: np.maximum(0.0, 1.0 - np.sqrt(u2))
                        ),
                    ),
                    Mistake(
                        "normalise each query's row over the keys (axis -1), not each key's "
                        "column over the queries",
                        lambda xq, xk, h: _epanechnikov_kernel(xq, xk, h, _clip, axis=0),
                    ),
                    Mistake(
                        "a query with no key within h must get a row of zeros, not 0/0 = NaN",
                        lambda xq, xk, h: _epanechnikov_kernel(xq, xk, h, _clip, guard=False),
                    ),
                ),
            ),
            Check(
                "nadaraya_watson_query_grad",
                key.nadaraya_watson_query_grad,
                _query_grad_cases,
                outputs=("jacobian",),
                # a few ulps of the terms summed (far from the keys they cancel): atol 1e-13
                # (450 ulps) of them, and rtol 1e-9; the mistakes are off by O(1).
                # `bench/seed_scan.py`, seeds 0-1999: correct variants within 0.00055 of it
                rtol=1e-9,
                atol=1e-13,
                scale=_query_grad_magnitudes,
                hints={
                    "nan": HINT_MAX_SHIFT + " (a query far from every key underflows to 0/0)",
                    "shape": "the prediction's shape, then the point's: (n_q,) for 1-d points and "
                    "scalar targets, (n_q, d), (n_q, d_y) or (n_q, d_y, d)",
                    "transposed": "the prediction's axis comes before the point's: entry [i, k, l] "
                    "is d f_k(x_i) / d x_il, shape (n_q, d_y, d)",
                    "values": "start from the page's gradient in the bandwidth ('Learning the "
                    "bandwidth'): its softmax step carries over as it is, and only each "
                    "score's derivative changes, now taken in the query's coordinates",
                },
                mistakes=(
                    Mistake(
                        "the sign is flipped: moving the query towards a key raises that key's "
                        "score, so each score's derivative points from the query to the key",
                        lambda xq, xk, y, h: -key.nadaraya_watson_query_grad(xq, xk, y, h),
                    ),
                    Mistake(
                        "the softmax's normaliser depends on x too: each key's term measures its"
                        " target against the prediction, as in the softmax step of the page's "
                        "gradient",
                        _query_grad_without_normaliser,
                    ),
                    Mistake(
                        "your gradient is half the right one: differentiating the squared "
                        "distance brings down a 2, and the 2 cancels the kernel's 1/2",
                        lambda xq, xk, y, h: key.nadaraya_watson_query_grad(xq, xk, y, h) / 2,
                    ),
                    Mistake(
                        "this is the derivative in the query, not in the bandwidth: your result "
                        "has one power of h too many",
                        lambda xq, xk, y, h: key.nadaraya_watson_query_grad(xq, xk, y, h) / h,
                    ),
                ),
            ),
            Check(
                "nadaraya_watson_ard",
                key.nadaraya_watson_ard,
                _ard_cases,
                outputs=("predictions",),
                hints={
                    "nan": HINT_MAX_SHIFT + " (a query far from every key underflows to 0/0)",
                    "shape": "predictions have the trailing shape of y_values: (n_q,) or (n_q, d_y)",
                    "transposed": "queries are rows: the predictions are (n_q, d_y), one row per query",
                    "values": "each dimension has its own bandwidth: the page's Gaussian score, with "
                    "each coordinate (the query's and the keys') divided by its own h_l",
                },
                mistakes=(
                    Mistake(
                        "one bandwidth per dimension: each coordinate's difference is scaled by "
                        "its own bandwidth, not the distance by one common bandwidth",
                        _ard_with_scores(lambda d2, h: -d2.sum(-1) / (2 * np.mean(h) ** 2)),
                    ),
                    Mistake(
                        "the bandwidth is squared: dividing a coordinate by h_l divides its "
                        "squared difference by the square of h_l",
                        _ard_with_scores(lambda d2, h: -(d2 / (2 * h)).sum(-1)),
                        everywhere=True,  # near one-hot weights it coincides with others
                    ),
                    Mistake(
                        "your scores are twice the Gaussian's: its exponent halves the squared "
                        "distance, as on the page",
                        _ard_with_scores(lambda d2, h: -(d2 / (h * h)).sum(-1)),
                    ),
                ),
            ),
            Check(
                "loo_loss_and_grad_ard",
                key.loo_loss_and_grad_ard,
                _loo_ard_cases,
                outputs=("loss", "dloss_dbandwidths"),
                # the tolerance is 1e-15 (4.5 ulps) of each case's magnitudes (the scalar
                # bandwidth's check measured it: correct implementations stayed under 0.29 of
                # it on 3000 seeds, a central difference within it on 4 % of near-optimum
                # cases); rtol 0: near an optimum the gradient is a cancelling difference.
                # `bench/seed_scan.py`, seeds 0-1999, 2026-12-05: the notebook 0.094 of it,
                # log-domain weights without the difference of sums 0.268
                rtol=0.0,
                atol=1e-15,
                scale=_loo_ard_magnitudes,
                hints={
                    "arity": "return a pair (loss, dloss_dbandwidths)",
                    "dloss_dbandwidths.shape": "one derivative per bandwidth: shape (d,)",
                    "loss.values": "leave point i out of its own prediction (mask the diagonal) and "
                    "average the squared errors over points and outputs",
                    "dloss_dbandwidths.values": "differentiate by hand: each bandwidth enters the "
                    "scores through its own dimension alone, in the chain rule of the page's gradient "
                    "('Learning the bandwidth'); a finite difference is a good test of your formula, "
                    "but not accurate enough to pass",
                },
                mistakes=(
                    Mistake(
                        "your gradient has the wrong sign: it is dL/dh_l, the direction that increases the loss",
                        lambda x, y, h: (lambda lg: (lg[0], -lg[1]))(
                            key.loo_loss_and_grad_ard(x, y, h)
                        ),
                    ),
                    Mistake(
                        "leave point i out of its own prediction: mask the diagonal of the weights",
                        lambda x, y, h: _loo_ard_variant(x, y, h, keep_diagonal=True),
                    ),
                    Mistake(
                        "each bandwidth sees only its own dimension: the derivative of a score in "
                        "h_l reads that dimension's squared difference, not the whole squared distance",
                        lambda x, y, h: _loo_ard_variant(
                            x, y, h, g_of=lambda d2, hh: d2.sum(-1, keepdims=True) / hh**3
                        ),
                    ),
                    Mistake(
                        "one more power of h than you have: the score holds its bandwidth as "
                        "1/h^2, and differentiating that in h adds a power",
                        lambda x, y, h: _loo_ard_variant(x, y, h, g_of=lambda d2, hh: d2 / hh**2),
                    ),
                    Mistake(
                        "for vector targets the loss is the mean over points and outputs: divide by n d_y",
                        lambda x, y, h: _loo_ard_variant(x, y, h, outputs_mean=False),
                    ),
                ),
            ),
        ),
    )
)
