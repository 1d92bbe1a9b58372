"""What a student sees in full comes from a process that never held a hidden input.

A submission is run on its public cases first, then on its own hidden cases in fresh
processes (``grading.run``); of the hidden run only pass/fail and a fixed vocabulary leave.
Two attackers try the channels that used to carry hidden inputs out (issue: grader v5, item 1):

- ``peek``: on every call, its function looks through every array its process can reach (the
  stack's frames, where the worker keeps the decoded cases) for one that is no public input,
  and writes its first value into the public cases' full-detail message (the maximum error).
  With every case in one process, that spelled a hidden input; now its public run finds
  none, and the message says so ("max error 7").
- ``stash``: when its function meets a hidden input, it keeps it wherever state could outlive
  the process (files under /tmp, /dev/shm, /var/tmp, the working directory, the environment)
  and crashes, so the run is tried again; its first cell prints whatever it finds. The retry
  happens in the hidden run, whose cell outputs are dropped; the public run, which runs first,
  finds nothing.

Each is graded as root and rootless, with an honest student after it on the same worker, and
every hidden input of each student (``grading.hidden_seed``: each student has their own) is
searched for in everything written: autograded notebooks, feedback pages, the report.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import as_nobody, corpus  # noqa: E402

from autograder import cli, grading, sandbox  # noqa: E402
from autograder.checking import checks  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

A = "ch1_pooling"
LIMITS = sandbox.Limits(cell_seconds=20, task_seconds=20, submission_seconds=90)

#: the public inputs as the release ships them, to tell a hidden input from a public one
_PUBLIC = """
import sys
import numpy as np
with np.load("public_cases.npz") as _z:
    _PUBLIC_INPUTS = {np.ascontiguousarray(_z[k]).tobytes() for k in _z.files}


def _foreign(value):
    return isinstance(value, np.ndarray) and value.dtype == np.float64 and value.size and (
        np.ascontiguousarray(value).tobytes() not in _PUBLIC_INPUTS
    )
"""

PEEK = (
    _PUBLIC
    + """
_honest_nw = nadaraya_watson_ard


def _reachable_arrays():
    frame, seen = sys._getframe(2), []  # from the caller of the function on
    while frame is not None:
        for value in list(frame.f_locals.values()):
            values = list(value.values()) if isinstance(value, dict) else [value]
            seen += [v for v in values if isinstance(v, np.ndarray)]
        frame = frame.f_back
    return seen


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    right = np.asarray(_honest_nw(x_query, x_keys, y_values, bandwidths), dtype=float)
    found = [a for a in _reachable_arrays() if _foreign(a)]
    v = float(np.ravel(found[0])[0]) if found else 0.0
    return right + (1000 * abs(v) + 7)
"""
)

STASH_PLACES = ("/tmp/stash", "/dev/shm/stash", "/var/tmp/stash", "stash")

STASH = (
    _PUBLIC
    + f"PLACES = {STASH_PLACES!r}\n"
    + """
import os
for _place in PLACES:
    try:
        print("found", open(_place).read())
    except OSError:
        pass
print("env", os.environ.get("STASHED", "-"))
_honest_nw = nadaraya_watson_ard


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    if not _foreign(np.asarray(x_query)):
        return _honest_nw(x_query, x_keys, y_values, bandwidths)
    text = repr(np.asarray(x_query).ravel().tolist())
    os.environ["STASHED"] = text
    for place in PLACES:
        try:
            with open(place, "w") as handle:
                handle.write(text)
        except OSError:
            pass
    os._exit(3)
"""
)


def _hidden_phrases(seed: int, student: str) -> set[str]:
    """Every hidden input value of this student's hidden cases, as a message would print it."""
    values = set()
    for check in checks.checks_for(A):
        for case in checks.hidden_cases(check.name, grading.hidden_seed(seed, student)):
            for arg in case.args:
                if isinstance(arg, np.ndarray) and arg.dtype.kind == "f":
                    for x in arg.ravel():
                        if abs(x) > 0.01:
                            values |= {f"{x:.5f}", f"max error {1000 * abs(x) + 7:.3g}"}
    return values


def _submissions(course: Path) -> dict:
    good = corpus.solved(course, A)
    return {
        "a-peek": (corpus.append_to_cell(good, "nw", PEEK), 10, []),
        "b-victim": (good, 12, []),
        "c-stash": (corpus.append_to_cell(good, "nw", STASH), 10, ["crash"]),
        "d-victim": (good, 12, []),
    }


def _everything_written(course: Path, student: str) -> str:
    notebook = course / "autograded" / student / A / f"{A}.ipynb"
    texts = [notebook.read_text()]
    texts += [p.read_text() for p in (course / "feedback" / student / A).glob("*.html")]
    # a page's style sheet and scripts (MathJax, 2 MB, the same on every page) are the
    # grader's own: a number there could match a hidden value's digits by chance
    return re.sub(r"<(style|script)\b.*?</\1>", "", "\n".join(texts), flags=re.S)


def _nw_message(course: Path, student: str) -> str:
    """The record of the submission's graded tasks (their messages), as JSON text."""
    notebook = json.loads((course / "autograded" / student / A / f"{A}.ipynb").read_text())
    return json.dumps(notebook["metadata"]["autograder"])


def _assert_nothing_hidden_left(course: Path, seed: int, report: str) -> None:
    for student in ("a-peek", "c-stash"):
        text = _everything_written(course, student) + report
        for phrase in _hidden_phrases(seed, student):
            assert phrase not in text, (student, phrase)
    # the public run found no foreign array: every full-detail message reads v = 0
    errors = set(re.findall(r"max error ([^ ]+) vs", _nw_message(course, "a-peek")))
    assert errors == {"7"}, errors
    stash = json.loads((course / "autograded" / "c-stash" / A / f"{A}.ipynb").read_text())
    outputs = json.dumps([c.get("outputs", []) for c in stash["cells"]])
    assert "found" not in outputs and "env -" in outputs  # the public run's own output


@pytest.fixture(scope="module")
def course(tmp_path_factory, bubblewrap):
    return corpus.released_course(tmp_path_factory.mktemp("split") / "course")


def test_no_hidden_input_reaches_what_a_student_sees_as_root(course):
    cases = _submissions(course)
    for student, (notebook, _score, _reasons) in cases.items():
        corpus.write_submission(course, A, student, notebook)
    outcome = grading.grade_assignment(course, A, workers=1, limits=LIMITS, seed=5)
    got = {r.student: (r.score, sorted(r.reasons)) for r in outcome.graded}
    assert got == {s: (float(c[1]), sorted(c[2])) for s, c in cases.items()}
    assert cli.main(["--course", str(course), "feedback", A]) == 0
    report = course / "report.html"
    assert cli.main(["--course", str(course), "report", A, "--out", str(report)]) == 0
    _assert_nothing_hidden_left(course, outcome.seed, report.read_text())


def test_no_hidden_input_reaches_what_a_student_sees_rootless(course, public_tmp):
    _stderr, mine = as_nobody.grade(
        course, A, public_tmp, _submissions(course), workers=1, options=["--seed", "5"]
    )
    record = json.loads((mine / "autograded" / "a-peek" / A / f"{A}.ipynb").read_text())
    seed = record["metadata"]["autograder"]["seed"]
    assert cli.main(["--course", str(mine), "feedback", A]) == 0
    _assert_nothing_hidden_left(mine, seed, "")


def test_each_student_has_their_own_hidden_inputs():
    """The seed of a student's hidden cases depends on the batch and the student: two
    students never share them (whatever one learns is of no use to the next), and a regrade
    in the same batch gives the same cases."""
    seeds = {grading.hidden_seed(7, f"s{i}") for i in range(1000)}
    assert len(seeds) == 1000
    assert grading.hidden_seed(7, "ann") == grading.hidden_seed(7, "ann")
    assert grading.hidden_seed(7, "ann") != grading.hidden_seed(8, "ann")
    first = checks.hidden_cases("nadaraya_watson_ard", grading.hidden_seed(7, "ann"))[0]
    other = checks.hidden_cases("nadaraya_watson_ard", grading.hidden_seed(7, "bob"))[0]
    assert not np.array_equal(first.args[0], other.args[0])


public_tmp = as_nobody.public_tmp
