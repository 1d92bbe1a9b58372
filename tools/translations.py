"""The Chinese edition's catalogs: update them from the English sources, and check them.

    .venv/bin/python tools/translations.py update   # after changing English text
    .venv/bin/python tools/translations.py hints    # the checks' hints and messages alone
                                                    # (no book build)
    .venv/bin/python tools/translations.py check    # what `make test` checks (also run by
                                                    # tests/test_translations.py)

``update`` extracts every message of the book, and the prose of every assignment's source
notebook (``autograder/checking/assignment_text.py``: one paragraph a message), into ``_build/gettext`` (Sphinx's gettext
builder through tools/build_book.py; run it after ``make book``, whose execution cache it
reads: figure captions are messages of the cells' outputs) and merges the templates
into ``locale/zh_CN/LC_MESSAGES/*.po`` with sphinx-intl: a new sentence arrives with an
empty translation, a changed one as *fuzzy* with the old translation to start from. Both
fail the build until a translator has dealt with them (docs/translating.md).

``check`` reads every catalog (the pages' and the figures') and reports, per message:

- untranslated (empty) or fuzzy entries: the build would show English, so they fail;
- a translation that lost or changed something that must survive translation: an inline
  formula ``$...$`` (the words of its ``\\text{...}`` are translated), a code span, a role's
  target ({eq}`label`, {cite:t}`key`, {doc}`page`, {term}`text <target>`), a link's URL;
- a term of ``locale/zh_CN/terminology.tsv`` marked ``checked`` whose English appears in
  the message but neither its Chinese nor an accepted alternative (``also``) appears in the
  translation; and, for any term, a rendering listed under ``not`` (one that drifted in
  before: 瞥视 for glimpse, a bare "notebook") in the translation of a message that has the
  English term;
- a ``*`` or ``**`` of a translation that pairs with nothing (the reader would see it):
  the message is parsed as the book parses it, with CommonMark's flanking rules made
  CJK-friendly (``editions.cjk_friendly_emphasis``);
- a rendering of ``VARIANTS`` in any translation, whatever its English (几何数列 for
  等比数列, 正向 for 前向, 评分 for grading where 评分 is the glossary's "score"...);
- Chinese in *italics* (Chinese fonts have no italic face: emphasis is **bold**);
- straight "quotes" in a Chinese translation's prose (smart quotes would make both ”);
- a hint of a check (``autograder/checking/checks.py``) without an entry in its catalog,
  ``checks/<assignment>.po`` or ``checks/shared.po``, or an entry that is no check's hint;
- a message of the checks' and the grader's catalog (``autograder/checking/messages.py``, English
  templates with named placeholders) without an entry in ``checks/messages.po``, or an entry
  that is no message's; and in every catalog of ``checks/``, a translation whose
  ``{placeholders}`` are not exactly the English one's (the template would fail, or lose a
  number).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
# what is not prose (math, code, roles, links): the build's own definition, so the
# terminology check and the build's untranslated-message check read messages alike; the
# terminology table is read by the build too (the Chinese search's user dictionary)
from editions.emphasis import cjk_friendly_emphasis  # noqa: E402
from editions.languages import NOT_PROSE  # noqa: E402
from editions.search import Term  # noqa: E402
from editions.search import read_terminology as read_terminology_table  # noqa: E402

LANGUAGE = "zh_CN"
CATALOGS = ROOT / "locale" / LANGUAGE / "LC_MESSAGES"
FIGURES = CATALOGS / "figures.po"
TERMINOLOGY = ROOT / "locale" / LANGUAGE / "terminology.tsv"

MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)
ROLE = re.compile(r"\{([a-z:]+)\}`([^`]*)`")
CODE = re.compile(r"(?<![}`])(``?)([^`]+?)\1(?!`)")
#: a named placeholder of a message template (``str.format``'s ``{name}``)
PLACEHOLDER = re.compile(r"(?<!\{)\{(\w+)\}(?!\})")
LINK_URL = re.compile(r"\]\(([^)\s]+)\)")
TERM_ROLE = re.compile(r"\{term\}`([^`<]*?)\s*(?:<[^>]*>)?`")
# *emphasis* (not **bold**): Chinese fonts have no italic, so the browser slants the glyphs;
# the Chinese edition emphasises Chinese with **bold** (docs/translating.md)
ITALIC = re.compile(r"(?<![*\\])\*(?![*\s])((?:[^*\n]|\*\*[^*\n]+\*\*)+?)(?<![\s*\\])\*(?!\*)")
HAN = re.compile(r"[\u4e00-\u9fff]")
ORIGINAL_IN_BRACKETS = re.compile(r"（[^（）]*）")


def italic_chinese(msgstr: str) -> list[str]:
    """The *italic* spans of a translation that contain Chinese (math and code ignored)."""
    prose = NOT_PROSE.sub(lambda m: " " * len(m.group()), msgstr)
    return [m.group() for m in ITALIC.finditer(prose) if HAN.search(m.group(1))]


_INLINE_PARSER = None


def emphasis(text: str) -> tuple[int, list[str]]:
    """How many emphasised spans (**bold** and *italic*) ``text`` renders, and the runs of
    ``*`` that pair with nothing and would be shown as asterisks (outside code and math).
    Parsed as the book parses it: CommonMark, ``$...$`` math, and the CJK-friendly
    flanking rules of ``editions.cjk_friendly_emphasis``."""
    global _INLINE_PARSER
    if _INLINE_PARSER is None:
        from markdown_it import MarkdownIt
        from mdit_py_plugins.dollarmath import dollarmath_plugin

        cjk_friendly_emphasis()
        _INLINE_PARSER = MarkdownIt("commonmark").use(dollarmath_plugin, double_inline=True)
    spans, stray = 0, []
    for block in _INLINE_PARSER.parse(text):
        for token in block.children or []:
            if token.type in ("strong_open", "em_open"):
                spans += 1
            elif token.type == "text" and "*" in token.content:
                stray += re.findall(r"\S*\*+\S*", token.content)
    return spans, stray


def straight_quotes(msgstr: str) -> list[str]:
    """The "quoted" spans of a Chinese translation's prose (math and code ignored): Sphinx's
    smart quotes read a straight quote after a Chinese character as a closing one, so
    （"it"） renders as （”it”）. The Chinese edition writes “…” itself."""
    if not HAN.search(msgstr):
        return []
    prose = NOT_PROSE.sub(lambda m: " " * len(m.group()), msgstr)
    return re.findall(r'"[^"\n]*"?', prose)


#: renderings that drifted in whatever the English says, each with the one the edition uses
#: (docs/translating.md): one Chinese word per meaning on every page
VARIANTS = (
    ("几何数列", "等比数列", "a geometric sequence is 等比数列 (mainland usage)"),
    ("几何级数", "等比数列", "a geometric sequence is 等比数列 (mainland usage)"),
    ("正向传播", "前向传播", "the forward pass is 前向传播"),
    ("正向计算", "前向计算", "the forward pass is 前向传播, computing forward 前向计算"),
    ("正向运行", "前向计算", "the forward pass is 前向传播, computing forward 前向计算"),
    ("乘积法则", "矩阵乘积的求导规则", "乘积法则 is the scalar (uv)' rule, not C = AB's backward"),
    (
        "评分程序",
        "计分程序",
        "评分 is a score (the glossary's); grading is 计分, the grader 计分程序",
    ),
    ("人工评分", "人工批改", "评分 is a score (the glossary's); a written answer is 人工批改"),
    ("如何评分", "如何计分", "评分 is a score (the glossary's); grading is 计分"),
    ("| 分数 |", "| 分值 |", "a task's points are 分值 (分数 is what a student gets)"),
    ("Attention, derived", "推导注意力", "the course's Chinese title is 《推导注意力》"),
)


def variant_problems(msgstr: str) -> list[str]:
    """The renderings of ``VARIANTS`` in a translation's prose (math and code ignored)."""
    prose = NOT_PROSE.sub(" ", msgstr)
    return [
        f"terminology: {wrong!r} is {right!r} ({why})"
        for wrong, right, why in VARIANTS
        if wrong in prose
    ]


def read_terminology(path: Path = TERMINOLOGY) -> list[Term]:
    """The terms of ``terminology.tsv`` (the build reads them too: the search dictionary)."""
    return read_terminology_table(path)


def role_targets(text: str) -> Counter:
    """Each role as (name, target): the target is what follows '<' if given, else all."""
    found = Counter()
    for name, content in ROLE.findall(text):
        target = content.rsplit("<", 1)[1].rstrip(">").strip() if "<" in content else content
        found[(name, target.lower() if name == "term" else target)] += 1
    return found


#: words in a formula (``\text{(masked)}``, ``\sqrt{\text{number of layers}}``) are prose:
#: translated, the formula around them kept
TEXT_IN_MATH = re.compile(r"\\text\{[^{}]*\}")


def kept_pieces(text: str) -> dict[str, Counter]:
    """What a translation must carry over unchanged, by kind (multisets); the words of a
    formula's ``\\text{...}`` are the translation's own."""
    without_roles = ROLE.sub(" ", text)
    return {
        "inline math": Counter(
            TEXT_IN_MATH.sub(r"\\text{}", m.strip()) for m in MATH.findall(without_roles)
        ),
        "role": role_targets(text),
        "code span": Counter(m[1] for m in CODE.findall(MATH.sub(" ", without_roles))),
        "link": Counter(LINK_URL.findall(text)),
    }


def read_catalog(path: Path):
    from babel.messages.pofile import read_po

    with open(path, "rb") as handle:
        return read_po(handle, locale=LANGUAGE)


def placeholder_problems(msgid: str, msgstr: str) -> list[str]:
    """A template's translation must hold exactly its ``{placeholders}``: one missing would
    drop a number from the message, a new one would make the template fail."""
    source, target = Counter(PLACEHOLDER.findall(msgid)), Counter(PLACEHOLDER.findall(msgstr))
    if source == target:
        return []
    missing, extra = sorted((source - target).elements()), sorted((target - source).elements())
    return [f"placeholders not kept: missing {missing}, new {extra}"]


def message_problems(
    msgid: str,
    msgstr: str,
    fuzzy: bool,
    terms: list[Term],
    markdown: bool = True,
    template: bool = False,
) -> list[str]:
    """Why this entry would not be a finished translation (empty list: it is).
    ``markdown``: the message is MyST text (a page's), not a figure's plain text;
    ``template``: a message of the checks' catalogs, whose placeholders must be kept."""
    if not msgstr:
        return ["untranslated"]
    problems = (
        ["fuzzy (the English changed: check the translation, then drop the flag)"] if fuzzy else []
    )
    if template:
        problems += placeholder_problems(msgid, msgstr)
    source, target = kept_pieces(msgid), kept_pieces(msgstr)
    for kind in source:
        missing = source[kind] - target[kind]
        extra = target[kind] - source[kind]
        if missing or extra:
            problems.append(
                f"{kind} not kept: missing {sorted(map(str, missing.elements()))}, "
                f"new {sorted(map(str, extra.elements()))}"
            )
    if markdown:
        stray = emphasis(msgstr)[1]
        if stray and not emphasis(msgid)[1]:
            problems.append(
                f"unpaired emphasis {stray}: a ** or * that pairs with nothing (shown as asterisks)"
            )
    italic = italic_chinese(msgstr)
    if italic:
        problems.append(f"italic Chinese {italic}: emphasise Chinese with **bold**")
    quoted = straight_quotes(msgstr)
    if quoted:
        problems.append(f"straight quotes {quoted}: quote with “…” in Chinese")
    # a {term} role's text is prose (the reader sees it); other roles, math and code are not;
    # emphasis marks are not words ("*inverted* dropout" is the term "inverted dropout")
    prose = NOT_PROSE.sub(" ", TERM_ROLE.sub(lambda m: m.group(1), msgid)).replace("*", "")
    translation = msgstr.replace("*", "")
    # the original term given in brackets after its Chinese, 独热（one-hot）, is not a drift
    translated_prose = ORIGINAL_IN_BRACKETS.sub(
        " ", NOT_PROSE.sub(" ", TERM_ROLE.sub(lambda m: m.group(1), translation))
    )
    for term in terms:
        if not term.pattern().search(prose):
            continue
        if term.checked and not any(chinese in translation for chinese in term.renderings()):
            accepted = " or ".join(map(repr, term.renderings()))
            problems.append(f"terminology: {term.english!r} is {accepted}")
        drifted = [w for w in term.avoid if w.lower() in translated_prose.lower()]
        if drifted:
            problems.append(
                f"terminology: {term.english!r} is {term.chinese!r}, not {', '.join(drifted)}"
            )
    return problems


def check(catalogs: Path = CATALOGS) -> list[str]:
    """Every problem of every catalog, as 'file: msgid...: problem' lines."""
    terms = read_terminology()
    report = []
    paths = sorted(catalogs.rglob("*.po"))
    if not paths:
        return [f"no catalogs in {catalogs}"]
    for path in paths:
        figures = path == catalogs / FIGURES.name
        for message in read_catalog(path):
            if not message.id:
                continue
            problems = message_problems(
                message.id,
                message.string,
                message.fuzzy,
                [] if figures else terms,
                markdown=not figures,
                template=path.parent == catalogs / "checks",
            )
            problems += variant_problems(message.string) if message.string else []
            for problem in problems:
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                report.append(f"{where}: {message.id[:70]!r}: {problem}")
    return report


#: the hidden cases' seeds whose case names a catalog must hold: the grader's default and
#: two others (a chapter that named a case from its seed would show a name missing here)
CASE_NAME_SEEDS = (None, 1, 2)


def case_names(assignment: str) -> list[str]:
    """The names of a chapter's public and hidden cases, each once, in order: a student sees
    them in every message of a failing case, so they are translated as the hints are (the
    chapter's catalog, ``checks.translated_hint``). A name a seed makes ("no mask, T = 4
    steps over n = 6 words": one the seeds of ``CASE_NAME_SEEDS`` do not all give) is given
    as its pattern, its numbers {0}, {1}, and so is every name of that pattern: translated
    once for every size."""
    from autograder.checking import checks
    from autograder.checking.checks import numbers_as_placeholders

    names, per_seed = [], []
    for check in checks.checks_for(assignment):
        names += [case.name for case in checks.public_cases(check.name)]
    for seed in CASE_NAME_SEEDS:
        seed = checks.DEFAULT_HIDDEN_SEED if seed is None else seed
        hidden = [
            case.name
            for check in checks.checks_for(assignment)
            for case in checks.hidden_cases(check.name, seed)
        ]
        per_seed.append(set(hidden))
        names += hidden
    made_by_a_seed = set.union(*per_seed) - set.intersection(*per_seed)
    patterns = {numbers_as_placeholders(name)[0] for name in made_by_a_seed}
    return list(
        dict.fromkeys(
            key if key in patterns else name
            for name in names
            for key in [numbers_as_placeholders(name)[0]]
        )
    )


def hint_domains() -> list[tuple[str, list[str]]]:
    """(catalog name, the English texts it must translate): each chapter's own hints and its
    cases' names, then the shared hints (``autograder/checking/checks.py``: one catalog per
    chapter in ``checks/``)."""
    sys.path.insert(0, str(ROOT))
    from autograder import chapters  # noqa: F401 - every chapter registered
    from autograder.checking import checks

    domains = [
        (assignment, list(dict.fromkeys(checks.hint_texts(assignment) + case_names(assignment))))
        for assignment in checks.ASSIGNMENTS
    ]
    return domains + [(checks.SHARED_HINTS, checks.shared_hints())]


def hint_problems(catalogs: Path = CATALOGS) -> list[str]:
    """Every hint a check can show with no entry in its catalog, and every entry that is no
    check's hint (untranslated and fuzzy entries are ``check``'s, as in any catalog)."""
    from autograder.checking.checks import numbers_as_placeholders

    report = []
    for domain, texts in hint_domains():
        path = catalogs / "checks" / f"{domain}.po"
        ids = {m.id for m in read_catalog(path) if m.id} if path.exists() else set()
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        used = set()
        for text in texts:
            # a text made from sizes a seed chooses is translated once, its numbers {0}, {1}
            # (``checks.translated_hint``)
            key = text if text in ids else numbers_as_placeholders(text)[0]
            used.add(key)
            if key not in ids:
                report.append(f"{where}: {text[:70]!r}: missing (run update, then translate)")
        for text in sorted(ids - used):
            report.append(f"{where}: {text[:70]!r}: obsolete (no check shows it): delete it")
    return report


MESSAGES_DOMAIN = "messages"


def message_templates() -> list[str]:
    """The English templates of the checks' and the grader's one message catalog
    (``autograder/checking/messages.py``), each once, in the catalog's order."""
    sys.path.insert(0, str(ROOT))
    from autograder.checking import messages

    return list(dict.fromkeys(messages.english().values()))


def message_catalog_problems(catalogs: Path = CATALOGS) -> list[str]:
    """Every message template without an entry in ``checks/messages.po``, and every entry
    that is no message's (untranslated, fuzzy and placeholder problems are ``check``'s)."""
    path = catalogs / "checks" / f"{MESSAGES_DOMAIN}.po"
    ids = {m.id for m in read_catalog(path) if m.id} if path.exists() else set()
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    texts = message_templates()
    report = [
        f"{where}: {t[:70]!r}: missing (run hints, then translate)" for t in texts if t not in ids
    ]
    for text in sorted(ids - set(texts)):
        report.append(f"{where}: {text[:70]!r}: obsolete (no message says it): delete it")
    return report


def write_hint_templates(dest: Path) -> None:
    """One gettext template per hint catalog, ``dest/checks/<domain>.pot``, and the message
    catalog's, ``dest/checks/messages.pot``."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    (dest / "checks").mkdir(parents=True, exist_ok=True)
    catalog = Catalog(project="Attention, derived", domain=MESSAGES_DOMAIN)
    for text in message_templates():
        catalog.add(text, locations=[("autograder/checking/messages.py", 0)])
    with open(dest / "checks" / f"{MESSAGES_DOMAIN}.pot", "wb") as handle:
        write_po(handle, catalog, omit_header=False, no_location=True)
    for domain, texts in hint_domains():
        catalog = Catalog(project="Attention, derived", domain=domain)
        for text in texts:
            catalog.add(text, locations=[(f"autograder/chapters/{domain}.py", 0)])
        with open(dest / "checks" / f"{domain}.pot", "wb") as handle:
            write_po(handle, catalog, omit_header=False, no_location=True)


def statistics(catalogs: Path = CATALOGS) -> dict[str, int]:
    counts = Counter()
    for path in sorted(catalogs.rglob("*.po")):
        for message in read_catalog(path):
            if not message.id:
                continue
            counts["messages"] += 1
            counts[
                "fuzzy" if message.fuzzy else "translated" if message.string else "untranslated"
            ] += 1
    return dict(counts)


def update() -> int:
    python = sys.executable
    if subprocess.call([python, str(ROOT / "tools" / "build_book.py"), "--builder", "gettext"]):
        return 1
    # the assignments' prose (autograder/checking/assignment_text.py): one template per source notebook
    sys.path.insert(0, str(ROOT))
    from autograder.checking.assignment_text import write_templates

    write_templates(ROOT / "_build" / "gettext" / "assignments", ROOT / "autograder" / "source")
    write_hint_templates(ROOT / "_build" / "gettext")
    intl = Path(python).with_name("sphinx-intl")
    return subprocess.call(
        [
            str(intl),
            "update",
            "-p",
            str(ROOT / "_build" / "gettext"),
            "-l",
            LANGUAGE,
            "-d",
            str(ROOT / "locale"),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("update", "hints", "check"))
    args = parser.parse_args(argv)
    if args.command == "update":
        return update()
    if args.command == "hints":  # the checks' hints alone: no book build needed
        templates = ROOT / "_build" / "gettext-hints"
        write_hint_templates(templates)
        intl = Path(sys.executable).with_name("sphinx-intl")
        return subprocess.call(
            [str(intl), "update", "-p", str(templates), "-l", LANGUAGE, "-d", str(ROOT / "locale")]
        )
    problems = check() + hint_problems() + message_catalog_problems()
    for line in problems:
        print(line)
    print(f"{statistics()}; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
