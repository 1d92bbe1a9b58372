"""nbgrader configuration of the course *Attention, derived*.

The course directory is the folder of this file (``autograder/``): assignments are
``source/<id>/<id>.ipynb``, students' work goes to ``submitted/<student>/<id>/`` and the
gradebook is ``gradebook.db`` next to this file. Everything is derived from this file's
location, so a copy of the folder (as the pipeline tests make) is a course of its own.
"""

import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

_ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = _ROOT
c.CourseDirectory.course_id = "attention-derived"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(_ROOT, "gradebook.db")
# The student's stub in every solution region (nbgrader's default, spelled out).
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# A notebook must finish in well under this (ch3 trains a small model for a few seconds).
c.Execute.timeout = 300

# Feedback shows each test cell's verdict and messages, but never the hidden test code
# (stock nbgrader would copy it into the HTML): strip the hidden regions first.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
