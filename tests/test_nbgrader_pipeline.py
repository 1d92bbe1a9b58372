"""Stock nbgrader on a temporary copy of the course: release, autograde, feedback, export.

One module-scoped fixture does the expensive part once: copy the course (config + source
notebooks) to a temporary folder, release all five assignments there with
``autograder.course.release``, submit three students per assignment and run ONE real
``nbgrader autograde`` over all of them, then ``nbgrader generate_feedback`` and
``nbgrader export``. The tests read the gradebook, the feedback and the CSV.

Students:
- ``solver``: the source notebook with the instructor's solutions -> every auto-graded point;
- ``blank``: the untouched release -> 0 on every auto-graded task (and autograde completes);
- ``partial``: the release with the first task's solution pasted in and the second task
  answered wrongly -> exactly the first task's points; in ch1_pooling its written answer
  holds HTML that would run in the instructor's browser (`HOSTILE_ANSWER`), which the course's
  sanitising preprocessor (``autograder/course/nbgrader_sanitise.py``) must remove in nbgrader's own
  autograde and feedback.

nbgrader runs with this checkout on ``PYTHONPATH``: the course's config imports ``autograder``.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.checking import checks
from autograder.course import release

pytestmark = pytest.mark.slow

COURSE = Path(release.__file__).resolve().parent.parent
COURSE_NAME = "attention-derived"
STUDENTS = ("solver", "blank", "partial")
HOSTILE_ANSWER = (
    "The weights go to the nearest key.\n\n"
    '<script>window.__pwned = "script"</script>\n\n'
    "<img src=x onerror=\"window.__pwned = 'onerror'\">\n\n"
    "[proof](javascript:window.__pwned='link')"
)
SOLUTION_REGION = re.compile(
    r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION\n?", re.S | re.M
)


def _nbgrader(course: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        PYTHONPATH=str(COURSE.parent),
    )
    return subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _tasks(nb) -> list[tuple[int | None, int]]:
    """(index of the solution cell it tests, or None when another test cell of the same
    solution came first, e.g. ch3's given-model check after its accuracy check; points) for
    every auto-graded test cell."""
    tasks, pending = [], None
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            pending = i
        elif cell.cell_type == "code" and meta.get("grade"):
            tasks.append((pending, int(meta["points"])))
            pending = None
    return tasks


def _wrong(source: str) -> str:
    """A solution cell whose every solution region returns a wrong answer of the wrong shape."""
    return SOLUTION_REGION.sub(lambda m: f"{m.group(1)}return np.zeros(1)\n", source)


def _submit(course: Path, assignment: str) -> dict[str, float]:
    """Create the three submissions; return the auto-graded score each one should get."""
    src_dir, rel_dir = course / "source" / assignment, course / "release" / assignment
    source_nb = nbformat.read(src_dir / f"{assignment}.ipynb", as_version=4)
    tasks = _tasks(source_nb)
    total = sum(points for _, points in tasks)
    for student in STUDENTS:
        target = course / "submitted" / student / assignment
        shutil.copytree(src_dir if student == "solver" else rel_dir, target)
        (target / "timestamp.txt").write_text("2026-12-01 12:00:00.000000 UTC")
    partial_path = course / "submitted" / "partial" / assignment / f"{assignment}.ipynb"
    partial = nbformat.read(partial_path, as_version=4)
    (first, first_points), (second, _) = tasks[0], tasks[1]
    partial.cells[first].source = source_nb.cells[first].source  # task 1 right
    partial.cells[second].source = _wrong(source_nb.cells[second].source)  # task 2 wrong
    if assignment == "ch1_pooling":
        for cell in partial.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "written-bandwidth":
                cell.source = HOSTILE_ANSWER
    nbformat.write(partial, partial_path)
    return {"solver": total, "blank": 0.0, "partial": float(first_points)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copy(COURSE / "nbgrader_config.py", course)
    shutil.copytree(
        COURSE / "source",
        course / "source",
        ignore=shutil.ignore_patterns(
            "public_cases.npz", "attention_check.py", "*.npz", "__pycache__"
        ),
    )
    release.release(course, log=lambda *_: None)
    expected = {a: _submit(course, a) for a in checks.ASSIGNMENTS}
    auto = _nbgrader(course, "autograde", "*", "--force")
    feedback = _nbgrader(course, "generate_feedback", "*", "--force")
    export = _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    return {
        "course": course,
        "expected": expected,
        "autograde": auto,
        "feedback": feedback,
        "export": export,
    }


def _scores(course: Path) -> dict[tuple[str, str], tuple[float, float, list]]:
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook("sqlite:///" + str(course / "gradebook.db"), COURSE_NAME) as gb:
        for assignment in checks.ASSIGNMENTS:
            for student in STUDENTS:
                sub = gb.find_submission(assignment, student)
                grades = [
                    (g.name, g.auto_score, g.max_score)
                    for nb in sub.notebooks
                    for g in nb.grades
                    if g.cell.cell_type == "code"
                ]
                out[assignment, student] = (
                    sum(g[1] or 0.0 for g in grades),
                    sum(g[2] for g in grades),
                    grades,
                )
    return out


def test_autograde_completes_for_every_submission(graded):
    result = graded["autograde"]
    assert result.returncode == 0, result.stderr[-3000:]
    for assignment in checks.ASSIGNMENTS:
        for student in STUDENTS:
            path = graded["course"] / "autograded" / student / assignment / f"{assignment}.ipynb"
            assert path.exists(), f"no autograded notebook for {student}/{assignment}"


def test_source_notebooks_earn_full_marks_blank_release_earns_zero_partial_earns_one_task(graded):
    scores = _scores(graded["course"])
    for assignment, expected in graded["expected"].items():
        for student, want in expected.items():
            got, max_auto, grades = scores[assignment, student]
            assert got == pytest.approx(want), f"{assignment}/{student}: {got} != {want}: {grades}"
        solver_total, max_auto, _ = scores[assignment, "solver"]
        assert solver_total == max_auto and 10 <= max_auto <= 20
        assert all(auto == 0 for _, auto, _ in scores[assignment, "blank"][2])


def test_blank_release_shows_teaching_messages_not_tracebacks(graded):
    path = graded["course"] / "autograded" / "blank" / "ch2_soft_hard" / "ch2_soft_hard.ipynb"
    nb = nbformat.read(path, as_version=4)
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.output_type == "error"
    ]
    assert errors, "the blank release should fail its test cells"
    text = "\n".join("\n".join(o.traceback) for o in errors)
    assert "is not implemented yet" in text
    assert "student_check.py" not in text and "attention_check.py" not in text


def test_feedback_html_holds_scores_and_messages_but_no_hidden_tests(graded):
    assert graded["feedback"].returncode == 0, graded["feedback"].stderr[-3000:]
    course = graded["course"]
    for assignment in checks.ASSIGNMENTS:
        for student in STUDENTS:
            html = (course / "feedback" / student / assignment / f"{assignment}.html").read_text()
            assert "BEGIN HIDDEN TESTS" not in html
        for student, total in graded["expected"][assignment].items():
            html = (course / "feedback" / student / assignment / f"{assignment}.html").read_text()
            assert re.search(rf"Score:\s*{total:g}(\.0)?\s*/", html), (
                f"{assignment}/{student}: {total} not in feedback"
            )
    partial = (course / "feedback" / "partial" / "ch1_pooling" / "ch1_pooling.html").read_text()
    assert (
        "expected jacobian of shape" in partial
    )  # the wrong task's teaching message reaches the student


def test_stock_autograde_and_feedback_keep_no_live_html_from_a_student(graded):
    course = graded["course"]
    autograded = course / "autograded" / "partial" / "ch1_pooling" / "ch1_pooling.ipynb"
    notebook = nbformat.read(autograded, as_version=4)
    written = [
        c.source
        for c in notebook.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "written-bandwidth"
    ]
    assert len(written) == 1 and "The weights go to the nearest key." in written[0]
    feedback = (course / "feedback" / "partial" / "ch1_pooling" / "ch1_pooling.html").read_text()
    assert "The weights go to the nearest key." in feedback
    for live in ("__pwned", "onerror", "javascript:", "<script"):
        assert live not in written[0], f"{live!r} is left in the autograded notebook"
    # every payload's code sets window.__pwned; the page's own CSS and scripts never name it
    assert "__pwned" not in feedback, "a student's script, handler or link is in the feedback"


def test_export_csv_has_the_expected_numbers(graded):
    assert graded["export"].returncode == 0, graded["export"].stderr[-3000:]
    with open(graded["course"] / "grades.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    by_key = {(r["assignment"], r["student_id"]): r for r in rows}
    for assignment, expected in graded["expected"].items():
        for student, want in expected.items():
            row = by_key[assignment, student]
            # raw_score counts the auto-graded points; the written answer is still ungraded (0)
            assert float(row["raw_score"]) == pytest.approx(want), (assignment, student, row)
            assert float(row["max_score"]) == pytest.approx(
                graded["expected"][assignment]["solver"] + 2
            )


def test_released_folders_pass_the_leak_scan(graded):
    release_dir = graded["course"] / "release"
    assert release.scan(release_dir) == []
    for assignment in checks.ASSIGNMENTS:
        assert release.scan_zip(release_dir / f"{assignment}.zip") == []
