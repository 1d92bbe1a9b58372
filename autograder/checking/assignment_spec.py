"""What is graded: the instructor's source notebook parsed.

`load_assignment(course, id)` reads ``source/<id>/<id>.ipynb`` (and the released copy, for
the test cells as students saw them) into an `AssignmentSpec`: the graded test cells with
their points and ``check("name", fn)`` calls, the locked cells, the solution cells. Also the
hidden tests' markers (`strip_hidden_tests`), a cell's nbgrader metadata and text as every
reader takes them (`nbgrader_of`, `source_of`), and the packages a notebook imports.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

CHECK_CALL = re.compile(r"check\(\s*[\"'](\w+)[\"']\s*,\s*(\w+)\s*\)")
BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


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


def nbgrader_of(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return dict(meta) if isinstance(meta, dict) else {}


def source_of(cell) -> str:
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
            meta = nbgrader_of(cell)
            if meta.get("grade_id"):
                released[meta["grade_id"]] = source_of(cell)
    tests, locked, metadata, order = [], {}, {}, []
    imports = set()
    for cell in source.cells:
        if cell.get("cell_type") == "code":
            imports |= imported_packages(source_of(cell))
    for position, cell in enumerate(source.cells):
        meta = nbgrader_of(cell)
        grade_id = meta.get("grade_id")
        if not grade_id:
            continue
        metadata[grade_id] = meta
        order.append(grade_id)
        text = source_of(cell)
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
