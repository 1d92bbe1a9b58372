"""What a student hands in is read with a bound fixed before the first byte: a 600 MB
notebook, a FIFO, a symlink, a huge timestamp.txt get a reason for that submission alone,
the grader reads none of their bytes beyond the cap, and the honest submission graded
beside them keeps full marks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli, grading, sandbox  # noqa: E402
from autograder.grading import intake  # noqa: E402
from autograder.notebook import InvalidNotebook  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

A = "ch1_pooling"
LIMITS = {"cell_seconds": 15, "task_seconds": 15, "submission_seconds": 60}
BIG = 600 << 20


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("intake") / "course")
    good = corpus.solved(course, A)
    corpus.write_submission(course, A, "honest", good)
    # a 600 MB file that starts like a notebook (sparse: instant to make, costs no disk)
    big = corpus.write_submission(course, A, "huge", good)
    with open(big, "r+b") as handle:
        handle.truncate(BIG)
    fifo = course / "submitted" / "fifo" / A / f"{A}.ipynb"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)  # a read of it would block the grader for ever
    link = course / "submitted" / "link" / A / f"{A}.ipynb"
    link.parent.mkdir(parents=True)
    link.symlink_to(corpus.write_submission(course, A, "honest", good))
    (course / "submitted" / "missing" / A).mkdir(parents=True)
    stamp = corpus.write_submission(course, A, "huge-stamp", good).parent / "timestamp.txt"
    with open(stamp, "wb") as handle:
        handle.truncate(1 << 30)

    read = []
    real_read = os.read

    def counting_read(fd, n):
        data = real_read(fd, n)
        read.append(len(data))
        return data

    intake.os.read = counting_read  # the module's only reader of student bytes
    try:
        outcome = grading.grade_assignment(course, A, workers=2, limits=LIMITS)
    finally:
        intake.os.read = real_read
    return {"results": {r.student: r for r in outcome["graded"]}, "read": read}


def test_the_honest_submissions_keep_full_marks(graded):
    for student in ("honest", "huge-stamp"):
        result = graded["results"][student]
        assert (result.score, result.reasons) == (12, []), result.notes


@pytest.mark.parametrize(
    "student, why",
    [
        ("huge", "the notebook is 600.0 MiB, over the cap of 8.0 MiB"),
        ("fifo", "is not a regular file"),
        ("link", "is a symbolic link, not a file"),
        ("missing", "was not handed in"),
    ],
)
def test_a_refused_notebook_scores_zero_with_its_reason(graded, student, why):
    result = graded["results"][student]
    assert (result.score, result.reasons) == (0, ["invalid notebook"])
    assert any(why in note for note in result.notes), result.notes
    assert result.complete  # a verdict, not a grader error to retry


def test_the_grader_reads_no_byte_beyond_a_cap(graded):
    # the three honest notebooks (twice each: the already-graded check and the job), and the
    # timestamp files, 201 bytes at most each; the 600 MB file and the FIFO: nothing
    assert max(graded["read"]) <= 1 << 20
    assert sum(graded["read"]) < 3 * 2 * (8 << 20) + 3 * 201
    assert sum(graded["read"]) < BIG // 50


def test_a_huge_timestamp_is_ignored_with_a_note(graded):
    notes = graded["results"]["huge-stamp"].notes
    assert "timestamp.txt is not a date and was ignored" in notes


def test_a_file_that_grows_past_the_cap_while_read_is_refused():
    # /proc files report size 0 to fstat and then hold more: the cap is checked on the bytes
    with pytest.raises(InvalidNotebook, match="over the cap of 0.0 MiB"):
        intake.read_notebook(Path("/proc/self/maps"), 10)
    data, digest = intake.read_notebook(Path("/proc/self/maps"), 1 << 20)
    assert len(data) > 10 and len(digest) == 64


def test_the_cap_is_an_instructor_limit_that_wins():
    args = cli.build_parser().parse_args(["grade", A, "--max-notebook-mb", "0.5"])
    assert cli.explicit_limits(args) == {"notebook_bytes": 1 << 19}
    assert grading.effective_limits(cli.explicit_limits(args), None).notebook_bytes == 1 << 19
    assert sandbox.Limits().notebook_bytes == 8 << 20
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["grade", A, "--max-notebook-mb", "0"])
