"""Author-year labels for the bibliography, to match the author-year citations in the text.

pybtex ships only numeric ("[1]") and alpha ("[Vas+17]") labels; this registers a label
style that writes "Vaswani et al. 2017" and a formatting style "author_year" that uses it
(sorted by author, year, title as "plain" is). Select it with ``bibtex_default_style``.

The Chinese edition writes 等 where the English writes "et al." (Vaswani 等, 2017) and 和
where it writes "and" between two authors, in the citations of its prose and in the labels
of its bibliography: in a translated edition (``language`` not English) the citation style
``author_year`` and the bibliography style ``author_year`` become their ``_zh`` variants.
"""

from dataclasses import dataclass, field

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinxcontrib.bibtex.plugin import register_plugin as register_referencing_style
from sphinxcontrib.bibtex.style.referencing import PersonStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle

# language -> (the word for "et al.", the word between two authors)
OTHERS = {"en": (" et al.", " and "), "zh": (" 等", " 和 ")}


def _surname(person):
    return (
        " ".join(person.prelast_names + person.last_names)
        .replace("{", "")
        .replace("}", "")
    )


class AuthorYearLabelStyle(BaseLabelStyle):
    language = "en"

    def format_labels(self, sorted_entries):
        others, two = OTHERS[self.language]
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            if len(people) == 1:
                names = _surname(people[0])
            elif len(people) == 2:
                names = f"{_surname(people[0])}{two}{_surname(people[1])}"
            else:
                names = f"{_surname(people[0])}{others}"
            yield f"{names} {entry.fields.get('year', '')}".strip()


class ChineseAuthorYearLabelStyle(AuthorYearLabelStyle):
    language = "zh"


class AuthorYearStyle(PlainStyle):
    default_label_style = "author_year"


class ChineseAuthorYearStyle(PlainStyle):
    default_label_style = "author_year_zh"


@dataclass
class ChineseAuthorYearReferenceStyle(AuthorYearReferenceStyle):
    """sphinxcontrib-bibtex's author-year citations with 等 and 和 (Vaswani 等, 2017)."""

    person: PersonStyle = field(
        default_factory=lambda: PersonStyle(
            other=Text(OTHERS["zh"][0]), sep2=OTHERS["zh"][1], last_sep="、", sep="、"
        )
    )


register_plugin("pybtex.style.labels", "author_year", AuthorYearLabelStyle)
register_plugin("pybtex.style.labels", "author_year_zh", ChineseAuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)
register_plugin("pybtex.style.formatting", "author_year_zh", ChineseAuthorYearStyle)
register_referencing_style(
    "sphinxcontrib.bibtex.style.referencing",
    "author_year_zh",
    ChineseAuthorYearReferenceStyle,
)


def chinese_citations(app, config) -> None:
    """In the Chinese edition, cite with 等 and 和 (the styles' ``_zh`` variants)."""
    if not (config.language or "en").startswith("zh"):
        return
    if config.bibtex_reference_style == "author_year":
        config.bibtex_reference_style = "author_year_zh"
    if config.bibtex_default_style == "author_year":
        config.bibtex_default_style = "author_year_zh"


def setup(app):
    app.connect("config-inited", chinese_citations)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
