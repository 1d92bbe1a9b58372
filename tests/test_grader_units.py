"""Each step of the grader alone: wire format, parse (program + tampering), judge, sandbox command."""

from __future__ import annotations

import io
import os

import nbformat
import numpy as np
import pytest

from autograder import checks, grading, notebook as nbparse, sandbox, worker


def _cell(source, grade_id=None, *, grade=False, solution=False, locked=False, points=0, kind="code"):
    cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": grade, "solution": solution,
                                     "locked": locked, "points": points, "schema_version": 3, "task": False}
    return cell


TEST_SOURCE = ('check("masked_softmax", masked_softmax)\n### BEGIN HIDDEN TESTS\n'
               'from autograder.checks import run_hidden\nrun_hidden("masked_softmax", masked_softmax)\n'
               '### END HIDDEN TESTS')


@pytest.fixture
def spec(tmp_path):
    source = nbformat.v4.new_notebook(cells=[
        _cell("import numpy as np\nfrom attention_check import check", "setup", locked=True),
        _cell("def masked_softmax(s, mask=None):\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION",
              "softmax", solution=True),
        _cell(TEST_SOURCE, "test-softmax", grade=True, locked=True, points=3),
    ])
    folder = tmp_path / "source" / "hw"
    folder.mkdir(parents=True)
    nbformat.write(source, folder / "hw.ipynb")
    return nbparse.load_assignment(tmp_path, "hw")


def _submission(spec, *cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def test_frames_round_trip_and_reject_garbage():
    read, write = os.pipe()
    worker.write_frame(write, {"ev": "case", "n": 1}, b"\x00\x01")
    assert worker.read_frame(read) == ({"ev": "case", "n": 1}, b"\x00\x01")
    os.write(write, b"JUNK" + bytes(8))
    with pytest.raises(ValueError, match="magic"):
        worker.read_frame(read)


def test_returned_scalars_stay_zero_dimensional_and_non_numbers_are_flagged():
    converted = worker.to_arrays((1.5, np.float64(2.0)))
    assert converted["structure"] == "tuple" and [a.shape for a in converted["arrays"]] == [(), ()]
    assert worker.to_arrays(None) == {"bad_type": "NoneType"}
    assert worker.to_arrays("text")["bad_type"] == "str"
    import torch

    assert worker.to_arrays(torch.ones(2, 3, requires_grad=True))["arrays"][0].shape == (2, 3)


def test_case_values_cross_as_npz_without_pickle():
    arrays = {}
    specs = [grading.encode_value(v, arrays, checks) for v in
             (np.arange(3.0), checks.Seeded(4), 2, 0.1, True, "dot", None)]
    blob = worker.npz_bytes(arrays)
    loaded = np.load(io.BytesIO(blob), allow_pickle=False)
    values = [worker.decode_value(s, loaded) for s in specs]
    assert np.array_equal(values[0], np.arange(3.0)) and values[2:] == [2, 0.1, True, "dot", None]
    assert values[1].random() == np.random.default_rng(4).random()
    with pytest.raises(TypeError, match="cannot be sent"):
        grading.encode_value(object(), arrays, checks)


def test_hidden_test_region_is_removed_exactly_as_nbgrader_does():
    from nbgrader.preprocessors import ClearHiddenTests

    cell = _cell(TEST_SOURCE, "t", grade=True, points=1)
    ClearHiddenTests().preprocess_cell(cell, {}, 0)
    assert nbparse.strip_hidden_tests(TEST_SOURCE) == cell.source


def test_spec_comes_from_the_source_notebook(spec):
    assert [(t.grade_id, t.points, t.checks) for t in spec.tests] == [
        ("test-softmax", 3.0, (("masked_softmax", "masked_softmax"),))]
    assert "run_hidden" not in spec.tests[0].released


def test_program_drops_test_cells_and_restores_locked_cells(spec):
    released_test = spec.tests[0].released
    submission = _submission(
        spec,
        _cell("import numpy as np\nnp.allclose = lambda *a, **k: True", "setup", locked=True),  # edited locked
        _cell("def masked_softmax(s, mask=None):\n    return s", "softmax", solution=True),
        _cell(released_test, "test-softmax", grade=True, locked=True, points=3),
        _cell(released_test),  # an anonymous copy
    )
    program = nbparse.build_program(spec, submission)
    assert program.cells[0] == spec.locked["setup"]
    assert program.cells[1].startswith("def masked_softmax")
    assert len(program.cells) == 2 and all("check(" not in c for c in program.cells)
    assert program.tampering == ["locked cell 'setup' was edited (the original was run)",
                                 "test cell 'test-softmax' is duplicated (a copy without its metadata)"]


def test_edited_and_deleted_test_cells_are_reported_and_deleted_locked_cells_come_back(spec):
    edited = nbparse.build_program(spec, _submission(
        spec, _cell("def masked_softmax(s, mask=None):\n    return s", "softmax", solution=True),
        _cell("pass", "test-softmax", grade=True, locked=True, points=3)))
    assert "test cell 'test-softmax' was edited" in edited.tampering
    assert edited.cells[0] == spec.locked["setup"]  # the deleted setup cell runs first again
    deleted = nbparse.build_program(spec, _submission(
        spec, _cell("def masked_softmax(s, mask=None):\n    return s", "softmax", solution=True)))
    assert "test cell 'test-softmax' was deleted" in deleted.tampering


@pytest.mark.parametrize("minor", [4, 5])
def test_autograded_notebook_is_valid_for_the_submissions_nbformat(spec, minor):
    """4.5 requires cell ids, 4.4 forbids them; the rebuilt test cell must follow the submission."""
    submission = _submission(spec, _cell("def masked_softmax(s, mask=None):\n    return s", "softmax", solution=True))
    submission.nbformat_minor = minor
    for cell in submission.cells:
        if minor < 5:
            cell.pop("id", None)
    graded = nbparse.autograded_notebook(spec, submission, {"test-softmax": (False, "wrong")}, {}, {})
    nbformat.validate(graded)  # raises on an id where 4.4 forbids one, or a missing one in 4.5
    assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in graded.cells][-1] == "test-softmax"
    from_nothing = nbparse.autograded_notebook(spec, None, {}, {}, {})  # an invalid submission
    nbformat.validate(from_nothing)


def test_invalid_json_is_an_invalid_notebook(tmp_path):
    path = tmp_path / "x.ipynb"
    path.write_text("{ not json")
    with pytest.raises(nbparse.InvalidNotebook, match="not a readable Jupyter notebook"):
        nbparse.read_submission(path)


def test_hidden_messages_never_repeat_the_students_exception_text():
    case = checks.Case("secret case", (np.zeros(2),), {})
    header = {"error": {"type": "ValueError", "message": "inputs were [0.123, 0.456]"}}
    passed, message = grading.judge_case(checks, "masked_softmax", case, True, None, header, b"")
    assert not passed and message == "case 'secret case': masked_softmax raised ValueError"
    _passed, public = grading.judge_case(checks, "masked_softmax", case, False, None, header, b"")
    assert "0.123" in public


def test_wrong_shape_is_judged_on_the_trusted_side_with_a_teaching_message():
    case = checks.public_cases("masked_softmax")[0]
    expected = checks.expected("masked_softmax", case)
    wrong = np.swapaxes(expected[0], -1, -2) if expected[0].ndim >= 2 else expected[0][:1]
    header = {"structure": "single", "n": 1}
    passed, message = grading.judge_case(checks, "masked_softmax", case, False, expected, header,
                                         worker.npz_bytes({"r0": wrong}))
    assert not passed and "shape" in message


def test_sandbox_command_isolates_network_course_files_and_uid(tmp_path):
    if sandbox.find_bwrap() is None:
        pytest.fail("bubblewrap is required: apt-get install bubblewrap")
    command = sandbox.sandbox_command(61234, tmp_path, sandbox.Limits(), 5)
    joined = " ".join(command)
    assert "--unshare-net" in command and "--die-with-parent" in command and "--new-session" in command
    assert "--reuid=61234" in command and "--clearenv" in command
    repo = str(sandbox.Path(grading.__file__).resolve().parents[1])
    bound = [command[i + 1] for i, arg in enumerate(command) if arg in ("--ro-bind", "--bind")]
    assert not any(path in (repo, repo + "/solutions", repo + "/autograder") for path in bound), bound
    assert "/solutions" not in joined and "gradebook" not in joined
    # the private /tmp is mounted before every bind, so a virtualenv under /tmp stays visible
    assert command.index("--tmpfs") < command.index("--ro-bind")


def test_summary_table_lists_reasons():
    result = grading.SubmissionResult("alice", "hw", 1, score=2, max_score=5, reasons=["timeout", "crash"])
    table = grading.summary_table([result], [("bob", "already graded")])
    assert "alice    2      5    timeout, crash" in table and "skipped: already graded" in table


def test_the_submission_cannot_reach_the_zygotes_control_pipe(tmp_path):
    if sandbox.find_bwrap() is None:
        pytest.fail("bubblewrap is required: apt-get install bubblewrap")
    box = sandbox.Sandbox(None, sandbox.Limits(cell_seconds=20, task_seconds=20))
    try:
        probe = ("import os\nparent = os.getppid()\n"
                 "try:\n    print('open', os.listdir(f'/proc/{parent}/fd'))\n"
                 "except OSError as err:\n    print('denied', type(err).__name__)\n"
                 "print('fds', sorted(int(f) for f in os.listdir('/proc/self/fd')))")
        run = box.run({"cells": [probe]}, {"tasks": []}, b"")
        output = next(h["output"] for h, _b in run.events if h.get("ev") == "cell")
        assert run.ended == "done" and "denied PermissionError" in output
        # garbage on every descriptor the child holds costs that run, and the next run is clean
        flood = "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\x00' * 64)\n    except OSError:\n        pass"
        assert box.run({"cells": [flood]}, {"tasks": []}, b"").ended == "crash"
        assert box.run({"cells": ["x = 1"]}, {"tasks": []}, b"").ended == "done"
    finally:
        box.close()
