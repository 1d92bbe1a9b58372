"""The check registry: every graded function of the five assignments, declared once.

- ``REGISTRY``: check name (= the student's function name) -> ``Check``: which reference
  function in ``solutions`` answers, how to build test inputs from a seed (shapes, masks with
  fully-masked rows, edge sizes like n = 1, non-square n_q != n_k so a transpose shows up),
  the tolerance (the same for public and hidden cases), hints, and known mistakes whose
  outputs are recognised and named ("you forgot to divide by sqrt(d_k)").
- ``public_cases`` / ``hidden_cases``: the same case factory driven by a fixed public seed
  or by a seed chosen at grading time.
- ``expected`` / ``normalise`` / ``compare``: the reference answer and the verdict; the
  comparison itself lives in ``autograder.student_check`` so the released notebooks and the
  grader give word-for-word the same messages.
- ``run_hidden``: the in-kernel hidden check that stock ``nbgrader autograde`` runs.

Trusted side only: this module imports ``solutions`` and never ships to students (the
release ships ``public_cases.npz``, computed here, and ``student_check.py``).
"""

from __future__ import annotations

import importlib
import math
import os
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from autograder import student_check
from autograder.student_check import normalise

__all__ = [
    "Seeded", "Case", "Verdict", "Check", "Mistake", "REGISTRY", "ASSIGNMENTS",
    "public_cases", "hidden_cases", "expected", "normalise", "compare", "run_hidden",
    "spec", "mistake_outputs", "checks_for",
]

ASSIGNMENTS = ("ch1_pooling", "ch2_soft_hard", "ch3_seq2seq", "ch4_self_attention", "ch5_multihead")
#: the seed of the public cases (hidden cases mix the grading seed with a different stream)
PUBLIC_SEED = 20240
#: run_hidden's seed when none is given: the environment variable, else this one
DEFAULT_HIDDEN_SEED = 7
HIDDEN_SEED_ENV = "ATTENTION_HIDDEN_SEED"


@dataclass(frozen=True)
class Seeded:
    """An argument meaning "a fresh ``numpy.random.default_rng(seed)``"."""

    seed: int


@dataclass(frozen=True)
class Case:
    name: str  # shown to students: "causal mask", "fully-masked row", "batch of 3"
    args: tuple  # np.ndarray (numeric or bool), int, float, bool, str, None, Seeded
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str  # teaches; for hidden cases it holds no input or expected values


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation: ``outputs`` takes the case's arguments and returns
    what that wrong implementation would; a student whose result matches gets ``hint``."""

    hint: str
    outputs: Callable[..., Any]


@dataclass(frozen=True)
class Check:
    name: str  # registry key and the name of the student's function
    assignment: str
    reference: str  # "module:function" inside solutions, resolved on first use
    make_cases: Callable[[np.random.Generator], list]  # rng -> [Case]
    outputs: tuple = ("output",)  # names of the returned arrays, used in messages
    rtol: float = 1e-6
    atol: float = 1e-9
    hints: dict = field(default_factory=dict)  # "kind" or "output.kind" -> hint text
    mistakes: tuple = ()  # Mistake, ...
    comparator: dict = field(default_factory=lambda: {"kind": "allclose"})
    # answer(case) -> the expected return value; default: the reference called on the case
    answer: Callable[[Case], Any] | None = None

    def reference_fn(self) -> Callable:
        module, _, attr = self.reference.partition(":")
        return getattr(importlib.import_module(module), attr)


# ----------------------------------------------------------------------------------------
# input builders


def _normal(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape)


def _lengths_mask(rng, batch: int, n: int, empty: bool = False) -> np.ndarray:
    """(batch, n) padding mask with random lengths in [1, n]; row 0 is empty if ``empty``."""
    lens = rng.integers(1, n + 1, size=batch)
    lens[-1] = n  # one full sequence
    if empty:
        lens[0] = 0
    return np.arange(n)[None, :] < lens[:, None]


def _sizes(rng, low: int, high: int, k: int) -> list[int]:
    """k distinct sizes in [low, high] (distinct, so n_q != n_k and a transpose is caught)."""
    return [int(s) for s in rng.choice(np.arange(low, high + 1), size=k, replace=False)]


def _decode(value):
    return np.random.default_rng(value.seed) if isinstance(value, Seeded) else (
        value.copy() if isinstance(value, np.ndarray) else value)


def _call(fn, case: Case):
    """Call fn on fresh copies of the case's inputs (Seeded -> a fresh generator)."""
    return fn(*[_decode(a) for a in case.args], **{k: _decode(v) for k, v in case.kwargs.items()})


def _ref(path: str) -> Callable:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


# ----------------------------------------------------------------------------------------
# ch1_pooling


def _pool_cases(rng):
    b, n, d = 3, int(rng.integers(4, 7)), int(rng.integers(2, 5))
    x = _normal(rng, b, n, d)
    neg = -np.abs(_normal(rng, 2, 4, 3)) - 0.5  # all negative: max over zeros would win
    return [
        Case("no mask", (x, None)),
        Case("padding mask", (_normal(rng, b, n, d), _lengths_mask(rng, b, n))),
        Case("fully-masked sequence", (_normal(rng, b, n, d), _lengths_mask(rng, b, n, empty=True))),
        Case("all values negative", (neg, np.array([[True, True, False, False], [True, False, True, True]]))),
        Case("single item (n=1)", (_normal(rng, 2, 1, 3), np.array([[True], [False]]))),
        Case("no batch axis", (_normal(rng, 5, 2), np.array([True, False, True, True, False]))),
    ]


def _mask_items(x, mask):
    return x if mask is None else x * np.asarray(mask)[..., None]


def _nw_weights_cases(rng):
    n_q, n_k = _sizes(rng, 3, 8, 2)
    return [
        Case("1-d points", (rng.uniform(0, 5, n_q), rng.uniform(0, 5, n_k), 0.7)),
        Case("2-d points", (_normal(rng, n_k, 2), _normal(rng, n_q, 2), 1.3)),
        Case("query far from every key", (np.array([40.0, 0.5]), rng.uniform(0, 1, 6), 0.05)),
        Case("one query, one key", (np.array([0.3]), np.array([-1.2]), 2.0)),
    ]


def _nw_cases(rng):
    n_q, n_k = _sizes(rng, 3, 8, 2)
    xk = rng.uniform(0, 5, n_k)
    return [
        Case("1-d targets", (rng.uniform(0, 5, n_q), xk, np.sin(xk), 0.5)),
        Case("2-d targets", (_normal(rng, n_q, 2), _normal(rng, n_k, 2), _normal(rng, n_k, 3), 0.9)),
        Case("query far from every key", (np.array([-30.0]), rng.uniform(0, 1, 5), _normal(rng, 5), 0.05)),
        Case("one key", (rng.uniform(0, 1, 3), np.array([0.5]), np.array([2.5]), 1.0)),
    ]


def _loo_cases(rng):
    n = int(rng.integers(6, 10))
    x = np.sort(rng.uniform(0, 5, n))
    return [
        Case("1-d data", (x, np.sin(x) + 0.1 * _normal(rng, n), 0.6)),
        Case("2-d inputs", (_normal(rng, 7, 2), _normal(rng, 7), 1.1)),
        Case("vector targets", (x, _normal(rng, n, 2), 0.35)),
        Case("two points (n=2)", (np.array([0.0, 1.0]), np.array([1.0, -1.0]), 0.8)),
    ]


# ----------------------------------------------------------------------------------------
# ch2_soft_hard


def _softmax_cases(rng):
    n_q, n_k = _sizes(rng, 3, 7, 2)
    causal = np.arange(5)[None, :] <= np.arange(5)[:, None]
    rows = np.ones((4, n_k), dtype=bool)
    rows[1] = False
    rows[2, ::2] = False
    return [
        Case("no mask", (_normal(rng, 2, n_q, n_k), None)),
        Case("padding mask", (_normal(rng, 2, n_q, n_k), _lengths_mask(rng, 2, n_k)[:, None, :])),
        Case("causal mask", (_normal(rng, 5, 5), causal)),
        Case("fully-masked row", (_normal(rng, 4, n_k), rows)),
        Case("large scores", (1000.0 * _normal(rng, 3, n_k), None)),
        Case("single key (n_k=1)", (_normal(rng, 3, 1), np.array([[True], [False], [True]]))),
    ]


def _score_zero_mask(scores, mask):
    from solutions.soft_hard import softmax

    if mask is None:
        return softmax(np.asarray(scores))
    full = np.broadcast_to(mask, np.shape(scores))
    return softmax(np.where(full, scores, 0.0)) * full


def _qk_cases(rng):
    n_q, n_k = _sizes(rng, 2, 7, 2)
    return [
        Case("non-square (n_q != n_k)", (_normal(rng, n_q, 4), _normal(rng, n_k, 4))),
        Case("batch of 2", (_normal(rng, 2, n_q, 8), _normal(rng, 2, n_k, 8))),
        Case("one query, one key, d=1", (_normal(rng, 1, 1), _normal(rng, 1, 1))),
    ]


def _additive_cases(rng):
    n_q, n_k = _sizes(rng, 2, 7, 2)
    d_q, d_k, d_att = 3, 5, 4
    w = lambda *s: _normal(rng, *s) / 2  # noqa: E731 - moderate pre-activations
    return [
        Case("non-square, d_q != d_k", (_normal(rng, n_q, d_q), _normal(rng, n_k, d_k), w(d_q, d_att), w(d_k, d_att), _normal(rng, d_att))),
        Case("batch of 2", (_normal(rng, 2, n_q, d_q), _normal(rng, 2, n_k, d_k), w(d_q, 6), w(d_k, 6), _normal(rng, 6))),
        Case("one query (n_q=1)", (_normal(rng, 1, 2), _normal(rng, 4, 2), w(2, 3), w(2, 3), _normal(rng, 3))),
    ]


def _attention_cases(rng):
    n_q, n_k = _sizes(rng, 2, 7, 2)
    rows = np.ones((n_q, n_k), dtype=bool)
    rows[0] = False
    causal = np.arange(4)[None, :] <= np.arange(4)[:, None]
    return [
        Case("non-square, d_v != d_k", (_normal(rng, n_q, 4), _normal(rng, n_k, 4), _normal(rng, n_k, 3), None)),
        Case("padding mask, batch of 2", (_normal(rng, 2, n_q, 6), _normal(rng, 2, n_k, 6), _normal(rng, 2, n_k, 2), _lengths_mask(rng, 2, n_k)[:, None, :])),
        Case("fully-masked row", (_normal(rng, n_q, 3), _normal(rng, n_k, 3), _normal(rng, n_k, 5), rows)),
        Case("causal mask", (_normal(rng, 4, 8), _normal(rng, 4, 8), _normal(rng, 4, 8), causal)),
    ]


def _hard_cases(rng):
    from solutions.soft_hard import masked_softmax

    n_q, n_k = _sizes(rng, 3, 7, 2)
    w = masked_softmax(2 * _normal(rng, n_q, n_k))
    w_masked = masked_softmax(_normal(rng, 3, n_k), np.array([[True] * n_k, [False] * n_k, [True, False] * (n_k // 2) + [True] * (n_k % 2)]))
    return [
        Case("argmax (rng=None)", (w, _normal(rng, n_k, 4), None)),
        Case("sampled with rng", (w, _normal(rng, n_k, 4), Seeded(int(rng.integers(2**31))))),
        Case("sampled, batch of 2", (masked_softmax(_normal(rng, 2, n_q, n_k)), _normal(rng, 2, n_k, 3), Seeded(int(rng.integers(2**31))))),
        Case("fully-masked row", (w_masked, _normal(rng, n_k, 2), Seeded(int(rng.integers(2**31))))),
    ]


def _reinforce_cases(rng):
    n = int(rng.integers(3, 7))
    return [
        Case("one choice, no baseline", (_normal(rng, n), int(rng.integers(n)), 1.5, 0.0)),
        Case("one choice, baseline", (_normal(rng, n), int(rng.integers(n)), -0.5, 0.3)),
        Case("batch of 3", (_normal(rng, 3, n), rng.integers(0, n, 3), _normal(rng, 3), 0.2)),
        Case("reward equals baseline", (_normal(rng, 2, n), rng.integers(0, n, 2), 0.7, 0.7)),
    ]


# ----------------------------------------------------------------------------------------
# ch3_seq2seq


def _source_mask(rng, batch: int, n_in: int, empty: bool = False) -> np.ndarray:
    return _lengths_mask(rng, batch, n_in, empty)


def _bahdanau_cases(rng):
    n_in = int(rng.integers(4, 7))
    d_dec, d_enc, d_att = 5, 6, 4
    w = lambda a, b: _normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    return [
        Case("no mask, d_dec != d_enc", (_normal(rng, 2, d_dec), _normal(rng, 2, n_in, d_enc), w(d_dec, d_att), w(d_enc, d_att), _normal(rng, d_att), None)),
        Case("padding mask", (_normal(rng, 3, d_dec), _normal(rng, 3, n_in, d_enc), w(d_dec, d_att), w(d_enc, d_att), _normal(rng, d_att), _source_mask(rng, 3, n_in))),
        Case("fully-masked row", (_normal(rng, 3, d_dec), _normal(rng, 3, n_in, d_enc), w(d_dec, 3), w(d_enc, 3), _normal(rng, 3), _source_mask(rng, 3, n_in, empty=True))),
        Case("one source word (n_in=1)", (_normal(rng, 2, 4), _normal(rng, 2, 1, 3), w(4, 2), w(3, 2), _normal(rng, 2), None)),
    ]


def _luong_cases(rng):
    n_in = int(rng.integers(4, 7))
    d = 4
    w = lambda a, b: _normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    return [
        Case("dot, no mask", (_normal(rng, 2, d), _normal(rng, 2, n_in, d), None, w(2 * d, d), "dot", None)),
        Case("general, padding mask", (_normal(rng, 3, d), _normal(rng, 3, n_in, d), w(d, d), w(2 * d, d), "general", _source_mask(rng, 3, n_in))),
        Case("dot, fully-masked row", (_normal(rng, 3, d), _normal(rng, 3, n_in, d), None, w(2 * d, d), "dot", _source_mask(rng, 3, n_in, empty=True))),
        Case("general, one source word (n_in=1)", (_normal(rng, 2, 3), _normal(rng, 2, 1, 3), w(3, 3), w(6, 3), "general", None)),
    ]


def _luong_concat_cases(rng):
    n_in = int(rng.integers(4, 7))
    d, d_att = 4, 5
    w = lambda a, b: _normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    return [
        Case("no mask", (_normal(rng, 2, d), _normal(rng, 2, n_in, d), w(2 * d, d_att), w(2 * d, d), _normal(rng, d_att), None)),
        Case("padding mask", (_normal(rng, 3, d), _normal(rng, 3, n_in, d), w(2 * d, d_att), w(2 * d, d), _normal(rng, d_att), _source_mask(rng, 3, n_in))),
        Case("fully-masked row", (_normal(rng, 3, d), _normal(rng, 3, n_in, d), w(2 * d, 3), w(2 * d, d), _normal(rng, 3), _source_mask(rng, 3, n_in, empty=True))),
    ]


def _luong_swapped(h_t, h, w_a, w_c, kind, mask=None):
    """h~ computed from [h_t; c_t] instead of [c_t; h_t]."""
    d = np.shape(h_t)[1]
    w_c = np.asarray(w_c)
    return _ref("solutions.seq2seq:luong_context")(h_t, h, w_a, np.concatenate([w_c[d:], w_c[:d]]), kind, mask)


def _luong_concat_answer(case: Case):
    h_t, h, w_a, w_c, v, mask = [_decode(a) for a in case.args]
    return _ref("solutions.seq2seq:luong_context")(h_t, h, w_a, w_c, "concat", mask, v)


#: the outcome task: inputs are 1-5 digit phone numbers as in the training data
TRANSLATE_MAX_DIGITS = 5
TRANSLATE_THRESHOLD = 0.85
TRANSLATE_TRAIN_SIZE, TRANSLATE_TRAIN_SEED = 2000, 1234


def _translation_ids(pairs) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) token pairs -> padded id arrays (B, n_in), (B, n_out), pad = 0."""
    from solutions import seq2seq

    src, _ = seq2seq.SOURCE_VOCAB.batch([s for s, _ in pairs])
    tgt, _ = seq2seq.TARGET_VOCAB.batch([t for _, t in pairs])
    return src.numpy().astype(np.int64), tgt.numpy().astype(np.int64)


def _translate_cases(rng):
    from solutions import seq2seq

    pairs = seq2seq.make_translation_data(200, int(rng.integers(10**6, 2**31)), 1, TRANSLATE_MAX_DIGITS)
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


def write_translation_data(path) -> None:
    """The ch3 training set (spoken_digits.npz): ids and vocabularies, no pickle needed."""
    from solutions import seq2seq

    pairs = seq2seq.make_translation_data(TRANSLATE_TRAIN_SIZE, TRANSLATE_TRAIN_SEED, 1, TRANSLATE_MAX_DIGITS)
    src, tgt = _translation_ids(pairs)
    np.savez_compressed(path, train_src=src, train_tgt=tgt,
                        source_vocab=np.array(seq2seq.SOURCE_VOCAB.itos),
                        target_vocab=np.array(seq2seq.TARGET_VOCAB.itos))


# ----------------------------------------------------------------------------------------
# ch4_self_attention


def _self_attention_cases(rng):
    n = int(rng.integers(4, 7))
    d_in, d_k, d_v = 5, 3, 4
    w = lambda a, b: _normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    causal = np.arange(n)[None, :] <= np.arange(n)[:, None]
    return [
        Case("no mask, d_k != d_v", (_normal(rng, n, d_in), w(d_in, d_k), w(d_in, d_k), w(d_in, d_v), None)),
        Case("causal mask, batch of 2", (_normal(rng, 2, n, d_in), w(d_in, d_k), w(d_in, d_k), w(d_in, d_v), causal)),
        Case("padding mask with an empty sequence", (_normal(rng, 3, n, d_in), w(d_in, 4), w(d_in, 4), w(d_in, 2), _lengths_mask(rng, 3, n, empty=True)[:, None, :])),
        Case("single item (n=1)", (_normal(rng, 1, d_in), w(d_in, d_k), w(d_in, d_k), w(d_in, d_v), None)),
    ]


def _causal_cases(rng):
    return [Case(f"n={n}", (n,)) for n in (1, 4, int(rng.integers(5, 9)))]


def _local_cases(rng):
    return [
        Case("n=6, window=1", (6, 1)),
        Case("window=0 (only itself)", (5, 0)),
        Case(f"window wider than n", (4, 10)),
        Case("random n and window", (int(rng.integers(5, 10)), int(rng.integers(2, 4)))),
        Case("n=1", (1, 2)),
    ]


def _positions_cases(rng):
    return [
        Case("n=4, d=6", (4, 6)),
        Case("n=50, d=16", (50, 16)),
        Case("odd width d=7", (int(rng.integers(3, 6)), 7)),
        Case("one position", (1, 4)),
    ]


def _online_cases(rng):
    n_q, n_k = _sizes(rng, 3, 11, 2)
    rows = np.ones((n_q, n_k), dtype=bool)
    rows[1] = False
    rows[2, : n_k // 2] = False
    return [
        Case("block size divides n_k", (_normal(rng, n_q, 4), _normal(rng, 12, 4), _normal(rng, 12, 3), 4, None)),
        Case("block size does not divide n_k", (_normal(rng, n_q, 4), _normal(rng, n_k, 4), _normal(rng, n_k, 2), 3, None)),
        Case("block larger than n_k", (_normal(rng, 2, n_q, 5), _normal(rng, 2, n_k, 5), _normal(rng, 2, n_k, 5), 64, None)),
        Case("mask with a fully-masked row", (_normal(rng, n_q, 4), _normal(rng, n_k, 4), _normal(rng, n_k, 3), 2, rows)),
        Case("block size 1, large scores", (8 * _normal(rng, n_q, 6), 8 * _normal(rng, n_k, 6), _normal(rng, n_k, 2), 1, None)),
    ]


def _unscaled(path: str, scale_arg: int, width: Callable[[tuple], int]):
    """The reference called with its query input multiplied by sqrt(d): no 1/sqrt(d) scaling."""
    def outputs(*args, **kwargs):
        args = list(args)
        args[scale_arg] = np.asarray(args[scale_arg]) * math.sqrt(width(tuple(args)))
        return _ref(path)(*args, **kwargs)
    return outputs


def _transposed_self_attention(x, w_q, w_k, w_v, mask=None):
    """Output and weights computed with W^T instead of W (queries as columns)."""
    _, w = _ref("solutions.self_attention:self_attention")(x, w_q, w_k, w_v, mask)
    wt = np.swapaxes(w, -1, -2)  # (..., n, n)
    return wt @ (np.asarray(x) @ np.asarray(w_v)), wt


def _swap_sin_cos(n, d):
    """Positions with sin and cos swapped (cos in even columns, sin in odd ones)."""
    w = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (ceil(d/2),)
    angles = np.arange(n, dtype=np.float64)[:, None] * w[None, :]  # (n, ceil(d/2))
    pe = np.empty((n, d))
    pe[:, 0::2] = np.cos(angles)
    pe[:, 1::2] = np.sin(angles[:, : d // 2])
    return pe


# ----------------------------------------------------------------------------------------
# ch5_multihead


def _split_cases(rng):
    n = int(rng.integers(3, 6))
    return [
        Case("batch of 2, 3 heads", (_normal(rng, 2, n, 12), 3)),
        Case("no batch axis, 2 heads", (_normal(rng, n, 8), 2)),
        Case("head width 1", (_normal(rng, 2, 3, n, 6), 6)),
        Case("one head", (_normal(rng, n, 4), 1)),
    ]


def _merge_cases(rng):
    n = int(rng.integers(3, 6))
    return [
        Case("batch of 2, 3 heads", (_normal(rng, 2, 3, n, 4),)),
        Case("no batch axis, 2 heads", (_normal(rng, 2, n, 5),)),
        Case("one head", (_normal(rng, 1, n, 3),)),
        Case("single item (n=1)", (_normal(rng, 4, 1, 2),)),
    ]


def _mha_cases(rng):
    n_q, n_kv = _sizes(rng, 2, 7, 2)
    d_model = 12
    w = lambda a, b: _normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    causal = np.arange(n_q)[None, :] <= np.arange(n_q)[:, None]
    rows = np.ones((n_q, n_kv), dtype=bool)
    rows[0] = False
    x = _normal(rng, 2, n_q, 6)
    return [
        Case("self-attention, causal, batch of 2", (x, x, w(6, d_model), w(6, d_model), w(6, d_model), w(d_model, 6), 3, causal)),
        Case("cross-attention, n_q != n_kv", (_normal(rng, n_q, 5), _normal(rng, n_kv, 7), w(5, d_model), w(7, d_model), w(7, d_model), w(d_model, 4), 4, None)),
        Case("fully-masked row", (_normal(rng, n_q, 6), _normal(rng, n_kv, 6), w(6, 8), w(6, 8), w(6, 8), w(8, 6), 2, rows)),
        Case("one head", (_normal(rng, n_q, 4), _normal(rng, n_kv, 4), w(4, 6), w(4, 6), w(4, 6), w(6, 4), 1, None)),
    ]


def _mha_wrong_scale(*args, **kwargs):
    """Scores scaled by sqrt(d_model) instead of sqrt(d_head)."""
    args = list(args)
    d_model, h = np.shape(args[2])[1], args[6]
    args[2] = np.asarray(args[2]) * math.sqrt(d_model / h) / math.sqrt(d_model)
    return _ref("solutions.multihead:multihead_attention")(*args, **kwargs)


def _split_no_swap(x, num_heads):
    x = np.asarray(x)
    n, d = x.shape[-2:]
    return x.reshape(x.shape[:-2] + (num_heads, n, d // num_heads))


def _merge_no_swap(x):
    x = np.asarray(x)
    h, n, d_h = x.shape[-3:]
    return x.reshape(x.shape[:-3] + (n, h * d_h))


def _param_cases(rng):
    return [
        Case("d_model=512, 8 heads", (512, 8, True)),
        Case("no biases", (64, 4, False)),
        Case("one head", (10, 1, True)),
        Case("random size", (int(rng.integers(2, 9)) * 6, 6, bool(rng.integers(2)))),
    ]


def _params_without_output(d_model, num_heads, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def _params_per_head_full(d_model, num_heads, bias=True):
    return num_heads * (3 * d_model * d_model + (3 * d_model if bias else 0)) + d_model * d_model + (d_model if bias else 0)


# ----------------------------------------------------------------------------------------
# the registry


def _check(name, assignment, reference, make_cases, **kw) -> Check:
    return Check(name=name, assignment=assignment, reference=reference, make_cases=make_cases, **kw)


_NAN_EMPTY = ("a row (or sequence) with nothing allowed must give zeros, not 0/0: guard the "
              "division, e.g. divide by np.where(total > 0, total, 1)")
_MAX_SHIFT = "subtract the row maximum before exp (max-shifted softmax): exp of a large score overflows"

_CHECKS = [
    # ---- ch1_pooling
    _check("average_pool", "ch1_pooling", "solutions.pooling:average_pool", _pool_cases,
           hints={"nan": _NAN_EMPTY, "shape": "pool over the sequence axis -2: (..., n, d) -> (..., d)"},
           mistakes=(Mistake("you divided by n, not by the number of items present: count the True entries of the mask",
                             lambda x, mask: _ref("solutions.pooling:average_pool")(_mask_items(x, mask))),)),
    _check("max_pool", "ch1_pooling", "solutions.pooling:max_pool", _pool_cases,
           hints={"nan": _NAN_EMPTY, "inf": "a sequence with no item present pools to zeros, not -inf",
                  "shape": "pool over the sequence axis -2: (..., n, d) -> (..., d)"},
           mistakes=(Mistake("masked items were set to 0, which wins the max when every value is negative: "
                             "set them to -inf instead (and give an empty sequence zeros)",
                             lambda x, mask: _ref("solutions.pooling:max_pool")(_mask_items(x, mask))),)),
    _check("nadaraya_watson_weights", "ch1_pooling", "solutions.pooling:nadaraya_watson_weights", _nw_weights_cases,
           outputs=("weights",),
           hints={"nan": _MAX_SHIFT + " (a query far from every key underflows to 0/0)",
                  "transposed": "queries are rows: weights[i, j] is how much query i looks at key j",
                  "values": "each row is softmax_j(-|x_i - x_j|^2 / (2 h^2))"},
           mistakes=(Mistake("the Gaussian kernel divides the squared distance by 2 h^2, not h^2",
                             lambda xq, xk, h: _ref("solutions.pooling:nadaraya_watson_weights")(xq, xk, h / math.sqrt(2))),)),
    _check("nadaraya_watson", "ch1_pooling", "solutions.pooling:nadaraya_watson", _nw_cases,
           outputs=("predictions",),
           hints={"nan": _MAX_SHIFT + " (a query far from every key underflows to 0/0)",
                  "shape": "predictions have the trailing shape of y_values: (n_q,) or (n_q, d_y)"},
           mistakes=(Mistake("the Gaussian kernel divides the squared distance by 2 h^2, not h^2",
                             lambda xq, xk, y, h: _ref("solutions.pooling:nadaraya_watson")(xq, xk, y, h / math.sqrt(2))),)),
    _check("loo_loss_and_grad", "ch1_pooling", "solutions.pooling:loo_loss_and_grad", _loo_cases,
           outputs=("loss", "dloss_dbandwidth"),
           hints={"arity": "return a pair (loss, dloss_dbandwidth)",
                  "loss.values": "leave point i out of its own prediction (mask the diagonal) and average the squared errors",
                  "dloss_dbandwidth.values": "compare your derivative with a finite difference (L(h + e) - L(h - e)) / (2 e)"},
           mistakes=(Mistake("your gradient has the wrong sign: it is dL/dh, the direction that increases the loss",
                             lambda x, y, h: (lambda lg: (lg[0], -lg[1]))(_ref("solutions.pooling:loo_loss_and_grad")(x, y, h))),)),
    # ---- ch2_soft_hard
    _check("masked_softmax", "ch2_soft_hard", "solutions.soft_hard:masked_softmax", _softmax_cases,
           outputs=("weights",),
           hints={"nan": _NAN_EMPTY + "; and " + _MAX_SHIFT, "inf": _MAX_SHIFT},
           mistakes=(Mistake("masked keys must get weight exactly 0: give them a score of -inf (not 0) before the softmax",
                             _score_zero_mask),)),
    _check("scaled_dot_score", "ch2_soft_hard", "solutions.soft_hard:scaled_dot_score", _qk_cases,
           outputs=("scores",),
           hints={"transposed": "did you transpose K? scores = Q K^T / sqrt(d): queries are rows, keys are columns"},
           mistakes=(Mistake("you forgot to divide by sqrt(d)", lambda q, k: _ref("solutions.soft_hard:dot_score")(q, k)),
                     Mistake("divide by sqrt(d), not by d",
                             lambda q, k: _ref("solutions.soft_hard:scaled_dot_score")(np.asarray(q) / math.sqrt(np.shape(q)[-1]), k)))),
    _check("additive_score", "ch2_soft_hard", "solutions.soft_hard:additive_score", _additive_cases,
           outputs=("scores",),
           hints={"transposed": "scores[..., i, j] scores query i against key j: shape (..., n_q, n_k)",
                  "values": "s_ij = v . tanh(q_i W_q + k_j W_k): broadcast (n_q, 1, d_att) + (1, n_k, d_att)"}),
    _check("attention", "ch2_soft_hard", "solutions.soft_hard:attention", _attention_cases,
           outputs=("output", "weights"),
           hints={"arity": "return a pair (output, weights)", "nan": _NAN_EMPTY,
                  "weights.transposed": "did you transpose K? weights are (..., n_q, n_k): one row per query",
                  "output.shape": "output = weights @ v has shape (..., n_q, d_v)"},
           mistakes=(Mistake("you forgot to divide the scores by sqrt(d_k)",
                             _unscaled("solutions.soft_hard:attention", 0, lambda a: np.shape(a[0])[-1])),)),
    _check("hard_attention", "ch2_soft_hard", "solutions.soft_hard:hard_attention", _hard_cases,
           outputs=("output", "index"), atol=0.0,
           hints={"arity": "return a pair (output, index)",
                  "index.values": "with rng=None take the argmax; with an rng draw u = rng.random(weights.shape[:-1]) "
                                  "once and pick the first j whose cumulative weight exceeds u * (row sum); "
                                  "a row of zeros gets index -1",
                  "output.values": "output[..., i, :] = values[..., index_i, :] (zeros where index is -1)"}),
    _check("reinforce_grad", "ch2_soft_hard", "solutions.soft_hard:reinforce_grad", _reinforce_cases,
           outputs=("grad",),
           mistakes=(Mistake("subtract the baseline: the estimate is (R - b) (onehot(z) - softmax(s))",
                             lambda s, z, r, b=0.0: _ref("solutions.soft_hard:reinforce_grad")(s, z, r, 0.0)),
                     Mistake("the sign is flipped: d log p_z / d s = onehot(z) - softmax(s)",
                             lambda s, z, r, b=0.0: -_ref("solutions.soft_hard:reinforce_grad")(s, z, r, b)))),
    # ---- ch3_seq2seq
    _check("bahdanau_context", "ch3_seq2seq", "solutions.seq2seq:bahdanau_context", _bahdanau_cases,
           outputs=("context", "weights"),
           hints={"arity": "return a pair (context, weights)", "nan": _NAN_EMPTY,
                  "context.shape": "the context is one weighted sum of encoder states per sentence: (B, d_enc)",
                  "weights.transposed": "weights are (B, n_in): one row per sentence in the batch",
                  "weights.values": "e_tj = v . tanh(s_prev W_s + h_j W_h), then a masked softmax over j"}),
    _check("luong_context", "ch3_seq2seq", "solutions.seq2seq:luong_context", _luong_cases,
           outputs=("h_tilde", "weights"),
           hints={"arity": "return a pair (h_tilde, weights)", "nan": _NAN_EMPTY,
                  "weights.values": "dot: h_t . h_j; general: (h_t W_a) . h_j; no scaling in Luong's scores"},
           mistakes=(Mistake("concatenate the context first: h~ = tanh([c_t; h_t] W_c)", _luong_swapped),)),
    _check("luong_concat_context", "ch3_seq2seq", "solutions.seq2seq:luong_context", _luong_concat_cases,
           outputs=("h_tilde", "weights"), answer=_luong_concat_answer,
           hints={"arity": "return a pair (h_tilde, weights)", "nan": _NAN_EMPTY,
                  "weights.values": "score_j = v . tanh([h_t; h_j] W_a): the first d rows of W_a act on h_t"}),
    _check("translate", "ch3_seq2seq", "solutions.seq2seq:make_translation_data", _translate_cases,
           outputs=("predictions",), answer=_translate_answer,
           comparator={"kind": "accuracy", "threshold": TRANSLATE_THRESHOLD, "pad": 0, "eos": 2},
           hints={"values": "train longer (more steps) or check your greedy loop: feed back the argmax, "
                            "start from <bos>, stop at <eos>"}),
    # ---- ch4_self_attention
    _check("self_attention", "ch4_self_attention", "solutions.self_attention:self_attention", _self_attention_cases,
           outputs=("output", "weights"),
           hints={"arity": "return a pair (output, weights)", "nan": _NAN_EMPTY,
                  "output.shape": "output = weights @ (x @ w_v) has shape (..., n, d_v)"},
           mistakes=(Mistake("you forgot to divide the scores by sqrt(d_k)",
                             _unscaled("solutions.self_attention:self_attention", 1, lambda a: np.shape(a[1])[1])),
                     Mistake("scale by sqrt(d_k), the width of the queries and keys, not sqrt(d_in)",
                             lambda x, wq, wk, wv, mask=None: _ref("solutions.self_attention:self_attention")(
                                 x, np.asarray(wq) * math.sqrt(np.shape(wq)[1] / np.shape(wq)[0]), wk, wv, mask)),
                     Mistake("your weights are transposed: row i must hold query i's weights over the keys j",
                             _transposed_self_attention))),
    _check("causal_mask", "ch4_self_attention", "solutions.self_attention:causal_mask", _causal_cases,
           outputs=("mask",),
           hints={"dtype": "build it with a comparison (e.g. j <= i), which gives a boolean array"},
           mistakes=(Mistake("query i may attend to keys j <= i (the past), so the mask is lower-triangular, not upper",
                             lambda n: _ref("solutions.self_attention:causal_mask")(n).T),
                     Mistake("every position may attend to itself: the condition is j <= i, not j < i",
                             lambda n: np.tril(np.ones((n, n), dtype=bool), -1)))),
    _check("local_mask", "ch4_self_attention", "solutions.self_attention:local_mask", _local_cases,
           outputs=("mask",),
           hints={"dtype": "build it with a comparison (|i - j| <= window), which gives a boolean array"},
           mistakes=(Mistake("the band includes |i - j| = window: use <=, not <",
                             lambda n, w: np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) < w),)),
    _check("sinusoidal_positions", "ch4_self_attention", "solutions.self_attention:sinusoidal_positions", _positions_cases,
           outputs=("positions",),
           hints={"transposed": "rows are positions: the encoding has shape (n, d)",
                  "values": "PE[t, 2i] = sin(t w_i), PE[t, 2i+1] = cos(t w_i), w_i = 10000^(-2i/d); an odd d drops the last cosine"},
           mistakes=(Mistake("sin goes in the even columns (2i) and cos in the odd ones (2i+1)", _swap_sin_cos),)),
    _check("online_softmax_attention", "ch4_self_attention", "solutions.self_attention:online_softmax_attention", _online_cases,
           outputs=("output",), rtol=1e-6, atol=1e-9,
           hints={"nan": "a row whose keys are all masked so far has running max -inf: shift by 0 there "
                         "(never compute -inf - (-inf)), and give a fully masked row a zero output",
                  "values": "when a block raises the running max from m to m', rescale the running sum and "
                            "output by exp(m - m') before adding the block; divide by the sum once, at the end"},
           mistakes=(Mistake("you forgot to divide the scores by sqrt(d_k)",
                             _unscaled("solutions.self_attention:online_softmax_attention", 0, lambda a: np.shape(a[0])[-1])),)),
    # ---- ch5_multihead
    _check("split_heads", "ch5_multihead", "solutions.multihead:split_heads", _split_cases,
           outputs=("heads",),
           hints={"shape": "(..., n, d) -> (..., h, n, d / h)"},
           mistakes=(Mistake("a plain reshape to (..., h, n, d/h) mixes items across heads: reshape to "
                             "(..., n, h, d/h) first, then swap axes -3 and -2", _split_no_swap),)),
    _check("merge_heads", "ch5_multihead", "solutions.multihead:merge_heads", _merge_cases,
           outputs=("merged",),
           hints={"shape": "(..., h, n, d_h) -> (..., n, h * d_h)"},
           mistakes=(Mistake("a plain reshape mixes items across heads: swap axes -3 and -2 to (..., n, h, d_h) "
                             "first, then reshape", _merge_no_swap),)),
    _check("multihead_attention", "ch5_multihead", "solutions.multihead:multihead_attention", _mha_cases,
           outputs=("output", "weights"),
           hints={"arity": "return a pair (output, weights)", "nan": _NAN_EMPTY,
                  "weights.shape": "weights are (..., h, n_q, n_kv): one (n_q, n_kv) matrix per head",
                  "weights.transposed": "did you transpose K, or forget to move the head axis before the sequence axis?"},
           mistakes=(Mistake("scale each head's scores by sqrt(d_head) = sqrt(d_model / h), not sqrt(d_model)",
                             _mha_wrong_scale),)),
    _check("multihead_param_count", "ch5_multihead", "solutions.multihead:multihead_param_count", _param_cases,
           outputs=("count",), rtol=0.0, atol=0.0,
           mistakes=(Mistake("count the output projection W_o (d_model x d_model, plus its bias) too",
                             _params_without_output),
                     Mistake("each head projects to d_model / h features, not d_model: the h heads together "
                             "have the parameters of one full-width head", _params_per_head_full))),
]


REGISTRY: dict[str, Check] = {c.name: c for c in _CHECKS}


# ----------------------------------------------------------------------------------------
# the contract


def _get(name: str) -> Check:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown check {name!r}; known checks: {', '.join(sorted(REGISTRY))}") from None


def checks_for(assignment: str) -> list[Check]:
    """The checks of one assignment, in registry order."""
    if assignment not in ASSIGNMENTS:
        raise ValueError(f"unknown assignment {assignment!r}; expected one of {ASSIGNMENTS}")
    return [c for c in REGISTRY.values() if c.assignment == assignment]


def public_cases(name: str) -> list[Case]:
    """The public cases of a check (fixed seed): what ships in public_cases.npz."""
    check = _get(name)
    return list(check.make_cases(np.random.default_rng([PUBLIC_SEED, zlib.crc32(name.encode())])))


def hidden_cases(name: str, seed: int) -> list[Case]:
    """Fresh cases from the grading seed (a different stream from the public one)."""
    check = _get(name)
    return list(check.make_cases(np.random.default_rng([int(seed), zlib.crc32(name.encode()), 1])))


def expected(name: str, case: Case) -> tuple[np.ndarray, ...]:
    """The reference answer for a case, normalised to a tuple of arrays."""
    check = _get(name)
    if check.answer is not None:
        return normalise(check.answer(case))
    return normalise(_call(check.reference_fn(), case))


def spec(name: str) -> dict:
    """The public (JSON-able) part of a check: what compare_outputs needs; it ships."""
    check = _get(name)
    return {"outputs": list(check.outputs), "rtol": check.rtol, "atol": check.atol,
            "hints": dict(check.hints), "comparator": dict(check.comparator)}


def mistake_outputs(name: str, case: Case) -> list[tuple[str, tuple[np.ndarray, ...]]]:
    """(hint, normalised outputs) of every known mistake that applies to this case."""
    out = []
    for mistake in _get(name).mistakes:
        try:
            out.append((mistake.hint, normalise(_call(mistake.outputs, case))))
        except (ValueError, TypeError, IndexError):
            continue  # this mistake has no meaning for this case (e.g. window - 1 < 0)
    return out


def compare(name: str, case: Case, expected, got, *, hidden: bool) -> Verdict:
    """Compare a student's normalised result with the expected one for one case."""
    exp = normalise(expected) if not (isinstance(expected, tuple) and all(isinstance(e, np.ndarray) for e in expected)) else expected
    got = normalise(got) if not (isinstance(got, tuple) and all(isinstance(g, np.ndarray) for g in got)) else got
    passed, message = student_check.compare_outputs(spec(name), case.name, exp, got, hidden=hidden,
                                                    mistakes=mistake_outputs(name, case))
    return Verdict(passed, message)


class HiddenCheckFailed(AssertionError):
    """A hidden check failed; Jupyter shows only the message, never the hidden test code."""

    def _render_traceback_(self):
        return ["HiddenCheckFailed: " + line if i == 0 else line for i, line in enumerate(str(self).splitlines())]


def _student_error(err: BaseException) -> str:
    """The exception's type only: its text could echo hidden inputs back into feedback."""
    if isinstance(err, NotImplementedError):
        return "is not implemented yet"
    return f"raised {type(err).__name__} (run the public check to see where)"


def run_hidden(name: str, fn, seed: int | None = None) -> None:
    """Run ``fn`` on the hidden cases inside the student's kernel (stock nbgrader).

    seed None -> the ``ATTENTION_HIDDEN_SEED`` environment variable, else a fixed default, so
    a regrade gives the same verdict. Raises ``AssertionError`` ("hidden check failed on 3
    of 10 cases: ...") whose message names cases, shapes and errors, never hidden values.
    """
    __tracebackhide__ = True
    if seed is None:
        seed = int(os.environ.get(HIDDEN_SEED_ENV, DEFAULT_HIDDEN_SEED))
    cases = hidden_cases(name, seed)
    failures = []
    for case in cases:
        exp = expected(name, case)
        try:
            value = _call(fn, case)
        except Exception as err:  # the student's error: reported, never re-raised
            failures.append(f"case '{case.name}': {name} {_student_error(err)}")
            continue
        try:
            got = normalise(value)
        except ValueError as err:
            failures.append(f"case '{case.name}': {err}")
            continue
        verdict = compare(name, case, exp, got, hidden=True)
        if not verdict.passed:
            failures.append(verdict.message)
    if failures:
        raise HiddenCheckFailed(f"{name}: hidden check failed on {len(failures)} of {len(cases)} cases:\n"
                                + "\n".join("  - " + f for f in failures)) from None
