"""The check data of one assignment: its tasks, and the cases of each run, public and hidden.

A submission is run twice (``grading.run``): first on the public cases, whose full-detail
messages and cell outputs the student sees, then, in a fresh process, on its hidden cases, of
which only pass/fail and a fixed vocabulary leave. So the two runs get two ``CaseSet``s, and a
process that held a hidden input never produces anything a student sees in full.

- ``Task``: one check call of a test cell (its grade id, the check, the student's function).
- ``CaseSet``: the cases of one run, one tuple of ``contract.Case`` per task, made whole by
  ``checks.prepare`` (the reference's answer and the declared mistakes' answers, which never
  leave the trusted side), and what the sandbox is sent of them: the arguments encoded with
  the codec's writer (``autograder.checking.casefile``), their arrays as one ``.npz``.
- The public set is the same for every submission (``public_case_set``, cached per process).
  The hidden set is each submission's own (``hidden_case_set``), from ``hidden_seed``: the
  batch seed and the student id, so whatever one submission learns of its hidden inputs, by
  any channel, says nothing about the next submission's. A caller's hidden cases carry its
  callees' answers to the calls the solution makes, each sealed with its call's key and no
  argument of any call (``callees``).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import NamedTuple

from autograder.checking import casefile
from autograder.grading import callees
from autograder.student import frames
from autograder.student.contract import Case

_cache: dict = {}
_cache_lock = threading.Lock()


class Task(NamedTuple):
    """One check call of a test cell: ``check(<check>, <function>)`` in the cell ``grade_id``
    (a named tuple: ``grade_id, check, function = task`` reads it too)."""

    grade_id: str
    check: str
    function: str


@dataclass(frozen=True)
class CaseSet:
    """The cases one run gets: ``cases[t]`` the whole cases of task t (answers included, never
    sent), ``encoded[t]`` what the sandbox is sent of them, ``blob`` their arrays (npz)."""

    hidden: bool
    cases: tuple  # per task: tuple[Case]
    encoded: tuple  # per task: {"check", "function", "cases": [{"args", "kwargs"}]}
    blob: bytes

    def counts(self) -> list[int]:
        return [len(cases) for cases in self.cases]


def tasks_of(spec) -> tuple[Task, ...]:
    """Every check call of every test cell of the source notebook, in order."""
    return tuple(
        Task(test.grade_id, check, function)
        for test in spec.tests
        for check, function in test.checks
    )


def hidden_seed(batch_seed: int, student: str) -> int:
    """The seed of one student's hidden cases: derived from the batch's seed and the student
    id (a name from the gradebook, never one a submission chose), so a regrade in the same
    batch gives the same cases and no two students share theirs (but by a 2**-31 chance)."""
    digest = hashlib.sha256(f"hidden cases\0{int(batch_seed)}\0{student}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def case_set(tasks, cases: list, hidden: bool, tables: list | None = None) -> CaseSet:
    """The cases of one run (``cases[t]``: the whole cases of task t) with their encoding;
    ``tables[t][c]``: the sealed answers of task t's callees to the calls the solution makes
    on its case c (``callees.record``, ``callees.encode``), sent with the case (a hidden
    run's only)."""
    tables = tables or [[{}] * len(task_cases) for task_cases in cases]
    arrays: dict = {}
    encoded = tuple(
        {
            "check": task.check,
            "function": task.function,
            "cases": [
                {
                    "args": [casefile.encode(a, arrays) for a in case.args],
                    "kwargs": {k: casefile.encode(v, arrays) for k, v in case.kwargs.items()},
                    **({"calls": callees.encode(table, arrays)} if table else {}),
                }
                for case, table in zip(task_cases, task_tables, strict=True)
            ],
        }
        for task, task_cases, task_tables in zip(tasks, cases, tables, strict=True)
    )
    return CaseSet(hidden, tuple(tuple(c) for c in cases), encoded, frames.pack(arrays))


def _public(reg, check: str) -> list[Case]:
    """One check's public cases made whole, cached per process (the same for every batch)."""
    key = (reg.__name__, check)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    value = [reg.prepare(check, case) for case in reg.public_cases(check)]
    with _cache_lock:
        return _cache.setdefault(key, value)


def _hidden(reg, check: str, seed: int) -> list[Case]:
    return [reg.prepare(check, c, hidden=True) for c in reg.hidden_cases(check, seed)]


def _tables(reg, check: str, cases: list, solution: dict | None) -> list[dict]:
    """A caller's (``Check.calls``) tables, one per case: the calls the solution makes to its
    callees on it, with their answers, as recorded on the trusted side (encoded, sealed, for
    the sandbox by ``callees.encode``); {} for a check that calls none."""
    calls = reg.spec(check).calls if solution is not None else ()
    return [callees.record(solution, check, calls, case) if calls else {} for case in cases]


def cases_for(reg, check: str, seed: int) -> list[Case]:
    """Every case of one check, made whole: public cases first, then the seed's hidden ones."""
    return _public(reg, check) + _hidden(reg, check, seed)


def public_case_set(spec, reg) -> CaseSet:
    """The public run's cases: the same for every submission of the assignment."""
    tasks = tasks_of(spec)
    return case_set(tasks, [_public(reg, task.check) for task in tasks], hidden=False)


def hidden_case_set(spec, reg, seed: int) -> CaseSet:
    """One submission's hidden run: the hidden cases of ``seed`` (``hidden_seed``), never
    cached (each submission has its own)."""
    tasks = tasks_of(spec)
    solution = callees.solution_of(spec)
    cases = [_hidden(reg, task.check, seed) for task in tasks]
    tables = [_tables(reg, t.check, c, solution) for t, c in zip(tasks, cases, strict=True)]
    return case_set(tasks, cases, hidden=True, tables=tables)
