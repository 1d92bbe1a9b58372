"""Parse: what is graded comes from the instructor's source notebook, what runs from the submission.

- `load_assignment(course, id)` reads ``source/<id>/<id>.ipynb`` (and the released copy, for
  the test cells as students saw them) into an `AssignmentSpec`: the graded test cells with
  their points and ``check("name", fn)`` calls, the locked cells, the solution cells.
- `read_submission(path)` parses a submitted notebook; what it saved beside its code (outputs,
  attachments over their caps) is dropped first, with a note (`drop_ungraded`); a file that is
  not a notebook, or one whose code is over an intake cap (`Caps`: cells, characters, HTML
  depth, metadata; checked by `over_caps` in one pass before anything else), raises
  `InvalidNotebook` with the reason, always a fixed sentence or the grader's own numbers.
- `build_program(spec, submission)` is the code the sandbox runs: the submission's code cells
  minus every graded test cell (matched by nbgrader ``grade_id`` and by content), with the
  locked cells restored from the source; plus a list of tampering notes (edited, deleted,
  duplicated test cells) that never change the score.
- `autograded_notebook(...)` is the notebook nbgrader's feedback and formgrader read: test
  cells in their *released* form (never the hidden code), with the check messages as output.
"""

from __future__ import annotations

import ast
import copy
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

CHECK_CALL = re.compile(r"check\(\s*[\"'](\w+)[\"']\s*,\s*(\w+)\s*\)")
BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


class InvalidNotebook(ValueError):
    """A submission that cannot be read as a Jupyter notebook."""


def strip_hidden_tests(source: str) -> str:
    """The cell as nbgrader releases it: the hidden region and its markers removed."""
    lines, hidden = [], False
    for line in source.split("\n"):
        if BEGIN_HIDDEN in line:
            hidden = True
        elif END_HIDDEN in line:
            hidden = False
        elif not hidden:
            lines.append(line)
    return "\n".join(lines)


def same_code(a: str, b: str) -> bool:
    """Equal up to trailing whitespace and blank lines (what an editor changes silently)."""

    def canon(text: str) -> list[str]:
        return [line.rstrip() for line in text.strip().split("\n") if line.strip()]

    return canon(a) == canon(b)


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return dict(meta) if isinstance(meta, dict) else {}


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


@dataclass(frozen=True)
class TestCell:
    grade_id: str
    points: float
    released: str  # what students see (no hidden region)
    checks: tuple[tuple[str, str], ...]  # (check name, notebook name of the student's function)
    position: int  # index among the source notebook's cells


@dataclass(frozen=True)
class AssignmentSpec:
    assignment: str
    notebook: str  # notebook name without .ipynb
    tests: tuple[TestCell, ...]
    locked: dict  # grade_id -> source, locked code cells (not tests)
    metadata: dict  # grade_id -> the source cell's nbgrader metadata
    order: tuple[str, ...]  # grade_ids in source order
    source_path: Path
    release_path: Path | None
    imports: frozenset = frozenset()  # top-level packages the source notebook imports

    @property
    def max_score(self) -> float:
        return float(sum(t.points for t in self.tests))

    def test(self, grade_id: str) -> TestCell | None:
        return next((t for t in self.tests if t.grade_id == grade_id), None)


def load_assignment(course: Path, assignment: str) -> AssignmentSpec:
    source_path = Path(course) / "source" / assignment / f"{assignment}.ipynb"
    if not source_path.is_file():
        raise FileNotFoundError(
            f"no source notebook {source_path}: is {assignment!r} an assignment id?"
        )
    source = nbformat.read(source_path, as_version=4)
    release_path = Path(course) / "release" / assignment / f"{assignment}.ipynb"
    released = {}
    if release_path.is_file():
        for cell in nbformat.read(release_path, as_version=4).cells:
            meta = _nbgrader(cell)
            if meta.get("grade_id"):
                released[meta["grade_id"]] = _source(cell)
    tests, locked, metadata, order = [], {}, {}, []
    imports = set()
    for cell in source.cells:
        if cell.get("cell_type") == "code":
            imports |= imported_packages(_source(cell))
    for position, cell in enumerate(source.cells):
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if not grade_id:
            continue
        metadata[grade_id] = meta
        order.append(grade_id)
        text = _source(cell)
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            visible = released.get(grade_id, strip_hidden_tests(text))
            calls = tuple(CHECK_CALL.findall(strip_hidden_tests(text)))
            tests.append(TestCell(grade_id, float(meta.get("points", 0)), visible, calls, position))
        elif cell.cell_type == "code" and meta.get("locked") and not meta.get("solution"):
            locked[grade_id] = text
    return AssignmentSpec(
        assignment,
        assignment,
        tuple(tests),
        locked,
        metadata,
        tuple(order),
        source_path,
        release_path if release_path.is_file() else None,
        frozenset(imports),
    )


def imported_packages(code: str) -> set[str]:
    """The top-level packages an instructor's cell imports (a cell that is not plain Python,
    e.g. one with a %magic, counts as importing nothing)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


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


def unanswered_manual_cells(spec: AssignmentSpec, submission) -> list[str]:
    """Manually graded cells whose content is still the released one (nbgrader scores them 0)."""
    manual = {
        gid for gid, meta in spec.metadata.items() if meta.get("grade") and meta.get("solution")
    }
    out = []
    for cell in submission.cells:
        meta = _nbgrader(cell)
        if (
            meta.get("grade_id") in manual
            and meta.get("checksum")
            and meta["checksum"] == checksum_of(cell)
        ):
            out.append(meta["grade_id"])
    return out


@dataclass
class Program:
    """The code the sandbox runs, and where each piece came from."""

    cells: list[str] = field(default_factory=list)
    origin: list[int | None] = field(
        default_factory=list
    )  # submission cell index, None if restored
    tampering: list[str] = field(default_factory=list)


def build_program(spec: AssignmentSpec, submission) -> Program:
    program = Program()
    test_ids = {t.grade_id for t in spec.tests}
    seen_tests: dict[str, int] = {}
    seen_locked: set[str] = set()
    source_rank = {gid: i for i, gid in enumerate(spec.order)}
    anchors: list[tuple[int, int]] = []  # (source rank, program position after the cell)

    for index, cell in enumerate(submission.cells):
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        text = _source(cell)
        if grade_id in test_ids:
            seen_tests[grade_id] = seen_tests.get(grade_id, 0) + 1
            test = spec.test(grade_id)
            if seen_tests[grade_id] > 1:
                program.tampering.append(f"test cell '{grade_id}' is duplicated")
            elif cell.get("cell_type") != "code" or not same_code(text, test.released):
                program.tampering.append(f"test cell '{grade_id}' was edited")
            anchors.append((source_rank[grade_id], len(program.cells)))
            continue
        if cell.get("cell_type") != "code":
            continue
        copy_of = next((t for t in spec.tests if same_code(text, t.released)), None)
        if copy_of is not None and text.strip():
            program.tampering.append(
                f"test cell '{copy_of.grade_id}' is duplicated (a copy without its metadata)"
            )
            continue
        if grade_id in spec.locked and grade_id not in seen_locked:
            seen_locked.add(grade_id)
            if not same_code(text, spec.locked[grade_id]):
                program.tampering.append(
                    f"locked cell '{grade_id}' was edited (the original was run)"
                )
            program.cells.append(spec.locked[grade_id])
            program.origin.append(index)
            anchors.append((source_rank[grade_id], len(program.cells)))
            continue
        program.cells.append(text)
        program.origin.append(index)
        if grade_id in source_rank:
            anchors.append((source_rank[grade_id], len(program.cells)))

    for test in spec.tests:
        if test.grade_id not in seen_tests:
            program.tampering.append(f"test cell '{test.grade_id}' was deleted")

    # a deleted locked cell (e.g. provided helper code) is put back where the source has it
    for grade_id, text in spec.locked.items():
        if grade_id in seen_locked:
            continue
        rank = source_rank[grade_id]
        before = [pos for r, pos in anchors if r < rank]
        position = max(before) if before else 0
        program.cells.insert(position, text)
        program.origin.insert(position, None)
        anchors = [(r, p + 1 if p >= position else p) for r, p in anchors] + [(rank, position + 1)]
        program.tampering.append(f"locked cell '{grade_id}' was deleted (the original was run)")
    return program


def _stream(text: str, name: str = "stdout"):
    return nbformat.v4.new_output("stream", name=name, text=text)


def _error(ename: str, message: str):
    return nbformat.v4.new_output(
        "error",
        ename=ename,
        evalue=message.splitlines()[0] if message else "",
        traceback=message.splitlines() or [ename],
    )


def autograded_notebook(
    spec: AssignmentSpec, submission, test_messages: dict, cell_outputs: dict, record: dict
):
    """The notebook to store under autograded/: safe for feedback, faithful to nbgrader.

    test_messages: grade_id -> (passed, message); cell_outputs: submission cell index ->
    list of nbformat outputs; record: written into the notebook metadata (seed, reasons...).
    """
    if submission is None:  # invalid notebook: start from the released (or a cleared) copy
        base = (
            nbformat.read(spec.release_path, as_version=4)
            if spec.release_path
            else nbformat.v4.new_notebook()
        )
        cells = (
            [
                c
                for c in base.cells
                if _nbgrader(c).get("grade_id") in {t.grade_id for t in spec.tests}
            ]
            if spec.release_path
            else []
        )
        notebook = nbformat.v4.new_notebook(cells=copy.deepcopy(cells))
    else:
        notebook = copy.deepcopy(submission)
    test_ids = {t.grade_id for t in spec.tests}
    cells, placed = [], set()
    for index, cell in enumerate(notebook.cells):
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if grade_id in test_ids:
            if grade_id in placed:
                continue  # a duplicate: reported as tampering, not shown twice
            placed.add(grade_id)
            cells.append(_test_cell(spec, grade_id, test_messages))
            continue
        if (
            cell.get("cell_type") == "code"
            and any(same_code(_source(cell), t.released) for t in spec.tests)
            and _source(cell).strip()
        ):
            continue  # an anonymous copy of a test cell
        if grade_id in spec.metadata and grade_id not in placed:
            placed.add(grade_id)
            cell.metadata["nbgrader"] = copy.deepcopy(spec.metadata[grade_id])
            if grade_id in spec.locked:
                cell.source = spec.locked[grade_id]
        else:
            cell.metadata.pop("nbgrader", None)  # no made-up grade ids reach the gradebook
        if cell.get("cell_type") == "code":
            cell.outputs = cell_outputs.get(index, []) if submission is not None else []
            cell.execution_count = None
        cells.append(cell)
    for test in spec.tests:  # deleted test cells come back, in their source position
        if test.grade_id not in placed:
            new = _test_cell(spec, test.grade_id, test_messages)
            cells.insert(_insert_position(cells, spec, test.grade_id), new)
    note = dropped_note(record)
    notebook.cells = ([note] if note is not None else []) + cells
    notebook.metadata["autograder"] = record
    _consistent_cell_ids(notebook)
    return notebook


#: the reason under which `drop_ungraded`'s sentences are recorded
DROPPED = "outputs dropped"


def dropped_note(record: dict):
    """The markdown cell that opens the feedback when something the submission saved beside
    its code was dropped (the record's notes under `DROPPED`: fixed sentences), else None."""
    notes = record.get("notes", []) if DROPPED in record.get("reasons", []) else []
    shown = [n for n in notes if n.endswith(NOT_GRADED)]
    if not shown:
        return None
    return nbformat.v4.new_markdown_cell(
        "**From the grader:** " + "; ".join(shown) + ". Your code was graded."
    )


def _consistent_cell_ids(notebook) -> None:
    """nbformat 4.5+ requires an id on every cell and 4.4 forbids one; the autograded notebook
    mixes cells of the submission (either) with rebuilt test cells (new_code_cell gives an id)."""
    for cell in notebook.cells:
        if notebook.nbformat_minor >= 5:
            cell.setdefault("id", nbformat.v4.nbbase.random_cell_id())
        else:
            cell.pop("id", None)


def _insert_position(cells, spec: AssignmentSpec, grade_id: str) -> int:
    rank = spec.order.index(grade_id)
    position = 0
    for i, cell in enumerate(cells):
        other = _nbgrader(cell).get("grade_id")
        if other in spec.order and spec.order.index(other) < rank:
            position = i + 1
    return position


def _test_cell(spec: AssignmentSpec, grade_id: str, test_messages: dict):
    test = spec.test(grade_id)
    cell = nbformat.v4.new_code_cell(test.released)
    cell.metadata["nbgrader"] = copy.deepcopy(spec.metadata[grade_id])
    passed, message = test_messages.get(grade_id, (False, "not graded"))
    cell.outputs = [_stream(message + "\n")] if passed else [_error("CheckFailed", message)]
    return cell
