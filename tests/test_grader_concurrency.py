"""Two graders started on the same course at once, and the same per-submission work sent to
a Dask scheduler (distributed.LocalCluster)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
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


def test_two_graders_at_once_grade_each_submission_once_and_keep_the_gradebook_sound(course):
    expected = _batch(course, 6)
    graders = [_grader(course, "--workers", "1") for _ in range(2)]
    outputs = [g.communicate(timeout=400) for g in graders]
    assert [g.returncode for g in graders] == [0, 0], [err for _out, err in outputs]
    counts = [int(re.search(r"graded (\d+), skipped", out).group(1)) for out, _err in outputs]
    assert sum(counts) == 6
    assert _scores(course) == expected
    import sqlite3

    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    runs = (course / "autograded" / ".runs" / f"{A}.jsonl").read_text().splitlines()
    assert len(runs) == 2 and all(json.loads(line)["seed"] >= 0 for line in runs)


def test_dask_cluster_runs_the_same_per_submission_work(course):
    from distributed import LocalCluster

    good = corpus.solved(course, A)
    corpus.write_submission(course, A, "right", good)
    corpus.write_submission(course, A, "partial", corpus.append_to_cell(good, "average-max-pool", corpus.WRONG_MAX_POOL))
    corpus.write_submission(course, A, "exits", corpus.append_to_cell(good, "loo", "import os\nos._exit(0)"))
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None,
                      protocol="tcp") as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        out = grading.grade_assignment(course, A, cluster=cluster.scheduler_address, progress=False)
    results = {r.student: (r.score, sorted(r.reasons)) for r in out["graded"]}
    assert results == {"right": (12.0, []), "partial": (9.0, []), "exits": (8.0, ["crash", "missing function"])}
    assert _scores(course) == {"right": 12.0, "partial": 9.0, "exits": 8.0}
