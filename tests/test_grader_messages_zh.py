"""A Chinese-edition submission graded in the sandbox: a public case's error quotes the line
that raised it, and a failed import its module, in Chinese wording, as an English one's
feedback does in English (the place is a parameter of the message in every catalog language,
not text inserted into the English one); a hidden case's error gives its type alone; the
instructor's report reads the English. The English side is tests/test_grader_messages.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402
from test_grader_messages import IMPORTS_IN_FUNCTION, RAISES  # noqa: E402

from autograder import grading, sandbox  # noqa: E402, I001
from autograder.checking import checks, messages  # noqa: E402, I001

A = "ch1_pooling"
LIMITS = sandbox.Limits(cell_seconds=15, task_seconds=15, submission_seconds=60)
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("messages-zh") / "course")
    good = corpus.solved(course, A, "zh_CN")
    assert messages.language_of(good.metadata) == "zh_CN"
    notebooks = {
        "honest": good,
        "raises": corpus.add_cell_after(good, "nw", RAISES),
        "imports-in-function": corpus.add_cell_after(good, "nw", IMPORTS_IN_FUNCTION),
    }
    for student, nb in notebooks.items():
        corpus.write_submission(course, A, student, nb)
    outcome = grading.grade_assignment(course, A, workers=1, limits=LIMITS)
    results = {r.student: r for r in outcome.graded}
    cells = {s: corpus._index(nb, "nw") + 2 for s, nb in notebooks.items()}  # the added cell
    return results, cells


def _task(result, grade_id: str):
    return next(t for t in result.tasks if t.grade_id == grade_id)


def _case_lines(message: str) -> list[str]:
    return [line[4:] for line in message.splitlines() if line.startswith("  - ")]


def test_an_honest_chinese_submission_keeps_full_marks(graded):
    results, _cells = graded
    assert (results["honest"].score, results["honest"].reasons) == (12, [])


def test_a_chinese_public_error_quotes_its_line_in_chinese(graded):
    results, cells = graded
    task = _task(results["raises"], "test-nw")
    assert results["raises"].score == 10  # test-nw (2 points) alone
    lines = _case_lines(task.message)
    first = checks.public_cases("nadaraya_watson_ard")[0].name
    line = '`raise ValueError("leak " + repr(scores.tolist()))`'
    named = checks.translated_hint(first, "zh_CN", "ch1_pooling")  # the case's Chinese name
    assert HAN.search(named), named
    assert lines[0] == (
        f"用例“{named}”：nadaraya_watson_ard 抛出了 ValueError（在笔记本第 {cells['raises']} "
        f"个单元格的第 4 行：{line}）"
    ), lines[0]
    hidden = [x for x in lines if "用例" in x and "第 4 行" not in x and "抛出了 ValueError" in x]
    assert hidden and all(x.endswith("抛出了 ValueError") for x in hidden), lines
    assert "leak [" not in task.message  # the runtime text never crosses
    # what the instructor's report reads: English, with the same line
    assert task.wrong[0] == (
        f"case '{first}': nadaraya_watson_ard raised ValueError (at line 4 of notebook cell "
        f"{cells['raises']}: {line})"
    )
    assert not any(HAN.search(w) for w in task.wrong)


def test_a_chinese_failed_import_names_its_module_and_line_in_chinese(graded):
    results, cells = graded
    lines = _case_lines(_task(results["imports-in-function"], "test-nw").message)
    assert (
        "nadaraya_watson_ard 抛出了 ModuleNotFoundError：没有名为“jax”的模块（在笔记本第 "
        f"{cells['imports-in-function']} 个单元格的第 3 行：`import jax.numpy as jnp`）："
        "有一个导入失败了，而计分程序只提供 NumPy"
    ) in lines[0], lines[0]


def test_the_feedback_names_cases_in_chinese_and_the_record_keeps_their_english_names(graded):
    """A Chinese submission's feedback names every case, public and hidden, in Chinese (the
    chapter's catalog); the record the instructor's report counts cases by keeps the English
    names, so a class of both editions counts each case once."""
    results, _cells = graded
    task = _task(results["raises"], "test-nw")
    english = {c.name for c in checks.public_cases("nadaraya_watson_ard")}
    english |= {
        c.name for c in checks.hidden_cases("nadaraya_watson_ard", checks.DEFAULT_HIDDEN_SEED)
    }
    named = [n for n in english if checks.translated_hint(n, "zh_CN", A) in task.message]
    assert len(named) >= 2, task.message
    assert not any(n in task.message for n in english if re.search("[A-Za-z]{2}", n))
    assert task.cases and all(v.case in english for v in task.cases)
    assert not any(HAN.search(v.case) for v in task.cases)
