"""Report: one HTML page per assignment for the instructor (English, as every instructor's
page: docs/architecture.md).

Reads the grading record stored in every autograded notebook of the assignment
(`load_class`: typed again, with the gradebook's score of now, what waits for hand grading,
and what the course says of submissions without a record) and leads with what the class got
wrong:

- the named mistakes, per task: each mistake the feedback named (a chapter's hand-written
  mistake or one the diagnosis derived, ``autograder/checking/diagnosis.py``; the judge's
  "outputs in another order"), with the number of students who made it (`named_mistakes`);
- per task, how many students passed, made a named mistake, failed with no mistake named,
  left the function not implemented, or were not judged (the grader stopped or refused it);
- the submissions to look at: what needs an instructor, each with why (`to_look_at`); the
  written answers that merely wait for the formgrader are counted in one line, not listed;
- then the score histogram, the pass rate of every task and check case, the failure reasons.

A mistake's identity is its hint's msgid: the English text the chapter wrote (``checks.
Mistake``, the msgid of its translations) or the diagnosis's English wording (which
``diagnosis.translated`` parses back into its message id and names). The grader prepares
every case in English and words each failing case twice, in the submission's language for
its feedback and in English for this report (``TaskResult.wrong``, ``grading.verdict``): so
an English and a Chinese student who made the same mistake are one count here, whatever
their feedback said. Records written before the report read ``wrong`` need nothing new.

Everything from a submission (student ids, notes, reasons) is HTML-escaped, quotes included.
Figures are Matplotlib PNGs embedded as base64, so the page is a single file.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import re
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from autograder.checking import messages  # noqa: E402
from autograder.checking.gradebook_ids import gradebook_rows  # noqa: E402
from autograder.checking.program import DROPPED  # noqa: E402
from autograder.checking.results import GRADER_ERROR, SubmissionResult, TaskResult  # noqa: E402
from autograder.course.hand_grading import HandGrading, submission_states  # noqa: E402

# ---------------------------------------------------------------------------------------
# reading the course: the records, what waits for a human, submissions without a record


@dataclasses.dataclass
class ClassRecords:
    """What the report reads of an assignment: each graded submission's record (`_as_now`),
    each submitted student's `HandGrading` (as the gradebook has it now), and for a student
    the records alone cannot explain, why the course needs an instructor (``course_whys``:
    a submission with no record, a record the gradebook lacks, a student not on the roster)."""

    records: list[SubmissionResult]
    waiting: dict[str, HandGrading]
    course_whys: dict[str, list[str]]


#: why a submitted notebook has no usable record (`load_class`)
NO_RECORD = (
    "submitted, but it has no grading record: not graded yet, or its grading was lost (a "
    "grader error records nothing); grade the assignment again"
)
UNREADABLE = (
    "its autograded notebook cannot be read or holds no grading record: grade it again with --force"
)
NOT_IN_GRADEBOOK = (
    "graded, but the gradebook has no submission of it (was gradebook.db replaced?): its "
    "score is not in the formgrader or the exports; grade it again with --force"
)
NOT_ON_ROSTER = (
    "not on the roster: the gradebook knows this student by the id alone (enrolled by "
    "`collect --enroll-unknown`, or added when graded); check who it is"
)


def load_class(course: Path, assignment: str) -> ClassRecords:
    """Every autograded notebook's record of ``assignment`` (`load_records`), what waits for
    hand grading, and what needs an instructor that no record says: a submitted notebook
    with no readable record, a record the gradebook has no submission for, a student not on
    the roster (`not_on_roster`)."""
    course = Path(course)
    states = submission_states(course, assignment)
    has_gradebook = (course / "gradebook.db").is_file()
    records, whys = [], {}
    for path in sorted((course / "autograded").glob(f"*/{assignment}/{assignment}.ipynb")):
        result = _read_record(path)
        if result is None:
            whys.setdefault(path.parents[1].name, []).append(UNREADABLE)
            continue
        state = states.get(result.student)
        if has_gradebook and state is None:
            whys.setdefault(result.student, []).append(NOT_IN_GRADEBOOK)
        records.append(_as_now(result, state))
    graded = {r.student for r in records} | set(whys)
    for folder in sorted((course / "submitted").glob(f"*/{assignment}")):
        if folder.name != assignment or not any(folder.glob("*.ipynb")):
            continue
        if folder.parent.name not in graded:
            whys.setdefault(folder.parent.name, []).append(NO_RECORD)
    for student in not_on_roster(course, {r.student for r in records} | set(whys)):
        whys.setdefault(student, []).append(NOT_ON_ROSTER)
    waiting = {student: state[2] for student, state in states.items() if state[2]}
    return ClassRecords(records, waiting, whys)


def load_records(course: Path, assignment: str) -> list[SubmissionResult]:
    """The grading record of every autograded notebook of an assignment (for the report), as
    the typed result it was written from (``SubmissionResult.from_record``),
    with the score and maximum the gradebook holds now (an instructor's manual scores
    included) and, while written answers wait for a human, a note saying how many points
    (`HandGrading`): the record in the notebook was written before anyone graded by hand."""
    return load_class(course, assignment).records


def _read_record(path: Path) -> SubmissionResult | None:
    try:
        notebook = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    metadata = notebook.get("metadata") if isinstance(notebook, dict) else None
    record = metadata.get("autograder") if isinstance(metadata, dict) else None
    return SubmissionResult.from_record(record)


#: the note of a record whose written answers wait for hand grading (`_as_now`)
WAITING_NOTE = "waits for hand grading in the formgrader: "


def _as_now(record: SubmissionResult, state) -> SubmissionResult:
    """``record`` with the gradebook's score and maximum of now and a note while the
    submission waits for hand grading (``state``: `submission_states`' entry, or None)."""
    if state is None:
        return record
    score, max_score, waiting = state
    notes = list(record.notes)
    if waiting:
        notes.append(WAITING_NOTE + waiting.describe())
    return dataclasses.replace(record, score=score, max_score=max_score, notes=notes)


def not_on_roster(course: Path, students) -> list[str]:
    """Which of ``students`` the roster does not know. A roster gives a student a name (the
    LMS's export, ``autograder roster``; nbgrader's import); a student the course only met
    in a download or a grading has its id alone (``collect --enroll-unknown`` and the
    gradebook's ``name_student`` set the id as last name, no first name), or no row at all.
    None is flagged while no student has a name: then there is no roster to be missing from."""
    rows = gradebook_rows(course, "SELECT id, first_name, last_name FROM student") or []
    named = {
        student
        for student, first, last in rows
        if (first or "").strip() or (last or "").strip() not in ("", student)
    }
    return sorted(s for s in students if s not in named) if named else []


# ---------------------------------------------------------------------------------------
# what a task's feedback found: read from its English copy (``TaskResult.wrong``)


def _template(text: str) -> re.Pattern:
    """A regular expression matching an English template of the message catalog, each
    placeholder a named group."""
    parts = re.split(r"(\{[a-z_]+\})", text)
    body = "".join(
        f"(?P<{p[1:-1]}>.+?)" if p.startswith("{") and p.endswith("}") else re.escape(p)
        for p in parts
    )
    return re.compile(body + r"\Z", re.DOTALL)


_EN = messages.catalog(messages.ENGLISH)
_CASE = _template(_EN["case"])  # "case '{case}': {problem}"
_MISTAKE = _template(_EN["mistake"])  # a known or derived mistake: "...: {hint}"
_ORDER = _template(_EN["order"])  # the outputs in another order (the judge's own finding)
_NOT_IMPLEMENTED = _template(_EN["not_implemented"])
_NO_RESULT = _template(_EN["grader.no_result"])
_STOPPED = _template(_EN["grader.stopped"])
_NAME_ONLY = _template(_EN["case.name"])  # a hidden case the first one speaks for
#: a derived mistake as a hidden case names it: its kind's sentence (``diagnosis.KIND``)
KIND_SENTENCES = {text for key, text in _EN.items() if key.startswith("diagnosis.kind.")}
#: the message of every test cell of a notebook the grader refused (``verdict.not_graded``)
NOT_GRADED = "not graded: "

#: the longest entry of a record's English copy that is read (a hint, a case's name and the
#: line of code an error names are each a few hundred characters at most)
ENTRY_CHARS = 2000

#: what a student's result on one task comes to (`task_outcome`), in the page's order
OUTCOMES = ("passed", "named", "unnamed", "not implemented", "not judged")
OUTCOME_TITLES = {
    "passed": "passed",
    "named": "a named mistake",
    "unnamed": "failed, no mistake named",
    "not implemented": "not implemented",
    "not judged": "not judged (stopped or refused)",
}


def findings(task: TaskResult) -> list[tuple[str, str]]:
    """(sort, identity) of each entry of a test cell's English copy that says what a case
    came to: ("hint", the hint's msgid) for a known or derived mistake, ("kind", its
    sentence) for a derived mistake a hidden case names by its kind, ("order", the finding)
    for outputs in another order, ("not implemented", ""), ("not judged", "") for a case
    the grader stopped or has no result of, ("failed", "") for any other failure. A hidden
    case listed by its name alone (its first failing case speaks for them) says nothing."""
    if task.message.startswith(NOT_GRADED):
        return [("not judged", "")]
    found = []
    for entry in task.wrong:
        if len(entry) > ENTRY_CHARS:  # no message the grader writes is this long
            found.append(("failed", ""))
            continue
        if _STOPPED.match(entry) or _NO_RESULT.match(entry):
            found.append(("not judged", ""))
            continue
        case = _CASE.match(entry)
        if case is None:  # a fatal line of its own ("is not defined"): a failure, no name
            if not _NAME_ONLY.match(entry):
                found.append(("failed", ""))
            continue
        problem = case["problem"]
        mistake = _MISTAKE.match(problem)
        if mistake:
            hint = mistake["hint"]
            found.append(("kind" if hint in KIND_SENTENCES else "hint", hint))
        elif _ORDER.match(problem):
            found.append(("order", problem))
        elif _NOT_IMPLEMENTED.match(problem):
            found.append(("not implemented", ""))
        else:
            found.append(("failed", ""))
    return found


def task_outcome(task: TaskResult) -> tuple[str, list[tuple[str, str]]]:
    """(what the task came to, of ``OUTCOMES``; the named mistakes counted for it).

    A named mistake counts when the feedback names it on at least half of the failing
    cases it shows a finding for: a hand-written mistake that coincides with the student's
    result on one degenerate case, among failures it does not explain, is not theirs. A
    kind sentence of the hidden cases counts only where nothing else is named (the public
    cases' full name says the same). "not judged" comes first (the grader did not see the
    function's answers), then "named", then "not implemented" (the stub left as given)."""
    if task.passed:
        return "passed", []
    if not task.cases:
        return "not judged", []
    found = findings(task)
    if any(sort == "not judged" for sort, _ in found):
        return "not judged", []
    tally = Counter(f for f in found if f[0] in ("hint", "kind", "order"))
    named = sorted(f for f, n in tally.items() if 2 * n >= len(found))
    if any(sort != "kind" for sort, _ in named):
        named = [f for f in named if f[0] != "kind"]
    if named:
        return "named", named
    if any(sort == "not implemented" for sort, _ in found):
        return "not implemented", []
    return "unnamed", []


def mistake_title(identity: tuple[str, str]) -> str:
    """How the page names a mistake (English: the hint's msgid)."""
    sort, text = identity
    if sort == "kind":
        return f"{text} (hidden cases only: they name a derived mistake by its kind)"
    return text


# ---------------------------------------------------------------------------------------
# who needs an instructor


#: reasons whose submission was judged whole: its feedback says what went wrong, and the
#: score stands (a function not defined, input() called, saved outputs dropped)
JUDGED_REASONS = frozenset({"missing function", "input() called", DROPPED})
#: what a reason asks of the instructor (any reason not here and not judged: listed as is)
REASON_WHYS = {
    "invalid notebook": "the grader refused the notebook: none of it was graded",
    GRADER_ERROR: "the grader failed on it, not the submission: grade it again",
    "tampered cell": "a locked cell was edited: the grader restored it; look at the notebook",
    "timeout": "the grader stopped its run (out of time, or the batch budget spent): the "
    "tasks it stopped were not judged",
    "crash": "the grader stopped its run (its process ended early): the tasks it stopped "
    "were not judged",
    "memory": "the grader stopped its run (over the memory limit): the tasks it stopped "
    "were not judged",
    "output too large": "the grader stopped its run (it sent back more than allowed): the "
    "tasks it stopped were not judged",
    "protocol violation": "the grader stopped its run (it broke the result protocol): the "
    "tasks it stopped were not judged",
    "fork bomb": "the grader stopped its run (too many processes): the tasks it stopped "
    "were not judged",
}
#: a written answer already scored by hand, on a newer submission
REVIEW = (
    "a score given by hand is on a resubmitted notebook: the formgrader asks for a second look ({})"
)
#: written answers waiting on a notebook the grader refused: no answer cell may be there
REFUSED_WAITING = (
    "its written answers wait for hand grading ({}) though the grader refused the notebook: "
    "score them in the formgrader (0 if there is no answer)"
)


def to_look_at(
    records: list[SubmissionResult],
    waiting: dict[str, HandGrading],
    course_whys: dict[str, list[str]],
) -> list[tuple[str, float | None, list[str]]]:
    """(student, score or None, why) of every submission that needs an instructor, by
    student: one the grader could not judge whole (refused, stopped, a grader error), with
    a locked cell edited, with no usable record or not on the roster (``course_whys``), or
    whose hand grading is odd: a manual score on a resubmission (nbgrader's "needs manual
    grade" over a score), written answers waiting on a refused notebook. A written answer
    that merely waits for the formgrader is not listed (`summarise` counts them), nor one
    left empty (nbgrader scores it 0 and asks no one). Each why is the reason's sentence,
    then the record's notes."""
    entries = {}
    for record in records:
        whys = [
            REASON_WHYS.get(reason, reason)
            for reason in record.reasons
            if reason not in JUDGED_REASONS
        ]
        if not record.complete and GRADER_ERROR not in record.reasons:
            whys.append(REASON_WHYS[GRADER_ERROR])
        state = waiting.get(record.student, HandGrading())
        odd = []
        if state.to_review:
            odd.append(REVIEW.format(HandGrading(to_review=state.to_review).describe()))
        if state.to_grade and "invalid notebook" in record.reasons:
            odd.append(REFUSED_WAITING.format(HandGrading(state.to_grade).describe()))
        whys += odd + course_whys.get(record.student, [])
        notes = [n for n in record.notes if not (odd and n.startswith(WAITING_NOTE))]
        if whys:
            entries[record.student] = (record.score, whys + notes)
    for student, whys in course_whys.items():
        if student not in entries:
            entries[student] = (None, list(whys))
    return sorted((student, score, whys) for student, (score, whys) in entries.items())


# ---------------------------------------------------------------------------------------
# the numbers


def summarise(
    records: list[SubmissionResult],
    waiting: dict[str, HandGrading] | None = None,
    course_whys: dict[str, list[str]] | None = None,
) -> dict:
    """The numbers the page shows (also what the tests check). ``waiting`` and
    ``course_whys``: `ClassRecords`' (none without a course)."""
    waiting, course_whys = waiting or {}, course_whys or {}
    scores = [r.score for r in records]
    task_pass, task_total = Counter(), Counter()
    case_pass, case_total = Counter(), Counter()
    reasons = Counter()
    outcomes: dict[str, Counter] = {}
    named: dict[str, Counter] = {}
    for record in records:
        for reason in record.reasons:
            reasons[reason] += 1
        for task in record.tasks:
            task_total[task.grade_id] += 1
            task_pass[task.grade_id] += task.passed
            for case in task.cases:
                key = f"{case.check} / {case.case}" + (" (hidden)" if case.hidden else "")
                case_total[key] += 1
                case_pass[key] += case.passed
            outcome, mistakes = task_outcome(task)
            outcomes.setdefault(task.grade_id, Counter())[outcome] += 1
            named.setdefault(task.grade_id, Counter()).update(mistakes)  # once per student
    listed = to_look_at(records, waiting, course_whys)
    shown = {student for student, _, _ in listed}
    pending = [state for student, state in waiting.items() if student not in shown]
    return {
        "n": len(records),
        "scores": scores,
        "max_score": max((r.max_score for r in records), default=0.0),
        "task_rates": {k: task_pass[k] / task_total[k] for k in task_total},
        "case_rates": {k: case_pass[k] / case_total[k] for k in case_total},
        "reasons": dict(reasons.most_common()),
        "named": {
            task: sorted(((mistake_title(m), n) for m, n in counts.items()), key=_most_first)
            for task, counts in named.items()
            if counts
        },
        "outcomes": {task: {o: counts[o] for o in OUTCOMES} for task, counts in outcomes.items()},
        "attention": listed,
        "waiting": (
            len(pending),
            HandGrading(sum(s.to_grade for s in pending), sum(s.to_review for s in pending)),
        ),
    }


def _most_first(item):
    return -item[1], item[0]


# ---------------------------------------------------------------------------------------
# the page


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _bar_figure(labels: list[str], rates: list[float], title: str):
    height = max(2.0, 0.3 * len(labels) + 1)
    fig, ax = plt.subplots(figsize=(7, height))
    ax.barh(range(len(labels)), [100 * r for r in rates], color="#c0392b")
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("pass rate (%)")
    ax.set_title(title)
    return fig


def render(assignment: str, summary: dict) -> str:
    e = html.escape
    parts = [
        f"<h1>Grading report: {e(assignment)}</h1>",
        f"<p>{summary['n']} graded submission(s); maximum score {summary['max_score']:g}.</p>",
        "<h2>Named mistakes</h2>",
        "<p>Per task, each mistake the feedback named (the chapter's own or one the diagnosis "
        "derived from the reference), with the students who made it, each counted once "
        "whatever the language of their notebook. A mistake counts where it is named on at "
        "least half of a student's failing cases of the task.</p>",
    ]
    for task, mistakes in summary["named"].items():
        parts.append(f"<h3>{e(task)}</h3><table><tr><th>students</th><th>mistake</th></tr>")
        parts += [f"<tr><td>{n}</td><td>{e(mistake)}</td></tr>" for mistake, n in mistakes]
        parts.append("</table>")
    if not summary["named"]:
        parts.append("<p>No mistake was named.</p>")
    parts.append("<h2>Per task</h2><table><tr><th>task</th>")
    parts += [f"<th>{e(OUTCOME_TITLES[o])}</th>" for o in OUTCOMES]
    parts.append("</tr>")
    for task, counts in summary["outcomes"].items():
        cells = "".join(f"<td>{counts[o]}</td>" for o in OUTCOMES)
        parts.append(f"<tr><td>{e(task)}</td>{cells}</tr>")
    parts.append("</table><h2>Submissions to look at</h2>")
    parts.append(
        "<p>What needs an instructor: a notebook the grader refused or stopped, a grader "
        "error, a locked cell edited, a submission with no usable record, a student not on "
        "the roster, hand grading that is odd.</p>"
    )
    parts.append("<table><tr><th>student</th><th>score</th><th>why</th></tr>")
    parts += [
        f"<tr><td>{e(student)}</td><td>{'-' if score is None else f'{score:g}'}</td>"
        f"<td>{'<br>'.join(e(why) for why in whys)}</td></tr>"
        for student, score, whys in summary["attention"]
    ]
    parts.append("</table>")
    count, total = summary["waiting"]
    if count:
        parts.append(
            f"<p>Written answers waiting in the formgrader, not listed above: {count} "
            f"submission{'s' if count != 1 else ''}, {e(total.describe())} in all (an "
            "empty written answer scores 0 and waits for no one).</p>"
        )
    if summary["n"]:
        fig, ax = plt.subplots(figsize=(6, 3))
        top = summary["max_score"] or 1
        ax.hist(
            summary["scores"], bins=min(20, max(5, int(top) + 1)), range=(0, top), color="#2c3e50"
        )
        ax.set_xlabel("score")
        ax.set_ylabel("students")
        ax.set_title("score histogram")
        parts.append(f'<h2>Scores</h2><img alt="score histogram" src="{_png(fig)}">')
        tasks = summary["task_rates"]
        parts.append("<h2>Pass rate per task</h2>")
        parts.append(
            f'<img alt="task pass rates" src="{_png(_bar_figure(list(tasks), list(tasks.values()), "tasks"))}">'
        )
        cases = sorted(summary["case_rates"].items(), key=lambda kv: kv[1])
        parts.append("<h2>Pass rate per check case (hardest first)</h2>")
        parts.append(
            f'<img alt="case pass rates" src="{_png(_bar_figure([k for k, _ in cases], [v for _, v in cases], "check cases"))}">'
        )
    parts.append("<h2>Failure reasons</h2><table><tr><th>reason</th><th>submissions</th></tr>")
    parts += [f"<tr><td>{e(k)}</td><td>{v}</td></tr>" for k, v in summary["reasons"].items()]
    parts.append("</table>")
    style = (
        "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        "td,th{padding:.2em 1em;border-bottom:1px solid #ddd;text-align:left}"
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(assignment)} report</title>"
        f"<style>{style}</style></head><body>{''.join(parts)}</body></html>"
    )


def page(course: Path, assignment: str) -> str:
    """The report's page of ``assignment`` as the course has it now."""
    found = load_class(course, assignment)
    return render(assignment, summarise(found.records, found.waiting, found.course_whys))


def write_report(course: Path, assignment: str, out: Path) -> Path:
    text = page(course, assignment)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out
