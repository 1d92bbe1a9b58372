"""Fresh state and kernel limits per submission, as root and as an unprivileged user.

Graded in name order on ONE worker (so on the same sandbox, unless it had to be restarted):
a submission plants files in /tmp and /dev/shm, a System V segment, a memfd, a process and
every working-directory name a later run might use; the next one looks for any of it and
sabotages itself if it finds anything; then one fills 3.6 GiB of shared memory (the cgroup
counts it) and the honest submissions after it get full marks. The same grader runs as an
ordinary user (rootless: an unprivileged user namespace) on part of the hostile corpus."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cgroups, grading, sandbox  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
A = "ch1_pooling"
LIMITS = sandbox.Limits(cell_seconds=30, task_seconds=15, submission_seconds=120)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    if sandbox.find_bwrap() is None:
        pytest.fail("bubblewrap is required: apt-get install bubblewrap")
    return corpus.released_course(tmp_path_factory.mktemp("state") / "course")


def test_nothing_one_submission_leaves_reaches_the_next(course):
    cases = corpus.state_corpus(course)
    for student, (notebook, _score, _reasons) in cases.items():
        corpus.write_submission(course, A, student, notebook)
    out = grading.grade_assignment(course, A, workers=1, limits=LIMITS, progress=False)
    got = {r.student: (r.score, sorted(r.reasons)) for r in out["graded"]}
    assert got == {s: (score, sorted(reasons)) for s, (_nb, score, reasons) in cases.items()}, {
        r.student: r.notes for r in out["graded"]
    }
    assert sandbox.stray_processes() == []


def test_the_graders_cgroups_are_removed_when_it_is_done(course):
    own = cgroups._own_paths()
    leftovers = [
        p
        for c in cgroups.V1_CONTROLLERS
        for p in (cgroups.ROOT / c / own.get(c, "/").lstrip("/")).glob(
            f"{cgroups.PROJECT}-{os.getpid()}"
        )
    ]
    assert leftovers == []


UNPRIVILEGED = [
    "honest-right",
    "honest-partial",
    "steal-files",
    "network",
    "fork-bomb",
    "memory-bomb",
    "infinite-loop-function",
    "wire-deep-header",
    "wire-steal-hidden-cases",
    "edited-test",
]


@pytest.fixture
def public_tmp():
    """A folder `nobody` can reach (pytest's own tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="grader-rootless-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_corpus_as_an_unprivileged_user(course, public_tmp):
    """`python -m autograder grade` run as `nobody` (rootless mode): the same scores and reasons."""
    nobody = pwd.getpwnam("nobody")
    if os.geteuid() != 0:
        pytest.fail("this test starts the grader as `nobody`, which needs root")
    tmp_path = public_tmp
    mine = tmp_path / "course"
    shutil.copytree(
        course, mine, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback")
    )
    shutil.copy(course / "gradebook.db", mine / "gradebook.db")
    every = corpus.ch1_corpus(mine, 9)
    for student in UNPRIVILEGED:
        corpus.write_submission(mine, A, student, every[student][0])
    home = tmp_path / "home"
    home.mkdir()
    for path in [tmp_path, *tmp_path.rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    command = [
        "/usr/bin/setpriv",
        f"--reuid={nobody.pw_uid}",
        f"--regid={nobody.pw_gid}",
        "--clear-groups",
        sys.executable,
        "-m",
        "autograder",
        "--course",
        str(mine),
        "grade",
        A,
        "--workers",
        "2",
        "--cell-timeout",
        "30",
        "--task-timeout",
        "15",
        "--budget",
        "120",
    ]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sandbox: rootless" in done.stderr
    scores = corpus.gradebook_scores(mine)
    assert {s: scores.get(s) for s in UNPRIVILEGED} == {
        s: float(every[s][1]) for s in UNPRIVILEGED
    }, done.stdout
    for student in UNPRIVILEGED:
        row = next(line for line in done.stdout.splitlines() if line.startswith(student + " "))
        reasons = row.split(None, 3)[3] if len(row.split(None, 3)) > 3 else "-"
        assert reasons == (", ".join(every[student][2]) or "-") or sorted(
            reasons.split(", ")
        ) == sorted(every[student][2]), (student, row)
