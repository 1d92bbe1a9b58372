"""Reading what a student handed in, with a bound fixed before the first byte is read.

A submitted folder is the student's: its notebook may be 600 MB, a FIFO that never ends, a
device, or a symbolic link to a file of someone else's. ``read_bounded`` opens without
following a final symlink and without blocking, accepts a regular file only, and reads at
most ``limit + 1`` bytes, so the grader's memory for a submission is bounded by the cap and
not by the file. ``read_notebook`` reads a notebook as a stream up to a hard ceiling
(``NOTEBOOK_CEILING``, checked with ``fstat`` before the read and again on the bytes read, for
a file that grows while it is read), drops its saved outputs as they pass
(``notebook_stream``), and applies the notebook's cap to what is left: what is graded.

Both the grading package (the notebook, ``grading.jobs``) and the recording
(``autograder.course.gradebook``, ``timestamp.txt``) read through it, so it sits below both.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from autograder.checking import notebook_stream
from autograder.checking.notebook import DEFAULT_CAPS, Caps, InvalidNotebook
from autograder.checking.notebook_stream import Stripped

_CHUNK = 1 << 20
#: the most of a submitted notebook the grader reads (``Limits.notebook_file_bytes``): far
#: above any real notebook, saved outputs and all; a bigger file is refused unread
NOTEBOOK_CEILING = 256 << 20


class Unreadable(OSError):
    """A student's file the grader will not read, with the reason for the student."""


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _open_regular(path: Path) -> tuple[int, os.stat_result]:
    """An open descriptor of the regular file ``path`` (never through a final symlink, never
    blocking) and its ``fstat``. Raises ``Unreadable``."""
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
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_bounded(path: Path, limit: int, *, size_error=None) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (one more than ``limit``
    tells the caller it is over). ``size_error(st_size)``: called when ``fstat`` already
    shows more than ``limit`` bytes, before anything is read. Raises ``Unreadable``."""
    fd, info = _open_regular(path)
    try:
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


def read_notebook(
    path: Path, cap: int, *, ceiling: int = NOTEBOOK_CEILING, caps: Caps = DEFAULT_CAPS
) -> Stripped:
    """The submitted notebook as it is graded (`notebook_stream.Stripped`: its JSON without
    the saved outputs, the SHA-256 of the file as handed in, what was dropped). The file is
    read once, as a stream, at most ``max(ceiling, cap)`` bytes (``fstat`` says first, and the
    bytes again for a file that grows), and the ``cap`` applies to what is graded: a notebook
    big for its saved outputs is graded, one whose code and text are over the cap is not.
    Raises ``InvalidNotebook`` (the submission's reason): over the ceiling or the cap, not a
    notebook's JSON, missing, or not a regular file."""
    ceiling = max(ceiling, cap)
    try:
        fd, info = _open_regular(path)
    except Unreadable as err:
        raise InvalidNotebook(str(err)) from None
    try:
        if info.st_size > ceiling:
            raise InvalidNotebook(
                notebook_stream.OVER_CEILING.format(size=_mib(info.st_size), ceiling=_mib(ceiling))
            )
        left = ceiling + 1

        def read(n: int) -> bytes:
            nonlocal left
            chunk = os.read(fd, min(n, left)) if left > 0 else b""
            left -= len(chunk)
            return chunk

        return notebook_stream.strip_outputs(read, cap, ceiling, caps)
    finally:
        os.close(fd)


def refused_digest(path: Path) -> str:
    """What stands for a refused file's SHA-256 in the gradebook: its size and change time,
    so the same refused file is not graded again, and any new hand-in is."""
    try:
        info = os.lstat(path)
    except OSError:
        return "refused:missing"
    return f"refused:{info.st_size}:{info.st_mtime_ns}"
