"""The Transformer encoder-decoder (chapter 6, ``book/ch6_transformer.ipynb``).

What this file builds, in the order the chapter derives it:

- NumPy: ``decoder_mask`` (causal AND target padding, chapter 4's masks combined; the
  page shows it, and the assignment asks for the mask of packed rows instead, in the
  answer key ``answers/ch6_transformer.py``); graded: ``cross_attention`` (queries from
  the decoder, keys and values from the encoder output, a source mask; chapter 5's
  ``multihead_attention``, imported), ``label_smoothed_cross_entropy`` (cross-entropy
  against a smoothed target that gives the pad class nothing and skips pad targets),
  ``noam_rate`` (linear warm-up, then ``1/sqrt(step)`` decay) and ``beam_search`` over
  any step function returning log-probabilities, with length normalisation.
- NumPy, graded: the decoder layer itself, eq. {eq}`ch6-decoder-layer`
  (``decoder_block``: post-LN, causal self-attention, cross-attention,
  ``position_wise_ffn``, ``layer_norm``), teacher forcing (``shift_right``,
  ``teacher_forced_loss`` with its gradient) and ``decoder_step``, which appends each
  step's key and value to the cache and attends over every cached position;
  ``greedy_decode_steps`` decodes with it from an empty cache (decoding from a given
  cache, ``greedy_decode_cached``, is the graded task, in the answer key: one name, one
  signature).
- Torch: ``TransformerDecoderBlock`` (masked self-attention, cross-attention,
  feed-forward, each with a residual and a layer norm, pre- or post-LN; chapter 5's
  ``MultiHeadAttention`` twice), ``EncoderDecoder`` (chapter 5's
  ``TransformerEncoderBlock`` stacked as the encoder; ``from_torch`` copies
  ``nn.Transformer``'s weights) and
  ``Translator``: embeddings scaled by sqrt(d_model), sinusoidal positions (chapter 4),
  an output layer tied to the target embedding.
- Decoding: ``greedy_decode`` with a ``DecoderCache`` (the encoder's keys and values are
  projected once; self-attention keys and values grow by one row per step),
  ``greedy_decode_without_cache`` (the reference), ``beam_translate`` (``beam_search``
  over the model).
- ``train_translator`` trains a ``Translator`` on ``solutions.zh_en``'s generated
  Chinese-English pairs with the smoothed loss and the Noam schedule (or, as the warm-up
  experiment's controls, a constant rate at its peak, or its peak then its decay),
  seeded and on one thread (``source_positions=False``: the control without source
  positions);
  ``evaluate_translator`` measures exact match and pronoun resolution, ``head_ablation``
  which attention heads the resolution needs (one at a time) and ``joint_ablation``
  which attention layers (all their heads at once).

Conventions (``docs/conventions.md``): rows are items; masks are boolean, True = "may
attend"; NumPy weight matrices are used as ``x @ w``. ``nn.Transformer`` marks with True
what may NOT be attended, so it gets ``~mask``.

Equation numbers refer to the chapter:

- {eq}`ch6-cross`: ``CrossAttn(Y, H) = MultiHead(Y W_q, H W_k, H W_v)``: weights (n_tgt,
  n_src)
- {eq}`ch6-decoder-mask`: decoder self-attention mask
  ``M_ij = [j <= i] and [j < len_tgt]``
- {eq}`ch6-smoothing`: smoothed target ``q = (1 - eps) onehot(y) + eps u``, u uniform
  over the V - 1 non-pad classes; loss ``H(q, p) = KL(q || p) + H(q)``
- {eq}`ch6-noam`: ``lr(s) = factor d^-1/2 min(s^-1/2, s w^-3/2)``
- {eq}`ch6-length-norm`: beam score ``log P(y) / |y|^alpha``
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from solutions.conventions import as_float, softmax
from solutions.multihead import (
    KVCache,
    MultiHeadAttention,
    TransformerEncoderBlock,
    block_from_torch,
    check_dropout,
    feed_forward,
    merge_heads,
    multihead_attention,
    split_heads,
)
from solutions.self_attention import causal_mask, padding_mask, sinusoidal_positions
from solutions.soft_hard import attention
from solutions.training import train_loop
from solutions.zh_en import (
    BOS,
    EOS,
    PAD,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    encode_batch,
    make_pairs,
)

__all__ = [
    "cross_attention",
    "decoder_mask",
    "label_smoothed_cross_entropy",
    "label_smoothed_loss",
    "noam_rate",
    "beam_search",
    "beam_search_table",
    "layer_norm",
    "position_wise_ffn",
    "decoder_block",
    "shift_right",
    "teacher_forced_loss",
    "decoder_step",
    "greedy_decode_steps",
    "TransformerDecoderBlock",
    "EncoderDecoder",
    "DecoderCache",
    "Translator",
    "greedy_decode",
    "greedy_decode_without_cache",
    "beam_translate",
    "train_translator",
    "CHAPTER_MODEL",
    "resolution_margins",
    "resolution_choices",
    "head_ablation",
    "joint_ablation",
    "score_resolution",
    "evaluate_translator",
]


# --------------------------------------------------------------------------------------
# NumPy: the graded functions, eqs. {eq}`ch6-cross` to {eq}`ch6-length-norm`


def cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    """Multi-head cross-attention, eq. {eq}`ch6-cross`: the decoder asks, the encoder
    answers.

    x:      (..., n_tgt, d) decoder states: the queries
    memory: (..., n_src, d_src) encoder output: the keys and the values
    w_q:    (d, d_model); w_k, w_v: (d_src, d_model); w_o: (d_model, d_out), used as
            ``x @ w``
    num_heads: h, a divisor of d_model.
    src_mask: boolean, broadcastable to (..., n_tgt, n_src) (e.g.
          ``padding_mask(src_lens, n_src)`` of shape (..., 1, n_src)), True = the source
          word may be attended.
    Returns ``(output, weights)``: output (..., n_tgt, d_out), weights (..., h, n_tgt,
    n_src): one distribution over the source words per target position and head.
    """
    return multihead_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, mask=src_mask)


def decoder_mask(tgt_lens, n):
    """The mask of the decoder's self-attention, eq. {eq}`ch6-decoder-mask`: causal AND
    target padding.

    tgt_lens: (...) integers in [0, n], the valid lengths of the target sequences; n:
    the padded length. Returns boolean (..., n, n):
    ``mask[..., i, j] = j <= i and j < len``.
    """
    return causal_mask(n) & padding_mask(
        tgt_lens, n
    )  # (n, n) & (..., 1, n) -> (..., n, n)


def label_smoothed_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    smoothing: float,
    ignore_index: int = -100,
    pad_index: int | None = None,
) -> torch.Tensor:
    """Label-smoothed cross-entropy in torch (differentiable), eq. {eq}`ch6-smoothing`.

    logits: (..., V); targets: (...) ints; smoothing: eps in [0, 1).
    The target distribution is ``q = (1 - eps) onehot(y) + eps u`` with u uniform over
    the classes other than ``pad_index`` (over all V classes if ``pad_index`` is None,
    as in ``F.cross_entropy(label_smoothing=eps)``). Positions whose target is
    ``ignore_index`` are skipped; the loss is the mean of ``-sum_k q_k log p_k`` over
    the others (0 if none).
    """
    if not 0 <= smoothing < 1:
        raise ValueError(f"expected a smoothing eps in [0, 1), got {smoothing}")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            "expected logits (..., V) and targets (...) with the same leading shape, "
            f"got logits {tuple(logits.shape)} and targets {tuple(targets.shape)}"
        )
    vocab = logits.shape[-1]
    keep = targets != ignore_index  # (...)
    if ((targets[keep] < 0) | (targets[keep] >= vocab)).any():
        raise ValueError(
            f"expected targets in [0, {vocab}) or ignore_index = {ignore_index}"
        )
    log_p = torch.log_softmax(logits[keep], dim=-1)  # (N, V)
    uniform = torch.full(
        (vocab,), 1.0 / vocab, dtype=log_p.dtype, device=log_p.device
    )  # (V,)
    if pad_index is not None:
        uniform[:] = 1.0 / (vocab - 1)
        uniform[pad_index] = (
            0.0  # the pad class is never a right answer: it gets no mass
        )
    nll = -log_p.gather(-1, targets[keep][:, None]).squeeze(-1)  # (N,) -log p_y
    smooth = -(log_p * uniform).sum(-1)  # (N,) cross-entropy with u
    loss = (1 - smoothing) * nll + smoothing * smooth  # (N,) = H(q, p), q linear in eps
    return loss.mean() if loss.numel() else loss.sum()


def label_smoothed_cross_entropy(logits, targets, smoothing, pad_index):
    """Label-smoothed cross-entropy that ignores padding, eq. {eq}`ch6-smoothing`, in
    NumPy.

    logits: (..., V) scores; targets: (...) ints in [0, V); smoothing: eps in [0, 1);
    pad_index: the pad token's id. Targets equal to ``pad_index`` are skipped, and the
    smoothing mass eps goes uniformly to the V - 1 other classes (the pad class gets
    none).
    Returns the mean over the non-pad targets of ``-sum_k q_k log softmax(logits)_k``
    with ``q = (1 - eps) onehot(y) + eps u`` (a float; 0.0 if every target is pad).
    """
    logits = as_float(logits, "logits")
    targets = np.asarray(targets)
    if not np.issubdtype(targets.dtype, np.integer):
        raise TypeError(f"expected integer targets, got dtype {targets.dtype}")
    if logits.ndim < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            "expected logits (..., V) and targets (...), "
            f"got {logits.shape} and {targets.shape}"
        )
    loss = label_smoothed_loss(
        torch.from_numpy(np.asarray(logits, dtype=np.float64)),
        torch.from_numpy(targets.astype(np.int64)),
        float(smoothing),
        ignore_index=int(pad_index),
        pad_index=int(pad_index),
    )
    return float(loss)


def noam_rate(step, d_model, warmup, factor=1.0):
    """The learning rate of Vaswani et al. at ``step`` (1-based), eq. {eq}`ch6-noam`.

    ``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``: linear growth for
    ``warmup`` steps, then decay as 1/sqrt(step); the peak, at step = warmup, is
    ``factor / sqrt(d_model * warmup)``. step may be an array. Returns float or array.
    """
    step = np.asarray(step, dtype=np.float64)
    if (step < 1).any() or d_model < 1 or warmup < 1:
        raise ValueError(
            "expected step >= 1, d_model >= 1, warmup >= 1, "
            f"got {step}, {d_model}, {warmup}"
        )
    rate = factor * d_model**-0.5 * np.minimum(step**-0.5, step * warmup**-1.5)
    return float(rate) if rate.ndim == 0 else rate


def beam_search(step_fn, bos, eos, beam_size, max_len, alpha=1.0):
    """Beam search with length normalisation, eq. {eq}`ch6-length-norm`.

    step_fn(prefixes) -> log-probabilities: prefixes is an int array (k, t) of the k
    live beams (each starting with ``bos``), the result a (k, V) float array: log P(next
    | prefix).
    At each step every live beam is extended by every token; the
    ``beam_size - #finished`` best extensions by total log-probability are kept (ties:
    the earlier beam, then the smaller token id, wins). An extension ending in ``eos``
    is finished and never grows again; at ``max_len`` generated tokens the live beams
    are finished as they are.
    Returns ``(sequences, scores)``: the finished beams (lists of token ids after
    ``bos``, ``eos`` included when generated) sorted by ``score = log P / length^alpha``
    (length = number of generated tokens, ties keep finishing order), and their scores
    (float array).
    """
    if beam_size < 1 or max_len < 1:
        raise ValueError(
            f"expected beam_size >= 1 and max_len >= 1, got {beam_size} and {max_len}"
        )
    live = [[bos]]
    live_logp = np.zeros(1)
    finished: list[tuple[list[int], float]] = []
    for step in range(1, max_len + 1):
        room = beam_size - len(finished)
        if room == 0 or not live:
            break
        logp = np.asarray(
            step_fn(np.array(live, dtype=np.int64)), dtype=np.float64
        )  # (k, V)
        if logp.ndim != 2 or logp.shape[0] != len(live):
            raise ValueError(
                f"step_fn must return ({len(live)}, V) log-probabilities, "
                f"got {logp.shape}"
            )
        total = (live_logp[:, None] + logp).ravel()  # (k V,) beam-major, token-minor
        best = np.argsort(-total, kind="stable")[
            :room
        ]  # stable: earlier candidate wins ties
        vocab = logp.shape[1]
        new_live, new_logp = [], []
        for c in best:
            seq = live[c // vocab] + [int(c % vocab)]
            if c % vocab == eos or step == max_len:
                finished.append((seq[1:], float(total[c])))
            else:
                new_live.append(seq)
                new_logp.append(total[c])
        live, live_logp = new_live, np.array(new_logp)
    scores = np.array([s / len(seq) ** alpha for seq, s in finished])
    order = np.argsort(-scores, kind="stable")
    return [finished[i][0] for i in order], scores[order]


def beam_search_table(log_probs, bos, eos, beam_size, max_len, alpha=1.0):
    """``beam_search`` over a table: ``log_probs[a, b]`` = log P(next = b | last token =
    a).

    log_probs: (V, V) float. The same search as ``beam_search`` with
    ``step_fn = lambda prefixes: log_probs[prefixes[:, -1]]``, returned as arrays (what
    the grader compares): tokens int (k, max_len), each finished beam padded with -1, in
    the order of ``beam_search``, and scores float (k,).
    """
    log_probs = as_float(log_probs, "log_probs")
    if log_probs.ndim != 2 or log_probs.shape[0] != log_probs.shape[1]:
        raise ValueError(
            f"expected a (V, V) table of log-probabilities, got {log_probs.shape}"
        )
    seqs, scores = beam_search(
        lambda prefixes: log_probs[prefixes[:, -1]], bos, eos, beam_size, max_len, alpha
    )
    tokens = np.full((len(seqs), max_len), -1, dtype=np.int64)  # (k, max_len)
    for i, seq in enumerate(seqs):
        tokens[i, : len(seq)] = seq
    return tokens, scores


# --------------------------------------------------------------------------------------
# torch modules


class DecoderCache:
    """What a decoder layer keeps between decoding steps.

    ``self_kv``: a growing ``KVCache`` of the target positions decoded so far;
    ``cross_kv``: the encoder output's keys and values, projected at the first step and
    reused unchanged after (``KVCache.append`` of zero new rows returns them).
    """

    def __init__(self):
        self.self_kv = KVCache()
        self.cross_kv = KVCache()


class TransformerDecoderBlock(nn.Module):
    """A decoder layer: masked self-attention, cross-attention, feed-forward network,
    each with a residual connection and a layer norm (pre-LN with ``norm_first=True``,
    else post-LN, as in ``nn.TransformerDecoderLayer``).

    ``forward(y, memory, self_mask=None, src_mask=None, cache=None)``: y (B, n_tgt, d),
    memory (B, n_src, d), masks True = may attend, broadcastable to (B, n_tgt, n_tgt)
    and (B, n_tgt, n_src). With a ``DecoderCache``, y holds only the new positions.
    Returns y (B, n_tgt, d), self weights (B, h, n_tgt, n_past + n_tgt), cross weights
    (B, h, n_tgt, n_src), both before dropout.

    ``dropout`` (p in [0, 1), default 0) acts where
    ``nn.TransformerDecoderLayer(dropout=p)`` puts it, in the same order: the
    self-attention weights, the self-attention output, the cross-attention weights, the
    cross-attention output, the feed-forward hidden activations, the feed-forward output
    (each output before its residual addition).
    Only in training mode; p = 0 draws no random numbers.
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
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.ff = feed_forward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(check_dropout(dropout))  # residual dropout

    def _cross(self, y, memory, src_mask, cache):
        if cache is not None and len(cache.cross_kv):
            memory = memory[
                :, :0
            ]  # keys and values already cached: project nothing new
        return self.cross_attn(
            y, memory, mask=src_mask, cache=None if cache is None else cache.cross_kv
        )

    def forward(
        self,
        y,
        memory,
        self_mask=None,
        src_mask=None,
        cache: DecoderCache | None = None,
    ):
        self_kv = None if cache is None else cache.self_kv
        if self.norm_first:
            a, w_self = self.self_attn(
                self.norm1(y), mask=self_mask, cache=self_kv
            )  # (B, n, d)
            y = y + self.dropout(a)
            c, w_cross = self._cross(
                self.norm2(y), memory, src_mask, cache
            )  # (B, n, d), (B, h, n, n_src)
            y = y + self.dropout(c)
            y = y + self.dropout(self.ff(self.norm3(y)))
        else:
            a, w_self = self.self_attn(y, mask=self_mask, cache=self_kv)
            y = self.norm1(y + self.dropout(a))
            c, w_cross = self._cross(y, memory, src_mask, cache)
            y = self.norm2(y + self.dropout(c))
            y = self.norm3(y + self.dropout(self.ff(y)))
        return y, w_self, w_cross

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> TransformerDecoderBlock:
        """A block with the weights and dropout rate of ``nn.TransformerDecoderLayer``
        (ReLU activation)."""
        block = block_from_torch(cls, layer, nn.TransformerDecoderLayer)
        block.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        block.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        return block


class EncoderDecoder(nn.Module):
    """The stack of ``nn.Transformer``: ``num_layers`` encoder blocks (chapter 5's
    ``TransformerEncoderBlock``) and a final layer norm; ``num_decoder_layers``
    (default: ``num_layers``) decoder blocks and a final layer norm.

    ``encode(x, src_mask)``: x (B, n_src, d) -> memory (B, n_src, d), per-layer weights.
    ``decode(y, memory, self_mask, src_mask, caches=None)`` -> (B, n_tgt, d), per-layer
    self and cross weights. Masks: True = may attend. ``dropout``: every block's rate p
    (see the blocks; ``nn.Transformer(dropout=p)`` has no other dropout).
    """

    def __init__(
        self,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 128,
        norm_first: bool = True,
        dropout: float = 0.0,
        num_decoder_layers: int | None = None,
    ):
        super().__init__()
        num_decoder_layers = (
            num_layers if num_decoder_layers is None else num_decoder_layers
        )
        self.encoder = nn.ModuleList(
            TransformerEncoderBlock(d_model, num_heads, d_ff, norm_first, dropout)
            for _ in range(num_layers)
        )
        self.decoder = nn.ModuleList(
            TransformerDecoderBlock(d_model, num_heads, d_ff, norm_first, dropout)
            for _ in range(num_decoder_layers)
        )
        self.encoder_norm = nn.LayerNorm(d_model)
        self.decoder_norm = nn.LayerNorm(d_model)

    def encode(self, x, src_mask=None):
        weights = []
        for block in self.encoder:
            x, w = block(x, mask=src_mask)  # (B, n_src, d), (B, h, n_src, n_src)
            weights.append(w)
        return self.encoder_norm(x), weights

    def decode(
        self,
        y,
        memory,
        self_mask=None,
        src_mask=None,
        caches: list[DecoderCache] | None = None,
    ):
        w_self, w_cross = [], []
        for i, block in enumerate(self.decoder):
            y, ws, wc = block(
                y, memory, self_mask, src_mask, None if caches is None else caches[i]
            )
            w_self.append(ws)
            w_cross.append(wc)
        return self.decoder_norm(y), w_self, w_cross

    @classmethod
    def from_torch(cls, model: nn.Transformer) -> EncoderDecoder:
        """An ``EncoderDecoder`` with the weights and dropout rate of ``nn.Transformer``
        (ReLU activation; the rate is each block's, copied by its ``from_torch``)."""
        if not isinstance(model, nn.Transformer):
            raise TypeError(
                f"expected a torch.nn.Transformer, got {type(model).__name__}"
            )
        enc, dec = model.encoder.layers, model.decoder.layers
        first = enc[0]
        ours = cls(
            model.d_model,
            model.nhead,
            len(enc),
            first.linear1.out_features,
            first.norm_first,
            first.dropout.p,
            num_decoder_layers=len(dec),
        )
        ours = ours.to(first.linear1.weight.dtype)
        ours.encoder = nn.ModuleList(
            TransformerEncoderBlock.from_torch(layer) for layer in enc
        )
        ours.decoder = nn.ModuleList(
            TransformerDecoderBlock.from_torch(layer) for layer in dec
        )
        for mine, theirs in (
            (ours.encoder_norm, model.encoder.norm),
            (ours.decoder_norm, model.decoder.norm),
        ):
            mine.load_state_dict(theirs.state_dict())
            mine.eps = theirs.eps
        return ours


def _valid_lens(tokens: torch.Tensor) -> np.ndarray:
    """Lengths before the padding: (B, n) ids -> (B,) ints (pads only at the end)."""
    return (tokens != PAD).sum(-1).cpu().numpy()


class Translator(nn.Module):
    """Embeddings, positions, an ``EncoderDecoder`` and a tied output layer.

    The output layer reuses the target embedding matrix: logits = y E_tgt^T + b. Both
    embedding matrices are initialised with standard deviation 1/sqrt(d_model), so that
    the tied logits start of order one (y leaves a layer norm with unit-variance
    entries); on the way in, token embeddings are multiplied by sqrt(d_model), which
    gives them norm about sqrt(d), the scale of the sinusoidal positions (norm
    sqrt(d/2)), instead of norm 1 (see the chapter).

    ``dropout`` (p in [0, 1), default 0): the rate of every block (see
    ``TransformerEncoderBlock`` and ``TransformerDecoderBlock``) and, as in Vaswani et
    al. (section 5.4), of a dropout on the sums of the embeddings and the positions,
    source and target. Only in training mode; p = 0 draws no random numbers.

    ``forward(src, tgt_in)``: src (B, n_src), tgt_in (B, n_tgt) ids, 0 = pad.
    Returns logits (B, n_tgt, V_tgt) and a dict of attention weights: "encoder",
    "decoder_self", "cross", each a list over layers of (B, h, n_q, n_k).
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 128,
        norm_first: bool = True,
        dropout: float = 0.0,
        max_len: int = 64,
        num_decoder_layers: int | None = None,
        source_positions: bool = True,
    ):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.source_positions = source_positions
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        nn.init.normal_(self.src_embed.weight, std=d_model**-0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model**-0.5)
        self.out_bias = nn.Parameter(torch.zeros(tgt_vocab))
        positions = torch.from_numpy(
            sinusoidal_positions(max_len, d_model)
        ).float()  # (max_len, d)
        self.register_buffer("positions", positions, persistent=False)
        self.embed_dropout = nn.Dropout(
            check_dropout(dropout)
        )  # on embeddings + positions
        self.core = EncoderDecoder(
            d_model,
            num_heads,
            num_layers,
            d_ff,
            norm_first,
            dropout,
            num_decoder_layers,
        )

    def _embed(
        self, table: nn.Embedding, tokens, start: int = 0, positions: bool = True
    ):
        n = tokens.shape[-1]
        if start + n > self.max_len:
            raise ValueError(
                f"sequence of length {start + n} exceeds max_len = {self.max_len}"
            )
        x = table(tokens) * math.sqrt(self.d_model)  # (B, n, d)
        return self.embed_dropout(
            x + self.positions[start : start + n] if positions else x
        )

    def src_mask(self, src):
        return torch.from_numpy(
            padding_mask(_valid_lens(src), src.shape[-1])
        )  # (B, 1, n_src)

    def encode(self, src):
        """src (B, n_src) -> memory (B, n_src, d), src_mask (B, 1, n_src), encoder
        weights."""
        src_mask = self.src_mask(src)
        x = self._embed(
            self.src_embed, src, positions=self.source_positions
        )  # (B, n_src, d)
        memory, weights = self.core.encode(x, src_mask)
        return memory, src_mask, weights

    def logits(self, y):
        return (
            y @ self.tgt_embed.weight.T + self.out_bias
        )  # (B, n, V): tied output layer

    def forward(self, src, tgt_in):
        memory, src_mask, w_enc = self.encode(src)
        self_mask = torch.from_numpy(
            decoder_mask(_valid_lens(tgt_in), tgt_in.shape[-1])
        )  # (B, n, n)
        y, w_self, w_cross = self.core.decode(
            self._embed(self.tgt_embed, tgt_in), memory, self_mask, src_mask
        )
        return self.logits(y), {
            "encoder": w_enc,
            "decoder_self": w_self,
            "cross": w_cross,
        }


# --------------------------------------------------------------------------------------
# decoding


@torch.no_grad()
def greedy_decode(model: Translator, src, max_len: int = 20):
    """Greedy decoding with a cache: the source is encoded once, each decoder layer
    projects the encoder output into its cross-attention keys and values once (at the
    first step), and each step feeds only the newest target token (self-attention keys
    and values grow by one row per step).

    src: (B, n_src) ids. Returns ``(tokens, cross)``: tokens (B, max_len), the words
    chosen after <bos>, <eos> included where chosen, <pad> after it and up to max_len;
    cross (layers, B, h, steps, n_src), the cross-attention weights of every step and
    layer, where steps <= max_len is the number of steps run (decoding stops once every
    sentence has chosen <eos>).
    """
    model.eval()
    memory, src_mask, _ = model.encode(src)
    caches = [DecoderCache() for _ in model.core.decoder]
    new = torch.full((src.shape[0], 1), BOS)  # (B, 1)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    out, cross = [], []
    for step in range(max_len):
        y, _, w_cross = model.core.decode(
            model._embed(model.tgt_embed, new, start=step),
            memory,
            None,
            src_mask,
            caches,
        )  # (B, 1, d)
        new = model.logits(y)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        out.append(new.masked_fill(done[:, None], PAD))
        cross.append(torch.stack(w_cross))  # (layers, B, h, 1, n_src)
        done |= new[:, 0] == EOS
        if done.all():
            break
    tokens = torch.cat(out, dim=1)
    tokens = F.pad(tokens, (0, max_len - tokens.shape[1]), value=PAD)  # (B, max_len)
    return tokens, torch.cat(cross, dim=-2)


@torch.no_grad()
def greedy_decode_without_cache(model: Translator, src, max_len: int = 20):
    """The reference for ``greedy_decode``: re-runs the whole model (encoder included)
    on the full prefix at every step. Returns tokens (B, max_len) as
    ``greedy_decode``."""
    model.eval()
    tgt = torch.full((src.shape[0], 1), BOS)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        logits, _ = model(src, tgt)  # (B, t, V): the causal mask hides nothing we need
        new = logits[:, -1].argmax(-1, keepdim=True).masked_fill(done[:, None], PAD)
        tgt = torch.cat([tgt, new], dim=1)
        done |= new[:, 0] == EOS
        if done.all():
            break
    return F.pad(tgt[:, 1:], (0, max_len + 1 - tgt.shape[1]), value=PAD)


@torch.no_grad()
def beam_translate(
    model: Translator, src, beam_size: int = 4, max_len: int = 20, alpha: float = 1.0
):
    """``beam_search`` over the model for one source sentence ``src`` (n_src,) ids.

    Returns ``(sequences, scores)`` as ``beam_search``; each step re-runs the decoder on
    the live prefixes against the source encoded once.
    """
    model.eval()
    memory, src_mask, _ = model.encode(torch.as_tensor(src)[None])  # (1, n_src, d)

    def step(prefixes):
        tgt = torch.from_numpy(prefixes)  # (k, t)
        k = tgt.shape[0]
        y, _, _ = model.core.decode(
            model._embed(model.tgt_embed, tgt),
            memory.expand(k, -1, -1),
            torch.from_numpy(causal_mask(tgt.shape[1])),
            src_mask,
        )
        return (
            torch.log_softmax(model.logits(y)[:, -1], dim=-1).double().numpy()
        )  # (k, V)

    return beam_search(step, BOS, EOS, beam_size, max_len, alpha)


@torch.no_grad()
def sequence_log_prob(model: Translator, src, target) -> float:
    """log P(target | src) under the model, eq. {eq}`ch6-teacher-forcing` summed: one
    teacher-forced pass, the log-probability of each target token given the ones before
    it.

    src: (n_src,) ids; target: (n,) ids after <bos>, <eos> included if it is to be
    scored.
    The score ``beam_search`` gives a finished beam at ``alpha = 0`` is this number.
    """
    model.eval()
    target = torch.as_tensor(target)
    tgt_in = torch.cat([torch.tensor([BOS]), target[:-1]])[
        None
    ]  # (1, n): shifted right
    logits, _ = model(torch.as_tensor(src)[None], tgt_in)  # (1, n, V)
    log_p = torch.log_softmax(logits[0], dim=-1).double()  # (n, V), as beam_translate
    return float(log_p[torch.arange(len(target)), target].sum())


# --------------------------------------------------------------------------------------
# training and evaluation on the generated Chinese-English task

# The configuration chapter 6 trains (with ``num_heads=4``; its pronoun control, its
# composition run and tests/test_transformer.py's seeds of that run use it too)
CHAPTER_MODEL = dict(steps=1000, d_model=64, num_layers=2, num_decoder_layers=1)


def train_translator(
    steps=1200,
    batch_size=64,
    seed=0,
    d_model=64,
    num_heads=4,
    num_layers=2,
    d_ff=128,
    norm_first=False,
    smoothing=0.1,
    warmup=200,
    lr_factor=1.0,
    kinds=("reorder", "it", "he_she"),
    weights=None,
    notes_every=50,
    num_decoder_layers=None,
    source_positions=True,
    schedule="noam",
    holdout="combinations",
):
    """Train a ``Translator`` on fresh generated training pairs (``solutions.zh_en``).

    Every step samples a new batch of the training split (held-out combinations never
    appear), computes the label-smoothed loss on the next target word (pad skipped, no
    smoothing mass on pad) and takes an Adam step (betas 0.9, 0.98) at the Noam rate
    ``noam_rate(step, d_model, warmup, lr_factor)`` (step 1-based), through
    ``solutions.training.train_loop`` (seeded, one CPU thread, deterministic).
    ``schedule="constant"``: the Noam schedule's peak
    ``lr_factor / sqrt(d_model * warmup)`` at every step instead (no ramp, no decay: a
    control of the warm-up experiment). ``schedule="peak_then_decay"``: the Noam rate at
    step ``max(s, warmup)``, i.e. the peak for the first ``warmup`` steps and the Noam
    rate from then on (the schedule without its ramp and nothing else: the experiment's
    other control).
    ``holdout``: the split that training draws from (``make_pairs``): ``"voice"`` also
    leaves out the held-out pairs of predicate and voice.
    Returns ``(model, history)``: the model in eval mode; history["loss"] and
    history["lr"], one entry per step.
    """

    def batch_loss(model, step):
        pairs = make_pairs(
            batch_size,
            seed=seed * 1_000_003 + step + 1,
            split="train",
            kinds=kinds,
            weights=weights,
            notes_every=notes_every,
            holdout=holdout,
        )
        src, tgt = encode_batch(pairs)  # (B, n_src), (B, n_tgt)
        logits, _ = model(src, tgt[:, :-1])  # position t predicts word t + 1
        return label_smoothed_loss(
            logits, tgt[:, 1:], smoothing, ignore_index=PAD, pad_index=PAD
        )

    schedules = ("noam", "constant", "peak_then_decay")
    if schedule not in schedules:
        raise ValueError(f"expected schedule among {schedules}, got {schedule!r}")
    peak = noam_rate(warmup, d_model, warmup, lr_factor)

    def rate(step):  # step 0-based, as in batch_loss
        if schedule == "constant":
            return peak
        # eq. (ch6-noam) at s; without the ramp, at max(s, w): the peak until w
        s = step + 1 if schedule == "noam" else max(step + 1, warmup)
        return noam_rate(s, d_model, warmup, lr_factor)

    return train_loop(
        lambda: Translator(
            len(SOURCE_VOCAB),
            len(TARGET_VOCAB),
            d_model,
            num_heads,
            num_layers,
            d_ff,
            norm_first,
            num_decoder_layers=num_decoder_layers,
            source_positions=source_positions,
        ),
        batch_loss,
        steps=steps,
        seed=seed,
        lr=1.0,  # the schedule is the whole rate: noam_rate already includes lr_factor
        betas=(0.9, 0.98),
        eps=1e-9,
        lr_schedule=rate,
    )


@torch.no_grad()
def resolution_margins(model: Translator, pairs) -> np.ndarray:
    """Pronoun resolution as a teacher-forced choice among the candidates, one number
    per pair.

    For every pair with a pronoun, feed the reference translation up to the word that
    names the antecedent (``pair.answer``) and compare the model's log-probability there
    of the antecedent's word, ``choices[0]``, with the largest of the other candidates'
    words, ``choices[1:]``: ``log p(choices[0]) - max log p(choices[1:])``. Positive =
    resolved. Fluency errors elsewhere in the sentence do not count. Returns float (P,)
    for the P pairs with ``pronoun >= 0``, in order.
    """
    return np.array(
        [float(lp[0] - lp[1:].max()) for _, lp in _choice_log_probs(model, pairs)]
    )


@torch.no_grad()
def _choice_log_probs(model: Translator, pairs):
    """For every pair with a pronoun, in order: (pair, float64 tensor of the
    log-probabilities of ``pair.choices``' words at the teacher-forced answer
    position)."""
    pairs = [p for p in pairs if p.pronoun >= 0]
    if not pairs:
        return []
    model.eval()
    src, tgt = encode_batch(pairs)
    logits, _ = model(src, tgt[:, :-1])  # input position t predicts target word t + 1
    log_p = torch.log_softmax(logits.double(), dim=-1)  # (P, n_tgt, V)
    at = log_p[
        torch.arange(len(pairs)), [p.answer for p in pairs]
    ]  # (P, V): word i at row i
    return [
        (p, row[[TARGET_VOCAB.stoi[w] for w in p.choices]]) for row, p in zip(at, pairs)
    ]


def resolution_choices(model: Translator, pairs) -> np.ndarray:
    """Which candidate the model names, one int per pair with a pronoun: the index in
    order of mention (as ``pair.antecedent``) of the candidate whose word gets the
    largest log-probability in ``resolution_margins``' teacher-forced choice. It equals
    ``pair.antecedent`` exactly when the margin is positive; a wrong answer says which
    other candidate the model took instead."""
    named = []
    for p, lp in _choice_log_probs(model, pairs):
        # choices: the antecedent's word, then the others' in order of mention
        others = [c for c in range(len(p.choices)) if c != p.antecedent]
        best = int(lp.argmax())
        named.append(p.antecedent if best == 0 else others[best - 1])
    return np.array(named, dtype=int)


def _attention_layers(model: Translator) -> dict[str, list[MultiHeadAttention]]:
    core = model.core
    return {
        "encoder": [block.attn for block in core.encoder],
        "decoder_self": [block.self_attn for block in core.decoder],
        "cross": [block.cross_attn for block in core.decoder],
    }


@torch.no_grad()
def _resolved_without(
    model: Translator, pairs, attn: MultiHeadAttention, heads
) -> float:
    """The fraction of the pronoun pairs resolved with ``heads`` of ``attn`` zeroed.

    Zeroing head i sets to zero the columns of the output projection that read it
    (``out_proj.weight[:, i d_h:(i + 1) d_h]``): the head's contribution to the residual
    stream is gone, the other heads' are unchanged (the bias stays). The weights are
    restored afterwards, even if scoring raises."""
    weight = attn.out_proj.weight
    kept = weight.clone()
    for h in heads:
        weight[:, h * attn.d_head : (h + 1) * attn.d_head] = 0.0
    try:
        return float(np.mean(resolution_margins(model, pairs) > 0))
    finally:
        weight.copy_(kept)


@torch.no_grad()
def head_ablation(model: Translator, pairs) -> dict[str, np.ndarray]:
    """Which attention heads the pronoun resolution uses: zero one head at a time.

    For every head of every attention layer, the fraction of the pronoun pairs of
    ``pairs`` with a positive ``resolution_margins`` while that head alone is zeroed
    (``_resolved_without``). A head that another head duplicates costs nothing here:
    ``joint_ablation`` zeroes them together.
    Returns {"encoder", "decoder_self", "cross"}: float arrays (layers, h), and "none":
    the fraction with nothing zeroed.
    """
    out = {"none": float(np.mean(resolution_margins(model, pairs) > 0))}
    for part, layers in _attention_layers(model).items():
        out[part] = np.array(
            [
                [
                    _resolved_without(model, pairs, attn, [h])
                    for h in range(attn.num_heads)
                ]
                for attn in layers
            ]
        )
    return out


@torch.no_grad()
def joint_ablation(model: Translator, pairs) -> dict[str, np.ndarray]:
    """Zero every head of one attention layer at once, one layer at a time.

    Single heads can be dispensable because others do the same work; zeroing all the
    heads of a layer together (``_resolved_without`` with every head: the sub-layer adds
    only its output bias) shows what the layer as a whole carries.
    Returns {"encoder", "decoder_self", "cross"}: float arrays (layers,), the fraction
    of the pronoun pairs resolved with that layer's heads zeroed, and "none".
    """
    out = {"none": float(np.mean(resolution_margins(model, pairs) > 0))}
    for part, layers in _attention_layers(model).items():
        out[part] = np.array(
            [
                _resolved_without(model, pairs, attn, range(attn.num_heads))
                for attn in layers
            ]
        )
    return out


def score_resolution(model: Translator, pairs, exact_pairs=()) -> dict:
    """Score one translator on pronoun resolution: "resolved", a bool per pronoun
    sentence of ``pairs`` in order (``resolution_margins`` > 0), "resolution", their
    mean, "named", the candidate each names (``resolution_choices``), and
    "exact_match", the fraction of ``exact_pairs`` it translates exactly by greedy
    decoding (nan if there are none)."""
    exact = (
        evaluate_translator(model, exact_pairs)["exact_match"]
        if exact_pairs
        else math.nan
    )
    resolved = resolution_margins(model, pairs) > 0
    return {
        "resolved": resolved.tolist(),
        "resolution": float(np.mean(resolved)),
        "named": resolution_choices(model, pairs).tolist(),
        "exact_match": exact,
    }


@torch.no_grad()
def evaluate_translator(model: Translator, pairs, max_len: int = 32):
    """Greedy-decode ``pairs`` and score them.

    Returns a dict: "exact_match" (fraction of greedy outputs equal to the reference),
    "resolution" (among pairs with a pronoun: fraction with a positive
    ``resolution_margins``, the teacher-forced choice among the candidates), "outputs"
    (lists of English words) and "resolved" (bool per pronoun pair, in order).
    """
    src, _ = encode_batch(pairs)
    tokens, _ = greedy_decode(model, src, max_len)
    outputs = [TARGET_VOCAB.decode(row) for row in tokens.tolist()]
    exact = [out == p.target for out, p in zip(outputs, pairs)]
    resolved = (resolution_margins(model, pairs) > 0).tolist()
    return {
        "exact_match": float(np.mean(exact)),
        "resolution": float(np.mean(resolved)) if resolved else float("nan"),
        "outputs": outputs,
        "resolved": resolved,
    }


# --------------------------------------------------------------------------------------
# NumPy: the decoder layer of eq. {eq}`ch6-decoder-layer`, teacher forcing and cached
# greedy decoding (graded). Post-LN, as the equation; a layer norm here has no gain and
# no bias (the initial state of ``nn.LayerNorm``). Each attention's four projections
# come stacked in one array ``(4, d, d)``: ``w_q, w_k, w_v, w_o = self_attn``.


def layer_norm(x, eps=1e-5):
    """Each row to mean 0 and variance 1: (..., d) -> (..., d),
    ``(x - mean) / sqrt(var + eps)`` over the last axis (the biased variance, as
    ``nn.LayerNorm``)."""
    x = as_float(x, "x")
    centred = x - x.mean(-1, keepdims=True)  # (..., d)
    return centred / np.sqrt((centred**2).mean(-1, keepdims=True) + eps)


def position_wise_ffn(x, w_1, b_1, w_2, b_2):
    """``FFN(z) = max(0, z W_1 + b_1) W_2 + b_2`` on every row: x (..., n, d), w_1 (d,
    d_ff), b_1 (d_ff,), w_2 (d_ff, d), b_2 (d,) -> (..., n, d)."""
    return (
        np.maximum(0.0, as_float(x, "x") @ w_1 + b_1) @ w_2 + b_2
    )  # (..., n, d_ff) -> (..., n, d)


def _projections(stacked, name):
    """``(4, d, d)`` -> ``(w_q, w_k, w_v, w_o)``, or a ValueError that names the
    array."""
    stacked = as_float(stacked, name)
    if (
        stacked.ndim != 3
        or stacked.shape[0] != 4
        or stacked.shape[1] != stacked.shape[2]
    ):
        raise ValueError(
            f"expected {name} of shape (4, d, d): w_q, w_k, w_v, w_o stacked, "
            f"got {stacked.shape}"
        )
    return tuple(stacked)


def _cross_and_ffn(a, memory, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask):
    """The last two lines of eq. {eq}`ch6-decoder-layer`: a (..., n, d) -> Y' (..., n,
    d)."""
    c, _ = cross_attention(
        a, memory, *_projections(cross_attn, "cross_attn"), num_heads, src_mask
    )
    b = layer_norm(
        a + c
    )  # B = LN_2(A + MHA(A, H; M_src)): queries from A, keys/values from H
    return layer_norm(
        b + position_wise_ffn(b, w_1, b_1, w_2, b_2)
    )  # Y' = LN_3(B + FFN(B))


def decoder_block(
    y, memory, self_attn, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask=None
):
    """One post-LN decoder layer, eq. {eq}`ch6-decoder-layer`.

    y:      (..., n_tgt, d) the target positions' states Y
    memory: (..., n_src, d) the encoder output H
    self_attn, cross_attn: (4, d, d) each, ``w_q, w_k, w_v, w_o`` stacked (used as
    ``x @ w``)
    w_1 (d, d_ff), b_1 (d_ff,), w_2 (d_ff, d), b_2 (d,): the feed-forward network
    num_heads: h, a divisor of d. src_mask: boolean, broadcastable to (..., n_tgt,
    n_src), True = the source word may be attended; None = all.
    Self-attention is causal (query i sees keys j <= i); the target's padding needs no
    mask of its own here: a padded position is seen only by later, also padded,
    positions.
    Returns Y' (..., n_tgt, d).
    """
    y = as_float(y, "y")
    n = y.shape[-2]
    a, _ = multihead_attention(
        y, y, *_projections(self_attn, "self_attn"), num_heads, causal_mask(n)
    )
    a = layer_norm(y + a)  # A = LN_1(Y + MHA(Y, Y; M_dec))
    return _cross_and_ffn(
        a, memory, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask
    )


def shift_right(targets, bos_id):
    """The decoder's input under teacher forcing: ``[BOS, y_1, ..., y_{n-1}]``.

    targets: (..., n) ints, the words to predict (EOS and padding included). Returns the
    same shape: BOS first, then every target but the last, so that input position t
    holds y_{t-1} and predicts y_t ({eq}`ch6-teacher-forcing`).
    """
    targets = np.asarray(targets)
    if targets.ndim < 1 or not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(
            "expected integer targets of shape (..., n), "
            f"got {targets.dtype} {targets.shape}"
        )
    bos = np.full(targets.shape[:-1] + (1,), bos_id, dtype=targets.dtype)  # (..., 1)
    return np.concatenate([bos, targets[..., :-1]], axis=-1)  # (..., n)


def teacher_forced_loss(logits, targets, pad_id):
    """The teacher-forced loss of eq. {eq}`ch6-teacher-forcing` and its gradient.

    logits: (..., n, V), the scores the decoder gives at each input position of
    ``shift_right(targets)``; targets: (..., n) ints; pad_id: the padding token.
    Returns ``(loss, grad)``: loss = the mean of ``-log softmax(logits)[y]`` over the N
    positions whose target is not ``pad_id`` (0.0 if N = 0); grad (..., n, V) = d loss /
    d logits = ``(softmax(logits) - onehot(y)) / N`` at those positions, 0 at the
    others.
    """
    logits = as_float(logits, "logits")
    targets = np.asarray(targets)
    loss = label_smoothed_cross_entropy(
        logits, targets, 0.0, pad_id
    )  # shapes checked there
    keep = targets != pad_id  # (..., n)
    grad = softmax(logits)  # (..., n, V)
    np.put_along_axis(
        grad,
        targets[..., None],
        np.take_along_axis(grad, targets[..., None], -1) - 1,
        -1,
    )
    return loss, grad * keep[..., None] / max(int(keep.sum()), 1)


def decoder_step(
    x_t,
    cache_k,
    cache_v,
    memory,
    self_attn,
    cross_attn,
    w_1,
    b_1,
    w_2,
    b_2,
    num_heads,
    src_mask=None,
):
    """One decoding step of ``decoder_block`` with a key/value cache.

    x_t: (B, 1, d) the new position's input (embedding + position)
    cache_k, cache_v: (B, t, d) the keys ``x_s @ w_k`` and values ``x_s @ w_v`` of the t
    earlier positions (t = 0 at the first step); the other arguments as
    ``decoder_block``.
    The new position's key and value are appended to the cache and its query attends
    over all t + 1 cached positions: no causal mask is needed, as every one is in the
    past.
    Returns ``(y_t, cache_k, cache_v)``: y_t (B, 1, d) equals the last row of
    ``decoder_block`` on the whole prefix; the caches are (B, t + 1, d).
    """
    x_t = as_float(x_t, "x_t")
    w_q, w_k, w_v, w_o = _projections(self_attn, "self_attn")
    cache_k = np.concatenate(
        [as_float(cache_k, "cache_k"), x_t @ w_k], axis=-2
    )  # (B, t+1, d)
    cache_v = np.concatenate(
        [as_float(cache_v, "cache_v"), x_t @ w_v], axis=-2
    )  # (B, t+1, d)
    q = split_heads(x_t @ w_q, num_heads)  # (B, h, 1, d_h)
    heads, _ = attention(
        q, split_heads(cache_k, num_heads), split_heads(cache_v, num_heads)
    )
    a = layer_norm(x_t + merge_heads(heads) @ w_o)  # (B, 1, d): row t of A
    y_t = _cross_and_ffn(a, memory, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask)
    return y_t, cache_k, cache_v


def greedy_decode_steps(
    memory,
    embed,
    positions,
    w_out,
    self_attn,
    cross_attn,
    w_1,
    b_1,
    w_2,
    b_2,
    num_heads,
    bos_id,
    max_len,
    src_mask=None,
):
    """Greedy decoding with a one-layer decoder (``decoder_step``) and a key/value
    cache.

    memory: (B, n_src, d) the encoder output; embed: (V, d) target embeddings;
    positions: (>= max_len, d) position vectors; w_out: (d, V) output layer; bos_id: the
    first input; the layer's weights, num_heads and src_mask as ``decoder_block``.
    Step t (0-based) feeds ``embed[token] + positions[t]`` (token = BOS, then the word
    chosen at step t - 1) and picks ``argmax(y_t @ w_out)``; exactly max_len steps (no
    stop at EOS).
    Returns ``(tokens, cache_k, cache_v)``: tokens (B, max_len) ints, the words chosen;
    the caches (B, max_len, d), one row per input fed.
    """
    memory, embed = as_float(memory, "memory"), as_float(embed, "embed")
    batch, d = memory.shape[0], embed.shape[1]
    cache_k, cache_v = (
        np.zeros((batch, 0, d)),
        np.zeros((batch, 0, d)),
    )  # (B, 0, d): empty
    layer = (self_attn, cross_attn, w_1, b_1, w_2, b_2)
    token = np.full(batch, bos_id)  # (B,)
    chosen = []
    for t in range(max_len):
        x_t = (embed[token] + positions[t])[:, None, :]  # (B, 1, d)
        y_t, cache_k, cache_v = decoder_step(
            x_t, cache_k, cache_v, memory, *layer, num_heads, src_mask
        )
        token = (y_t[:, 0] @ w_out).argmax(-1)  # (B,): the most likely word
        chosen.append(token)
    return np.stack(chosen, axis=1).astype(np.int64), cache_k, cache_v  # (B, max_len)
