"""Run a command as `nobody` with this checkout, its virtualenv and its interpreter reachable,
even where they live under a folder only root can enter (a home directory is 0700).

Nothing on disk changes: the command runs in a mount namespace of its own where each such
folder on the way is covered by a tmpfs (mode 0755) holding only the entries on the way, each
bound back from the original. The rest of the private folder stays out of sight.

`grade` runs `python -m autograder grade` that way on a copy of a course."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hostile import cluster, corpus

from autograder import sandbox

REPO = Path(__file__).resolve().parents[2]


def _needed_paths() -> list[Path]:
    """The checkout, the virtualenv's python (and what its links resolve to), the interpreter."""
    paths = [REPO, Path(sys.prefix), Path(sys.executable).parent]
    paths += [Path(os.path.realpath(sys.executable)).parent, Path(sys.base_prefix)]
    return [p for p in paths if p.exists()]


def nobody_command(argv: list[str]) -> list[str]:
    """``argv`` as `nobody` (no supplementary groups); needs root. The checkout, the virtualenv
    and the interpreter are made reachable the way the grader reaches them for a slot's uid
    (``sandbox.reachable_command``)."""
    nobody = pwd.getpwnam("nobody")
    become = [
        "/usr/bin/setpriv",
        f"--reuid={nobody.pw_uid}",
        f"--regid={nobody.pw_gid}",
        "--clear-groups",
    ]
    return sandbox.reachable_command(_needed_paths(), become + argv)


def environment(home: Path, tmp: Path) -> dict:
    """What the command needs in its environment: this checkout's packages first."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(REPO),
    }


@pytest.fixture
def public_tmp():
    """A folder `nobody` can reach (pytest's own tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="grader-rootless-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def grade(
    course: Path,
    assignment: str,
    folder: Path,
    cases: dict,
    procs_files=(),
    workers: int = 2,
    options=(),
) -> tuple[str, Path]:
    """Grade `cases` (student -> (notebook, score, reasons)) with `python -m autograder grade`
    started as `nobody` in a copy of `course` made in `folder` (which `nobody` can reach);
    asserts every score and reason, returns (stderr, the copy). With `procs_files`, the process
    first moves itself into that cgroup (as root, the way a delegating service manager starts a
    unit's only process) and only then becomes `nobody`. `options`: more options of `grade`."""
    nobody = pwd.getpwnam("nobody")
    if os.geteuid() != 0:
        pytest.fail("this test starts the grader as `nobody`, which needs root")
    mine = folder / "course"
    shutil.copytree(
        course, mine, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback")
    )
    shutil.copy(course / "gradebook.db", mine / "gradebook.db")
    for student, (notebook, _score, _reasons) in cases.items():
        corpus.write_submission(mine, assignment, student, notebook)
    home = folder / "home"
    home.mkdir()
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    command = [sys.executable, "-m", "autograder", "--course", str(mine), "grade", assignment]
    command += ["--workers", str(workers), "--cell-timeout", "30", "--task-timeout", "15"]
    command += ["--budget", "120", *options]
    command = nobody_command(command)  # reachable from a private checkout
    if procs_files:
        moves = " && ".join(f"echo $$ > {f}" for f in procs_files)
        command = ["/bin/sh", "-c", f'{moves} && exec "$@"', "sh", *command]
    env = environment(home, folder)
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder, timeout=800)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sandbox: rootless" in done.stderr
    scores = corpus.gradebook_scores(mine, assignment)
    assert {s: scores.get(s) for s in cases} == {s: float(c[1]) for s, c in cases.items()}, (
        done.stdout
    )
    for student, (_notebook, _score, expected) in cases.items():
        lines = done.stdout.splitlines()
        header = next(line for line in lines if line.startswith("student "))
        row = next(line for line in lines if line.startswith(student + " "))
        reasons = row[header.index("reason") :].strip() or "-"  # the table's last column
        assert reasons == (", ".join(expected) or "-") or sorted(reasons.split(", ")) == sorted(
            expected
        ), (student, row)
    assert sandbox.stray_processes() == []
    return done.stderr, mine


def grade_on_a_dask_worker(
    course: Path,
    assignment: str,
    folder: Path,
    cases: dict,
    seed: int | None = None,
    limits: dict | None = None,
) -> None:
    """Grade `cases` (student -> (notebook, score, reasons)) in name order on a Dask worker
    started by `nobody` (rootless sandboxes, one thread, so one slot), one submission at a
    time; asserts every score and reason. The trusted side (this process) records into
    `course`; `seed`: the batches' seed (each student's hidden inputs), else a fresh one;
    `limits`: the instructor's explicit limits (as the command line gives them)."""
    from autograder import grading

    nobody = pwd.getpwnam("nobody")
    home = folder / "home"
    home.mkdir()
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    options = ["--nworkers", "1", "--nthreads", "1", "--no-dashboard", "--local-directory"]
    got = {}
    with cluster.dask_cluster(
        options + [str(home)], wrap=nobody_command, env=environment(home, folder), cwd=home
    ) as (address, client):
        assert list(client.run(os.geteuid).values()) == [nobody.pw_uid]
        for student in sorted(cases):  # one at a time: the same worker, thread and sandbox
            corpus.write_submission(course, assignment, student, cases[student][0])
            out = grading.grade_assignment(
                course,
                assignment,
                cluster=address,
                students=[student],
                force=True,
                seed=seed,
                limits=limits,
            )
            got.update({r.student: (r.score, sorted(r.reasons)) for r in out.graded})
            assert out.skipped == [], out.skipped
    assert got == {s: (score, sorted(reasons)) for s, (_nb, score, reasons) in cases.items()}
