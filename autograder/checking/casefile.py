"""The writer of the case format: case values encoded, ``public_cases.npz`` written (grader only).

The one codec has two halves. Its reader (``contract.value``, ``contract.load_cases``) ships
to students inside the checker; this half, the writer, runs only on the trusted side: the
release writes ``public_cases.npz`` with ``save_cases`` and the grader encodes every case it
sends into the sandbox with ``encode``. It never ships and is never bound into the sandbox.
A value is an array (numeric or boolean), a number, a bool, a string, None or a
``contract.Seeded``, written as a small JSON spec plus an uncompressed ``.npz`` of arrays
(never pickle); ``contract.value`` reads it back. ``public_cases.npz`` also carries the
checker's message catalog in the edition's language (``save_cases``).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from autograder.student import contract
from autograder.student.contract import FORMAT_VERSION, Case, Seeded, value
from autograder.student.frames import pack

__all__ = ["encode", "save_cases", "as_stored"]


def encode(value, arrays: dict) -> dict:
    """One case value as a JSON-able spec; arrays go into ``arrays`` under a fresh key."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"a case array must be numeric or boolean, not {value.dtype}")
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {"t": "array", "k": key}
    if isinstance(value, Seeded):
        return {"t": "seeded", "v": int(value.seed)}
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


def as_stored(case: Case) -> Case:
    """The case with its arguments as the reader gives them back (``contract.value``): what
    the function sees, whichever way the case reaches it (a NumPy scalar becomes a Python
    number; an argument that cannot be encoded fails here, before any grading)."""
    arrays: dict = {}
    args = [encode(a, arrays) for a in case.args]
    kwargs = {k: encode(v, arrays) for k, v in case.kwargs.items()}
    return dataclasses.replace(
        case,
        args=tuple(value(a, arrays) for a in args),
        kwargs={k: value(v, arrays) for k, v in kwargs.items()},
    )


class Recipe(contract.Derived):
    """A derived mistake's outputs made from the expected ones by ``recipe``
    (``contract.derived``): stored as the recipe, a few numbers, not as arrays
    (``diagnosis``'s output changes)."""

    def __new__(cls, expected, recipe):
        self = super().__new__(cls, contract.derived(expected, recipe))
        self.recipe = tuple((int(i), f if f is None else float(f), bool(t)) for i, f, t in recipe)
        return self

    def __reduce__(self):  # pickled (a Dask worker's cases) as made, not made again
        return _made_recipe, (tuple(self), self.recipe)


def _made_recipe(outputs: tuple, recipe: tuple) -> Recipe:
    made = tuple.__new__(Recipe, outputs)
    made.recipe = recipe
    return made


def _mistake(hint: str, outputs, arrays: dict) -> dict:
    stored = {"hint": hint}
    if isinstance(outputs, contract.Derived):
        stored["derived"] = True  # named only where every failing case agrees
    recipe = getattr(outputs, "recipe", None)
    if recipe is not None:
        return {**stored, "recipe": [list(r) for r in recipe]}
    return {**stored, "outputs": [encode(np.asarray(o), arrays) for o in outputs]}


def save_cases(path, assignment: str, checks: dict, messages: dict | None = None) -> None:
    """Write ``public_cases.npz``: checks is name -> {"spec": Spec, "cases": [Case]}, every case
    with its ``expected`` answer (an ``Expected`` ships its scale) and its ``mistakes``;
    ``messages``: the checker's message catalog in the edition's language (message id ->
    template, ``autograder.checking.messages.shipped``; the checker words in English what it lacks)."""
    arrays: dict = {}
    meta = {"version": FORMAT_VERSION, "assignment": assignment, "checks": {}}
    meta["messages"] = dict(messages or {})
    for name, entry in checks.items():
        cases = []
        for case in entry["cases"]:
            scale = getattr(case.expected, "scale", None)
            cases.append(
                {
                    "name": case.name,
                    "args": [encode(a, arrays) for a in case.args],
                    "kwargs": {k: encode(v, arrays) for k, v in case.kwargs.items()},
                    "expected": [encode(np.asarray(e), arrays) for e in case.expected],
                    "scale": None
                    if scale is None
                    else [
                        None if sc is None else encode(np.asarray(sc, dtype=np.float64), arrays)
                        for sc in scale
                    ],
                    "mistakes": [_mistake(hint, outs, arrays) for hint, outs in case.mistakes],
                }
            )
        meta["checks"][name] = {"spec": entry["spec"].as_json(), "cases": cases}
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as handle:
        handle.write(pack(arrays))
