"""Named windows, ``OVER w … WINDOW w AS (…)`` (issue 30 item 6), through Session.sql against DuckDB.

Checked: a window used by name by several functions, refined with a frame (``OVER (w ROWS …)``) and with an
ORDER BY, a definition built on an earlier one, several named windows, names in QUALIFY and over GROUP BY
results, NULL partition keys and ties, the empty table; output names are DuckDB's (the window spelled out).
DuckDB's errors (an unknown name, a redefinition, overriding PARTITION BY / ORDER BY, refining a window with a
frame, a name in ORDER BY or a subquery) are SqlErrors with their position.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.sql.errors import SqlError

TABLES = {
    "t": pa.table({
        "k": pa.array([1, 1, 2, None, 2, 1, None, 2], pa.int32()),
        "o": pa.array([3, 1, 2, 2, None, 1, 5, 2], pa.int64()),
        "v": pa.array([1.5, 2.0, None, 4.0, 5.0, 6.0, 7.0, -2.25], pa.float64()),
        "id": pa.array(range(8), pa.int64()),
    }),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT id, sum(v) OVER w AS s, rank() OVER w AS r, count(*) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) "
    "AS c FROM t WINDOW w AS (PARTITION BY k ORDER BY o, id)",
    "SELECT id, sum(v) OVER w2 AS s, max(o) OVER w1 AS m, row_number() OVER (w1 ORDER BY id) AS rn FROM t "
    "WINDOW w1 AS (PARTITION BY k), w2 AS (w1 ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
    "SELECT id, sum(v) OVER w, last_value(v) OVER w FROM t WINDOW w AS (ORDER BY id ROWS BETWEEN 1 PRECEDING AND "
    "1 FOLLOWING)",
    "SELECT k, sum(sum(v)) OVER W AS run FROM t GROUP BY k WINDOW w AS (ORDER BY k NULLS FIRST)",
    "SELECT id, k FROM t WINDOW w AS (PARTITION BY k ORDER BY id) QUALIFY row_number() OVER w = 1",
    "SELECT id, (SELECT count(*) OVER w FROM t AS x WHERE x.k = 1 WINDOW w AS (ORDER BY id) LIMIT 1) AS n, "
    "min(id) OVER w AS m FROM t "
    "WINDOW w AS (PARTITION BY k)",
    "SELECT k, rank() OVER w AS r FROM e WINDOW w AS (PARTITION BY k ORDER BY o)",
    "SELECT id, sum(v) OVER ( w ) AS s FROM t WINDOW w AS (PARTITION BY k ORDER BY o, id)",  # (w): no frame to copy
]


def test_named_windows_match_duckdb(device_name, reference):
    queries = QUERIES if device_name == "cpu" else QUERIES[:2]
    session = session_with_tables(TABLES, split_rows=3, device=device_name, drivers=2, batch_rows=3,
                                  fuse=False)  # no generated kernels to compile (CI time): SQL, not fusion
    assert_queries_match_duckdb(session, reference, queries)


def test_named_window_outputs_are_named_as_duckdb_spells_them(reference):
    sql = "SELECT sum(v) OVER (w ROWS 1 PRECEDING) FROM t WINDOW w AS (PARTITION BY k ORDER BY o)"
    names = session_with_tables(TABLES, device="cpu").sql(sql).column_names
    assert names == [d[0] for d in reference.execute(sql).description]


@pytest.mark.parametrize("sql, message", [
    ("SELECT sum(v) OVER x FROM t WINDOW w AS (ORDER BY o)", 'window "x" does not exist'),
    ("SELECT sum(v) OVER w FROM t", 'window "w" does not exist'),
    ("SELECT sum(v) OVER w FROM t WINDOW w AS (PARTITION BY k), W AS (ORDER BY o)", 'window "W" is already defined'),
    ("SELECT sum(v) OVER (w PARTITION BY o) FROM t WINDOW w AS (PARTITION BY k)",
     'cannot override PARTITION BY clause of window "w"'),
    ("SELECT sum(v) OVER (w ORDER BY id) FROM t WINDOW w AS (ORDER BY o)",
     'cannot override ORDER BY clause of window "w"'),
    ("SELECT sum(v) OVER w2 FROM t WINDOW w AS (ORDER BY o ROWS 1 PRECEDING), w2 AS (w PARTITION BY k)",
     'cannot copy window "w" because it has a frame clause'),
    ("SELECT sum(v) OVER w2 FROM t WINDOW w2 AS (w ORDER BY o), w AS (PARTITION BY k)", 'window "w" does not exist'),
    # parenthesized, a framed window is refined by nothing: DuckDB refuses it (OVER w copies it)
    ("SELECT sum(v) OVER ( w ) FROM t WINDOW w AS (ORDER BY o ROWS 1 PRECEDING)",
     'cannot copy window "w" because it has a frame clause'),
    ("SELECT sum(v) OVER w2 FROM t WINDOW w AS (ORDER BY o ROWS 1 PRECEDING), w2 AS (w)",
     'cannot copy window "w" because it has a frame clause'),
    ("SELECT id FROM t WINDOW w AS (ORDER BY o) ORDER BY sum(v) OVER w", 'window "w" does not exist'),
    ("SELECT (SELECT max(id) OVER w FROM t AS x LIMIT 1) FROM t WINDOW w AS (ORDER BY o)",
     'window "w" does not exist'),
])
def test_named_window_errors_are_duckdbs_with_their_position(sql, message, reference):
    with pytest.raises(Exception):
        reference.execute(sql)
    with pytest.raises(SqlError) as raised:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert message in str(raised.value) and raised.value.line == 1 and raised.value.column_number is not None
