"""Written answers that wait for hand grading are marked wherever a score is shown (README,
"For instructors"): the summary table `make grade` prints, the CSV of
`python -m autograder export` (nbgrader's columns, then ``needs_manual_grade`` and
``to_grade_by_hand``) and the report. A perfect ch1_pooling submission has 12 automatic
points of 14: before the instructor grades the 2-point written answer it reads
"12/14 + 2 to grade by hand", after it 14/14 with no mark. The manual score is written
through nbgrader's gradebook API by the formgrader's own rule (its ``GradeHandler.put``);
the submissions are recorded with `autograder.course.gradebook.Recorder`, as `grade_assignment`
does; no sandbox runs."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli  # noqa: E402
from autograder.checking import notebook as nbparse  # noqa: E402
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.checking.results import BatchResult, SubmissionResult, TaskResult  # noqa: E402
from autograder.course import report  # noqa: E402
from autograder.course.gradebook import Recorder  # noqa: E402
from autograder.course.hand_grading import HandGrading, hand_grading_of  # noqa: E402
from autograder.course.report import load_records  # noqa: E402
from autograder.grading.verdict import not_graded  # noqa: E402
from autograder.student.contract import Verdict  # noqa: E402

A = "ch1_pooling"
WRITTEN = "written-bandwidth"  # 2 points, graded by hand
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def recorder(tmp_path, monkeypatch):
    # nbgrader export runs in a subprocess: it must import this checkout's plug-in
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    course = corpus.released_course(tmp_path / "course", (A,))
    return Recorder(course, load_assignment(course, A), not_graded)


def _record(recorder: Recorder, student: str, sha256: str, notebook=None) -> SubmissionResult:
    """Record a submission that passed every automatic test, as `grade_assignment` does."""
    spec = recorder.spec
    result = SubmissionResult(student, A, seed=1, max_score=spec.max_score, sha256=sha256)
    result.tasks = [
        TaskResult(t.grade_id, t.points, "passed", [Verdict(c, "a case", False, True)])
        for t in spec.tests
        for c, _f in t.checks[:1]
    ]
    result.score = result.points
    notebook = notebook or corpus.solved(recorder.course, A)
    result.unanswered = nbparse.unanswered_manual_cells(spec, notebook)  # as grading does
    recorder.record(result, nbformat.writes(notebook).encode())
    return result


def _formgrader_put(recorder: Recorder, student: str, grade_id: str, manual_score) -> None:
    """What the formgrader's ``PUT /formgrader/api/grade/<id>`` does with a typed score
    (nbgrader/server_extensions/formgrader/apihandlers.py, ``GradeHandler.put``)."""
    with recorder.gradebook() as gb:
        grade = gb.find_grade(grade_id, A, A, student)
        grade.manual_score = manual_score
        grade.extra_credit = None
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        gb.db.commit()


def _row(table: str, student: str) -> list[str]:
    """The table's row of ``student``, cut at its columns (two spaces or more apart)."""
    import re

    lines = table.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["student", "score", "max", "by hand", "reason"]
    return next(re.split(r"\s{2,}", line) for line in lines[2:] if line.startswith(student))


def _export(course: Path, tmp_path: Path, capsys) -> dict[str, dict]:
    target = tmp_path / "grades.csv"
    assert cli.main(["--course", str(course), "export", A, "--csv", str(target)]) == 0
    with open(target, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == [
        # nbgrader's CsvExportPlugin's columns, in its order, then the two of this course
        "assignment",
        "duedate",
        "timestamp",
        "student_id",
        "last_name",
        "first_name",
        "email",
        "raw_score",
        "late_submission_penalty",
        "score",
        "max_score",
        "needs_manual_grade",
        "to_grade_by_hand",
    ]
    assert all(len(row) == len(rows[0]) for row in rows)
    return {row[3]: dict(zip(rows[0], row)) for row in rows[1:]}


def _report_notes(course: Path) -> dict[str, tuple[float, list[str]]]:
    return {r.student: (r.score, r.notes) for r in load_records(course, A)}


def test_a_written_answer_not_yet_graded_is_marked_then_the_mark_goes(recorder, tmp_path, capsys):
    course = recorder.course
    result = _record(recorder, "alice", "a" * 64)

    # before hand grading: 12 of 14, and every place says 2 points wait for a human
    assert (result.score, result.max_score) == (12.0, 14.0)
    assert hand_grading_of(course, A) == {"alice": HandGrading(to_grade=2.0, to_review=0)}
    table = cli.summary_table([result], waiting=hand_grading_of(course, A))
    assert _row(table, "alice") == ["alice", "12", "14", "+ 2 to grade by hand", "-"]
    row = _export(course, tmp_path, capsys)["alice"]
    assert (row["score"], row["max_score"]) == ("12.0", "14.0")
    assert (row["needs_manual_grade"], row["to_grade_by_hand"]) == ("true", "2.0")
    assert "1 wait for hand grading" in capsys.readouterr().out
    score, notes = _report_notes(course)["alice"]
    assert score == 12.0
    assert notes == ["waits for hand grading in the formgrader: + 2 to grade by hand"]
    page = report.page(course, A)
    assert "+ 2 to grade by hand" in page  # counted as waiting, not listed to look at
    assert cli.main(["--course", str(course), "feedback", A]) == 0
    warning = "warning: 1 submission(s) of ch1_pooling wait for hand grading (alice)"
    assert warning in capsys.readouterr().err

    # the instructor types 2 in the formgrader: 14 of 14, no mark anywhere
    _formgrader_put(recorder, "alice", WRITTEN, 2.0)
    assert hand_grading_of(course, A) == {"alice": HandGrading()}
    assert not hand_grading_of(course, A)["alice"]
    recorder.read_totals(result)
    table = cli.summary_table([result], waiting=hand_grading_of(course, A))
    assert _row(table, "alice") == ["alice", "14", "14", "-", "-"]
    row = _export(course, tmp_path, capsys)["alice"]
    assert (row["score"], row["needs_manual_grade"], row["to_grade_by_hand"]) == (
        "14.0",
        "false",
        "0.0",
    )
    assert "wait for hand grading" not in capsys.readouterr().out
    assert _report_notes(course)["alice"] == (14.0, [])
    assert "to grade by hand" not in report.page(course, A)
    assert cli.main(["--course", str(course), "feedback", A]) == 0
    assert "wait for hand grading" not in capsys.readouterr().err
    page = (course / "feedback" / "alice" / A / f"{A}.html").read_text()
    assert f"{A} (Score: 14.0 / 14.0)" in page

    # clearing the score in the formgrader puts the mark back
    _formgrader_put(recorder, "alice", WRITTEN, None)
    assert hand_grading_of(course, A)["alice"] == HandGrading(to_grade=2.0)


def test_a_resubmission_over_a_manual_score_asks_for_review_and_an_empty_answer_for_nothing(
    recorder, tmp_path, capsys
):
    _record(recorder, "alice", "a" * 64)
    _formgrader_put(recorder, "alice", WRITTEN, 1.5)
    _record(recorder, "alice", "b" * 64)  # she submitted again: nbgrader asks for a second look
    # bob left the written answer as released: nbgrader scores it 0 and asks for nothing
    _record(recorder, "bob", "c" * 64, corpus.blank(recorder.course, A))
    # carol's written answer waits; her roster name holds a comma and a quote
    with recorder.gradebook() as gb:
        gb.update_or_create_student("carol", last_name='Smith, "Jr."', first_name="Carol")
    carol = _record(recorder, "carol", "d" * 64)

    waiting = hand_grading_of(recorder.course, A)
    assert waiting == {
        "alice": HandGrading(to_grade=0.0, to_review=1),
        "bob": HandGrading(),
        "carol": HandGrading(to_grade=2.0),
    }
    assert waiting["alice"].describe() == "1 cell to review by hand"
    rows = _export(recorder.course, tmp_path, capsys)
    assert [rows[s]["needs_manual_grade"] for s in ("alice", "bob", "carol")] == [
        "true",
        "false",
        "true",
    ]
    assert [rows[s]["to_grade_by_hand"] for s in ("alice", "bob", "carol")] == [
        "0.0",
        "0.0",
        "2.0",
    ]
    assert rows["alice"]["score"] == "13.5"  # the kept manual score counts, to be confirmed
    assert rows["carol"]["last_name"] == 'Smith, "Jr."'  # one column, as the roster has it
    assert _report_notes(recorder.course)["alice"][1] == [
        "waits for hand grading in the formgrader: 1 cell to review by hand"
    ]
    assert b"\r\n" not in (tmp_path / "grades.csv").read_bytes()  # nbgrader's line ends
    table = cli.summary_table([carol], waiting=waiting)
    assert _row(table, "carol")[3] == "+ 2 to grade by hand"


def test_the_grade_command_prints_the_mark_under_its_table(recorder, monkeypatch, capsys):
    """`cmd_grade` reads the gradebook after grading: the table and the line under it."""
    result = _record(recorder, "alice", "a" * 64)
    outcome = BatchResult([result], [], seed=1, startup_seconds=0.0, grading_seconds=0.0)
    monkeypatch.setattr("autograder.grading.grade_assignment", lambda *a, **k: outcome)
    argv = ["--course", str(recorder.course), "grade", A, "--quiet", "--no-sandbox"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert _row(out, "alice") == ["alice", "12", "14", "+ 2 to grade by hand", "-"]
    assert "1 submission(s) wait for hand grading in the formgrader" in out
    assert os.environ["PYTHONPATH"] == str(REPO)
