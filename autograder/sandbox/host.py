"""What this machine allows the sandbox: bubblewrap, root or user namespaces, fresh state.

``require_sandbox`` refuses, saying what to do, where no sandbox can run (no ``bwrap``; not
root and no unprivileged user namespaces); ``fresh_state_works`` decides whether each run
gets namespaces of its own (``autograder/student/isolation.py``) and, as root, how bubblewrap starts
(``autograder.sandbox.command``); ``describe_mode`` says all of it to the instructor.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from autograder.sandbox import cgroups
from autograder.sandbox.slots import FIRST_UID

INSTALL_HINT = (
    "bubblewrap (`bwrap`) is not installed, and the grader will not run students' code "
    "unsandboxed by default. Install it with `apt-get install bubblewrap` (Debian/Ubuntu), "
    "or pass --no-sandbox to run submissions without isolation on a machine you trust."
)

NO_USERNS_HINT = (
    "the grader is not running as root, and this kernel does not let an ordinary user create "
    "the user namespace bubblewrap needs (rootless mode). Enable unprivileged user namespaces "
    "(e.g. `sysctl kernel.unprivileged_userns_clone=1`), run the grader as root "
    "(`sudo make grade A=<id>`), or pass --no-sandbox to run submissions without isolation on a "
    "machine you trust."
)


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here (no bwrap, or no root and no user namespaces)."""


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def rootless() -> bool:
    """Not root: the sandbox runs in an unprivileged user namespace (no per-slot uid)."""
    return os.geteuid() != 0


def _userns_works() -> bool:
    probe = [
        find_bwrap(),
        "--unshare-user",
        "--unshare-pid",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "true",
    ]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def fresh_state_works() -> bool:
    """Whether an unprivileged process here may make the namespaces a run is given
    (isolation.py): as root, tried as the first slot's uid, as the sandbox's child would. As
    root, it also decides how the sandbox starts (``sandbox_command``)."""
    probe = ["unshare", "--user", "--ipc", "--mount", "--net", "--uts", "--pid", "--fork", "true"]
    if not rootless():
        probe = ["/usr/bin/setpriv", f"--reuid={FIRST_UID}", f"--regid={FIRST_UID}"] + [
            "--clear-groups",
            *probe,
        ]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def require_sandbox() -> None:
    """Raise SandboxUnavailable, saying what to do, unless bwrap can run here: as root (a
    uid per worker slot), or rootless through an unprivileged user namespace."""
    if find_bwrap() is None:
        raise SandboxUnavailable(INSTALL_HINT)
    if rootless() and not _userns_works():
        raise SandboxUnavailable(NO_USERNS_HINT)


def describe_mode() -> list[str]:
    """What the sandbox guarantees on this machine, for the instructor (printed by `grade`)."""
    lines = [
        "sandbox: rootless (an unprivileged user namespace, your own uid)"
        if rootless()
        else "sandbox: as root (an unprivileged uid per worker slot)"
    ]
    if fresh_state_works():
        lines.append(
            "fresh state: each run in user, IPC, mount, network, UTS and pid namespaces of its "
            "own (a new /tmp, /dev/shm, System V IPC, message queues, keyrings, network (no "
            "device up), host name, pids and /proc, no capability, no namespace of its own; "
            "machine-wide /proc counters masked, no page-cache probe, no cookie, pidfd or "
            "session)"
        )
    else:
        lines.append(
            "fresh state: no user namespaces here, so weaker: /tmp, /dev/shm and System V IPC "
            "are swept between runs, and keys and POSIX message queues may outlive a run"
        )
    cgroup, why = cgroups.open_cgroup(f"probe-{os.getpid()}")
    if cgroup is not None:
        lines.append(
            f"limits: cgroup v{cgroup.version} per sandbox and a fresh one per run (memory incl. "
            "page cache, tmpfs, shared memory and memfds; pids; one CPU)"
        )
        cgroup.remove()
    else:
        lines.append(
            f"limits: no cgroup ({why}); weaker: memory is capped as address space only (shared "
            "memory and memfds are not counted), no CPU share, processes capped by RLIMIT_NPROC"
        )
    return lines
