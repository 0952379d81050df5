"""Value classes as classes (issue 28 item 7): NaN and -0.0, NULL join keys, empty inputs, through every operator.

DuckDB's rules, which the engine follows: NaN equals NaN (whatever its sign or payload) and sorts greatest,
after +inf, with NULLs placed by NULLS FIRST/LAST; -0.0 equals 0.0 and groups, joins and ties with it;
float32 alike. A NULL key matches nothing in any join type, ``x NOT IN (subquery with a NULL)`` keeps no
row, ``NULL NOT IN (empty)`` is TRUE, and NOT EXISTS keeps NULL-keyed rows. Empty tables, files whose row
groups include empty ones, and filters that leave nothing feed every operator: scan, filter, project,
aggregation with and without keys, joins with an empty build or probe side, ORDER BY, LIMIT, TopN, DISTINCT,
UNION [ALL], INTERSECT and EXCEPT.

Each query runs on the engine over Parquet files and in DuckDB over the same tables (read into Arrow:
DuckDB 2.0.1's Parquet reader yields NaNs that its comparisons and isnan() do not treat as NaN, see
tests/sql/fuzz_queries.py), on every device, at one and four drivers, with many batches and one, fused and
unfused (as the operator suite: the simulator and the unfused path at the chosen pairs of tests/conftest.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, rows_mismatch

_NAN = float("nan")
_NEGATIVE_NAN = float(np.array([0xFFF8000000000001], dtype=np.uint64).view(np.float64)[0])
_PAYLOAD_NAN = float(np.array([0x7FF0000000000123], dtype=np.uint64).view(np.float64)[0])
_X = [_NEGATIVE_NAN, -0.0, 0.0, None, 1.5, _NAN, float("inf"), float("-inf"), -0.0, 2.0, None, 0.0, _PAYLOAD_NAN,
      1.5]
_Y = [_NAN, 0.0, None, 1.5, -0.0, float("inf"), _NEGATIVE_NAN]

TABLES = {
    # f: float keys with every NaN/zero spelling, int/string keys with NULLs.
    "f": pa.table({
        "id": pa.array(range(len(_X)), pa.int64()),
        "x": pa.array(_X, pa.float64()),
        "x32": pa.array(_X, pa.float32()),
        "g": pa.array([1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3, None, 1], pa.int32()),
        "k": pa.array([1, None, 2, 3, None, 5, 1, 2, None, 7, 8, 1, 2, 3], pa.int64()),
        "s": pa.array(["a", None, "b", "", "a", None, "c", "b", "a", "", None, "z", "a", "b"]),
    }),
    "h": pa.table({
        "y": pa.array(_Y, pa.float64()),
        "y32": pa.array(_Y, pa.float32()),
        "hk": pa.array([1, None, 2, None, 9, 1, 3], pa.int64()),
        "hs": pa.array(["a", None, "", "b", None, "q", "a"]),
        "tag": pa.array(list("abcdefg")),
    }),
    # h without NULL keys (NOT IN keeps rows), and empty tables of both schemas.
    "hn": pa.table({"hk": pa.array([1, 2, 9], pa.int64()), "hs": pa.array(["a", "", "q"])}),
}
TABLES["e"] = TABLES["f"].slice(0, 0)
TABLES["he"] = TABLES["h"].slice(0, 0)

NAN_AND_ZERO = [
    "SELECT x, count(*) AS n FROM f GROUP BY x",
    "SELECT x32, count(*) AS n, sum(id) AS s FROM f GROUP BY x32",
    "SELECT x, g, count(*) AS n FROM f GROUP BY x, g",
    "SELECT s, x, min(id) AS m FROM f GROUP BY s, x",
    "SELECT g, min(x) AS mn, max(x) AS mx, min(x32) AS mn32, max(x32) AS mx32, count(x) AS c FROM f GROUP BY g",
    "SELECT min(x) AS mn, max(x) AS mx, min(x32) AS mn32, max(x32) AS mx32 FROM f",
    "SELECT max(x) AS mx FROM f WHERE x < 'inf'::DOUBLE OR x IS NULL",
    "SELECT DISTINCT x FROM f",
    "SELECT DISTINCT x32, s FROM f",
    "SELECT count(DISTINCT x) AS d, count(DISTINCT x32) AS d32 FROM f",
    "SELECT id, x FROM f ORDER BY x, id",
    "SELECT id, x FROM f ORDER BY x DESC, id",
    "SELECT id, x FROM f ORDER BY x NULLS FIRST, id DESC",
    "SELECT id, x32 FROM f ORDER BY x32 DESC NULLS LAST, id",
    "SELECT id, x FROM f ORDER BY x, id LIMIT 5",
    "SELECT id, x FROM f ORDER BY x DESC, id LIMIT 5",
    "SELECT id, x FROM f ORDER BY x DESC NULLS LAST, id LIMIT 4",
    "SELECT id, x32 FROM f ORDER BY x32 NULLS FIRST, id LIMIT 6 OFFSET 2",
    "SELECT id, tag FROM f JOIN h ON x = y",
    "SELECT id, tag FROM f JOIN h ON x32 = y32",
    "SELECT id, tag FROM f LEFT JOIN h ON x = y",
    "SELECT id, tag FROM f RIGHT JOIN h ON x = y",
    "SELECT id, tag FROM f FULL JOIN h ON x32 = y32",
    "SELECT id, tag FROM f JOIN h ON x = y AND s = hs",
    "SELECT id FROM f WHERE x IN (SELECT y FROM h)",
    "SELECT id FROM f WHERE x NOT IN (SELECT y FROM h WHERE y IS NOT NULL)",
    "SELECT id FROM f WHERE EXISTS (SELECT * FROM h WHERE y = x)",
    "SELECT id FROM f WHERE NOT EXISTS (SELECT * FROM h WHERE y32 = x32)",
    "SELECT id, x = 0 AS zero, x > 1 AS big, x = x AS self, x <> x AS other FROM f",
    "SELECT id FROM f WHERE x = -0.0",
    "SELECT id FROM f WHERE x32 > 1",
    "SELECT x FROM f UNION SELECT y FROM h",
    "SELECT x32, s FROM f UNION SELECT y32, hs FROM h",
    "SELECT x FROM f INTERSECT SELECT y FROM h",
    "SELECT x FROM f EXCEPT SELECT y FROM h",
]

NULL_JOIN_KEYS = [
    "SELECT id, tag FROM f JOIN h ON k = hk",
    "SELECT id, tag FROM f LEFT JOIN h ON k = hk",
    "SELECT id, tag FROM f RIGHT JOIN h ON k = hk",
    "SELECT id, tag FROM f FULL JOIN h ON k = hk",
    "SELECT id, tag FROM f JOIN h ON s = hs",
    "SELECT id, tag FROM f FULL JOIN h ON s = hs",
    "SELECT id, tag FROM f JOIN h ON k = hk AND s = hs",
    "SELECT id, tag FROM f LEFT JOIN h ON k = hk AND s = hs",
    "SELECT id, tag FROM f FULL JOIN h ON k = hk AND s = hs",
    "SELECT id, tag FROM f LEFT JOIN h ON k = hk AND tag <> 'a'",
    "SELECT id FROM f LEFT JOIN h ON k = hk WHERE hk IS NULL",
    "SELECT id FROM f WHERE k IN (SELECT hk FROM h)",
    "SELECT id FROM f WHERE k NOT IN (SELECT hk FROM h)",
    "SELECT id FROM f WHERE k NOT IN (SELECT hk FROM hn)",
    "SELECT id FROM f WHERE s NOT IN (SELECT hs FROM h)",
    "SELECT id FROM f WHERE s NOT IN (SELECT hs FROM hn)",
    "SELECT id FROM f WHERE k NOT IN (SELECT hk FROM he)",
    "SELECT id FROM f WHERE k NOT IN (SELECT hk FROM h WHERE 1 = 0)",
    "SELECT id FROM f WHERE EXISTS (SELECT * FROM h WHERE hk = k)",
    "SELECT id FROM f WHERE NOT EXISTS (SELECT * FROM h WHERE hk = k)",
    "SELECT id FROM f WHERE NOT EXISTS (SELECT * FROM h WHERE hs = s AND hk = k)",
    "SELECT k, count(*) AS n, count(hk) AS m FROM f LEFT JOIN h ON k = hk GROUP BY k",
    # A WHERE over an inner join that a later RIGHT or FULL join NULL-extends filters after that join, not in it.
    "SELECT f2.id, h.tag FROM f JOIN h ON f.k = h.hk RIGHT JOIN f AS f2 ON h.hk = f2.k WHERE h.tag <> 'a'",
    "SELECT f2.id, h.tag FROM f JOIN h ON f.s = h.hs FULL JOIN f AS f2 ON f.k = f2.k WHERE h.tag IS NULL OR f2.id > 9",
]

EMPTY_INPUTS = [
    "SELECT * FROM e",
    "SELECT id, x + 1 AS y FROM e WHERE x > 0",
    "SELECT count(*) AS n, count(x) AS c, sum(x) AS s, min(x) AS mn, max(s) AS mx, avg(id) AS a FROM e",
    "SELECT g, count(*) AS n, sum(x) AS s FROM e GROUP BY g",
    "SELECT DISTINCT s FROM e",
    "SELECT count(DISTINCT s) AS d FROM e",
    "SELECT id FROM e ORDER BY x",
    "SELECT id FROM e ORDER BY x DESC LIMIT 3",
    "SELECT id FROM e LIMIT 3",
    "SELECT id, tag FROM f JOIN he ON k = hk",
    "SELECT id, tag FROM e JOIN h ON k = hk",
    "SELECT id, tag FROM f LEFT JOIN he ON k = hk",
    "SELECT id, tag FROM e LEFT JOIN h ON k = hk",
    "SELECT id, tag FROM f RIGHT JOIN he ON k = hk",
    "SELECT id, tag FROM e RIGHT JOIN h ON k = hk",
    "SELECT id, tag FROM f FULL JOIN he ON x = y",
    "SELECT id, tag FROM e FULL JOIN h ON x = y",
    "SELECT id FROM f WHERE k IN (SELECT hk FROM he)",
    "SELECT id FROM f WHERE NOT EXISTS (SELECT * FROM he WHERE hk = k)",
    "SELECT id FROM e WHERE k NOT IN (SELECT hk FROM h)",
    "SELECT id FROM e UNION ALL SELECT id FROM f",
    "SELECT x FROM e UNION SELECT y FROM he",
    "SELECT x FROM f EXCEPT SELECT y FROM he",
    "SELECT x FROM e INTERSECT SELECT y FROM h",
    # Filters that leave nothing: empty batches reach the operators above them.
    "SELECT count(*) AS n, sum(x) AS s, max(x) AS mx FROM f WHERE id < 0",
    "SELECT g, count(*) AS n FROM f WHERE id < 0 GROUP BY g",
    "SELECT id, tag FROM f JOIN h ON k = hk WHERE id < 0",
    "SELECT id, tag FROM f LEFT JOIN (SELECT * FROM h WHERE hk > 100) AS hh ON k = hk",
    "SELECT id, x FROM f WHERE id < 0 ORDER BY x LIMIT 2",
    # r: the rows of f in a file whose row groups include empty ones.
    "SELECT g, count(*) AS n, min(x) AS mn FROM r GROUP BY g",
    "SELECT id, x FROM r ORDER BY x DESC, id LIMIT 5",
    "SELECT r.id, tag FROM r JOIN h ON r.x = h.y",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Write the tables as Parquet, several row groups each; ``r`` holds f with empty row groups among them."""
    folder = tmp_path_factory.mktemp("value_classes")
    paths = {}
    for name, table in TABLES.items():
        paths[name] = folder / f"{name}.parquet"
        pq.write_table(table, paths[name], row_group_size=4)
    f = TABLES["f"]
    paths["r"] = folder / "r.parquet"
    with pq.ParquetWriter(paths["r"], f.schema) as writer:
        for piece in (f.slice(0, 0), f.slice(0, 6), f.slice(0, 0), f.slice(6), f.slice(0, 0)):
            writer.write_table(piece)
    return paths


@pytest.fixture(scope="module")
def reference(files):
    with duckdb_with_tables({name: pq.read_table(path) for name, path in files.items()}) as connection:
        yield connection


@pytest.fixture(params=[1, 4], ids=["drivers1", "drivers4"])
def drivers(request) -> int:
    return request.param


@pytest.fixture(params=["small_batches", "large_batches"])
def batch_rows(request) -> str:
    return request.param


@pytest.fixture(params=[True, False], ids=["fused", "unfused"])
def fuse(request) -> bool:
    return request.param


def _check_all(queries, device_name, drivers, batch_rows, fuse, files, reference):
    from gpu_engine import Session

    if device_name == "cuda-sim":  # the simulator interprets every thread: every third query, each list's
        queries = queries[::3]      # operator groups (keys, aggregates, sorts, joins, semi joins) still sampled
    session = Session(device=device_name, drivers=drivers, batch_rows=3 if batch_rows == "small_batches" else 1 << 16,
                      fuse=fuse)
    for name, path in files.items():
        session.register(name, str(path))
    assert_queries_match_duckdb(session, reference, queries, ordered=lambda sql: "ORDER BY" in sql)


def test_nan_and_negative_zero_group_join_sort_and_aggregate_as_duckdb(device_name, drivers, batch_rows, fuse,
                                                                       files, reference):
    _check_all(NAN_AND_ZERO, device_name, drivers, batch_rows, fuse, files, reference)


def test_null_join_keys_match_nothing_in_every_join_type(device_name, drivers, batch_rows, fuse, files, reference):
    _check_all(NULL_JOIN_KEYS, device_name, drivers, batch_rows, fuse, files, reference)


def test_empty_tables_row_groups_and_batches_through_every_operator(device_name, drivers, batch_rows, fuse, files,
                                                                    reference):
    _check_all(EMPTY_INPUTS, device_name, drivers, batch_rows, fuse, files, reference)


SCALE_QUERIES = [
    "SELECT x, count(*) AS c, min(id) AS m FROM f GROUP BY x",
    "SELECT g, x, count(*) AS c FROM f GROUP BY g, x",
    "SELECT count(DISTINCT x) AS d FROM f",
    "SELECT g, min(x) AS a, max(x) AS b FROM f GROUP BY g",
    "SELECT count(*) AS c, sum(tag) AS s FROM f JOIN h ON x = y",
    "SELECT count(*) AS c FROM f LEFT JOIN h ON x = y",
    "SELECT id FROM f ORDER BY x DESC NULLS LAST, id LIMIT 50",
    "SELECT id, x FROM f ORDER BY x, id",
    "SELECT count(*) AS c FROM f WHERE x IN (SELECT y FROM h)",
    "SELECT count(*) AS c FROM f WHERE NOT EXISTS (SELECT * FROM h WHERE y = x)",
]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_nan_payloads_and_zero_signs_across_batches_drivers_and_table_growth(device_name, fuse):
    """Thousands of rows: NaNs of four bit patterns, both zeros, 200 other keys, so hash tables grow past the
    fused aggregation's first-batch sample and joins and exchanges partition by the canonical hash."""
    import duckdb

    from gpu_engine import Session

    rng = np.random.default_rng(5)
    rows = 6000 if device_name == "cpu" else 120  # the simulator interprets every thread
    pool = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf] + list(np.arange(200) / 4.0))
    bits = pool[rng.integers(0, len(pool), rows)].view(np.uint64).copy()
    nan = np.isnan(bits.view(np.float64))
    patterns = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFF4000000000ABC], np.uint64)
    bits[nan] = rng.choice(patterns, int(nan.sum()))
    zero = bits.view(np.float64) == 0
    bits[zero] = np.where(rng.random(int(zero.sum())) < 0.5, np.uint64(1 << 63), np.uint64(0))
    f = pa.table({"id": pa.array(np.arange(rows)), "x": pa.array(bits.view(np.float64), mask=rng.random(rows) < 0.05),
                  "g": pa.array(rng.integers(0, 7, rows))})
    h = pa.table({"y": pa.array(pool[rng.integers(0, len(pool), rows // 20)]), "tag": pa.array(np.arange(rows // 20))})
    reference = duckdb.connect()
    reference.register("f", f)
    reference.register("h", h)
    session = Session(device=device_name, drivers=4, batch_rows=rows // 12, fuse=fuse)
    session.register("f", f, split_rows=rows // 6)
    session.register("h", h, split_rows=rows // 60)
    problems = [f"{sql}\n  {problem}" for sql in SCALE_QUERIES
                if (problem := rows_mismatch(session.sql(sql), reference.sql(sql).to_arrow_table(),
                                             ordered="ORDER BY" in sql)) is not None]
    assert not problems, "\n".join(problems)
