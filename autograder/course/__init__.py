"""The nbgrader course: nbgrader integration, for the instructor.

The course directory is the folder above (``autograder/``: ``nbgrader_config.py``,
``source/``, ``release/``, ``exchange/``, the gradebook); this package is what works it.

- `release`: ``make release``, what ships to students: the checker, the public cases and the
  notebooks, scanned, zipped and released into the exchange.
- `collect`: an LMS download filed under each student by the roster and the LMS's own ids;
  `lms`: the roster from the LMS's export, and the grades and feedback in the LMS's own
  import formats.
- `gradebook`: scores into nbgrader's gradebook through its own API
  (``autograder.checking.nbgrader_api``), and the autograded notebooks, which `rendering`
  makes in a process of its own.
- `hand_grading`: what still waits for a human, wherever a score is shown.
- `report`: the instructor's page per assignment.
- `nbgrader_sanitise`: the preprocessors ``nbgrader_config.py`` registers, so that nbgrader's
  own autograde, feedback and formgrader sanitise too (``autograder.checking.sanitise``), and
  the course's templates for nbgrader's pages (``nbgrader_templates/``).
"""
