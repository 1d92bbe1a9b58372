"""``python -m autograder``: grade, collect, feedback, export, report.

    grade <id> [--workers N] [--student S]... [--force] [--cluster tcp://host:8786] [--no-sandbox]
    collect <id> ARCHIVE.zip [--layout L] [--enroll-unknown] [--lms-assignment NAME]
            [--lms-timezone ZONE] [--regexp R]
                                            import an LMS download (Canvas, Moodle,
                                            Blackboard; or plain <student>_<id>.ipynb): each
                                            student by the roster and the LMS's ids, hostile
                                            members refused (autograder/course/collect.py)
    feedback <id> [--seconds S]             nbgrader generate_feedback, one student at a time
                                            under a time and memory budget; exit 1 when a
                                            page could not be made (each named, the others
                                            written)
    export <id> --csv FILE [--lms L]        nbgrader export (CSV), plus what still waits
                                            for hand grading; or Canvas's / Moodle's own
                                            grade import file (--lms canvas|moodle)
    roster FILE --lms L [--assignment ID]   the roster from Canvas's gradebook export or
                                            Moodle's grading worksheet, into nbgrader's
                                            gradebook
    feedback-archive <id> --lms L --out Z   the feedback pages in one zip the LMS imports
    report <id> [--out FILE]                one HTML page for the instructor

The course directory is ``autograder/`` of this checkout unless ``--course DIR`` is given.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

COURSE = Path(__file__).resolve().parent


def _nbgrader(course: Path, *args: str) -> int:
    """nbgrader, from this interpreter's environment, importing this ``autograder`` (the
    course's plug-ins: the export's, the sanitiser), not another copy the environment
    knows (an editable install of another checkout)."""
    executable = shutil.which("nbgrader", path=str(Path(sys.executable).parent)) or "nbgrader"
    root = str(COURSE.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return subprocess.call([executable, *args], cwd=course, env={**os.environ, "PYTHONPATH": path})


def summary_table(graded: list, skipped=(), waiting: dict | None = None) -> str:
    """One row per graded submission (`grading.SubmissionResult`) and per skipped one.
    ``waiting``: each student's `hand_grading.HandGrading`; a score that leaves out written
    answers no one has graded yet says so ("20/22 + 2 to grade by hand"), so a perfect
    student never reads as one who lost 2 points."""
    waiting = waiting or {}
    rows = [("student", "score", "max", "by hand", "reason")]
    for r in sorted(graded, key=lambda r: r.student):
        hand = waiting.get(r.student)
        rows.append(
            (
                r.student,
                f"{r.score:g}",
                f"{r.max_score:g}",
                hand.describe() if hand else "-",
                ", ".join(r.reasons) or "-",
            )
        )
    for student, why in skipped:
        rows.append((student, "", "", "", f"skipped: {why}"))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Progress:
    """A one-line progress bar on stderr (`grade_assignment`'s progress callback)."""

    def __init__(self):
        self.started = time.monotonic()

    def __call__(self, label: str, done: int, total: int) -> None:
        self.done, self.total = done, total
        width = 30
        filled = int(width * self.done / self.total)
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"{rate:.1f}/s {label[:30]:<30}"
        )
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def explicit_limits(args) -> dict:
    """The limits given on the command line, and only those: each wins over the chapter's
    (``autograder.sandbox.budgets.resolve``), even where it equals a default."""
    given = {
        "cell_seconds": args.cell_timeout,
        "task_seconds": args.task_timeout,
        "submission_seconds": args.budget,
        "memory_bytes": None if args.memory_mb is None else args.memory_mb << 20,
        "notebook_bytes": None
        if args.max_notebook_mb is None
        else int(args.max_notebook_mb * (1 << 20)),
        "notebook_file_bytes": None
        if getattr(args, "max_notebook_file_mb", None) is None
        else int(args.max_notebook_file_mb * (1 << 20)),
    }
    given.update({cap: getattr(args, cap, None) for cap in CAP_OPTIONS.values()})
    return {name: value for name, value in given.items() if value is not None}


#: a recorded limit as the option that gives it: (option, the value's divisor)
LIMIT_OPTIONS = {
    "cell_seconds": ("--cell-timeout", 1),
    "task_seconds": ("--task-timeout", 1),
    "submission_seconds": ("--budget", 1),
    "memory_bytes": ("--memory-mb", 1 << 20),
    "notebook_bytes": ("--max-notebook-mb", 1 << 20),
    "notebook_file_bytes": ("--max-notebook-file-mb", 1 << 20),
}


def as_options(limits: dict) -> str:
    """Recorded limits as the options that give them: "--max-notebook-mb 16"."""
    options = {**LIMIT_OPTIONS, **{cap: (opt, 1) for opt, cap in CAP_OPTIONS.items()}}
    parts = []
    for name, value in sorted(limits.items()):
        option, divisor = options.get(name, (name, 1))
        parts.append(f"{option} {value / divisor:g}")
    return " ".join(parts)


def kept_limits_note(course: Path, assignment: str, graded: list, given: dict) -> str | None:
    """Which students of this run were graded with limits recorded for them by an earlier
    run (`autograder.grading.overrides`), or None."""
    from autograder.grading.overrides import recorded

    kept = recorded(course, assignment)
    shown = []
    for student in sorted({r.student for r in graded}):
        mine = {k: v for k, v in kept.get(student, {}).items() if k not in given}
        if mine:
            shown.append(f"{student} ({as_options(mine)})")
    if not shown:
        return None
    return (
        "graded with the limits given for them in an earlier run: "
        + ", ".join(shown)
        + " (give the option again with --student to change it)"
    )


#: the intake caps (`autograder.checking.notebook.Caps`) as options: --max-cells N ...
CAP_OPTIONS = {
    "--max-cells": "cells",
    "--max-cell-chars": "cell_source_chars",
    "--max-source-chars": "source_chars",
    "--max-output-chars": "stored_output_chars",
    "--max-html-depth": "html_depth",
    "--max-attachments": "attachments",
    "--max-metadata-depth": "metadata_depth",
    "--max-metadata-chars": "metadata_chars",
    "--record-seconds": "record_seconds",
}
CAP_HELP = {
    "cells": "cells in a notebook",
    "cell_source_chars": "characters of one cell's source",
    "source_chars": "characters of all cells' sources",
    "stored_output_chars": "characters of one cell's stored outputs",
    "html_depth": "HTML elements nested in a markdown or raw cell",
    "attachments": "attachments of a notebook's markdown cells",
    "metadata_depth": "nesting of a cell's or the notebook's metadata",
    "metadata_chars": "characters of a cell's or the notebook's metadata",
    "record_seconds": "seconds to make one autograded notebook (a slower one scores 0)",
}


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def cmd_grade(args) -> int:
    from autograder.grading import grade_assignment
    from autograder.sandbox import SandboxUnavailable

    limits = explicit_limits(args)
    if args.student and limits:  # a decision about these students: kept for later runs
        from autograder.checking.gradebook_ids import PLAIN_NAME
        from autograder.grading import overrides

        named = [s for s in args.student if PLAIN_NAME.match(s)]
        overrides.remember(Path(args.course), args.assignment, named, limits)
    if args.no_sandbox:
        print("warning: --no-sandbox: students' code runs without isolation", file=sys.stderr)
    elif not args.quiet:
        from autograder.sandbox import describe_mode, find_bwrap

        if find_bwrap() is not None:
            for line in describe_mode():
                print(line, file=sys.stderr)
    try:
        outcome = grade_assignment(
            args.course,
            args.assignment,
            workers=args.workers,
            students=args.student,
            force=args.force,
            cluster=args.cluster,
            sandboxed=not args.no_sandbox,
            limits=limits,
            seed=args.seed,
            progress=None if args.quiet else Progress(),
        )
    except SandboxUnavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not outcome.graded and not outcome.skipped:
        print(
            f"no submissions found in {Path(args.course) / 'submitted'}/*/{args.assignment}/ "
            f"(import an LMS download with `.venv/bin/python -m autograder collect {args.assignment} FILE.zip`)"
        )
        return 0
    from autograder.course.hand_grading import hand_grading_of

    waiting = hand_grading_of(Path(args.course), args.assignment)
    print(summary_table(outcome.graded, outcome.skipped, waiting))
    if pending := sorted(s for s, hand in waiting.items() if hand.to_grade):
        print(
            f"{len(pending)} submission(s) wait for hand grading in the formgrader (their score "
            "leaves those points out); generate the feedback after"
        )
    if note := kept_limits_note(Path(args.course), args.assignment, outcome.graded, limits):
        print(note)
    print(
        f"graded {len(outcome.graded)}, skipped {len(outcome.skipped)}; batch seed {outcome.seed} (each student's hidden cases from it and their id); "
        f"start-up {outcome.startup_seconds:.1f} s; grading {outcome.grading_seconds:.1f} s"
    )
    if outcome.rerun:
        print(
            f"{len(outcome.rerun)} submission(s) hit a grader error and were not recorded: "
            f"{', '.join(outcome.rerun)}; run the same command again to retry them",
            file=sys.stderr,
        )
        return 4
    return 0


def cmd_collect(args) -> int:
    """Each student's notebook of an LMS download into ``submitted/``, the student told by
    the roster and the LMS's ids in the download's layout, every archive member checked on
    the way (autograder/course/collect.py): a hostile, ambiguous or unknown member is refused or
    skipped with a message that says why, the rest collected. Exit 1 if none was."""
    import zipfile

    from autograder.course import collect

    archive = Path(args.archive)
    if not archive.is_file():
        print(f"error: no file {archive}", file=sys.stderr)
        return 2
    if not zipfile.is_zipfile(archive):
        print(f"error: {archive} is not a zip archive (an LMS download is one)", file=sys.stderr)
        return 2
    layout = args.layout
    if layout is None:
        layout, why = collect.recognise(collect.archive_names(archive))
        print(f"{archive.name}: {why}", file=sys.stderr)
        if layout is None:
            return 2
    if args.regexp and layout != "plain":
        print("error: --regexp is for the plain layout only", file=sys.stderr)
        return 2
    print(f"{archive.name}: read as a {collect.LAYOUT_NAMES[layout]} download", file=sys.stderr)
    students, messages = collect.collect(
        Path(args.course),
        args.assignment,
        archive,
        args.regexp,
        layout=layout,
        enroll_unknown=args.enroll_unknown,
        lms_assignment=args.lms_assignment,
        lms_timezone=args.lms_timezone,
    )
    for message in messages:
        print(message, file=sys.stderr)
    print(
        f"collected {len(students)} submission(s) of {args.assignment} into "
        f"{Path(args.course) / 'submitted'}: {', '.join(students) or 'none'}"
    )
    return 0 if students else 1


#: the time one student's feedback page may take (``feedback --seconds``) and the reason a
#: page that could not be made is reported under. Measured: the six assignments' honest
#: autograded notebooks' pages take 0.18-0.39 s of CPU each (ch1 0.18, ch2 0.19, ch3 0.39,
#: ch4 0.19, ch5 0.34, ch6 0.25) in the feedback process, which peaks at 174-199 MiB, and
#: whose start (nbgrader's imports and configuration) takes about 2.5 s, once; a hostile
#: notebook's code costs at most `nbgrader_sanitise.HIGHLIGHT_SECONDS` of highlighting more.
#: The memory budget is the recording process's (`rendering.RENDER_MEMORY_BYTES`, 3 GiB)
FEEDBACK_SECONDS = 120.0
NO_PAGE = "{student}: no feedback page: {why}"


def feedback_page(course: str, assignment: str, student: str) -> dict:
    """(In the feedback process.) nbgrader's generate_feedback for one student, through
    nbgrader's own API (what the formgrader's button runs), with the course's configuration
    read as ``nbgrader`` reads it, from the course folder: {"success", "error"}."""
    import glob

    api = _FEEDBACK_API.get(course)
    if api is None:
        os.chdir(course)
        from nbgrader.apps.api import NbGraderAPI
        from nbgrader.apps.baseapp import NbGrader

        app = NbGrader()
        app.load_config_file()
        api = _FEEDBACK_API[course] = NbGraderAPI(config=app.config)
    outcome = api.generate_feedback(assignment, glob.escape(student), force=True)
    return {"success": bool(outcome.get("success")), "error": str(outcome.get("error", ""))}


_FEEDBACK_API: dict = {}


def feedback_students(course: Path, assignment: str) -> list[str]:
    """The students with an autograded notebook of ``assignment`` (nbgrader's
    ``autograded/<student>/<id>/``; the grader's own ``.locks`` and ``.runs`` are no student)."""
    folder = Path(course) / "autograded"
    if not folder.is_dir():
        return []
    return sorted(
        p.name
        for p in folder.iterdir()
        if not p.name.startswith(".") and (p / assignment / f"{assignment}.ipynb").exists()
    )


def cmd_feedback(args) -> int:
    """nbgrader generate_feedback, one student at a time, each in the feedback process (a
    child, `rendering.Renderer`: 3 GiB of address space) within ``--seconds``: a notebook
    whose page overruns them ends that process (a new one starts for the next student) and
    is reported with its reason, the others' pages are written. Exit status: 0 when every
    page was made, 1 when one or more could not be (each named on stderr). First a warning
    naming the students whose written answers no one has graded yet (their page would show
    those points as 0: README, "Generate the feedback after the written answers are graded
    by hand")."""
    from autograder.course.hand_grading import hand_grading_of
    from autograder.course.rendering import Renderer, RenderFailed

    course = Path(args.course).resolve()
    waiting = sorted(
        s for s, hand in hand_grading_of(course, args.assignment).items() if hand.to_grade
    )
    if waiting:
        print(
            f"warning: {len(waiting)} submission(s) of {args.assignment} wait for hand grading "
            f"({', '.join(waiting)}): their feedback shows those answers without a score; "
            "grade them in the formgrader, then run this again",
            file=sys.stderr,
        )
    students = feedback_students(course, args.assignment)
    renderer = Renderer(task="rendering the feedback page", limit="feedback --seconds")
    missing = []
    try:
        for student in students:
            try:
                outcome = renderer.run(
                    feedback_page, (str(course), args.assignment, student), args.seconds
                )
                why = None if outcome["success"] else "nbgrader could not make it"
                if why:
                    print(outcome["error"], file=sys.stderr)
            except RenderFailed as failed:
                why = str(failed)
            except RuntimeError as failed:  # the feedback process's own error
                why = f"nbgrader could not make it ({failed})"
            if why:
                missing.append(student)
                print(NO_PAGE.format(student=student, why=why), file=sys.stderr)
    finally:
        renderer.close()
    made = len(students) - len(missing)
    print(
        f"wrote {made} feedback page(s) of {args.assignment} into {course / 'feedback'}"
        + (f"; {len(missing)} could not be made: {', '.join(missing)}" if missing else "")
    )
    return 1 if missing else 0


def cmd_export(args) -> int:
    """nbgrader export with the course's plug-in (`hand_grading.HandGradingCsvExport`):
    nbgrader's CSV plus the columns that say what still waits for hand grading; with
    ``--lms``, the LMS's own grade import file instead (`lms.canvas_grades`,
    `lms.moodle_worksheet`). First the course's late-submission policy is applied
    (`lms.apply_late_penalties`: nbgrader's plug-ins, from each submission's timestamp)."""
    from autograder.course import lms

    course = Path(args.course)
    for message in lms.apply_late_penalties(course, args.assignment):
        print(message, file=sys.stderr)
    if args.lms == "canvas":
        return _lms_file(
            args,
            lms.canvas_grades,
            course,
            args.assignment,
            Path(args.csv),
            args.column,
            args.points,
        )
    if args.lms:
        return _lms_file(
            args, lms.moodle_worksheet, course, args.assignment, Path(args.csv), args.points
        )
    target = Path(args.csv).resolve()
    status = _nbgrader(
        Path(args.course),
        "export",
        "--exporter=autograder.course.hand_grading.HandGradingCsvExport",
        f"--to={target}",
        f"--assignment=['{args.assignment}']",
    )
    if status == 0:
        with open(target, newline="") as handle:
            rows = list(csv.DictReader(handle))
        pending = [r["student_id"] for r in rows if float(r["to_grade_by_hand"] or 0)]
        print(f"wrote {target}: {len(rows)} student(s)", end="")
        print(f"; {len(pending)} wait for hand grading (to_grade_by_hand)" if pending else "")
    return status


def cmd_roster(args) -> int:
    """The roster from the LMS's own export into nbgrader's gradebook (`lms.import_roster`):
    Canvas's gradebook export, or Moodle's grading worksheet of one assignment."""
    from autograder.course import lms

    if args.lms == "moodle" and not args.assignment:
        print(
            "error: Moodle's participant ids are per assignment: give the assignment whose "
            "grading worksheet this is (--assignment ID)",
            file=sys.stderr,
        )
        return 2
    read = lms.read_canvas_roster if args.lms == "canvas" else lms.read_moodle_roster
    try:
        people, messages = read(Path(args.file))
    except (OSError, lms.RosterError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not people:
        for message in messages:
            print(message, file=sys.stderr)
        print(f"error: no student in {args.file}", file=sys.stderr)
        return 1
    messages += lms.import_roster(Path(args.course), people, args.lms, args.assignment)
    for message in messages:
        print(message, file=sys.stderr)
    return 0


def cmd_feedback_archive(args) -> int:
    """Every feedback page of an assignment in one zip the LMS re-imports as it is
    (`lms.feedback_archive`)."""
    from autograder.course import lms

    return _lms_file(
        args, lms.feedback_archive, Path(args.course), args.assignment, args.lms, Path(args.out)
    )


def _lms_file(args, write, *arguments) -> int:
    """``write(*arguments)``, one of `lms`' writers of a file the LMS imports: its messages on
    stderr, 0; 2 when the gradebook has no such assignment (nbgrader's MissingEntry)."""
    try:
        messages = write(*arguments)
    except Exception as err:  # noqa: BLE001 - nbgrader's MissingEntry: no such assignment
        print(f"error: {args.assignment}: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    for message in messages:
        print(message, file=sys.stderr)
    return 0


def cmd_report(args) -> int:
    from autograder.course.report import write_report

    out = (
        Path(args.out)
        if args.out
        else Path(args.course) / "autograded" / f"report_{args.assignment}.html"
    )
    path = write_report(Path(args.course), args.assignment, out)
    print(f"wrote {path}")
    return 0


def _timezone(name: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise argparse.ArgumentTypeError(
            f"no time zone {name!r} (e.g. UTC, Europe/Berlin)"
        ) from None
    return name


def build_parser() -> argparse.ArgumentParser:
    from autograder.course.collect import LAYOUTS

    parser = argparse.ArgumentParser(
        prog="python -m autograder", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--course",
        default=os.environ.get("AUTOGRADER_COURSE", str(COURSE)),
        help="the nbgrader course directory (default: autograder/)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    grade = sub.add_parser("grade", help="grade every submission of an assignment")
    grade.add_argument("assignment")
    grade.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    grade.add_argument(
        "--student",
        action="append",
        help="only this student (repeatable); limits given with it are kept for them in later runs",
    )
    grade.add_argument("--force", action="store_true", help="regrade submissions already graded")
    grade.add_argument("--cluster", help="a Dask scheduler address, e.g. tcp://host:8786")
    grade.add_argument(
        "--no-sandbox", action="store_true", help="run students' code without bubblewrap"
    )
    grade.add_argument(
        "--seed",
        type=int,
        help="the batch's seed: each student's hidden cases come from it and the student id "
        "(default: fresh per run, recorded)",
    )
    grade.add_argument("--cell-timeout", type=_positive(float), help="wall seconds per cell")
    grade.add_argument("--task-timeout", type=_positive(float), help="wall seconds per task")
    grade.add_argument(
        "--budget", type=_positive(float), help="wall seconds per submission, retries included"
    )
    grade.add_argument("--memory-mb", type=_positive(int), help="memory per submission, MiB")
    grade.add_argument(
        "--max-notebook-mb",
        type=_positive(float),
        help="a notebook whose code and text (its saved outputs left out) are over this is "
        "refused (default 8 MiB); with --student, kept for those students in later runs",
    )
    grade.add_argument(
        "--max-notebook-file-mb",
        type=_positive(float),
        help="a submitted file over this size, saved outputs and all, is refused unread "
        "(default 256 MiB)",
    )
    from autograder.checking.notebook import DEFAULT_CAPS

    for option, cap in CAP_OPTIONS.items():
        default = getattr(DEFAULT_CAPS, cap)
        grade.add_argument(
            option,
            dest=cap,
            type=_positive(type(default)),
            help=f"a notebook over this is refused with the reason: {CAP_HELP[cap]} "
            f"(default {default:,})",
        )
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    grade.set_defaults(run=cmd_grade)

    collect = sub.add_parser(
        "collect", help="import an LMS zip download: each student's newest notebook"
    )
    collect.add_argument("assignment")
    collect.add_argument("archive")
    collect.add_argument(
        "--layout",
        choices=LAYOUTS,
        help="the archive's layout (default: recognised from its members' names): a Canvas, "
        "Moodle or Blackboard download, or plain <student id>_<id>.ipynb (trusts the names: "
        "for archives the instructor made; needs the roster)",
    )
    collect.add_argument(
        "--enroll-unknown",
        action="store_true",
        help="add a student the roster lacks to the gradebook under its LMS id (default: "
        "refuse its files, saying how to import the roster)",
    )
    collect.add_argument(
        "--lms-assignment",
        metavar="NAME",
        help="Blackboard: the assignment's name as it starts the file names (default: told "
        "from the roster's usernames)",
    )
    collect.add_argument(
        "--lms-timezone",
        metavar="ZONE",
        default="UTC",
        type=_timezone,
        help="the time zone of the LMS's dates in the download (Blackboard's attempt dates, "
        "Moodle's file dates), e.g. Europe/Berlin (default: UTC)",
    )
    collect.add_argument(
        "--regexp",
        help="plain layout: the pattern of a member's path (with a leading /), with the groups "
        "student_id (a roster id), file_id and optionally timestamp",
    )
    collect.set_defaults(run=cmd_collect)

    feedback = sub.add_parser(
        "feedback",
        help="nbgrader generate_feedback, each student's page within a time and memory budget "
        "(exit 1 when one could not be made)",
    )
    feedback.add_argument("assignment")
    feedback.add_argument(
        "--seconds",
        type=_positive(float),
        default=FEEDBACK_SECONDS,
        help=f"seconds to render one student's page (default {FEEDBACK_SECONDS:g})",
    )
    feedback.set_defaults(run=cmd_feedback)

    export = sub.add_parser(
        "export", help="nbgrader export to CSV, or the LMS's own grade import file (--lms)"
    )
    export.add_argument("assignment")
    export.add_argument("--csv", required=True)
    export.add_argument(
        "--lms",
        choices=("canvas", "moodle"),
        help="write Canvas's gradebook import CSV or Moodle's grading worksheet instead",
    )
    export.add_argument(
        "--column",
        help="Canvas: the assignment's column as Canvas's export names it, \"<name> (<id>)\" "
        "(default: the assignment id, which Canvas offers to create)",
    )
    export.add_argument(
        "--points",
        type=_positive(float),
        help="the LMS's maximum for the assignment: scores are scaled to it (default: "
        "nbgrader's maximum)",
    )
    export.set_defaults(run=cmd_export)

    roster = sub.add_parser(
        "roster", help="import the roster from the LMS's export into nbgrader's gradebook"
    )
    roster.add_argument(
        "file",
        help="Canvas's gradebook export CSV, or Moodle's grading worksheet of the assignment",
    )
    roster.add_argument("--lms", choices=("canvas", "moodle"), required=True)
    roster.add_argument(
        "--assignment",
        help="Moodle: the assignment whose grading worksheet FILE is (its participant ids)",
    )
    roster.set_defaults(run=cmd_roster)

    archive = sub.add_parser(
        "feedback-archive", help="the feedback pages in one zip the LMS imports as it is"
    )
    archive.add_argument("assignment")
    archive.add_argument("--lms", choices=("canvas", "moodle"), required=True)
    archive.add_argument("--out", required=True, help="the zip to write")
    archive.set_defaults(run=cmd_feedback_archive)

    report = sub.add_parser("report", help="one HTML page: histogram, pass rates, failure reasons")
    report.add_argument("assignment")
    report.add_argument("--out")
    report.set_defaults(run=cmd_report)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)
