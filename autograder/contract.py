"""The student's checker: the contract between a student's function and every check (NumPy only).

``make release`` ships this file, and no other of the grader, as ``attention_check.py`` next
to every notebook with ``public_cases.npz``. It holds what a student's offline check needs:
the codec's reader (``value``, ``fresh``, ``decode``, ``load_cases``: a case argument is an
array, a number, a bool, a string, None or a ``Seeded``, stored as a small JSON spec plus an
uncompressed ``.npz``, never pickle), one typed ``Case``, one case runner (``run_case`` -> an
*outcome*: the return value as arrays, or an error or bad-return code from fixed
vocabularies), one judge (``judge`` -> a ``Verdict``) with its messages (``summary``), and
``check(name, fn)``. The same code judges everywhere, so a failure reads the same: in the
in-kernel hidden check of stock ``nbgrader autograde`` (``autograder.checks.run_hidden``) and
in the sandboxed grader, whose worker (``autograder/zygote.py``, bound into the sandbox beside
this file, never shipped) runs cases with ``run_case`` and sends outcomes back in frames
(``autograder/frames.py``), which the trusted side parses (``autograder.wire``) and judges.
The codec's writer (``autograder/casefile.py``) and the registry never ship.

Every message is built from fixed strings and numbers computed from the arrays: for a public
case counts, shapes, indices, the max error; for a hidden case one of a fixed few texts (the
function held its hidden inputs: a number computed from what it returned could carry them
out). No text the student's code produced (an exception's message or class name, a type
name) ever appears in a message. Nothing here imports the course, so editing your copy
cannot change a grade.
"""

from __future__ import annotations

import io
import json
import os
import traceback
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "check",
    "CheckFailed",
    "Case",
    "Verdict",
    "Seeded",
    "normalise",
    "run_case",
    "judge",
    "Expected",
    "tolerance",
    "summary",
    "load_cases",
    "decode",
]

CASES_FILE = "public_cases.npz"
FORMAT_VERSION = 3  # 3: a case may carry its outputs' scale (Expected)


@dataclass(frozen=True)
class Seeded:
    """A case argument meaning "a fresh ``numpy.random.default_rng(seed)``"."""

    seed: int

    def __post_init__(self):
        object.__setattr__(self, "seed", int(self.seed))


# ----------------------------------------------------------------------------------------
# the codec's reader: (JSON spec, arrays) -> case values (its writer, ``autograder/casefile.py``,
# runs only on the trusted side and never ships)


def value(spec: dict, arrays):
    """One case value as stored: an array as read (not a copy), a ``Seeded`` as such."""
    kind = spec["t"]
    if kind == "array":
        return arrays[spec["k"]]
    if kind == "seeded":
        return Seeded(int(spec["v"]))
    if kind == "float":
        return float(spec["v"])
    if kind in ("int", "bool", "str"):
        return spec["v"]
    if kind == "none":
        return None
    raise ValueError(f"unknown case value kind {kind!r}")


def fresh(stored):
    """A stored case value as a function receives it: an array a copy of its own (a function
    may write into its inputs), a ``Seeded`` a new ``numpy.random.default_rng(seed)``."""
    if isinstance(stored, np.ndarray):
        return np.array(stored)
    if isinstance(stored, Seeded):
        return np.random.default_rng(stored.seed)
    return stored


def decode(spec: dict, arrays):
    """A fresh copy of one case value (what the sandbox worker passes the student's function)."""
    return fresh(value(spec, arrays))


def unpack(blob: bytes) -> dict:
    """Arrays from a plain ``.npz`` (written by ``autograder.frames.pack``), pickle refused."""
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

    def __reduce__(self):  # the tuple's items and the scale (pickle, e.g. to a Dask worker)
        return (Expected, (tuple(self), self.scale))


def _scales(expected) -> tuple:
    """One scale per output (None: the check declares none)."""
    scale = getattr(expected, "scale", None)
    return tuple(scale) if scale is not None else (None,) * len(expected)


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
    ``hidden`` (``autograder.checks.prepare``); ``public_cases.npz`` stores public ones whole,
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
    check and case names, whether it is hidden, whether it passed and the message (``judge``'s:
    fixed text and numbers computed from the arrays; "ok" when it passed)."""

    check: str
    case: str
    hidden: bool
    passed: bool
    message: str = "ok"


def load_cases(path) -> dict:
    """Read ``public_cases.npz``: check name -> {"spec", "cases": [Case]}."""
    arrays = unpack(open(path, "rb").read())
    meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"{path} has format version {meta.get('version')}, expected {FORMAT_VERSION}"
        )
    out = {}
    for name, entry in meta["checks"].items():
        cases = [
            Case(
                case["name"],
                tuple(value(a, arrays) for a in case["args"]),
                {k: value(v, arrays) for k, v in case["kwargs"].items()},
                Expected(
                    (value(e, arrays) for e in case["expected"]),
                    None
                    if case["scale"] is None
                    else [None if sc is None else value(sc, arrays) for sc in case["scale"]],
                ),
                tuple(
                    (m["hint"], tuple(value(o, arrays) for o in m["outputs"]))
                    for m in case["mistakes"]
                ),
            )
            for case in entry["cases"]
        ]
        out[name] = {"spec": entry["spec"], "cases": cases}
    return out


# ----------------------------------------------------------------------------------------
# the case runner: a call -> an outcome from fixed vocabularies

#: what an exception is called in every message: the first builtin class it is an instance
#: of, in this order (a student's own class name never appears)
ERRORS = (
    "NotImplementedError",
    "RecursionError",
    "MemoryError",
    "EOFError",
    "ZeroDivisionError",
    "FloatingPointError",
    "OverflowError",
    "IndexError",
    "KeyError",
    "ValueError",
    "TypeError",
    "AttributeError",
    "NameError",
    "ModuleNotFoundError",
    "ImportError",
    "SyntaxError",
    "AssertionError",
    "RuntimeError",
    "OSError",
    "SystemExit",
    "KeyboardInterrupt",
    "Exception",
)
#: an OSError that means "a file or the disk is full" (EFBIG, ENOSPC): the output limit
FILE_TOO_LARGE = "FileTooLarge"
ERROR_CODES = frozenset(ERRORS + (FILE_TOO_LARGE, "BaseException"))

#: a returned value that is not numbers
BAD_RETURNS = {
    "none": "the returned value is None: did you forget a `return` statement?",
    "empty": "your function returned an empty tuple",
    "not_numeric": "the returned value is not numeric: return NumPy arrays or numbers",
    "complex": "the returned value is complex: return a real array",
    "too_large": "the returned value is far larger than the expected one",
}


#: what the grader offers a submission's imports, said where an import fails
MISSING_MODULE = (
    "the grader offers only NumPy and Python's standard library (and PyTorch in the "
    "chapters whose notebook imports it)"
)


def error_code(err: BaseException) -> str:
    if isinstance(err, OSError) and getattr(err, "errno", None) in (27, 28):
        return FILE_TOO_LARGE
    import builtins

    for name in ERRORS:
        if isinstance(err, getattr(builtins, name)):
            return name
    return "BaseException"


class ReturnProblem(ValueError):
    """A return value that cannot be read as numbers; ``code`` is a key of BAD_RETURNS."""

    def __init__(self, code: str):
        super().__init__(BAD_RETURNS[code])
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


def run_case(fn, args, kwargs) -> dict:
    """Call ``fn`` once: {"kind": "value", "arrays": (...)} or {"kind": "error"|"bad", "code": ...}.

    A "error" outcome also carries ``exception`` (the object itself) for the student's own
    kernel; it never crosses the sandbox boundary and no message uses it.
    """
    try:
        value = fn(*args, **kwargs)
    except BaseException as err:  # noqa: BLE001 - the student's error is an outcome
        if isinstance(err, KeyboardInterrupt) and not _IN_SANDBOX:
            raise
        return {"kind": "error", "code": error_code(err), "exception": err}
    try:
        return {"kind": "value", "arrays": normalise(value)}
    except ReturnProblem as problem:
        return {"kind": "bad", "code": problem.code}


# ----------------------------------------------------------------------------------------
# the messages: a verdict from the outcome, the expected arrays and the check's spec


def _fmt_index(idx) -> str:
    return "(" + ", ".join(str(int(i)) for i in idx) + ("," if len(idx) == 1 else "") + ")"


def _hint(hints: dict, output: str, kind: str) -> str:
    text = hints.get(f"{output}.{kind}") or hints.get(kind)
    return f" Hint: {text}" if text else ""


def _shape_diagnosis(exp_shape: tuple, got_shape: tuple) -> tuple[str, str]:
    """(kind, explanation) for a shape mismatch; kind is 'transposed' or 'shape'. The
    explanation comes from comparing the two shapes and names no dimension of ``got_shape``."""
    if len(exp_shape) == len(got_shape) >= 2 and got_shape == exp_shape[:-2] + exp_shape[-2:][::-1]:
        return "transposed", "the last two axes look swapped"
    if len(exp_shape) == len(got_shape) and sorted(exp_shape) == sorted(got_shape):
        return "transposed", "the axes are in a different order"
    if any(exp_shape[:i] + exp_shape[i + 1 :] == got_shape for i in range(len(exp_shape))):
        return (
            "shape",
            "one axis is missing (did you reduce over an axis that should stay, or drop a batch axis?)",
        )
    if any(got_shape[:i] + got_shape[i + 1 :] == exp_shape for i in range(len(got_shape))):
        return "shape", "there is one axis too many (did you forget to reduce, or keepdims=True?)"
    return "shape", ""


def _axes(indices: list) -> str:
    """'axis 2', 'axes 0 and 2', 'axes 0, 1 and 2'."""
    names = [str(i) for i in indices]
    if len(names) == 1:
        return f"axis {names[0]}"
    return f"axes {', '.join(names[:-1])} and {names[-1]}"


def shape_message(
    output: str, exp_shape: tuple, got_shape: tuple, hidden: bool = False
) -> tuple[str, str]:
    """(kind, message) for a returned array whose shape is not the expected one.

    The message gives the expected shape (the check computed it) and a diagnosis from a
    fixed list (transposed, an axis missing or extra), never a returned dimension: a
    submission could otherwise spell its hidden inputs as the shape of an empty array and
    read them back in its feedback. A public case also says how many axes were returned and
    which of them differ; a hidden one only "another shape" (see ``judge``)."""
    exp_shape, got_shape = tuple(exp_shape), tuple(got_shape)
    kind, why = _shape_diagnosis(exp_shape, got_shape)
    msg = f"expected {output} of shape {exp_shape}, got "
    if hidden:
        msg += "another shape"
    elif len(got_shape) == len(exp_shape):
        differ = [i for i, (e, g) in enumerate(zip(exp_shape, got_shape)) if e != g]
        msg += f"a shape that differs at {_axes(differ)}"
    else:
        axes = len(got_shape)
        msg += f"{axes} ax{'i' if axes == 1 else 'e'}s instead of {len(exp_shape)}"
    return kind, msg + (f": {why}." if why else ".")


def _share(bad: np.ndarray) -> str:
    """How much of an array is wrong, as one of two fixed words (a hidden case's feedback)."""
    return "most of its entries" if 2 * int(bad.sum()) > bad.size else "some of its entries"


def _values_message(output, exp, got, rtol, atol, hints, scale=None, hidden=False) -> str | None:
    """None if ``got`` matches ``exp``, else what is wrong: for a public case counts, indices
    and the max error; for a hidden case one text of a fixed few (see ``judge``)."""
    if exp.dtype == bool:
        if got.dtype != bool:
            return (
                f"expected {output} to be a boolean array (True = may attend), got "
                + ("another dtype" if hidden else f"dtype {got.dtype}")
                + "."
                + _hint(hints, output, "dtype")
            )
        wrong = exp != got
        if not wrong.any():
            return None
        if hidden:
            return f"{output} differs from the expected mask in {_share(wrong)}." + _hint(
                hints, output, "values"
            )
        msg = f"{output} differs from the expected mask in {int(wrong.sum())} of {exp.size} entries"
        if exp.ndim:
            msg += f", first at index {_fmt_index(np.argwhere(wrong)[0])}"
        return msg + "." + _hint(hints, output, "values")
    exp_f, got_f = exp.astype(np.float64), got.astype(np.float64)
    for name, bad in (
        ("NaN", np.isnan(got_f) & ~np.isnan(exp_f)),
        ("inf", np.isinf(got_f) & ~np.isinf(exp_f)),
    ):
        if bad.any() and hidden:
            return f"{output} contains {name} where the expected one has none." + _hint(
                hints, output, "nan" if name == "NaN" else "inf"
            )
        if bad.any():
            where = f" at index {_fmt_index(np.argwhere(bad)[0])}" if got.ndim else ""
            return (
                f"{output} contains {name} in {int(bad.sum())} of {got.size} entries{where}."
                + _hint(hints, output, "nan" if name == "NaN" else "inf")
            )
    both_nonfinite = ~np.isfinite(exp_f) & (exp_f == got_f)
    with np.errstate(invalid="ignore"):
        err = np.where(both_nonfinite, 0.0, np.abs(got_f - exp_f))
        allowed = np.broadcast_to(tolerance(exp_f, rtol, atol, scale), err.shape)
        over = ~(err <= allowed) & ~both_nonfinite
    if not over.any():
        return None
    if hidden:  # no number computed from the case: the bound's constants only
        bound = f"atol={atol:g}" + ("" if scale is None else " times the size of its terms")
        return (
            f"{output} is wrong in {_share(over)} (beyond the tolerance {bound} + "
            f"rtol={rtol:g} * |expected|)." + _hint(hints, output, "values")
        )
    at = np.unravel_index(int(np.argmax(np.where(over, err, -1.0))), err.shape)
    worst = float(err[at])
    bound = (
        f"atol={atol:g} + rtol={rtol:g} * |expected|"
        if scale is None
        else f"{float(allowed[at]):.3g} there (atol={atol:g} times the size of the terms "
        f"this entry is computed from, + rtol={rtol:g} * |expected|)"
    )
    msg = (
        f"{output} is wrong in {int(over.sum())} of {got.size} entries: max error {worst:.3g} "
        f"vs tolerance {bound}"
    )
    if got.ndim:
        msg += f"; first wrong entry at index {_fmt_index(np.argwhere(over)[0])}"
    return msg + "." + _hint(hints, output, "values")


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


def _token_rows(pred, exp_rows: int, hidden: bool = False):
    """Integer token ids (B, n) from a prediction, or the problem's message."""
    if pred.ndim != 2 or pred.shape[0] != exp_rows:
        # what differs, never a returned dimension (see shape_message)
        got = (
            "another shape"
            if hidden
            else f"{pred.ndim} ax{'i' if pred.ndim == 1 else 'e'}s"
            if pred.ndim != 2
            else "a different number of rows"
        )
        return None, (
            f"expected predictions of shape ({exp_rows}, n_out) (one row of token ids per "
            f"input sentence), got {got}."
        )
    if not np.issubdtype(pred.dtype, np.integer):
        if pred.dtype.kind == "f" and np.all(np.isfinite(pred)) and np.all(pred == np.round(pred)):
            return pred.astype(np.int64), None
        got = "another dtype" if hidden else f"dtype {pred.dtype}"
        return (
            None,
            f"expected integer token ids, got {got}: return argmax indices, not scores.",
        )
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


def _sequence_verdict(
    spec: dict, expected: tuple, got: tuple, hidden: bool = False
) -> tuple[bool, str]:
    """Exact-match accuracy of token sequences against a threshold ("accuracy"), or exact
    equality of every sequence ("tokens": e.g. the greedy decoding of a given model). A
    hidden case's failure carries no count (see ``judge``)."""
    comp = spec["comparator"]
    pad, eos = int(comp.get("pad", 0)), comp.get("eos")
    pred, problem = _token_rows(got[0], expected[0].shape[0], hidden)
    if problem:
        return False, problem
    want, have = _sequences(expected[0], pad, eos), _sequences(pred, pad, eos)
    correct = sum(w == h for w, h in zip(want, have))
    total = max(len(want), 1)
    hints = spec.get("hints", {})
    if comp["kind"] == "tokens":
        if correct == len(want):
            return True, f"all {len(want)} token sequences are exact"
        if hidden:
            share = "most" if 2 * (len(want) - correct) > len(want) else "some"
            return False, (
                f"{share} token sequences differ from the expected ones."
                + _hint(hints, "tokens", "values")
            )
        first = next(i for i, (w, h) in enumerate(zip(want, have)) if w != h)
        return False, (
            f"{len(want) - correct} of {len(want)} token sequences differ from the expected "
            f"ones, first in row {first}." + _hint(hints, "tokens", "values")
        )
    threshold = float(comp["threshold"])
    summary_text = (
        f"exact-match accuracy {correct / total:.1%} ({correct} of {len(want)} sentences)"
    )
    if correct / total >= threshold:
        return True, f"{summary_text}, required {threshold:.0%}"
    if hidden:
        return False, f"exact-match accuracy is below the required {threshold:.0%}." + _hint(
            hints, "predictions", "values"
        )
    return False, f"{summary_text} is below the required {threshold:.0%}." + _hint(
        hints, "predictions", "values"
    )


def failure_of(spec: dict, outcome: dict) -> str | None:
    """The message for an outcome that is not a value (an error or a bad return), else None."""
    if outcome["kind"] == "error":
        if outcome["code"] == "NotImplementedError":
            return f"{spec['name']} is not implemented yet"
        why = (
            f": an import failed, and {MISSING_MODULE}."
            if outcome["code"] == "ModuleNotFoundError"
            else ""
        )
        return f"{spec['name']} raised {outcome['code']}{why}" + _hint(
            spec.get("hints", {}), "", outcome["code"]
        )
    if outcome["kind"] == "bad":
        return BAD_RETURNS[outcome["code"]]
    return None


def judge(spec: dict, case: Case, outcome: dict) -> Verdict:
    """The verdict on one case: ``outcome`` (what ``run_case`` returned) against the case's
    ``expected`` arrays and known ``mistakes``, worded for a public or a ``hidden`` case.

    A public case's message teaches: counts, indices, the returned number of axes, the
    maximum error. A hidden case's message is one of a fixed few texts, functions only of the
    check's public description, the case's name and expected shape, and a classification of
    the failure: the error class (``ERRORS``), the bad return (``BAD_RETURNS``), "a
    different number of outputs", "another shape" with a shape diagnosis of five, a known
    mistake of the chapter's list, "another dtype", NaN or inf, "most" or "some" of the
    entries wrong, "accuracy below the threshold". A submission that holds its hidden inputs
    can thus write into its feedback only which of those texts it gets, never a number it
    chose (docs/threat-model.md, "Judging and feedback").

    spec: the check's public description: ``name``, ``outputs`` (names), ``rtol``, ``atol``,
        ``hints`` (``"kind"`` or ``"output.kind"`` -> text; kinds: arity, shape, transposed,
        dtype, nan, inf, values), ``comparator`` (``allclose``/``accuracy``/``tokens``, ``integer``)
    case.expected: the reference's arrays; an ``Expected`` also carries each output's scale,
        and the absolute tolerance is then ``atol * scale`` (see ``tolerance``).
    outcome: what ``run_case`` returned (a value's arrays may be shape-only placeholders with
        ``shape`` and ``dtype`` when the shapes differ: nothing else of them is read then).
    """
    expected = case.expected if isinstance(case.expected, Expected) else Expected(case.expected)
    passed, message = _judged(spec, case.name, expected, outcome, case.mistakes, case.hidden)
    return Verdict(spec.get("name", ""), case.name, case.hidden, passed, message)


def _judged(
    spec: dict, case_name: str, expected: Expected, outcome: dict, mistakes, hidden: bool
) -> tuple[bool, str]:
    """``judge``'s (passed, message)."""
    where = f"case '{case_name}': "
    problem = failure_of(spec, outcome)
    if problem:
        return False, where + problem
    got = tuple(outcome["arrays"])
    names = list(spec.get("outputs") or ["output"])
    hints = spec.get("hints", {})
    if len(got) != len(expected):
        want = f"{len(expected)} output" + ("s" if len(expected) > 1 else "")
        listing = " (" + ", ".join(names) + ")" if len(expected) > 1 else ""
        count = "a different number" if hidden else str(len(got))
        return False, where + f"expected {want}{listing}, got {count}." + _hint(hints, "", "arity")
    if spec.get("comparator", {}).get("kind", "allclose") in ("accuracy", "tokens"):
        passed, msg = _sequence_verdict(spec, expected, got, hidden)
        return passed, where + msg
    for output, exp, g in zip(names, expected, got):
        if tuple(exp.shape) != tuple(g.shape):
            kind, msg = shape_message(output, tuple(exp.shape), tuple(g.shape), hidden)
            hint = _hint(hints, output, kind) or (
                _hint(hints, output, "shape") if kind != "shape" else ""
            )
            return False, where + msg + hint
    integer = spec.get("comparator", {}).get("integer")
    for output, exp, g in zip(names, expected, got) if integer else ():
        if exp.dtype.kind in "iu" and g.dtype.kind not in "iu":  # integers must stay integers
            found = f"expected {output} to be an integer array, got " + (
                "another dtype." if hidden else f"dtype {g.dtype}."
            )
            return False, where + found + _hint(hints, output, "dtype")
    rtol, atol, scales = spec["rtol"], spec["atol"], _scales(expected)
    for hint, outputs in mistakes:
        # the mistake's outputs stand in for the expected ones: the same bound around them
        if not _matches(tuple(expected), tuple(outputs), rtol, atol, scales) and _matches(
            tuple(outputs), got, rtol, atol, scales
        ):
            return False, where + f"your result matches a known mistake: {hint}"
    for output, exp, g, scale in zip(names, expected, got, scales):
        msg = _values_message(output, exp, g, rtol, atol, hints, scale, hidden)
        if msg is not None:
            return False, where + msg
    return True, "ok"


def hidden_shown(failures: list[str]) -> tuple[str, list[str]]:
    """What every place shows of a check's failing hidden cases: the first failure's message,
    and only the others' names ("case '<name>'")."""
    # every failure starts "case '<name>': " (judge); case names are the check's own
    return failures[0], [f[: f.index("': ") + 1] if "': " in f else f for f in failures[1:]]


def summary(
    name: str, failures: list[str], total: int, hidden: bool, shown: int | None = None
) -> str:
    """The head line and the failing cases, as every place shows them.

    Public: the first ``shown`` failures in full. Hidden: the first failure in full (one
    text of ``judge``'s fixed few) and only the names of the others, so that a check's hidden
    feedback carries at most one bit per hidden case (which failed) and one classification."""
    if not failures:
        return f"{name}: all {total} {'hidden' if hidden else 'public'} cases passed"
    if hidden:
        first, others = hidden_shown(failures)
        listed = [first] + ([", ".join(others) + " failed too"] if others else [])
        head = f"{name}: hidden check failed on {len(failures)} of {total} cases:"
        return head + "\n" + "\n".join("  - " + f for f in listed)
    head = f"{name}: {len(failures)} of {total} public cases failed"
    listed = failures if shown is None else failures[:shown]
    more = [f"... and {len(failures) - len(listed)} more"] if len(listed) < len(failures) else []
    return head + "\n" + "\n".join("  - " + f for f in listed + more)


# ----------------------------------------------------------------------------------------
# the student's entry point


class CheckFailed(AssertionError):
    """A check did not pass. Jupyter shows only the message (see ``_render_traceback_``)."""

    def _render_traceback_(self):
        # IPython calls this instead of printing a traceback: the lesson, not our insides
        return [
            "\x1b[31mCheckFailed\x1b[0m: " + line if i == 0 else line
            for i, line in enumerate(str(self).splitlines())
        ]


def _installed_dirs() -> tuple[str, ...]:
    """Where installed code lives (the standard library, site-packages): not your code."""
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    dirs.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs)


def _yours(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (
        path != os.path.abspath(__file__)
        and not filename.startswith("<frozen")
        and not path.startswith(_installed_dirs())
    )


def _where_raised(err: BaseException) -> str:
    """For your own kernel only: the error's text and the innermost line of *your* code that
    led to it (not NumPy's insides), or, for a syntax error, the line that does not parse."""
    frames = [
        f
        for f in traceback.extract_tb(err.__traceback__)
        if os.path.abspath(f.filename) != os.path.abspath(__file__)
    ]
    text = f"{type(err).__name__}: {err}"
    if isinstance(err, SyntaxError) and err.lineno:
        code = (err.text or "").strip()
        return text + f" (a syntax error at line {err.lineno}" + (f": `{code}`)" if code else ")")
    yours = [f for f in frames if _yours(f.filename)]
    frame = (yours or frames or [None])[-1]
    if frame is not None:
        code = (frame.line or "").strip()
        text += f" (at line {frame.lineno}: `{code}`)" if code else f" (at line {frame.lineno})"
    if isinstance(err, ModuleNotFoundError):
        text += f"; {MISSING_MODULE}"
    return text


def run_cases(spec: dict, fn, cases: list[Case]) -> tuple[list[Verdict], list[str]]:
    """Run ``fn`` on every case (fresh arguments each time) until one is not implemented:
    (the verdicts, notes for your own kernel: where a public case's error was raised)."""
    verdicts, notes = [], []
    for case in cases:
        outcome = run_case(fn, *case.fresh())
        verdicts.append(judge(spec, case, outcome))
        error = outcome["code"] if outcome["kind"] == "error" else None
        if error and not case.hidden and error != "NotImplementedError":
            notes.append(
                f"in case '{case.name}' your code raised " + _where_raised(outcome["exception"])
            )
        if error == "NotImplementedError":
            break
    return verdicts, notes


_CACHE: dict = {}


def check(name: str, fn, cases_path: str | None = None) -> None:
    """Run ``fn`` on every public case of the check ``name``: prints one line on success,
    else raises ``CheckFailed`` listing every failing case. ``fn`` gets fresh inputs."""
    __tracebackhide__ = True
    path = cases_path or os.path.join(os.path.dirname(os.path.abspath(__file__)), CASES_FILE)
    if not os.path.exists(path):
        raise CheckFailed(
            f"cannot find {CASES_FILE} next to {os.path.basename(__file__)} "
            f"({path}): keep the released folder together"
        ) from None
    if path not in _CACHE:
        _CACHE[path] = load_cases(path)
    checks = _CACHE[path]
    if name not in checks:
        raise CheckFailed(
            f"there is no public check called {name!r}; known checks: {', '.join(sorted(checks))}"
        ) from None
    if not callable(fn):
        raise CheckFailed(
            f"check({name!r}, ...) needs your function, got {type(fn).__name__}"
        ) from None
    spec, cases = checks[name]["spec"], checks[name]["cases"]
    verdicts, notes = run_cases(spec, fn, cases)
    failures = [v.message for v in verdicts if not v.passed]
    if failures and failures[0].endswith("is not implemented yet"):
        raise CheckFailed(
            f"{name} is not implemented yet: replace `raise NotImplementedError()` with your code."
        ) from None
    if failures:
        raise CheckFailed(
            summary(name, failures, len(cases), hidden=False) + "".join("\n" + n for n in notes)
        ) from None
    print(summary(name, [], len(cases), hidden=False))


_IN_SANDBOX = False  # set by the sandbox worker: there a KeyboardInterrupt is the student's
