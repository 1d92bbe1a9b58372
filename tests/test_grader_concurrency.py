"""Two graders started on the same course at once, and the same per-submission work sent to
a Dask scheduler whose worker shares no disk with the course."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import cluster, corpus  # noqa: E402

from autograder import grading  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
A = "ch1_pooling"


@pytest.fixture
def course(tmp_path, bubblewrap):
    return corpus.released_course(tmp_path / "course")


def test_two_graders_at_once_grade_each_submission_once_and_keep_the_gradebook_sound(course):
    expected = corpus.slow_batch(course, 6)
    graders = [corpus.start_grader(course, "--workers", "1") for _ in range(2)]
    outputs = [g.communicate(timeout=400) for g in graders]
    assert [g.returncode for g in graders] == [0, 0], [err for _out, err in outputs]
    counts = [int(re.search(r"graded (\d+), skipped", out).group(1)) for out, _err in outputs]
    assert sum(counts) == 6
    assert corpus.gradebook_scores(course) == expected
    import sqlite3

    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    log = (course / "autograded" / ".runs" / f"{A}.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in log]
    runs = [e for e in entries if "seed" in e]  # each grader: its seed, then its timings
    assert len(runs) == 2 and all(run["seed"] >= 0 for run in runs)
    timed = [student for e in entries if "seconds" in e for student in e["seconds"]]
    assert sorted(timed) == sorted(expected)


def test_a_dask_worker_that_cannot_see_the_course_grades_from_the_work_items(course, tmp_path):
    """The scheduler and a worker are separate processes; the worker runs in its own working
    directory and its own mount namespace, where the course folder is an empty tmpfs: all it
    grades comes in the work items, and only this process writes the gradebook."""
    good = corpus.solved(course, A)
    corpus.write_submission(course, A, "right", good)
    corpus.write_submission(
        course,
        A,
        "partial",
        corpus.append_to_cell(good, "average-max-pool", corpus.WRONG_EPANECHNIKOV),
    )
    corpus.write_submission(
        course, A, "exits", corpus.append_to_cell(good, "loo", "import os\nos._exit(0)")
    )
    elsewhere = tmp_path / "worker"
    elsewhere.mkdir()
    hide = f'mount -t tmpfs none {shlex.quote(str(course))} && cd {shlex.quote(str(elsewhere))} && exec "$@"'
    options = ["--nworkers", "1", "--nthreads", "2", "--local-directory", str(elsewhere)]
    with cluster.dask_cluster(
        options + ["--no-dashboard"],
        wrap=lambda argv: (
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", hide] + ["sh", *argv]
        ),
    ) as (address, client):
        seen = client.run(lambda path: (os.listdir(path), os.getcwd()), str(course))
        assert list(seen.values()) == [([], str(elsewhere))]
        out = grading.grade_assignment(course, A, cluster=address)
    results = {r.student: (r.score, sorted(r.reasons)) for r in out.graded}
    assert results == {
        "right": (12.0, []),
        "partial": (9.0, []),
        "exits": (8.0, ["crash", "missing function"]),
    }
    assert corpus.gradebook_scores(course) == {"right": 12.0, "partial": 9.0, "exits": 8.0}
