"""Public checks for the assignments of *Attention, derived* (ships as ``attention_check.py``).

`make release` copies this file next to every released notebook, together with
``public_cases.npz``: the public test inputs and the answers the reference implementation
gives for them. Nothing else is needed to run the public checks offline.

- ``check(name, fn)``: runs your function on every public case of ``name`` and either prints
  a one-line success or stops the cell with a message that says what is wrong and where
  (wrong shape, NaN, wrong values in a named case), never with a traceback from in here.
- ``normalise`` / ``compare_outputs``: turn a return value into a tuple of arrays and compare
  it with the expected one. The course's grader uses these very functions for the hidden
  cases, so a message here reads exactly like a message in your feedback.
- ``save_cases`` / ``load_cases``: the ``public_cases.npz`` format: arrays plus one JSON
  string, read with ``allow_pickle=False``.

This module holds no reference implementation and imports nothing from the course
(NumPy only), so editing it cannot change a grade: the hidden checks do not use your copy.
"""

from __future__ import annotations

import json
import os
import traceback

import numpy as np

__all__ = ["check", "CheckFailed", "normalise", "compare_outputs", "save_cases", "load_cases"]

CASES_FILE = "public_cases.npz"
FORMAT_VERSION = 1


class CheckFailed(AssertionError):
    """A check did not pass. Jupyter shows only the message (see ``_render_traceback_``)."""

    def _render_traceback_(self):
        # IPython calls this instead of printing a traceback: the student sees the lesson,
        # not the inside of the checker.
        return ["\x1b[31mCheckFailed\x1b[0m: " + line if i == 0 else line
                for i, line in enumerate(str(self).splitlines())]


# ----------------------------------------------------------------------------------------
# return values -> tuple of arrays


def _to_array(x, what: str) -> np.ndarray:
    if x is None:
        raise ValueError(f"{what} is None: did you forget a `return` statement?")
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{what} could not be read as an array ({err}): return a NumPy array") from None
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise ValueError(
            f"{what} is not numeric (got {type(x).__name__} with dtype {a.dtype}): "
            "return NumPy arrays or numbers"
        )
    if np.issubdtype(a.dtype, np.complexfloating):
        raise ValueError(f"{what} is complex (dtype {a.dtype}): return a real array")
    return a


def normalise(value) -> tuple[np.ndarray, ...]:
    """A function's return value as a tuple of arrays.

    tuple/list -> one array per element; anything else -> a 1-tuple (a scalar becomes a 0-d
    array). Raises ValueError with a teaching message for None or non-numeric values.
    """
    if isinstance(value, (tuple, list)):
        if len(value) == 0:
            raise ValueError("your function returned an empty tuple")
        return tuple(_to_array(v, f"output {i} of the returned tuple") for i, v in enumerate(value))
    return (_to_array(value, "the returned value"),)


# ----------------------------------------------------------------------------------------
# comparison


def _fmt_index(idx) -> str:
    return "(" + ", ".join(str(int(i)) for i in idx) + ")" if len(idx) != 1 else f"({int(idx[0])},)"


def _hint(hints: dict, output: str, kind: str) -> str:
    """The check's own hint for this output and kind of failure, if it declared one."""
    text = hints.get(f"{output}.{kind}") or hints.get(kind)
    return f" Hint: {text}" if text else ""


def _shape_diagnosis(exp_shape: tuple, got_shape: tuple) -> tuple[str, str]:
    """(kind, explanation) for a shape mismatch; kind is 'transposed' or 'shape'."""
    if len(exp_shape) == len(got_shape) >= 2 and got_shape == exp_shape[:-2] + exp_shape[-2:][::-1]:
        return "transposed", "the last two axes look swapped"
    if len(exp_shape) == len(got_shape) and sorted(exp_shape) == sorted(got_shape):
        return "transposed", "the axes are in a different order"
    if any(exp_shape[:i] + exp_shape[i + 1:] == got_shape for i in range(len(exp_shape))):
        return "shape", "one axis is missing (did you reduce over an axis that should stay, or drop a batch axis?)"
    if any(got_shape[:i] + got_shape[i + 1:] == exp_shape for i in range(len(got_shape))):
        return "shape", "there is one axis too many (did you forget to reduce, or keepdims=True?)"
    return "shape", ""


def _allclose_message(output, exp, got, rtol, atol, case_name, hints, hidden) -> str | None:
    """None if ``got`` matches ``exp``; otherwise the teaching message."""
    if exp.dtype == bool:
        if got.dtype != bool:
            return (f"expected {output} to be a boolean array (True = may attend), got dtype "
                    f"{got.dtype}." + _hint(hints, output, "dtype"))
        wrong = exp != got
        if not wrong.any():
            return None
        idx = np.argwhere(wrong)[0]
        msg = f"{output} differs from the expected mask in {int(wrong.sum())} of {exp.size} entries"
        if exp.ndim:
            msg += f", first at index {_fmt_index(idx)}"
            if not hidden:
                msg += f" (expected {bool(exp[tuple(idx)])}, got {bool(got[tuple(idx)])})"
        return msg + "." + _hint(hints, output, "values")
    if got.dtype == bool:
        got = got.astype(exp.dtype)
    exp_f = exp.astype(np.float64)
    got_f = got.astype(np.float64)
    bad_nan = np.isnan(got_f) & ~np.isnan(exp_f)
    if bad_nan.any():
        idx = np.argwhere(bad_nan)[0]
        where = f" at index {_fmt_index(idx)}" if got.ndim else ""
        return (f"{output} contains NaN in {int(bad_nan.sum())} of {got.size} entries{where}."
                + _hint(hints, output, "nan"))
    bad_inf = np.isinf(got_f) & ~np.isinf(exp_f)
    if bad_inf.any():
        idx = np.argwhere(bad_inf)[0]
        where = f" at index {_fmt_index(idx)}" if got.ndim else ""
        return (f"{output} contains inf in {int(bad_inf.sum())} of {got.size} entries{where}."
                + _hint(hints, output, "inf"))
    both_nonfinite = ~np.isfinite(exp_f) & (exp_f == got_f)
    with np.errstate(invalid="ignore"):
        err = np.where(both_nonfinite, 0.0, np.abs(got_f - exp_f))
        allowed = atol + rtol * np.abs(np.where(np.isfinite(exp_f), exp_f, 0.0))
        over = ~(err <= allowed) & ~both_nonfinite
    if not over.any():
        return None
    idx = np.argwhere(over)[0] if got.ndim else ()
    worst = float(np.max(np.where(over, err, 0.0)))
    msg = (f"{output} is wrong in {int(over.sum())} of {got.size} entries: max error {worst:.3g} "
           f"vs tolerance atol={atol:g} + rtol={rtol:g} * |expected|")
    if got.ndim:
        msg += f"; first wrong entry at index {_fmt_index(idx)}"
    if not hidden:
        at = tuple(idx)
        msg += f" (expected {exp_f[at]:.6g}, got {got_f[at]:.6g})"
    return msg + "." + _hint(hints, output, "values")


def _matches(exp: tuple, got: tuple, rtol: float, atol: float) -> bool:
    if len(exp) != len(got):
        return False
    for e, g in zip(exp, got):
        if e.shape != g.shape:
            return False
        if e.dtype == bool or g.dtype == bool:
            if not np.array_equal(e, g):
                return False
        elif not np.allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
            return False
    return True


def _accuracy_verdict(spec, expected, got) -> tuple[bool, str]:
    """Sequence exact-match accuracy: expected/got are (B, n) token ids; padding (and, with
    an ``eos`` id, the first EOS and all after it) is ignored. Holds no values either way."""
    comp = spec["comparator"]
    pad, threshold = int(comp.get("pad", 0)), float(comp["threshold"])
    (exp,), (pred,) = expected[:1], got[:1]
    if pred.ndim != 2 or pred.shape[0] != exp.shape[0]:
        return False, (f"expected predictions of shape ({exp.shape[0]}, n_out) (one row of token "
                       f"ids per input sentence), got shape {pred.shape}.")
    if not np.issubdtype(pred.dtype, np.integer):
        if np.issubdtype(pred.dtype, np.floating) and np.all(np.isfinite(pred)) and np.all(pred == np.round(pred)):
            pred = pred.astype(np.int64)
        else:
            return False, f"expected integer token ids, got dtype {pred.dtype}: return argmax indices, not scores."
    eos = comp.get("eos")
    correct = 0
    for want, have in zip(exp, pred):
        want = [int(t) for t in want if int(t) != pad]
        have = [int(t) for t in have]
        if eos is not None and int(eos) in have:  # the first EOS and everything after it is ignored
            have = have[: have.index(int(eos))]
        have = [t for t in have if t != pad]
        correct += want == have
    accuracy = correct / max(len(exp), 1)
    summary = f"exact-match accuracy {accuracy:.1%} ({correct} of {len(exp)} sentences)"
    if accuracy >= threshold:
        return True, f"{summary}, required {threshold:.0%}"
    return False, (f"{summary} is below the required {threshold:.0%}."
                   + _hint(spec.get("hints", {}), "predictions", "values"))


def compare_outputs(spec: dict, case_name: str, expected: tuple, got: tuple, *,
                    hidden: bool, mistakes=()) -> tuple[bool, str]:
    """Compare a normalised return value with the expected one: ``(passed, message)``.

    spec: the check's public description: ``outputs`` (names), ``rtol``, ``atol``, ``hints``
        (``"kind"`` or ``"output.kind"`` -> text, kinds: arity, shape, transposed, dtype,
        nan, inf, values) and ``comparator`` (``{"kind": "allclose"}`` or
        ``{"kind": "accuracy", "threshold": ..., "pad": ...}``).
    mistakes: ``(hint, outputs)`` pairs: what a known wrong implementation returns for this
        case; when ``got`` matches one, its hint replaces the generic message.
    hidden: if True the message holds no values at all: only names, shapes and errors.
    """
    names = list(spec.get("outputs") or ["output"])
    hints = spec.get("hints", {})
    where = f"case '{case_name}': "
    if spec.get("comparator", {}).get("kind", "allclose") == "accuracy":
        passed, msg = _accuracy_verdict(spec, expected, got)
        return passed, where + msg
    if len(got) != len(expected):
        want = f"{len(expected)} output" + ("s" if len(expected) > 1 else "")
        listing = " (" + ", ".join(names) + ")" if len(expected) > 1 else ""
        return False, (where + f"expected {want}{listing}, got {len(got)}."
                       + _hint(hints, "", "arity"))
    for output, exp, g in zip(names, expected, got):
        if exp.shape != g.shape:
            kind, why = _shape_diagnosis(exp.shape, g.shape)
            msg = f"expected {output} of shape {exp.shape}, got {g.shape}"
            msg += f": {why}." if why else "."
            hint = _hint(hints, output, kind) or (_hint(hints, output, "shape") if kind != "shape" else "")
            return False, where + msg + hint
    for hint, outputs in mistakes:
        if not _matches(tuple(expected), tuple(outputs), spec["rtol"], spec["atol"]) and \
                _matches(tuple(outputs), got, spec["rtol"], spec["atol"]):
            return False, where + f"your result matches a known mistake: {hint}"
    for output, exp, g in zip(names, expected, got):
        msg = _allclose_message(output, exp, g, spec["rtol"], spec["atol"], case_name, hints, hidden)
        if msg is not None:
            return False, where + msg
    return True, "ok"


# ----------------------------------------------------------------------------------------
# public_cases.npz: arrays + one JSON document (no pickle)


def _encode(value, arrays: dict) -> dict:
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError("object arrays cannot be stored without pickle")
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {"array": key}
    if hasattr(value, "seed") and type(value).__name__ == "Seeded":
        return {"seeded": int(value.seed)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return {"value": value.item()}
    raise TypeError(f"cannot store a case value of type {type(value).__name__}")


def _decode(enc: dict, arrays):
    if "array" in enc:
        return np.array(arrays[enc["array"]])  # a fresh copy: a function may write into it
    if "seeded" in enc:
        return np.random.default_rng(enc["seeded"])
    return enc["value"]


def save_cases(path, assignment: str, checks: dict) -> None:
    """Write ``public_cases.npz``.

    checks: name -> {"spec": dict, "cases": [{"name", "args", "kwargs", "expected",
    "mistakes": [(hint, outputs)]}]} where args/kwargs hold arrays, scalars, strings, None or
    objects of a class named ``Seeded`` with a ``seed``; expected/outputs are tuples of arrays.
    """
    arrays: dict[str, np.ndarray] = {}
    meta = {"version": FORMAT_VERSION, "assignment": assignment, "checks": {}}
    for name, entry in checks.items():
        cases = []
        for case in entry["cases"]:
            cases.append({
                "name": case["name"],
                "args": [_encode(a, arrays) for a in case["args"]],
                "kwargs": {k: _encode(v, arrays) for k, v in case["kwargs"].items()},
                "expected": [_encode(np.asarray(e), arrays) for e in case["expected"]],
                "mistakes": [{"hint": hint, "outputs": [_encode(np.asarray(o), arrays) for o in outs]}
                             for hint, outs in case.get("mistakes", ())],
            })
        meta["checks"][name] = {"spec": entry["spec"], "cases": cases}
    np.savez_compressed(path, __meta__=np.array(json.dumps(meta)), **arrays)


def load_cases(path) -> dict:
    """Read ``public_cases.npz`` (``allow_pickle=False``): name -> {"spec", "cases"} with
    decoded args/kwargs (Seeded -> a fresh ``numpy.random.default_rng(seed)``)."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path} has format version {meta.get('version')}, expected {FORMAT_VERSION}")
    out = {}
    for name, entry in meta["checks"].items():
        cases = []
        for case in entry["cases"]:
            cases.append({
                "name": case["name"],
                # args are decoded lazily (a Seeded generator must be fresh for every call)
                "args": lambda enc=case["args"]: [_decode(a, arrays) for a in enc],
                "kwargs": lambda enc=case["kwargs"]: {k: _decode(v, arrays) for k, v in enc.items()},
                "expected": tuple(_decode(e, arrays) for e in case["expected"]),
                "mistakes": [(m["hint"], tuple(_decode(o, arrays) for o in m["outputs"]))
                             for m in case["mistakes"]],
            })
        out[name] = {"spec": entry["spec"], "cases": cases}
    return out


# ----------------------------------------------------------------------------------------
# the student's entry point


def _raised_message(name: str, err: BaseException) -> str:
    """What the student's own function raised, pointing at the line in their code."""
    if isinstance(err, NotImplementedError):
        return f"{name} is not implemented yet: replace `raise NotImplementedError()` with your code."
    frames = traceback.extract_tb(err.__traceback__)
    here = os.path.abspath(__file__)
    own = [f for f in frames if os.path.abspath(f.filename) != here]
    line = ""
    if own:
        f = own[-1]
        code = (f.line or "").strip()
        line = f" (at line {f.lineno}: `{code}`)" if code else f" (at line {f.lineno})"
    return f"{name} raised {type(err).__name__}: {err}{line}"


_CACHE: dict[str, dict] = {}


def _public_cases(path: str) -> dict:
    if path not in _CACHE:
        _CACHE[path] = load_cases(path)
    return _CACHE[path]


def check(name: str, fn, cases_path: str | None = None) -> None:
    """Run ``fn`` on every public case of the check ``name``.

    Prints ``"name: all N public cases passed"``, or raises ``CheckFailed`` listing every
    failing case with what went wrong. Your function gets fresh copies of the inputs.
    """
    __tracebackhide__ = True
    path = cases_path or os.path.join(os.path.dirname(os.path.abspath(__file__)), CASES_FILE)
    if not os.path.exists(path):
        raise CheckFailed(f"cannot find {CASES_FILE} next to {os.path.basename(__file__)} "
                          f"({path}): keep the released folder together") from None
    checks = _public_cases(path)
    if name not in checks:
        raise CheckFailed(f"there is no public check called {name!r}; known checks: "
                          f"{', '.join(sorted(checks))}") from None
    if not callable(fn):
        raise CheckFailed(f"check({name!r}, ...) needs your function, got {type(fn).__name__}") from None
    spec, cases = checks[name]["spec"], checks[name]["cases"]
    failures, notes = [], []
    for case in cases:
        try:
            value = fn(*case["args"](), **case["kwargs"]())
        except Exception as err:  # the student's error, reported as a message
            failures.append(f"case '{case['name']}': " + _raised_message(name, err))
            if isinstance(err, NotImplementedError):
                break
            continue
        try:
            got = normalise(value)
        except ValueError as err:
            failures.append(f"case '{case['name']}': {err}")
            continue
        passed, message = compare_outputs(spec, case["name"], case["expected"], got,
                                          hidden=False, mistakes=case["mistakes"])
        if not passed:
            failures.append(message)
        elif message != "ok":
            notes.append(message)
    if failures:
        if "is not implemented yet" in failures[0]:
            raise CheckFailed(f"{name} is not implemented yet: replace `raise NotImplementedError()` "
                              "with your code.") from None
        head = f"{name}: {len(failures)} of {len(cases)} public cases failed"
        raise CheckFailed(head + "\n" + "\n".join("  - " + f for f in failures)) from None
    print(f"{name}: all {len(cases)} public cases passed" + "".join(f"\n  - {n}" for n in notes))
