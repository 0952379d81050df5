"""GROUP BY keys, aggregate calls, ``grouping()`` arguments, OVER clauses and ORDER BY keys match by the
expression they are, not by the SQL text written: ``"A" + 1`` is the key ``a + 1``, ``(a + 1)`` is ``a + 1``,
``sum("B")`` is ``sum(b)`` (DuckDB's identifiers ignore case and quotes; parentheses are not part of the
expression). ``1 + a`` is not the key ``a + 1``: DuckDB's binder refuses it, and so does the planner.

The planner matched them by generated SQL text (``.sql()``), which told such forms apart and refused the query
("column t.a is not available here", "the argument of grouping() must be a grouping column"), or computed the
same aggregate or window twice; it now matches by :class:`~gpu_engine.sql.planning_context.TreeKey`.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.plans.nodes import AggregationNode, WindowNode
from gpu_engine.sql.errors import SqlError

TABLES = {"t": pa.table({"a": pa.array([1, 1, 2, None, 2], pa.int64()),
                         "b": pa.array([2, 3, None, 5, 7], pa.int64())})}

#: Each refused before (the key or the grouping() argument written apart from the GROUP BY's).
QUERIES = [
    'SELECT "A" + 1 AS k, count(*) AS c, sum(b) AS s FROM t GROUP BY a + 1',
    "SELECT a + 1 AS k, count(b) AS c FROM t GROUP BY (a + 1)",
    'SELECT a, grouping("A") AS g, sum(b) AS s FROM t GROUP BY ROLLUP (a)',
    'SELECT "A" * 2 AS k, sum(b) AS s FROM t GROUP BY CUBE (a * 2) HAVING sum("B") > 0 OR grouping(A * 2) = 1',
]


def test_keys_written_apart_match_as_in_duckdb(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name, compile_mode="lowest"),
                                    connection, queries)


def test_a_commuted_key_is_refused_as_in_duckdb():
    session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
    with pytest.raises(SqlError, match="column t.a is not available here"):
        session.sql("SELECT 1 + a AS k, count(*) AS c FROM t GROUP BY a + 1")


def _nodes(plan, kind):
    found, stack = [], [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            found.append(node)
        stack.extend(node.sources)
    return found


def test_an_aggregate_written_twice_apart_is_computed_once():
    session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
    plan = session.sql_plan('SELECT a, sum(b) AS s FROM t GROUP BY a ORDER BY (sum("B"))')
    assert [len(node.aggregates) for node in _nodes(plan, AggregationNode)] == [1]


def test_a_window_written_twice_apart_is_computed_once():
    session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
    plan = session.sql_plan('SELECT sum(b) OVER (PARTITION BY "A") AS w, sum(B) OVER (PARTITION BY a) AS v FROM t')
    assert [len(node.functions) for node in _nodes(plan, WindowNode)] == [1]
