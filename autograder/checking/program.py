"""What runs of a submission, and the notebook made of it for nbgrader's pages.

- `build_program(spec, submission)` is the code the sandbox runs: the submission's code cells
  minus every graded test cell (matched by nbgrader ``grade_id`` and by content), with the
  locked cells restored from the source; plus a list of tampering notes (edited, deleted,
  duplicated test cells) that never change the score.
- `autograded_notebook(...)` is the notebook nbgrader's feedback and formgrader read: test
  cells in their *released* form (never the hidden code), with the check messages as output.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import nbformat

from autograder.checking.assignment_spec import (
    AssignmentSpec,
    nbgrader_of,
    same_code,
    source_of,
)
from autograder.checking.notebook import NOT_GRADED


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
        meta = nbgrader_of(cell)
        grade_id = meta.get("grade_id")
        text = source_of(cell)
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
                if nbgrader_of(c).get("grade_id") in {t.grade_id for t in spec.tests}
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
        meta = nbgrader_of(cell)
        grade_id = meta.get("grade_id")
        if grade_id in test_ids:
            if grade_id in placed:
                continue  # a duplicate: reported as tampering, not shown twice
            placed.add(grade_id)
            cells.append(_test_cell(spec, grade_id, test_messages))
            continue
        if (
            cell.get("cell_type") == "code"
            and any(same_code(source_of(cell), t.released) for t in spec.tests)
            and source_of(cell).strip()
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
        other = nbgrader_of(cell).get("grade_id")
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
