"""Probes of stop 53's left result types, refusals and wrong answers (leftovers8, stop 54) against DuckDB.

Each area's queries were wrong, refused or differently typed before this stop's fixes; every session shape
(drivers 1-2, whole / 1-row / 3-row splits, the fused and the lowest tier) must now agree with DuckDB on rows
(both raising counts as agreement) and on each column's type (a NULL-typed column, the engine's marked INTEGER,
counts as DuckDB's NULL type).

    .venv/bin/python -m bench.leftovers8_probes cpu
    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m bench.leftovers8_probes cuda-sim
"""
from __future__ import annotations

import argparse
import itertools
import sys
from decimal import Decimal as D

import duckdb
import pyarrow as pa

from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session
from gpu_engine.plans.null_type import is_null_typed

INTEGERS = pa.table({
    "k": pa.array([1, 2, 3, 4], pa.int32()), "b": pa.array([True, False, None, True]),
    "i8": pa.array([1, None, -3, 100], pa.int8()), "i16": pa.array([1, None, 3, -300], pa.int16()),
    "i64": pa.array([-1, 2, None, -(2**63)], pa.int64()), "u8": pa.array([200, 3, None, 0], pa.uint8()),
    "u32": pa.array([1, 2**32 - 1, 3, None], pa.uint32()),
    "u64": pa.array([1, 2**63 + 5, None, 2**64 - 1], pa.uint64()), "v": pa.array([7, 2**63, 3, 2**64 - 2], pa.uint64()),
})
WIDE = pa.table({
    "n": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int32()),
    "w": pa.array([D("-12345678901234567890123.456"), D("0.5"), None, D("-0.500"), D("12345678901234567890123.500"),
                   D("99999999999999999999999999999999999.999"), D("-2.001")], pa.decimal128(38, 3)),
    "m": pa.array([D("99999999999999999999999999999999999.999"), D("-1"), D("3"), None, D("1.5"), D("0"),
                   D("-99999999999999999999999999999999999.999")], pa.decimal128(38, 3)),
})
NULLS = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "n": pa.nulls(3), "s": pa.array(["a", None, "c"])})
MOMENTS = pa.table({"g": pa.array([1, 1, 2, 2, 3, 4, 1], pa.int32()),
                    "x": pa.array([2.0, 4.0, None, 7.5, 1.0, None, -0.25]),
                    "i": pa.array([3, None, 5, 6, 1, None, 3], pa.int32())})
TIMES = pa.table({
    "k": pa.array([1, 2, 3], pa.int32()), "ts": pa.array([0, 1_700_000_000_123_456, None], pa.timestamp("us")),
    "d": pa.array([0, 19_000, None], pa.date32()), "s": ["2024-01-01 10:00:00.123456789", None, "1999-12-31"],
    "far": pa.array([0, 9_300_000_000_000_000, None], pa.timestamp("us")),
    "sfar": ["2263-01-01", None, "2000-01-01"], "x": pa.array([0.5, -2.5, None], pa.float64()),
})

AREAS = {
    "types": (INTEGERS, [
        "SELECT ifnull(i16, 1) AS a, coalesce(1, i16) AS c, coalesce(i8, 300, i16) AS d, coalesce(1, 2, i16) AS e, "
        "coalesce(u8, -1) AS f FROM t",
        "SELECT CASE WHEN b THEN i16 ELSE 1 END AS a, CASE WHEN b THEN u64 ELSE 300 END AS c, "
        "CASE WHEN b THEN u64 ELSE -3 END AS d, greatest(i16, 1) AS e, least(u64, -1) AS f FROM t",
        "SELECT coalesce(u64, i64) AS a, coalesce(u64, u32) AS c, CASE WHEN b THEN u64 ELSE i16 END AS d FROM t",
        "SELECT u64 AS x FROM t UNION ALL SELECT i64 FROM t",
        "SELECT u64 + i64 AS a, u64 * i8 AS c, u64 % i64 AS d, u64 // i8 AS e, i64 - u64 AS f, u64 // -1 AS g FROM t",
        "SELECT u64 % 7 AS a, u64 // 3 AS c, v - 1 AS d, abs(u64) AS e, sign(u64) AS f FROM t WHERE u64 > 0",
        "SELECT u64 + 1 FROM t", "SELECT u64 - v FROM t", "SELECT u64 % (k - k) FROM t",
    ]),
    "wide": (WIDE, [
        "SELECT n, sign(w) AS a, abs(w) AS c, floor(w) AS e, ceil(w) AS f, trunc(w) AS g, round(w) AS h, "
        "round(w, 1) AS i, round(w, -2) AS j, floor(-m) AS o, ceil(m) AS p FROM t",
        "SELECT n, greatest(w, 1) AS a, least(w, m) AS c, greatest(w, m, n) AS d FROM t",
    ]),
    "nulls": (NULLS, [
        "SELECT * FROM t", "SELECT count(n) AS c, max(n) AS m FROM t", "SELECT coalesce(n, k) AS a, n + 1 AS p FROM t",
        "SELECT k FROM t GROUP BY k, n", "SELECT x.k FROM t x JOIN t y ON x.n = y.s",
    ]),
    "moments": (MOMENTS, [
        "SELECT g, mean(x) AS a, sem(x) AS c, sem(i) AS d FROM t GROUP BY g",
        "SELECT sem(DISTINCT i) AS b, sem(x) FILTER (WHERE g > 1) AS e FROM t",
        "SELECT g, sem(x) OVER (ORDER BY g, x ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS b FROM t",
    ]),
    "times": (TIMES, [
        "SELECT k, CAST(ts AS TIMESTAMP_NS) AS a, CAST(d AS TIMESTAMP_NS) AS b, CAST(s AS TIMESTAMP_NS) AS c, "
        "TRY_CAST(far AS TIMESTAMP_NS) AS e, TRY_CAST(sfar AS TIMESTAMP_NS) AS f FROM t",
        "SELECT CAST(far AS TIMESTAMP_NS) FROM t", "SELECT CAST(sfar AS TIMESTAMP_NS) FROM t",
        "SELECT k, gamma(x) AS g, lgamma(x) AS l, gamma(k) AS h FROM t",
    ]),
}


def _type_problem(con, session, sql: str) -> str | None:
    try:
        expected = con.sql(sql).to_arrow_table().schema
        got = session.sql(sql).schema
    except Exception:  # noqa: BLE001 - raising is compared by duckdb_probe_problem
        return None
    got_types = [pa.null() if is_null_typed(f) else f.type for f in got]
    if [str(t) for t in got_types] != [str(f.type) for f in expected]:
        return f"types {got_types} where DuckDB gives {expected.types}"
    return None


def probe(device: str, shapes) -> tuple[int, int]:
    count = bad = 0
    for area, (table, queries) in AREAS.items():
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        con.register("t", table)
        for drivers, split_rows, mode in shapes:
            session = Session(device=device, drivers=drivers, compile_mode=mode)
            session.register("t", table, split_rows=split_rows)
            for sql in queries:
                count += 1
                problem = duckdb_probe_problem(con, session, sql) or _type_problem(con, session, sql)
                if problem:
                    bad += 1
                    print(f"BAD {area} drivers={drivers} split={split_rows} {mode}: {sql}\n    {problem}")
    return count, bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device", choices=["cpu", "cuda-sim", "cuda"])
    args = parser.parse_args(argv)
    shapes = list(itertools.product([1, 2], [None, 1, 3], ["inline", "lowest"]))
    if args.device == "cuda-sim":
        shapes = [(1, None, "inline"), (2, 1, "lowest")]
    count, bad = probe(args.device, shapes)
    print(f"{args.device}: {count - bad} of {count} probes agree with DuckDB (rows and types)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
