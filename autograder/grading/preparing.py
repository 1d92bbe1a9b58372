"""Preparing the work in a forked child while the grading call gets on, and then each
submission's hidden cases.

The check data needs the reference package (PyTorch, about a second to import) and the
chapter's cases; meanwhile the grading process imports nbgrader and checks the gradebook.
``Preparing`` forks a child that computes ``work.prepare`` and sends the chapter's limits
first, so the sandboxes can start before the check data is ready. The child then stays: told
the students in the order their jobs will go out (``plan``), it makes each one's hidden cases
(``check_data.hidden_case_set`` with ``hidden_seed``) ahead of the job, while the sandboxes
run earlier submissions; the grading process, which never imports the reference package,
takes them with ``hidden_for``.
"""

from __future__ import annotations

import sys
import threading

from autograder.grading.check_data import CaseSet, hidden_case_set, hidden_seed
from autograder.grading.work import AssignmentWork, prepare
from autograder.sandbox import Limits, budgets


class Preparing:
    """`prepare` in a forked child while this process gets on (it imports nbgrader and checks
    the gradebook): the reference package (PyTorch, about a second) is imported there, not
    here. The child sends the chapter's limits first, so sandboxes can start, then the work,
    then the hidden cases of the students it is told (``plan``). Where the reference package
    is already imported (a test, a second call) or threads run, it all runs here."""

    def __init__(self, *args, fork: bool | None = None):
        self._args, self._pipe, self._child, self._limits = args, None, None, None
        self._work: AssignmentWork | None = None
        self._hidden: dict = {}  # student -> CaseSet | BaseException, received ahead
        self._arrived = threading.Condition()
        self._receiver: threading.Thread | None = None
        self._planned: set = set()
        # limits and work are asked from two threads (the sandboxes' and the caller's): one
        # reads the pipe at a time, and a failure is raised to each that asks
        self._receiving = threading.RLock()
        self._failed: BaseException | None = None
        if fork is None:  # only a one-thread process forks: no lock can be held in the child
            fork = "solutions" not in sys.modules and threading.active_count() == 1
        if not fork:
            return
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self._pipe, child_end = context.Pipe(duplex=True)
        self._child = context.Process(target=self._run_child, args=(child_end,), daemon=True)
        self._child.start()
        child_end.close()

    # -- the child ------------------------------------------------------------------------

    def _run_child(self, pipe) -> None:
        course, assignment, seed, limits, sandboxed, registry, spec = self._args
        try:
            chapter = registry.chapter(assignment)
            pipe.send(("limits", budgets.resolve(chapter, limits)))
            work = prepare(*self._args)
            pipe.send(("work", work))
        except BaseException as err:  # noqa: BLE001 - raised again in the parent
            pipe.send(("error", err))
            return
        while True:  # the students whose hidden cases to make, in order; None: done
            try:
                students = pipe.recv()
            except EOFError:
                return
            if students is None:
                return
            for student in students:
                try:
                    made = hidden_case_set(work.spec, registry, hidden_seed(seed, student))
                except Exception as err:  # noqa: BLE001 - that student's job only
                    made = RuntimeError(f"{type(err).__name__} making the hidden cases")
                pipe.send(("hidden", student, made))

    # -- the parent -----------------------------------------------------------------------

    def _receive(self, kind: str):
        if self._failed is not None:
            raise self._failed
        try:
            got, *value = self._pipe.recv()
        except EOFError:
            got, value = "error", [RuntimeError("the process computing the check data died")]
        if got == "error":
            self._child.join()
            self._failed = value[0]
            raise value[0]
        assert got == kind, (got, kind)
        return value[0]

    def limits(self) -> Limits:
        with self._receiving:
            if self._limits is None:
                if self._child is None:
                    course, assignment, _seed, limits, _s, registry, _spec = self._args
                    chapter = registry.chapter(assignment)
                    self._limits = budgets.resolve(chapter, limits)
                else:
                    self._limits = self._receive("limits")
            return self._limits

    def work(self) -> AssignmentWork:
        with self._receiving:
            if self._work is None:
                if self._child is None:
                    self._work = prepare(*self._args)
                else:
                    self.limits()
                    self._work = self._receive("work")
            return self._work

    def plan(self, students: list[str]) -> None:
        """The students whose jobs will go out, in that order: the child makes their hidden
        cases ahead (a student not planned is made when asked)."""
        if self._child is None or not students:
            return
        self.work()
        if self._receiver is None:
            self._receiver = threading.Thread(target=self._receive_hidden, daemon=True)
            self._receiver.start()
        self._planned |= set(students)
        self._pipe.send(list(students))

    def _receive_hidden(self) -> None:
        while True:
            try:
                _kind, student, made = self._pipe.recv()
            except (EOFError, OSError):
                made, student = RuntimeError("the process making the hidden cases ended"), None
            with self._arrived:
                if student is None:
                    self._hidden[None] = made
                    self._arrived.notify_all()
                    return
                self._hidden[student] = made
                self._arrived.notify_all()

    def hidden_for(self, student: str) -> CaseSet:
        """This student's hidden cases (``check_data.hidden_seed`` of the batch seed and the
        student); raises if they could not be made (that job is a grader error)."""
        work = self.work()
        _course, _assignment, seed, _limits, _s, registry, _spec = self._args
        if self._child is None:
            return hidden_case_set(work.spec, registry, hidden_seed(seed, student))
        if student not in self._planned:
            self.plan([student])
        with self._arrived:
            self._arrived.wait_for(lambda: student in self._hidden or None in self._hidden)
            made = self._hidden.pop(student, None) or self._hidden[None]
            self._planned.discard(student)  # asked again: made again
        if isinstance(made, BaseException):
            raise made
        return made

    def close(self) -> None:
        """Tell the child it is done and wait for it."""
        if self._child is None:
            return
        try:
            self._pipe.send(None)
        except OSError:
            pass
        self._child.join(timeout=10)
        if self._child.is_alive():
            self._child.kill()
            self._child.join()
        self._pipe.close()
