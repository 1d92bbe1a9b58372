"""The autograded notebook of a submission, made in a process of its own.

`render_autograded` builds it (the graded notebook with the test cells in their released
form, the grader's messages and outputs) and sanitises it
(`autograder.checking.sanitise.clean_notebook`): nbgrader's feedback and formgrader render it,
and nothing a student wrote may be live HTML there. `Renderer` runs it (or any function) in a
separate process (`serve_recording`) within a time budget and a memory limit, so no notebook
may hold the batch; ``RENDERER`` is the recording's, started once per grading call.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat

from autograder.checking import notebook as nbparse
from autograder.checking import sanitise
from autograder.checking.program import autograded_notebook
from autograder.student import frames


def render_autograded(spec, notebook: bytes, messages, outputs, record, caps) -> str:
    """The autograded notebook as JSON text: the graded ``notebook`` (none or unreadable: the
    released copy) with the test cells in their released form and the grader's messages and
    outputs (`autograder.checking.program.autograded_notebook`), sanitised
    (`autograder.checking.sanitise.clean_notebook`). Linear in ``caps``: the notebook is parsed under
    them, so no HTML nested past ``caps.html_depth`` reaches the sanitiser."""
    try:
        submission = nbparse.read_submission(notebook, caps) if notebook else None
    except nbparse.InvalidNotebook:
        submission = None
    outputs = {int(k): [nbformat.from_dict(o) for o in v] for k, v in outputs.items()}
    clean = sanitise.clean_notebook(
        autograded_notebook(spec, submission, messages, outputs, record)
    )
    return nbformat.writes(clean)


class RenderFailed(Exception):
    """The autograded notebook of one submission could not be made: the reason, for it."""


#: address space of the recording process: a notebook within the caps needs a few hundred MiB
RENDER_MEMORY_BYTES = 3 << 30


def _write_frame(stream, payload: bytes) -> None:
    """One call or reply: a frame (``autograder.student.frames``) whose blob is the payload."""
    stream.write(frames.encode_frame({}, payload))
    stream.flush()


def _read_exactly(stream, count: int) -> bytes:
    data = stream.read(count)
    if len(data) != count:
        raise EOFError("the grader closed the pipe")
    return data


def serve_recording() -> None:
    """The recording process: reads (function, args) pickled by the grader from stdin, runs
    each and answers with a JSON frame: ["ok", value], ["memory"] or ["error", type, text].
    What it sends back is plain JSON, never a pickle."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (RENDER_MEMORY_BYTES, RENDER_MEMORY_BYTES))
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed may corrupt the frames
    _write_frame(replies, b'["ready"]')
    while True:
        try:
            _header, payload = frames.read_frame(lambda n: _read_exactly(requests, n))
        except EOFError:
            return
        function, args = pickle.loads(payload)
        try:
            reply = ["ok", function(*args)]
        except MemoryError:
            reply = ["memory"]
        except Exception as err:  # noqa: BLE001 - the grader reports it as its own error
            reply = ["error", type(err).__name__, str(err)[:500]]
        _write_frame(replies, json.dumps(reply).encode())


#: as autograder/__main__.py: nbformat's schema needs no IRI grammar (1 s of imports saved)
_SERVE = (
    "import sys; sys.modules.setdefault('rfc3987_syntax', None); "
    "from autograder.course.rendering import serve_recording; serve_recording()"
)


class Renderer:
    """`render_autograded` (or any function: ``run``) in a separate process, started on
    first use with ``python -c`` (not multiprocessing, which would run the instructor's
    script again in it) and reused: a call that takes longer than its budget is ended with
    its process (a new one starts for the next), one that runs out of memory fails there;
    either is that submission's reason, and the grader's own memory never holds more than
    the finished text."""

    def __init__(self, task: str = "making the autograded notebook", limit: str = "record_seconds"):
        self._child = None
        self._lock = threading.Lock()
        self.started = 0  # processes started (a test reads it)
        self.task, self.limit = task, limit  # what its reasons say: the work and its limit

    def _start(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where `autograder` is importable
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        self._child = subprocess.Popen(
            [sys.executable, "-c", _SERVE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            env={**os.environ, "PYTHONPATH": path},
        )
        self.started += 1
        if self._receive(time.monotonic() + 300) != ["ready"]:  # its imports: not a submission's
            raise RuntimeError("the recording process did not start")

    def _receive(self, deadline: float):
        """The next reply, read by the deadline (the process answers one call at a time)."""
        replies, fd = frames.FrameBuffer(frames.UNBOUNDED), self._child.stdout.fileno()
        while (frame := replies.next()) is None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError
            replies.feed(chunk)
        if replies.buffer:
            raise frames.FrameError("more than one reply")
        return json.loads(frame[1])

    def start(self) -> None:
        """Start the process now (``grade_assignment`` does, while the sandboxes start)."""
        with self._lock:
            if self._child is None:
                self._start()

    def run(self, function, args: tuple, seconds: float):
        """``function(*args)`` in the recording process, or RenderFailed after ``seconds``
        (counted once the process is up: its start-up is not the submission's)."""
        with self._lock:
            if self._child is None:
                self._start()
            try:
                _write_frame(self._child.stdin, pickle.dumps((function, args)))
                reply = self._receive(time.monotonic() + seconds)
            except TimeoutError:
                self._close()
                raise RenderFailed(
                    f"{self.task} took more than {seconds:g} s (the limit is {self.limit})"
                ) from None
            except (EOFError, BrokenPipeError):
                self._close()
                raise RenderFailed(f"{self.task} ended its process") from None
            if reply[0] == "memory":
                self._close()
                raise RenderFailed(f"{self.task} needed more than {RENDER_MEMORY_BYTES >> 20} MiB")
            if reply[0] == "error":
                raise RuntimeError(f"{reply[1]} while {self.task}: {reply[2]}")
            return reply[1]

    def _close(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child.wait()
            self._child.stdin.close()
            self._child.stdout.close()
            self._child = None

    def close(self) -> None:
        with self._lock:
            self._close()


RENDERER = Renderer()
