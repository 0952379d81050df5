"""Review probe (stop 49): GROUP BY over random narrow keys (the cpu table's direct index, 711f8fb), string keys
(the StringKeyTable hashing in its probe loop, 294ef8b) and the radix-partitioned aggregation (ce448ba, set on)
against DuckDB.

Random tables of 1-4 narrow keys (int8/16/32, uint8/16/32, date32, bool; NULLs; values whose later rows leave the
first batch's range below, above, beyond twice the range, negative int32 / date values, uint32 over 2^31), string
keys (empty, NULL, 1-40 bytes, shared prefixes), mixed narrow + wide keys; counts, sums, min/max, count(DISTINCT),
HAVING, GROUPING SETS; drivers 1-3, batch rows 1..4096, an empty table, a radix Session each round.

    .venv/bin/python -m bench.review_stop49_grouping [cpu|cuda-sim] [--cases N] [--seed S] [--threads T]
    .venv/bin/python -m bench.review_stop49_grouping cpu --kernel N   # the table alone vs first-appearance ids
    .venv/bin/python -m bench.review_stop49_grouping cpu --radix N    # the radix path forced on, vs DuckDB

``--threads T``: T threads draw at once, all on one Session (3 drivers, 3-row batches), each its own table.
"""
from __future__ import annotations

import argparse
import datetime
import random
import sys
import threading

import duckdb
import pyarrow as pa

from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session

NARROW = [pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32(), pa.date32(), pa.bool_()]
LIMITS = {pa.int8(): (-128, 127), pa.int16(): (-32768, 32767), pa.int32(): (-2**31, 2**31 - 1),
          pa.uint8(): (0, 255), pa.uint16(): (0, 65535), pa.uint32(): (0, 2**32 - 1)}


def _column(r: random.Random, kind: pa.DataType, n: int):
    null_rate = r.choice([0, 0, 0.1, 0.5])
    if kind == pa.bool_():
        return pa.array([None if r.random() < null_rate else r.random() < 0.5 for _ in range(n)], kind)
    if kind == pa.string():
        lengths = [1, 2, 7, 8, 9, 16, 17, 33]
        pool = [""] + ["".join(r.choice("ab") for _ in range(r.choice(lengths))) for _ in range(r.choice([2, 5, 30]))]
        return pa.array([None if r.random() < null_rate else r.choice(pool) for _ in range(n)], kind)
    lo, hi = LIMITS.get(kind, (-30000, 30000))
    base = r.randint(lo, hi)
    width = r.choice([1, 3, 10, 100, 300])
    values = []
    for i in range(n):
        if r.random() < null_rate:
            values.append(None)
            continue
        if i > n // 3 and r.random() < 0.2:  # later rows leave the first batch's range
            v = base + r.choice([-1, -width, width, 2 * width + 1, 5 * width, 200000])
        else:
            v = base + r.randrange(width)
        values.append(min(max(v, lo), hi))
    if kind == pa.date32():
        return pa.array([None if v is None else datetime.date(1970, 1, 1) + datetime.timedelta(days=v)
                         for v in values], kind)
    return pa.array(values, kind)


def _table(r: random.Random, n: int):
    keys = [r.choice(NARROW + [pa.string(), pa.int64()] if r.random() < 0.3 else NARROW)
            for _ in range(r.choice([1, 1, 2, 2, 3, 4, 5]))]
    columns = {f"k{i}": _column(r, kind, n) for i, kind in enumerate(keys)}
    columns["v"] = pa.array([None if r.random() < 0.1 else r.randint(-50, 50) for _ in range(n)], pa.int64())
    return pa.table(columns), len(keys)


def _queries(r: random.Random, nkeys: int):
    keys = [f"k{i}" for i in range(nkeys)]
    chosen = r.sample(keys, r.randint(1, nkeys))
    g = ", ".join(chosen)
    yield f"SELECT {g}, count(*), sum(v), min(v), max(v) FROM t GROUP BY {g}"
    yield f"SELECT {g}, count(v) c FROM t GROUP BY {g} HAVING count(*) > 1"
    yield f"SELECT count(DISTINCT ({g})) FROM t" if len(chosen) > 1 else f"SELECT count(DISTINCT {g}) FROM t"
    yield f"SELECT DISTINCT {g} FROM t"
    if len(chosen) >= 2:
        yield f"SELECT {g}, sum(v) FROM t GROUP BY GROUPING SETS (({chosen[0]}), ({g}), ())"
    yield f"SELECT {chosen[0]}, count(DISTINCT v), sum(DISTINCT v) FROM t GROUP BY {chosen[0]}"


def kernel_fuzz(device_name: str, tables: int, seed: int) -> int:
    """The GroupByHashTable alone: random narrow key batches (the direct index, its growth, its exit mid-batch,
    resets, lookups) against tests/kernels/test_group_by.ReferenceGroups' first-appearance ids."""
    import numpy as np

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests" / "kernels"))
    from test_group_by import ReferenceGroups, columns_of, key_of
    from gpu_engine.device import get_device
    from gpu_engine.kernels.group_by import GroupByHashTable, normalize_keys

    device = get_device(device_name)
    r = random.Random(seed)
    bad = 0
    for case in range(tables):
        kinds = [r.choice(NARROW) for _ in range(r.choice([1, 2, 3, 4, 5]))]
        table = reference = None
        for step in range(r.randint(1, 5)):
            n = r.choice([1, 3, 50, 400, 3000])
            arrays = [_column(r, kind, n) for kind in kinds]
            keys, widths = normalize_keys(device, columns_of(device, *arrays), narrow=True)
            if table is None:
                table = GroupByHashTable(device, widths, initial_capacity=r.choice([16, 1024]))
                reference = ReferenceGroups()
            rows = list(zip(*(a.to_pylist() for a in arrays)))
            if r.random() < 0.15:
                got = device.to_host(table.lookup(keys))
                expected = [reference.ids.get(tuple(key_of(v) for v in row), -1) for row in rows]
                ok = np.array_equal(got, expected)
            else:
                ids, new = table.insert(keys)
                expected_ids, expected_new = reference.insert(rows)
                ok = (np.array_equal(device.to_host(ids), expected_ids)
                      and np.array_equal(device.to_host(new), expected_new) and table.num_groups == len(reference.ids))
            if not ok:
                bad += 1
                print("BAD kernel case", case, "step", step, kinds, flush=True)
                break
            if r.random() < 0.1:
                table.reset()
                reference = ReferenceGroups()
    print(f"{device_name} kernel seed {seed}: {tables} tables, {bad} bad")
    return 1 if bad else 0


def radix_fuzz(device_name: str, tables: int, seed: int) -> int:
    """The radix-partitioned aggregation (ce448ba) forced on: partitions of a few KiB of table, a SINGLE step of
    raw rows from 100 estimated rows; random keys of about a group per row (ints with NULLs, strings, doubles with
    NaN / -0.0, decimals, dates) and aggregates vs DuckDB; a draw where the path did not run is counted apart."""
    import decimal

    import gpu_engine.operators.fused_aggregation as fused
    import gpu_engine.optimizer.partial_steps as partial_steps

    fused.RADIX_TABLE_BYTES = 4 << 10
    partial_steps.MIN_ESTIMATED_ROWS = 100
    r = random.Random(seed)
    con = duckdb.connect()
    bad = probes = ran = 0
    for case in range(tables):
        n = r.choice([0, 1, 150, 700, 2500])
        spread = r.choice([n + 1, 2 * n + 1, 10 * n + 1])
        base = [r.randrange(spread) for _ in range(n)]
        pool = {
            "i": pa.array([None if b % 11 == 3 else b for b in base], pa.int64()),
            "j": pa.array([b % 97 - 40 for b in base], pa.int32()),
            "s": pa.array([None if b % 13 == 5 else f"s{b % 50}" + "x" * (b % 20) for b in base], pa.string()),
            "f": pa.array([float("nan") if b % 17 == 2 else (-0.0 if b % 17 == 3 else b / 4) for b in base],
                          pa.float64()),
            "m": pa.array([decimal.Decimal(b % 300) / 100 for b in base], pa.decimal128(12, 2)),
            "d": pa.array([datetime.date(2000, 1, 1) + datetime.timedelta(days=b % 4000) for b in base], pa.date32()),
            "v": pa.array([None if r.random() < 0.1 else r.randint(-100, 100) for _ in base], pa.int64()),
        }
        table = pa.table(pool)
        keys = ["i"] + r.sample(["j", "s", "f", "m", "d"], r.choice([0, 0, 1, 2]))  # i: about a group a row
        r.shuffle(keys)
        g = ", ".join(keys)
        aggs = r.sample(["count(*)", "sum(v)", "min(v)", "max(s)", "avg(v)", "count(v)", "min(d)", "sum(m)"], 3)
        sql = f"SELECT {g}, {', '.join(aggs)} FROM t GROUP BY {g}"
        drivers = r.choice([1, 2, 3])
        session = Session(device=device_name, drivers=drivers, batch_rows=r.choice([7, 64, 1000]),
                          radix_aggregation_min_groups=1, compile_mode="inline")  # (the generated tier's path)
        session.register("t", table, split_rows=r.choice([50, 300, 4096]))
        con.register("t", table)
        probes += 1
        problem = duckdb_probe_problem(con, session, sql)
        stats = session.last_stats() if problem is None else None
        if stats is not None and any(o.runtime.get("radix_partitioned") for p in stats.pipelines
                                     for o in p.operators):
            ran += 1
        elif "--verbose" in sys.argv:
            print("not radix", n, spread, keys, drivers, flush=True)
        if problem:
            bad += 1
            print("BAD radix", case, sql, drivers, "\n   ", problem[:300], flush=True)
    print(f"{device_name} radix seed {seed}: {probes} probes, radix path ran in {ran}, {bad} bad")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--radix", type=int, default=0, help="run the radix-forced fuzz over this many tables")
    parser.add_argument("--kernel", type=int, default=0, help="run the table-only fuzz over this many tables")
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--cases", type=int, default=300, help="tables drawn (each several queries)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="draw from this many threads on one Session")
    args = parser.parse_args()
    if args.radix:
        return radix_fuzz(args.device, args.radix, args.seed)
    if args.kernel:
        return kernel_fuzz(args.device, args.kernel, args.seed)
    sessions = [Session(device=args.device, drivers=d, batch_rows=b) for d, b in ((1, 1), (2, 3), (3, 7), (2, 4096))]
    sessions.append(Session(device=args.device, drivers=2, batch_rows=5, radix_aggregation_min_groups=1))
    lock = threading.Lock()
    totals = {"probes": 0, "bad": 0}

    def worker(w: int) -> None:
        r = random.Random(args.seed if args.threads == 1 else args.seed * 1000 + w)
        con = duckdb.connect()
        name = f"t{w}"  # threads share the Sessions, each its own table
        for case in range(args.cases):
            n = r.choice([0, 1, 5, 20, 60, 200])
            table, nkeys = _table(r, n)
            con.register(name, table)
            session = sessions[1] if args.threads > 1 else sessions[case % len(sessions)]
            session.register(name, table, split_rows=r.choice([1, 2, 7, 50, 4096]))
            for sql in _queries(r, nkeys):
                sql = sql.replace("FROM t", f"FROM {name}")
                problem = duckdb_probe_problem(con, session, sql)
                with lock:
                    totals["probes"] += 1
                    if problem:
                        totals["bad"] += 1
                        print("BAD", w, case, sql, table.schema.types, "\n   ", problem[:300], flush=True)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    probes, bad = totals["probes"], totals["bad"]
    print(f"{args.device} seed {args.seed} threads {args.threads}: {probes} probes over {args.cases} tables a "
          f"thread, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
