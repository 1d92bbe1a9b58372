"""The check data of one assignment: every case of every check call, for one seed.

For each check call of the source notebook's test cells (``tasks_of``), every case of that
check from the registry (``autograder.checks``: public cases, then the seed's hidden ones)
made whole by ``checks.prepare`` (one ``contract.Case`` with the reference's answer and the
declared mistakes' answers; neither ever leaves the trusted side), cached per process
(``cases_for``); and what the sandbox is sent of them (``make_cases_payload``: the cases'
arguments encoded with the codec's writer, ``autograder.casefile``, their arrays as one
``.npz``).
"""

from __future__ import annotations

import threading

from autograder import casefile, frames
from autograder.contract import Case

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


def cases_for(reg, check: str, seed: int) -> list[Case]:
    """Every case of one check, made whole (``checks.prepare``: the reference's answer and the
    mistakes' answers, which never leave this side; only args and kwargs go to the sandbox,
    encoded): public cases first, then hidden."""

    def make():
        public = [reg.prepare(check, case) for case in reg.public_cases(check)]
        return public + [reg.prepare(check, c, hidden=True) for c in reg.hidden_cases(check, seed)]

    return _cached((reg.__name__, check, seed), make)


def tasks_of(spec) -> list[tuple[str, str, str]]:
    """(test grade_id, check name, function name) for every check call of every test cell."""
    return [
        (test.grade_id, check, function) for test in spec.tests for check, function in test.checks
    ]


def make_cases_payload(spec, reg, seed: int) -> tuple[list, bytes, list]:
    """(the tasks with their encoded cases, the cases' arrays as npz, [Case] per task)."""
    arrays: dict = {}
    tasks, all_cases = [], []
    for _grade_id, check, function in tasks_of(spec):
        cases = cases_for(reg, check, seed)
        all_cases.append(cases)
        encoded = [
            {
                "args": [casefile.encode(a, arrays) for a in case.args],
                "kwargs": {k: casefile.encode(v, arrays) for k, v in case.kwargs.items()},
            }
            for case in cases
        ]
        tasks.append({"check": check, "function": function, "cases": encoded})
    return tasks, frames.pack(arrays), all_cases
