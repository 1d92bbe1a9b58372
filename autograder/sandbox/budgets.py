"""Each chapter's wall-clock budgets, derived from its reference solution's own measured time.

The one formula (``derived``), with T the chapter's ``Chapter.reference_seconds``:

    cell_seconds = task_seconds = FACTOR * T + MARGIN          (one step)
    submission_seconds = FACTOR * T + STEPS * MARGIN           (retries included)

T is the wall time of the instructor's solved source notebook graded as a submission by
this grader (parse, its cells, every public and hidden case, judge) in a warm sandbox: the
slowest of ``RUNS`` runs, measured with ``python -m autograder.grading.measure`` and recorded in the
chapter's plug-in beside how it was measured. T bounds every cell and every task of the
reference, so a step of an honest submission gets FACTOR times the reference's whole run
plus a fixed MARGIN, and a whole honest submission FACTOR times the reference's run with
STEPS margins to spare. A step that times out uses FACTOR * T + MARGIN of that; the
STEPS - 1 margins left hold the rerun of the other steps, which takes about T (at most
MARGIN for every chapter: ``test_grader_budgets`` checks it, and a chapter slower than
that needs a new formula rather than a new constant). A submission whose every function
hangs (each public check in its cells, then each task) is stopped by the submission budget
after one step's timeout and those margins, not after STEPS whole steps: so a hanging
submission costs tens of seconds, not minutes. A step that sleeps or blocks ends sooner
still (``protocol.IDLE_SECONDS``).

Which limit wins (``resolve``): ``Limits()``'s defaults, then these derived budgets, then
the chapter's explicit ``limits`` (e.g. chapter 4's memory), then whatever the instructor
set on the command line (``--cell-timeout``, ``--task-timeout``, ``--budget``,
``--memory-mb``), which always wins. The intake caps (``autograder.checking.notebook.Caps``: cells,
characters, HTML depth, attachments, metadata, the recording's CPU seconds) layer the same
way (``resolve_caps``), from the same dict of names.

T is a recorded constant rather than a measurement at every ``grade`` call: the solved
notebook of ch3 trains a model (tens of seconds), which every call would pay again, and a
wall time measured on a busy machine at start-up would make the budgets of one batch
depend on that moment's load.
"""

from __future__ import annotations

import dataclasses

from autograder.checking.notebook import Caps
from autograder.sandbox import Limits

#: a step of an honest submission may take this many times the reference's whole run...
FACTOR = 4.0
#: ...plus this much (scheduling on a loaded machine, a plot, an import the zygote lacks)
MARGIN = 15.0
#: a submission's budget holds this many margins beyond FACTOR * T: a step that times out
#: uses one (and FACTOR * T), the rerun after it the others
STEPS = 3
#: the recorded T is the slowest of this many runs in a warm sandbox
RUNS = 3


def derived(reference_seconds: float | None) -> dict:
    """The budgets a chapter whose reference takes ``reference_seconds`` gets (none: {})."""
    if reference_seconds is None:
        return {}
    scaled = FACTOR * float(reference_seconds)
    step = scaled + MARGIN
    return {
        "cell_seconds": step,
        "task_seconds": step,
        "submission_seconds": scaled + STEPS * MARGIN,
    }


def _names(kind) -> set:
    return {f.name for f in dataclasses.fields(kind)}


def explicit(limits) -> dict:
    """The instructor's explicit limits as {field: value}: a dict is taken as it is (only the
    fields the instructor set: ``Limits`` fields and intake ``Caps`` fields); a whole
    ``Limits`` means every one of its fields."""
    if limits is None:
        return {}
    if isinstance(limits, Limits):
        return dataclasses.asdict(limits)
    known = _names(Limits) | _names(Caps)
    unknown = sorted(set(limits) - known)
    if unknown:
        raise ValueError(
            f"unknown limit(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return dict(limits)


def resolve(chapter, limits=None) -> Limits:
    """The limits a submission of ``chapter`` (an ``autograder.checking.checks.Chapter``, or None for
    an assignment without a plug-in) gets: defaults < derived budgets < the chapter's own
    ``limits`` < the instructor's explicit ``limits`` (see ``explicit``)."""
    layers = {}
    if chapter is not None:
        layers.update(derived(chapter.reference_seconds))
        layers.update(chapter.limits)
    layers.update(explicit(limits))
    return Limits().merged({k: v for k, v in layers.items() if k not in _names(Caps)})


def resolve_caps(chapter, limits=None) -> Caps:
    """The intake caps of a submission of ``chapter`` (`autograder.checking.notebook.Caps`): its
    defaults < the chapter's ``limits`` < the instructor's explicit ``limits``."""
    layers = dict(chapter.limits) if chapter is not None else {}
    layers.update(explicit(limits))
    return dataclasses.replace(Caps(), **{k: v for k, v in layers.items() if k in _names(Caps)})
