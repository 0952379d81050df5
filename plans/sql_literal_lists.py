"""Long IN lists of literals travel from the SQL text to the plan as one node, not one node per value.

Why: a 100,000-value ``IN (...)`` list cost about 0.5 ms a value before it was
planned: sqlglot parsed it, qualified it and copied the whole tree several
times, the SQL planner rendered it back to text and PlanBuilder parsed it
again. :func:`lift_literal_lists` takes each list of more than
:data:`LIFT_THRESHOLD` plain literals (numbers, strings, NULLs, negated
numbers) out of the text before sqlglot sees it and puts one call
``__gpe_in_list(k)`` in its place, padded so every later character keeps its
offset and line (error positions stay right); the values are kept, as the
sqlglot literals the parser would have made, in a context variable that
:func:`lifted_values` reads when the IN is translated, where they are typed
exactly as a written list is.

Finding the lists: sqlglot's tokenizer, written in Python, took most of the
lifting's time on a 100,000-value list (one Python step a character). So a
text in the DuckDB dialect first goes through regular expressions: a list of
plain numbers, simple strings and NULLs after ``IN (`` is found by one
pattern, and a second one finds the text's strings, quoted names and comments
so that a list inside one of them is left alone. Texts with what those
patterns do not model (dollar quoting, backslashes, backticks) and lists with
other values (``1e5``, casts) go through the tokenizer as before. Both paths
make the same literals.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
from typing import Iterator

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

__all__ = ["LIFT_THRESHOLD", "LIFTED_FUNCTION", "lift_literal_lists", "lifted_lists", "lifted_values"]

LIFT_THRESHOLD = 64
LIFTED_FUNCTION = "__gpe_in_list"

_LISTS: contextvars.ContextVar[tuple[tuple[exp.Expression, ...], ...]] = contextvars.ContextVar(
    "gpu_engine_lifted_in_lists", default=())
_QUICK = re.compile(r"\bin\s*\(", re.IGNORECASE)


def _literal(tokens, k: int) -> tuple[exp.Expression | None, int]:
    """Return the literal starting at token ``k`` (as sqlglot's parser makes it) and the next index, or ``None``."""
    token = tokens[k]
    if token.token_type == TokenType.NUMBER:
        return exp.Literal.number(token.text), k + 1
    if token.token_type == TokenType.STRING:
        return exp.Literal.string(token.text), k + 1
    if token.token_type == TokenType.NULL:
        return exp.Null(), k + 1
    if token.token_type == TokenType.DASH and k + 1 < len(tokens) and tokens[k + 1].token_type == TokenType.NUMBER:
        return exp.Neg(this=exp.Literal.number(tokens[k + 1].text)), k + 2
    return None, k


def _list_at(tokens, k: int) -> tuple[list[exp.Expression], int] | None:
    """Return the literals of the list opening at token ``k`` (after ``IN (``) and its closing index, or ``None``."""
    values: list[exp.Expression] = []
    while k < len(tokens):
        value, k = _literal(tokens, k)
        if value is None or k >= len(tokens):
            return None
        values.append(value)
        if tokens[k].token_type == TokenType.R_PAREN:
            return values, k
        if tokens[k].token_type != TokenType.COMMA:
            return None
        k += 1
    return None


def _padded(call: str, span: str) -> str:
    """Return ``call`` padded to ``span``'s length, with ``span``'s line breaks kept (later lines keep their number)."""
    breaks = span[:len(call)].count("\n")
    rest = "".join(c if c == "\n" else " " for c in span[len(call):])
    return call + "\n" * breaks + rest.replace(" ", "", breaks)  # a value takes at least one character


_VALUE = r"(?:-?\d+(?:\.\d+)?|'(?:[^']|'')*'|null)(?![\w.])"
_PLAIN_LIST = re.compile(rf"\bin\s*\(\s*({_VALUE}(?:\s*,\s*{_VALUE}){{{LIFT_THRESHOLD},}})\s*\)", re.IGNORECASE)
_PLAIN_VALUE = re.compile(_VALUE, re.IGNORECASE)
#: What is not code in a DuckDB text: strings, quoted names, comments (an unclosed one runs to the end).
_NOT_CODE = re.compile(r"'(?:[^']|'')*(?:'|$)|\"(?:[^\"]|\"\")*(?:\"|$)|--[^\n]*|/\*.*?(?:\*/|$)", re.DOTALL)
_UNMODELLED = re.compile(r"[$\\`]")


def _plain_literal(text: str) -> exp.Expression:
    """Return the literal the tokenizer and :func:`_literal` make of one value :data:`_PLAIN_LIST` matched."""
    if text[0] == "'":
        return exp.Literal.string(text[1:-1].replace("''", "'"))
    if text[0] == "-":
        return exp.Neg(this=_unsigned_number(text[1:]))
    if text[0] in "nN":
        return exp.Null()
    return _unsigned_number(text)


def _unsigned_number(text: str) -> exp.Literal:
    """Return the literal of unsigned digits, as ``exp.Literal.number`` makes it without evaluating the text
    to look for a sign (half the cost of a 100,000-value list's literals)."""
    return exp.Literal(this=text, is_string=False)


def _lift_plain_lists(text: str) -> tuple[str, tuple[tuple[exp.Expression, ...], ...]] | None:
    """Lift the lists of plain values with regular expressions; None when the text needs the tokenizer."""
    if _UNMODELLED.search(text):
        return None
    not_code = [(m.start(), m.end()) for m in _NOT_CODE.finditer(text)]
    lists: list[tuple[exp.Expression, ...]] = []
    pieces, last, region = [], 0, 0
    for match in _PLAIN_LIST.finditer(text):
        while region < len(not_code) and not_code[region][1] <= match.start():
            region += 1
        if region < len(not_code) and not_code[region][0] <= match.start():
            continue  # inside a string, quoted name or comment: not a list at all
        start, end = match.span(1)
        values = tuple(_plain_literal(value.group()) for value in _PLAIN_VALUE.finditer(text, start, end))
        pieces += [text[last:start], _padded(f"{LIFTED_FUNCTION}({len(lists)})", text[start:end])]
        lists.append(values)
        last = end
        while region < len(not_code) and not_code[region][0] < end:  # the list's own strings
            region += 1
    if not lists:
        return None
    pieces.append(text[last:])
    return "".join(pieces), tuple(lists)


@functools.lru_cache(maxsize=4)  # the session's CTE split and the planner lift the same text: tokenized once
def lift_literal_lists(text: str, dialect: str = "duckdb") -> tuple[str, tuple[tuple[exp.Expression, ...], ...]]:
    """Return ``text`` with each IN list of over :data:`LIFT_THRESHOLD` literals replaced by one call, and the lists."""
    if not _QUICK.search(text) or text.count(",") < LIFT_THRESHOLD:
        return text, ()
    if dialect == "duckdb":
        lifted = _lift_plain_lists(text)
        if lifted is not None:
            return lifted
    return _lift_with_tokenizer(text, dialect)


def _lift_with_tokenizer(text: str, dialect: str) -> tuple[str, tuple[tuple[exp.Expression, ...], ...]]:
    """Lift the lists found by sqlglot's tokenizer (every dialect, every literal form :func:`_literal` reads)."""
    try:
        tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(text)
    except Exception:  # noqa: BLE001 - the parser reports the text's error with its position
        return text, ()
    lists: list[tuple[exp.Expression, ...]] = []
    pieces, last, k = [], 0, 0
    while k + 1 < len(tokens):
        if tokens[k].token_type == TokenType.IN and tokens[k + 1].token_type == TokenType.L_PAREN:
            found = _list_at(tokens, k + 2)
            if found is not None and len(found[0]) > LIFT_THRESHOLD:
                values, close = found
                start, end = tokens[k + 2].start, tokens[close - 1].end + 1
                pieces += [text[last:start], _padded(f"{LIFTED_FUNCTION}({len(lists)})", text[start:end])]
                lists.append(tuple(values))
                last, k = end, close + 1
                continue
        k += 1
    if not lists:
        return text, ()
    pieces.append(text[last:])
    return "".join(pieces), tuple(lists)


@contextlib.contextmanager
def lifted_lists(lists: tuple[tuple[exp.Expression, ...], ...]) -> Iterator[None]:
    """Make ``lists`` (from :func:`lift_literal_lists`) the ones :func:`lifted_values` reads while planning."""
    token = _LISTS.set(lists)
    try:
        yield
    finally:
        _LISTS.reset(token)


def lifted_values(expressions: list[exp.Expression]) -> list[exp.Expression]:
    """Return an IN's value trees, a lifted list's call replaced by its literals (others as given)."""
    if len(expressions) != 1 or not isinstance(expressions[0], exp.Anonymous) or \
            expressions[0].name.lower() != LIFTED_FUNCTION:
        return expressions
    lists, arguments = _LISTS.get(), expressions[0].expressions
    if len(arguments) != 1 or not arguments[0].name.isdigit() or int(arguments[0].name) >= len(lists):
        return expressions  # written by hand, not lifted: an unknown function to the translator
    return list(lists[int(arguments[0].name)])
