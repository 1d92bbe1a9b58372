"""Answer key of assignment ``ch1_pooling`` (Attention as pooling): the next steps of the chapter.

The chapter (``book/ch1_pooling.ipynb``) builds Nadaraya–Watson regression with the Gaussian
kernel {eq}`ch1-gaussian-kernel`, one scalar bandwidth h, and the derivative of the
leave-one-out loss in h {eq}`ch1-loo-grad`. The assignment asks for what it leaves open:

- ``epanechnikov_weights``: another kernel, K(u) = max(0, 1 - u^2), compactly supported: a
  query with no key within h gets an all-zero row (the course's empty-row convention);
- ``nadaraya_watson_query_grad``: the derivative of the Gaussian prediction in the *query*,
  df/dx = (1/h^2) sum_j a_j (y_j - f(x)) (x_j - x), the softmax Jacobian of
  {eq}`ch1-loo-grad`'s step 2 with dscore/dx instead of dscore/dh;
- ``nadaraya_watson_ard``: one bandwidth per input dimension (automatic relevance
  determination), scores -sum_l (x_l - x_jl)^2 / (2 h_l^2);
- ``loo_loss_and_grad_ard``: the leave-one-out loss {eq}`ch1-loo-loss` of that model and its
  gradient in every bandwidth, {eq}`ch1-loo-grad` with g_ijl = (x_il - x_jl)^2 / h_l^3.

Shapes: points are (n,) (one dimension) or (n, d); targets (n,) or (n, d_y); rows are
queries, so weights are (n_q, n_k). Plain NumPy in float64; softmaxes are max-shifted
(``solutions.conventions.masked_softmax``).
"""

from __future__ import annotations

import numpy as np

from solutions.conventions import masked_softmax

__all__ = [
    "epanechnikov_weights",
    "nadaraya_watson_query_grad",
    "nadaraya_watson_ard",
    "loo_loss_and_grad_ard",
]


def _points(x) -> np.ndarray:
    """(n,) or (n, d) points as a float64 (n, d) array."""
    x = np.asarray(x, dtype=np.float64)
    return x[:, None] if x.ndim == 1 else x  # (n, d)


def _sq_dist(x_query, x_keys) -> np.ndarray:
    """Squared Euclidean distances ||x_i - x_j||^2, (n_q, n_k)."""
    diff = _points(x_query)[:, None, :] - _points(x_keys)[None, :, :]  # (n_q, n_k, d)
    return (diff**2).sum(axis=-1)  # (n_q, n_k)


# ----------------------------------------------------------------------------------------
# task 1: a compactly supported kernel


def epanechnikov_weights(x_query, x_keys, bandwidth) -> np.ndarray:
    """Epanechnikov-kernel pooling weights: K(u) = max(0, 1 - u^2), u = ||x_i - x_j|| / h,
    normalised over the keys of each query (the constant 3/4 cancels).

    x_query:   (n_q,) or (n_q, d) query points
    x_keys:    (n_k,) or (n_k, d) key points (the training inputs)
    bandwidth: h > 0
    Returns weights (n_q, n_k): each row sums to 1, or is all zeros when no key lies
    within h of the query (never NaN).
    """
    u2 = _sq_dist(x_query, x_keys) / float(bandwidth) ** 2  # (n_q, n_k)
    k = np.maximum(0.0, 1.0 - u2)  # (n_q, n_k), the kernel without its constant
    total = k.sum(axis=-1, keepdims=True)  # (n_q, 1)
    return k / np.where(total > 0, total, 1.0)  # an empty row stays 0


# ----------------------------------------------------------------------------------------
# task 2: the prediction's derivative in the query


def nadaraya_watson_query_grad(x_query, x_keys, y_values, bandwidth) -> np.ndarray:
    """Jacobian of the Gaussian Nadaraya–Watson prediction f(x_i) = sum_j a_ij y_j in its own
    query x_i: s_ij = -||x_i - x_j||^2 / (2 h^2), ds_ij/dx_i = (x_j - x_i) / h^2 and the
    softmax derivative da_ij/ds_il = a_ij (delta_jl - a_il) give

        df(x_i)/dx_i = (1/h^2) sum_j a_ij (y_j - f(x_i)) (x_j - x_i)^T.

    x_query:   (n_q,) or (n_q, d) query points
    x_keys:    (n_k,) or (n_k, d) key points
    y_values:  (n_k,) or (n_k, d_y) targets
    bandwidth: h > 0
    Returns the prediction's shape followed by the point's shape: (n_q,) for 1-d points
    and scalar targets, (n_q, d) for (n, d) points, (n_q, d_y) or (n_q, d_y, d) for vector
    targets; entry [i, k, l] = d f_k(x_i) / d x_il.
    """
    xq, xk = _points(x_query), _points(x_keys)  # (n_q, d), (n_k, d)
    y = np.asarray(y_values, dtype=np.float64)
    y2 = y[:, None] if y.ndim == 1 else y  # (n_k, d_y)
    h = float(bandwidth)
    a = masked_softmax(-_sq_dist(xq, xk) / (2 * h * h))  # (n_q, n_k), {eq}`ch1-nw-weights`
    pred = a @ y2  # (n_q, d_y), {eq}`ch1-nw-prediction`
    resid = y2[None, :, :] - pred[:, None, :]  # (n_q, n_k, d_y), y_j - f(x_i)
    offset = xk[None, :, :] - xq[:, None, :]  # (n_q, n_k, d), x_j - x_i
    jac = np.einsum("qk,qky,qkd->qyd", a, resid, offset) / (h * h)  # (n_q, d_y, d)
    if y.ndim == 1:
        jac = jac[:, 0, :]  # (n_q, d)
    if np.ndim(x_query) == 1:
        jac = jac[..., 0]  # (n_q,) or (n_q, d_y)
    return jac


# ----------------------------------------------------------------------------------------
# task 3: one bandwidth per input dimension


def _ard_scores(x_query, x_keys, bandwidths) -> tuple[np.ndarray, np.ndarray]:
    """Scores s_ij = -sum_l (x_il - x_jl)^2 / (2 h_l^2), (n_q, n_k), and the squared
    differences (x_il - x_jl)^2, (n_q, n_k, d)."""
    h = np.asarray(bandwidths, dtype=np.float64)  # (d,)
    diff2 = (_points(x_query)[:, None, :] - _points(x_keys)[None, :, :]) ** 2  # (n_q, n_k, d)
    return -(diff2 / (2 * h * h)).sum(axis=-1), diff2  # (n_q, n_k), (n_q, n_k, d)


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths) -> np.ndarray:
    """Nadaraya–Watson with one Gaussian bandwidth per input dimension:
    a_ij = softmax_j(-sum_l (x_il - x_jl)^2 / (2 h_l^2)), f(x_i) = sum_j a_ij y_j.

    x_query:    (n_q, d) query points
    x_keys:     (n_k, d) key points
    y_values:   (n_k,) or (n_k, d_y) targets
    bandwidths: (d,) positive, h_l for dimension l
    Returns predictions (n_q,) or (n_q, d_y).
    """
    scores, _ = _ard_scores(x_query, x_keys, bandwidths)  # (n_q, n_k)
    return masked_softmax(scores) @ np.asarray(y_values, dtype=np.float64)  # (n_q[, d_y])


# ----------------------------------------------------------------------------------------
# task 4: the leave-one-out loss and its gradient in every bandwidth


def loo_loss_and_grad_ard(x, y, bandwidths) -> tuple[float, np.ndarray]:
    """Leave-one-out squared error of ``nadaraya_watson_ard`` {eq}`ch1-loo-loss` and its
    gradient in each bandwidth, {eq}`ch1-loo-grad` with one g per dimension:

        g_ijl = ds_ij/dh_l = (x_il - x_jl)^2 / h_l^3,
        dL/dh_l = (2/(n d_y)) sum_i sum_k (f_ik - y_ik) sum_{j != i} a_ij g_ijl (y_jk - f_ik).

    x:          (n, d) inputs, n >= 2
    y:          (n,) or (n, d_y) targets (the loss is the mean over points and outputs)
    bandwidths: (d,) positive
    Returns (loss, dloss_dbandwidths): a float and a (d,) array.
    """
    h = np.asarray(bandwidths, dtype=np.float64)  # (d,)
    y = np.asarray(y, dtype=np.float64)
    y2 = y[:, None] if y.ndim == 1 else y  # (n, d_y)
    n = y2.shape[0]
    scores, diff2 = _ard_scores(x, x, h)  # (n, n), (n, n, d)
    a = masked_softmax(scores, ~np.eye(n, dtype=bool))  # (n, n), zero diagonal
    pred = a @ y2  # (n, d_y), f_{-i}(x_i)
    err = pred - y2  # (n, d_y)
    g = diff2 / h**3  # (n, n, d), g_ijl
    ag = a[:, :, None] * g  # (n, n, d)
    # df_ik/dh_l = sum_j a_ij g_ijl y_jk - (sum_j a_ij g_ijl) f_ik
    dpred = np.einsum("ijl,jk->ikl", ag, y2) - ag.sum(axis=1)[:, None, :] * pred[:, :, None]
    grad = 2 * np.einsum("ik,ikl->l", err, dpred) / err.size  # (d,)
    return float(np.mean(err**2)), grad
