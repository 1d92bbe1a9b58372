"""Verdict: compare every returned value with the reference, on the trusted side.

Messages come from the contract only (fixed text and numbers computed here: no text from the
submission). What a check says of its hidden cases is a fixed few texts (``contract.judge``
with ``hidden=True``, ``contract.hidden_shown``) and, for a task the grader stopped, one
fixed sentence per reason (``TASK_STOPPED``): never an exit status, a signal, a count or a
time the submission could choose while it held its hidden inputs. The cell outputs shown in
the feedback are the cell's own captured output and the grader's reason for stopping it
(cells run before any case exists in the sandbox)."""

from __future__ import annotations

import ast
import dataclasses

from autograder import contract, zygote
from autograder import notebook as nbparse
from autograder.contract import Verdict
from autograder.grading.check_data import tasks_of
from autograder.grading.results import SubmissionResult, TaskResult
from autograder.grading.run import RunRecord

#: an error code that is also a failure reason of its own
ERROR_REASONS = {
    "MemoryError": "memory",
    contract.FILE_TOO_LARGE: "output too large",
    "EOFError": "input() called",
}
MISSING = {"undefined": "is not defined", "not_callable": "is not a function"}
SHOWN = 5  # failing public cases listed per check

#: why the grader stopped a task, said the same whatever the run's details (an exit status, a
#: signal, which limit): the task held its hidden inputs, so a detail could carry them out
TASK_STOPPED = {
    "timeout": "it ran out of time",
    "crash": "its process ended early",
    "memory": "it went over the memory limit",
    "output too large": "it sent back more data than allowed",
    "protocol violation": "it broke the result protocol",
    "fork bomb": "it started too many processes",
}

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


def source_line(program, cell: int, line: int) -> str:
    """ " (at line L of notebook cell C: `the line`)": where a public error was raised, the
    line read here from the code the trusted side parsed (the sandbox sends two integers,
    checked against that code: "" when they name no line of it), printable characters only,
    at most ``LINE_CHARS`` of them. The wording of the student's own check
    (``contract._where_raised``), with the notebook cell added."""
    if program is None or not 0 <= cell < len(program.cells):
        return ""
    source = program.cells[cell]
    lines = source.split("\n")
    if not 1 <= line <= len(lines) or nbparse.BEGIN_HIDDEN in source:
        return ""
    text = "".join(c if c.isprintable() else " " for c in lines[line - 1][: LINE_CHARS + 1])
    text = text.strip()
    text = text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"
    origin = program.origin[cell]
    where = f"notebook cell {origin + 1}" if origin is not None else "a cell restored as given"
    return f" (at line {line} of {where}" + (f": `{text}`)" if text else ")")


def module_text(module) -> str:
    """What a failed import is said to miss: a name of the fixed list, or no name."""
    named = (
        f"no module named '{module}'"
        if module in zygote.KNOWN_MODULES
        else ("a module not installed here")
    )
    return f": {named}"


def located(message: str, name: str, outcome: dict, program) -> str:
    """A public case's error message with the module a failed import missed and the line
    that raised it, inserted after "<name> raised <type>" (``contract.failure_of``'s words)."""
    head = f"{name} raised {outcome.get('code')}"
    at = message.find(head)
    if at < 0 or outcome.get("kind") != "error":
        return message
    extra = source_line(program, outcome.get("at_cell", -1), outcome.get("at_line", 0))
    if outcome["code"] == "ModuleNotFoundError":
        extra = module_text(outcome.get("module")) + extra
    end = at + len(head)
    return message[:end] + extra + message[end:]


def cell_error_text(code: str, source: str, event: dict | None = None, program=None) -> str:
    """What a cell's error is called in its feedback: the error class (a fixed list), and
    for a syntax error its line, for a failed import the module (of a fixed list) and what
    the grader offers, for any other the line that raised it (`source_line`)."""
    if code == "SyntaxError":
        line = syntax_error_line(source)
        return "the cell has a syntax error" + (f" at line {line}" if line else "")
    event = event or {}
    where = source_line(program, event.get("at_cell", -1), event.get("at_line", 0))
    if code == "ModuleNotFoundError":
        return (
            f"the cell raised ModuleNotFoundError{module_text(event.get('module'))}{where}: an "
            f"import failed, and {contract.MISSING_MODULE}"
        )
    return f"the cell raised {code}{where}"


def judge(
    spec, check_specs: dict, all_cases, record: RunRecord, result: SubmissionResult, program=None
) -> None:
    """Every case of every check call judged (``contract.judge``), into one `TaskResult` per
    test cell; a task that never ran gets one fatal message for all its cases. A public
    case's error names its line of ``program`` (`located`); a hidden case's, its type only."""
    per_test: dict = {t.grade_id: ([], [], []) for t in spec.tests}  # verdicts, lines, wrong
    for task_index, (grade_id, check, function) in enumerate(tasks_of(spec)):
        fatal = None
        if task_index in record.missing:
            what = MISSING[record.missing[task_index]]
            why = result.cell_error or (
                "did the cell that defines it raise an error, or was it renamed?"
            )
            fatal = f"{check}: `{function}` {what}: {why}"
            result.add_reason("missing function", f"`{function}` {what}")
        elif task_index in record.failed_tasks:
            reason, _detail = record.failed_tasks[task_index]  # the detail is not shown
            stopped = TASK_STOPPED.get(reason, "it was stopped")
            fatal = f"{check}: stopped by the grader ({reason}: {stopped})"
            result.add_reason(reason, f"{check}: {stopped}")
        verdicts = []
        for case_index, case in enumerate(all_cases[task_index]):
            got = record.outcomes.get((task_index, case_index))
            if fatal or got is None:
                message = fatal or f"case '{case.name}': no result"
                verdicts.append(Verdict(check, case.name, case.hidden, False, message))
                continue
            if got["kind"] == "error" and got["code"] in ERROR_REASONS:
                result.add_reason(
                    ERROR_REASONS[got["code"]], f"{check}, case '{case.name}': {got['code']}"
                )
            verdict = contract.judge(check_specs[check], case, got)
            if not case.hidden and not verdict.passed:
                shown = located(verdict.message, check_specs[check]["name"], got, program)
                verdict = dataclasses.replace(verdict, message=shown)
            verdicts.append(verdict)
        test_verdicts, lines, wrong = per_test[grade_id]
        test_verdicts += verdicts
        if fatal:
            lines.append(fatal)
            wrong.append(fatal)
        else:
            check_lines, check_wrong = _feedback(check, verdicts)
            lines += check_lines
            wrong += check_wrong

    for test in spec.tests:
        verdicts, lines, wrong = per_test[test.grade_id]
        if not lines:
            lines.append("this test cell calls no check")
        result.tasks.append(
            TaskResult(test.grade_id, test.points, "\n".join(lines), verdicts, wrong)
        )


def _feedback(check: str, verdicts: list[Verdict]) -> tuple[list[str], list[str]]:
    """(the feedback lines of one check call, the failing cases' messages safe to show)."""
    n_hidden = sum(v.hidden for v in verdicts)
    n_public = len(verdicts) - n_hidden
    public = [v.message for v in verdicts if not v.passed and not v.hidden]
    hidden = [v.message for v in verdicts if not v.passed and v.hidden]
    if not public and not hidden:
        return [f"{check}: all {n_public} public and {n_hidden} hidden cases passed"], []
    lines, wrong = [], []
    if public:
        lines.append(contract.summary(check, public, n_public, False, shown=SHOWN))
        wrong += public
    if hidden:  # what the summary shows of them, no more
        lines.append(contract.summary(check, hidden, n_hidden, True, shown=SHOWN))
        first, others = contract.hidden_shown(hidden)
        wrong += [first] + others
    return lines, wrong


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
    program, record: RunRecord, result: SubmissionResult, output_chars: int = 4000
) -> None:
    """Each submitted cell's output, error and stop, as the autograded notebook shows them:
    a cell's output at most ``output_chars`` characters, the notebook's at most
    ``NOTEBOOK_OUTPUT_CELLS`` times that."""
    left = [output_chars * NOTEBOOK_OUTPUT_CELLS]
    for program_index, origin in enumerate(program.origin):
        if origin is None:  # a locked cell put back from the source: no output to show
            if program_index in record.failed_cells:
                reason, detail = record.failed_cells[program_index]
                result.add_reason(reason, f"a restored locked cell: {detail}")
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
            text = cell_error_text(code, program.cells[program_index], event, program)
            if not result.cell_error:
                result.cell_error = f"notebook cell {origin + 1}: {text}, so it stopped there"
            outputs.append(
                {
                    "output_type": "error",
                    "ename": code,
                    "evalue": text,
                    "traceback": [f"{code}: {text}"],
                }
            )
        if program_index in record.failed_cells:
            reason, detail = record.failed_cells[program_index]
            note = f"notebook cell {origin + 1}: {detail}"
            result.add_reason(reason, note)
            outputs.append(
                {
                    "output_type": "error",
                    "ename": reason.replace(" ", "_"),
                    "evalue": f"stopped by the grader: {note}",
                    "traceback": [f"stopped by the grader: {note}"],
                }
            )
        result.cell_outputs[origin] = outputs


def not_graded(spec, result: SubmissionResult, reason: str, note: str) -> None:
    result.add_reason(reason, note)
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
