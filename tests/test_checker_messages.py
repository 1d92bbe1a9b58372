"""What a failure says, in the student's own kernel and about hidden cases.

- The student-side checker (public cases, the student's kernel: full detail) points an error
  raised inside NumPy at the student's own line, says which import failed and what the grader
  offers, and gives the line of a syntax error.
- A hidden case's message is one of a fixed few texts: across hundreds of hostile outcomes
  that each encode a different number, the hidden messages of a case take at most 2^6
  values, while the public ones are almost all different (the public detail is there)."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from autograder.checking import checks, judging
from autograder.course import release
from autograder.student import contract


@pytest.fixture(scope="module")
def public_cases(tmp_path_factory):
    path = tmp_path_factory.mktemp("cases") / "public_cases.npz"
    release.build_public_cases("ch1_pooling", path)
    return str(path)


def _checker_message(public_cases, fn) -> str:
    with pytest.raises(contract.CheckFailed) as failed:
        contract.check("epanechnikov_weights", fn, cases_path=public_cases)
    return str(failed.value)


def test_an_error_inside_numpy_points_at_the_students_line_not_numpys(public_cases):
    def epanechnikov_weights(x_query, x_keys, bandwidth):
        total = np.sum(x_query, axis=7)  # the student's mistake: an axis that is not there
        return total

    message = _checker_message(public_cases, epanechnikov_weights)
    assert "AxisError" in message and "`total = np.sum(x_query, axis=7)" in message, message
    assert "normalize_axis_index" not in message and "numpy" not in message.split("AxisError")[1]


def test_a_missing_module_says_which_import_and_what_the_grader_offers(public_cases):
    def epanechnikov_weights(x_query, x_keys, bandwidth):
        import pandas_is_not_here  # noqa: F401

    message = _checker_message(public_cases, epanechnikov_weights)
    assert "No module named 'pandas_is_not_here'" in message
    assert "`import pandas_is_not_here" in message and contract.MESSAGES["offered"] in message
    assert "raised ModuleNotFoundError: an import failed" in message


def test_a_syntax_error_gives_its_line(public_cases, tmp_path, monkeypatch):
    (tmp_path / "helper_with_typo.py").write_text("import numpy as np\nx = (1,\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def epanechnikov_weights(x_query, x_keys, bandwidth):
        import helper_with_typo  # noqa: F401

    message = _checker_message(public_cases, epanechnikov_weights)
    assert "raised SyntaxError" in message and "a syntax error at line 2" in message, message


# ----------------------------------------------------------------------------------------
# hidden messages: a fixed few texts, whatever the submission returns


def _hostile_outcomes(expected: tuple, rng) -> list:
    """Outcomes that each carry a different number: errors, bad returns, wrong arity, wrong
    shapes and axis counts, values off by a chosen amount in chosen entries, NaN and inf."""
    outcomes = [contract.Outcome("error", code=code) for code in contract.ERRORS]
    outcomes += [contract.Outcome("bad", code=code) for code in contract.BAD_RETURNS]
    for k in range(1, 17):
        outcomes.append(contract.Outcome("value", tuple(np.zeros(2) for _ in range(k))))
        outcomes.append(contract.Outcome("value", (np.zeros((1,) * k),) + expected[1:]))
    for _ in range(300):
        arrays = []
        for e in expected:
            a = np.array(e, dtype=bool if e.dtype == bool else float)
            flat = a.reshape(-1)
            start = int(rng.integers(0, flat.size))
            if a.dtype == bool:
                flat[start:] = ~flat[start:]
            else:
                flat[start:] += rng.choice([rng.uniform(1e-3, 1e3), np.nan, np.inf])
            if rng.random() < 0.3:
                a = np.zeros(tuple(int(d) for d in rng.integers(0, 9, size=a.ndim)))
            arrays.append(a)
        outcomes.append(contract.Outcome("value", tuple(arrays)))
    return outcomes


@pytest.mark.parametrize(
    "name",
    ["attention_backward", "epanechnikov_weights", "window_global_mask", "translate_given_model"],
)
def test_a_hidden_case_has_at_most_64_messages_however_it_fails(name):
    rng = np.random.default_rng(0)
    spec = checks.spec(name)
    case = checks.prepare(name, checks.hidden_cases(name, 3)[0], hidden=True)
    as_public = dataclasses.replace(case, hidden=False)
    hidden, public = set(), set()
    with np.errstate(all="ignore"):
        for outcome in _hostile_outcomes(case.expected, rng):
            for into, judged in ((hidden, case), (public, as_public)):
                verdict = judging.judge(spec, judged, outcome)
                if not verdict.passed:
                    into.add(verdict.message)
    assert len(hidden) <= 64, sorted(hidden)  # at most 6 bits per hidden case
    assert len(public) > len(hidden), len(public)  # public messages keep their detail
    assert math.log2(len(hidden)) <= 6


@pytest.mark.parametrize("name", ["attention_backward", "translate_given_model"])
def test_a_hidden_message_in_chinese_is_the_english_one_translated_no_new_channel(name):
    """The language changes the words, never what they carry: each Chinese hidden message
    stands for exactly one English one (as many distinct texts, paired one to one)."""
    rng = np.random.default_rng(1)
    spec = checks.spec(name)
    case = checks.prepare(name, checks.hidden_cases(name, 3)[0], hidden=True)
    zh_spec, zh_case = checks.localised(spec, case, "zh_CN")
    pairs = set()
    with np.errstate(all="ignore"):
        for outcome in _hostile_outcomes(case.expected, rng):
            english = judging.judge(spec, case, outcome)
            chinese = judging.judge(zh_spec, zh_case, outcome, "zh_CN")
            assert english.passed == chinese.passed
            if not english.passed:
                pairs.add((english.message, chinese.message))
    assert len({e for e, _ in pairs}) == len({z for _, z in pairs}) == len(pairs) > 5
    assert all(re.search(r"[\u4e00-\u9fff]", z) for _, z in pairs)


def test_a_hidden_summary_gives_one_message_and_the_other_cases_names():
    failures = [
        contract.Verdict(
            "f", "a", True, False, "case 'a': output is wrong in most of its entries."
        ),
        contract.Verdict("f", "b", True, False, "case 'b': output contains NaN where ..."),
        contract.Verdict("f", "c", True, False, "case 'c': f raised IndexError"),
    ]
    text = judging.summary("f", failures, 5, hidden=True)
    assert text == (
        "f: hidden check failed on 3 of 5 cases:\n"
        "  - case 'a': output is wrong in most of its entries.\n"
        "  - case 'b', case 'c' failed too"
    )
