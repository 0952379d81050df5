"""A NULL LIKE / ILIKE / GLOB pattern (a NULL bind parameter, ``CAST(NULL AS VARCHAR)``) is NULL on every row.

Why: a pattern had to be a string constant, so ``s LIKE ?`` bound to ``None`` was refused ("the LIKE pattern must
be a string constant") where DuckDB answers NULL: the filter keeps no row, the projection is NULL. Found by fuzz
round 5 (bench/fuzz_round5.py, family ``params``).
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
