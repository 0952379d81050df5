"""Review probe (stop 48): kernels.sort.packed_key_words / stable_order / dense_ranks / top_n_indices (0169830)
against np.lexsort over the unpacked words and against DuckDB's ORDER BY / window ranks: words with NULLs (0 beside
sign-flipped values), extremes apart from the rest, full 64-bit ranges, constants, 1..7 rows, several keys.

    .venv/bin/python -m bench.review_stop48_sort_packing [cases]
"""
import sys

import duckdb
import numpy as np
import pyarrow as pa

from gpu_engine import Session
from gpu_engine.device import get_device
from gpu_engine.kernels.sort import packed_key_words, stable_order


def random_word(rng, n):
    kind = rng.integers(0, 7)
    if kind == 0:
        return rng.integers(0, 4, n).astype(np.uint64)
    if kind == 1:  # sign-flipped values near 2**63 with a NULL's 0
        w = (np.uint64(1 << 63) + rng.integers(-50, 50, n).astype(np.int64).astype(np.uint64))
        w[rng.random(n) < 0.3] = 0
        return w
    if kind == 2:  # the maximum apart
        w = rng.integers(0, 1000, n).astype(np.uint64)
        w[rng.random(n) < 0.2] = np.uint64(2**64 - 1)
        return w
    if kind == 3:
        return rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2)
    if kind == 4:
        return np.full(n, rng.integers(0, 2**63, dtype=np.uint64), dtype=np.uint64)
    if kind == 5:  # both extremes apart
        w = rng.integers(100, 200, n).astype(np.uint64)
        w[rng.random(n) < 0.2] = 0
        w[rng.random(n) < 0.2] = np.uint64(2**64 - 1)
        return w
    return rng.integers(0, 2**rng.integers(1, 40), n, dtype=np.uint64)


def words_probe(cases):
    dev = get_device("cpu")
    rng = np.random.default_rng(48)
    bad = 0
    for case in range(cases):
        n = int(rng.choice([1, 2, 3, 5, 7, 50, 1000]))
        k = int(rng.integers(1, 5))
        words = np.stack([random_word(rng, n) for _ in range(k)])
        expected = np.lexsort(words)
        got = stable_order(dev, words)
        packed = packed_key_words(dev, words)
        # same order, and packed words equal exactly where the words are
        same_keys = (words[:, expected][:, 1:] != words[:, expected][:, :-1]).any(axis=0)
        same_packed = (packed[:, got][:, 1:] != packed[:, got][:, :-1]).any(axis=0)
        if not np.array_equal(expected, got) or not np.array_equal(same_keys, same_packed):
            bad += 1
            print("BAD words", case, words.tolist()[:3])
    return cases, bad


def sql_probe(cases):
    rng = np.random.default_rng(7)
    con = duckdb.connect()
    bad = probes = 0
    for case in range(cases):
        n = int(rng.choice([1, 3, 7, 40]))
        cols = {"p": pa.array([None if rng.random() < 0.2 else int(x) for x in rng.integers(-3, 3, n)], pa.int64()),
                "o": pa.array([None if rng.random() < 0.2 else int(x) for x in
                               rng.choice([-2**63, 2**63 - 1, 0, 1, -1, 5], n)], pa.int64()),
                "d": pa.array([None if rng.random() < 0.2 else float(x) for x in rng.choice(
                    [-0.0, 0.0, 1.5, float("inf"), -float("inf"), float("nan")], n)], pa.float64()),
                "s": pa.array([None if rng.random() < 0.2 else str(x) for x in rng.choice(["", "a", "b", "ab"], n)], pa.string()),
                "i": pa.array(np.arange(n), pa.int64())}
        t = pa.table(cols)
        con.register("t", t)
        ses = Session(device="cpu", drivers=int(rng.integers(1, 3)), batch_rows=int(rng.choice([1, 3, 4096])))
        ses.register("t", t, split_rows=3)
        for q in ["SELECT i, row_number() OVER (PARTITION BY p ORDER BY o DESC NULLS FIRST, d, i) r FROM t",
                  "SELECT i, rank() OVER (PARTITION BY s, p ORDER BY d NULLS LAST) r, dense_rank() OVER "
                  "(PARTITION BY s ORDER BY o, p DESC) q FROM t",
                  "SELECT i, sum(i) OVER (PARTITION BY p, s ORDER BY o RANGE BETWEEN UNBOUNDED PRECEDING AND "
                  "CURRENT ROW) r FROM t",
                  "SELECT * FROM t ORDER BY o DESC NULLS LAST, p NULLS FIRST, s, i LIMIT 5",
                  "SELECT p, o FROM t ORDER BY o, p DESC, d NULLS FIRST, i LIMIT 3",
                  "SELECT i, min(s) OVER (PARTITION BY p) m, max(o) OVER (PARTITION BY p, s) c FROM t"]:
            probes += 1
            e = con.sql(q).to_arrow_table()
            try:
                g = ses.sql(q)
                ordered = "ORDER BY" in q.split("FROM t")[-1]
                el, gl = e.to_pylist(), g.rename_columns(e.column_names).to_pylist()
                key = lambda r: repr(sorted(r.items()))  # noqa: E731
                same = repr(el) == repr(gl) if ordered else sorted(map(key, el)) == sorted(map(key, gl))
                if not same:
                    bad += 1
                    print("BAD sql", case, q, t.to_pylist()[:8], el[:6], gl[:6], flush=True)
            except Exception as ex:
                bad += 1
                print("EXC", case, q, type(ex).__name__, str(ex)[:200], flush=True)
    return probes, bad


if __name__ == "__main__":
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    print("words", *words_probe(cases))
    print("sql", *sql_probe(max(1, cases // 30)))
