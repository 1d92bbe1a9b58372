"""No kernel counter carries a hidden input from one run to the next: network, pids, host name.

Graded in name order on ONE worker (so on the same sandbox): an accomplice that prints what
it observes of the loopback's byte and packet counters, /proc/net/snmp, /proc/net/tcp, the
pids it gets, the processes it sees and the host name, into its own feedback; an attacker
that, while its function runs on the hidden inputs, writes a number derived from them into
every one of those; the accomplice again; an attacker leaking another number; the accomplice
again; an honest student. Each run has network, UTS and pid namespaces of its own
(`autograder/student/isolation.py`), so the accomplice observes the same thing after each, and
everyone keeps full marks. As root, as `nobody` (rootless), and on a Dask worker run by
`nobody`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import as_nobody, corpus  # noqa: E402

from autograder import sandbox  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
A = corpus.A
LIMITS = sandbox.Limits(cell_seconds=30, task_seconds=15, submission_seconds=120)
ACCOMPLICES = ("ns-1-accomplice", "ns-3-accomplice", "ns-5-accomplice")


@pytest.fixture(scope="module")
def course(tmp_path_factory, bubblewrap):
    return corpus.released_course(tmp_path_factory.mktemp("namespaces") / "course")


public_tmp = as_nobody.public_tmp  # a folder `nobody` can reach


def _assert_nothing_carried(course: Path) -> None:
    """The accomplice saw the same before and after each attacker: a fresh loopback (no byte,
    no packet, no socket), itself as pid 1 and its child as pid 2, no other process."""
    seen = [corpus.observed_in_feedback(course, student) for student in ACCOMPLICES]
    assert seen[0] == seen[1] == seen[2], seen
    fresh = json.loads(seen[0].split(" ", 1)[1])
    assert fresh["pids"] == [1, 2] and fresh["processes"] == [1], fresh
    assert fresh["tcp"] == [] and all(int(n) == 0 for n in fresh["lo"][0][1:]), fresh


def test_no_counter_carries_a_hidden_input_to_the_next_run(course):
    """As root (the slot's uid)."""
    corpus.grade_in_order(course, corpus.namespace_corpus(course), LIMITS)
    _assert_nothing_carried(course)


def test_no_counter_carries_a_hidden_input_as_an_unprivileged_user(course, public_tmp):
    """Rootless (`python -m autograder grade` run as `nobody`, one worker)."""
    cases = corpus.namespace_corpus(course)
    _stderr, graded = as_nobody.grade(course, A, public_tmp, cases, workers=1)
    _assert_nothing_carried(graded)


def test_no_counter_carries_a_hidden_input_on_a_dask_worker_run_by_an_ordinary_user(
    course, public_tmp
):
    """A Dask worker started by `nobody` (rootless sandboxes, one thread, so one slot): the
    submissions are sent one at a time, in order."""
    as_nobody.grade_on_a_dask_worker(course, A, public_tmp, corpus.namespace_corpus(course))
    _assert_nothing_carried(course)
