"""Attention as pooling (chapter 1, ``book/ch1_pooling.ipynb``).

What this file builds, in the order the chapter derives it:

- ``average_pool`` and ``max_pool``: the two query-independent ways to summarise a
  sequence ``(..., n, d)`` into one vector ``(..., d)``, with an optional padding mask.
- ``gaussian_kernel`` and ``nadaraya_watson_weights``: a query-dependent pooling whose
  weights come from how close the query is to each key (kernel regression, 1964).
- ``nadaraya_watson`` and ``attention_pool``: the weighted average of the values; the
  same ``weights @ values`` that every later chapter calls attention.
- ``loo_loss_and_grad`` and ``fit_bandwidth``: learn the one parameter of the model, the
  bandwidth, by gradient descent on the leave-one-out squared error (analytic gradient).

Conventions (``docs/conventions.md``): rows are items; masks are boolean with True
= present; a fully masked sequence pools to zeros (never NaN). Functions keep the
floating dtype of their input (float32 stays float32).

Equations of the chapter, by label:

- {eq}`ch1-average-pool`: ``sum_j m_j x_j / sum_j m_j``;
  {eq}`ch1-max-pool`: ``max_{j: m_j} x_j``
- {eq}`ch1-gaussian-kernel`: ``K_h(u) = exp(-u^2 / (2 h^2))``
- {eq}`ch1-nw-weights`: ``a_ij = K_h(|x_i - x_j|) / sum_l K_h(|x_i - x_l|)
  = softmax_j(-|x_i - x_j|^2 / (2 h^2))``
- {eq}`ch1-nw-prediction`: ``f(x_i) = sum_j a_ij y_j`` (attention pooling:
  ``weights @ values``)
- {eq}`ch1-loo-loss`: ``L(h) = (1/n) sum_i (f_{-i}(x_i) - y_i)^2``, where ``f_{-i}``
  drops point i from the keys
- {eq}`ch1-loo-grad`:
  ``dL/dh = (2/n) sum_i (f_{-i}(x_i) - y_i) sum_j a_ij g_ij (y_j - f_{-i}(x_i))`` with
  ``g_ij = d s_ij / dh = |x_i - x_j|^2 / h^3``
"""

from __future__ import annotations

import numpy as np

from solutions.conventions import as_float, check_mask, masked_softmax

__all__ = [
    "average_pool",
    "max_pool",
    "gaussian_kernel",
    "nadaraya_watson_weights",
    "nadaraya_watson",
    "attention_pool",
    "loo_loss_and_grad",
    "fit_bandwidth",
]


# --------------------------------------------------------------------------------------
# query-independent pooling


def _check_sequence_mask(x: np.ndarray, mask) -> np.ndarray | None:
    """A boolean ``(..., n)`` mask (one flag per item) for a sequence ``x`` of shape
    ``(..., n, d)``."""
    if x.ndim < 2:
        raise ValueError(
            f"expected a sequence of shape (..., n, d), got shape {x.shape}"
        )
    if mask is None:
        return None
    return check_mask(
        mask, x.shape[:-1], name="(..., n)", context=f"one flag per item of x {x.shape}"
    )


def average_pool(x, mask=None) -> np.ndarray:
    """Mean over the sequence axis of the items that are present,
    {eq}`ch1-average-pool`.

    x:    (..., n, d) sequence of n items of width d
    mask: boolean (..., n), True = present; None = all present.
    Returns (..., d). A sequence with no item present pools to zeros.
    """
    x = as_float(x, "x")
    mask = _check_sequence_mask(x, mask)
    if mask is None:
        return x.mean(axis=-2)  # (..., d)
    m = np.broadcast_to(mask, x.shape[:-1])[..., None].astype(x.dtype)  # (..., n, 1)
    total = np.sum(x * m, axis=-2)  # (..., d)
    count = np.sum(m, axis=-2)  # (..., 1)
    return total / np.maximum(count, 1)  # (..., d); an empty sequence: 0 / 1 = 0


def max_pool(x, mask=None) -> np.ndarray:
    """Feature-wise maximum over the items that are present, {eq}`ch1-max-pool`.

    x:    (..., n, d) sequence of n items of width d
    mask: boolean (..., n), True = present; None = all present.
    Returns (..., d). A sequence with no item present pools to zeros.
    """
    x = as_float(x, "x")
    mask = _check_sequence_mask(x, mask)
    if mask is None:
        return x.max(axis=-2)  # (..., d)
    m = np.broadcast_to(mask, x.shape[:-1])[..., None]  # (..., n, 1)
    # (..., d)
    pooled = np.max(np.where(m, x, -np.inf), axis=-2).astype(x.dtype, copy=False)
    any_present = np.any(m, axis=-2)  # (..., 1)
    return np.where(any_present, pooled, 0).astype(x.dtype, copy=False)  # (..., d)


# --------------------------------------------------------------------------------------
# Nadaraya-Watson kernel regression


def gaussian_kernel(distance, bandwidth) -> np.ndarray:
    """Gaussian kernel ``K_h(u) = exp(-u^2 / (2 h^2))``, {eq}`ch1-gaussian-kernel`.

    distance:  any shape, the distance u between a query and a key
    bandwidth: h > 0 (a scalar)
    Returns an array of the shape of ``distance`` with values in (0, 1]. The normalising
    constant ``1 / (h sqrt(2 pi))`` is left out: it cancels in the weights,
    {eq}`ch1-nw-weights`.
    """
    distance = as_float(distance, "distance")
    h = _check_bandwidth(bandwidth)
    return np.exp(-(distance**2) / np.asarray(2.0 * h * h, dtype=distance.dtype))


def _check_bandwidth(bandwidth) -> float:
    if np.ndim(bandwidth) != 0 or not np.isfinite(bandwidth) or not bandwidth > 0:
        raise ValueError(
            f"expected a positive finite scalar bandwidth, got {bandwidth!r}"
        )
    return float(bandwidth)


def _as_points(x, name: str) -> np.ndarray:
    """Points as (n, d): a 1-D array (n,) of scalars becomes (n, 1)."""
    x = as_float(x, name)
    if x.ndim == 1:
        return x[:, None]  # (n, 1)
    if x.ndim != 2:
        raise ValueError(f"expected {name} of shape (n,) or (n, d), got {x.shape}")
    return x


def _squared_distances(x_query: np.ndarray, x_keys: np.ndarray) -> np.ndarray:
    """``|x_i - x_j|^2`` for x_query (n_q, d), x_keys (n_k, d) -> (n_q, n_k)."""
    if x_query.shape[-1] != x_keys.shape[-1]:
        raise ValueError(
            f"expected keys of width {x_query.shape[-1]} to match queries, got "
            f"{x_keys.shape[-1]}: x_query has shape {x_query.shape}, x_keys has shape "
            f"{x_keys.shape}"
        )
    diff = x_query[:, None, :] - x_keys[None, :, :]  # (n_q, n_k, d)
    return np.sum(diff * diff, axis=-1)  # (n_q, n_k)


def nadaraya_watson_weights(x_query, x_keys, bandwidth) -> np.ndarray:
    """Nadaraya-Watson weights with a Gaussian kernel, {eq}`ch1-nw-weights`.

    x_query:   (n_q,) or (n_q, d) query points
    x_keys:    (n_k,) or (n_k, d) training inputs (the keys)
    bandwidth: h > 0
    Returns weights (n_q, n_k) whose rows sum to 1. Computed as a max-shifted softmax of
    ``-|x_i - x_j|^2 / (2 h^2)``, so a tiny bandwidth gives a one-hot row, not 0 / 0.
    """
    # (n_q, d), (n_k, d)
    xq, xk = _as_points(x_query, "x_query"), _as_points(x_keys, "x_keys")
    h = _check_bandwidth(bandwidth)
    if xk.shape[0] == 0:
        raise ValueError(
            f"expected at least one key, got x_keys of shape {np.shape(x_keys)}"
        )
    dtype = np.result_type(xq.dtype, xk.dtype)
    # (n_q, n_k)
    scores = -_squared_distances(xq, xk) / np.asarray(2.0 * h * h, dtype=dtype)
    return masked_softmax(scores)  # (n_q, n_k)


def attention_pool(weights, values) -> np.ndarray:
    """Attention pooling: the weighted average ``sum_j a_ij v_j``,
    {eq}`ch1-nw-prediction`.

    weights: (..., n_q, n_k) rows summing to 1 (or 0 for a fully masked query)
    values:  (..., n_k, d_v), or (n_k,) for scalar values
    Returns (..., n_q, d_v), or (..., n_q) for scalar values.
    """
    weights, values = as_float(weights, "weights"), as_float(values, "values")
    if weights.ndim < 2:
        raise ValueError(
            f"expected weights of shape (..., n_q, n_k), got {weights.shape}"
        )
    n_k = weights.shape[-1]
    if values.ndim == 1:
        if values.shape[0] != n_k:
            raise ValueError(
                f"expected one value per key: values of shape ({n_k},) for weights "
                f"{weights.shape}, got {values.shape}"
            )
        return weights @ values  # (..., n_q)
    if values.shape[-2] != n_k:
        raise ValueError(
            f"expected one value per key: values (..., n_k, d_v) with n_k = {n_k} for "
            f"weights {weights.shape}, got values of shape {values.shape}: did you "
            "pass them transposed?"
        )
    try:
        return weights @ values  # (..., n_q, d_v)
    except ValueError:
        raise ValueError(
            f"expected the batch dims of weights {weights.shape} and values "
            f"{values.shape} to broadcast"
        ) from None


def nadaraya_watson(x_query, x_keys, y_values, bandwidth) -> np.ndarray:
    """Nadaraya-Watson kernel regression ``f(x) = sum_j a_j(x) y_j``,
    {eq}`ch1-nw-weights` and {eq}`ch1-nw-prediction`.

    x_query:   (n_q,) or (n_q, d) query points
    x_keys:    (n_k,) or (n_k, d) training inputs
    y_values:  (n_k,) or (n_k, d_y) training targets
    bandwidth: h > 0
    Returns the predictions (n_q,) or (n_q, d_y) (same trailing shape as ``y_values``).
    Use ``nadaraya_watson_weights`` for the (n_q, n_k) weights themselves.
    """
    weights = nadaraya_watson_weights(x_query, x_keys, bandwidth)  # (n_q, n_k)
    y = as_float(y_values, "y_values")
    if y.ndim not in (1, 2) or y.shape[0] != weights.shape[1]:
        raise ValueError(
            f"expected one target per key: y_values of shape ({weights.shape[1]},) or "
            f"({weights.shape[1]}, d_y) for x_keys of shape {np.shape(x_keys)}, got "
            f"{y.shape}"
        )
    return attention_pool(weights, y)  # (n_q,) or (n_q, d_y)


# --------------------------------------------------------------------------------------
# learning the bandwidth


def loo_loss_and_grad(x, y, bandwidth) -> tuple[float, float]:
    """Leave-one-out squared error of Nadaraya-Watson and its derivative in h,
    {eq}`ch1-loo-loss` and {eq}`ch1-loo-grad`.

    x:         (n,) or (n, d) inputs, n >= 2
    y:         (n,) or (n, d_y) targets
    bandwidth: h > 0
    Returns ``(loss, dloss_dbandwidth)`` as floats. Each point is predicted from the
    other n - 1 points (the diagonal of the weights is masked out); the loss is the mean
    of the squared errors over points (and over the d_y outputs).
    """
    xs = _as_points(x, "x")  # (n, d)
    h = _check_bandwidth(bandwidth)
    y = as_float(y, "y")
    n = xs.shape[0]
    if n < 2:
        raise ValueError(
            "expected at least 2 points for a leave-one-out loss, got x of shape "
            f"{np.shape(x)}"
        )
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise ValueError(
            f"expected y of shape ({n},) or ({n}, d_y) to match x of shape "
            f"{np.shape(x)}, got {y.shape}"
        )
    y2 = y[:, None] if y.ndim == 1 else y  # (n, d_y)
    dist2 = _squared_distances(xs, xs)  # (n, n)
    scores = -dist2 / (2.0 * h * h)  # (n, n), s_ij of eq. ch1-nw-weights
    weights = masked_softmax(scores, ~np.eye(n, dtype=bool))  # (n, n), a_ii = 0
    pred = weights @ y2  # (n, d_y), f_{-i}(x_i)
    err = pred - y2  # (n, d_y)
    loss = np.mean(err * err)
    g = dist2 / h**3  # (n, n), d s_ij / dh
    # d f_{-i} / dh = sum_j a_ij (g_ij - sum_l a_il g_il) y_j = sum_j a_ij g_ij
    # (y_j - f_{-i})
    wg = weights * g  # (n, n)
    dpred = wg @ y2 - np.sum(wg, axis=1, keepdims=True) * pred  # (n, d_y)
    grad = 2.0 * np.mean(err * dpred)  # eq. ch1-loo-grad
    return float(loss), float(grad)


def fit_bandwidth(x, y, init, steps, lr):
    """Learn the Nadaraya-Watson bandwidth by gradient descent on the LOO loss.

    x:     (n,) or (n, d) inputs; y: (n,) or (n, d_y) targets
    init:  initial bandwidth h_0 > 0
    steps: number of updates ``h <- h - lr * dL/dh`` (analytic gradient,
    {eq}`ch1-loo-grad`)
    lr:    learning rate > 0
    Returns ``(bandwidth, history)``: the final h (float) and the loss history, an array
    of length ``steps + 1`` with the loss at h_0 first and the loss at the returned h
    last.
    Raises ValueError if an update makes h non-positive (lr too large for this data).
    """
    h = _check_bandwidth(init)
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(
            f"expected a non-negative integer number of steps, got {steps!r}"
        )
    if np.ndim(lr) != 0 or not lr > 0:
        raise ValueError(f"expected a positive scalar learning rate, got {lr!r}")
    history = []
    for step in range(steps):
        loss, grad = loo_loss_and_grad(x, y, h)
        history.append(loss)
        h_new = h - lr * grad
        if not (np.isfinite(h_new) and h_new > 0):
            raise ValueError(
                f"bandwidth went from {h:.4g} to {h_new:.4g} at step {step} (gradient "
                f"{grad:.4g}): use a smaller learning rate than lr={lr}"
            )
        h = float(h_new)
    history.append(loo_loss_and_grad(x, y, h)[0])
    return h, np.asarray(history)
