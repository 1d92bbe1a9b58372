"""The grader's judge: the contract's ``assess``, worded for a public or a hidden case, in the
submission's language. Trusted side only: none of this ships or enters the sandbox.

One judge decides everywhere (``contract.assess``: the student's checker, the in-kernel hidden
check of stock ``nbgrader autograde``, the sandboxed grader); a public case is worded by the
contract itself (``contract.judge``), so a message reads the same locally and in feedback. A
hidden case is worded here, with one of a fixed few texts: functions only of the check's
public description, the case's name and expected shape, and a classification of the failure
(the error class of ``contract.ERRORS``, the bad return, "a different number of outputs",
"another shape" with a diagnosis of five, "the outputs in another order", a known mistake of
the chapter's list or one derived from the reference, "another dtype", NaN or inf, "most" or
"some" of the entries wrong, "accuracy below the threshold"). A derived mistake's hint
(``autograder/checking/diagnosis.py``) is a fixed template filled with the check's argument
and output names and fixed labels ("√d", "+1"), never a number of the case, and it is named
only where every failing hidden case agrees (``contract.consistent``). A submission that holds
its hidden inputs can thus write into its feedback only which of those texts it gets, never a
number it chose (docs/threat-model.md, "Judging and feedback"). ``summary`` shows a check's failing hidden cases as the first one's message and
the others' names only.
"""

from __future__ import annotations

from autograder.checking import messages
from autograder.student import contract, frames
from autograder.student.contract import Case, Finding, Outcome, Spec, Verdict

#: the error codes a sandboxed run may report: the contract's classes, a full file (the
#: sandbox's output limit) and any other BaseException
ERROR_CODES = frozenset(contract.ERRORS + (frames.FILE_TOO_LARGE, "BaseException"))
#: the bad-return codes a sandboxed run may report
BAD_RETURNS = frozenset(contract.BAD_RETURNS)


def _share(params: dict) -> Finding:
    """ "most" or "some" of an array's entries, from the count the public finding holds."""
    return Finding("share.most" if 2 * params["count"] > params["size"] else "share.some", {})


def _values(params: dict) -> Finding:
    key = "hidden.values.scaled" if params["scaled"] else "hidden.values"
    bound = params["bound"][1]
    return Finding(
        key,
        {
            "output": params["output"],
            "share": _share(params),
            "atol": bound["atol"],
            "rtol": bound["rtol"],
        },
    )


def _keep(*names):
    """A hidden wording that keeps only the named parameters of the public finding."""
    return lambda params: {name: params[name] for name in names}


#: public message id -> (the hidden message id, or a function of the public parameters
#: giving (id, parameters); what it keeps of them). Only what is listed reaches a hidden text.
_HIDDEN = {
    "arity.one": ("hidden.arity.one", _keep()),
    "arity.many": ("hidden.arity.many", _keep("expected", "names")),
    "dtype.integer": ("hidden.dtype.integer", _keep("output")),
    "dtype.int": ("hidden.dtype.int", _keep("output")),
    "dtype.bool": ("hidden.dtype.bool", _keep("output")),
    "nonfinite": ("hidden.nonfinite", _keep("output", "what")),
    "nonfinite.at": ("hidden.nonfinite", _keep("output", "what")),
    "tokens.ndim.one": ("hidden.tokens.shape", _keep("rows")),
    "tokens.ndim.many": ("hidden.tokens.shape", _keep("rows")),
    "tokens.rows": ("hidden.tokens.shape", _keep("rows")),
    "tokens.dtype": ("hidden.tokens.dtype", _keep()),
    "accuracy.low": ("hidden.accuracy", _keep("threshold")),
}
for _key in ("shape.axis", "shape.axes", "shape.ndim.one", "shape.ndim.many"):
    _HIDDEN[_key] = ("hidden.shape", _keep("output", "shape", "because"))
for _key in ("mask", "mask.at"):
    _HIDDEN[_key] = ("hidden.mask", lambda p: {"output": p["output"], "share": _share(p)})
#: said as they are: no number in them (an error class, a bad return, a known mistake's hint)
UNCHANGED = {"not_implemented", "raised", "raised_import", "mistake", "order"} | {
    f"bad.{code}" for code in contract.BAD_RETURNS
}


def hidden_finding(finding: Finding) -> Finding:
    """A public finding's hidden wording (see the module's docstring)."""
    key, params = finding
    if key in UNCHANGED:
        return finding
    if key in ("values", "values.at"):
        return _values(params)
    if key == "tokens.differ":
        most = 2 * params["wrong"] > params["total"]
        return Finding("hidden.tokens.most" if most else "hidden.tokens.some", {})
    hidden_key, kept = _HIDDEN[key]  # a new public message needs its hidden wording here
    return Finding(hidden_key, kept(params))


def judge(
    spec: Spec,
    case: Case,
    outcome: Outcome,
    language: str = messages.ENGLISH,
    where: dict | None = None,
) -> Verdict:
    """The verdict on one case, public or hidden, worded in ``language``. ``where``: a public
    error's place (``module``, ``where``: texts in ``language`` that the grader made from the
    outcome's place and its own copy of the code); a hidden case's error gives its type alone."""
    catalog = messages.catalog(language)
    if not case.hidden:
        return contract.judge(spec, case, outcome, catalog, where)
    passed, finding, hint = contract.assess(spec, case, outcome)
    if passed:
        return Verdict(spec.name, case.name, True, True)
    text = contract.worded(catalog, case.name, hidden_finding(finding), hint)
    return Verdict(spec.name, case.name, True, False, text)


def run_cases(spec: Spec, fn, cases: list[Case], language: str = messages.ENGLISH):
    """``contract.run_cases`` with every case worded here (a public one as the checker words
    it, a hidden one with the fixed few texts): (verdicts, notes)."""

    return contract.run_cases(
        spec, fn, cases, messages.catalog(language), lambda s, c, o, _: judge(s, c, o, language)
    )


def hidden_shown(failed: list[Verdict], language: str = messages.ENGLISH) -> list[str]:
    """What every place shows of a check's failing hidden cases: the first one's message,
    then only the others' names ("case '<name>'")."""
    names = [messages.say(language, "case.name", case=v.case) for v in failed[1:]]
    return [failed[0].message] + names


def summary(
    name: str,
    failed: list[Verdict],
    total: int,
    hidden: bool,
    shown: int | None = None,
    language: str = messages.ENGLISH,
) -> str:
    """The head line and the failing cases (``failed``: their verdicts), as every place shows
    them. Public: the first ``shown`` in full (``contract.summary``). Hidden: the first in
    full and only the names of the others, so that a check's hidden feedback carries at most
    one bit per hidden case (which failed) and one classification."""
    catalog = messages.catalog(language)
    if not hidden:
        return contract.summary(name, [v.message for v in failed], total, shown, catalog)
    if not failed:
        return messages.say(language, "hidden.summary.passed", name=name, total=total)
    head = messages.say(
        language, "hidden.summary.failed", name=name, failed=len(failed), total=total
    )
    first, *others = hidden_shown(failed, language)
    listed = [first]
    if others:
        joined = catalog["list.separator"].join(others)
        listed.append(messages.say(language, "hidden.summary.others", cases=joined))
    return head + "\n" + "\n".join("  - " + line for line in listed)
