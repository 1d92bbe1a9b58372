"""What still waits for a human: written answers nbgrader's formgrader has not graded yet.

`HandGrading` is read from the gradebook as the formgrader leaves it, and marked wherever a
score is shown: the summary table (`hand_grading_of`), the CSV export
(`HandGradingCsvExport`, an nbgrader export plug-in) and the report (`submission_states`), so
a student whose written answers are not graded yet never reads as one who lost points.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from autograder.checking import nbgrader_api


@dataclass(frozen=True)
class HandGrading:
    """What one submission still waits for in the formgrader. ``to_grade``: the points of the
    graded cells nobody has scored (a written answer: no check scores it, and no instructor
    has yet), which the score leaves out; ``to_review``: cells whose score stands but which
    nbgrader lists as "needs manual grading" (a new submission over a manual score)."""

    to_grade: float = 0.0
    to_review: int = 0

    def __bool__(self) -> bool:
        return bool(self.to_grade or self.to_review)

    def describe(self) -> str:
        """ "+ 2 to grade by hand", "1 cell to review by hand", both, or "" when none."""
        parts = []
        if self.to_grade:
            parts.append(f"+ {self.to_grade:g} to grade by hand")
        if self.to_review:
            cells = "cell" if self.to_review == 1 else "cells"
            parts.append(f"{self.to_review} {cells} to review by hand")
        return ", ".join(parts)


def hand_grading(submission) -> HandGrading:
    """The hand grading one submission (nbgrader's ``SubmittedAssignment``) waits for, by the
    rules the formgrader applies when a score is typed (a grade with neither score still
    needs one; with a score it needs none, unless nbgrader asks for a second look)."""
    to_grade, to_review = 0.0, 0
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            if not grade.needs_manual_grade:
                continue
            if grade.manual_score is None and grade.auto_score is None:
                to_grade += float(grade.max_score)
            else:
                to_review += 1
    return HandGrading(to_grade, to_review)


def submission_states(course: Path, assignment: str) -> dict[str, tuple[float, float, HandGrading]]:
    """Each submitted student's (score, maximum, `HandGrading`) of an assignment, from the
    course's gradebook as it is now, manual scores included (none without a gradebook)."""
    db = Path(course) / "gradebook.db"
    if not db.is_file():
        return {}
    with nbgrader_api.api().Gradebook(f"sqlite:///{db}") as gb:
        return {
            s.student.id: (float(s.score), float(s.max_score), hand_grading(s))
            for s in gb.assignment_submissions(assignment)
        }


def hand_grading_of(course: Path, assignment: str) -> dict[str, HandGrading]:
    """Each submitted student's `HandGrading` of an assignment, as the gradebook has it now."""
    return {student: state[2] for student, state in submission_states(course, assignment).items()}


def __getattr__(name: str):
    """``HandGradingCsvExport``, made on first use: it subclasses nbgrader's plug-in, whose
    import the grader and its recording process never need (PEP 562)."""
    if name != "HandGradingCsvExport":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from nbgrader.plugins import CsvExportPlugin

    plugin = type(name, (_HandGradingCsv, CsvExportPlugin), {"__module__": __name__})
    globals()[name] = plugin
    return plugin


class _HandGradingCsv:
    """(``HandGradingCsvExport`` is this on nbgrader's ``CsvExportPlugin``.) ``nbgrader
    export``'s CSV (nbgrader's export plug-in API: ``nbgrader export
    --exporter=autograder.course.hand_grading.HandGradingCsvExport``), the same columns in the same
    order, so whatever reads nbgrader's CSV by column name reads this one, plus two at the
    end: ``needs_manual_grade`` (true while the formgrader lists the submission as waiting
    for a human) and ``to_grade_by_hand`` (the points no one has scored yet, which ``score``
    leaves out). Written with the csv module: a name holding a comma or a quote (a roster's
    "Smith, Jr.") stays in its column, where nbgrader's own plug-in would shift the row."""

    COLUMNS = (
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
    )

    def export(self, gradebook) -> None:
        with open(self.to or "grades.csv", "w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")  # nbgrader's line ends
            writer.writerow(self.COLUMNS)
            writer.writerows(self.rows(gradebook))

    def rows(self, gradebook):
        """One row per assignment and student (as nbgrader's plug-in: a student who submitted
        nothing scores 0), in the order of ``COLUMNS``."""
        from nbgrader.api import MissingEntry

        assignments, students = set(map(str, self.assignment)), set(map(str, self.student))
        for assignment in gradebook.assignments:
            if assignments and assignment.name not in assignments:
                continue
            for student in gradebook.students:
                if students and student.id not in students:
                    continue
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:
                    timestamp, raw, penalty, waiting = None, 0.0, 0.0, HandGrading()
                else:
                    timestamp, raw = submission.timestamp, submission.score
                    penalty, waiting = submission.late_submission_penalty, hand_grading(submission)
                values = (
                    assignment.name,
                    assignment.duedate,
                    timestamp,
                    student.id,
                    student.last_name,
                    student.first_name,
                    student.email,
                    raw,
                    penalty,
                    max(0.0, raw - (penalty or 0.0)),
                    assignment.max_score,
                    str(bool(waiting)).lower(),
                    waiting.to_grade,
                )
                yield ["" if v is None else str(v) for v in values]
