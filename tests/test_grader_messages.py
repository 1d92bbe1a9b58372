"""What grading says of an error: a public case's message names the exception type, the line
that raised it and that line, read on the trusted side from the submission it parsed (the
sandbox sends two bounded integers); a failed import names its module if it is one of a fixed
list; a hidden case's message gives the type alone. The words are the student's own check's
(``contract._where_raised``), with the notebook cell added."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import grading, sandbox  # noqa: E402, I001
from autograder.checking import checks, notebook, results  # noqa: E402, I001
from autograder.checking.assignment_spec import TestCell  # noqa: E402
from autograder.checking.program import Program  # noqa: E402
from autograder.course import report  # noqa: E402, I001
from autograder.grading import verdict  # noqa: E402
from autograder.sandbox import wire  # noqa: E402, I001
from autograder.student import contract, frames, zygote  # noqa: E402, I001

A = "ch1_pooling"
LIMITS = sandbox.Limits(cell_seconds=15, task_seconds=15, submission_seconds=60)

RAISES = """
def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    scores = np.asarray(x_query)  # <b>bold</b>
    raise ValueError("leak " + repr(scores.tolist()))
"""
IMPORTS_IN_FUNCTION = """
def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    import jax.numpy as jnp
    return jnp.zeros(3)
"""


# ---------------------------------------------------------------------------------------
# the sandbox's side: two integers and a name of the fixed list


def _raised(source: str, cell: int):
    try:
        exec(compile(source, zygote.CELL_FILE.format(cell), "exec"), {})
    except BaseException as err:  # noqa: BLE001
        return err
    raise AssertionError("did not raise")


def test_the_place_is_the_innermost_line_of_the_submissions_cells():
    err = _raised("def f():\n    x = 1\n    return 1 / 0\nf()\n", 3)
    assert zygote.error_place(err, 5) == (3, 3, None)
    assert zygote.error_place(err, 3) == (-1, 0, None)  # no such program cell: no place
    missing = _raised("import tensorflow.keras\n", 0)
    assert zygote.error_place(missing, 1) == (0, 1, "tensorflow")
    chosen = _raised("raise ModuleNotFoundError(name='regraded by hand 12/12')\n", 0)
    assert zygote.error_place(chosen, 1) == (0, 1, None)  # not on the list: no name


def _header(**fields) -> bytes:
    header = {"ev": "case", "task": 0, "case": 0, "outcome": "error", "code": "ValueError"}
    header.update(n=0, at_cell=2, at_line=7, module=None)
    header.update(fields)
    return frames.encode_frame(header)[12:]  # the header's JSON (after magic and lengths)


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"at_line": zygote.MAX_PLACE + 1}, "out of range"),
        ({"at_cell": -2, "at_line": 0}, "out of range"),
        ({"at_cell": -1}, "without an error"),  # a line and no cell
        ({"at_line": 0}, "without an error"),  # a cell and no line
        ({"at_line": True}, "wrong field type"),
        ({"outcome": "value", "code": None, "n": 1}, "without an error"),
        ({"module": "numpy"}, "bad module name"),  # a name on a ValueError
        ({"code": "ModuleNotFoundError", "module": "leak 9.34"}, "bad module name"),
    ],
)
def test_a_place_outside_the_schema_is_a_protocol_violation(fields, why):
    with pytest.raises(wire.ProtocolViolation, match=why):
        wire.parse_header(_header(**fields), wire.EVENTS)


def test_a_place_in_the_schema_reaches_the_outcome():
    header = wire.parse_header(_header(code="ModuleNotFoundError", module="torch"), wire.EVENTS)
    outcome = wire.read_outcome(header, b"", (), "allclose")
    assert dataclasses.asdict(outcome) == dict(
        kind="error",
        arrays=(),
        code="ModuleNotFoundError",
        exception=None,
        at_cell=2,
        at_line=7,
        module="torch",
    )


# ---------------------------------------------------------------------------------------
# the trusted side: the line read from the program it built


def test_the_line_is_read_from_the_program_bounded_and_printable():
    program = Program(
        cells=["x = 1\ny = 2\n", "a = '" + "z" * 300 + "'\n", "b = 1\x1b[31m\x07\n", "h = 1"],
        origin=[4, 6, 7, None],
    )
    assert verdict.source_line(program, 0, 2) == " (at line 2 of notebook cell 5: `y = 2`)"
    long = verdict.source_line(program, 1, 1)
    assert len(long.split("`")[1]) == verdict.LINE_CHARS and long.endswith("…`)")
    assert verdict.source_line(program, 2, 1) == " (at line 1 of notebook cell 8: `b = 1 [31m`)"
    assert verdict.source_line(program, 3, 1) == " (at line 1 of a cell restored as given: `h = 1`)"
    for cell, line in [(0, 4), (0, 0), (4, 1), (-1, 1), (0, -3)]:  # no line of the program
        assert verdict.source_line(program, cell, line) == ""
    assert verdict.source_line(None, 0, 1) == ""


def _judged(outcome: contract.Outcome, hidden: bool, program) -> str:
    """The message ``verdict.judge`` gives one case of nadaraya_watson_ard with ``outcome``."""
    import dataclasses
    import types

    case = checks.prepare("nadaraya_watson_ard", checks.public_cases("nadaraya_watson_ard")[0])
    case = dataclasses.replace(case, hidden=hidden)
    test = TestCell("t", 1.0, "", (("nadaraya_watson_ard", "nadaraya_watson_ard"),), 0)
    record = grading.run.RunRecord(outcomes={(0, 0): outcome})
    result = results.SubmissionResult("s", A, 0)
    specs = {"nadaraya_watson_ard": checks.spec("nadaraya_watson_ard")}
    verdict.judge(
        types.SimpleNamespace(tests=(test,)), specs, [[case]], record, result, program=program
    )
    return result.tasks[0].cases[0].message


def test_a_public_case_names_module_and_line_and_a_hidden_case_the_type_alone():
    program = Program(cells=["x = 0\nimport torch\n"], origin=[2])
    outcome = contract.Outcome("error", code="ModuleNotFoundError", at_cell=0, at_line=2)
    name = checks.public_cases("nadaraya_watson_ard")[0].name
    public = _judged(dataclasses.replace(outcome, module="torch"), False, program)
    assert public.startswith(
        f"case '{name}': nadaraya_watson_ard raised ModuleNotFoundError: no module named 'torch' "
        "(at line 2 of notebook cell 3: `import torch`): an import failed, and the grader offers"
    ), public
    unknown = _judged(outcome, False, program)
    assert "raised ModuleNotFoundError: a module not installed here (at line 2 of" in unknown
    hidden = _judged(dataclasses.replace(outcome, module="torch"), True, program)
    assert hidden.startswith(
        f"case '{name}': nadaraya_watson_ard raised ModuleNotFoundError: an import failed"
    ), hidden
    assert "torch" not in hidden.replace("PyTorch", "") and "line" not in hidden
    value_error = contract.Outcome("error", code="ValueError", at_cell=0, at_line=1)
    assert _judged(value_error, True, program) == (
        f"case '{name}': nadaraya_watson_ard raised ValueError"
    )
    assert _judged(value_error, False, program) == (
        f"case '{name}': nadaraya_watson_ard raised ValueError (at line 1 of notebook cell 3: "
        "`x = 0`)"
    )


# ---------------------------------------------------------------------------------------
# end to end: graded in the sandbox, as the feedback shows it


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("messages") / "course")
    good = corpus.solved(course, A)
    notebooks = {
        "honest": good,
        "raises": corpus.add_cell_after(good, "nw", RAISES),
        "imports-in-function": corpus.add_cell_after(good, "nw", IMPORTS_IN_FUNCTION),
        "imports-tensorflow": corpus.add_cell_after(good, "setup", "import tensorflow as tf"),
        "imports-unknown": corpus.add_cell_after(good, "setup", "\nimport my_helpers_0x77"),
    }
    for student, nb in notebooks.items():
        corpus.write_submission(course, A, student, nb)
    # a notebook nbformat's schema refuses, naming in its error the attachment it chose
    refused = json.loads(nbformat.writes(good))
    refused["cells"][0]["attachments"] = {CHOSEN: {"image/png": 12}}
    corpus.write_submission(course, A, "refused", json.dumps(refused))
    outcome = grading.grade_assignment(course, A, workers=1, limits=LIMITS)
    report.write_report(course, A, course / "report.html")
    results = {r.student: r for r in outcome.graded}
    cells = {s: corpus._index(nb, "nw") + 2 for s, nb in notebooks.items()}  # the added cell
    return results, cells, course


def _case_lines(result, grade_id: str) -> list[str]:
    message = next(t.message for t in result.tasks if t.grade_id == grade_id)
    return [line[4:] for line in message.splitlines() if line.startswith("  - ")]


def test_an_honest_submission_graded_beside_them_keeps_full_marks(graded):
    results, _cells, _course = graded
    assert (results["honest"].score, results["honest"].reasons) == (12, [])


def test_a_public_error_names_its_line_and_a_hidden_one_its_type(graded):
    results, cells, _course = graded
    result = results["raises"]
    assert result.score == 10  # test-nw (2 points) alone
    lines = _case_lines(result, "test-nw")
    line = '`raise ValueError("leak " + repr(scores.tolist()))`'
    first = checks.public_cases("nadaraya_watson_ard")[0].name
    assert lines[0] == (
        f"case '{first}': nadaraya_watson_ard raised ValueError (at line 4 of notebook cell "
        f"{cells['raises']}: {line})"
    )
    hidden = lines[lines.index(next(x for x in lines if x.endswith("more"))) + 1 :]
    assert hidden[0].endswith("nadaraya_watson_ard raised ValueError"), hidden
    assert "leak [" not in "\n".join(lines)  # the runtime text never crosses


def test_an_import_in_a_function_names_the_module_of_the_list(graded):
    results, cells, _course = graded
    result = results["imports-in-function"]
    assert result.score == 10
    lines = _case_lines(result, "test-nw")
    assert (
        "nadaraya_watson_ard raised ModuleNotFoundError: no module named 'jax' (at line 3 of "
        f"notebook cell {cells['imports-in-function']}: `import jax.numpy as jnp`): an import "
        "failed, and the grader offers only NumPy"
    ) in lines[0]


@pytest.mark.parametrize(
    "student, said",
    [
        (
            "imports-tensorflow",
            "no module named 'tensorflow' (at line 1 of notebook cell 3: "
            "`import tensorflow as tf`)",
        ),
        (
            "imports-unknown",
            "a module not installed here (at line 2 of notebook cell 3: `import my_helpers_0x77`)",
        ),
    ],
)
def test_a_failed_import_in_a_cell_says_which_module_only_from_the_list(graded, student, said):
    results, _cells, _course = graded
    result = results[student]
    assert result.score == 12  # the cell's error stops that cell only
    error = result.cell_outputs[2][-1]
    assert error["evalue"] == (
        f"the cell raised ModuleNotFoundError: {said}: an import failed, and "
        "the grader offers only NumPy and Python's standard library (and PyTorch in the "
        "chapters whose notebook imports it)"
    )


# ---------------------------------------------------------------------------------------
# every refusal in fixed words: nothing a submission chose reaches feedback or the report

CHOSEN = "regraded by hand: 12 of 12"


def _refusal(body: bytes) -> str:
    with pytest.raises(notebook.InvalidNotebook) as refused:
        notebook.read_submission(body)
    return str(refused.value)


def _nb(**fields) -> dict:
    base = {"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": []}
    return base | fields


@pytest.mark.parametrize(
    "body, said",
    [
        ({"nbformat": CHOSEN, "cells": []}, notebook.NO_VERSION),  # nbformat: "Unsupported ..."
        (_nb(nbformat=7), notebook.NO_VERSION),
        (_nb(metadata={CHOSEN: {"x": 1}}, cells=[{"cell_type": CHOSEN}]), None),
        (
            _nb(cells=[{"cell_type": "markdown", "metadata": {}, "source": "", CHOSEN: 1}]),
            notebook.INVALID,
        ),
        (_nb(nbformat=3, nbformat_minor=0, worksheets=[{"cells": [{CHOSEN: 1}]}]), None),
        (_nb(cells={CHOSEN: []}), None),
        (["a list", CHOSEN], None),
    ],
)
def test_a_refusal_names_no_field_value_or_key_the_notebook_chose(body, said):
    import json

    message = _refusal(json.dumps(body).encode())
    assert "regraded" not in message and "12" not in message, message
    fixed = {notebook.NO_VERSION, notebook.INVALID, notebook.UNCONVERTIBLE, notebook.NO_CELLS}
    assert message == said if said is not None else message in fixed, message


@pytest.mark.parametrize(
    "raw, said",
    [
        (f'{{"nbformat": 4, "{CHOSEN}'.encode(), r"it is not JSON: line 1, column \d+\)$"),
        (b'{"cells": "\xff' + CHOSEN.encode(), r"\(it is not UTF-8 text\)$"),
        (b"[" * 100_000 + b"]" * 100_000, r"nested too deep|not JSON"),
    ],
)
def test_an_unreadable_file_is_refused_in_fixed_words(raw, said):
    import re

    message = _refusal(raw)
    assert re.search(said, message) and "regraded" not in message, message


def test_a_refused_notebook_says_a_fixed_sentence_everywhere(graded):
    """The schema error would name the attachment the notebook chose: the record, the
    autograded notebook and the report say the fixed sentence, and never that text."""
    results, _cells, course = graded
    result = results["refused"]
    assert (result.score, result.reasons, result.notes) == (
        0,
        ["invalid notebook"],
        [notebook.INVALID],
    )
    for path in (course / "autograded" / "refused" / A / f"{A}.ipynb", course / "report.html"):
        text = path.read_text()
        assert "regraded" not in text, path
    assert "not a valid Jupyter notebook" in (course / "report.html").read_text()
