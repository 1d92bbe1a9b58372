"""``python -m autograder``: see `autograder.cli`."""

import sys

# nbformat imports jsonschema, which compiles 39 IRI grammars of its optional `rfc3987_syntax`
# at import (about 1 s, a quarter of a small assignment's whole `grade` call). The notebook
# schema has no "iri" format, and jsonschema treats the module as absent (ImportError).
sys.modules.setdefault("rfc3987_syntax", None)

from autograder.cli import main  # noqa: E402

sys.exit(main())
