"""The answer key: the references of the graded exercises, one module per assignment.

The chapter pages show the code of ``solutions`` (the shown code is the tested code), so a
graded task never asks for that code: it asks for the next step the chapter derives but does
not show (``docs/adding-a-chapter.md``). The references of those steps live here, apart from
anything the site shows:

- ``answers/<assignment id>.py``: one module per assignment, NumPy functions with their
  shapes named in the docstring, each tested against an independent oracle (PyTorch
  autograd, a finite difference, a PyTorch function, a closed form) in
  ``tests/test_answers_<assignment id>.py``;
- imported only by the chapter plug-ins (``autograder/chapters/``) and the tests; no page of
  the book imports or includes it, and ``tests/test_site_answers.py`` fails if the built
  site shows a graded function's name in code or three lines of its reference anywhere.

With the instructor's source notebooks (``autograder/source/``) this is what an instructor
keeps private: a public fork of the repository publishes the answers (README, "For
instructors"). Chapters 3 and 6 also grade library functions of ``solutions`` whose bodies no
page shows (``docs/adding-a-chapter.md``, step 1).
"""
