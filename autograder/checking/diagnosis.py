"""Diagnosis that generalises: the systematic mistakes of a check, derived from its reference.

A check's hand-written ``Mistake`` list names what its author foresaw. This module names what
no one listed: for every case, the outputs of a fixed family of *transformations* of the
reference computation, each a mistake a student makes without thinking of it:

- an input transformed before the reference sees it: an array argument transposed (its last
  two axes swapped), negated, multiplied or divided by sqrt(d) (d: the length of its last
  axis), replaced by its square or its square root (a positive scale such as a bandwidth);
  a boolean mask dropped or inverted; an integer argument one more or one less; a boolean
  flag flipped; every array computed along the other of its last two axes;
- an output transformed after it: multiplied by d, 1/d, sqrt(d) or 1/sqrt(d) (d: the length
  of an argument's last axis: a scale applied or dropped), by n or 1/n (n: the length of
  another axis: a sum where a mean is due, or the reverse), by x, 1/x, sqrt(x) or 1/sqrt(x)
  (x: a positive number argument, a bandwidth or a width), by 2 or 1/2, or by -1 (a sign);
  all outputs at once or one of several; two outputs of the same shape swapped; an output
  with its last two axes swapped. (Outputs of the expected shapes in another order are the
  judge's own finding, ``order``; a squeezed or kept axis its shape diagnosis.)

The output changes come first (the simplest explanation speaks when two coincide).

Each yields outputs that go into ``Case.mistakes`` beside the hand-written ones
(``checks.mistake_outputs``), with a hint worded from a fixed template of the message
catalog (``diagnosis.*`` in ``messages.GRADER``, translated in ``messages.po``) that names the
transformation with the check's own argument and output names, never a number of the case:
the same transformation has the same hint on every case, public or hidden. So ``contract.
assess`` names it as it names a known mistake, with the same guard: on a case where its
outputs are the reference's (a degenerate case: one key, a symmetric matrix), it names
nothing there. A hand-written mistake whose outputs a transformation repeats speaks first,
and a transformation repeating an earlier one is withdrawn from that case.

"On every failing case": whether a derived hint may be named at all is decided over a
check's cases by ``contract.consistent`` (it ships: the student's checker, the in-kernel
hidden check and the grader apply it alike, each after running every case of the check): a
derived mistake (its outputs a ``contract.Derived``) is kept only if, on every case where it
applies (its outputs differ from the reference's) and the function returned values that
fail, those values match it. The hint is its identity (a hidden case's kind sentence may
stand for several). Public and hidden cases are decided apart, so a hidden case can never
change a public message; an error is its own finding and refutes nothing. This is the
simplest shape that needs no per-check precomputation: the judge stays per case (``assess``
unchanged), and the rule only removes a derived mistake from the cases it would mislead on.
A mistake declared by hand keeps its author's scope: named wherever it matches, unless its
author declared it ``everywhere`` (``checks.Mistake``: one that coincides with another on a
degenerate case), when its outputs are a ``contract.Derived`` and the same rule applies.

A hidden case names a derived mistake by its kind alone (``KIND``: seven fixed sentences,
``diagnosis.kind.*``), so a hidden case says at most seven more things than before
(docs/threat-model.md, "Judging and feedback": at most 64); a public case names it in full.
An output change is stored as a recipe of the expected outputs (``casefile.Recipe``,
``contract.derived``), not as arrays.

Trusted side only: it calls the reference.
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np

from autograder.checking import casefile, messages
from autograder.student import contract
from autograder.student.contract import Case, normalise

__all__ = ["transformations", "translated", "TEMPLATES"]

#: the transformations' message ids; their English templates are ``messages.GRADER``'s
TEMPLATES = (
    "diagnosis.transposed",
    "diagnosis.negated",
    "diagnosis.scaled",
    "diagnosis.power",
    "diagnosis.mask_dropped",
    "diagnosis.mask_inverted",
    "diagnosis.shifted",
    "diagnosis.flag",
    "diagnosis.other_axis",
    "diagnosis.output_scaled",
    "diagnosis.outputs_scaled",
    "diagnosis.output_negated",
    "diagnosis.outputs_negated",
    "diagnosis.swapped",
    "diagnosis.output_transposed",
)
#: what a hidden case says of a transformation: its kind alone, one of a fixed few sentences
#: (``diagnosis.kind.*``), so that the derived mistakes add at most that many hidden messages
#: (docs/threat-model.md, "Judging and feedback": a hidden case says at most 64 things)
KIND = {
    "diagnosis.transposed": "transposed",
    "diagnosis.output_transposed": "transposed",
    "diagnosis.negated": "sign",
    "diagnosis.outputs_negated": "sign",
    "diagnosis.output_negated": "sign",
    "diagnosis.scaled": "scale",
    "diagnosis.power": "scale",
    "diagnosis.outputs_scaled": "scale",
    "diagnosis.output_scaled": "scale",
    "diagnosis.mask_dropped": "mask",
    "diagnosis.mask_inverted": "mask",
    "diagnosis.shifted": "shift",
    "diagnosis.flag": "shift",
    "diagnosis.other_axis": "axis",
    "diagnosis.swapped": "swapped",
}
#: a parameter that may be a message itself: its possible message ids (else a plain word)
NESTED = {
    "factor": (
        "diagnosis.factor.last",
        "diagnosis.factor.other",
        "diagnosis.factor.value",
    ),
    "power": ("diagnosis.power.square", "diagnosis.power.square_root"),
}
#: the most outputs a check may have for the per-output transformations (a pair per output)
MAX_OUTPUTS = 6


def _signature(reference):
    fn = reference.resolve() if hasattr(reference, "resolve") else reference
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _named_args(reference, case: Case) -> list[tuple[str, str | int, object, object]]:
    """(name, where: a position or a keyword, value, the parameter's default) per argument."""
    params = list(_signature(reference).values())
    out = []
    for i, a in enumerate(case.args):
        p = params[i] if i < len(params) else None
        out.append((p.name if p else f"argument {i + 1}", i, a, p.default if p else None))
    for k, a in case.kwargs.items():
        p = _signature(reference).get(k)
        out.append((k, k, a, p.default if p is not None else None))
    return out


def _with(case: Case, where, new) -> Case:
    args, kwargs = list(case.args), dict(case.kwargs)
    if isinstance(where, int):
        args[where] = new
    else:
        kwargs[where] = new
    return Case(case.name, tuple(args), kwargs)


def _is_float(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _input_changes(reference, case: Case):
    """(message id, params, the case with one input changed) of every input transformation."""
    named = _named_args(reference, case)
    for name, where, a, default in named:
        if isinstance(a, np.ndarray) and a.ndim >= 2 and a.dtype.kind in "fb":
            yield "diagnosis.transposed", {"arg": name}, _with(case, where, np.swapaxes(a, -1, -2))
        if _is_float(a) and a.size:
            yield "diagnosis.negated", {"arg": name}, _with(case, where, -a)
            root = math.sqrt(a.shape[-1]) if a.ndim else None
            if root and root != 1:
                for factor, value in (("√d", root), ("1/√d", 1 / root)):
                    yield (
                        "diagnosis.scaled",
                        {"arg": name, "factor": factor},
                        _with(case, where, a * value),
                    )
            if a.ndim <= 1 and np.all(a > 0):
                for power, value in (("square", a * a), ("square_root", np.sqrt(a))):
                    found = {"arg": name, "power": (f"diagnosis.power.{power}", {})}
                    yield "diagnosis.power", found, _with(case, where, value)
        if isinstance(a, float) and a > 0 and a != 1:
            for power, value in (("square", a * a), ("square_root", math.sqrt(a))):
                found = {"arg": name, "power": (f"diagnosis.power.{power}", {})}
                yield "diagnosis.power", found, _with(case, where, value)
        if isinstance(a, np.ndarray) and a.dtype == bool and a.size:
            dropped = None if default is None else np.ones_like(a)
            yield "diagnosis.mask_dropped", {"arg": name}, _with(case, where, dropped)
            yield "diagnosis.mask_inverted", {"arg": name}, _with(case, where, ~a)
        if isinstance(a, bool):
            yield "diagnosis.flag", {"arg": name}, _with(case, where, not a)
        elif isinstance(a, int) or (isinstance(a, np.ndarray) and a.dtype.kind in "iu" and a.size):
            for step in ("+1", "-1"):
                yield (
                    "diagnosis.shifted",
                    {"arg": name, "step": step},
                    _with(case, where, a + int(step)),
                )
    arrays = [(w, a) for _, w, a, _ in named if isinstance(a, np.ndarray) and a.ndim >= 2]
    if arrays:
        swapped = case
        for where, a in arrays:
            swapped = _with(swapped, where, np.swapaxes(a, -1, -2))
        yield "diagnosis.other_axis", {}, swapped


def _sizes(reference, case: Case) -> list[tuple[str, str, int]]:
    """(kind: "d" for a last axis, "n" for another; the argument's name; the length) of every
    array argument, each of its lengths once, last axes first: a factor keeps its name on
    every case, whatever other argument has the same length there."""
    out = []
    arrays = [(n, a) for n, _, a, _ in _named_args(reference, case) if isinstance(a, np.ndarray)]
    for name, a in arrays:
        if a.ndim and a.shape[-1] > 1:
            out.append(("d", name, int(a.shape[-1])))
    for name, a in [(n, a) for n, a in arrays if a.ndim]:
        others = {int(s) for s in a.shape[:-1] if s > 1} - {int(a.shape[-1])}
        out += [("n", name, size) for size in sorted(others)]
    return out


def _output_changes(reference, case: Case, names: tuple, expected: tuple):
    """(message id, params, outputs) of every output transformation."""
    floats = [e.dtype.kind == "f" for e in expected]
    factors = [("2", 2.0), ("1/2", 0.5)]  # a factor in a word of its own
    for kind, arg, size in _sizes(reference, case):
        pairs = [(kind, size), (f"1/{kind}", 1 / size)]
        if kind == "d":
            pairs += [(f"√{kind}", math.sqrt(size)), (f"1/√{kind}", 1 / math.sqrt(size))]
        which = "diagnosis.factor.last" if kind == "d" else "diagnosis.factor.other"
        factors += [((which, {"factor": label, "arg": arg}), value) for label, value in pairs]
    for name, _, a, _ in _named_args(reference, case):
        if isinstance(a, (int, float)) and not isinstance(a, bool) and a > 0 and a != 1:
            pairs = [("x", a), ("1/x", 1 / a), ("√x", math.sqrt(a)), ("1/√x", 1 / math.sqrt(a))]
            which = "diagnosis.factor.value"
            factors += [((which, {"factor": label, "arg": name}), value) for label, value in pairs]
    several = 1 < len(expected) <= MAX_OUTPUTS
    same = [(i, None, False) for i in range(len(expected))]

    def made(changes: dict) -> casefile.Recipe:
        return casefile.Recipe(expected, [changes.get(i, r) for i, r in enumerate(same)])

    for factor, value in factors:
        if all(floats):
            found = {"factor": factor}
            yield (
                "diagnosis.outputs_scaled",
                found,
                made({i: (i, value, False) for i in range(len(expected))}),
            )
        for i, name in enumerate(names if several else ()):
            if floats[i]:
                found = {"output": name, "factor": factor}
                yield "diagnosis.output_scaled", found, made({i: (i, value, False)})
    if all(floats):
        negated = {i: (i, -1.0, False) for i in range(len(expected))}
        yield "diagnosis.outputs_negated", {}, made(negated)
    for i, name in enumerate(names if several else ()):
        if floats[i]:
            yield "diagnosis.output_negated", {"output": name}, made({i: (i, -1.0, False)})
    for i, first in enumerate(names):
        for j in range(i + 1, len(expected)):
            if expected[i].shape == expected[j].shape and expected[i].dtype == expected[j].dtype:
                swapped = {i: (j, None, False), j: (i, None, False)}
                yield "diagnosis.swapped", {"first": first, "second": names[j]}, made(swapped)
    for i, name in enumerate(names):
        e = expected[i]
        if e.ndim >= 2 and e.shape[-1] == e.shape[-2]:
            yield "diagnosis.output_transposed", {"output": name}, made({i: (i, None, True)})


def hint(key: str, params: dict, language: str = messages.ENGLISH) -> str:
    """A transformation's hint in ``language``: its template, its names filled in (a
    parameter in ``NESTED`` is a (message id, params) pair, worded first)."""
    return messages.say(language, key, **params)


def transformations(
    check, case: Case, expected: tuple, language: str = messages.ENGLISH, hidden: bool = False
) -> list[tuple[str, tuple[np.ndarray, ...]]]:
    """(hint, outputs) of every transformation of the reference that applies to ``case`` (its
    arguments as stored; ``expected``: the reference's outputs), in the family's order; for a
    ``hidden`` case the hint says the transformation's kind alone (``KIND``). Not
    deduplicated: ``checks.mistake_outputs`` withdraws what an earlier mistake repeats and
    what the reference itself returns."""

    def hint(key, params, language):
        if hidden:
            return messages.say(language, f"diagnosis.kind.{KIND[key]}")
        return messages.say(language, key, **params)

    if check.comparator.get("kind", "allclose") != "allclose":
        return []
    expected = tuple(np.asarray(e) for e in expected)
    names = tuple(check.outputs) if len(check.outputs) == len(expected) else ()
    names = names or tuple(f"output {i + 1}" for i in range(len(expected)))
    out = []
    with np.errstate(all="ignore"):  # the simplest explanations first: an output changed
        for key, params, outputs in _output_changes(check.reference, case, names, expected):
            out.append((hint(key, params, language), outputs))
    # the answer for the changed inputs: the check's own (``Check.answer``: a function of the
    # case, the reference's result computed another way) where it has one, else the reference
    for key, params, changed in _input_changes(check.reference, case):
        try:
            with np.errstate(all="ignore"):
                outputs = normalise(
                    check.answer(changed) if check.answer else _call(check.reference, changed)
                )
        except Exception:  # noqa: BLE001 - the reference refuses such input: no meaning here
            continue
        if len(outputs) == len(expected) and all(
            o.shape == e.shape for o, e in zip(outputs, expected)
        ):
            out.append((hint(key, params, language), contract.Derived(outputs)))
    return out


def _call(reference, case: Case):
    args, kwargs = casefile.as_stored(case).fresh()
    return reference(*args, **kwargs)


# ----------------------------------------------------------------------------------------
# a hint in another language: the grader prepares its cases once, in English, and words a
# submission's feedback in its notebook's language (``checks.localised``)


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"(\{[a-z_]+\})", template)
    body = "".join(
        f"(?P<{p[1:-1]}>.+?)" if p.startswith("{") and p.endswith("}") else re.escape(p)
        for p in parts
    )
    return re.compile(body + r"\Z")


def _parse(text: str) -> tuple[str, dict] | None:
    """(message id, params) of an English diagnosis hint, or None if it is not one."""
    english = messages.catalog(messages.ENGLISH)
    for key in TEMPLATES:
        found = _pattern(english[key]).match(text)
        if not found:
            continue
        params = dict(found.groupdict())
        for name, choices in NESTED.items():
            if name not in params:
                continue
            for inner in choices:
                matched = _pattern(english[inner]).match(params[name])
                if matched:
                    params[name] = (inner, dict(matched.groupdict()))
                    break
        if hint(key, params) == text:
            return key, params
    return None


def translated(text: str, language: str) -> str | None:
    """An English diagnosis hint in ``language``, or None if ``text`` is not one."""
    english = messages.catalog(messages.ENGLISH)
    for kind in sorted(set(KIND.values())):
        if english[f"diagnosis.kind.{kind}"] == text:
            return messages.say(language, f"diagnosis.kind.{kind}")
    parsed = _parse(text)
    return None if parsed is None else hint(*parsed, language)
