"""Chapter plug-in: Seq2seq with attention (assignment ``ch3_seq2seq``).

Its checks (inputs from a seed, reference, tolerance, hints, known mistakes), registered
with ``autograder.checks.register``; the grader core never names this module.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.checks import (
    HINT_EMPTY,
    Case,
    Chapter,
    Check,
    Mistake,
    lazy_module,
    lengths_mask,
    normal,
    register,
)

# imported on first call: these reference modules import PyTorch (checks.LazyFunction)
seq2seq = lazy_module("solutions.seq2seq")


def _bahdanau_cases(rng):
    n_in = int(rng.integers(4, 7))
    d_dec, d_enc, d_att = 5, 6, 4
    w = lambda a, b: normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    return [
        Case(
            "no mask, d_dec != d_enc",
            (
                normal(rng, 2, d_dec),
                normal(rng, 2, n_in, d_enc),
                w(d_dec, d_att),
                w(d_enc, d_att),
                normal(rng, d_att),
                None,
            ),
        ),
        Case(
            "padding mask",
            (
                normal(rng, 3, d_dec),
                normal(rng, 3, n_in, d_enc),
                w(d_dec, d_att),
                w(d_enc, d_att),
                normal(rng, d_att),
                lengths_mask(rng, 3, n_in),
            ),
        ),
        Case(
            "fully-masked row",
            (
                normal(rng, 3, d_dec),
                normal(rng, 3, n_in, d_enc),
                w(d_dec, 3),
                w(d_enc, 3),
                normal(rng, 3),
                lengths_mask(rng, 3, n_in, empty=True),
            ),
        ),
        Case(
            "one source word (n_in=1)",
            (normal(rng, 2, 4), normal(rng, 2, 1, 3), w(4, 2), w(3, 2), normal(rng, 2), None),
        ),
    ]


def _luong_cases(rng):
    n_in = int(rng.integers(4, 7))
    d = 4
    w = lambda a, b: normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    return [
        Case(
            "dot, no mask",
            (normal(rng, 2, d), normal(rng, 2, n_in, d), None, w(2 * d, d), "dot", None),
        ),
        Case(
            "general, padding mask",
            (
                normal(rng, 3, d),
                normal(rng, 3, n_in, d),
                w(d, d),
                w(2 * d, d),
                "general",
                lengths_mask(rng, 3, n_in),
            ),
        ),
        Case(
            "dot, fully-masked row",
            (
                normal(rng, 3, d),
                normal(rng, 3, n_in, d),
                None,
                w(2 * d, d),
                "dot",
                lengths_mask(rng, 3, n_in, empty=True),
            ),
        ),
        Case(
            "general, one source word (n_in=1)",
            (normal(rng, 2, 3), normal(rng, 2, 1, 3), w(3, 3), w(6, 3), "general", None),
        ),
    ]


def _luong_concat_cases(rng):
    n_in = int(rng.integers(4, 7))
    d, d_att = 4, 5
    w = lambda a, b: normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    return [
        Case(
            "no mask",
            (
                normal(rng, 2, d),
                normal(rng, 2, n_in, d),
                w(2 * d, d_att),
                w(2 * d, d),
                normal(rng, d_att),
                None,
            ),
        ),
        Case(
            "padding mask",
            (
                normal(rng, 3, d),
                normal(rng, 3, n_in, d),
                w(2 * d, d_att),
                w(2 * d, d),
                normal(rng, d_att),
                lengths_mask(rng, 3, n_in),
            ),
        ),
        Case(
            "fully-masked row",
            (
                normal(rng, 3, d),
                normal(rng, 3, n_in, d),
                w(2 * d, 3),
                w(2 * d, d),
                normal(rng, 3),
                lengths_mask(rng, 3, n_in, empty=True),
            ),
        ),
    ]


def _luong_swapped(h_t, h, w_a, w_c, kind, mask=None):
    """h~ computed from [h_t; c_t] instead of [c_t; h_t]."""
    d = np.shape(h_t)[1]
    w_c = np.asarray(w_c)
    return seq2seq.luong_context(h_t, h, w_a, np.concatenate([w_c[d:], w_c[:d]]), kind, mask)


def _luong_concat_answer(case: Case):
    h_t, h, w_a, w_c, v, mask = case.fresh()[0]
    return seq2seq.luong_context(h_t, h, w_a, w_c, "concat", mask, v)


#: the outcome task: inputs are 1-5 digit phone numbers as in the training data
TRANSLATE_MAX_DIGITS = 5
# The notebook's own solution (train_model, 200 steps, one thread, deterministic) trained with
# torch seeds and batch seeds 0-19, each graded on 5 hidden cases (seeds 0-4): exact match
# min 0.885, median 0.935, max 0.975 (the source notebook's seed 0: 0.930-0.950). The
# threshold sits 0.035 below the worst of those 100 gradings.
TRANSLATE_THRESHOLD = 0.85
TRANSLATE_TRAIN_SIZE, TRANSLATE_TRAIN_SEED = 2000, 1234
DATA_FILE = "spoken_digits.npz"  # the training data the notebook loads


def _translation_ids(pairs) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) token pairs -> padded id arrays (B, n_in), (B, n_out), pad = 0."""
    from solutions import seq2seq

    src, _ = seq2seq.SOURCE_VOCAB.batch([s for s, _ in pairs])
    tgt, _ = seq2seq.TARGET_VOCAB.batch([t for _, t in pairs])
    return src.numpy().astype(np.int64), tgt.numpy().astype(np.int64)


def _translate_cases(rng):
    from solutions import seq2seq

    pairs = seq2seq.make_translation_data(
        200, int(rng.integers(10**6, 2**31)), 1, TRANSLATE_MAX_DIGITS
    )
    return [Case("200 unseen phone numbers (1-5 digits)", (_translation_ids(pairs)[0],))]


def _translate_answer(case: Case):
    """The exact translation of every source sentence, read off its words."""
    from solutions import seq2seq

    src = np.asarray(case.args[0])
    targets = []
    for row in src:
        words = seq2seq.SOURCE_VOCAB.decode(row.tolist())
        digits, repeat = [], 1
        for word in words:
            if word in ("double", "triple"):
                repeat = 2 if word == "double" else 3
                continue
            digits += [str(seq2seq.DIGIT_WORDS.index(word)) if word != "oh" else "0"] * repeat
            repeat = 1
        targets.append(digits)
    ids, _ = seq2seq.TARGET_VOCAB.batch(targets)
    return ids.numpy().astype(np.int64)


#: the given-model task: every greedy choice of a hidden model is at least this far (in
#: logits) from a tie, so a decoder that batches or orders its float32 arithmetic otherwise
#: makes the same choices. Measured over the hidden cases of seeds 0-199 (600 cases): drawn
#: once, the smallest top-1/top-2 gap was 1.1e-4 and 2.7 % of the models had one below
#: 1e-3 (they are redrawn); after the redraw the smallest gap is 1.2e-3. Decoding one row at
#: a time instead of the whole batch moved a logit by at most 1.7e-5 (seeds 0-29).
GIVEN_MODEL_MIN_MARGIN = 1e-3
#: the random given model: weight matrices N(0, gain^2 / fan_in), embeddings N(0, 1), biases
#: N(0, 0.1^2); <pad> and <bos> are never predicted (bias -10), <eos> has bias 1.5. Over the
#: same 600 cases <eos> ends 48 % of the rows (26 % at once), the others run to max_len.
GIVEN_MODEL_GAIN, GIVEN_MODEL_EOS_BIAS = 3.0, 1.5


def _given_model_parameters(rng, src, max_len: int) -> np.ndarray:
    """A random ``TinySeq2Seq`` as one flat float32 vector (the order of
    ``model.parameters()``), redrawn until its greedy decoding of ``src`` is clear of ties."""
    from solutions import seq2seq

    shapes = seq2seq.TinySeq2Seq(len(seq2seq.SOURCE_VOCAB), len(seq2seq.TARGET_VOCAB))
    named = [(name, tuple(p.shape)) for name, p in shapes.named_parameters()]
    while True:
        parts = []
        for name, shape in named:
            if name.endswith("emb.weight"):
                part = rng.standard_normal(shape)
            elif len(shape) == 2:
                part = rng.standard_normal(shape) * GIVEN_MODEL_GAIN / math.sqrt(shape[1])
            else:
                part = rng.standard_normal(shape) * 0.1
            if name == "out.bias":
                part[[seq2seq.TARGET_VOCAB.pad_id, seq2seq.TARGET_VOCAB.bos_id]] = -10.0
                part[seq2seq.TARGET_VOCAB.eos_id] = GIVEN_MODEL_EOS_BIAS
            parts.append(part.ravel())
        flat = np.concatenate(parts).astype(np.float32)
        model = seq2seq.tiny_model(flat)
        if seq2seq.tiny_greedy_decode(model, src, max_len)[1] >= GIVEN_MODEL_MIN_MARGIN:
            return flat


def _given_model_cases(rng):
    from solutions import seq2seq

    def case(name, n, max_len=None, min_digits=1):
        pairs = seq2seq.make_translation_data(
            n, int(rng.integers(10**6, 2**31)), min_digits, TRANSLATE_MAX_DIGITS
        )
        src = _translation_ids(pairs)[0]
        max_len = 2 * src.shape[1] + 2 if max_len is None else max_len
        return Case(name, (src, _given_model_parameters(rng, src, max_len), max_len))

    return [
        case("a random model, 12 sentences, max_len 2 n_in + 2", 12),
        # five digits, so that a rule cannot match the model's output by chance
        case("another random model, one 5-digit sentence (B = 1)", 1, None, 5),
        case("a random model, max_len 3 (rows without <eos> compared over 3 tokens)", 6, 3),
    ]


def write_translation_data(path) -> None:
    """The ch3 training set (spoken_digits.npz): ids and vocabularies, no pickle needed."""
    from solutions import seq2seq

    pairs = seq2seq.make_translation_data(
        TRANSLATE_TRAIN_SIZE, TRANSLATE_TRAIN_SEED, 1, TRANSLATE_MAX_DIGITS
    )
    src, tgt = _translation_ids(pairs)
    np.savez_compressed(
        path,
        train_src=src,
        train_tgt=tgt,
        source_vocab=np.array(seq2seq.SOURCE_VOCAB.itos),
        target_vocab=np.array(seq2seq.TARGET_VOCAB.itos),
    )


CHAPTER = register(
    Chapter(
        "ch3_seq2seq",
        # measured 2026-12-03 (`python -m autograder.grading.measure`, then in budgets.py): the
        # solved notebook graded in a warm sandbox took 4.22, 5.76, 6.16 s (2 CPUs, load average
        # 4.3); T = the slowest
        reference_seconds=6.2,
        support_files={DATA_FILE: write_translation_data},
        checks=(
            Check(
                "bahdanau_context",
                seq2seq.bahdanau_context,
                _bahdanau_cases,
                outputs=("context", "weights"),
                hints={
                    "arity": "return a pair (context, weights)",
                    "nan": HINT_EMPTY,
                    "context.shape": "the context is one weighted sum of encoder states per sentence: (B, d_enc)",
                    "weights.transposed": "weights are (B, n_in): one row per sentence in the batch",
                    "weights.values": "e_tj = v . tanh(s_prev W_s + h_j W_h), then a masked softmax over j",
                },
            ),
            Check(
                "luong_context",
                seq2seq.luong_context,
                _luong_cases,
                outputs=("h_tilde", "weights"),
                hints={
                    "arity": "return a pair (h_tilde, weights)",
                    "nan": HINT_EMPTY,
                    "weights.values": "dot: h_t . h_j; general: (h_t W_a) . h_j; no scaling in Luong's scores",
                },
                mistakes=(
                    Mistake(
                        "concatenate the context first: h~ = tanh([c_t; h_t] W_c)", _luong_swapped
                    ),
                ),
            ),
            Check(
                "luong_concat_context",
                seq2seq.luong_context,
                _luong_concat_cases,
                outputs=("h_tilde", "weights"),
                answer=_luong_concat_answer,
                hints={
                    "arity": "return a pair (h_tilde, weights)",
                    "nan": HINT_EMPTY,
                    "weights.values": "score_j = v . tanh([h_t; h_j] W_a): the first d rows of W_a act on h_t",
                },
            ),
            Check(
                "translate",
                seq2seq.make_translation_data,
                _translate_cases,
                outputs=("predictions",),
                answer=_translate_answer,
                comparator={
                    "kind": "accuracy",
                    "threshold": TRANSLATE_THRESHOLD,
                    "pad": 0,
                    "eos": 2,
                },
                hints={
                    "values": "train longer (more steps) or check your greedy loop: feed back the argmax, "
                    "start from <bos>, stop at <eos>"
                },
            ),
            Check(
                "translate_given_model",
                seq2seq.translate_given_model,
                _given_model_cases,
                outputs=("predictions",),
                comparator={"kind": "tokens", "pad": 0, "eos": 2},
                hints={
                    "values": "translate must decode with the model it is given (its model "
                    "argument): start from <bos>, feed back the argmax of model.step's logits, "
                    "stop at <eos> or after max_len tokens"
                },
            ),
        ),
    )
)
