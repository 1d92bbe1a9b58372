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

import dataclasses
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

from autograder import contract, wire

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
    """Every limit of one submission. The wall-clock budgets are kept by the trusted side:
    nothing the sandbox sends extends them, and retries spend the same submission budget."""

    memory_bytes: int = 2 << 30       # address space on top of what the zygote maps
    cpu_seconds: int = 900            # RLIMIT_CPU of one child (all cells and cases)
    processes: int = 48               # RLIMIT_NPROC for the slot's uid (threads count)
    file_bytes: int = 64 << 20        # RLIMIT_FSIZE: captured output and any file written
    tmpfs_bytes: int = 512 << 20      # size of the private /tmp
    submission_seconds: float = 240.0  # wall time of the whole submission, retries included
    cell_seconds: float = 120.0       # wall time of one cell (within the submission budget)
    task_seconds: float = 60.0        # wall time of all cases of one task
    start_seconds: float = 180.0      # wall time for the zygote to import numpy and torch
    cell_output_chars: int = 4000     # captured stdout/stderr kept per cell
    result_bytes: int = 64 << 20      # one case's returned arrays
    stream_bytes: int = 512 << 20     # everything one submission may send back

    def for_child(self) -> dict:
        return {"address_space_bytes": self.memory_bytes, "cpu_seconds": self.cpu_seconds,
                "processes": self.processes, "file_bytes": self.file_bytes,
                "cell_output_chars": self.cell_output_chars}

    def merged(self, overrides: dict) -> Limits:
        """These limits with a chapter's overrides applied (unknown names are an error)."""
        return dataclasses.replace(self, **overrides) if overrides else self


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
        "--ro-bind", contract.__file__, "/sandbox_worker.py",
        "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all",
        interpreter, "-I", "-S", "/sandbox_worker.py", "--sandboxed", f"--control-fd={control_fd}",
        *site, "--", *PRELOAD,
    ]
    return command


def unsandboxed_command(control_fd: int) -> list[str]:
    interpreter, site = python_paths()
    return [interpreter, "-I", "-S", contract.__file__, f"--control-fd={control_fd}", *site, "--", *PRELOAD]


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
class Plan:
    """What one attempt runs, in order: every event is checked against it."""

    cells: list            # program cell indices to run
    tasks: list            # (task index, number of cases) to run


@dataclass
class RunResult:
    """What one attempt produced (every event already validated) and how it ended."""

    cells: dict = field(default_factory=dict)     # program cell -> cell header
    cases: dict = field(default_factory=dict)     # (task, case) -> contract outcome
    missing: dict = field(default_factory=dict)   # task -> "undefined" | "not_callable"
    finished_tasks: list = field(default_factory=list)
    ended: str = "done"    # done | timeout | budget | crash | output | protocol | grader
    where: tuple | None = None  # ("cell", i) or ("task", t) when it did not end "done"
    detail: str = ""
    processes_at_kill: int = 0
    received: int = 0


def _set_nonblocking(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)


class Sandbox:
    """One sandboxed worker process (a zygote) for one slot; restarted after any abnormal run.

    Two pipes come back from the sandbox: the *event* pipe (the child's cells and results;
    the student's code holds its write end) and the *control* pipe (ready / exit, written
    only by the zygote, closed in the child, and out of reach through /proc because the
    zygote is not dumpable). Every write into the sandbox is non-blocking and bounded by the
    trusted deadline, so a submission that stops reading cannot stall the grader.
    """

    def __init__(self, release_root: Path | None, limits: Limits = Limits(), sandboxed: bool = True):
        if sandboxed:
            require_sandbox()
        self.release_root = release_root
        self.limits = limits
        self.sandboxed = sandboxed
        self.slot = Slot() if sandboxed else None
        self.process: subprocess.Popen | None = None
        self.control: wire.FrameReader | None = None
        self.starts = 0
        self.dirty = False

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
        _set_nonblocking(self.process.stdin.fileno())
        self.control = wire.FrameReader(control_read, wire.CONTROL, 0)
        self.starts += 1
        self.dirty = False
        deadline = time.monotonic() + self.limits.start_seconds
        frame, problem = None, None
        try:
            while frame is None and not self.control.eof and time.monotonic() < deadline:
                if select.select([control_read], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    self.control.fill()
                frame = self.control.next()
        except wire.ProtocolViolation as err:
            problem = str(err)
        if frame is None or frame[0]["ev"] != "ready" or frame[0]["error"]:
            problem = problem or (frame[0].get("error") if frame else None)
            self.kill()
            raise RuntimeError("the sandboxed worker did not start"
                               + (f": {problem}" if problem else " (is the virtualenv readable inside bwrap?)"))

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None and not self.dirty

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

    # -- one attempt ------------------------------------------------------------------------

    def run(self, request: dict, cases: bytes, plan: Plan, deadline: float, accept_case,
            received_before: int = 0) -> RunResult:
        """Run the cells of ``request``, then (once they are done) send the ``cases`` frame.

        ``deadline``: the submission's absolute wall-clock budget (time.monotonic()); each
        cell and each task also has its own budget, started by the trusted clock when the
        previous step's event arrives. ``accept_case(task, case, header, blob)`` turns a case
        event into an outcome (or raises ProtocolViolation). Never raises for anything the
        sandbox does.
        """
        if not self.alive():
            self.kill()
            self.start()
        result = RunResult()
        stdin_fd = self.process.stdin.fileno()
        events = wire.FrameReader(self.process.stdout.fileno(), wire.EVENTS, self.limits.result_bytes)
        outbox = bytearray(contract.encode_frame(request))
        state = {"phase": "setup", "pos": 0, "task": 0, "case": 0, "started": time.monotonic()}

        def where():
            if state["phase"] in ("setup", "cells") and state["pos"] < len(plan.cells):
                return ("cell", plan.cells[state["pos"]])
            if state["phase"] == "tasks" and state["task"] < len(plan.tasks):
                return ("task", plan.tasks[state["task"]][0])
            return None

        def step_deadline() -> float:
            seconds = {"setup": self.limits.cell_seconds, "cells": self.limits.cell_seconds,
                       "tasks": self.limits.task_seconds}.get(state["phase"], 10.0)
            if state["phase"] == "finished":  # the child is done; the zygote sweeps
                return state["started"] + seconds
            return min(deadline, state["started"] + seconds)

        def advance(phase=None):
            state["started"] = time.monotonic()
            if phase:
                state["phase"] = phase

        def handle(header: dict, blob: bytes) -> None:
            event, phase = header["ev"], state["phase"]
            if phase == "setup" and event == "setup":
                return advance("cells")
            if phase == "cells":
                pos = state["pos"]
                if event == "cell" and pos < len(plan.cells) and header["cell"] == plan.cells[pos]:
                    result.cells[header["cell"]] = header
                    state["pos"] += 1
                    return advance()
                if event == "cells_done" and pos == len(plan.cells):
                    outbox.extend(cases)
                    return advance("tasks")
            if phase == "tasks":
                if state["task"] == len(plan.tasks):
                    if event == "done":
                        return advance("finished")
                    raise wire.ProtocolViolation("event after the last task")
                task, n_cases = plan.tasks[state["task"]]
                if event == "case" and header["task"] == task and header["case"] == state["case"] \
                        and state["case"] < n_cases and task not in result.missing:
                    result.cases[(task, state["case"])] = accept_case(task, state["case"], header, blob)
                    state["case"] += 1
                    return None
                if event == "task_missing" and header["task"] == task and state["case"] == 0 \
                        and task not in result.missing:
                    result.missing[task] = header["code"]
                    return None
                if event == "task_end" and header["task"] == task and \
                        (state["case"] == n_cases or task in result.missing):
                    result.finished_tasks.append(task)
                    state["task"] += 1
                    state["case"] = 0
                    return advance()
            raise wire.ProtocolViolation(f"unexpected {event} event")

        def end(how: str, detail: str, kill: bool = True) -> RunResult:
            result.ended, result.detail, result.where = how, detail, where()
            result.received = events.received
            if kill:
                result.processes_at_kill = self.kill()
            return result

        while True:
            now = time.monotonic()
            limit = step_deadline()
            if now >= limit:
                if now >= deadline and state["phase"] != "finished":
                    return end("budget", f"used up the submission's budget of {self.limits.submission_seconds:g} s")
                seconds = self.limits.task_seconds if state["phase"] == "tasks" else self.limits.cell_seconds
                return end("timeout", f"ran longer than {seconds:g} s")
            readers = [r.fd for r in (events, self.control) if not r.eof]
            try:
                ready, writable, _ = select.select(readers, [stdin_fd] if outbox else [], [], limit - now)
            except (OSError, ValueError):
                return end("crash", "the worker process was killed")
            if writable:
                try:
                    outbox[: os.write(stdin_fd, bytes(outbox[: 1 << 16]))] = b""
                except BlockingIOError:
                    pass
                except OSError:  # the sandbox closed its end: it is gone
                    return end("crash", "the worker process was killed")
            try:
                if events.fd in ready:
                    events.fill()
                if received_before + events.received > self.limits.stream_bytes:
                    return end("output", "sent back more data than allowed")
                while (frame := events.next()) is not None:
                    handle(*frame)
                if self.control.fd in ready:
                    self.control.fill()
                exit_frame = self.control.next()
            except wire.ProtocolViolation as err:
                return end("protocol", f"broke the result protocol ({err})")
            if exit_frame is not None:
                return self._finish(exit_frame[0], events, handle, state, end, result)
            if self.control.eof or (events.eof and not ready):
                return end("crash", "the worker process was killed")

    def _finish(self, exit_header, events, handle, state, end, result) -> RunResult:
        """The zygote says the child and everything it started are gone: read what is left."""
        if exit_header["ev"] != "exit":
            return end("protocol", "broke the result protocol (unexpected control message)")
        try:
            while select.select([events.fd], [], [], 0)[0] and not events.eof:
                events.fill()
                if events.received > self.limits.stream_bytes:
                    return end("output", "sent back more data than allowed")
            while (frame := events.next()) is not None:
                handle(*frame)
            if events.buffer:
                raise wire.ProtocolViolation("a truncated frame")
        except wire.ProtocolViolation as err:
            return end("protocol", f"broke the result protocol ({err})")
        self.dirty = not exit_header["clean"]
        code = exit_header["code"]
        if state["phase"] == "finished" and code == 0:
            result.received = events.received
            if self.dirty:
                self.kill()
            return result
        if state["phase"] == "setup":
            return end("grader", f"the sandbox could not prepare the run (status {code})")
        if code == -signal.SIGXCPU:
            return end("timeout", "used up its CPU-time limit")
        how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return end("crash", f"the process ended early ({how})")
