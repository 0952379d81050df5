"""db-benchmark q6 (median by two keys) in one Session: the order-statistics selection's branch-free partition
("new") vs the three-way partition it replaced ("old", kept here verbatim), alternating in one process.

``python -m bench.branchless_select_ab ROWS ROUNDS [q6[,q3...]]``: one Session (cpu, 2 drivers, the table in
memory) and DuckDB (2 threads) in the same process. The side is switched by patching
``gpu_engine.kernels.order_statistics._select_ranks_cpu`` (the only caller of the selection); each round runs
both sides (order alternating) and DuckDB once. Process CPU (user+sys) and wall per run, the load beside;
answers of both sides checked equal to DuckDB's first (sorted, floats within 1e-9 relative). Also times the
selection kernel alone over ``ROWS`` doubles in 10,000 groups (what q6 selects at 10M rows).
"""
import os
import resource
import statistics
import sys
import time

import duckdb
import numpy as np
import pyarrow.parquet as pq
from numba import njit

from bench.dbbench import QUESTIONS, ensure_groupby
from gpu_engine import Session
from gpu_engine.codegen.background_compiles import background_compiler
import gpu_engine.kernels.order_statistics as ost

_INSERTION_ROWS = 16


@njit(nogil=True, cache=False)
def _old_select(words, rows, lo, hi, k):
    while hi - lo > _INSERTION_ROWS:
        mid = lo + (hi - lo) // 2
        a = words[lo]
        b = words[mid]
        c = words[hi - 1]
        if a < b:
            pivot = b if b < c else (c if a < c else a)
        else:
            pivot = a if a < c else (c if b < c else b)
        less = lo
        i = lo
        greater = hi
        while i < greater:
            word = words[i]
            if word < pivot:
                w = words[less]; words[less] = words[i]; words[i] = w
                r = rows[less]; rows[less] = rows[i]; rows[i] = r
                less += 1
                i += 1
            elif word > pivot:
                greater -= 1
                w = words[greater]; words[greater] = words[i]; words[i] = w
                r = rows[greater]; rows[greater] = rows[i]; rows[i] = r
            else:
                i += 1
        if k < less:
            hi = less
        elif k >= greater:
            lo = greater
        else:
            return
    for i in range(lo + 1, hi):
        word = words[i]
        row = rows[i]
        j = i - 1
        while j >= lo and words[j] > word:
            words[j + 1] = words[j]
            rows[j + 1] = rows[j]
            j -= 1
        words[j + 1] = word
        rows[j + 1] = row


@njit(nogil=True, cache=False)
def _old_select_ranks_cpu(starts, counts, first_ranks, second_ranks, bucket_words, bucket_rows, first_rows,
                          second_rows):
    for g in range(counts.shape[0]):
        n = counts[g]
        if n == 0:
            continue
        lo = starts[g]
        hi = lo + n
        first = lo + first_ranks[g]
        _old_select(bucket_words, bucket_rows, lo, hi, first)
        first_rows[g] = bucket_rows[first]
        second = lo + second_ranks[g]
        if second == first + 1:
            second = ost._least_at(bucket_words, first + 1, hi)
        elif second == first - 1:
            second = ost._greatest_at(bucket_words, lo, first)
        elif second > first:
            _old_select(bucket_words, bucket_rows, first + 1, hi, second)
        elif second < first:
            _old_select(bucket_words, bucket_rows, lo, first, second)
        second_rows[g] = bucket_rows[second]


SIDES = {"old": _old_select_ranks_cpu, "new": ost._select_ranks_cpu}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _kernel_alone(rows: int, rounds: int) -> None:
    """The selection alone: ``rows`` doubles (uniform, then 5 distinct values) in 10,000 groups, medians' ranks."""
    groups = 10_000
    rng = np.random.default_rng(1)
    for kind in ("uniform", "5 values"):
        group_ids = rng.integers(0, groups, rows).astype(np.int64)
        values = rng.random(rows) * 100 if kind == "uniform" else rng.integers(0, 5, rows).astype(np.float64)
        counts = np.bincount(group_ids, minlength=groups).astype(np.int64)
        starts = np.cumsum(counts) - counts
        words = np.empty(rows, np.uint64)
        at = np.empty(rows, np.int64)
        ost._bucket_values_by_group_cpu(group_ids, values.view(np.uint64), ost._FLOAT, starts, words, at)
        times = {name: [] for name in SIDES}
        picked = {}
        for i in range(rounds + 1):
            for name in (list(SIDES) if i % 2 == 0 else list(SIDES)[::-1]):
                w, r = words.copy(), at.copy()
                first, second = np.zeros(groups, np.int64), np.zeros(groups, np.int64)
                t0 = time.thread_time()
                SIDES[name](starts, counts, (counts - 1) // 2, counts // 2, w, r, first, second)
                if i:  # the first round compiles
                    times[name].append(time.thread_time() - t0)
                picked[name] = (values[first], values[second])
        assert all((a == b).all() for a, b in zip(picked["old"], picked["new"])), kind
        print(f"kernel alone, {rows:,} {kind} doubles, 10,000 groups: " + ", ".join(
            f"{n} {statistics.median(t) * 1e3:.1f} ms ({' '.join(f'{x * 1e3:.1f}' for x in t)})"
            for n, t in times.items()) + f"; load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    rows, rounds = int(float(sys.argv[1])), int(sys.argv[2])
    questions = sys.argv[3].split(",") if len(sys.argv) > 3 else ["q6"]
    _kernel_alone(rows, rounds)
    data = pq.read_table(ensure_groupby(rows, 100))
    session = Session(device="cpu", drivers=2)
    session.register("x", data)
    con = duckdb.connect()
    con.execute("set threads=2")
    con.execute("CREATE TABLE x AS SELECT * FROM data")
    for q in questions:
        sql = QUESTIONS[q]
        want = con.sql(sql).to_arrow_table()
        want = want.sort_by([(c, "ascending") for c in want.column_names])
        for name in SIDES:
            ost._select_ranks_cpu = SIDES[name]
            got = session.sql(sql)
            background_compiler().wait_idle(timeout=300)
            got = got.sort_by([(c, "ascending") for c in got.column_names])
            assert got.num_rows == want.num_rows, (q, name)
            for column in got.column_names:
                a = got.column(column).to_numpy()
                b = want.column(column).to_numpy()
                assert (np.allclose(a, b, rtol=1e-9, equal_nan=True) if a.dtype.kind == "f" else (a == b).all()), (q, name, column)
        print(f"{q}: answers equal to DuckDB's on both sides ({want.num_rows} rows)", flush=True)
        cpu = {name: [] for name in SIDES}
        duck = []
        for i in range(rounds):
            for name in (list(SIDES) if i % 2 == 0 else list(SIDES)[::-1]):
                ost._select_ranks_cpu = SIDES[name]
                c0, w0 = _cpu(), time.time()
                session.sql(sql)
                cpu[name].append(_cpu() - c0)
                print(f"{q} {name} round {i}: cpu {cpu[name][-1]:.3f} s wall {time.time() - w0:.3f} s "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
            c0 = _cpu()
            con.sql(sql).to_arrow_table()
            duck.append(_cpu() - c0)
        d = statistics.median(duck)
        for name in SIDES:
            m = statistics.median(cpu[name])
            print(f"{q} {name}: median cpu {m:.3f} s ({m / d:.2f}x DuckDB's {d:.3f}) runs "
                  + " ".join(f"{x:.3f}" for x in cpu[name]), flush=True)
    ost._select_ranks_cpu = SIDES["new"]


if __name__ == "__main__":
    main()
