"""The one message catalog (autograder/checking/messages.py): a submission's language chosen from its
notebook's metadata (hostile: only "en" or "zh_CN", anything else English), every message
translated with the same placeholders, and a Chinese submission told the same numbers as an
English one in its own language: by the shipped checker run from a released Chinese folder,
and by the real grader (slow)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.checking import judging, messages
from autograder.course import release
from autograder.student import contract

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "book" / "_ext")]
from tools import translations  # noqa: E402

HAN = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
#: where a check's hint starts in each language (a hint is the chapter's text, not ours)
HINT = re.compile(r" (?:Hint: |提示：).*")


def _numbers(text: str) -> list[str]:
    """The numbers of a message, hints left out, sorted (word order differs by language)."""
    return sorted(NUMBER.findall(HINT.sub("", text)))


# ----------------------------------------------------------------------------------------
# the notebook's language


@pytest.mark.parametrize(
    ("metadata", "language"),
    [
        ({"attention_derived": {"language": "zh_CN"}}, "zh_CN"),
        ({"attention_derived": {"language": "en"}}, "en"),
        ({}, "en"),
        ({"attention_derived": {"language": "xx"}}, "en"),
        ({"attention_derived": {"language": "zh_CN" + "x" * 100_000}}, "en"),
        ({"attention_derived": {"language": "x" * 100_000}}, "en"),
        ({"attention_derived": {"language": "zh_cn"}}, "en"),
        ({"attention_derived": {"language": " zh_CN"}}, "en"),
        ({"attention_derived": {"language": ["zh_CN"]}}, "en"),
        ({"attention_derived": {"language": {"zh_CN": 1}}}, "en"),
        ({"attention_derived": "zh_CN"}, "en"),
        ({"attention_derived": None}, "en"),
        ({"language": "zh_CN"}, "en"),
        (["attention_derived"], "en"),
        (None, "en"),
    ],
)
def test_a_notebook_language_is_en_or_zh_cn_exactly_anything_else_is_english(metadata, language):
    assert messages.language_of(metadata) == language


def test_the_release_marks_each_edition_and_the_grader_reads_the_mark():
    notebook = nbformat.v4.new_notebook()
    release.mark_language(notebook, "zh_CN")
    assert messages.language_of(notebook.metadata) == "zh_CN"
    release.mark_language(notebook, "en")
    assert messages.language_of(notebook.metadata) == "en"


# ----------------------------------------------------------------------------------------
# the catalog


def test_every_message_has_a_chinese_translation_with_the_same_placeholders():
    english, chinese = messages.catalog("en"), messages.catalog("zh_CN")
    assert english.keys() == chinese.keys() and len(english) >= 90
    # none the same in both languages: even the bound's formula says |期望值|
    same = {key for key in english if english[key] == chinese[key]}
    assert same == set(), sorted(same)
    for key in english:
        placeholders = re.findall(r"\{(\w+)\}", english[key])
        assert sorted(placeholders) == sorted(re.findall(r"\{(\w+)\}", chinese[key])), key
        words = re.search(r"[A-Za-z]{2,}", re.sub(r"\{\w+\}", "", english[key]))
        if words and key not in same:  # not punctuation alone (".", ": {why}.")
            assert HAN.search(chinese[key]), key


def test_the_two_parts_of_the_catalog_are_disjoint_and_only_the_checkers_ships():
    assert set(messages.shipped("zh_CN")) == set(contract.MESSAGES)
    assert not set(messages.GRADER) & set(contract.MESSAGES)
    assert messages.shipped("en") == contract.MESSAGES
    with pytest.raises(ValueError, match="no message catalog"):
        messages.catalog("xx")


def test_the_translation_check_keeps_placeholders_and_code_spans_of_the_messages(tmp_path):
    english = "{function} raised {error}: did you forget a `return` statement?"
    assert not translations.message_problems(
        english, "{function} 抛出了 {error}：是不是忘了写 `return` 语句？", False, [], template=True
    )
    lost = translations.message_problems(
        english, "{function} 抛出了错误：是不是忘了写 `return` 语句？", False, [], template=True
    )
    assert lost == ["placeholders not kept: missing ['error'], new []"], lost
    renamed = translations.message_problems(
        english, "{function} 抛出了 {err}：是不是忘了写 `return` 语句？", False, [], template=True
    )
    assert renamed == ["placeholders not kept: missing ['error'], new ['err']"], renamed
    code = translations.message_problems(
        english, "{function} 抛出了 {error}：是不是忘了写 return 语句？", False, [], template=True
    )
    assert code and code[0].startswith("code span not kept"), code
    # a catalog under checks/ is checked with the rule, through ``check`` itself
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "messages.po").write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'
        'msgid "case \'{case}\': {problem}"\nmsgstr "用例“{case}”：{problm}"\n',
        encoding="utf-8",
    )
    found = translations.check(tmp_path)
    assert len(found) == 1 and "placeholders not kept" in found[0], found


def test_the_repository_catalogs_have_no_problem():
    assert translations.message_catalog_problems() == []
    checks_dir = translations.CATALOGS / "checks"
    assert [p for p in translations.check() if "checks/messages.po" in p] == []
    assert (checks_dir / "messages.po").is_file()


# ----------------------------------------------------------------------------------------
# the shipped checker, run from a released Chinese folder

WRONG_SPARSEMAX = """
import numpy as np
from attention_check import check

def sparsemax(scores, mask=None):  # wrong: a softmax instead
    s = np.asarray(scores, dtype=float)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

try:
    check("sparsemax", sparsemax)
except AssertionError as failed:
    print(failed)
import sys
assert not [m for m in sys.modules if m.split(".")[0] in ("solutions", "autograder")]
"""


def _released_folder(tmp_path: Path, language: str) -> Path:
    """A folder laid out as the release lays it out: the checker and the public cases of
    ch2_soft_hard in ``language`` (what ``release.write_support_files`` and
    ``release.write_editions`` write)."""
    folder = tmp_path / language
    folder.mkdir()
    shutil.copyfile(contract.__file__, folder / release.CHECK_MODULE)
    release.build_public_cases("ch2_soft_hard", folder / contract.CASES_FILE, language)
    return folder


def _run(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", WRONG_SPARSEMAX],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_shipped_checker_of_the_chinese_release_says_the_same_numbers_in_chinese(tmp_path):
    english = _run(_released_folder(tmp_path, "en"))
    chinese = _run(_released_folder(tmp_path, "zh_CN"))
    assert "sparsemax:" in english and "public cases failed" in english, english
    assert "公开用例中有" in chinese and "public cases failed" not in chinese, chinese
    assert "max error" in english and "最大误差" in chinese, chinese
    en_lines, zh_lines = english.strip().splitlines(), chinese.strip().splitlines()
    assert len(en_lines) == len(zh_lines) >= 2
    for en, zh in zip(en_lines, zh_lines):
        assert _numbers(en) == _numbers(zh), (en, zh)
        assert HAN.search(zh), zh
    # the case names are the check's own, each in its edition's language
    from autograder.checking import checks

    names = re.findall(r"case '([^']+)'", english)
    zh_names = [checks.translated_hint(name, "zh_CN", "ch2_soft_hard") for name in names]
    assert names and all(HAN.search(name) and f"“{name}”" in chinese for name in zh_names)


def test_the_grader_words_a_public_case_as_the_shipped_checker_does_in_chinese(tmp_path):
    """Locally and in feedback, the same message for the same case and value."""
    from autograder.checking import checks

    folder = _released_folder(tmp_path, "zh_CN")
    catalog: dict = {}
    loaded = contract.load_cases(folder / contract.CASES_FILE, catalog)
    assert catalog == messages.shipped("zh_CN")
    spec = loaded["sparsemax"]["spec"]
    graded_cases = checks.public_cases("sparsemax")
    assert [checks.translated_hint(c.name, "zh_CN", "ch2_soft_hard") for c in graded_cases] == [
        c.name for c in loaded["sparsemax"]["cases"]
    ]
    for stored, case in zip(loaded["sparsemax"]["cases"], graded_cases):
        outcome = contract.Outcome("value", (stored.expected[0] * 2.0 + 1.0,))
        local = contract.judge(spec, stored, outcome, catalog)
        prepared = checks.prepare("sparsemax", case)
        graded_spec, graded = checks.localised(checks.spec("sparsemax"), prepared, "zh_CN")
        assert graded_spec == spec
        remote = judging.judge(graded_spec, graded, outcome, "zh_CN")
        assert remote == local and not local.passed and HAN.search(local.message), local


# ----------------------------------------------------------------------------------------
# the real grader, one chapter: a Chinese submission with a known mistake


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_grader_says_a_chinese_submissions_mistake_in_chinese_with_the_same_numbers(
    tmp_path, bubblewrap
):
    sys.path.insert(0, str(Path(__file__).parent))
    from hostile import corpus

    from autograder import grading

    assignment = "ch1_pooling"
    course = corpus.released_course(tmp_path / "course")
    english = corpus.append_to_cell(
        corpus.solved(course, assignment), "average-max-pool", corpus.WRONG_EPANECHNIKOV
    )
    chinese = corpus.append_to_cell(
        corpus.solved(course, assignment, "zh_CN"), "average-max-pool", corpus.WRONG_EPANECHNIKOV
    )
    assert messages.language_of(chinese.metadata) == "zh_CN"
    assert messages.language_of(english.metadata) == "en"
    claims = {}
    # 100 KB: over the notebook metadata's cap (``notebook.Caps.metadata_chars``), refused
    # before its language is read; 50 KB: under it, read and not a language
    for name, value in (("xx", "xx"), ("huge", "zh_CN" * 20_000), ("large", "zh_CN" * 10_000)):
        claimed = nbformat.from_dict(dict(chinese))
        claimed.metadata = nbformat.from_dict(
            {**chinese.metadata, "attention_derived": {"language": value}}
        )
        claims[name] = claimed
    for student, notebook in {"en": english, "zh": chinese, **claims}.items():
        corpus.write_submission(course, assignment, student, notebook)
    outcome = grading.grade_assignment(course, assignment, workers=1)
    results = {r.student: r for r in outcome.graded}
    scores = {s: r.score for s, r in results.items()}
    assert scores == {"en": 9.0, "zh": 9.0, "xx": 9.0, "large": 9.0, "huge": 0.0}, scores
    tasks = {s: {t.grade_id: t for t in r.tasks} for s, r in results.items()}
    failed = [g for g, t in tasks["en"].items() if not t.passed]
    assert len(failed) == 1
    en, zh = tasks["en"][failed[0]], tasks["zh"][failed[0]]
    assert "public cases failed" in en.message and "公开用例中有" in zh.message, zh.message
    assert "hidden check failed" in en.message and "隐藏检查" in zh.message, zh.message
    assert "public cases failed" not in zh.message and HAN.search(zh.message)
    # a declared mistake (no clipping at 0), named by its hint in each language
    assert "matches a known mistake: the kernel is max(0, 1 - u^2)" in en.message, en.message
    assert "你的结果与一个已知错误一致：" in zh.message and "known mistake" not in zh.message
    en_lines, zh_lines = en.message.splitlines(), zh.message.splitlines()
    assert len(en_lines) == len(zh_lines)
    for a, b in zip(en_lines, zh_lines):
        assert _numbers(a) == _numbers(b), (a, b)
    # the passing cells' feedback in Chinese too; the instructor's report stays English
    passed = [g for g in tasks["zh"] if g != failed[0]]
    assert all("全部" in tasks["zh"][g].message for g in passed)
    assert zh.wrong == en.wrong and all(not HAN.search(w) for w in zh.wrong)
    # a notebook claiming another or an oversized language gets the English feedback
    assert results["huge"].reasons == ["invalid notebook"]
    assert "metadata holds more than" in results["huge"].tasks[0].message
    assert not any(HAN.search(t.message) for t in results["huge"].tasks)
    for student in ("xx", "large"):
        assert [t.message for t in results[student].tasks] == [
            t.message for t in results["en"].tasks
        ], student
