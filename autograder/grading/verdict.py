"""Verdict: compare every returned value with the reference, on the trusted side.

Messages come from the one message catalog only (``autograder.checking.messages``: fixed text and
numbers computed here, no text from the submission), in the submission's language (its
notebook's, ``messages.language_of``); what the instructor's report reads (``wrong``, the
reasons and notes) stays English. What a check says of its hidden cases is a fixed few texts
(``judging.judge``, ``judging.hidden_shown``) and, for a task the grader stopped, one fixed
sentence per reason (``TASK_STOPPED``): never an exit status, a signal, a count or a time the
submission could choose while it held its hidden inputs. The cell outputs shown in
the feedback are the public run's: the cell's own captured output and the grader's reason
for stopping it, with its detail (that run's processes never held a hidden input); a cell
the hidden run stopped reads its reason's one fixed sentence (``grading.run._Phase.said``)."""

from __future__ import annotations

import ast
import dataclasses

from autograder.checking import checks, judging, messages
from autograder.checking import notebook as nbparse
from autograder.checking.assignment_spec import BEGIN_HIDDEN
from autograder.checking.results import SubmissionResult, TaskResult
from autograder.grading.check_data import tasks_of
from autograder.grading.run import RunRecord
from autograder.student import contract, frames, zygote
from autograder.student.contract import Case, Outcome, Verdict

#: an error code that is also a failure reason of its own
ERROR_REASONS = {
    "MemoryError": "memory",
    frames.FILE_TOO_LARGE: "output too large",
    "EOFError": "input() called",
}
MISSING = {"undefined": "is not defined", "not_callable": "is not a function"}
SHOWN = 5  # failing public cases listed per check

#: why the grader stopped a task, said the same whatever the run's details (an exit status, a
#: signal, which limit): the task held its hidden inputs, so a detail could carry them out
#: (reason -> the message id of its sentence, ``stopped.<reason>``: ``messages.STOPPED``)
TASK_STOPPED = messages.STOPPED

#: a cell's source longer than this is not parsed on the trusted side to find the line of
#: its syntax error (parsing costs about 1 s per MB)
SYNTAX_LINE_CHARS = 1 << 16


def syntax_error_line(source: str) -> int | None:
    """The line of a cell that does not parse, from the source the student submitted (theirs,
    and read before any case existed); None if it parses here or is too long to look at."""
    if len(source) > SYNTAX_LINE_CHARS:
        return None
    try:
        compile(
            zygote.neutralise_magics(source), "<cell>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True
        )
    except SyntaxError as err:
        return err.lineno
    except Exception:  # noqa: BLE001 - too deep or too large to parse: no line to give
        return None
    return None


#: a line of the submission quoted in a message: at most this many characters of it
LINE_CHARS = 120


def source_line(program, cell: int, line: int, language: str = messages.ENGLISH) -> str:
    """ " (at line L of notebook cell C: `the line`)": where a public error was raised, the
    line read here from the code the trusted side parsed (the sandbox sends two integers,
    checked against that code: "" when they name no line of it), printable characters only,
    at most ``LINE_CHARS`` of them. The wording of the student's own check
    (``contract._where_raised``), with the notebook cell added."""
    if program is None or not 0 <= cell < len(program.cells):
        return ""
    source = program.cells[cell]
    lines = source.split("\n")
    if not 1 <= line <= len(lines) or BEGIN_HIDDEN in source:
        return ""
    text = "".join(c if c.isprintable() else " " for c in lines[line - 1][: LINE_CHARS + 1])
    text = text.strip()
    text = text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"
    origin = program.origin[cell]
    where = (
        messages.say(language, "grader.in_cell", cell=origin + 1)
        if origin is not None
        else messages.say(language, "grader.in_restored_cell")
    )
    key = "grader.where" if text else "grader.where_no_code"
    return messages.say(language, key, line=line, where=where, code=text)


def module_text(module, language: str = messages.ENGLISH) -> str:
    """What a failed import is said to miss: a name of the fixed list, or no name."""
    if module in zygote.KNOWN_MODULES:
        return messages.say(language, "grader.module_named", module=module)
    return messages.say(language, "grader.module_unknown")


def located(outcome: Outcome, case: Case, program, language: str = messages.ENGLISH) -> dict | None:
    """A public case's error's place, in ``language``: the parameters ``module`` (what a failed
    import missed) and ``where`` (the line that raised it) of its message (``raised``,
    ``raised_import``), which every language's template places itself. None for a hidden
    case (its type alone) or an outcome that is not an error."""
    if case.hidden or outcome.kind != "error":
        return None
    where = source_line(program, outcome.at_cell, outcome.at_line, language)
    missed = outcome.code == "ModuleNotFoundError"
    return {"module": module_text(outcome.module, language) if missed else "", "where": where}


def cell_error_text(
    code: str, source: str, language: str = messages.ENGLISH, event=None, program=None
) -> str:
    """What a cell's error is called in its feedback: the error class (a fixed list), and
    for a syntax error its line, for a failed import the module (of a fixed list) and what
    the grader offers, for any other the line that raised it (`source_line`)."""
    if code == "SyntaxError":
        line = syntax_error_line(source)
        if line:
            return messages.say(language, "cell.syntax_at", line=line)
        return messages.say(language, "cell.syntax")
    event = event or {}
    where = source_line(program, event.get("at_cell", -1), event.get("at_line", 0), language)
    if code == "ModuleNotFoundError":
        module = module_text(event.get("module"), language)
        return messages.say(
            language, "cell.import", module=module, where=where, offered=("offered", {})
        )
    return messages.say(language, "cell.raised", error=code, where=where)


def _fatal(check: str, function: str, record: RunRecord, task_index: int, result, language):
    """(the message, in ``language``, for a task that never ran; its English) or None."""
    if task_index in record.missing:
        what = record.missing[task_index]
        result.add_reason("missing function", f"`{function}` {MISSING[what]}")
        # the cell's error is said in the submission's language (``cell_outputs``); the
        # report's English copy gives the generic question where the languages differ
        why = result.cell_error or messages.say(language, "grader.missing_why")
        key = "grader.undefined" if what == "undefined" else "grader.not_callable"
        same = language == messages.ENGLISH and result.cell_error
        english_why = why if same else messages.say(messages.ENGLISH, "grader.missing_why")
        return tuple(
            messages.say(lang, key, check=check, function=function, why=reason)
            for lang, reason in ((language, why), (messages.ENGLISH, english_why))
        )
    if task_index in record.failed_tasks:
        reason = record.failed_tasks[task_index].reason  # the note is not shown
        stopped = messages.stopped(reason)
        result.add_reason(reason, f"{check}: {messages.say(messages.ENGLISH, stopped)}")
        return tuple(
            messages.say(lang, "grader.stopped", check=check, reason=reason, why=(stopped, {}))
            for lang in (language, messages.ENGLISH)
        )
    return None


def judge(
    spec,
    check_specs: dict,
    all_cases,
    record: RunRecord,
    result: SubmissionResult,
    language: str = messages.ENGLISH,
    program=None,
) -> None:
    """Every case of every check call judged (``judging.judge``), into one `TaskResult` per
    test cell, its feedback in ``language``; a task that never ran gets one fatal message for
    all its cases. ``wrong`` (what the instructor's report counts) is English. A public
    case's error names its line of ``program`` (`located`); a hidden case's, its type only.
    A caller whose callee fails its own check is scored on its hidden cases alone
    (`excuse_callers`)."""
    judged = [
        _judge_task(task_index, task, check_specs, all_cases, record, result, language, program)
        for task_index, task in enumerate(tasks_of(spec))
    ]
    excuse_callers(judged, check_specs, language)
    per_test: dict = {t.grade_id: ([], [], []) for t in spec.tests}  # verdicts, lines, wrong
    for task in judged:
        test_verdicts, lines, wrong = per_test[task.grade_id]
        test_verdicts += task.verdicts
        if task.fatal:
            lines.append(task.fatal[0])
            wrong.append(task.fatal[1])
        else:
            counted = [v for i, v in enumerate(task.verdicts) if i not in task.excused]
            lines += task.notes + _feedback(task.check, counted, language)
            wrong += _shown(task.english)
    for test in spec.tests:
        verdicts, lines, wrong = per_test[test.grade_id]
        if not lines:
            lines.append(messages.say(language, "grader.no_check"))
        result.tasks.append(
            TaskResult(test.grade_id, test.points, "\n".join(lines), verdicts, wrong)
        )


@dataclasses.dataclass
class _Judged:
    """One check call's verdicts, in the submission's language and in English (the report's)."""

    grade_id: str
    check: str
    fatal: tuple | None
    verdicts: list
    english: list
    notes: list = dataclasses.field(default_factory=list)  # feedback lines before the summary
    excused: set = dataclasses.field(default_factory=set)  # public cases not counted


def _judge_task(task_index, task, check_specs, all_cases, record, result, language, program):
    grade_id, check, function = task
    fatal = _fatal(check, function, record, task_index, result, language)
    if task_index in record.rescued:  # stopped with its callee: its public cases say no more
        reason = record.rescued[task_index].reason
        stopped = messages.say(messages.ENGLISH, messages.stopped(reason))
        result.add_reason(reason, f"{check}, in its public cases: {stopped}")
    verdicts, english = [], []
    cases = all_cases[task_index]
    outcomes = [record.outcomes.get((task_index, i)) for i in range(len(cases))]
    if not fatal:  # a mistake is named only where every failing case agrees (``diagnosis``)
        ran = [i for i, got in enumerate(outcomes) if got is not None]
        kept = contract.consistent(
            check_specs[check], [cases[i] for i in ran], [outcomes[i] for i in ran]
        )
        cases = list(cases)
        for i, case in zip(ran, kept):
            cases[i] = case
    for case_index, case in enumerate(cases):
        got = outcomes[case_index]
        if fatal or got is None:
            said = fatal or tuple(
                messages.say(lang, "grader.no_result", case=checks.translated_hint(case.name, lang))
                for lang in (language, messages.ENGLISH)
            )
            verdicts.append(Verdict(check, case.name, case.hidden, False, said[0]))
            english.append(Verdict(check, case.name, case.hidden, False, said[1]))
            continue
        if got.kind == "error" and got.code in ERROR_REASONS:
            result.add_reason(ERROR_REASONS[got.code], f"{check}, case '{case.name}': {got.code}")
        local = judging.judge(
            *checks.localised(check_specs[check], case, language),
            got,
            language,
            located(got, case, program, language),
        )
        # the record keeps the case's English name (the instructor's report counts cases by
        # it, whatever the submission's language); the feedback words it (``_feedback``)
        verdicts.append(dataclasses.replace(local, case=case.name))
        same = language == messages.ENGLISH or local.passed
        english.append(
            verdicts[-1]
            if same
            else judging.judge(check_specs[check], case, got, where=located(got, case, program))
        )
    return _Judged(grade_id, check, fatal, verdicts, english)


def excuse_callers(judged: list, check_specs: dict, language: str) -> None:
    """A caller's failing public cases are not counted where a function it calls
    (``Check.calls``) fails its own check: it called the student's callee there, while its
    hidden cases ran with the callee answering as the solution does (``grading.callees``),
    so those score its own work. Its feedback names the callee to fix first. Whether a
    callee fails is read before any excuse (a callee excused as a caller still fails)."""
    failing = {
        task.check for task in judged if task.fatal or not all(v.passed for v in task.verdicts)
    }
    for task in judged:
        callees = [c for c in check_specs[task.check].calls if c in failing]
        public = [i for i, v in enumerate(task.verdicts) if not v.hidden]
        failed = [i for i in public if not task.verdicts[i].passed]
        if task.fatal or not callees or not failed:
            continue
        callee = ", ".join(callees)
        task.excused.update(failed)
        for i in failed:
            for verdicts, lang in ((task.verdicts, language), (task.english, messages.ENGLISH)):
                said = messages.say(lang, "grader.callee_excused", callee=callee)
                verdicts[i] = dataclasses.replace(verdicts[i], passed=True, message=said)
        task.notes.append(
            messages.say(
                language,
                "grader.callee_first",
                check=task.check,
                callee=callee,
                failed=len(failed),
                public=len(public),
            )
        )


def _feedback(check: str, verdicts: list[Verdict], language: str) -> list[str]:
    """The feedback lines of one check call, in ``language`` (the cases named in it too)."""
    if language != messages.ENGLISH:
        verdicts = [
            dataclasses.replace(v, case=checks.translated_hint(v.case, language)) for v in verdicts
        ]
    n_hidden = sum(v.hidden for v in verdicts)
    n_public = len(verdicts) - n_hidden
    public = [v for v in verdicts if not v.passed and not v.hidden]
    hidden = [v for v in verdicts if not v.passed and v.hidden]
    if not public and not hidden:
        if not n_public:  # its public cases were not counted (``excuse_callers``)
            return [messages.say(language, "grader.hidden_passed", check=check, hidden=n_hidden)]
        return [
            messages.say(
                language, "grader.all_passed", check=check, public=n_public, hidden=n_hidden
            )
        ]
    lines = []
    if public:
        lines.append(judging.summary(check, public, n_public, False, SHOWN, language))
    if hidden:  # what the summary shows of them, no more
        lines.append(judging.summary(check, hidden, n_hidden, True, SHOWN, language))
    return lines


def _shown(verdicts: list[Verdict]) -> list[str]:
    """The failing cases' messages safe to show (a hidden case's as the summary shows it)."""
    public = [v.message for v in verdicts if not v.passed and not v.hidden]
    hidden = [v for v in verdicts if not v.passed and v.hidden]
    return public + (judging.hidden_shown(hidden) if hidden else [])


#: how many cells' worth of output (at the per-cell cap) a whole notebook keeps
NOTEBOOK_OUTPUT_CELLS = 50
#: room beyond the per-cell cap for the sandbox's own "[output truncated]" line, so that an
#: honest long output reads as the sandbox cut it
SANDBOX_NOTE_CHARS = 40


def capped(text: str, limit: int, left: list) -> str:
    """A cell's output cut to ``limit`` characters and to what the notebook has ``left`` (a
    one-item list, decreased): the caps hold on the trusted side, whatever the sandbox sent
    (the student's process applies the same cap, but it is the student's)."""
    keep = max(0, min(limit, left[0]))
    left[0] -= min(len(text), keep)
    if len(text) <= keep:
        return text
    return text[:keep] + f"\n[output cut by the grader at {keep:,} of {len(text):,} characters]"


def cell_outputs(
    program,
    record: RunRecord,
    result: SubmissionResult,
    output_chars: int = 4000,
    language: str = messages.ENGLISH,
) -> None:
    """Each submitted cell's output, error and stop, as the autograded notebook shows them:
    a cell's output at most ``output_chars`` characters, the notebook's at most
    ``NOTEBOOK_OUTPUT_CELLS`` times that."""
    left = [output_chars * NOTEBOOK_OUTPUT_CELLS]
    for program_index, origin in enumerate(program.origin):
        if origin is None:  # a locked cell put back from the source: no output to show
            if program_index in record.failed_cells:
                failure = record.failed_cells[program_index]
                result.add_reason(failure.reason, f"a restored locked cell: {failure.note}")
            continue
        outputs = []
        event = record.cells.get(program_index)
        if event and event["output"]:  # the cell's own output: it ran before any case was sent
            text = capped(event["output"], output_chars + SANDBOX_NOTE_CHARS, left)
            outputs.append({"output_type": "stream", "name": "stdout", "text": text})
        if event and event["error"]:
            code = event["error"]
            if code in ERROR_REASONS:
                result.add_reason(ERROR_REASONS[code], f"cell {origin + 1}: {code}")
            text = cell_error_text(code, program.cells[program_index], language, event, program)
            if not result.cell_error:
                result.cell_error = messages.say(
                    language, "cell.stopped_there", cell=origin + 1, error=text
                )
            outputs.append(
                {
                    "output_type": "error",
                    "ename": code,
                    "evalue": text,
                    "traceback": [f"{code}: {text}"],
                }
            )
        if program_index in record.failed_cells:
            failure = record.failed_cells[program_index]
            note = f"notebook cell {origin + 1}: {failure.note}"
            result.add_reason(failure.reason, note)
            outputs.append(
                {
                    "output_type": "error",
                    "ename": failure.reason.replace(" ", "_"),
                    "evalue": f"stopped by the grader: {note}",
                    "traceback": [f"stopped by the grader: {note}"],
                }
            )
        result.cell_outputs[origin] = outputs


def not_graded(spec, result: SubmissionResult, reason: str, note: str) -> None:
    """Every test of ``spec`` scores 0 with ``note``; no written answer waits for a human
    either (its autograded notebook holds none to grade: the released tests only)."""
    result.add_reason(reason, note)
    result.unanswered = nbparse.manual_cells(spec)
    result.tasks = [
        TaskResult(
            test.grade_id,
            test.points,
            f"not graded: {note}",
            [Verdict(check, "all cases", False, False, note) for check, _f in test.checks],
            [note],
        )
        for test in spec.tests
    ]
