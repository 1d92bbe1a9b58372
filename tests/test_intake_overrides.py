"""The limits an instructor gives for named students are kept for their later runs
(`autograder.grading.overrides`), and a notebook with no written-answer cell leaves nothing
to grade by hand. Fast: no sandbox runs (tests/test_intake_reruns.py grades for real)."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli  # noqa: E402
from autograder.checking import notebook as nbparse  # noqa: E402
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.checking.results import SubmissionResult  # noqa: E402
from autograder.grading import overrides  # noqa: E402
from autograder.grading.verdict import not_graded  # noqa: E402

A = "ch1_pooling"
WRITTEN = "written-bandwidth"


def test_limits_given_for_named_students_are_kept_and_the_run_s_own_win(tmp_path):
    course = tmp_path / "course"
    overrides.remember(course, A, ["s07"], {"notebook_bytes": 16 << 20, "cells": 3000})
    overrides.remember(course, A, ["s07", "s09"], {"cell_seconds": 30})
    assert overrides.recorded(course, A) == {
        "s07": {"notebook_bytes": 16 << 20, "cells": 3000, "cell_seconds": 30},
        "s09": {"cell_seconds": 30},
    }
    groups = overrides.for_students(course, A, ["s01", "s07", "s02", "s09"], {"cells": 50})
    assert groups == [
        ({"cells": 50}, ["s01", "s02"]),
        ({"notebook_bytes": 16 << 20, "cells": 50, "cell_seconds": 30}, ["s07"]),
        ({"cell_seconds": 30, "cells": 50}, ["s09"]),
    ]
    other = overrides.for_students(course, "ch2_soft_hard", ["s07"], {})
    assert other == [({}, ["s07"])]  # per assignment


def test_a_recorded_file_that_is_not_limits_is_ignored(tmp_path):
    path = overrides.path_of(tmp_path, A)
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"students": {"a": {"limits": {"notebook_bytes": -1, "rm -rf": 5, "cells": true}},'
        ' "b": {"limits": {"cells": 7}}, "c": 5}}'
    )
    assert overrides.recorded(tmp_path, A) == {"b": {"cells": 7}}
    for text in ("not json", '{"students": ["a"]}', "[1]"):
        path.write_text(text)
        assert overrides.recorded(tmp_path, A) == {}


def test_the_cli_records_limits_given_with_student_and_says_when_it_used_them(tmp_path):
    course = tmp_path / "course"
    args = cli.build_parser().parse_args(
        ["--course", str(course), "grade", A, "--student", "s07", "--max-notebook-mb", "16"]
    )
    limits = cli.explicit_limits(args)
    assert limits == {"notebook_bytes": 16 << 20}
    overrides.remember(course, A, args.student, limits)  # what cmd_grade does first
    graded = [SubmissionResult("s07", A, 1), SubmissionResult("s01", A, 1)]
    assert cli.kept_limits_note(course, A, graded, {}) == (
        "graded with the limits given for them in an earlier run: s07 (--max-notebook-mb 16) "
        "(give the option again with --student to change it)"
    )
    assert cli.kept_limits_note(course, A, graded, {"notebook_bytes": 1 << 20}) is None


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    course = corpus.released_course(tmp_path_factory.mktemp("hand") / "course")
    return course, load_assignment(course, A)


def test_a_refused_notebook_leaves_no_written_answer_to_grade(spec):
    course, assignment = spec
    result = SubmissionResult("empty", A, 1)
    not_graded(assignment, result, "invalid notebook", "it is not JSON")
    assert result.unanswered == [WRITTEN] == nbparse.manual_cells(assignment)


def test_a_notebook_without_the_answer_cell_leaves_nothing_to_grade(spec):
    course, assignment = spec
    solved = corpus.solved(course, A)
    assert nbparse.unanswered_manual_cells(assignment, solved) == []  # answered: a human grades
    assert nbparse.unanswered_manual_cells(assignment, corpus.blank(course, A)) == [WRITTEN]
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    assert nbparse.unanswered_manual_cells(assignment, other) == [WRITTEN]
    assert nbparse.unanswered_manual_cells(assignment, corpus.drop_cell(solved, WRITTEN)) == [
        WRITTEN
    ]
