"""The trusted side of the sandbox: start a sandboxed worker, send it work, enforce wall time.

- `Limits`: every resource limit in one place (memory, CPU, processes, file size, wall time
  per cell and per task, output sizes).
- `sandbox_command`: the bubblewrap command line: no network (all namespaces unshared), a
  new session, dies with its parent, read-only binds of only what Python needs (the
  interpreter, the virtualenv's site-packages, /usr) plus the *public* release folder, a
  private size-capped tmpfs, and an unprivileged uid per worker slot (so RLIMIT_NPROC bites).
  No course file is visible inside: not `solutions/`, not `autograder/source`, not the
  gradebook, not another student's submission. The code arrives over a pipe.
- `Sandbox`: one long-lived worker (the zygote in `autograder/worker.py`) per slot. `run`
  sends one request and reads the event stream with a deadline per cell and per task; past
  a deadline, or if the stream breaks, the whole sandbox is killed (process group, pid
  namespace, every process of the slot's uid) and restarted for the next request.
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from autograder import worker as wire

INSTALL_HINT = (
    "bubblewrap (`bwrap`) is not installed, and the grader will not run students' code "
    "unsandboxed by default. Install it with `apt-get install bubblewrap` (Debian/Ubuntu), "
    "or pass --no-sandbox to run submissions without isolation on a machine you trust."
)

PRELOAD = ["numpy", "torch", "torch.nn", "torch.nn.functional", "matplotlib", "matplotlib.pyplot"]
SLOT_DIR = Path("/tmp/autograder-slots")
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")
FIRST_UID = 61000
MAX_SLOTS = 512


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 2 << 30       # address space on top of what the zygote maps
    cpu_seconds: int = 900            # RLIMIT_CPU of one child (all cells and cases)
    processes: int = 48               # RLIMIT_NPROC for the slot's uid (threads count)
    file_bytes: int = 64 << 20        # RLIMIT_FSIZE: captured output and any file written
    tmpfs_bytes: int = 512 << 20      # size of the private /tmp
    cell_seconds: float = 180.0       # wall time of one cell (ch3 trains a model)
    task_seconds: float = 60.0        # wall time of all cases of one task
    start_seconds: float = 180.0      # wall time for the zygote to import numpy and torch
    cell_output_chars: int = 4000     # captured stdout/stderr kept per cell
    result_bytes: int = 64 << 20      # one case's returned arrays
    stream_bytes: int = 512 << 20     # everything one run may send back

    def for_child(self) -> dict:
        return {
            "memory_bytes": self.memory_bytes, "cpu_seconds": self.cpu_seconds,
            "processes": self.processes, "file_bytes": self.file_bytes,
            "cell_output_chars": self.cell_output_chars, "result_bytes": self.result_bytes,
        }


NEEDS_ROOT_HINT = (
    "the sandbox runs every worker under its own unprivileged uid (so that the process limit "
    "holds per worker and a fork bomb cannot starve the others), and switching uid needs root. "
    "Run the grader as root, e.g. `sudo make grade A=<id>`, or pass --no-sandbox to run "
    "submissions without isolation on a machine you trust."
)


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here: bwrap is missing, or we are not root (and --no-sandbox was not given)."""


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def require_sandbox() -> None:
    """Raise SandboxUnavailable, saying what to do, unless bwrap is installed and we are root."""
    if find_bwrap() is None:
        raise SandboxUnavailable(INSTALL_HINT)
    if os.geteuid() != 0:
        raise SandboxUnavailable(NEEDS_ROOT_HINT)


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
    interpreter = os.path.realpath(sys.executable)
    site = [p for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]} if os.path.isdir(p)]
    return interpreter, sorted(site)


def sandbox_command(uid: int, release_root: Path | None, limits: Limits, control_fd: int) -> list[str]:
    interpreter, site = python_paths()
    prefix = str(Path(interpreter).parents[1])  # .../versions/3.11.7
    bwrap = find_bwrap()
    if bwrap is None:
        raise SandboxUnavailable(INSTALL_HINT)
    command = [
        bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
        "--unshare-cgroup-try", "--die-with-parent", "--new-session",
        # the private /tmp first: a virtualenv that lives under /tmp is bound on top of it
        "--size", str(limits.tmpfs_bytes), "--perms", "1777", "--tmpfs", "/tmp",
        "--ro-bind", "/usr", "/usr",
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
        "--proc", "/proc", "--dev", "/dev",
        "--chdir", "/tmp", "--clearenv",
        "--setenv", "HOME", "/tmp", "--setenv", "MPLBACKEND", "Agg",
        "--setenv", "MPLCONFIGDIR", "/tmp/.matplotlib", "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "MKL_NUM_THREADS", "1", "--setenv", "PATH", "/usr/bin:/bin",
        "--ro-bind", wire.__file__, "/sandbox_worker.py",
        "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all",
        interpreter, "-I", "-S", "/sandbox_worker.py", "--sandboxed", f"--control-fd={control_fd}",
        *site, "--", *PRELOAD,
    ]
    return command


def unsandboxed_command(control_fd: int) -> list[str]:
    interpreter, site = python_paths()
    return [interpreter, "-I", "-S", wire.__file__, f"--control-fd={control_fd}", *site, "--", *PRELOAD]


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
            self.number, self.uid, self._handle = number, FIRST_UID + number, handle
            return
        raise RuntimeError(f"all {MAX_SLOTS} grader slots in {SLOT_DIR} are taken")

    def release(self) -> None:
        self._handle.close()


def processes_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                for line in handle:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


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


@dataclass
class RunResult:
    """What one request produced: the events received, and how the run ended."""

    events: list[tuple[dict, bytes]] = field(default_factory=list)
    ended: str = "done"            # done | timeout | crash | output
    where: tuple | None = None     # ("cell", i) or ("task", t) when it did not end "done"
    detail: str = ""
    processes_at_kill: int = 0


class FrameReader:
    """Frames from one pipe, parsed incrementally; a frame over the cap or bad bytes is an error."""

    def __init__(self, fd: int, cap: int):
        self.fd, self.cap, self.buffer, self.eof = fd, cap, bytearray(), False

    def fill(self) -> None:
        chunk = os.read(self.fd, 1 << 20)
        if chunk:
            self.buffer += chunk
        else:
            self.eof = True

    def next(self):
        """(header, blob), None if incomplete, or ("error", reason)."""
        if len(self.buffer) < 12:
            return None
        if bytes(self.buffer[:4]) != wire.MAGIC:
            return ("error", "garbage")
        n_head, n_blob = wire.HEADER.unpack(bytes(self.buffer[4:12]))
        if n_head + n_blob > self.cap:
            return ("error", "output")
        total = 12 + n_head + n_blob
        if len(self.buffer) < total:
            return None
        try:
            header = wire.json.loads(bytes(self.buffer[12:12 + n_head]))
        except ValueError:
            return ("error", "garbage")
        blob = bytes(self.buffer[12 + n_head:total])
        del self.buffer[:total]
        if not isinstance(header, dict):
            return ("error", "garbage")
        return header, blob


class Sandbox:
    """One sandboxed worker process (a zygote) for one slot; restarted after any abnormal run.

    Two pipes come back from the sandbox: the *event* pipe (the child's cells and results;
    the student's code holds its write end) and the *control* pipe (ready / exit, written
    only by the zygote, closed in the child, and out of reach through /proc because the
    zygote is not dumpable). A run ends only when the control pipe says the child and all
    it started are gone, so nothing a submission writes can bleed into the next one.
    """

    def __init__(self, release_root: Path | None, limits: Limits = Limits(), sandboxed: bool = True):
        if sandboxed:
            require_sandbox()
        self.release_root = release_root
        self.limits = limits
        self.sandboxed = sandboxed
        self.slot = Slot() if sandboxed else None
        self.process: subprocess.Popen | None = None
        self.events: FrameReader | None = None
        self.control: FrameReader | None = None
        self.starts = 0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        control_read, control_write = os.pipe()
        if self.sandboxed:
            command = sandbox_command(self.slot.uid, self.release_root, self.limits, control_write)
        else:
            command = unsandboxed_command(control_write)
        # bwrap --die-with-parent follows the *thread* that forked it, so every sandbox is
        # forked by one long-lived thread: pool threads may come and go, sandboxes stay up
        self.process = _SPAWNER.submit(
            subprocess.Popen, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, pass_fds=(control_write,),
        ).result()
        os.close(control_write)
        self.events = FrameReader(self.process.stdout.fileno(), self.limits.result_bytes + (1 << 20))
        self.control = FrameReader(control_read, 1 << 16)
        self.starts += 1
        deadline = time.monotonic() + self.limits.start_seconds
        while True:
            frame = self.control.next()
            if frame is not None or self.control.eof or time.monotonic() > deadline:
                break
            ready, _, _ = select.select([control_read], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                self.control.fill()
        if not frame or frame[0] == "error" or frame[0].get("ev") != "ready" or frame[0].get("error"):
            problem = frame[0].get("error") if frame and frame[0] != "error" else None
            self.kill()
            raise RuntimeError("the sandboxed worker did not start"
                               + (f": {problem}" if problem else " (is the virtualenv readable inside bwrap?)"))

    def kill(self) -> int:
        """Kill the sandbox and everything in it; returns how many processes the slot had."""
        count = len(processes_of_uid(self.slot.uid)) if self.slot else 0
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (self.process.stdin, self.process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                os.close(self.control.fd)
            except OSError:
                pass
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
        if self.slot is not None:
            self.slot.release()

    # -- one request -----------------------------------------------------------------------

    def _send(self, header: dict, blob: bytes = b"") -> bool:
        try:
            self.process.stdin.write(wire.encode_frame(header, blob))
            self.process.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def _pump(self, deadline: float) -> str:
        """Wait until some bytes arrive on either pipe: "ok", "timeout" or "eof"."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        fds = [r.fd for r in (self.events, self.control) if not r.eof]
        if not fds:
            return "eof"
        ready, _, _ = select.select(fds, [], [], remaining)
        if not ready:
            return "timeout"
        for reader in (self.events, self.control):
            if reader.fd in ready:
                reader.fill()
        return "eof" if self.control.eof else "ok"

    def _drain_events(self) -> None:
        while not self.events.eof and select.select([self.events.fd], [], [], 0)[0]:
            self.events.fill()
            if len(self.events.buffer) > self.limits.stream_bytes:
                break

    def _abort(self, result: RunResult, where, reason: str) -> RunResult:
        result.where = where
        result.processes_at_kill = self.kill()
        if reason == "timeout":
            result.ended = "timeout"
            seconds = self.limits.task_seconds if where and where[0] == "task" else self.limits.cell_seconds
            result.detail = f"ran longer than {seconds:g} s"
        elif reason == "output":
            result.ended, result.detail = "output", "sent back more data than allowed"
        elif reason == "garbage":
            result.ended, result.detail = "crash", "wrote over the grader's result channel"
        else:
            result.ended, result.detail = "crash", "the worker process was killed"
        return result

    def run(self, request: dict, cases: dict, blob: bytes) -> RunResult:
        """Run the cells of `request`, then (phase two) the `cases` with their npz `blob`.

        The cases go down the pipe only when the child reports its cells done, and events
        that claim to be cell output after that point are dropped: what a cell prints can
        never contain a hidden input.
        """
        if self.process is None or self.process.poll() is not None:
            self.kill()
            self.start()
        self.events.buffer.clear()
        request = dict(request, limits=self.limits.for_child())
        result = RunResult()
        if not self._send(request):
            return self._abort(result, None, "eof")
        state = {"cells_done": False, "done": False, "where": None, "received": 0,
                 "deadline": time.monotonic() + self.limits.cell_seconds}

        def handle(header: dict, data: bytes):
            """Apply one event; returns an abort reason or None."""
            state["received"] += len(data)
            if state["received"] > self.limits.stream_bytes:
                return "output"
            event = header.get("ev")
            if event in ("cell_start", "cell", "cells_done") and state["cells_done"]:
                return None  # forged by the submission after its cells ended: ignored
            if event in ("task_start", "case", "task_missing", "task_end") and not state["cells_done"]:
                return None  # no case was sent yet: anything claiming to be a result is forged
            result.events.append((header, data))
            if event == "cell_start":
                state["where"] = ("cell", header.get("cell"))
                state["deadline"] = time.monotonic() + self.limits.cell_seconds
            elif event == "cells_done":
                state["cells_done"], state["where"] = True, None
                if not self._send(cases, blob):
                    return "eof"
                state["deadline"] = time.monotonic() + self.limits.task_seconds
            elif event == "task_start":
                state["where"] = ("task", header.get("task"))
                state["deadline"] = time.monotonic() + self.limits.task_seconds
            elif event == "done":
                state["done"] = True
                state["deadline"] = time.monotonic() + 30  # the zygote sweeps, then reports exit
            return None

        while True:
            status = self._pump(state["deadline"])
            while (frame := self.events.next()) is not None:
                if frame[0] == "error":
                    return self._abort(result, state["where"], frame[1])
                reason = handle(*frame)
                if reason:
                    return self._abort(result, state["where"], reason)
            exit_frame = self.control.next()
            if exit_frame is not None:
                if exit_frame[0] == "error" or exit_frame[0].get("ev") != "exit":
                    return self._abort(result, state["where"], "garbage")
                self._drain_events()
                while (frame := self.events.next()) is not None and frame[0] != "error":
                    if handle(*frame):
                        break
                code = exit_frame[0].get("code")
                if state["done"] and code == 0:
                    return result
                result.where = state["where"]
                if code == -signal.SIGXCPU:
                    result.ended, result.detail = "timeout", "used up its CPU-time limit"
                else:
                    how = f"killed by signal {-code}" if isinstance(code, int) and code < 0 else f"exited with status {code}"
                    result.ended, result.detail = "crash", f"the process ended early ({how})"
                return result
            if status in ("timeout", "eof"):
                return self._abort(result, state["where"], status)
