"""The trusted side of the sandbox: start a sandboxed worker, send it work, enforce wall time.

- `Limits`: every resource limit in one place (memory, CPU, processes, file size, wall time
  per cell and per task, output sizes).
- `sandbox_command`: the bubblewrap command line: no network (all namespaces unshared), a
  new session, dies with its parent, read-only binds of only what Python needs (the
  interpreter, the virtualenv's site-packages, /usr) plus the *public* release folder, a
  private size-capped tmpfs, and an unprivileged uid per worker slot (so RLIMIT_NPROC bites);
  as root, bwrap itself runs as that uid in a user namespace of its own where it may
  (`reachable_command` lets it reach the interpreter and the release), so that each run can
  mount the /proc of its own pid namespace (`isolation.enter_fresh_state`).
  No course file is visible inside: not `solutions/`, not `autograder/source`, not the
  gradebook, not another student's submission. The code arrives over a pipe.
- `Sandbox`: one long-lived worker (`autograder/zygote.py`) per slot. `run` gives each run
  its own pair of pipes (handed to the zygote over its control socket, with a nonce), writes
  the request and later the cases into one and feeds the events of the other, with the
  trusted clock, to `protocol.Run`; past a deadline, or if the stream breaks, the whole
  sandbox is killed (process group, pid namespace, every process of the slot's uid) and
  restarted for the next request.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import itertools
import os
import secrets
import select
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from autograder import cgroups, contract, frames, isolation, wire
from autograder import zygote as zygote_module
from autograder.protocol import LostSandbox, Plan, Run, RunResult

INSTALL_HINT = (
    "bubblewrap (`bwrap`) is not installed, and the grader will not run students' code "
    "unsandboxed by default. Install it with `apt-get install bubblewrap` (Debian/Ubuntu), "
    "or pass --no-sandbox to run submissions without isolation on a machine you trust."
)

# What a zygote imports before it forks, by the top-level package the assignment's notebook
# imports: NumPy always (the contract needs it); PyTorch (about a second) and matplotlib only
# for a notebook that uses them, so a NumPy-only assignment's sandboxes start in a fraction
# of the time. A submission that imports something else pays for it in its own budget.
PRELOADS = {
    "numpy": ("numpy",),
    "torch": ("torch", "torch.nn", "torch.nn.functional"),
    "matplotlib": ("matplotlib", "matplotlib.pyplot"),
}


def preload_for(imports) -> tuple[str, ...]:
    """The modules a zygote preloads for a notebook that imports these top-level packages."""
    wanted = {"numpy", *imports}
    return tuple(m for package, modules in PRELOADS.items() if package in wanted for m in modules)


FULL_PRELOAD = preload_for(PRELOADS)
SLOT_DIR = Path("/tmp/autograder-slots")
WORKER_DIR = "/sandbox"  # inside the sandbox: the IN_SANDBOX modules, read-only
#: the grader's only code inside the sandbox: the worker and what it imports
IN_SANDBOX = (contract, frames, zygote_module, isolation)
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")
_ROOTLESS_SLOTS = itertools.count()
START_MEMORY = 4 << 30  # headroom while the zygote imports NumPy and PyTorch
LEAK_SLACK = 256 << 20  # memory still charged after a run beyond this: restart the sandbox
CPU_SAMPLE_SECONDS = 1.0  # how often a run samples its sandbox's CPU time (the idle check)
FIRST_UID = 61000
MAX_SLOTS = 512


@dataclass(frozen=True)
class Limits:
    """Every limit of one submission. The wall-clock budgets are kept by the trusted side:
    nothing the sandbox sends extends them, and retries spend the same submission budget."""

    memory_bytes: int = 2 << 30  # address space on top of what the zygote maps
    cpu_seconds: int = 900  # RLIMIT_CPU of one child (all cells and cases)
    processes: int = 48  # RLIMIT_NPROC for the slot's uid (threads count)
    file_bytes: int = 64 << 20  # RLIMIT_FSIZE: captured output and any file written
    tmpfs_bytes: int = 512 << 20  # size of the private /tmp
    submission_seconds: float = 240.0  # wall time of the whole submission, retries included
    cell_seconds: float = 120.0  # wall time of one cell (within the submission budget)
    task_seconds: float = 60.0  # wall time of all cases of one task
    start_seconds: float = 180.0  # wall time for the zygote to import numpy and torch
    cell_output_chars: int = 4000  # captured stdout/stderr kept per cell
    result_bytes: int = 64 << 20  # one case's returned arrays
    stream_bytes: int = 512 << 20  # everything one submission may send back
    notebook_bytes: int = 8 << 20  # the submitted notebook: a bigger one is refused unread

    def for_child(self) -> dict:
        return {
            "address_space_bytes": self.memory_bytes,
            "cpu_seconds": self.cpu_seconds,
            "processes": self.processes,
            "file_bytes": self.file_bytes,
            "cell_output_chars": self.cell_output_chars,
        }

    def merged(self, overrides: dict) -> Limits:
        """These limits with a chapter's overrides applied (unknown names are an error)."""
        return dataclasses.replace(self, **overrides) if overrides else self


DEFAULT_LIMITS = Limits()


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
            "own (a new /tmp, /dev/shm, System V IPC, message queues, keyrings, loopback, host "
            "name, pids and /proc, no capability)"
        )
    else:
        lines.append(
            "fresh state: no user namespaces here, so weaker: /tmp, /dev/shm and System V IPC "
            "are swept between runs, and keys and POSIX message queues may outlive a run"
        )
    cgroup, why = cgroups.open_cgroup(f"probe-{os.getpid()}")
    if cgroup is not None:
        lines.append(
            f"limits: cgroup v{cgroup.version} per sandbox (memory incl. page cache, tmpfs, shared "
            "memory and memfds; pids; one CPU)"
        )
        cgroup.remove()
    else:
        lines.append(
            f"limits: no cgroup ({why}); weaker: memory is capped as address space only (shared "
            "memory and memfds are not counted), no CPU share, processes capped by RLIMIT_NPROC"
        )
    return lines


def _bind_with_parents(path: str) -> list[str]:
    """--dir for every parent (mode 0755, so the unprivileged uid can traverse), then the bind."""
    args: list[str] = []
    parts = Path(path).parts
    for depth in range(2, len(parts)):
        parent = str(Path(*parts[:depth]))
        if parent != "/tmp":  # the private tmpfs, mounted before any bind (see below)
            args += ["--perms", "0755", "--dir", parent]
    return args + ["--ro-bind", path, path]


def python_paths() -> tuple[str, list[str]]:
    """(the real interpreter, the site-packages directories it needs)."""
    # the interpreter this process really runs (an ordinary user may not reach the one root
    # resolves the virtualenv's link to, e.g. under /root): the first candidate we can execute
    candidates = [
        os.path.realpath(sys.executable),
        os.path.realpath(getattr(sys, "_base_executable", "")),
        os.path.join(
            sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}"
        ),
    ]
    interpreter = next((c for c in candidates if c and os.access(c, os.X_OK)), candidates[0])
    site = [
        p
        for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        if os.path.isdir(p)
    ]
    return interpreter, sorted(site)


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
    bwrap = find_bwrap()
    if bwrap is None:
        raise SandboxUnavailable(INSTALL_HINT)
    bwrap_as_slot = uid is not None and fresh_state_works()
    command = [
        bwrap,
        *(["--unshare-user"] if uid is None or bwrap_as_slot else []),
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        # the private /tmp first: a virtualenv that lives under /tmp is bound on top of it
        "--size",
        str(limits.tmpfs_bytes),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}"):
            command += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
        elif os.path.isdir(f"/{link}"):
            command += ["--ro-bind", f"/{link}", f"/{link}"]
    if not prefix.startswith("/usr/"):
        command += _bind_with_parents(prefix)
    for path in site:
        if not path.startswith(prefix + "/") and not path.startswith("/usr/"):
            command += _bind_with_parents(path)
    if release_root is not None and release_root.is_dir():
        command += ["--ro-bind", str(release_root.resolve()), "/release"]
    command += [
        "--proc",
        "/proc",
        # a /dev the sandbox cannot write to (rootless, bwrap's /dev would be the user's own),
        # with /dev/shm its own mount; each run mounts a fresh tmpfs over /tmp and /dev/shm
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
        "--chdir",
        "/tmp",
        "--clearenv",
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "MPLBACKEND",
        "Agg",
        "--setenv",
        "MPLCONFIGDIR",
        "/tmp/.matplotlib",
        "--setenv",
        "OMP_NUM_THREADS",
        "1",
        "--setenv",
        "MKL_NUM_THREADS",
        "1",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        # the worker and the contract it imports, read-only; nothing else of the course
        "--perms",
        "0755",
        "--dir",
        WORKER_DIR,
        *(
            arg
            for module in IN_SANDBOX
            for arg in ("--ro-bind", module.__file__, f"{WORKER_DIR}/{Path(module.__file__).name}")
        ),
        *([] if uid is None or bwrap_as_slot else as_uid(uid)),
        interpreter,
        "-I",
        "-S",
        f"{WORKER_DIR}/zygote.py",
        "--sandboxed",
        f"--control-fd={control_fd}",
        *site,
        "--",
        *preload,
    ]
    if bwrap_as_slot:
        # the slot uid's own keyrings on the machine outlive every process, and the zygote in
        # its user namespace cannot reach them: they are emptied, as that uid, before it starts
        clear = [interpreter, "-I", "-S", isolation.__file__, "--clear-keyrings"]
        sources = [prefix, *site, *(module.__file__ for module in IN_SANDBOX)]
        sources += [str(release_root.resolve())] if release_root and release_root.is_dir() else []
        then = " ".join(shlex.quote(a) for a in as_uid(uid) + clear)
        return reachable_command(sources, as_uid(uid) + command, then=then)
    return command


def unsandboxed_command(control_fd: int, preload=FULL_PRELOAD) -> list[str]:
    interpreter, site = python_paths()
    return [
        interpreter,
        "-I",
        "-S",
        zygote_module.__file__,
        f"--control-fd={control_fd}",
        *site,
        "--",
        *preload,
    ]


class Slot:
    """An exclusive worker slot (a lock file) and the unprivileged uid that goes with it."""

    def __init__(self):
        SLOT_DIR.mkdir(parents=True, exist_ok=True)
        for number in range(MAX_SLOTS):
            handle = open(SLOT_DIR / f"slot-{number}.lock", "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self.uid, self._handle = FIRST_UID + number, handle
            return
        raise RuntimeError(f"all {MAX_SLOTS} grader slots in {SLOT_DIR} are taken")

    def release(self) -> None:
        self._handle.close()


def processes_of_uid(uid: int) -> list[int]:
    """The live processes whose real uid is ``uid``. A zombie is not one: it has exited and
    holds no memory, file or channel, only its pid until its parent reaps it (a sandbox's
    inner bwrap, orphaned when the sandbox is killed, waits for the machine's init)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                zombie = False
                for line in handle:
                    if line.startswith("State:"):
                        zombie = line.split()[1] in ("Z", "X")
                    elif line.startswith("Uid:"):
                        if int(line.split()[1]) == uid and not zombie:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


def _process_table() -> dict:
    """pid -> the fields of its /proc/<pid>/stat after the command name (state, ppid, ...)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    table[int(entry)] = handle.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
    return table


def descendants(root: int, table: dict | None = None) -> list[int]:
    """Every process below ``root`` (from /proc's parent links)."""
    children: dict = {}
    for pid, fields in (_process_table() if table is None else table).items():
        try:
            children.setdefault(int(fields[1]), []).append(pid)
        except (ValueError, IndexError):
            continue
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_cpu_ticks(root: int) -> int:
    """The CPU time, in clock ticks, of ``root`` and every process below it: user and system
    time, and that of the children they reaped. It changes whenever anything in that tree runs;
    the idle check of a step (``protocol.IDLE_SECONDS``) watches it. A sandbox's processes all
    stay below its root: its pid namespace's init reaps every orphan."""
    table = _process_table()
    total = 0
    for pid in (root, *descendants(root, table)):
        try:
            total += sum(int(value) for value in table[pid][11:15])  # utime stime cutime cstime
        except (KeyError, ValueError):
            continue
    return total


def stray_processes(slots: int = 32) -> list[int]:
    """Processes still running under the uid of a slot nobody holds (there should be none)."""
    stray = []
    SLOT_DIR.mkdir(parents=True, exist_ok=True)
    for number in range(slots):
        with open(SLOT_DIR / f"slot-{number}.lock", "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # in use by a live grader
            stray += processes_of_uid(FIRST_UID + number)
    return stray


def _set_nonblocking(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)


class Sandbox:
    """One sandboxed worker process (a zygote) for one slot; restarted after any abnormal run.

    The zygote has one channel, a control socket: runs arrive on it (a nonce and the run's
    own two pipes, as SCM_RIGHTS) and its ready/exit messages come back on it. The child of
    a run closes it before any student code runs, and the zygote is not dumpable, so no
    /proc path leads to it. Every write into the sandbox is non-blocking and bounded by the
    trusted deadline, so a submission that stops reading cannot stall the grader.
    """

    def __init__(
        self,
        release_root: Path | None,
        limits: Limits = DEFAULT_LIMITS,
        sandboxed: bool = True,
        preload: tuple[str, ...] = FULL_PRELOAD,
    ):
        if sandboxed:
            require_sandbox()
        self.release_root = release_root
        self.limits = limits
        self.sandboxed = sandboxed
        self.preload = tuple(preload)
        self.slot = Slot() if sandboxed and not rootless() else None
        self.cgroup, self.cgroup_note = None, "not sandboxed"
        if sandboxed:
            name = (
                f"slot-{self.slot.uid}" if self.slot else f"slot-rootless-{next(_ROOTLESS_SLOTS)}"
            )
            self.cgroup, self.cgroup_note = cgroups.open_cgroup(name)
        self.process: subprocess.Popen | None = None
        self.control_socket: socket.socket | None = None
        self.control: wire.FrameReader | None = None
        self.starts = 0
        self.dirty = False
        self.baseline = 0  # the zygote's own memory, measured once it is ready
        self.fresh = False  # each run in namespaces of its own (isolation.py), else swept

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        # the control socket is the zygote's only channel: runs arrive on it, each with its
        # own pipes, and its ready/exit messages come back on it; no child ever holds it
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        control_fd = theirs.fileno()
        if self.sandboxed:
            command = sandbox_command(
                self.slot.uid if self.slot else None,
                self.release_root,
                self.limits,
                control_fd,
                self.preload,
            )
        else:
            command = unsandboxed_command(control_fd, self.preload)
        if self.cgroup is not None:
            # the zygote starts with room to import its modules; the cap tightens once it is ready
            self.cgroup.kill_all()
            self.cgroup.set_limits(self.limits.memory_bytes + START_MEMORY, self.limits.processes)
            files = " ".join(shlex.quote(f) for f in self.cgroup.procs_files)
            command = [
                "/bin/sh",
                "-c",
                f'echo $$ | tee {files} > /dev/null && exec "$@"',
                "sh",
                *command,
            ]
        # bwrap --die-with-parent follows the *thread* that forked it, so every sandbox is
        # forked by one long-lived thread: pool threads may come and go, sandboxes stay up
        try:
            self.process = _SPAWNER.submit(
                subprocess.Popen,
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
                pass_fds=(control_fd,),
            ).result()
        finally:
            theirs.close()
        ours.setblocking(False)
        self.control_socket = ours
        self.control = wire.FrameReader(ours.fileno(), wire.CONTROL, 0)
        self.starts += 1
        self.dirty = False
        deadline = time.monotonic() + self.limits.start_seconds
        frame, problem = None, None
        try:
            while frame is None and not self.control.eof and time.monotonic() < deadline:
                if select.select([ours], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    self.control.fill()
                frame = self.control.next()
        except wire.ProtocolViolation as err:
            problem = str(err)
        if frame is None or frame[0]["ev"] != "ready" or frame[0]["error"]:
            problem = problem or (frame[0].get("error") if frame else None)
            self.kill()
            raise RuntimeError(
                "the sandboxed worker did not start"
                + (f": {problem}" if problem else " (is the virtualenv readable inside bwrap?)")
            )
        self.fresh = frame[0]["fresh"]
        if self.cgroup is not None:
            self.baseline = self.cgroup.memory_usage()
            self.cgroup.set_limits(self.baseline + self.limits.memory_bytes, self.limits.processes)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None and not self.dirty

    def kill(self) -> int:
        """Kill the sandbox and everything in it; returns how many processes it had."""
        count = len(processes_of_uid(self.slot.uid)) if self.slot else 0
        if self.process is not None and self.slot is None:  # rootless: count the namespace's tree
            count = len(descendants(self.process.pid))
        if self.cgroup is not None:
            count = max(count, self.cgroup.kill_all())
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.control_socket.close()
            self.process = None
        if self.slot is not None:
            for _ in range(50):  # pid-namespace death is asynchronous; make sure
                pids = processes_of_uid(self.slot.uid)
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.02)
        return count

    def close(self) -> None:
        self.kill()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.slot is not None:
            self.slot.release()

    # -- one attempt ------------------------------------------------------------------------

    def run(
        self,
        request: dict,
        cases: bytes,
        plan: Plan,
        deadline: float,
        accept_case,
        received_before: int = 0,
    ) -> RunResult:
        """Run the cells of ``request``, then (once they are done) send the ``cases`` frame.

        The run gets its own two pipes, made here: the child writes events into one and reads
        the request and the cases from the other; the zygote gets the child's ends over its
        control socket with a fresh nonce and closes them once it has forked. When the run is
        over, this side closes its ends too, so nothing the child held is ever read again.

        ``deadline``: the submission's absolute wall-clock budget (time.monotonic()); each
        cell and each task also has its own budget, started by the trusted clock when the
        previous step's event arrives (``protocol.Run``). ``accept_case(task, case, header,
        blob)`` turns a case event into an outcome (or raises ProtocolViolation). Never raises
        for anything the sandbox does; a run that breaks before its first event ends "lost".
        """
        if not self.alive():
            self.kill()
            self.start()
        run = Run(
            plan,
            cases,
            accept_case,
            cell_seconds=self.limits.cell_seconds,
            task_seconds=self.limits.task_seconds,
            deadline=deadline,
        )
        oom_before = self.cgroup.oom_kills() if self.cgroup else 0
        nonce = secrets.token_hex(16)
        events_read, events_write = os.pipe()
        input_read, input_write = os.pipe()
        try:
            message = frames.encode_frame(
                {"run": nonce, "workdir": request["workdir"], "tmp_bytes": self.limits.tmpfs_bytes}
            )
            try:
                sent = socket.send_fds(self.control_socket, [message], [events_write, input_read])
            except OSError:
                sent = 0
            os.close(events_write)
            os.close(input_read)
            _set_nonblocking(input_write)
            events = wire.FrameReader(events_read, wire.EVENTS, self.limits.result_bytes)
            if sent != len(message):
                return self._end(run, events, oom_before, "lost", "the sandbox took no run")
            outbox = bytearray(frames.encode_frame(request))
            return self._drive(run, events, input_write, outbox, nonce, oom_before, received_before)
        finally:
            for fd in (events_read, input_write):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _drive(self, run, events, input_fd, outbox, nonce, oom_before, received_before):
        next_sample = 0.0
        while True:
            now = time.monotonic()
            if now >= next_sample:
                run.on_cpu_time(now, tree_cpu_ticks(self.process.pid))
                next_sample = now + CPU_SAMPLE_SECONDS
            expired = run.expired(now)
            if expired is not None:
                how, detail = expired
                if how == "budget":
                    detail = (
                        f"used up the submission's budget of {self.limits.submission_seconds:g} s"
                    )
                return self._end(run, events, oom_before, how, detail)
            readers = [r.fd for r in (events, self.control) if not r.eof]
            try:
                ready, writable, _ = select.select(
                    readers,
                    [input_fd] if outbox else [],
                    [],
                    min(run.step_deadline(), next_sample) - now,
                )
            except (OSError, ValueError):
                return self._broken(run, events, oom_before)
            if writable:
                try:
                    outbox[: os.write(input_fd, bytes(outbox[: 1 << 16]))] = b""
                except BlockingIOError:
                    pass
                except OSError:  # the child closed its end (or is gone): no more input is read
                    outbox.clear()
            try:
                if events.fd in ready:
                    events.fill()
                if received_before + events.received > self.limits.stream_bytes:
                    return self._end(
                        run, events, oom_before, "output", "sent back more data than allowed"
                    )
                while (frame := events.next()) is not None:
                    cases = run.on_event(*frame)
                    if cases is not None:
                        outbox.extend(cases)
                if self.control.fd in ready:
                    self.control.fill()
                exit_frame = self.control.next()
            except wire.ProtocolViolation as err:
                if not run.started_submission:  # nothing of the submission ran yet
                    return self._end(run, events, oom_before, "lost", f"before its start: {err}")
                return self._end(
                    run, events, oom_before, "protocol", f"broke the result protocol ({err})"
                )
            if exit_frame is not None:
                try:
                    run.on_exit(exit_frame[0], nonce)
                except LostSandbox as err:
                    return self._end(run, events, oom_before, "lost", str(err))
                return self._finish(run, exit_frame[0], events, input_fd, outbox, oom_before)
            if self.control.eof or (events.eof and not ready):
                return self._broken(run, events, oom_before)

    def _broken(self, run, events, oom_before) -> RunResult:
        """The zygote or the child's stream went away without an exit message."""
        if not run.started_submission:
            return self._end(run, events, oom_before, "lost", "the sandbox died before the run")
        return self._end(run, events, oom_before, "crash", "the worker process was killed")

    def _end(self, run, events, oom_before, how: str, detail: str, kill: bool = True):
        result = run.result
        result.ended, result.detail, result.where = how, detail, run.where()
        result.received = events.received
        result.oom_kills = (self.cgroup.oom_kills() - oom_before) if self.cgroup else 0
        if result.oom_kills and how in ("crash", "timeout"):
            result.ended, result.detail = (
                "memory",
                "went over the memory limit (the kernel killed it)",
            )
        if kill:
            result.processes_at_kill = self.kill()
        return result

    def _finish(self, run, exit_header, events, input_fd, outbox, oom_before) -> RunResult:
        """The zygote says the child and everything it started are gone: read what is left."""
        try:
            while select.select([events.fd], [], [], 0)[0] and not events.eof:
                events.fill()
                if events.received > self.limits.stream_bytes:
                    return self._end(
                        run, events, oom_before, "output", "sent back more data than allowed"
                    )
            while (frame := events.next()) is not None:
                run.on_event(*frame)
            if events.buffer:
                raise wire.ProtocolViolation("a truncated frame")
        except wire.ProtocolViolation as err:
            if not run.started_submission:
                return self._end(run, events, oom_before, "lost", f"before its start: {err}")
            return self._end(
                run, events, oom_before, "protocol", f"broke the result protocol ({err})"
            )
        # anything left unread or unaccounted for on a channel: a fresh sandbox next time
        self.dirty = not exit_header["clean"] or bool(outbox) or _unread_bytes(input_fd) > 0
        code = exit_header["code"]
        result = run.result
        if run.phase == "finished" and code == 0:
            result.received = events.received
            if self.cgroup is not None:
                result.oom_kills = self.cgroup.oom_kills() - oom_before
                # anything still charged after the sweep (a leak) means a fresh sandbox next time
                self.dirty = self.dirty or self.cgroup.memory_usage() > self.baseline + LEAK_SLACK
            if self.dirty:
                self.kill()
            return result
        if not run.started_submission:
            return self._end(
                run, events, oom_before, "lost", f"the run ended before its start (status {code})"
            )
        if code == -signal.SIGXCPU:
            return self._end(run, events, oom_before, "timeout", "used up its CPU-time limit")
        how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return self._end(run, events, oom_before, "crash", f"the process ended early ({how})")


def _unread_bytes(fd: int) -> int:
    """Bytes written into a pipe and not read (FIONREAD works on either end)."""
    import array
    import termios

    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count)
    except OSError:
        return 0
    return count[0]
