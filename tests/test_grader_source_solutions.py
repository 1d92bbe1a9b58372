"""The instructor's solutions in every source notebook agree with the reference package on
the hidden cases of every check (at the check's own tolerance), so the notebook a student
is graded against teaches the same thing the grader expects."""

from __future__ import annotations

import sys

import nbformat
import pytest

from autograder import checks, contract, release
from autograder.notebook import strip_hidden_tests

pytestmark = pytest.mark.slow


def _solved_namespace(assignment: str, folder) -> dict:
    """Run the source notebook's code cells (solutions in, test cells out) in a namespace."""
    for name, write in checks.chapter(assignment).support_files.items():
        write(folder / name)
    source = nbformat.read(release.COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    namespace = {"__name__": "__main__"}
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        code = "\n".join(line for line in cell.source.split("\n") if " SOLUTION" not in line)
        exec(compile(strip_hidden_tests(code), f"<{assignment} {meta.get('grade_id')}>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("assignment", sorted(checks.CHAPTERS))
def test_source_solutions_pass_every_hidden_case(assignment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "attention_check", contract)  # what the release ships
    namespace = _solved_namespace(assignment, tmp_path)
    for check in checks.checks_for(assignment):
        fn = namespace[check.name]
        for seed in (1, 2024):
            cases = checks.hidden_cases(check.name, seed)
            failures, _notes = contract.run_cases(checks.spec(check.name), fn,
                                                  checks.contract_cases(check.name, cases), hidden=True)
            assert not failures, contract.summary(check.name, failures, len(cases), hidden=True)
