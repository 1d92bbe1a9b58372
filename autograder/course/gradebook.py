"""Record: scores into nbgrader's gradebook (its own API) and the autograded notebooks.

- One submission is recorded as a unit, under a course-wide lock file and with SQLite's busy
  timeout, so two graders on the same course never interleave their writes: the student and
  submission rows are created if missing, then every grade cell's ``auto_score`` is set in
  one commit. Only then is the autograded notebook written (atomically, by rename); its
  metadata carries the submission's SHA-256, which is what "already graded" means on a rerun.
  It is made and sanitised first in a separate process (``autograder.course.rendering``),
  within the caps' ``record_seconds`` and a memory limit: nbgrader's feedback and formgrader
  render it, nothing a student wrote may be live HTML there, and no notebook may hold the
  batch.
- What the formgrader shows agrees with the summary table and the report: the score and the
  maximum are read back from the gradebook (every graded cell counts in the maximum, the
  written answers too); a manual score survives ``--force`` on the same bytes
  (`needs_manual_grade`); a student the grader creates gets the id as name (`name_student`).
- A lock file per submission keeps two graders from grading the same submission at once.
- Each grading run appends its seed and students to ``autograded/.runs/<id>.jsonl``, and
  when it is done each graded submission's wall time.

What still waits for a human is ``autograder.course.hand_grading``'s; the report reads the
records back (``autograder.course.report.load_records``).
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

from autograder.checking import nbgrader_api
from autograder.checking import notebook as nbparse
from autograder.checking.assignment_spec import AssignmentSpec
from autograder.checking.intake import Unreadable, read_bounded
from autograder.course.rendering import RENDERER, RenderFailed, render_autograded


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

    def __init__(self, course: Path, spec: AssignmentSpec, not_graded):
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

    def _secret(self, result) -> str | None:
        """The submission's ``submission_secret.txt`` (nbgrader's submit, or `collect`,
        writes it: hex digits) if it is one; else None."""
        path = self.course / "submitted" / result.student / self.spec.assignment
        try:
            raw = read_bounded(path / "submission_secret.txt", 256)
        except Exception:  # noqa: BLE001 - missing, a link, a FIFO, unreadable: none
            return None
        text = raw.decode("ascii", errors="replace").strip()
        if 0 < len(text) <= 255 and all(c in "0123456789abcdefABCDEF" for c in text):
            return text
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
        # the date that was read and checked, not the file copied; "" when there is none
        # (nbgrader reads an empty timestamp.txt as no date), since nbgrader's
        # generate_feedback and release_feedback read the file whatever it holds
        (target.parent / "timestamp.txt").write_text(stamp or "")
        secret = self._secret(result)
        if secret:  # release_feedback names the released page by it
            (target.parent / "submission_secret.txt").write_text(secret)
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
