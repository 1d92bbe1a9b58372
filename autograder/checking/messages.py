"""The one message catalog of the checks and the grader, in every language of the course.

A message has an id and an English template with named placeholders (``{output}``,
``{count}``...). The catalog has two parts, one per audience: what the student's checker
words (``contract.MESSAGES``: it ships, in ``public_cases.npz``) and what only the grader
says (``GRADER`` here: a hidden case's fixed few texts, a task the grader stopped, a missing
function). Their Chinese is one gettext catalog, ``locale/zh_CN/LC_MESSAGES/checks/
messages.po`` (msgid: the English template, exactly; msgstr: its translation, the same
placeholders and code spans). ``tools/translations.py hints`` merges a changed English
template into it (as *fuzzy*) and ``check`` fails on an entry that is missing, untranslated,
fuzzy, or whose placeholders or code spans differ (docs/translating.md).

A submission's language is its notebook's ``metadata.attention_derived.language``, which the
release sets (``autograder.course.release``): hostile input like every byte of a submission, so
anything but one of ``LANGUAGES`` exactly is English. The instructor's report stays English
(the reasons, notes and the most common messages of ``autograder.course.report``): only what the
student reads, the feedback, is in the notebook's language.

Trusted side only; never ships as code (the release writes the shipped part as data).
"""

from __future__ import annotations

import functools
import pathlib

from autograder.student import contract

LANGUAGES = ("en", "zh_CN")
ENGLISH = LANGUAGES[0]
#: where the release marks a notebook's edition (``metadata.attention_derived.language``)
METADATA_KEY = "attention_derived"
CATALOG = (
    pathlib.Path(__file__).resolve().parents[2]
    / "locale"
    / "zh_CN"
    / "LC_MESSAGES"
    / "checks"
    / "messages.po"
)

#: what only the grader says (English; the shipped part is ``contract.MESSAGES``). A hidden
#: case's texts (``hidden.*``) hold no number computed from what the function returned:
#: only the check's public description, the case's name and expected shape, and words
GRADER = {
    "hidden.arity.one": "expected 1 output, got a different number.",
    "hidden.arity.many": "expected {expected} outputs ({names}), got a different number.",
    "hidden.shape": "expected {output} of shape {shape}, got another shape{because}",
    "hidden.dtype.integer": "expected {output} to be an integer array, got another dtype.",
    "hidden.dtype.int": "expected {output} to be a Python int, got another dtype: a count is "
    "exact, so compute it with integers (// rather than /) and return int(...).",
    "hidden.dtype.bool": "expected {output} to be a boolean array (True = may attend), got "
    "another dtype.",
    "hidden.mask": "{output} differs from the expected mask in {share}.",
    "hidden.nonfinite": "{output} contains {what} where the expected one has none.",
    "hidden.values": "{output} is wrong in {share} (beyond the tolerance atol={atol} + "
    "rtol={rtol} * |expected|).",
    "hidden.values.scaled": "{output} is wrong in {share} (beyond the tolerance atol={atol} "
    "times the size of its terms + rtol={rtol} * |expected|).",
    "share.most": "most of its entries",
    "share.some": "some of its entries",
    "hidden.tokens.shape": "expected predictions of shape ({rows}, n_out) (one row of token "
    "ids per input sentence), got another shape.",
    "hidden.tokens.dtype": "expected integer token ids, got another dtype: return argmax "
    "indices, not scores.",
    "hidden.tokens.most": "most token sequences differ from the expected ones.",
    "hidden.tokens.some": "some token sequences differ from the expected ones.",
    "hidden.accuracy": "exact-match accuracy is below the required {threshold}.",
    "hidden.summary.passed": "{name}: all {total} hidden cases passed",
    "hidden.summary.failed": "{name}: hidden check failed on {failed} of {total} cases:",
    "hidden.summary.others": "{cases} failed too",
    "case.name": "case '{case}'",
    "list.separator": ", ",
    "grader.all_passed": "{check}: all {public} public and {hidden} hidden cases passed",
    "grader.undefined": "{check}: `{function}` is not defined: {why}",
    "grader.not_callable": "{check}: `{function}` is not a function: {why}",
    "grader.missing_why": "did the cell that defines it raise an error, or was it renamed?",
    "grader.stopped": "{check}: stopped by the grader ({reason}: {why})",
    "stopped.timeout": "it ran out of time",
    "stopped.crash": "its process ended early",
    "stopped.memory": "it went over the memory limit",
    "stopped.output too large": "it sent back more data than allowed",
    "stopped.protocol violation": "it broke the result protocol",
    "stopped.fork bomb": "it started too many processes",
    "stopped.other": "it was stopped",
    "grader.no_result": "case '{case}': no result",
    "grader.callee_first": (
        "{check}: {failed} of {public} public cases failed, and {check} calls your {callee}, "
        "which fails its own check: they are not counted. Fix {callee} first. {check} was "
        "graded on its hidden cases, where {callee} answered as the solution does"
    ),
    "grader.hidden_passed": "{check}: all {hidden} hidden cases passed",
    "grader.callee_excused": "not counted: your {callee} fails its own check",
    "grader.no_check": "this test cell calls no check",
    "cell.syntax": "the cell has a syntax error",
    "cell.syntax_at": "the cell has a syntax error at line {line}",
    "cell.import": (
        "the cell raised ModuleNotFoundError{module}{where}: an import failed, and {offered}"
    ),
    "cell.raised": "the cell raised {error}{where}",
    "grader.where": " (at line {line} of {where}: `{code}`)",
    "grader.where_no_code": " (at line {line} of {where})",
    "grader.in_cell": "notebook cell {cell}",
    "grader.in_restored_cell": "a cell restored as given",
    "grader.module_named": ": no module named '{module}'",
    "grader.module_unknown": ": a module not installed here",
    "cell.stopped_there": "notebook cell {cell}: {error}, so it stopped there",
    # diagnosis: a transformation of the solution that the result matches
    # (``autograder/checking/diagnosis.py``); said after "your result matches a known mistake: "
    "diagnosis.transposed": "the solution computed with `{arg}` transposed (its last two axes "
    "swapped)",
    "diagnosis.negated": "the solution computed with `{arg}` negated (a sign)",
    "diagnosis.scaled": "the solution computed with `{arg}` multiplied by {factor}, d the length "
    "of its last axis (a scale applied or dropped)",
    "diagnosis.power": "the solution computed with the {power} of `{arg}` in its place",
    "diagnosis.power.square": "square",
    "diagnosis.power.square_root": "square root",
    "diagnosis.mask_dropped": "the solution computed without the mask `{arg}` (every key allowed)",
    "diagnosis.mask_inverted": "the solution computed with the mask `{arg}` inverted (True "
    "means may attend)",
    "diagnosis.shifted": "the solution computed with `{arg}` {step} (an off-by-one)",
    "diagnosis.flag": "the solution computed with `{arg}` flipped",
    "diagnosis.other_axis": "the solution computed along the other axis (the last two axes of "
    "every array swapped): check which axis each sum, max or softmax runs over",
    "diagnosis.outputs_scaled": "the expected result multiplied by {factor}",
    "diagnosis.output_scaled": "the expected {output} multiplied by {factor} (the other outputs "
    "are right)",
    "diagnosis.factor.last": "{factor}, d the length of the last axis of `{arg}` (a scale "
    "applied or dropped)",
    "diagnosis.factor.other": "{factor}, n the length of an axis of `{arg}` other than its last "
    "(a sum where a mean is due, or the reverse)",
    "diagnosis.factor.value": "{factor}, x the value of `{arg}`",
    "diagnosis.outputs_negated": "the expected result with its sign flipped",
    "diagnosis.output_negated": "the expected {output} with its sign flipped (the other outputs "
    "are right)",
    "diagnosis.swapped": "the expected outputs with {first} and {second} swapped",
    "diagnosis.output_transposed": "the expected {output} transposed (its last two axes swapped)",
    # what a hidden case says of a derived mistake: its kind alone (``diagnosis.KIND``)
    "diagnosis.kind.transposed": "the solution with an array transposed (its last two axes "
    "swapped); the public cases name which, where it shows there",
    "diagnosis.kind.sign": "the solution with a sign flipped; the public cases name where, "
    "where it shows there",
    "diagnosis.kind.scale": "the solution with a scale applied or dropped (a factor such as "
    "√d, 1/n or a parameter's value); the public cases name which, where it shows there",
    "diagnosis.kind.mask": "the solution with the mask dropped or inverted; the public cases "
    "name which, where it shows there",
    "diagnosis.kind.shift": "the solution with an integer argument off by one or a flag read "
    "the other way; the public cases name which, where it shows there",
    "diagnosis.kind.axis": "the solution computed along the other axis: check which axis each "
    "sum, max or softmax runs over",
    "diagnosis.kind.swapped": "the expected outputs with two of them swapped; the public cases "
    "name which, where it shows there",
}


#: why the grader stopped a task or a cell of the hidden run (and any task), said the same
#: whatever the run's details (an exit status, a signal, a time, which limit, which bytes):
#: reason -> the id of its one fixed sentence; any other reason reads ``stopped.other``
STOPPED = {
    reason: f"stopped.{reason}"
    for reason in ("timeout", "crash", "memory", "output too large", "protocol violation")
    + ("fork bomb",)
}


def stopped(reason: str) -> str:
    """The message id of the fixed sentence for a stop of this reason."""
    return STOPPED.get(reason, "stopped.other")


def english() -> dict:
    """Every message's English template, both parts (their ids are disjoint)."""
    shared = GRADER.keys() & contract.MESSAGES.keys()
    if shared:
        raise ValueError(f"message ids in both parts of the catalog: {sorted(shared)}")
    return {**contract.MESSAGES, **GRADER}


def read_po(path: pathlib.Path) -> dict:
    """msgid -> msgstr of a .po file's finished entries (translated, not fuzzy)."""
    from babel.messages.pofile import read_po as babel_read_po

    if not path.exists():
        return {}
    with open(path, "rb") as handle:
        catalog = babel_read_po(handle)
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy}


@functools.lru_cache(maxsize=4)
def catalog(language: str = ENGLISH) -> dict:
    """message id -> template in ``language``: English where a message has no finished
    translation (``tools/translations.py check`` reports each one)."""
    templates = english()
    if language == ENGLISH:
        return templates
    if language not in LANGUAGES:
        raise ValueError(f"no message catalog for {language!r}")
    translated = read_po(CATALOG)
    return {key: translated.get(text) or text for key, text in templates.items()}


def shipped(language: str = ENGLISH) -> dict:
    """The part of ``catalog(language)`` the student's checker words (``contract.MESSAGES``):
    what the release writes into ``public_cases.npz``."""
    return {key: catalog(language)[key] for key in contract.MESSAGES}


def say(language: str, key: str, **params) -> str:
    """The message ``key`` in ``language``, its placeholders filled (``contract.render``)."""
    return contract.render(catalog(language), key, **params)


def language_of(metadata) -> str:
    """A submitted notebook's language from its metadata (hostile): one of ``LANGUAGES``
    exactly, else English (a missing, mistyped, unknown or oversized value alike)."""
    marked = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    language = marked.get("language") if isinstance(marked, dict) else None
    return language if isinstance(language, str) and language in LANGUAGES else ENGLISH
