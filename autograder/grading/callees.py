"""A callee's answers for its caller's hidden run: one bug costs one task.

Some graded functions are asked to call another graded function (``Check.calls``):
``decoder_block`` calls the student's ``cross_attention``, ``greedy_decode_cached`` their
``decoder_step``. Called as it is, a caller fails every case its callee gets wrong, though
its own work is right. So:

- In the **hidden run** (fresh processes, only pass/fail leaves them), each case of a caller
  is sent the solution callee's answers to the calls the source notebook's solution of that
  caller makes on that case (``tables``, made here on the trusted side), each answer sealed
  with a key made from its call's arguments (``zygote.call_keys``: rounded, so a few ulps
  do not matter) and filed under that key's id. The sandbox's stand-in for the callee
  (``zygote.answering``) keys each call the student's caller makes and opens the answer
  filed under it: a right caller's calls are the solution's, and are answered as the
  solution's callee answers them; any other call goes to the student's own callee. The table
  holds no argument of any call, so a caller that reads it instead of calling finds nothing
  but sealed bytes: it is scored on what it computes from the answers to its own calls.
- The **public run** holds no reference code and no answer: there the caller calls the
  student's callee, and where that callee fails its own check the caller's failing public
  cases are not counted, and its feedback says which callee to fix first
  (``grading.verdict``).

The solution is the source notebook's (the instructor's, trusted): its code cells but the
graded tests, of which only imports, definitions and constant assignments run
(``definitions``), so the calls recorded are the ones the released notebook asks a student
to make, in the form it asks them.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import json
from pathlib import Path

import numpy as np

from autograder.checking import casefile
from autograder.student import frames, zygote

#: the most a case's tables may hold, in array bytes: beyond it the case is sent no table
#: (its caller is then scored with the student's callee, as before)
MAX_TABLE_BYTES = 8 << 20

_namespaces: dict = {}


def _kept(node: ast.stmt) -> bool:
    """A top-level statement of a solution cell run to define the solution's functions:
    imports, definitions and assignments that call nothing (no demo, plot or training)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return not any(isinstance(n, ast.Call) for n in ast.walk(node))
    return False


def _graded_test(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def definitions(source_path) -> dict:
    """The namespace of the source notebook's definitions (cached per file and version)."""
    path = Path(source_path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _namespaces:
        namespace: dict = {"__name__": "solution_notebook"}
        for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
            if cell.get("cell_type") != "code" or _graded_test(cell):
                continue
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else source
            try:
                tree = ast.parse(zygote.neutralise_magics(source))
            except SyntaxError:
                continue
            for node in tree.body:
                if _kept(node):
                    module = ast.Module(body=[node], type_ignores=[])
                    # a statement that needs what did not run (a demo's data) is left out
                    with contextlib.suppress(Exception):
                        exec(compile(module, str(path), "exec"), namespace)  # noqa: S102
        _namespaces.clear()  # one notebook at a time: a batch grades one assignment
        _namespaces[key] = namespace
    return _namespaces[key]


def solution_of(spec) -> dict | None:
    """The solution's namespace for an assignment's spec (``assignment_spec.AssignmentSpec``); None
    where it has no source notebook to read (its callers are then sent no table)."""
    path = getattr(spec, "source_path", None)
    if path is None or not Path(path).is_file():
        return None
    return definitions(path)


def _parameters(function) -> tuple[list[str], dict]:
    signature = inspect.signature(function)
    params = [
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    defaults = {
        p.name: p.default
        for p in signature.parameters.values()
        if p.default is not inspect.Parameter.empty
    }
    return params, defaults


def record(namespace: dict, caller: str, callees, case) -> dict:
    """The calls the solution ``caller`` makes to each of ``callees`` on ``case``: callee ->
    [(arguments by name, the callee's answer)], with the callee's parameters and defaults.
    {} where the solution lacks a function or raises on the case (an error case)."""
    if not callable(namespace.get(caller)) or not all(callable(namespace.get(c)) for c in callees):
        return {}
    own = {name: namespace[name] for name in callees}
    calls: dict = {name: [] for name in callees}

    def recording(name):
        params, _defaults = _parameters(own[name])
        signature = inspect.signature(own[name])

        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = {k: _stored(v) for k, v in bound.arguments.items() if k in params}
            result = own[name](*args, **kwargs)
            calls[name].append((given, result))
            return result

        return wrapper

    try:
        for name in callees:
            namespace[name] = recording(name)
        args, kwargs = case.fresh()
        with contextlib.redirect_stdout(io.StringIO()):
            namespace[caller](*args, **kwargs)
    except Exception:  # noqa: BLE001 - the solution raises on this case: nothing to answer
        return {}
    finally:
        namespace.update(own)
    return {name: (*_parameters(own[name]), calls[name]) for name in callees if calls[name]}


def _stored(value):
    """An argument as recorded: arrays copied (a caller may write into them later)."""
    return np.array(value) if isinstance(value, np.ndarray) else value


def encode(recorded: dict, arrays: dict) -> dict:
    """The tables of one case as the sandbox is sent them (``zygote.answering`` reads them),
    their arrays added to ``arrays``; {} if a call has no key, a value cannot be encoded or
    the sealed answers are over ``MAX_TABLE_BYTES``. A table holds each callee's parameter
    names and defaults (the source notebook's, which the student's notebook shows) and its
    answers, each sealed with the key of its call's arguments (``zygote.call_keys``) and
    filed under that key's id: never an argument of any call."""
    try:
        sealed = {
            name: _sealed(name, params, entries)
            for name, (params, _defaults, entries) in recorded.items()
        }
        for _params, defaults, _entries in recorded.values():
            for value in defaults.values():
                casefile.encode(value, {})  # nothing is added to ``arrays`` unless all encodes
    except (TypeError, ValueError):
        return {}
    if sum(a.nbytes for answers in sealed.values() for a in answers.values()) > MAX_TABLE_BYTES:
        return {}
    return {
        name: {
            "name": name,
            "params": list(params),
            "defaults": {k: casefile.encode(v, arrays) for k, v in defaults.items()},
            "answers": {i: casefile.encode(a, arrays) for i, a in sealed[name].items()},
        }
        for name, (params, defaults, _entries) in recorded.items()
    }


def _sealed(name: str, params, entries) -> dict:
    """answer id -> the answer sealed with its call's key, for each recorded call of the
    callee ``name`` (the first answer where two calls have one key)."""
    sealed: dict = {}
    for given, result in entries:
        keys = zygote.call_keys(name, params, given, spread=False)
        if len(keys) != 1:
            raise ValueError(f"a call to {name} has no key")
        plain = answer_bytes(result)
        sealed.setdefault(zygote.answer_id(keys[0]), zygote.seal(keys[0], plain))
    return sealed


def answer_bytes(result) -> bytes:
    """A callee's answer (a value or a tuple of values, each one a case value can be) as the
    bytes a table seals: the length of a JSON header, the header (whether it is a tuple, and
    each value's spec, ``casefile.encode``) and a ``.npz`` of its arrays; ``zygote.answer_value``
    reads them. TypeError for a value the case format cannot carry."""
    arrays: dict = {}
    parts = result if isinstance(result, tuple) else (result,)
    specs = [casefile.encode(part, arrays) for part in parts]
    head = json.dumps({"tuple": isinstance(result, tuple), "parts": specs}).encode()
    return len(head).to_bytes(4, "big") + head + frames.pack(arrays)
