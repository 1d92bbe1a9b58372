"""The contract between a student's function and every check of the course (NumPy only).

This one file is three things, so that a failure reads word for word the same everywhere:

1. the student's checker: `make release` ships it as ``attention_check.py`` next to every
   notebook with ``public_cases.npz``; ``check(name, fn)`` runs the public cases offline;
2. the in-kernel hidden check of stock ``nbgrader autograde`` (``autograder.checks.run_hidden``
   calls ``run_case`` and ``judge`` from here);
3. the only code the grader's sandbox runs besides the notebook (``python -I -S contract.py``):
   a zygote that forks one child per submission, runs its cells, then its cases, and streams
   plain events back to the trusted side, which parses them against a strict schema
   (``autograder.wire``) and judges with the same ``judge``.

The pieces:

- one codec: a case argument is an array, a number, a bool, a string, None or a ``Seeded``
  (a fresh ``numpy.random.default_rng(seed)``), written as a small JSON spec plus an
  uncompressed ``.npz`` of arrays (never pickle);
- one case runner: ``run_case(fn, args, kwargs)`` -> an *outcome*: the return value as a
  tuple of arrays, or an error code, or a bad-return code, from fixed vocabularies;
- one set of messages: ``judge(spec, case_name, expected, outcome, mistakes)`` and
  ``summary(...)`` build every message from fixed strings and numbers computed from the
  arrays (counts, shapes, indices, max error). No text the student's code produced (an
  exception's message or class name, a type name) ever appears in a message.

Nothing here imports the course, so editing your copy cannot change a grade.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # in the sandbox (python -I -S): the site-packages come as arguments
    sys.path.extend(a for a in sys.argv[1 : sys.argv.index("--")] if a.startswith("/"))

import io  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402

__all__ = [
    "check",
    "CheckFailed",
    "Seeded",
    "normalise",
    "run_case",
    "judge",
    "summary",
    "save_cases",
    "load_cases",
    "encode",
    "decode",
]

CASES_FILE = "public_cases.npz"
FORMAT_VERSION = 2


class Seeded:
    """A case argument meaning "a fresh ``numpy.random.default_rng(seed)``"."""

    __slots__ = ("seed",)

    def __init__(self, seed: int):
        self.seed = int(seed)

    def __eq__(self, other):
        return isinstance(other, Seeded) and other.seed == self.seed

    def __hash__(self):
        return hash(("Seeded", self.seed))

    def __repr__(self):
        return f"Seeded({self.seed})"


# ----------------------------------------------------------------------------------------
# the codec: case values <-> (JSON spec, arrays)


def encode(value, arrays: dict) -> dict:
    """One case value as a JSON-able spec; arrays go into ``arrays`` under a fresh key."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"a case array must be numeric or boolean, not {value.dtype}")
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {"t": "array", "k": key}
    if isinstance(value, Seeded):
        return {"t": "seeded", "v": value.seed}
    if isinstance(value, (bool, np.bool_)):
        return {"t": "bool", "v": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"t": "int", "v": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"t": "float", "v": repr(float(value))}  # a string, so nan and inf survive
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if value is None:
        return {"t": "none"}
    raise TypeError(
        f"a case value of type {type(value).__name__} cannot be encoded: "
        "use arrays, numbers, strings, None or Seeded"
    )


def decode(spec: dict, arrays):
    """A fresh copy of one case value (a function may write into its inputs)."""
    kind = spec["t"]
    if kind == "array":
        return np.array(arrays[spec["k"]])
    if kind == "seeded":
        return np.random.default_rng(int(spec["v"]))
    if kind == "float":
        return float(spec["v"])
    if kind in ("int", "bool", "str"):
        return spec["v"]
    if kind == "none":
        return None
    raise ValueError(f"unknown case value kind {kind!r}")


def pack(arrays: dict) -> bytes:
    """Arrays as a plain (uncompressed) ``.npz``."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def unpack(blob: bytes) -> dict:
    if not blob:
        return {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def save_cases(path, assignment: str, checks: dict) -> None:
    """Write ``public_cases.npz``: checks is name -> {"spec", "cases": [{"name", "args",
    "kwargs", "expected", "mistakes": [(hint, outputs)]}]}."""
    arrays: dict = {}
    meta = {"version": FORMAT_VERSION, "assignment": assignment, "checks": {}}
    for name, entry in checks.items():
        cases = []
        for case in entry["cases"]:
            cases.append(
                {
                    "name": case["name"],
                    "args": [encode(a, arrays) for a in case["args"]],
                    "kwargs": {k: encode(v, arrays) for k, v in case["kwargs"].items()},
                    "expected": [encode(np.asarray(e), arrays) for e in case["expected"]],
                    "mistakes": [
                        {"hint": hint, "outputs": [encode(np.asarray(o), arrays) for o in outs]}
                        for hint, outs in case.get("mistakes", ())
                    ],
                }
            )
        meta["checks"][name] = {"spec": entry["spec"], "cases": cases}
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as handle:
        handle.write(pack(arrays))


def load_cases(path) -> dict:
    """Read ``public_cases.npz``: name -> {"spec", "cases"}; a case's ``args``/``kwargs``
    are callables giving fresh values (a Seeded generator must be new for every call)."""
    arrays = unpack(open(path, "rb").read())
    meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"{path} has format version {meta.get('version')}, expected {FORMAT_VERSION}"
        )
    out = {}
    for name, entry in meta["checks"].items():
        cases = [
            {
                "name": case["name"],
                "args": lambda enc=case["args"]: [decode(a, arrays) for a in enc],
                "kwargs": lambda enc=case["kwargs"]: {k: decode(v, arrays) for k, v in enc.items()},
                "expected": tuple(decode(e, arrays) for e in case["expected"]),
                "mistakes": [
                    (m["hint"], tuple(decode(o, arrays) for o in m["outputs"]))
                    for m in case["mistakes"]
                ],
            }
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
    """(kind, explanation) for a shape mismatch; kind is 'transposed' or 'shape'."""
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


def _values_message(output, exp, got, rtol, atol, hints) -> str | None:
    """None if ``got`` matches ``exp``, else what is wrong: counts, indices, the max error."""
    if exp.dtype == bool:
        if got.dtype != bool:
            return (
                f"expected {output} to be a boolean array (True = may attend), got dtype "
                f"{got.dtype}." + _hint(hints, output, "dtype")
            )
        wrong = exp != got
        if not wrong.any():
            return None
        msg = f"{output} differs from the expected mask in {int(wrong.sum())} of {exp.size} entries"
        if exp.ndim:
            msg += f", first at index {_fmt_index(np.argwhere(wrong)[0])}"
        return msg + "." + _hint(hints, output, "values")
    exp_f, got_f = exp.astype(np.float64), got.astype(np.float64)
    for name, bad in (
        ("NaN", np.isnan(got_f) & ~np.isnan(exp_f)),
        ("inf", np.isinf(got_f) & ~np.isinf(exp_f)),
    ):
        if bad.any():
            where = f" at index {_fmt_index(np.argwhere(bad)[0])}" if got.ndim else ""
            return (
                f"{output} contains {name} in {int(bad.sum())} of {got.size} entries{where}."
                + _hint(hints, output, "nan" if name == "NaN" else "inf")
            )
    both_nonfinite = ~np.isfinite(exp_f) & (exp_f == got_f)
    with np.errstate(invalid="ignore"):
        err = np.where(both_nonfinite, 0.0, np.abs(got_f - exp_f))
        allowed = atol + rtol * np.abs(np.where(np.isfinite(exp_f), exp_f, 0.0))
        over = ~(err <= allowed) & ~both_nonfinite
    if not over.any():
        return None
    worst = float(np.max(np.where(over, err, 0.0)))
    msg = (
        f"{output} is wrong in {int(over.sum())} of {got.size} entries: max error {worst:.3g} "
        f"vs tolerance atol={atol:g} + rtol={rtol:g} * |expected|"
    )
    if got.ndim:
        msg += f"; first wrong entry at index {_fmt_index(np.argwhere(over)[0])}"
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
        elif not np.allclose(
            g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
        ):
            return False
    return True


def _token_rows(pred, exp_rows: int):
    """Integer token ids (B, n) from a prediction, or the problem's message."""
    if pred.ndim != 2 or pred.shape[0] != exp_rows:
        return None, (
            f"expected predictions of shape ({exp_rows}, n_out) (one row of token ids per "
            f"input sentence), got shape {pred.shape}."
        )
    if not np.issubdtype(pred.dtype, np.integer):
        if pred.dtype.kind == "f" and np.all(np.isfinite(pred)) and np.all(pred == np.round(pred)):
            return pred.astype(np.int64), None
        return (
            None,
            f"expected integer token ids, got dtype {pred.dtype}: return argmax indices, not scores.",
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


def _sequence_verdict(spec: dict, expected: tuple, got: tuple) -> tuple[bool, str]:
    """Exact-match accuracy of token sequences against a threshold ("accuracy"), or exact
    equality of every sequence ("tokens": e.g. the greedy decoding of a given model)."""
    comp = spec["comparator"]
    pad, eos = int(comp.get("pad", 0)), comp.get("eos")
    pred, problem = _token_rows(got[0], expected[0].shape[0])
    if problem:
        return False, problem
    want, have = _sequences(expected[0], pad, eos), _sequences(pred, pad, eos)
    correct = sum(w == h for w, h in zip(want, have))
    total = max(len(want), 1)
    hints = spec.get("hints", {})
    if comp["kind"] == "tokens":
        if correct == len(want):
            return True, f"all {len(want)} token sequences are exact"
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
    return False, f"{summary_text} is below the required {threshold:.0%}." + _hint(
        hints, "predictions", "values"
    )


def failure_of(spec: dict, outcome: dict) -> str | None:
    """The message for an outcome that is not a value (an error or a bad return), else None."""
    if outcome["kind"] == "error":
        if outcome["code"] == "NotImplementedError":
            return f"{spec['name']} is not implemented yet"
        return f"{spec['name']} raised {outcome['code']}" + _hint(
            spec.get("hints", {}), "", outcome["code"]
        )
    if outcome["kind"] == "bad":
        return BAD_RETURNS[outcome["code"]]
    return None


def judge(
    spec: dict, case_name: str, expected: tuple, outcome: dict, mistakes=()
) -> tuple[bool, str]:
    """``(passed, message)`` for one case.

    spec: the check's public description: ``name``, ``outputs`` (names), ``rtol``, ``atol``,
        ``hints`` (``"kind"`` or ``"output.kind"`` -> text; kinds: arity, shape, transposed,
        dtype, nan, inf, values) and ``comparator`` (``allclose``, ``accuracy`` or ``tokens``).
    outcome: what ``run_case`` returned (a value's arrays may be shape-only placeholders with
        ``shape`` and ``dtype`` when the shapes differ: nothing else of them is read then).
    mistakes: ``(hint, outputs)``: what known wrong implementations return for this case.
    """
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
        return False, where + f"expected {want}{listing}, got {len(got)}." + _hint(
            hints, "", "arity"
        )
    if spec.get("comparator", {}).get("kind", "allclose") in ("accuracy", "tokens"):
        passed, msg = _sequence_verdict(spec, expected, got)
        return passed, where + msg
    for output, exp, g in zip(names, expected, got):
        if tuple(exp.shape) != tuple(g.shape):
            kind, why = _shape_diagnosis(tuple(exp.shape), tuple(g.shape))
            msg = f"expected {output} of shape {tuple(exp.shape)}, got {tuple(g.shape)}"
            msg += f": {why}." if why else "."
            hint = _hint(hints, output, kind) or (
                _hint(hints, output, "shape") if kind != "shape" else ""
            )
            return False, where + msg + hint
    for hint, outputs in mistakes:
        if not _matches(tuple(expected), tuple(outputs), spec["rtol"], spec["atol"]) and _matches(
            tuple(outputs), got, spec["rtol"], spec["atol"]
        ):
            return False, where + f"your result matches a known mistake: {hint}"
    for output, exp, g in zip(names, expected, got):
        msg = _values_message(output, exp, g, spec["rtol"], spec["atol"], hints)
        if msg is not None:
            return False, where + msg
    return True, "ok"


def summary(
    name: str, failures: list[str], total: int, hidden: bool, shown: int | None = None
) -> str:
    """The head line and the failing cases (the first ``shown`` of them), as every place shows them."""
    if not failures:
        return f"{name}: all {total} {'hidden' if hidden else 'public'} cases passed"
    head = (
        f"{name}: hidden check failed on {len(failures)} of {total} cases:"
        if hidden
        else f"{name}: {len(failures)} of {total} public cases failed"
    )
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


def _where_raised(err: BaseException) -> str:
    """For your own kernel only: the line of your code that raised, and the error's text."""
    frames = [
        f
        for f in traceback.extract_tb(err.__traceback__)
        if os.path.abspath(f.filename) != os.path.abspath(__file__)
    ]
    text = f"{type(err).__name__}: {err}"
    if frames:
        code = (frames[-1].line or "").strip()
        text += (
            f" (at line {frames[-1].lineno}: `{code}`)"
            if code
            else f" (at line {frames[-1].lineno})"
        )
    return text


def run_cases(spec: dict, fn, cases: list, hidden: bool) -> tuple[list[str], list[str]]:
    """Run ``fn`` on cases ({"name", "args", "kwargs", "expected", "mistakes"} with callable
    args/kwargs): (failure messages, notes for your own kernel: where an error was raised)."""
    failures, notes = [], []
    for case in cases:
        outcome = run_case(fn, case["args"](), case["kwargs"]())
        passed, message = judge(
            spec, case["name"], case["expected"], outcome, case.get("mistakes", ())
        )
        if not passed:
            failures.append(message)
            if (
                outcome["kind"] == "error"
                and not hidden
                and outcome["code"] != "NotImplementedError"
            ):
                notes.append(
                    f"in case '{case['name']}' your code raised "
                    + _where_raised(outcome["exception"])
                )
        if outcome["kind"] == "error" and outcome["code"] == "NotImplementedError":
            break
    return failures, notes


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
    failures, notes = run_cases(spec, fn, cases, hidden=False)
    if failures and failures[0].endswith("is not implemented yet"):
        raise CheckFailed(
            f"{name} is not implemented yet: replace `raise NotImplementedError()` with your code."
        ) from None
    if failures:
        raise CheckFailed(
            summary(name, failures, len(cases), hidden=False) + "".join("\n" + n for n in notes)
        ) from None
    print(summary(name, [], len(cases), hidden=False))


# ----------------------------------------------------------------------------------------
# the sandbox: frames, the child that runs one submission, the zygote
#
# A frame: MAGIC, two big-endian uint32 lengths (JSON header, blob), the header, the blob.
# Events the child sends (the trusted side accepts nothing else, in this order only):
#   {"ev": "setup"}                                  the working directory is ready
#   {"ev": "cell", "cell": i, "error": code|None, "output": text}   one per cell run
#   {"ev": "cells_done"}                             then the cases arrive
#   {"ev": "case", "task": t, "case": c, "outcome": "value"|"error"|"bad", "code": code|None,
#    "n": k} + an uncompressed .npz of r0..r{k-1} for a value
#   {"ev": "task_missing", "task": t, "code": "undefined"|"not_callable"}
#   {"ev": "task_end", "task": t}
#   {"ev": "done"}
# The zygote sends on its own control pipe: {"ev": "ready", "error": text|None} once, and
# {"ev": "exit", "code": status, "clean": bool} after each run.

MAGIC = b"AGF2"
LENGTHS = struct.Struct(">II")
_IN_SANDBOX = False


def encode_frame(header: dict, blob: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return MAGIC + LENGTHS.pack(len(head), len(blob)) + head + blob


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> tuple[dict, bytes]:
    """A frame from the trusted side (requests and cases)."""
    if _read_exact(fd, 4) != MAGIC:
        raise ValueError("bad frame magic")
    n_head, n_blob = LENGTHS.unpack(_read_exact(fd, LENGTHS.size))
    return json.loads(_read_exact(fd, n_head)), _read_exact(fd, n_blob)


def _neutralise_magics(source: str) -> str:
    # IPython line magics and shell escapes are not Python: they become comments
    out = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        out.append(
            line[: len(line) - len(stripped)] + "pass  # " + stripped
            if stripped.startswith(("%", "!"))
            else line
        )
    return "\n".join(out)


def _read_capture(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return ""
    text = data[:limit].decode("utf-8", "replace")
    return text[:limit] + ("\n[output truncated]" if len(data) > limit else "")


def _set_limits(limits: dict) -> None:
    import resource

    if limits.get("address_space_bytes"):  # where no cgroup caps memory: the address space
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[0])
        size = pages * os.sysconf("SC_PAGE_SIZE") + int(limits["address_space_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    if limits.get("cpu_seconds"):  # SIGXCPU at the soft limit, SIGKILL a little later
        seconds = int(limits["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    if limits.get("processes"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(limits["processes"]),) * 2)
    if limits.get("file_bytes"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _copy_release(release: str | None, workdir: str) -> None:
    import shutil

    if not release or not os.path.isdir(release):
        return
    for name in os.listdir(release):
        src = os.path.join(release, name)
        if name.endswith(".ipynb"):
            continue
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(workdir, name))
        else:
            shutil.copy(src, workdir)


def run_submission(request: dict, events_fd: int, cases_fd: int) -> None:
    """In the forked child: the cells, then (once the trusted side sends them) the cases.

    The cases are not in this process while the cells run; what runs after the cells prints
    into /dev/null, so nothing printed can carry a hidden input back.
    """
    limits = request["limits"]
    output_limit = int(limits.get("cell_output_chars", 4000))
    workdir = request["workdir"]  # chosen by the trusted side: a fresh random name
    os.mkdir(workdir, 0o700)
    _copy_release(request.get("release_dir"), workdir)
    os.chdir(workdir)
    sys.path.insert(0, workdir)
    capture = os.path.join(workdir, ".captured_output")
    cases_fd = os.dup(cases_fd)  # the cases come here; stdin itself becomes /dev/null
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # input() gets EOF
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails with EFBIG instead
    _set_limits(limits)

    def emit(header, blob=b""):
        _write_all(events_fd, encode_frame(header, blob))

    emit({"ev": "setup"})
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    skip_cells = set(request.get("skip_cells", []))
    for index, source in enumerate(request["cells"]):
        if index in skip_cells:
            continue
        out_fd = os.open(capture, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        error = None
        try:
            exec(compile(_neutralise_magics(source), f"<cell {index}>", "exec"), namespace)
        except BaseException as err:  # noqa: BLE001 - SystemExit too: a cell error
            error = error_code(err)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - a full disk must not stop the report
            pass
        emit(
            {
                "ev": "cell",
                "cell": index,
                "error": error,
                "output": _read_capture(capture, output_limit),
            }
        )
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    emit({"ev": "cells_done"})

    phase, blob = read_frame(cases_fd)
    os.close(cases_fd)
    arrays = unpack(blob)
    skip_tasks = set(phase.get("skip_tasks", []))
    for task_index, task in enumerate(phase["tasks"]):
        if task_index in skip_tasks:
            continue
        function = namespace.get(task["function"])
        if not callable(function):
            code = "not_callable" if task["function"] in namespace else "undefined"
            emit({"ev": "task_missing", "task": task_index, "code": code})
            emit({"ev": "task_end", "task": task_index})
            continue
        for case_index, case in enumerate(task["cases"]):
            args = [decode(s, arrays) for s in case["args"]]
            kwargs = {k: decode(s, arrays) for k, s in case["kwargs"].items()}
            outcome = run_case(function, args, kwargs)
            header = {
                "ev": "case",
                "task": task_index,
                "case": case_index,
                "outcome": outcome["kind"],
                "code": outcome.get("code"),
                "n": 0,
            }
            payload = b""
            if outcome["kind"] == "value":
                header["n"] = len(outcome["arrays"])
                try:
                    payload = pack({f"r{i}": a for i, a in enumerate(outcome["arrays"])})
                except MemoryError:
                    header.update(outcome="error", code="MemoryError", n=0)
            emit(header, payload)
        emit({"ev": "task_end", "task": task_index})
    emit({"ev": "done"})


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except OSError:
        pass


def _sweep(whole_namespace: bool, child: int) -> None:
    """Kill and reap everything the child left (in the sandbox: every process but us)."""
    for _ in range(200):
        try:
            if whole_namespace:
                os.kill(-1, signal.SIGKILL)
            else:
                os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] != 0:
                pass
        except ChildProcessError:
            return
        time.sleep(0.005)


def _remove_ipc() -> None:
    """Remove every System V shared memory segment, semaphore set and message queue of this
    IPC namespace (the sandbox has its own): none may outlive the submission that made it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for table, remove in (
        ("shm", lambda i: libc.shmctl(i, 0, None)),
        ("sem", lambda i: libc.semctl(i, 0, 0)),
        ("msg", lambda i: libc.msgctl(i, 0, None)),
    ):
        try:
            with open(f"/proc/sysvipc/{table}") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            remove(int(row.split()[1]))  # IPC_RMID = 0


def _scrub(roots=("/tmp", "/dev/shm")) -> bool:
    """Delete everything under the writable places; True if they are empty afterwards."""
    import shutil

    _remove_ipc()
    clean = True
    try:  # the sandbox's own read-only binds (a virtualenv under /tmp) are not state
        with open("/proc/self/mountinfo") as handle:
            mounts = [line.split()[4] for line in handle]
    except OSError:
        mounts = []
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        kept = []
        for name in names:
            path = os.path.join(root, name)
            if any(m == path or m.startswith(path + "/") for m in mounts):
                kept.append(name)
                continue
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError:
                clean = False
        clean = clean and sorted(os.listdir(root)) == sorted(kept)
    for table in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{table}") as handle:
                clean = clean and len(handle.read().splitlines()) <= 1
        except OSError:
            pass
    return clean


def zygote(preload: list[str], sandboxed: bool, control_fd: int) -> None:
    """Import the heavy modules once, then fork one child per request read from stdin."""
    global _IN_SANDBOX
    _IN_SANDBOX = True
    requests_fd, events_fd = 0, os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    for module in preload:
        try:
            __import__(module)
        except Exception:  # noqa: BLE001 - a missing optional module only costs time later
            pass
    if "torch" in sys.modules:  # preloaded: one thread per sandbox
        sys.modules["torch"].set_num_threads(1)
    if sandboxed:  # what the imports wrote (matplotlib's caches) is gone before the first run
        _scrub()
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come back to us
    _prctl(4, 0)  # PR_SET_DUMPABLE 0: no /proc/<us>/fd for the child
    _write_all(control_fd, encode_frame({"ev": "ready", "error": None}))
    while True:
        try:
            request, _blob = read_frame(requests_fd)
        except EOFError:
            return
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(control_fd)  # only the zygote may say a run is over
                os.setsid()
                run_submission(request, events_fd, requests_fd)
            except BaseException:  # noqa: BLE001 - reported by exit status
                code = 70
            finally:
                os._exit(code)
        _pid, status = os.waitpid(pid, 0)
        _sweep(sandboxed, pid)
        import shutil

        shutil.rmtree(request["workdir"], ignore_errors=True)
        clean = _scrub() if sandboxed else True
        _write_all(
            control_fd,
            encode_frame({"ev": "exit", "code": os.waitstatus_to_exitcode(status), "clean": clean}),
        )


if __name__ == "__main__":
    # argv: [--sandboxed] --control-fd=N site-packages... -- preloads...
    arguments = sys.argv[1:]
    in_sandbox = arguments[0] == "--sandboxed"
    arguments = arguments[1:] if in_sandbox else arguments
    control = int(arguments[0].split("=", 1)[1])
    zygote(arguments[arguments.index("--") + 1 :], in_sandbox, control)
