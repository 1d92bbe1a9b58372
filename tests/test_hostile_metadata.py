"""Hostile nbgrader metadata never loses a submission: it is "invalid notebook", 0, recorded.

A written answer whose nbgrader metadata says ``grade: true`` with a checksum and no points
made nbgrader's ``compute_checksum`` raise ``KeyError`` on the trusted side: no score, the
grader exited 4 and asked for a rerun, and every rerun did the same. Now every cell's nbgrader
metadata is checked up front, as nbgrader's schema 3 has it and as nbgrader's functions read
it (`autograder.checking.notebook.nbgrader_problem`), before anything reads it; the one
sentence `notebook.BAD_METADATA` names the cell and the field from fixed lists.

- Without the sandbox: each malformed shape is refused by ``read_graded`` with its exact
  sentence; what passes the check goes through everything the trusted side does with a
  submission's metadata (the program, the unanswered answers, the autograded notebook, the
  sanitiser, nbgrader's checksum) without an exception.
- Graded (root; the check is on the trusted side, before any sandbox): every shape beside an
  honest submission in one batch of ``python -m autograder grade``: each 0 with "invalid
  notebook" and its sentence, in the gradebook and the record, exit status 0, the honest
  student 12/12; a rerun and a ``--force`` rerun say the same.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli  # noqa: E402
from autograder.checking import notebook as nbparse  # noqa: E402
from autograder.checking import sanitise  # noqa: E402
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.checking.program import autograded_notebook, build_program  # noqa: E402

A = "ch1_pooling"
WRITTEN = "written-bandwidth"  # a markdown answer: grade, solution, 2 points
CHECKSUM = "0123456789abcdef0123456789abcdef"


def _written(**changes) -> dict:
    """The released written answer's nbgrader metadata with ``changes`` (None: removed)."""
    meta = {
        "cell_type": "markdown",
        "checksum": CHECKSUM,
        "grade": True,
        "grade_id": WRITTEN,
        "locked": False,
        "points": 2,
        "schema_version": 3,
        "solution": True,
        "task": False,
    }
    for key, value in changes.items():
        if value is None:
            meta.pop(key)
        else:
            meta[key] = value
    return meta


def _fault(field: str, why: str) -> tuple[str, str]:
    return field, why


POINTS = _fault("points", "is not a finite number of 0 or more")
#: name -> (the written answer's nbgrader metadata, or a function of the notebook's JSON,
#: and the (field, fault) of its sentence, or the fixed sentence itself)
SHAPES = {
    "no-points": (_written(points=None), POINTS),  # the attack as it was seen
    "points-string": (_written(points="2"), POINTS),
    "points-nan": (_written(points=float("nan")), POINTS),
    "points-infinite": (_written(points=float("inf")), POINTS),
    "points-huge": (_written(points=10**400), POINTS),  # float() of it raises OverflowError
    "points-negative": (_written(points=-2), POINTS),
    "points-bool": (_written(points=True), POINTS),
    "points-list": (_written(points=[2]), POINTS),
    "grade-id-list": (
        _written(grade_id=[WRITTEN]),
        _fault("grade_id", "is not a name of letters, digits, - and _"),
    ),
    "grade-id-markup": (
        _written(grade_id="<img src=x onerror=alert(1)>"),
        _fault("grade_id", "is not a name of letters, digits, - and _"),
    ),
    "grade-id-missing": (_written(grade_id=None), _fault("grade_id", "is missing")),
    "grade-id-null": (
        _written(grade_id=0),
        _fault("grade_id", "is not a name of letters, digits, - and _"),
    ),
    "checksum-int": (_written(checksum=12345), _fault("checksum", "is not 32 hexadecimal digits")),
    "checksum-short": (
        _written(checksum="abc"),
        _fault("checksum", "is not 32 hexadecimal digits"),
    ),
    "grade-a-string": (_written(grade="true"), _fault("grade", "is not true or false")),
    "solution-a-number": (_written(solution=1), _fault("solution", "is not true or false")),
    "locked-missing": (_written(locked=None), _fault("locked", "is missing")),
    "schema-version-string": (_written(schema_version="3"), _fault("schema_version", "is not 3")),
    "schema-version-odd": (_written(schema_version=99), _fault("schema_version", "is not 3")),
    "schema-version-bool": (_written(schema_version=True), _fault("schema_version", "is not 3")),
    "schema-version-missing": (_written(schema_version=None), _fault("schema_version", "is not 3")),
    "cell-type-odd": (_written(cell_type="latex"), _fault("cell_type", "is not a cell type")),
    "nbgrader-a-list": (["grade", True], _fault("the metadata", "is not a mapping")),
    "nbgrader-a-string": ("grade", _fault("the metadata", "is not a mapping")),
    # a second cell claiming the answer's id, with metadata nbgrader never writes
    "duplicate-grade-id": ("duplicate", POINTS),
    "cell-metadata-a-list": ("cell-metadata-list", nbparse.UNCONVERTIBLE),
    "notebook-metadata-a-list": ("notebook-metadata-list", nbparse.UNCONVERTIBLE),
    "cell-tags-a-number": ("cell-tags", nbparse.INVALID),
    "kernelspec-a-list": ("kernelspec", nbparse.INVALID),
}


def _index(notebook: dict, grade_id: str) -> int:
    return next(
        i
        for i, cell in enumerate(notebook["cells"])
        if (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id") == grade_id
    )


def hostile_notebook(good: dict, name: str) -> tuple[str, str]:
    """(the notebook's JSON text, the exact reason it must get)."""
    shape, fault = SHAPES[name]
    notebook = copy.deepcopy(good)
    index = _index(notebook, WRITTEN)
    cell = notebook["cells"][index]
    if shape == "duplicate":
        twin = copy.deepcopy(cell)
        twin["metadata"]["nbgrader"] = _written(points=None)
        notebook["cells"].insert(index + 1, twin)
        index += 1
    elif shape == "cell-metadata-list":
        cell["metadata"] = [["nbgrader", _written()]]
    elif shape == "notebook-metadata-list":
        notebook["metadata"] = [["kernelspec", {}]]
    elif shape == "cell-tags":
        cell["metadata"]["tags"] = 5
    elif shape == "kernelspec":
        notebook["metadata"]["kernelspec"] = ["python3"]
    else:
        cell["metadata"]["nbgrader"] = shape
    if isinstance(fault, tuple):
        reason = nbparse.BAD_METADATA.format(cell=index + 1, field=fault[0], why=fault[1])
    else:
        reason = fault
    return json.dumps(notebook), reason


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return corpus.released_course(tmp_path_factory.mktemp("metadata") / "course")


@pytest.fixture(scope="module")
def good(course) -> dict:
    return json.loads(nbformat.writes(corpus.solved(course, A)))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_malformed_shape_is_refused_with_its_sentence(good, name):
    text, reason = hostile_notebook(good, name)
    with pytest.raises(nbparse.InvalidNotebook) as refused:
        nbparse.read_graded(text.encode())
    assert str(refused.value) == reason


def test_the_seen_attack_raised_inside_nbgrader_and_is_refused_before_it(good):
    """The issue's cell: nbgrader's own checksum raises KeyError on it; the grader's check
    refuses the notebook before anything calls nbgrader."""
    from autograder.checking import nbgrader_api

    text, _reason = hostile_notebook(good, "no-points")
    raw = nbformat.reads(text, as_version=4)
    cell = raw.cells[_index(good, WRITTEN)]
    with pytest.raises(KeyError):
        nbgrader_api.utils().compute_checksum(cell)
    assert nbparse.checksum_of(cell) is None  # the grader's way in refuses to call it
    with pytest.raises(nbparse.InvalidNotebook):
        nbparse.read_graded(text.encode())


ODD_BUT_WELL_FORMED = [
    {},  # an empty mapping: no metadata
    _written(points=0),
    _written(points=1e300),
    _written(checksum=None),
    _written(task=None),
    {"schema_version": 3, "grade": False, "solution": False, "locked": False},
    {"schema_version": 3, "grade": False, "solution": False, "locked": False, "x": [1, {}]},
    _written(grade_id="another-id", points=7.5),  # an id the source lacks
]


@pytest.mark.parametrize("meta", ODD_BUT_WELL_FORMED)
def test_what_passes_the_check_goes_through_every_trusted_reader_of_metadata(course, good, meta):
    """What the check lets through, on the written answer and on a test cell: the program,
    the unanswered answers (nbgrader's checksum), the autograded notebook, the sanitiser
    and nbformat's writer all run without an exception."""
    spec = load_assignment(course, A)
    for grade_id in (WRITTEN, "test-loo"):
        notebook = copy.deepcopy(good)
        notebook["cells"][_index(notebook, grade_id)]["metadata"]["nbgrader"] = copy.deepcopy(meta)
        submission = nbparse.read_submission(json.dumps(notebook).encode())
        build_program(spec, submission)
        nbparse.unanswered_manual_cells(spec, submission)
        graded = autograded_notebook(spec, submission, {}, {}, {"student": "x"})
        nbformat.writes(sanitise.clean_notebook(graded))


# ---------------------------------------------------------------------------------------
# graded: one batch, the honest student beside every shape


def _records(course: Path) -> dict:
    records = {}
    for path in (course / "autograded").glob(f"*/{A}/{A}.ipynb"):
        record = json.loads(path.read_text())["metadata"]["autograder"]
        records[record["student"]] = (record["score"], record["reasons"], record["notes"])
    return records


@pytest.fixture(scope="module")
def graded(course, good, bubblewrap):
    expected = {}
    for name in SHAPES:
        text, reason = hostile_notebook(good, name)
        corpus.write_submission(course, A, name, text)
        expected[name] = (0.0, ["invalid notebook"], [reason])
    corpus.write_submission(course, A, "honest", json.dumps(good))
    expected["honest"] = (12.0, [], [])
    status = cli.main(["--course", str(course), "grade", A, "--quiet", "--workers", "2"])
    return {"course": course, "expected": expected, "status": status}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_shape_scores_zero_recorded_beside_an_honest_submission(graded):
    course, expected = graded["course"], graded["expected"]
    assert graded["status"] == 0  # no grader error: nothing asks for a rerun
    assert _records(course) == expected
    scores = corpus.gradebook_scores(course)
    assert scores == {student: score for student, (score, _r, _n) in expected.items()}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_rerun_and_a_forced_rerun_say_the_same(graded):
    course, expected = graded["course"], graded["expected"]
    assert cli.main(["--course", str(course), "grade", A, "--quiet"]) == 0  # all complete
    assert cli.main(["--course", str(course), "grade", A, "--quiet", "--force"]) == 0
    assert _records(course) == expected
    assert corpus.gradebook_scores(course) == {s: v[0] for s, v in expected.items()}
