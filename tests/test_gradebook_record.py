"""What the grader records in nbgrader's gradebook, as the formgrader shows it (README,
"For instructors"): manual grades survive a regrade, the maximum is the formgrader's, students
have a name. Through `autograder.course.gradebook.Recorder` and nbgrader's own `Gradebook` API, on a
released copy of ch1_pooling (12 automatic points in four test cells, and a written answer,
``written-bandwidth``, worth 2 points graded by hand); no sandbox runs."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli  # noqa: E402
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.checking.results import SubmissionResult, TaskResult  # noqa: E402
from autograder.course.gradebook import Recorder  # noqa: E402
from autograder.grading.verdict import not_graded  # noqa: E402
from autograder.student.contract import Verdict  # noqa: E402

A = "ch1_pooling"
WRITTEN = "written-bandwidth"


@pytest.fixture
def course(tmp_path):
    return corpus.released_course(tmp_path / "course", (A,))


@pytest.fixture
def recorder(course):
    return Recorder(course, load_assignment(course, A), not_graded)


def _record(recorder: Recorder, student: str, sha256: str) -> SubmissionResult:
    """Record a submission that passed every automatic test, as `grade_assignment` does."""
    spec = recorder.spec
    result = SubmissionResult(student, A, seed=1, max_score=spec.max_score, sha256=sha256)
    result.tasks = [
        TaskResult(t.grade_id, t.points, "passed", [Verdict(c, "a case", False, True)])
        for t in spec.tests
        for c, _f in t.checks[:1]
    ]
    assert len(result.tasks) == len(spec.tests)  # every test cell calls a check
    result.score = result.points
    notebook = nbformat.writes(corpus.solved(recorder.course, A)).encode()
    recorder.record(result, notebook)
    return result


def _grade(gb, student: str, grade_id: str):
    return gb.find_grade(grade_id, A, A, student)


def _grade_by_hand(recorder: Recorder, student: str, scores: dict[str, float]) -> None:
    """What the formgrader does when the instructor types a score."""
    with recorder.gradebook() as gb:
        for grade_id, score in scores.items():
            grade = _grade(gb, student, grade_id)
            grade.manual_score = score
            grade.needs_manual_grade = False
        gb.db.commit()


def test_regrading_the_same_submission_keeps_manual_grades_and_asks_for_no_review(recorder):
    _record(recorder, "alice", "a" * 64)
    with recorder.gradebook() as gb:
        assert _grade(gb, "alice", WRITTEN).needs_manual_grade  # the written answer waits
    _grade_by_hand(recorder, "alice", {WRITTEN: 1.5, "test-loo": 3.0})  # 4 -> 3 by hand

    result = _record(recorder, "alice", "a" * 64)  # grade --force: the same bytes

    with recorder.gradebook() as gb:
        written, loo = _grade(gb, "alice", WRITTEN), _grade(gb, "alice", "test-loo")
        assert (written.manual_score, loo.manual_score) == (1.5, 3.0)
        assert not written.needs_manual_grade and not loo.needs_manual_grade
        assert gb.find_submission(A, "alice").score == 12 - 4 + 3 + 1.5
    assert result.score == 12.5  # the summary table shows the formgrader's score


def test_a_new_submission_keeps_manual_grades_but_asks_for_review(recorder):
    _record(recorder, "alice", "a" * 64)
    _grade_by_hand(recorder, "alice", {WRITTEN: 2.0})

    _record(recorder, "alice", "b" * 64)  # the student submitted again

    with recorder.gradebook() as gb:
        written = _grade(gb, "alice", WRITTEN)
        assert written.manual_score == 2.0 and written.needs_manual_grade
        assert not _grade(gb, "alice", "test-loo").needs_manual_grade  # no manual score there


def test_summary_max_score_is_the_formgraders_with_the_written_answer(recorder, course):
    result = _record(recorder, "alice", "a" * 64)

    source = nbformat.read(course / "source" / A / f"{A}.ipynb", as_version=4)
    every_graded_cell = sum(
        float(c.metadata["nbgrader"]["points"])
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    )
    with recorder.gradebook() as gb:
        formgrader_max = gb.find_submission(A, "alice").max_score
    assert recorder.spec.max_score == 12.0  # the automatic points alone
    assert result.max_score == formgrader_max == every_graded_cell == 14.0
    table = cli.summary_table([result]).splitlines()
    assert table[2].split()[:3] == ["alice", "12", "14"]


def test_students_get_their_id_as_name_and_keep_a_name_the_instructor_set(recorder):
    with recorder.gradebook() as gb:
        gb.update_or_create_student("bob", first_name="Robert", last_name="Builder")
    _record(recorder, "alice", "a" * 64)
    _record(recorder, "bob", "b" * 64)
    with recorder.gradebook() as gb:
        alice, bob = gb.find_student("alice"), gb.find_student("bob")
        assert (alice.last_name, alice.first_name) == ("alice", "")
        assert (bob.last_name, bob.first_name) == ("Builder", "Robert")


def test_a_failed_recording_leaves_the_kept_gradebook_usable(recorder, monkeypatch):
    """The recordings share one Gradebook (`Recorder._recording_gradebook`): a recording that
    fails half-way is rolled back, and the next one writes as if it were the first."""
    from autograder.course import gradebook

    def broken(grade, regraded):
        raise RuntimeError("the disk is full")

    with monkeypatch.context() as patch:
        patch.setattr(gradebook, "needs_manual_grade", broken)
        with pytest.raises(RuntimeError, match="the disk is full"):
            _record(recorder, "alice", "a" * 64)
    with recorder.gradebook() as gb:  # no score of the failed recording was committed
        assert _grade(gb, "alice", "test-loo").auto_score is None
    result = _record(recorder, "bob", "b" * 64)
    assert (result.score, result.max_score) == (12.0, 14.0)
    assert _record(recorder, "alice", "a" * 64).score == 12.0
    recorder.close()
    with recorder.gradebook() as gb:
        assert gb.find_submission(A, "bob").score == gb.find_submission(A, "alice").score == 12


def test_grading_an_assignment_the_gradebook_lacks_records_nothing(course, tmp_path, capsys):
    """The gradebook is checked while the first jobs run (`grading._StartUp`): when it lacks
    the assignment, the call still fails with the instructor's next step, and no submission
    is recorded, in the gradebook or as an autograded notebook."""
    for student in ("alice", "bob", "carol"):
        corpus.write_submission(course, A, student, corpus.solved(course, A))
    recorder = Recorder(course, load_assignment(course, A), not_graded)
    with recorder.gradebook() as gb:
        gb.remove_assignment(A)
        students_before = sorted(s.id for s in gb.students)

    from autograder.grading import grade_assignment

    with pytest.raises(ValueError, match=r"'ch1_pooling' is not in .*run `make release`"):
        grade_assignment(course, A, workers=1, sandboxed=False)
    assert cli.main(["--course", str(course), "grade", A, "--no-sandbox", "--quiet"]) == 2
    assert "error: assignment 'ch1_pooling' is not in" in capsys.readouterr().err
    assert not list((course / "autograded").glob(f"*/{A}/*.ipynb"))
    with recorder.gradebook() as gb:
        assert sorted(s.id for s in gb.students) == students_before  # no one added
