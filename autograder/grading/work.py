"""Prepare: everything the workers need for one assignment, built once per grading call.

``prepare`` puts together the four things every submission of the assignment needs
(``AssignmentWork``): the spec from the source notebook (``autograder.checking.notebook``), the
release's public files (``public_files``), the chapter's limits and intake caps (``limits``)
and its check data (``check_data``: the tasks and the public cases), with what the sandbox
must preload. It pickles: a Dask worker needs no course folder. ``Preparing``
(``preparing``) runs it in a forked child, which then makes each submission's hidden cases
(``hidden_for``); one submission's bytes and its hidden cases travel as a ``GradeJob``
(``jobs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from autograder import chapters  # noqa: F401 - every chapter registered
from autograder.checking import checks
from autograder.checking import notebook as nbparse
from autograder.checking.assignment_spec import AssignmentSpec, load_assignment
from autograder.grading.check_data import CaseSet, public_case_set, tasks_of
from autograder.grading.public_files import release_files, release_root
from autograder.sandbox import DEFAULT_LIMITS, FULL_PRELOAD, Limits, budgets, preload_for

#: the check registry: the chapter plug-ins, their cases, references and limits
REGISTRY: ModuleType = checks


@dataclass(frozen=True)
class AssignmentWork:
    """What every submission of one assignment needs, built once by the instructor's process
    and sent to the workers (a Dask worker needs no course folder and no shared disk): the
    spec from the source notebook, the release's public files, the chapter's check data (its
    tasks, the public cases with their answers and known mistakes, check specs), limits. Each
    submission's hidden cases come with its job (``GradeJob.hidden``), from the batch
    ``seed`` and the student (``check_data.hidden_seed``)."""

    assignment: str
    seed: int  # the batch's seed
    spec: AssignmentSpec
    release_files: dict  # file name -> bytes (the public release folder, no notebook)
    tasks: tuple  # (check_data.Task, ...): one per check call, in order
    public: CaseSet  # the public run's cases, the same for every submission
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
    spec: AssignmentSpec | None = None,
) -> AssignmentWork:
    """Everything the workers need for this assignment (the trusted side computes every
    expected answer; workers never import the reference package). ``limits``: the
    instructor's explicit limits (layered by ``autograder.sandbox.budgets.resolve``)."""
    reg = registry
    spec = spec or load_assignment(course, assignment)
    tasks = tasks_of(spec)
    specs = {task.check: reg.spec(task.check) for task in tasks}
    return AssignmentWork(
        assignment,
        seed,
        spec,
        release_files(course, assignment),
        tasks,
        public_case_set(spec, reg),
        specs,
        budgets.resolve(reg.chapter(assignment), limits),
        sandboxed,
        preload_for(spec.imports),
        budgets.resolve_caps(reg.chapter(assignment), limits),
    )
