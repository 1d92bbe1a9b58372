"""Author-year labels for the bibliography, to match the author-year citations in the text.

pybtex ships only numeric ("[1]") and alpha ("[Vas+17]") labels; this registers a label
style that writes "Vaswani et al. 2017" and a formatting style "author_year" that uses it
(sorted by author, year, title as "plain" is). Select it with ``bibtex_default_style``.
"""

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle


def _surname(person):
    return (
        " ".join(person.prelast_names + person.last_names)
        .replace("{", "")
        .replace("}", "")
    )


class AuthorYearLabelStyle(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            if len(people) == 1:
                names = _surname(people[0])
            elif len(people) == 2:
                names = f"{_surname(people[0])} and {_surname(people[1])}"
            else:
                names = f"{_surname(people[0])} et al."
            yield f"{names} {entry.fields.get('year', '')}".strip()


class AuthorYearStyle(PlainStyle):
    default_label_style = "author_year"


register_plugin("pybtex.style.labels", "author_year", AuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
