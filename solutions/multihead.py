"""Multi-head attention and the Transformer block (chapter 5,
``book/ch5_multihead.ipynb``).

What this file builds, in the order the chapter derives it:

- ``split_heads`` / ``merge_heads``: ``(B, n, d_model) -> (B, h, n, d_model/h)`` and
  back, for NumPy arrays and torch tensors alike (one implementation for both).
- ``multihead_attention``: project with W_q, W_k, W_v, attend in every head (chapter 2's
  ``attention``, imported), concatenate the heads and mix them with W_o; and
  ``multihead_param_count`` and ``multihead_flops``: 4 d_model^2 (+ 4 d_model)
  parameters and the same matmul work whatever the number of heads.
- ``MultiHeadAttention`` (torch): the same computation as a module, with
  ``from_torch(nn.MultiheadAttention)`` to copy PyTorch's weights and an optional
  ``KVCache`` for autoregressive decoding; optional dropout on the attention weights,
  {eq}`ch5-attn-dropout` (the NumPy function has none).
- ``TransformerEncoderBlock`` (torch): attention and a feed-forward network
  (``feed_forward``), each with a residual connection and layer norm, pre-LN (default)
  or post-LN; one dropout rate (``check_dropout``, default 0) where
  ``nn.TransformerEncoderLayer`` puts it.
- ``TinyTransformer``: a decoder-only stack of those blocks with a causal mask, trained
  by ``train_toy_transformer`` on sequence reversal (or copying) in seconds on a CPU;
  ``attention_maps`` returns its per-head weights, and ``generate`` (with a KV cache)
  and ``generate_without_cache`` decode greedily so the two can be checked equal.
- Heads that divide the work: ``make_two_offset_data`` asks for the ordered pair of the
  tokens at two fixed offsets back, ``train_two_offset_transformer`` trains a one-layer,
  two-head ``TinyTransformer`` on it, and ``offset_profile`` measures how much weight
  each head puts on each offset (in the trained model: one head per offset).

Conventions (``docs/conventions.md``): rows are items; weights are
``(..., h, n_q, n_kv)``; NumPy weight matrices are used as ``x @ w``; masks are boolean,
True = "may attend", broadcastable to ``(..., n_q, n_kv)`` and shared by all heads.
``torch.nn.MultiheadAttention`` uses the opposite polarity for a boolean ``attn_mask``
(True = "may NOT attend"), so pass it ``~mask``.

Equations of the chapter, by label:

- {eq}`ch5-head`: ``head_i = Attention(X_q W_q^i, X_kv W_k^i, X_kv W_v^i)``, ``W^i`` of
  width d_model/h
- {eq}`ch5-multihead-eq`: ``MultiHead(X_q, X_kv) = Concat(head_1, ..., head_h) W_o``
- {eq}`ch5-params`: parameters ``4 d_model^2 + 4 d_model`` (with biases), independent of
  h
- {eq}`ch5-flops`: matmul FLOPs ``2 (2 n_q d^2 + 2 n_kv d^2 + 2 n_q n_kv d)`` per
  sequence, independent of h
- {eq}`ch5-block`: pre-LN block ``x + Attn(LN(x))`` then ``x + FFN(LN(x))``; post-LN
  ``LN(x + Attn(x))`` then ``LN(x + FFN(x))``;
  ``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``
- {eq}`ch5-two-offsets`: the two-offset task's answer ``y_t = V x_{t-a} + x_{t-b}``
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from solutions.conventions import (
    as_float,
    check_mask,
    check_projections,
    masked_softmax_torch,
)
from solutions.self_attention import sinusoidal_positions
from solutions.soft_hard import attention
from solutions.training import train_loop

__all__ = [
    "split_heads",
    "merge_heads",
    "multihead_attention",
    "multihead_param_count",
    "multihead_flops",
    "KVCache",
    "MultiHeadAttention",
    "TransformerEncoderBlock",
    "TinyTransformer",
    "make_toy_data",
    "train_toy_transformer",
    "attention_maps",
    "generate",
    "generate_without_cache",
    "sequence_accuracy",
    "make_two_offset_data",
    "train_two_offset_transformer",
    "two_offset_accuracy",
    "offset_profile",
]


def _check_heads(d_model, num_heads, what: str = "d_model") -> int:
    if (
        isinstance(num_heads, bool)
        or not isinstance(num_heads, (int, np.integer))
        or num_heads < 1
    ):
        raise ValueError(
            f"expected a positive integer number of heads, got num_heads={num_heads!r}"
        )
    if d_model % num_heads:
        raise ValueError(
            f"{what} = {d_model} is not divisible by num_heads = {num_heads}: each "
            f"head gets {what} / num_heads features, so pick num_heads among the "
            f"divisors of {d_model}"
        )
    return d_model // num_heads


# --------------------------------------------------------------------------------------
# heads: pure reshapes, for NumPy arrays and torch tensors


def split_heads(x, num_heads):
    """Split the feature axis into heads and move the head axis before the sequence
    axis.

    x: (..., n, d) NumPy array or torch tensor; num_heads: h, a divisor of d.
    Returns (..., h, n, d/h): head i holds features ``i*d/h .. (i+1)*d/h - 1`` of every
    item.
    """
    if not isinstance(x, torch.Tensor):
        x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"expected x of shape (..., n, d), got {tuple(x.shape)}")
    d_head = _check_heads(
        x.shape[-1], num_heads, what=f"the width d of x {tuple(x.shape)}"
    )
    x = x.reshape(tuple(x.shape[:-1]) + (num_heads, d_head))  # (..., n, h, d/h)
    return x.swapaxes(-3, -2)  # (..., h, n, d/h)


def merge_heads(x):
    """Inverse of ``split_heads``: concatenate the heads along the feature axis.

    x: (..., h, n, d_h) NumPy array or torch tensor.  Returns (..., n, h * d_h).
    """
    if not isinstance(x, torch.Tensor):
        x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(f"expected x of shape (..., h, n, d_h), got {tuple(x.shape)}")
    h, n, d_head = x.shape[-3:]
    x = x.swapaxes(-3, -2)  # (..., n, h, d_h)
    return x.reshape(tuple(x.shape[:-2]) + (h * d_head,))  # (..., n, h * d_h)


# --------------------------------------------------------------------------------------
# multi-head attention in NumPy, eqs. ch5-head to ch5-flops


def _check_multihead(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask):
    """The float arrays of ``multihead_attention`` and its mask, shared by every head:
    ``(..., 1, n_q, n_kv)`` when it has batch dims, so that it broadcasts over the
    heads."""
    x_q, x_kv = as_float(x_q, "x_q"), as_float(x_kv, "x_kv")
    if x_q.ndim < 2 or x_kv.ndim < 2:
        raise ValueError(
            f"expected x_q (..., n_q, d_q) and x_kv (..., n_kv, d_kv), got {x_q.shape} "
            f"and {x_kv.shape}"
        )
    w_q, w_k, w_v = check_projections(
        ("x_q", x_q, "w_q", w_q), ("x_kv", x_kv, "w_k", w_k), ("x_kv", x_kv, "w_v", w_v)
    )
    d_model = w_q.shape[1]
    if w_k.shape[1] != d_model or w_v.shape[1] != d_model:
        raise ValueError(
            "expected w_q, w_k, w_v to project to the same d_model, got w_q "
            f"{w_q.shape}, w_k {w_k.shape}, w_v {w_v.shape}"
        )
    w_o = as_float(w_o, "w_o")
    if w_o.ndim != 2 or w_o.shape[0] != d_model:
        raise ValueError(
            f"expected w_o of shape (d_model, d_out) with d_model = {d_model} (the "
            f"width of the concatenated heads), got {w_o.shape}"
        )
    _check_heads(d_model, num_heads)
    if mask is not None:
        batch = np.broadcast_shapes(x_q.shape[:-2], x_kv.shape[:-2])
        target = batch + (x_q.shape[-2], x_kv.shape[-2])
        mask = check_mask(
            mask, target, name="(..., n_q, n_kv)", context="one mask for all heads"
        )
        if mask.ndim >= 3:
            # (..., 1, n_q, n_kv): the same for every head
            mask = np.expand_dims(mask, -3)
    return x_q, x_kv, w_q, w_k, w_v, w_o, mask


def multihead_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """Multi-head scaled dot-product attention, {eq}`ch5-head` and
    {eq}`ch5-multihead-eq`.

    x_q:  (..., n_q, d_q) the items that ask (queries)
    x_kv: (..., n_kv, d_kv) the items attended to (keys and values); ``x_kv = x_q`` for
          self-attention
    w_q:  (d_q, d_model); w_k, w_v: (d_kv, d_model); w_o: (d_model, d_out). Column block
          ``i*d_model/h .. (i+1)*d_model/h`` of w_q, w_k, w_v is head i's projection.
    num_heads: h, a divisor of d_model.
    mask: boolean, broadcastable to (..., n_q, n_kv), True = may attend, the same for
          every head; None = all.
    Returns ``(output, weights)``: output (..., n_q, d_out), weights (..., h, n_q,
    n_kv).
    """
    x_q, x_kv, w_q, w_k, w_v, w_o, mask = _check_multihead(
        x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask
    )
    q = split_heads(x_q @ w_q, num_heads)  # (..., h, n_q, d_h): head i is x_q W_q^i
    k = split_heads(x_kv @ w_k, num_heads)  # (..., h, n_kv, d_h)
    v = split_heads(x_kv @ w_v, num_heads)  # (..., h, n_kv, d_h)
    heads, weights = attention(q, k, v, mask=mask)  # every head at once, eq. ch5-head
    # Concat(head_1..head_h) W_o, eq. ch5-multihead-eq
    return merge_heads(heads) @ w_o, weights


def multihead_param_count(d_model, num_heads, bias=True):
    """Number of trainable parameters of multi-head attention, {eq}`ch5-params`.

    d_model: model width; num_heads: h, a divisor of d_model; bias: whether the four
    projections have biases. Returns ``4 d_model^2 (+ 4 d_model)``: the h heads of width
    d_model/h together have exactly the parameters of one head of width d_model.
    """
    if (
        isinstance(d_model, bool)
        or not isinstance(d_model, (int, np.integer))
        or d_model < 1
    ):
        raise ValueError(f"expected a positive integer d_model, got {d_model!r}")
    d_head = _check_heads(d_model, num_heads)
    # W_q^i, W_k^i, W_v^i (+ biases)
    per_head = 3 * d_model * d_head + (3 * d_head if bias else 0)
    output = d_model * d_model + (d_model if bias else 0)  # W_o (+ bias)
    return int(num_heads * per_head + output)


def multihead_flops(n_q, n_kv, d_model, num_heads):
    """Floating-point operations of the matrix products of one multi-head attention,
    {eq}`ch5-flops`.

    n_q, n_kv: numbers of queries and of keys/values; d_model: model width; num_heads:
    h. Counts 2 FLOPs per multiply-add (the convention of ``torch.utils.flop_counter``)
    for one sequence (multiply by the batch size); the softmax (O(h n_q n_kv)) is not
    included.
    Returns an int: projections ``2 (n_q + 2 n_kv) d^2``, output ``2 n_q d^2``, and per
    head ``2 * 2 n_q n_kv d/h`` for the scores and the weighted sum, so h heads of width
    d/h cost exactly what one head of width d costs.
    """
    for name, value in (("n_q", n_q), ("n_kv", n_kv), ("d_model", d_model)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, np.integer))
            or value < 1
        ):
            raise ValueError(f"expected a positive integer {name}, got {value!r}")
    d_head = _check_heads(d_model, num_heads)
    # X_q W_q, X_kv W_k, X_kv W_v
    projections = 2 * (n_q + 2 * n_kv) * d_model * d_model
    # Q K^T and A V of one head
    per_head = 2 * n_q * n_kv * d_head + 2 * n_q * n_kv * d_head
    output = 2 * n_q * d_model * d_model  # Concat(heads) W_o
    return int(projections + num_heads * per_head + output)


# --------------------------------------------------------------------------------------
# torch modules


class KVCache:
    """Keys and values of the positions an attention layer has already seen.

    ``k`` and ``v`` are (B, h, n_past, d_h) tensors (None before the first step).
    ``append`` adds the new positions' keys and values and returns all of them, so each
    decoding step projects only its new token instead of the whole prefix.
    """

    def __init__(self):
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: torch.Tensor, v: torch.Tensor):
        # (B, h, n_past + n, d_h)
        self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
        # (B, h, n_past + n, d_h)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)
        return self.k, self.v


def check_dropout(p) -> float:
    """The dropout rate ``p`` as a float, or a ValueError that says what is allowed.

    p is the probability of zeroing each entry while training: a number in [0, 1). p = 1
    would zero everything and divide the rest by 1 - p = 0, so it is refused.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise ValueError(f"expected a dropout rate p, a number in [0, 1), got {p!r}")
    if not 0 <= p < 1:  # NaN fails both comparisons
        raise ValueError(
            f"expected a dropout rate p in [0, 1), got {p}: p is the probability of "
            "zeroing each entry while training (0 = no dropout; p = 1 would zero "
            "everything)"
        )
    return float(p)


class MultiHeadAttention(nn.Module):
    """Multi-head attention as a torch module, {eq}`ch5-head` and
    {eq}`ch5-multihead-eq`, batch first.

    ``forward(x_q, x_kv=None, mask=None, cache=None)``:
    x_q (B, n_q, d_model); x_kv (B, n_kv, d_model), defaults to x_q (self-attention);
    mask boolean broadcastable to (B, n_q, n_kv_total), True = may attend, shared by the
    heads; cache a ``KVCache`` whose keys/values are prepended (and then extended).
    Returns output (B, n_q, d_model) and weights (B, h, n_q, n_kv_total).

    ``dropout`` (p in [0, 1), default 0): in training mode, each attention weight is
    zeroed with probability p after the softmax and the kept ones are divided by 1 - p
    before they multiply the values, {eq}`ch5-attn-dropout`, as
    ``nn.MultiheadAttention(dropout=p)`` does (the same ``F.dropout`` call on the same
    (B, h, n_q, n_kv) weights, so a seeded step draws the same mask). In eval mode, or
    with p = 0, nothing is dropped and no random number is drawn. The returned weights
    are the ones BEFORE dropout (each allowed row sums to 1);
    ``nn.MultiheadAttention(need_weights=True)`` returns them after dropout instead
    (zeros and 1 / (1 - p) in training mode). The NumPy ``multihead_attention`` has no
    dropout: it is the plain reference.
    """

    def __init__(
        self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0
    ):
        super().__init__()
        self.d_head = _check_heads(d_model, num_heads)
        self.d_model, self.num_heads = d_model, num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        # nn.Dropout(0.0) returns its input without drawing (checked in tests), so p = 0
        # leaves the random stream of seeded training untouched
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, x_q, x_kv=None, mask=None, cache: KVCache | None = None):
        x_kv = x_q if x_kv is None else x_kv
        if x_q.shape[-1] != self.d_model or x_kv.shape[-1] != self.d_model:
            raise ValueError(
                f"expected inputs of width d_model = {self.d_model}, got x_q "
                f"{tuple(x_q.shape)} and x_kv {tuple(x_kv.shape)}"
            )
        q = split_heads(self.q_proj(x_q), self.num_heads)  # (B, h, n_q, d_h)
        k = split_heads(self.k_proj(x_kv), self.num_heads)  # (B, h, n_kv, d_h)
        v = split_heads(self.v_proj(x_kv), self.num_heads)  # (B, h, n_kv, d_h)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h, n_past + n_kv, d_h)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, h, n_q, n_kv)
        if mask is not None:
            # NumPy masks too
            mask = torch.as_tensor(mask, dtype=torch.bool, device=scores.device)
            if mask.dim() >= 3:
                mask = mask.unsqueeze(-3)  # (B, 1, n_q, n_kv): the same for every head
        weights = masked_softmax_torch(scores, mask)  # (B, h, n_q, n_kv)
        heads = self.dropout(weights) @ v  # (B, h, n_q, d_h); identity in eval mode
        # (B, n_q, d_model), (B, h, n_q, n_kv)
        return self.out_proj(merge_heads(heads)), weights

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """A ``MultiHeadAttention`` with the weights, dtype and dropout rate of ``mha``,
        copied.

        Works for ``nn.MultiheadAttention(d, h)`` with or without bias, batch first or
        not (our module is always batch first). Remember the masks: PyTorch's boolean
        ``attn_mask``/``key_padding_mask`` mark the keys that may NOT be attended; ours
        mark those that may, so ``ours(x, mask=m)`` matches
        ``mha(x, x, x, attn_mask=~m)``.
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(
                f"expected a torch.nn.MultiheadAttention, got {type(mha).__name__}"
            )
        if not mha._qkv_same_embed_dim:
            raise ValueError(
                f"expected kdim = vdim = embed_dim = {mha.embed_dim}, got "
                f"kdim={mha.kdim}, vdim={mha.vdim}: this module projects keys and "
                "values from width d_model"
            )
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(
                "add_bias_kv and add_zero_attn are not supported: build mha without "
                "them"
            )
        bias = mha.in_proj_bias is not None
        module = cls(mha.embed_dim, mha.num_heads, bias=bias, dropout=mha.dropout)
        module = module.to(mha.in_proj_weight.dtype)
        with torch.no_grad():
            for proj, w in zip(
                (module.q_proj, module.k_proj, module.v_proj),
                mha.in_proj_weight.chunk(3),
            ):
                proj.weight.copy_(w)  # torch stores (d_out, d_in) and computes x @ W^T
            module.out_proj.weight.copy_(mha.out_proj.weight)
            if bias:
                for proj, b in zip(
                    (module.q_proj, module.k_proj, module.v_proj),
                    mha.in_proj_bias.chunk(3),
                ):
                    proj.bias.copy_(b)
                module.out_proj.bias.copy_(mha.out_proj.bias)
        return module

    def numpy_weights(self):
        """``(w_q, w_k, w_v, w_o)`` as float64 NumPy arrays for ``multihead_attention``.

        NumPy uses ``x @ w`` with w of shape (d_in, d_out), so each is the transpose of
        the torch weight. ``multihead_attention`` has no biases: build the module with
        ``bias=False`` to compare the two.
        """
        if self.q_proj.bias is not None:
            raise ValueError(
                "multihead_attention has no biases: build MultiHeadAttention(..., "
                "bias=False) (or nn.MultiheadAttention(..., bias=False)) to compare it "
                "with the NumPy function"
            )
        projections = (self.q_proj, self.k_proj, self.v_proj, self.out_proj)
        return tuple(
            p.weight.detach().cpu().double().numpy().T.copy() for p in projections
        )


def block_from_torch(cls, layer: nn.Module, expected: type[nn.Module]) -> nn.Module:
    """A ``cls`` block with the feed-forward and layer-norm weights of a PyTorch layer.

    The part of ``from_torch`` that encoder and decoder blocks share: checks that
    ``layer`` is an ``expected`` (``nn.TransformerEncoderLayer`` or
    ``nn.TransformerDecoderLayer``) with a ReLU feed-forward and one dropout rate p
    everywhere (PyTorch's constructor gives every ``Dropout`` and the attention modules
    the same ``dropout``), builds ``cls(d_model, num_heads, d_ff, norm_first, p)`` in
    the layer's dtype and copies ``linear1``/``linear2`` into ``ff`` and every ``normK``
    (weights and eps). The caller copies the attention modules, which differ between the
    two.
    """
    name = expected.__name__
    if not isinstance(layer, expected):
        raise TypeError(f"expected a torch.nn.{name}, got {type(layer).__name__}")
    if not (layer.activation is F.relu or isinstance(layer.activation, nn.ReLU)):
        raise ValueError(
            f"expected a {name} with activation='relu' (the FFN here uses ReLU)"
        )
    rates = {
        child: theirs.p
        for child, theirs in layer.named_children()
        if isinstance(theirs, nn.Dropout)
    }
    rates.update(
        {
            child: theirs.dropout
            for child, theirs in layer.named_children()
            if isinstance(theirs, nn.MultiheadAttention)
        }
    )
    if len(set(rates.values())) != 1:
        raise ValueError(
            f"expected one dropout rate in the whole {name}, got {rates}: our block "
            "uses one rate for the attention weights, the feed-forward network and the "
            "residuals"
        )
    d_model, d_ff = layer.linear1.in_features, layer.linear1.out_features
    block = cls(
        d_model,
        layer.self_attn.num_heads,
        d_ff,
        norm_first=layer.norm_first,
        dropout=layer.dropout.p,
    )
    block = block.to(layer.linear1.weight.dtype)
    for child, theirs in layer.named_children():
        # norm1, norm2 (and norm3 in a decoder layer)
        if isinstance(theirs, nn.LayerNorm):
            ours = getattr(block, child)
            ours.load_state_dict(theirs.state_dict())
            ours.eps = theirs.eps
    block.ff[0].load_state_dict(layer.linear1.state_dict())
    block.ff[-1].load_state_dict(layer.linear2.state_dict())
    return block


def feed_forward(d_model: int, d_ff: int, dropout: float = 0.0) -> nn.Sequential:
    """The position-wise feed-forward network of {eq}`ch5-block`,
    ``max(0, x W_1 + b_1) W_2 + b_2``, with dropout (rate p) on the hidden activations,
    after the ReLU: PyTorch's ``linear2(dropout(activation(linear1(x))))``. (B, n,
    d_model) -> (B, n, d_model)."""
    return nn.Sequential(
        nn.Linear(d_model, d_ff),
        nn.ReLU(),
        nn.Dropout(check_dropout(dropout)),
        nn.Linear(d_ff, d_model),
    )


class TransformerEncoderBlock(nn.Module):
    """A Transformer block, {eq}`ch5-block`: self-attention then a feed-forward network,
    each wrapped in a residual connection and a layer norm.

    ``norm_first=True`` (pre-LN, as in GPT-2 and minGPT): ``x = x + Attn(LN1(x))``,
    ``x = x + FFN(LN2(x))``; the residual path is never normalised, which trains stably
    without warm-up. ``norm_first=False`` (post-LN, the original Transformer):
    ``x = LN1(x + Attn(x))``, ``x = LN2(x + FFN(x))``.
    With a causal mask the same block is a decoder-only (GPT-style) layer.

    ``forward(x, mask=None, cache=None)``: x (B, n, d_model), mask as for
    ``MultiHeadAttention``; returns x (B, n, d_model) and the weights (B, h, n, n_total)
    (before dropout).

    ``dropout`` (p in [0, 1), default 0) acts where
    ``nn.TransformerEncoderLayer(dropout=p)`` puts it, in the same order: on the
    attention weights (inside ``attn``), on each sub-layer's output before the residual
    addition, and on the feed-forward network's hidden activations. Only in training
    mode; p = 0 draws no random numbers.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        norm_first: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = feed_forward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(check_dropout(dropout))  # residual dropout

    def forward(self, x, mask=None, cache: KVCache | None = None):
        if self.norm_first:
            a, weights = self.attn(
                self.norm1(x), mask=mask, cache=cache
            )  # (B, n, d), (B, h, n, n_kv)
            x = x + self.dropout(a)
            x = x + self.dropout(self.ff(self.norm2(x)))
        else:
            a, weights = self.attn(x, mask=mask, cache=cache)
            x = self.norm1(x + self.dropout(a))
            x = self.norm2(x + self.dropout(self.ff(x)))
        return x, weights  # (B, n, d_model), (B, h, n, n_kv)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> TransformerEncoderBlock:
        """A block with the weights and dropout rate of ``nn.TransformerEncoderLayer``
        (ReLU activation)."""
        block = block_from_torch(cls, layer, nn.TransformerEncoderLayer)
        block.attn = MultiHeadAttention.from_torch(layer.self_attn)
        return block


# --------------------------------------------------------------------------------------
# a small decoder-only transformer on a toy task


class TinyTransformer(nn.Module):
    """A decoder-only transformer: token embedding plus sinusoidal positions (chapter
    4), ``num_layers`` pre-LN ``TransformerEncoderBlock``s under a causal mask, a linear
    head.

    ``forward(tokens, cache=None)``: tokens (B, n) ints; cache None or the list returned
    by ``new_cache()`` (one ``KVCache`` per layer), in which case the tokens are the
    next positions after the cached ones. Returns logits (B, n, vocab_size) and a list
    of per-layer weights, each (B, h, n, n_past + n).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 128,
        max_len: int = 64,
    ):
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        # (max_len, d)
        positions = torch.from_numpy(sinusoidal_positions(max_len, d_model)).float()
        self.register_buffer("positions", positions, persistent=False)
        self.blocks = nn.ModuleList(
            TransformerEncoderBlock(d_model, num_heads, d_ff, norm_first=True)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def new_cache(self) -> list[KVCache]:
        return [KVCache() for _ in self.blocks]

    def forward(self, tokens, cache: list[KVCache] | None = None):
        n = tokens.shape[-1]
        start = len(cache[0]) if cache is not None else 0  # positions already decoded
        if start + n > self.max_len:
            raise ValueError(
                f"sequence of length {start + n} exceeds max_len = {self.max_len}"
            )
        x = self.embed(tokens) + self.positions[start : start + n]  # (B, n, d)
        # query i sits at position start + i and may see keys 0 .. start + i, eq.
        # ch4-causal
        mask = torch.ones(n, start + n, dtype=torch.bool, device=tokens.device).tril(
            diagonal=start
        )
        all_weights = []
        for i, block in enumerate(self.blocks):
            x, weights = block(x, mask=mask, cache=None if cache is None else cache[i])
            all_weights.append(weights)  # (B, h, n, start + n)
        return self.head(self.norm(x)), all_weights  # (B, n, vocab)


def make_toy_data(num_samples, length=8, seed=0, task="reverse", num_symbols=10):
    """Sequences ``x_1 .. x_L SEP y_1 .. y_L`` for a decoder-only model.

    x is uniform over ``num_symbols`` symbols (tokens 0 .. num_symbols - 1), SEP is
    token ``num_symbols``; y is x reversed (``task="reverse"``) or x itself
    (``"copy"``).
    Returns int64 tokens (num_samples, 2 L + 1); the vocabulary has num_symbols + 1
    tokens.
    """
    if task not in ("reverse", "copy"):
        raise ValueError(f"unknown task {task!r}: expected 'reverse' or 'copy'")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, num_symbols, (num_samples, length), generator=gen)  # (N, L)
    y = x.flip(-1) if task == "reverse" else x  # (N, L)
    sep = torch.full((num_samples, 1), num_symbols)
    return torch.cat([x, sep, y], dim=-1)  # (N, 2L + 1)


def train_toy_transformer(
    task="reverse",
    length=8,
    steps=400,
    batch_size=64,
    lr=3e-3,
    seed=0,
    d_model=64,
    num_heads=4,
    num_layers=2,
    d_ff=128,
    num_symbols=10,
):
    """Train a ``TinyTransformer`` to produce the reversal (or copy) of a sequence.

    Fresh random sequences every step (``make_toy_data``), next-token cross-entropy on
    the answer half only, Adam, through ``solutions.training.train_loop`` (seeded, one
    CPU thread, deterministic); a few seconds on a CPU.
    Returns ``(model, history)`` with the model in eval mode and ``history["loss"]``,
    the loss of every step.
    """

    def batch_loss(model, step):
        tokens = make_toy_data(
            batch_size,
            length,
            seed=seed * 1_000_003 + step + 1,
            task=task,
            num_symbols=num_symbols,
        )  # (B, 2L + 1)
        # (B, 2L, vocab): position t predicts token t + 1
        logits, _ = model(tokens[:, :-1])
        answer = logits[:, length:]  # (B, L, vocab): predictions of y_1 .. y_L
        return F.cross_entropy(
            answer.reshape(-1, answer.shape[-1]), tokens[:, length + 1 :].reshape(-1)
        )

    return train_loop(
        lambda: TinyTransformer(
            num_symbols + 1,
            d_model,
            num_heads,
            num_layers,
            d_ff,
            max_len=2 * length + 1,
        ),
        batch_loss,
        steps=steps,
        seed=seed,
        lr=lr,
    )


@torch.no_grad()
def attention_maps(model: TinyTransformer, tokens):
    """Per-layer, per-head attention weights of one sequence, ready for
    ``show_heatmaps``.

    tokens: (n,) or (1, n) ints.  Returns float64 NumPy (num_layers, h, n, n).
    """
    tokens = torch.as_tensor(tokens)
    if tokens.dim() == 1:
        tokens = tokens[None]
    if tokens.dim() != 2 or tokens.shape[0] != 1:
        raise ValueError(
            f"expected one sequence of shape (n,) or (1, n), got {tuple(tokens.shape)}"
        )
    model.eval()
    _, weights = model(tokens)
    return torch.stack([w[0] for w in weights]).double().numpy()  # (layers, h, n, n)


@torch.no_grad()
def generate(model: TinyTransformer, prompt, steps):
    """Greedy autoregressive decoding with a key-value cache.

    prompt: (B, n_p) ints; steps: how many tokens to append.
    The prompt is processed once; each later step feeds only the newest token and
    attends to the cached keys and values of all earlier positions (O(n) work per step
    instead of O(n^2)). Returns tokens (B, n_p + steps) and the logits of every step (B,
    steps, vocab).
    """
    model.eval()
    cache = model.new_cache()
    tokens, step_logits = prompt, []
    new = prompt  # (B, n_new): what the cache has not seen yet
    for _ in range(steps):
        logits, _ = model(new, cache=cache)  # (B, n_new, vocab)
        step_logits.append(logits[:, -1])  # (B, vocab)
        new = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, new], dim=-1)
    # (B, n_p + steps), (B, steps, vocab)
    return tokens, torch.stack(step_logits, dim=1)


@torch.no_grad()
def generate_without_cache(model: TinyTransformer, prompt, steps):
    """Greedy decoding that recomputes the whole prefix at every step (the reference for
    ``generate``). Same inputs and outputs as ``generate``."""
    model.eval()
    tokens, step_logits = prompt, []
    for _ in range(steps):
        # (B, n, vocab): the causal mask hides nothing we need
        logits, _ = model(tokens)
        step_logits.append(logits[:, -1])
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=-1)
    return tokens, torch.stack(step_logits, dim=1)


def sequence_accuracy(model: TinyTransformer, tokens, length):
    """Greedy-decode the answers of ``make_toy_data`` sequences and score them.

    tokens: (N, 2 L + 1) with L = length. Returns ``(token_accuracy, exact_match)``: the
    fraction of answer tokens right and the fraction of sequences entirely right.
    """
    out, _ = generate(model, tokens[:, : length + 1], length)  # (N, 2L + 1)
    right = out[:, length + 1 :] == tokens[:, length + 1 :]  # (N, L)
    return right.float().mean().item(), right.all(dim=-1).float().mean().item()


# --------------------------------------------------------------------------------------
# heads that divide the work: a task that needs two positions at once

# the default ignore_index of F.cross_entropy: positions without an answer
IGNORE_INDEX = -100


def _check_offsets(offsets, length):
    ok = (
        len(offsets) == 2
        and all(
            isinstance(o, (int, np.integer)) and not isinstance(o, bool)
            for o in offsets
        )
        and 1 <= min(offsets)
        and offsets[0] != offsets[1]
        and max(offsets) < length
    )
    if not ok:
        raise ValueError(
            "expected two different positive integer offsets smaller than length = "
            f"{length}, got offsets={offsets!r}: position t reads the tokens at t - a "
            "and t - b"
        )
    return int(offsets[0]), int(offsets[1])


def make_two_offset_data(num_samples, length=12, offsets=(2, 5), num_symbols=8, seed=0):
    """Random sequences whose answer at position t is the ordered pair
    (x_{t-a}, x_{t-b}).

    x is uniform over ``num_symbols`` symbols (tokens 0 .. V - 1); offsets = (a, b), two
    different positive integers. The answer at t >= max(a, b) is the single class
    ``y_t = V x_{t-a} + x_{t-b}`` (one of V^2 classes, so the order of the two tokens
    matters); earlier positions have no answer and get ``IGNORE_INDEX`` (-100, which
    ``F.cross_entropy`` skips).
    Returns ``(tokens, targets)``, both int64 (num_samples, length).
    """
    a, b = _check_offsets(tuple(offsets), length)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, num_symbols, (num_samples, length), generator=gen)  # (N, L)
    t = torch.arange(max(a, b), length)  # the positions that have an answer
    y = torch.full((num_samples, length), IGNORE_INDEX)  # (N, L)
    y[:, t] = num_symbols * x[:, t - a] + x[:, t - b]  # (N, L - max(a, b))
    return x, y


def train_two_offset_transformer(
    offsets=(2, 5),
    length=12,
    steps=1500,
    batch_size=64,
    lr=5e-3,
    seed=0,
    d_model=16,
    num_heads=2,
    d_ff=128,
    num_symbols=8,
):
    """Train a one-layer ``TinyTransformer`` on ``make_two_offset_data``.

    The model reads V = ``num_symbols`` input tokens and predicts one of V^2 answer
    classes, so its vocabulary has V^2 tokens (the inputs use the first V). Fresh random
    sequences every step, cross-entropy on the positions that have an answer, Adam,
    through ``solutions.training.train_loop`` (seeded, one CPU thread, deterministic).
    Returns ``(model, history)`` with the model in eval mode and ``history["loss"]``,
    the loss of every step.
    """
    _check_offsets(tuple(offsets), length)
    vocab = num_symbols**2

    def batch_loss(model, step):
        tokens, targets = make_two_offset_data(
            batch_size, length, offsets, num_symbols, seed=seed * 1_000_003 + step + 1
        )  # (B, L) each
        logits, _ = model(tokens)  # (B, L, V^2)
        return F.cross_entropy(
            logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=IGNORE_INDEX
        )

    return train_loop(
        lambda: TinyTransformer(
            vocab, d_model, num_heads, num_layers=1, d_ff=d_ff, max_len=length
        ),
        batch_loss,
        steps=steps,
        seed=seed,
        lr=lr,
    )


@torch.no_grad()
def two_offset_accuracy(model: TinyTransformer, tokens, targets):
    """Fraction of the answered positions (targets != IGNORE_INDEX) whose arg-max class
    is right.

    tokens, targets: (N, L) from ``make_two_offset_data``.
    """
    model.eval()
    logits, _ = model(tokens)  # (N, L, V^2)
    answered = targets != IGNORE_INDEX  # (N, L)
    return (logits.argmax(-1) == targets)[answered].float().mean().item()


@torch.no_grad()
def offset_profile(model: TinyTransformer, tokens, max_offset):
    """Mean attention weight of every head on every offset back, 0 .. max_offset.

    tokens: (N, L) ints. For every query position t >= max_offset (so that all offsets
    exist) and every k, take the weight of key t - k, and average over the queries and
    the N sequences. Returns float64 NumPy (num_layers, h, max_offset + 1): entry [l, i,
    k] is how much head i of layer l looks k positions back (1 on one k = a clean
    diagonal).
    """
    tokens = torch.as_tensor(tokens)
    if tokens.dim() != 2 or not 0 <= max_offset < tokens.shape[1]:
        raise ValueError(
            "expected tokens (N, L) and 0 <= max_offset < L, got tokens "
            f"{tuple(tokens.shape)} and max_offset = {max_offset}"
        )
    model.eval()
    _, weights = model(tokens)  # per layer (N, h, L, L)
    w = torch.stack(weights, dim=1).double()  # (N, layers, h, L, L)
    queries = torch.arange(max_offset, tokens.shape[1])  # (n_t,)
    profile = [
        w[..., queries, queries - k].mean(dim=(0, -1)) for k in range(max_offset + 1)
    ]  # each (layers, h)
    return torch.stack(profile, dim=-1).numpy()  # (layers, h, max_offset + 1)
