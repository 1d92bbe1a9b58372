"""Preparing the work in a forked child while the grading call gets on.

The check data needs the reference package (PyTorch, about a second to import) and the
chapter's cases; meanwhile the grading process imports nbgrader and checks the gradebook.
``Preparing`` forks a child that computes ``work.prepare`` and sends the chapter's limits
first, so the sandboxes can start before the check data is ready.
"""

from __future__ import annotations

import sys
import threading

from autograder.grading.limits import effective_limits
from autograder.grading.work import AssignmentWork, prepare
from autograder.sandbox import Limits


class Preparing:
    """`prepare` in a forked child while this process gets on (it imports nbgrader and checks
    the gradebook): the reference package (PyTorch, about a second) is imported there, not
    here. The child sends the chapter's limits first, so sandboxes can start, then the work.
    Where the reference package is already imported (a test, a second call) or threads run,
    it runs here."""

    def __init__(self, *args, fork: bool | None = None):
        self._args, self._pipe, self._child, self._limits = args, None, None, None
        if fork is None:  # only a one-thread process forks: no lock can be held in the child
            fork = "solutions" not in sys.modules and threading.active_count() == 1
        if not fork:
            return
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self._pipe, send = context.Pipe(duplex=False)
        self._child = context.Process(target=self._run_child, args=(send,), daemon=True)
        self._child.start()
        send.close()

    def _run_child(self, send) -> None:
        course, assignment, seed, limits, sandboxed, registry, spec = self._args
        try:
            chapter = registry.chapter(assignment)
            send.send(("limits", effective_limits(limits, chapter)))
            send.send(("work", prepare(*self._args)))
        except BaseException as err:  # noqa: BLE001 - raised again in the parent
            send.send(("error", err))

    def _receive(self, kind: str):
        try:
            got, value = self._pipe.recv()
        except EOFError:
            got, value = "error", RuntimeError("the process computing the check data died")
        if got == "error":
            self._child.join()
            raise value
        assert got == kind, (got, kind)
        return value

    def limits(self) -> Limits:
        if self._limits is None:
            if self._child is None:
                course, assignment, _seed, limits, _s, registry, _spec = self._args
                chapter = registry.chapter(assignment)
                self._limits = effective_limits(limits, chapter)
            else:
                self._limits = self._receive("limits")
        return self._limits

    def work(self) -> AssignmentWork:
        if self._child is None:
            return prepare(*self._args)
        self.limits()
        work = self._receive("work")
        self._child.join()
        return work
