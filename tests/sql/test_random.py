"""``random()``: a DOUBLE per row from [0, 1), each call its own draw, each drawn value seen the same everywhere.

Why properties, not DuckDB's values: no two engines draw the same numbers. What DuckDB defines is checked: the
type (DOUBLE, as DuckDB's schema says), the range, one value per row (2,000 rows give 2,000 distinct values),
two calls in one query differ, and a value read twice is one value — a filter on a derived table's
``random()`` column keeps the rows it shows (the filter once moved below the projection and drew again), a
GROUP BY's min and max of one drawn column are ordered (the fused aggregation once inlined the column into each
aggregate), a filter over a join sees the join's projected draw. Empty tables give no rows.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.errors import PlanError

ROWS = 2000
T = pa.table({"k": pa.array([i % 7 if i % 11 else None for i in range(ROWS)], pa.int32()),
              "s": pa.array(["é" * (i % 3) for i in range(ROWS)])})
U = pa.table({"k": pa.array([1, 2, 3], pa.int32())})
EMPTY = T.slice(0, 0)

#: query -> what its one row must hold (each a fact of random(), never a value).
PROPERTIES = {
    "SELECT count(*) AS n, min(random()) >= 0 AS low, max(random()) < 1 AS high, count(DISTINCT random()) AS d "
    "FROM t": (ROWS, True, True, ROWS),
    "SELECT count(*) FROM (SELECT random() AS a, random() AS b FROM t) x WHERE a = b": (0,),
    "SELECT max(r) < 0.25, count(*) > 0 FROM (SELECT random() AS r FROM t) x WHERE r < 0.25": (True, True),
    "SELECT count(*) FROM (SELECT random() AS r FROM t) x WHERE r < 0.5 AND r >= 0.5": (0,),
    "SELECT count(*) FROM (SELECT r, r * 2 AS q FROM (SELECT random() AS r FROM t) x) y WHERE q <> r * 2": (0,),
    "SELECT count(*) FROM (SELECT min(r) AS a, max(r) AS b, avg(r) AS m FROM (SELECT k, random() AS r FROM t) x "
    "GROUP BY k) y WHERE a > b OR m < a OR m > b": (0,),
    "SELECT max(r) < 0.1 FROM (SELECT t.k, random() AS r FROM t JOIN u ON t.k = u.k) x WHERE r < 0.1": (True,),
    "SELECT count(*) FROM (SELECT s, random() AS r FROM t ORDER BY random() LIMIT 5) x": (5,),
    "SELECT count(*) FROM e WHERE random() < 2": (0,),
    "SELECT count(*) FROM (SELECT random() AS r FROM e) x": (0,),
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "u": U, "e": EMPTY}) as connection:
        yield connection


def _session(device_name):
    return session_with_tables({"t": T, "u": U, "e": EMPTY}, device=device_name, drivers=2, batch_rows=300)


@pytest.mark.parametrize("sql", list(PROPERTIES))
def test_random_properties_on_cpu(sql):
    rows = [tuple(row.values()) for row in _session("cpu").sql(sql).to_pylist()]
    assert rows == [PROPERTIES[sql]]


def test_random_properties_on_each_device(device_name):
    session = _session(device_name)
    for sql in list(PROPERTIES)[:4]:
        assert [tuple(row.values()) for row in session.sql(sql).to_pylist()] == [PROPERTIES[sql]], sql


def test_random_is_typed_and_named_as_duckdb(reference):
    sql = "SELECT random(), random() AS r, k FROM t WHERE random() < 2"
    actual, expected = _session("cpu").sql(sql), duckdb_table(reference, sql)
    assert actual.schema.names == expected.schema.names
    assert actual.schema.field(1).type == expected.schema.field(1).type == pa.float64()
    assert actual.num_rows == expected.num_rows == ROWS


def test_random_with_an_argument_is_refused():
    with pytest.raises(PlanError, match=r"(?s)rand.*argument.*line 1, column"):
        _session("cpu").sql("SELECT random(5) FROM t")
