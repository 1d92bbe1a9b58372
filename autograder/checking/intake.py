"""Reading what a student handed in, with a bound fixed before the first byte is read.

A submitted folder is the student's: its notebook may be 600 MB, a FIFO that never ends, a
device, or a symbolic link to a file of someone else's. ``read_bounded`` opens without
following a final symlink and without blocking, accepts a regular file only, and reads at
most ``limit + 1`` bytes, so the grader's memory for a submission is bounded by the cap and
not by the file; ``read_notebook`` adds the cap's verdict (checked with ``fstat`` before the
read, and again on the bytes read, for a file that grows while it is read).

Both the grading package (the notebook, ``grading.jobs``) and the recording
(``autograder.course.gradebook``, ``timestamp.txt``) read through it, so it sits below both.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from autograder.checking.notebook import InvalidNotebook

_CHUNK = 1 << 20


class Unreadable(OSError):
    """A student's file the grader will not read, with the reason for the student."""


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def read_bounded(path: Path, limit: int, *, size_error=None) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (one more than ``limit``
    tells the caller it is over). ``size_error(st_size)``: called when ``fstat`` already
    shows more than ``limit`` bytes, before anything is read. Raises ``Unreadable``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise Unreadable(f"{Path(path).name} was not handed in") from None
    except OSError as err:
        if err.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink as the last component
            raise Unreadable(f"{Path(path).name} is a symbolic link, not a file") from None
        raise Unreadable(f"{Path(path).name} cannot be opened ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(f"{Path(path).name} is not a regular file")
        if info.st_size > limit and size_error is not None:
            raise Unreadable(size_error(info.st_size))
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_notebook(path: Path, cap: int) -> tuple[bytes, str]:
    """The submitted notebook's bytes and their SHA-256. Raises ``InvalidNotebook`` (the
    submission's reason) for a file over ``cap`` bytes, a missing one, or one that is not a
    regular file."""

    def over(size: int) -> str:
        return f"the notebook is {_mib(size)}, over the cap of {_mib(cap)}"

    try:
        data = read_bounded(path, cap, size_error=over)
    except Unreadable as err:
        raise InvalidNotebook(str(err)) from None
    if len(data) > cap:  # it grew between fstat and the read
        raise InvalidNotebook(f"the notebook is over the cap of {_mib(cap)}")
    return data, hashlib.sha256(data).hexdigest()


def refused_digest(path: Path) -> str:
    """What stands for a refused file's SHA-256 in the gradebook: its size and change time,
    so the same refused file is not graded again, and any new hand-in is."""
    try:
        info = os.lstat(path)
    except OSError:
        return "refused:missing"
    return f"refused:{info.st_size}:{info.st_mtime_ns}"
