"""Chapter plug-in: The Transformer (assignment ``ch6_transformer``).

Its checks (inputs from a seed, reference, tolerance, hints, known mistakes), registered
with ``autograder.checks.register``; the grader core never names this module.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.checks import (
    HINT_EMPTY,
    HINT_MAX_SHIFT,
    Case,
    Chapter,
    Check,
    Mistake,
    distinct_sizes,
    normal,
    ref,
    register,
)

_CROSS = "solutions.transformer:cross_attention"


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
    ]


def _queries_from_encoder(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    """Queries from the encoder output, keys and values from the decoder. Only comparable when
    n_tgt = n_src (otherwise the shape hint speaks), so it refuses the other cases."""
    if np.shape(x)[-2] != np.shape(memory)[-2] or np.shape(x)[-1] != np.shape(memory)[-1]:
        raise ValueError("queries from the encoder give another shape: the shape hint covers it")
    swapped = None if src_mask is None else np.swapaxes(src_mask, -1, -2)
    return ref(_CROSS)(memory, x, w_q, w_k, w_v, w_o, num_heads, swapped)


def _scaled_by_sqrt_d_model(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    """Scores divided by sqrt(d_model) instead of sqrt(d_h): the same as queries shrunk by
    sqrt(h) (different from the reference whenever h > 1)."""
    w_q = np.asarray(w_q, dtype=float) / math.sqrt(num_heads)
    return ref(_CROSS)(x, memory, w_q, w_k, w_v, w_o, num_heads, src_mask)


def _inverted_src_mask(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
    flipped = None if src_mask is None else ~np.asarray(src_mask)
    return ref(_CROSS)(x, memory, w_q, w_k, w_v, w_o, num_heads, flipped)


def _decoder_mask_cases(rng):
    n = int(rng.integers(4, 8))
    return [
        Case("batch of 3, one shorter target", (np.array([n, n - 2, n]), n)),
        Case("an empty target", (np.array([0, n]), n)),
        Case("no batch axis", (np.array(n - 1), n)),
        Case("random lengths", (rng.integers(0, n + 1, size=4), n)),
    ]


def _decoder_mask_inverted(tgt_lens, n):
    return ~ref("solutions.transformer:decoder_mask")(tgt_lens, n)


def _decoder_mask_causal_only(tgt_lens, n):
    causal = ref("solutions.self_attention:causal_mask")(n)
    return np.broadcast_to(causal, np.shape(tgt_lens) + (n, n))


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

    loss = ref("solutions.transformer:label_smoothed_loss")(
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
    return ref("solutions.transformer:noam_rate")(step, 1, warmup, factor)


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
    return ref("solutions.transformer:beam_search_table")(
        log_probs, bos, eos, beam_size, max_len, 0.0
    )


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


CHAPTER = register(
    Chapter(
        "ch6_transformer",
        # `python -m autograder.budgets`, 2026-12-03: the solved notebook graded in a warm
        # sandbox took 0.11, 0.10, 0.08 s (2 CPUs, load average 5.0); T = the slowest
        reference_seconds=0.11,
        checks=(
            Check(
                "cross_attention",
                _CROSS,
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
                ),
            ),
            Check(
                "decoder_mask",
                "solutions.transformer:decoder_mask",
                _decoder_mask_cases,
                outputs=("mask",),
                rtol=0.0,
                atol=0.0,
                hints={
                    "shape": "the mask is (..., n, n): one row per query, for every target in the batch",
                    "dtype": "build it with comparisons (j <= i, j < length), which give a boolean array",
                },
                mistakes=(
                    Mistake(
                        "True means MAY attend: a query sees itself and the earlier real words",
                        _decoder_mask_inverted,
                    ),
                    Mistake(
                        "combine the causal mask with the target padding: keys at or after the "
                        "target's length are hidden too",
                        _decoder_mask_causal_only,
                    ),
                ),
            ),
            Check(
                "label_smoothed_cross_entropy",
                "solutions.transformer:label_smoothed_cross_entropy",
                _smoothing_cases,
                outputs=("loss",),
                mistakes=(
                    Mistake(
                        "the pad token is never a right answer: give the smoothing mass eps to the V - 1 "
                        "other words, none to pad",
                        _smoothing_on_pad,
                    ),
                    Mistake(
                        "skip the positions whose target is the pad token: average over the real words "
                        "only",
                        _all_positions,
                    ),
                    Mistake(
                        "u is uniform over the V - 1 words other than pad, the right word included: "
                        "q_y = 1 - eps + eps / (V - 1) and eps / (V - 1) on every other non-pad word "
                        "(eps / (V - 2) over the wrong words only is another convention)",
                        _smoothing_over_v_minus_2,
                    ),
                    Mistake(
                        "zeroing the pad losses is half of it: divide by the number of real (non-pad) "
                        "targets, not by all positions",
                        _pad_zeroed_mean_over_all,
                    ),
                ),
            ),
            Check(
                "noam_rate",
                "solutions.transformer:noam_rate",
                _noam_cases,
                outputs=("rate",),
                mistakes=(Mistake("the rate is scaled by d_model ** -0.5 too", _noam_without_d),),
            ),
            Check(
                "beam_search_table",
                "solutions.transformer:beam_search_table",
                _beam_cases,
                outputs=("tokens", "scores"),
                rtol=1e-9,
                atol=1e-12,
                hints={
                    "arity": "beam_search returns a pair (sequences, scores)",
                    "tokens.shape": "keep exactly beam_size finished beams (fewer only if the search ran out "
                    "of candidates), each at most max_len tokens long",
                    "tokens.values": "a beam that ends with EOS leaves the beam: with f beams finished, "
                    "keep only the beam_size - f best extensions, and stop when beam_size are finished",
                },
                mistakes=(
                    Mistake(
                        "rank the finished beams by log P / length ** alpha (length normalisation), "
                        "not by log P",
                        _beam_without_normalisation,
                    ),
                    Mistake(
                        "a beam that ends with EOS is finished: take it out of the beam and never "
                        "extend it again",
                        _beam_growing_after_eos,
                    ),
                ),
            ),
        ),
    )
)
