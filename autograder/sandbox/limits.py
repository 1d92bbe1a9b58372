"""Every resource limit of one submission, in one place (`Limits`).

The defaults are ``DEFAULT_LIMITS``; a chapter's budgets, its own limits and the
instructor's are layered over them by ``autograder.sandbox.budgets.resolve``. The sandbox applies
the memory, process and file limits (``Limits.for_child`` for the run's own rlimits); the
trusted side keeps every wall-clock budget (``autograder.sandbox.protocol.Run``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Every limit of one submission. The wall-clock budgets are kept by the trusted side:
    nothing the sandbox sends extends them, and retries spend the same submission budget."""

    #: the run's own cgroup's memory limit (page cache, tmpfs and shared memory included;
    #: nothing charged before the run), and its address space on top of the zygote's
    memory_bytes: int = 2 << 30
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
    #: the submitted notebook as it is graded (without its saved outputs): more is refused
    notebook_bytes: int = 8 << 20
    #: the submitted file, outputs and all: a bigger one is refused unread (a streamed read
    #: skips the outputs, so the grader's memory does not grow with them)
    notebook_file_bytes: int = 256 << 20

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
