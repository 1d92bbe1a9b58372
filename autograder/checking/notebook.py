"""A submitted notebook read: hostile bytes, under caps fixed before the first byte.

`read_submission(path)` parses a submitted notebook; what it saved beside its code (outputs,
attachments over their caps) is dropped first, with a note (`drop_ungraded`); a file that is
not a notebook, or one whose code is over an intake cap (`Caps`: cells, characters, HTML
depth, metadata; checked by `over_caps` in one pass before anything else), or whose nbgrader
metadata is not nbgrader's (`nbgrader_problem`), raises `InvalidNotebook` with the reason,
always a fixed sentence or the grader's own numbers. `checksum_of` is nbgrader's checksum of
a cell whose metadata was checked; `unanswered_manual_cells` the written answers left as
released.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.checking.assignment_spec import AssignmentSpec, nbgrader_of


class InvalidNotebook(ValueError):
    """A submission that cannot be read as a Jupyter notebook."""


@dataclass(frozen=True)
class Caps:
    """What the trusted side accepts in a submitted notebook beyond its size in bytes: each
    step it takes with the notebook (parse, validate, build the program, sanitise, write the
    autograded copy) is then linear in these numbers. The defaults are generous multiples of
    what the course's honest notebooks hold (the largest book chapter: 60 cells, 4,413
    characters in one cell, 70,654 in all, a stored figure of 185 KB, 860 KB of outputs,
    metadata 3 deep and 277 characters; see docs/threat-model.md). Each is an instructor's
    limit (``python -m autograder grade --help``) and may be set by a chapter's ``limits``."""

    cells: int = 2000  # cells in the notebook
    cell_source_chars: int = 200_000  # characters of one cell's source
    source_chars: int = 2_000_000  # characters of every cell's source together
    # over these two, what was saved beside the code is dropped with a note (`drop_ungraded`)
    stored_output_chars: int = 4_000_000  # characters in one cell's stored outputs/attachments
    html_depth: int = 100  # elements open inside each other in a markdown or raw cell
    attachments: int = 100  # files attached to markdown cells, in all
    metadata_depth: int = 16  # nesting of a cell's or the notebook's metadata
    metadata_chars: int = 64_000  # characters of a cell's or the notebook's metadata
    record_seconds: float = 60.0  # CPU seconds to make and write the autograded notebook


DEFAULT_CAPS = Caps()


def _measure(value, max_depth: int, max_chars: int) -> tuple[int, int]:
    """(characters, depth) of a JSON value, walked without recursion and stopped as soon as
    either is over its cap: linear in the value, whatever its shape."""
    chars, deepest, stack = 0, 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > max_depth or chars > max_chars:
            break
        if isinstance(item, dict):
            chars += sum(len(str(k)) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        else:
            chars += len(item) if isinstance(item, str) else 1
    return chars, deepest


def _metadata_over(meta, caps: Caps, where: str) -> str | None:
    chars, depth = _measure(meta, caps.metadata_depth, caps.metadata_chars)
    if depth > caps.metadata_depth:
        return f"{where} metadata is nested more than {caps.metadata_depth} deep"
    if chars > caps.metadata_chars:
        return f"{where} metadata holds more than {caps.metadata_chars:,} characters"
    return None


def _cells(raw) -> list:
    """The cells of a parsed notebook, nbformat 4's or 3's (kept in worksheets)."""
    cells = raw.get("cells")
    if not isinstance(cells, list):
        sheets = raw.get("worksheets") if isinstance(raw.get("worksheets"), list) else []
        cells = [c for s in sheets if isinstance(s, dict) for c in (s.get("cells") or [])]
    return cells


#: what a submission is told when what it saved beside its code was dropped (numbers only)
NOT_GRADED = "they are not graded"
OUTPUTS_DROPPED = "saved outputs were dropped before grading ({chars:,} characters): " + NOT_GRADED
ATTACHMENTS_DROPPED = (
    "attachments were dropped before grading ({count:,}, {chars:,} characters, over the "
    "limit of {limit:,} attachments or {limit_chars:,} characters in one cell): " + NOT_GRADED
)


def drop_ungraded(raw, caps: Caps = DEFAULT_CAPS) -> list[str]:
    """Drop, in place, what a submission saved beside its code, before any cap is checked:
    every cell's saved outputs (the grader shows the outputs of its own run, never these)
    and, when they are over ``caps`` (more than ``caps.attachments``, or more than
    ``caps.stored_output_chars`` characters in one cell), every attachment (an image in a
    written answer is kept within them: the formgrader shows it). The fixed sentences saying
    what was dropped, when it was over a cap (an honest notebook's outputs go silently):
    a large saved output costs no points, and its JSON is let go here, at the first step."""
    if not isinstance(raw, dict):
        return []
    dropped_chars, over, notes = 0, False, []
    attached: list[tuple[dict, int]] = []
    for cell in _cells(raw):
        if not isinstance(cell, dict):
            continue
        outputs = cell.get("outputs")
        if outputs is not None:
            chars, _depth = _measure(outputs, 1 << 62, 1 << 62)
            dropped_chars += chars
            over |= chars > caps.stored_output_chars
            if cell.get("cell_type") == "code":
                cell["outputs"] = []  # what nbformat's schema asks of a code cell
            else:
                del cell["outputs"]
        if "attachments" in cell:
            chars, _depth = _measure(cell["attachments"], 1 << 62, 1 << 62)
            attached.append((cell, chars))
    if over:
        notes.append(OUTPUTS_DROPPED.format(chars=dropped_chars))
    count = sum(
        len(c["attachments"]) if isinstance(c["attachments"], dict) else 1 for c, _ in attached
    )
    if count > caps.attachments or any(chars > caps.stored_output_chars for _c, chars in attached):
        for cell, _chars in attached:
            del cell["attachments"]
        notes.append(
            ATTACHMENTS_DROPPED.format(
                count=count,
                chars=sum(chars for _c, chars in attached),
                limit=caps.attachments,
                limit_chars=caps.stored_output_chars,
            )
        )
    return notes


def over_caps(raw, caps: Caps = DEFAULT_CAPS) -> str | None:
    """Why the parsed JSON of a submission is over one of ``caps`` (None: within them), found
    in one pass over it, before nbformat validates it and long before anything sanitises it.
    Outputs and attachments are not counted here: `drop_ungraded` drops them first."""
    from autograder.checking.sanitise import html_depth

    if not isinstance(raw, dict):
        return None  # not a notebook: nbformat says so
    cells = _cells(raw)
    if len(cells) > caps.cells:
        return f"the notebook has {len(cells):,} cells; the limit is {caps.cells:,}"
    problem = _metadata_over(raw.get("metadata"), caps, "the notebook's")
    if problem:
        return problem
    total = 0
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            continue  # nbformat's schema refuses it
        source = cell.get("source", cell.get("input", ""))
        text = (
            "".join(s for s in source if isinstance(s, str)) if isinstance(source, list) else source
        )
        text = text if isinstance(text, str) else ""
        if len(text) > caps.cell_source_chars:
            return (
                f"cell {number} holds {len(text):,} characters; the limit for one cell is "
                f"{caps.cell_source_chars:,}"
            )
        total += len(text)
        if total > caps.source_chars:
            return f"the cells hold more than {caps.source_chars:,} characters in all"
        problem = _metadata_over(cell.get("metadata"), caps, f"cell {number}'s")
        if problem:
            return problem
        if cell.get("cell_type") in ("markdown", "raw"):
            depth = html_depth(text, caps.html_depth)
            if depth > caps.html_depth:
                return (
                    f"cell {number} nests HTML elements more than {caps.html_depth} deep; "
                    "the grader does not render that"
                )
    return None


def read_submission(source, caps: Caps = DEFAULT_CAPS):
    """The submitted notebook (a path, or the file's bytes), or InvalidNotebook saying why it
    cannot be graded: `read_graded`'s notebook."""
    return read_graded(source, caps)[0]


#: why a file is not a notebook, in fixed words: nothing a submission wrote is quoted (the
#: parsers' messages repeat a version, a key or a field path the file chose)
NOT_UTF8 = "not a readable Jupyter notebook (it is not UTF-8 text)"
NOT_JSON = "not a readable Jupyter notebook (it is not JSON: line {line}, column {column})"
TOO_DEEP = "not a readable Jupyter notebook (it is nested too deep to read)"
NO_VERSION = "not a readable Jupyter notebook (its nbformat version is not 3 or 4)"
UNCONVERTIBLE = "not a readable Jupyter notebook (nbformat cannot read its structure)"
NO_CELLS = "not a Jupyter notebook: it has no list of cells"
INVALID = (
    "not a valid Jupyter notebook (nbformat's schema rejects its structure; open and save it "
    "in Jupyter to see where)"
)


def _parsed(source):
    """The JSON of a submission (a path or its bytes); InvalidNotebook in fixed words."""
    import json

    try:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
    except FileNotFoundError:
        raise InvalidNotebook("no notebook was handed in") from None
    except OSError:
        raise InvalidNotebook("the notebook cannot be read") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidNotebook(NOT_UTF8) from None
    except json.JSONDecodeError as err:  # its position is the grader's count, not the file's text
        raise InvalidNotebook(NOT_JSON.format(line=err.lineno, column=err.colno)) from None
    except (ValueError, RecursionError):
        raise InvalidNotebook(TOO_DEEP) from None


def _give_missing_ids(notebook) -> None:
    """Cell ids for the cells of a 4.5+ notebook that lack one (an editor that does not write
    them), as nbformat's ``normalize`` would: ``validate`` otherwise warns about each on
    stderr, through the grader's progress bar. Each new id is ``cell-<number>``, unless a
    cell has it already."""
    if not isinstance(notebook.get("nbformat_minor"), int) or notebook.nbformat_minor < 5:
        return
    cells = [c for c in notebook.cells if isinstance(c, dict)]
    taken = {c["id"] for c in cells if isinstance(c.get("id"), str)}
    for number, cell in enumerate(cells, 1):
        if "id" not in cell:
            new = f"cell-{number}"
            while new in taken:
                new += "-"
            cell["id"] = new
            taken.add(new)


def read_graded(source, caps: Caps = DEFAULT_CAPS):
    """(the submitted notebook, what was dropped from it): what it saved beside its code is
    dropped first (`drop_ungraded`, with the sentences saying so), then ``caps`` are checked
    on what is left (`over_caps`), then nbformat reads and validates it, from the one parse.
    InvalidNotebook's reason is always a fixed sentence or the grader's own numbers."""
    raw = _parsed(source)
    dropped = drop_ungraded(raw, caps)
    problem = over_caps(raw, caps)
    if problem:
        raise InvalidNotebook(problem)
    major = raw.get("nbformat") if isinstance(raw, dict) else None
    if type(major) is not int or major not in (3, 4):
        raise InvalidNotebook(NO_VERSION)
    minor = raw.get("nbformat_minor")
    try:
        read = nbformat.versions[major].to_notebook_json(
            raw, minor=minor if type(minor) is int else 0
        )
        notebook = nbformat.convert(read, 4)
    except Exception:  # noqa: BLE001 - nbformat raises several types for bad structure
        raise InvalidNotebook(UNCONVERTIBLE) from None
    if not isinstance(notebook.get("cells"), list):
        raise InvalidNotebook(NO_CELLS)
    _give_missing_ids(notebook)
    try:
        nbformat.validate(notebook)
    except Exception:  # noqa: BLE001 - nbformat's ValidationError and its relatives
        # a fixed sentence: the schema's message and the path it names hold field names the
        # submission chose (".../attachments/<any text>"), which must reach no feedback
        raise InvalidNotebook(INVALID) from None
    for index, cell in enumerate(notebook.cells):
        problem = nbgrader_problem(cell.get("metadata", {}).get("nbgrader"))
        if problem:
            field, why = problem
            raise InvalidNotebook(BAD_METADATA.format(cell=index + 1, field=field, why=why))
    return notebook, dropped


#: why a cell's nbgrader metadata is refused: one fixed sentence, with the cell's number and
#: a field and a fault from the fixed lists of `nbgrader_problem` (never a value or a key the
#: submission wrote). Everything the trusted side reads of a submission's nbgrader metadata
#: is checked here, before anything reads it (docs/threat-model.md, "Containment")
BAD_METADATA = (
    "cell {cell} has nbgrader metadata that nbgrader does not write ({field} {why}); "
    "copy the cell back from the released notebook"
)
#: the schema version of the cell metadata nbgrader writes (every released notebook's)
SCHEMA_VERSION = 3
GRADE_ID = re.compile(r"[A-Za-z0-9_-]+\Z")
CHECKSUM = re.compile(r"[0-9a-f]{32}\Z")
FLAGS = ("grade", "solution", "locked", "task")


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def nbgrader_problem(meta) -> tuple[str, str] | None:
    """What is wrong with a cell's (hostile) nbgrader metadata as nbgrader's schema 3 has it
    and as nbgrader's own functions read it (``compute_checksum`` reads ``grade_id`` and
    ``float(points)``): (field, fault), both from fixed lists, or None when it is well
    formed. No metadata, or an empty mapping, is none. A field may be absent where nbgrader
    writes it absent; ``points`` must be there on a graded cell, a finite number of 0 or more
    (``float(points)`` of a 400-digit integer raises); ``grade_id`` on a graded, solution or
    locked cell."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return ("the metadata", "is not a mapping")
    if not meta:
        return None
    for flag in FLAGS:
        if flag in meta and not isinstance(meta[flag], bool):
            return (flag, "is not true or false")
    version = meta.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        return ("schema_version", f"is not {SCHEMA_VERSION}")
    for flag in ("grade", "solution", "locked"):
        if flag not in meta:
            return (flag, "is missing")
    if "grade_id" in meta and not (
        isinstance(meta["grade_id"], str) and GRADE_ID.match(meta["grade_id"])
    ):
        return ("grade_id", "is not a name of letters, digits, - and _")
    if "grade_id" not in meta and (meta["grade"] or meta["solution"] or meta["locked"]):
        return ("grade_id", "is missing")
    if "points" in meta or meta["grade"]:
        points = meta.get("points")
        try:
            finite = _number(points) and math.isfinite(float(points)) and points >= 0
        except OverflowError:
            finite = False
        if not finite:
            return ("points", "is not a finite number of 0 or more")
    if "checksum" in meta and not (
        isinstance(meta["checksum"], str) and CHECKSUM.match(meta["checksum"])
    ):
        return ("checksum", "is not 32 hexadecimal digits")
    if "cell_type" in meta and meta["cell_type"] not in ("code", "markdown", "raw"):
        return ("cell_type", "is not a cell type")
    return None


def checksum_of(cell) -> str | None:
    """nbgrader's checksum of a cell (``compute_checksum``, what nbgrader compares to know an
    answer was left as released), or None for a cell with no well-formed nbgrader metadata:
    nbgrader's function reads the metadata with no check of its own."""
    from autograder.checking import nbgrader_api

    meta = cell.get("metadata", {}).get("nbgrader")
    if not meta or nbgrader_problem(meta) or "grade_id" not in meta:
        return None
    return nbgrader_api.utils().compute_checksum(cell)


def manual_cells(spec: AssignmentSpec) -> list[str]:
    """The grade ids of the written answers: graded cells a human grades (no check does)."""
    return [
        gid for gid, meta in spec.metadata.items() if meta.get("grade") and meta.get("solution")
    ]


def unanswered_manual_cells(spec: AssignmentSpec, submission) -> list[str]:
    """Manually graded cells whose content is still the released one (nbgrader scores them 0),
    and those the submission does not hold at all (another assignment's notebook, or one
    that lost the cell): there is no answer for a human to grade, so none waits for one."""
    manual = manual_cells(spec)
    out, present = [], set()
    for cell in submission.cells:
        meta = nbgrader_of(cell)
        present.add(meta.get("grade_id"))
        if (
            meta.get("grade_id") in manual
            and meta.get("checksum")
            and meta["checksum"] == checksum_of(cell)
        ):
            out.append(meta["grade_id"])
    return out + [gid for gid in manual if gid not in present and gid not in out]
