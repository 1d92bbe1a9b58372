"""What the trusted side checks with, shared by the release, the grading and nbgrader's
own autograde. Never bound into the sandbox; never shipped as code.

- `checks`: the check registry, every graded function declared once by the chapter that
  owns it (plug-ins in ``autograder/chapters/``); ``run_hidden`` for stock nbgrader.
- `assignment_spec`: what is graded, parsed from the instructor's source notebook;
  `notebook`: a submitted notebook read under its caps, its nbgrader metadata checked;
  `program`: what runs of a submission, and the autograded notebook made of it; `intake`: a
  student's files, read under a bound fixed before the first byte;
  `sanitise`: nothing a student wrote reaches the instructor's browser as live HTML.
- `judging`: the grader's judge, worded for a public or a hidden case; `messages`: the one
  message catalog in every language of the course (the checker's part ships as data).
- `casefile`: the writer of ``public_cases.npz``, which the student's checker reads.
- `assignment_text`: the released notebooks' prose, and their Chinese edition; `results`:
  what a graded submission becomes, typed, and read back from its record.
- `gradebook_ids`: what may name a student or a file in the course; `nbgrader_api`:
  nbgrader's gradebook API imported without its Jupyter server extensions.
"""
