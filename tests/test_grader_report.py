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
                "wrong": [f"epanechnikov_weights: <script>window.__pwned={index}</script> differs"],
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
