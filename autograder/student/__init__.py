"""The student's side: the grader's only code that runs beside a student's code.

Nothing here is trusted, and nothing here knows a reference's answer or the grader's wording:
what it sends back is judged on the trusted side.

- `contract`: the student's checker, shipped in every release as ``attention_check.py``
  (``autograder.course.release``): the case reader, the case runner and the public checks'
  judge, NumPy only. A student runs it offline; the sandbox runs its case runner.
- `zygote`: the sandbox's worker (one per slot), which forks a fresh child for each run.
- `isolation`: the fresh state that child builds before any student code runs.
- `frames`: the one frame format of every pipe between the grader's processes.

All four are bound read-only and flat into the sandbox
(``autograder.sandbox.command.IN_SANDBOX``) and import nothing but each other
(``tests/test_layering.py``): the zygote, run in there as a script, imports its neighbours
by their bare names, which is why they share this folder.
"""
