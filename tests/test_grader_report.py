"""The instructor's HTML report (`python -m autograder report`) with hostile student ids.

Student ids, notes and wrong-answer messages come from submissions (an LMS export, a file
name); the page is parsed back and must show each of them as text, exactly, with no element
or attribute of theirs: no script, no handler, no attribute broken out of by a quote.
"""

from __future__ import annotations

import html.parser

import nbformat

from autograder import cli

A = "ch1_pooling"
HOSTILE_IDS = [
    "<script>window.__pwned=1</script>",
    '" onmouseover="window.__pwned=2',
    "' autofocus onfocus='window.__pwned=3",
    "<img src=x onerror=window.__pwned=4>",
]


class Page(html.parser.HTMLParser):
    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.cells: list[str] = []  # the text of every table cell and <code> element
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag in ("td", "code"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag):
        if tag in ("td", "code") and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _record(student: str, index: int) -> dict:
    return {
        "student": student,
        "assignment": A,
        "seed": 1,
        "score": 3.0,
        "max_score": 12.0,
        "reasons": ["tampered"],
        "notes": [f"test cell '<b>{index}</b>' was edited"],
        "tasks": [
            {
                "grade_id": "test-pooling",
                "passed": False,
                "cases": [["epanechnikov_weights", "one item", False, False]],
                "message": "epanechnikov_weights: 1 of 1 public cases failed\n  - case 'one "
                f"item': <script>window.__pwned={index}</script> differs",
            }
        ],
    }


def test_report_escapes_hostile_student_ids_notes_and_messages(tmp_path):
    course = tmp_path / "course"
    for i, student in enumerate(HOSTILE_IDS):
        folder = course / "autograded" / f"s{i}" / A
        folder.mkdir(parents=True)
        notebook = nbformat.v4.new_notebook()
        notebook.metadata["autograder"] = _record(student, i)
        nbformat.write(notebook, folder / f"{A}.ipynb")
    out = tmp_path / "report.html"
    assert cli.main(["--course", str(course), "report", A, "--out", str(out)]) == 0
    page = Page(out.read_text())

    tags = [tag for tag, _ in page.elements]
    assert "script" not in tags and tags.count("img") == 3  # the three figures only
    for tag, attrs in page.elements:
        assert not [a for a in attrs if a.lower().startswith("on") or a == "autofocus"], tag
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,"), attrs
    for student in HOSTILE_IDS:  # shown as text, exactly, in the table of students
        assert student in page.cells
    for i in range(len(HOSTILE_IDS)):
        assert f"tampered\ntest cell '<b>{i}</b>' was edited" in page.cells
    # the four messages differ only in a number, so they are counted as one, shown as text
    assert "epanechnikov_weights: <script>window.__pwned=#</script> differs" in page.cells


# ---------------------------------------------------------------------------------------
# the most common mistakes: once per student, by check and named mistake


def _graded(student: str, failures: dict):
    """The record of a submission of ch1 whose check ``name`` failed with ``failures[name]``
    ((case, hidden, message) each), every other check passed: the grader's own lines."""
    from autograder.checking.results import SubmissionResult, TaskResult
    from autograder.grading import verdict
    from autograder.student import contract

    result = SubmissionResult(student, A, 1, max_score=12.0)
    for grade_id, check in [("test-pooling", "epanechnikov_weights"), ("test-nw", "nw_ard")]:
        verdicts = [
            contract.Verdict(check, case, hidden, False, message)
            for case, hidden, message in failures.get(check, [])
        ] + [contract.Verdict(check, f"ok {i}", i % 2 == 0, True) for i in range(4)]
        lines, wrong = verdict._feedback(check, verdicts, "en"), verdict._shown(verdicts)
        result.tasks.append(TaskResult(grade_id, 6.0, "\n".join(lines), verdicts, wrong))
    return SubmissionResult.from_record(result.to_record())  # as the report reads it back


def test_each_mistake_is_counted_once_per_student_by_check_and_name():
    """10 students: 6 make the known mistake "no clipping" (on one to four cases each, public
    and hidden), 3 of them also "transposed" on another check; 2 raise at their own line; one
    notebook was refused (all its test cells not graded). The report lists each mistake with
    the number of students who made it, most first, no case names, no line of anyone's."""
    from autograder.checking.assignment_spec import load_assignment
    from autograder.checking.results import SubmissionResult
    from autograder.course import report
    from autograder.grading import verdict

    clipping = "your result matches a known mistake: no clipping at 0 (eq. 1.4)"
    records = []
    for i in range(6):
        cases = [
            (f"case {k}", k % 2 == 1, f"case 'case {k}': {clipping}") for k in range(1 + i % 4)
        ]
        failures = {"epanechnikov_weights": cases}
        if i < 3:
            failures["nw_ard"] = [
                (
                    "wide",
                    False,
                    f"case 'wide': expected shape (3, {i + 4}), got ({i + 4}, 3): transposed?",
                )
            ]
        records.append(_graded(f"s{i}", failures))
    for i in range(2):
        raised = (
            f"case 'small': epanechnikov_weights raised ValueError (at line {i + 3} of notebook "
            f"cell {i + 7}: `x = y{i} @ z`)"
        )
        records.append(_graded(f"r{i}", {"epanechnikov_weights": [("small", False, raised)]}))
    spec = load_assignment(_course(), A)
    refused = SubmissionResult("bad", A, 1, max_score=12.0)
    verdict.not_graded(spec, refused, "invalid notebook", "the notebook has 3,000 cells")
    records.append(SubmissionResult.from_record(refused.to_record()))
    records.append(_graded("perfect", {}))
    shown = report.summarise(records)["messages"]
    assert shown == [
        (("epanechnikov_weights", "no clipping at 0 (eq. 1.4)"), 6),
        (("nw_ard", "expected shape (#, #), got (#, #): transposed?"), 3),
        (("epanechnikov_weights", "epanechnikov_weights raised ValueError"), 2),
        (("", "not graded: the notebook has #,# cells"), 1),
    ]
    page = report.render(A, report.summarise(records))
    assert "<b>6 students</b> <code>epanechnikov_weights: no clipping at 0 (eq. 1.4)</code>" in page
    assert "<b>1 student</b> <code>not graded: the notebook has #,# cells</code>" in page


def _course():
    from pathlib import Path

    return Path(__file__).resolve().parents[1] / "autograder"
