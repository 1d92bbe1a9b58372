"""The command line that starts a sandbox: bubblewrap, built from small named parts.

No network (all namespaces unshared), a new session, dies with its parent, read-only binds of
only what Python needs (the interpreter, the virtualenv's site-packages, /usr) plus the
*public* release folder, a private size-capped tmpfs on /tmp, a read-only /dev, a cleared
environment, and the grader's own code inside: the modules of ``IN_SANDBOX`` only, bound
read-only into ``WORKER_DIR``. No course file is visible inside: not ``solutions/``, not
``autograder/source``, not the gradebook, not another student's submission; the code arrives
over a pipe.

As root, the sandbox runs as its slot's unprivileged uid (``as_uid``); where that uid may
make user namespaces, bwrap itself runs as it, in a user namespace of its own, as rootless
does (``reachable_command`` lets it reach the interpreter and the release), so that each run
can mount the /proc of its own pid namespace (``isolation.enter_fresh_state``).
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from autograder.sandbox import host
from autograder.sandbox.limits import Limits
from autograder.sandbox.python import FULL_PRELOAD, python_paths
from autograder.sandbox.slots import SLOT_DIR
from autograder.student import contract, frames, isolation, zygote

#: the grader's only code inside the sandbox: the worker and every module it imports (each
#: imports none but these: tests/test_layering.py)
IN_SANDBOX = (contract, frames, zygote, isolation)
WORKER_DIR = "/sandbox"  # inside the sandbox: the IN_SANDBOX modules, read-only


def _bind_with_parents(path: str) -> list[str]:
    """--dir for every parent (mode 0755, so the unprivileged uid can traverse), then the bind."""
    args: list[str] = []
    parts = Path(path).parts
    for depth in range(2, len(parts)):
        parent = str(Path(*parts[:depth]))
        if parent != "/tmp":  # the private tmpfs, mounted before any bind (see below)
            args += ["--perms", "0755", "--dir", parent]
    return args + ["--ro-bind", path, path]


def _private_ancestors(paths) -> dict[Path, set[str]]:
    """{folder that others may not search: the names inside it that ``paths`` go through}."""
    covers: dict[Path, set[str]] = {}
    for path in map(Path, paths):
        for parent, child in zip(path.parents, (path, *path.parents)):
            if not parent.stat().st_mode & stat.S_IXOTH:
                covers.setdefault(parent, set()).add(child.name)
    return covers


def reachable_command(paths, argv: list[str], then: str = "") -> list[str]:
    """``argv`` (then the shell command ``then`` first) in a mount namespace of its own where
    every folder on the way to ``paths`` that others may not search (a home directory, a
    private temporary folder) is covered by a tmpfs of mode 0755 holding only the entries on
    the way, each bound back from the original: an unprivileged uid reaches those paths and
    nothing else of the folder. Nothing on disk changes; needs root."""
    covers = _private_ancestors(paths)
    keep = SLOT_DIR / "view"  # the originals, under a tmpfs of this namespace only
    steps = [f"mkdir -p {keep}", f"mount -t tmpfs -o mode=0700,size=1m view {keep}"]
    for number, (folder, names) in enumerate(sorted(covers.items(), key=lambda c: len(c[0].parts))):
        original, quoted = f"{keep}/{number}", shlex.quote(str(folder))
        steps += [f"mkdir {original}", f"mount --bind {quoted} {original}"]
        steps.append(f"mount -t tmpfs -o mode=0755,size=1m view {quoted}")
        for name in sorted(names):
            inside, source = shlex.quote(str(folder / name)), shlex.quote(f"{original}/{name}")
            steps += [f"if [ -d {source} ]; then mkdir {inside}; else touch {inside}; fi"]
            steps.append(f"mount --bind {source} {inside}")
    script = " && ".join(steps + ([then] if then else []) + ['exec "$@"'])
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]


def as_uid(uid: int) -> list[str]:
    """The setpriv prefix that runs a command as ``uid`` (and gid), with no group and no
    capability it could inherit or regain."""
    return [
        "/usr/bin/setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]


def _namespaces(user: bool) -> list[str]:
    """Every namespace bwrap makes (the user namespace only where bwrap runs unprivileged),
    tied to its parent's life, in a new session."""
    return [
        *(["--unshare-user"] if user else []),
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
    ]


def _private_tmp(size: int) -> list[str]:
    """The private /tmp, first: a virtualenv that lives under /tmp is bound on top of it."""
    return ["--size", str(size), "--perms", "1777", "--tmpfs", "/tmp"]


def _system_binds() -> list[str]:
    """/usr read-only, and /bin, /lib, /lib64, /sbin as this machine has them (a link or a
    folder)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}"):
            args += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
        elif os.path.isdir(f"/{link}"):
            args += ["--ro-bind", f"/{link}", f"/{link}"]
    return args


SITE_DIR = "/site"  # inside the sandbox: the site-packages outside the interpreter's prefix


def site_inside(prefix: str, site: list[str]) -> list[tuple[str, str]]:
    """(path on the machine, path in the sandbox) of each site-packages folder: where it is
    when the interpreter's prefix or /usr holds it, else at ``SITE_DIR/<n>``, so that a run
    never sees where the checkout or its virtualenv lives (under /tmp it would stand in the
    run's own /tmp, in a home its owner's name)."""
    placed = []
    for path in site:
        if path.startswith(prefix + "/") or path.startswith("/usr/"):
            placed.append((path, path))
        else:
            placed.append((path, f"{SITE_DIR}/{len(placed)}"))
    return placed


def _python_binds(prefix: str, site: list[str]) -> list[str]:
    """The interpreter's prefix and the site-packages, where /usr does not hold them already."""
    args = [] if prefix.startswith("/usr/") else _bind_with_parents(prefix)
    moved = [(path, inside) for path, inside in site_inside(prefix, site) if path != inside]
    if moved:
        args += ["--perms", "0755", "--dir", SITE_DIR]
    for path, inside in moved:
        args += ["--ro-bind", path, inside]
    return args


def _proc_and_dev() -> list[str]:
    """/proc, and a /dev the sandbox cannot write to (rootless, bwrap's /dev would be the
    user's own), with /dev/shm its own mount; each run mounts a fresh tmpfs over /tmp and
    /dev/shm (isolation.py)."""
    return [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(isolation.SHM_BYTES),
        "--perms",
        "1777",
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
    ]


#: the whole environment inside (--clearenv first): one thread per library, no display
ENVIRONMENT = {
    "HOME": "/tmp",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp/.matplotlib",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PATH": "/usr/bin:/bin",
}


def _environment() -> list[str]:
    args = ["--chdir", "/tmp", "--clearenv"]
    for name, value in ENVIRONMENT.items():
        args += ["--setenv", name, value]
    return args


def _worker_binds() -> list[str]:
    """The IN_SANDBOX modules, read-only in WORKER_DIR; nothing else of the course."""
    args = ["--perms", "0755", "--dir", WORKER_DIR]
    for module in IN_SANDBOX:
        args += ["--ro-bind", module.__file__, f"{WORKER_DIR}/{Path(module.__file__).name}"]
    return args


def _zygote_argv(interpreter: str, site: list[str], control_fd: int, preload, sandboxed: bool):
    """The zygote's own command line (``autograder/student/zygote.py``, ``__main__``)."""
    script = f"{WORKER_DIR}/zygote.py" if sandboxed else zygote.__file__
    return [
        interpreter,
        "-I",
        "-S",
        script,
        *(["--sandboxed"] if sandboxed else []),
        f"--control-fd={control_fd}",
        *site,
        "--",
        *preload,
    ]


def sandbox_command(
    uid: int | None,
    release_root: Path | None,
    limits: Limits,
    control_fd: int,
    preload=FULL_PRELOAD,
) -> list[str]:
    """The bwrap command line. ``uid`` None: rootless (an unprivileged user namespace, the
    caller's own uid); else run as that unprivileged uid (needs root): where that uid may make
    user namespaces, bwrap itself runs as it, in a user namespace of its own, as rootless
    does (bwrap run as root locks read-only mounts over parts of the sandbox's /proc, and then
    no run may mount a /proc of its own pid namespace); else bwrap runs as root and drops to
    that uid for the zygote."""
    interpreter, site = python_paths()
    prefix = str(Path(interpreter).parents[1])  # .../versions/3.11.7
    bwrap = host.find_bwrap()
    if bwrap is None:
        raise host.SandboxUnavailable(host.INSTALL_HINT)
    bwrap_as_slot = uid is not None and host.fresh_state_works()
    release = release_root.resolve() if release_root is not None and release_root.is_dir() else None
    command = [
        bwrap,
        *_namespaces(user=uid is None or bwrap_as_slot),
        *_private_tmp(limits.tmpfs_bytes),
        *_system_binds(),
        *_python_binds(prefix, site),
        *(["--ro-bind", str(release), "/release"] if release else []),
        *_proc_and_dev(),
        *_environment(),
        *_worker_binds(),
        *([] if uid is None or bwrap_as_slot else as_uid(uid)),
        *_zygote_argv(
            interpreter,
            [inside for _, inside in site_inside(prefix, site)],
            control_fd,
            preload,
            sandboxed=True,
        ),
    ]
    if bwrap_as_slot:
        # the slot uid's own keyrings on the machine outlive every process, and the zygote in
        # its user namespace cannot reach them: they are emptied, as that uid, before it starts
        clear = [interpreter, "-I", "-S", isolation.__file__, "--clear-keyrings"]
        sources = [prefix, *site, *(module.__file__ for module in IN_SANDBOX)]
        sources += [str(release)] if release else []
        then = " ".join(shlex.quote(a) for a in as_uid(uid) + clear)
        return reachable_command(sources, as_uid(uid) + command, then=then)
    return command


def unsandboxed_command(control_fd: int, preload=FULL_PRELOAD) -> list[str]:
    """The zygote run in place, without isolation (``--no-sandbox``)."""
    interpreter, site = python_paths()
    return _zygote_argv(interpreter, site, control_fd, preload, sandboxed=False)
