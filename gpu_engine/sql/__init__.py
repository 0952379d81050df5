"""Plan SQL text into the engine's plan nodes: sqlglot parses and rewrites, our planner picks joins and operators.

``plan_sql(text, catalog, statistics=None, dialect="duckdb")`` is the one
entry point (``Session.sql_plan``, the CLI's ``sql`` command and Spark's SQL
runner call it): :func:`~gpu_engine.sql.rewrite.parse_and_qualify` resolves
names with sqlglot's optimizer, then :class:`~gpu_engine.sql.planner.QueryPlanner`
plans the qualified query (see its module docstring for what becomes which
node). Errors are :class:`~gpu_engine.sql.errors.SqlError` (a ``PlanError``)
with the line and column in the text.
"""

from __future__ import annotations

import logging
from typing import Mapping

import pyarrow as pa
from sqlglot.errors import SqlglotError

from gpu_engine.planning.window_filters import push_window_filters
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.sql_dialects import planning_dialect
from gpu_engine.plans.sql_literal_lists import lift_literal_lists, lifted_lists
from gpu_engine.sql.errors import SqlError
from gpu_engine.sql.nesting import too_deep
from gpu_engine.sql.duplicate_output_names import remember_shown_names, shown_names
from gpu_engine.sql.planner import QueryPlanner
from gpu_engine.sql.planning_gc import fewer_collections
from gpu_engine.sql.rewrite import parse_and_qualify
from gpu_engine.sql.statistics import ColumnStatistics, RegisteredStatistics, TableStatistics, table_statistics

__all__ = ["plan_sql", "check_dialect", "SQL_DIALECTS", "SqlError", "TableStatistics", "ColumnStatistics",
           "RegisteredStatistics", "table_statistics"]

# sqlglot logs what it cannot parse ("Falling back to parsing as a 'Command'") before the engine refuses it with a
# SqlError; without a handler of its own, Python prints them on stderr (an application's handlers still get them).
logging.getLogger("sqlglot").addHandler(logging.NullHandler())

#: The SQL dialects queries may be written in (sqlglot's names): DuckDB's (the default) and Spark SQL.
SQL_DIALECTS = ("duckdb", "spark")


def plan_sql(text: str, catalog: Mapping[str, pa.Schema], statistics: Mapping[str, TableStatistics] | None = None,
             dialect: str = "duckdb") -> PlanNode:
    """Return the plan of the SQL query ``text`` over the tables in ``catalog``.

    Parameters
    ----------
    text
        One SELECT query (CTEs, joins, subqueries, aggregation, ORDER BY/LIMIT).
    catalog
        Table name -> Arrow schema (``Session.catalog``).
    statistics
        Table name -> :class:`TableStatistics` for join ordering
        (:func:`table_statistics` makes them from a registered table); tables
        without any are assumed to be of equal, moderate size.
    dialect
        sqlglot's dialect name: ``"duckdb"`` (default) or ``"spark"``.

    Raises
    ------
    SqlError
        For syntax errors, unknown names and unsupported SQL, with the
        position in ``text``; also for a query nested deeper than
        :data:`~gpu_engine.plans.expressions.MAX_EXPRESSION_DEPTH` levels.
    ValueError, TypeError
        For a dialect other than those in :data:`SQL_DIALECTS`.
    """
    check_dialect(dialect)
    try:
        text, lists = lift_literal_lists(text, dialect)  # a long IN list is one node until it is translated
        # fewer_collections: planning makes and drops cyclic sqlglot trees by the hundred thousand nodes
        with lifted_lists(lists), planning_dialect(dialect), fewer_collections():
            query = parse_and_qualify(text, catalog, dialect)
            planned = QueryPlanner(catalog, statistics).plan(query)
            plan = push_window_filters(planned)
            if plan is not planned and shown_names(planned) is not None:  # two output columns of one name
                remember_shown_names(plan, list(shown_names(planned)))
            return plan
    except RecursionError:  # the nesting checks bound every pass; a pass they miss still must not leak this
        raise too_deep() from None
    except (KeyError, TypeError, AttributeError, IndexError, SqlglotError) as error:  # a construct no check names
        raise SqlError(f"cannot plan the query: {type(error).__name__} {error} (a construct the planner does not "
                       "handle; please report it with the query)") from error


def check_dialect(dialect) -> str:
    """Return ``dialect`` when it is one the engine plans (:data:`SQL_DIALECTS`), else raise naming them."""
    if not isinstance(dialect, str):
        raise TypeError(f"dialect must be a string, one of {', '.join(SQL_DIALECTS)}; got {dialect!r}")
    if dialect not in SQL_DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}; choose one of {', '.join(SQL_DIALECTS)}")
    return dialect
