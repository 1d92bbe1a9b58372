"""A submitted notebook is read as a stream: its saved outputs are skipped as they pass and
never held, up to a hard ceiling (``Limits.notebook_file_bytes``), and the notebook's cap
(``Limits.notebook_bytes``) applies to what is graded: the notebook without its outputs
(docs/threat-model.md, "Before it runs"). No sandbox runs here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli, sandbox  # noqa: E402
from autograder.checking import intake, notebook  # noqa: E402
from autograder.checking.notebook import InvalidNotebook  # noqa: E402
from autograder.checking.notebook_stream import strip_outputs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CAP = 8 << 20
CEILING = 256 << 20


def _reader(data: bytes, chunk: int | None = None):
    stream = io.BytesIO(data)
    if chunk is None:
        return stream.read
    return lambda n: stream.read(min(n, chunk))


def strip(data: bytes, chunk=None, cap=CAP, ceiling=CEILING, caps=notebook.DEFAULT_CAPS):
    return strip_outputs(_reader(data, chunk), cap, ceiling, caps)


def _code(source: str, outputs=None, **fields) -> dict:
    cell = {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": source}
    return cell | {"outputs": outputs or []} | fields


def _notebook(*cells) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": list(cells)}


def _printed(n_lines: int, width: int = 60) -> list:
    line = "x" * (width - 1) + "\n"
    return [{"output_type": "stream", "name": "stdout", "text": [line] * n_lines}]


def _figure(n_bytes: int) -> list:
    data = {"image/png": "iVBORw0KGgo" * (n_bytes // 11), "text/plain": ["<Figure>"]}
    return [{"output_type": "display_data", "data": data, "metadata": {}}]


# ---------------------------------------------------------------------------------------
# what comes out is what the parse would have graded


def _variety() -> dict:
    """Notebooks whose saved parts take every shape the reader meets."""
    image = {"image/png": "iVBORw0KGgo="}
    return {
        "plain": _notebook(
            _code("x = 1", _printed(3)), {"cell_type": "markdown", "metadata": {}, "source": "# hi"}
        ),
        "escapes": _notebook(
            _code(
                "s = '\\u00e9'",
                [{"output_type": "stream", "name": "stdout", "text": 'é "q" \\ \t 😀 中文\n'}],
            ),
        ),
        "numbers": _notebook(
            _code(
                "1",
                [
                    {
                        "output_type": "execute_result",
                        "execution_count": 1,
                        "metadata": {"a": [1, -2.5e-3, True, False, None]},
                        "data": {"text/plain": "1"},
                    }
                ],
            )
        ),
        "markdown outputs": _notebook(
            {"cell_type": "markdown", "metadata": {}, "source": "a", "outputs": [{"x": 1}]}
        ),
        "scalar outputs": _notebook(_code("x", None) | {"outputs": "not a list"}),
        "attachments kept": _notebook(
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": "![a](attachment:a.png)",
                "attachments": {"a.png": image},
            }
        ),
        "outputs in metadata stay": _notebook(
            _code("y", _printed(1), metadata={"outputs": ["kept"]})
        ),
        "lines of every escape": _notebook(
            _code(
                "print(s)",
                [
                    {
                        "output_type": "stream",
                        "name": "stdout",
                        "text": [
                            "a\\b\n",
                            "é\n",
                            "😀\n",
                            '"q"\n',
                            "tab\t",
                            "\\u0041\n",
                            "\u0000",
                            "/",
                            "中",
                        ],
                    }
                ],
            )
        ),
        "surrogates": _notebook(
            _code(
                "s",
                [{"output_type": "stream", "name": "stdout", "text": "\ud83d\ud83d\ude00\ude00x"}],
            )
        ),
        "many cells": _notebook(*[_code(f"x{i} = {i}", _printed(i % 4)) for i in range(300)]),
        "nbformat 3": {
            "nbformat": 3,
            "nbformat_minor": 0,
            "metadata": {},
            "worksheets": [
                {
                    "cells": [
                        {
                            "cell_type": "code",
                            "input": "x",
                            "language": "python",
                            "outputs": [{"output_type": "stream", "text": "a"}],
                            "metadata": {},
                        }
                    ],
                    "metadata": {},
                }
            ],
        },
    }


@pytest.mark.parametrize("name", list(_variety()))
@pytest.mark.parametrize("chunk", [None, 1, 2, 3, 7, 64])
@pytest.mark.parametrize("over", [False, True])
def test_the_stream_gives_what_dropping_after_a_whole_parse_gives(name, chunk, over):
    """Read in chunks of 1 byte up to the whole file: what comes out parses to what
    `drop_ungraded` leaves of the whole parse, with the same notes (``over``: caps so small
    that every saved output has one, its characters counted alike); the SHA-256 and the
    size are the file's."""
    import dataclasses
    import hashlib

    original = _variety()[name]
    caps = notebook.DEFAULT_CAPS
    if over:
        caps = dataclasses.replace(caps, stored_output_chars=1, attachments=0)
    for text in (json.dumps(original), json.dumps(original, indent=1, ensure_ascii=False)):
        try:
            data = text.encode()
        except UnicodeEncodeError:  # lone surrogates: JSON can hold them escaped only
            continue
        stripped = strip(data, chunk, caps=caps)
        expected = json.loads(data)
        notes = notebook.drop_ungraded(expected, caps)
        got = json.loads(stripped.data)
        assert notebook.drop_ungraded(got, caps) == []
        for cell in got.get("cells", []):  # dropped attachments are written back as {}
            if cell.get("attachments") == {}:
                del cell["attachments"]
        assert got == expected
        assert list(stripped.notes) == notes
        assert (stripped.sha256, stripped.size) == (hashlib.sha256(data).hexdigest(), len(data))
        assert len(stripped.data) <= len(data)


def test_the_notes_over_the_caps_are_the_parse_ones():
    """The course's notebooks that save more than a cap beside their code (4.5 MB of output
    in one cell, a 5 MB attachment, 500 attachments): the same fixed notes as before, the
    numbers counted as `notebook._measure` counts characters, and nothing saved kept."""
    base = _notebook(_code("x = 1"))
    for student, (text, notes) in corpus.saved_beside_the_code(base).items():
        for chunk in (None, 4093):
            stripped = strip(text.encode(), chunk)
            assert list(stripped.notes) == notes, student
            parsed = json.loads(stripped.data)
            assert not any(c.get("attachments") for c in parsed["cells"]), student
            assert all(c.get("outputs", []) == [] for c in parsed["cells"]), student
            assert len(stripped.data) < 2000, student


def test_a_key_is_matched_as_json_decodes_it_and_each_time_it_is_given():
    data = (
        b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code",'
        b' "metadata": {}, "execution_count": 1, "source": "x", "outp\\u0075ts": [{"a": "SECRET1"}],'
        b' "outputs": [{"a": "SECRET2"}]}], "cel\\u006cs": [{"cell_type": "code", "metadata": {},'
        b' "execution_count": 1, "source": "y", "outputs": ["SECRET3"]}]}'
    )
    stripped = strip(data, 5)
    assert b"SECRET" not in stripped.data
    assert json.loads(stripped.data)["cells"][0]["outputs"] == []


# ---------------------------------------------------------------------------------------
# the cap applies to what is graded; the ceiling to the file


def test_a_notebook_big_for_its_outputs_is_graded_whole_and_small():
    """11.6 MiB of saved plots and prints beside small code: read whole, kept small."""
    cells = [_code("plot(x)", _figure(1_600_000)) for _ in range(5)]
    cells += [_code("print(y)", _printed(65_000)) for _ in range(1)]
    data = json.dumps(_notebook(*cells)).encode()
    assert 11 << 20 < len(data) < 12 << 20
    stripped = strip(data)
    assert stripped.notes == () and stripped.size == len(data)
    assert len(stripped.data) < 2000
    assert len(json.loads(stripped.data)["cells"]) == 6


def test_code_and_text_over_the_cap_are_refused_with_their_reason():
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "w" * 100_000} for _ in range(12)]
    data = json.dumps(_notebook(*cells, _code("x", _figure(50_000_000)))).encode()
    for chunk in (None, 1 << 16):
        with pytest.raises(InvalidNotebook) as refused:
            strip(data, chunk, cap=1 << 20)
        assert str(refused.value) == (
            "the notebook's code and text (its saved outputs left out) are over the cap of 1.0 MiB"
        )


@pytest.mark.parametrize("chunk", [None, 4096])
def test_attachments_within_their_caps_but_over_the_notebook_cap_are_dropped_with_a_note(chunk):
    image = "A" * 300_000  # each cell: 300,000 + "a0.png" + "image/png" = 300,015 characters
    cells = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": f"![a](attachment:a{i}.png)",
            "attachments": {f"a{i}.png": {"image/png": image}},
        }
        for i in range(5)
    ]
    stripped = strip(json.dumps(_notebook(_code("x = 1"), *cells)).encode(), chunk, cap=1 << 20)
    assert stripped.notes == (
        "attachments were dropped before grading (5, 1,500,075 characters, more than the "
        "notebook's cap of 1.0 MiB with the code): they are not graded",
    )
    assert len(stripped.data) < 2000
    assert not any(c.get("attachments") for c in json.loads(stripped.data)["cells"])


@pytest.mark.parametrize("chunk", [None, 1000])
def test_attachments_dropped_as_one_ends_leave_valid_json(chunk):
    """The cap passed as one cell's attachments end (the whole file in one read): every
    attachment goes, and the rest is the notebook's JSON, whole."""
    cells = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": "a",
            "attachments": {f"a{i}.png": {"image/png": "A" * 30_000}},
        }
        for i in range(5)
    ]
    data = json.dumps(_notebook(_code("x = 1"), *cells)).encode()
    stripped = strip(data, chunk, cap=100_000)
    assert [c.get("attachments") for c in json.loads(stripped.data)["cells"]] == [None] + [{}] * 5
    assert "more than the notebook's cap of 0.1 MiB" in stripped.notes[0]


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as handle:
        handle.write(json.dumps(_notebook(_code("x = 1"))).encode())
        handle.truncate(size)
    return path


def test_a_file_over_the_ceiling_is_refused_unread(tmp_path, monkeypatch):
    big = _sparse(tmp_path / "big.ipynb", 600 << 20)
    read = []
    real = os.read
    monkeypatch.setattr(intake.os, "read", lambda fd, n: read.append(n) or real(fd, n))
    with pytest.raises(InvalidNotebook) as refused:
        intake.read_notebook(big, CAP)
    assert str(refused.value) == (
        "the notebook is 600.0 MiB, over the 256.0 MiB the grader reads of a file: it was not read"
    )
    assert read == []
    # the instructor's ceiling, and a cap over it, move it
    with pytest.raises(InvalidNotebook, match="over the 1.0 MiB the grader reads"):
        intake.read_notebook(_sparse(tmp_path / "two.ipynb", 2 << 20), 1 << 19, ceiling=1 << 20)


def test_a_file_that_grows_past_the_ceiling_while_read_is_refused():
    # /proc files report size 0 to fstat and then hold more: the ceiling holds on the bytes
    with pytest.raises(InvalidNotebook, match="grew past the 0.0 MiB the grader reads"):
        intake.read_notebook(Path("/proc/self/maps"), 10, ceiling=10)


def test_the_ceiling_is_an_instructor_limit():
    args = cli.build_parser().parse_args(["grade", "a", "--max-notebook-file-mb", "512"])
    assert cli.explicit_limits(args) == {"notebook_file_bytes": 512 << 20}
    assert sandbox.Limits().notebook_file_bytes == CEILING == intake.NOTEBOOK_CEILING


# ---------------------------------------------------------------------------------------
# hostile JSON: refused in fixed words, or handled


#: the reason names the line and column where ``json`` itself stops (ASCII: bytes are characters)
AS_JSON = None


def _hostile_cases() -> dict:
    head = b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "x", "outputs": '
    tail = b"}]}"
    return {
        "deep outside outputs": (b"[" * 20_000 + b"]" * 20_000, notebook.TOO_DEEP),
        "deep inside outputs": (head + b"[" * 20_000 + b"]" * 20_000 + tail, notebook.TOO_DEEP),
        "invalid UTF-8 inside outputs": (head + b'["\xff\xfe"]' + tail, notebook.NOT_UTF8),
        "a cut UTF-8 character at the end": (head + b'["\xe4\xb8', notebook.NOT_UTF8),
        "a control character in an output": (
            head + b'["a\x01b"]' + tail,
            AS_JSON,
        ),
        "a bad escape in an output": (head + b'["a\\qb"]' + tail, AS_JSON),
        "a number of 5,000 digits": (
            head + b"[" + b"1" * 5000 + b"]" + tail,
            "more than 4,096 characters",
        ),
        "mismatched brackets": (head + b"[}" + tail, AS_JSON),
        "a trailing comma": (head + b"[1,]" + tail, AS_JSON),
        "two commas before a string": (head + b'["a",,"b"]' + tail, AS_JSON),
        "a comma after the last string": (head + b'["a", "b",]' + tail, AS_JSON),
        "garbage after": (head + b"[]" + tail + b" x", AS_JSON),
        "a second line": (head + b"[\n  nope]" + tail, AS_JSON),
    }


@pytest.mark.parametrize("name", list(_hostile_cases()))
def test_hostile_json_is_refused_in_fixed_words(name):
    data, why = _hostile_cases()[name]
    if why is AS_JSON:
        with pytest.raises(json.JSONDecodeError) as parse:
            json.loads(data.decode())
        why = notebook.NOT_JSON.format(line=parse.value.lineno, column=parse.value.colno)
    for chunk in (None, 1, 5):
        with pytest.raises(InvalidNotebook) as refused:
            strip(data, chunk)
        assert why in str(refused.value), (chunk, str(refused.value))
        assert "nope" not in str(refused.value)


def test_a_truncated_notebook_is_refused_wherever_it_is_cut():
    data = json.dumps(_variety()["escapes"], ensure_ascii=False).encode()
    for end in range(len(data)):
        with pytest.raises(InvalidNotebook) as refused:
            strip(data[:end], 3)
        assert str(refused.value).startswith("not a readable Jupyter notebook (it is not "), end


def test_a_huge_string_inside_outputs_and_duplicate_keys_are_handled():
    """A 40 MB string in an output, given twice under the same key: skipped, never held."""
    huge = b'"' + b"z" * 40_000_000 + b'"'
    data = (
        b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", '
        b'"metadata": {}, "execution_count": 1, "source": "x", "outputs": [' + huge + b"], "
        b'"outputs": {"a": ' + huge + b"}}]}"
    )
    stripped = strip(data)
    assert stripped.notes == (
        "saved outputs were dropped before grading (80,000,001 characters): they are not graded",
    )
    assert json.loads(stripped.data)["cells"][0]["outputs"] == []


# ---------------------------------------------------------------------------------------
# the trusted side's memory does not grow with the outputs

#: what reading a 200 MiB notebook of saved outputs may add to the reading process's peak
#: resident memory: its high-water mark after (``VmHWM``: ``ru_maxrss`` of this process image
#: alone; ``ru_maxrss`` itself keeps the forking pytest's size across the exec) over its
#: resident memory before, once the parse's imports are done. Measured 1.1-1.2 MiB (a 1 MiB
#: chunk at a time); the bound is generous, and 1/8 of the file
STREAM_MEMORY_BYTES = 24 << 20


def test_reading_a_200_mib_notebook_of_outputs_costs_little_memory(tmp_path):
    path = tmp_path / "outputs.ipynb"
    with open(path, "w") as handle:
        handle.write('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [')
        written, n = 0, 0
        while written < 200 << 20:
            outputs = _figure(1_000_000) if n % 2 else _printed(2000, width=200)
            cell = json.dumps(_code(f"plot({n})", outputs, id=f"c{n}"))
            handle.write(("," if n else "") + cell)
            written, n = written + len(cell), n + 1
        handle.write("]}")
    small = tmp_path / "small.ipynb"
    small.write_text(json.dumps(_notebook(_code("x = 1", _printed(10)))))
    child = (
        "import sys\n"
        "from autograder.checking import intake, notebook\n"
        "notebook.read_graded(intake.read_notebook(sys.argv[2], 8 << 20).data)  # imports\n"
        "status = open('/proc/self/status').read()\n"
        "before = int(status.split('VmRSS:')[1].split()[0])  # KiB resident now, not the peak\n"
        "read = intake.read_notebook(sys.argv[1], 8 << 20)\n"
        "parsed, dropped = notebook.read_graded(read.data)\n"
        "status = open('/proc/self/status').read()\n"
        "peak = int(status.split('VmHWM:')[1].split()[0])\n"
        "print(read.size, len(read.data), (peak - before) * 1024, len(parsed.cells))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", child, str(path), str(small)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    size, kept, grown, cells = map(int, run.stdout.split())
    assert size == path.stat().st_size > 200 << 20
    assert cells == n and kept < 200 * n  # about 110 bytes a cell: its code, no outputs
    assert grown < STREAM_MEMORY_BYTES, grown
    print(f"200 MiB of outputs: the peak grew by {grown / (1 << 20):.1f} MiB")
