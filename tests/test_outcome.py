"""One typed ``contract.Outcome`` from the case runner to the judge, and one record of a case
from the grader to the report (issue 36, "Shape").

- Every place that makes an outcome makes a ``contract.Outcome``: the student's checker
  (``contract.run_case``), the sandbox's worker (``zygote.run_case``: the error's place in
  place of the exception object), the trusted side's reader of a case event
  (``wire.read_outcome``) and ``checks.compare``; no module of the package reads an outcome
  as a dict any more.
- A public error's place (the module a failed import missed, the line that raised it) is a
  parameter of its message in every catalog language, so a Chinese submission's feedback
  quotes its line as an English one's does; a hidden case's error gives its type alone.
- A record names each case's fields; the report still reads the positional lists that
  earlier graders wrote (an instructor's gradebook of an earlier term).
"""

from __future__ import annotations

import dataclasses
import errno
import re
import types
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder import grading
from autograder.checking import checks, judging, messages, results
from autograder.checking.assignment_spec import TestCell
from autograder.checking.program import Program
from autograder.course import report
from autograder.grading import verdict
from autograder.sandbox import wire
from autograder.student import contract, frames, zygote
from autograder.student.contract import Outcome

PACKAGE = Path(contract.__file__).resolve().parent.parent
A = "ch1_pooling"
CHECK = "nadaraya_watson_ard"


# ----------------------------------------------------------------------------------------
# one type wherever an outcome is made


def _in_cell(source: str, cell: int, name: str = "f"):
    """A function compiled as the worker compiles program cell ``cell``."""
    namespace: dict = {}
    exec(compile(source, zygote.CELL_FILE.format(cell), "exec"), namespace)
    return namespace[name]


def test_the_checkers_runner_gives_an_outcome_of_each_kind():
    value = contract.run_case(lambda x: (x, 2 * x), [np.ones(2)], {})
    assert isinstance(value, Outcome) and value.kind == "value" and value.code is None
    assert [a.tolist() for a in value.arrays] == [[1.0, 1.0], [2.0, 2.0]]
    bad = contract.run_case(lambda: "text", [], {})
    assert (bad.kind, bad.code, bad.arrays, bad.exception) == ("bad", "not_numeric", (), None)

    class Chosen0123(KeyError):  # the student's class: its builtin base names it
        pass

    def raises():
        raise Chosen0123("9.34")

    error = contract.run_case(raises, [], {})
    assert (error.kind, error.code) == ("error", "KeyError")
    assert isinstance(error.exception, Chosen0123)  # for the notes of the student's own kernel
    assert (error.at_cell, error.at_line, error.module) == (-1, 0, None)  # no sandbox place
    with pytest.raises(dataclasses.FrozenInstanceError):
        error.code = "ValueError"


def test_the_workers_runner_sends_the_place_and_never_the_exception():
    f = _in_cell("def f(x):\n    y = x + 1\n    return y / undefined_name\n", 4)
    error = zygote.run_case(f, [np.ones(2)], {}, cells=6)
    assert isinstance(error, Outcome)
    assert (error.kind, error.code, error.at_cell, error.at_line) == ("error", "NameError", 4, 3)
    assert error.exception is None and error.module is None  # the object holds its values
    outside = zygote.run_case(f, [np.ones(2)], {}, cells=4)  # no program cell 4: no place
    assert (outside.code, outside.at_cell, outside.at_line) == ("NameError", -1, 0)
    imports = _in_cell("def f():\n    import tensorflow.keras\n", 0)
    failed = zygote.run_case(imports, [], {}, cells=1)
    assert (failed.code, failed.at_cell, failed.at_line, failed.module) == (
        "ModuleNotFoundError",
        0,
        2,
        "tensorflow",
    )

    def interrupted():
        raise KeyboardInterrupt  # no one at a keyboard: the function's own error

    def full():
        raise OSError(errno.EFBIG, "File too large")

    assert zygote.run_case(interrupted, [], {}, cells=1).code == "KeyboardInterrupt"
    assert zygote.run_case(full, [], {}, cells=1).code == frames.FILE_TOO_LARGE
    value = zygote.run_case(lambda: np.arange(3), [], {}, cells=1)
    assert value.kind == "value" and value.arrays[0].tolist() == [0, 1, 2]


def test_the_place_the_worker_sends_is_the_place_an_outcome_holds():
    """The case event's place fields are the outcome's, by name, on both sides of the wire."""
    names = {f.name for f in dataclasses.fields(Outcome)}
    assert set(zygote.PLACE_FIELDS) == set(wire.PLACE) and set(wire.PLACE) <= names
    header = {"ev": "case", "task": 0, "case": 0, "outcome": "error", "code": "ValueError"}
    header.update(n=0, at_cell=1, at_line=5, module=None)
    raw = frames.encode_frame(header)[12:]  # the header's JSON (after magic and lengths)
    error = wire.read_outcome(wire.parse_header(raw, wire.EVENTS), b"", (), "allclose")
    assert isinstance(error, Outcome)
    assert (error.kind, error.code, error.at_cell, error.at_line) == ("error", "ValueError", 1, 5)
    header.update(outcome="bad", code="none", at_cell=-1, at_line=0)
    bad = wire.read_outcome(header, b"", (), "allclose")
    assert (bad.kind, bad.code, bad.at_cell) == ("bad", "none", -1)
    header.update(outcome="value", code=None, n=1)
    blob = frames.pack({"r0": np.ones((2, 3))})
    value = wire.read_outcome(header, blob, (np.zeros((2, 3)),), "allclose")
    assert value.kind == "value" and value.arrays[0].tolist() == np.ones((2, 3)).tolist()
    declared = wire.read_outcome(header, blob, (np.zeros((3, 2)),), "allclose")
    assert isinstance(declared, Outcome) and isinstance(declared.arrays[0], wire.Declared)


def test_compare_judges_a_returned_value_as_an_outcome():
    case = checks.public_cases("softmax_backward")[0]
    expected = checks.expected("softmax_backward", case)
    assert checks.compare("softmax_backward", case, expected, expected).passed
    doubled = tuple(2 * e for e in expected)
    assert not checks.compare("softmax_backward", case, expected, doubled).passed


#: how an outcome read as a dict looked (the kind, code, arrays or place looked up by key)
FIELDS = "kind|code|arrays|exception|at_cell|at_line|module"
DICT_OUTCOME = re.compile(
    rf"""\b(outcome|got)(\[|\.get\()["']({FIELDS})["']|["']kind["']: ["'](value|error|bad)["']"""
)


def test_no_module_of_the_package_reads_an_outcome_as_a_dict():
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "source" not in path.relative_to(PACKAGE).parts  # the release's copies, generated
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if DICT_OUTCOME.search(line)
    ]
    assert not found, found
    # the pattern finds what it is for
    assert DICT_OUTCOME.search('if outcome["kind"] == "error":')
    assert DICT_OUTCOME.search('return {"kind": "bad", "code": "too_large"}')
    assert DICT_OUTCOME.search("place = got.get('at_cell', -1)")
    assert not DICT_OUTCOME.search('comparator={"kind": "tokens"}')  # a comparator's kind
    assert not DICT_OUTCOME.search('if not outcome["graded"]:')  # the CLI's batch result


# ----------------------------------------------------------------------------------------
# a public error's place, in every language of the catalog


def test_every_language_places_an_errors_module_and_line_in_its_own_words():
    for language in messages.LANGUAGES:
        catalog = messages.catalog(language)
        assert "{where}" in catalog["raised"] and "{where}" in catalog["raised_import"]
        assert "{module}" in catalog["raised_import"]


def _judged(outcome: Outcome, hidden: bool, language: str):
    """The verdict ``verdict.judge`` gives the first public case of nadaraya_watson_ard, and
    the English message the report reads."""
    program = Program(cells=["x = 0\nimport torch\n"], origin=[2])
    case = checks.prepare(CHECK, checks.public_cases(CHECK)[0])
    case = dataclasses.replace(case, hidden=hidden)
    test = TestCell("t", 1.0, "", ((CHECK, CHECK),), 0)
    record = grading.run.RunRecord(outcomes={(0, 0): outcome})
    result = results.SubmissionResult("s", A, 0)
    verdict.judge(
        types.SimpleNamespace(tests=(test,)),
        {CHECK: checks.spec(CHECK)},
        [[case]],
        record,
        result,
        language,
        program,
    )
    (task,) = result.tasks
    return case.name, task.cases[0].message, task.wrong[0]


def test_a_chinese_public_error_quotes_its_line_in_chinese_and_the_report_reads_english():
    error = Outcome("error", code="ValueError", at_cell=0, at_line=1)
    name, said, wrong = _judged(error, False, "zh_CN")
    named = checks.translated_hint(name, "zh_CN")  # the case's name in Chinese too
    assert (
        said
        == f"用例“{named}”：{CHECK} 抛出了 ValueError（在笔记本第 3 个单元格的第 1 行：`x = 0`）"
    )
    assert wrong == (
        f"case '{name}': {CHECK} raised ValueError (at line 1 of notebook cell 3: `x = 0`)"
    )
    _name, hidden, _wrong = _judged(error, True, "zh_CN")
    assert hidden == f"用例“{named}”：{CHECK} 抛出了 ValueError"  # the type alone


def test_a_chinese_failed_import_names_its_module_and_line_in_chinese():
    missing = Outcome("error", code="ModuleNotFoundError", at_cell=0, at_line=2, module="torch")
    name, said, wrong = _judged(missing, False, "zh_CN")
    named = checks.translated_hint(name, "zh_CN")
    assert said.startswith(
        f"用例“{named}”：{CHECK} 抛出了 ModuleNotFoundError：没有名为“torch”的模块"
        "（在笔记本第 3 个单元格的第 2 行：`import torch`）：有一个导入失败了，而计分程序只提供"
    ), said
    assert "raised ModuleNotFoundError: no module named 'torch' (at line 2 of notebook" in wrong
    unlisted = dataclasses.replace(missing, module=None)
    assert (
        "：这里没有安装的一个模块（在笔记本第 3 个单元格的第 2 行"
        in _judged(unlisted, False, "zh_CN")[1]
    )
    _name, hidden, _wrong = _judged(missing, True, "zh_CN")
    assert "第 2 行" not in hidden and "torch" not in hidden.replace("PyTorch", "")


def test_a_place_outside_the_program_is_left_out_in_every_language():
    for language in messages.LANGUAGES:
        for at_cell, at_line in ((-1, 0), (0, 9), (5, 1)):
            error = Outcome("error", code="ValueError", at_cell=at_cell, at_line=at_line)
            name, said, _wrong = _judged(error, False, language)
            assert said.endswith("ValueError"), said


def test_the_students_own_check_words_an_error_with_no_place():
    """In the student's kernel the place is a note of its own (``contract.run_cases``): the
    message itself is as before, in the released catalog's language."""
    case = contract.Case("c", expected=contract.Expected((np.zeros(2),)))
    spec = contract.Spec("f")
    said = {
        "en": ("f raised ValueError", "f raised ModuleNotFoundError: an import failed, and "),
        "zh_CN": ("f 抛出了 ValueError", "f 抛出了 ModuleNotFoundError：有一个导入失败了，而"),
    }
    for language, (raised, imported) in said.items():
        catalog = messages.shipped(language)
        error = contract.judge(spec, case, Outcome("error", code="ValueError"), catalog)
        assert error.message.endswith(raised), error.message
        failed = contract.judge(spec, case, Outcome("error", code="ModuleNotFoundError"), catalog)
        assert imported in failed.message, failed.message


def test_the_place_reaches_a_public_case_only_through_the_grader():
    spec = checks.spec(CHECK)
    case = checks.prepare(CHECK, checks.public_cases(CHECK)[0])
    where = {"module": "", "where": " (at line 2 of notebook cell 3: `y = 1`)"}
    error = Outcome("error", code="ValueError")
    assert judging.judge(spec, case, error, where=where).message.endswith(where["where"])
    hidden = dataclasses.replace(case, hidden=True)
    assert judging.judge(spec, hidden, error, where=where).message.endswith("raised ValueError")


# ----------------------------------------------------------------------------------------
# the record: named fields, the old positional lists still read


def _recorded(student: str, cases: list) -> dict:
    return {
        "student": student,
        "assignment": A,
        "seed": 1,
        "score": 0.0,
        "max_score": 12.0,
        "reasons": [],
        "notes": [],
        "tasks": [{"grade_id": "test-pooling", "passed": False, "cases": cases, "message": ""}],
    }


def test_a_record_names_every_field_of_a_case():
    result = results.SubmissionResult("s", A, 1)
    cases = [contract.Verdict("epanechnikov_weights", "one item", True, False, "9.34")]
    result.tasks.append(results.TaskResult("test-pooling", 2.0, "m", cases))
    (case,) = result.to_record()["tasks"][0]["cases"]
    assert case == {"check": "epanechnikov_weights", "case": "one item", "hidden": True,
                    "passed": False}  # fmt: skip
    assert tuple(case) == results.CASE_FIELDS
    assert results.recorded_case(case) == contract.Verdict(*case.values(), "")
    back = results.SubmissionResult.from_record(result.to_record())
    assert back.tasks[0].cases == [dataclasses.replace(cases[0], message="")]
    assert (back.student, back.seed, back.tasks[0].grade_id) == ("s", 1, "test-pooling")


def test_the_report_reads_an_earlier_graders_positional_cases_as_named_ones(tmp_path):
    """Two terms of one course: the earlier grader wrote [check, case, hidden, passed], this
    one writes named fields; the report counts them alike, read back from the notebooks."""
    old = [["epanechnikov_weights", "one item", False, True], ["nw_ard", "batch", True, False]]
    new = [dict(zip(results.CASE_FIELDS, entry)) for entry in old]
    new[0]["passed"] = False
    course = tmp_path / "course"
    for student, cases in (("earlier", old), ("now", new)):
        folder = course / "autograded" / student / A
        folder.mkdir(parents=True)
        notebook = nbformat.v4.new_notebook()
        notebook.metadata["autograder"] = _recorded(student, cases)
        nbformat.write(notebook, folder / f"{A}.ipynb")
    summary = report.summarise(report.load_records(course, A))
    assert summary["case_rates"] == {
        "epanechnikov_weights / one item": 0.5,  # passed in the earlier record only
        "nw_ard / batch (hidden)": 0.0,
    }


def test_a_case_entry_of_another_shape_is_skipped_not_misread():
    good = ["epanechnikov_weights", "one item", False, True]
    odd = [
        ["epanechnikov_weights", "one item", False],  # three values: which is which?
        ["a", "b", False, True, "extra"],
        "epanechnikov_weights",
        None,
        {"check": "epanechnikov_weights", "case": "one item", "hidden": False},  # no "passed"
    ]
    assert all(results.recorded_case(entry) is None for entry in odd)
    summary = report.summarise([results.SubmissionResult.from_record(_recorded("s", [*odd, good]))])
    assert summary["case_rates"] == {"epanechnikov_weights / one item": 1.0}
