"""Say where in the SQL text a query went wrong: line, column, the unknown name and close candidates."""

from __future__ import annotations

import difflib
from typing import Iterable

from sqlglot import exp

from gpu_engine.errors import PlanError

__all__ = ["SqlError", "position_of", "did_you_mean"]


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
    """Return the (line, column) sqlglot recorded for the first token of ``tree``, or (None, None)."""
    if tree is None:
        return None, None
    for node in tree.walk():
        meta = getattr(node, "_meta", None) or {}
        if "line" in meta:
            start = max(1, meta["col"] - (meta.get("end", 0) - meta.get("start", 0)))
            return meta["line"], start
    return None, None


def did_you_mean(name: str, choices: Iterable[str]) -> list[str]:
    """Return up to three names from ``choices`` close to ``name`` (difflib's ratio, as Python's own hints)."""
    return difflib.get_close_matches(name, sorted(set(choices)), n=3, cutoff=0.6)
