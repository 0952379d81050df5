"""Probes of stop 52's left wrong answers, crashes and refusals (leftovers7, stop 53) against DuckDB.

Each area's queries ran wrong, crashed or were refused before this stop's fixes; every session shape (drivers
1-3, 1-row / 2-row splits, the fused and the lowest tier) must now agree with DuckDB (both raising counts as
agreement). Co-moments whose single products pass the largest double to both signs are order-dependent in DuckDB
(-inf, +inf or the finite value by the rows' order), so the ``moments`` area accepts any of DuckDB's answers over
the rows' permutations; the engine's must be one of them, never NaN.

    .venv/bin/python -m bench.leftovers7_probes cpu
    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m bench.leftovers7_probes cuda-sim
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import math
import sys
import warnings

import duckdb
import pyarrow as pa

from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session

#: (y, x) rows whose co-moment is 0.9e308 but whose products from the mean are -1.98e308 and +2.52e308 (item 1)
COMOMENT_ROWS = [(1.5e308, 3.0)] * 3 + [(7.0, 5.0), (2.0, 1e-300)]
#: group 8 of tests/sql/test_moment_overflow.py: a constant y beside x of 1.7e308 and zeros (item 2)
MERGED = [(2.0, 1.7e308)] * 5 + [(2.0, 0.0)] * 2


def _session(device: str, tables: dict[str, pa.Table], drivers: int, split_rows: int | None, mode: str) -> Session:
    session = Session(device=device, drivers=drivers, compile_mode=mode)
    for name, table in tables.items():
        session.register(name, table, split_rows=split_rows)
    return session


def _connection(tables: dict[str, pa.Table]) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    for name, table in tables.items():
        connection.register(name, table)
    return connection


def _moment_answers(rows: list[tuple[float, float]], sql: str) -> set:
    """Return DuckDB's answers to ``sql`` over every order of ``rows`` (one thread: its Welford order)."""
    answers = set()
    for order in set(itertools.permutations(rows)):
        connection = _connection({"t": pa.table({"y": [r[0] for r in order], "x": [r[1] for r in order]})})
        connection.execute("SET threads = 1")
        answers.add(tuple(connection.sql(sql).fetchall()[0]))
    return answers


def _same_answer(got: tuple, answers: set) -> bool:
    def close(a, b):
        if a is None or b is None:
            return a is b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=1e-9)
    return any(all(close(a, b) for a, b in zip(got, answer)) for answer in answers)


def probe_moments(device: str, shapes) -> tuple[int, int]:
    queries = ["SELECT covar_pop(y, x) FROM t WHERE abs(x) < 1e300", "SELECT covar_pop(y, x) FROM t",
               "SELECT covar_samp(y, x), regr_slope(x, y) FROM t", "SELECT regr_sxy(y, x), corr(y, x) FROM t"]
    count = bad = 0
    for rows in (COMOMENT_ROWS, MERGED):
        table = pa.table({"y": [r[0] for r in rows], "x": [r[1] for r in rows]})
        for sql in queries:
            answers = _moment_answers(rows, sql)
            for drivers, split_rows, mode in shapes:
                got = tuple(_session(device, {"t": table}, drivers, split_rows, mode).sql(sql).to_pylist()[0].values())
                count += 1
                if not _same_answer(got, answers):
                    bad += 1
                    print(f"BAD moments {sql} drivers={drivers} split={split_rows} {mode}: {got} not in {answers}")
    return count, bad


def _tables() -> dict[str, pa.Table]:
    return {
        "s": pa.table({"id": pa.array(range(6), pa.int64()),
                       "s": pa.array(["1", "2", "01", " 3", None, "2.0"], pa.string())}),
        "a": pa.table({"s": pa.array(["abc", "2000-01-01", None], pa.string()), "i": pa.array([1, 2, 3], pa.int64())}),
        "b": pa.table({"d": pa.array([None, None], pa.date32()), "j": pa.array([1, 2], pa.int64())}),
        "b2": pa.table({"d": pa.array([datetime.date(2000, 1, 1), None], pa.date32()), "j": pa.array([1, 2], pa.int64())}),
        "c": pa.table({"d": pa.array([datetime.date(2001, 1, 1), None], pa.date32()),
                       "i": pa.array([1, None], pa.int32()), "f": pa.array([None, 2.5])}),
        "u": pa.table({"a": pa.array([1, 2], pa.timestamp("s")), "b": pa.array([1, 2], pa.timestamp("ms")),
                       "n": pa.array([1, None], pa.timestamp("ns"))}),
    }


#: items 3-6: IN lists, the NULL-only build, COALESCE's string constants, timestamp unit names
QUERIES = [
    "SELECT id, s IN ('1', 2) AS a, s IN (2, '03') AS b, s NOT IN ('1', 2.5) AS c FROM s WHERE id < 5",
    "SELECT id FROM s WHERE s IN ('01', 3) AND id < 5",
    "SELECT id, s IN ('1', '2') AS a, s IN ('1', 2) AS b FROM s",  # '2.0' -> INTEGER: both raise? (DuckDB decides)
    "SELECT i, j FROM a JOIN b ON a.s = b.d", "SELECT i, j FROM a LEFT JOIN b ON a.s = b.d",
    "SELECT i, j FROM b JOIN a ON a.s = b.d", "SELECT i, j FROM a RIGHT JOIN b ON a.s = b.d",
    "SELECT i, j FROM a JOIN b2 ON a.s = b2.d", "SELECT i, j FROM a LEFT JOIN b2 ON a.s = b2.d AND b2.j > 1",
    "SELECT coalesce(d, '2000-02-29') AS x, coalesce(i, '7.5') AS y, coalesce(i, NULL, '3') AS z, "
    "coalesce(f, '-0.25') AS w FROM c",
    "SELECT typeof(a) AS a, typeof(b) AS b, typeof(n) AS n, typeof(CAST(a AS TIMESTAMP_MS)) AS m FROM u",
    "SELECT CAST(n AS TIMESTAMP_S) AS x FROM u",
]


def probe_queries(device: str, shapes) -> tuple[int, int]:
    tables = _tables()
    connection = _connection(tables)
    count = bad = 0
    for drivers, split_rows, mode in shapes:
        session = _session(device, tables, drivers, split_rows, mode)
        for sql in QUERIES:
            count += 1
            problem = duckdb_probe_problem(connection, session, sql)
            if problem is not None:
                bad += 1
                print(f"BAD drivers={drivers} split={split_rows} {mode}: {sql}\n    {problem}")
    return count, bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device", choices=["cpu", "cuda-sim"])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)  # cuda-sim: NumPy scalars warn on the overflows probed
    shapes = list(itertools.product([1, 2, 3], [None, 1, 2], ["inline", "lowest"]))
    if args.device == "cuda-sim":
        shapes = [(1, None, "inline"), (1, None, "lowest"), (2, 1, "lowest"), (3, 2, "inline")]
    for area, probe in (("moments", probe_moments), ("queries", probe_queries)):
        count, bad = probe(args.device, shapes)
        print(f"{args.device} {area}: {count} probes, {bad} bad")
    return 0


if __name__ == "__main__":
    sys.exit(main())
