"""The check registry and the student-side check module.

- every check's reference passes its own public and hidden cases (and run_hidden);
- deliberately wrong implementations fail with the message that teaches the fix;
- hidden messages hold no input or expected values;
- the student-side module: its messages, no traceback from inside it, no imports of the
  course, and public_cases.npz round-trips without pickle.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autograder.chapters import ch3_seq2seq
from autograder.checking import casefile, checks, judging
from autograder.checking.checks import Case, Seeded
from autograder.course import release
from autograder.student import contract

NAMES = sorted(checks.REGISTRY)
CONTRACT_REGEX = re.compile(r"check\(\s*[\"'](\w+)[\"']\s*,\s*(\w+)\s*\)")


def _perfect(name):
    """A correct implementation of a check: the reference (or, for the outcome task, the truth)."""
    if name == "translate":
        return lambda src: ch3_seq2seq._translate_answer(Case("", (src,)))
    return checks.REGISTRY[name].reference


def _verdicts(name, fn, cases, hidden):
    out = []
    for case in cases:
        got = checks.normalise(checks.call(fn, case))
        out.append(checks.compare(name, case, checks.expected(name, case), got))
    return out


# ----------------------------------------------------------------------------------------
# the registry


def test_registry_covers_the_five_assignments_and_names_match_keys():
    assert set(c.assignment for c in checks.REGISTRY.values()) == set(checks.ASSIGNMENTS)
    for name, check in checks.REGISTRY.items():
        assert check.name == name
        for assignment in checks.ASSIGNMENTS:
            # ch6 has ten: the five of its chapter and the decoder's five
            assert 4 <= len(checks.checks_for(assignment)) <= 10


def _reference_module(check) -> str:
    reference = check.reference
    return getattr(reference, "module", None) or reference.__module__


def test_the_references_outside_the_answer_key_are_the_ones_the_docs_name():
    """docs/architecture.md and adding-a-chapter.md: a graded function's reference is in
    ``answers/``, except chapter 3's translation loop and chapter 6's eight decoder pieces,
    graded against their library functions in ``solutions``."""
    outside = {}
    for name, check in checks.REGISTRY.items():
        module = _reference_module(check)
        assert module.startswith(("answers.", "solutions.")), (name, module)
        if not module.startswith("answers."):
            outside.setdefault((check.assignment, module), set()).add(name)
    assert set(outside) == {
        ("ch3_seq2seq", "solutions.seq2seq"),
        ("ch6_transformer", "solutions.transformer"),
    }
    assert outside["ch3_seq2seq", "solutions.seq2seq"] == {"translate", "translate_given_model"}
    assert len(outside["ch6_transformer", "solutions.transformer"]) == 8


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes_its_public_and_hidden_cases(name):
    fn = _perfect(name)
    for hidden, cases in (
        (False, checks.public_cases(name)),
        (True, checks.hidden_cases(name, 11)),
        (True, checks.hidden_cases(name, 12345)),
    ):
        assert cases, name
        for verdict in _verdicts(name, fn, cases, hidden):
            assert verdict.passed, verdict.message
    checks.run_hidden(name, fn, seed=3)  # raises on failure


@pytest.mark.parametrize("name", NAMES)
def test_cases_hold_only_contract_types_and_hidden_differ_from_public(name):
    allowed = (np.ndarray, int, float, bool, str, type(None), Seeded)
    public, hidden = checks.public_cases(name), checks.hidden_cases(name, 5)
    for case in public + hidden:
        assert isinstance(case.name, str) and case.name
        for value in list(case.args) + list(case.kwargs.values()):
            assert isinstance(value, allowed), (case.name, type(value))

    def arrays(cases):
        return [
            a for c in cases for a in c.args if isinstance(a, np.ndarray) and a.dtype.kind == "f"
        ]

    if arrays(public):
        assert not all(
            p.shape == h.shape and np.array_equal(p, h)
            for p, h in zip(arrays(public), arrays(hidden))
        )
    assert [c.name for c in checks.hidden_cases(name, 5)] == [
        c.name for c in hidden
    ]  # same seed, same cases


def test_edge_cases_are_present():
    names = {n: [c.name for c in checks.public_cases(n)] for n in NAMES}
    assert "fully-masked row" in names["softmax_backward"]
    assert "fully-masked row" in names["attention_backward"]
    assert "a query with no key within h" in names["epanechnikov_weights"]
    for case in checks.public_cases("attention_backward")[:2]:
        assert case.args[0].shape[-2] != case.args[1].shape[-2]  # n_q != n_k catches a transpose


@pytest.mark.parametrize("name", [n for n in NAMES if checks.REGISTRY[n].mistakes])
def test_every_declared_mistake_is_recognised_on_some_public_case(name):
    for mistake in checks.REGISTRY[name].mistakes:
        seen = False
        for case in checks.public_cases(name):
            try:
                got = checks.normalise(checks.call(mistake.outputs, case))
            except (ValueError, TypeError, IndexError):
                continue
            verdict = checks.compare(name, case, checks.expected(name, case), got)
            if not verdict.passed:
                assert "known mistake" in verdict.message, verdict.message
                assert mistake.hint in verdict.message
                seen = True
        assert seen, f"{name}: mistake {mistake.hint!r} never distinguishable on the public cases"


# ----------------------------------------------------------------------------------------
# deliberately wrong implementations and what they are told


def _first_failure(name, fn, hidden=False):
    cases = checks.hidden_cases(name, 2) if hidden else checks.public_cases(name)
    for case in cases:
        verdict = _verdicts(name, fn, [case], hidden)[0]
        if not verdict.passed:
            return case, verdict.message
    raise AssertionError(f"{name}: the wrong implementation passed every case")


def test_a_transposed_gradient_gets_the_transpose_diagnosis_and_its_hint():
    reference = checks.REGISTRY["attention_backward"].reference

    def transposed(q, k, v, grad_out, mask=None):
        dq, dk, dv = reference(q, k, v, grad_out, mask)
        return np.swapaxes(dq, -1, -2), dk, dv  # (d, n_q): dQ^T

    case, message = _first_failure("attention_backward", transposed)
    assert f"expected dq of shape {case.args[0].shape}" in message
    assert "the last two axes look swapped" in message
    assert "dq has the shape of q (..., n_q, d)" in message


def test_missing_sqrt_scaling_is_named():
    def unscaled(q, k, v, slopes, mask=None):
        from solutions.soft_hard import masked_softmax

        n = np.shape(q)[-2]
        bias = -np.asarray(slopes)[:, None, None] * np.abs(np.arange(n)[:, None] - np.arange(n))
        weights = masked_softmax(q @ np.swapaxes(k, -1, -2) + bias, mask)
        return weights @ v, weights

    _, message = _first_failure("alibi_attention", unscaled)
    assert "forgot to divide the scores by sqrt(d)" in message


def test_nan_on_fully_masked_rows_is_located_and_explained():
    reference = checks.REGISTRY["softmax_backward"].reference

    def naive(q, k, v, grad_out, mask=None):
        s = np.asarray(q) @ np.swapaxes(k, -1, -2) / math.sqrt(np.shape(q)[-1])
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
        ds = reference(p, np.asarray(grad_out) @ np.swapaxes(v, -1, -2)) / math.sqrt(q.shape[-1])
        return ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ grad_out

    with np.errstate(invalid="ignore"):
        case, message = _first_failure("attention_backward", naive)
    assert case.name == "padding mask" or "masked" in case.name or "key" in case.name
    assert "contains NaN" in message and "at index" in message
    assert "guard the division" in message


def test_ch6_a_nan_loss_when_every_target_is_pad_fails():
    """0/0 over zero real targets is not a loss: the all-pad case expects 0.0."""
    reference = checks.REGISTRY["label_smoothed_cross_entropy"].reference

    def mean_of_nothing(logits, targets, smoothing, pad_index):
        if (np.asarray(targets) == pad_index).all():
            return float("nan")
        return reference(logits, targets, smoothing, pad_index)

    case, message = _first_failure("label_smoothed_cross_entropy", mean_of_nothing)
    assert case.name == "every target is pad"
    assert "NaN" in message


def test_wrong_shape_says_expected_and_how_many_axes_came_back():
    reference = checks.REGISTRY["nadaraya_watson_ard"].reference

    def keepdims(x_query, x_keys, y_values, bandwidths):
        return reference(x_query, x_keys, y_values, bandwidths)[..., None]

    case, message = _first_failure("nadaraya_watson_ard", keepdims)
    want = np.shape(reference(*case.args))
    assert (
        f"expected predictions of shape {want}, got {len(want) + 1} axes instead of {len(want)}: "
        in message
    )
    assert "one axis too many" in message
    assert str(want + (1,)) not in message


def _spelled_inputs(*arrays) -> tuple:
    """A zero-size shape that spells the first entries of the inputs as integers (three of
    them: NumPy refuses a shape whose other axes multiply past 2**63)."""
    digits = [int(abs(x) * 1e5) + 10 for a in arrays for x in np.ravel(a)[:2]]
    return (0, *digits[:3])


@pytest.mark.parametrize("ndim_like_expected", [False, True])
def test_a_shape_that_spells_the_inputs_is_never_echoed(ndim_like_expected):
    """A submission that returns np.zeros((0, <input digits>...)) reads no input back: the
    message names the expected shape, the number of axes sent and which axes differ."""

    def spell(weights, grad_weights):
        shape = _spelled_inputs(weights, np.asarray(weights)[..., 1:])
        if ndim_like_expected:  # as many axes as the expected gradient, every one a digit
            shape = (0, *shape[1 : np.ndim(weights)])
        else:  # one axis more than the expected gradient
            shape += (0,) * (np.ndim(weights) + 1 - len(shape))
        return np.zeros(shape)

    for case in checks.hidden_cases("softmax_backward", 3):
        expected = checks.expected("softmax_backward", case)
        got = checks.normalise(checks.call(spell, case))
        message = checks.compare("softmax_backward", case, expected, got).message
        sent = {str(d) for d in got[0].shape if d > 9}
        assert sent and not (set(re.findall(r"\d+", message)) & sent), message
        assert f"expected grad_scores of shape {expected[0].shape}" in message
        if ndim_like_expected:
            axes = ", ".join(str(i) for i in range(expected[0].ndim - 1))
            assert f"differs at axes {axes} and {expected[0].ndim - 1}." in message, message
        else:
            assert f"got {got[0].ndim} axes instead of {expected[0].ndim}." in message, message


def test_a_transposed_shape_keeps_its_teaching_hint_without_the_sent_shape():
    def shape_message(output, expected, got):
        kind, (key, params) = contract.shape_finding(output, expected, got)
        return kind, contract.render(contract.MESSAGES, key, **params)

    kind, message = shape_message("weights", (2, 3, 5), (2, 5, 3))
    assert (kind, message) == (
        "transposed",
        "expected weights of shape (2, 3, 5), got a shape that differs at axes 1 and 2: "
        "the last two axes look swapped.",
    )
    kind, message = shape_message("output", (4, 6), (4,))
    assert kind == "shape" and message.startswith(
        "expected output of shape (4, 6), got 1 axis instead of 2: one axis is missing"
    )


def test_token_predictions_of_a_wrong_shape_are_not_echoed():
    spec = checks.spec("translate")
    rows = checks.expected("translate", checks.public_cases("translate")[0])
    for sent in ((0, 101365718, 99824035), (rows[0].shape[0] + 7340, 0)):
        outcome = contract.Outcome("value", (np.zeros(sent, dtype=np.int64),))
        message = contract.judge(spec, Case("c", expected=rows), outcome).message
        assert not {"101365718", "99824035", str(sent[0])} & set(re.findall(r"\d+", message))
        assert "expected predictions of shape" in message, message


def test_wrong_arity_and_none_are_explained():
    case = checks.public_cases("attention_backward")[0]
    exp = checks.expected("attention_backward", case)
    verdict = checks.compare("attention_backward", case, exp, exp[:1])
    assert not verdict.passed and "expected 3 outputs (dq, dk, dv), got 1" in verdict.message
    with pytest.raises(ValueError, match="forget a `return`"):
        checks.normalise(None)
    with pytest.raises(ValueError, match="not numeric"):
        checks.normalise("abc")
    assert checks.normalise(3.5)[0].shape == ()
    assert len(checks.normalise((1, np.zeros(2)))) == 2


def test_outcome_check_reports_accuracy_against_the_threshold():
    case = checks.public_cases("translate")[0]
    truth = checks.expected("translate", case)[0]
    ok = checks.compare("translate", case, (truth,), (truth,))
    assert ok.passed and "100.0%" in ok.message
    wrong = truth.copy()
    wrong[: len(wrong) // 2, 0] = (wrong[: len(wrong) // 2, 0] - 3 + 1) % 10 + 3  # another digit
    bad = checks.compare("translate", case, (truth,), (wrong,))
    assert not bad.passed and "50.0%" in bad.message and "85%" in bad.message
    # an <eos> and anything after it are ignored
    with_eos = np.concatenate(
        [truth, np.full((len(truth), 1), 2), np.full((len(truth), 1), 7)], axis=1
    )
    assert checks.compare("translate", case, (truth,), (with_eos,)).passed


def test_translate_truth_matches_the_generated_targets():
    from solutions import seq2seq

    pairs = seq2seq.make_translation_data(50, 4, 1, 5)
    src, tgt = ch3_seq2seq._translation_ids(pairs)
    assert np.array_equal(ch3_seq2seq._translate_answer(Case("x", (src,)))[:, : tgt.shape[1]], tgt)


def test_given_model_cases_are_clear_of_ties_end_some_rows_and_defeat_a_rule():
    """The random models of translate_given_model: every greedy choice is at least
    GIVEN_MODEL_MIN_MARGIN from an argmax tie, <eos> ends some rows but not all (48 % over
    seeds 0-199; here seeds 0-19), and the exact translation of the words (what a rule
    returns) fails every case with a count and the hint, never a token. Over seeds 0-199
    the rule matched 8 of 3800 rows by chance (one-digit sentences) and no case."""
    from solutions import seq2seq

    ended, differ = [], 0
    for seed in range(20):
        for case in checks.hidden_cases("translate_given_model", seed):
            src, parameters, max_len = case.args
            ids, margin = seq2seq.tiny_greedy_decode(seq2seq.tiny_model(parameters), src, max_len)
            assert margin >= ch3_seq2seq.GIVEN_MODEL_MIN_MARGIN
            ended += [seq2seq.TARGET_VOCAB.eos_id in row for row in ids.tolist()]
            rule = ch3_seq2seq._translate_answer(Case("", (src,)))
            verdict = checks.compare("translate_given_model", case, (ids,), (rule,))
            assert not verdict.passed
            count = re.search(rf"(\d+) of {len(src)} token sequences differ", verdict.message)
            differ += int(count.group(1))
            assert "decode with the model it is given" in verdict.message
    assert 0.25 < np.mean(ended) < 0.75
    assert differ >= 0.95 * len(ended)  # a one-digit row may match by chance, not more


def _numbers(text):
    return set(re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", text))


def test_messages_hold_no_input_or_expected_values():
    """Every message is built from fixed text and numbers computed from the arrays: no entry
    of an input, of the expected answer or of the returned value appears in it."""

    def off_by_a_bit(q, k, v, grad_out, mask=None):
        dq, dk, dv = checks.REGISTRY["attention_backward"].reference(q, k, v, grad_out, mask)
        return dq + 0.25, dk, dv

    seen = 0
    for case in checks.hidden_cases("attention_backward", 9):
        exp = checks.expected("attention_backward", case)
        got = checks.normalise(off_by_a_bit(*case.args))
        message = checks.compare("attention_backward", case, exp, got).message
        assert "max error 0.25" in message and "first wrong entry at index" in message
        values = {
            f"{x:.6g}"
            for a in list(exp) + [a for a in case.args if isinstance(a, np.ndarray)]
            for x in np.ravel(a).astype(float)
        }
        assert not (_numbers(message) & values), message
        seen += 1
    assert seen


def test_a_failure_reads_the_same_in_the_public_check_the_hidden_check_and_the_grader(tmp_path):
    """One contract: contract.check (the student's kernel), checks.run_hidden (stock nbgrader)
    and the grader's judge (judging.judge on a sandbox outcome) word a failure identically."""
    from autograder import grading

    def log_softmax_backward(weights, grad_weights):  # a known mistake
        p, dp = np.asarray(weights), np.asarray(grad_weights)
        return dp - p * dp.sum(axis=-1, keepdims=True)

    transposed = log_softmax_backward
    name = "softmax_backward"
    path = tmp_path / "public_cases.npz"
    release.build_public_cases("ch2_soft_hard", path)
    with pytest.raises(contract.CheckFailed) as public:
        contract.check(name, transposed, cases_path=str(path))
    with pytest.raises(AssertionError) as hidden:
        checks.run_hidden(name, transposed, seed=5)
    spec = checks.spec(name)
    graded = []
    for case in grading.cases_for(checks, name, 5):
        verdict = judging.judge(spec, case, contract.run_case(transposed, *case.fresh()))
        assert (verdict.check, verdict.case) == (name, case.name)
        graded.append(verdict)
    n_public = sum(1 for v in graded if not v.hidden)
    public_failed = [v for v in graded if not v.hidden and not v.passed]
    hidden_failed = [v for v in graded if v.hidden and not v.passed]
    assert str(public.value) == judging.summary(name, public_failed, n_public, hidden=False)
    assert str(hidden.value) == judging.summary(
        name, hidden_failed, len(graded) - n_public, hidden=True
    )
    assert "the backward pass of log-softmax" in str(hidden.value)


def test_run_hidden_fails_with_a_summary_and_no_values():
    def log_softmax_backward(weights, grad_weights):  # a known mistake
        p, dp = np.asarray(weights), np.asarray(grad_weights)
        return dp - p * dp.sum(axis=-1, keepdims=True)

    with pytest.raises(AssertionError) as info:
        checks.run_hidden("softmax_backward", log_softmax_backward, seed=1)
    message = str(info.value)
    assert re.search(r"hidden check failed on \d+ of \d+ cases", message)
    assert "the backward pass of log-softmax" in message
    assert "BEGIN HIDDEN" not in message and "run_hidden" not in message

    def crashes(weights, grad_weights):
        raise IndexError("tuple index out of range")

    with pytest.raises(AssertionError, match="raised IndexError"):
        checks.run_hidden("softmax_backward", crashes, seed=1)


def test_hidden_seed_comes_from_the_environment(monkeypatch):
    calls = []

    def spy(weights, grad_weights):
        calls.append(np.asarray(grad_weights).copy())
        return checks.REGISTRY["softmax_backward"].reference(weights, grad_weights)

    monkeypatch.setenv(checks.HIDDEN_SEED_ENV, "41")
    checks.run_hidden("softmax_backward", spy)
    first = [c.copy() for c in calls]
    calls.clear()
    checks.run_hidden("softmax_backward", spy, seed=41)
    assert all(np.array_equal(a, b) for a, b in zip(first, calls))


# ----------------------------------------------------------------------------------------
# the student-side module and public_cases.npz


@pytest.fixture(scope="module")
def ch2_cases(tmp_path_factory):
    path = tmp_path_factory.mktemp("public") / "public_cases.npz"
    release.build_public_cases("ch2_soft_hard", path)
    return path


def test_every_checks_spec_is_a_typed_record_that_survives_its_json_edge():
    """A check's spec is a ``contract.Spec`` from the plug-in to the judge; only the case file
    holds it as JSON, and what the student's checker reads back is the same record."""
    import json

    for name in checks.REGISTRY:
        spec = checks.spec(name)
        assert isinstance(spec, contract.Spec) and spec.name == name
        assert contract.Spec.from_json(json.loads(json.dumps(spec.as_json()))) == spec


def test_public_cases_round_trip_without_pickle(tmp_path):
    cases = [
        Case(
            "mixed",
            (
                np.arange(6.0).reshape(2, 3),
                np.array([True, False]),
                3,
                2.5,
                True,
                "dot",
                None,
                Seeded(7),
            ),
            {"mask": np.eye(2, dtype=bool), "k": None},
            expected=(np.ones(3), np.array(4)),
            mistakes=(("a hint", (np.zeros(3), np.array(1))),),
        )
    ]
    path = tmp_path / "public_cases.npz"
    casefile.save_cases(
        path, "ch2_soft_hard", {"demo": {"spec": contract.Spec("demo", rtol=1e-6), "cases": cases}}
    )
    with np.load(path, allow_pickle=False) as data:  # must not need pickle
        assert "__meta__" in data.files
    loaded = contract.load_cases(path)["demo"]
    assert loaded["spec"] == contract.Spec("demo", rtol=1e-6)
    case = loaded["cases"][0]
    assert isinstance(case, Case) and case.name == "mixed" and not case.hidden
    args, kwargs = case.fresh()
    assert np.array_equal(args[0], cases[0].args[0]) and args[1].dtype == bool
    assert args[2:7] == [3, 2.5, True, "dot", None]
    assert isinstance(args[7], np.random.Generator)
    assert args[7].random() == np.random.default_rng(7).random()
    assert np.array_equal(kwargs["mask"], np.eye(2, dtype=bool)) and kwargs["k"] is None
    assert np.array_equal(case.expected[0], np.ones(3))
    assert case.mistakes[0][0] == "a hint"
    args[0][0, 0] = 99.0  # a function that writes into its input does not change the next call
    assert case.fresh()[0][0][0, 0] == 0.0
    assert case.fresh()[0][7].random() == np.random.default_rng(7).random()  # a new generator


def test_student_check_passes_a_correct_function(ch2_cases, capsys):
    contract.check(
        "softmax_backward",
        checks.REGISTRY["softmax_backward"].reference,
        cases_path=str(ch2_cases),
    )
    assert "softmax_backward: all 8 public cases passed" in capsys.readouterr().out


def test_student_check_messages(ch2_cases):
    def unscaled(q, k, v, grad_out, mask=None):
        reference = checks.REGISTRY["attention_backward"].reference
        dq, dk, dv = reference(q, k, v, grad_out, mask)
        return dq * math.sqrt(np.shape(q)[-1]), dk * math.sqrt(np.shape(q)[-1]), dv

    with pytest.raises(contract.CheckFailed) as info:
        contract.check("attention_backward", unscaled, cases_path=str(ch2_cases))
    message = str(info.value)
    assert message.startswith("attention_backward: ") and "public cases failed" in message
    assert "carries that factor into both dQ and dK" in message
    rendered = info.value._render_traceback_()  # what Jupyter shows instead of a traceback
    assert "Traceback" not in "\n".join(rendered) and "contract.py" not in "\n".join(rendered)

    def stub(scores, mask=None):
        raise NotImplementedError()

    with pytest.raises(contract.CheckFailed, match="not implemented yet"):
        contract.check("sparsemax", stub, cases_path=str(ch2_cases))

    def buggy(scores, mask=None):
        return scores[5, 5, 5, 5]

    with pytest.raises(contract.CheckFailed) as info:
        contract.check("sparsemax", buggy, cases_path=str(ch2_cases))
    assert "raised IndexError" in str(info.value) and "`return scores[5, 5, 5, 5]`" in str(
        info.value
    )

    with pytest.raises(contract.CheckFailed, match="no public check called 'attentoin'"):
        contract.check("attentoin", unscaled, cases_path=str(ch2_cases))
    with pytest.raises(contract.CheckFailed, match="returned value is None"):
        contract.check("sparsemax", lambda s, m=None: None, cases_path=str(ch2_cases))


def test_student_check_imports_nothing_from_the_course(ch2_cases, tmp_path):
    source = Path(contract.__file__).read_text()
    assert not re.search(r"^\s*(from|import)\s+(solutions|autograder)", source, re.M)
    folder = tmp_path / "released"
    folder.mkdir()
    (folder / "attention_check.py").write_text(source)
    (folder / "public_cases.npz").write_bytes(Path(ch2_cases).read_bytes())
    script = (
        "import sys, numpy as np\n"
        "from attention_check import check\n"
        "def softmax_backward(p, dp):\n"
        "    p, dp = np.asarray(p, float), np.asarray(dp, float)\n"
        "    return p * (dp - (p * dp).sum(-1, keepdims=True))\n"
        "check('softmax_backward', softmax_backward)\n"
        "assert not any(m == 'solutions' or m.startswith(('solutions.', 'autograder')) for m in sys.modules), sorted(sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "all 8 public cases passed" in result.stdout


# ----------------------------------------------------------------------------------------
# checks that test the method, not only the outcome


def test_a_finite_difference_gradient_fails_where_an_analytic_one_passes():
    ref = checks.REGISTRY["loo_loss_and_grad_ard"].reference

    def finite_difference(x, y, h):
        e = 1e-5 * h
        return ref(x, y, h)[0], (ref(x, y, h + e)[0] - ref(x, y, h - e)[0]) / (2 * e)

    for seed in (1, 2, 3):
        case = checks.hidden_cases("loo_loss_and_grad_ard", seed)[0]
        assert "near the optimum" in case.name and case.args[2].shape == (1,)
        exp = checks.expected("loo_loss_and_grad_ard", case)
        assert checks.compare("loo_loss_and_grad_ard", case, exp, ref(*case.args)).passed
        verdict = checks.compare("loo_loss_and_grad_ard", case, exp, finite_difference(*case.args))
        assert not verdict.passed and "dloss_dbandwidths is wrong" in verdict.message


@pytest.mark.parametrize("wrong", ["not appended", "keys as columns"])
def test_a_cache_not_appended_or_grown_on_the_wrong_axis_gets_the_cache_hint(wrong):
    from solutions.transformer import decoder_step as step

    def student(x_t, cache_k, cache_v, *rest):
        y_t, k, v = step(x_t, cache_k, cache_v, *rest)
        if wrong == "not appended":
            return y_t, cache_k, cache_v
        return y_t, np.swapaxes(k, -1, -2), v  # K^T cached: (B, d, t + 1)

    case = checks.public_cases("decoder_step")[0]
    got = checks.normalise(checks.call(student, case))
    verdict = checks.compare("decoder_step", case, checks.expected("decoder_step", case), got)
    assert not verdict.passed
    assert "cache_k becomes (B, t + 1, d)" in verdict.message, verdict.message


def test_a_declared_scale_makes_the_absolute_tolerance_ulps_of_the_summed_terms():
    """atol * scale: a result of 1e-10 computed from terms of size 1 may be 1e-15 off (not
    1e-19), and no more; the message gives the bound at the worst entry, not the scale."""
    spec = contract.Spec("g", ("grad",), rtol=0.0, atol=1e-15)
    scaled = contract.Expected((np.array([1e-10, 3.0]),), [np.array([1.0, 1e3])])
    near = contract.Outcome("value", (np.array([1e-10 + 8e-16, 3.0 + 9e-13]),))
    case = Case("c", expected=scaled)
    assert contract.judge(spec, case, near) == contract.Verdict("g", "c", False, True, "ok")
    far = contract.Outcome("value", (np.array([1e-10 + 3e-15, 3.0]),))
    verdict = contract.judge(spec, case, far)
    message = verdict.message
    assert not verdict.passed and "max error 3e-15 vs tolerance 1e-15 there" in message
    assert "times the size of the terms" in message
    unscaled = contract.Expected(tuple(scaled))  # no scale: atol is absolute
    assert not contract.judge(spec, Case("c", expected=unscaled), near).passed
    # a known mistake is recognised within the same bound around its own outputs
    mistake = [("the sign", (np.array([-1e-10, 3.0]),))]
    sign = contract.Outcome("value", (np.array([-1e-10 + 5e-16, 3.0]),))
    with_mistake = Case("c", expected=scaled, mistakes=tuple(mistake))
    assert "known mistake: the sign" in contract.judge(spec, with_mistake, sign).message


def test_an_expected_answer_keeps_its_scale_through_pickle():
    """The grader may send prepared cases to Dask workers: the scale travels with the answer."""
    import pickle

    scaled = contract.Expected((np.array([1e-10, 3.0]), np.array(2.0)), [np.ones(2), None])
    back = pickle.loads(pickle.dumps(scaled))
    assert isinstance(back, contract.Expected) and len(back) == 2
    assert np.array_equal(back[0], scaled[0]) and np.array_equal(back.scale[0], np.ones(2))
    assert back.scale[1] is None
