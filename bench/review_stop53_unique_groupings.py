"""Review probes (stop 53) of ``optimizer/unique_groupings``: a GROUP BY made a projection where a scanned key is
read and found unique. Tries to break the proof (tables changed after planning, kept plans, NULL keys, joins that
repeat rows, outer joins, filters, LIMIT, DISTINCT, HAVING, aggregates over the dropped grouping) and compares each
answer with DuckDB. Run: ``.venv/bin/python -m bench.review_stop53_unique_groupings [--cases N] [--device cpu]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import tempfile
import time

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session
from gpu_engine import optimizer
from gpu_engine.optimizer import optimize_plan
from gpu_engine.optimizer.unique_groupings import drop_unique_groupings
from gpu_engine.plans.nodes import AggregationNode, walk_plan


def _fired(session, sql) -> bool:
    """True where the optimizer's rules with the session's statistics leave fewer aggregations than without
    ``drop_unique_groupings`` (the rule fired)."""
    try:
        plan = session.sql_plan(sql)
    except Exception:  # noqa: BLE001 - a refused text fires nothing
        return False
    statistics = session.statistics()
    count = lambda p: sum(isinstance(n, AggregationNode) for n in walk_plan(p))
    with_rule = count(optimize_plan(plan, statistics))
    rules = optimizer.ESTIMATE_RULES
    optimizer.ESTIMATE_RULES = tuple(r for r in rules if r is not drop_unique_groupings)
    try:
        return with_rule < count(optimize_plan(plan, statistics))
    finally:
        optimizer.ESTIMATE_RULES = rules


def _tables(rng: random.Random, n: int) -> dict:
    keys = list(range(n))
    rng.shuffle(keys)
    keys = [k * 3 - 50 for k in keys]
    keys[rng.randrange(n)] = None  # one NULL: still unique as grouping compares
    fk = [rng.choice(keys[:max(1, n // 2)]) if rng.random() < .9 else None for _ in range(n * 2)]
    return {
        "a": pa.table({"k": pa.array(keys, pa.int64()),
                       "d": pa.array([None if k is None else datetime.date(2000, 1, 1) + datetime.timedelta(days=k)
                                      for k in keys], pa.date32()),
                       "s": pa.array([None if rng.random() < .1 else f"s{rng.randrange(5)}" for _ in keys], pa.string()),
                       "v": pa.array([None if rng.random() < .1 else rng.randrange(-5, 5) for _ in keys], pa.int32()),
                       "x": pa.array([None if rng.random() < .1 else rng.random() * 10 for _ in keys], pa.float64())}),
        "b": pa.table({"fk": pa.array(fk, pa.int64()),
                       "u": pa.array(list(range(len(fk))), pa.int32()),
                       "w": pa.array([rng.randrange(-3, 9) for _ in fk], pa.int64())}),
    }


_AGGS = ["count(*)", "count({c})", "sum({c})", "min({c})", "max({c})", "avg({c})", "any_value({c})",
         "count(DISTINCT {c})", "sum(DISTINCT {c})"]


def _query(rng: random.Random) -> str:
    shape = rng.choice(["one", "join", "left", "right", "semi", "self", "dedup", "filter_join"])
    col = lambda t: rng.choice([f"{t}.v", f"{t}.x"]) if t == "a" else rng.choice(["b.w", "b.u"])
    if shape == "one":
        frm, keys, tabs = "a", rng.choice([["a.k"], ["a.k", "a.s"], ["a.d"], ["a.d", "a.v"], ["a.s", "a.k"]]), ["a"]
    elif shape == "join":
        frm, keys, tabs = "a JOIN b ON b.fk = a.k", rng.choice([["a.k"], ["a.k", "a.s"], ["b.u"], ["a.k", "b.u"]]), ["a", "b"]
    elif shape == "left":
        frm, keys, tabs = "a LEFT JOIN b ON b.fk = a.k", rng.choice([["a.k"], ["a.k", "b.u"]]), ["a", "b"]
    elif shape == "right":
        frm, keys, tabs = "b RIGHT JOIN a ON b.fk = a.k", rng.choice([["a.k"], ["b.u"], ["a.k", "b.u"]]), ["a", "b"]
    elif shape == "semi":
        frm, keys, tabs = "a", rng.choice([["a.k"], ["a.d"]]), ["a"]
    elif shape == "self":
        frm, keys, tabs = "a JOIN a AS a2 ON a2.k = a.k", rng.choice([["a.k"], ["a2.k", "a.s"]]), ["a"]
    elif shape == "dedup":
        frm = "(SELECT fk, sum(w) AS w FROM b GROUP BY fk) AS b JOIN a ON b.fk = a.k"
        keys, tabs = rng.choice([["a.k"], ["a.k", "a.s", "a.d"], ["b.fk"]]), ["a"]
    else:
        frm, keys, tabs = "a JOIN b ON b.u = a.k", rng.choice([["a.k"], ["b.fk"], ["a.k", "b.fk"]]), ["a", "b"]
    aggs = [rng.choice(_AGGS).format(c=col(rng.choice(tabs))) for _ in range(rng.randint(0, 3))]
    # any_value only where its argument is one value a group (a's columns grouped by a's key)
    aggs = [a.replace("any_value", "max") if "any_value(b." in a or not {"a.k", "a2.k"} & set(keys) else a
            for a in aggs]
    where = []
    if shape == "semi":
        where.append(rng.choice(["a.k IN (SELECT fk FROM b)", "EXISTS (SELECT 1 FROM b WHERE b.fk = a.k)"]))
    if rng.random() < .3:
        where.append(rng.choice(["a.v > 0", "a.k IS NULL", "a.k IS NOT NULL", "a.s = 's1'", "a.x < 5"]))
    text = "SELECT " + ", ".join(keys + [f"{a} AS g{i}" for i, a in enumerate(aggs)]) + f" FROM {frm}"
    if where:
        text += " WHERE " + " AND ".join(where)
    text += " GROUP BY " + ", ".join(keys)
    if aggs and rng.random() < .2:
        text += " HAVING g0 IS NOT NULL"
    if rng.random() < .15:
        text = f"SELECT DISTINCT * FROM ({text}) AS q"
    if rng.random() < .15:
        text += " ORDER BY " + ", ".join(f"{i + 1}" for i in range(len(keys) + len(aggs))) + " LIMIT 5"
    return text


def _random(cases: int, device: str, seed: int, parquet: str | None = None) -> tuple[int, int, list]:
    """Run ``cases`` random table pairs, 5 queries each; ``parquet``: a folder to write them to as files."""
    rng = random.Random(seed)
    bad, fired = [], 0
    for case in range(cases):
        tables = _tables(rng, rng.choice([1, 2, 7, 40, 300]))
        con = duckdb.connect()
        for name, t in tables.items():
            con.register(name, t)
        session = Session(device=device, drivers=rng.choice([1, 2, 3]))
        rows = rng.choice([1, 3, 64, None])
        for name, t in tables.items():
            if parquet:  # the proof's other reader: the engine's page decoder, over files of 1-3 row groups
                path = os.path.join(parquet, f"{case}-{name}")
                os.makedirs(path)
                cut = rng.randint(0, t.num_rows)
                for part, piece in enumerate((t.slice(0, cut), t.slice(cut)) if rng.random() < .5 else (t,)):
                    if piece.num_rows:
                        pq.write_table(piece, os.path.join(path, f"{part}.parquet"),
                                       row_group_size=rng.choice([7, 50, 1000]),
                                       use_dictionary=rng.random() < .5)
                session.register(name, path, split_rows=rows)
            else:
                session.register(name, t, split_rows=rows)
        for _ in range(5):
            sql = _query(rng)
            problem = duckdb_probe_problem(con, session, sql)
            fired += _fired(session, sql)
            if problem:
                bad.append((case, sql, problem))
        con.close()
    return cases * 5, fired, bad


def _changed_after_planning(device: str) -> list:
    """A proof taken, then the rows changed under the same name or file: the next run must group again."""
    out = []
    sql = "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k"
    unique = pa.table({"k": pa.array(range(100), pa.int64()), "v": pa.array(range(100), pa.int64())})
    dupes = pa.table({"k": pa.array([i % 50 for i in range(99)] + [5000], pa.int64()),
                      "v": pa.array(range(100), pa.int64())})

    def check(label, session, expected):
        con = duckdb.connect()
        con.register("t", expected)
        problem = duckdb_probe_problem(con, session, sql)
        out.append((label, problem))

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.parquet")
        pq.write_table(unique, path)
        s = Session(device=device)
        s.register("t", path)
        check("parquet before", s, unique)
        pq.write_table(dupes, path)
        os.utime(path, ns=(time.time_ns() + 10**9,) * 2)
        check("parquet rewritten (same text again)", s, dupes)
        s.register("t", path)
        check("parquet registered again", s, dupes)
        # rewritten keeping the size and modification time: undetectable by (size, mtime)
        pq.write_table(unique, path)
        st = os.stat(path)
        s2 = Session(device=device)
        s2.register("t", path)
        check("parquet2 before", s2, unique)
        same = pa.table({"k": pa.array([1] + list(range(1, 100)), pa.int64()), "v": pa.array(range(100), pa.int64())})
        pq.write_table(same, path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        if os.stat(path).st_size == st.st_size:
            check("parquet2 rewritten, same size and mtime", s2, same)
    s = Session(device=device)
    s.register("t", unique)
    check("arrow before", s, unique)
    s.register("t", dupes)
    check("arrow registered again", s, dupes)
    # pandas frame mutated in place after register (zero-copy?)
    import pandas as pd
    frame = pd.DataFrame({"k": np.arange(100, dtype=np.int64), "v": np.arange(100, dtype=np.int64)})
    s = Session(device=device)
    s.register("t", frame)
    check("pandas before", s, pa.Table.from_pandas(frame, preserve_index=False))
    frame.loc[3, "k"] = 4
    check("pandas mutated in place", s, pa.Table.from_pandas(frame, preserve_index=False))
    # prepared statement kept, then table registered again
    s = Session(device=device)
    s.register("t", unique)
    try:
        prepared = s.prepare(sql)
        prepared_rows = prepared.execute() if hasattr(prepared, "execute") else None
        s.register("t", dupes)
        again = prepared.execute() if hasattr(prepared, "execute") else None
        if again is not None:
            con = duckdb.connect()
            con.register("t", dupes)
            from duckdb_reference import rows_mismatch
            out.append(("prepare then registered again",
                        rows_mismatch(again.rename_columns(["k", "n", "s"]), con.sql(sql).to_arrow_table())))
    except Exception as error:  # noqa: BLE001
        out.append(("prepare", f"EXC {type(error).__name__}: {error}"[:200]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-changed", action="store_true")
    parser.add_argument("--parquet", action="store_true", help="register the tables as Parquet files")
    args = parser.parse_args()
    if not args.skip_changed:
        for label, problem in _changed_after_planning(args.device):
            print(f"{'BAD ' if problem else 'ok  '}{label}: {problem or ''}")
    with tempfile.TemporaryDirectory() as folder:
        total, fired, bad = _random(args.cases, args.device, args.seed, folder if args.parquet else None)
    print(f"random: {total} queries, {fired} ran without an aggregation, {len(bad)} bad")
    for case, sql, problem in bad[:30]:
        print(f"  case {case}: {sql}\n    {problem}")


if __name__ == "__main__":
    main()
