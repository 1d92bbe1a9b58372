"""The check data of one assignment: every case of every check call, for one seed.

For each check call of the source notebook's test cells (``tasks_of``), every case of that
check from the registry (``autograder.checks``: public cases, then the seed's hidden ones)
with the reference's answer and the declared mistakes' answers (``PreparedCase``; neither ever
leaves the trusted side), cached per process (``cases_for``); and what the sandbox is sent of
them (``make_cases_payload``: the cases encoded with the contract's one codec, their arrays as
one ``.npz``).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from autograder import contract
from autograder.checks import Case

_cache: dict = {}
_cache_lock = threading.Lock()


def _cached(key, make):
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    value = make()
    with _cache_lock:
        _cache.setdefault(key, value)
        return _cache[key]


class PreparedCase(NamedTuple):
    """One case of one check as the trusted side holds it: the registry's `Case` (its name,
    args and kwargs, sent to the sandbox encoded), whether it is hidden, the reference's
    answer and the declared mistakes' answers (neither ever leaves this side)."""

    case: Case
    hidden: bool
    expected: object
    mistakes: dict


def cases_for(reg, check: str, seed: int) -> list[PreparedCase]:
    """Every case of one check: public cases first, then hidden."""

    def make():
        public = [(case, False) for case in reg.public_cases(check)]
        hidden = [(case, True) for case in reg.hidden_cases(check, seed)]
        return [
            PreparedCase(case, hidden, reg.expected(check, case), reg.mistake_outputs(check, case))
            for case, hidden in public + hidden
        ]

    return _cached((reg.__name__, check, seed), make)


def tasks_of(spec) -> list[tuple[str, str, str]]:
    """(test grade_id, check name, function name) for every check call of every test cell."""
    return [
        (test.grade_id, check, function) for test in spec.tests for check, function in test.checks
    ]


def make_cases_payload(spec, reg, seed: int) -> tuple[list, bytes, list]:
    """(the tasks with their encoded cases, the cases' arrays as npz, [(case, hidden, expected,
    mistakes)] per task)."""
    arrays: dict = {}
    tasks, all_cases = [], []
    for _grade_id, check, function in tasks_of(spec):
        cases = cases_for(reg, check, seed)
        all_cases.append(cases)
        encoded = [
            {
                "args": [contract.encode(a, arrays) for a in case.args],
                "kwargs": {k: contract.encode(v, arrays) for k, v in case.kwargs.items()},
            }
            for case, *_ in cases
        ]
        tasks.append({"check": check, "function": function, "cases": encoded})
    return tasks, contract.pack(arrays), all_cases
