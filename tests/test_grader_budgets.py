"""Which limits a submission gets: budgets derived from the reference solution's measured
time (``autograder.sandbox.budgets``), the chapter's own limits over them, and the instructor's
command-line limits over everything, even where they equal a default."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autograder import cli, grading, sandbox
from autograder.checking import checks
from autograder.checking.assignment_spec import load_assignment
from autograder.sandbox import budgets

COURSE = Path(checks.__file__).resolve().parent.parent


def _explicit(*flags: str) -> dict:
    return cli.explicit_limits(cli.build_parser().parse_args(["grade", "ch3_seq2seq", *flags]))


@pytest.mark.parametrize("assignment", sorted(checks.CHAPTERS))
def test_every_chapters_budgets_are_the_stated_multiple_of_its_reference_time(assignment):
    chapter = checks.chapter(assignment)
    t = chapter.reference_seconds
    assert t is not None and t > 0, (
        f"{assignment}: measure it: python -m autograder.grading.measure"
    )
    limits = budgets.resolve(chapter)
    step = budgets.FACTOR * t + budgets.MARGIN
    assert limits.cell_seconds == limits.task_seconds == pytest.approx(step)
    assert limits.submission_seconds == pytest.approx(
        budgets.FACTOR * t + budgets.STEPS * budgets.MARGIN
    )
    # a hang costs tens of seconds: every recorded reference is well under the old defaults
    assert limits.submission_seconds < sandbox.Limits().submission_seconds, limits
    # the formula's assumption: after a step that times out, the margins left hold a rerun of
    # the rest, about T; a chapter slower than a margin needs a new formula
    assert t <= budgets.MARGIN, f"{assignment}: T = {t} s is over a margin ({budgets.MARGIN} s)"
    assert limits.submission_seconds - step == pytest.approx((budgets.STEPS - 1) * budgets.MARGIN)


def test_without_a_reference_time_a_chapter_keeps_the_defaults():
    bare = checks.Chapter("hw", checks=())
    assert budgets.derived(None) == {}
    assert budgets.resolve(bare) == budgets.resolve(None) == sandbox.Limits()


def test_the_chapters_own_limits_win_over_the_derived_budgets():
    chapter = checks.Chapter("hw", checks=(), reference_seconds=2.0, limits={"cell_seconds": 99.0})
    limits = budgets.resolve(chapter)
    assert limits.cell_seconds == 99.0
    assert limits.task_seconds == budgets.FACTOR * 2.0 + budgets.MARGIN


def test_a_command_line_limit_wins_even_where_it_equals_a_default():
    """The old rule took a limit equal to its default for "not given": `--cell-timeout 120`
    on a chapter whose cells get 180 s still gave 180 s."""
    assert sandbox.Limits().cell_seconds == 120.0
    chapter = dataclasses.replace(checks.chapter("ch3_seq2seq"), limits={"cell_seconds": 180.0})
    given = _explicit("--cell-timeout", "120")
    assert given == {"cell_seconds": 120.0}
    limits = budgets.resolve(chapter, given)
    assert limits.cell_seconds == 120.0
    derived = budgets.derived(chapter.reference_seconds)
    assert (limits.task_seconds, limits.submission_seconds) == (
        derived["task_seconds"],
        derived["submission_seconds"],
    )


def test_every_command_line_limit_reaches_the_sandbox_of_the_real_chapter():
    spec = load_assignment(COURSE, "ch4_self_attention")
    chapter = checks.chapter("ch4_self_attention")
    given = _explicit(
        "--cell-timeout", "7", "--task-timeout", "8", "--budget", "240", "--memory-mb", "512"
    )
    args = (COURSE, "ch4_self_attention", 7, given, True, grading.REGISTRY, spec)
    limits = grading.Preparing(*args, fork=False).limits()
    assert (limits.cell_seconds, limits.task_seconds, limits.submission_seconds) == (7, 8, 240)
    assert limits.memory_bytes == 512 << 20 != chapter.limits["memory_bytes"]
    # only --budget given: the chapter's memory and the derived step budgets stay
    args = (COURSE, "ch4_self_attention", 7, _explicit("--budget", "30"), True, grading.REGISTRY)
    limits = grading.Preparing(*args, spec, fork=False).limits()
    assert limits.memory_bytes == chapter.limits["memory_bytes"]
    assert limits.submission_seconds == 30
    assert limits.cell_seconds == budgets.derived(chapter.reference_seconds)["cell_seconds"]


def test_a_whole_limits_object_sets_every_field_and_an_unknown_field_is_refused():
    whole = sandbox.Limits(cell_seconds=15, task_seconds=15, submission_seconds=60)
    assert budgets.resolve(checks.chapter("ch4_self_attention"), whole) == whole
    with pytest.raises(ValueError, match="unknown limit.*cell_secs"):
        budgets.resolve(checks.chapter("ch1_pooling"), {"cell_secs": 3})


@pytest.mark.parametrize("flag", ["--cell-timeout", "--task-timeout", "--budget", "--memory-mb"])
def test_a_limit_that_is_not_positive_is_refused_on_the_command_line(flag, capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["grade", "ch1_pooling", flag, "0"])
    assert "must be positive" in capsys.readouterr().err
