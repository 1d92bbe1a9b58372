"""The check registry: every graded function, declared once by the chapter that owns it.

This is grading *core*: it names no chapter. Each chapter is a plug-in module
``autograder/chapters/<assignment id>.py`` that ends with ``register(Chapter(...))``;
importing ``autograder.chapters`` loads every such module (this module imports none). A `Check` names the reference function of
``solutions`` that answers (the function itself; a `LazyFunction` where its module imports
PyTorch, so that loading the registry never does), how to build test inputs from a seed, the tolerance (the same for public
and hidden cases; with a declared ``scale`` it follows each case's conditioning), the hints a student sees, and known mistakes whose outputs are recognised
and named.

- ``public_cases`` / ``hidden_cases``: the check's case factory driven by the fixed public
  seed, or by a seed chosen at grading time (a different stream).
- ``expected`` / ``spec`` / ``mistake_outputs``: the reference answer, the public part of the
  check (it ships in ``public_cases.npz``) and the known mistakes' outputs for a case;
  ``prepare`` makes a chapter's ``Case`` whole with them (``contract.Case``: the one shape a
  case has, from the plug-in to the report).
- A case is judged by ``autograder.checking.judging.judge`` (the grader's one judge: the
  student's checker's own ``contract.judge`` for a public case, the fixed hidden wording for
  a hidden one), so a failure reads the same everywhere.
- ``run_hidden``: the in-kernel hidden check that stock ``nbgrader autograde`` runs.
- Input builders the chapters share (``normal``, ``lengths_mask``, ``distinct_sizes``,
  ``scaled_query``), ``lazy_module`` and the hints several chapters give.

Trusted side only: the chapter plug-ins import ``solutions`` (torch-backed modules lazily,
through ``lazy_module``); none of this ever ships.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import pathlib
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autograder.checking import casefile, diagnosis, judging
from autograder.student import contract
from autograder.student.contract import Case, Outcome, Seeded, Verdict, normalise

__all__ = [
    "Seeded",
    "Case",
    "Plain",
    "Verdict",
    "Check",
    "Mistake",
    "told_apart",
    "Chapter",
    "register",
    "REGISTRY",
    "CHAPTERS",
    "public_cases",
    "hidden_cases",
    "expected",
    "prepare",
    "normalise",
    "compare",
    "run_hidden",
    "spec",
    "mistake_outputs",
    "checks_for",
    "chapter",
]

#: the seed of the public cases (hidden cases mix the grading seed with a different stream)
PUBLIC_SEED = 20240
#: run_hidden's seed when none is given: the environment variable, else this one
DEFAULT_HIDDEN_SEED = 7
HIDDEN_SEED_ENV = "ATTENTION_HIDDEN_SEED"


@dataclass(frozen=True)
class Plain(Case):
    """A hidden case judged against the reference alone: ``public_cases`` leaves it out (so
    neither the release nor a student's checker computes it) and ``mistake_outputs`` gives it
    no known or derived mistake. For a case too large for them (the online backward's memory
    case: each mistake would cost the trusted side another whole computation of every
    student's case, some the very matrix the case forbids), and for a corner of the documented
    shapes where the known mistakes coincide (one key and every width 1: a gate inside the
    softmax is then a gate ignored), where naming one would mislead."""


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation: ``outputs`` takes the case's arguments and returns
    what that wrong implementation would; a student whose result matches gets ``hint``.
    ``everywhere``: named only where every failing case agrees, as a derived mistake is
    (``contract.consistent``), for a mistake whose outputs coincide with another's on a
    degenerate case (one key, a far query, a one-hot row)."""

    hint: str
    outputs: Callable[..., Any]
    everywhere: bool = False


def _fingerprint(value):
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str, zlib.crc32(value.tobytes()))
    if isinstance(value, (tuple, list)):
        return tuple(_fingerprint(v) for v in value)
    return repr(value)


def _same_outputs(a, b) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape
        and (
            np.array_equal(x, y)
            if x.dtype == bool or y.dtype == bool
            else np.allclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True)
        )
        for x, y in zip(a, b)
    )


def told_apart(*mistakes: Mistake) -> tuple[Mistake, ...]:
    """The mistakes, each withdrawn from a case where its outputs are an earlier one's (two
    mistakes may coincide on a case: one unscaled attention and two when the softmax
    saturates, a mask applied after sparsemax and masked scores set to 0 on an empty row).
    There the earlier hint speaks, and every declared mistake is named by its own hint on
    the cases where it shows (``tests/test_checks.py`` checks both). Each mistake's outputs
    are computed once per case (a small memo keyed by the arguments' bytes)."""
    memo: dict = {}

    def run(k, args, kwargs):
        key = (k, _fingerprint(args), _fingerprint(sorted(kwargs.items())))
        if key not in memo:
            if len(memo) > 512:
                memo.clear()
            try:
                memo[key] = normalise(mistakes[k].outputs(*args, **kwargs))
            except (ValueError, TypeError, IndexError) as error:
                memo[key] = error
        return memo[key]

    def withdrawn_if_earlier(k):
        def outputs(*args, **kwargs):
            mine = run(k, args, kwargs)
            if isinstance(mine, Exception):
                raise ValueError("this mistake has no meaning for this case") from mine
            for j in range(k):
                other = run(j, args, kwargs)
                if not isinstance(other, Exception) and _same_outputs(mine, other):
                    raise ValueError("the same outputs as an earlier mistake's: it speaks")
            return mine

        return outputs

    return tuple(
        Mistake(m.hint, withdrawn_if_earlier(k), m.everywhere) for k, m in enumerate(mistakes)
    )


@dataclass(frozen=True)
class Check:
    name: str  # registry key and the name of the student's function
    # the reference function of ``solutions`` (a `LazyFunction` where its module imports torch)
    reference: Callable
    make_cases: Callable[[np.random.Generator], list]  # rng -> [Case]
    outputs: tuple = ("output",)  # names of the returned arrays, used in messages
    rtol: float = 1e-6
    atol: float = 1e-9
    hints: dict = field(default_factory=dict)  # "kind" or "output.kind" -> hint text
    mistakes: tuple = ()  # Mistake, ...
    comparator: dict = field(default_factory=lambda: {"kind": "allclose"})
    # answer(case) -> the expected return value; default: the reference called on the case.
    # A function of the case's arguments alone, as the reference is: the diagnosis calls it
    # on changed arguments (``diagnosis.transformations``)
    answer: Callable[[Case], Any] | None = None
    # scale(*args, **kwargs) -> one magnitude per output (an array broadcastable to it): the
    # size of the terms the output is computed from; the absolute tolerance is atol * scale,
    # so atol is then a number of float64 ulps of those terms. None: atol is absolute.
    scale: Callable[..., tuple] | None = None
    # the other graded functions (check names) the student's function is asked to call, as
    # the source notebook's solution does: in the hidden run they answer its calls with the
    # solution's answers, and where one fails its own check this one's failing public cases
    # are not counted (``autograder.grading.callees``)
    calls: tuple = ()
    assignment: str = ""  # set by register()


@dataclass(frozen=True)
class Chapter:
    """One assignment's plug-in: its checks, its limits and the files its release ships.

    reference_seconds: the wall time of the solved source notebook graded in a warm sandbox
        (measured with ``python -m autograder.grading.measure``; say in a comment when and
        how): the chapter's cell, task and submission budgets derive from it
        (``autograder.sandbox.budgets``).
        None: ``Limits()``'s defaults.
    limits: overrides of ``autograder.sandbox.Limits`` fields for this assignment, e.g.
        ``{"memory_bytes": 3 << 30}``; they win over the derived budgets, and an instructor's
        command-line limit wins over them.
    support_files: file name -> ``write(path)``; written next to the source notebook before
        the release, so nbgrader ships them (and copies them over a submission to grade it).
    """

    assignment: str
    checks: tuple
    limits: dict = field(default_factory=dict)
    reference_seconds: float | None = None
    support_files: dict = field(default_factory=dict)


REGISTRY: dict[str, Check] = {}
CHAPTERS: dict[str, Chapter] = {}


def register(chapter: Chapter) -> Chapter:
    """Add a chapter's checks to the registry (called once at the end of its module)."""
    checks = tuple(dataclasses.replace(c, assignment=chapter.assignment) for c in chapter.checks)
    for check in checks:
        owner = REGISTRY.get(check.name)
        if owner is not None and owner.assignment != chapter.assignment:
            raise ValueError(
                f"check {check.name!r} of {chapter.assignment} is already registered by "
                f"{owner.assignment}: check names are function names and must be unique"
            )
    chapter = dataclasses.replace(chapter, checks=checks)
    CHAPTERS[chapter.assignment] = chapter
    REGISTRY.update({c.name: c for c in checks})
    return chapter


def __getattr__(name: str):
    if name == "ASSIGNMENTS":  # computed on use: every registered chapter, in id order
        return tuple(sorted(CHAPTERS))
    raise AttributeError(name)


# ----------------------------------------------------------------------------------------
# input builders and hints the chapters share


class LazyFunction:
    """A reference function of a module that imports PyTorch, imported on its first call.

    Loading the registry imports every chapter plug-in: every CLI command, every grading
    process and every in-kernel hidden check does. Importing a torch-backed reference module
    there would add PyTorch's import (about 1.5 to 3 s, and its memory) to each of them,
    though only ``grading.work.Preparing``'s forked child and ``run_hidden`` ever call a
    reference. ``module`` and ``name`` say which function it is; ``resolve()`` is the function.
    """

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def resolve(self) -> Callable:
        return getattr(importlib.import_module(self.module), self.name)

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __repr__(self):
        return f"<reference {self.module}.{self.name}, imported on first call>"


class LazyModule:
    """A torch-backed reference module as a chapter plug-in names it:
    ``m = lazy_module("solutions.<m>")``, then ``m.<function>`` is a `LazyFunction`. A module
    without torch is imported as usual (``from solutions import <m>``)."""

    def __init__(self, name: str):
        self.__name__ = name

    def __getattr__(self, attr: str) -> LazyFunction:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return LazyFunction(self.__name__, attr)


def lazy_module(name: str) -> LazyModule:
    return LazyModule(name)


def reference_name(fn) -> str:
    """``module.function`` of a check's reference (a function or a `LazyFunction`)."""
    if isinstance(fn, LazyFunction):
        return f"{fn.module}.{fn.name}"
    return f"{fn.__module__}.{fn.__qualname__}"


def normal(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape)


def lengths_mask(rng, batch: int, n: int, empty: bool = False) -> np.ndarray:
    """(batch, n) padding mask with random lengths in [1, n], the last row full; row 0 is
    empty if ``empty``."""
    lens = rng.integers(1, n + 1, size=batch)
    lens[-1] = n
    if empty:
        lens[0] = 0
    return np.arange(n)[None, :] < lens[:, None]


def distinct_sizes(rng, low: int, high: int, k: int) -> list[int]:
    """k distinct sizes in [low, high] (distinct, so n_q != n_k and a transpose is caught)."""
    return [int(s) for s in rng.choice(np.arange(low, high + 1), size=k, replace=False)]


def scaled_query(reference: Callable, arg: int, width: Callable[[tuple], int]) -> Callable:
    """The reference with argument ``arg`` multiplied by sqrt(width(args)): what a function
    that forgot to divide its scores by sqrt(d) returns."""

    def outputs(*args, **kwargs):
        args = list(args)
        args[arg] = np.asarray(args[arg]) * math.sqrt(width(tuple(args)))
        return reference(*args, **kwargs)

    return outputs


HINT_EMPTY = (
    "a row (or sequence) with nothing allowed must give zeros, not 0/0: guard the "
    "division where the total is 0"
)
HINT_MAX_SHIFT = (
    "subtract the row maximum before exp (max-shifted softmax): exp of a large score overflows"
)


# ----------------------------------------------------------------------------------------
# the registry's answers


def _get(name: str) -> Check:
    try:
        return REGISTRY[name]
    except KeyError:
        if not REGISTRY:
            raise ValueError(
                f"unknown check {name!r}: no chapter is registered (import autograder.chapters)"
            ) from None
        raise ValueError(
            f"unknown check {name!r}; known checks: {', '.join(sorted(REGISTRY))}"
        ) from None


def chapter(assignment: str) -> Chapter:
    try:
        return CHAPTERS[assignment]
    except KeyError:
        raise ValueError(
            f"unknown assignment {assignment!r}; expected one of {tuple(sorted(CHAPTERS))}"
        ) from None


def checks_for(assignment: str) -> list[Check]:
    """The checks of one assignment, in the order the chapter declares them."""
    return list(chapter(assignment).checks)


def public_cases(name: str) -> list[Case]:
    """The public cases of a check (fixed seed): what ships in public_cases.npz."""
    cases = _get(name).make_cases(np.random.default_rng([PUBLIC_SEED, zlib.crc32(name.encode())]))
    return [case for case in cases if not isinstance(case, Plain)]


def hidden_cases(name: str, seed: int) -> list[Case]:
    """Fresh cases from the grading seed (a different stream from the public one)."""
    return list(
        _get(name).make_cases(np.random.default_rng([int(seed), zlib.crc32(name.encode()), 1]))
    )


def call(fn, case: Case):
    """``fn`` called on the case's arguments as a function receives them (through the codec)."""
    args, kwargs = casefile.as_stored(case).fresh()
    return fn(*args, **kwargs)


def expected(name: str, case: Case) -> contract.Expected:
    """The reference answer for a case, normalised to a tuple of arrays, with the check's
    scale of every output for this case (``contract.Expected``; None if it declares none)."""
    check = _get(name)
    if check.answer is not None:
        arrays = normalise(check.answer(case))
    else:
        arrays = normalise(call(check.reference, case))
    if check.scale is None:
        return contract.Expected(arrays)
    scales = tuple(np.asarray(s, dtype=np.float64) for s in call(check.scale, case))
    if len(scales) != len(arrays) or any(
        np.broadcast_shapes(s.shape, a.shape) != a.shape for s, a in zip(scales, arrays)
    ):
        raise ValueError(
            f"check {name!r}: its scale gives shapes {[s.shape for s in scales]} for outputs "
            f"of shapes {[a.shape for a in arrays]}: give one magnitude per output"
        )
    return contract.Expected(arrays, scales)


# ----------------------------------------------------------------------------------------
# the hints in the student's language: one catalog per chapter, in gettext's format
#
# A hint is written once, in English, where the check declares it (``hints`` and
# ``Mistake.hint``). Its Chinese lives in ``locale/zh_CN/LC_MESSAGES/checks/<assignment>.po``
# (msgid: the English hint, exactly; msgstr: its translation), and the hints every chapter
# shares (the ``HINT_*`` constants above) in ``checks/shared.po``. The Chinese release ships
# its public cases with the Chinese hints; ``tools/translations.py`` writes the templates
# (``update``) and reports a hint without a finished translation (``check``).

LANGUAGES = ("en", "zh_CN")
CATALOGS_ROOT = pathlib.Path(__file__).resolve().parents[2] / "locale"
SHARED_HINTS = "shared"


def hint_catalog_path(domain: str, language: str = "zh_CN") -> pathlib.Path:
    """The .po file of a chapter's hints (domain: its assignment id) or of the shared ones."""
    return CATALOGS_ROOT / language / "LC_MESSAGES" / "checks" / f"{domain}.po"


def shared_hints() -> list[str]:
    """The hints this module declares for every chapter (the ``HINT_*`` constants)."""
    return [
        value
        for key, value in sorted(globals().items())
        if key.startswith("HINT_") and isinstance(value, str)
    ]


def hint_texts(assignment: str) -> list[str]:
    """Every hint a chapter's checks can show that is its own (not a shared one), in order."""
    shared, texts = set(shared_hints()), []
    for check in checks_for(assignment):
        for text in [*check.hints.values(), *(m.hint for m in check.mistakes)]:
            if text not in shared and text not in texts:
                texts.append(text)
    return texts


_CATALOGS: dict = {}


def _catalog(domain: str, language: str) -> dict:
    key = (domain, language)
    if key not in _CATALOGS:
        from autograder.checking.assignment_text import read_catalog

        _CATALOGS[key] = read_catalog(hint_catalog_path(domain, language))
    return _CATALOGS[key]


def translated_hint(text: str, language: str, assignment: str | None = None) -> str:
    """A hint in ``language`` (the language of the notebook it is for): from the catalog of
    ``assignment`` first, then the other chapters' and the shared one (a grader that learns a
    submission's language from its notebook may not know which chapter a hint came from);
    English where no finished translation exists (``tools/translations.py check`` reports
    every such hint). The one translation of a hint; ``messages.say`` words the catalog's
    fixed messages."""
    if language == "en" or not text:
        return text
    first = [assignment] if assignment else []
    domains = first + [c for c in sorted(CHAPTERS) if c != assignment] + [SHARED_HINTS]
    for domain in domains:
        translated = _catalog(domain, language).get(text)
        if translated:
            return translated
    derived = diagnosis.translated(text, language)
    if derived:
        return derived
    key, numbers = numbers_as_placeholders(text)
    for domain in domains if numbers else ():
        translated = _catalog(domain, language).get(key)
        if translated:
            return NUMBERED_PLACEHOLDER.sub(lambda m: numbers[int(m.group(1))], translated)
    return text


NUMBERED_PLACEHOLDER = re.compile(r"\{(\d+)\}")


def numbers_as_placeholders(text: str) -> tuple[str, list[str]]:
    """A text with each number (run of digits) written ``{0}``, ``{1}``..., and the numbers:
    the catalog key of a text made from sizes a seed chooses (a hidden case's name, "no
    mask, T = {0} steps over n = {1} words"), translated once for every size."""
    numbers = re.findall(r"\d+", text)
    counter = iter(range(len(numbers)))
    return re.sub(r"\d+", lambda _: f"{{{next(counter)}}}", text), numbers


def spec(name: str, language: str = "en") -> contract.Spec:
    """The public part of a check: what ``contract.judge`` needs; it ships (as JSON, in
    ``public_cases.npz``), its hints in ``language``."""
    check = _get(name)
    return contract.Spec(
        check.name,
        tuple(check.outputs),
        check.rtol,
        check.atol,
        {k: translated_hint(v, language, check.assignment) for k, v in check.hints.items()},
        dict(check.comparator),
        tuple(check.calls),
    )


def mistake_outputs(
    name: str,
    case: Case,
    language: str = "en",
    answer: contract.Expected | None = None,
    hidden: bool = False,
) -> list[tuple[str, tuple[np.ndarray, ...]]]:
    """(hint, normalised outputs) of every known mistake that applies to this case, then of
    every systematic mistake derived from the reference (``diagnosis.transformations``: for a
    ``hidden`` case, named by its kind alone) whose outputs differ from the reference's
    (``answer``, computed if not given) and from every earlier derived one's on this case."""
    check, out = _get(name), []
    if isinstance(case, Plain):
        return out  # judged against the reference alone
    for mistake in check.mistakes:
        try:
            outputs = normalise(call(mistake.outputs, case))
        except (ValueError, TypeError, IndexError):
            continue  # this mistake has no meaning for this case (e.g. window - 1 < 0)
        if mistake.everywhere:  # named only where every failing case agrees
            outputs = contract.Derived(outputs)
        out.append((translated_hint(mistake.hint, language, check.assignment), outputs))
    answer = expected(name, case) if answer is None else answer
    scales = answer.scale or (None,) * len(answer)
    derived: list = []  # a known mistake's twin stays: the known one speaks first, and the
    # derived one is still there for the all-failing-cases rule (``contract.consistent``)
    for hint, outputs in diagnosis.transformations(check, case, tuple(answer), language, hidden):
        same = contract._matches(tuple(answer), outputs, check.rtol, check.atol, scales)
        # a recipe costs a few numbers: kept even where an earlier one gives the same outputs,
        # so that a transformation is present wherever it applies (the rule needs that)
        cheap = isinstance(outputs, casefile.Recipe)
        if same or not cheap and any(_same_outputs(outputs, e) for _, e in derived):
            continue
        derived.append((hint, outputs))
    return out + derived


def prepare(name: str, case: Case, hidden: bool = False, language: str = "en") -> Case:
    """A chapter's case made whole for judging: its arguments as stored, the reference's
    answer, the known mistakes' outputs (named in ``language``, as is the case itself) and
    whether it is hidden."""
    stored = casefile.as_stored(case)
    answer = expected(name, stored)
    return dataclasses.replace(
        stored,
        name=translated_hint(stored.name, language, _get(name).assignment),
        expected=answer,
        mistakes=tuple(mistake_outputs(name, stored, language, answer, hidden)),
        hidden=hidden,
    )


def localised(check_spec: contract.Spec, case: Case, language: str) -> tuple[contract.Spec, Case]:
    """A check's spec and a prepared case with their hints (and the case's name) in
    ``language``: the grader prepares both once per assignment, in English, and learns a
    submission's language from its notebook (``autograder.checking.messages.language_of``)."""
    if language == "en":
        return check_spec, case
    check = REGISTRY.get(check_spec.name)
    first = check.assignment if check else None
    hints = {k: translated_hint(v, language, first) for k, v in check_spec.hints.items()}
    mistakes = tuple((translated_hint(h, language, first), out) for h, out in case.mistakes)
    return (
        dataclasses.replace(check_spec, hints=hints),
        dataclasses.replace(
            case, name=translated_hint(case.name, language, first), mistakes=mistakes
        ),
    )


def compare(name: str, case: Case, expected_arrays, got) -> Verdict:
    """A returned value (normalised or not) judged against the expected arrays by the
    grader's judge (``judging.judge``), the case's known mistakes named."""
    got = (
        got
        if isinstance(got, tuple) and all(isinstance(g, np.ndarray) for g in got)
        else normalise(got)
    )
    whole = dataclasses.replace(
        case, expected=expected_arrays, mistakes=tuple(mistake_outputs(name, case))
    )
    return judging.judge(spec(name), whole, Outcome("value", got))


class HiddenCheckFailed(AssertionError):
    """A hidden check failed; Jupyter shows only the message, never the hidden test code."""

    def _render_traceback_(self):
        return [
            "HiddenCheckFailed: " + line if i == 0 else line
            for i, line in enumerate(str(self).splitlines())
        ]


#: the most of the notebook ``kernel_language`` reads: the grader's own cap on a submitted
#: notebook (``autograder.sandbox.Limits.notebook_bytes``)
KERNEL_NOTEBOOK_BYTES = 8 << 20


def kernel_language(assignment: str) -> str:
    """The language of the notebook this kernel runs, for ``run_hidden``'s messages. Stock
    ``nbgrader autograde`` (the formgrader's Autograde button too) executes
    ``autograded/<student>/<id>/<id>.ipynb`` with that folder as the kernel's working folder,
    and the notebook's metadata says its edition (``messages.language_of``, hostile input like
    all of it). English where there is no such notebook or it is unreadable, a link, over
    ``KERNEL_NOTEBOOK_BYTES`` or not JSON."""
    import json

    from autograder.checking import intake, messages

    path = pathlib.Path(f"{assignment}.ipynb")
    try:
        body = intake.read_bounded(path, KERNEL_NOTEBOOK_BYTES)
        notebook = json.loads(body) if len(body) <= KERNEL_NOTEBOOK_BYTES else None
    except (intake.Unreadable, ValueError, RecursionError):
        return messages.ENGLISH
    return messages.language_of(notebook.get("metadata") if isinstance(notebook, dict) else None)


def run_hidden(name: str, fn, seed: int | None = None, language: str | None = None) -> None:
    """Run ``fn`` on the hidden cases inside the student's kernel (stock nbgrader).

    seed None -> the ``ATTENTION_HIDDEN_SEED`` environment variable, else a fixed default, so
    a regrade gives the same verdict. Raises ``HiddenCheckFailed`` with the grader's summary
    (``judging.summary``), in ``language``: None -> the notebook's (``kernel_language``), as
    the sandboxed grader words it, from the same catalog.
    """
    __tracebackhide__ = True
    if seed is None:
        seed = int(os.environ.get(HIDDEN_SEED_ENV, DEFAULT_HIDDEN_SEED))
    language = language or kernel_language(_get(name).assignment)
    cases = [prepare(name, case, True, language) for case in hidden_cases(name, seed)]
    verdicts, _notes = judging.run_cases(spec(name, language), fn, cases, language)
    failed = [v for v in verdicts if not v.passed]
    if failed:
        text = judging.summary(name, failed, len(cases), True, language=language)
        raise HiddenCheckFailed(text) from None
