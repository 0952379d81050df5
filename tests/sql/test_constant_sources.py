"""SELECT without FROM and VALUES lists (issue 30 item 7) against DuckDB.

A SELECT without FROM reads a one-row Values node (its expressions run in the Project above it); a VALUES list of
literals is one Values node holding its rows, one with computed cells a UNION ALL of one-row SELECTs (see
gpu_engine/sql/values_lists.py). Checked: DuckDB's output names (``1``, ``'a'``, ``col0``…), its types (literal
types, VALUES columns unified to the max type, a column of only NULLs), WHERE/GROUP BY/aggregates/ORDER BY over
them, joins of a VALUES list to a table, subqueries without FROM, empty results, and the refusals (rows of
different lengths, ``SELECT *`` without FROM, columns without a common type) with their positions.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import ValuesNode, walk_plan

TABLES = {
    "t": pa.table({"a": pa.array([1, 2, None, 2], pa.int64()), "b": pa.array(["x", "y", None, "y"])}),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT 1",
    "SELECT 1 + 2 AS x, 'a', 2.50, 12345678901, true AS yes, DATE '2020-01-02'",
    "SELECT upper('ab') AS u, 2.5 * 2 AS d, length('abc') AS n",
    "SELECT NULL AS c",
    "SELECT NULL, 1 AS one",
    "SELECT CAST(NULL AS VARCHAR) AS s",
    "SELECT count(*) AS n",
    "SELECT 1 AS a WHERE false",
    "SELECT sum(x) AS s, count(*) AS n FROM (SELECT 1 AS x) v WHERE 1 = 1",
    "SELECT 1 AS a ORDER BY a LIMIT 0",
    "SELECT (SELECT 1) AS x",
    "SELECT a FROM t WHERE a IN (SELECT 2)",
    "SELECT a FROM t WHERE a = (SELECT 1)",
    "SELECT a FROM t WHERE EXISTS (SELECT 1)",
    "SELECT a FROM e WHERE EXISTS (SELECT 1)",
    "SELECT * FROM (VALUES (1, 'a'), (2, NULL)) AS v(x, y)",
    "SELECT * FROM (VALUES (1), (2.5)) v(x)",
    "SELECT * FROM (VALUES (1), (3000000000)) v(x)",
    "SELECT * FROM (VALUES (1, 2), (1.5e0, 3))",
    "SELECT * FROM (VALUES (NULL, 1), (NULL, NULL)) v(x, y)",
    "SELECT * FROM (VALUES (1, 2)) v(x)",
    "SELECT * FROM (VALUES (DATE '2020-01-01'), (NULL)) v(d)",
    "SELECT * FROM (VALUES (1 + 1, upper('a')), (3, 'b')) v(x, y)",
    "VALUES (1, 'a'), (3, 'b')",
    "SELECT x, count(*) AS n FROM (VALUES (1), (1), (NULL)) v(x) GROUP BY x",
    "SELECT x * 2 AS y FROM (VALUES (1), (2), (3)) v(x) WHERE x > 1 ORDER BY y DESC",
    "SELECT a, y FROM t JOIN (VALUES (1, 'one'), (2, 'two')) v(k, y) ON t.a = v.k",
    "SELECT a, y FROM t LEFT JOIN (VALUES (2, 'two')) v(k, y) ON t.a = v.k",
    "SELECT a, y FROM e JOIN (VALUES (1, 'one')) v(k, y) ON e.a = v.k",
    "SELECT b FROM t WHERE b IN (SELECT s FROM (VALUES ('y'), (NULL)) v(s))",
    "SELECT 1 AS x UNION ALL SELECT 2 UNION ALL SELECT NULL",
    "SELECT NULL AS x UNION ALL SELECT 'a'",
    "SELECT a FROM t WHERE a IN (VALUES (1), (2))",
    "SELECT a FROM t WHERE a NOT IN (VALUES (1), (NULL))",
    "VALUES (1), (2), (3) ORDER BY col0 DESC LIMIT 2 OFFSET 1",
    "SELECT (VALUES (1)) AS x",
    "WITH v(x) AS (VALUES (1), (2)) SELECT x + 1 AS y FROM v",
    "SELECT 1 AS k UNION ALL VALUES (2)",
    "SELECT (SELECT 1)",
    "SELECT a, (SELECT a + 1) AS b FROM t",
    "SELECT (SELECT 1) + 1 AS x, (SELECT count(*)) AS n, (SELECT NULL) AS z",
    "SELECT a FROM t WHERE a > (SELECT a - 1) + 0",
    "SELECT sum((SELECT a * 2)) AS s FROM t",
]

SIMULATED = [QUERIES[1], QUERIES[4], QUERIES[15], QUERIES[22], QUERIES[26]]


def _session(device_name: str, drivers: int = 1, batch_rows: int = 1 << 16):
    return session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=batch_rows)


def _check_all(queries, session, reference):
    assert_queries_match_duckdb(session, reference, queries, ordered=lambda sql: "ORDER BY" in sql, exact_types=True)


@pytest.mark.parametrize("drivers, batch_rows", [(1, 1 << 16), (3, 2)], ids=["drivers1", "drivers3-batches2"])
def test_constant_sources_match_duckdb_on_cpu(drivers, batch_rows, reference):
    _check_all(QUERIES, _session("cpu", drivers, batch_rows), reference)


def test_constant_sources_match_duckdb_on_each_device(device_name, reference):
    _check_all(SIMULATED, _session(device_name, 2, 3), reference)


def test_a_literal_values_list_is_one_values_node_holding_its_rows():
    from gpu_engine.sql import plan_sql

    plan = plan_sql("SELECT x FROM (VALUES (1), (2), (NULL)) v(x)", {})
    values = [n for n in walk_plan(plan) if isinstance(n, ValuesNode)]
    assert len(values) == 1 and values[0].data.column(0).to_pylist() == [1, 2, None]
    plan = plan_sql("SELECT 1 + 1 AS two", {})
    values = [n for n in walk_plan(plan) if isinstance(n, ValuesNode)]
    assert len(values) == 1 and values[0].data.num_rows == 1  # the expression runs in the Project above


@pytest.mark.parametrize("sql, message, column", [
    ("SELECT *", "SELECT * needs a FROM clause", 8),
    ("SELECT x FROM (VALUES (1), (2, 3)) v(x)", "the first row has 1 entry, this one 2 entries", 29),
    ("SELECT * FROM (VALUES ('a'), (1)) v(x)", "column 1 ('x') is string in an earlier row and int32 in row 2", 31),
])
def test_constant_sources_the_engine_cannot_plan_are_refused_with_their_position(sql, message, column):
    with pytest.raises(PlanError) as info:
        _session("cpu").sql(sql)
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)
