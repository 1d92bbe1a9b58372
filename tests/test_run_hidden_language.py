"""Stock nbgrader's in-kernel hidden check (``checks.run_hidden``, run by ``nbgrader
autograde`` and the formgrader's Autograde button) words its messages in the notebook's
language, from the same catalog as the sandboxed grader: the language is the metadata of the
notebook the kernel runs (``checks.kernel_language``), read as hostile input (bounded, not
through a link, anything but "en" or "zh_CN" exactly is English)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402
from hostile.corpus import WRONG_EPANECHNIKOV  # noqa: E402

from autograder.checking import checks, messages  # noqa: E402

A = "ch1_pooling"
CHECK = "epanechnikov_weights"
HAN = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _no_clipping():
    """The chapter's declared mistake (1 - u^2 without max(0, .)), as the corpus submits it."""
    namespace = {"np": np}
    exec(WRONG_EPANECHNIKOV, namespace)
    return namespace[CHECK]


def _write(folder: Path, metadata) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata.update(metadata)
    path = folder / f"{A}.ipynb"
    nbformat.write(notebook, path)
    return path


def _hidden_message(**kwargs) -> str:
    with pytest.raises(checks.HiddenCheckFailed) as failed:
        checks.run_hidden(CHECK, _no_clipping(), **kwargs)
    return str(failed.value)


def test_the_hidden_check_words_a_chinese_notebooks_failure_in_chinese(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    english = _hidden_message()  # no notebook here: English
    assert "hidden check failed" in english and not HAN.search(english), english
    _write(tmp_path, {"attention_derived": {"language": "zh_CN"}})
    assert checks.kernel_language(A) == "zh_CN"
    chinese = _hidden_message()
    assert "隐藏检查" in chinese and "hidden check failed" not in chinese, chinese
    failed, total = re.search(r"failed on (\d+) of (\d+) cases", english).groups()
    head = messages.say("zh_CN", "hidden.summary.failed", name=CHECK, failed=failed, total=total)
    assert chinese.splitlines()[0] == head  # the grader's own Chinese words
    assert "你的结果与一个已知错误一致" in chinese  # the mistake, named in Chinese
    # the same cases, the same numbers, in the other words
    assert sorted(NUMBER.findall(chinese)) == sorted(NUMBER.findall(english))
    assert _hidden_message(language="en") == english  # an explicit language still wins


def test_an_english_notebook_gets_english(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"attention_derived": {"language": "en"}})
    assert checks.kernel_language(A) == "en"
    assert "hidden check failed" in _hidden_message()


@pytest.mark.parametrize(
    "make",
    [
        lambda folder: (folder / f"{A}.ipynb").write_text("{ not json"),
        lambda folder: (folder / f"{A}.ipynb").write_text(json.dumps(["metadata", "zh_CN"])),
        lambda folder: (folder / f"{A}.ipynb").write_text("[" * 100_000 + "]" * 100_000),
        lambda folder: _write(folder, {"attention_derived": {"language": "zh_CN "}}),
        lambda folder: _write(folder, {"attention_derived": "zh_CN"}),
        lambda folder: (folder / f"{A}.ipynb").mkdir(),
        # a link to a Chinese notebook: not followed
        lambda folder: (folder / f"{A}.ipynb").symlink_to(
            _write(folder / "elsewhere", {"attention_derived": {"language": "zh_CN"}})
        ),
        # over the cap: refused unread, however Chinese its metadata
        lambda folder: (folder / f"{A}.ipynb").write_text(
            json.dumps(
                {
                    "metadata": {"attention_derived": {"language": "zh_CN"}},
                    "padding": "x" * checks.KERNEL_NOTEBOOK_BYTES,
                }
            )
        ),
    ],
)
def test_a_notebook_that_is_not_plainly_chinese_gets_english(tmp_path, monkeypatch, make):
    (tmp_path / "elsewhere").mkdir()
    make(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert checks.kernel_language(A) == "en"


def test_a_chinese_notebook_just_under_the_cap_is_read(tmp_path, monkeypatch):
    body = json.dumps({"metadata": {"attention_derived": {"language": "zh_CN"}}, "padding": ""})
    padding = "x" * (checks.KERNEL_NOTEBOOK_BYTES - len(body))
    path = tmp_path / f"{A}.ipynb"
    path.write_text(body.replace('"padding": ""', f'"padding": "{padding}"'))
    assert path.stat().st_size == checks.KERNEL_NOTEBOOK_BYTES
    monkeypatch.chdir(tmp_path)
    assert checks.kernel_language(A) == "zh_CN"


# ----------------------------------------------------------------------------------------
# stock nbgrader autograde, as an instructor runs it


#: passes the public check (its answers are the solution's on the released public cases) and
#: fails the hidden one with the chapter's known mistake, so that ``run_hidden`` speaks
RIGHT_ON_PUBLIC_CASES_ONLY = (
    """
import attention_check

_solved = epanechnikov_weights
_PUBLIC = attention_check.load_cases("public_cases.npz")["epanechnikov_weights"]["cases"]
"""
    + WRONG_EPANECHNIKOV.replace("def epanechnikov_weights(", "def _no_clipping(")
    + """

def epanechnikov_weights(x_query, x_keys, bandwidth):
    given = (x_query, x_keys, bandwidth)
    for case in _PUBLIC:
        if all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(case.args, given)):
            return _solved(*given)
    return _no_clipping(*given)
"""
)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_stock_autograde_words_each_notebooks_hidden_failure_in_its_language(tmp_path):
    course = corpus.released_course(tmp_path / "course")
    notebooks = {
        language: corpus.append_to_cell(
            corpus.solved(course, A, None if language == "en" else language),
            "average-max-pool",
            RIGHT_ON_PUBLIC_CASES_ONLY,
        )
        for language in messages.LANGUAGES
    }
    for language, notebook in notebooks.items():
        assert messages.language_of(notebook.metadata) == language
        corpus.write_submission(course, A, f"student-{language}", notebook)
    nbgrader = Path(sys.executable).parent / "nbgrader"
    done = subprocess.run(
        [str(nbgrader), "autograde", A, "--force"], cwd=course, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = {}
    for language in messages.LANGUAGES:
        graded = nbformat.read(
            course / "autograded" / f"student-{language}" / A / f"{A}.ipynb", as_version=4
        )
        errors = [
            output
            for cell in graded.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "test-pooling"
            for output in cell.get("outputs", [])
            if output.get("output_type") == "error"
        ]
        assert [e["ename"] for e in errors] == ["HiddenCheckFailed"], errors
        said[language] = errors[0]["evalue"]
    assert said["en"].startswith(f"{CHECK}: hidden check failed on "), said["en"]
    assert "隐藏检查" in said["zh_CN"] and "hidden check failed" not in said["zh_CN"], said
    assert "你的结果与一个已知错误一致" in said["zh_CN"], said["zh_CN"]  # the mistake, named
    assert sorted(NUMBER.findall(said["zh_CN"])) == sorted(NUMBER.findall(said["en"]))
    shutil.rmtree(course, ignore_errors=True)
