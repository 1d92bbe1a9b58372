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
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import as_nobody, corpus  # noqa: E402

from autograder import grading, sandbox  # noqa: E402
from autograder.sandbox import cgroups  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
A = "ch1_pooling"
LIMITS = sandbox.Limits(cell_seconds=30, task_seconds=15, submission_seconds=120)


@pytest.fixture(scope="module")
def course(tmp_path_factory, bubblewrap):
    return corpus.released_course(tmp_path_factory.mktemp("state") / "course")


def _key_in_user_keyring(uid: int, description: bytes) -> None:
    """Add a key to `uid`'s user keyring on the machine, the way a grader without fresh
    per-run state (v2, or a kernel without user namespaces) let a submission do."""
    import ctypes

    from autograder.student import isolation

    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            add_key = isolation.KEY_SYSCALLS[os.uname().machine][1][0]
            libc = ctypes.CDLL(None, use_errno=True)
            ok = libc.syscall(add_key, b"user", description, b"x", 1, ctypes.c_int(-4)) > 0
            os._exit(0 if ok else 1)
        finally:
            os._exit(2)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_nothing_one_submission_leaves_reaches_the_next(course):
    """Also a key an earlier grader left in the slot uids' keyrings (they outlive every
    process): the zygote clears them before the first run, so the first probe finds none."""
    for slot in range(4):
        _key_in_user_keyring(sandbox.FIRST_UID + slot, b"planted by an earlier grader")
    cases = corpus.state_corpus(course)
    for student, (notebook, _score, _reasons) in cases.items():
        corpus.write_submission(course, A, student, notebook)
    out = grading.grade_assignment(course, A, workers=1, limits=LIMITS)
    got = {r.student: (r.score, sorted(r.reasons)) for r in out.graded}
    assert got == {s: (score, sorted(reasons)) for s, (_nb, score, reasons) in cases.items()}, {
        r.student: r.notes for r in out.graded
    }
    assert sandbox.stray_processes() == []


def test_no_channel_a_run_held_reaches_the_next_run(course):
    """As root: attackers that set O_ASYNC with the zygote as owner on every descriptor, leave
    bytes of their cases unread, or queue a forged request through /proc/self/fd, each followed
    on the same sandbox by an honest student, who keeps full marks."""
    corpus.grade_in_order(course, corpus.channel_corpus(course), LIMITS)


def test_the_graders_cgroups_are_removed_when_it_is_done(course):
    """Where the grader (this process, as root) made its subtree: under the root cgroup on
    v2, under its own cgroup in each controller's hierarchy on v1. None is left."""
    own = cgroups._own_paths()
    parents = [cgroups.ROOT] + [
        cgroups.ROOT / c / own.get(c, "/").lstrip("/") for c in cgroups.V1_CONTROLLERS
    ]
    assert any(p.is_dir() for p in parents)
    leftovers = [p for parent in parents for p in parent.glob(f"{cgroups.PROJECT}-{os.getpid()}")]
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


public_tmp = as_nobody.public_tmp  # a folder `nobody` can reach


def _grade_as_nobody(course, folder, cases, procs_files=(), workers=2) -> str:
    return as_nobody.grade(course, A, folder, cases, procs_files, workers)[0]


def test_the_corpus_as_an_unprivileged_user(course, public_tmp):
    """`python -m autograder grade` run as `nobody` (rootless mode): the same scores and reasons."""
    every = corpus.ch1_corpus(course, 9)
    _grade_as_nobody(course, public_tmp, {s: every[s] for s in UNPRIVILEGED})


def test_no_channel_reaches_the_next_run_as_an_unprivileged_user(course, public_tmp):
    """Rootless (as `nobody`), where a pipe the grader made is the sandbox's own uid's, so it
    can be reopened through /proc/self/fd: every victim after its attacker keeps full marks."""
    _grade_as_nobody(course, public_tmp, corpus.channel_corpus(course), workers=1)


def test_nothing_one_submission_leaves_reaches_the_next_as_an_unprivileged_user(course, public_tmp):
    """Rootless (as `nobody`): keys, message queues, /dev, /dev/shm, /tmp and System V IPC
    left by one run are not there for the next, on the same sandbox. (Without a cgroup no
    rlimit counts System V shared memory: the 3.6 GiB hog is graded in the delegated-cgroup
    test below, where the kernel stops it.)"""
    cases = corpus.state_corpus(course)
    del cases["state-3-shm-hog"]
    _grade_as_nobody(course, public_tmp, cases, workers=1)


@pytest.fixture
def delegated():
    """A cgroup handed to `nobody` the way systemd's ``Delegate=yes`` hands one to a user's
    unit (the directory and its cgroup.procs, cgroup.subtree_control and cgroup.threads, or
    on v1 its tasks, are theirs) and removed after; yields (the cgroup version, its
    cgroup.procs files: one on v2, one per controller on v1). On v2 it is a child of the root
    cgroup, with the controllers enabled there as the grader does as root; on v1 a child of
    this test's own cgroup in each controller's hierarchy."""
    nobody = pwd.getpwnam("nobody")
    name = f"{cgroups.PROJECT}-delegated-{os.getpid()}"
    version = 2 if (cgroups.ROOT / "cgroup.controllers").is_file() else 1
    if version == 2:
        (cgroups.ROOT / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        folders = [cgroups.ROOT / name]
        owned = ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")
    else:
        own = cgroups._own_paths()
        folders = [
            cgroups.ROOT / c / own.get(c, "/").lstrip("/") / name for c in cgroups.V1_CONTROLLERS
        ]
        owned = ("cgroup.procs", "tasks")
    for folder in folders:
        folder.mkdir()
        for path in [folder, *(folder / f for f in owned)]:
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
    yield version, [str(folder / "cgroup.procs") for folder in folders]
    for folder in folders:  # what the grader left (v2 rootless: its own leaf), deepest first
        for leftover in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
            if leftover.is_dir():
                leftover.rmdir()
        folder.rmdir()


def test_the_corpus_as_an_unprivileged_user_in_a_delegated_cgroup(course, public_tmp, delegated):
    """Rootless with a delegated cgroup (v1 here, v2 on a unified host): the grader makes its
    own cgroups inside the delegation and the kernel caps each sandbox, so the 3.6 GiB of
    System V shared memory that no rlimit counts is stopped at the memory limit too."""
    every = corpus.ch1_corpus(course, 9)
    cases = {s: every[s] for s in ("honest-right", "fork-bomb", "memory-bomb")}
    cases["state-3-shm-hog"] = corpus.state_corpus(course)["state-3-shm-hog"]
    cases["honest-after-the-hog"] = every["honest-right"]
    version, procs_files = delegated
    stderr = _grade_as_nobody(course, public_tmp, cases, procs_files=procs_files)
    assert f"limits: cgroup v{version} per sandbox" in stderr, stderr


def test_no_channel_reaches_the_next_run_on_a_dask_worker_run_by_an_ordinary_user(
    course, public_tmp
):
    """A Dask worker started by `nobody` (rootless sandboxes, one thread, so one slot): the
    attackers and victims are sent one at a time, each victim right after its attacker."""
    as_nobody.grade_on_a_dask_worker(course, A, public_tmp, corpus.channel_corpus(course))
