"""The grading side of *Attention, derived*, grouped by whom each part serves.

``autograder/`` is also the nbgrader course directory (``nbgrader_config.py``, ``source/``,
``release/``, ``exchange/``), and ``python -m autograder`` is the instructor's command
(``cli.py``). The packages are the layers, lowest first; each imports only from itself and
the ones before it (``tests/test_layering.py``):

- `student`: the only grader code that runs beside a student's code, trusted with nothing:
  the checker shipped to students and the worker bound into the sandbox.
- `checking`: what every trusted part checks with: the check registry, the source
  notebook parsed, a student's files read under caps and made harmless, the verdict's
  wording, nbgrader's gradebook API and the names it may hold.
- `chapters`: one plug-in per assignment; importing the package registers them all.
- `sandbox`: the trusted side of the sandbox: start it, limit it (its budgets), feed it,
  read it back.
- `course`: nbgrader integration: release, collect, the gradebook, the report, and the
  preprocessors nbgrader's own autograde and pages run.
- `grading`: trusted grading of a batch: prepare, run, verdict, record.
"""
