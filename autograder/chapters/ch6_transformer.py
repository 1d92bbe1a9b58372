"""Chapter plug-in: The Transformer (assignment ``ch6_transformer``).

Its checks (inputs from a seed, reference, tolerance, hints, known mistakes), registered
with ``autograder.checking.checks.register``; the grader core never names this module.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.checking.checks import (
    HINT_EMPTY,
    HINT_MAX_SHIFT,
    Case,
    Chapter,
    Check,
    Mistake,
    distinct_sizes,
    lazy_module,
    normal,
    register,
    scaled_query,
    told_apart,
)
from solutions import conventions

# imported on first call: these reference modules import PyTorch (checks.LazyFunction)
answers = lazy_module("answers.ch6_transformer")
multihead = lazy_module("solutions.multihead")
self_attention = lazy_module("solutions.self_attention")
soft_hard = lazy_module("solutions.soft_hard")
transformer = lazy_module("solutions.transformer")


def _src_mask(rng, batch, n_src, empty=False):
    lens = rng.integers(1, n_src + 1, size=batch)
    lens[-1] = n_src
    if empty:
        lens[0] = 0
    return (np.arange(n_src)[None, :] < lens[:, None])[:, None, :]  # (B, 1, n_src)


def _cross_case(rng, name, batch, n_tgt, n_src, widths, heads, mask, scale=1.0):
    """x (*batch, n_tgt, d), memory (*batch, n_src, d_src) and the four projections;
    widths = (d, d_src, d_model, d_out); w_q and w_k are multiplied by ``scale``."""
    d, d_src, d_model, d_out = widths

    def w(a, b):
        return normal(rng, a, b) / math.sqrt(a)

    x, memory = normal(rng, *batch, n_tgt, d), normal(rng, *batch, n_src, d_src)
    weights = (
        scale * w(d, d_model),
        scale * w(d_src, d_model),
        w(d_src, d_model),
        w(d_model, d_out),
    )
    return Case(name, (x, memory, *weights, heads, mask))


def _cross_cases(rng):
    n_tgt, n_src = distinct_sizes(rng, 2, 7, 2)
    n = int(rng.integers(3, 6))
    square = (8, 8, 8, 8)
    return [
        _cross_case(
            rng,
            "batch of 2, source padding, n_tgt != n_src",
            (2,),
            n_tgt,
            n_src,
            square,
            2,
            _src_mask(rng, 2, n_src),
        ),
        _cross_case(
            rng, "no mask, one head, widths differ", (), n_tgt, n_src, (6, 4, 8, 5), 1, None
        ),
        _cross_case(
            rng, "n_tgt = n_src, source padding", (2,), n, n, square, 4, _src_mask(rng, 2, n)
        ),
        _cross_case(
            rng,
            "an empty source sentence",
            (2,),
            n_tgt,
            n_src,
            square,
            2,
            _src_mask(rng, 2, n_src, empty=True),
        ),
        # every mask shape that broadcasts to (B, n_tgt, n_src): a solution that inserts the
        # head axis at a fixed place, or assumes (B, 1, n_src), fails one of these
        _cross_case(
            rng,
            "mask (n_src,): one row for every sentence and target position",
            (2,),
            n_tgt,
            n_src,
            square,
            2,
            _src_mask(rng, 1, n_src)[0, 0],
        ),
        _cross_case(
            rng,
            "mask (n_tgt, n_src): one mask for the whole batch",
            (2,),
            n_tgt,
            n_src,
            square,
            2,
            _src_mask(rng, n_tgt, n_src)[:, 0],
        ),
        _cross_case(
            rng,
            "mask (B, n_tgt, n_src): a row per target position",
            (2,),
            n_tgt,
            n_src,
            square,
            4,
            _src_mask(rng, 2 * n_tgt, n_src)[:, 0].reshape(2, n_tgt, n_src),
        ),
        _cross_case(
            rng,
            "mask (1, n_src) without a batch axis on the inputs",
            (),
            n_tgt,
            n_src,
            square,
            2,
            _src_mask(rng, 1, n_src)[0],
        ),
        # scores of about +-10^4 in every head: exp overflows without the max shift
        _cross_case(
            rng,
            "large scores",
            (2,),
            n_tgt,
            n_src,
            square,
            2,
            _src_mask(rng, 2, n_src),
            scale=100.0,
        ),
        _cross_case(
            rng,
            "one target position, one source word (n_tgt = n_src = 1), every width 1",
            (2,),
            1,
            1,
            (1, 1, 1, 1),
            1,
            None,
        ),
    ]


def _queries_from_encoder(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    """Queries from the encoder output, keys and values from the decoder. Only comparable when
    n_tgt = n_src (otherwise the shape hint speaks), so it refuses the other cases."""
    if np.shape(x)[-2] != np.shape(memory)[-2] or np.shape(x)[-1] != np.shape(memory)[-1]:
        raise ValueError("queries from the encoder give another shape: the shape hint covers it")
    swapped = None if src_mask is None else np.swapaxes(src_mask, -1, -2)
    return transformer.cross_attention(memory, x, w_q, w_k, w_v, w_o, num_heads, swapped)


def _scaled_by_sqrt_d_model(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    """Scores divided by sqrt(d_model) instead of sqrt(d_h): the same as queries shrunk by
    sqrt(h) (different from the reference whenever h > 1)."""
    w_q = np.asarray(w_q, dtype=float) / math.sqrt(num_heads)
    return transformer.cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, src_mask)


def _inverted_src_mask(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    flipped = None if src_mask is None else ~np.asarray(src_mask)
    return transformer.cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, flipped)


def _cross_without_src_mask(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    """The source mask never applied: padded source words are attended."""
    if src_mask is None:
        raise ValueError("no mask: the mistake is the reference")
    return transformer.cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, None)


def _cross_heads_without_transpose(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    """Heads made by reshaping (..., n, d_model) straight to (..., h, n, d_h), and merged
    back the same way: each "head" mixes positions instead of holding a slice of features."""
    x, memory = np.asarray(x, dtype=float), np.asarray(memory, dtype=float)

    def split(z):  # (..., n, d_model) -> (..., h, n, d_h) without moving the head axis
        return z.reshape(z.shape[:-2] + (num_heads, z.shape[-2], z.shape[-1] // num_heads))

    q, k, v = split(x @ w_q), split(memory @ w_k), split(memory @ w_v)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., h, n_tgt, n_src)
    mask = None if src_mask is None else np.expand_dims(np.asarray(src_mask), -3)
    weights = conventions.masked_softmax(scores, mask)
    heads = weights @ v  # (..., h, n_tgt, d_h)
    merged = heads.reshape(heads.shape[:-3] + (heads.shape[-2], -1))  # (..., n_tgt, d_model)
    return merged @ w_o, weights


# ----------------------------------------------------------------------------------------
# the packed decoder mask (answers.ch6_transformer.packed_decoder_mask)


def _packed_row(rng, n, sentences, pad):
    """One row of segment ids: ``sentences`` runs of random non-zero labels (distinct, not
    necessarily 1, 2, ...) filling n - pad positions, then ``pad`` zeros."""
    words = n - pad
    cuts = np.sort(rng.choice(np.arange(1, words), size=sentences - 1, replace=False))
    lengths = np.diff(np.concatenate([[0], cuts, [words]]))
    labels = rng.choice(np.arange(1, 10), size=sentences, replace=False)
    return np.concatenate([np.repeat(labels, lengths), np.zeros(pad, dtype=int)])


def _packed_cases(rng):
    n = int(rng.integers(6, 9))
    rows = np.stack([_packed_row(rng, n, s, p) for s, p in ((3, 1), (2, 0), (2, 2))])
    one_each = np.stack([_packed_row(rng, n, 1, p) for p in (0, 3)])
    empty = np.stack([np.zeros(n, dtype=int), _packed_row(rng, n, 2, 1)])
    deep = np.stack([_packed_row(rng, 5, s, p) for s, p in ((2, 0), (3, 1), (1, 2), (4, 0))])
    return [
        Case("3 rows of 2 or 3 packed sentences, padding at the end", (rows,)),
        Case("no batch axis: one row of 3 sentences", (_packed_row(rng, n, 3, 1),)),
        Case("one sentence per row (the chapter's causal AND padding mask)", (one_each,)),
        Case("a row that is all padding", (empty,)),
        Case("one-word sentences", (np.array([[4, 7, 2, 9, 0], [3, 3, 5, 0, 0]]),)),
        Case("n = 1: a one-word row and a padding row", (np.array([[6], [0]]),)),
        Case("two batch axes (2, 2, n)", (deep.reshape(2, 2, 5),)),
    ]


def _packed_variant(causal=True, same=True, pad_query=True, pad_key=False, k=0):
    """``packed_decoder_mask`` built with one known mistake: ``causal``/``same``: whether
    the causal (j <= i + k) and same-segment conditions are there; ``pad_query``: padding
    query rows cleared; ``pad_key``: padding keys hidden (only needed when ``same`` is
    off)."""

    def outputs(segment_ids):
        seg = np.asarray(segment_ids)
        n = seg.shape[-1]
        mask = np.ones(seg.shape + (n,), dtype=bool)
        if causal:
            mask = mask & np.tril(np.ones((n, n), dtype=bool), k)
        if same:
            mask = mask & (seg[..., :, None] == seg[..., None, :])
        if pad_query:
            mask = mask & (seg != 0)[..., :, None]
        if pad_key:
            mask = mask & (seg != 0)[..., None, :]
        return mask

    return outputs


def _packed_inverted(segment_ids):
    return ~answers.packed_decoder_mask(segment_ids)


def _packed_transposed(segment_ids):
    """Row i the key, column j the query: the upper triangle."""
    return np.swapaxes(_packed_variant(pad_query=False, pad_key=True)(segment_ids), -1, -2)


def _smoothing_cases(rng):
    vocab = int(rng.integers(5, 9))
    targets = rng.integers(1, vocab, size=(3, 6))
    targets[0, 4:] = 0  # a shorter sentence
    targets[2, 1:] = 0
    one = rng.integers(1, vocab, size=5)
    return [
        Case("batch of 3 with padding, eps = 0.1", (normal(rng, 3, 6, vocab) * 2, targets, 0.1, 0)),
        Case("no smoothing (eps = 0)", (normal(rng, 3, 6, vocab), targets, 0.0, 0)),
        Case(
            "no padding, eps = 0.3, pad id 2",
            (normal(rng, 5, vocab), np.where(one == 2, 1, one), 0.3, 2),
        ),
        Case("large logits (max-shift)", (normal(rng, 3, 6, vocab) * 500, targets, 0.2, 0)),
        # no real word at all: the mean over zero positions is defined as 0.0, not 0/0 = NaN
        Case("every target is pad", (normal(rng, 2, 3, vocab), np.zeros((2, 3), int), 0.1, 0)),
    ]


def _smoothing_on_pad(logits, targets, smoothing, pad_index):
    import torch

    loss = transformer.label_smoothed_loss(
        torch.from_numpy(np.asarray(logits, dtype=float)),
        torch.from_numpy(np.asarray(targets)),
        smoothing,
        ignore_index=pad_index,
        pad_index=None,
    )
    return float(loss)


def _all_positions(logits, targets, smoothing, pad_index):
    """Pad targets are not skipped: they count as predictions of the pad token."""
    logits = np.asarray(logits, dtype=float)
    z = logits - logits.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    vocab = logits.shape[-1]
    q = np.full(logits.shape, smoothing / (vocab - 1))
    q[..., pad_index] = 0.0
    np.put_along_axis(q, np.asarray(targets)[..., None], 1 - smoothing, axis=-1)
    q[..., pad_index] = np.where(np.asarray(targets) == pad_index, 1 - smoothing, 0.0)
    return float(-(q * log_p).sum(-1).mean())


def _log_softmax(logits):
    logits = np.asarray(logits, dtype=float)
    z = logits - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _smoothing_over_v_minus_2(logits, targets, smoothing, pad_index):
    """The Annotated Transformer's target: 1 - eps on the right word and eps / (V - 2) on
    each word that is neither right nor pad (this course: eps / (V - 1) on every non-pad
    word, the right one included)."""
    log_p, targets = _log_softmax(logits), np.asarray(targets)
    vocab = log_p.shape[-1]
    q = np.full(log_p.shape, smoothing / (vocab - 2))
    q[..., pad_index] = 0.0
    np.put_along_axis(q, targets[..., None], 1 - smoothing, axis=-1)
    keep = targets != pad_index
    return float(-(q * log_p).sum(-1)[keep].mean()) if keep.any() else 0.0


def _pad_zeroed_mean_over_all(logits, targets, smoothing, pad_index):
    """Each pad position's loss set to 0, then the mean over ALL positions."""
    log_p, targets = _log_softmax(logits), np.asarray(targets)
    vocab = log_p.shape[-1]
    q = np.full(log_p.shape, smoothing / (vocab - 1))
    q[..., pad_index] = 0.0
    np.put_along_axis(
        q, targets[..., None], np.take_along_axis(q, targets[..., None], -1) + 1 - smoothing, -1
    )
    loss = -(q * log_p).sum(-1)
    return float(np.where(targets != pad_index, loss, 0.0).mean())


def _noam_cases(rng):
    warmup = int(rng.integers(20, 200))
    return [
        Case("steps 1..400 around the warm-up", (np.arange(1, 401), 64, warmup, 1.0)),
        Case("one step, after the warm-up", (np.array(5 * warmup), 512, warmup, 2.0)),
        Case("the peak (step = warm-up)", (np.array(warmup), 32, warmup, 1.0)),
    ]


def _noam_without_d(step, d_model, warmup, factor=1.0):
    return transformer.noam_rate(step, 1, warmup, factor)


def _table(rng, vocab, scale=2.0):
    logits = normal(rng, vocab, vocab) * scale
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _beam_cases(rng):
    early = _table(rng, 5)
    early[4] = np.log(np.array([0.55, 0.2, 0.15, 0.05, 0.05]))  # from BOS (4), EOS (0) is likely
    return [
        Case("beam 3, V = 5, alpha = 1", (_table(rng, 5), 4, 0, 3, 5, 1.0)),
        Case("beam 1 (greedy)", (_table(rng, 6), 5, 0, 1, 6, 0.7)),
        Case("ties everywhere (uniform table)", (np.full((4, 4), np.log(0.25)), 3, 0, 3, 4, 1.0)),
        Case("early EOS, beam 4", (early, 4, 0, 4, 5, 1.0)),
        Case("no length normalisation (alpha = 0)", (_table(rng, 4), 3, 0, 2, 4, 0.0)),
        Case("a finished beam leaves the beam (beam 2)", (_SHRINK, 3, 0, 2, 4, 1.0)),
    ]


#: BOS = 3, EOS = 0. EOS finishes first (score log 0.5), so the beam shrinks to one live beam,
#: which follows 1 -> 1 -> 1 (score -0.82). A search that keeps two live beams also extends
#: BOS 1 2 and finds 1 2 EOS (score -0.73): it returns another second beam.
_SHRINK = np.log(
    np.array(
        [
            [0.25, 0.25, 0.25, 0.25],
            [0.1, 0.5, 0.39, 0.01],
            [0.95, 0.02, 0.02, 0.01],
            [0.5, 0.3, 0.19, 0.01],
        ]
    )
)


def _beam_without_normalisation(log_probs, bos, eos, beam_size, max_len, alpha=1.0):
    return transformer.beam_search_table(log_probs, bos, eos, beam_size, max_len, 0.0)


def _beam_growing_after_eos(log_probs, bos, eos, beam_size, max_len, alpha=1.0):
    """Every beam is extended at every step, EOS or not, up to max_len."""
    log_probs = np.asarray(log_probs, dtype=float)
    vocab = log_probs.shape[0]
    beams, logp = [[bos]], np.zeros(1)
    for _ in range(max_len):
        total = (logp[:, None] + log_probs[[b[-1] for b in beams]]).ravel()
        best = np.argsort(-total, kind="stable")[:beam_size]
        beams = [beams[c // vocab] + [int(c % vocab)] for c in best]
        logp = total[best]
    scores = logp / max_len**alpha
    tokens = np.array([b[1:] for b in beams], dtype=np.int64)
    order = np.argsort(-scores, kind="stable")
    return tokens[order], scores[order]


# ----------------------------------------------------------------------------------------
# the decoder layer, teacher forcing and cached greedy decoding


def _layer(rng, d, d_ff, scale=1.0):
    """A decoder layer's weights: self_attn, cross_attn (4, d, d) (w_q and w_k times
    ``scale``), w_1 (d, d_ff), b_1 (d_ff,), w_2 (d_ff, d), b_2 (d,)."""

    def stack():
        w = normal(rng, 4, d, d) / math.sqrt(d)
        w[:2] *= scale
        return w

    return (
        stack(),
        stack(),
        normal(rng, d, d_ff) / math.sqrt(d),
        0.1 * normal(rng, d_ff),
        normal(rng, d_ff, d) / math.sqrt(d_ff),
        0.1 * normal(rng, d),
    )


def _block_cases(rng):
    n_tgt, n_src = distinct_sizes(rng, 3, 7, 2)
    return [
        Case(
            "batch of 2, source padding, n_tgt != n_src",
            (
                normal(rng, 2, n_tgt, 8),
                normal(rng, 2, n_src, 8),
                *_layer(rng, 8, 16),
                2,
                _src_mask(rng, 2, n_src),
            ),
        ),
        Case(
            "one head, no source mask",
            (normal(rng, 2, n_tgt, 6), normal(rng, 2, n_src, 6), *_layer(rng, 6, 12), 1, None),
        ),
        Case(
            "no batch axis, 4 heads, mask (n_src,)",
            (
                normal(rng, n_tgt, 8),
                normal(rng, n_src, 8),
                *_layer(rng, 8, 16),
                4,
                _src_mask(rng, 1, n_src)[0, 0],
            ),
        ),
        Case(
            "an empty source sentence",
            (
                normal(rng, 2, n_tgt, 8),
                normal(rng, 2, n_src, 8),
                *_layer(rng, 8, 16),
                2,
                _src_mask(rng, 2, n_src, empty=True),
            ),
        ),
        # w_q and w_k 30 times larger: scores of about +-10^3, exp overflows without the shift
        Case(
            "large scores",
            (
                normal(rng, 2, n_tgt, 8),
                normal(rng, 2, n_src, 8),
                *_layer(rng, 8, 16, 30.0),
                2,
                _src_mask(rng, 2, n_src),
            ),
        ),
        # queries from memory give (n_src, d) rows: comparable only when n_src = n_tgt
        Case(
            "n_tgt = n_src, source padding",
            (
                normal(rng, 2, n_tgt, 8),
                normal(rng, 2, n_tgt, 8),
                *_layer(rng, 8, 16),
                2,
                _src_mask(rng, 2, n_tgt),
            ),
        ),
        Case(
            "a feed-forward width of 1 (d_ff = 1)",
            (normal(rng, 2, n_tgt, 4), normal(rng, 2, n_src, 4), *_layer(rng, 4, 1), 2, None),
        ),
    ]


def _unscaled(stacked, num_heads):
    """A stack whose w_q is multiplied by sqrt(d_h): scores q.k instead of q.k / sqrt(d_h)."""
    stacked = np.array(stacked, dtype=float)
    stacked[0] *= math.sqrt(stacked.shape[-1] // num_heads)
    return stacked


def _over_sqrt_d(stacked, num_heads):
    """A stack whose w_q is divided by sqrt(h): scores q.k / sqrt(d) instead of / sqrt(d_h)."""
    stacked = np.array(stacked, dtype=float)
    stacked[0] /= math.sqrt(num_heads)
    return stacked


def _block_variant(
    self_mask=lambda n: self_attention.causal_mask(n),
    self_scale=None,
    cross_scale=None,
    cross_from_decoder=False,
    queries_from_memory=False,
    use_src_mask=True,
    residual=True,
    ffn_residual=True,
    final_norm=True,
    norm_first=False,
):
    """``decoder_block`` built with one known mistake; ``self_scale`` / ``cross_scale``:
    ``_unscaled`` or ``_over_sqrt_d`` applied to that attention's stack."""

    def outputs(y, memory, self_attn, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask=None):
        mha, norm = multihead.multihead_attention, transformer.layer_norm
        if self_scale is not None:
            self_attn = self_scale(self_attn, num_heads)
        if cross_scale is not None:
            cross_attn = cross_scale(cross_attn, num_heads)
        mask = src_mask if use_src_mask else None
        if not use_src_mask and src_mask is None:
            raise ValueError("no source mask: the mistake is the reference")

        def sublayer(x, f, res=True, normed=True):  # one sub-layer, its residual and norm
            if norm_first:
                return x + f(norm(x)) if residual else f(norm(x))
            z = x + f(x) if residual and res else f(x)
            return norm(z) if normed else z

        def cross(z):
            if cross_from_decoder:  # keys and values from the decoder: no source mask fits
                return mha(z, z, *cross_attn, num_heads)[0]
            if queries_from_memory:  # a (n_src, d) output: only adds up when n_src = n_tgt
                return mha(memory, z, *cross_attn, num_heads, mask)[0]
            return mha(z, memory, *cross_attn, num_heads, mask)[0]

        y = np.asarray(y, dtype=float)
        a = sublayer(y, lambda z: mha(z, z, *self_attn, num_heads, self_mask(y.shape[-2]))[0])
        b = sublayer(a, cross)
        return sublayer(
            b,
            lambda z: transformer.position_wise_ffn(z, w_1, b_1, w_2, b_2),
            res=ffn_residual,
            normed=final_norm,
        )

    return outputs


#: the step's mistakes as the loop shows them: a loop that passes the wrong caches gives them
#: too, so a hint never says decoder_step fails (the grader says so only where it does)
FIX_STEP = (
    ". greedy_decode_cached calls your decoder_step: if its own check fails, fix it first; if "
    "it passes, look at what your loop passes to it"
)
HINT_STEP_UNSCALED = (
    "an attention of the step forgot to divide its scores by sqrt(d_h)"
    + FIX_STEP
    + " (or cross_attention, which it calls)"
)


def _tril(k):
    return lambda n: np.tril(np.ones((n, n), dtype=bool), k)


HINT_SCALE = "divide each head's scores by sqrt(d_h) = sqrt(d / h), the width of one head"
#: keys and values from the decoder: the line of the given helper (Task 1's cross_attention,
#: which the notebook says computes both attentions) that the cross-attention should be
HINT_CROSS_FROM_DECODER = (
    "cross-attention takes its keys and values from the encoder output memory, and only its "
    "queries from A, the decoder's states: your layer passes the decoder's states twice, as "
    "only the self-attention does (the chapter's 'The decoder layer, written out')"
)
HINT_NO_CAUSAL = (
    "the decoder's self-attention is causal: query i may attend to keys j <= i only "
    "(the later words are not written yet)"
)
HINT_DIAGONAL = "every position may attend to itself: the causal condition is j <= i, not j < i"
HINT_ONE_FUTURE = (
    "the causal condition is j <= i: with j <= i + 1 each query sees one word of its future"
)


def _step_cases(rng):
    n_src = int(rng.integers(3, 7))

    def case(name, batch, past, d, heads, mask):
        return Case(
            name,
            (
                normal(rng, batch, 1, d),
                normal(rng, batch, past, d),
                normal(rng, batch, past, d),
                normal(rng, batch, n_src, d),
                *_layer(rng, d, 2 * d),
                heads,
                mask,
            ),
        )

    return [
        case("3 cached positions, source padding", 2, 3, 8, 2, _src_mask(rng, 2, n_src)),
        case("the first step: an empty cache (B, 0, d)", 2, 0, 8, 2, _src_mask(rng, 2, n_src)),
        case("one head, 5 cached positions, no source mask", 3, 5, 6, 1, None),
        case("one sentence, 4 heads, 2 cached positions", 1, 2, 8, 4, _src_mask(rng, 1, n_src)),
        case("one cached position (t = 1)", 2, 1, 8, 2, _src_mask(rng, 2, n_src)),
    ]


def _step_ignoring_the_cache(x_t, cache_k, cache_v, memory, *rest):
    """Attends over the new position only (as if the cache were empty), appends correctly."""
    y_t, _, _ = transformer.decoder_step(x_t, cache_k[:, :0], cache_v[:, :0], memory, *rest)
    _, k, v = transformer.decoder_step(x_t, cache_k, cache_v, memory, *rest)
    return y_t, k, v


def _step_without_the_new_position(x_t, cache_k, cache_v, memory, self_attn, *rest):
    """Attends over the old cache only, then appends: the new query never sees itself."""
    num_heads = rest[5]
    x_t = np.asarray(x_t, dtype=float)
    w_q, w_k, w_v, w_o = np.asarray(self_attn, dtype=float)
    split, merge = multihead.split_heads, multihead.merge_heads
    heads, _ = soft_hard.attention(
        split(x_t @ w_q, num_heads), split(cache_k, num_heads), split(cache_v, num_heads)
    )
    a = transformer.layer_norm(x_t + merge(heads) @ w_o)
    cross_attn, w_1, b_1, w_2, b_2, _, src_mask = rest
    y_t = transformer._cross_and_ffn(a, memory, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask)
    k = np.concatenate([cache_k, x_t @ w_k], axis=-2)
    v = np.concatenate([cache_v, x_t @ w_v], axis=-2)
    return y_t, k, v


def _step_unscaled(x_t, cache_k, cache_v, memory, self_attn, cross_attn, *rest):
    """No 1/sqrt(d_h) in either attention (w_q scaled up: the caches are unchanged)."""
    num_heads = rest[4]
    return transformer.decoder_step(
        x_t,
        cache_k,
        cache_v,
        memory,
        _unscaled(self_attn, num_heads),
        _unscaled(cross_attn, num_heads),
        *rest,
    )


def _step_variant(
    self_scale=None,
    cross_scale=None,
    use_src_mask=True,
    cache_inputs=False,
    swap_kv=False,
    swap_outputs=False,
    cross_from_decoder=False,
):
    """``decoder_step`` built with one known mistake. ``cache_inputs``: the inputs x_s are
    cached (and projected when attending); ``swap_kv``: the new key goes to cache_v and the
    new value to cache_k; ``swap_outputs``: returns (y_t, cache_v, cache_k);
    ``cross_from_decoder``: the cross-attention's keys and values come from the decoder's
    state a (no source mask fits them), not from memory."""

    def outputs(
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
        if not use_src_mask and src_mask is None:
            raise ValueError("no source mask: the mistake is the reference")
        if self_scale is not None:
            self_attn = self_scale(self_attn, num_heads)
        if cross_scale is not None:
            cross_attn = cross_scale(cross_attn, num_heads)
        x_t = np.asarray(x_t, dtype=float)
        w_q, w_k, w_v, w_o = np.asarray(self_attn, dtype=float)
        if cache_inputs:
            k = np.concatenate([cache_k, x_t], axis=-2)  # (B, t + 1, d): inputs, not keys
            v = np.concatenate([cache_v, x_t], axis=-2)
            keys, values = k @ w_k, v @ w_v
        else:
            new_k, new_v = (x_t @ w_v, x_t @ w_k) if swap_kv else (x_t @ w_k, x_t @ w_v)
            k = np.concatenate([cache_k, new_k], axis=-2)  # (B, t + 1, d)
            v = np.concatenate([cache_v, new_v], axis=-2)
            keys, values = k, v
        split, merge = multihead.split_heads, multihead.merge_heads
        heads, _ = soft_hard.attention(
            split(x_t @ w_q, num_heads), split(keys, num_heads), split(values, num_heads)
        )
        a = transformer.layer_norm(x_t + merge(heads) @ w_o)  # (B, 1, d)
        mask = src_mask if use_src_mask and not cross_from_decoder else None
        source = a if cross_from_decoder else memory  # (B, 1, d) or (B, n_src, d)
        y_t = transformer._cross_and_ffn(a, source, cross_attn, w_1, b_1, w_2, b_2, num_heads, mask)
        return (y_t, v, k) if swap_outputs else (y_t, k, v)

    return outputs


def _greedy_cases(rng):
    n_src = int(rng.integers(3, 7))

    def case(name, batch, d, heads, vocab, max_len, past, mask):
        # a prompt cache of ``past`` positions: random keys and values that no sequence of
        # tokens reproduces, so only a decoder that reads the cache gets the words right
        return Case(
            name,
            (
                normal(rng, batch, n_src, d),
                normal(rng, vocab, d) / math.sqrt(d),  # sqrt(d) e_w then has unit entries
                normal(rng, past + max_len + 2, d),
                normal(rng, d, vocab),
                *_layer(rng, d, 2 * d),
                heads,
                int(rng.integers(0, vocab)),
                max_len,
                2.0 * normal(rng, batch, past, d),  # keys: the query leans on the prompt
                3.0 * normal(rng, batch, past, d),  # values: which weigh in the output
                mask,
            ),
        )

    return [
        case(
            "a prompt cache of 3 positions, batch of 3, source padding, 5 steps",
            3,
            8,
            2,
            9,
            5,
            3,
            _src_mask(rng, 3, n_src),
        ),
        case("an empty cache (B, 0, d): decoding from the start", 2, 8, 2, 8, 5, 0, None),
        case("one sentence, one head, a prompt of 2, no source mask", 1, 6, 1, 12, 8, 2, None),
        case(
            "a single step after a prompt of 4, 4 heads",
            4,
            8,
            4,
            12,
            1,
            4,
            _src_mask(rng, 4, n_src),
        ),
        case("a prompt of one position (t0 = 1), 3 steps", 2, 8, 2, 9, 3, 1, None),
    ]


def _greedy_variant(
    step=None,
    position=lambda t0, t: t0 + t,
    embed_scale=True,
    fresh_cache=False,
    inputs_cached=False,
):
    """``greedy_decode_cached`` built with one known mistake: ``step`` a wrong decoder step;
    ``position(t0, t)`` the index of the position vector step t adds; ``embed_scale``: the
    embedding multiplied by sqrt(d); ``fresh_cache``: the given cache ignored when attending
    (but returned in front of the new rows); ``inputs_cached``: the right words, but the
    inputs fed returned as the new cache rows."""

    def outputs(
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
        start_id,
        max_len,
        cache_k,
        cache_v,
        src_mask=None,
    ):
        run = step or transformer.decoder_step
        embed, positions = np.asarray(embed, dtype=float), np.asarray(positions, dtype=float)
        given_k, given_v = np.asarray(cache_k, dtype=float), np.asarray(cache_v, dtype=float)
        batch, t0 = given_k.shape[:2]
        if fresh_cache and t0 == 0:
            raise ValueError("an empty cache: the mistake is the reference")
        k, v = (given_k[:, :0], given_v[:, :0]) if fresh_cache else (given_k, given_v)
        scale = math.sqrt(embed.shape[1]) if embed_scale else 1.0
        token, chosen, fed = np.full(batch, start_id), [], []
        for t in range(max_len):
            x_t = (scale * embed[token] + positions[position(t0, t)])[:, None, :]  # (B, 1, d)
            fed.append(x_t)
            y_t, k, v = run(
                x_t, k, v, memory, self_attn, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask
            )
            token = (y_t[:, 0] @ w_out).argmax(-1)
            chosen.append(token)
        if fresh_cache:
            k, v = np.concatenate([given_k, k], axis=-2), np.concatenate([given_v, v], axis=-2)
        if inputs_cached:
            inputs = np.concatenate(fed, axis=-2)  # (B, max_len, d)
            k = np.concatenate([given_k, inputs], axis=-2)
            v = np.concatenate([given_v, inputs], axis=-2)
        return np.stack(chosen, axis=1), k, v

    return outputs


def _shift_cases(rng):
    targets = rng.integers(3, 9, size=(3, 6))
    targets[0, 4:] = 0  # padded
    targets[1, 2:] = 0
    return [
        Case("batch of 3 with padding, BOS = 1", (targets, 1)),
        Case("one sentence, no batch axis, BOS = 2", (rng.integers(3, 9, size=5), 2)),
        Case("a one-word target", (rng.integers(3, 9, size=(2, 1)), 1)),
    ]


def _loss_cases(rng):
    vocab = int(rng.integers(5, 9))
    targets = rng.integers(1, vocab, size=(3, 6))
    targets[0, 4:] = 0
    targets[2, 1:] = 0
    one = rng.integers(0, vocab, size=5)
    return [
        Case("batch of 3 with padding", (normal(rng, 3, 6, vocab) * 2, targets, 0)),
        Case("no padding, pad id 2", (normal(rng, 5, vocab), np.where(one == 2, 1, one), 2)),
        Case("large logits (max-shift)", (normal(rng, 3, 6, vocab) * 500, targets, 0)),
        Case("every target is pad", (normal(rng, 2, 3, vocab), np.zeros((2, 3), int), 0)),
        Case("one position per sentence (n = 1)", (normal(rng, 3, 1, vocab), targets[:, :1], 0)),
    ]


def _loss_variant(count_pad=False, divide_by_all=False, sum_grad=False, flip_sign=False):
    """``teacher_forced_loss`` with one known mistake."""

    def outputs(logits, targets, pad_id):
        log_p, targets = _log_softmax(logits), np.asarray(targets)  # (..., n, V)
        nll = -np.take_along_axis(log_p, targets[..., None], -1)[..., 0]  # (..., n)
        grad = np.exp(log_p)
        np.put_along_axis(grad, targets[..., None], np.exp(-nll)[..., None] - 1, -1)
        keep = np.ones(targets.shape, bool) if count_pad else targets != pad_id
        count = targets.size if divide_by_all else max(int(keep.sum()), 1)
        loss = float((nll * keep).sum() / count)
        grad = -grad if flip_sign else grad  # onehot - softmax: the descent direction
        return loss, grad * keep[..., None] / (1 if sum_grad else count)

    return outputs


CROSS_ATTENTION = Check(
    "cross_attention",
    transformer.cross_attention,
    _cross_cases,
    outputs=("output", "weights"),
    hints={
        "arity": "return a pair (output, weights)",
        "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
        "shape": "cross-attention has one output row per decoder position: (..., n_tgt, d_out)",
        "weights.shape": "weights are (..., h, n_tgt, n_src): queries from the decoder, keys from the encoder",
        "weights.transposed": "queries come from the decoder (x) and keys from the encoder (memory): "
        "weights are (..., h, n_tgt, n_src)",
    },
    mistakes=(
        Mistake(
            "the queries must come from the decoder states x, the keys and values from the "
            "encoder output memory",
            _queries_from_encoder,
        ),
        Mistake(
            "the source mask is True where a word MAY be attended: keep those scores, hide "
            "the others",
            _inverted_src_mask,
        ),
        Mistake(
            "divide each head's scores by sqrt(d_h) = sqrt(d_model / h), the width of one "
            "head, not by sqrt(d_model)",
            _scaled_by_sqrt_d_model,
        ),
        Mistake(
            "you forgot to divide the scores by sqrt(d_h) = sqrt(d_model / h), the width "
            "of one head",
            scaled_query(transformer.cross_attention, 2, lambda a: np.shape(a[2])[1] // a[6]),
        ),
        Mistake(
            "padded source words are attended: apply src_mask (True = may attend) "
            "to the scores, so that they get zero weight",
            _cross_without_src_mask,
        ),
        Mistake(
            "split the heads by reshaping to (..., n, h, d_h) and then moving the head "
            "axis before the sequence axis (and back when merging): a plain reshape to "
            "(..., h, n, d_h) mixes positions instead of slicing features",
            _cross_heads_without_transpose,
        ),
    ),
)


PACKED_DECODER_MASK = Check(
    "packed_decoder_mask",
    answers.packed_decoder_mask,
    _packed_cases,
    outputs=("mask",),
    rtol=0.0,
    atol=0.0,
    hints={
        "shape": "the mask is (..., n, n): one row per query, for every packed row of the batch",
        "dtype": "build it with comparisons of positions and of segment ids, combined with & (and), "
        "which give a boolean array",
    },
    mistakes=told_apart(
        Mistake(
            "a packed row holds several sentences: a query may attend only to keys "
            "of its own sentence (the same segment id), never to the sentence "
            "before it",
            _packed_variant(same=False, pad_key=True),
        ),
        Mistake(HINT_NO_CAUSAL, _packed_variant(causal=False)),
        Mistake(HINT_DIAGONAL, _packed_variant(k=-1)),
        Mistake(HINT_ONE_FUTURE, _packed_variant(k=1)),
        Mistake(
            "segment 0 is padding, not a sentence: a padding query attends to "
            "nothing (its row is all False)",
            _packed_variant(pad_query=False),
        ),
        Mistake(
            "True means MAY attend: a query sees itself and the earlier words of its own sentence",
            _packed_inverted,
        ),
        Mistake(
            "row i is the query and column j the key: the query sees keys j <= i, "
            "the lower triangle",
            _packed_transposed,
        ),
    ),
)


LABEL_SMOOTHED_CROSS_ENTROPY = Check(
    "label_smoothed_cross_entropy",
    transformer.label_smoothed_cross_entropy,
    _smoothing_cases,
    outputs=("loss",),
    mistakes=(
        Mistake(
            "the pad token is never a right answer: give the smoothing mass eps to the V - 1 "
            "other words, none to pad",
            _smoothing_on_pad,
        ),
        Mistake(
            "skip the positions whose target is the pad token: average over the real words only",
            _all_positions,
        ),
        Mistake(
            "u is uniform over the V - 1 words other than pad, the right word included: the "
            "right word gets a share of eps too (spreading eps over the wrong words only is "
            "another convention)",
            _smoothing_over_v_minus_2,
        ),
        Mistake(
            "zeroing the pad losses is half of it: divide by the number of real (non-pad) "
            "targets, not by all positions",
            _pad_zeroed_mean_over_all,
        ),
    ),
)


NOAM_RATE = Check(
    "noam_rate",
    transformer.noam_rate,
    _noam_cases,
    outputs=("rate",),
    mistakes=(Mistake("the rate is scaled by d_model ** -0.5 too", _noam_without_d),),
)


BEAM_SEARCH_TABLE = Check(
    "beam_search_table",
    transformer.beam_search_table,
    _beam_cases,
    outputs=("tokens", "scores"),
    rtol=1e-9,
    atol=1e-12,
    comparator={"kind": "allclose", "integer": True},  # token ids are integers
    hints={
        "arity": "beam_search returns a pair (sequences, scores)",
        "tokens.shape": "keep exactly beam_size finished beams (fewer only if the search ran out "
        "of candidates), each at most max_len tokens long",
        "tokens.values": "a beam that ends with EOS leaves the beam: with f beams finished, "
        "keep only the beam_size - f best extensions, and stop when beam_size are finished",
    },
    mistakes=(
        Mistake(
            "rank the finished beams by the length-normalised score of the chapter's eq. "
            "(ch6-length-norm), not by log P",
            _beam_without_normalisation,
        ),
        Mistake(
            "a beam that ends with EOS is finished: take it out of the beam and never "
            "extend it again",
            _beam_growing_after_eos,
        ),
    ),
)


DECODER_BLOCK = Check(
    "decoder_block",
    transformer.decoder_block,
    _block_cases,
    outputs=("output",),
    hints={
        "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
        "shape": "the layer keeps the shape of its input y: (..., n_tgt, d)",
    },
    mistakes=told_apart(
        Mistake(HINT_NO_CAUSAL, _block_variant(self_mask=lambda n: None)),
        Mistake(HINT_DIAGONAL, _block_variant(self_mask=_tril(-1))),
        Mistake(HINT_ONE_FUTURE, _block_variant(self_mask=_tril(1))),
        Mistake(
            "both attentions forgot to " + HINT_SCALE + ". decoder_block calls your "
            "cross_attention for both: if its check failed, fix cross_attention first",
            _block_variant(self_scale=_unscaled, cross_scale=_unscaled),
        ),
        Mistake(
            "both attentions divide by sqrt(d) instead of sqrt(d_h) = sqrt(d / h). "
            "decoder_block calls your cross_attention for both: if its check failed, "
            "fix cross_attention first",
            _block_variant(self_scale=_over_sqrt_d, cross_scale=_over_sqrt_d),
        ),
        Mistake(
            "the masked self-attention forgot to " + HINT_SCALE + " (the cross-attention is right)",
            _block_variant(self_scale=_unscaled),
        ),
        Mistake(
            "the cross-attention forgot to " + HINT_SCALE + " (the self-attention is right)",
            _block_variant(cross_scale=_unscaled),
        ),
        Mistake(HINT_CROSS_FROM_DECODER, _block_variant(cross_from_decoder=True)),
        Mistake(
            "cross-attention's queries come from A, the decoder's states after its "
            "self-attention; memory (the encoder output) gives only the keys and values",
            _block_variant(queries_from_memory=True),
        ),
        Mistake(
            "the cross-attention must hide the padded source words: pass src_mask to it",
            _block_variant(use_src_mask=False),
        ),
        Mistake(
            "each sub-layer's output is added to its input before the norm: "
            "LN(x + Sublayer(x)), the residual connection",
            _block_variant(residual=False),
        ),
        Mistake(
            "the feed-forward sub-layer has a residual connection too: its output is added to "
            "its input before the norm, as each attention's is",
            _block_variant(ffn_residual=False),
        ),
        Mistake(
            "the layer ends with a norm: the feed-forward's sum with its input is normalised too"
            " (post-LN), not returned as it is",
            _block_variant(final_norm=False),
        ),
        Mistake(
            "this layer is post-LN, eq. (ch6-decoder-layer): normalise the sum, "
            "LN(x + Sublayer(x)), not the sub-layer's input (pre-LN)",
            _block_variant(norm_first=True),
        ),
    ),
    calls=("cross_attention",),
)


SHIFT_RIGHT = Check(
    "shift_right",
    transformer.shift_right,
    _shift_cases,
    outputs=("inputs",),
    rtol=0.0,
    atol=0.0,
    # token ids: a float array of the right values is wrong (it cannot index an
    # embedding table)
    comparator={"kind": "allclose", "integer": True},
    hints={
        "shape": "the decoder's input has the targets' shape (..., n): BOS in, the last target out",
        "dtype": "token ids are integers, used to index the embedding table: keep the "
        "targets' integer dtype (np.zeros and np.empty make floats)",
    },
    mistakes=told_apart(
        Mistake(
            "np.roll wraps around: it brings the last target y_n round to the "
            "front, where BOS belongs",
            lambda targets, bos: np.roll(targets, 1, axis=-1),
            # a one-word target rolls onto itself, as unshifted targets are: named only where
            # every failing case agrees
            everywhere=True,
        ),
        Mistake(
            "np.roll without axis=-1 rolls the whole batch as one flat array and "
            "wraps around: each row starts with a target of another row",
            lambda targets, bos: np.roll(targets, 1),
        ),
        Mistake(
            "the targets were not shifted: the decoder's input is [BOS, y_1, ..., "
            "y_(n-1)], so that position t reads y_(t-1) and predicts y_t (fed y_t "
            "itself, it would copy the word it must predict)",
            lambda targets, bos: np.array(targets, copy=True),
        ),
        Mistake(
            "shift to the right: the input is [BOS, y_1, ..., y_(n-1)], so that "
            "position t reads y_(t-1) and predicts y_t",
            lambda targets, bos: np.concatenate(
                [targets[..., 1:], np.full(targets.shape[:-1] + (1,), bos)], -1
            ),
        ),
        Mistake(
            "drop the LAST target, not the first: no position predicts a word after y_n",
            lambda targets, bos: np.concatenate(
                [np.full(targets.shape[:-1] + (1,), bos), targets[..., 1:]], -1
            ),
        ),
    ),
)


TEACHER_FORCED_LOSS = Check(
    "teacher_forced_loss",
    transformer.teacher_forced_loss,
    _loss_cases,
    outputs=("loss", "grad"),
    hints={
        "arity": "return a pair (loss, grad)",
        "grad.shape": "the gradient has the shape of the logits: (..., n, V)",
        "nan": "a loss over zero real positions is 0.0, not 0/0; and " + HINT_MAX_SHIFT,
    },
    mistakes=(
        Mistake(
            "skip the positions whose target is the pad token: average over the real words only",
            _loss_variant(count_pad=True, divide_by_all=True),
        ),
        Mistake(
            "zeroing the pad positions is half of it: divide by the number N of "
            "real (non-pad) targets, not by all positions",
            _loss_variant(divide_by_all=True),
        ),
        Mistake(
            "the loss is a mean over N positions, and its gradient keeps that mean: yours sums "
            "the positions' gradients, N times too large",
            _loss_variant(sum_grad=True),
        ),
        Mistake(
            "the gradient of the loss points uphill: yours has the opposite sign (raising the "
            "target's logit must lower the loss, so its gradient there is negative)",
            _loss_variant(flip_sign=True),
        ),
    ),
)


DECODER_STEP = Check(
    "decoder_step",
    transformer.decoder_step,
    _step_cases,
    outputs=("output", "cache_k", "cache_v"),
    hints={
        "arity": "return a triple (y_t, cache_k, cache_v)",
        "cache_k.shape": "append this step's key as one more row on the sequence "
        "axis: cache_k becomes (B, t + 1, d)",
        "cache_v.shape": "append this step's value as one more row on the sequence "
        "axis: cache_v becomes (B, t + 1, d)",
        "output.shape": "one new position: y_t is (B, 1, d)",
    },
    mistakes=told_apart(
        Mistake(
            "the new query attends over every cached position, not only over "
            "itself: the cache holds the keys and values of the earlier words",
            _step_ignoring_the_cache,
        ),
        Mistake(
            "append this step's key and value before attending: the new position "
            "attends to itself too",
            _step_without_the_new_position,
        ),
        Mistake("you forgot to " + HINT_SCALE, _step_unscaled),
        Mistake(
            "the self-attention forgot to " + HINT_SCALE + " (the cross-attention is right)",
            _step_variant(self_scale=_unscaled),
        ),
        Mistake(
            "the cross-attention forgot to " + HINT_SCALE + ". decoder_step calls "
            "your cross_attention: if its check failed, fix cross_attention first",
            _step_variant(cross_scale=_unscaled),
        ),
        Mistake(
            "both attentions divide by sqrt(d) instead of sqrt(d_h) = sqrt(d / h)",
            _step_variant(self_scale=_over_sqrt_d, cross_scale=_over_sqrt_d),
        ),
        Mistake(
            "the cross-attention must hide the padded source words: pass src_mask to it",
            _step_variant(use_src_mask=False),
        ),
        Mistake(
            "the cache holds keys and values (the inputs already projected by W_k and "
            "W_v), not the inputs x_s: only the new position is projected, and the "
            "caches are attended over as they are",
            _step_variant(cache_inputs=True),
        ),
        Mistake(
            "keys and values are swapped: cache_k holds what the query is compared "
            "with, cache_v what is averaged",
            _step_variant(swap_kv=True),
        ),
        Mistake(
            "return (y_t, cache_k, cache_v) in this order: the keys' cache first",
            _step_variant(swap_outputs=True),
        ),
        Mistake(HINT_CROSS_FROM_DECODER, _step_variant(cross_from_decoder=True)),
    ),
    calls=("cross_attention",),
)


GREEDY_DECODE_CACHED = Check(
    "greedy_decode_cached",
    answers.greedy_decode_cached,
    _greedy_cases,
    outputs=("tokens", "cache_k", "cache_v"),
    comparator={"kind": "allclose", "integer": True},  # token ids are integers
    hints={
        "arity": "return a triple (tokens, cache_k, cache_v)",
        "tokens.shape": "one chosen word per step and sentence: (B, max_len), "
        "the start token not included",
        "cache_k.shape": "continue the given cache: one row more per input fed, "
        "(B, t0 + max_len, d)",
        "cache_v.shape": "continue the given cache: one row more per input fed, "
        "(B, t0 + max_len, d)",
    },
    mistakes=told_apart(
        Mistake(
            "step t adds position t0 + t: positions[t0 + t], not positions[0]",
            _greedy_variant(position=lambda t0, t: 0),
        ),
        Mistake(
            "the first token fed comes after the t0 cached positions: step t adds "
            "positions[t0 + t], not positions[t]",
            _greedy_variant(position=lambda t0, t: t),
        ),
        Mistake(
            "off by one position: step t (counted from 0) adds positions[t0 + t]",
            _greedy_variant(position=lambda t0, t: t0 + t + 1),
        ),
        Mistake(
            "off by one position: step t (counted from 0) adds positions[t0 + t]",
            _greedy_variant(position=lambda t0, t: t0 + t - 1),
        ),
        Mistake(
            "your embedding is not scaled: the chapter's decoder input is its scaled embedding "
            "plus the position (the task's statement), and the scale comes before adding the "
            "position",
            _greedy_variant(embed_scale=False),
        ),
        Mistake(
            "read the given cache: its t0 positions come before the first token, and "
            "every step attends over them too (recomputing the prefix from the tokens "
            "cannot know them)",
            _greedy_variant(fresh_cache=True),
        ),
        Mistake(
            "the cache holds the keys and values of the inputs fed (projected by W_k "
            "and W_v), not the inputs x_s themselves",
            _greedy_variant(inputs_cached=True),
        ),
        Mistake(
            "the cache holds keys and values, not the inputs fed" + FIX_STEP,
            _greedy_variant(step=_step_variant(cache_inputs=True)),
        ),
        Mistake(
            "keys and values are swapped in the cache" + FIX_STEP,
            _greedy_variant(step=_step_variant(swap_kv=True)),
        ),
        # the words rarely tell one unscaled attention from two: the cross-attention's
        # (the likelier: cross_attention is the student's) stands for both
        Mistake(
            HINT_STEP_UNSCALED,
            _greedy_variant(step=_step_variant(cross_scale=_unscaled)),
        ),
        Mistake(
            "the step attends over the new position only, not over the cache" + FIX_STEP,
            _greedy_variant(step=_step_ignoring_the_cache),
        ),
    ),
    calls=("decoder_step",),
)


CHAPTER = register(
    Chapter(
        "ch6_transformer",
        # measured 2026-12-03 (`python -m autograder.grading.measure`, then in budgets.py): the
        # solved notebook graded in a warm sandbox took 0.11, 0.10, 0.08 s (2 CPUs, load average
        # 5.0); T = the slowest
        reference_seconds=0.11,
        checks=(
            CROSS_ATTENTION,
            PACKED_DECODER_MASK,
            LABEL_SMOOTHED_CROSS_ENTROPY,
            NOAM_RATE,
            BEAM_SEARCH_TABLE,
            DECODER_BLOCK,
            SHIFT_RIGHT,
            TEACHER_FORCED_LOSS,
            DECODER_STEP,
            GREEDY_DECODE_CACHED,
        ),
    )
)
