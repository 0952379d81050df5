"""String keys against integer keys on the same data: GROUP BY and hash join, engine and DuckDB in one process
(issue 31 item 2: "string keys at integer-key speed").

Why: no string-against-integer comparison had been taken; this holds the data fixed and changes only the key's
type, so a ratio str/int is the cost of hashing, comparing and moving the key's bytes, side by side with DuckDB's
ratio on the same tables.

    .venv/bin/python -m bench.string_keys_ab --rows 1e7 --rounds 5
    .venv/bin/python -m bench.string_keys_ab --ops group --distinct 1e6 --sources arrow --rounds 5

Keys, one kind a table, the same key values in every kind (each distinct value drawn once from [0, 1e9)):
``int`` (int64), ``id`` (``'id%09d'``: 11 bytes, fixed width), ``var`` (a word of 3-12 letters, ``_`` and the
value in hex: 6-21 bytes, a fifth over 16). Shapes: ``group`` — ``--rows`` rows over D distinct keys (each key at
least once), ``SELECT k, count(*), sum(v) ... GROUP BY k ORDER BY s DESC, c, k LIMIT 10`` (the keys come out);
``join`` — a build table of B distinct keys and a probe of ``--rows`` rows drawn from them (every row matches),
``SELECT count(*), sum(b.w * p.v) FROM p JOIN b ON p.k = b.k``. Sources: ``arrow`` (the tables in memory),
``pqdict`` (Parquet, every column dictionary-encoded: the writer's dictionary page limit raised so no row group
falls back), ``pqplain`` (Parquet without dictionaries); files are written once under
``~/.cache/gpu_engine/strkeys``. Per case, rounds alternate the kinds' order and the engine/DuckDB order;
process CPU (user+sys, both engines' threads) and wall, medians; every answer is checked against DuckDB's first,
then the engine's compiled tier settled (:func:`bench.run_bench.settle_compiled_tier`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.run_bench import settle_compiled_tier
from gpu_engine import Session

KINDS = ("int", "id", "var")
WORDS = ["ant", "bear", "camel", "dingo", "eagle", "ferret", "gazelle", "hedgehog", "iguanodon", "jellyfish",
         "kingfisher", "lammergeier"]
CACHE = Path(os.environ.get("GPU_ENGINE_DATA", Path.home() / ".cache" / "gpu_engine")) / "strkeys"


def _values(d: int, rng) -> np.ndarray:
    """``d`` distinct int64 values in [0, 1e9), in random order."""
    values = np.unique(rng.integers(0, 1_000_000_000, int(d * 1.02) + 64))
    return rng.permutation(values)[:d]


def _key_column(kind: str, values: np.ndarray, rows: np.ndarray) -> pa.Array:
    """The key of each row (``values[rows]``) as ``kind``: strings are made once a distinct value and taken."""
    if kind == "int":
        return pa.array(values[rows])
    if kind == "id":
        distinct = pa.array([f"id{v:09d}" for v in values.tolist()])
    else:
        distinct = pa.array([f"{WORDS[v % len(WORDS)]}_{v:x}" for v in values.tolist()])
    return distinct.take(pa.array(rows))


def _group_tables(d: int, n: int, seed: int) -> dict[str, pa.Table]:
    rng = np.random.default_rng(seed)
    values = _values(d, rng)
    rows = np.concatenate([np.arange(d), rng.integers(0, d, n - d)]) if n > d else np.arange(d)
    rows = rng.permutation(rows)
    v = pa.array(rng.integers(0, 1000, rows.size))
    return {kind: pa.table({"k": _key_column(kind, values, rows), "v": v}) for kind in KINDS}


def _join_tables(b: int, n: int, seed: int) -> dict[str, tuple[pa.Table, pa.Table]]:
    rng = np.random.default_rng(seed)
    values = _values(b, rng)
    build_rows = np.arange(b)
    probe_rows = rng.integers(0, b, n)
    w, v = pa.array(rng.integers(0, 1000, b)), pa.array(rng.integers(0, 1000, n))
    return {kind: (pa.table({"k": _key_column(kind, values, build_rows), "w": w}),
                   pa.table({"k": _key_column(kind, values, probe_rows), "v": v})) for kind in KINDS}


def _source(table: pa.Table, source: str, name: str):
    """The table itself (``arrow``) or the path of its Parquet file, written once."""
    if source == "arrow":
        return table
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}-{source}.parquet"
    if not path.exists():
        options = ({"use_dictionary": True, "dictionary_pagesize_limit": 1 << 30} if source == "pqdict"
                   else {"use_dictionary": False})
        pq.write_table(table, path.with_suffix(".tmp"), row_group_size=1 << 20, **options)
        path.with_suffix(".tmp").rename(path)
    return str(path)


GROUP_SQL = "SELECT k, count(*) AS c, sum(v) AS s FROM {t} GROUP BY k ORDER BY s DESC, c, k LIMIT 10"
JOIN_SQL = "SELECT count(*) AS n, sum(b.w * p.v) AS s FROM {p} p JOIN {b} b ON p.k = b.k"


def _label(x: int) -> str:
    return f"{x / 1e6:g}M" if x >= 1_000_000 else f"{x / 1e3:g}K" if x >= 1000 else str(x)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--ops", nargs="+", default=["group", "join"])
    parser.add_argument("--distinct", type=float, nargs="+", default=[100, 1e5, 1e6, 1e7],
                        help="GROUP BY: distinct keys")
    parser.add_argument("--build", type=float, nargs="+", default=[1e5, 1e6, 1e7], help="join: build keys")
    parser.add_argument("--sources", nargs="+", default=["arrow", "pqdict", "pqplain"])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS))
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None, help="write every sample here")
    args = parser.parse_args()
    n = int(args.rows)
    session = Session(device="cpu", drivers=args.drivers)
    duck = duckdb.connect()
    duck.execute(f"SET threads = {args.drivers}")
    cases = [("group", int(d)) for d in args.distinct if "group" in args.ops] + \
            [("join", int(b)) for b in args.build if "join" in args.ops]
    results = []
    print(f"rows {n:,}; drivers {args.drivers}; DuckDB threads {args.drivers}; load {os.getloadavg()}", flush=True)
    for op, size in cases:
        made = time.perf_counter()
        data = _group_tables(size, n, 7) if op == "group" else _join_tables(size, n, 7)
        print(f"{op} {_label(size)}: data made in {time.perf_counter() - made:.1f} s", flush=True)
        for source in args.sources:
            questions = {}
            for kind in args.kinds:
                base = f"{op}_{kind}_{_label(size)}_{_label(n)}"
                tables = {"t": data[kind]} if op == "group" else dict(zip("bp", data[kind]))
                for side, table in tables.items():
                    src = _source(table, source, f"{base}_{side}")
                    session.register(f"{side}_{kind}", src)
                    if source == "arrow":
                        duck.register(f"{side}_{kind}", src)
                    else:
                        duck.execute(f"CREATE OR REPLACE VIEW {side}_{kind} AS SELECT * FROM read_parquet('{src}')")
                questions[kind] = (GROUP_SQL.format(t=f"t_{kind}") if op == "group"
                                   else JOIN_SQL.format(p=f"p_{kind}", b=f"b_{kind}"))
            # check every answer against DuckDB's (this run also warms both: kernels compiled, files cached)
            failed = None
            for kind, sql in questions.items():
                expected = duck.sql(sql).fetchall()
                try:
                    got = [tuple(r.values()) for r in session.sql(sql).to_pylist()]
                except Exception as exc:  # a memory cap at 10M groups: say so and go on to the next case
                    failed = f"{kind}: {type(exc).__name__}: {str(exc)[:300]}"
                    break
                if got != expected:
                    print(f"WRONG {op} {size} {source} {kind}: {got[:3]} vs {expected[:3]}", flush=True)
                    return 1
            for kind, sql in questions.items():  # time the compiled tier, not batches run while its kernels compile
                if not failed:
                    settle_compiled_tier(lambda: session.sql(sql))
            if failed:
                print(f"FAILED {op} {_label(size)} {source} {failed}", flush=True)
                results.append({"op": op, "size": size, "source": source, "failed": failed})
                continue
            samples = {(kind, eng): [] for kind in questions for eng in ("engine", "duckdb")}
            loads = []
            for r in range(args.rounds):
                kinds = list(questions) if r % 2 == 0 else list(questions)[::-1]
                for kind in kinds:
                    engines = ("engine", "duckdb") if r % 2 == 0 else ("duckdb", "engine")
                    for eng in engines:
                        wall, cpu = time.perf_counter(), time.process_time()
                        if eng == "engine":
                            session.sql(questions[kind])
                        else:
                            duck.sql(questions[kind]).fetchall()
                        samples[(kind, eng)].append((time.perf_counter() - wall, time.process_time() - cpu))
                loads.append(os.getloadavg()[0])
            row = {"op": op, "size": size, "source": source, "loads": loads,
                   "samples": {f"{k}/{e}": v for (k, e), v in samples.items()}}
            results.append(row)
            med = {key: (statistics.median(c for _, c in v), statistics.median(w for w, _ in v))
                   for key, v in samples.items()}
            parts = []
            for kind in questions:
                e, dd = med[(kind, "engine")], med[(kind, "duckdb")]
                parts.append(f"{kind} eng {e[0]*1e3:.0f}/{e[1]*1e3:.0f} duck {dd[0]*1e3:.0f}/{dd[1]*1e3:.0f}")
            print(f"{op} {_label(size)} {source} (load {min(loads):.1f}-{max(loads):.1f}; CPU/wall ms): "
                  + "; ".join(parts), flush=True)
        del data
    _report(results, args, n)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": n, "drivers": args.drivers, "results": results}, indent=1))
    return 0


def _report(results: list[dict], args, n: int) -> None:
    """One markdown row per case: each kind's CPU and wall medians (ms), string/int ratios for both engines."""
    kinds = [k for k in args.kinds if k != "int"]
    head = ["case", "source", "load", "eng int CPU/wall"] + [f"eng {k} CPU/wall (x int)" for k in kinds] + \
           ["duck int CPU/wall"] + [f"duck {k} CPU/wall (x int)" for k in kinds] + \
           [f"eng/duck CPU {k}" for k in args.kinds]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for row in results:
        if "failed" in row:
            print(f"| {row['op']} {_label(row['size'])} | {row['source']} | failed: {row['failed'][:120]} |")
            continue
        med = {key: (statistics.median(c for _, c in v) * 1e3, statistics.median(w for w, _ in v) * 1e3)
               for key, v in row["samples"].items()}
        cells = [f"{row['op']} {_label(row['size'])}", row["source"],
                 f"{min(row['loads']):.1f}-{max(row['loads']):.1f}"]
        for eng in ("engine", "duckdb"):
            base = med.get(f"int/{eng}")
            if base:
                cells.append(f"{base[0]:.0f}/{base[1]:.0f}")
            for k in kinds:
                c, w = med[f"{k}/{eng}"]
                cells.append(f"{c:.0f}/{w:.0f} ({c / base[0]:.2f}x/{w / base[1]:.2f}x)" if base else f"{c:.0f}/{w:.0f}")
        for k in args.kinds:
            cells.append(f"{med[f'{k}/engine'][0] / med[f'{k}/duckdb'][0]:.2f}x")
        print("| " + " | ".join(cells) + " |")
    print(f"\nrows {n:,}; drivers {args.drivers}; DuckDB threads {args.drivers}; rounds {args.rounds}; "
          f"command: {' '.join(sys.argv)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
