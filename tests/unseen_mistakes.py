"""A corpus of plausible wrong implementations of the graded functions, written from the task
statements and the answer key's docstrings alone, apart from the chapters' hint lists (issue
45, "diagnosis that generalises"): what a student gets wrong when transposing, scaling,
reducing, masking, indexing or signing, with no hint written for it. ``tests/
test_diagnosis.py`` measures how many of them lose points *and* get a named diagnosis.

``CORPUS``: (check name, what the mistake is, the wrong function). Each function is the
student's whole answer (its own softmax, its own loops), or, for the long ones, the reference
with one step done wrong. Pure NumPy (and the references it wraps); nothing here runs in a
sandbox.
"""

from __future__ import annotations

import math

import numpy as np

from answers import (
    ch1_pooling,
    ch2_soft_hard,
    ch3_seq2seq,
    ch4_self_attention,
    ch5_multihead,
)

# ----------------------------------------------------------------------------------------
# a student's own helpers


def _softmax(s, mask=None, axis=-1):
    s = np.asarray(s, dtype=float)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    top = np.max(s, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def _pts(x):
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x


def _d2(xq, xk):
    return ((_pts(xq)[:, None, :] - _pts(xk)[None, :, :]) ** 2).sum(-1)


# ----------------------------------------------------------------------------------------
# ch1: pooling


def epan_unnormalised(x_query, x_keys, bandwidth):
    return np.maximum(0.0, 1.0 - _d2(x_query, x_keys) / bandwidth**2)


def epan_h_not_squared(x_query, x_keys, bandwidth):
    k = np.maximum(0.0, 1.0 - _d2(x_query, x_keys) / bandwidth)
    t = k.sum(-1, keepdims=True)
    return k / np.where(t > 0, t, 1.0)


def epan_normalised_over_queries(x_query, x_keys, bandwidth):
    k = np.maximum(0.0, 1.0 - _d2(x_query, x_keys) / bandwidth**2)
    t = k.sum(0, keepdims=True)
    return k / np.where(t > 0, t, 1.0)


def epan_triangle(x_query, x_keys, bandwidth):
    k = np.maximum(0.0, 1.0 - np.sqrt(_d2(x_query, x_keys)) / bandwidth)
    t = k.sum(-1, keepdims=True)
    return k / np.where(t > 0, t, 1.0)


def nw_grad_sign(x_query, x_keys, y_values, bandwidth):
    return -ch1_pooling.nadaraya_watson_query_grad(x_query, x_keys, y_values, bandwidth)


def nw_grad_h_once(x_query, x_keys, y_values, bandwidth):
    return ch1_pooling.nadaraya_watson_query_grad(x_query, x_keys, y_values, bandwidth) * bandwidth


def nw_grad_squeezed(x_query, x_keys, y_values, bandwidth):
    return np.squeeze(ch1_pooling.nadaraya_watson_query_grad(x_query, x_keys, y_values, bandwidth))


def ard_h_not_squared(x_query, x_keys, y_values, bandwidths):
    diff2 = (_pts(x_query)[:, None, :] - _pts(x_keys)[None, :, :]) ** 2
    s = -(diff2 / (2 * np.asarray(bandwidths))).sum(-1)
    return _softmax(s) @ np.asarray(y_values, dtype=float)


def ard_softmax_over_queries(x_query, x_keys, y_values, bandwidths):
    h = np.asarray(bandwidths, dtype=float)
    diff2 = (_pts(x_query)[:, None, :] - _pts(x_keys)[None, :, :]) ** 2
    s = -(diff2 / (2 * h * h)).sum(-1)
    return _softmax(s, axis=0) @ np.asarray(y_values, dtype=float)


def ard_no_half(x_query, x_keys, y_values, bandwidths):
    h = np.asarray(bandwidths, dtype=float)
    diff2 = (_pts(x_query)[:, None, :] - _pts(x_keys)[None, :, :]) ** 2
    s = -(diff2 / (h * h)).sum(-1)
    return _softmax(s) @ np.asarray(y_values, dtype=float)


def loo_sum_not_mean(x, y, bandwidths):
    loss, grad = ch1_pooling.loo_loss_and_grad_ard(x, y, bandwidths)
    size = np.asarray(y).size
    return loss * size, grad * size


def loo_grad_sign(x, y, bandwidths):
    loss, grad = ch1_pooling.loo_loss_and_grad_ard(x, y, bandwidths)
    return loss, -grad


def loo_keeps_self(x, y, bandwidths):
    """Leave-one-out forgotten: every point also pools itself."""
    h = np.asarray(bandwidths, dtype=float)
    y2 = np.asarray(y, dtype=float)
    y2 = y2[:, None] if y2.ndim == 1 else y2
    diff2 = (_pts(x)[:, None, :] - _pts(x)[None, :, :]) ** 2
    a = _softmax(-(diff2 / (2 * h * h)).sum(-1))
    pred = a @ y2
    err = pred - y2
    g = diff2 / h**3
    ag = a[:, :, None] * g
    dpred = np.einsum("ijl,jk->ikl", ag, y2) - ag.sum(1)[:, None, :] * pred[:, :, None]
    return float(np.mean(err**2)), 2 * np.einsum("ik,ikl->l", err, dpred) / err.size


# ----------------------------------------------------------------------------------------
# ch2: soft and hard attention


def softmax_bw_wrong_axis(weights, grad_weights):
    p, dp = np.asarray(weights, float), np.asarray(grad_weights, float)
    return p * (dp - (p * dp).sum(-2, keepdims=True))


def softmax_bw_no_p(weights, grad_weights):
    p, dp = np.asarray(weights, float), np.asarray(grad_weights, float)
    return dp - (p * dp).sum(-1, keepdims=True)


def softmax_bw_sign(weights, grad_weights):
    p, dp = np.asarray(weights, float), np.asarray(grad_weights, float)
    return p * ((p * dp).sum(-1, keepdims=True) - dp)


def _attn_bw(q, k, v, g, mask, scale_scores=True, scale_grads=True):
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / (math.sqrt(d) if scale_scores else 1.0)
    p = _softmax(s, mask)
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    c = math.sqrt(d) if scale_grads else 1.0
    return ds @ k / c, np.swapaxes(ds, -1, -2) @ q / c, dv


def _summed(x, shape):
    while x.ndim > len(shape):
        x = x.sum(0)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(axis=axes, keepdims=True) if axes else x


def _attn_bw_student(**how):
    def backward(q, k, v, grad_out, mask=None):
        q, k, v, g = (np.asarray(a, float) for a in (q, k, v, grad_out))
        if how.get("mask") == "ignored":
            mask = None
        elif how.get("mask") == "inverted" and mask is not None:
            mask = ~np.asarray(mask)
        dq, dk, dv = _attn_bw(
            q, k, v, g, mask, how.get("scale_scores", True), how.get("scale_grads", True)
        )
        return _summed(dq, q.shape), _summed(dk, k.shape), _summed(dv, v.shape)

    return backward


def attn_bw_dq_dk_swapped(q, k, v, grad_out, mask=None):
    dq, dk, dv = ch2_soft_hard.attention_backward(q, k, v, grad_out, mask)
    return dq, dv, dk


def sparsemax_support_off_by_one(scores, mask=None):
    z = np.asarray(scores, float)
    allowed = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask, z.shape)
    z = np.where(allowed, z, -np.inf)
    zs = -np.sort(-z, -1)
    j = np.arange(1, z.shape[-1] + 1)
    with np.errstate(invalid="ignore"):
        cs = np.cumsum(zs, -1)
        kk = (1 + j * zs > cs).sum(-1, keepdims=True)
    kk = np.minimum(kk + 1, z.shape[-1])  # counted one too many
    top = np.take_along_axis(cs, np.maximum(kk - 1, 0), -1)
    with np.errstate(invalid="ignore"):
        tau = np.where(kk > 0, top - 1, 0.0) / np.maximum(kk, 1)
    return np.where(allowed, np.maximum(np.nan_to_num(z - tau, neginf=0.0), 0.0), 0.0)


def sparsemax_mask_ignored(scores, mask=None):
    return ch2_soft_hard.sparsemax(scores)


def sparsemax_bw_mean_everywhere(weights, grad_weights):
    p, dp = np.asarray(weights, float), np.asarray(grad_weights, float)
    s = p > 0
    return np.where(s, dp - dp.mean(-1, keepdims=True), 0.0)


def sparsemax_bw_not_centred(weights, grad_weights):
    p, dp = np.asarray(weights, float), np.asarray(grad_weights, float)
    return np.where(p > 0, dp, 0.0)


# ----------------------------------------------------------------------------------------
# ch3: seq2seq


def coverage_loss_mask_ignored(weights, mask=None):
    return ch3_seq2seq.coverage_loss(weights)


def coverage_loss_inclusive(weights, mask=None):
    w = np.asarray(weights, float)
    if mask is not None:
        w = np.where(mask, w, 0.0)
    return np.minimum(w, np.cumsum(w, axis=-2)).sum(axis=(-2, -1))


def coverage_loss_mean_steps(weights, mask=None):
    w = np.asarray(weights, float)
    if mask is not None:
        w = np.where(mask, w, 0.0)
    cov = np.cumsum(w, -2) - w
    return np.minimum(w, cov).sum(-1).mean(-1)


def coverage_context_mask_ignored(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    return ch3_seq2seq.coverage_context(s_prev, h, coverage, w_s, w_h, w_c, v)


def coverage_context_no_coverage(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    return ch3_seq2seq.coverage_context(s_prev, h, np.zeros_like(coverage), w_s, w_h, w_c, v, mask)


def location_not_flipped(s_prev, h, prev_weights, w_s, w_h, filters, w_f, v, mask=None):
    flipped = np.asarray(filters)[:, ::-1]  # correlation where the task says convolution
    return ch3_seq2seq.location_aware_context(
        s_prev, h, prev_weights, w_s, w_h, flipped, w_f, v, mask
    )


def location_mask_ignored(s_prev, h, prev_weights, w_s, w_h, filters, w_f, v, mask=None):
    return ch3_seq2seq.location_aware_context(s_prev, h, prev_weights, w_s, w_h, filters, w_f, v)


def steps_coverage_never_updated(s, h, w_s, w_h, w_c, v, mask=None):
    s, h = np.asarray(s, float), np.asarray(h, float)
    cov = np.zeros(h.shape[:-1])
    steps = [
        ch3_seq2seq.coverage_context(s[:, t], h, cov, w_s, w_h, w_c, v, mask)[1]
        for t in range(s.shape[1])
    ]
    w = np.stack(steps, 1)
    return w, ch3_seq2seq.coverage_loss(w)


def steps_outputs_swapped(s, h, w_s, w_h, w_c, v, mask=None):
    weights, loss = ch3_seq2seq.coverage_attention_steps(s, h, w_s, w_h, w_c, v, mask)
    return loss, weights


# ----------------------------------------------------------------------------------------
# ch4: self-attention


def window_strict(n, window, global_positions):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    g = np.isin(np.arange(n), global_positions)
    return (np.abs(i - j) < window) | g[:, None] | g[None, :]


def window_global_rows_only(n, window, global_positions):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    g = np.isin(np.arange(n), global_positions)
    return (np.abs(i - j) <= window) | g[:, None]


def alibi_slopes_power_formula(num_heads):
    return 2.0 ** (-8.0 * np.arange(1, num_heads + 1) / num_heads)


def alibi_slopes_from_zero(num_heads):
    return 2.0 ** (-8.0 * np.arange(num_heads) / num_heads)


def _alibi(q, k, v, slopes, mask, scale=True, sign=-1.0, absolute=True):
    q, k, v = (np.asarray(a, float) for a in (q, k, v))
    n = q.shape[-2]
    rel = np.arange(n)[:, None] - np.arange(n)[None, :]
    dist = np.abs(rel) if absolute else rel
    s = q @ np.swapaxes(k, -1, -2) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    s = s + sign * np.asarray(slopes, float)[:, None, None] * dist
    w = _softmax(s, mask)
    return w @ v, w


def alibi_no_sqrt_d(q, k, v, slopes, mask=None):
    return _alibi(q, k, v, slopes, mask, scale=False)


def alibi_plus_bias(q, k, v, slopes, mask=None):
    return _alibi(q, k, v, slopes, mask, sign=1.0)


def alibi_signed_distance(q, k, v, slopes, mask=None):
    return _alibi(q, k, v, slopes, mask, absolute=False)


def bucket_sign_flipped(relative_position, bidirectional, num_buckets, max_distance):
    rel = -np.asarray(relative_position)  # query minus key instead of key minus query
    return ch4_self_attention.relative_position_bucket(
        rel, bidirectional, num_buckets, max_distance
    )


def online_bw_no_scale(q, k, v, out, logsumexp, grad_out, block_size=128, mask=None):
    dq, dk, dv = ch4_self_attention.online_softmax_backward(
        q, k, v, out, logsumexp, grad_out, block_size, mask
    )
    root = math.sqrt(np.shape(q)[-1])
    return dq * root, dk * root, dv


def online_bw_mask_ignored(q, k, v, out, logsumexp, grad_out, block_size=128, mask=None):
    q, k, v, out, g = (np.asarray(a, float) for a in (q, k, v, out, grad_out))
    lse = np.where(np.isfinite(logsumexp), logsumexp, 0.0)[..., None]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    p = np.exp(s - lse)
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (g * out).sum(-1, keepdims=True))
    return ds @ k / math.sqrt(q.shape[-1]), np.swapaxes(ds, -1, -2) @ q / math.sqrt(q.shape[-1]), dv


# ----------------------------------------------------------------------------------------
# ch5: multi-head


def gated_gates_ignored(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    return ch5_multihead.gated_multihead_attention(
        x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, np.ones_like(np.asarray(gates, float)), mask
    )


def gated_mask_inverted(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    mask = None if mask is None else ~np.asarray(mask, bool)
    return ch5_multihead.gated_multihead_attention(
        x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask
    )


def importance_signed(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask=None):
    *_, heads = ch5_multihead._forward(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    dh = ch5_multihead._to_heads(np.asarray(grad_out) @ np.asarray(w_o).T, num_heads)
    per = np.sum(dh * heads, axis=(-2, -1))
    return per.reshape(-1, num_heads).mean(0)


def importance_summed(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask=None):
    imp = ch5_multihead.head_importance(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask)
    batch = int(np.prod(np.shape(x_q)[:-2]))
    return imp * batch


def mh_bw_outputs_swapped(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask=None):
    dx_q, dx_kv, dw_q, dw_k, dw_v, dw_o = ch5_multihead.multihead_backward(
        x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask
    )
    return dx_q, dx_kv, dw_q, dw_v, dw_k, dw_o


def mh_bw_mask_ignored(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask=None):
    return ch5_multihead.multihead_backward(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out)


def bytes_three_tensors(batch, num_heads, n, d_model, itemsize, recompute):
    per_row = 1 if recompute else n
    return int(itemsize * (3 * batch * n * d_model + batch * num_heads * n * per_row))


def bytes_flag_inverted(batch, num_heads, n, d_model, itemsize, recompute):
    return ch5_multihead.attention_backward_bytes(
        batch, num_heads, n, d_model, itemsize, not recompute
    )


# ----------------------------------------------------------------------------------------
# ch6: the transformer


def packed_no_padding_rule(segment_ids):
    seg = np.asarray(segment_ids)
    n = seg.shape[-1]
    causal = np.arange(n)[None, :] <= np.arange(n)[:, None]
    return causal & (seg[..., :, None] == seg[..., None, :])


def packed_strict_causal(segment_ids):
    seg = np.asarray(segment_ids)
    n = seg.shape[-1]
    causal = np.arange(n)[None, :] < np.arange(n)[:, None]
    same = seg[..., :, None] == seg[..., None, :]
    return causal & same & (seg != 0)[..., :, None]


def packed_transposed(segment_ids):
    seg = np.asarray(segment_ids)
    n = seg.shape[-1]
    causal = np.arange(n)[:, None] <= np.arange(n)[None, :]  # i <= j: the future
    same = seg[..., :, None] == seg[..., None, :]
    return causal & same & (seg != 0)[..., None, :]


def _log_softmax(x):
    x = np.asarray(x, float)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def smoothing_over_all_classes(logits, targets, smoothing, pad_index):
    lp = _log_softmax(logits)
    keep = np.asarray(targets) != pad_index
    if not keep.any():
        return 0.0
    nll = -np.take_along_axis(lp, np.asarray(targets)[..., None], -1)[..., 0]
    smooth = -lp.mean(-1)  # uniform over all V classes, the pad class too
    loss = (1 - smoothing) * nll + smoothing * smooth
    return float(loss[keep].mean())


def smoothing_mean_with_pad(logits, targets, smoothing, pad_index):
    lp = _log_softmax(logits)
    targets = np.asarray(targets)
    keep = targets != pad_index
    v = lp.shape[-1]
    u = np.full(v, 1.0 / (v - 1))
    u[pad_index] = 0.0
    nll = -np.take_along_axis(lp, targets[..., None], -1)[..., 0]
    loss = (1 - smoothing) * nll + smoothing * -(lp * u).sum(-1)
    return float((loss * keep).mean())


def noam_wrong_warmup_power(step, d_model, warmup, factor=1.0):
    step = np.asarray(step, float)
    rate = factor * d_model**-0.5 * np.minimum(step**-0.5, step * warmup**-0.5)
    return float(rate) if rate.ndim == 0 else rate


def noam_d_model_not_rooted(step, d_model, warmup, factor=1.0):
    step = np.asarray(step, float)
    rate = factor / d_model * np.minimum(step**-0.5, step * warmup**-1.5)
    return float(rate) if rate.ndim == 0 else rate


def shift_left(targets, bos_id):
    t = np.asarray(targets)
    bos = np.full(t.shape[:-1] + (1,), bos_id, dtype=t.dtype)
    return np.concatenate([t[..., 1:], bos], -1)


def shift_right_drops_first(targets, bos_id):
    t = np.asarray(targets)
    bos = np.full(t.shape[:-1] + (1,), bos_id, dtype=t.dtype)
    return np.concatenate([bos, t[..., 1:]], -1)


def tf_loss_grad_not_averaged(logits, targets, pad_id):
    lp = _log_softmax(logits)
    targets = np.asarray(targets)
    keep = targets != pad_id
    n = max(int(keep.sum()), 1)
    nll = -np.take_along_axis(lp, targets[..., None], -1)[..., 0]
    grad = np.exp(lp)
    np.put_along_axis(
        grad, targets[..., None], np.take_along_axis(grad, targets[..., None], -1) - 1, -1
    )
    return float((nll * keep).sum() / n), grad * keep[..., None]


def tf_loss_sign(logits, targets, pad_id):
    lp = _log_softmax(logits)
    targets = np.asarray(targets)
    keep = targets != pad_id
    n = max(int(keep.sum()), 1)
    nll = -np.take_along_axis(lp, targets[..., None], -1)[..., 0]
    onehot = np.zeros_like(lp)
    np.put_along_axis(onehot, targets[..., None], 1.0, -1)
    return float((nll * keep).sum() / n), (onehot - np.exp(lp)) * keep[..., None] / n


CORPUS = [
    ("epanechnikov_weights", "rows not normalised", epan_unnormalised),
    ("epanechnikov_weights", "divides by h, not h^2", epan_h_not_squared),
    ("epanechnikov_weights", "normalised over the queries", epan_normalised_over_queries),
    ("epanechnikov_weights", "|u| instead of u^2 (a triangle kernel)", epan_triangle),
    ("nadaraya_watson_query_grad", "x_i - x_j instead of x_j - x_i", nw_grad_sign),
    ("nadaraya_watson_query_grad", "1/h instead of 1/h^2", nw_grad_h_once),
    ("nadaraya_watson_ard", "h_l not squared", ard_h_not_squared),
    ("nadaraya_watson_ard", "softmax over the queries", ard_softmax_over_queries),
    ("nadaraya_watson_ard", "the 1/2 of the Gaussian dropped", ard_no_half),
    ("loo_loss_and_grad_ard", "sums instead of the mean", loo_sum_not_mean),
    ("loo_loss_and_grad_ard", "gradient sign flipped", loo_grad_sign),
    ("loo_loss_and_grad_ard", "a point pools itself", loo_keeps_self),
    ("softmax_backward", "inner sum over the queries", softmax_bw_wrong_axis),
    ("softmax_backward", "P factor dropped", softmax_bw_no_p),
    ("softmax_backward", "sign flipped", softmax_bw_sign),
    (
        "attention_backward",
        "no 1/sqrt(d) anywhere",
        _attn_bw_student(scale_scores=False, scale_grads=False),
    ),
    ("attention_backward", "1/sqrt(d) in the forward only", _attn_bw_student(scale_grads=False)),
    ("attention_backward", "mask ignored", _attn_bw_student(mask="ignored")),
    ("attention_backward", "mask inverted", _attn_bw_student(mask="inverted")),
    ("attention_backward", "dk and dv swapped", attn_bw_dq_dk_swapped),
    ("sparsemax", "support one too large", sparsemax_support_off_by_one),
    ("sparsemax", "mask ignored", sparsemax_mask_ignored),
    ("sparsemax_backward", "mean over every key, not the support", sparsemax_bw_mean_everywhere),
    ("sparsemax_backward", "not centred", sparsemax_bw_not_centred),
    ("coverage_loss", "mask ignored", coverage_loss_mask_ignored),
    ("coverage_loss", "coverage includes the current step", coverage_loss_inclusive),
    ("coverage_loss", "mean over the steps, not the sum", coverage_loss_mean_steps),
    ("coverage_context", "mask ignored", coverage_context_mask_ignored),
    ("coverage_context", "coverage feature dropped", coverage_context_no_coverage),
    ("location_aware_context", "filters not flipped", location_not_flipped),
    ("location_aware_context", "mask ignored", location_mask_ignored),
    ("coverage_attention_steps", "coverage never updated", steps_coverage_never_updated),
    ("coverage_attention_steps", "outputs in the wrong order", steps_outputs_swapped),
    ("window_global_mask", "|i - j| < window", window_strict),
    ("window_global_mask", "global rows only", window_global_rows_only),
    ("alibi_slopes", "the power-of-two formula for every H", alibi_slopes_power_formula),
    ("alibi_slopes", "h counted from 0", alibi_slopes_from_zero),
    ("alibi_attention", "no 1/sqrt(d)", alibi_no_sqrt_d),
    ("alibi_attention", "+m|i - j| instead of -m|i - j|", alibi_plus_bias),
    ("alibi_attention", "signed distance i - j", alibi_signed_distance),
    ("relative_position_bucket", "i - j instead of j - i", bucket_sign_flipped),
    ("online_softmax_backward", "1/sqrt(d) dropped from dq and dk", online_bw_no_scale),
    ("online_softmax_backward", "mask ignored, one block", online_bw_mask_ignored),
    ("gated_multihead_attention", "gates ignored", gated_gates_ignored),
    ("gated_multihead_attention", "mask inverted", gated_mask_inverted),
    ("head_importance", "no absolute value", importance_signed),
    ("head_importance", "summed over the batch", importance_summed),
    ("multihead_backward", "dw_k and dw_v swapped", mh_bw_outputs_swapped),
    ("multihead_backward", "mask ignored", mh_bw_mask_ignored),
    ("attention_backward_bytes", "O not kept", bytes_three_tensors),
    ("attention_backward_bytes", "recompute read backwards", bytes_flag_inverted),
    ("packed_decoder_mask", "padding queries not blanked", packed_no_padding_rule),
    ("packed_decoder_mask", "j < i instead of j <= i", packed_strict_causal),
    ("packed_decoder_mask", "the mask transposed", packed_transposed),
    ("label_smoothed_cross_entropy", "smoothing over every class", smoothing_over_all_classes),
    ("label_smoothed_cross_entropy", "mean over the pad positions too", smoothing_mean_with_pad),
    ("noam_rate", "warmup^-0.5", noam_wrong_warmup_power),
    ("noam_rate", "1/d_model instead of its root", noam_d_model_not_rooted),
    ("shift_right", "shifted left", shift_left),
    ("shift_right", "drops the first target", shift_right_drops_first),
    ("teacher_forced_loss", "gradient not divided by N", tf_loss_grad_not_averaged),
    ("teacher_forced_loss", "gradient sign flipped", tf_loss_sign),
]

#: wrong implementations that no case of the check tells apart from the solution yet: they
#: keep full marks, so they are not in ``CORPUS``. ``np.squeeze`` differs only where an axis
#: has length 1, and no case of the check has n_q = 1, (n, 1) points or (n_k, 1) targets (issue
#: 45, item 2: the hidden cases are to cover every documented shape).
UNTOLD = [
    ("nadaraya_watson_query_grad", "np.squeeze on the result", nw_grad_squeezed),
]
