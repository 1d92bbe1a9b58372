"""Prepare: everything the workers need for one assignment, built once per grading call.

`prepare` (or `Preparing`, which runs it in a forked child) reads the source notebook's spec,
the release's public files and the chapter's limits, and computes every case and expected
answer for the run's seed from the registry (`autograder.checks`); `make_job` carries one
submission's bytes. Both pickle: a Dask worker needs no course folder."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from autograder import budgets, casefile, checks, contract
from autograder import notebook as nbparse
from autograder.checks import Case
from autograder.grading import intake
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


def release_files(course: Path, assignment: str) -> dict:
    """The public release folder's files but the notebook: file name -> bytes."""
    folder = Path(course) / "release" / assignment
    if not folder.is_dir():
        return {}
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.suffix != ".ipynb"
    }


def release_root(assignment: str, files: dict) -> Path:
    """The release files, written once per process into a private folder (by content hash)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name])
    root = (
        Path(tempfile.gettempdir()) / f"autograder-release-{os.getuid()}-{digest.hexdigest()[:16]}"
    )
    folder = root / assignment
    if not (root / "complete").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o755)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        (root / "complete").write_text("ok")
    return root


@dataclass(frozen=True)
class GradeJob:
    """One submission: its bytes travel with the job. ``refused``: why its notebook was not
    read (over the size cap, not a regular file, missing); then ``notebook`` is empty."""

    student: str
    notebook: bytes
    sha256: str
    refused: str = ""


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
        budgets.resolve_caps(reg.chapter(assignment), limits),
    )


class Preparing:
    """`prepare` in a forked child while this process gets on (it imports nbgrader and checks
    the gradebook): the reference package (PyTorch, about a second) is imported there, not
    here. The child sends the chapter's limits first, so sandboxes can start, then the work.
    Where the reference package is already imported (a test, a second call) or threads run,
    it runs here."""

    def __init__(self, *args, fork: bool | None = None):
        self._args, self._pipe, self._child, self._limits = args, None, None, None
        if fork is None:  # only a one-thread process forks: no lock can be held in the child
            fork = "solutions" not in sys.modules and threading.active_count() == 1
        if not fork:
            return
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self._pipe, send = context.Pipe(duplex=False)
        self._child = context.Process(target=self._run_child, args=(send,), daemon=True)
        self._child.start()
        send.close()

    def _run_child(self, send) -> None:
        course, assignment, seed, limits, sandboxed, registry, spec = self._args
        try:
            chapter = registry.chapter(assignment)
            send.send(("limits", effective_limits(limits, chapter)))
            send.send(("work", prepare(*self._args)))
        except BaseException as err:  # noqa: BLE001 - raised again in the parent
            send.send(("error", err))

    def _receive(self, kind: str):
        try:
            got, value = self._pipe.recv()
        except EOFError:
            got, value = "error", RuntimeError("the process computing the check data died")
        if got == "error":
            self._child.join()
            raise value
        assert got == kind, (got, kind)
        return value

    def limits(self) -> Limits:
        if self._limits is None:
            if self._child is None:
                course, assignment, _seed, limits, _s, registry, _spec = self._args
                chapter = registry.chapter(assignment)
                self._limits = effective_limits(limits, chapter)
            else:
                self._limits = self._receive("limits")
        return self._limits

    def work(self) -> AssignmentWork:
        if self._child is None:
            return prepare(*self._args)
        self.limits()
        work = self._receive("work")
        self._child.join()
        return work


def make_job(course: Path, assignment: str, student: str, cap: int) -> GradeJob:
    """The submission as a job, its notebook read only if it is a regular file of at most
    ``cap`` bytes (``Limits.notebook_bytes``): a bigger one is never read whole."""
    path = submission_path(course, assignment, student)
    try:
        data, digest = intake.read_notebook(path, cap)
    except nbparse.InvalidNotebook as err:
        return GradeJob(student, b"", intake.refused_digest(path), refused=str(err))
    return GradeJob(student, data, digest)


def submission_path(course: Path, assignment: str, student: str) -> Path:
    return Path(course) / "submitted" / student / assignment / f"{assignment}.ipynb"


def effective_limits(explicit: Limits | dict | None, chapter) -> Limits:
    """A submission's limits: the defaults, then the budgets derived from the chapter's
    reference time, then the chapter's own ``limits``, then the instructor's ``explicit``
    ones, which always win: a dict of the fields the instructor set (the command line), or a
    whole ``Limits`` (every field set). ``autograder.budgets.resolve`` is the one place."""
    return budgets.resolve(chapter, explicit)


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
    return tasks, contract.pack(arrays), all_cases
