"""Frames: the one byte format of every pipe and socket between the grader's processes.

A frame is ``MAGIC``, two big-endian uint32 lengths (the JSON header's, the blob's), the
header, the blob. It carries the trusted side's requests and cases to a sandboxed run and
the run's events back (``autograder/student/zygote.py``, ``autograder/sandbox/``), the zygote's
control messages, and the calls and replies of the recording process
(``autograder/course/gradebook.py``). This module is the only code that writes or splits frames:

- ``encode_frame``: one frame.
- ``frame_lengths``: the 12-byte prefix checked (magic) and bounded (header and blob sizes)
  before a byte of the body is awaited; every reader goes through it.
- ``FrameBuffer``: the incremental parser, fed whatever a non-blocking read returned; it
  holds at most one frame's bytes beyond its bounds' check.
- ``read_frame``: one frame from a blocking reader (the sandboxed child reading its request
  and cases, the recording process reading its calls).
- ``single_frame``: a message that must be exactly one frame (the zygote's run message).
- ``pack``: the arrays a blob carries, as a plain ``.npz`` (also the array file of
  ``public_cases.npz``, ``autograder.checking.casefile``); the student's checker only reads them
  (``contract.unpack``), so the writer stays on the grader's side.
- ``FILE_TOO_LARGE``: the one error code of the events that the contract does not name.

What a header must hold is not checked here: the untrusted side's schemas are
``autograder/sandbox/wire.py``'s. The module imports nothing of the grader: it is bound into the
sandbox beside ``zygote.py`` (``autograder.sandbox.command.IN_SANDBOX``).
"""

from __future__ import annotations

import io
import json
import struct

import numpy as np

MAGIC = b"AGF2"
LENGTHS = struct.Struct(">II")
PREFIX_BYTES = len(MAGIC) + LENGTHS.size
#: the largest header any reader accepts (the events' headers are a few hundred bytes)
MAX_HEADER_BYTES = 1 << 16
#: no bound but the format's own (a uint32 length)
UNBOUNDED = (1 << 32) - 1
#: the error code of a run that filled a file or the disk (EFBIG, ENOSPC): the sandbox's
#: output limit, besides the contract's error classes (``contract.ERRORS``)
FILE_TOO_LARGE = "FileTooLarge"
FULL_FILE_ERRNOS = (27, 28)


class FrameError(ValueError):
    """Bytes that are not a frame within the reader's bounds."""


def encode_frame(header: dict, blob: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return MAGIC + LENGTHS.pack(len(head), len(blob)) + head + blob


def frame_lengths(prefix: bytes, max_header: int, max_blob: int) -> tuple[int, int]:
    """(header bytes, blob bytes) of the frame that starts with this 12-byte ``prefix``;
    FrameError if the magic is wrong or either length is over its bound."""
    if bytes(prefix[: len(MAGIC)]) != MAGIC:
        raise FrameError("bad frame magic")
    n_head, n_blob = LENGTHS.unpack(bytes(prefix[len(MAGIC) : PREFIX_BYTES]))
    if n_head > max_header or n_blob > max_blob:
        raise FrameError("frame too large")
    return n_head, n_blob


class FrameBuffer:
    """Frames parsed incrementally from the bytes ``feed`` is given, each checked against the
    bounds as soon as its prefix is in."""

    def __init__(self, max_blob: int, max_header: int = MAX_HEADER_BYTES):
        self.max_blob, self.max_header = max_blob, max_header
        self.buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def next(self) -> tuple[bytes, bytes] | None:
        """(raw header, blob) of the next whole frame, or None while it is incomplete; raises
        FrameError (the buffer is then left as it was)."""
        if len(self.buffer) < PREFIX_BYTES:
            return None
        n_head, n_blob = frame_lengths(self.buffer[:PREFIX_BYTES], self.max_header, self.max_blob)
        total = PREFIX_BYTES + n_head + n_blob
        if len(self.buffer) < total:
            return None
        head = bytes(self.buffer[PREFIX_BYTES : PREFIX_BYTES + n_head])
        blob = bytes(self.buffer[PREFIX_BYTES + n_head : total])
        del self.buffer[:total]
        return head, blob


def read_frame(
    read_exact, max_header: int = UNBOUNDED, max_blob: int = UNBOUNDED
) -> tuple[dict, bytes]:
    """(header, blob) of one frame read with ``read_exact(n)`` (exactly n bytes, or raises),
    which reads nothing past it. Unbounded by default: for frames the trusted side wrote (a
    request's header holds the submission's cells)."""
    n_head, n_blob = frame_lengths(read_exact(PREFIX_BYTES), max_header, max_blob)
    return json.loads(read_exact(n_head)), read_exact(n_blob)


def single_frame(data: bytes) -> tuple[bytes, bytes]:
    """(raw header, blob) of ``data``, which must be exactly one frame (one message of a
    datagram socket, whose size bounds it)."""
    frames = FrameBuffer(UNBOUNDED, UNBOUNDED)
    frames.feed(data)
    frame = frames.next()
    if frame is None or frames.buffer:
        raise FrameError("not exactly one frame")
    return frame


def pack(arrays: dict) -> bytes:
    """Arrays as a plain (uncompressed) ``.npz``: no pickle, read back by ``contract.unpack``."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()
