"""A slot's zygote process: started, checked for its ``ready`` message, and killed with
everything it started.

The zygote (``autograder/student/zygote.py``) runs under the command line of
``autograder.sandbox.command``, joined to its slot's cgroup first where there is one. It has
one channel, a control socket: runs arrive on it (a nonce and the run's own two pipes, as
SCM_RIGHTS) and its ready/exit messages come back on it. The child of a run closes it before
any student code runs, and the zygote is not dumpable, so no /proc path leads to it. Killing
it takes its process group, its pid namespace, the slot's cgroup and every process of the
slot's uid.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from autograder.sandbox import wire
from autograder.sandbox.processes import descendants, processes_of_uid
from autograder.sandbox.slot_cgroup import SlotCgroup
from autograder.sandbox.slots import Slot

_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")


class ZygoteProcess:
    """The process of one slot's zygote and its control channel (``control``: the reader of
    the zygote's messages). ``command(control_fd)`` is its command line; ``start_seconds``
    how long it has to say ``ready``."""

    def __init__(
        self,
        command: Callable[[int], list[str]],
        start_seconds: float,
        slot: Slot | None,
        cgroup: SlotCgroup,
    ):
        self._command, self._start_seconds = command, start_seconds
        self._slot, self._cgroup = slot, cgroup
        self.process: subprocess.Popen | None = None
        self.control_socket: socket.socket | None = None
        self.control: wire.FrameReader | None = None

    def start(self) -> dict:
        """Start the zygote; its ``ready`` header (within ``start_seconds``), else it is
        killed and RuntimeError says why."""
        # the control socket is the zygote's only channel: runs arrive on it, each with its
        # own pipes, and its ready/exit messages come back on it; no child ever holds it
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            command = self._cgroup.joining(self._command(theirs.fileno()))
            self.process = _spawn(command, theirs.fileno())
        finally:
            theirs.close()
        ours.setblocking(False)
        self.control_socket = ours
        self.control = wire.FrameReader(ours.fileno(), wire.CONTROL, 0)
        return self._await_ready()

    def _await_ready(self) -> dict:
        deadline = time.monotonic() + self._start_seconds
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

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> int:
        """Kill the zygote and everything in the sandbox; returns how many processes it had."""
        count = len(processes_of_uid(self._slot.uid)) if self._slot else 0
        if self.process is not None and self._slot is None:  # rootless: the namespace's tree
            count = len(descendants(self.process.pid))
        count = max(count, self._cgroup.kill_all())
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
        if self._slot is not None:
            for _ in range(50):  # pid-namespace death is asynchronous; make sure
                pids = processes_of_uid(self._slot.uid)
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.02)
        return count


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
