"""Checks grade the method, not only the outcome, in the sandbox the grader really uses:
an online_softmax_attention that builds the full score matrix runs out of the chapter's
memory on the big case, while the block-wise solution passes it; a ch3 translate that reads
the digit words by rule (or decodes with its own trained model whatever model it is given)
keeps the accuracy points and loses the given-model ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import grading, sandbox  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
A = "ch4_self_attention"

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


def test_an_online_softmax_that_builds_the_full_matrix_loses_the_task(tmp_path):
    if sandbox.find_bwrap() is None:
        pytest.fail("bubblewrap is required: apt-get install bubblewrap")
    course = corpus.released_course(tmp_path / "course", (A,))
    good = corpus.solved(course, A)
    corpus.write_submission(course, A, "block-wise", good)
    corpus.write_submission(
        course, A, "full-matrix", corpus.append_to_cell(good, "online-softmax", FULL_MATRIX)
    )
    out = grading.grade_assignment(course, A, workers=1, progress=False)
    results = {r.student: r for r in out["graded"]}
    assert (results["block-wise"].score, results["block-wise"].reasons) == (13.0, [])
    full = results["full-matrix"]
    assert (full.score, full.reasons) == (9.0, ["memory"]), full.notes
    online = next(t for t in full.tasks if t.grade_id == "test-online-softmax")
    assert "does not fit in memory" in online.message and "raised MemoryError" in online.message


# ch3_seq2seq: test-translate (3, accuracy of the trained model), test-translate-given-model
# (2, the greedy decoding of random models the grader supplies); 15 auto-graded points.
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


def test_a_translate_that_ignores_the_given_model_loses_the_given_model_points(tmp_path):
    if sandbox.find_bwrap() is None:
        pytest.fail("bubblewrap is required: apt-get install bubblewrap")
    a = "ch3_seq2seq"
    course = corpus.released_course(tmp_path / "course", (a,))
    good = corpus.solved(course, a)
    corpus.write_submission(course, a, "greedy", good)
    for student, extra in (("rule", RULE), ("own-model", OWN_MODEL)):
        corpus.write_submission(
            course, a, student, corpus.append_to_cell(good, "train-translate", extra)
        )
    out = grading.grade_assignment(course, a, workers=1, progress=False)
    results = {r.student: r for r in out["graded"]}
    assert (results["greedy"].score, results["greedy"].reasons) == (15.0, [])
    for student in ("rule", "own-model"):
        result = results[student]
        assert (result.score, result.reasons) == (13.0, []), result.notes
        tasks = {t.grade_id: t for t in result.tasks}
        assert tasks["test-translate"].passed
        given = tasks["test-translate-given-model"]
        assert (given.points, given.passed) == (0.0, False)
        assert "token sequences differ from the expected ones" in given.message
        assert "translate must decode with the model it is given" in given.message
