"""Checks grade the method, not only the outcome, in the sandbox the grader really uses:
an online_softmax_attention that builds the full score matrix runs out of the chapter's
memory on the big case, while the block-wise solution passes it."""

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
