"""The instructor's solutions in every source notebook agree with the reference package on
the hidden cases of every check (at the check's own tolerance), so the notebook a student
is graded against teaches the same thing the grader expects."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import seed_scan  # noqa: E402  (bench/seed_scan.py runs the same notebooks on thousands of seeds)

from autograder.checking import checks, judging  # noqa: E402
from autograder.student import contract  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignment", sorted(checks.CHAPTERS))
def test_source_solutions_pass_every_hidden_case(assignment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "attention_check", contract)  # what the release ships
    namespace = seed_scan.solved_namespace(assignment, tmp_path)
    for check in checks.checks_for(assignment):
        fn = namespace[check.name]
        for seed in (1, 2024):
            cases = [
                checks.prepare(check.name, case, hidden=True)
                for case in checks.hidden_cases(check.name, seed)
            ]
            verdicts, _notes = judging.run_cases(checks.spec(check.name), fn, cases)
            failures = [v.message for v in verdicts if not v.passed]
            assert not failures, "\n".join(failures)
