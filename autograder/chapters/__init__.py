"""Chapter plug-ins: one module per assignment, each ending with ``register(Chapter(...))``.

Importing this package registers every chapter (``load_chapters``). The registry
(``autograder.checking.checks``) names no chapter and imports none: whatever reads it imports
this package first. ``run_hidden`` is here for the hidden cells of the source notebooks, so
that stock nbgrader's kernel finds every chapter registered.

See docs/adding-a-chapter.md."""

from __future__ import annotations

import importlib
import pkgutil

from autograder.checking.checks import run_hidden

__all__ = ["load_chapters", "run_hidden"]


def load_chapters() -> None:
    """Import every chapter module of this package (names not starting with _)."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


load_chapters()
