"""Answer key of assignment ``ch5_multihead`` (Multi-head attention): the next steps of the chapter.

The chapter (``book/ch5_multihead.ipynb``) builds the forward pass of multi-head attention,
{eq}`ch5-head` and {eq}`ch5-multihead-eq`, counts its parameters and FLOPs, and asks whether
the heads are an ensemble. The assignment asks for what it leaves open:

- ``gated_multihead_attention``: every head's output multiplied by a gate xi_h before the
  output projection (Michel, Levy and Neubig 2019):
  MultiHead = sum_h xi_h head_h W_o^h, with W_o^h the h-th row block of W_o;
- ``head_importance``: their importance score I_h = mean over the batch of |dL/dxi_h| at
  xi = 1, where dL/dxi_h = <G, head_h W_o^h> for the loss's gradient G = dL/dOutput;
- ``multihead_backward``: the gradients of L = <G, Output> in the inputs and the four
  weight matrices, the softmax Jacobian dS = P * (dP - rowsum(P * dP)) per head;
- ``attention_backward_bytes``: what the backward pass keeps from the forward pass: Q, K, V,
  O and either the weights P (B h n^2 numbers) or the rows' logsumexp (B h n numbers).

Shapes: items are rows, ``(..., n, d)``; heads are ``(..., h, n, d_h)`` with d_h = d_model / h;
weights are ``(d_in, d_out)`` used as ``x @ w``; masks are True where a query may attend and
are shared by every head. Plain NumPy in float64; the softmax is max-shifted and a row with
no allowed key gets zero weights (``solutions.conventions.masked_softmax``).
"""

from __future__ import annotations

import numpy as np

from solutions.conventions import masked_softmax

__all__ = [
    "gated_multihead_attention",
    "head_importance",
    "multihead_backward",
    "attention_backward_bytes",
]


# ----------------------------------------------------------------------------------------
# the forward pass, head by head, keeping what the later tasks need


def _to_heads(x, num_heads) -> np.ndarray:
    """Column block h of the features becomes head h: (..., n, d) -> (..., h, n, d / h)."""
    *batch, n, width = np.shape(x)
    blocks = np.reshape(x, (*batch, n, num_heads, width // num_heads))  # (..., n, h, d_h)
    return np.moveaxis(blocks, -2, -3)  # (..., h, n, d_h)


def _from_heads(x) -> np.ndarray:
    """The heads side by side again: (..., h, n, d_h) -> (..., n, h d_h)."""
    side_by_side = np.moveaxis(x, -3, -2)  # (..., n, h, d_h)
    *batch, n, num_heads, d_h = side_by_side.shape
    return side_by_side.reshape(*batch, n, num_heads * d_h)  # (..., n, h d_h)


def _forward(x_q, x_kv, w_q, w_k, w_v, num_heads, mask):
    """Every head of eq. ch5-head, with the arrays its backward pass reads.

    x_q: (..., n_q, d_q); x_kv: (..., n_kv, d_kv); w_q: (d_q, d_model);
    w_k, w_v: (d_kv, d_model); mask: None or boolean, broadcastable to (..., n_q, n_kv).
    Returns q (..., h, n_q, d_h), k and v (..., h, n_kv, d_h), weights P
    (..., h, n_q, n_kv) and heads P v (..., h, n_q, d_h).
    """
    x_q, x_kv = np.asarray(x_q, dtype=np.float64), np.asarray(x_kv, dtype=np.float64)
    q = _to_heads(x_q @ np.asarray(w_q, dtype=np.float64), num_heads)  # (..., h, n_q, d_h)
    k = _to_heads(x_kv @ np.asarray(w_k, dtype=np.float64), num_heads)  # (..., h, n_kv, d_h)
    v = _to_heads(x_kv @ np.asarray(w_v, dtype=np.float64), num_heads)  # (..., h, n_kv, d_h)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., h, n_q, n_kv)
    shared = None if mask is None else np.expand_dims(np.asarray(mask, dtype=bool), -3)
    weights = masked_softmax(scores, shared)  # (..., h, n_q, n_kv), eq. ch5-head
    return q, k, v, weights, weights @ v  # heads: (..., h, n_q, d_h)


# ----------------------------------------------------------------------------------------
# task 1: a gate on every head


def gated_multihead_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    """Multi-head attention with head h's output multiplied by gates[..., h] before W_o.

    x_q: (..., n_q, d_q); x_kv: (..., n_kv, d_kv); w_q: (d_q, d_model);
    w_k, w_v: (d_kv, d_model); w_o: (d_model, d_out); num_heads: h, a divisor of d_model;
    gates: (h,) or (..., h), its batch axes broadcast with the inputs';
    mask: None or boolean, broadcastable to (..., n_q, n_kv), True = may attend.
    Returns the output (..., n_q, d_out): sum_h xi_h head_h W_o^h, which is
    [xi_1 head_1 ... xi_h head_h] W_o (eq. ch5-multihead-eq with gated heads).
    """
    *_, heads = _forward(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    gates = np.asarray(gates, dtype=np.float64)[..., None, None]  # (..., h, 1, 1)
    return _from_heads(gates * heads) @ np.asarray(w_o, dtype=np.float64)  # (..., n_q, d_out)


# ----------------------------------------------------------------------------------------
# task 2: Michel et al.'s head importance


def head_importance(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask=None):
    """I_h = mean over the batch of |dL/dxi_h| at xi = 1 (Michel et al. 2019).

    Arguments as ``gated_multihead_attention`` (no gates: they are all 1); grad_out:
    (..., n_q, d_out), dL/dOutput, the output's shape.
    dL/dxi_h = <G, head_h W_o^h> = <G W_o^T, [0 .. head_h .. 0]>: the inner product over
    (n_q, d_out) of one example. Returns (h,): its absolute value averaged over every batch
    axis (a single example if there are none).
    """
    *_, heads = _forward(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    grad_out = np.asarray(grad_out, dtype=np.float64)
    d_heads = _to_heads(grad_out @ np.asarray(w_o, dtype=np.float64).T, num_heads)
    per_example = np.sum(d_heads * heads, axis=(-2, -1))  # (..., h): dL/dxi_h
    return np.abs(per_example.reshape(-1, num_heads)).mean(axis=0)  # (h,)


# ----------------------------------------------------------------------------------------
# task 3: the backward pass


def _summed_outer(x, grad) -> np.ndarray:
    """sum over the batch and the items of x^T grad: (..., n, a), (..., n, b) -> (a, b)."""
    return x.reshape(-1, x.shape[-1]).T @ grad.reshape(-1, grad.shape[-1])  # (a, b)


def multihead_backward(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask=None):
    """Gradients of L = <grad_out, MultiHead(x_q, x_kv)> (eq. ch5-multihead-eq).

    Arguments as ``gated_multihead_attention`` (no gates); x_q, x_kv and grad_out
    (..., n_q, d_out) have the same batch axes. Backward, per head, with M the merged
    heads, P the weights and S the scaled scores:
      dW_o = M^T G; dM = G W_o^T; dP = dM_h V_h^T; dV_h = P^T dM_h;
      dS = P * (dP - rowsum(P * dP)); dQ_h = dS K_h / sqrt(d_h); dK_h = dS^T Q_h / sqrt(d_h);
      dx_q = dQ W_q^T; dx_kv = dK W_k^T + dV W_v^T (keys and values both read x_kv).
    The weight gradients sum over the batch. Returns (dx_q (..., n_q, d_q),
    dx_kv (..., n_kv, d_kv), dw_q (d_q, d_model), dw_k, dw_v (d_kv, d_model),
    dw_o (d_model, d_out)).
    """
    x_q, x_kv = np.asarray(x_q, dtype=np.float64), np.asarray(x_kv, dtype=np.float64)
    w_q, w_k, w_v, w_o = (np.asarray(w, dtype=np.float64) for w in (w_q, w_k, w_v, w_o))
    grad_out = np.asarray(grad_out, dtype=np.float64)
    q, k, v, weights, heads = _forward(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    root = np.sqrt(q.shape[-1])  # sqrt(d_h)

    dw_o = _summed_outer(_from_heads(heads), grad_out)  # (d_model, d_out)
    d_heads = _to_heads(grad_out @ w_o.T, num_heads)  # (..., h, n_q, d_h)
    d_weights = d_heads @ np.swapaxes(v, -1, -2)  # (..., h, n_q, n_kv)
    dv = np.swapaxes(weights, -1, -2) @ d_heads  # (..., h, n_kv, d_h)
    # the softmax's Jacobian, row by row; masked keys have P = 0, so no gradient
    d_scores = weights * (d_weights - np.sum(weights * d_weights, axis=-1, keepdims=True))
    dq = d_scores @ k / root  # (..., h, n_q, d_h)
    dk = np.swapaxes(d_scores, -1, -2) @ q / root  # (..., h, n_kv, d_h)

    dq, dk, dv = _from_heads(dq), _from_heads(dk), _from_heads(dv)  # (..., n, d_model)
    dx_q = dq @ w_q.T  # (..., n_q, d_q)
    dx_kv = dk @ w_k.T + dv @ w_v.T  # (..., n_kv, d_kv): both paths
    dw_q = _summed_outer(x_q, dq)  # (d_q, d_model)
    dw_k = _summed_outer(x_kv, dk)  # (d_kv, d_model)
    dw_v = _summed_outer(x_kv, dv)  # (d_kv, d_model)
    return dx_q, dx_kv, dw_q, dw_k, dw_v, dw_o


# ----------------------------------------------------------------------------------------
# task 4: what the backward pass keeps


def attention_backward_bytes(batch, num_heads, n, d_model, itemsize, recompute):
    """Bytes the attention core keeps from its forward pass for its backward pass (int).

    Self-attention of ``batch`` sequences of n items, ``num_heads`` heads of width
    d_model / num_heads, every number ``itemsize`` bytes. Kept: Q, K, V and O, each
    batch * num_heads * n * d_h = batch * n * d_model numbers; then either the weights P,
    batch * num_heads * n * n numbers (``recompute`` False), or, for a backward pass that
    recomputes P block by block from the online softmax's statistics, each row's
    logsumexp, batch * num_heads * n numbers (``recompute`` True).
    """
    tensors = 4 * batch * n * d_model  # Q, K, V, O: (B, h, n, d_h) each
    rows = batch * num_heads * n  # one softmax row per (sequence, head, query)
    per_row = 1 if recompute else n  # its logsumexp, or its n weights
    return int(itemsize * (tensors + rows * per_row))
