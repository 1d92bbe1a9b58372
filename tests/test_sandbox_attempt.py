"""One run of a sandbox driven to its end (`sandbox.attempt.Attempt`, through `Sandbox.run`):
the idle check of a step, whose first CPU sample comes a second into the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_grader_units import run_cells  # noqa: E402

from autograder import sandbox  # noqa: E402
from autograder.sandbox import protocol  # noqa: E402

pytestmark = [pytest.mark.timeout(300)]


@pytest.mark.parametrize(
    "cell",
    [
        "import time\ntime.sleep(600)",  # idle from its first instant
        "import time\nx = 0\nfor _ in range(3 * 10**7):\n    x += 1\ntime.sleep(600)",  # busy first
    ],
    ids=["sleep", "busy-then-sleep"],
)
def test_a_cell_that_waits_on_nothing_ends_at_the_idle_limit_and_the_next_run_is_clean(
    bubblewrap, cell
):
    limits = sandbox.Limits(cell_seconds=120, task_seconds=30, submission_seconds=200)
    box = sandbox.Sandbox(None, limits)
    try:
        waited = run_cells(box, ["x = 1", cell, "y = 2"], seconds=200)
        after = run_cells(box, ["print('next')"])
    finally:
        box.close()
    assert waited.ended == "timeout", (waited.ended, waited.detail)
    assert waited.detail.startswith(f"waited {protocol.IDLE_SECONDS:g} s without using the CPU")
    assert waited.where == ("cell", 1) and sorted(waited.cells) == [0]
    assert after.ended == "done" and after.cells[0]["output"] == "next\n"
