"""GROUP BY a constant (``GROUP BY 'x'``, a bound parameter, ``GROUP BY 1`` naming a constant): one group over
rows, none over no rows, as DuckDB answers (fuzz round 8 found it refused)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, assert_same_rows, duckdb_with_tables, session_with_tables

TABLES = {"t": pa.table({"k": pa.array([1, 2, None, 2], pa.int32()), "s": pa.array(["a", None, "b", "a"])})}

QUERIES = [
    "SELECT count(*) AS c FROM t GROUP BY 'x'",
    "SELECT count(*) AS c, sum(k) AS total FROM t WHERE k > 100 GROUP BY 'x'",  # no rows: no group
    "SELECT k, 'x' AS z, count(*) AS c FROM t GROUP BY k, 'x'",
    "SELECT NULL AS z, count(*) AS c FROM t GROUP BY 1",
    "SELECT 'x' AS z, count(s) AS c FROM t GROUP BY z",
    "SELECT 7 AS z, max(s) AS m FROM t WHERE k IS NULL GROUP BY 1",
]


def test_constant_keys_group_as_duckdb(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:2]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)


@pytest.mark.parametrize("sql, params", [
    ("SELECT ? AS a, count(*) AS c FROM t GROUP BY 1", [5]),
    ("SELECT ? AS a, count(*) AS c FROM t GROUP BY 1", [None]),
    ("SELECT ? AS a, count(*) AS c FROM t GROUP BY 1", ["x"]),
    ("SELECT ? AS a, count(*) AS c FROM t WHERE k > 100 GROUP BY 1", [3]),
])
def test_a_parameter_key_groups_as_duckdb(sql, params):
    session = session_with_tables(TABLES, device="cpu")
    connection = duckdb.connect()
    connection.register("t", TABLES["t"])
    assert_same_rows(session.sql(sql, params=params), connection.sql(sql, params=params).to_arrow_table())
