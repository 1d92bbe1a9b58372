"""The doctree transforms of a page in either edition: display math kept out of the catalogs,
every figure described, an untranslated message a build failure, each edition's assignment
downloads, the glossary in Chinese order, the table of contents' captions translated, and
the figures a code cell drew in the edition's language."""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.i18n import docname_to_domain
from sphinx.util.nodes import extract_messages

from editions.languages import english_words, is_default

logger = logging.getLogger(__name__)


class MathIsNotAMessage(SphinxTransform):
    """Display math is the same in every edition: keep it out of the catalogs.

    Runs before Sphinx's ``Locale`` transform (priority 20), which skips a node whose
    ``translatable`` is False, as does the gettext builder's message extraction.
    """

    default_priority = 10

    def apply(self, **kwargs) -> None:
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False


FIGURE_DESCRIPTIONS = "figure_descriptions"  # the code cell's metadata key


class FigureDescriptions(SphinxTransform):
    """Give each figure a code cell shows its description as alt text.

    The descriptions are the cell's ``metadata["figure_descriptions"]``, one per figure
    (an output with an image; myst-nb keeps every rendering of one output in one
    ``mime_bundle``, the English PNG and the Chinese one alike). Runs before ``Locale``
    (20), so the alt text is a message of the page's catalog, and the Chinese edition
    replaces it by its translation.
    """

    default_priority = 15

    def apply(self, **kwargs) -> None:
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") != "cell_code":
                continue
            figures: list[list[nodes.image]] = []
            for output in cell.findall(nodes.container):
                if output.get("nb_element") == "mime_bundle":
                    images = list(output.findall(nodes.image))
                    if images:
                        figures.append(images)
            lone = [
                image
                for image in cell.findall(nodes.image)
                if not any(image in figure for figure in figures)
            ]
            figures += [[image] for image in lone]
            descriptions = (cell.get("cell_metadata") or {}).get(
                FIGURE_DESCRIPTIONS, []
            )
            if len(descriptions) != len(figures):
                logger.warning(
                    "a code cell shows %d figure(s) and describes %d: give it one "
                    "description per figure in its metadata %r (the figures' alt text)",
                    len(figures),
                    len(descriptions),
                    FIGURE_DESCRIPTIONS,
                    location=cell,
                    type="editions",
                    subtype="figure_description",
                )
            for images, description in zip(figures, descriptions):
                for image in images:
                    image["alt"] = description
                    image["alt_source"] = description
            if self.app.builder.name == "gettext":
                # the message extraction sees the doctree after myst-nb kept one rendering
                # of each output, for this builder the text: the descriptions go in as
                # paragraphs of their own (this builder writes only the catalogs)
                for description in descriptions:
                    paragraph = nodes.paragraph(description, description)
                    paragraph.source = cell.source or self.document["source"]
                    paragraph.line = cell.line or 1
                    cell += paragraph


class UntranslatedMessages(SphinxTransform):
    """In a translated edition, warn about every message Sphinx left in English.

    Runs right after ``Locale`` (priority 20), which sets ``node["translated"]`` on every
    message it looked up: False when the catalog has no usable translation.
    """

    default_priority = 21

    def apply(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        for node, message in extract_messages(self.document):
            if isinstance(node, nodes.image):
                # Locale replaces an image's alt text without marking the node translated
                if node.get("alt") != node.get("alt_source") or not english_words(
                    message
                ):
                    continue
            elif node.get("translated") or not english_words(message):
                continue
            logger.warning(
                "untranslated message (add or update its msgstr in locale/%s/LC_MESSAGES/%s.po,"
                " see docs/translating.md): %r",
                self.config.language,
                self.env.docname,
                message[:120],
                location=node,
                type="editions",
                subtype="untranslated",
            )


RELEASED = re.compile(
    r"^(?P<head>.*autograder/release/)(?P<tail>ch\d+_\w+(?:\.zip|/ch\d+_\w+\.ipynb))$"
)


class AssignmentsInThisLanguage(SphinxTransform):
    """In a translated edition, a download of a released assignment is that language's.

    Runs after ``Locale`` (20) swapped in the translated text (the translation keeps the
    English target, which ``tools/translations.py check`` enforces) and before the
    environment collects the files to copy (on doctree-read, after every transform).
    """

    default_priority = 22

    def apply(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        for node in self.document.findall(addnodes.download_reference):
            match = RELEASED.match(node.get("reftarget", ""))
            if match:
                node["reftarget"] = (
                    f"{match['head']}{self.config.language}/{match['tail']}"
                )


def pinyin_key(text: str) -> tuple[str, str]:
    """The order of a Chinese headword: its pinyin without tones, syllable by syllable
    (Latin letters as they are, lower case), then the text itself."""
    from pypinyin import Style, lazy_pinyin, load_phrases_dict

    # readings pypinyin's phrase table gets wrong in the course's terms
    load_phrases_dict({"重参数化": [["chóng"], ["cān"], ["shù"], ["huà"]]})
    headword = text.split("（")[0]
    syllables = lazy_pinyin(
        headword, style=Style.NORMAL, errors=lambda chars: chars.lower()
    )
    return (" ".join(s.strip().lower() for s in syllables if s.strip()), text)


class GlossaryInChineseOrder(SphinxTransform):
    """In the Chinese edition, the glossary's entries in the order of their Chinese
    headwords' pinyin (a Chinese student scans it by the Chinese), not the English one.

    Runs after ``Locale`` (20) has replaced each headword by its translation,
    ``中文（English）``; an entry with several headwords goes under its first."""

    default_priority = 23

    def apply(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        for glossary in self.document.findall(addnodes.glossary):
            for listing in glossary.findall(nodes.definition_list):
                items = list(listing.children)
                items.sort(key=lambda item: pinyin_key(item[0].astext()))
                listing.children = []
                listing.extend(items)


class TranslatedTocCaptions(SphinxTransform):
    """Translate the captions of the table of contents ("Chapters", "Exercises", ...).

    sphinx-external-toc inserts the toctrees from _toc.yml into the root page at priority
    100, after Sphinx's ``Locale`` (20) has translated that page: the captions are in the
    page's catalog (the gettext builder sees the finished page) but were never looked up.
    """

    default_priority = 101  # right after sphinx_external_toc's InsertToctrees

    def apply(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        toctrees = [
            n for n in self.document.findall(addnodes.toctree) if n.get("caption")
        ]
        if not toctrees:
            return
        dirs = [str(Path(self.env.srcdir, d)) for d in self.config.locale_dirs]
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        catalog, found = init_locale(dirs, self.config.language, domain)
        for node in toctrees:
            caption = node["caption"]
            translated = catalog.gettext(caption) if found else caption
            if translated == caption and english_words(caption):
                logger.warning(
                    "untranslated table-of-contents caption %r (locale/%s/LC_MESSAGES/%s.po)",
                    caption,
                    self.config.language,
                    domain,
                    location=node,
                    type="editions",
                    subtype="untranslated",
                )
            node["caption"] = node["rawcaption"] = translated


class FiguresInThisLanguage(SphinxPostTransform):
    """In a translated edition, fail on a figure output that has no rendering in its language.

    myst-nb renders every representation of an output and then keeps one (its
    ``SelectMimeType``, priority 4): this looks just before, at each output that has a PNG,
    for the Chinese rendering ``solutions.plotting`` adds when tools/build_book.py runs the
    notebooks. An output cached by anything else (a bare ``jupyter-book build``) lacks it,
    and would put an English figure on a Chinese page.
    """

    default_priority = 3

    def run(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        from solutions.plotting import ZH_PNG_MIME

        for bundle in self.document.findall(nodes.container):
            if bundle.get("nb_element") != "mime_bundle":
                continue
            kinds = {child.get("mime_type") for child in bundle.children}
            if "image/png" in kinds and ZH_PNG_MIME not in kinds:
                logger.warning(
                    "a figure has no %s rendering: its output was cached by something other "
                    "than tools/build_book.py; run rm -r _build/.jupyter_cache, then make book",
                    self.config.language,
                    location=bundle,
                    type="editions",
                    subtype="figure_language",
                )
