"""A NULL where the engine needs a constant (a NULL bind parameter) answers as DuckDB does.

Why: a LIKE / ILIKE / GLOB pattern, a SUBSTRING start or length and a LIMIT or OFFSET count had to be constants
of their type, so ``s LIKE ?``, ``substr(s, ?, 2)`` or ``LIMIT ?`` bound to ``None`` were refused ("the LIKE
pattern must be a string constant", "LIMIT other than an integer constant") where DuckDB answers: a NULL pattern
or position is NULL on every row, ``LIMIT NULL`` no limit and ``OFFSET NULL`` no offset. Found by fuzz round 5
(bench/fuzz_round5.py, families ``params`` and ``reexec``).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from duckdb_reference import rows_mismatch

T = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "s": pa.array(["ab", None, "", "%"], pa.string())})

QUERIES = [
    "SELECT id, s LIKE NULL AS a, s NOT LIKE NULL AS b, s ILIKE NULL AS c, s NOT ILIKE NULL AS d, "
    "s GLOB NULL AS g, s LIKE CAST(NULL AS VARCHAR) ESCAPE '!' AS e FROM t",
    "SELECT id FROM t WHERE s LIKE NULL OR id = 2",
    "SELECT id FROM t WHERE NOT (s NOT ILIKE CAST(NULL AS VARCHAR)) OR s IS NULL",
]


def test_a_null_pattern_is_null_as_duckdb(device_name):
    from gpu_engine import Session

    session = Session(device=device_name)
    session.register("t", T)
    connection = duckdb.connect()
    connection.register("t", T)
    for sql in QUERIES:
        assert rows_mismatch(session.sql(sql), connection.sql(sql).to_arrow_table()) is None, sql
    bound = "SELECT id, s LIKE ? AS x FROM t WHERE s ILIKE $1 IS NULL"
    assert rows_mismatch(session.sql(bound.replace("$1", "?"), params=[None, None]),
                         connection.sql(bound.replace("$1", "?"), params=[None, None]).to_arrow_table()) is None
    assert session.prepare("SELECT id FROM t WHERE s LIKE $1").execute([None]).num_rows == 0
    assert session.prepare("SELECT id FROM t WHERE s LIKE $1").execute(["%"]).num_rows == 3


def test_a_null_substring_position_or_row_count_is_as_duckdb(device_name):
    from gpu_engine import Session

    session = Session(device=device_name)
    session.register("t", T)
    connection = duckdb.connect()
    connection.register("t", T)
    for sql, params in [
        ("SELECT id, substr(s, ?, 2) AS a, substring(s, 1, ?) AS b, substr(s, ?) AS c FROM t", [None, None, None]),
        ("SELECT id FROM t ORDER BY id LIMIT ?", [None]),
        ("SELECT id FROM t ORDER BY id LIMIT $1 OFFSET $2", [None, 1]),
        ("SELECT id FROM t ORDER BY id LIMIT $1 OFFSET $2", [2, None]),
        ("SELECT id FROM t ORDER BY id DESC LIMIT NULL OFFSET 3", []),
    ]:
        got = session.sql(sql, params=params)
        assert rows_mismatch(got, connection.sql(sql, params=params).to_arrow_table(), ordered=True) is None, sql
