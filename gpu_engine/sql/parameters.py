"""Bind parameters: ``?`` and ``$n`` placeholders in SQL text take values at execute time.

Why: a report or dashboard runs one query with new constants, and a parameter is
a literal known at execute time. Each placeholder is replaced by the SQL literal
of its value (``?`` in order, ``$1`` by position) and the query is planned as if
written so; since generated kernels take constants as launch parameters
(:mod:`gpu_engine.codegen.kernel_parameters`), new values compile nothing.
Python values map to DuckDB's types for them: ``int`` to an integer, ``float``
to DOUBLE, ``decimal.Decimal`` to DECIMAL, ``str`` to VARCHAR, ``bool``,
``datetime.date`` to DATE, ``datetime.datetime`` to TIMESTAMP, ``None`` to NULL.
"""

from __future__ import annotations

import datetime
import decimal
import math
from dataclasses import dataclass
from typing import Any, Sequence

import sqlglot
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from gpu_engine.sql.errors import SqlError

__all__ = ["ParameterizedText", "PreparedQuery", "bind_parameters", "sql_literal"]


def sql_literal(value: Any, position: int) -> str:
    """Return SQL text for ``value`` as a literal (parameter ``position``, 1-based, names it in errors)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"CAST('{value!r}' AS DOUBLE)"
        text = repr(value)
        text = text if "e" in text else text + "e0"  # scientific notation: a DOUBLE, as DuckDB binds a float
        return text if value >= 0 else f"({text})"
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise SqlError(f"parameter ${position} is {value}, which has no DECIMAL value", name=f"${position}")
        text = format(value, "f")
        return text if value >= 0 else f"({text})"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            raise SqlError(f"parameter ${position} is a datetime with a time zone; pass a naive one",
                           name=f"${position}")
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    raise SqlError(f"parameter ${position} is a {type(value).__name__}; pass int, float, Decimal, str, bool, "
                   "date, datetime or None", name=f"${position}")


@dataclass(frozen=True)
class ParameterizedText:
    """SQL text with its placeholders found: ``(start, end, number)`` per placeholder, ``count`` parameters."""

    text: str
    placeholders: tuple[tuple[int, int, int], ...]
    count: int

    @classmethod
    def of(cls, text: str, dialect: str = "duckdb") -> "ParameterizedText":
        """Return ``text`` with its ``?`` (numbered in order) and ``$n`` placeholders located by the tokenizer."""
        try:
            tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(text)
        except SqlglotError as error:
            raise SqlError(f"cannot read the SQL text: {error}") from error
        found: list[tuple[int, int, int]] = []
        positional = numbered = 0
        for k, token in enumerate(tokens):
            if token.token_type == TokenType.PLACEHOLDER and token.text == "?":
                positional += 1
                found.append((token.start, token.end + 1, positional))
            elif token.token_type == TokenType.QDCOLON and token.text.startswith("?"):
                # ``?::DATE``: sqlglot reads ``?::`` as one operator token; the ``?`` is a placeholder, cast
                positional += 1
                found.append((token.start, token.start + 1, positional))
            elif token.token_type == TokenType.PARAMETER and k + 1 < len(tokens) and \
                    tokens[k + 1].token_type == TokenType.NUMBER and tokens[k + 1].start == token.end + 1:
                number = tokens[k + 1].text
                if not number.isdigit() or int(number) < 1:
                    raise SqlError(f"parameter ${number} must be numbered from 1", name=f"${number}")
                numbered = max(numbered, int(number))
                found.append((token.start, tokens[k + 1].end + 1, int(number)))
            elif token.token_type == TokenType.PLACEHOLDER and token.text.startswith("$") and token.text[1:].isdigit():
                numbered = max(numbered, int(token.text[1:]))
                found.append((token.start, token.end + 1, int(token.text[1:])))
        if positional and numbered:
            raise SqlError("a query takes ? or $n parameters, not both")
        return cls(text, tuple(found), positional or numbered)

    def bind(self, params: Sequence[Any] | None) -> str:
        """Return the text with each placeholder replaced by its parameter's SQL literal."""
        given = 0 if params is None else len(params)
        if params is not None and isinstance(params, (str, bytes, dict)):
            raise SqlError("params must be a list or tuple of values, one per placeholder")
        if given != self.count:
            raise SqlError(f"the query has {self.count} parameter(s), {given} value(s) were given")
        pieces, last = [], 0
        for start, end, number in self.placeholders:
            pieces += [self.text[last:start], " " + sql_literal(params[number - 1], number) + " "]
            last = end
        pieces.append(self.text[last:])
        return "".join(pieces)


def bind_parameters(text: str, params: Sequence[Any] | None, dialect: str = "duckdb") -> str:
    """Return ``text`` with its ``?``/``$n`` placeholders bound to ``params`` (the text itself when it has none)."""
    if params is None and "?" not in text and "$" not in text:
        return text  # no placeholder can be written without these: the text is not tokenized
    parsed = ParameterizedText.of(text, dialect)
    if not parsed.placeholders and params is None:
        return text
    return parsed.bind(params)


class PreparedQuery:
    """A SQL query read once, run many times with new parameter values (``Session.prepare``, ``SparkRunner.prepare``).

    The text is tokenized once; each :meth:`execute` binds the values and plans the bound text (a
    plan depends on the constants: types, pruning, statistics), and its generated kernels are the
    first run's, since they hold no constants.
    """

    def __init__(self, runner, text: str, dialect: str = "duckdb"):
        self.runner = runner
        self.dialect = dialect
        self.parsed = ParameterizedText.of(text, dialect)

    @property
    def parameter_count(self) -> int:
        """Return how many values :meth:`execute` takes."""
        return self.parsed.count

    def bound_text(self, params: Sequence[Any] = ()) -> str:
        """Return the SQL text with ``params`` bound (what :meth:`execute` runs)."""
        return self.parsed.bind(list(params))

    def execute(self, params: Sequence[Any] = (), **options):
        """Run the query with ``params`` (one per placeholder); ``options`` go to the runner's ``sql``
        (``timeout`` for a Session, ``tables`` and ``joins`` for a SparkRunner)."""
        return self.runner.sql(self.bound_text(params), dialect=self.dialect, **options)
