"""Stock nbgrader on a looping submission: the formgrader's Autograde button runs nbgrader's
autograde inside the Jupyter server, which a looping cell held for the whole timeout (300 s)
before the feedback showed a ``KeyboardInterrupt`` traceback naming the instructor's folders.

Here ``nbgrader autograde`` (as the suite runs it, tests/test_nbgrader_pipeline.py) grades a
ch6 submission whose ``greedy_decode_cached`` never returns: the cell is interrupted after the
chapter's own timeout (`nbgrader_sanitise.stock_cell_seconds`, 46 s for ch6), costs only its
test cell's points, and neither the autograded notebook nor the feedback names a folder of
the instructor's (the course, the checkout, the Python environment, home)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_nbgrader_pipeline import COURSE, SOLUTION_REGION, _nbgrader  # noqa: E402

from autograder.checking import checks  # noqa: E402
from autograder.course import nbgrader_sanitise, release  # noqa: E402
from autograder.sandbox import budgets  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

A = "ch6_transformer"
LOOP = "while True:  # never returns\n    pass\n"


@pytest.fixture(scope="module")
def looped(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copy(COURSE / "nbgrader_config.py", course)
    shutil.copytree(
        COURSE / "source" / A,
        course / "source" / A,
        ignore=shutil.ignore_patterns("public_cases.npz", "attention_check.py", "*.npz"),
    )
    release.release(course, only=[A], log=lambda *_: None)
    source = nbformat.read(course / "source" / A / f"{A}.ipynb", as_version=4)
    for student in ("solver", "looping"):
        target = course / "submitted" / student / A
        shutil.copytree(course / "source" / A, target)
        (target / "timestamp.txt").write_text("2026-12-01 12:00:00.000000 UTC")
    looping = source
    for cell in looping.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "greedy-decode-cached":
            cell.source = SOLUTION_REGION.sub(
                lambda m: "".join(m.group(1) + line + "\n" for line in LOOP.splitlines()),
                cell.source,
            )
            assert "while True" in cell.source
    nbformat.write(looping, course / "submitted" / "looping" / A / f"{A}.ipynb")
    auto = _nbgrader(course, "autograde", A, "--force")
    feedback = _nbgrader(course, "generate_feedback", A, "--force")
    return course, auto, feedback


def test_a_cells_timeout_is_its_chapters_budget_not_300_s():
    for assignment, chapter in checks.CHAPTERS.items():
        seconds = nbgrader_sanitise.stock_cell_seconds(assignment)
        cell = budgets.resolve(chapter).cell_seconds
        assert cell + nbgrader_sanitise.STOCK_SECONDS <= seconds < cell + 31, assignment
        assert seconds < 120, assignment
    assert nbgrader_sanitise.stock_cell_seconds(A) == 46  # 4 x 0.11 + 15 + 30, rounded up


def test_the_looping_cell_is_interrupted_at_the_chapters_timeout(looped):
    _course, auto, _feedback = looped
    assert auto.returncode == 0, auto.stderr[-3000:]
    # nbclient's own log line, with the timeout it used (one per interrupted cell)
    timeouts = re.findall(r"Timeout waiting for execute reply \((\d+)s\)", auto.stderr)
    assert timeouts == ["46"], auto.stderr[-3000:]


def _scores(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        return {
            s: {
                g.name: g.auto_score for nb in gb.find_submission(A, s).notebooks for g in nb.grades
            }
            for s in ("solver", "looping")
        }


def test_the_loop_costs_only_its_own_test_cell(looped):
    course, _auto, _feedback = looped
    scores = _scores(course)
    lost = {name for name, score in scores["looping"].items() if score != scores["solver"][name]}
    assert lost == {"test-cache"}, scores
    assert scores["looping"]["test-cache"] == 0


def _instructor_paths(course: Path) -> list[str]:
    paths = {str(course), os.path.realpath(course), str(COURSE.parent), sys.prefix}
    paths |= {sys.base_prefix, os.path.expanduser("~")}
    return sorted(p for p in paths if len(p) > 1)


def test_no_instructors_path_in_the_autograded_notebook_or_the_feedback(looped):
    course, _auto, feedback = looped
    assert feedback.returncode == 0, feedback.stderr[-3000:]
    notebook = course / "autograded" / "looping" / A / f"{A}.ipynb"
    page = course / "feedback" / "looping" / A / f"{A}.html"
    graded = nbformat.read(notebook, as_version=4)
    errors = [
        o
        for c in graded.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert any("KeyboardInterrupt" in o.ename or "Timeout" in o.ename for o in errors), errors
    # the interrupted frames were in the course's folder: named, and replaced
    assert any("<course>/" in "\n".join(o.traceback) for o in errors), errors
    for text in (notebook.read_text(), page.read_text()):
        found = [
            p for p in _instructor_paths(course) if re.search(re.escape(p) + r"(?![\w.-])", text)
        ]
        assert found == [], found


def test_scrubbing_replaces_whole_folders_only():
    paths = [("/srv/course", "<course>"), ("/root", "~")]
    text = "File /srv/course/x.py, /root/.venv/y.py and /rootfs/z and /srv/courses/w"
    assert nbgrader_sanitise.scrub_paths(text, paths) == (
        "File <course>/x.py, ~/.venv/y.py and /rootfs/z and /srv/courses/w"
    )


def test_the_scrubbing_preprocessor_cleans_errors_and_stderr_but_not_stdout():
    course = "/srv/teach/attention"
    venv = sys.prefix
    cell = nbformat.v4.new_code_cell("f()")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"{course}/mine.txt\n"),
        nbformat.v4.new_output("stream", name="stderr", text=f"{venv}/lib/x.py:3: Warning\n"),
        nbformat.v4.new_output(
            "error",
            ename="KeyboardInterrupt",
            evalue=f"in {course}/autograded/s/a/attention_check.py",
            traceback=[f"File \x1b[0;32m{course}/autograded/s/a/attention_check.py:12\x1b[0m"],
        ),
    ]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    resources = {"nbgrader": {"course_root": course}}
    clean, _ = nbgrader_sanitise.ScrubPaths().preprocess(notebook, resources)
    stdout, stderr, error = clean.cells[0].outputs
    assert stdout.text == f"{course}/mine.txt\n"  # the student's own output: not ours to edit
    assert stderr.text == "<python>/lib/x.py:3: Warning\n"
    assert error.evalue == "in <course>/autograded/s/a/attention_check.py"
    assert error.traceback == [
        "File \x1b[0;32m<course>/autograded/s/a/attention_check.py:12\x1b[0m"
    ]
