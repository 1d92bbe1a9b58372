"""Which submissions a grading call sends out (`grading._Triage`): each notebook read once, and
what changed between the first look and a job's lock read again, never taken on trust."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import grading, sandbox  # noqa: E402
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.course.gradebook import Recorder  # noqa: E402
from autograder.grading.verdict import not_graded  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
A = corpus.A
CAP = 8 << 20


@pytest.fixture
def course(tmp_path, bubblewrap):
    return corpus.released_course(tmp_path / "course")


@pytest.fixture
def reads(monkeypatch):
    """{student: how many times the triage read and hashed their notebook}."""
    counted: Counter = Counter()
    make_job = grading.make_job

    def counting(course, assignment, student, *limits):
        counted[student] += 1
        return make_job(course, assignment, student, *limits)

    monkeypatch.setattr(grading, "make_job", counting)
    return counted


def _triage(course: Path) -> grading._Triage:
    recorder = Recorder(course, load_assignment(course, A), not_graded)
    return grading._Triage(recorder, sandbox.Limits(notebook_bytes=CAP), force=False)


def test_a_batch_and_its_rerun_read_each_notebook_once(course, reads):
    good = corpus.solved(course, A)
    wrong = corpus.append_to_cell(good, "average-max-pool", corpus.WRONG_EPANECHNIKOV)
    for student, notebook in (("s00", good), ("s01", wrong), ("s02", good)):
        corpus.write_submission(course, A, student, notebook)
    out = grading.grade_assignment(course, A, workers=1)
    assert sorted(r.student for r in out.graded) == ["s00", "s01", "s02"]
    assert reads == {"s00": 1, "s01": 1, "s02": 1}  # never graded: read when its job goes out
    reads.clear()
    again = grading.grade_assignment(course, A, workers=1)
    assert again.graded == []
    assert sorted(again.skipped) == [(s, "already graded") for s in ("s00", "s01", "s02")]
    assert reads == {"s00": 1, "s01": 1, "s02": 1}  # graded: read at the first look only
    assert corpus.gradebook_scores(course) == {"s00": 12.0, "s01": 9.0, "s02": 12.0}


def test_a_submission_another_grader_records_after_the_first_look_is_skipped(course):
    corpus.write_submission(course, A, "s00", corpus.solved(course, A))
    triage = _triage(course)
    assert triage.first_look(["s00"]) == (["s00"], [])  # nothing recorded yet
    grading.grade_assignment(course, A, workers=1)  # another grader, meanwhile
    assert triage.take("s00") == "already graded"


def test_bytes_changed_after_the_first_look_are_judged_again_under_the_lock(course):
    good = corpus.solved(course, A)
    corpus.write_submission(course, A, "s00", good)
    grading.grade_assignment(course, A, workers=1)
    wrong = corpus.append_to_cell(good, "average-max-pool", corpus.WRONG_EPANECHNIKOV)
    corpus.write_submission(course, A, "s00", wrong)  # a resubmission
    triage = _triage(course)
    assert triage.first_look(["s00"]) == (["s00"], [])
    corpus.write_submission(course, A, "s00", good)  # back to the graded bytes
    assert triage.take("s00") == "already graded"
    corpus.write_submission(course, A, "s00", wrong)
    triage = _triage(course)
    assert triage.first_look(["s00"]) == (["s00"], [])
    job, lock = triage.take("s00")  # unchanged since the first look: its job, locked
    try:
        assert job.notebook == (course / "submitted" / "s00" / A / f"{A}.ipynb").read_bytes()
        assert _triage(course).take("s00") == "being graded by another grader"
    finally:
        lock.release()
