"""Checks grade the method, not only the outcome. In the sandbox the grader really uses: a ch3 translate that reads the digit
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

from autograder import grading  # noqa: E402
from autograder.checking import checks, judging  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SEEDS = range(1, 21)


def _failures(name: str, fn, seed: int, only: str = "") -> list[str]:
    """The failure messages of ``fn`` on the hidden cases of check ``name`` for ``seed``
    (only the cases whose name contains ``only``), judged as the grader judges them."""
    cases = [c for c in checks.hidden_cases(name, seed) if only in c.name]
    assert cases, f"no hidden case of {name} is named like {only!r}"
    prepared = [checks.prepare(name, case, hidden=True) for case in cases]
    verdicts, _notes = judging.run_cases(checks.spec(name), fn, prepared)
    return [v.message for v in verdicts if not v.passed]


def _assert_caught(name: str, wrong, only: str = "") -> None:
    """``wrong`` fails on every seed of SEEDS while the reference passes."""
    reference = checks.REGISTRY[name].reference
    with np.errstate(all="ignore"):
        for seed in SEEDS:
            assert not _failures(name, reference, seed, only), (name, seed)
            assert _failures(name, wrong, seed, only), f"{name}: a wrong method passes seed {seed}"


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
    results = {r.student: r for r in out.graded}
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


def _backward(q, k, v, out, logsumexp, d_out, block_size=128, mask=None, weights="exp(S - L)"):
    """The backward pass with the weights recomputed as exp(S - L) (right) or exp(S), the
    unnormalised weights then divided by their row sum: the latter overflows on large scores."""
    q, k, v, out, d_out = (np.asarray(a, float) for a in (q, k, v, out, d_out))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    if weights == "exp(S - L)":
        p = np.exp(s - np.where(np.isfinite(logsumexp), logsumexp, 0.0)[..., None])
    else:
        e = np.exp(s)
        total = e.sum(-1, keepdims=True)
        p = e / np.where(total > 0, total, 1)
    ds = p * (d_out @ np.swapaxes(v, -1, -2) - (d_out * out).sum(-1, keepdims=True))
    c = 1 / np.sqrt(q.shape[-1])
    return ds @ k * c, np.swapaxes(ds, -1, -2) @ q * c, np.swapaxes(p, -1, -2) @ d_out


def test_a_backward_that_recomputes_the_weights_without_the_logsumexp_overflows():
    """Scores of about +-1600 (the "large scores" case): exp(S) normalised by its own row sum
    overflows, exp(S - L) with the forward's logsumexp does not."""
    name, only = "online_softmax_backward", "large scores"
    for seed in SEEDS:
        assert not _failures(name, _backward, seed, only), seed
    _assert_caught(name, lambda *a, **kw: _backward(*a, **kw, weights="exp(S)"), only)


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


def _unshifted_alibi(q, k, v, slopes, mask=None):
    """ALiBi whose softmax forgets the max shift."""
    n = np.shape(q)[-2]
    bias = -np.asarray(slopes)[:, None, None] * np.abs(np.arange(n)[:, None] - np.arange(n))
    s = np.asarray(q, float) @ np.swapaxes(k, -1, -2) / np.sqrt(np.shape(q)[-1]) + bias
    e = np.exp(s) if mask is None else np.where(mask, np.exp(s), 0.0)
    total = e.sum(-1, keepdims=True)
    w = e / np.where(total > 0, total, 1)
    return w @ np.asarray(v, float), w


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
        ("alibi_attention", _unshifted_alibi),
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
