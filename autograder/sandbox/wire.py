"""The untrusted wire: every byte the sandbox sends is parsed here, against a strict schema.

Nothing in this module trusts its input and nothing raises anything but `ProtocolViolation`
(a frame that breaks the schema ends that submission with the reason "protocol violation").

- Frames (``autograder/student/frames.py``, the one parser): a JSON header of at most
  ``MAX_HEADER_BYTES``, a blob of at most the reader's cap.
- Headers: one flat JSON object (no nesting at all: checked on the text before parsing),
  an ``ev`` from a fixed set, exactly that event's keys, each of an exact type.
- Blobs: only on a case whose outcome is a value; a plain ``.npz`` whose members are exactly
  ``r0.npy``..``r{n-1}.npy``, stored (never compressed), each with a numeric or boolean dtype
  and a declared size that matches its bytes. Declared shapes are compared with the expected
  ones *before* any array is read: a mismatch is judged from the header alone.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile

import numpy as np

from autograder.checking import judging
from autograder.student import contract, frames, zygote

MAX_HEADER_BYTES = frames.MAX_HEADER_BYTES

#: where an error was raised (`zygote.error_place`): a program cell and a line in it, bounded
#: integers checked here and again against the cell by the trusted side, and a module name
#: from the fixed list
PLACE = {"at_cell": int, "at_line": int, "module": (str, None)}
#: the child's events: key -> allowed type(s) (None means JSON null)
EVENTS = {
    "setup": {},
    "cell": {"cell": int, "error": (str, None), "output": str, **PLACE},
    "cells_done": {},
    "case": {"task": int, "case": int, "outcome": str, "code": (str, None), "n": int, **PLACE},
    "task_missing": {"task": int, "code": str},
    "task_end": {"task": int},
    "done": {},
}
#: the zygote's control messages
CONTROL = {
    "ready": {"error": (str, None), "fresh": bool},  # fresh: each run builds its own state
    "exit": {"run": str, "code": int, "clean": bool},  # run: the nonce the run was sent with
}
OUTCOMES = {"value", "error", "bad"}
MISSING_CODES = {"undefined", "not_callable"}
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


class ProtocolViolation(Exception):
    """The sandbox sent something outside the schema."""


def _typed(value, kind) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if k is None and value is None:
            return True
        if k is not None and type(value) is k:  # exact: True is not an int here
            return True
    return False


def parse_header(raw: bytes, schema: dict) -> dict:
    if len(raw) > MAX_HEADER_BYTES:
        raise ProtocolViolation("header too large")
    skeleton = _STRING.sub(b'""', raw)
    if skeleton.count(b"{") != 1 or b"[" in skeleton or b'"' in _STRING.sub(b"", skeleton):
        raise ProtocolViolation("header is not one flat object")
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise ProtocolViolation("header is not JSON") from None
    if (
        not isinstance(header, dict)
        or not isinstance(header.get("ev"), str)
        or header["ev"] not in schema
    ):
        raise ProtocolViolation("unknown event")
    fields = schema[header["ev"]]
    if set(header) != {"ev", *fields}:
        raise ProtocolViolation("wrong fields")
    for key, kind in fields.items():
        if not _typed(header[key], kind):
            raise ProtocolViolation("wrong field type")
    if header["ev"] == "case":
        if header["outcome"] not in OUTCOMES or header["n"] < 0:
            raise ProtocolViolation("bad case outcome")
        codes = {"error": judging.ERROR_CODES, "bad": set(contract.BAD_RETURNS), "value": {None}}
        if header["code"] not in codes[header["outcome"]]:
            raise ProtocolViolation("bad case code")
    if (
        header["ev"] == "cell"
        and header["error"] is not None
        and header["error"] not in judging.ERROR_CODES
    ):
        raise ProtocolViolation("bad cell error code")
    if header["ev"] == "task_missing" and header["code"] not in MISSING_CODES:
        raise ProtocolViolation("bad missing code")
    if header["ev"] in ("cell", "case"):
        _check_place(header, header["error"] if header["ev"] == "cell" else header["code"])
    return header


def _check_place(header: dict, code) -> None:
    """An error's place: a line only with a cell, either only with an error, a module only
    with a failed import and only from the fixed list."""
    cell, line, module = header["at_cell"], header["at_line"], header["module"]
    error = code in judging.ERROR_CODES
    if not (-1 <= cell < zygote.MAX_PLACE and 0 <= line <= zygote.MAX_PLACE):
        raise ProtocolViolation("error place out of range")
    if (cell == -1) != (line == 0) or (cell != -1 and not error):
        raise ProtocolViolation("error place without an error")
    if module is not None and (code != "ModuleNotFoundError" or module not in zygote.KNOWN_MODULES):
        raise ProtocolViolation("bad module name")


class FrameReader:
    """Frames from one pipe (split by ``frames.FrameBuffer``, bounded by ``MAX_HEADER_BYTES``
    and ``max_blob``), each header parsed against a schema."""

    def __init__(self, fd: int, schema: dict, max_blob: int):
        self.fd, self.schema, self.max_blob = fd, schema, max_blob
        self.frames = frames.FrameBuffer(max_blob, MAX_HEADER_BYTES)
        self.eof, self.received = False, 0

    @property
    def buffer(self) -> bytearray:
        """The bytes received and not yet taken as a frame."""
        return self.frames.buffer

    def fill(self) -> None:
        try:
            chunk = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return
        if chunk:
            self.frames.feed(chunk)
            self.received += len(chunk)
        else:
            self.eof = True

    def next(self):
        """(header, blob) or None when incomplete; raises ProtocolViolation."""
        try:
            frame = self.frames.next()
        except frames.FrameError as err:
            raise ProtocolViolation(str(err)) from None
        if frame is None:
            return None
        header = parse_header(frame[0], self.schema)
        blob = frame[1]
        if blob and not (header["ev"] == "case" and header["outcome"] == "value"):
            raise ProtocolViolation("unexpected blob")
        return header, blob


#: NumPy's own limit on an array's axes (NPY_MAXDIMS in NumPy 2): a header declaring more
#: was written by hand, and a count of axes is all a mismatch message may carry of it
MAX_AXES = 64


class Declared:
    """An array known only by its declared shape and dtype (never read: it did not fit)."""

    def __init__(self, shape: tuple, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


def _fits(comparator: str, expected: tuple, declared: tuple) -> bool:
    """May this declared shape be read? Exactly the expected one, except for token sequences
    (same rows, any number of columns up to 16 times the expected size)."""
    if comparator in ("accuracy", "tokens"):
        size = int(np.prod(declared, dtype=np.int64)) if declared else 1
        return (
            len(declared) == 2
            and declared[0] == expected[0]
            and size <= 16 * max(int(np.prod(expected)), 1)
        )
    return tuple(declared) == tuple(expected)


def read_outcome(header: dict, blob: bytes, expected: tuple, comparator: str) -> contract.Outcome:
    """A case event (`parse_header` checked it) as a ``contract.Outcome``; arrays are read only
    if every declared shape fits (else they are `Declared`); an error keeps its place."""
    if header["outcome"] != "value":
        if blob:
            raise ProtocolViolation("blob on a non-value outcome")
        place = {key: header[key] for key in PLACE} if header["outcome"] == "error" else {}
        return contract.Outcome(header["outcome"], code=header["code"], **place)
    n = header["n"]
    if n < 1 or n > 16:
        raise ProtocolViolation("bad number of outputs")
    try:
        archive = zipfile.ZipFile(io.BytesIO(blob))
        infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise ProtocolViolation("not an npz") from None
    if [i.filename for i in infos] != [f"r{k}.npy" for k in range(n)]:
        raise ProtocolViolation("unexpected npz members")
    declared = []
    for info in infos:
        if (
            info.compress_type != zipfile.ZIP_STORED
            or info.file_size != info.compress_size
            or info.flag_bits & 1
        ):
            raise ProtocolViolation("compressed or encrypted member")
        try:
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
                else:
                    raise ValueError("npy version")
                offset = member.tell()
        except Exception:  # noqa: BLE001 - whatever the parser objects to is a violation
            raise ProtocolViolation("bad npy header") from None
        if len(shape) > MAX_AXES:  # before anything counts, compares or formats them
            raise ProtocolViolation("more axes than any NumPy array has")
        if (
            dtype.hasobject
            or dtype.kind not in "biuf"
            or any(type(s) is not int or s < 0 for s in shape)
        ):
            raise ProtocolViolation("bad npy dtype or shape")
        count = int(np.prod(shape, dtype=object)) if shape else 1
        if count * dtype.itemsize != info.file_size - offset:
            raise ProtocolViolation("npy size does not match its header")
        declared.append(Declared(shape, dtype))
    if len(declared) != len(expected) or not all(
        _fits(comparator, tuple(e.shape), d.shape) for e, d in zip(expected, declared)
    ):
        if len(declared) == len(expected) and comparator in ("accuracy", "tokens"):
            if any(
                len(d.shape) == 2 and d.shape[0] == e.shape[0] for e, d in zip(expected, declared)
            ):
                return contract.Outcome("bad", code="too_large")
        return contract.Outcome("value", tuple(declared))
    arrays = []
    for info in infos:
        try:
            with archive.open(info) as member:
                arrays.append(np.lib.format.read_array(member, allow_pickle=False))
        except Exception:  # noqa: BLE001
            raise ProtocolViolation("unreadable npy data") from None
    return contract.Outcome("value", tuple(arrays))
