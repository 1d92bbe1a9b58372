"""Integer results are compared as integers (issue 45, item 3).

Where a task says its result is an integer array (T5's buckets, token ids) a float array of
the same values fails, and where it says a Python int (``attention_backward_bytes``) a float
fails, each with a message that says what to return and why, in English and in Chinese, in a
public case and (worded apart) in a hidden one. An int, a NumPy integer or an integer array
of the right values passes.
"""

from __future__ import annotations

import numpy as np
import pytest

import autograder.chapters  # noqa: F401 - registers the chapters
from answers import ch4_self_attention as ch4
from answers import ch5_multihead as ch5
from autograder.checking import checks, judging

SEED = 13


def _messages(name: str, fn, language: str = "en") -> list[str]:
    """The failure messages of ``fn`` on the check's public cases and one seed's hidden ones,
    worded in ``language`` as the grader words them."""
    spec = checks.spec(name, language)
    cases = [checks.prepare(name, c) for c in checks.public_cases(name)]
    cases += [checks.prepare(name, c, True) for c in checks.hidden_cases(name, SEED)]
    cases = [checks.localised(checks.spec(name), c, language)[1] for c in cases]
    verdicts, _ = judging.run_cases(spec, fn, cases, language)
    return [v.message for v in verdicts if not v.passed], len(cases)


def _floats(fn):
    return lambda *a, **k: np.asarray(fn(*a, **k), dtype=np.float64)


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", ["to be an integer array, got dtype float64", "return integers"]),
        ("zh_CN", ["是整数数组，得到的 dtype 是 float64", "返回整数"]),
    ],
)
def test_float_buckets_fail_every_case_and_say_why(language, said):
    failed, total = _messages(
        "relative_position_bucket", _floats(ch4.relative_position_bucket), language
    )
    assert len(failed) == total
    public = [m for m in failed if "float64" in m]
    assert public and all(all(s in m for s in said) for m in public), public


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", ["to be a Python int", "return int(...)"]),
        ("zh_CN", ["是 Python 的 int", "返回 int(...)"]),
    ],
)
def test_a_float_byte_count_fails_every_case_and_says_why(language, said):
    fn = lambda *a: float(ch5.attention_backward_bytes(*a))  # noqa: E731
    failed, total = _messages("attention_backward_bytes", fn, language)
    assert len(failed) == total
    assert all(all(s in m for s in said) for m in failed), failed


@pytest.mark.parametrize(
    "fn",
    [
        ch5.attention_backward_bytes,
        lambda *a: np.int64(ch5.attention_backward_bytes(*a)),
    ],
)
def test_an_exact_integer_count_passes(fn):
    assert _messages("attention_backward_bytes", fn)[0] == []


def test_integer_buckets_pass():
    fn = lambda *a: ch4.relative_position_bucket(*a).astype(np.int32)  # noqa: E731
    assert _messages("relative_position_bucket", fn)[0] == []


@pytest.mark.parametrize("name", ["beam_search_table", "greedy_decode_cached"])
def test_token_ids_must_be_integers(name):
    reference = checks.REGISTRY[name].reference

    def floats(*a, **k):
        tokens, *rest = reference(*a, **k)
        return (np.asarray(tokens, dtype=np.float64), *rest)

    failed, total = _messages(name, floats)
    assert len(failed) == total
    assert all("tokens to be an integer array" in m for m in failed), failed[:2]
