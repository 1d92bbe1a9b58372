"""The student's checker: the contract between a student's function and every check (NumPy only).

``make release`` ships this file, and no other of the grader, as ``attention_check.py`` next
to every notebook with ``public_cases.npz``. It holds what a student's offline check needs:
the codec's reader (``value``, ``fresh``, ``load_cases``: a case argument is an array, a
number, a bool, a string, None or a ``Seeded``, stored as a small JSON spec plus an
uncompressed ``.npz``, never pickle), the typed records a check is judged with (``Spec``, a
check's public description; ``Case``), one case runner (``run_case`` -> an ``Outcome``: the
return value as arrays, or an error or bad-return code from fixed vocabularies), one judge
(``assess`` -> a ``Finding``: what is wrong, as a message id and its numbers;
``judge`` -> a ``Verdict`` worded from ``MESSAGES``) and ``check(name, fn)``. The same
``assess`` judges everywhere, so a failure reads the same: in the student's kernel, in the
in-kernel hidden check of stock ``nbgrader autograde`` and in the sandboxed grader, whose
worker runs cases with ``run_case`` and whose trusted side judges the outcomes it sends back.
What only the grader needs never ships: the hidden cases' wording and the grader's own
sentences (``autograder/checking/judging.py``), the frames and the sandbox's decoding
(``autograder/student/frames.py``), the codec's writer (``autograder/checking/casefile.py``).

``MESSAGES`` is the shipped part of the one message catalog (``docs/translating.md``): each
message's English template, with named placeholders; the release puts the catalog of its
edition (the Chinese one from ``locale/zh_CN/LC_MESSAGES/checks/messages.po``) into
``public_cases.npz``, and ``check`` words its messages from that. Every message is built
from fixed strings and numbers computed from the arrays (counts, shapes, indices, the max
error): no text the student's code produced (an exception's message or class name, a type
name) appears in a verdict. Nothing here imports the course, so editing your copy cannot
change a grade.
"""

from __future__ import annotations

import io
import json
import os
import traceback
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

CASES_FILE = "public_cases.npz"
FORMAT_VERSION = 5  # 3: a case may carry its outputs' scale (Expected); 4: the message catalog;
# 5: a derived mistake may be stored as a recipe of the expected outputs (``derived``)

#: the messages the checker words, English (message id -> template with named placeholders)
MESSAGES = {
    "case": "case '{case}': {problem}",
    "hint": " Hint: {hint}",
    "end": ".",
    "because": ": {why}.",
    "not_implemented": "{function} is not implemented yet",
    "raised": "{function} raised {error}{where}",
    "raised_import": "{function} raised ModuleNotFoundError{module}{where}: an import failed, and "
    "{offered}.",
    "offered": "the grader offers only NumPy and Python's standard library (and PyTorch in "
    "the chapters whose notebook imports it)",
    "bad.none": "the returned value is None: did you forget a `return` statement?",
    "bad.empty": "your function returned an empty tuple",
    "bad.not_numeric": "the returned value is not numeric: return NumPy arrays or numbers",
    "bad.complex": "the returned value is complex: return a real array",
    "bad.too_large": "the returned value is far larger than the expected one",
    "arity.one": "expected 1 output, got {got}.",
    "arity.many": "expected {expected} outputs ({names}), got {got}.",
    "shape.axis": "expected {output} of shape {shape}, got a shape that differs at axis "
    "{axis}{because}",
    "shape.axes": "expected {output} of shape {shape}, got a shape that differs at axes {axes} "
    "and {last}{because}",
    "shape.ndim.one": "expected {output} of shape {shape}, got 1 axis instead of {ndim}{because}",
    "shape.ndim.many": "expected {output} of shape {shape}, got {got} axes instead of "
    "{ndim}{because}",
    "why.swapped": "the last two axes look swapped",
    "why.order": "the axes are in a different order",
    "why.missing": "one axis is missing (did you reduce over an axis that should stay, or drop "
    "a batch axis?)",
    "why.extra": "there is one axis too many (did you forget to reduce, or keepdims=True?)",
    "dtype.integer": "expected {output} to be an integer array, got dtype {dtype}.",
    "dtype.int": "expected {output} to be a Python int, got dtype {dtype}: a count is exact, so "
    "compute it with integers (// rather than /) and return int(...).",
    "dtype.bool": "expected {output} to be a boolean array (True = may attend), got dtype {dtype}.",
    "mask": "{output} differs from the expected mask in {count} of {size} entries.",
    "mask.at": "{output} differs from the expected mask in {count} of {size} entries, first "
    "at index {index}.",
    "nonfinite": "{output} contains {what} in {count} of {size} entries.",
    "nonfinite.at": "{output} contains {what} in {count} of {size} entries at index {index}.",
    "values": "{output} is wrong in {count} of {size} entries: max error {error} vs tolerance "
    "{bound}.",
    "values.at": "{output} is wrong in {count} of {size} entries: max error {error} vs "
    "tolerance {bound}; first wrong entry at index {index}.",
    "bound": "atol={atol} + rtol={rtol} * |expected|",
    "bound.scaled": "{allowed} there (atol={atol} times the size of the terms this entry is "
    "computed from, + rtol={rtol} * |expected|)",
    "mistake": "your result matches a known mistake: {hint}",
    "order": "your outputs have the expected shapes in another order: return {names}, in this "
    "order.",
    "tokens.ndim.one": "expected predictions of shape ({rows}, n_out) (one row of token ids "
    "per input sentence), got 1 axis.",
    "tokens.ndim.many": "expected predictions of shape ({rows}, n_out) (one row of token ids "
    "per input sentence), got {got} axes.",
    "tokens.rows": "expected predictions of shape ({rows}, n_out) (one row of token ids per "
    "input sentence), got a different number of rows.",
    "tokens.dtype": "expected integer token ids, got dtype {dtype}: return argmax indices, not "
    "scores.",
    "tokens.exact": "all {total} token sequences are exact",
    "tokens.differ": "{wrong} of {total} token sequences differ from the expected ones, first "
    "in row {row}.",
    "accuracy.pass": "exact-match accuracy {accuracy} ({correct} of {total} sentences), "
    "required {threshold}",
    "accuracy.low": "exact-match accuracy {accuracy} ({correct} of {total} sentences) is below "
    "the required {threshold}.",
    "summary.passed": "{name}: all {total} public cases passed",
    "summary.failed": "{name}: {failed} of {total} public cases failed",
    "summary.more": "... and {more} more",
    "check.stub": "{name} is not implemented yet: replace `raise NotImplementedError()` with "
    "your code.",
    "check.unknown": "there is no public check called '{name}'; known checks: {known}",
    "check.not_callable": "check('{name}', ...) needs your function, got {type}",
    "note.raised": "in case '{case}' your code raised {error}",
    "note.line": " (at line {line}: `{code}`)",
    "note.line_only": " (at line {line})",
    "note.syntax": " (a syntax error at line {line}: `{code}`)",
    "note.syntax_only": " (a syntax error at line {line})",
    "note.offered": "; {offered}",
}


class Finding(NamedTuple):
    """What is wrong with an outcome (or how well it did), before it is worded: a message id
    of ``MESSAGES`` and its parameters, fixed strings and numbers computed from the arrays; a
    parameter may be a ``Finding`` itself (a part of the sentence). The one shape a finding
    has from the judge (``assess``) to the words (``render``), in every place and language."""

    key: str
    params: dict


def render(messages: dict, key: str, **params) -> str:
    """The message ``key`` in the catalog ``messages`` (English where it has no entry), its
    placeholders filled; a parameter that is itself a ``Finding`` (or a ``(key, params)``
    pair) is rendered first."""
    template = messages.get(key) or MESSAGES[key]
    filled = {
        k: render(messages, v[0], **v[1]) if isinstance(v, tuple) else v for k, v in params.items()
    }
    return template.format(**filled)


@dataclass(frozen=True)
class Seeded:
    """A case argument meaning "a fresh ``numpy.random.default_rng(seed)``"."""

    seed: int


# ----------------------------------------------------------------------------------------
# the codec's reader: (JSON spec, arrays) -> case values (its writer, ``autograder/checking/casefile.py``,
# runs only on the trusted side and never ships)


def value(spec: dict, arrays):
    """One case value as stored: an array as read (not a copy), a ``Seeded`` as such."""
    kind = spec["t"]
    if kind == "array":
        return arrays[spec["k"]]
    if kind in ("seeded", "float"):
        return (Seeded if kind == "seeded" else float)(spec["v"])
    if kind in ("int", "bool", "str", "none"):
        return spec.get("v")
    raise ValueError(f"unknown case value kind {kind!r}")


def fresh(stored):
    """A stored case value as a function receives it: an array a copy of its own (a function
    may write into its inputs), a ``Seeded`` a new ``numpy.random.default_rng(seed)``."""
    if isinstance(stored, np.ndarray):
        return np.array(stored)
    if isinstance(stored, Seeded):
        return np.random.default_rng(stored.seed)
    return stored


def unpack(blob: bytes) -> dict:
    """Arrays from a plain ``.npz`` (written by ``autograder.student.frames.pack``), pickle refused."""
    if not blob:
        return {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


class Expected(tuple):
    """The reference's answer for one case: one array per output, and ``scale``: per output,
    None or a non-negative array broadcastable to it, the size of the terms the output is
    computed from (a sum's absolute terms, a softmax's exponents...). A correct float64
    implementation that orders its operations otherwise can differ from the reference by a
    few ulps *of those terms*, not of the result: where terms cancel, that is far more than
    ``rtol * |expected|``. So the absolute tolerance is ``atol * scale`` (``atol`` alone
    where the check declares no scale); see ``tolerance``."""

    def __new__(cls, arrays, scale=None):
        self = super().__new__(cls, arrays)
        self.scale = None if scale is None else tuple(scale)
        return self


def tolerance(exp: np.ndarray, rtol: float, atol: float, scale=None) -> np.ndarray:
    """How far a returned entry may be from ``exp``: ``atol * scale + rtol * |exp|`` (scale
    1 where none is declared; a non-finite expected entry must be matched exactly). The one
    bound of every comparison: the student's checker, the hidden check, the grader."""
    absolute = atol if scale is None else atol * np.asarray(scale, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        exp_f = np.asarray(exp, dtype=np.float64)
        return absolute + rtol * np.abs(np.where(np.isfinite(exp_f), exp_f, 0.0))


@dataclass(frozen=True)
class Case:
    """One case of one check, the one shape a case has from the chapter's plug-in to the report.

    A chapter declares ``Case(name, args, kwargs)``; the trusted side adds what the reference
    answers (``expected``), what the known mistakes return (``mistakes``) and whether it is
    ``hidden`` (``autograder.checking.checks.prepare``); ``public_cases.npz`` stores public ones whole,
    and into the sandbox only ``args`` and ``kwargs`` go, encoded (never the answers).

    args, kwargs: arrays (numeric or boolean), numbers, bools, strings, None or ``Seeded``;
        ``fresh()`` gives them as the function receives them, new on every call.
    expected: the reference's arrays (an ``Expected``, with each output's scale).
    mistakes: ``(hint, outputs)`` of every known mistake that applies to this case.
    """

    name: str  # shown to students: "causal mask", "fully-masked row", "batch of 3"
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expected: Expected | None = None
    mistakes: tuple = ()
    hidden: bool = False

    def fresh(self) -> tuple[list, dict]:
        return [fresh(a) for a in self.args], {k: fresh(v) for k, v in self.kwargs.items()}


@dataclass(frozen=True)
class Verdict:
    """What one case came to, the one shape an outcome has from the judge to the report: its
    check and case names, whether it is hidden, whether it passed and the message (fixed text
    and numbers computed from the arrays; "ok" when it passed)."""

    check: str
    case: str
    hidden: bool
    passed: bool
    message: str = "ok"


@dataclass(frozen=True)
class Spec:
    """A check's public description, the one shape it has from the chapter's plug-in
    (``autograder.checking.checks.spec``) to the judge; JSON only in ``public_cases.npz``
    (``as_json``, ``from_json``).

    name: the graded function's name; outputs: the names of its outputs;
    rtol, atol: the tolerance (``tolerance``);
    hints: ``"kind"`` or ``"output.kind"`` -> text; kinds: arity, shape, transposed, dtype,
        nan, inf, values, or an error class;
    comparator: ``kind`` (``allclose``, ``accuracy``, ``tokens``), ``integer``, and for
        token sequences ``pad``, ``eos``, ``threshold``;
    calls: the graded functions its solution calls (their answers stand in for them).
    """

    name: str
    outputs: tuple = ()
    rtol: float = 0.0
    atol: float = 0.0
    hints: dict = field(default_factory=dict)
    comparator: dict = field(default_factory=dict)
    calls: tuple = ()

    def as_json(self) -> dict:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: dict) -> Spec:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        lists = {k: tuple(known.get(k, ())) for k in ("outputs", "calls")}
        return cls(**{**known, **lists})


def load_cases(path, catalog: dict | None = None) -> dict:
    """Read ``public_cases.npz``: check name -> {"spec": Spec, "cases": [Case]}; ``catalog``, if
    given, receives the release's message catalog (message id -> template, its language's)."""
    arrays = unpack(open(path, "rb").read())
    meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: format version {meta.get('version')}, not {FORMAT_VERSION}")
    if catalog is not None:
        catalog.update(meta.get("messages") or {})
    out = {}
    for name, entry in meta["checks"].items():
        cases = [_case(c, arrays) for c in entry["cases"]]
        out[name] = {"spec": Spec.from_json(entry["spec"]), "cases": cases}
    return out


def _case(stored: dict, arrays) -> Case:
    """One public case as ``casefile.save_cases`` stored it."""

    def read(specs):
        return tuple(None if s is None else value(s, arrays) for s in specs)

    scale = None if stored["scale"] is None else read(stored["scale"])
    exp = Expected(read(stored["expected"]), scale)
    return Case(
        stored["name"],
        read(stored["args"]),
        {k: value(v, arrays) for k, v in stored["kwargs"].items()},
        exp,
        tuple((m["hint"], _outputs(m, exp, read)) for m in stored["mistakes"]),
    )


class Derived(tuple):
    """The outputs of a mistake derived from the reference (``autograder/checking/
    diagnosis.py``), not declared by hand: named only where every failing case agrees
    (``consistent``)."""


def _outputs(stored: dict, exp: tuple, read) -> tuple:
    made = derived(exp, stored["recipe"]) if "recipe" in stored else read(stored["outputs"])
    return Derived(made) if stored.get("derived") else made


def derived(expected: tuple, recipe) -> tuple:
    """A mistake's outputs made from the expected ones (a systematic mistake of
    ``autograder/checking/diagnosis.py``: an output scaled, negated, transposed, two swapped):
    per output, (the index of the expected output it is made from, a factor or None, whether
    its last two axes are swapped)."""
    out = []
    for i, factor, transposed in recipe:
        made = expected[i] if factor is None else expected[i] * factor
        out.append(np.swapaxes(made, -1, -2) if transposed else made)
    return tuple(out)


# ----------------------------------------------------------------------------------------
# the case runner: a call -> an outcome from fixed vocabularies

#: what an exception is called in every message: the first builtin class it is an instance
#: of, in this order (a student's own class name never appears)
ERRORS = tuple(
    "NotImplementedError RecursionError MemoryError EOFError ZeroDivisionError "
    "FloatingPointError OverflowError IndexError KeyError ValueError TypeError AttributeError "
    "NameError ModuleNotFoundError ImportError SyntaxError AssertionError RuntimeError OSError "
    "SystemExit KeyboardInterrupt Exception".split()
)
#: a returned value that is not numbers: the message ids ``bad.<code>``
BAD_RETURNS = ("none", "empty", "not_numeric", "complex", "too_large")


def error_code(err: BaseException) -> str:
    import builtins

    for name in ERRORS:
        if isinstance(err, getattr(builtins, name)):
            return name
    return "BaseException"


class ReturnProblem(ValueError):
    """A return value that cannot be read as numbers; ``code`` is one of BAD_RETURNS."""

    def __init__(self, code: str):
        super().__init__(MESSAGES[f"bad.{code}"])
        self.code = code


def _to_array(x) -> np.ndarray:
    if x is None:
        raise ReturnProblem("none")
    if hasattr(x, "detach") and hasattr(x, "cpu") and hasattr(x, "numpy"):  # a torch tensor
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except Exception:  # noqa: BLE001 - any failure to convert means "not numbers"
        raise ReturnProblem("not_numeric") from None
    if a.dtype.kind == "c":
        raise ReturnProblem("complex")
    if a.dtype.kind not in "biuf":
        raise ReturnProblem("not_numeric")
    return a


def normalise(value) -> tuple[np.ndarray, ...]:
    """A return value as a tuple of arrays (a tuple or list gives one array per element).
    Raises ReturnProblem (a ValueError) for None, an empty tuple or non-numbers."""
    if isinstance(value, (tuple, list)):
        if len(value) == 0:
            raise ReturnProblem("empty")
        return tuple(_to_array(v) for v in value)
    return (_to_array(value),)


@dataclass(frozen=True, eq=False)
class Outcome:
    """What one call of a student's function came to (``run_case``), the one shape it has up
    to the judge (``assess``): "value" with ``arrays`` (one per output), "error" with ``code``
    (of ``ERRORS``) or "bad" with ``code`` (of ``BAD_RETURNS``). An error keeps ``exception``
    in your own kernel (for ``run_cases``' notes; no message uses it); from the grader's
    sandbox it comes with where it was raised instead: ``at_cell``, ``at_line`` (-1 and 0 for
    none) and a failed import's ``module`` (of a fixed list). Never compared by value."""

    kind: str
    arrays: tuple = ()
    code: str | None = None
    exception: BaseException | None = None
    at_cell: int = -1
    at_line: int = 0
    module: str | None = None


def run_case(fn, args, kwargs) -> Outcome:
    """Call ``fn`` once: its ``Outcome``. A KeyboardInterrupt is the student's Ctrl-C: raised
    on (the sandbox worker makes it an outcome)."""
    try:
        value = fn(*args, **kwargs)
    except BaseException as err:  # noqa: BLE001 - the student's error is an outcome
        if isinstance(err, KeyboardInterrupt):
            raise
        return Outcome("error", code=error_code(err), exception=err)
    try:
        return Outcome("value", normalise(value))
    except ReturnProblem as problem:
        return Outcome("bad", code=problem.code)


# ----------------------------------------------------------------------------------------
# the judge: what is wrong with an outcome, as a message id and its parameters (a ``Finding``,
# a parameter possibly a finding itself), worded by ``render``


def _fmt_index(idx) -> str:
    return "(" + ", ".join(str(int(i)) for i in idx) + ("," if len(idx) == 1 else "") + ")"


def _hint(hints: dict, output: str, kind: str) -> str | None:
    return hints.get(f"{output}.{kind}") or hints.get(kind) or None


def _shape_diagnosis(exp_shape: tuple, got_shape: tuple) -> tuple[str, str | None]:
    """(kind, the id of the explanation or None) for a shape mismatch; kind is 'transposed'
    or 'shape'. The explanation compares the shapes and names no dimension of ``got_shape``."""
    if len(exp_shape) == len(got_shape) >= 2 and got_shape == exp_shape[:-2] + exp_shape[-2:][::-1]:
        return "transposed", "why.swapped"
    if len(exp_shape) == len(got_shape) and sorted(exp_shape) == sorted(got_shape):
        return "transposed", "why.order"
    if any(exp_shape[:i] + exp_shape[i + 1 :] == got_shape for i in range(len(exp_shape))):
        return "shape", "why.missing"
    if any(got_shape[:i] + got_shape[i + 1 :] == exp_shape for i in range(len(got_shape))):
        return "shape", "why.extra"
    return "shape", None


def shape_finding(output: str, exp_shape: tuple, got_shape: tuple) -> tuple[str, tuple]:
    """(kind, finding) for a returned array whose shape is not the expected one: the expected
    shape (the check computed it), how many axes came back or which differ, and a diagnosis
    from a fixed list (``why``), never a returned dimension: a submission could otherwise
    spell its hidden inputs as the shape of an empty array and read them in its feedback."""
    exp_shape, got_shape = tuple(exp_shape), tuple(got_shape)
    kind, why = _shape_diagnosis(exp_shape, got_shape)
    because = Finding("because", {"why": Finding(why, {})}) if why else Finding("end", {})
    params = {"output": output, "shape": str(exp_shape), "because": because}
    if len(got_shape) == len(exp_shape):
        differ = [str(i) for i, (e, g) in enumerate(zip(exp_shape, got_shape)) if e != g]
        if len(differ) == 1:
            return kind, Finding("shape.axis", {**params, "axis": differ[0]})
        return kind, Finding(
            "shape.axes", {**params, "axes": ", ".join(differ[:-1]), "last": differ[-1]}
        )
    key = "shape.ndim.one" if len(got_shape) == 1 else "shape.ndim.many"
    return kind, Finding(key, {**params, "got": len(got_shape), "ndim": len(exp_shape)})


def _located(key: str, params: dict, wrong: np.ndarray, kind: str):
    """(finding, hint kind): the count of wrong entries, and the first one's index if any."""
    params = {**params, "count": int(wrong.sum())}
    if wrong.ndim:
        return Finding(key + ".at", {**params, "index": _fmt_index(np.argwhere(wrong)[0])}), kind
    return Finding(key, params), kind


def _values_finding(output, exp, got, rtol, atol, scale=None):
    """None if ``got`` matches ``exp``, else (what is wrong: counts, indices, the max error;
    the kind of hint it takes)."""
    at = {"output": output, "size": int(got.size)}
    if exp.dtype == bool:
        if got.dtype != bool:
            return Finding("dtype.bool", {"output": output, "dtype": str(got.dtype)}), "dtype"
        return _located("mask", at, exp != got, "values") if (exp != got).any() else None
    exp_f, got_f = exp.astype(np.float64), got.astype(np.float64)
    for what, bad in (
        ("NaN", np.isnan(got_f) & ~np.isnan(exp_f)),
        ("inf", np.isinf(got_f) & ~np.isinf(exp_f)),
    ):
        if bad.any():
            return _located("nonfinite", {**at, "what": what}, bad, what.lower())
    both_nonfinite = ~np.isfinite(exp_f) & (exp_f == got_f)
    with np.errstate(invalid="ignore"):
        err = np.where(both_nonfinite, 0.0, np.abs(got_f - exp_f))
        allowed = np.broadcast_to(tolerance(exp_f, rtol, atol, scale), err.shape)
        over = ~(err <= allowed) & ~both_nonfinite
    if not over.any():
        return None
    worst = np.unravel_index(int(np.argmax(np.where(over, err, -1.0))), err.shape)
    bound = {"atol": f"{atol:g}", "rtol": f"{rtol:g}"}
    if scale is None:
        bound = Finding("bound", bound)
    else:
        bound = Finding("bound.scaled", {**bound, "allowed": f"{float(allowed[worst]):.3g}"})
    at.update(error=f"{float(err[worst]):.3g}", bound=bound, scaled=scale is not None)
    return _located("values", at, over, "values")


def _matches(exp: tuple, got: tuple, rtol: float, atol: float, scales: tuple) -> bool:
    """Every array of ``got`` within ``tolerance`` of ``exp`` (NaN matches NaN, inf itself)."""
    if len(exp) != len(got):
        return False
    for e, g, scale in zip(exp, got, scales):
        if e.shape != g.shape:
            return False
        if e.dtype == bool or g.dtype == bool:
            if not np.array_equal(e, g):
                return False
            continue
        e_f, g_f = e.astype(np.float64), g.astype(np.float64)
        with np.errstate(invalid="ignore"):
            close = (np.abs(g_f - e_f) <= tolerance(e_f, rtol, atol, scale)) | (e_f == g_f)
        if not np.all(close | (np.isnan(e_f) & np.isnan(g_f))):
            return False
    return True


def _token_rows(pred, exp_rows: int):
    """(integer token ids (B, n), None) from a prediction, or (None, the problem's finding)."""
    if pred.ndim != 2 or pred.shape[0] != exp_rows:  # what differs, never a returned dimension
        if pred.ndim == 2:
            return None, Finding("tokens.rows", {"rows": exp_rows})
        key = "tokens.ndim.one" if pred.ndim == 1 else "tokens.ndim.many"
        return None, Finding(key, {"rows": exp_rows, "got": pred.ndim})
    if not np.issubdtype(pred.dtype, np.integer):
        if pred.dtype.kind == "f" and np.all(np.isfinite(pred)) and np.all(pred == np.round(pred)):
            return pred.astype(np.int64), None
        return None, Finding("tokens.dtype", {"dtype": str(pred.dtype)})
    return pred, None


def _sequences(rows, pad: int, eos) -> list:
    """Each row as a list of tokens: padding dropped, cut at the first EOS."""
    out = []
    for row in rows:
        seq = [int(t) for t in row]
        if eos is not None and int(eos) in seq:
            seq = seq[: seq.index(int(eos))]
        out.append([t for t in seq if t != pad])
    return out


def _sequence_finding(spec: Spec, expected: tuple, got: tuple) -> tuple[bool, Finding, str | None]:
    """Exact-match accuracy of token sequences against a threshold ("accuracy"), or exact
    equality of every sequence ("tokens": e.g. the greedy decoding of a given model):
    (passed, finding, hint)."""
    comp, hints = spec.comparator, spec.hints
    pad, eos = int(comp.get("pad", 0)), comp.get("eos")
    pred, problem = _token_rows(got[0], expected[0].shape[0])
    if problem:
        return False, problem, None
    want, have = _sequences(expected[0], pad, eos), _sequences(pred, pad, eos)
    correct = sum(w == h for w, h in zip(want, have))
    if comp["kind"] == "tokens":
        if correct == len(want):
            return True, Finding("tokens.exact", {"total": len(want)}), None
        first = next(i for i, (w, h) in enumerate(zip(want, have)) if w != h)
        found = {"wrong": len(want) - correct, "total": len(want), "row": first}
        return False, Finding("tokens.differ", found), _hint(hints, "tokens", "values")
    threshold = float(comp["threshold"])
    accuracy = correct / max(len(want), 1)
    found = {
        "accuracy": f"{accuracy:.1%}",
        "correct": correct,
        "total": len(want),
        "threshold": f"{threshold:.0%}",
    }
    if accuracy >= threshold:
        return True, Finding("accuracy.pass", found), None
    return False, Finding("accuracy.low", found), _hint(hints, "predictions", "values")


def failure_of(spec: Spec, outcome: Outcome) -> tuple[Finding, str | None] | None:
    """(finding, hint) for an outcome that is not a value (an error or a bad return), else None.
    An error's place (``{module}``, ``{where}``) is left empty: the grader's to fill (``judge``)."""
    function, code = spec.name, outcome.code
    if outcome.kind != "error":
        return (Finding(f"bad.{code}", {}), None) if outcome.kind == "bad" else None
    if code == "NotImplementedError":
        return Finding("not_implemented", {"function": function}), None
    place = {"function": function, "module": "", "where": ""}
    hint = _hint(spec.hints, "", code)
    if code == "ModuleNotFoundError":
        return Finding("raised_import", {**place, "offered": Finding("offered", {})}), hint
    return Finding("raised", {**place, "error": code}), hint


def assess(spec: Spec, case: Case, outcome: Outcome) -> tuple[bool, Finding | None, str | None]:
    """What ``outcome`` (what ``run_case`` returned) comes to against the case's ``expected``
    arrays and known ``mistakes``: (passed, finding, hint). The one judge of every place: the
    student's checker words the finding (``judge``), the grader words a hidden case's with a
    fixed few texts of its own (``autograder/checking/judging.py``).

    spec: the check's public description (``Spec``).
    case.expected: the reference's arrays; an ``Expected`` also carries each output's scale,
        and the absolute tolerance is then ``atol * scale`` (see ``tolerance``).
    outcome: a value's arrays may be shape-only placeholders with ``shape`` and ``dtype``
        when the shapes differ: nothing else of them is read then.
    """
    expected = case.expected if isinstance(case.expected, Expected) else Expected(case.expected)
    failure = failure_of(spec, outcome)
    if failure:
        return False, *failure
    got, hints = tuple(outcome.arrays), spec.hints
    names = list(spec.outputs or ["output"])
    if len(got) != len(expected):
        key = "arity.one" if len(expected) == 1 else "arity.many"
        found = {"expected": len(expected), "names": ", ".join(names), "got": len(got)}
        return False, Finding(key, found), _hint(hints, "", "arity")
    comparator = spec.comparator
    if comparator.get("kind", "allclose") in ("accuracy", "tokens"):
        return _sequence_finding(spec, expected, got)
    shapes, got_shapes = [tuple(e.shape) for e in expected], [tuple(g.shape) for g in got]
    if shapes != got_shapes and sorted(shapes) == sorted(got_shapes) and len(set(shapes)) > 1:
        return False, Finding("order", {"names": ", ".join(names)}), None  # two outputs swapped
    for output, exp, g in zip(names, expected, got):
        if tuple(exp.shape) != tuple(g.shape):
            kind, found = shape_finding(output, exp.shape, g.shape)
            return False, found, _hint(hints, output, kind) or _hint(hints, output, "shape")
    for output, exp, g in zip(names, expected, got) if comparator.get("integer") else ():
        if exp.dtype.kind in "iu" and g.dtype.kind not in "iu":  # integers must stay integers
            key = "dtype.int" if exp.ndim == 0 else "dtype.integer"  # a number: a Python int
            found = Finding(key, {"output": output, "dtype": str(g.dtype)})
            return False, found, _hint(hints, output, "dtype")
    rtol, atol = spec.rtol, spec.atol
    scales = expected.scale or (None,) * len(expected)
    for hint, outputs in case.mistakes:
        # the mistake's outputs stand in for the expected ones: the same bound around them
        if not _matches(tuple(expected), tuple(outputs), rtol, atol, scales) and _matches(
            tuple(outputs), got, rtol, atol, scales
        ):
            return False, Finding("mistake", {"hint": hint}), None
    for output, exp, g, scale in zip(names, expected, got, scales):
        wrong = _values_finding(output, exp, g, rtol, atol, scale)
        if wrong is not None:
            return False, wrong[0], _hint(hints, output, wrong[1])
    return True, None, None


def consistent(spec: Spec, cases: list, outcomes: list) -> list:
    """The cases, each derived mistake (``Derived``) kept only where it may be named: on
    every failing case of its kind (public, hidden) where it applies (its outputs differ from
    the expected ones) and the function returned values, they match it, so a coincidence on
    one case never names it. A hint is the mistake's identity (several may share one). A
    hand mistake is named wherever it matches, unless ``everywhere`` (then it is Derived)."""
    tol, refuted = (spec.rtol, spec.atol), set()
    for case, outcome in zip(cases, outcomes):
        exp, got = tuple(case.expected), tuple(outcome.arrays)
        scales = getattr(case.expected, "scale", None) or (None,) * len(exp)
        if outcome.kind != "value" or _matches(exp, got, *tol, scales):
            continue  # passed, or an error (its own finding): no values to refute anything
        ours = [(h, o) for h, o in case.mistakes if isinstance(o, Derived)]
        for hint in {(h, case.hidden) for h, _ in ours} - refuted:
            ways = [o for h, o in ours if h == hint[0] and not _matches(exp, o, *tol, scales)]
            if ways and not any(_matches(o, got, *tol, scales) for o in ways):
                refuted.add(hint)

    def kept(case):
        return tuple(
            (h, o)
            for h, o in case.mistakes
            if not (isinstance(o, Derived) and (h, case.hidden) in refuted)
        )

    return [replace(c, mistakes=kept(c)) for c in cases]


def worded(messages: dict, case: str, finding: Finding, hint: str | None) -> str:
    """A failing case's message: "case '<name>': " + the finding + the check's hint."""
    text = render(messages, "case", case=case, problem=finding)
    return text + (render(messages, "hint", hint=hint) if hint else "")


def judge(spec: Spec, case: Case, outcome: Outcome, messages=MESSAGES, where=None) -> Verdict:
    """The verdict on one public case, worded from the catalog ``messages`` (counts, indices,
    the returned number of axes, the maximum error); ``where``: an error's ``module`` and
    ``where`` as the grader words them (your own kernel has notes instead, ``run_cases``). A
    hidden case is the grader's to word (``autograder.checking.judging.judge``): it is refused here."""
    if case.hidden:
        raise ValueError("a hidden case is worded by autograder.checking.judging.judge")
    passed, finding, hint = assess(spec, case, outcome)  # a pass may say how well (accuracy)
    if finding and where:
        finding = Finding(finding.key, {**finding.params, **where})
    text = worded(messages, case.name, finding, hint) if finding else "ok"
    return Verdict(spec.name, case.name, False, passed, text)


def summary(name: str, failures: list, total: int, shown=None, messages=MESSAGES) -> str:
    """The head line and the first ``shown`` failing public cases, as every place shows them."""
    if not failures:
        return render(messages, "summary.passed", name=name, total=total)
    head = render(messages, "summary.failed", name=name, failed=len(failures), total=total)
    listed = failures if shown is None else failures[:shown]
    if len(listed) < len(failures):
        listed = listed + [render(messages, "summary.more", more=len(failures) - len(listed))]
    return head + "\n" + "\n".join("  - " + f for f in listed)


# ----------------------------------------------------------------------------------------
# the student's entry point


class CheckFailed(AssertionError):
    """A check did not pass. Jupyter shows only the message (see ``_render_traceback_``)."""

    def _render_traceback_(self):
        # IPython calls this instead of printing a traceback: the lesson, not our insides
        first, *rest = str(self).splitlines() or [""]
        return ["\x1b[31mCheckFailed\x1b[0m: " + first, *rest]


def _installed_dirs() -> tuple[str, ...]:
    """Where installed code lives (the standard library, site-packages): not your code."""
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    dirs |= {site.getusersitepackages()}
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs)


def _yours(filename: str) -> bool:
    """Whether a traceback's file is the student's own code (not installed, not frozen)."""
    installed = os.path.abspath(filename).startswith(_installed_dirs())
    return not installed and not filename.startswith("<frozen")


def _where_raised(err: BaseException, messages: dict) -> str:
    """For your own kernel only: the error's text and the innermost line of *your* code that
    led to it (not NumPy's insides), or, for a syntax error, the line that does not parse."""
    text = f"{type(err).__name__}: {err}"
    if isinstance(err, SyntaxError) and err.lineno:
        code = (err.text or "").strip()
        key = "note.syntax" if code else "note.syntax_only"
        return text + render(messages, key, line=err.lineno, code=code)
    here, tb = os.path.abspath(__file__), traceback.extract_tb(err.__traceback__)
    frames = [f for f in tb if os.path.abspath(f.filename) != here]  # not the checker's own
    frame = ([f for f in frames if _yours(f.filename)] or frames or [None])[-1]
    if frame is not None:
        code = (frame.line or "").strip()
        key = "note.line" if code else "note.line_only"
        text += render(messages, key, line=frame.lineno, code=code)
    if isinstance(err, ModuleNotFoundError):
        text += render(messages, "note.offered", offered=Finding("offered", {}))
    return text


def run_cases(spec: Spec, fn, cases: list[Case], messages=MESSAGES, judge_case=None):
    """Run ``fn`` on every case (fresh arguments each time) until one is not implemented:
    (the verdicts, notes for your own kernel: where a public case's error was raised).
    ``judge_case(spec, case, outcome, messages)``: the grader's judge where cases are hidden
    (``autograder.checking.judging.judge``); this module's ``judge`` otherwise."""
    outcomes = []
    for case in cases:
        outcomes.append(run_case(fn, *case.fresh()))
        if outcomes[-1].code == "NotImplementedError":
            break
    verdicts, notes = [], []
    for case, outcome in zip(consistent(spec, cases[: len(outcomes)], outcomes), outcomes):
        verdicts.append((judge_case or judge)(spec, case, outcome, messages))
        error = outcome.code if outcome.kind == "error" else None
        if error and error != "NotImplementedError" and not case.hidden:
            where = _where_raised(outcome.exception, messages)
            notes.append(render(messages, "note.raised", case=case.name, error=where))
    return verdicts, notes


_CACHE: dict = {}


def check(name: str, fn, cases_path: str | None = None) -> None:
    """Run ``fn`` on every public case of the check ``name``: prints one line on success,
    else raises ``CheckFailed`` listing every failing case. ``fn`` gets fresh inputs."""
    __tracebackhide__ = True
    path = cases_path or os.path.join(os.path.dirname(os.path.abspath(__file__)), CASES_FILE)
    if not os.path.exists(path):  # no catalog without the file: both editions' words
        missing = (
            f"cannot find / 找不到 {path}: keep the released folder together / 请保持文件夹完整"
        )
        raise CheckFailed(missing) from None
    if path not in _CACHE:
        messages: dict = {}
        _CACHE[path] = (load_cases(path, messages), messages)
    checks, messages = _CACHE[path]
    if name not in checks:
        known = render(messages, "check.unknown", name=name, known=", ".join(sorted(checks)))
        raise CheckFailed(known) from None
    if not callable(fn):
        found = type(fn).__name__
        raise CheckFailed(render(messages, "check.not_callable", name=name, type=found)) from None
    spec, cases = checks[name]["spec"], checks[name]["cases"]
    verdicts, notes = run_cases(spec, fn, cases, messages)
    failures = [v.message for v in verdicts if not v.passed]
    stub = render(messages, "not_implemented", function=spec.name)
    if failures and failures[0].endswith(stub):
        raise CheckFailed(render(messages, "check.stub", name=name)) from None
    if failures:
        text = summary(name, failures, len(cases), messages=messages)
        raise CheckFailed(text + "".join("\n" + n for n in notes)) from None
    print(summary(name, [], len(cases), messages=messages))
