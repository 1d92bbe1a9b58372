"""Prepare: everything the workers need for one assignment, built once per grading call.

``prepare`` puts together, for the run's seed, the four things every submission of the
assignment needs (``AssignmentWork``): the spec from the source notebook
(``autograder.notebook``), the release's public files (``public_files``), the chapter's
limits and intake caps (``limits``) and its check data (``check_data``), with what the
sandbox must preload. It pickles: a Dask worker needs no course folder. ``Preparing``
(``preparing``) runs it in a forked child; one submission's bytes travel as a ``GradeJob``
(``jobs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from autograder import checks
from autograder import notebook as nbparse
from autograder.grading.check_data import make_cases_payload, tasks_of
from autograder.grading.limits import effective_caps, effective_limits
from autograder.grading.public_files import release_files, release_root
from autograder.sandbox import DEFAULT_LIMITS, FULL_PRELOAD, Limits, preload_for

#: the check registry: the chapter plug-ins, their cases, references and limits
REGISTRY: ModuleType = checks


@dataclass(frozen=True)
class AssignmentWork:
    """What every submission of one assignment needs, built once by the instructor's process
    and sent to the workers (a Dask worker needs no course folder and no shared disk): the
    spec from the source notebook, the release's public files, the chapter's check data for
    this run's seed (encoded cases, expected answers, known mistakes, check specs), limits."""

    assignment: str
    seed: int
    spec: nbparse.AssignmentSpec
    release_files: dict  # file name -> bytes (the public release folder, no notebook)
    tasks: list  # per task: {"check", "function", "cases": encoded}
    blob: bytes  # the cases' arrays (npz)
    all_cases: list  # per task: [Case] (contract.Case, made whole by checks.prepare)
    check_specs: dict  # check name -> contract spec
    limits: Limits = DEFAULT_LIMITS
    sandboxed: bool = True
    preload: tuple = FULL_PRELOAD  # what the zygote imports before it forks
    caps: nbparse.Caps = nbparse.DEFAULT_CAPS  # what a notebook may hold (cells, depth...)

    def release_root(self) -> Path:
        return release_root(self.assignment, self.release_files)


def prepare(
    course: Path,
    assignment: str,
    seed: int,
    limits: Limits | dict | None = None,
    sandboxed: bool = True,
    registry: ModuleType = REGISTRY,
    spec: nbparse.AssignmentSpec | None = None,
) -> AssignmentWork:
    """Everything the workers need for this assignment and seed (the trusted side computes
    every expected answer here; workers never import the reference package). ``limits``: the
    instructor's explicit limits (see ``effective_limits``)."""
    reg = registry
    spec = spec or nbparse.load_assignment(course, assignment)
    tasks, blob, all_cases = make_cases_payload(spec, reg, seed)
    specs = {check: reg.spec(check) for _g, check, _f in tasks_of(spec)}
    return AssignmentWork(
        assignment,
        seed,
        spec,
        release_files(course, assignment),
        tasks,
        blob,
        all_cases,
        specs,
        effective_limits(limits, reg.chapter(assignment)),
        sandboxed,
        preload_for(spec.imports),
        effective_caps(limits, reg.chapter(assignment)),
    )
