"""What may name a student or a file in the course: nbgrader turns both into folder and file
names and shows them in its pages, so only plain names are accepted (by `collect`, and by
`grade` for the folders under submitted/)."""

from __future__ import annotations

import re

#: a student id or a file id: letters, digits and . _ @ + -, starting with a letter or digit
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}\Z")
