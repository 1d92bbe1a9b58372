"""Record: scores into nbgrader's gradebook (its own API) and the autograded notebooks.

- One submission is recorded as a unit, under a course-wide lock file and with SQLite's busy
  timeout, so two graders on the same course never interleave their writes: the student and
  submission rows are created if missing, then every grade cell's ``auto_score`` is set in
  one commit. Only then is the autograded notebook written (atomically, by rename); its
  metadata carries the submission's SHA-256, which is what "already graded" means on a rerun.
  It is made and sanitised first (`render_autograded`, `autograder.checking.sanitise.clean_notebook`)
  in a separate process (`Renderer`) within the caps' ``record_seconds`` and a memory
  limit: nbgrader's feedback and formgrader render it, nothing a student wrote may be live
  HTML there, and no notebook may hold the batch.
- What the formgrader shows agrees with the summary table and the report: the score and the
  maximum are read back from the gradebook (every graded cell counts in the maximum, the
  written answers too); a manual score survives ``--force`` on the same bytes
  (`needs_manual_grade`); a student the grader creates gets the id as name (`name_student`).
- A lock file per submission keeps two graders from grading the same submission at once.
- Each grading run appends its seed and students to ``autograded/.runs/<id>.jsonl``, and
  when it is done each graded submission's wall time.
- What still waits for a human (`HandGrading`, read from the gradebook as the formgrader
  leaves it) is marked wherever a score is shown: the summary table, the CSV export
  (`HandGradingCsvExport`, an nbgrader export plug-in) and the report (`load_records`), so
  a student whose written answers are not graded yet never reads as one who lost points.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import fcntl
import json
import os
import pickle
import select
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.checking import nbgrader_api, sanitise
from autograder.checking import notebook as nbparse
from autograder.checking.intake import Unreadable, read_bounded
from autograder.checking.results import SubmissionResult
from autograder.student import frames


class FileLock:
    """An flock on a file; release() drops it."""

    def __init__(self, handle):
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class Recorder:
    """The gradebook rows, the autograded notebooks and the run log of one assignment.

    ``not_graded(spec, result, reason, note)`` scores a submission whose autograded notebook
    cannot be made (``grading.verdict.not_graded``, passed in by the grading package, which
    this module never imports)."""

    def __init__(self, course: Path, spec: nbparse.AssignmentSpec, not_graded):
        self.course = Path(course)
        self.spec = spec
        self.not_graded = not_graded
        self.locks = self.course / "autograded" / ".locks" / spec.assignment
        self.locks.mkdir(parents=True, exist_ok=True)
        self.db_url = f"sqlite:///{self.course / 'gradebook.db'}?timeout=60"
        self._kept = None  # the recordings' Gradebook (`_recording_gradebook`)

    # -- locks ---------------------------------------------------------------------------

    def try_lock(self, student: str) -> FileLock | None:
        handle = open(self.locks / f"{student}.lock", "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        return FileLock(handle)

    @contextmanager
    def course_lock(self):
        with open(self.course / "autograded" / ".locks" / "gradebook.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def gradebook(self):
        return nbgrader_api.api().Gradebook(self.db_url)

    def _recording_gradebook(self):
        """One Gradebook for every recording of this recorder, on the thread that records:
        its session keeps the assignment's rows it looked up, which halves nbgrader's work per
        submission (about 11 ms instead of 25 here). Each recording ends its transaction
        (commit or rollback), so no lock on the database is held between recordings, and
        that expires whatever the session loaded: the next one reads afresh what an
        instructor graded by hand meanwhile (`tests/test_manual_pending.py`). `close` ends it."""
        if self._kept is None:
            self._kept = self.gradebook()
        return self._kept

    def close(self) -> None:
        """The recordings' Gradebook closed (a recording after this opens a new one)."""
        if self._kept is not None:
            kept, self._kept = self._kept, None
            kept.close()

    # -- state -----------------------------------------------------------------------------

    def autograded_path(self, student: str) -> Path:
        a = self.spec.assignment
        return self.course / "autograded" / student / a / f"{self.spec.notebook}.ipynb"

    def already_graded(self, student: str, sha256: str) -> bool:
        path = self.autograded_path(student)
        if not path.is_file():
            return False
        try:
            record = json.loads(path.read_text()).get("metadata", {}).get("autograder", {})
        except (OSError, ValueError):
            return False
        return bool(record.get("complete")) and record.get("sha256") == sha256

    def check_gradebook(self) -> None:
        """The assignment's rows must exist (nbgrader generate_assignment makes them)."""
        with self.course_lock(), self.gradebook() as gb:
            try:
                notebook = gb.find_notebook(self.spec.notebook, self.spec.assignment)
            except nbgrader_api.api().MissingEntry:
                raise ValueError(
                    f"assignment {self.spec.assignment!r} is not in {self.course / 'gradebook.db'}: "
                    "run `make release` (nbgrader generate_assignment) first"
                ) from None
            known = {cell.name for cell in notebook.grade_cells}
        missing = [t.grade_id for t in self.spec.tests if t.grade_id not in known]
        if missing:
            raise ValueError(
                f"the gradebook lacks grade cells {missing} of {self.spec.assignment}: "
                "the source changed since the release; run `make release` again"
            )

    def log_run(self, seed: int, students: list[str]) -> None:
        self._log({"seed": seed, "students": students})

    def log_timings(self, seconds: dict) -> None:
        """Each graded submission's wall time, for the instructor (and ``bench/grading.py``):
        a submission can choose its timing, so it is kept out of the autograded notebook."""
        self._log({"seconds": seconds})

    def _log(self, fields: dict) -> None:
        runs = self.course / "autograded" / ".runs"
        runs.mkdir(parents=True, exist_ok=True)
        entry = {
            "time": datetime.datetime.now(datetime.UTC).isoformat(),
            "assignment": self.spec.assignment,
            **fields,
            "pid": os.getpid(),
        }
        with open(runs / f"{self.spec.assignment}.jsonl", "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    # -- one submission ----------------------------------------------------------------------

    def _timestamp(self, result):
        """The submission's timestamp.txt if it holds a date; otherwise None, with a note."""
        parse_utc = nbgrader_api.utils().parse_utc
        path = self.course / "submitted" / result.student / self.spec.assignment / "timestamp.txt"
        if not path.exists() and not path.is_symlink():
            return None
        try:  # a date is short: 200 bytes are read at most, whatever the file holds
            raw = read_bounded(path, 200)
            if len(raw) > 200:
                raise Unreadable("longer than a date")
            text = raw.decode(errors="strict").strip()
            parse_utc(text)
            return text
        except Exception:  # noqa: BLE001 - any unreadable or non-date content
            note = "timestamp.txt is not a date and was ignored"
            if note not in result.notes:
                result.notes.append(note)
            return None

    def write_gradebook(self, result, timestamp: str | None = None) -> None:
        spec, scores = self.spec, {t.grade_id: t.points for t in result.tasks}
        with self.course_lock(), warnings.catch_warnings():
            # nbgrader's add_submission trips SQLAlchemy's autoflush warning; harmless
            warnings.simplefilter("ignore")
            gb = self._recording_gradebook()
            try:  # the session outlives this recording: it ends committed or rolled back
                name_student(gb, result.student)
                kwargs = {"timestamp": timestamp} if timestamp else {}
                gb.update_or_create_submission(spec.assignment, result.student, **kwargs)
                regraded = self.already_graded(result.student, result.sha256)  # the same bytes
                for grade_id, meta in spec.metadata.items():
                    if not meta.get("grade"):
                        continue
                    grade = gb.find_grade(grade_id, spec.notebook, spec.assignment, result.student)
                    if grade_id in scores:
                        grade.auto_score = float(scores[grade_id])
                    elif grade_id in result.unanswered:  # as nbgrader: no answer -> 0, no review
                        grade.auto_score = 0.0
                    else:  # a written answer: nbgrader leaves it to a human
                        grade.auto_score = None
                    grade.needs_manual_grade = needs_manual_grade(grade, regraded)
                gb.db.commit()
            except Exception:
                gb.db.rollback()
                raise

    def read_totals(self, result) -> None:
        """The submission's score and maximum as nbgrader's gradebook has them, into ``result``
        (what the summary table and the report show): the maximum counts every graded cell,
        the written answers too, and the score counts an instructor's manual scores, as the
        formgrader does. The automatic points alone stay in ``result.tasks``."""
        with self.course_lock():
            gb = self._recording_gradebook()
            try:
                submission = gb.find_submission(self.spec.assignment, result.student)
                result.score = float(submission.score)
                result.max_score = float(submission.max_score)
            finally:
                gb.db.rollback()  # a read: its transaction ends here

    def _render_args(self, result, notebook: bytes, caps: nbparse.Caps) -> tuple:
        # no per-submission time: a submission chooses when its grading ends (it can sleep),
        # so a clock reading would let it encode a hidden digit (docs/threat-model.md)
        record = result.to_record()
        outputs = result.cell_outputs
        messages = {t.grade_id: (t.passed, t.message) for t in result.tasks}
        return (self.spec, notebook, messages, outputs, record, caps)

    def write_notebook(self, result, text: str, stamp: str | None) -> Path:
        """The autograded notebook's ``text`` (see `render_autograded`), written atomically."""
        target = self.autograded_path(result.student)
        target.parent.mkdir(parents=True, exist_ok=True)
        if stamp is not None:  # the date that was read and checked, not the file copied
            (target.parent / "timestamp.txt").write_text(stamp)
        handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as stream:
                stream.write(text)
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):  # never leave a temporary file behind
                os.unlink(temporary)
        return target

    def record(self, result, notebook: bytes, caps: nbparse.Caps = nbparse.DEFAULT_CAPS) -> None:
        """Render the autograded notebook from ``notebook`` (the bytes that were graded, read
        once under the size cap, never the submitted file read again) in the recording
        process, within ``caps.record_seconds``; then the gradebook rows, then the file. A
        notebook whose rendering overruns or fails scores 0, with the reason, and its
        autograded notebook is the released one (made here: the instructor's bytes only)."""
        stamp = self._timestamp(result)  # its note belongs in the record
        try:
            text = RENDERER.run(
                render_autograded, self._render_args(result, notebook, caps), caps.record_seconds
            )
        except RenderFailed as why:
            result.unanswered = []
            self.not_graded(self.spec, result, "invalid notebook", str(why))
            text = render_autograded(*self._render_args(result, b"", caps))
        self.write_gradebook(result, stamp)
        self.read_totals(result)  # the formgrader's score and maximum, into the record too
        self.write_notebook(result, with_totals(text, result), stamp)


def with_totals(text: str, result) -> str:
    """The rendered notebook's record with the gradebook's score and maximum (read after the
    rendering, which must come first: a notebook that cannot be rendered scores 0)."""
    notebook = json.loads(text)
    notebook["metadata"]["autograder"].update(score=result.score, max_score=result.max_score)
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def render_autograded(spec, notebook: bytes, messages, outputs, record, caps) -> str:
    """The autograded notebook as JSON text: the graded ``notebook`` (none or unreadable: the
    released copy) with the test cells in their released form and the grader's messages and
    outputs (`autograder.checking.notebook.autograded_notebook`), sanitised
    (`autograder.checking.sanitise.clean_notebook`). Linear in ``caps``: the notebook is parsed under
    them, so no HTML nested past ``caps.html_depth`` reaches the sanitiser."""
    try:
        submission = nbparse.read_submission(notebook, caps) if notebook else None
    except nbparse.InvalidNotebook:
        submission = None
    outputs = {int(k): [nbformat.from_dict(o) for o in v] for k, v in outputs.items()}
    clean = sanitise.clean_notebook(
        nbparse.autograded_notebook(spec, submission, messages, outputs, record)
    )
    return nbformat.writes(clean)


class RenderFailed(Exception):
    """The autograded notebook of one submission could not be made: the reason, for it."""


#: address space of the recording process: a notebook within the caps needs a few hundred MiB
RENDER_MEMORY_BYTES = 3 << 30


def _write_frame(stream, payload: bytes) -> None:
    """One call or reply: a frame (``autograder.student.frames``) whose blob is the payload."""
    stream.write(frames.encode_frame({}, payload))
    stream.flush()


def _read_exactly(stream, count: int) -> bytes:
    data = stream.read(count)
    if len(data) != count:
        raise EOFError("the grader closed the pipe")
    return data


def serve_recording() -> None:
    """The recording process: reads (function, args) pickled by the grader from stdin, runs
    each and answers with a JSON frame: ["ok", value], ["memory"] or ["error", type, text].
    What it sends back is plain JSON, never a pickle."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (RENDER_MEMORY_BYTES, RENDER_MEMORY_BYTES))
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed may corrupt the frames
    _write_frame(replies, b'["ready"]')
    while True:
        try:
            _header, payload = frames.read_frame(lambda n: _read_exactly(requests, n))
        except EOFError:
            return
        function, args = pickle.loads(payload)
        try:
            reply = ["ok", function(*args)]
        except MemoryError:
            reply = ["memory"]
        except Exception as err:  # noqa: BLE001 - the grader reports it as its own error
            reply = ["error", type(err).__name__, str(err)[:500]]
        _write_frame(replies, json.dumps(reply).encode())


#: as autograder/__main__.py: nbformat's schema needs no IRI grammar (1 s of imports saved)
_SERVE = (
    "import sys; sys.modules.setdefault('rfc3987_syntax', None); "
    "from autograder.course.gradebook import serve_recording; serve_recording()"
)


class Renderer:
    """`render_autograded` (or any function: ``run``) in a separate process, started on
    first use with ``python -c`` (not multiprocessing, which would run the instructor's
    script again in it) and reused: a call that takes longer than its budget is ended with
    its process (a new one starts for the next), one that runs out of memory fails there;
    either is that submission's reason, and the grader's own memory never holds more than
    the finished text."""

    def __init__(self, task: str = "making the autograded notebook", limit: str = "record_seconds"):
        self._child = None
        self._lock = threading.Lock()
        self.started = 0  # processes started (a test reads it)
        self.task, self.limit = task, limit  # what its reasons say: the work and its limit

    def _start(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where `autograder` is importable
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        self._child = subprocess.Popen(
            [sys.executable, "-c", _SERVE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            env={**os.environ, "PYTHONPATH": path},
        )
        self.started += 1
        if self._receive(time.monotonic() + 300) != ["ready"]:  # its imports: not a submission's
            raise RuntimeError("the recording process did not start")

    def _receive(self, deadline: float):
        """The next reply, read by the deadline (the process answers one call at a time)."""
        replies, fd = frames.FrameBuffer(frames.UNBOUNDED), self._child.stdout.fileno()
        while (frame := replies.next()) is None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError
            replies.feed(chunk)
        if replies.buffer:
            raise frames.FrameError("more than one reply")
        return json.loads(frame[1])

    def start(self) -> None:
        """Start the process now (``grade_assignment`` does, while the sandboxes start)."""
        with self._lock:
            if self._child is None:
                self._start()

    def run(self, function, args: tuple, seconds: float):
        """``function(*args)`` in the recording process, or RenderFailed after ``seconds``
        (counted once the process is up: its start-up is not the submission's)."""
        with self._lock:
            if self._child is None:
                self._start()
            try:
                _write_frame(self._child.stdin, pickle.dumps((function, args)))
                reply = self._receive(time.monotonic() + seconds)
            except TimeoutError:
                self._close()
                raise RenderFailed(
                    f"{self.task} took more than {seconds:g} s (the limit is {self.limit})"
                ) from None
            except (EOFError, BrokenPipeError):
                self._close()
                raise RenderFailed(f"{self.task} ended its process") from None
            if reply[0] == "memory":
                self._close()
                raise RenderFailed(f"{self.task} needed more than {RENDER_MEMORY_BYTES >> 20} MiB")
            if reply[0] == "error":
                raise RuntimeError(f"{reply[1]} while {self.task}: {reply[2]}")
            return reply[1]

    def _close(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child.wait()
            self._child.stdin.close()
            self._child.stdout.close()
            self._child = None

    def close(self) -> None:
        with self._lock:
            self._close()


RENDERER = Renderer()


def needs_manual_grade(grade, regraded: bool) -> bool:
    """Whether nbgrader's formgrader lists this grade as "needs manual grading". An
    instructor's manual score stands for the bytes they graded: regrading those same bytes
    (``--force``) keeps it and asks for no second look; a new submission asks for one (the
    manual score is kept, as nbgrader keeps it, for the instructor to confirm). Without a
    manual score, a cell no check scored (a written answer) waits for a human."""
    if grade.manual_score is not None:
        return not regraded
    return grade.auto_score is None


def name_student(gb, student: str) -> None:
    """The student's gradebook row, created if missing. The formgrader lists students as
    "last name, first name" ("None, None" without names): a student without a name gets the
    id as last name; a name the instructor set (the formgrader's Manage Students, or
    ``nbgrader db student import``) is never overwritten."""
    row = gb.update_or_create_student(student)
    if row.last_name is None and row.first_name is None:
        row.last_name, row.first_name = student, ""
        gb.db.commit()


@dataclass(frozen=True)
class HandGrading:
    """What one submission still waits for in the formgrader. ``to_grade``: the points of the
    graded cells nobody has scored (a written answer: no check scores it, and no instructor
    has yet), which the score leaves out; ``to_review``: cells whose score stands but which
    nbgrader lists as "needs manual grading" (a new submission over a manual score)."""

    to_grade: float = 0.0
    to_review: int = 0

    def __bool__(self) -> bool:
        return bool(self.to_grade or self.to_review)

    def describe(self) -> str:
        """ "+ 2 to grade by hand", "1 cell to review by hand", both, or "" when none."""
        parts = []
        if self.to_grade:
            parts.append(f"+ {self.to_grade:g} to grade by hand")
        if self.to_review:
            cells = "cell" if self.to_review == 1 else "cells"
            parts.append(f"{self.to_review} {cells} to review by hand")
        return ", ".join(parts)


def hand_grading(submission) -> HandGrading:
    """The hand grading one submission (nbgrader's ``SubmittedAssignment``) waits for, by the
    rules the formgrader applies when a score is typed (a grade with neither score still
    needs one; with a score it needs none, unless nbgrader asks for a second look)."""
    to_grade, to_review = 0.0, 0
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            if not grade.needs_manual_grade:
                continue
            if grade.manual_score is None and grade.auto_score is None:
                to_grade += float(grade.max_score)
            else:
                to_review += 1
    return HandGrading(to_grade, to_review)


def submission_states(course: Path, assignment: str) -> dict[str, tuple[float, float, HandGrading]]:
    """Each submitted student's (score, maximum, `HandGrading`) of an assignment, from the
    course's gradebook as it is now, manual scores included (none without a gradebook)."""
    db = Path(course) / "gradebook.db"
    if not db.is_file():
        return {}
    with nbgrader_api.api().Gradebook(f"sqlite:///{db}") as gb:
        return {
            s.student.id: (float(s.score), float(s.max_score), hand_grading(s))
            for s in gb.assignment_submissions(assignment)
        }


def hand_grading_of(course: Path, assignment: str) -> dict[str, HandGrading]:
    """Each submitted student's `HandGrading` of an assignment, as the gradebook has it now."""
    return {student: state[2] for student, state in submission_states(course, assignment).items()}


def __getattr__(name: str):
    """``HandGradingCsvExport``, made on first use: it subclasses nbgrader's plug-in, whose
    import the grader and its recording process never need (PEP 562)."""
    if name != "HandGradingCsvExport":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from nbgrader.plugins import CsvExportPlugin

    plugin = type(name, (_HandGradingCsv, CsvExportPlugin), {"__module__": __name__})
    globals()[name] = plugin
    return plugin


class _HandGradingCsv:
    """(``HandGradingCsvExport`` is this on nbgrader's ``CsvExportPlugin``.) ``nbgrader
    export``'s CSV (nbgrader's export plug-in API: ``nbgrader export
    --exporter=autograder.course.gradebook.HandGradingCsvExport``), the same columns in the same
    order, so whatever reads nbgrader's CSV by column name reads this one, plus two at the
    end: ``needs_manual_grade`` (true while the formgrader lists the submission as waiting
    for a human) and ``to_grade_by_hand`` (the points no one has scored yet, which ``score``
    leaves out). Written with the csv module: a name holding a comma or a quote (a roster's
    "Smith, Jr.") stays in its column, where nbgrader's own plug-in would shift the row."""

    COLUMNS = (
        "assignment",
        "duedate",
        "timestamp",
        "student_id",
        "last_name",
        "first_name",
        "email",
        "raw_score",
        "late_submission_penalty",
        "score",
        "max_score",
        "needs_manual_grade",
        "to_grade_by_hand",
    )

    def export(self, gradebook) -> None:
        with open(self.to or "grades.csv", "w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")  # nbgrader's line ends
            writer.writerow(self.COLUMNS)
            writer.writerows(self.rows(gradebook))

    def rows(self, gradebook):
        """One row per assignment and student (as nbgrader's plug-in: a student who submitted
        nothing scores 0), in the order of ``COLUMNS``."""
        from nbgrader.api import MissingEntry

        assignments, students = set(map(str, self.assignment)), set(map(str, self.student))
        for assignment in gradebook.assignments:
            if assignments and assignment.name not in assignments:
                continue
            for student in gradebook.students:
                if students and student.id not in students:
                    continue
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:
                    timestamp, raw, penalty, waiting = None, 0.0, 0.0, HandGrading()
                else:
                    timestamp, raw = submission.timestamp, submission.score
                    penalty, waiting = submission.late_submission_penalty, hand_grading(submission)
                values = (
                    assignment.name,
                    assignment.duedate,
                    timestamp,
                    student.id,
                    student.last_name,
                    student.first_name,
                    student.email,
                    raw,
                    penalty,
                    max(0.0, raw - (penalty or 0.0)),
                    assignment.max_score,
                    str(bool(waiting)).lower(),
                    waiting.to_grade,
                )
                yield ["" if v is None else str(v) for v in values]


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
