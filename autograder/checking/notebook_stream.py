"""A submitted notebook read as a stream: its saved outputs skipped as they pass, never held.

A notebook can be large for what it saved beside its code (plots, prints), which grading
drops anyway (`notebook.drop_ungraded`). `strip_outputs` reads the file's bytes once, in
chunks, through a small validating JSON scanner (no recursion, no value built): every cell's
``outputs`` value is counted and skipped, and written back as ``[]``; each cell's
``attachments`` are kept within their caps and skipped past them (written back as ``{}``).
Everything else is copied byte for byte, so what comes out is the submission's own JSON minus
what it saved, and the notebook's byte cap (``Limits.notebook_bytes``) applies to that: to
what is graded. The memory of a read is bounded by the cap and the chunk, whatever the file
holds: a string inside an output is scanned in pieces, never joined; nesting is bounded
(``MAX_DEPTH``), a number or a literal too (``MAX_WORD``); the bytes must be UTF-8 (checked
incrementally) and JSON (checked here for the parts skipped, and again by ``json`` for what is
kept). Every refusal is a fixed sentence or the grader's own numbers (docs/threat-model.md,
"Before it runs").

Keys are matched as ``json`` decodes them (``"outp\\u0075ts"`` is ``outputs``), and a key given
twice is handled each time it appears, so the parse that follows sees the same structure.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from autograder.checking.notebook import (
    ATTACHMENTS_DROPPED,
    DEFAULT_CAPS,
    NOT_GRADED,
    NOT_JSON,
    NOT_UTF8,
    OUTPUTS_DROPPED,
    TOO_DEEP,
    Caps,
    InvalidNotebook,
)

CHUNK = 1 << 20  # bytes read at a time
MAX_DEPTH = 10_000  # arrays and objects open inside each other (json refuses far less)
MAX_WORD = 4096  # characters of one number or literal
_KEY_BYTES = 64  # a key longer than this is none of the names looked for

#: why a file is refused here, in fixed words (the grader's numbers only)
LONG_WORD = "not a readable Jupyter notebook (it holds a number of more than {limit:,} characters)"
OVER_CAP = "the notebook's code and text (its saved outputs left out) are over the cap of {cap}"
OVER_CEILING = (
    "the notebook is {size}, over the {ceiling} the grader reads of a file: it was not read"
)
GREW = "the notebook grew past the {ceiling} the grader reads of a file while it was read"
ATTACHMENTS_OVER_CAP = (
    "attachments were dropped before grading ({count:,}, {chars:,} characters, more than the "
    "notebook's cap of {cap} with the code): " + NOT_GRADED
)


def mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


@dataclass(frozen=True)
class Stripped:
    """A notebook as it is graded: ``data`` its JSON without the saved outputs (and without
    attachments over their caps), at most the cap; ``sha256`` and ``size`` of the file as it
    was handed in (what decides whether it was graded before); ``notes`` the fixed sentences
    saying what was dropped, when it was over a cap (`notebook.drop_ungraded`'s)."""

    data: bytes
    sha256: str
    size: int
    notes: tuple[str, ...] = ()


_WS = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"([^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*)"')
_RUN = re.compile(rb'[^"\\\x00-\x1f]*')
#: one more string of an array being skipped (printed lines): many taken in one loop
_NEXT_STRING = re.compile(
    rb'[ \t\n\r]*,[ \t\n\r]*"([^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*)"'
)
_ESCAPE = re.compile(rb'\\(?:["\\/bfnrt]|u([0-9a-fA-F]{4}))')
_WORD = re.compile(rb"[-+.0-9A-Za-z]*")
_LITERAL = re.compile(
    rb"(?:true|false|null|NaN|Infinity|-Infinity"
    rb"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\Z"
)
_CONTINUATION = bytes(range(0x80, 0xC0))

# what the scanner expects next
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _COLON, _COMMA_OR_CLOSE, _END = range(7)
# what a value is to a notebook
_OTHER, _ROOT, _WORKSHEETS, _WORKSHEET, _CELLS, _CELL, _OUTPUTS, _ATTACHMENTS = range(8)
# what happens to the bytes of the value being read
_COPY, _SKIP, _KEEP = range(3)


def _chars(content: bytes) -> int:
    """Characters of a piece of a JSON string's content (escapes undone), as ``len`` counts
    the decoded text: what ``notebook._measure`` counts."""
    count = len(content.translate(None, _CONTINUATION))
    if b"\\" not in content:
        return count
    if (
        b"\\\\" not in content and b"\\u" not in content
    ):  # "\n", "\t", "\"": two bytes, one character
        return count - content.count(b"\\")
    previous_high, previous_end = False, -1
    for escape in _ESCAPE.finditer(content):
        count -= len(escape.group()) - 1
        code = int(escape.group(1), 16) if escape.group(1) else -1
        if previous_high and escape.start() == previous_end and 0xDC00 <= code <= 0xDFFF:
            count -= 1  # a surrogate pair is one character
        previous_high, previous_end = 0xD800 <= code <= 0xDBFF, escape.end()
    return count


class _Refused(Exception):
    pass


class _Scanner:
    def __init__(self, read: Callable[[int], bytes], cap: int, ceiling: int, caps: Caps):
        self.read, self.cap, self.ceiling, self.caps = read, cap, ceiling, caps
        self.buf, self.i, self.eof, self.base = b"", 0, False, 0
        self.size, self.sha = 0, hashlib.sha256()
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.lines, self.line_start = 0, 0  # newlines before buf, where the last line began
        self.out = bytearray()
        self.copy_from: int | None = 0  # where in buf the bytes not yet copied begin
        self.stack: list[list] = []  # [b"{" or b"[", what it is, its current key]
        # the value being skipped or kept (outputs, attachments)
        self.mode, self.depth, self.kind = _COPY, 0, _OTHER
        self.chars, self.count, self.span_start = 0, 0, 0
        self.output_chars, self.outputs_over = 0, False
        self.spans: list[tuple[int, int]] = []  # attachments kept, in out
        self.kept = 0  # their bytes
        self.attached, self.attached_chars, self.attachments_over = 0, 0, False
        self.dropped_for_cap = False

    # -- bytes -------------------------------------------------------------------------------

    def error(self, reason: str):
        raise _Refused(reason)

    def syntax(self, at: int):
        before = self.buf[:at]
        line = self.lines + before.count(b"\n") + 1
        last = before.rfind(b"\n")
        start = self.base + last + 1 if last >= 0 else self.line_start
        raise _Refused(NOT_JSON.format(line=line, column=self.base + at - start + 1))

    def flush(self, upto: int) -> None:
        if self.copy_from is not None:
            self.out += self.buf[self.copy_from : upto]
            self.copy_from = upto
            self.check_size()

    def check_size(self) -> None:
        keeping = len(self.out) - self.span_start if self.mode == _KEEP else 0
        if len(self.out) - self.kept - keeping > self.cap:
            self.error(OVER_CAP.format(cap=mib(self.cap)))
        if self.mode == _KEEP and self.kept + keeping > self.cap:
            self.drop_kept_attachments()

    def more(self) -> bool:
        """Read the next chunk; the bytes before ``self.i`` are let go (copied if copying)."""
        if self.eof:
            return False
        self.flush(self.i)
        consumed = self.buf[: self.i]
        self.lines += consumed.count(b"\n")
        last = consumed.rfind(b"\n")
        if last >= 0:
            self.line_start = self.base + last + 1
        self.base += self.i
        self.buf, self.i = self.buf[self.i :], 0
        if self.copy_from is not None:
            self.copy_from = 0
        chunk = self.read(CHUNK)
        try:
            self.utf8.decode(chunk, final=not chunk)
        except UnicodeDecodeError:
            self.error(NOT_UTF8)
        if not chunk:
            self.eof = True
            return False
        self.size += len(chunk)
        if self.size > self.ceiling:
            self.error(GREW.format(ceiling=mib(self.ceiling)))
        self.sha.update(chunk)
        self.buf += chunk
        return True

    def need(self, n: int) -> bool:
        while len(self.buf) - self.i < n and self.more():
            pass
        return len(self.buf) - self.i >= n

    # -- structure ---------------------------------------------------------------------------

    def role(self, opening: bytes | None) -> int:
        if self.mode != _COPY:
            return _OTHER
        if not self.stack:
            return _ROOT if opening == b"{" else _OTHER
        kind, parent, key = self.stack[-1]
        if parent == _ROOT and opening == b"[":
            return {"cells": _CELLS, "worksheets": _WORKSHEETS}.get(key, _OTHER)
        if parent == _WORKSHEETS and opening == b"{":
            return _WORKSHEET
        if parent == _WORKSHEET and key == "cells" and opening == b"[":
            return _CELLS
        if parent == _CELLS and opening == b"{":
            return _CELL
        if parent == _CELL:
            return {"outputs": _OUTPUTS, "attachments": _ATTACHMENTS}.get(key, _OTHER)
        return _OTHER

    def begin(self, role: int, opening: bytes | None) -> None:
        """A value starts at ``self.i``: an output or attachments value is skipped or kept."""
        if role not in (_OUTPUTS, _ATTACHMENTS):
            return
        self.flush(self.i)
        self.kind, self.depth, self.chars = role, len(self.stack), 0
        self.count = 0 if opening == b"{" else 1
        if role == _ATTACHMENTS and not self.dropped_for_cap:
            self.mode, self.span_start = _KEEP, len(self.out)
        else:
            self.mode, self.copy_from = _SKIP, None

    def counted(self, chars: int) -> None:
        self.chars += chars
        if self.mode == _KEEP and self.chars > self.caps.stored_output_chars:
            del self.out[self.span_start :]  # over the cap in one cell: skipped from here
            self.mode, self.copy_from = _SKIP, None

    def drop_kept_attachments(self) -> None:
        """Every attachment kept so far, and the one being read, dropped (``{}``)."""
        if self.mode == _KEEP:
            del self.out[self.span_start :]
            self.mode, self.copy_from = _SKIP, None
        self.out = self.without_attachments()
        self.dropped_for_cap = True

    def without_attachments(self) -> bytearray:
        out, previous = bytearray(), 0
        for start, end in self.spans:
            out += self.out[previous:start]
            out += b"{}"
            previous = end
        out += self.out[previous:]
        self.spans, self.kept = [], 0
        return out

    def value_done(self) -> int:
        """After a value ends at ``self.i``: what comes next."""
        if self.mode != _COPY and len(self.stack) == self.depth:
            if self.kind == _OUTPUTS:
                self.out += b"[]"
                self.output_chars += self.chars
                self.outputs_over |= self.chars > self.caps.stored_output_chars
            else:
                self.attached += self.count
                self.attached_chars += self.chars
                if self.mode == _KEEP:
                    self.flush(self.i)  # which may drop every attachment: over the cap
                if self.mode == _KEEP:
                    self.spans.append((self.span_start, len(self.out)))
                    self.kept += len(self.out) - self.span_start
                else:
                    self.out += b"{}"
                    self.attachments_over |= self.chars > self.caps.stored_output_chars
            self.mode, self.copy_from = _COPY, self.i
            self.check_size()
        return _COMMA_OR_CLOSE if self.stack else _END

    # -- tokens ------------------------------------------------------------------------------

    def string(self) -> bytes:
        """The string starting at ``self.i``, consumed; its raw content if it may be a key
        (its first ``_KEY_BYTES + 1`` bytes), counted if it is skipped or kept."""
        buf, i = self.buf, self.i
        whole = _STRING.match(buf, i)
        if whole is not None:
            content = whole.group(1)
            if self.mode != _COPY:
                self.counted(_chars(content))
            self.i = whole.end()
            return content[: _KEY_BYTES + 1]
        head, j = bytearray(), i + 1  # longer than the bytes at hand, or not a string
        high = False  # the last escape was a surrogate pair's first half
        while True:
            run = _RUN.match(buf, j)
            if len(head) <= _KEY_BYTES:
                head += buf[j : min(run.end(), j + _KEY_BYTES + 1)]
            if self.mode != _COPY and run.end() > j:
                self.counted(_chars(buf[j : run.end()]))
                high = False
            j = run.end()
            if j == len(buf):
                self.i = j
                if not self.more():
                    self.syntax(len(self.buf))
                buf, j = self.buf, self.i
                continue
            if buf[j] == 0x22:
                self.i = j + 1
                return bytes(head)
            if buf[j] != 0x5C:  # a control character
                self.syntax(j)
            self.i = j
            self.need(6)
            buf, j = self.buf, self.i
            escape = _ESCAPE.match(buf, j)
            if escape is None:
                self.syntax(j)
            if len(head) <= _KEY_BYTES:
                head += escape.group()
            code = int(escape.group(1), 16) if escape.group(1) else -1
            paired = high and 0xDC00 <= code <= 0xDFFF  # a surrogate pair is one character
            if self.mode != _COPY and not paired:
                self.counted(1)
            high = not paired and 0xD800 <= code <= 0xDBFF
            j = escape.end()

    def skip_strings(self) -> bool:
        """In an array being skipped, after a value: every ``, "string"`` at hand, counted
        (whether there was one)."""
        buf, i, chars = self.buf, self.i, 0
        match = _NEXT_STRING.match(buf, i)
        while match is not None:
            chars += _chars(match.group(1))
            i = match.end()
            match = _NEXT_STRING.match(buf, i)
        self.chars += chars
        moved, self.i = i != self.i, i
        return moved

    def word(self) -> None:
        while True:
            match = _WORD.match(self.buf, self.i)
            if match.end() - self.i > MAX_WORD:
                self.error(LONG_WORD.format(limit=MAX_WORD))
            if match.end() < len(self.buf) or not self.more():
                break
        if not _LITERAL.match(match.group()):
            self.syntax(self.i)
        if self.mode != _COPY:
            self.counted(1)
        self.i = match.end()

    def scan(self) -> None:
        state, stack = _VALUE, self.stack
        while True:
            self.i = _WS.match(self.buf, self.i).end()
            if self.i == len(self.buf):
                if self.more():
                    continue
                if state != _END:
                    self.syntax(len(self.buf))
                self.flush(len(self.buf))
                return
            c = self.buf[self.i]
            if state == _END:
                self.syntax(self.i)
            if (
                c == 0x2C
                and state == _COMMA_OR_CLOSE
                and self.mode == _SKIP
                and stack[-1][0] == b"["
            ):
                if self.skip_strings():  # the lines of a print, say: no per-string step
                    continue
            if c == 0x22:  # "
                if state in (_KEY, _KEY_OR_CLOSE):
                    raw = self.string()
                    if len(raw) > _KEY_BYTES:
                        key = None
                    elif b"\\" in raw:
                        key = json.loads(b'"' + raw + b'"')
                    else:
                        key = raw.decode("utf-8")
                    stack[-1][2] = key
                    if self.mode != _COPY and len(stack) == self.depth + 1:
                        self.count += 1  # a key of the attachments themselves
                    state = _COLON
                elif state in (_VALUE, _VALUE_OR_CLOSE):
                    self.begin(self.role(None), None)
                    self.string()
                    state = self.value_done()
                else:
                    self.syntax(self.i)
            elif c in (0x7B, 0x5B):  # { [
                if state not in (_VALUE, _VALUE_OR_CLOSE):
                    self.syntax(self.i)
                opening = b"{" if c == 0x7B else b"["
                role = self.role(opening)
                self.begin(role, opening)
                if len(stack) >= MAX_DEPTH:
                    self.error(TOO_DEEP)
                stack.append([opening, role, None])
                self.i += 1
                state = _KEY_OR_CLOSE if c == 0x7B else _VALUE_OR_CLOSE
            elif c in (0x7D, 0x5D):  # } ]
                opening = b"{" if c == 0x7D else b"["
                allowed = _KEY_OR_CLOSE if c == 0x7D else _VALUE_OR_CLOSE
                if state not in (allowed, _COMMA_OR_CLOSE) or stack[-1][0] != opening:
                    self.syntax(self.i)
                stack.pop()
                self.i += 1
                state = self.value_done()
            elif c == 0x2C:  # ,
                if state != _COMMA_OR_CLOSE:
                    self.syntax(self.i)
                self.i += 1
                state = _KEY if stack[-1][0] == b"{" else _VALUE
            elif c == 0x3A:  # :
                if state != _COLON:
                    self.syntax(self.i)
                self.i += 1
                state = _VALUE
            elif state in (_VALUE, _VALUE_OR_CLOSE):
                self.begin(self.role(None), None)
                self.word()
                state = self.value_done()
            else:
                self.syntax(self.i)

    def result(self) -> Stripped:
        notes = []
        if self.outputs_over:
            notes.append(OUTPUTS_DROPPED.format(chars=self.output_chars))
        if self.attached > self.caps.attachments or self.attachments_over:
            self.out = self.without_attachments()
            notes.append(
                ATTACHMENTS_DROPPED.format(
                    count=self.attached,
                    chars=self.attached_chars,
                    limit=self.caps.attachments,
                    limit_chars=self.caps.stored_output_chars,
                )
            )
        elif self.dropped_for_cap or len(self.out) > self.cap:
            self.out = self.without_attachments()
            notes.append(
                ATTACHMENTS_OVER_CAP.format(
                    count=self.attached, chars=self.attached_chars, cap=mib(self.cap)
                )
            )
        if len(self.out) > self.cap:
            self.error(OVER_CAP.format(cap=mib(self.cap)))
        return Stripped(bytes(self.out), self.sha.hexdigest(), self.size, tuple(notes))


def strip_outputs(
    read: Callable[[int], bytes], cap: int, ceiling: int, caps: Caps = DEFAULT_CAPS
) -> Stripped:
    """Read a notebook through ``read(n)`` (at most ``n`` bytes, ``b""`` at the end) and give
    it back without its saved outputs (`Stripped`), reading at most ``ceiling`` bytes and
    keeping at most ``cap`` of what is graded. Raises ``InvalidNotebook`` with the reason."""
    scanner = _Scanner(read, cap, ceiling, caps)
    try:
        scanner.scan()
        return scanner.result()
    except _Refused as why:
        raise InvalidNotebook(str(why)) from None
