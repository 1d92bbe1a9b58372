"""Report: one HTML page per assignment for the instructor.

Reads the grading record stored in every autograded notebook of the assignment
(`load_records`: typed again, with the gradebook's score of now) and shows,
at a glance, which part of the chapter the class did not get:

- the score histogram;
- the pass rate of every task (test cell) and of every check case (public and hidden);
- the failure reasons counted (timeout, memory, crash, tampered cell, invalid notebook...);
- the most common mistakes: each (check, named mistake or message) counted once per student;
- the submissions to look at: every student whose grading has a reason or a note
  (timeout, tampered cell...).

Everything from a submission (student ids, messages, notes) is HTML-escaped, quotes included.

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

from autograder.checking.results import SubmissionResult  # noqa: E402
from autograder.course.hand_grading import submission_states  # noqa: E402


def load_records(course: Path, assignment: str) -> list[SubmissionResult]:
    """The grading record of every autograded notebook of an assignment (for the report), as
    the typed result it was written from (``SubmissionResult.from_record``),
    with the score and maximum the gradebook holds now (an instructor's manual scores
    included) and, while written answers wait for a human, a note saying how many points
    (`HandGrading`): the record in the notebook was written before anyone graded by hand."""
    states = submission_states(course, assignment)
    records = []
    for path in sorted((Path(course) / "autograded").glob(f"*/{assignment}/{assignment}.ipynb")):
        try:
            notebook = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        metadata = notebook.get("metadata") if isinstance(notebook, dict) else None
        record = metadata.get("autograder") if isinstance(metadata, dict) else None
        result = SubmissionResult.from_record(record)
        if result is not None:
            records.append(_as_now(result, states.get(result.student)))
    return records


def _as_now(record: SubmissionResult, state) -> SubmissionResult:
    """``record`` with the gradebook's score and maximum of now and a note while the
    submission waits for hand grading (``state``: `submission_states`' entry, or None)."""
    if state is None:
        return record
    score, max_score, waiting = state
    notes = list(record.notes)
    if waiting:
        notes.append(f"waits for hand grading in the formgrader: {waiting.describe()}")
    return dataclasses.replace(record, score=score, max_score=max_score, notes=notes)


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


#: a number in a message: it differs between students, the mistake it describes repeats
_NUMBER = re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?")
#: where a public case's error was raised (`grading.verdict.source_line`): each student's own
_PLACE = re.compile(r" \(at line \d+ of [^:)]*(: `.*`)?\)")
KNOWN = "your result matches a known mistake: "
#: the lines of a task's message that say no mistake, or only list more cases
_NOT_A_MISTAKE = re.compile(
    r"(\w+: all \d+ public and \d+ hidden cases passed|this test cell calls no check"
    r"|\.\.\. and \d+ more|(case '[^']*'(, )?)+ failed too)$"
)


def mistake_of(text: str) -> str:
    """What a failing case's message names, as it repeats from student to student: the
    known mistake's hint when it names one (the chapter's text), else the message without its
    case, its place and its numbers."""
    text = text.split("': ", 1)[1] if text.startswith("case '") and "': " in text else text
    if KNOWN in text:  # the chapter's own hint: its numbers are equations, not the student's
        return text.split(KNOWN, 1)[1][:300]
    return _NUMBER.sub("#", _PLACE.sub("", text))[:300]


def mistakes(record: SubmissionResult) -> set[tuple[str, str]]:
    """(check, mistake) of every failure a submission's record shows, each once: read from its
    test cells' messages (the grader's lines, `grading.verdict`: a head line per check, then
    its failing cases). A notebook that was not graded is one mistake, whatever its cells."""
    found = set()
    for task in record.tasks:
        check = ""
        for line in task.message.splitlines():
            item = line[4:] if line.startswith("  - ") else None
            if item is None:
                head = re.match(r"(\w+): (.*)$", line)
                if line.startswith("not graded: "):
                    found.add(("", mistake_of(line)))
                elif head and not _NOT_A_MISTAKE.match(line):
                    check = head[1]
                    if not re.match(
                        r"(\d+ of \d+ public cases failed|hidden check failed)", head[2]
                    ):
                        found.add((check, mistake_of(head[2])))  # a fatal line: not run at all
                elif head:
                    check = head[1]
            elif not _NOT_A_MISTAKE.match(item):
                found.add((check, mistake_of(item)))
    return found


def summarise(records: list[SubmissionResult]) -> dict:
    """The numbers the page shows (also what the tests check)."""
    scores = [r.score for r in records]
    task_pass, task_total = Counter(), Counter()
    case_pass, case_total = Counter(), Counter()
    reasons, messages = Counter(), Counter()
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
        # each mistake once per submission, however many cases and test cells show it
        messages.update(mistakes(record))
    return {
        "n": len(records),
        "scores": scores,
        "max_score": max((r.max_score for r in records), default=0.0),
        "task_rates": {k: task_pass[k] / task_total[k] for k in task_total},
        "case_rates": {k: case_pass[k] / case_total[k] for k in case_total},
        "reasons": dict(reasons.most_common()),
        "messages": sorted(messages.items(), key=lambda kv: (-kv[1], kv[0]))[:10],
        "attention": sorted(
            (r.student, r.score, r.reasons + r.notes) for r in records if r.reasons or r.notes
        ),
    }


def render(assignment: str, summary: dict) -> str:
    parts = [
        f"<h1>Grading report: {html.escape(assignment)}</h1>",
        f"<p>{summary['n']} graded submission(s); maximum score {summary['max_score']:g}.</p>",
    ]
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
    parts += [
        f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in summary["reasons"].items()
    ]
    parts.append("</table><h2>Most common mistakes</h2>")
    parts.append("<p>Each counted once per student, whatever the cases that show it.</p><ol>")
    parts += [
        f"<li><b>{count} student{'s' if count != 1 else ''}</b> "
        f"<code>{html.escape(f'{check}: {mistake}' if check else mistake)}</code></li>"
        for (check, mistake), count in summary["messages"]
    ]
    parts.append("</ol><h2>Submissions to look at</h2>")
    parts.append("<table><tr><th>student</th><th>score</th><th>why</th></tr>")
    parts += [
        f"<tr><td>{html.escape(student)}</td><td>{score:g}</td>"
        f"<td>{'<br>'.join(html.escape(why) for why in whys)}</td></tr>"
        for student, score, whys in summary["attention"]
    ]
    parts.append("</table>")
    style = (
        "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        "td,th{padding:.2em 1em;border-bottom:1px solid #ddd;text-align:left}"
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(assignment)} report</title>"
        f"<style>{style}</style></head><body>{''.join(parts)}</body></html>"
    )


def write_report(course: Path, assignment: str, out: Path) -> Path:
    summary = summarise(load_records(course, assignment))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(assignment, summary))
    return out
