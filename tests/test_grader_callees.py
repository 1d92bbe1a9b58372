"""One bug costs one task (issue: grader v5, item 7).

Some graded functions are asked to call another (``Check.calls``): ``decoder_block`` and
``decoder_step`` call the student's ``cross_attention``, ``greedy_decode_cached`` their
``decoder_step``, ``coverage_attention_steps`` their ``coverage_context`` and
``coverage_loss``, ``attention_backward`` their ``softmax_backward``, ``head_importance``
their ``gated_multihead_attention``. In the hidden run a caller's callee answers the calls the
source notebook's solution makes with the solution's answers (``grading.callees``,
``zygote.answering``); in the public run it is the student's own, and a caller's failing
public cases are not counted where its callee fails its own check. And every test cell
calls one check, so a wrong ``shift_right`` no longer costs ``teacher_forced_loss``.

- Fast: the declared calls are the ones each solution makes, callees come first; every
  hidden case of every caller, for three seeds, is sent a table, and with it the solution's
  caller passes though its callee is wrong (and fails without it).
- Slow, in the sandbox: a ch6 batch graded with exact scores per test cell.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import as_nobody, corpus  # noqa: E402

from autograder import sandbox  # noqa: E402
from autograder.checking import checks, judging  # noqa: E402
from autograder.checking import notebook as nbparse  # noqa: E402
from autograder.grading import callees, check_data, grade_assignment  # noqa: E402
from autograder.student import contract, zygote  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "autograder"

#: a graded function whose solution calls another but is sent no table: its callee's
#: arguments are a model object, which the case format cannot carry
UNTABLED = {"translate_given_model": {"translate"}}


def _solution_calls(assignment: str) -> dict:
    """function -> the graded functions its solution in the source notebook calls."""
    graded = {c.name for c in checks.checks_for(assignment)}
    notebook = json.loads((SOURCE / "source" / assignment / f"{assignment}.ipynb").read_text())
    found = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse(zygote.neutralise_magics("".join(cell["source"])))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in graded:
                names = {
                    n.func.id
                    for n in ast.walk(node)
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                }
                found[node.name] = (names & graded) - {node.name}
    return found


@pytest.mark.parametrize("assignment", sorted(checks.CHAPTERS))
def test_the_declared_calls_are_the_solutions_and_each_callee_is_graded_first(assignment):
    spec = nbparse.load_assignment(SOURCE, assignment)
    order = [task.check for task in check_data.tasks_of(spec)]
    for name, called in _solution_calls(assignment).items():
        declared = set(checks.REGISTRY[name].calls)
        assert declared == called - UNTABLED.get(name, set()), name
        for callee in declared:
            assert order.index(callee) < order.index(name), (callee, name)


def _callers():
    return [
        (assignment, check.name)
        for assignment in sorted(checks.CHAPTERS)
        for check in checks.checks_for(assignment)
        if check.calls
    ]


def _wrong(own):
    """A callee that is wrong: every float array it returns is 1.5 times too large."""

    def wrong(*args, **kwargs):
        value = own(*args, **kwargs)
        if isinstance(value, tuple):
            return tuple(v * 1.5 if np.asarray(v).dtype.kind == "f" else v for v in value)
        return value * 1.5

    return wrong


@pytest.mark.parametrize(("assignment", "caller"), _callers())
def test_with_its_callees_answers_a_right_caller_passes_whatever_its_callee(assignment, caller):
    """Run as the sandbox runs a hidden case (``zygote.run_answered``), on three seeds."""
    spec = nbparse.load_assignment(SOURCE, assignment)
    namespace = callees.definitions(spec.source_path)
    task = [t.check for t in check_data.tasks_of(spec)].index(caller)
    own = {name: namespace[name] for name in checks.REGISTRY[caller].calls}
    hidden_sets = [check_data.hidden_case_set(spec, checks, seed) for seed in (1, 2, 3)]
    without = []
    try:
        namespace.update({name: _wrong(f) for name, f in own.items()})
        for seed, hidden in enumerate(hidden_sets, 1):
            arrays = contract.unpack(hidden.blob)
            for case, sent in zip(hidden.cases[task], hidden.encoded[task]["cases"], strict=True):
                assert sent.get("calls"), (caller, seed, case.name)  # every case has a table
                args = [contract.fresh(contract.value(s, arrays)) for s in sent["args"]]
                kwargs = {
                    k: contract.fresh(contract.value(s, arrays)) for k, s in sent["kwargs"].items()
                }
                outcome = zygote.run_answered(
                    namespace, namespace[caller], args, kwargs, sent["calls"], arrays, 1
                )
                verdict = judging.judge(checks.spec(caller), case, outcome)
                assert verdict.passed, (caller, seed, case.name, verdict.message)
                plain = zygote.run_case(namespace[caller], *case.fresh(), 1)
                without.append(judging.judge(checks.spec(caller), case, plain).passed)
    finally:
        namespace.update(own)
    assert not all(without)  # the wrong callee does cost the caller without its answers


def test_a_call_the_solution_does_not_make_goes_to_the_students_own_callee():
    spec = nbparse.load_assignment(SOURCE, "ch2_soft_hard")
    hidden = check_data.hidden_case_set(spec, checks, 4)
    task = [t.check for t in check_data.tasks_of(spec)].index("attention_backward")
    sent = hidden.encoded[task]["cases"][0]
    arrays = contract.unpack(hidden.blob)
    table = sent["calls"]["softmax_backward"]
    asked = []

    def own(weights, grad_weights):
        asked.append(np.shape(weights))
        return np.zeros_like(weights)

    callee = zygote.answering(own, table, arrays)
    call = table["calls"][0]["args"]
    weights, grad = (contract.value(call[k], arrays) for k in ("weights", "grad_weights"))
    answered = callee(weights, grad)
    assert not asked and np.abs(answered).sum() > 0  # the solution's call: its answer
    assert np.array_equal(callee(weights, grad_weights=grad), answered)  # by keyword too
    other = callee(weights + 0.5, grad)
    assert asked == [np.shape(weights)] and not np.abs(other).any()  # another call: own's
    assert callee(weights, grad) is not callee(weights, grad)  # a fresh copy each time


# ----------------------------------------------------------------------------------------
# in the sandbox

A = "ch6_transformer"

WRONG_CROSS = """
_right_cross_attention = cross_attention


def cross_attention(*args, **kwargs):  # its output 1.5 times too large
    out, weights = _right_cross_attention(*args, **kwargs)
    return 1.5 * out, weights
"""

WRONG_BLOCK = """
_right_decoder_block = decoder_block


def decoder_block(*args, **kwargs):  # wrong in its own right
    return _right_decoder_block(*args, **kwargs) + 1.0
"""

LOOPING_GREEDY = """
def greedy_decode_cached(*args, **kwargs):
    while True:
        pass
"""

LOOPING_STEP = """
def decoder_step(*args, **kwargs):
    while True:
        pass
"""

WRONG_SHIFT = """
def shift_right(targets, bos_id):  # no shift
    return np.asarray(targets)
"""

FULL = {
    "test-cross-attention": 3,
    "test-packed-mask": 1,
    "test-decoder-layer": 3,
    "test-shift-right": 1,
    "test-teacher-forcing": 2,
    "test-label-smoothing": 2,
    "test-noam-rate": 1,
    "test-beam-search": 3,
    "test-decoder-step": 2,
    "test-cache": 2,
}


def _batch(course: Path) -> dict:
    """student -> (notebook, total score, reasons), graded in name order on one worker."""
    good = corpus.solved(course, A)
    wrong_cross = corpus.append_to_cell(good, "cross-attention", WRONG_CROSS)
    return {
        "a-wrong-cross": (wrong_cross, 17, []),
        "b-wrong-cross-and-block": (
            corpus.append_to_cell(wrong_cross, "decoder-block", WRONG_BLOCK),
            14,
            [],
        ),
        "c-looping-greedy": (
            corpus.append_to_cell(good, "greedy-decode-cached", LOOPING_GREEDY),
            18,
            ["timeout"],
        ),
        "d-wrong-shift": (corpus.append_to_cell(good, "shift-right", WRONG_SHIFT), 19, []),
        "e-honest": (good, 20, []),
        "f-looping-step": (
            corpus.append_to_cell(good, "decoder-step", LOOPING_STEP),
            18,
            ["timeout"],
        ),
    }


@pytest.fixture(scope="module")
def course(tmp_path_factory, bubblewrap):
    return corpus.released_course(tmp_path_factory.mktemp("callees") / "course", (A,))


@pytest.fixture(scope="module")
def graded(course):
    batch = _batch(course)
    for student, (notebook, _score, _reasons) in batch.items():
        corpus.write_submission(course, A, student, notebook)
    limits = sandbox.Limits(cell_seconds=20, task_seconds=10, submission_seconds=120)
    outcome = grade_assignment(course, A, workers=1, limits=limits, seed=3)
    results = {r.student: r for r in outcome.graded}
    got = {s: (r.points, sorted(r.reasons)) for s, r in results.items()}
    assert got == {s: (float(c[1]), c[2]) for s, c in batch.items()}
    return results


def test_rootless_the_same_scores(graded, course, public_tmp):
    """As ``nobody`` (rootless sandboxes), the same batch gets the same scores and reasons
    (``as_nobody.grade`` asserts them)."""
    as_nobody.grade(course, A, public_tmp, _batch(course), workers=1)


def _cells(result) -> dict:
    return {t.grade_id: t.points for t in result.tasks}


def test_a_wrong_callee_costs_its_own_task_only(graded):
    result = graded["a-wrong-cross"]
    assert _cells(result) == {**FULL, "test-cross-attention": 0}
    block = next(t for t in result.tasks if t.grade_id == "test-decoder-layer")
    assert "Fix cross_attention first" in block.message
    assert "decoder_block was graded on its hidden cases" in block.message
    step = next(t for t in result.tasks if t.grade_id == "test-decoder-step")
    assert "Fix cross_attention first" in step.message
    cache = next(t for t in result.tasks if t.grade_id == "test-cache")  # decoder_step failed
    assert "Fix decoder_step first" in cache.message  # its public cases, with cross_attention


def test_a_caller_wrong_in_its_own_right_still_fails(graded):
    cells = _cells(graded["b-wrong-cross-and-block"])
    assert cells == {**FULL, "test-cross-attention": 0, "test-decoder-layer": 0}


def test_a_looping_caller_costs_its_own_cell_and_says_why(graded):
    result = graded["c-looping-greedy"]
    assert _cells(result) == {**FULL, "test-cache": 0}
    cache = next(t for t in result.tasks if t.grade_id == "test-cache")
    assert "greedy_decode_cached: stopped by the grader (timeout" in cache.message


def test_a_wrong_shift_costs_the_shift_only(graded):
    assert _cells(graded["d-wrong-shift"]) == {**FULL, "test-shift-right": 0}


def test_an_honest_submission_keeps_full_marks(graded):
    assert _cells(graded["e-honest"]) == FULL
    assert graded["e-honest"].points == 20


def test_a_looping_callee_costs_its_own_cell_and_not_its_callers(graded):
    """``decoder_step`` loops: ``greedy_decode_cached``, which calls it, is stopped in the
    public run too, and still runs on its hidden cases, where ``decoder_step`` answers the
    solution's calls (``grading.run.rescued``)."""
    result = graded["f-looping-step"]
    assert _cells(result) == {**FULL, "test-decoder-step": 0}
    cache = next(t for t in result.tasks if t.grade_id == "test-cache")
    assert "Fix decoder_step first" in cache.message
    assert "greedy_decode_cached: all 4 hidden cases passed" in cache.message


public_tmp = as_nobody.public_tmp
