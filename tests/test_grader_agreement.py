"""On honest submissions (right, the same in the Chinese edition, partial, wrong, blank) the grader's scores equal stock
`nbgrader autograde`'s, and nbgrader's own feedback and export keep working on its records."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli, grading  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
A = "ch1_pooling"

WRONG_LOO = """
def loo_loss_and_grad_ard(x, y, bandwidths):  # gives up: a constant
    return 0.0, np.zeros(np.shape(bandwidths))
"""


def _honest(course: Path) -> dict:
    good = corpus.solved(course, A)
    return {
        "right": good,
        # the Chinese edition of the same notebook: graded exactly as the English one
        "right-zh": corpus.solved(course, A, "zh_CN"),
        "partial": corpus.append_to_cell(good, "average-max-pool", corpus.WRONG_EPANECHNIKOV),
        "two-wrong": corpus.append_to_cell(
            corpus.append_to_cell(good, "average-max-pool", corpus.WRONG_EPANECHNIKOV),
            "loo",
            WRONG_LOO,
        ),
        "blank": corpus.blank(course, A),
    }


def _scores(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(A)}


@pytest.fixture(scope="module")
def courses(tmp_path_factory, bubblewrap):
    root = tmp_path_factory.mktemp("agreement")
    ours = corpus.released_course(root / "ours")
    stock = root / "stock"
    shutil.copytree(ours, stock)
    for course in (ours, stock):
        for student, notebook in _honest(course).items():
            corpus.write_submission(course, A, student, notebook)
    nbgrader = Path(sys.executable).parent / "nbgrader"
    done = subprocess.run(
        [str(nbgrader), "autograde", A, "--force"], cwd=stock, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = grading.grade_assignment(ours, A, workers=2)
    return {"ours": ours, "stock": stock, "outcome": outcome}


def test_scores_equal_stock_nbgrader_autograde(courses):
    stock = _scores(courses["stock"])
    assert stock == {
        "right": 12.0,
        "right-zh": 12.0,
        "partial": 9.0,
        "two-wrong": 5.0,
        "blank": 0.0,
    }
    assert _scores(courses["ours"]) == stock
    assert {r.student: r.score for r in courses["outcome"].graded} == stock


def test_per_cell_scores_equal_stock(courses):
    from nbgrader.api import Gradebook

    def cells(course):
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            out = {}
            for submission in gb.assignment_submissions(A):
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        out[(submission.student.id, grade.cell.name)] = (
                            grade.auto_score,
                            grade.needs_manual_grade,
                        )
            return out

    assert cells(courses["ours"]) == cells(courses["stock"])


def test_feedback_and_export_work_on_our_records_and_hide_hidden_tests(courses, tmp_path):
    course = courses["ours"]
    assert cli.main(["--course", str(course), "feedback", A]) == 0
    pages = sorted((course / "feedback").glob(f"*/{A}/{A}.html"))
    assert len(pages) == 5
    for page in pages:
        text = page.read_text()
        assert "HIDDEN TESTS" not in text and "run_hidden" not in text
    partial = (course / "feedback" / "partial" / A / f"{A}.html").read_text()
    assert "epanechnikov_weights" in partial and "hidden check failed" in partial

    target = tmp_path / "grades.csv"
    assert cli.main(["--course", str(course), "export", A, "--csv", str(target)]) == 0
    rows = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(target.open())}
    assert rows == {"right": 12.0, "right-zh": 12.0, "partial": 9.0, "two-wrong": 5.0, "blank": 0.0}


def test_report_page_shows_histogram_pass_rates_and_messages(courses):
    from autograder.course.report import load_records, summarise

    course = courses["ours"]
    assert cli.main(["--course", str(course), "report", A]) == 0
    page = (course / "autograded" / f"report_{A}.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "Named mistakes" in page
    summary = summarise(load_records(course, A))
    assert summary["n"] == 5
    assert summary["task_rates"]["test-pooling"] == pytest.approx(2 / 5)
    assert summary["task_rates"]["test-nw"] == pytest.approx(4 / 5)
    assert summary["task_rates"]["test-loo"] == pytest.approx(3 / 5)
    # the named mistake and how many students made it: "partial" and "two-wrong" left out the
    # kernel's clipping at 0
    named = summary["named"]["test-pooling"]
    assert [n for mistake, n in named if "without the clipping at 0" in mistake] == [2], named


def test_collect_imports_an_lms_zip(courses, tmp_path):
    """A Canvas download: the student is the roster entry with that Canvas user id."""
    import zipfile

    from nbgrader.api import Gradebook

    course = courses["ours"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_student("newstudent", lms_user_id="4242")
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(course / "submitted" / "right" / A / f"{A}.ipynb", f"studentnew_4242_9_{A}.ipynb")
    assert cli.main(["--course", str(course), "collect", A, str(archive)]) == 0
    assert (course / "submitted" / "newstudent" / A / f"{A}.ipynb").is_file()
