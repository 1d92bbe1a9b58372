"""The hidden cases cover every shape a task's statement documents (issue 45, item 2).

A task's shapes are declared in one place: the docstring of the stub the released notebook
shows (``autograder/source/<id>/<id>.ipynb``), one declaration per argument, e.g.
``x_query: (n_q,) or (n_q, d)`` or ``mask: boolean, broadcastable to (..., n_q, n_k)``. This
test reads those declarations (``declarations``), binds each named axis to its length in every
hidden case of one batch seed, and requires, per check:

- every documented alternative of an argument's shape occurs (``(n_q,)`` and ``(n_q, d)``);
- every named axis that may be 1 is 1 in some case (n_q = 1, a single key, (n, 1) points,
  (n_k, 1) targets, d = 1...): an axis may not be 1 only where the docstring bounds it
  (``n >= 2``) or where it is a number or a sum (``4``, ``t + 1``);
- an argument declared "broadcastable" is, in some case, of another shape than the full one
  (fewer leading axes, or an axis of length 1 that broadcasts): batch broadcasting occurs.

So a function that squeezes a length-1 axis, or handles only the full-shape mask, loses
points on some hidden case (``np.squeeze`` on ``nadaraya_watson_query_grad``:
``tests/test_diagnosis.py``).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

import autograder.chapters  # noqa: F401 - registers the chapters
from autograder.checking import assignment_text, checks
from autograder.grading import check_data

SOURCE = Path(__file__).resolve().parents[1] / "autograder" / "source"
#: the hidden cases of this batch seed and student are read (any would do: the cases that make
#: an axis 1 are fixed cases of each generator, not a chance of the seed)
BATCH_SEED, STUDENT = 2026, "a-student"

#: a declaration: one or more parameter names, a colon, then its text up to the next ";",
#: line or declaration
NAMES = re.compile(r"(?<![\w.])(\w+(?:,\s*\w+)*):\s")
TUPLE = re.compile(r"\(([^()]*)\)")
BOUND = re.compile(r"\b(\w+)\s*>=\s*(\d+)")
INHERITED = re.compile(r"Arguments as (\w+)")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*\Z")
#: an axis: "...", a name, a number or a sum or product of them ("t0 + max_len")
AXIS = re.compile(r"(\.\.\.|\w+(\s*[-+*]\s*\w+)*)\Z")
RETURNS = re.compile(r"\b[Rr]eturns\b")


def _notebook(assignment: str) -> dict:
    return json.loads((SOURCE / assignment / f"{assignment}.ipynb").read_text())


def functions(assignment: str, stub: bool = True) -> dict[str, ast.FunctionDef]:
    """The functions of the source notebook's solution cells (what the stubs show), by name;
    ``stub=False``: those of the given (locked, ungraded) code cells."""
    found = {}
    for cell in _notebook(assignment)["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        given = cell["cell_type"] == "code" and not meta.get("solution") and not meta.get("grade")
        if not (assignment_text.is_stub_cell(cell) if stub else given):
            continue
        for node in ast.parse("".join(cell["source"])).body:
            if isinstance(node, ast.FunctionDef):
                found[node.name] = node
    return found


def stubs(assignment: str) -> dict[str, ast.FunctionDef]:
    return functions(assignment)


def _shape(text: str) -> tuple[str, ...] | None:
    """The axes of a tuple of the docstring, or None if it is prose in parentheses (a tuple of
    one name needs its comma: "(n,)")."""
    axes = tuple(a.strip() for a in text.split(",") if a.strip())
    if not axes or not all(AXIS.match(a) for a in axes):
        return None
    if len(axes) == 1 and axes != ("...",) and not text.rstrip().endswith(","):
        return None
    return axes


def declarations(assignment: str, name: str) -> tuple[dict, dict]:
    """({parameter: {"shapes": [axes...], "broadcastable": bool}}, {axis: its lower bound})
    from the stub's docstring; "Arguments as f" takes f's declarations first."""
    functions = stubs(assignment)
    node = functions[name]
    params = {a.arg for a in node.args.args + node.args.kwonlyargs}
    doc = ast.get_docstring(node) or ""
    found, bounds = {}, {}
    inherited = INHERITED.search(doc)
    if inherited:
        found, bounds = declarations(assignment, inherited.group(1))
        found = {k: v for k, v in found.items() if k in params}
    for line in doc.splitlines():
        line = RETURNS.split(line)[0]  # what is returned is not an argument
        starts = list(NAMES.finditer(line))
        for i, match in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(line)
            text = line[match.end() : end].split(";")[0].split("->")[0]
            shapes = [s for s in map(_shape, TUPLE.findall(text)) if s]
            for param in (n.strip() for n in match.group(1).split(",")):
                if param in params and shapes:
                    found[param] = {"shapes": shapes, "broadcastable": "broadcastable" in text}
    for axis, low in BOUND.findall(doc):
        bounds[axis] = int(low)
    return found, bounds


def _fits(shape: tuple, axes: tuple) -> bool:
    """Whether an array's shape has the declared axes ("..." any number of leading axes)."""
    if axes and axes[0] == "...":
        return len(shape) >= len(axes) - 1
    return len(shape) == len(axes)


def _bind(shape: tuple, axes: tuple) -> dict:
    """{axis name: length} of an array of ``shape`` declared as ``axes``."""
    named = axes[1:] if axes and axes[0] == "..." else axes
    tail = shape[len(shape) - len(named) :]
    return {a: int(s) for a, s in zip(named, tail) if IDENTIFIER.match(a)}


def _argument_values(called: ast.FunctionDef, case) -> dict:
    """The case's arguments by the names of the function the check calls on them."""
    params = [a.arg for a in called.args.args + called.args.kwonlyargs]
    values = dict(zip(params, case.args))
    values.update(case.kwargs)
    return values


def coverage(assignment: str, function: str, cases) -> list[str]:
    """What the cases ((check name, case) pairs) leave uncovered of the shapes the stub of
    ``function`` documents (empty: all covered)."""
    declared, bounds = declarations(assignment, function)
    used = {p: set() for p in declared}  # parameter -> the alternatives used
    lengths: dict = {}  # axis -> the lengths it took
    broadcast = {p: False for p, d in declared.items() if d["broadcastable"]}
    for called, case in cases:
        values = _argument_values(called, case)
        bound: dict = {}
        for param, decl in declared.items():
            value = values.get(param)
            if not isinstance(value, np.ndarray):
                continue
            fitting = [i for i, axes in enumerate(decl["shapes"]) if _fits(value.shape, axes)]
            if decl["broadcastable"]:
                continue
            # the first alternative that fits; an exact rank match wins over "..."
            exact = [i for i in fitting if decl["shapes"][i][:1] != ("...",)]
            if fitting:
                i = (exact or fitting)[0]
                used[param].add(i)
                for axis, size in _bind(value.shape, decl["shapes"][i]).items():
                    bound.setdefault(axis, size)
        for axis, size in bound.items():
            lengths.setdefault(axis, set()).add(size)
        for param in broadcast:
            value = values.get(param)
            if not isinstance(value, np.ndarray):
                continue
            axes = declared[param]["shapes"][0]
            named = axes[1:] if axes[:1] == ("...",) else axes
            full = [bound.get(a) for a in named]
            tail = value.shape[len(value.shape) - len(named) :] if value.ndim >= len(named) else ()
            lead = max(
                (
                    len(values[p].shape)
                    for p in declared
                    if p not in broadcast and isinstance(values.get(p), np.ndarray)
                ),
                default=0,
            )
            fewer = value.ndim < len(named) or (axes[:1] == ("...",) and value.ndim < lead)
            ones = any(s == 1 and f is not None and f > 1 for s, f in zip(tail, full))
            broadcast[param] |= fewer or ones
    gaps = []
    for param, decl in declared.items():
        if decl["broadcastable"]:
            continue
        for i, axes in enumerate(decl["shapes"]):
            if i not in used[param]:
                gaps.append(f"{param} of shape ({', '.join(axes)}) never occurs")
    for axis, sizes in sorted(lengths.items()):
        if bounds.get(axis, 1) <= 1 and 1 not in sizes:
            gaps.append(f"the axis {axis} is never 1 (lengths {sorted(sizes)})")
    gaps += [f"{p} never broadcasts" for p, seen in broadcast.items() if not seen]
    return gaps


#: axes that the statement's prose bounds (not the docstring): the words of the statement
#: that bound it, which the test finds in the source notebook
PROSE_BOUNDS = {
    ("ch6_transformer", "label_smoothed_cross_entropy"): {
        "V": "uniform part over the $V-1$ words\nother than the pad token",  # V >= 2
    },
}
#: axes left at more than 1, and why (issue 45's report lists them)
LAYER_NORM_OF_ONE = (
    "a layer norm over one feature is 0 whatever its input: the layer's output is then the "
    "same for a right and a wrong layer, so such a case tells nothing apart "
    "(tests/test_answers_ch6_transformer.py, tests/test_grader_callees.py)"
)
NOT_ONE = {
    ("ch6_transformer", "greedy_decode_cached"): {"d": LAYER_NORM_OF_ONE},
    ("ch6_transformer", "decoder_step"): {"d": LAYER_NORM_OF_ONE},
    ("ch6_transformer", "decoder_block"): {
        "d": LAYER_NORM_OF_ONE,
        "n_src": "with one source word cross-attention's weights are 1 whatever the scores: a "
        "block on a cross-attention that forgot its scaling would pass such a case "
        "(tests/test_answers_ch6_transformer.py)",
        "n_tgt": "one target row broadcasts against the (n_src, d) rows of a block whose "
        "queries come from memory: that known mistake would get a shape, not its hint "
        "(tests/test_answers_ch6_transformer.py names it on every case)",
    },
    ("ch6_transformer", "teacher_forced_loss"): {
        "V": "the reference (solutions/transformer.py) computes the loss through label "
        "smoothing's eps / (V - 1): it divides by zero for a vocabulary of one word",
    },
}

CALL = re.compile(r"""\bcheck\(\s*["'](\w+)["']\s*,\s*(\w+)\s*\)""")


def _calls(node: ast.FunctionDef) -> set[str]:
    return {
        c.func.id
        for c in ast.walk(node)
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
    }


def checked_functions(assignment: str) -> dict[str, list[tuple[str, str]]]:
    """{stub function: (check, the function the check calls)} of its test cells: the stub
    itself, or a given function that calls it (``translate_given_model`` calls
    ``translate``)."""
    stub, given = functions(assignment), functions(assignment, stub=False)
    found: dict = {}
    for cell in _notebook(assignment)["cells"]:
        if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader", {}).get("grade"):
            for check, called in CALL.findall("".join(cell["source"])):
                if called in stub:
                    found.setdefault(called, []).append((check, called))
                elif called in given:
                    for function in _calls(given[called]) & set(stub):
                        found.setdefault(function, []).append((check, called))
    return found


def _functions():
    return [
        (assignment, function, tuple(pairs))
        for assignment in checks.ASSIGNMENTS
        for function, pairs in checked_functions(assignment).items()
    ]


@pytest.mark.parametrize(("assignment", "function", "pairs"), _functions())
def test_hidden_cases_cover_every_documented_shape(assignment, function, pairs):
    """Over the hidden cases of every check of the function (one seed), what its docstring
    documents occurs: every alternative shape, every axis of length 1 it allows, a mask that
    broadcasts."""
    seed = check_data.hidden_seed(BATCH_SEED, STUDENT)
    every = {**functions(assignment), **functions(assignment, stub=False)}
    cases = [
        (every[called], case)
        for check, called in pairs
        for case in checks.hidden_cases(check, seed)
    ]
    exempt = {**PROSE_BOUNDS.get((assignment, function), {})}
    exempt.update(NOT_ONE.get((assignment, function), {}))
    gaps = coverage(assignment, function, cases)
    assert [g for g in gaps if not any(f"axis {a} is never 1" in g for a in exempt)] == []


def test_the_prose_bounds_are_the_statements():
    for (assignment, _function), bounds in PROSE_BOUNDS.items():
        text = "".join(
            "".join(c["source"])
            for c in _notebook(assignment)["cells"]
            if c["cell_type"] == "markdown"
        )
        for axis, words in bounds.items():
            assert words in text, (assignment, axis, words)


def test_the_declarations_are_read():
    """The reader finds what a docstring declares (a check of the test itself)."""
    declared, bounds = declarations("ch1_pooling", "loo_loss_and_grad_ard")
    assert declared["y"]["shapes"] == [("n",), ("n", "d_y")]
    assert declared["bandwidths"]["shapes"] == [("d",)] and bounds == {"n": 2}
    declared, _ = declarations("ch5_multihead", "multihead_backward")  # "Arguments as ..."
    assert declared["x_kv"]["shapes"] == [("...", "n_kv", "d_kv")]
    assert declared["mask"]["broadcastable"] and declared["grad_out"]["shapes"]
    declared, _ = declarations("ch6_transformer", "decoder_step")  # "Returns" cut off
    assert declared["cache_k"]["shapes"] == [("B", "t", "d")]
