"""Three things a class of 40 met (issue 46, items 10 and 11), graded for real:

- a notebook big for its saved outputs (11.6 MiB of plots and prints, small code) gets its
  full score: the outputs are skipped as the file is read, and the cap counts what is graded;
- a student's ``--max-notebook-mb`` (given with ``--student``) survives the class's next
  ``--force`` run, which gives no such option (`autograder.grading.overrides`);
- a 0-byte notebook and another assignment's notebook leave nothing "to grade by hand": there
  is no written answer to grade, in the gradebook, the record, the feedback or the report.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli, grading  # noqa: E402
from autograder.course import report  # noqa: E402
from autograder.course.hand_grading import HandGrading, hand_grading_of  # noqa: E402
from autograder.course.report import load_records  # noqa: E402
from autograder.grading import overrides  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

A = "ch1_pooling"
WRITTEN = "written-bandwidth"  # ch1's written answer: 2 points, graded by hand
LIMITS = {"cell_seconds": 15, "task_seconds": 15, "submission_seconds": 60}
TIMEOUTS = ["--cell-timeout", "15", "--task-timeout", "15", "--budget", "60"]
REPO = Path(__file__).resolve().parents[1]


def _with_plots(notebook):
    """The solved notebook with 11.6 MiB of saved figures and prints in four cells of its
    own (each under the per-cell cap of 4,000,000 characters: dropped silently)."""
    figure = {"image/png": "iVBORw0KGgo" * 277_000, "text/plain": ["<Figure>"]}
    printed = [f"loss {1 / (i + 1):.6f} at step {i} of the training loop\n" for i in range(50_000)]
    cells = [
        nbformat.v4.new_code_cell(
            "plot(losses)", outputs=[nbformat.v4.new_output("display_data", data=figure)]
        )
        for _ in range(3)
    ]
    cells.append(
        nbformat.v4.new_code_cell(
            "print(losses)", outputs=[nbformat.v4.new_output("stream", name="stdout", text=printed)]
        )
    )
    for cell in cells:
        del cell["id"]  # the released notebook is nbformat 4.4: cells without ids
    notebook.cells.extend(cells)
    return notebook


def _wide(notebook):
    """The solved notebook with 145 markdown cells of 60,000 characters of metadata each (every
    intake cap holds): 8.7 MB of what is graded, over the default cap of 8 MiB."""
    for i in range(145):
        cell = nbformat.v4.new_markdown_cell(f"note {i}")
        cell.metadata["scratch"] = "m" * 59_990
        del cell["id"]  # the released notebook is nbformat 4.4: cells without ids
        notebook.cells.append(cell)
    return notebook


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("reruns") / "course")
    plots = corpus.write_submission(course, A, "plots", _with_plots(corpus.solved(course, A)))
    assert 11.5 * (1 << 20) < plots.stat().st_size < 11.7 * (1 << 20)
    wide = corpus.write_submission(course, A, "wide", _wide(corpus.solved(course, A)))
    assert wide.stat().st_size > 8 << 20
    corpus.write_submission(course, A, "empty", corpus.solved(course, A)).write_bytes(b"")
    # another assignment's notebook (ch2's, as its source has it), handed in as ch1's
    other = nbformat.read(REPO / "autograder/source/ch2_soft_hard/ch2_soft_hard.ipynb", 4)
    corpus.write_submission(course, A, "other", other)

    first = grading.grade_assignment(course, A, workers=2, limits=LIMITS)
    first_scores = {r.student: (r.score, r.reasons, r.notes) for r in first.graded}
    waiting_first = hand_grading_of(course, A)
    records = {r.student: r for r in load_records(course, A)}
    page = report.page(course, A)  # as `autograder report` writes it, hand grading read
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        # nbgrader makes no feedback page of another assignment's notebook ("other"): 1
        cli.main(["--course", str(course), "feedback", A])
    feedback_warning = err.getvalue()

    # the instructor raises wide's cap for wide alone, then reruns the class with --force,
    # as `make grade A=... ARGS=...` runs them
    grade = ["--course", str(course), "grade", A, "--force", "--workers", "2", "--quiet"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main([*grade, *TIMEOUTS, "--student", "wide", "--max-notebook-mb", "16"]) == 0
    alone = {r.student: r.score for r in load_records(course, A)}
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main([*grade, *TIMEOUTS])
    return {
        "course": course,
        "first": first_scores,
        "waiting": waiting_first,
        "records": records,
        "page": page,
        "feedback": feedback_warning,
        "alone": alone,
        "class": (code, out.getvalue()),
        "after": {r.student: r.score for r in load_records(course, A)},
    }


def test_a_notebook_big_for_its_outputs_gets_its_full_score(runs):
    score, reasons, notes = runs["first"]["plots"]
    assert (score, reasons, notes) == (12, [], [])  # 12 automatic points of 14, no note
    assert runs["waiting"]["plots"] == HandGrading(to_grade=2.0)  # its written answer waits
    graded = runs["course"] / "autograded" / "plots" / A / f"{A}.ipynb"
    assert graded.stat().st_size < 200_000


def test_a_notebook_whose_graded_part_is_over_the_cap_is_refused_with_its_reason(runs):
    score, reasons, notes = runs["first"]["wide"]
    assert (score, reasons) == (0, ["invalid notebook"])
    assert notes == [
        "the notebook's code and text (its saved outputs left out) are over the cap of 8.0 MiB"
    ]


def test_a_students_raised_cap_survives_the_class_rerun_with_force(runs):
    assert runs["alone"]["wide"] == 12
    code, printed = runs["class"]
    assert code == 0
    assert runs["after"]["wide"] == 12  # the class run kept wide's 16 MiB
    assert runs["after"]["plots"] == 12
    assert overrides.recorded(runs["course"], A)["wide"]["notebook_bytes"] == 16 << 20
    assert "plots" not in overrides.recorded(runs["course"], A)
    assert (
        "graded with the limits given for them in an earlier run: wide (--max-notebook-mb 16)"
        in printed
    )


@pytest.mark.parametrize("student", ["empty", "other"])
def test_no_answer_cell_leaves_nothing_to_grade_by_hand(runs, student):
    score, reasons, _notes = runs["first"][student]
    assert score == 0
    if student == "empty":
        assert reasons == ["invalid notebook"]
    assert runs["waiting"][student] == HandGrading()  # the gradebook: nothing to grade
    record = runs["records"][student]
    assert WRITTEN in record.unanswered  # the record
    assert not any("by hand" in note for note in record.notes)  # what the report reads
    rows = [row for row in runs["page"].split("<tr>") if f"<td>{student}</td>" in row]
    assert rows and not any("by hand" in row for row in rows)  # the report's rows
    # what waits for the formgrader is one line, and only plots waits
    assert "not listed above: 1 submission, + 2 to grade by hand in all" in runs["page"]
    assert "wait for hand grading (plots)" in runs["feedback"]  # the feedback: plots alone
    graded = runs["course"] / "autograded" / student / A / f"{A}.ipynb"
    assert json.loads(graded.read_text())["metadata"]["autograder"]["unanswered"] == [WRITTEN]
