"""Nothing lost: SIGKILL the grader mid-batch, rerun, and it finishes the rest, keeps what was
done and regrades nothing (unless --force)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import grading, sandbox  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
A = "ch1_pooling"


@pytest.fixture
def course(tmp_path, bubblewrap):
    return corpus.released_course(tmp_path / "course")


def test_sigkill_mid_batch_then_rerun_finishes_the_rest_and_regrades_nothing(course):
    expected = corpus.slow_batch(course, 6)
    first = corpus.start_grader(course, "--workers", "1")
    deadline = time.monotonic() + 300
    while (
        len(corpus.autograded_mtimes(course)) < 2
        and first.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = corpus.autograded_mtimes(course)
    assert 2 <= len(done_before) < 6, "the kill should land mid-batch"
    # the killed grader's sandboxes die with it (bubblewrap --die-with-parent)
    for _ in range(100):
        if not sandbox.stray_processes():
            break
        time.sleep(0.1)
    assert sandbox.stray_processes() == []

    second = corpus.start_grader(course, "--workers", "2")
    out, err = second.communicate(timeout=400)
    assert second.returncode == 0, err
    assert f"graded {6 - len(done_before)}, skipped {len(done_before)}" in out
    after = corpus.autograded_mtimes(course)
    assert {s: after[s] for s in done_before} == done_before  # kept, not regraded
    assert corpus.gradebook_scores(course) == expected


def test_force_regrades_and_student_option_limits_the_batch(course):
    expected = corpus.slow_batch(course, 2)
    out = grading.grade_assignment(course, A, workers=1, students=["s01"])
    assert [r.student for r in out.graded] == ["s01"]
    calls = []  # the progress callback: one call per submission graded or skipped
    out = grading.grade_assignment(course, A, workers=1, progress=lambda *a: calls.append(a))
    assert [r.student for r in out.graded] == ["s00"] and calls == [("s00", 1, 1)]
    calls.clear()
    out = grading.grade_assignment(
        course, A, workers=2, force=True, progress=lambda *a: calls.append(a)
    )
    assert sorted(r.student for r in out.graded) == ["s00", "s01"]
    assert sorted(calls) == [("s00", 1, 2), ("s01", 2, 2)] or sorted(calls) == [
        ("s00", 2, 2),
        ("s01", 1, 2),
    ]
    assert corpus.gradebook_scores(course) == expected


def test_a_submitted_folder_that_is_not_a_plain_student_id_is_skipped_with_a_reason(course):
    """A folder put under submitted/ by hand (not by `collect`, which refuses such ids) never
    reaches nbgrader's gradebook or its pages; the rest of the batch is graded."""
    expected = corpus.slow_batch(course, 1)
    hostile = '<img src=x onerror="alert(1)">'
    corpus.write_submission(course, A, hostile, corpus.solved(course, A))
    out = grading.grade_assignment(course, A, workers=1)
    assert [r.student for r in out.graded] == ["s00"]
    assert out.skipped == [(ascii(hostile), "not a plain student id (letters, digits, ._@+-)")]
    assert corpus.gradebook_scores(course) == expected
