"""Say where in the SQL text a query went wrong: line, column, the unknown name and close candidates."""

from __future__ import annotations

import difflib
import re
from typing import Iterable

from sqlglot import exp
from sqlglot.errors import ParseError

from gpu_engine.errors import PlanError

__all__ = ["SqlError", "position_of", "did_you_mean", "parse_error_text", "unclosed_quote_position", "unsupported"]


class SqlError(PlanError):
    """A query that cannot be planned, with its position in the SQL text.

    Attributes
    ----------
    line, column_number
        1-based position of the offending token (None when unknown).
    name
        The unknown table or column, or the unsupported construct's SQL.
    candidates
        Close matches for an unknown name, best first.
    """

    def __init__(self, message: str, *, line: int | None = None, col: int | None = None,
                 name: str | None = None, candidates: Iterable[str] = ()):
        self.line = line
        self.column_number = col
        self.name = name
        self.candidates = tuple(candidates)
        text = message
        if self.candidates:
            text += "; did you mean " + " or ".join(self.candidates) + "?"
        if line is not None:
            text += f" (line {line}, column {col})"
        super().__init__(text)


def position_of(tree: exp.Expression | None) -> tuple[int | None, int | None]:
    """Return the (line, column) sqlglot recorded for the first token of ``tree``, or (None, None).

    sqlglot records positions on names, not on every node (``SELECT 1`` has none): a tree without one is
    placed at its nearest enclosing expression that has one.
    """
    while tree is not None:
        for node in tree.walk():
            meta = getattr(node, "_meta", None) or {}
            if "line" in meta:
                start = max(1, meta["col"] - (meta.get("end", 0) - meta.get("start", 0)))
                return meta["line"], start
        tree = tree.parent
    return None, None


def did_you_mean(name: str, choices: Iterable[str]) -> list[str]:
    """Return up to three names from ``choices`` close to ``name`` (difflib's ratio, as Python's own hints)."""
    return difflib.get_close_matches(name, sorted(set(choices)), n=3, cutoff=0.6)


_REQUIRED = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")
_ARITY = re.compile(r"The number of provided arguments \((\d+)\) is (greater|less) than the (?:maximum|minimum) "
                    r"number of supported arguments \((\d+)\)")
#: sqlglot's expression class -> the SQL that names it, for messages.
_SPELLING = {
    "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "EQ": "=", "NEQ": "<>", "Add": "+", "Sub": "-", "Mul": "*",
    "Div": "/", "Mod": "%", "DPipe": "||", "And": "AND", "Or": "OR", "Not": "NOT", "Neg": "-", "Is": "IS",
    "In": "IN", "Like": "LIKE", "ILike": "ILIKE", "Between": "BETWEEN", "Case": "CASE", "If": "CASE WHEN",
    "Cast": "CAST", "TryCast": "TRY_CAST", "Extract": "EXTRACT", "Interval": "INTERVAL", "Alias": "AS",
    "Where": "WHERE", "Group": "GROUP BY", "Order": "ORDER BY", "Having": "HAVING", "Limit": "LIMIT",
    "Offset": "OFFSET", "From": "FROM", "Join": "JOIN", "Select": "SELECT", "Ordered": "ORDER BY",
}
_PART = {"expression": "a right-hand operand", "expressions": "at least one item", "this": "an operand",
         "high": "an upper bound", "low": "a lower bound", "true": "a value after THEN", "to": "a type",
         "alias": "a name"}


_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+.*?>", re.DOTALL)


def parse_error_text(error: ParseError) -> str:
    """Return what sqlglot's parser expected, in SQL words rather than its class names (no position: the
    SqlError adds the line and column)."""
    first = error.errors[0] if error.errors else {}
    description = first.get("description") or str(error).splitlines()[0]
    description = _TOKEN.sub(lambda m: "the end of the text" if m.group(1) == "SENTINEL" else repr(m.group(2)),
                             description)  # "Expected table name but got <Token token_type: …>"
    highlight = first.get("highlight") or ""
    context = (first.get("start_context") or "")[-40:]
    if match := _REQUIRED.search(description):
        part, name = match.groups()
        subject = _SPELLING.get(name) or f"{name.lower()}(...)"
        return f"{subject} needs {_PART.get(part, part)} (after {(context + highlight).strip()!r})"
    if match := _ARITY.search(description):
        given, more, bound = match.groups()
        limit = "at most" if more == "greater" else "at least"
        called = re.findall(r"(\w+)\s*\(", first.get("start_context") or "")
        return f"{called[-1] if called else 'the function'}(...) takes {limit} {bound} argument(s), got {given}"
    if description.startswith("Expecting "):
        return f"expected {description.removeprefix('Expecting ')} after {(context + highlight).strip()!r}"
    if "Unexpected token" in description or "Invalid expression" in description:
        return f"unexpected {highlight!r} after {context.strip()!r}"
    return f"{description} (at {highlight!r})"


def unclosed_quote_position(text: str) -> tuple[int | None, int | None]:
    """Return the (line, column) of a quote ``text`` opens and never closes, or (None, None)."""
    quote, start = None, 0
    for i, char in enumerate(text):
        if quote is None and char in "'\"":
            quote, start = char, i
        elif char == quote:
            quote = None  # a doubled quote closes and reopens: still balanced
    if quote is None:
        return None, None
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


def unsupported(what: str, tree: exp.Expression | None) -> SqlError:
    """Return the error refusing ``what`` (a construct the planner does not plan) at ``tree``'s position."""
    line, col = position_of(tree)
    return SqlError(f"unsupported SQL: {what}", line=line, col=col,
                    name=tree.sql(dialect="duckdb")[:80] if tree is not None else None)
