"""The SQL dialect a query is planned in, for the few typing rules where DuckDB's and Spark's differ.

Why: the expression translator follows DuckDB; where Spark types a form otherwise and the translator cannot
tell the dialect from the tree (planner passes rebuild nodes, so a mark on a node does not survive), it reads
the dialect :func:`gpu_engine.sql.plan_sql` plans in. Two rules read it: a date function of a NULL-typed column
(DuckDB refuses to choose an overload, Spark casts the NULL to a date;
:meth:`~gpu_engine.plans.scalar_translation.ScalarTranslator.date_operand`), and a text column compared for
equality with a number (DuckDB casts the text and raises for text that is no number; Spark casts it its own
way, NULL for such text, a DOUBLE beside a DECIMAL: refused there, as before). Plans built with
:class:`~gpu_engine.plans.PlanBuilder` directly follow DuckDB.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

__all__ = ["planning_dialect", "planned_dialect"]

_DIALECT: contextvars.ContextVar[str] = contextvars.ContextVar("gpu_engine_sql_dialect", default="duckdb")


@contextlib.contextmanager
def planning_dialect(dialect: str) -> Iterator[None]:
    """Make ``dialect`` the one :func:`planned_dialect` returns while the block plans a query."""
    token = _DIALECT.set(dialect)
    try:
        yield
    finally:
        _DIALECT.reset(token)


def planned_dialect() -> str:
    """Return the dialect of the query being planned (``"duckdb"`` outside :func:`planning_dialect`)."""
    return _DIALECT.get()
