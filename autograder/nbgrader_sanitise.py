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

`KeepOnlyCourseFiles` runs after it in autograde: nbgrader copies every other file of a
submission into ``autograded/<student>/<id>/``, and the formgrader serves that folder's files
from its own origin (``/formgrader/submissions/<id>/<file>``), where a student's HTML page
would run with the instructor's Jupyter session. Once the notebook has run, the folder keeps
only the notebooks, ``timestamp.txt`` and the files of the instructor's ``source/<id>/``.

`NameStudent` (not a sanitiser, but of the same kind: nbgrader's own autograde made to do
what our grader does) gives a student nbgrader creates the name our grader gives
(`autograder.gradebook.name_student`), so the formgrader never lists "None, None".
"""

from __future__ import annotations

import os
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from autograder import sanitise


class SanitiseForInstructor(Preprocessor):
    """The whole notebook through `autograder.sanitise.clean_notebook`."""

    enabled = Bool(True)  # nbconvert preprocessors are off unless enabled

    def preprocess(self, nb, resources):
        return sanitise.clean_notebook(nb), resources


class KeepOnlyCourseFiles(Preprocessor):
    """Remove from the autograded folder every file a student added beside the notebook."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        autograded = Path(resources["metadata"]["path"])  # the folder autograde writes
        coursedir = self.parent.parent.coursedir  # preprocessor -> exporter -> Autograde app
        source = Path(
            coursedir.format_path(
                coursedir.source_directory, ".", resources["nbgrader"]["assignment"]
            )
        )
        for path in sorted(autograded.rglob("*"), reverse=True):  # files before their folders
            relative = path.relative_to(autograded)
            if path.is_dir() and not path.is_symlink():
                if not any(path.iterdir()):
                    path.rmdir()
            elif not (
                path.suffix == ".ipynb"
                or relative == Path("timestamp.txt")
                or (source / relative).is_file()
            ):
                os.unlink(path)
        return nb, resources


class NameStudent(Preprocessor):
    """The submission's student gets the id as name if nobody gave one."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        from autograder.gradebook import name_student

        with Gradebook(resources["nbgrader"]["db_url"]) as gb:
            name_student(gb, resources["nbgrader"]["student"])
        return nb, resources
