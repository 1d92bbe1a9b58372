"""The zygote handle: one long-lived sandboxed worker per slot, and each run sent to it.

``Sandbox`` starts the worker (``autograder/zygote.py``, under the command line of
``autograder.sandbox.command``, in a cgroup of its own where the machine has one: the slot's,
with the zygote in its ``zygote`` leaf and each run in a fresh leaf made for it), waits for
its ``ready`` message, and kills it with everything it started (process group, pid namespace,
every process of the slot's uid). ``Sandbox.run`` gives each run its own pair of pipes (handed
to the zygote over its control socket, with a nonce), writes the request and later the cases
into one and feeds the events of the other, with the trusted clock, to ``protocol.Run``; past
a deadline, or if the stream breaks, the whole sandbox is killed and restarted for the next
request.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import secrets
import select
import shlex
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autograder import cgroups, frames, wire
from autograder.protocol import LostSandbox, Plan, Run, RunResult
from autograder.sandbox import host
from autograder.sandbox.command import sandbox_command, unsandboxed_command
from autograder.sandbox.limits import DEFAULT_LIMITS, Limits
from autograder.sandbox.processes import descendants, processes_of_uid, tree_cpu_ticks
from autograder.sandbox.python import FULL_PRELOAD
from autograder.sandbox.slots import Slot

_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")
_ROOTLESS_SLOTS = itertools.count()
START_MEMORY = 4 << 30  # the zygote's room (it imports NumPy and PyTorch), beside a run's limit
LEAK_SLACK = 256 << 20  # unreclaimable memory left after a run beyond this: restart the sandbox
CPU_SAMPLE_SECONDS = 1.0  # how often a run samples its sandbox's CPU time (the idle check)


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
            host.require_sandbox()
        self.release_root = release_root
        self.limits = limits
        self.sandboxed = sandboxed
        self.preload = tuple(preload)
        self.slot = Slot() if sandboxed and not host.rootless() else None
        self.cgroup, self.cgroup_note = None, "not sandboxed"
        if sandboxed:
            name = (
                f"slot-{self.slot.uid}" if self.slot else f"slot-rootless-{next(_ROOTLESS_SLOTS)}"
            )
            self.cgroup, self.cgroup_note = cgroups.open_cgroup(name)
        self.zygote_cgroup = self._zygote_cgroup()
        self.runs = itertools.count()  # names each run's cgroup
        self.process: subprocess.Popen | None = None
        self.control_socket: socket.socket | None = None
        self.control: wire.FrameReader | None = None
        self.starts = 0
        self.dirty = False
        self.baseline = 0  # the zygote's own unreclaimable memory, measured once it is ready
        self.fresh = False  # each run in namespaces of its own (isolation.py), else swept
        self.run_cgroup: cgroups.Cgroup | None = None  # the cgroup of the run under way

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the zygote and wait (``start_seconds``) for its ``ready`` message."""
        # the control socket is the zygote's only channel: runs arrive on it, each with its
        # own pipes, and its ready/exit messages come back on it; no child ever holds it
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = self._spawn(self._command(theirs.fileno()), theirs.fileno())
        finally:
            theirs.close()
        ours.setblocking(False)
        self.control_socket = ours
        self.control = wire.FrameReader(ours.fileno(), wire.CONTROL, 0)
        self.starts += 1
        self.dirty = False
        ready = self._await_ready()
        self.fresh = ready["fresh"]
        if self.cgroup is not None:
            self.baseline = self.cgroup.unreclaimable()

    def _zygote_cgroup(self) -> cgroups.Cgroup | None:
        """The zygote's leaf in the slot's cgroup, beside the runs' (on v2 the slot's cgroup
        itself may hold no process once it has children). The slot's limits bound the zygote
        and a run together; a run's own cgroup bounds the run alone (``_run_cgroup``)."""
        if self.cgroup is None:
            return None
        try:
            self.cgroup.set_limits(self.limits.memory_bytes + START_MEMORY, self.limits.processes)
            return self.cgroup.child("zygote")
        except OSError as err:
            self.cgroup.remove()
            self.cgroup = None
            self.cgroup_note = f"cannot create the grader's cgroups ({err.strerror or err})"
            return None

    def _run_cgroup(self) -> cgroups.Cgroup | None:
        """A fresh cgroup for one run, its memory limit the submission's limit exactly: nothing
        is charged to it before the run's first process moves in (no page cache of an earlier
        run, none of the zygote's memory), so every run may use the same, whatever ran before."""
        if self.cgroup is None:
            return None
        group = self.cgroup.child(f"run-{next(self.runs)}")
        group.set_limits(self.limits.memory_bytes, self.limits.processes)
        return group

    def _command(self, control_fd: int) -> list[str]:
        """The zygote's command line, sandboxed or not, made to join the cgroup first."""
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
        if self.cgroup is None:
            return command
        self.cgroup.kill_all()
        files = " ".join(shlex.quote(f) for f in self.zygote_cgroup.procs_files)
        return ["/bin/sh", "-c", f'echo $$ | tee {files} > /dev/null && exec "$@"', "sh", *command]

    @staticmethod
    def _spawn(command: list[str], control_fd: int) -> subprocess.Popen:
        # bwrap --die-with-parent follows the *thread* that forked it, so every sandbox is
        # forked by one long-lived thread: pool threads may come and go, sandboxes stay up
        return _SPAWNER.submit(
            subprocess.Popen,
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            pass_fds=(control_fd,),
        ).result()

    def _await_ready(self) -> dict:
        """The zygote's ``ready`` header; else the sandbox is killed and RuntimeError says why."""
        deadline = time.monotonic() + self.limits.start_seconds
        frame, problem = None, None
        try:
            while frame is None and not self.control.eof and time.monotonic() < deadline:
                if select.select(
                    [self.control_socket], [], [], max(0.0, deadline - time.monotonic())
                )[0]:
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
        return frame[0]

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
        self.run_cgroup = self._run_cgroup()
        # the run's first step moves it into its cgroup through these (zygote.py)
        cgroup_fds = self.run_cgroup.open_procs() if self.run_cgroup else []
        nonce = secrets.token_hex(16)
        events_read, events_write = os.pipe()
        input_read, input_write = os.pipe()
        try:
            header = {"run": nonce, "workdir": request["workdir"], "cgroups": len(cgroup_fds)}
            message = frames.encode_frame(dict(header, tmp_bytes=self.limits.tmpfs_bytes))
            held = [events_write, input_read, *cgroup_fds]
            try:
                sent = socket.send_fds(self.control_socket, [message], held)
            except OSError:
                sent = 0
            for fd in held:
                os.close(fd)
            _set_nonblocking(input_write)
            events = wire.FrameReader(events_read, wire.EVENTS, self.limits.result_bytes)
            if sent != len(message):
                return self._end(run, events, "lost", "the sandbox took no run")
            outbox = bytearray(frames.encode_frame(request))
            return self._drive(run, events, input_write, outbox, nonce, received_before)
        finally:
            for fd in (events_read, input_write):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if self.run_cgroup is not None:
                self.run_cgroup.remove()
                self.run_cgroup = None

    def _drive(self, run, events, input_fd, outbox, nonce, received_before):
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
                return self._end(run, events, how, detail)
            readers = [r.fd for r in (events, self.control) if not r.eof]
            try:
                ready, writable, _ = select.select(
                    readers,
                    [input_fd] if outbox else [],
                    [],
                    min(run.step_deadline(), next_sample) - now,
                )
            except (OSError, ValueError):
                return self._broken(run, events)
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
                    return self._end(run, events, "output", "sent back more data than allowed")
                while (frame := events.next()) is not None:
                    cases = run.on_event(*frame)
                    if cases is not None:
                        outbox.extend(cases)
                if self.control.fd in ready:
                    self.control.fill()
                exit_frame = self.control.next()
            except wire.ProtocolViolation as err:
                if not run.started_submission:  # nothing of the submission ran yet
                    return self._end(run, events, "lost", f"before its start: {err}")
                return self._end(run, events, "protocol", f"broke the result protocol ({err})")
            if exit_frame is not None:
                try:
                    run.on_exit(exit_frame[0], nonce)
                except LostSandbox as err:
                    return self._end(run, events, "lost", str(err))
                return self._finish(run, exit_frame[0], events, input_fd, outbox)
            if self.control.eof or (events.eof and not ready):
                return self._broken(run, events)

    def _broken(self, run, events) -> RunResult:
        """The zygote or the child's stream went away without an exit message."""
        if not run.started_submission:
            return self._end(run, events, "lost", "the sandbox died before the run")
        return self._end(run, events, "crash", "the worker process was killed")

    def _end(self, run, events, how: str, detail: str, kill: bool = True):
        result = run.result
        result.ended, result.detail, result.where = how, detail, run.where()
        result.received = events.received
        result.oom_kills = self.run_cgroup.oom_kills() if self.run_cgroup else 0
        if result.oom_kills and how in ("crash", "timeout"):
            result.ended, result.detail = (
                "memory",
                "went over the memory limit (the kernel killed it)",
            )
        if kill:
            result.processes_at_kill = self.kill()
        return result

    def _finish(self, run, exit_header, events, input_fd, outbox) -> RunResult:
        """The zygote says the child and everything it started are gone: read what is left."""
        try:
            while select.select([events.fd], [], [], 0)[0] and not events.eof:
                events.fill()
                if events.received > self.limits.stream_bytes:
                    return self._end(run, events, "output", "sent back more data than allowed")
            while (frame := events.next()) is not None:
                run.on_event(*frame)
            if events.buffer:
                raise wire.ProtocolViolation("a truncated frame")
        except wire.ProtocolViolation as err:
            if not run.started_submission:
                return self._end(run, events, "lost", f"before its start: {err}")
            return self._end(run, events, "protocol", f"broke the result protocol ({err})")
        # anything left unread or unaccounted for on a channel: a fresh sandbox next time
        self.dirty = not exit_header["clean"] or bool(outbox) or _unread_bytes(input_fd) > 0
        code = exit_header["code"]
        result = run.result
        if run.phase == "finished" and code == 0:
            result.received = events.received
            if self.cgroup is not None:
                result.oom_kills = self.run_cgroup.oom_kills()
                # memory still held after the sweep (a leak) means a fresh sandbox next time
                leaked = self.cgroup.unreclaimable() - self.baseline
                self.dirty = self.dirty or leaked > LEAK_SLACK
            if self.dirty:
                self.kill()
            return result
        if not run.started_submission:
            return self._end(run, events, "lost", f"the run ended before its start (status {code})")
        if code == -signal.SIGXCPU:
            return self._end(run, events, "timeout", "used up its CPU-time limit")
        how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return self._end(run, events, "crash", f"the process ended early ({how})")


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
