"""The zygote handle: one long-lived sandboxed worker per slot, and each run sent to it.

``Sandbox`` puts three parts together: the slot's cgroups (``slot_cgroup.SlotCgroup``: the
slot's, with the zygote in its ``zygote`` leaf and each run in a fresh leaf made for it), the
zygote's process (``zygote_process.ZygoteProcess``: started under the command line of
``autograder.sandbox.command``, its ``ready`` message awaited, killed with everything it
started: process group, pid namespace, every process of the slot's uid) and, for each run,
an ``attempt.Attempt``. ``Sandbox.run`` gives each run its own pair of pipes (handed to the
zygote over its control socket, with a nonce), writes the request and later the cases into
one and feeds the events of the other, with the trusted clock, to ``protocol.Run``; past a
deadline, or if the stream breaks, the whole sandbox is killed and restarted for the next
request.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from autograder.sandbox import cgroups, host, wire
from autograder.sandbox.attempt import Attempt, set_nonblocking
from autograder.sandbox.command import sandbox_command, unsandboxed_command
from autograder.sandbox.limits import DEFAULT_LIMITS, Limits
from autograder.sandbox.protocol import Plan, Run, RunResult
from autograder.sandbox.python import FULL_PRELOAD
from autograder.sandbox.slot_cgroup import SlotCgroup
from autograder.sandbox.slots import Slot
from autograder.sandbox.zygote_process import ZygoteProcess
from autograder.student import frames


class Sandbox:
    """One sandboxed worker process (a zygote) for one slot; restarted after any abnormal run.

    Every write into the sandbox is non-blocking and bounded by the trusted deadline, so a
    submission that stops reading cannot stall the grader (``attempt.Attempt``).
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
        self.cgroups = SlotCgroup(self.slot, limits, sandboxed)
        self.zygote = ZygoteProcess(self._command, limits.start_seconds, self.slot, self.cgroups)
        self.starts = 0
        self.dirty = False
        self.fresh = False  # each run in namespaces of its own (isolation.py), else swept
        self.run_cgroup: cgroups.Cgroup | None = None  # the cgroup of the run under way

    @property
    def cgroup(self) -> cgroups.Cgroup | None:
        """The slot's cgroup (None where the machine gives none: ``cgroup_note`` says why)."""
        return self.cgroups.cgroup

    @property
    def cgroup_note(self) -> str:
        return self.cgroups.note

    @property
    def process(self):
        """The zygote's process (under its sandbox's command line), None when not started."""
        return self.zygote.process

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the zygote and wait (``start_seconds``) for its ``ready`` message."""
        self.starts += 1
        self.dirty = False
        ready = self.zygote.start()
        self.fresh = ready["fresh"]
        self.cgroups.measure_baseline()

    def _command(self, control_fd: int) -> list[str]:
        """The zygote's command line, sandboxed or not."""
        if not self.sandboxed:
            return unsandboxed_command(control_fd, self.preload)
        uid = self.slot.uid if self.slot else None
        return sandbox_command(uid, self.release_root, self.limits, control_fd, self.preload)

    def _run_cgroup(self) -> cgroups.Cgroup | None:
        """A fresh cgroup for one run (``SlotCgroup.new_run``)."""
        return self.cgroups.new_run()

    def alive(self) -> bool:
        return self.zygote.running() and not self.dirty

    def kill(self) -> int:
        """Kill the sandbox and everything in it; returns how many processes it had."""
        return self.zygote.kill()

    def close(self) -> None:
        self.kill()
        self.cgroups.close()
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
        for anything the sandbox does; a run that breaks before its first event ends "lost"
        while budget is left, and "budget" (the submission's timeout) once it is spent, the
        time this start of a fresh zygote took included (``attempt.Attempt.end``).
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
        cgroup_fds = self.run_cgroup.open_for_joining() if self.run_cgroup else []
        nonce = secrets.token_hex(16)
        events_read, events_write = os.pipe()
        input_read, input_write = os.pipe()
        try:
            sent = self._send_run(nonce, request, [events_write, input_read, *cgroup_fds])
            set_nonblocking(input_write)
            attempt = Attempt(
                run,
                wire.FrameReader(events_read, wire.EVENTS, self.limits.result_bytes),
                self.zygote.control,
                input_write,
                bytearray(frames.encode_frame(request)),
                nonce,
                self.limits,
                self.zygote.process.pid,
                self.run_cgroup,
                received_before,
            )
            result = attempt.drive() if sent else attempt.end("lost", "the sandbox took no run")
            self._after(attempt, result)
            return result
        finally:
            for fd in (events_read, input_write):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if self.run_cgroup is not None:
                self.run_cgroup.remove()
                self.run_cgroup = None

    def _send_run(self, nonce: str, request: dict, held: list[int]) -> bool:
        """The run message and the child's descriptors, to the zygote; they are closed here
        whatever happens (from here on only the zygote's child holds them)."""
        header = {"run": nonce, "workdir": request["workdir"], "cgroups": len(held) - 2}
        message = frames.encode_frame(dict(header, tmp_bytes=self.limits.tmpfs_bytes))
        try:
            sent = socket.send_fds(self.zygote.control_socket, [message], held)
        except OSError:
            sent = 0
        for fd in held:
            os.close(fd)
        return sent == len(message)

    def _after(self, attempt: Attempt, result: RunResult) -> None:
        """The sandbox after a run: killed after anything abnormal (counting what it held),
        or after a clean run that left something behind (a fresh sandbox next time)."""
        if attempt.must_kill:
            result.processes_at_kill = self.kill()
            return
        self.dirty = attempt.dirty or (attempt.clean_exit and self.cgroups.leaked())
        if self.dirty:
            self.kill()
