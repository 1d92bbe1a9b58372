"""Nothing lost: SIGKILL the grader mid-batch, rerun, and it finishes the rest, keeps what was
done and regrades nothing (unless --force)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import grading, sandbox  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
A = "ch1_pooling"
SLOW = "import time\ntime.sleep(1.0)  # a slow but honest notebook"


def _batch(course: Path, n: int) -> dict:
    """n slow honest submissions: even ones right (12), odd ones with a wrong max_pool (9)."""
    good = corpus.add_cell_after(corpus.solved(course, A), "setup", SLOW)
    wrong = corpus.append_to_cell(good, "average-max-pool", corpus.WRONG_MAX_POOL)
    expected = {}
    for i in range(n):
        student = f"s{i:02d}"
        corpus.write_submission(course, A, student, good if i % 2 == 0 else wrong)
        expected[student] = 12.0 if i % 2 == 0 else 9.0
    return expected


def _grader(course: Path, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "autograder", "--course", str(course), "grade", A, "--quiet", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _scores(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(A)}


def _autograded(course: Path) -> dict:
    return {p.parts[-3]: p.stat().st_mtime_ns for p in (course / "autograded").glob(f"*/{A}/{A}.ipynb")}


@pytest.fixture
def course(tmp_path):
    if sandbox.find_bwrap() is None:
        pytest.fail("bubblewrap is required: apt-get install bubblewrap")
    return corpus.released_course(tmp_path / "course")


def test_sigkill_mid_batch_then_rerun_finishes_the_rest_and_regrades_nothing(course):
    expected = _batch(course, 6)
    first = _grader(course, "--workers", "1")
    deadline = time.monotonic() + 300
    while len(_autograded(course)) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = _autograded(course)
    assert 2 <= len(done_before) < 6, "the kill should land mid-batch"
    # the killed grader's sandboxes die with it (bubblewrap --die-with-parent)
    for _ in range(100):
        if not sandbox.stray_processes():
            break
        time.sleep(0.1)
    assert sandbox.stray_processes() == []

    second = _grader(course, "--workers", "2")
    out, err = second.communicate(timeout=400)
    assert second.returncode == 0, err
    assert f"graded {6 - len(done_before)}, skipped {len(done_before)}" in out
    after = _autograded(course)
    assert {s: after[s] for s in done_before} == done_before  # kept, not regraded
    assert _scores(course) == expected


def test_force_regrades_and_student_option_limits_the_batch(course):
    expected = _batch(course, 2)
    out = grading.grade_assignment(course, A, workers=1, students=["s01"], progress=False)
    assert [r.student for r in out["graded"]] == ["s01"]
    out = grading.grade_assignment(course, A, workers=1, progress=False)
    assert [r.student for r in out["graded"]] == ["s00"]
    out = grading.grade_assignment(course, A, workers=2, force=True, progress=False)
    assert sorted(r.student for r in out["graded"]) == ["s00", "s01"]
    assert _scores(course) == expected
