"""GROUP BY ALL and ORDER BY ALL (issue 30 item 6) against DuckDB.

GROUP BY ALL groups by every SELECT expression without an aggregate that reads a column (a constant is no key,
so over no rows the aggregate row still comes back, as in DuckDB); without such expressions it is a global
aggregate, without aggregates a DISTINCT. ORDER BY ALL sorts by every output column in order, with DESC and
NULLS FIRST/LAST applied to each. Checked with NULL keys, empty inputs and HAVING, on cpu and cuda-sim.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

TABLES = {
    "t": pa.table({
        "a": pa.array([1, 2, None, 2, 1, None], pa.int64()),
        "s": pa.array(["x", "y", None, "y", "z", None]),
        "d": pa.array([1.5, None, 2.0, 3.0, -1.0, 0.5]),
    }),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT a, count(*) AS n FROM t GROUP BY ALL ORDER BY ALL",
    "SELECT a + 1 AS x, s, sum(d) AS total FROM t GROUP BY ALL ORDER BY ALL NULLS FIRST",
    "SELECT a, s FROM t GROUP BY ALL",
    "SELECT count(*) AS n, sum(d) AS total FROM t GROUP BY ALL",
    "SELECT 1 AS one, a, sum(d) AS total FROM t GROUP BY ALL",
    "SELECT 1 AS one, count(*) AS n FROM e GROUP BY ALL",
    "SELECT 1 + 1 AS two, upper('x') AS u, count(*) AS n, max(d) AS m FROM e GROUP BY ALL",
    "SELECT a, count(*) AS n FROM e GROUP BY ALL",
    "SELECT a, s FROM t ORDER BY ALL DESC",
    "SELECT upper(s) AS u, count(*) AS n FROM t GROUP BY ALL HAVING count(*) > 1 ORDER BY ALL DESC NULLS LAST",
    "SELECT s, a FROM t ORDER BY ALL NULLS FIRST",
    "SELECT a, s FROM e GROUP BY ALL ORDER BY ALL",
    # over SELECT *: every column the star expands to (sorted and grouped by the first column alone before)
    "SELECT * FROM t ORDER BY ALL",
    "SELECT * FROM (SELECT a, s FROM t) x GROUP BY ALL ORDER BY ALL DESC",
    # after a set operation: every output column
    "SELECT a, s FROM t EXCEPT ALL SELECT a, 'x' FROM t ORDER BY ALL NULLS FIRST",
    "SELECT * FROM t UNION SELECT * FROM t ORDER BY ALL LIMIT 3",
]


@pytest.mark.parametrize("drivers", [1, 3])
def test_group_by_all_and_order_by_all_match_duckdb(device_name, drivers, reference):
    if device_name != "cpu" and drivers != 1:
        pytest.skip("the simulator runs one driver count (it is an interpreter)")
    session = session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=4)
    queries = QUERIES if device_name == "cpu" else QUERIES[:2] + QUERIES[5:6]
    assert_queries_match_duckdb(session, reference, queries, ordered=lambda sql: "ORDER BY" in sql)
