"""Diagnosis that generalises (issue 45): mistakes no hint list names, named from systematic
transformations of each check's reference (``autograder/checking/diagnosis.py``), only where
every failing case agrees (``contract.consistent``), in both languages.

Judge-level only: cases are prepared on the trusted side and judged with the one judge
(``contract.assess``), as the student's checker, the in-kernel hidden check and the grader do;
nothing here starts a sandbox.
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
from unseen_mistakes import CORPUS, UNTOLD

import autograder.chapters  # noqa: F401 - registers the chapters
from autograder.checking import casefile, checks, diagnosis, judging, messages
from autograder.student import contract
from autograder.student.contract import Case, Expected, Finding, Outcome, Spec

#: issue 45's bar: the share of the unseen corpus that loses points AND gets a named diagnosis
NAMED_RATE = 0.60
#: measured on this corpus (62 wrong implementations, public and hidden cases of seed 7):
#: 43 of 62 named before the diagnosis (the chapters' hand-written hints and the shape
#: diagnosis alone), 55 of 62 with it (one of them, "P factor dropped", by a hand-written hint
#: on its one-key case only)
NAMED_BEFORE, NAMED_AFTER = 43, 55
HIDDEN_SEED = 7


def judged(name: str, fn, seed: int = HIDDEN_SEED) -> list[tuple[Case, tuple]]:
    """Every public and hidden case of a check, run and judged as every place judges them:
    (case, (passed, finding, hint))."""
    spec = checks.spec(name)
    cases = [checks.prepare(name, c) for c in checks.public_cases(name)]
    cases += [checks.prepare(name, c, True) for c in checks.hidden_cases(name, seed)]
    outcomes = [contract.run_case(fn, *c.fresh()) for c in cases]
    cases = contract.consistent(spec, cases, outcomes)
    return [(c, contract.assess(spec, c, o)) for c, o in zip(cases, outcomes)]


def named(finding: Finding) -> bool:
    """A specific diagnosis: a mistake named (hand-written or derived), outputs in another
    order, or a shape mismatch explained (swapped axes, a missing or an extra axis); not
    "wrong in X of Y entries"."""
    if finding.key in ("mistake", "order"):
        return True
    return finding.key.startswith("shape.") and finding.params["because"].key == "because"


@pytest.fixture(scope="module")
def corpus_verdicts():
    with np.errstate(all="ignore"):
        return {(name, what): judged(name, fn) for name, what, fn in CORPUS}


def test_every_unseen_mistake_loses_points(corpus_verdicts):
    assert len(CORPUS) >= 40
    assert {name for name, _, _ in CORPUS} >= {
        "epanechnikov_weights",
        "attention_backward",
        "coverage_loss",
        "alibi_attention",
        "multihead_backward",
        "packed_decoder_mask",
    }  # every chapter
    kept = [key for key, verdicts in corpus_verdicts.items() if all(r[0] for _, r in verdicts)]
    assert kept == []


def test_most_unseen_mistakes_get_a_named_diagnosis(corpus_verdicts):
    named_ones = [
        key
        for key, verdicts in corpus_verdicts.items()
        if any(not r[0] and named(r[1]) for _, r in verdicts)
    ]
    assert len(named_ones) / len(CORPUS) >= NAMED_RATE
    assert len(named_ones) == NAMED_AFTER, sorted(set(corpus_verdicts) - set(named_ones))


@pytest.mark.parametrize(
    ("name", "what", "said"),
    [  # derived names where the chapters' hint lists have none for these
        ("attention_backward", "mask inverted", "with the mask `mask` inverted"),
        ("attention_backward", "mask ignored", "without the mask `mask`"),
        ("attention_backward", "dk and dv swapped", "with dk and dv swapped"),
        ("multihead_backward", "dw_k and dw_v swapped", "with dw_k and dw_v swapped"),
        ("epanechnikov_weights", "divides by h, not h^2", "the square root of `bandwidth`"),
        ("nadaraya_watson_query_grad", "1/h instead of 1/h^2", "x the value of `bandwidth`"),
        ("noam_rate", "1/d_model instead of its root", "1/√x, x the value of `d_model`"),
        ("gated_multihead_attention", "mask inverted", "with the mask `mask` inverted"),
    ],
)
def test_a_systematic_mistake_is_named_by_its_transformation(corpus_verdicts, name, what, said):
    hints = {
        r[1].params["hint"]
        for _, r in corpus_verdicts[(name, what)]
        if not r[0] and r[1].key == "mistake"
    }
    assert any(said in h for h in hints), hints


@pytest.mark.parametrize(("name", "what", "fn"), UNTOLD)
def test_an_untold_mistake_loses_points(name, what, fn):
    assert not all(r[0] for _, r in judged(name, fn))


# ----------------------------------------------------------------------------------------
# "on every failing case": contract.consistent


SPEC = Spec("f", ("out",), rtol=1e-9, atol=1e-12)


def _case(expected, mistakes, hidden=False, name="c", derived=True):
    """A case whose mistakes are derived ones (``contract.Derived``), or declared by hand."""
    kind = contract.Derived if derived else tuple
    mistakes = tuple((h, kind(outputs)) for h, outputs in mistakes)
    return Case(name, (), {}, Expected((np.asarray(expected, float),)), mistakes, hidden)


def _value(*arrays):
    return Outcome("value", tuple(np.asarray(a, float) for a in arrays))


def _hints(cases):
    return [[h for h, _ in c.mistakes] for c in cases]


def test_a_mistake_contradicted_by_another_failing_case_is_named_on_none():
    doubled = "doubled"
    a = _case([1.0, 2.0], [(doubled, (np.array([2.0, 4.0]),))])
    b = _case([3.0, 1.0], [(doubled, (np.array([6.0, 2.0]),))])
    # the function doubles on a (a coincidence), returns something else on b
    kept = contract.consistent(SPEC, [a, b], [_value([2.0, 4.0]), _value([0.0, 0.0])])
    assert _hints(kept) == [[], []]
    assert contract.assess(SPEC, kept[0], _value([2.0, 4.0]))[1].key == "values.at"
    # it doubles everywhere: named on both
    kept = contract.consistent(SPEC, [a, b], [_value([2.0, 4.0]), _value([6.0, 2.0])])
    assert _hints(kept) == [[doubled], [doubled]]
    finding = contract.assess(SPEC, kept[1], _value([6.0, 2.0]))[1]
    assert finding == Finding("mistake", {"hint": doubled})


def test_a_mistake_declared_by_hand_is_named_wherever_it_matches():
    """The rule is the derived family's: a chapter's own hint is named where it matches, as
    its author chose (a function wrong in two ways still hears of the one it shows)."""
    doubled = "doubled"
    a = _case([1.0, 2.0], [(doubled, (np.array([2.0, 4.0]),))], derived=False)
    b = _case([3.0, 1.0], [(doubled, (np.array([6.0, 2.0]),))], derived=False)
    kept = contract.consistent(SPEC, [a, b], [_value([2.0, 4.0]), _value([0.0, 0.0])])
    assert _hints(kept) == [[doubled], [doubled]]


def test_a_degenerate_case_or_a_passed_one_refutes_nothing():
    negated = "negated"
    degenerate = _case([0.0, 0.0], [(negated, (np.array([0.0, 0.0]),))])  # -0 = 0
    shown = _case([1.0, -2.0], [(negated, (np.array([-1.0, 2.0]),))])
    passed = _case([5.0, 1.0], [(negated, (np.array([-5.0, -1.0]),))])
    outcomes = [_value([9.0, 9.0]), _value([-1.0, 2.0]), _value([5.0, 1.0])]
    kept = contract.consistent(SPEC, [degenerate, shown, passed], outcomes)
    assert _hints(kept)[1] == [negated]


def test_an_error_on_another_case_refutes_nothing():
    """A function that raises on one case (its own finding) says nothing of its values."""
    m = "m"
    a = _case([1.0], [(m, (np.array([2.0]),))])
    b = _case([1.0], [(m, (np.array([2.0]),))])
    kept = contract.consistent(SPEC, [a, b], [_value([2.0]), Outcome("error", code="ValueError")])
    assert _hints(kept) == [[m], [m]]


def test_hidden_cases_never_change_what_a_public_case_says():
    m = "m"
    public = _case([1.0], [(m, (np.array([2.0]),))])
    hidden = _case([1.0], [(m, (np.array([2.0]),))], hidden=True)
    kept = contract.consistent(SPEC, [public, hidden], [_value([2.0]), _value([7.0])])
    assert _hints(kept) == [[m], []]
    hidden_first = contract.consistent(SPEC, [hidden, public], [_value([7.0]), _value([2.0])])
    assert _hints(hidden_first) == [[], [m]]


def test_two_mistakes_sharing_a_hint_are_one_identity():
    h = "one hint, two ways"
    a = _case([1.0], [(h, (np.array([2.0]),)), (h, (np.array([3.0]),))])
    b = _case([1.0], [(h, (np.array([2.0]),)), (h, (np.array([3.0]),))])
    kept = contract.consistent(SPEC, [a, b], [_value([2.0]), _value([3.0])])
    assert _hints(kept) == [[h, h], [h, h]]


def test_the_checkers_run_cases_applies_the_rule():
    """``contract.run_cases`` (the student's checker, the in-kernel hidden check) judges after
    running every case: a coincidence on one case names nothing."""
    m = "doubled"
    a = _case([1.0, 2.0], [(m, (np.array([2.0, 4.0]),))], name="a")
    b = _case([3.0, 1.0], [(m, (np.array([6.0, 2.0]),))], name="b")
    answers = {1.0: [2.0, 4.0], 3.0: [0.0, 0.0]}

    def fn():
        return np.array(answers[fn.first.pop(0)])

    fn.first = [1.0, 3.0]
    verdicts, _ = contract.run_cases(SPEC, fn, [a, b])
    assert [v.passed for v in verdicts] == [False, False]
    assert all("known mistake" not in v.message for v in verdicts), verdicts
    fn.first, answers[3.0] = [1.0, 3.0], [6.0, 2.0]
    verdicts, _ = contract.run_cases(SPEC, fn, [a, b])
    assert all(v.message.endswith(f"your result matches a known mistake: {m}") for v in verdicts)


# ----------------------------------------------------------------------------------------
# the family: degenerate cases, the vocabulary of a hint, the stored form, both languages


def test_a_transformation_equal_to_the_reference_on_a_case_is_not_offered_there():
    """``mask`` dropped on a case whose mask allows everything is the reference itself."""
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((3, 4)) for _ in range(4))
    full = Case("all allowed", (q, k, v, g), {"mask": np.ones((3, 3), bool)})
    some = Case("some masked", (q, k, v, g), {"mask": np.tril(np.ones((3, 3), bool))})
    dropped = "the solution computed without the mask `mask` (every key allowed)"
    assert dropped not in _hints([checks.prepare("attention_backward", full)])[0]
    assert dropped in _hints([checks.prepare("attention_backward", some)])[0]


def _derived_hints(name: str, cases: list[Case]) -> set[str]:
    own = {m.hint for m in checks.REGISTRY[name].mistakes}
    return {h for c in cases for h, _ in c.mistakes if h not in own}


DIGIT_FREE_LABELS = re.compile(r"`[^`]*`|1/√[dnx]|√[dnx]|1/[dnx2]|[+-]1\b|\b2\b")


@pytest.mark.parametrize(
    "name", ["attention_backward", "coverage_context", "alibi_attention", "noam_rate"]
)
def test_a_derived_hint_holds_no_number_of_the_case(name):
    """The same transformation has the same hint on every case (the rule keys on it), and a
    hidden case's hint says nothing of its inputs: names of the check and fixed labels only."""
    check = checks.REGISTRY[name]
    hints = set()
    for seed in (1, 2):
        hints |= _derived_hints(
            name, [checks.prepare(name, c, True) for c in checks.hidden_cases(name, seed)]
        )
    assert hints
    for hint in hints:
        rest = DIGIT_FREE_LABELS.sub(" ", hint)
        for output in check.outputs:
            rest = rest.replace(output, " ")
        assert not re.search(r"\d", rest), hint


@pytest.mark.parametrize("name", ["sparsemax", "multihead_backward", "window_global_mask"])
def test_every_derived_hint_reads_in_chinese_and_round_trips(name):
    cases = [checks.prepare(name, c) for c in checks.public_cases(name)]
    hints = _derived_hints(name, cases)
    assert hints
    for hint in hints:
        chinese = checks.translated_hint(hint, "zh_CN", checks.REGISTRY[name].assignment)
        assert chinese != hint and re.search(r"[\u4e00-\u9fff]", chinese), hint
        assert diagnosis.translated(hint, "en") == hint
        for span in re.findall(r"`[^`]*`", hint):
            assert span in chinese
    assert diagnosis.translated("normalise each row", "zh_CN") is None


def test_the_grader_words_a_derived_mistake_in_the_submissions_language():
    """Public cases name the transformation; a hidden case says its kind alone (one of a
    fixed few sentences), in the notebook's language, from cases prepared in English."""
    name = "attention_backward"
    wrong = dict((what, fn) for n, what, fn in CORPUS if n == name)["mask inverted"]
    spec = checks.spec(name)
    cases = [checks.prepare(name, c) for c in checks.public_cases(name)]
    cases += [checks.prepare(name, c, True) for c in checks.hidden_cases(name, HIDDEN_SEED)]
    outcomes = [contract.run_case(wrong, *c.fresh()) for c in cases]
    cases = contract.consistent(spec, cases, outcomes)
    said = {}
    for language in messages.LANGUAGES:
        verdicts = [
            judging.judge(*checks.localised(spec, c, language), o, language)
            for c, o in zip(cases, outcomes)
        ]
        said[language] = {
            hidden: [v.message for v in verdicts if not v.passed and v.hidden == hidden]
            for hidden in (False, True)
        }
    public, hidden = said["en"][False], said["en"][True]
    assert any("with the mask `mask` inverted (True means may attend)" in m for m in public)
    assert any("with the mask dropped or inverted; the public cases" in m for m in hidden)
    assert not any("`mask`" in m for m in hidden), hidden
    assert any("掩码 `mask` 取反" in m for m in said["zh_CN"][False]), said["zh_CN"]
    assert any("不用掩码或掩码取反" in m for m in said["zh_CN"][True]), said["zh_CN"]


def test_a_hidden_case_says_at_most_seven_more_things_with_the_derived_mistakes():
    """The derived mistakes add their kinds alone to what a hidden case can say: 7 sentences
    (docs/threat-model.md: a hidden case says at most 64 things)."""
    kinds = set(diagnosis.KIND.values())
    assert len(kinds) == 7
    for name in ("attention_backward", "multihead_backward", "coverage_attention_steps"):
        said = set()
        for seed in (1, 2, 3):
            cases = [checks.prepare(name, c, True) for c in checks.hidden_cases(name, seed)]
            said |= _derived_hints(name, cases)
        english = messages.catalog()
        assert said <= {english[f"diagnosis.kind.{k}"] for k in kinds}, said


def test_a_derived_output_change_is_stored_as_a_recipe_and_read_back_identical(tmp_path):
    name = "multihead_backward"
    cases = [checks.prepare(name, c) for c in checks.public_cases(name)[:2]]
    recipes = [m for c in cases for m in c.mistakes if hasattr(m[1], "recipe")]
    assert recipes  # outputs scaled, negated, swapped: a few numbers each
    path = tmp_path / "public_cases.npz"
    casefile.save_cases(path, "a", {name: {"spec": checks.spec(name), "cases": cases}})
    read = contract.load_cases(path)[name]["cases"]
    for mine, theirs in zip(cases, read):
        assert [h for h, _ in mine.mistakes] == [h for h, _ in theirs.mistakes]
        for (_, outs), (_, back) in zip(mine.mistakes, theirs.mistakes):
            assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(outs, back))


def test_a_prepared_case_pickles_with_its_recipes_as_they_were_made():
    """A Dask worker gets the prepared hidden cases pickled: a recipe's outputs come back
    the same, still derived (named only where every failing case agrees)."""
    name = "multihead_backward"
    cases = [checks.prepare(name, c) for c in checks.public_cases(name)[:2]]
    for mine, back in zip(cases, pickle.loads(pickle.dumps(cases))):
        for (_, outs), (_, theirs) in zip(mine.mistakes, back.mistakes):
            assert type(theirs) is type(outs)
            assert getattr(theirs, "recipe", None) == getattr(outs, "recipe", None)
            assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(outs, theirs))


def test_outputs_of_the_expected_shapes_in_another_order_are_named_in_both_languages():
    """Two outputs swapped whose shapes differ: no array comparison can name it, the shapes
    do; a hidden case says it as the public one does (names of the check only)."""
    name = "coverage_attention_steps"
    wrong = dict((what, fn) for n, what, fn in CORPUS if n == name)["outputs in the wrong order"]
    spec = checks.spec(name)
    public = checks.prepare(name, checks.public_cases(name)[0])
    hidden = checks.prepare(name, checks.hidden_cases(name, HIDDEN_SEED)[0], True)
    for case in (public, hidden):
        outcome = contract.run_case(wrong, *case.fresh())
        passed, finding, _ = contract.assess(spec, case, outcome)
        assert not passed and finding == Finding("order", {"names": "weights, loss"})
        english = judging.judge(spec, case, outcome).message
        chinese = judging.judge(spec, case, outcome, "zh_CN").message
        assert english.endswith("return weights, loss, in this order."), english
        assert "请按 weights, loss 的顺序返回" in chinese, chinese
    one = Spec("g", ("a", "b"))
    same = Case("c", (), {}, Expected((np.zeros(2), np.ones(2))))
    swapped = Outcome("value", (np.ones(2), np.zeros(2)))
    assert contract.assess(one, same, swapped)[1].key == "values.at"  # same shapes: values say


def test_the_grader_names_what_the_checker_names_from_the_same_outcomes():
    """The grader's judge of a task (``grading.verdict``, fed the outcomes a sandbox would
    send back) applies the rule as the student's checker does: the same messages, public and
    hidden, for a derived mistake and for a coincidence it must not name."""
    from autograder.checking.results import SubmissionResult
    from autograder.grading import verdict
    from autograder.grading.check_data import Task
    from autograder.grading.run import RunRecord

    name = "attention_backward"
    spec = checks.spec(name)
    cases = [checks.prepare(name, c) for c in checks.public_cases(name)]
    cases += [checks.prepare(name, c, True) for c in checks.hidden_cases(name, HIDDEN_SEED)]
    for what in ("mask inverted", "dk and dv swapped", "no 1/sqrt(d) anywhere"):
        wrong = dict((w, fn) for n, w, fn in CORPUS if n == name)[what]
        checker, _ = judging.run_cases(spec, wrong, cases)
        outcomes = {(0, i): contract.run_case(wrong, *c.fresh()) for i, c in enumerate(cases)}
        result = SubmissionResult("s", checks.REGISTRY[name].assignment, 1, max_score=1.0)
        judged = verdict._judge_task(
            0,
            Task("t", name, name),
            {name: spec},
            [cases],
            RunRecord(outcomes=outcomes),
            result,
            messages.ENGLISH,
            None,
        )
        assert [v.message for v in judged.verdicts] == [v.message for v in checker], what
