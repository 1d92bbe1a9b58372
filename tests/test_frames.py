"""The frame format (``autograder/student/frames.py``): one encoder, one bounded incremental parser.

Every process of the grader speaks it (the sandbox's run and control channels, the
recording process); these tests pin the bytes and the bounds, which the hostile corpus
relies on (``tests/hostile/corpus.py`` writes frames by hand)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from test_layering import COURSE_FOLDERS  # noqa: E402 - the course folders, not modules

from autograder.student import frames


def test_the_bytes_of_a_frame_are_magic_two_lengths_header_blob():
    data = frames.encode_frame({"ev": "done"}, b"xyz")
    head = b'{"ev": "done"}'
    assert data == b"AGF2" + struct.pack(">II", len(head), 3) + head + b"xyz"


def test_frames_fed_one_byte_at_a_time_come_out_whole_and_in_order():
    stream = frames.encode_frame({"a": 1}) + frames.encode_frame({"b": [2]}, b"\0" * 70000)
    buffer = frames.FrameBuffer(max_blob=1 << 20)
    out = []
    for byte in stream:
        buffer.feed(bytes([byte]))
        while (frame := buffer.next()) is not None:
            out.append(frame)
    assert out == [(b'{"a": 1}', b""), (b'{"b": [2]}', b"\0" * 70000)]
    assert not buffer.buffer


def test_the_bounds_are_checked_on_the_prefix_before_the_body_arrives():
    blob_over = frames.FrameBuffer(max_blob=10)
    blob_over.feed(frames.encode_frame({}, b"x" * 11)[: frames.PREFIX_BYTES])
    with pytest.raises(frames.FrameError, match="frame too large"):
        blob_over.next()
    at_bound = frames.FrameBuffer(max_blob=10)
    at_bound.feed(frames.encode_frame({}, b"x" * 10))
    assert at_bound.next() == (b"{}", b"x" * 10)
    header_over = frames.FrameBuffer(max_blob=0)
    header_over.feed(b"AGF2" + struct.pack(">II", frames.MAX_HEADER_BYTES + 1, 0))
    with pytest.raises(frames.FrameError, match="frame too large"):
        header_over.next()
    assert frames.MAX_HEADER_BYTES == 1 << 16
    junk = frames.FrameBuffer(max_blob=0)
    junk.feed(b"JUNK" + bytes(8))
    with pytest.raises(frames.FrameError, match="bad frame magic"):
        junk.next()


def test_a_blocking_reader_reads_one_frame_and_nothing_past_it():
    stream = bytearray(frames.encode_frame({"cells": ["x" * 100000]}, b"blob") + b"NEXT")

    def read_exact(n):
        if len(stream) < n:
            raise EOFError
        data = bytes(stream[:n])
        del stream[:n]
        return data

    assert frames.read_frame(read_exact) == ({"cells": ["x" * 100000]}, b"blob")
    assert stream == b"NEXT"
    with pytest.raises(frames.FrameError, match="frame too large"):
        frames.read_frame(lambda n: frames.encode_frame({}, b"xx")[:n], max_blob=1)


def test_a_message_must_be_exactly_one_frame():
    one = frames.encode_frame({"run": "n"})
    assert frames.single_frame(one) == (b'{"run": "n"}', b"")
    for bad in (one[:-1], one + b"!", one + one, b"", b"AGF"):
        with pytest.raises(frames.FrameError):
            frames.single_frame(bad)


def test_no_module_but_frames_writes_or_splits_a_frame():
    """The magic, the length prefix and its bounds live in ``frames.py`` alone: every other
    module calls it (``wire.FrameReader``, the zygote, the sandbox handle, the recording)."""
    package = Path(frames.__file__).parent.parent
    for path in sorted(package.rglob("*.py")):
        if path.name == "frames.py" and path.parent == package / "student":
            continue
        if path.relative_to(package).parts[0] in COURSE_FOLDERS:
            continue  # the course's notebooks and release: no grader module there
        text = path.read_text()
        for marker in ("AGF2", '">II"', "'>II'", '">Q"', "LENGTHS", "MAGIC"):
            assert marker not in text, (path.relative_to(package), marker)
