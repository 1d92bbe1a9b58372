"""Build both editions of the book: ``make book`` runs this after releasing the assignments.

1. The English edition into ``_build/html``: the notebooks execute here (or come from the
   execution cache, ``_build/.jupyter_cache``, when their code has not changed).
2. The Chinese edition into ``_build/html/zh``: the same sources and the same cache, so
   nothing executes again; every message comes from ``locale/zh_CN`` (docs/translating.md),
   and every figure is the Chinese rendering the notebook made beside the English one
   (``solutions.plotting``). An untranslated message fails this build.

Both run Sphinx exactly as ``jupyter-book build . --warningiserror --keep-going --nitpick``
does (Jupyter Book's own ``build_sphinx`` with the configuration of ``_config.yml``); the
only differences are the language, the output and doctree folders, and the figure
rendering the Chinese build picks. ``--only zh_CN`` rebuilds one edition;
``--builder gettext`` extracts the message templates into ``_build/gettext`` instead (from
the execution cache too: a figure's caption is a message, and it lives in the cell's output).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
sys.path.insert(0, str(ROOT))

from solutions.plotting import FIGURE_CATALOG, FIGURE_LANGUAGES_ENV, ZH_PNG_MIME  # noqa: E402

LANGUAGES = ("en", "zh_CN")


def sphinx_overrides(language: str) -> dict:
    """Sphinx settings on top of _config.yml, as jupyter-book's command line passes them."""
    overrides = {
        "external_toc_path": "_toc.yml",
        "latex_individualpages": False,
        "nitpicky": True,
        "language": language,
        # one cache for both editions (myst-nb would put it beside each output folder)
        "nb_execution_cache_path": str(BUILD / ".jupyter_cache"),
    }
    if language != LANGUAGES[0]:
        # the Chinese rendering of each figure before the English one (see solutions.plotting)
        overrides["nb_mime_priority_overrides"] = [("html", ZH_PNG_MIME, 1)]
    return overrides


def notebooks_without_a_cached_run() -> list[Path]:
    """The book's notebooks whose current code has no successful execution in the cache.

    myst-nb caches a notebook's execution only when it succeeded, but Sphinx re-reads a
    page only when its source is newer than its last reading: after a notebook failed,
    the next build found nothing changed, reported success and kept the failed page.
    A build that finds such a notebook reads every page afresh (``freshenv``), so the
    notebook executes again and fails the build again until it passes; the notebooks
    with a cached run come from the cache."""
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str(BUILD / ".jupyter_cache"))
    missing = []
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            missing.append(path)
    return missing


def build(language: str, builder: str = "html") -> int:
    from jupyter_book.sphinx import build_sphinx

    if builder == "gettext":
        outdir, doctrees = BUILD / "gettext", BUILD / ".doctrees-gettext"
    elif language == LANGUAGES[0]:
        outdir, doctrees = BUILD / "html", BUILD / ".doctrees"
    else:
        outdir, doctrees = BUILD / "html" / "zh", BUILD / f".doctrees-{language}"
    overrides = sphinx_overrides(language)
    started = time.monotonic()
    # the gettext builder reads afresh anyway (below)
    uncached = [] if builder == "gettext" else notebooks_without_a_cached_run()
    if uncached:
        names = ", ".join(path.name for path in uncached)
        print(
            f"[build_book] {language}: no successful run cached for {names}: every page is read afresh"
        )
    status = build_sphinx(
        ROOT,
        outdir,
        noconfig=True,
        path_config=ROOT / "_config.yml",
        confoverrides=overrides,
        doctreedir=doctrees,
        builder=builder,
        # the templates come from a fresh reading every time, and any warning (a notebook
        # that failed to execute, say for want of the CJK font) fails the extraction:
        # otherwise its captions would be missing from the templates, sphinx-intl would
        # mark their translations obsolete, and a pickled environment would keep them
        # missing in the next extraction too
        freshenv=builder == "gettext" or bool(uncached),
        warningiserror=True,
        keep_going=True,
    )
    # myst-nb writes its copies of the outputs beside the output folder: for the Chinese
    # edition that is inside the English site, where nothing links to them
    if outdir.parent != BUILD:
        shutil.rmtree(outdir.parent / "jupyter_execute", ignore_errors=True)
    print(
        f"[build_book] {builder} {language}: status {status!r} in {time.monotonic() - started:.1f} s"
    )
    return 0 if status == 0 else 1


def forget_outputs_of_an_old_figure_catalog() -> None:
    """Empty the execution cache when figures.po changed since the cache was filled.

    The cache keys a notebook by its code, but its figures' Chinese renderings also
    depend on the figure catalog: a corrected translation must reach the figures, so a new
    catalog re-executes the notebooks (once; the stamp records the catalog they used)."""
    cache, stamp = BUILD / ".jupyter_cache", BUILD / ".figures-po.sha256"
    digest = hashlib.sha256(FIGURE_CATALOG.read_bytes()).hexdigest()
    if cache.exists() and stamp.is_file() and stamp.read_text() == digest:
        return
    if cache.exists():
        print(f"[build_book] {FIGURE_CATALOG.name} changed: the notebooks execute again")
        shutil.rmtree(cache)
    BUILD.mkdir(exist_ok=True)
    stamp.write_text(digest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=LANGUAGES, help="build one edition only")
    parser.add_argument("--builder", default="html", choices=("html", "gettext"))
    args = parser.parse_args(argv)
    # the kernels that execute the notebooks (children of this process) render each
    # figure in every edition's language; the gettext builder executes what the cache
    # lacks too, and its outputs are cached for the next build
    os.environ[FIGURE_LANGUAGES_ENV] = ",".join(LANGUAGES)
    if args.builder == "gettext" or args.only in (None, LANGUAGES[0]):
        forget_outputs_of_an_old_figure_catalog()
    if args.builder == "gettext":
        return build(LANGUAGES[0], "gettext")
    for language in LANGUAGES:
        if args.only in (None, language) and build(language) != 0:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
