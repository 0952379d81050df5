"""Fuzz subqueries, window frames, FILTER/DISTINCT aggregates, expressions and concurrent sessions against DuckDB
(fuzz hardening round 7).

Why: stop 47 moved ``[NOT] EXISTS`` / ``IN`` / ``NOT IN`` and uncorrelated scalar subqueries into typed plan
predicates that one optimizer rule joins (``plans/subqueries.py``, ``optimizer/decorrelation.py``); correlated
scalar subqueries stay on the sqlglot tree. Rounds 1-6 drew few subqueries, frames only at RANGE 1/2 over small
ints, no ``FILTER (WHERE ...)``, few casts between decimals of mixed scales, and nothing concurrent. Each seed
draws ``t(id, k, v, x, s, d, m, n)`` (0-16 rows: int keys 0-3 with NULLs, negative values, a double, strings with
NULLs and ``''`` some of them numeric, dates, decimal(9,2) and decimal(18,4)), ``u`` and ``w`` of the same shape
(0-8 rows, empty a fifth of the time each), a session of 1-3 drivers and batches of 7 rows or the default.

Families:

* ``subq``: ``[NOT] EXISTS``, ``[NOT] IN`` with NULLs on both sides, uncorrelated scalar subqueries in WHERE /
  HAVING / QUALIFY, correlated scalar subqueries (WHERE and SELECT), two levels nested, under AND with other
  predicates (and under OR: refused by name or answered), over empty inputs; a fifth through JSON.
* ``builder``: the same forms as hand-built PlanBuilder plans (``Exists``, ``InSubquery``, ``ScalarSubquery``,
  ``OuterColumn``) with subquery plans of builders of their own, executed and through JSON.
* ``windows``: ROWS / RANGE n PRECEDING / FOLLOWING at partition edges, RANGE over dates (intervals) and
  decimals, ties, NULL order keys, empty partitions, ``row_number() <= k`` (subquery and QUALIFY), over joins.
* ``aggs``: ``FILTER (WHERE ...)`` beside ``DISTINCT`` in one SELECT, grouping sets / ROLLUP / CUBE with
  ``grouping()``, NULL and string keys, empty inputs, HAVING on aggregates not in the SELECT.
* ``exprs``: CASE / COALESCE / NULLIF, CAST / TRY_CAST between strings, numbers, dates, decimals of mixed scales
  (overflow: an error or NULL as DuckDB), ``//`` and ``%`` with negatives and zero, date / interval arithmetic,
  string functions over NULLs and ''.
* ``threads`` (not in the default list; ``--threads``): 4 threads issue queries of the families above against one
  Session (and one Session each); every answer must equal DuckDB's, an error only where the same query alone
  raises it, every thread must end.

    python -m bench.fuzz_round7 --seeds 0:300 [--device cuda-sim] [--families subq,windows] [--threads N]
        [--out F]

Prints every wrong case, crash, engine error where DuckDB answered, or answer where DuckDB raised; then counts per
family and status. Exits 1 when any case was wrong or crashed. Comparison: bench/fuzz_round5._compare (multisets,
floats to 1e-7).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import decimal
import json
import random
import re
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.fuzz_round5 import _compare  # noqa: E402 (after the path it needs)
from bench.sql_fuzz import head_commit, print_counts  # noqa: E402

STRINGS = ["a", "B", "", "12", "-3", " 7", "1.5", "x1", "2024-02-29", "é", "a,b"]
DATES = [datetime.date(2024, 1, 31), datetime.date(2024, 2, 29), datetime.date(2024, 3, 1),
         datetime.date(1969, 12, 31), datetime.date(2024, 2, 27), datetime.date(2000, 1, 1)]
DECIMALS = ["0.00", "-1.25", "3.50", "99999.99", "-0.01", "1.00", "1234567.89"]
WIDE = ["0.0000", "-2.5000", "1.2345", "99999999999999.9999", "-0.0001", "7.0000", "3.1416"]


def _table(rng: random.Random, rows: int):
    import pyarrow as pa

    def pick(values, null):
        return None if rng.random() < null else rng.choice(values)

    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "k": pa.array([pick([0, 1, 2, 3, 1, 0], 0.15) for _ in range(rows)], pa.int64()),
        "v": pa.array([pick([0, 1, -1, 2, -7, 5, 10, -3], 0.15) for _ in range(rows)], pa.int64()),
        "x": pa.array([pick([0.5, -1.25, 2.0, 0.0, 1e3], 0.15) for _ in range(rows)], pa.float64()),
        "s": pa.array([pick(STRINGS, 0.2) for _ in range(rows)], pa.string()),
        "d": pa.array([pick(DATES, 0.15) for _ in range(rows)], pa.date32()),
        "m": pa.array([None if (c := pick(DECIMALS, 0.15)) is None else decimal.Decimal(c) for _ in range(rows)],
                      pa.decimal128(9, 2)),
        "n": pa.array([None if (c := pick(WIDE, 0.15)) is None else decimal.Decimal(c) for _ in range(rows)],
                      pa.decimal128(18, 4)),
    })


def tables(rng: random.Random) -> dict:
    """t (0-16 rows, empty a tenth of the time), u and w (0-8 rows, each empty a fifth of the time)."""
    out = {"t": _table(rng, 0 if rng.random() < 0.1 else rng.randint(1, 16))}
    for name in ("u", "w"):
        out[name] = _table(rng, 0 if rng.random() < 0.2 else rng.randint(1, 8))
    return out


# ------------------------------------------------------------------------------------------------ subqueries
def _pred_subquery(r: random.Random, outer: str, inner: str, depth: int = 0) -> str:
    """One subquery predicate over the outer relation ``outer``, reading ``inner``."""
    col = r.choice(["k", "v"])
    filt = r.choice(["", "", f" AND {inner}.v > {r.choice([-1, 0, 1])}", f" AND {inner}.s IS NOT NULL",
                     f" AND {inner}.v < {outer}.v", " AND false"])
    nested = ""
    if depth == 0 and r.random() < 0.25:  # two levels
        nested = " AND " + _pred_subquery(r, inner, "w" if inner == "u" else "u", depth + 1)
    where = (filt + nested)[5:] if (filt + nested) else ""
    kind = r.randrange(8)
    if kind == 0:
        return (f"{'NOT ' if r.random() < 0.5 else ''}EXISTS (SELECT 1 FROM {inner} WHERE {inner}.{col} = "
                f"{outer}.{col}{filt}{nested})")
    if kind == 1:
        wh = f" WHERE {where}" if where else ""
        return f"{outer}.{col} {'NOT ' if r.random() < 0.5 else ''}IN (SELECT {inner}.{col} FROM {inner}{wh})"
    if kind == 2:
        wh = f" WHERE {where}" if where else ""
        return f"{outer}.s {'NOT ' if r.random() < 0.5 else ''}IN (SELECT {inner}.s FROM {inner}{wh})"
    if kind == 3:  # uncorrelated scalar
        agg = r.choice(["avg(v)", "min(v)", "max(k)", "count(*)", "sum(v)", "max(m)"])
        wh = r.choice(["", " WHERE false", f" WHERE k = {r.choice([0, 1])}"])
        if agg == "max(m)":
            return f"{outer}.m > (SELECT {agg} FROM {inner}{wh})"
        return f"{outer}.v {r.choice(['>', '<=', '='])} (SELECT {agg} FROM {inner}{wh})"
    if kind == 4:  # correlated scalar
        agg = r.choice(["avg(v)", "min(v)", "max(v)", "count(*)", "sum(v)", "count(v)"])
        return (f"{outer}.v {r.choice(['>', '<=', '='])} (SELECT {agg} FROM {inner} WHERE {inner}.k = {outer}.k"
                f"{filt if 'false' not in filt else ''})")
    if kind == 5:  # uncorrelated EXISTS
        return f"{'NOT ' if r.random() < 0.5 else ''}EXISTS (SELECT 1 FROM {inner} WHERE {inner}.v > {r.choice([0, 5, 20])})"
    if kind == 6:  # IN with a correlation
        return (f"{outer}.k {'NOT ' if r.random() < 0.3 else ''}IN (SELECT {inner}.k FROM {inner} WHERE "
                f"{inner}.v = {outer}.v)")
    return f"{outer}.v IN (SELECT {inner}.v + 1 FROM {inner} WHERE {inner}.v IS NOT NULL)"


def _subq(r: random.Random):
    """Subquery predicates in WHERE (one or two, beside a plain predicate, under AND or rarely OR), HAVING and
    QUALIFY with uncorrelated scalar subqueries, correlated scalar subqueries in SELECT."""
    shape = r.random()
    how = "jsonplan" if r.random() < 0.2 else "sql"
    if shape < 0.6:
        preds = [_pred_subquery(r, "t", r.choice(["u", "w"])) for _ in range(r.choice([1, 1, 2]))]
        if r.random() < 0.4:
            preds.append(r.choice(["t.v > 0", "t.k IS NOT NULL", "t.s <> ''", "t.id % 2 = 0"]))
        r.shuffle(preds)
        joiner = " OR " if r.random() < 0.1 and len(preds) > 1 else " AND "
        select = r.choice(["t.id", "t.id, t.k, t.v", "count(*) AS n, sum(t.v) AS sv"])
        return f"SELECT {select} FROM t WHERE {joiner.join(preds)}", None, how
    if shape < 0.72:
        sub = r.choice(["(SELECT min(v) FROM u)", "(SELECT count(*) FROM u)", "(SELECT avg(v) FROM w WHERE false)",
                        "(SELECT max(v) FROM w)"])
        having = r.choice([f"sum(v) > {sub}", f"count(*) >= {sub}", f"max(v) = {sub} OR count(*) > 1"])
        return f"SELECT k, count(*) AS n, sum(v) AS sv FROM t GROUP BY k HAVING {having}", None, how
    if shape < 0.8:
        sub = r.choice(["(SELECT count(*) FROM u)", "(SELECT max(k) FROM w)", "(SELECT min(v) FROM u WHERE v > 0)"])
        return (f"SELECT id, k, v FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY v NULLS FIRST, id) <= "
                f"{sub}"), None, how
    if shape < 0.92:  # correlated scalar in SELECT
        agg = r.choice(["max(u.v)", "count(*)", "sum(u.v)", "min(u.s)", "avg(u.m)"])
        corr = r.choice(["u.k = t.k", "u.k = t.k AND u.v > t.v", "u.s = t.s"])
        return f"SELECT t.id, (SELECT {agg} FROM u WHERE {corr}) AS c FROM t", None, "sql"
    if shape < 0.96:  # the forms beside WHERE's: EXISTS / IN as values, uncorrelated scalars, ANY / ALL
        return r.choice([
            "SELECT t.id, EXISTS (SELECT 1 FROM u WHERE u.k = t.k) AS e FROM t",
            "SELECT t.id, t.k IN (SELECT k FROM u) AS e, t.s NOT IN (SELECT s FROM w) AS f FROM t",
            "SELECT t.id, (SELECT max(v) FROM u) AS m, (SELECT count(*) FROM w WHERE false) AS c FROM t",
            f"SELECT t.id FROM t WHERE t.v {r.choice(['>', '<=', '='])} {r.choice(['ANY', 'ALL'])} (SELECT v FROM u)",
            "SELECT t.id FROM t WHERE t.v < ANY (SELECT u.v FROM u WHERE u.k = t.k)",
            "SELECT t.id FROM t WHERE (t.k, t.v) IN (SELECT k, v FROM u)",
            "SELECT q.id FROM (SELECT id, k FROM t WHERE v > 0) q WHERE q.k NOT IN (SELECT k FROM w)",
            "SELECT t.id FROM t JOIN w ON t.k = w.k AND w.v IN (SELECT v FROM u)",
        ]), None, "sql"
    # IN / NOT IN with NULLs on both sides over a derived table, and a join beside it
    return (f"SELECT t.id, w.id AS wid FROM t JOIN w ON t.k = w.k WHERE t.v {r.choice(['IN', 'NOT IN'])} "
            f"(SELECT v FROM u) AND w.v {r.choice(['IN', 'NOT IN'])} (SELECT k FROM u)"), None, how


# ------------------------------------------------------------------------------------------------ builder
def _builder(r: random.Random):
    """A hand-built Filter over t with one or two typed subquery predicates (each subquery from a builder of its
    own, over u or w, maybe filtered); ``how`` "builder7": the engine executes it and its JSON round trip."""
    parts = []
    for _ in range(r.choice([1, 1, 2])):
        inner = r.choice(["u", "w"])
        kind = r.choice(["exists", "in", "scalar", "exists_corr2", "scalar_corr", "scalar_row"])
        negated = r.random() < 0.5
        inner_filter = r.choice([None, None, "v > 0", "k IS NOT NULL"])
        col = r.choice(["k", "v"])
        parts.append({"kind": kind, "inner": inner, "negated": negated, "filter": inner_filter, "col": col,
                      "agg": r.choice(["max", "min", "count", "sum"]), "op": r.choice(["gt", "le", "eq"])})
    spec = {"parts": parts, "extra": r.random() < 0.3, "project": r.random() < 0.5}
    return (spec, _builder_sql(spec)), None, "builder7"


_OPS = {"gt": ">", "le": "<=", "eq": "="}


def _builder_sql(spec) -> str:
    preds = []
    for p in spec["parts"]:
        inner, col = p["inner"], p["col"]
        where = f" WHERE {p['filter']}" if p["filter"] else ""
        sub = f"(SELECT * FROM {inner}{where}) q"
        if p["kind"] == "exists":
            preds.append(f"{'NOT ' if p['negated'] else ''}EXISTS (SELECT 1 FROM {sub} WHERE q.{col} = t.{col})")
        elif p["kind"] == "exists_corr2":
            preds.append(f"{'NOT ' if p['negated'] else ''}EXISTS (SELECT 1 FROM {sub} WHERE q.k = t.k AND q.v < t.v)")
        elif p["kind"] == "in":
            preds.append(f"t.{col} {'NOT ' if p['negated'] else ''}IN (SELECT q.{col} FROM {sub})")
        elif p["kind"] == "scalar_row":  # one row a key where the key is q.id, several where it is q.k
            key = "id" if p["col"] == "v" else "k"
            preds.append(f"t.v {_OPS[p['op']]} (SELECT q.v FROM {sub} WHERE q.{key} = t.k)")
        else:
            agg = "count(*)" if p["agg"] == "count" else f"{p['agg']}(q.v)"
            where = " WHERE q.k = t.k" if p["kind"] == "scalar_corr" else ""
            preds.append(f"t.v {_OPS[p['op']]} (SELECT {agg} FROM {sub}{where})")
    if spec["extra"]:
        preds.append("t.v > 0")
    select = "t.k" if spec["project"] else "t.*"
    return f"SELECT {select} FROM t WHERE {' AND '.join(preds)}"


def _built_plan(session, spec):
    import pyarrow as pa

    from gpu_engine.plans import PlanBuilder
    from gpu_engine.plans.expressions import BinaryOp, ColumnRef
    from gpu_engine.plans.subqueries import Exists, InSubquery, OuterColumn, ScalarSubquery

    i64, boolean = pa.int64(), pa.bool_()
    catalog = session.catalog

    def sub(p):
        b = PlanBuilder(catalog).table_scan(p["inner"])
        return (b.filter(p["filter"]) if p["filter"] else b).plan()

    def eq(a, b):
        return BinaryOp("eq", a, b, boolean)

    preds = []
    for p in spec["parts"]:
        col = p["col"]
        if p["kind"] == "exists":
            preds.append(Exists(sub(p), eq(ColumnRef(col, i64), OuterColumn(col, i64)), negated=p["negated"]))
        elif p["kind"] == "exists_corr2":
            corr = BinaryOp("and", eq(ColumnRef("k", i64), OuterColumn("k", i64)),
                            BinaryOp("lt", ColumnRef("v", i64), OuterColumn("v", i64), boolean), boolean)
            preds.append(Exists(sub(p), corr, negated=p["negated"]))
        elif p["kind"] == "in":
            preds.append(InSubquery(ColumnRef(col, i64), sub(p), col, negated=p["negated"]))
        elif p["kind"] == "scalar_row":
            key = "id" if p["col"] == "v" else "k"
            value = ScalarSubquery(sub(p), "v", i64, correlation=eq(ColumnRef(key, i64), OuterColumn("k", i64)))
            preds.append(BinaryOp(p["op"], ColumnRef("v", i64), value, boolean))
        else:
            b = PlanBuilder(catalog).table_scan(p["inner"])
            if p["filter"]:
                b = b.filter(p["filter"])
            agg = "count(*)" if p["agg"] == "count" else f"{p['agg']}(v)"
            correlated = p["kind"] == "scalar_corr"  # grouped by the correlation column: COUNT's 0 over no rows
            plan = b.aggregation(["k"] if correlated else [], [f"{agg} AS a"]).plan()
            correlation = eq(ColumnRef("k", i64), OuterColumn("k", i64)) if correlated else None
            value = ScalarSubquery(plan, "a", plan.output_schema.field("a").type,  # sum(int64): decimal128(38, 0)
                                   correlation=correlation)
            preds.append(BinaryOp(p["op"], ColumnRef("v", i64), value, boolean))
    if spec["extra"]:
        preds.append("v > 0")
    builder = PlanBuilder(catalog).table_scan("t")
    for pred in preds:
        builder = builder.filter(pred)
    if spec["project"]:
        builder = builder.project(["k"])
    return builder.plan()


# ------------------------------------------------------------------------------------------------ windows
def _windows(r: random.Random):
    part = r.choice(["", "PARTITION BY k ", "PARTITION BY s ", "PARTITION BY k, s "])
    nulls = r.choice(["", " NULLS FIRST", " NULLS LAST"])
    direction = r.choice(["", " DESC"])
    n1, n2 = r.choice([0, 1, 2, 3, 20]), r.choice([0, 1, 2, 5])
    agg = r.choice(["sum(v)", "count(v)", "count(*)", "min(x)", "max(s)", "avg(v)", "sum(m)", "max(d)"])
    bound = lambda n, side: "CURRENT ROW" if n == 0 else f"{n} {side}"  # noqa: E731
    rows_frame = r.choice([f"ROWS BETWEEN {bound(n1, 'PRECEDING')} AND {bound(n2, 'FOLLOWING')}",
                           f"ROWS BETWEEN {max(n1, 1)} PRECEDING AND {max(n2, 1) - 1 or 'CURRENT ROW'}"
                           f"{' PRECEDING' if max(n2, 1) - 1 else ''}",
                           f"ROWS BETWEEN {max(n2, 1)} FOLLOWING AND {max(n2, 1) + n1} FOLLOWING",
                           f"ROWS {bound(n1, 'PRECEDING')}", "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"])
    key, frame = r.choice([
        ("v", f"RANGE BETWEEN {bound(n1, 'PRECEDING')} AND {bound(n2, 'FOLLOWING')}"),
        ("k", f"RANGE BETWEEN {max(n1, 1)} FOLLOWING AND {max(n1, 1) + n2} FOLLOWING"),
        ("d", f"RANGE BETWEEN INTERVAL {n1} DAY PRECEDING AND INTERVAL {n2} DAY FOLLOWING"),
        ("d", f"RANGE BETWEEN INTERVAL '{n1 + 1} days' PRECEDING AND CURRENT ROW"),
        ("m", f"RANGE BETWEEN {r.choice(['1.5', '0.01', '100'])} PRECEDING AND CURRENT ROW"),
        ("x", f"RANGE BETWEEN {r.choice(['0.5', '2'])} PRECEDING AND {r.choice(['0.5', '0'])} FOLLOWING"),
        ("v", "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"),
        ("v", f"RANGE BETWEEN CURRENT ROW AND {bound(n2, 'FOLLOWING')}"),
    ])
    order = f"ORDER BY {key}{direction}{nulls}"
    k = r.choice([0, 1, 2, 3])
    lagged = r.choice(["v", "s", "d", "m"])
    default = {"v": "-100", "s": "'zz'", "d": "DATE '1999-01-01'", "m": "0.5"}[lagged]
    forms = [
        f"SELECT id, {agg} OVER ({part}{order} {frame}) AS w FROM t",
        f"SELECT id, {agg} OVER ({part}{order}, id {rows_frame}) AS w FROM t",
        f"SELECT id, first_value(v) OVER ({part}{order}, id {rows_frame}) AS fv, "
        f"last_value(s) OVER ({part}{order}, id {rows_frame}) AS lv FROM t",
        f"SELECT id, nth_value(v, 2) OVER ({part}{order}, id {rows_frame}) AS nv FROM t",
        f"SELECT id, lag({lagged}, {r.choice([1, 2])}, {default}) OVER ({part}{order}, id) AS l, "
        f"lead({lagged}, 1) OVER ({part}{order}, id) AS ld FROM t",
        f"SELECT * FROM (SELECT id, k, v, row_number() OVER ({part}{order}, id) AS rn FROM t) q WHERE rn <= {k}",
        f"SELECT id, k, v FROM t QUALIFY row_number() OVER ({part}ORDER BY v DESC NULLS LAST, id) <= {k}",
        f"SELECT id, rank() OVER ({part}{order}) AS rk, dense_rank() OVER ({part}{order}) AS dr FROM t "
        f"QUALIFY rank() OVER ({part}{order}) <= {k + 1}",
        f"SELECT id, {agg} OVER ({part}{order} {frame}) AS w FROM t WHERE {r.choice(['false', 'v > 100', 'k = 3'])}",
        f"SELECT t.id, u.id AS uid, sum(u.v) OVER (PARTITION BY t.k ORDER BY u.v{nulls} "
        f"RANGE BETWEEN {max(n1, 1)} PRECEDING AND CURRENT ROW) AS w FROM t JOIN u ON t.k = u.k",
        f"SELECT t.id, count(u.id) OVER (PARTITION BY t.s ORDER BY t.d{nulls} RANGE BETWEEN INTERVAL 1 DAY "
        f"PRECEDING AND INTERVAL 1 DAY FOLLOWING) AS w FROM t LEFT JOIN u ON t.v = u.v",
        f"SELECT k, sum(v) AS sv, sum(sum(v)) OVER (ORDER BY k{nulls} ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS w "
        f"FROM t GROUP BY k",
        f"SELECT id, count(*) OVER (PARTITION BY k ORDER BY d{direction}{nulls} RANGE BETWEEN INTERVAL '1 month' "
        f"PRECEDING AND CURRENT ROW) AS w FROM t",
        f"SELECT id, ntile({k + 1}) OVER ({part}{order}, id) AS nt, percent_rank() OVER ({part}{order}) AS pr, "
        f"cume_dist() OVER ({part}{order}) AS cd FROM t",
        f"SELECT id, {agg} OVER ({part}{order} {frame}) AS w1, {agg} OVER ({part}{order}, id {rows_frame}) AS w2 "
        f"FROM t WHERE {r.choice(['true', 'k IS NULL', 'v < 0'])}",
    ]
    return r.choice(forms), None, "sql"


# ------------------------------------------------------------------------------------------------ aggregates
def _aggs(r: random.Random):
    pieces = [
        "count(*) FILTER (WHERE v > 0)", "sum(v) FILTER (WHERE s <> '')", "count(DISTINCT v)", "sum(DISTINCT v)",
        "count(DISTINCT s)", "avg(x) FILTER (WHERE k IS NOT NULL)", "min(d) FILTER (WHERE v < 0)", "max(s)",
        "sum(m)", "avg(m)", "sum(n) FILTER (WHERE m > 0)", "count(DISTINCT d)", "count(DISTINCT v) FILTER (WHERE v <> 0)",
        "max(m) FILTER (WHERE s IS NULL)", "avg(DISTINCT v)", "sum(x)", "count(s)", "min(n)", "bool_or(v > 0)",
        "sum(DISTINCT m)", "string_agg(DISTINCT s, ',' ORDER BY s)",
    ]
    aggs = [f"{p} AS a{i}" for i, p in enumerate(r.sample(pieces, r.randint(1, 4)))]
    keys = r.sample(["k", "s", "d", "k % 2"], r.choice([0, 1, 1, 2]))
    src = r.choice(["t", "t", "t WHERE v > 100", "(SELECT * FROM t UNION ALL SELECT * FROM u) q"])
    having = ""
    if r.random() < 0.35:
        having = " HAVING " + r.choice(["count(*) > 1", "max(x) > 0", "sum(v) FILTER (WHERE v > 0) >= 1",
                                        "count(DISTINCT s) >= 1", "min(id) < 5", "avg(m) IS NOT NULL"])
    if not keys:
        return f"SELECT {', '.join(aggs)} FROM {src}{having}", None, "sql"
    named = [f"{key} AS g{i}" for i, key in enumerate(keys)]
    grouping = ""
    group = f" GROUP BY {', '.join(keys)}"
    shape = r.random()
    if shape < 0.35 and keys:
        wrap = r.choice(["ROLLUP", "CUBE", "GROUPING SETS"])
        if wrap == "GROUPING SETS":
            sets = ["(" + ", ".join(keys) + ")", f"({keys[0]})", "()"]
            group = f" GROUP BY GROUPING SETS ({', '.join(r.sample(sets, r.randint(1, 3)))})"
        else:
            group = f" GROUP BY {wrap} ({', '.join(keys)})"
        grouping = f", grouping({', '.join(keys)}) AS gr"
    how = "jsonplan" if r.random() < 0.15 else "sql"
    return f"SELECT {', '.join(named)}{grouping}, {', '.join(aggs)} FROM {src}{group}{having}", None, how


# ------------------------------------------------------------------------------------------------ expressions
def _expr(r: random.Random, depth: int = 0) -> str:
    ints = ["v", "k", "id", "-v", "(v - 3)"]
    leaf = r.random()
    kind = r.randrange(16) if depth < 2 else 15
    if kind == 0:
        return f"CASE WHEN {r.choice(['v > 0', 's IS NULL', 'k = 1', 'd < DATE ' + repr('2024-02-28')])} THEN " \
               f"{r.choice(['v', 'k * 2', 'NULL'])} {r.choice(['', 'ELSE -1', 'ELSE k'])} END"
    if kind == 1:
        return f"coalesce({r.choice(['v', 'NULL'])}, {r.choice(['k', 'NULL'])}, {r.choice(['0', '-5'])})"
    if kind == 2:
        return f"nullif({r.choice(ints)}, {r.choice(['0', '1', 'k'])})"
    if kind == 3:
        target = r.choice(["INTEGER", "BIGINT", "DOUBLE", "DECIMAL(5,2)", "DECIMAL(18,3)", "DATE", "SMALLINT",
                           "TINYINT", "VARCHAR", "DECIMAL(3,0)"])
        source = r.choice(["s", "v", "m", "n", "x", "d", "v * 1000", "'  12 '", "m * 100"])
        return f"{r.choice(['TRY_CAST', 'TRY_CAST', 'CAST'])}({source} AS {target})"
    if kind == 4:
        return f"{r.choice(ints)} {r.choice(['//', '%', '/'])} {r.choice(['k', '0', '-2', '3', 'v', '(k - 1)'])}"
    if kind == 5:
        return f"{r.choice(['m', 'n', 'm * n', 'm + n', 'm - v', 'n / 4', 'm * 2.5'])} {r.choice(['+', '-', '*'])} " \
               f"{r.choice(['m', 'n', 'v', '0.001', 'CAST(1.5 AS DECIMAL(3,1))'])}"
    if kind == 6:
        return r.choice([f"d + INTERVAL {r.choice([1, 31])} DAY", "d - INTERVAL 1 DAY", "d + INTERVAL '1 month'", "d - INTERVAL 1 YEAR",
                         "d + k", "d - DATE '2024-01-01'", "date_diff('day', d, DATE '2024-03-01')",
                         "extract(year FROM d)", "date_trunc('month', d)", "d + INTERVAL '2 months 3 days'",
                         "dayofweek(d)", "last_day(d)", "d > DATE '2024-02-28'"])
    if kind == 7:
        return r.choice(["length(s)", "upper(s)", "lower(s)", "substr(s, 2)", "substr(s, 1, k)", "s || 'z'",
                         "concat(s, NULL, 'y')", "replace(s, 'a', '')", "trim(s)", "lpad(s, 3, '*')",
                         "starts_with(s, '1')", "strpos(s, 'a')", "left(s, 1)", "right(s, 2)", "reverse(s)",
                         "repeat(s, 2)", "s LIKE '%1%'", "s ILIKE 'a%'", "coalesce(s, '') = ''", "ltrim(s)"])
    if kind == 8:
        return f"{r.choice(['m', 'n', 'v', 'x'])} {r.choice(['>', '=', '<>', '<='])} {r.choice(['m', 'n', '1.25', '0', 'v'])}"
    if kind == 9:
        return f"round({r.choice(['m', 'n', 'x'])}, {r.choice([0, 1, 2])})"
    if kind == 10:
        return f"abs({r.choice(['v', 'm', 'x', 'n'])})"
    if kind == 11:
        return f"CASE {r.choice(['k', 's'])} WHEN {r.choice(['1', chr(39) + 'a' + chr(39)])} THEN {r.choice(['m', 'n'])} " \
               f"ELSE {r.choice(['v', 'NULL', '0'])} END"
    if kind == 12:
        return f"greatest({r.choice(['v', 'k'])}, {r.choice(['0', 'k', 'NULL'])})"
    if kind == 13:
        return f"({_expr(r, depth + 1)}) IS NULL"
    if kind == 14:
        return f"coalesce({_expr(r, depth + 1)}, NULL)"
    return r.choice(ints + ["m", "n", "x", "s", "d"]) if leaf < 2 else "NULL"


def _exprs(r: random.Random):
    exprs = [f"{_expr(r)} AS e{i}" for i in range(r.randint(1, 3))]
    where = r.choice(["", "", f" WHERE {_expr(r)} IS NOT NULL", " WHERE v <> 0"])
    return f"SELECT id, {', '.join(exprs)} FROM t{where}", None, "sql"


FAMILIES = {"subq": _subq, "builder": _builder, "windows": _windows, "aggs": _aggs, "exprs": _exprs}
SQL_FAMILIES = ["subq", "windows", "aggs", "exprs"]


def _compare_case(session, connection, sql, params, how):
    """bench.fuzz_round5._compare, with ``how`` "builder7" (``sql`` is (spec, DuckDB's text)): the hand-built plan
    of the spec, then its JSON round trip, each against DuckDB (round 5's ``how`` "call")."""
    if how != "builder7":
        return _compare(session, connection, sql, params, how)
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json

    spec, text = sql
    status, detail = _compare(session, connection, (lambda s: s.execute(_built_plan(s, spec)), text), None, "call")
    if status != "ok":
        return status, detail
    status, detail = _compare(session, connection,
                              (lambda s: s.execute(plan_from_json(plan_to_json(_built_plan(s, spec)))), text),
                              None, "call")
    return status, (f"json: {detail}" if detail else detail)


def _session(data, device, drivers, batch_rows, split_rows):
    from duckdb_reference import session_with_tables

    options = {"device": device, "drivers": drivers}
    if batch_rows is not None:
        options["batch_rows"] = batch_rows
    return session_with_tables(data, split_rows=split_rows, **options)


def _duckdb(data):
    import duckdb

    connection = duckdb.connect()
    connection.execute("SET TimeZone='UTC'")
    for name, table in data.items():
        connection.register(name, table)
    return connection


def run(seeds: range, device: str, families: list[str], verbose: bool) -> dict:
    counts = collections.defaultdict(collections.Counter)
    reported, refusals = [], collections.Counter()
    for seed in seeds:
        r = random.Random(seed)
        drivers, batch_rows = r.choice([1, 2, 3]), r.choice([7, None])
        split_rows = r.choice([3, 7, 100])
        for family in families:
            data = tables(r)
            connection = _duckdb(data)
            session = _session(data, device, drivers, batch_rows, split_rows)
            sql, params, how = FAMILIES[family](r)
            status, detail = _compare_case(session, connection, sql, params, how)
            counts[family][status] += 1
            if status == "refused":
                refusals[re.sub(r"'[^']*'", "'…'", detail.splitlines()[0])[:140]] += 1
            if status in ("wrong", "crash", "engine_raised", "answered_where_duckdb_raised") or (
                    verbose and status != "ok"):
                shown = _builder_sql(sql[0]) if how == "builder7" else sql
                reported.append({"seed": seed, "family": family, "status": status, "sql": shown, "how": how,
                                 "drivers": drivers, "batch_rows": batch_rows, "split_rows": split_rows,
                                 "why": detail[:2000]})
                print(f"{status.upper()} seed {seed} ({family}/{how}, drivers {drivers}, batch {batch_rows}, "
                      f"split {split_rows}): {shown}\n  {detail[:1500]}", flush=True)
            connection.close()
            session.close()
    return {"counts": {f: dict(c) for f, c in counts.items()}, "reported": reported,
            "refusals": dict(refusals.most_common())}


# ------------------------------------------------------------------------------------------------ threads
def run_threads(seeds: range, device: str, verbose: bool, queries_per_thread: int = 6) -> dict:
    """Each seed: one set of tables, 4 threads each issuing ``queries_per_thread`` queries of the SQL families,
    once against one shared Session and once with a Session each. A query's answer is compared with DuckDB's;
    an engine error must be the one the query raises run alone (on a fresh single-threaded Session); every
    thread must end within 300 s."""
    import traceback

    from duckdb_reference import rows_mismatch
    from gpu_engine.errors import GpuEngineError

    counts = collections.defaultdict(collections.Counter)
    reported = []
    for seed in seeds:
        r = random.Random(seed)
        data = tables(r)
        drivers, batch_rows, split_rows = r.choice([1, 2, 3]), r.choice([7, None]), r.choice([3, 7, 100])
        connection = _duckdb(data)
        work = []
        for _ in range(4 * queries_per_thread):
            sql, _params, _how = FAMILIES[r.choice(SQL_FAMILIES)](r)
            try:
                expected = connection.sql(sql).to_arrow_table()
            except Exception:  # noqa: BLE001 - DuckDB refuses it: not a concurrency case
                continue
            work.append((sql, expected))
        connection.close()
        alone = {}
        solo = _session(data, device, 1, batch_rows, split_rows)
        for sql, _ in work:
            try:
                solo.sql(sql)
                alone[sql] = None
            except GpuEngineError as error:
                alone[sql] = type(error).__name__
            except Exception as error:  # noqa: BLE001
                alone[sql] = f"crash {type(error).__name__}"
        solo.close()
        for mode in ("shared", "each"):
            shared = _session(data, device, drivers, batch_rows, split_rows) if mode == "shared" else None
            results = []
            lock = threading.Lock()

            def worker(index):
                session = shared or _session(data, device, drivers, batch_rows, split_rows)
                try:
                    for sql, expected in work[index::4]:
                        try:
                            actual = session.sql(sql)
                        except GpuEngineError as error:
                            got = type(error).__name__
                            status = "refused_as_alone" if got == alone[sql] else "error_not_alone"
                            with lock:
                                results.append((status, sql, f"{got}: {error}"))
                            continue
                        except Exception as error:  # noqa: BLE001
                            with lock:
                                results.append(("crash", sql, f"{type(error).__name__}: {error}\n"
                                                              f"{traceback.format_exc(limit=-8)}"))
                            continue
                        problem = rows_mismatch(actual, expected, rel_tol=1e-7)
                        with lock:
                            results.append(("ok", sql, "") if problem is None else ("wrong", sql, problem))
                finally:
                    if shared is None:
                        session.close()

            threads = [threading.Thread(target=worker, args=(i,), name=f"fuzz7-{seed}-{i}") for i in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(300)
            stuck = [thread.name for thread in threads if thread.is_alive()]
            if shared is not None:
                shared.close()
            family = f"threads-{mode}"
            for status, sql, detail in results:
                counts[family][status] += 1
                if status in ("wrong", "crash", "error_not_alone") or (verbose and status != "ok"):
                    reported.append({"seed": seed, "family": family, "status": status, "sql": sql,
                                     "why": detail[:2000]})
                    print(f"{status.upper()} seed {seed} ({family}, drivers {drivers}, batch {batch_rows}): {sql}\n"
                          f"  {detail[:1500]}", flush=True)
            if stuck:
                counts[family]["stuck"] += len(stuck)
                reported.append({"seed": seed, "family": family, "status": "stuck", "threads": stuck})
                print(f"STUCK seed {seed} ({family}): {stuck}", flush=True)
    return {"counts": {f: dict(c) for f, c in counts.items()}, "reported": reported, "refusals": {}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:100", help="start:stop")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--threads", action="store_true", help="run the concurrency family instead")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--verbose", action="store_true", help="print refusals and both-raised cases too")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))
    began, cpu_began = time.perf_counter(), time.process_time()
    if args.threads:
        result = run_threads(range(start, stop), args.device, args.verbose)
    else:
        result = run(range(start, stop), args.device, args.families.split(","), args.verbose)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    total = print_counts(result["counts"], 16,
                         f"  (seeds {start}:{stop} on {args.device}; {elapsed:.0f} s wall, {cpu:.0f} s CPU)")
    for why, n in list(result["refusals"].items())[:30]:
        print(f"  refused {n}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"commit": head_commit(), "seeds": [start, stop], "device": args.device,
                                        "threads": args.threads, "seconds": round(elapsed, 1),
                                        "cpu_seconds": round(cpu, 1), **result},
                                       indent=1, ensure_ascii=False, default=str))
    return 1 if total["wrong"] or total["crash"] or total["error_not_alone"] or total["stuck"] else 0


if __name__ == "__main__":
    sys.exit(main())
