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


class SandboxUnavailable(RuntimeError):
    """bwrap is missing (and --no-sandbox was not given)."""


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def _bind_with_parents(path: str) -> list[str]:
    """--dir for every parent (mode 0755, so the unprivileged uid can traverse), then the bind."""
    args: list[str] = []
    parts = Path(path).parts
    for depth in range(2, len(parts)):
        args += ["--perms", "0755", "--dir", str(Path(*parts[:depth]))]
    return args + ["--ro-bind", path, path]


def python_paths() -> tuple[str, list[str]]:
    """(the real interpreter, the site-packages directories it needs)."""
    interpreter = os.path.realpath(sys.executable)
    site = [p for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]} if os.path.isdir(p)]
    return interpreter, sorted(site)


def sandbox_command(uid: int, release_root: Path | None, limits: Limits) -> list[str]:
    interpreter, site = python_paths()
    prefix = str(Path(interpreter).parents[1])  # .../versions/3.11.7
    bwrap = find_bwrap()
    if bwrap is None:
        raise SandboxUnavailable(INSTALL_HINT)
    command = [
        bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
        "--unshare-cgroup-try", "--die-with-parent", "--new-session",
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
        "--size", str(limits.tmpfs_bytes), "--perms", "1777", "--tmpfs", "/tmp",
        "--chdir", "/tmp", "--clearenv",
        "--setenv", "HOME", "/tmp", "--setenv", "MPLBACKEND", "Agg",
        "--setenv", "MPLCONFIGDIR", "/tmp/.matplotlib", "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "MKL_NUM_THREADS", "1", "--setenv", "PATH", "/usr/bin:/bin",
        "--ro-bind", wire.__file__, "/sandbox_worker.py",
        "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all",
        interpreter, "-I", "-S", "/sandbox_worker.py", "--sandboxed", *site, "--", *PRELOAD,
    ]
    return command


def unsandboxed_command() -> list[str]:
    interpreter, site = python_paths()
    return [interpreter, "-I", "-S", wire.__file__, *site, "--", *PRELOAD]


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


@dataclass
class RunResult:
    """What one request produced: the events received, and how the run ended."""

    events: list[tuple[dict, bytes]] = field(default_factory=list)
    ended: str = "done"            # done | timeout | crash | output
    where: tuple | None = None     # ("cell", i) or ("task", t) when it did not end "done"
    detail: str = ""
    processes_at_kill: int = 0


class Sandbox:
    """One sandboxed worker process (a zygote) for one slot; restarted after any abnormal run."""

    def __init__(self, release_root: Path | None, limits: Limits = Limits(), sandboxed: bool = True):
        if sandboxed and find_bwrap() is None:
            raise SandboxUnavailable(INSTALL_HINT)
        self.release_root = release_root
        self.limits = limits
        self.sandboxed = sandboxed
        self.slot = Slot() if sandboxed else None
        self.process: subprocess.Popen | None = None
        self._buffer = bytearray()
        self.starts = 0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        if self.sandboxed:
            command = sandbox_command(self.slot.uid, self.release_root, self.limits)
        else:
            command = unsandboxed_command()
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )
        self._buffer = bytearray()
        self.starts += 1
        header, _ = self._next_frame(time.monotonic() + self.limits.start_seconds)
        if header is None or header.get("ev") != "ready":
            self.kill()
            raise RuntimeError("the sandboxed worker did not start (is the virtualenv readable?)")

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

    def _next_frame(self, deadline: float):
        """The next frame, or (None, reason) on timeout / EOF / garbage."""
        fd = self.process.stdout.fileno()
        while True:
            if len(self._buffer) >= 12:
                if bytes(self._buffer[:4]) != wire.MAGIC:
                    return None, "garbage"
                n_head, n_blob = wire.HEADER.unpack(bytes(self._buffer[4:12]))
                if n_head + n_blob > self.limits.result_bytes + (1 << 20):
                    return None, "output"
                total = 12 + n_head + n_blob
                if len(self._buffer) >= total:
                    try:
                        header = wire.json.loads(bytes(self._buffer[12:12 + n_head]))
                    except ValueError:
                        return None, "garbage"
                    blob = bytes(self._buffer[12 + n_head:total])
                    del self._buffer[:total]
                    if not isinstance(header, dict):
                        return None, "garbage"
                    return header, blob
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, "timeout"
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None, "timeout"
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None, "eof"
            self._buffer += chunk

    def run(self, request: dict, blob: bytes) -> RunResult:
        if self.process is None or self.process.poll() is not None:
            self.kill()
            self.start()
        request = dict(request, limits=self.limits.for_child())
        result = RunResult()
        try:
            self.process.stdin.write(wire.encode_frame(request, blob))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            result.ended, result.detail = "crash", "the sandboxed worker died before the run"
            return result
        where: tuple | None = None
        deadline = time.monotonic() + self.limits.cell_seconds
        received = 0
        while True:
            header, blob_or_reason = self._next_frame(deadline)
            if header is None:
                reason = blob_or_reason
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
            received += len(blob_or_reason)
            event = header.get("ev")
            if event == "exit":
                code = header.get("code")
                result.where = where
                if code == -signal.SIGXCPU:
                    result.ended, result.detail = "timeout", "used up its CPU-time limit"
                else:
                    how = f"killed by signal {-code}" if isinstance(code, int) and code < 0 else f"exited with status {code}"
                    result.ended, result.detail = "crash", f"the process ended early ({how})"
                return result
            result.events.append((header, blob_or_reason))
            if received > self.limits.stream_bytes:
                result.where = where
                result.processes_at_kill = self.kill()
                result.ended, result.detail = "output", "sent back more data than allowed"
                return result
            if event == "cell_start":
                where = ("cell", header.get("cell"))
                deadline = time.monotonic() + self.limits.cell_seconds
            elif event == "task_start":
                where = ("task", header.get("task"))
                deadline = time.monotonic() + self.limits.task_seconds
            elif event == "done":
                # the child's exit frame follows once the zygote has swept the sandbox
                header, _ = self._next_frame(time.monotonic() + 30)
                if header is None or header.get("ev") != "exit":
                    self.kill()
                return result
