"""A submission's limits and intake caps for one chapter, as this grading call sets them.

The layering itself (defaults < budgets derived from the chapter's reference time < the
chapter's own ``limits`` < the instructor's explicit ones) is ``autograder.sandbox.budgets``'s, the
one place; here the grading package asks it, with the instructor's limits as the command
line gave them.
"""

from __future__ import annotations

from autograder.checking.notebook import Caps
from autograder.sandbox import Limits, budgets


def effective_limits(explicit: Limits | dict | None, chapter) -> Limits:
    """A submission's limits: the defaults, then the budgets derived from the chapter's
    reference time, then the chapter's own ``limits``, then the instructor's ``explicit``
    ones, which always win: a dict of the fields the instructor set (the command line), or a
    whole ``Limits`` (every field set). ``autograder.sandbox.budgets.resolve`` is the one place."""
    return budgets.resolve(chapter, explicit)


def effective_caps(explicit: Limits | dict | None, chapter) -> Caps:
    """A notebook's intake caps, layered the same way from the same names
    (``autograder.sandbox.budgets.resolve_caps``)."""
    return budgets.resolve_caps(chapter, explicit)
