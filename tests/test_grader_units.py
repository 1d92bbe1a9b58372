"""Each step of the grader alone: the wire, parse (program + tampering), judge, sandbox command."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import pickle
import secrets
import time
import zipfile
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder import cli, grading, sandbox
from autograder.checking import casefile, checks, judging
from autograder.checking import notebook as nbparse
from autograder.checking.assignment_spec import (
    imported_packages,
    load_assignment,
    strip_hidden_tests,
)
from autograder.checking.program import autograded_notebook, build_program
from autograder.sandbox import wire
from autograder.sandbox.protocol import Plan
from autograder.student import contract, frames


def _cell(
    source, grade_id=None, *, grade=False, solution=False, locked=False, points=0, kind="code"
):
    cell = (
        nbformat.v4.new_code_cell(source)
        if kind == "code"
        else nbformat.v4.new_markdown_cell(source)
    )
    if grade_id:
        cell.metadata["nbgrader"] = {
            "grade_id": grade_id,
            "grade": grade,
            "solution": solution,
            "locked": locked,
            "points": points,
            "schema_version": 3,
            "task": False,
        }
    return cell


TEST_SOURCE = (
    'check("masked_softmax", masked_softmax)\n### BEGIN HIDDEN TESTS\n'
    'from autograder.chapters import run_hidden\nrun_hidden("masked_softmax", masked_softmax)\n'
    "### END HIDDEN TESTS"
)


@pytest.fixture
def spec(tmp_path):
    source = nbformat.v4.new_notebook(
        cells=[
            _cell("import numpy as np\nfrom attention_check import check", "setup", locked=True),
            _cell(
                "def masked_softmax(s, mask=None):\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION",
                "softmax",
                solution=True,
            ),
            _cell(TEST_SOURCE, "test-softmax", grade=True, locked=True, points=3),
        ]
    )
    folder = tmp_path / "source" / "hw"
    folder.mkdir(parents=True)
    nbformat.write(source, folder / "hw.ipynb")
    return load_assignment(tmp_path, "hw")


def _submission(spec, *cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def run_cells(box, cells, seconds=60.0):
    """One attempt of a program with no tasks."""
    request = {
        "cells": cells,
        "release_dir": None,
        "skip_cells": [],
        "limits": box.limits.for_child(),
        "workdir": f"/tmp/{secrets.token_hex(8)}",
    }
    cases = frames.encode_frame({"tasks": [], "skip_tasks": []})
    return box.run(
        request,
        cases,
        Plan(list(range(len(cells))), []),
        time.monotonic() + seconds,
        lambda *a: None,
    )


def test_frames_round_trip_and_garbage_is_a_protocol_violation():
    read, write = os.pipe()
    os.write(write, frames.encode_frame({"ev": "task_end", "task": 1}))
    reader = wire.FrameReader(read, wire.EVENTS, 1 << 20)
    reader.fill()
    assert reader.next() == ({"ev": "task_end", "task": 1}, b"")
    os.write(write, b"JUNK" + bytes(8))
    reader.fill()
    with pytest.raises(wire.ProtocolViolation):
        reader.next()


def test_returned_values_become_outcomes_from_a_fixed_vocabulary():
    outcome = contract.run_case(lambda: (1.5, np.float64(2.0)), [], {})
    assert outcome.kind == "value" and [a.shape for a in outcome.arrays] == [(), ()]
    none, text = (contract.run_case(f, [], {}) for f in (lambda: None, lambda: "text"))
    assert (none.kind, none.code, text.kind, text.code) == ("bad", "none", "bad", "not_numeric")
    import torch

    tensor = contract.run_case(lambda: torch.ones(2, 3, requires_grad=True), [], {})
    assert tensor.arrays[0].shape == (2, 3)

    class LeakedSecret0123(ValueError):  # the class name is the student's: never shown
        pass

    def raises():
        raise LeakedSecret0123("inputs were [0.123, 0.456]")

    outcome = contract.run_case(raises, [], {})
    assert (outcome.kind, outcome.code) == ("error", "ValueError")


def test_case_values_cross_as_npz_without_pickle():
    arrays = {}
    specs = [
        casefile.encode(v, arrays)
        for v in (np.arange(3.0), checks.Seeded(4), 2, 0.1, True, "dot", None)
    ]
    loaded = contract.unpack(frames.pack(arrays))
    values = [contract.fresh(contract.value(s, loaded)) for s in specs]
    assert np.array_equal(values[0], np.arange(3.0)) and values[2:] == [2, 0.1, True, "dot", None]
    assert values[1].random() == np.random.default_rng(4).random()
    with pytest.raises(TypeError, match="cannot be encoded"):
        casefile.encode(object(), arrays)


def test_hidden_test_region_is_removed_exactly_as_nbgrader_does():
    from nbgrader.preprocessors import ClearHiddenTests

    cell = _cell(TEST_SOURCE, "t", grade=True, points=1)
    ClearHiddenTests().preprocess_cell(cell, {}, 0)
    assert strip_hidden_tests(TEST_SOURCE) == cell.source


def test_spec_comes_from_the_source_notebook(spec):
    assert [(t.grade_id, t.points, t.checks) for t in spec.tests] == [
        ("test-softmax", 3.0, (("masked_softmax", "masked_softmax"),))
    ]
    assert "run_hidden" not in spec.tests[0].released


def test_program_drops_test_cells_and_restores_locked_cells(spec):
    released_test = spec.tests[0].released
    submission = _submission(
        spec,
        _cell(
            "import numpy as np\nnp.allclose = lambda *a, **k: True", "setup", locked=True
        ),  # edited locked
        _cell("def masked_softmax(s, mask=None):\n    return s", "softmax", solution=True),
        _cell(released_test, "test-softmax", grade=True, locked=True, points=3),
        _cell(released_test),  # an anonymous copy
    )
    program = build_program(spec, submission)
    assert program.cells[0] == spec.locked["setup"]
    assert program.cells[1].startswith("def masked_softmax")
    assert len(program.cells) == 2 and all("check(" not in c for c in program.cells)
    assert program.tampering == [
        "locked cell 'setup' was edited (the original was run)",
        "test cell 'test-softmax' is duplicated (a copy without its metadata)",
    ]


def test_edited_and_deleted_test_cells_are_reported_and_deleted_locked_cells_come_back(spec):
    edited = build_program(
        spec,
        _submission(
            spec,
            _cell("def masked_softmax(s, mask=None):\n    return s", "softmax", solution=True),
            _cell("pass", "test-softmax", grade=True, locked=True, points=3),
        ),
    )
    assert "test cell 'test-softmax' was edited" in edited.tampering
    assert edited.cells[0] == spec.locked["setup"]  # the deleted setup cell runs first again
    deleted = build_program(
        spec,
        _submission(
            spec, _cell("def masked_softmax(s, mask=None):\n    return s", "softmax", solution=True)
        ),
    )
    assert "test cell 'test-softmax' was deleted" in deleted.tampering


@pytest.mark.parametrize("minor", [4, 5])
def test_autograded_notebook_is_valid_for_the_submissions_nbformat(spec, minor):
    """4.5 requires cell ids, 4.4 forbids them; the rebuilt test cell must follow the submission."""
    submission = _submission(
        spec, _cell("def masked_softmax(s, mask=None):\n    return s", "softmax", solution=True)
    )
    submission.nbformat_minor = minor
    for cell in submission.cells:
        if minor < 5:
            cell.pop("id", None)
    graded = autograded_notebook(spec, submission, {"test-softmax": (False, "wrong")}, {}, {})
    nbformat.validate(graded)  # raises on an id where 4.4 forbids one, or a missing one in 4.5
    assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in graded.cells][
        -1
    ] == "test-softmax"
    from_nothing = autograded_notebook(spec, None, {}, {}, {})  # an invalid submission
    nbformat.validate(from_nothing)


def test_invalid_json_is_an_invalid_notebook(tmp_path):
    path = tmp_path / "x.ipynb"
    path.write_text("{ not json")
    with pytest.raises(nbparse.InvalidNotebook, match="not a readable Jupyter notebook"):
        nbparse.read_submission(path)


def test_messages_never_repeat_the_students_exception_text_or_class_name():
    case = checks.Case("secret case", (np.zeros(2),), {}, expected=(np.zeros(2),))
    outcome = contract.Outcome("error", code="ValueError")
    verdict = judging.judge(checks.spec("softmax_backward"), case, outcome)
    assert verdict == contract.Verdict(
        "softmax_backward",
        "secret case",
        False,
        False,
        "case 'secret case': softmax_backward raised ValueError",
    )


def test_a_wrong_shape_is_judged_from_the_declared_header_before_any_array_is_read():
    case = checks.prepare("softmax_backward", checks.public_cases("softmax_backward")[0])
    expected = case.expected
    wrong = np.swapaxes(expected[0], -1, -2)
    header = {"ev": "case", "task": 0, "case": 0, "outcome": "value", "code": None, "n": 1}
    outcome = wire.read_outcome(header, frames.pack({"r0": wrong}), expected, "allclose")
    assert isinstance(outcome.arrays[0], wire.Declared)
    verdict = judging.judge(checks.spec("softmax_backward"), case, outcome)
    assert not verdict.passed and "shape" in verdict.message


def test_sandbox_command_isolates_network_course_files_and_uid(tmp_path, bubblewrap):
    command = sandbox.sandbox_command(61234, tmp_path, sandbox.Limits(), 5)
    joined = " ".join(command)
    assert (
        "--unshare-net" in command and "--die-with-parent" in command and "--new-session" in command
    )
    assert "--reuid=61234" in command and "--clearenv" in command
    repo = str(Path(grading.__file__).resolve().parents[2])
    bound = [command[i + 1] for i, arg in enumerate(command) if arg in ("--ro-bind", "--bind")]
    # the reference and the hidden checks stay out; of the grader, only the worker and the
    # modules it imports go in (IN_SANDBOX)
    hidden = (repo + "/solutions", repo + "/autograder")
    worker = {
        repo + f"/autograder/student/{name}.py"
        for name in ("contract", "frames", "zygote", "isolation")
    }
    assert worker <= set(bound)
    assert not any(
        path == repo or path == folder or path.startswith(folder + "/")
        for path in bound
        if path not in worker
        for folder in hidden
    ), bound
    assert "gradebook" not in joined
    # the private /tmp is mounted before every bind, so a virtualenv under /tmp stays visible
    assert command.index("--tmpfs") < command.index("--ro-bind")
    # and no bind lands where the run would see the checkout's place: not in its /tmp, not in
    # a home (site-packages outside the interpreter's prefix go to a fixed folder)
    targets = [command[i + 2] for i, arg in enumerate(command) if arg == "--ro-bind"]
    assert not [t for t in targets if t.startswith(repo + "/.venv")], targets


def test_site_packages_outside_the_prefix_are_bound_at_a_fixed_place():
    """A checkout under /tmp (or in a home) must not show in the run's /tmp: its virtualenv's
    site-packages are bound at /site/<n>, and the zygote is told those paths."""
    from autograder.sandbox import command as sandbox_command_module

    prefix = "/opt/python/3.11"
    site = [
        f"{prefix}/lib/python3.11/site-packages",
        "/tmp/clone/.venv/lib/python3.11/site-packages",
    ]
    placed = sandbox_command_module.site_inside(prefix, site)
    assert placed == [(site[0], site[0]), (site[1], "/site/1")]
    args = sandbox_command_module._python_binds(prefix, site)
    assert args[-3:] == ["--ro-bind", site[1], "/site/1"] and "/tmp/clone" not in args[:-2]


def test_summary_table_lists_reasons():
    result = grading.SubmissionResult(
        "alice", "hw", 1, score=2, max_score=5, reasons=["timeout", "crash"]
    )
    table = cli.summary_table([result], [("bob", "already graded")])
    assert "alice    2      5    -        timeout, crash" in table  # "-": nothing by hand
    assert "skipped: already graded" in table


def test_a_run_holds_only_its_own_two_channels_and_none_of_the_zygotes(tmp_path, bubblewrap):
    """The child of a run holds /dev/null, its captured output and the two pipes made for
    that run; no socket (the zygote's control channel), and no /proc path to the zygote's:
    the run is pid 1 of a pid namespace of its own, its parent (pid 0 there) is not in it."""
    box = sandbox.Sandbox(None, sandbox.Limits(cell_seconds=20, task_seconds=20))
    try:
        probe = (
            "import os\nparent = os.getppid()\n"
            "try:\n    print('open', os.listdir(f'/proc/{parent}/fd'))\n"
            "except OSError as err:\n    print('denied', type(err).__name__)\n"
            "for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):\n"
            "    try:\n        print('fd', fd, os.readlink(f'/proc/self/fd/{fd}'))\n"
            "    except OSError:\n        pass"
        )
        first, second = run_cells(box, [probe]), run_cells(box, [probe])
        assert first.ended == second.ended == "done"
        held = []
        for run in (first, second):
            output = run.cells[0]["output"]
            assert "denied FileNotFoundError" in output
            links = [
                line.split(" ", 2)[2] for line in output.splitlines() if line.startswith("fd ")
            ]
            assert not any(link.startswith("socket:") for link in links), links
            pipes = sorted(link for link in links if link.startswith("pipe:"))
            assert len(pipes) == 2, links  # the run's event pipe and its input pipe
            assert all(link == "/dev/null" or "/tmp/" in link or link in pipes for link in links)
            held.append(set(pipes))
        assert not held[0] & held[1]  # each run its own: nothing the first held is reused
        # garbage on every descriptor the child holds costs that run, and the next run is clean
        flood = "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\x00' * 64)\n    except OSError:\n        pass"
        assert run_cells(box, [flood]).ended == "protocol"
        assert run_cells(box, ["x = 1"]).ended == "done"
    finally:
        box.close()


def test_a_run_holds_no_capability_and_gets_its_own_tmp_shm_and_keyring(bubblewrap):
    """Where user namespaces work (every CI machine here), each run is built in its own:
    no capability in any set, /tmp and /dev/shm new tmpfs mounts it cannot remount, /dev
    read-only, and no kernel key can be made."""
    box = sandbox.Sandbox(None, sandbox.Limits(cell_seconds=20, task_seconds=20))
    probe = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print([l.split()[1] for l in open('/proc/self/status') if l[:6] in "
        "('CapEff', 'CapPrm', 'CapBnd', 'CapInh', 'CapAmb')])\n"
        "print('remount', libc.mount(b'none', b'/tmp', None, 0x20 | 0x1, None), ctypes.get_errno())\n"
        "try:\n    open('/dev/new', 'w')\nexcept OSError as err:\n    print('dev', err.errno)\n"
        "print('key', libc.syscall(248, b'user', b'x', b'y', 1, ctypes.c_int(-3)), ctypes.get_errno())\n"
        "open('/tmp/mine', 'w').write('x')\n"
        "print('tmp', sorted(os.listdir('/tmp')), 'shm', os.listdir('/dev/shm'))\n"
    )
    try:
        first, second = run_cells(box, [probe]), run_cells(box, [probe])
        assert box.fresh == sandbox.fresh_state_works() is True
    finally:
        box.close()
    for run in (first, second):
        lines = run.cells[0]["output"].splitlines()
        assert lines[0] == str(["0000000000000000"] * 5), lines
        assert lines[1] == "remount -1 1"  # EPERM: the mount is not the run's to change
        assert lines[2] == "dev 30"  # EROFS
        assert lines[3] == "key -1 1"  # EPERM, from the seccomp filter
        # the working directory and the file the run itself made: nothing from the other run
        assert lines[4].startswith("tmp [") and lines[4].count("'") == 4 and "mine" in lines[4]
        assert lines[4].endswith("shm []")


def test_a_sandbox_that_breaks_before_the_first_event_is_the_graders_failure(bubblewrap):
    """A zygote that cannot start the run (here: stopped) costs the submission nothing: the
    attempt ends "lost", charged to no cell, and run_program reruns it in full in a fresh
    sandbox, with the lost time given back to the submission's budget."""
    import signal

    limits = sandbox.Limits(cell_seconds=3, task_seconds=3, submission_seconds=8)
    box = sandbox.Sandbox(None, limits)
    try:
        assert run_cells(box, ["x = 1"]).ended == "done"
        zygote = max(sandbox.descendants(box.process.pid))  # the newest: python under bwrap
        os.kill(zygote, signal.SIGSTOP)
        lost = run_cells(box, ["x = 1"])
        assert (lost.ended, lost.where, lost.cells) == ("lost", None, {})
        box.start()  # the lost one was killed; stop the zygote of a fresh one the same way
        os.kill(max(sandbox.descendants(box.process.pid)), signal.SIGSTOP)
        request = {"cells": ["x = 1", "print(x + 1)"], "release_dir": None}
        starts = box.starts
        empty = grading.CaseSet(False, (), (), frames.pack({}))
        record = grading.run_program(
            box, request, {}, empty, dataclasses.replace(empty, hidden=True)
        )
        assert record.lost == 1 and record.attempts == 2 and box.starts == starts + 1
        assert record.failed_cells == {} and record.grader_error == ""
        assert record.cells[1]["output"] == "2\n"
    finally:
        box.close()


def _round_trip(value) -> bytes:
    return pickle.dumps(pickle.loads(pickle.dumps(value)))


def test_check_data_computed_in_a_forked_child_equals_the_inline_one():
    """`grade` computes the check data in a forked child (the reference package's imports
    overlap nbgrader's); the limits it sends first and the work are what `prepare` gives."""
    course = Path(grading.__file__).resolve().parents[1]
    spec = load_assignment(course, "ch1_pooling")
    args = (course, "ch1_pooling", 7, sandbox.Limits(), True, grading.REGISTRY, spec)
    forked, inline = grading.Preparing(*args, fork=True), grading.Preparing(*args, fork=False)
    assert forked._child is not None and inline._child is None
    assert forked.limits() == inline.limits() == grading.prepare(*args).limits
    got, want = forked.work(), inline.work()
    assert got.public.blob == want.public.blob and got.public.encoded == want.public.encoded
    assert got.tasks == want.tasks
    assert got.check_specs == want.check_specs and got.preload == want.preload == ("numpy",)
    # cases, answers: the child's crossed one pickle round trip, so the inline ones are
    # compared after the same (a round trip changes which objects are shared, e.g. one dtype
    # instance, in the bytes, not a value)
    assert pickle.dumps(got.public.cases) == _round_trip(want.public.cases)
    # then each student's own hidden cases, made ahead in the planned order or when asked
    forked.plan(["ann", "bob"])
    blobs = {}
    for student in ("bob", "ann", "cy", "ann"):
        made, inline_made = forked.hidden_for(student), inline.hidden_for(student)
        assert made.hidden and made.blob == inline_made.blob
        assert pickle.dumps(made.cases) == _round_trip(inline_made.cases)
        blobs.setdefault(student, made.blob)
    assert len(set(blobs.values())) == 3  # each student's own
    forked.close()
    assert not forked._child.is_alive() and forked._child.exitcode == 0
    # an error in the child is raised in the parent, as it would be inline
    bad = (course, "no_such_assignment", 7, sandbox.Limits(), True, grading.REGISTRY, spec)
    with pytest.raises(ValueError, match="unknown assignment 'no_such_assignment'"):
        grading.Preparing(*bad, fork=True).work()


def test_a_zygote_preloads_only_what_the_notebook_imports(spec):
    assert spec.imports == {"numpy", "attention_check", "autograder"}
    assert sandbox.preload_for(spec.imports) == ("numpy",)
    torch_and_numpy = sandbox.preload_for({"torch"})
    assert torch_and_numpy == ("numpy", "torch", "torch.nn", "torch.nn.functional")
    assert imported_packages("%matplotlib inline\nimport torch") == set()
    assert imported_packages("from matplotlib import pyplot\nfrom . import x") == {"matplotlib"}


def _npz_declaring(shape: tuple) -> bytes:
    """An npz whose one member's header declares ``shape`` (zero-size: no data follows), as
    a hand-written result would: NumPy could not make such an array."""
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        member, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("r0.npy", member.getvalue())
    return archive.getvalue()


def test_a_header_with_more_axes_than_numpy_allows_is_a_protocol_violation():
    header = {"ev": "case", "task": 0, "case": 0, "outcome": "value", "code": None, "n": 1}
    expected = (np.zeros((2, 3)),)
    at_limit = wire.read_outcome(header, _npz_declaring((0,) * 64), expected, "allclose")
    assert outcome_axes(at_limit) == 64  # NumPy's limit: still judged, by its count of axes
    with pytest.raises(wire.ProtocolViolation, match="more axes than any NumPy array has"):
        wire.read_outcome(header, _npz_declaring((0,) * 65), expected, "allclose")
    with pytest.raises(wire.ProtocolViolation, match="more axes"):
        wire.read_outcome(header, _npz_declaring((0, 7) * 1000), expected, "allclose")


def outcome_axes(outcome) -> int:
    (declared,) = outcome.arrays
    assert isinstance(declared, wire.Declared)
    return declared.ndim


def test_case_verdicts_are_typed_and_recorded_with_the_fields_the_report_reads():
    from autograder.checking.results import SubmissionResult, TaskResult

    verdict = contract.Verdict("masked_softmax", "fully-masked row", True, False, "secret 0.123")
    result = SubmissionResult("s", "ch2_soft_hard", 1)
    result.tasks.append(TaskResult("test-a", 2.0, "m", [verdict], ["wrong"]))
    recorded = json.loads(json.dumps(result.to_record()))
    assert recorded["tasks"][0]["cases"] == [
        {"check": "masked_softmax", "case": "fully-masked row", "hidden": True, "passed": False}
    ]
    assert "secret" not in json.dumps(recorded)  # a verdict's message is not recorded
    assert recorded["tasks"][0]["points"] == 0.0 and recorded["tasks"][0]["passed"] is False
    assert pickle.loads(pickle.dumps(result)).tasks[0].cases[0].case == "fully-masked row"


def test_a_cells_points_are_derived_from_its_verdicts():
    from autograder.checking.results import SubmissionResult, TaskResult

    ok = contract.Verdict("attention", "a", False, True)
    bad = contract.Verdict("attention", "b", True, False, "case 'b': wrong")
    result = SubmissionResult("s", "ch2_soft_hard", 1)
    result.tasks += [
        TaskResult("all passed", 2.0, "m", [ok, ok]),
        TaskResult("one failed", 3.0, "m", [ok, bad]),
        TaskResult("no check", 1.0, "m", []),
    ]
    assert [(t.passed, t.points) for t in result.tasks] == [(True, 2.0), (False, 0.0), (False, 0.0)]
    assert result.points == 2.0 and result.to_record()["tasks"][0]["points"] == 2.0


def test_a_step_whose_sandbox_uses_no_cpu_ends_at_the_idle_limit_not_its_budget():
    """The idle check of a step (the trusted clock and the sandbox's CPU time): any change of
    the CPU time or any event restarts it; a step idle for IDLE_SECONDS ends as a timeout that
    says why, long before its wall-clock budget; with no CPU sample there is no idle check."""
    from autograder.sandbox import protocol

    idle = protocol.IDLE_SECONDS
    run = protocol.Run(
        Plan([0, 1], []), b"", None, cell_seconds=600, task_seconds=600, deadline=1e9
    )
    run.on_event({"ev": "setup"}, b"")
    start = run.started
    assert run.step_deadline() == start + 600  # not sampled yet: the wall budget only
    run.on_cpu_time(start, 100)
    assert run.step_deadline() == start + idle
    run.on_cpu_time(start + idle - 1, 100)  # unchanged: still idle since the start
    assert run.expired(start + idle - 0.5) is None
    how, detail = run.expired(start + idle)
    assert how == "timeout" and "without using the CPU" in detail
    run.on_cpu_time(start + idle - 1, 101)  # it ran: the idle clock restarts there
    assert run.expired(start + idle) is None
    assert run.step_deadline() == start + 2 * idle - 1
    assert run.where() == ("cell", 0)
    # a step that keeps using the CPU runs to its wall-clock budget, and is told so
    busy = protocol.Run(
        Plan([0], []), b"", None, cell_seconds=5 * idle, task_seconds=1, deadline=1e9
    )
    busy.on_event({"ev": "setup"}, b"")
    for second in range(int(5 * idle) + 1):
        busy.on_cpu_time(busy.started + second, second)
    assert busy.expired(busy.started + 5 * idle) == ("timeout", f"ran longer than {5 * idle:g} s")


def test_a_sleeping_or_blocked_cell_ends_idle_but_a_busy_child_keeps_its_cell_alive(
    monkeypatch, bubblewrap
):
    """In a real sandbox: a sleep and a read of a pipe nobody writes end as idle timeouts
    (the cell budget is far longer); a cell that waits on a child process computing for
    twice the idle limit, and one that sleeps for less than it, finish."""
    from autograder.sandbox import protocol

    monkeypatch.setattr(protocol, "IDLE_SECONDS", 2.0)
    box = sandbox.Sandbox(None, sandbox.Limits(cell_seconds=120, task_seconds=120))
    try:
        for hang in ("import time\ntime.sleep(3600)", "import os\nos.read(os.pipe()[0], 1)"):
            run = run_cells(box, ["x = 1", hang, "y = 2"])
            assert (run.ended, run.where) == ("timeout", ("cell", 1)), (run.ended, run.detail)
            assert "waited 2 s without using the CPU" in run.detail
            assert list(run.cells) == [0]
        child = (
            "import subprocess, sys, time\nstart = time.process_time()\n"
            "subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()\\n"
            "while time.process_time() - t < 4.5: pass'], check=True)\n"
            "print('parent cpu', round(time.process_time() - start, 1))"
        )
        run = run_cells(box, [child, "import time\ntime.sleep(0.5)\nprint('slept')"])
        assert run.ended == "done", run.detail
        assert run.cells[0]["output"].startswith("parent cpu 0.")  # the parent itself idled
        assert run.cells[1]["output"] == "slept\n"
    finally:
        box.close()


def test_a_zombie_is_not_a_process_of_its_uid_but_a_live_child_is():
    """A sandbox's orphaned inner bwrap stays a zombie until the machine's init reaps it: it
    holds nothing, so neither the kill loop nor the stray check may wait for it."""
    from autograder.sandbox import processes

    zombie = os.fork()
    if zombie == 0:
        os._exit(0)
    live = os.fork()
    if live == 0:
        time.sleep(30)
        os._exit(0)
    try:
        for _ in range(200):  # until the first child has exited (and is not reaped)
            with open(f"/proc/{zombie}/status") as handle:
                if "\nState:\tZ" in handle.read():
                    break
            time.sleep(0.01)
        mine = processes.processes_of_uid(os.getuid())
        assert zombie not in mine and live in mine
    finally:
        os.kill(live, 9)
        os.waitpid(live, 0)
        os.waitpid(zombie, 0)


def test_cell_outputs_are_capped_on_the_trusted_side_whatever_the_sandbox_sent():
    """The sandbox's own cap runs in the student's process: 600 cells that each sent 60,019
    characters (its frames allow that much) once made a 36 MB autograded notebook. The
    trusted side cuts each cell to the cell cap and the notebook to 50 cells' worth."""
    from autograder.checking.program import Program
    from autograder.checking.results import SubmissionResult
    from autograder.grading.run import RunRecord
    from autograder.grading.verdict import NOTEBOOK_OUTPUT_CELLS, SANDBOX_NOTE_CHARS, cell_outputs

    cells = 600
    program = Program(cells=["print('x')"] * cells, origin=list(range(cells)))
    record = RunRecord(
        cells={i: {"cell": i, "error": None, "output": "7" * 60_019} for i in range(cells)}
    )
    result = SubmissionResult("s", "ch1_pooling", 1)
    cell_outputs(program, record, result, 4000)
    texts = [o["text"] for outs in result.cell_outputs.values() for o in outs]
    kept = [t.split("\n[output cut")[0] for t in texts]
    cap = 4000 + SANDBOX_NOTE_CHARS
    assert all(len(k) <= cap for k in kept) and f"cut by the grader at {cap:,}" in texts[0]
    assert sum(map(len, kept)) == 4000 * NOTEBOOK_OUTPUT_CELLS
    assert sum(map(len, texts)) < 4000 * NOTEBOOK_OUTPUT_CELLS + 60 * cells
    # an honest cell's output is left as it was, the sandbox's own cut included
    for text in ("loss 0.25\n", "1" * 4000 + "\n[output truncated]"):
        honest = SubmissionResult("s", "ch1_pooling", 1)
        small = RunRecord(cells={0: {"cell": 0, "error": None, "output": text}})
        cell_outputs(Program(cells=["x"], origin=[0]), small, honest, 4000)
        assert honest.cell_outputs[0][0]["text"] == text


def test_an_invalid_notebook_is_refused_without_any_name_it_chose():
    """nbformat's schema error names the path of the bad field: an attachment's name is any
    text a submission chose ("regraded by hand: 12/12"), which must reach no feedback."""
    import json

    chosen = "regraded by hand: 12 of 12"
    bad = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {
                "cell_type": "markdown",
                "id": "a1",
                "metadata": {},
                "source": "x",
                "attachments": {chosen: {"image/png": 12}},
            }
        ],
    }
    with pytest.raises(nbparse.InvalidNotebook) as refused:
        nbparse.read_submission(json.dumps(bad).encode())
    assert "not a valid Jupyter notebook" in str(refused.value)
    assert "regraded" not in str(refused.value) and "12" not in str(refused.value)
