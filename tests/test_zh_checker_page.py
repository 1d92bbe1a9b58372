"""The page "Reading the checks' messages" (book/exercises/checker_messages.md and its Chinese
catalog) quotes each message as the checker prints it in the page's language: the English page
the English catalog's wording, the Chinese page the Chinese catalog's (the checks speak the
student's language, ``autograder/checking/messages.py``). A message reworded in either catalog
fails here until the page says it the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autograder.checking import messages
from autograder.student.contract import render

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "book" / "_ext")]
from tools import translations  # noqa: E402

PAGE = REPO / "book" / "exercises" / "checker_messages.md"
CATALOG = translations.CATALOGS / "book" / "exercises" / "checker_messages.po"


def examples(language: str) -> list[str]:
    """The messages the page quotes, worded by the catalog of ``language`` with the page's
    stand-ins (NAME, OUTPUT, the shapes and counts of its examples)."""
    catalog = messages.catalog(language)

    def say(key: str, **params) -> str:
        return render(catalog, key, **params)

    return [
        say("not_implemented", function="NAME"),
        say("bad.none"),
        say("arity.many", expected=2, names="OUTPUT, OUTPUT", got=1),
        say("order", names="OUTPUT, OUTPUT"),
        say(
            "shape.axes",
            output="OUTPUT",
            shape="(2, 3, 5)",
            axes=1,
            last=2,
            because=say("because", why=say("why.swapped")),
        ),
        say(
            "shape.ndim.many",
            output="OUTPUT",
            shape="(2, 3, 5)",
            got=2,
            ndim=3,
            because=say("because", why=say("why.missing")),
        ),
        say("nonfinite.at", output="OUTPUT", what="NaN", count=4, size=60, index="(1, 2)"),
        say(
            "values",
            output="OUTPUT",
            count=12,
            size=60,
            error="0.41",
            bound=say("bound", atol="1e-08", rtol="1e-05"),
        ),
        say("mistake", hint=say("diagnosis.transposed", arg="k")),
        say("dtype.bool", output="OUTPUT", dtype="int64"),
        say("raised", function="NAME", error="ValueError", where=""),
        say("hidden.summary.failed", name="NAME", failed=3, total=20),
        # a hidden case's wording, quoted in part: its values message and a derived kind
        say("hidden.values", output="OUTPUT", share=say("share.most"), atol="1", rtol="1").split(
            "（" if language != "en" else " ("
        )[0],
        say("diagnosis.kind.scale").split("；" if language != "en" else ";")[0],
    ]


def _page_texts(language: str) -> str:
    if language == "en":
        return PAGE.read_text(encoding="utf-8").replace("\n  ", " ").replace("\n", " ")
    return "\n".join(m.string for m in translations.read_catalog(CATALOG) if m.id)


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_the_page_quotes_every_message_as_the_checker_prints_it(language):
    text = _page_texts(language)
    missing = [e for e in examples(language) if f"“{e}" not in text]
    assert missing == [], missing


def test_the_page_says_the_messages_are_in_the_students_language():
    english = _page_texts("en")
    assert "in English in both editions" not in english
    assert "They speak your language" in english
    chinese = _page_texts("zh_CN")
    assert "都是英文的" not in chinese and "中文版的笔记本用中文打印" in chinese
