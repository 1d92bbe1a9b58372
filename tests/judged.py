"""A function judged on a check's cases as the student's checker and the grader judge it: the
one place the chapters' answers tests run a corpus of wrong implementations.

Judge-level: cases are prepared on the trusted side and judged by ``judging.run_cases`` (every
case, then the rule that a derived mistake, or a hand one declared ``everywhere``, is named
only where every failing case agrees); nothing here starts a sandbox.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autograder.checking import checks, judging, messages


def cases(
    name: str, seeds: Iterable[int], language: str = messages.ENGLISH, plain: bool = True
) -> list:
    """The check's public cases, then its hidden cases of each of ``seeds``, prepared (their
    answers and mistakes worded in ``language``). ``plain=False`` leaves out the cases judged
    against the reference alone (``checks.Plain``: the memory case), which no mistake names."""
    out = [checks.prepare(name, c, language=language) for c in checks.public_cases(name)]
    for seed in seeds:
        out += [
            checks.prepare(name, c, hidden=True, language=language)
            for c in checks.hidden_cases(name, seed)
            if plain or not isinstance(c, checks.Plain)
        ]
    return out


def verdicts(
    name: str, fn, seeds: Iterable[int], language: str = messages.ENGLISH, plain: bool = True
) -> list[judging.Verdict]:
    """Every verdict of ``fn`` on ``cases(name, seeds, language, plain)``, worded in
    ``language``."""
    prepared = cases(name, seeds, language, plain)
    with np.errstate(all="ignore"):
        out, _notes = judging.run_cases(checks.spec(name, language), fn, prepared, language)
    return out


def failing(
    name: str, fn, seeds: Iterable[int], language: str = messages.ENGLISH, plain: bool = True
) -> list[judging.Verdict]:
    """The verdicts of ``verdicts`` that failed."""
    return [v for v in verdicts(name, fn, seeds, language, plain) if not v.passed]
