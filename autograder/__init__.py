"""The grading side of *Attention, derived*, grouped by whom each part serves.

``autograder/`` is also the nbgrader course directory (``nbgrader_config.py``, ``source/``,
``release/``, ``exchange/``), and ``python -m autograder`` is the instructor's command
(``cli.py``). The packages, from the student's side to the instructor's:

- `student`: the only grader code that runs beside a student's code, trusted with nothing:
  the checker shipped to students and the worker bound into the sandbox.
- `sandbox`: the trusted side of the sandbox: start it, limit it, feed it, read it back.
- `checking`: what every trusted part checks with: the check registry, the source
  notebook parsed, a student's files read under caps and made harmless, the verdict's
  wording.
- `chapters`: one plug-in per assignment, loaded by the registry.
- `grading`: trusted grading of a batch: prepare, run, verdict, record.
- `course`: nbgrader integration: release, collect, the gradebook, the report, and the
  preprocessors nbgrader's own autograde and pages run.
"""
