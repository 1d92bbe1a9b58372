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
  caller passes though its callee is wrong (and fails without it), as does a caller right
  in its own way.
- Grader v6, item 4: a table holds no argument and no answer in the clear, only answers
  sealed under the keys of their calls; a ``greedy_decode_cached`` that reads the stand-in
  (closures, ``__dict__``, ``gc``, frames) instead of decoding passed against v5's and fails
  against it.
- Slow, in the sandbox, as root and as ``nobody``: a ch6 batch graded with exact scores per
  test cell (the reading caller scores as its twin that decodes nothing; two stubs cost two
  tasks).
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
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
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
    spec = load_assignment(SOURCE, assignment)
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
    spec = load_assignment(SOURCE, assignment)
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


def _first_call(assignment: str, caller: str, seed: int = 4):
    """(the hidden case set, the task's index, its first case's table as sent, the solution's
    calls on that case as recorded on the trusted side)."""
    spec = load_assignment(SOURCE, assignment)
    hidden = check_data.hidden_case_set(spec, checks, seed)
    task = [t.check for t in check_data.tasks_of(spec)].index(caller)
    namespace = callees.definitions(spec.source_path)
    calls = checks.REGISTRY[caller].calls
    recorded = callees.record(namespace, caller, calls, hidden.cases[task][0])
    return hidden, task, hidden.encoded[task]["cases"][0]["calls"], recorded


OTHERWISE = """
def decoder_block(y, memory, self_attn, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask=None):
    # right, but with its own layer norm and order of operations: its calls to
    # cross_attention differ from the solution's by a few ulps
    def norm(x):
        return (x - x.mean(-1, keepdims=True)) * (1.0 / np.sqrt(np.var(x, -1, keepdims=True) + 1e-5))

    y = np.asarray(y, dtype=float)
    n = y.shape[-2]
    causal = np.tril(np.ones((n, n), dtype=bool))
    a = norm(cross_attention(y, y, *self_attn, num_heads, causal)[0] + y)
    b = norm(cross_attention(a, memory, *cross_attn, num_heads, src_mask)[0] + a)
    hidden = np.maximum(b @ w_1 + b_1, 0.0)
    return norm(hidden @ w_2 + b + b_2)
"""


def test_a_right_caller_written_otherwise_is_answered_too():
    """A ``decoder_block`` right in its own way (its own layer norm: its calls differ from the
    solution's in the last bits) is answered as the solution is, with a wrong
    ``cross_attention``, on three seeds; with the callee's answers in hand it passes."""
    spec = load_assignment(SOURCE, A)
    task = [t.check for t in check_data.tasks_of(spec)].index("decoder_block")
    solution = callees.definitions(spec.source_path)
    right, namespace = dict(solution), dict(solution)
    exec(OTHERWISE, right)  # noqa: S102 - the test's own submission
    exec(OTHERWISE, namespace)  # noqa: S102
    namespace["cross_attention"] = _wrong(namespace["cross_attention"])
    results, differ = [], []
    for seed in (1, 2, 3):
        hidden = check_data.hidden_case_set(spec, checks, seed)
        arrays = contract.unpack(hidden.blob)
        for case, sent in zip(hidden.cases[task], hidden.encoded[task]["cases"], strict=True):
            args, kwargs = case.fresh()
            mine = right["decoder_block"](*args, **kwargs)  # with the right cross_attention
            differ.append(not np.array_equal(mine, solution["decoder_block"](*args, **kwargs)))
            outcome = zygote.run_answered(
                namespace, namespace["decoder_block"], list(args), kwargs, sent["calls"], arrays, 1
            )
            results.append(judging.judge(checks.spec("decoder_block"), case, outcome).passed)
    assert all(results) and len(results) >= 12
    assert any(differ)  # not the solution's bits


def test_a_call_the_solution_does_not_make_goes_to_the_students_own_callee():
    hidden, _task, sent, recorded = _first_call("ch2_soft_hard", "attention_backward")
    arrays = contract.unpack(hidden.blob)
    table = sent["softmax_backward"]
    asked = []

    def own(weights, grad_weights):
        asked.append(np.shape(weights))
        return np.zeros_like(weights)

    callee = zygote.answering(own, table, arrays)
    _params, _defaults, entries = recorded["softmax_backward"]
    given, answer = entries[0]
    weights, grad = given["weights"], given["grad_weights"]
    answered = callee(weights, grad)
    assert not asked and np.array_equal(answered, answer)  # the solution's call: its answer
    assert np.array_equal(callee(weights, grad_weights=grad), answered)  # by keyword too
    # a few ulps off (another order of operations): the same call
    assert np.array_equal(callee(weights * (1 + 4e-16), grad), answered) and not asked
    other = callee(weights + 0.5, grad)
    assert asked == [np.shape(weights)] and not np.abs(other).any()  # another call: own's
    assert callee(weights, grad) is not callee(weights, grad)  # a fresh copy each time


def _arrays_of(value, arrays) -> list:
    if isinstance(value, dict):
        if value.get("t") == "array":
            return [arrays[value["k"]]]
        return [a for v in value.values() for a in _arrays_of(v, arrays)]
    if isinstance(value, list):
        return [a for v in value for a in _arrays_of(v, arrays)]
    return []


@pytest.mark.parametrize(("assignment", "caller"), _callers())
def test_a_table_holds_no_argument_and_no_answer_in_the_clear(assignment, caller):
    """What a caller's hidden case is sent about its callees: their parameter names and
    defaults, and sealed answers (bytes), filed under ids: no array of any call's arguments
    or answers, exact or rounded as the keys round them, and no number of them."""
    hidden, task, sent, recorded = _first_call(assignment, caller)
    arrays = contract.unpack(hidden.blob)
    for name, table in sent.items():
        assert set(table) == {"name", "params", "defaults", "answers"}
        sealed = _arrays_of(table["answers"], arrays)
        assert sealed and all(a.dtype == np.uint8 and a.ndim == 1 for a in sealed)
        assert len(json.dumps(table["defaults"])) < 200  # None and the like, from the notebook
        blob = b"".join(a.tobytes() for a in sealed)
        _params, _defaults, entries = recorded[name]
        for given, result in entries:
            values = [*given.values(), *(result if isinstance(result, tuple) else (result,))]
            for value in values:
                if isinstance(value, np.ndarray) and value.size >= 2:
                    for form in (value, value.astype(np.float64), zygote._grid(value * 1.0)):
                        assert np.ascontiguousarray(form).tobytes() not in blob, (caller, name)
    # and the hidden case's own arguments are all the case set holds besides the tables
    case_arrays = _arrays_of(hidden.encoded[task]["cases"][0]["args"], arrays)
    assert case_arrays


READING_GREEDY = """
def greedy_decode_cached(memory, embed, positions, w_out, self_attn, cross_attn, w_1, b_1, w_2,
                         b_2, num_heads, start_id, max_len, cache_k, cache_v, src_mask=None):
    # decodes nothing where decoder_step is the grader's stand-in: reads the reference
    # caller's calls out of it (closures, __dict__, gc referents, its frames)
    import gc, sys, types
    embed, positions = np.asarray(embed, dtype=float), np.asarray(positions, dtype=float)
    cache_k, cache_v = np.asarray(cache_k, dtype=float), np.asarray(cache_v, dtype=float)
    batch, t0 = cache_k.shape[:2]
    d = embed.shape[1]
    if getattr(decoder_step, "__closure__", None) is None:  # its own: decode (public cases)
        token, chosen = np.full(batch, start_id), []
        for t in range(max_len):
            x_t = (np.sqrt(d) * embed[token] + positions[t0 + t])[:, None, :]
            y_t, cache_k, cache_v = decoder_step(x_t, cache_k, cache_v, memory, self_attn,
                                                 cross_attn, w_1, b_1, w_2, b_2, num_heads,
                                                 src_mask)
            token = (y_t[:, 0] @ w_out).argmax(-1)
            chosen.append(token)
        return np.stack(chosen, axis=1), cache_k, cache_v
    found, seen = [], set()

    def walk(obj, depth):
        if id(obj) in seen or depth > 8 or isinstance(obj, (types.ModuleType, type)):
            return
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            found.append(obj)
            return
        if isinstance(obj, (str, bytes, int, float)) or obj is None:
            return
        if isinstance(obj, dict) and "__builtins__" in obj:  # a module's globals
            return
        for attr in ("__closure__", "__dict__", "__defaults__", "__kwdefaults__"):
            walk(getattr(obj, attr, None), depth + 1)
        if isinstance(obj, types.CellType):
            try:
                walk(obj.cell_contents, depth + 1)
            except ValueError:
                pass
        if isinstance(obj, (list, tuple)):  # in order (gc lists a list's items backwards)
            for child in obj:
                walk(child, depth + 1)
        for child in gc.get_referents(obj):
            walk(child, depth + 1)

    walk(decoder_step, 0)
    try:  # its frames: make it fail inside
        decoder_step(None, None, None, None, None, None, None, None, None, None, None)
    except BaseException as err:
        tb = err.__traceback__
        while tb is not None:
            walk(dict(tb.tb_frame.f_locals), 0)
            tb = tb.tb_next
    frame = sys._getframe(1)  # and the frames that called this one
    while frame is not None:
        walk(dict(frame.f_locals), 0)
        frame = frame.f_back

    def an_output(a):  # a decoder layer's output: every row layer-normed
        return np.allclose(a.mean(-1), 0, atol=1e-6) and np.allclose(a.std(-1), 1, atol=1e-3)

    steps = [
        a for a in found if a.shape == (batch, 1, d) and a.dtype.kind == "f" and an_output(a)
    ][:max_len]
    tokens = [(y[:, 0] @ w_out).argmax(-1) for y in steps]
    tokens += [np.zeros(batch, dtype=int)] * (max_len - len(tokens))
    tokens = np.stack(tokens, axis=1)
    fed = np.concatenate([np.full((batch, 1), start_id), tokens[:, :-1]], 1)
    x = np.sqrt(d) * embed[fed] + positions[t0 : t0 + max_len]
    w_q, w_k, w_v, w_o = self_attn
    return tokens, np.concatenate([cache_k, x @ w_k], 1), np.concatenate([cache_v, x @ w_v], 1)
"""


def _v5_answering(own, calls: list):
    """Grader v5's stand-in, rebuilt for contrast: the reference caller's calls in the clear,
    ``calls`` [(arguments by name, the callee's answer)], each answered where a call's
    arguments are the same (arrays within 1e-7)."""

    def callee(*args, **kwargs):
        for want, answer in calls:
            given = dict(zip(want, args), **kwargs)
            if given.keys() == want.keys() and all(
                np.allclose(np.asarray(given[k], dtype=float), np.asarray(w, dtype=float))
                if isinstance(w, np.ndarray)
                else given[k] == w
                for k, w in want.items()
            ):
                return tuple(np.array(a) for a in answer)
        return own(*args, **kwargs)

    return callee


def _stub(*args, **kwargs):
    raise NotImplementedError()


def _run_with_stub_step(namespace: dict, caller, args, tables, arrays) -> contract.Outcome:
    """A hidden case of ``caller`` (its globals ``namespace``) as the sandbox runs it, the
    student's ``decoder_step`` the notebook's stub."""
    saved = namespace.get("decoder_step")
    namespace["decoder_step"] = _stub
    try:
        return zygote.run_answered(namespace, caller, list(args), {}, tables, arrays, 1)
    finally:
        namespace["decoder_step"] = saved


def test_a_caller_that_reads_the_stand_in_finds_nothing_to_read():
    """``greedy_decode_cached`` that decodes nothing where ``decoder_step`` is the stand-in:
    it walks the stand-in's closures, ``__dict__``, ``gc.get_referents``, its frames and the
    frames that called it, and takes the words from any decoder output it finds. Against
    grader v5's stand-in (its calls in the clear) it passes every hidden case; against the
    sealed table, none, while the honest caller passes all (the callee a stub in each)."""
    spec = load_assignment(SOURCE, A)
    task = [t.check for t in check_data.tasks_of(spec)].index("greedy_decode_cached")
    solution = callees.definitions(spec.source_path)
    attacker: dict = {"np": np}
    exec(READING_GREEDY, attacker)  # noqa: S102 - the test's own attack
    reading, honest = attacker["greedy_decode_cached"], solution["greedy_decode_cached"]
    passed: dict = {"sealed": [], "honest": [], "v5": []}

    def judged(kind, case, outcome):
        passed[kind].append(
            judging.judge(checks.spec("greedy_decode_cached"), case, outcome).passed
        )

    for seed in (1, 2, 3):
        hidden = check_data.hidden_case_set(spec, checks, seed)
        arrays = contract.unpack(hidden.blob)
        for case, sent in zip(hidden.cases[task], hidden.encoded[task]["cases"], strict=True):
            args = [contract.fresh(contract.value(s, arrays)) for s in sent["args"]]
            judged(
                "sealed", case, _run_with_stub_step(attacker, reading, args, sent["calls"], arrays)
            )
            judged(
                "honest", case, _run_with_stub_step(solution, honest, args, sent["calls"], arrays)
            )
            recorded = callees.record(solution, "greedy_decode_cached", ("decoder_step",), case)
            attacker["decoder_step"] = _v5_answering(_stub, recorded["decoder_step"][2])
            judged("v5", case, zygote.run_case(reading, list(args), {}, 1))
    assert passed == {"sealed": [False] * 15, "honest": [True] * 15, "v5": [True] * 15}


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

NOTHING_DECODED = """
def greedy_decode_cached(memory, embed, positions, w_out, self_attn, cross_attn, w_1, b_1, w_2,
                         b_2, num_heads, start_id, max_len, cache_k, cache_v, src_mask=None):
    # the reading caller's twin: decodes where decoder_step is its own, not where it is not
    cache_k, cache_v = np.asarray(cache_k, dtype=float), np.asarray(cache_v, dtype=float)
    batch, t0 = cache_k.shape[:2]
    if getattr(decoder_step, "__closure__", None) is not None:
        grown = np.zeros((batch, max_len, cache_k.shape[2]))
        return (np.zeros((batch, max_len), dtype=int), np.concatenate([cache_k, grown], 1),
                np.concatenate([cache_v, grown], 1))
    token, chosen = np.full(batch, start_id), []
    for t in range(max_len):
        x_t = (np.sqrt(embed.shape[1]) * embed[token] + positions[t0 + t])[:, None, :]
        y_t, cache_k, cache_v = decoder_step(x_t, cache_k, cache_v, memory, self_attn, cross_attn,
                                             w_1, b_1, w_2, b_2, num_heads, src_mask)
        token = (y_t[:, 0] @ w_out).argmax(-1)
        chosen.append(token)
    return np.stack(chosen, axis=1), cache_k, cache_v
"""

STUB_STEP = """
def decoder_step(x_t, cache_k, cache_v, memory, self_attn, cross_attn, w_1, b_1, w_2, b_2,
                 num_heads, src_mask=None):
    # YOUR CODE HERE
    raise NotImplementedError()
"""

STUB_GREEDY = """
def greedy_decode_cached(memory, embed, positions, w_out, self_attn, cross_attn, w_1, b_1, w_2,
                         b_2, num_heads, start_id, max_len, cache_k, cache_v, src_mask=None):
    # YOUR CODE HERE
    raise NotImplementedError()
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
    reading = corpus.set_cell(good, "greedy-decode-cached", READING_GREEDY)
    stub_step = corpus.set_cell(good, "decoder-step", STUB_STEP)
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
        # item 4 of grader v6: the stand-in answers the caller's own calls, nothing else
        "g-reads-the-stand-in": (reading, 18, []),
        "h-decodes-nothing": (
            corpus.set_cell(good, "greedy-decode-cached", NOTHING_DECODED),
            18,
            [],
        ),
        "i-both-stubs": (corpus.set_cell(stub_step, "greedy-decode-cached", STUB_GREEDY), 16, []),
        "j-stub-step-reading-caller": (
            corpus.set_cell(reading, "decoder-step", STUB_STEP),
            16,
            [],
        ),
        "k-stub-step-right-caller": (stub_step, 18, []),
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


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_on_a_dask_worker_the_same_scores(graded, course, public_tmp):
    """On a Dask worker started by ``nobody``, the same batch, one submission at a time, gets
    the same scores and reasons (``as_nobody.grade_on_a_dask_worker`` asserts them): the
    sealed tables travel with the job as they do to a local worker."""
    as_nobody.grade_on_a_dask_worker(course, A, public_tmp, _batch(course))


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
    assert "greedy_decode_cached: all 5 hidden cases passed" in cache.message


def test_a_caller_that_reads_the_stand_in_scores_as_one_that_decodes_nothing(graded):
    """Its hidden cases fail (the stand-in answers only its own calls, and it makes none):
    18/20, as its twin that decodes nothing gets; in grader v5 it read the reference caller's
    calls off the stand-in and got 20/20."""
    for student in ("g-reads-the-stand-in", "h-decodes-nothing"):
        result = graded[student]
        assert _cells(result) == {**FULL, "test-cache": 0}, student
        cache = next(t for t in result.tasks if t.grade_id == "test-cache")
        assert "greedy_decode_cached: all 5 public cases passed" not in cache.message
        assert "hidden check failed on 5 of 5 cases" in cache.message, cache.message


def test_two_stubs_cost_two_tasks(graded):
    """Both left as the notebook's stubs, or the callee a stub and the caller one that reads
    the stand-in: the caller's public cases are not counted (its callee fails), and its hidden
    cases fail: two unwritten functions cost two tasks."""
    for student in ("i-both-stubs", "j-stub-step-reading-caller"):
        result = graded[student]
        assert _cells(result) == {**FULL, "test-decoder-step": 0, "test-cache": 0}, student
        cache = next(t for t in result.tasks if t.grade_id == "test-cache")
        assert "Fix decoder_step first" in cache.message


def test_a_stub_callee_costs_its_own_task_when_the_caller_is_right(graded):
    result = graded["k-stub-step-right-caller"]
    assert _cells(result) == {**FULL, "test-decoder-step": 0}
    cache = next(t for t in result.tasks if t.grade_id == "test-cache")
    assert "Fix decoder_step first" in cache.message
    assert "greedy_decode_cached: all 5 hidden cases passed" in cache.message


public_tmp = as_nobody.public_tmp
