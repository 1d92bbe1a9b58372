"""The instructor's HTML report (`python -m autograder report`): what the class got wrong and
what needs an instructor, every string from a submission shown as text.

Student ids, notes and wrong-answer messages come from submissions (an LMS export, a file
name); the page is parsed back and must show each of them as text, exactly, with no element
or attribute of theirs: no script, no handler, no attribute broken out of by a quote.

A class's records are made as the grader makes them: each student's functions (a chapter's
known mistake, one the diagnosis derives, the stub left as given) run on the check's public
and hidden cases, the outcomes judged by ``grading.verdict.judge`` in the notebook's language
(English or Chinese), as the sandbox would send them back; no sandbox runs.
"""

from __future__ import annotations

import dataclasses
import html.parser
import re
import shutil
import sys
import types
import warnings
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder import cli
from autograder.checking import checks, notebook
from autograder.checking.assignment_spec import load_assignment
from autograder.checking.program import DROPPED
from autograder.checking.results import GRADER_ERROR, SubmissionResult
from autograder.course import report
from autograder.course.hand_grading import HandGrading
from autograder.grading import check_data, run, verdict
from autograder.student import contract

sys.path.insert(0, str(Path(__file__).parent))
import unseen_mistakes as unseen  # noqa: E402

A = "ch1_pooling"
KNOWN = "your result matches a known mistake: "
HOSTILE_HINT = "<img src=x onerror=window.__pwned=5> & <b>"
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
        self.tables: list[list[list[str]]] = []  # each table's rows, each row's cells' text
        self._cell: list[str] | None = None
        self.feed(text)

    def rows(self, first_header: str) -> list[list[str]]:
        """The rows, headers left out, of every table whose first header is ``first_header``."""
        return [row for table in self.tables if table[0][:1] == [first_header] for row in table[1:]]

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        if tag in ("td", "code", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag):
        if tag in ("td", "code", "th") and self._cell is not None:
            text = "".join(self._cell)
            if tag != "th":
                self.cells.append(text)
            if tag != "code" and self.tables and self.tables[-1]:
                self.tables[-1][-1].append(text)
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
                "wrong": [f"case 'one item': {KNOWN}{HOSTILE_HINT}"],
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
    # the mistake the four records name is one, shown as text
    assert page.rows("students") == [["4", HOSTILE_HINT]]


# ---------------------------------------------------------------------------------------
# a class as the grader records it: its named mistakes lead, what needs an instructor follows

HIDDEN_SEED = 7
COURSE = Path(__file__).resolve().parents[1] / "autograder"
CH2 = "ch2_soft_hard"
WRITTEN = "written-sparsemax"  # ch2's written answer: 2 points, graded by hand


def _stub(*args, **kwargs):
    raise NotImplementedError()


class Assignment:
    """An assignment's test cells (``grade_ids``: some of them), each check's public and
    hidden cases, and the reference's outcomes on them: ``grade`` judges a student's
    functions as ``grading.verdict.judge`` does with what a sandbox would send back."""

    def __init__(self, assignment: str, grade_ids=None):
        spec = load_assignment(COURSE, assignment)
        tests = tuple(t for t in spec.tests if grade_ids is None or t.grade_id in grade_ids)
        self.name, self.tests, self.assignment = assignment, tests, spec
        self.spec = types.SimpleNamespace(tests=tests, max_score=sum(t.points for t in tests))
        self.tasks = check_data.tasks_of(self.spec)
        self.specs = {t.check: checks.spec(t.check) for t in self.tasks}
        self.cases = [
            [checks.prepare(t.check, c) for c in checks.public_cases(t.check)]
            + [checks.prepare(t.check, c, True) for c in checks.hidden_cases(t.check, HIDDEN_SEED)]
            for t in self.tasks
        ]
        self.reference = [
            self._run(i, checks.REGISTRY[t.check].reference) for i, t in enumerate(self.tasks)
        ]

    def _run(self, index: int, fn) -> dict:
        return {
            (index, j): contract.run_case(fn, *c.fresh()) for j, c in enumerate(self.cases[index])
        }

    def grade(
        self, student: str, functions=None, language="en", stopped=None, missing=None
    ) -> SubmissionResult:
        """The record of ``student`` whose ``functions`` (name -> function) replace the
        reference's; ``stopped``: task index -> the reason the grader stopped it;
        ``missing``: task index -> "undefined" where the notebook defines no such function."""
        outcomes = {}
        for i, task in enumerate(self.tasks):
            fn = (functions or {}).get(task.function)
            outcomes.update(self._run(i, fn) if fn else self.reference[i])
        failed = {i: run.Failure(why, "") for i, why in (stopped or {}).items()}
        result = SubmissionResult(student, self.name, HIDDEN_SEED, max_score=self.spec.max_score)
        record = run.RunRecord(outcomes=outcomes, failed_tasks=failed, missing=missing or {})
        verdict.judge(self.spec, self.specs, self.cases, record, result, language)
        result.score = result.points
        return SubmissionResult.from_record(result.to_record())  # as the report reads it back

    def refused(self, student: str) -> SubmissionResult:
        result = SubmissionResult(student, self.name, HIDDEN_SEED, max_score=self.spec.max_score)
        verdict.not_graded(self.assignment, result, "invalid notebook", notebook.INVALID)
        return SubmissionResult.from_record(result.to_record())


def _mistake(check: str, start: str):
    """The chapter's known mistake of ``check`` whose hint starts so: (hint, its function)."""
    found = [m for m in checks.REGISTRY[check].mistakes if m.hint.startswith(start)]
    assert len(found) == 1, [m.hint for m in checks.REGISTRY[check].mistakes]
    return found[0].hint, found[0].outputs


UNSCALED, FORGOT_SQRT_D = _mistake(
    "attention_backward", "the scores are divided by sqrt(d), so the chain rule"
)
MASK_INVERTED = dict((w, f) for n, w, f in unseen.CORPUS if n == "attention_backward")[
    "mask inverted"
]
#: what the diagnosis calls that mistake (derived from the reference: no chapter hint names it)
MASK_INVERTED_NAME = "the solution computed with the mask `mask` inverted (True means may attend)"


@pytest.fixture(scope="module")
def ch2_class():
    """40 records of ch2 as in issue 46's class: 3 forgot the 1/sqrt(d) of the backward pass
    (one of them Chinese), 2 inverted the mask (a derived mistake; one Chinese), 1 dropped
    softmax_backward's P (a chapter's mistake coincides on one case only), 3 blanks (one
    Chinese), 1 crash (the grader stopped attention_backward), 1 refused notebook, 1 student
    not on the roster who got it all right and 28 who did."""
    ch2 = Assignment(CH2)
    blank = {t.function: _stub for t in ch2.tasks}
    attention = ("attention_backward",)
    records = [
        ch2.grade("unscaled-1", dict.fromkeys(attention, FORGOT_SQRT_D)),
        ch2.grade("unscaled-2", dict.fromkeys(attention, FORGOT_SQRT_D)),
        ch2.grade("unscaled-zh", dict.fromkeys(attention, FORGOT_SQRT_D), "zh_CN"),
        ch2.grade("mask-en", dict.fromkeys(attention, MASK_INVERTED)),
        ch2.grade("mask-zh", dict.fromkeys(attention, MASK_INVERTED), "zh_CN"),
        ch2.grade("no-p", {"softmax_backward": unseen.softmax_bw_no_p}),
        ch2.grade("blank-1", blank),
        ch2.grade("blank-2", blank),
        ch2.grade("blank-zh", blank, "zh_CN"),
        ch2.grade("crash", stopped={1: "crash"}),
        ch2.refused("refused"),
        ch2.grade("stranger"),
    ]
    records += [ch2.grade(f"ok-{i:02}") for i in range(28)]
    return ch2, records


def _hand(grade, state: str) -> None:
    """A written answer's grade as the formgrader leaves it (``hand_grading``'s rules)."""
    grade.auto_score, grade.manual_score, grade.needs_manual_grade = {
        "waiting": (None, None, True),  # nobody scored it yet
        "graded": (None, 2.0, False),
        "review": (None, 2.0, True),  # scored, then the student resubmitted
        "empty": (0.0, None, False),  # left as released: nbgrader scores 0, asks no one
    }[state]


def _course(tmp, empty_gradebook, ch2, records, hand: dict, roster: set, lost=()) -> Path:
    """A course whose autograded notebooks hold ``records`` and whose gradebook holds the
    roster (each with a name; anyone else as the grader names a student it meets: the id as
    last name) and their scores, the written answer of each as ``hand`` says."""
    course = tmp / "course"
    course.mkdir()
    shutil.copy(empty_gradebook, course / "gradebook.db")
    for record in records:
        folder = course / "autograded" / record.student / CH2
        folder.mkdir(parents=True)
        nb = nbformat.v4.new_notebook()
        nb.metadata["autograder"] = record.to_record()
        nbformat.write(nb, folder / f"{CH2}.ipynb")
    for student in lost:  # collected, never recorded
        folder = course / "submitted" / student / CH2
        folder.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(), folder / f"{CH2}.ipynb")
    # nbgrader's add_submission trips SQLAlchemy's autoflush warning (as in course/gradebook.py)
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        warnings.simplefilter("ignore")
        gb.add_assignment(CH2)
        gb.add_notebook(CH2, CH2)
        for test in ch2.tests:
            gb.add_grade_cell(test.grade_id, CH2, CH2, max_score=test.points, cell_type="code")
        gb.add_grade_cell(WRITTEN, CH2, CH2, max_score=2.0, cell_type="markdown")
        for student in sorted(roster):
            gb.update_or_create_student(student, first_name="Ada", last_name=f"L-{student}")
        for record in records:
            if record.student not in roster:
                gb.update_or_create_student(record.student, first_name="", last_name=record.student)
            gb.add_submission(CH2, record.student)
            for task in record.tasks:
                grade = gb.find_grade(task.grade_id, CH2, CH2, record.student)
                grade.auto_score, grade.needs_manual_grade = task.points, False
            _hand(gb.find_grade(WRITTEN, CH2, CH2, record.student), hand[record.student])
        gb.db.commit()
    return course


def test_the_report_leads_with_the_named_mistakes_and_lists_only_what_needs_an_instructor(
    tmp_path, empty_gradebook, ch2_class
):
    """Issue 46, item 9: the named mistakes with how many students made each (an English and
    a Chinese student with the same mistake one count), then per task the failures no
    mistake names and the functions not implemented (counts, never a "mistake"), no
    fragment of a message; "to look at" lists the crash, the refused notebook (whose
    written answer waits though it has none), a score by hand on a resubmission, the
    student not on the roster and a submission with no record, each with why, and not the
    31 written answers that merely wait for the formgrader."""
    ch2, records = ch2_class
    hand = dict.fromkeys((r.student for r in records), "graded")
    waiting = [f"ok-{i:02}" for i in range(28)] + ["unscaled-1", "unscaled-zh", "mask-en"]
    hand.update(dict.fromkeys(waiting, "waiting"))
    hand.update({"unscaled-2": "review", "refused": "waiting"})
    hand.update(dict.fromkeys(["blank-1", "blank-2", "blank-zh"], "empty"))
    roster = {r.student for r in records if r.student != "stranger"} | {"lost"}
    course = _course(tmp_path, empty_gradebook, ch2, records, hand, roster, lost=["lost"])
    out = tmp_path / "report.html"
    assert cli.main(["--course", str(course), "report", CH2, "--out", str(out)]) == 0
    text = out.read_text()
    page = Page(text)

    assert page.rows("students") == [["3", UNSCALED], ["2", MASK_INVERTED_NAME]]
    assert text.index("Named mistakes") < text.index("Per task") < text.index("to look at")
    assert page.rows("task") == [
        # task, passed, a named mistake, failed with none named, not implemented, not judged
        ["test-softmax-backward", "35", "0", "1", "3", "1"],
        ["test-attention-backward", "30", "5", "0", "3", "2"],
        ["test-sparsemax", "36", "0", "0", "3", "1"],
        ["test-sparsemax-backward", "36", "0", "0", "3", "1"],
    ]
    for fragment in ("not implemented yet", "尚未实现", "另有", "failed too", "... and"):
        assert fragment not in text, fragment

    looked_at = {row[0]: row[2] for row in page.rows("student")}
    assert sorted(looked_at) == ["crash", "lost", "refused", "stranger", "unscaled-2"]
    assert looked_at["crash"].startswith(report.REASON_WHYS["crash"] + "\n")
    assert "attention_backward: its process ended early" in looked_at["crash"]
    assert looked_at["refused"].startswith(
        f"{report.REASON_WHYS['invalid notebook']}\n"
        + report.REFUSED_WAITING.format("+ 2 to grade by hand")
    )
    assert looked_at["unscaled-2"].startswith(report.REVIEW.format("1 cell to review by hand"))
    assert looked_at["stranger"].startswith(report.NOT_ON_ROSTER)
    assert looked_at["lost"] == report.NO_RECORD
    assert (
        "Written answers waiting in the formgrader, not listed above: 31 submissions, "
        "+ 62 to grade by hand in all" in text
    )


def test_a_mistake_named_by_coincidence_on_one_case_is_not_counted(ch2_class):
    """softmax_backward without its P factor fails every case with wrong values; on the case
    of one key its result is also what log-softmax's backward pass gives. The grader no
    longer names that mistake there (``Mistake(everywhere=True)``: named only where every
    failing case agrees), but a record written before, or a hand mistake named wherever it
    matches, can hold one such line: the student did not make that mistake, and the report
    counts the task as a failure with no mistake named."""
    _ch2, records = ch2_class
    no_p = next(r for r in records if r.student == "no-p")
    task = next(t for t in no_p.tasks if t.grade_id == "test-softmax-backward")
    assert [sort for sort, _ in report.findings(task)].count("hint") == 0  # the grader's rule
    log_softmax = next(
        m.hint for m in checks.REGISTRY["softmax_backward"].mistakes if "log-softmax" in m.hint
    )
    one_case = re.match(r"case '([^']+)'", task.wrong[0])[1]
    coincidence = f"case '{one_case}': your result matches a known mistake: {log_softmax}"
    task = dataclasses.replace(task, wrong=[coincidence, *task.wrong[1:]])
    found = report.findings(task)
    assert [sort for sort, _ in found].count("hint") == 1 and len(found) > 2
    assert report.task_outcome(task) == ("unnamed", [])


def test_forgetting_sqrt_d_h_is_one_mistake_whatever_the_language():
    """ch6's cross-attention (the Moodle class of issue 46): 2 students forgot to divide the
    scores by sqrt(d_h), one reading English feedback and one Chinese, 1 divided by
    sqrt(d_model): two named mistakes, 2 and 1 students."""
    ch6 = Assignment("ch6_transformer", {"test-cross-attention"})
    forgot, no_sqrt_d_h = _mistake("cross_attention", "you forgot to divide the scores")
    d_model, by_sqrt_d_model = _mistake("cross_attention", "divide each head's scores")
    records = [
        ch6.grade("en", {"cross_attention": no_sqrt_d_h}),
        ch6.grade("zh", {"cross_attention": no_sqrt_d_h}, "zh_CN"),
        ch6.grade("d-model", {"cross_attention": by_sqrt_d_model}),
        ch6.grade("right"),
    ]
    chinese = records[1].tasks[0].message
    assert "sqrt(d_h)" in chinese and forgot not in chinese  # its feedback is Chinese
    summary = report.summarise(records)
    assert summary["named"] == {"test-cross-attention": [(forgot, 2), (d_model, 1)]}
    assert summary["outcomes"]["test-cross-attention"] == {
        "passed": 1,
        "named": 3,
        "unnamed": 0,
        "not implemented": 0,
        "not judged": 0,
    }
    assert summary["attention"] == [] and summary["waiting"][0] == 0


def test_to_look_at_says_why_for_what_the_grader_could_not_judge_and_nothing_else(ch2_class):
    """A run out of time (a task's or the batch's budget: both are "timeout") and a grader
    error are listed with why; a function not defined, a note of outputs dropped before
    grading and written answers merely waiting are not: the grader judged those whole."""
    ch2, _records = ch2_class
    slow = ch2.grade("slow", stopped={2: "timeout"})
    broken = SubmissionResult("broken", CH2, HIDDEN_SEED, complete=False)
    broken.add_reason(GRADER_ERROR, "KeyError in the grader at verdict.py:12; rerun to retry")
    undefined = ch2.grade("undefined", missing={0: "undefined"})
    dropped = ch2.grade("dropped")
    dropped.add_reason(DROPPED, "saved outputs were dropped before grading (9 characters)")
    records = [slow, broken, undefined, dropped]
    waiting = dict.fromkeys(["undefined", "dropped"], HandGrading(to_grade=2.0))
    summary = report.summarise(records, waiting)
    assert summary["attention"] == [
        ("broken", 0.0, [report.REASON_WHYS[GRADER_ERROR], broken.notes[0]]),
        ("slow", slow.score, [report.REASON_WHYS["timeout"], "sparsemax: it ran out of time"]),
    ]
    assert summary["waiting"] == (2, HandGrading(to_grade=4.0))
    assert summary["outcomes"]["test-sparsemax"]["not judged"] == 1
    assert summary["outcomes"]["test-softmax-backward"]["unnamed"] == 1  # not defined
