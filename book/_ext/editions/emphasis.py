"""Bold and italics pair next to Chinese: CommonMark's flanking rules, with a CJK character
beside a delimiter run treated as a space (the markdown-cjk-friendly proposal), in both
editions and in ``tools/translations.py check``."""

from __future__ import annotations

import re

# ----------------------------------------------------------------------------------------
# emphasis next to Chinese (CommonMark's flanking rules assume words separated by spaces)

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u2ff0-\u303f\u3040-\u31ff\u3200-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003ffff]"
)


def is_cjk(char: str) -> bool:
    """A Chinese, Japanese or Korean character, or CJK (full-width) punctuation."""
    return bool(_CJK.match(char))


def _cjk_friendly_scan_delims(self, start: int, canSplitWord: bool):
    """markdown-it's ``StateInline.scanDelims`` with the flanking rules of the
    markdown-cjk-friendly proposal: a run of ``*`` followed by punctuation still opens
    when a CJK character precedes it, and one preceded by punctuation still closes when a
    CJK character follows it (CommonMark asks for a space or punctuation on that side,
    which Chinese does not write). Nothing changes where no CJK character touches the run.
    """
    from markdown_it.common.utils import isMdAsciiPunct, isPunctChar, isWhiteSpace
    from markdown_it.rules_inline.state_inline import Scanned

    pos, maximum, marker = start, self.posMax, self.src[start]
    last = self.src[start - 1] if start > 0 else " "
    while pos < maximum and self.src[pos] == marker:
        pos += 1
    following = self.src[pos] if pos < maximum else " "
    last_punct = isMdAsciiPunct(ord(last)) or isPunctChar(last)
    next_punct = isMdAsciiPunct(ord(following)) or isPunctChar(following)
    last_space, next_space = isWhiteSpace(ord(last)), isWhiteSpace(ord(following))
    left_flanking = not next_space and (
        not next_punct or last_space or last_punct or is_cjk(last)
    )
    right_flanking = not last_space and (
        not last_punct or next_space or next_punct or is_cjk(following)
    )
    if canSplitWord:
        can_open, can_close = left_flanking, right_flanking
    else:
        can_open = left_flanking and (not right_flanking or last_punct)
        can_close = right_flanking and (not left_flanking or next_punct)
    return Scanned(can_open, can_close, pos - start)


def cjk_friendly_emphasis() -> None:
    """Make every markdown-it parser of this process pair ``**``/``*`` next to CJK text
    (MyST's and myst-nb's, hence the pages, the notebooks and the catalogs' messages)."""
    from markdown_it.rules_inline.state_inline import StateInline

    StateInline.scanDelims = _cjk_friendly_scan_delims
