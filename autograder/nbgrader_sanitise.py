"""Sanitise every notebook nbgrader writes or shows to the instructor, not only ours.

`autograder.sanitise.clean_notebook` makes a notebook safe to render (nothing a student wrote
runs, loads or navigates in the browser). Our grader calls it as it writes ``autograded/``;
this module is the same function as an nbconvert preprocessor, so that nbgrader's own paths
use it too. ``nbgrader_config.py`` registers it

- last in ``Autograde.autograde_preprocessors``: ``nbgrader autograde`` and the formgrader's
  Autograde button (which runs the same app) write ``autograded/`` sanitised. It comes after
  ``SaveAutoGrades``, which must still see the student's own answer (an unchanged written
  answer scores 0 by its checksum) and the outputs the notebook produced;
- last in ``GenerateFeedback.preprocessors`` and in ``HTMLExporter.preprocessors`` (the
  formgrader's manual-grading view): the readers clean again what they render, so an
  ``autograded/`` notebook written by anything else (an older grader, a hand copy, an
  autograde killed between its two passes) is still shown inert.
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from autograder import sanitise


class SanitiseForInstructor(Preprocessor):
    """The whole notebook through `autograder.sanitise.clean_notebook`."""

    enabled = Bool(True)  # nbconvert preprocessors are off unless enabled

    def preprocess(self, nb, resources):
        return sanitise.clean_notebook(nb), resources
