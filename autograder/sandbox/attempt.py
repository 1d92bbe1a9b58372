"""One run of a sandbox, driven to its end: what the run's pipe and the zygote's control
socket say, read against the trusted clock.

``Attempt.drive`` writes the request (and, once the cells are done, the cases) into the run's
input pipe, never blocking; feeds each event of the run's event pipe to ``protocol.Run``, the
order of events and their budgets; samples the sandbox's CPU time for the idle check; and ends
the run at the zygote's exit message, at a deadline, at a stream over ``stream_bytes`` or at a
protocol violation. It says how the run ended (``protocol.RunResult``) and what the sandbox
needs next: ``must_kill`` (anything abnormal: the sandbox is killed and restarted for the next
request) or ``dirty`` (something was left unread or unaccounted for: a fresh sandbox next).
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import time

from autograder.sandbox import wire
from autograder.sandbox.cgroups import Cgroup
from autograder.sandbox.limits import Limits
from autograder.sandbox.processes import tree_cpu_ticks
from autograder.sandbox.protocol import LostSandbox, Run, RunResult

CPU_SAMPLE_SECONDS = 1.0  # how often a run samples its sandbox's CPU time (the idle check)
NOT_SAMPLED = -1  # the CPU time before the first sample: no process tree has it


class Attempt:
    """One run: ``run`` (the state machine) fed from ``events`` (the run's pipe) and
    ``control`` (the zygote's messages); ``outbox`` is what is still to be written into
    ``input_fd``; ``sandbox_pid`` roots the process tree whose CPU time is sampled;
    ``run_cgroup`` counts the run's memory kills; ``received_before``: the bytes earlier
    attempts of the submission sent back (one stream bound for all)."""

    def __init__(
        self,
        run: Run,
        events: wire.FrameReader,
        control: wire.FrameReader,
        input_fd: int,
        outbox: bytearray,
        nonce: str,
        limits: Limits,
        sandbox_pid: int,
        run_cgroup: Cgroup | None,
        received_before: int = 0,
    ):
        self.run, self.events, self.control = run, events, control
        self.input_fd, self.outbox, self.nonce = input_fd, outbox, nonce
        self.limits, self.sandbox_pid, self.run_cgroup = limits, sandbox_pid, run_cgroup
        self.received_before = received_before
        self.must_kill = False  # the whole sandbox is killed after this run
        self.dirty = False  # the run ended well but left something: a fresh sandbox next
        self.clean_exit = False  # the run finished and its child exited 0

    def drive(self) -> RunResult:
        """Until the zygote's exit message, a deadline, a broken stream or a violation."""
        run, events = self.run, self.events
        # the first sample (a walk of the machine's process table, about 4 ms) a second in: a
        # run that ends sooner needs none. Until then the CPU time counts as a value no tree
        # has, so that sample reads as activity, as a sample at the start would have (a run's
        # start uses CPU): the idle check never ends a step sooner for it
        now = time.monotonic()
        run.on_cpu_time(now, NOT_SAMPLED)
        next_sample = now + CPU_SAMPLE_SECONDS
        while True:
            now = time.monotonic()
            if now >= next_sample:
                run.on_cpu_time(now, tree_cpu_ticks(self.sandbox_pid))
                next_sample = now + CPU_SAMPLE_SECONDS
            expired = run.expired(now)
            if expired is not None:
                return self.end(*expired)
            readers = [r.fd for r in (events, self.control) if not r.eof]
            try:
                ready, writable, _ = select.select(
                    readers,
                    [self.input_fd] if self.outbox else [],
                    [],
                    min(run.step_deadline(), next_sample) - now,
                )
            except (OSError, ValueError):
                return self._broken()
            if writable:
                self._write_some()
            try:
                if events.fd in ready:
                    events.fill()
                if self.received_before + events.received > self.limits.stream_bytes:
                    return self.end("output", "sent back more data than allowed")
                while (frame := events.next()) is not None:
                    cases = run.on_event(*frame)
                    if cases is not None:
                        self.outbox.extend(cases)
                if self.control.fd in ready:
                    self.control.fill()
                exit_frame = self.control.next()
            except wire.ProtocolViolation as err:
                return self._violation(err)
            if exit_frame is not None:
                try:
                    run.on_exit(exit_frame[0], self.nonce)
                except LostSandbox as err:
                    return self.end("lost", str(err))
                return self._finish(exit_frame[0])
            if self.control.eof or (events.eof and not ready):
                return self._broken()

    def _write_some(self) -> None:
        """As much of the outbox as the pipe takes now (never blocking)."""
        try:
            written = os.write(self.input_fd, bytes(self.outbox[: 1 << 16]))
            self.outbox[:written] = b""
        except BlockingIOError:
            pass
        except OSError:  # the child closed its end (or is gone): no more input is read
            self.outbox.clear()

    def _violation(self, err: wire.ProtocolViolation) -> RunResult:
        if not self.run.started_submission:  # nothing of the submission ran yet
            return self.end("lost", f"before its start: {err}")
        return self.end("protocol", f"broke the result protocol ({err})")

    def _broken(self) -> RunResult:
        """The zygote or the child's stream went away without an exit message."""
        if not self.run.started_submission:
            return self.end("lost", "the sandbox died before the run")
        return self.end("crash", "the worker process was killed")

    def end(self, how: str, detail: str) -> RunResult:
        """The run ends abnormally: its result says how and where; the sandbox is killed.

        A run that would end "lost" (the sandbox broke, or took no run, before the ``setup``
        event) while the submission's budget is spent ends "budget" instead: the time is the
        submission's, whatever step the run was in (``protocol.Run.expired``), so a rerun is
        not owed. The details said here are for the public run; of the hidden run only the
        reason leaves (``grading.run``)."""
        if how == "lost" and time.monotonic() >= self.run.deadline:
            how = "budget"
        if how == "budget":
            detail = f"used up the submission's budget of {self.limits.submission_seconds:g} s"
        result = self.run.result
        result.ended, result.detail, result.where = how, detail, self.run.where()
        result.received = self.events.received
        result.oom_kills = self.run_cgroup.oom_kills() if self.run_cgroup else 0
        if result.oom_kills and how in ("crash", "timeout"):
            result.ended, result.detail = (
                "memory",
                "went over the memory limit (the kernel killed it)",
            )
        self.must_kill = True
        return result

    def _finish(self, exit_header: dict) -> RunResult:
        """The zygote says the child and everything it started are gone: read what is left."""
        events = self.events
        try:
            while select.select([events.fd], [], [], 0)[0] and not events.eof:
                events.fill()
                if events.received > self.limits.stream_bytes:
                    return self.end("output", "sent back more data than allowed")
            while (frame := events.next()) is not None:
                self.run.on_event(*frame)
            if events.buffer:
                raise wire.ProtocolViolation("a truncated frame")
        except wire.ProtocolViolation as err:
            return self._violation(err)
        # anything left unread or unaccounted for on a channel: a fresh sandbox next time
        self.dirty = (
            not exit_header["clean"] or bool(self.outbox) or _unread_bytes(self.input_fd) > 0
        )
        code = exit_header["code"]
        result = self.run.result
        if self.run.phase == "finished" and code == 0:
            result.received = events.received
            if self.run_cgroup is not None:
                result.oom_kills = self.run_cgroup.oom_kills()
            self.clean_exit = True
            return result
        if not self.run.started_submission:
            return self.end("lost", f"the run ended before its start (status {code})")
        if code == -signal.SIGXCPU:
            return self.end("timeout", "used up its CPU-time limit")
        how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return self.end("crash", f"the process ended early ({how})")


def set_nonblocking(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)


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
