"""Checks grade the method, not only the outcome. In the sandbox the grader really uses: an
online_softmax_attention that builds the full score matrix runs out of the chapter's memory on
the big case, while the block-wise solution passes it; a ch3 translate that reads the digit
words by rule (or decodes with its own trained model whatever model it is given) keeps the
accuracy points and loses the given-model ones. Driven directly (no sandbox, fast): a lazy or
wrong method fails a check's hidden cases on every seed tried, and the reference passes them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import checks, contract, grading  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
A = "ch4_self_attention"
SEEDS = range(1, 21)


def _failures(name: str, fn, seed: int, only: str = "") -> list[str]:
    """The failure messages of ``fn`` on the hidden cases of check ``name`` for ``seed``
    (only the cases whose name contains ``only``), judged as the grader judges them."""
    cases = [c for c in checks.hidden_cases(name, seed) if only in c.name]
    assert cases, f"no hidden case of {name} is named like {only!r}"
    prepared = [checks.prepare(name, case, hidden=True) for case in cases]
    verdicts, _notes = contract.run_cases(checks.spec(name), fn, prepared)
    return [v.message for v in verdicts if not v.passed]


def _assert_caught(name: str, wrong, only: str = "") -> None:
    """``wrong`` fails on every seed of SEEDS while the reference passes."""
    reference = checks.REGISTRY[name].reference
    with np.errstate(all="ignore"):
        for seed in SEEDS:
            assert not _failures(name, reference, seed, only), (name, seed)
            assert _failures(name, wrong, seed, only), f"{name}: a wrong method passes seed {seed}"


FULL_MATRIX = """
def online_softmax_attention(q, k, v, block_size=128, mask=None):  # the outcome, not the method
    scores = np.asarray(q, dtype=float) @ np.asarray(k, dtype=float).T / np.sqrt(np.shape(q)[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.where(np.isfinite(scores), np.exp(scores - np.where(np.isfinite(top), top, 0)), 0)
    total = e.sum(-1, keepdims=True)
    return (e / np.where(total > 0, total, 1)) @ np.asarray(v, dtype=float)
"""


def test_an_online_softmax_that_builds_the_full_matrix_loses_the_task(tmp_path, bubblewrap):
    course = corpus.released_course(tmp_path / "course", (A,))
    good = corpus.solved(course, A)
    corpus.write_submission(course, A, "block-wise", good)
    corpus.write_submission(
        course, A, "full-matrix", corpus.append_to_cell(good, "online-softmax", FULL_MATRIX)
    )
    out = grading.grade_assignment(course, A, workers=1)
    results = {r.student: r for r in out["graded"]}
    assert (results["block-wise"].score, results["block-wise"].reasons) == (13.0, [])
    full = results["full-matrix"]
    assert (full.score, full.reasons) == (9.0, ["memory"]), full.notes
    online = next(t for t in full.tasks if t.grade_id == "test-online-softmax")
    assert "does not fit in memory" in online.message and "raised MemoryError" in online.message


# ch3_seq2seq: test-translate (3, accuracy of the trained model), test-translate-given-model
# (2, the greedy decoding of random models the grader supplies); 18 auto-graded points.
RULE = """
def translate(src, max_len=None, model=None):  # reads the words by rule, never runs a model
    words = "zero one two three four five six seven eight nine".split()
    rows = []
    for row in np.asarray(src):
        digits, repeat = [], 1
        for word in (SOURCE_VOCAB[i] for i in row if i != PAD):
            if word in ("double", "triple"):
                repeat = 2 if word == "double" else 3
                continue
            digit = "0" if word == "oh" else str(words.index(word))
            digits += [TARGET_VOCAB.index(digit)] * repeat
            repeat = 1
        rows.append(digits + [EOS])
    out = np.full((len(rows), max(map(len, rows))), PAD, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
"""
OWN_MODEL = """
decode_own_model = translate


def translate(src, max_len=None, model=None):  # ignores the model it is given
    return decode_own_model(src, max_len)
"""


def test_a_translate_that_ignores_the_given_model_loses_the_given_model_points(
    tmp_path, bubblewrap
):
    a = "ch3_seq2seq"
    course = corpus.released_course(tmp_path / "course", (a,))
    good = corpus.solved(course, a)
    corpus.write_submission(course, a, "greedy", good)
    for student, extra in (("rule", RULE), ("own-model", OWN_MODEL)):
        corpus.write_submission(
            course, a, student, corpus.append_to_cell(good, "train-translate", extra)
        )
    out = grading.grade_assignment(course, a, workers=1)
    results = {r.student: r for r in out["graded"]}
    assert (results["greedy"].score, results["greedy"].reasons) == (18.0, [])
    for student in ("rule", "own-model"):
        result = results[student]
        assert (result.score, result.reasons) == (16.0, []), result.notes
        tasks = {t.grade_id: t for t in result.tasks}
        assert tasks["test-translate"].passed
        given = tasks["test-translate-given-model"]
        assert (given.points, given.passed) == (0.0, False)
        assert "token sequences differ from the expected ones" in given.message
        assert "translate must decode with the model it is given" in given.message


def _online(q, k, v, block_size=128, mask=None, shift="running max"):
    """Block-wise attention whose exponent is shifted by the running max (right), by the first
    block's max only, or not at all ("none"): the last two overflow on large scores."""
    q = np.asarray(q, float) / np.sqrt(np.shape(q)[-1])
    k, v = np.asarray(k, float), np.asarray(v, float)
    m = np.full(q.shape[:-1] + (1,), -np.inf)
    total, out = np.zeros_like(m), np.zeros(q.shape[:-1] + v.shape[-1:])
    for start in range(0, k.shape[-2], block_size):
        keys = slice(start, start + block_size)
        s = q @ np.swapaxes(k[..., keys, :], -1, -2)
        if mask is not None:
            s = np.where(np.broadcast_to(mask, q.shape[:-1] + k.shape[-2:1])[..., keys], s, -np.inf)
        m_new = np.maximum(m, s.max(-1, keepdims=True))
        if shift == "running max" or start == 0:
            base = np.where(np.isfinite(m_new), m_new, 0.0)
        if shift == "none":
            base = np.zeros_like(m_new)
        rescale = np.exp(np.where(np.isfinite(m), m, base) - base) if shift == "running max" else 1
        e = np.exp(s - base)
        total, out, m = (
            total * rescale + e.sum(-1, keepdims=True),
            out * rescale + e @ v[..., keys, :],
            m_new,
        )
    return out / np.where(total > 0, total, 1)


def test_an_online_softmax_without_the_running_max_overflows_on_large_scores():
    """Scores of about +-1600 (the "large scores" case): exp without the max shift, or shifted
    by the first block's max only, overflows; the running max passes (worst error over 200
    seeds: 1.3e-6 of the tolerance)."""
    name, only = "online_softmax_attention", "large scores"
    for seed in SEEDS:
        assert not _failures(name, _online, seed, only), seed
    for shift in ("none", "first block"):
        _assert_caught(name, lambda *a, shift=shift, **kw: _online(*a, shift=shift, **kw), only)


def _unshifted(q, k, v, mask=None):
    """Scaled dot-product attention whose softmax forgets the max shift: exp(s) / sum exp(s)."""
    s = np.asarray(q, float) @ np.swapaxes(k, -1, -2) / np.sqrt(np.shape(q)[-1])
    e = np.exp(s) if mask is None else np.where(mask, np.exp(s), 0.0)
    total = e.sum(-1, keepdims=True)
    w = e / np.where(total > 0, total, 1)
    return w @ np.asarray(v, float), w


def _unshifted_backward(q, k, v, grad_out, mask=None):
    """attention_backward whose forward softmax forgets the max shift."""
    _out, p = _unshifted(q, k, v, mask)
    scale = 1 / np.sqrt(np.shape(q)[-1])
    dp = np.asarray(grad_out, float) @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True)) * scale
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ grad_out


def _unshifted_heads(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads=1, mask=None):
    from solutions.multihead import merge_heads, split_heads

    q, k, v = (
        split_heads(np.asarray(x) @ w, num_heads) for x, w in ((x_q, w_q), (x_kv, w_k), (x_kv, w_v))
    )
    out, w = _unshifted(q, k, v, None if mask is None else np.expand_dims(mask, -3))
    return merge_heads(out) @ w_o, w


def _unshifted_gated_heads(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    from solutions.multihead import merge_heads, split_heads

    q, k, v = (
        split_heads(np.asarray(x) @ w, num_heads) for x, w in ((x_q, w_q), (x_kv, w_k), (x_kv, w_v))
    )
    out, _w = _unshifted(q, k, v, None if mask is None else np.expand_dims(mask, -3))
    return merge_heads(np.asarray(gates)[..., None, None] * out) @ w_o


@pytest.mark.parametrize(
    ("name", "unshifted"),
    [
        ("attention_backward", _unshifted_backward),
        (
            "self_attention",
            lambda x, w_q, w_k, w_v, mask=None: _unshifted(x @ w_q, x @ w_k, x @ w_v, mask),
        ),
        ("gated_multihead_attention", _unshifted_gated_heads),
        ("cross_attention", _unshifted_heads),
    ],
)
def test_attention_without_the_max_shift_overflows_on_large_scores(name, unshifted):
    """Every attention check has a "large scores" case (scores of about +-10^4): a softmax
    without the max shift overflows there on 200 of 200 seeds, while an honest shifted
    re-implementation stays within 1.2e-10 of the tolerance."""
    _assert_caught(name, unshifted, "large scores")


def _beam_of_constant_width(log_probs, bos, eos, beam_size, max_len, alpha=1.0):
    """A beam search that always keeps beam_size live beams (finished ones do not shrink it),
    stops once beam_size are finished and returns the best beam_size of them."""
    vocab, live, logp, done = len(log_probs), [[bos]], np.zeros(1), []
    for step in range(1, max_len + 1):
        if len(done) >= beam_size or not live:
            break
        total = (logp[:, None] + np.asarray(log_probs)[[b[-1] for b in live]]).ravel()
        best = np.argsort(-total, kind="stable")[:beam_size]
        grown = [(live[c // vocab] + [int(c % vocab)], total[c]) for c in best]
        done += [
            (b[1:], t / (len(b) - 1) ** alpha) for b, t in grown if b[-1] == eos or step == max_len
        ]
        live = [b for b, _t in grown if b[-1] != eos and step < max_len]
        logp = np.array([t for b, t in grown if b[-1] != eos and step < max_len])
    done = sorted(done, key=lambda d: -d[1])[:beam_size]
    tokens = np.full((len(done), max_len), -1)
    for row, (seq, _score) in zip(tokens, done):
        row[: len(seq)] = seq
    return tokens, np.array([score for _seq, score in done])


def test_a_beam_search_that_keeps_finished_beams_in_the_beam_fails():
    """The fixed case "a finished beam leaves the beam" gives another second beam when two live
    beams keep growing after EOS has finished one (without it, this search passed 2 of 40 seeds)."""
    _assert_caught("beam_search_table", _beam_of_constant_width)
    for seed in SEEDS:
        assert _failures("beam_search_table", _beam_of_constant_width, seed, "leaves the beam")
