"""The editions and what every part of the extension asks of a language: which edition is the
default (built at the site root), and which words of a message are English prose."""

from __future__ import annotations

import re

# language -> (folder of the edition below the site root, name of the link to it).
# The first is the default edition, built at the root.
EDITIONS = {"en": ("", "English"), "zh_CN": ("zh/", "中文")}


# What is not English prose in a message: display/inline math, code spans, MyST roles
# ({cite:t}`key`, {eq}`label`, {doc}`path`, {term}`text <target>`), link targets, URLs.
NOT_PROSE = re.compile(
    r"\$\$.*?\$\$|\$[^$]*\$|\{[a-z:]+\}`[^`]*`|``.*?``|`[^`]*`|\]\([^)]*\)|<[^>]*>|https?://\S+",
    re.DOTALL,
)
_ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")


def english_words(message: str) -> list[str]:
    """The English words of ``message`` outside math, code, roles, links and URLs."""
    return _ENGLISH_WORD.findall(NOT_PROSE.sub(" ", message))


def is_default(language: str | None) -> bool:
    return (language or "en") == next(iter(EDITIONS))
