"""Fuzz windows, grouping sets, set operations, the aggregate library, scalar edges and the newest forms against
DuckDB (fuzz hardening round 9).

Why: rounds 1-8 drew windows as one aggregate over a few frames (round 7), grouping sets as a wrapper of round 7's
aggregates, set operations only as ``UNION ALL`` of two scans, no statistical / bit / boolean / ordered-set
aggregate beside FILTER or DISTINCT, and no scalar at the edges of its domain (year 1 / 9999, leap days, decimal
overflow, unicode). Each seed draws round 8's tables ``t u w p q`` (``id, k, v, x, s, d, m decimal(9,2),
n decimal(18,4), i int32``) with, here, ``x`` holding NaN / -0.0 / infinities, ``s`` unicode and 300-character
strings, ``ts`` a timestamp column; ``t`` of 0, 1 or 2-16 rows (duplicates: few distinct values); a session of 1-3
drivers and batches of 7 rows or the default; in the grouping families half the sessions force the radix path
(``radix_aggregation_min_groups=1``).

Families:

* ``windows``: every ranking (row_number, rank, dense_rank, percent_rank, cume_dist, ntile), value (first_value,
  last_value, nth_value, lag, lead, IGNORE NULLS) and aggregate function over ROWS / RANGE / GROUPS frames
  (n PRECEDING / FOLLOWING, UNBOUNDED, CURRENT ROW, EXCLUDE CURRENT ROW / GROUP / TIES), PARTITION BY mixed-type
  keys with NULLs, ORDER BY ASC / DESC with NULLS FIRST / LAST over ints, doubles (NaN), decimals, dates, strings;
  named WINDOW, QUALIFY, ``row_number() <= k`` top-k; windows over GROUP BY. Value functions and ROWS frames are
  ordered by ``id`` last (the answer is then one); RANGE frames and ranks need no tie breaker.
* ``gsets``: GROUPING SETS / ROLLUP / CUBE (and a plain key beside them) over NULL keys, ``grouping()`` of 1-3
  keys, DISTINCT and FILTER aggregates, HAVING on keys, aggregates and ``grouping()``.
* ``setops``: UNION [ALL] / INTERSECT [ALL] / EXCEPT [ALL] of 2-3 branches, mixed numeric types across branches
  (int / decimal / double), strings, NULL literals, nested with parentheses, ORDER BY every column + LIMIT, inside
  a CTE read twice.
* ``aggs``: stddev/var (samp, pop), covar, corr, regr_*, median, quantile_cont/disc (plain and WITHIN GROUP),
  string_agg with ORDER BY, bool_and/or, bit_and/or/xor, count_if, product, arg_min/max and mode (ties: the
  engine's value must be one of the tied values: status ``wrong`` otherwise), approx_count_distinct (within 10% or
  2 of the exact count); DISTINCT and FILTER on each; all-NULL groups; empty input.
* ``scalars``: string functions on empty / unicode / long strings; date_trunc / date_part / date_diff / strftime /
  make_date / date arithmetic on year 1, 9999, leap days; TRY_CAST among strings, numbers, dates, timestamps;
  decimal arithmetic near overflow; integer overflow; division by zero; ``//`` and ``%`` with negatives.
* ``newforms``: EXISTS / IN as values and under OR / NOT in SELECT / WHERE / HAVING, row comparisons, LIKE with a
  column pattern, TRY().

    python -m bench.fuzz_round9 --seeds 0:300 [--device cuda-sim] [--families windows,aggs] [--out F]

Prints every wrong case, crash, engine error where DuckDB answered, or answer where DuckDB raised; then counts per
family and status, and the refusals per family. Exits 1 when any case was wrong or crashed. Comparison:
bench/fuzz_round5._compare (multisets, floats to 1e-7); sessions: bench/fuzz_round7.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import random
import sys
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.fuzz_round5 import _compare  # noqa: E402 (after the path it needs)
from bench.fuzz_round7 import _duckdb, _session  # noqa: E402
from bench.fuzz_round8 import NAMES, tables as round8_tables  # noqa: E402
from bench.sql_fuzz import REPORTED_STATUSES, family_fuzz_main, record_family_outcome  # noqa: E402

LONG = "ab" * 150
EDGE_STRINGS = ["", "é", "ß", "日本語", "😀x", LONG, "A" * 299 + "é", " ", "a_b%c", "Ω"]
EDGE_DOUBLES = [float("nan"), -0.0, float("inf"), float("-inf"), 1e308, -1e-308]
TIMESTAMPS = [datetime.datetime(2024, 2, 29, 23, 59, 59), datetime.datetime(2024, 3, 1, 0, 0),
              datetime.datetime(1969, 12, 31, 12, 0), datetime.datetime(2000, 1, 1, 0, 0, 0, 1)]


def tables(rng: random.Random) -> dict:
    """Round 8's tables; ``t`` one row a tenth of the time; ``x`` with NaN / -0.0 / infinities, ``s`` with unicode
    and long strings (each value a fifth of the time); ``ts`` a timestamp column."""
    import pyarrow as pa

    out = round8_tables(rng)
    if rng.random() < 0.1:
        out["t"] = out["t"].slice(0, 1)
    for name, table in out.items():
        rows = table.num_rows
        x = [rng.choice(EDGE_DOUBLES) if value is not None and rng.random() < 0.2 else value
             for value in table.column("x").to_pylist()]
        s = [rng.choice(EDGE_STRINGS) if value is not None and rng.random() < 0.2 else value
             for value in table.column("s").to_pylist()]
        table = table.set_column(table.schema.get_field_index("x"), "x", pa.array(x, pa.float64()))
        table = table.set_column(table.schema.get_field_index("s"), "s", pa.array(s, pa.string()))
        ts = [None if rng.random() < 0.15 else rng.choice(TIMESTAMPS) for _ in range(rows)]
        out[name] = table.append_column("ts", pa.array(ts, pa.timestamp("us")))
    return out


# ------------------------------------------------------------------------------------------------ windows
PARTITIONS = ["", "", "PARTITION BY k ", "PARTITION BY s ", "PARTITION BY k, s ", "PARTITION BY d ",
              "PARTITION BY m ", "PARTITION BY x ", "PARTITION BY i, d ", "PARTITION BY v % 2 ",
              "PARTITION BY k IS NULL "]
ORDER_KEYS = ["v", "x", "m", "d", "s", "ts", "n", "k"]


def _bound(r: random.Random, side: str, offset: str) -> str:
    return r.choice([f"{offset} {side}", "CURRENT ROW", f"UNBOUNDED {side}"])


def _frame(r: random.Random, key: str | None):
    """A frame clause (or "") and whether it needs ``id`` as the last ORDER BY key (ROWS frames, GROUPS frames
    over ties are one answer only with a total order... GROUPS only needs peers)."""
    kind = r.choice(["", "ROWS", "ROWS", "RANGE", "RANGE", "GROUPS"])
    if not kind:
        return "", False
    if kind == "RANGE" and key is not None:
        offset = {"v": r.choice(["0", "1", "3"]), "k": r.choice(["0", "1"]), "n": r.choice(["0.5", "2"]),
                  "m": r.choice(["1.5", "0.01", "100"]), "x": r.choice(["0.5", "2"]),
                  "d": r.choice(["INTERVAL 1 DAY", "INTERVAL '2 days'", "INTERVAL 1 MONTH"]),
                  "ts": r.choice(["INTERVAL 1 HOUR", "INTERVAL 2 DAY"])}.get(key)
    elif kind == "RANGE":
        offset = None
    else:
        offset = str(r.choice([0, 1, 2, 5]))
    if offset is None:  # RANGE without a single numeric key: UNBOUNDED / CURRENT ROW only
        start, end = r.choice([("UNBOUNDED PRECEDING", "CURRENT ROW"), ("CURRENT ROW", "UNBOUNDED FOLLOWING"),
                               ("UNBOUNDED PRECEDING", "UNBOUNDED FOLLOWING"), ("CURRENT ROW", "CURRENT ROW")])
    else:
        start, end = _bound(r, "PRECEDING", offset), _bound(r, "FOLLOWING", offset)
        if r.random() < 0.2:
            start, end = f"{offset} FOLLOWING", r.choice(["UNBOUNDED FOLLOWING", f"{offset} FOLLOWING"])
        if start == "UNBOUNDED FOLLOWING":
            start = "CURRENT ROW"
    exclude = r.choice(["", "", "", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES", " EXCLUDE NO OTHERS"])
    if r.random() < 0.15 and offset is not None and kind != "RANGE":
        return f"{kind} {offset} PRECEDING{exclude}", kind == "ROWS"
    return f"{kind} BETWEEN {start} AND {end}{exclude}", kind == "ROWS" or exclude in (" EXCLUDE CURRENT ROW",)


AGG_WINDOW = ["sum(v)", "count(v)", "count(*)", "avg(v)", "min(x)", "max(s)", "sum(m)", "max(d)", "min(ts)",
              "avg(m)", "sum(x)", "count(DISTINCT k)", "stddev_samp(v)", "bool_or(v > 0)", "string_agg(s, ',')",
              "max(n)", "min(v) FILTER (WHERE v > 0)", "sum(v) FILTER (WHERE s IS NOT NULL)"]


def _windows(r: random.Random):
    part = r.choice(PARTITIONS)
    key = r.choice(ORDER_KEYS)
    direction = r.choice(["", " ASC", " DESC"])
    nulls = r.choice(["", " NULLS FIRST", " NULLS LAST"])
    order = f"ORDER BY {key}{direction}{nulls}"
    total = f"{order}, id{r.choice(['', ' DESC'])}"
    numeric = key if key in ("v", "k", "n", "m", "x", "d", "ts") else None
    shape = r.random()
    k = r.choice([0, 1, 2, 3])
    if shape < 0.3:  # aggregate over a frame
        agg = r.choice(AGG_WINDOW)
        if "DISTINCT" in agg or "string_agg" in agg:  # DuckDB orders string_agg by frame order: needs a total order
            frame, _ = _frame(r, None)
            frame = frame.replace("RANGE", "ROWS").replace("GROUPS", "ROWS")
            return f"SELECT id, {agg} OVER ({part}{total} {frame}) AS w FROM t", None, "sql"
        frame, needs_total = _frame(r, numeric)
        spec = f"{part}{total if needs_total else order} {frame}"
        return f"SELECT id, {agg} OVER ({spec}) AS w FROM t", None, "sql"
    if shape < 0.45:  # ranking
        fns = r.sample(["row_number()", "rank()", "dense_rank()", "percent_rank()", "cume_dist()",
                        f"ntile({k + 1})"], r.randint(1, 3))
        cols = ", ".join(f"{fn} OVER ({part}{total if fn in ('row_number()', f'ntile({k + 1})') else order}) AS r{i}"
                         for i, fn in enumerate(fns))
        return f"SELECT id, {cols} FROM t", None, "sql"
    if shape < 0.65:  # value functions
        value = r.choice(["v", "s", "d", "m", "x", "ts", "n"])
        default = {"v": "-100", "s": "'zz'", "d": "DATE '1999-01-01'", "m": "0.5", "x": "1.5",
                   "ts": "TIMESTAMP '2001-01-01 00:00:00'", "n": "0"}[value]
        ignore = r.choice(["", "", " IGNORE NULLS"])
        frame, _ = _frame(r, None)
        frame = frame.replace("GROUPS", "ROWS").replace("RANGE", "ROWS")
        fn = r.choice([f"first_value({value}{ignore})", f"last_value({value}{ignore})",
                       f"nth_value({value}, {r.choice([1, 2, 3])}{ignore})",
                       f"lag({value}, {r.choice([1, 2])}, {default}{ignore})", f"lead({value}{ignore})",
                       f"lead({value}, {r.choice([0, 1, 3])}{ignore})", f"lag({value}{ignore})"])
        if fn.startswith(("lag", "lead")):
            frame = ""
        return f"SELECT id, {fn} OVER ({part}{total} {frame}) AS w FROM t", None, "sql"
    if shape < 0.75:  # top-k per partition
        return r.choice([
            f"SELECT * FROM (SELECT id, k, v, row_number() OVER ({part}{total}) AS rn FROM t) q WHERE rn <= {k}",
            f"SELECT id, k, v FROM t QUALIFY row_number() OVER ({part}{total}) <= {k}",
            f"SELECT id, k FROM t QUALIFY rank() OVER ({part}{order}) <= {k} AND v IS NOT NULL",
            f"SELECT id, v FROM (SELECT id, v, dense_rank() OVER ({part}{order}) AS dr FROM t) q WHERE dr < {k + 1}",
            f"SELECT id FROM t QUALIFY {k} >= row_number() OVER ({part}{total})",
        ]), None, "sql"
    if shape < 0.85:  # named windows
        frame, needs_total = _frame(r, numeric)
        agg = r.choice(AGG_WINDOW[:12])
        return r.choice([
            f"SELECT id, {agg} OVER w AS a, rank() OVER w AS rk FROM t WINDOW w AS ({part}{order})",
            f"SELECT id, {agg} OVER (w {frame}) AS a FROM t "
            f"WINDOW w AS ({part}{total if needs_total else order})",
            f"SELECT id, row_number() OVER w AS rn, lag(v) OVER w AS l FROM t WINDOW w AS ({part}{total}) "
            f"QUALIFY rn <= {k + 1}",
        ]), None, "sql"
    # windows over GROUP BY, two windows, a window under a filter
    agg = r.choice(AGG_WINDOW[:10])
    return r.choice([
        f"SELECT k, sum(v) AS sv, rank() OVER (ORDER BY sum(v){direction}{nulls}) AS rk, "
        f"sum(count(*)) OVER (ORDER BY k{nulls} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS c FROM t GROUP BY k",
        f"SELECT s, count(*) AS n, dense_rank() OVER (ORDER BY count(*) DESC) AS dr FROM t GROUP BY s",
        f"SELECT id, {agg} OVER ({part}{order}) AS a, {agg} OVER ({part}) AS b FROM t "
        f"WHERE {r.choice(['v > 0', 'k IS NULL', 'false', 'true', 's <> ' + repr('')])}",
        f"SELECT id, {agg} OVER () AS a, count(*) OVER ({part}) AS b FROM t",
        f"SELECT d, max(v) AS mv, lag(max(v), 1, -1) OVER (ORDER BY d{nulls}) AS l FROM t GROUP BY d",
    ]), None, "sql"


# ------------------------------------------------------------------------------------------------ grouping sets
GS_KEYS = ["k", "s", "d", "i", "v % 3", "m", "(x > 0)", "upper(s)"]  # sqlglot cannot read ROLLUP (k, x > 0)
GS_AGGS = ["count(*)", "count(v)", "sum(v)", "avg(x)", "min(s)", "max(d)", "sum(m)", "count(DISTINCT v)",
           "count(DISTINCT s)", "sum(DISTINCT k)", "sum(v) FILTER (WHERE v > 0)", "count(*) FILTER (WHERE s IS NULL)",
           "avg(DISTINCT m)", "max(x) FILTER (WHERE k = 1)", "count(DISTINCT d) FILTER (WHERE v <> 0)",
           "string_agg(DISTINCT s, ',' ORDER BY s)", "median(v)", "bool_and(v > -5)"]


def _gsets(r: random.Random):
    keys = r.sample(GS_KEYS, r.randint(1, 3))
    named = [f"{key} AS g{index}" for index, key in enumerate(keys)]
    wrap = r.choice(["ROLLUP", "CUBE", "GROUPING SETS", "GROUPING SETS", "mixed"])
    if wrap == "GROUPING SETS":
        pool = ["(" + ", ".join(keys) + ")", "()"] + [f"({key})" for key in keys]
        if len(keys) > 1:
            pool.append(f"({keys[-1]}, {keys[0]})")
        group = f"GROUPING SETS ({', '.join(r.choice(pool) for _ in range(r.randint(1, 4)))})"
    elif wrap == "mixed" and len(keys) > 1:
        group = f"{keys[0]}, {r.choice(['ROLLUP', 'CUBE'])} ({', '.join(keys[1:])})"
    else:
        group = f"{'ROLLUP' if wrap == 'mixed' else wrap} ({', '.join(keys)})"
    aggs = [f"{a} AS a{i}" for i, a in enumerate(r.sample(GS_AGGS, r.randint(1, 3)))]
    extra = []
    if r.random() < 0.7:
        chosen = r.sample(keys, r.randint(1, len(keys)))
        extra.append(f"grouping({', '.join(chosen)}) AS gr")
    if r.random() < 0.2:
        extra.append(f"grouping_id({', '.join(keys)}) AS gid")
    having = r.choice(["", "", "", " HAVING count(*) > 1", f" HAVING grouping({keys[0]}) = 0",
                       f" HAVING {keys[0]} IS NULL", " HAVING sum(v) IS NOT NULL OR count(*) = 0",
                       f" HAVING grouping({keys[0]}) = 1 OR count(DISTINCT v) >= 1"])
    source = r.choice(["t", "t", "t", "t WHERE v > 100", "(SELECT * FROM t UNION ALL SELECT * FROM u) q",
                       "(SELECT * FROM t WHERE k IS NULL) q"])
    text = f"SELECT {', '.join(named + extra + aggs)} FROM {source} GROUP BY {group}{having}"
    if r.random() < 0.1:
        text = f"SELECT count(*) AS groups, count(a0) AS filled FROM ({text}) z"
    return text, None, "sql"


# ------------------------------------------------------------------------------------------------ set operations
BRANCH_COLUMNS = [  # two columns each: mixed numeric types across branches, strings, NULL literals
    ("k", "s"), ("v", "s"), ("m", "s"), ("x", "s"), ("i", "s"), ("n", "upper(s)"), ("NULL", "s"), ("k", "NULL"),
    ("v + 0.5", "s"), ("CAST(k AS DOUBLE)", "lower(s)"), ("1", "'a'"),
]


def _branch(r: random.Random) -> str:
    table = r.choice(NAMES)
    a, b = r.choice(BRANCH_COLUMNS)
    where = r.choice(["", "", f" WHERE v > {r.choice([-1, 0, 2])}", " WHERE s IS NOT NULL", " WHERE k IS NULL",
                      " WHERE false"])
    return f"SELECT {a} AS a, {b} AS b FROM {table}{where}"


SETOPS = ["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]


def _setop_expr(r: random.Random, depth: int = 0) -> str:
    left = _branch(r) if depth > 0 or r.random() < 0.6 else f"({_setop_expr(r, depth + 1)})"
    right = _branch(r) if depth > 0 or r.random() < 0.7 else f"({_setop_expr(r, depth + 1)})"
    return f"{left} {r.choice(SETOPS)} {right}"


def _setops(r: random.Random):
    body = _setop_expr(r)
    shape = r.random()
    if shape < 0.45:
        return body, None, "sql"
    if shape < 0.65:
        order = f"a{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}, " \
                f"b{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}"
        return f"{body} ORDER BY {order} LIMIT {r.choice([0, 1, 2, 5])}{r.choice(['', ' OFFSET 1'])}", None, "sql"
    if shape < 0.85:  # a CTE read twice
        return r.choice([
            f"WITH c AS ({body}) SELECT x.a, y.b FROM c x JOIN c y ON x.a = y.a",
            f"WITH c AS ({body}) SELECT count(*) AS n, count(a) AS na FROM c UNION ALL SELECT count(DISTINCT b), "
            f"count(b) FROM c",
            f"WITH c AS ({body}) SELECT a, b FROM c EXCEPT SELECT a, b FROM c WHERE a IS NULL",
            f"WITH c AS ({body}) SELECT b, count(*) AS n FROM c GROUP BY b HAVING count(*) > (SELECT count(*) FROM c) / 4",
        ]), None, "sql"
    return f"SELECT a, count(*) AS n, max(b) AS mb FROM ({body}) z GROUP BY a", None, "sql"


# ------------------------------------------------------------------------------------------------ aggregates
STAT_AGGS = ["stddev_samp(v)", "stddev_pop(x)", "var_samp(m)", "var_pop(v)", "stddev(n)", "variance(k)",
             "covar_pop(v, n)", "covar_samp(k, v)", "corr(v, k)", "regr_slope(v, k)", "regr_intercept(v, k)",
             "regr_count(v, x)", "regr_r2(v, k)", "regr_avgx(v, m)", "regr_avgy(x, v)", "regr_sxx(v, k)",
             "regr_syy(v, k)", "regr_sxy(k, v)", "median(v)", "median(m)", "median(x)", "quantile_cont(v, 0.25)",
             "quantile_disc(s, 0.5)", "quantile_disc(d, 0.9)", "quantile_cont(m, 0.75)",
             "percentile_cont(0.25) WITHIN GROUP (ORDER BY v)", "percentile_disc(0.25) WITHIN GROUP (ORDER BY m DESC)",
             "percentile_cont(0.5) WITHIN GROUP (ORDER BY x)", "percentile_disc(0.3) WITHIN GROUP (ORDER BY d)",
             "string_agg(s, ',' ORDER BY s DESC NULLS FIRST, id)", "string_agg(s ORDER BY id)",
             "bool_and(v > 0)", "bool_or(s = '')", "bit_and(v)", "bit_or(k)", "bit_xor(i)", "count_if(v > 0)",
             "product(v)", "product(m)", "sum(x)", "avg(n)", "min(x)", "max(x)", "sum(v)", "avg(m)"]
PICKS = ["arg_min(s, v)", "arg_max(v, d)", "arg_min(id, x)", "arg_max(s, m)", "mode(v)", "mode(s)", "mode(d)"]
FILTERS = ["v > 0", "s IS NOT NULL", "k = 1", "x < 1", "d >= DATE '2024-02-29'", "v IS NULL"]


def _with_modifier(r: random.Random, agg: str) -> str:
    shape = r.random()
    if shape < 0.25 and "WITHIN" not in agg and "ORDER BY" not in agg and not agg.startswith(("quantile", "regr",
                                                                                             "covar", "corr", "median",
                                                                                             "percentile")):
        agg = agg.replace("(", "(DISTINCT ", 1)
    if shape > 0.6:
        agg = f"{agg} FILTER (WHERE {r.choice(FILTERS)})"
    return agg


def _aggs(r: random.Random):
    key = r.choice(["", "", "k", "s", "d", "v % 2", "k IS NULL"])
    source = r.choice(["t", "t", "t", "t WHERE v > 100", "(SELECT * FROM t WHERE v IS NULL) q",
                       "(SELECT * FROM t UNION ALL SELECT * FROM t) q", "u"])
    aggs = [_with_modifier(r, a) for a in r.sample(STAT_AGGS, r.randint(1, 4))]
    selected = ([f"{key} AS g"] if key else []) + [f"{a} AS a{i}" for i, a in enumerate(aggs)]
    group = f" GROUP BY {key}" if key else ""
    shape = r.random()
    if shape < 0.25:  # a pick among ties: membership
        pick = r.choice(PICKS)
        modifier = r.choice(["", "", f" FILTER (WHERE {r.choice(FILTERS)})"])
        return (f"SELECT {', '.join(selected + [f'{pick}{modifier} AS pick'])} FROM {source}{group}",
                (key, pick, modifier[len(' FILTER (WHERE '):-1] if modifier else None, source, selected), "member")
    if shape < 0.35:
        column = r.choice(["v", "s", "x", "d", "k", "m"])
        return (f"SELECT {', '.join(selected + [f'approx_count_distinct({column}) AS approx'])} FROM {source}{group}",
                column, "approx")
    having = r.choice(["", "", f" HAVING {aggs[0]} IS NOT NULL", " HAVING count(*) > 1"]) if key else ""
    return f"SELECT {', '.join(selected)} FROM {source}{group}{having}", None, "sql"


def _allowed_sql(text: str, drawn) -> str:
    """DuckDB's text giving, per group, the list of values the pick may take (in the column ``pick``)."""
    key, pick, condition, source, selected = drawn
    name, arguments = pick.split("(", 1)
    arguments = arguments[:-1].split(", ")
    condition = condition or "true"
    part = f"PARTITION BY {key}" if key else ""
    if name == "mode":
        value = arguments[0]
        inner = (f"SELECT *, count(*) FILTER (WHERE {condition}) OVER ({part}{', ' if key else 'PARTITION BY '}"
                 f"{value}) AS __c FROM {source}")
        inner = (f"SELECT *, max(CASE WHEN {value} IS NOT NULL AND ({condition}) THEN __c END) OVER ({part}) AS __mc "
                 f"FROM ({inner}) z1")
        allowed = f"list({value}) FILTER (WHERE {value} IS NOT NULL AND ({condition}) AND __c = __mc)"
    else:
        value, by = arguments
        best = "min" if name == "arg_min" else "max"
        inner = (f"SELECT *, {best}({by}) FILTER (WHERE ({condition}) AND {value} IS NOT NULL) OVER ({part}) AS __b "
                 f"FROM {source}")
        allowed = f"list({value}) FILTER (WHERE ({condition}) AND {value} IS NOT NULL AND {by} = __b)"
    group = f" GROUP BY {key}" if key else ""
    return f"SELECT {', '.join(selected)}, {allowed} AS pick FROM ({inner}) z{group}"


def _check_member(engine, allowed) -> str | None:
    """The engine's ``pick`` must be one of its group's allowed values (NULL when there are none); the other
    columns must equal DuckDB's."""
    from duckdb_reference import rows_mismatch

    names = [n for n in engine.column_names if n != "pick"]
    expected = allowed.select(names)
    problem = rows_mismatch(engine.select(names), expected, rel_tol=1e-7)
    if problem is not None:
        return problem
    key_of = (lambda row: repr(row.get("g"))) if "g" in names else (lambda row: "")
    lists = {key_of(row): row["pick"] for row in allowed.to_pylist()}
    for row in engine.to_pylist():
        choices = lists.get(key_of(row))
        if not choices:
            if row["pick"] is not None:
                return f"group {key_of(row)}: engine {row['pick']!r}, DuckDB none (NULL)"
        elif row["pick"] not in choices and not (isinstance(row["pick"], float) and row["pick"] != row["pick"]
                                                 and any(c != c for c in choices)):
            return f"group {key_of(row)}: engine {row['pick']!r} not among {choices[:10]!r}"
    return None


def _check_approx(engine, exact) -> str | None:
    from duckdb_reference import rows_mismatch

    names = [n for n in engine.column_names if n != "approx"]
    problem = rows_mismatch(engine.select(names), exact.select(names), rel_tol=1e-7)
    if problem is not None:
        return problem
    key_of = (lambda row: repr(row.get("g"))) if "g" in names else (lambda row: "")
    counts = {key_of(row): row["approx"] for row in exact.to_pylist()}
    for row in engine.to_pylist():
        want = counts.get(key_of(row))
        if want is None or abs(row["approx"] - want) > max(2, 0.1 * want):
            return f"group {key_of(row)}: approx_count_distinct {row['approx']} vs exact {want}"
    return None


# ------------------------------------------------------------------------------------------------ scalars
EDGE_DATES = ["DATE '0001-01-01'", "DATE '9999-12-31'", "DATE '2000-02-29'", "DATE '1900-02-28'",
              "DATE '2024-02-29'", "DATE '1970-01-01'", "DATE '2100-03-01'", "d"]
PARTS = ["year", "quarter", "month", "week", "day", "dow", "isodow", "doy", "yearweek", "isoyear", "decade",
         "century", "millennium", "epoch", "dayofmonth"]
TRUNCS = ["year", "quarter", "month", "week", "day", "decade", "century", "millennium"]
FORMATS = ["%Y-%m-%d", "%d/%m/%y", "%j", "%A %B", "%a %b %e", "%U %W %V", "%G-%u", "%Y%%", "%C %g", "%w"]


def _scalar(r: random.Random) -> str:
    kind = r.randrange(9)
    date = r.choice(EDGE_DATES)
    text = r.choice(["s", "s", "''", "'日本語'", "'😀x'", f"'{LONG}'", "'ß'", "upper(s)"])
    if kind == 0:
        return r.choice([f"length({text})", f"upper({text})", f"lower({text})", f"reverse({text})",
                         f"substr({text}, {r.choice([0, 1, 2, -1, -3, 300])}, {r.choice([1, 2, 0, 500])})",
                         f"left({text}, {r.choice([-1, 0, 2, 400])})", f"right({text}, {r.choice([-2, 0, 3])})",
                         f"lpad({text}, {r.choice([0, 3, 5])}, '日')", f"rpad({text}, 4, 'ab')",
                         f"strpos({text}, 'b')", f"instr({text}, '本')", f"replace({text}, 'a', 'ää')",
                         f"split_part({text}, 'b', {r.choice([1, 2, -1, 0])})", f"concat_ws('|', {text}, s, NULL)",
                         f"repeat({text}, {r.choice([0, 2])})", f"trim({text})", f"rtrim({text}, 'b')",
                         f"starts_with({text}, 'a')", f"ends_with({text}, 'b')", f"contains({text}, 'ab')",
                         f"ascii({text})", f"{text} || s", f"{text} < s", f"{text} LIKE '%b'",
                         f"length({text}) + strlen({text})", f"{text} ILIKE '%É%'", f"initcap({text})" if False else
                         f"lower(upper({text})) = lower({text})", f"md5({text})", f"hash({text}) = hash({text})",
                         f"prefix({text}, 'ab')", f"suffix({text}, 'ab')", f"string_split({text}, 'b')[1]"])
    if kind == 1:
        return r.choice([f"date_trunc('{r.choice(TRUNCS)}', {date})", f"date_part('{r.choice(PARTS)}', {date})",
                         f"extract({r.choice(['year', 'month', 'day', 'dow', 'doy', 'week', 'quarter'])} FROM {date})",
                         f"date_diff('{r.choice(['day', 'month', 'year', 'week', 'quarter'])}', {date}, "
                         f"{r.choice(EDGE_DATES)})",
                         f"date_sub('{r.choice(['day', 'month', 'year'])}', {date}, {r.choice(EDGE_DATES)})",
                         f"strftime({date}, '{r.choice(FORMATS)}')", f"last_day({date})", f"dayname({date})",
                         f"monthname({date})", f"{date} {r.choice(['+', '-'])} INTERVAL {r.choice([1, 12])} MONTH",
                         f"{date} - {r.choice([1, 366, -1])}", f"{date} + INTERVAL 1 YEAR",
                         f"yearweek({date})", f"isodow({date})", f"weekofyear({date})"])
    if kind == 2:
        return r.choice([f"make_date({r.choice(['1', '9999', '2024', '2023', 'k + 2000', 'v + 2000'])}, "
                         f"{r.choice(['2', '12', '1', '13', '0', 'k + 1'])}, {r.choice(['29', '28', '31', '1', '30', 'k'])})",
                         f"make_timestamp(2024, 2, 29, {r.choice(['23', 'k'])}, 59, {r.choice(['59.5', '0'])})"])
    if kind == 3:
        source = r.choice(["s", "v", "x", "m", "d", "ts", "'2024-02-30'", "'0001-01-01'", "' 12 '", "'1e3'",
                           "'-0'", "'NaN'", "'inf'", "'2024-02-29 12:00:00'", "'9999-12-31'", "'1.5'", "'127'",
                           "'128'", "n", "CAST(d AS VARCHAR)", "'true'"])
        target = r.choice(["INTEGER", "BIGINT", "TINYINT", "SMALLINT", "DOUBLE", "DECIMAL(5,2)", "DECIMAL(18,3)",
                           "DATE", "TIMESTAMP", "VARCHAR", "BOOLEAN", "DECIMAL(3,0)", "FLOAT", "HUGEINT"])
        return f"{r.choice(['TRY_CAST', 'TRY_CAST', 'CAST'])}({source} AS {target})"
    if kind == 4:  # decimal near overflow
        return r.choice(["n * 100000", "n * n", "m * 10000000", "CAST(n AS DECIMAL(18,4)) * 1000000",
                         "n + 99999999999999.9999", "CAST(m * 1000 AS DECIMAL(9,2))", "n * 1000000000000000000",
                         "m * n * n", "CAST(n AS DECIMAL(38,4)) * n * n", "-n - 99999999999999.9999",
                         "CAST(n * 10 AS DECIMAL(18,4))", "m / 0.0001", "n / 3", "round(n, -2)", "abs(n) * 100000"])
    if kind == 5:  # integer overflow, division by zero
        return r.choice(["v * 9223372036854775807", "v + 9223372036854775807", "id - 9223372036854775807 - 2",
                         "CAST(v AS INTEGER) * 2147483647", "CAST(v AS TINYINT) * 100", "-CAST(-128 + id AS TINYINT)",
                         "v / 0", "v // 0", "v % 0", "x / 0", "m / 0", "v / k", "v // k", "v % k",
                         "TRY(v // k)", "TRY(v * 9223372036854775807)", "abs(CAST(-2147483648 AS INTEGER) + id * 0)"])
    if kind == 6:  # // and % with negatives, doubles
        left = r.choice(["v", "-v", "(v - 3)", "x", "m", "-7", "7"])
        right = r.choice(["2", "(-2)", "3", "(-3)", "k", "(k - 2)", "1.5", "(-0.5)", "x"])
        return f"{left} {r.choice(['//', '%', '/'])} {right}"
    if kind == 7:  # NaN / -0.0 / infinities
        return r.choice(["x = 0", "x < 0", "x = 'NaN'::DOUBLE", "x > 1e300", "CAST(x AS VARCHAR)", "-x",
                         "x IS NAN" if False else "isnan(x)", "isinf(x)", "sign(x)", "greatest(x, 0)",
                         "least(x, 1)", "CAST(x AS BIGINT)", "TRY_CAST(x AS INTEGER)", "round(x, 1)", "floor(x)",
                         "x + 1 > x", "abs(x)", "sqrt(x)", "ln(x)"])
    return r.choice(["ts + INTERVAL 1 DAY", "date_trunc('hour', ts)", "date_part('epoch', ts)",
                     "strftime(ts, '%Y-%m-%d %H:%M:%S.%f')", "date_diff('second', ts, TIMESTAMP '2024-03-01')",
                     "CAST(ts AS DATE)", "ts - INTERVAL 1 MONTH", "epoch_ms(ts)", "date_trunc('minute', ts)"])


def _scalars(r: random.Random):
    exprs = [f"{_scalar(r)} AS e{i}" for i in range(r.randint(1, 3))]
    where = r.choice(["", "", "", " WHERE v <> 0", f" WHERE {_scalar(r)} IS NOT NULL"])
    if r.random() < 0.1:  # constants alone, no FROM (each column of t read as its value in one row)
        return f"SELECT {', '.join(exprs)} FROM (SELECT * FROM t LIMIT 1) z", None, "sql"
    return f"SELECT id, {', '.join(exprs)} FROM t{where}", None, "sql"


# ------------------------------------------------------------------------------------------------ newest forms
def _atom(r: random.Random, outer: str = "t") -> str:
    inner = r.choice(["u", "w", "p"])
    col = r.choice(["k", "v"])
    return r.choice([
        f"EXISTS (SELECT 1 FROM {inner} WHERE {inner}.{col} = {outer}.{col})",
        f"NOT EXISTS (SELECT 1 FROM {inner} WHERE {inner}.k = {outer}.k AND {inner}.v > {outer}.v)",
        f"{outer}.{col} IN (SELECT {col} FROM {inner})", f"{outer}.{col} NOT IN (SELECT {col} FROM {inner})",
        f"{outer}.s IN (SELECT s FROM {inner} WHERE v > 0)", f"EXISTS (SELECT 1 FROM {inner} WHERE v > 5)",
        f"({outer}.k, {outer}.v) = ({r.choice(['1, 2', 'v, k', 'k, k'])})",
        f"({outer}.k, {outer}.s) IS NOT DISTINCT FROM (1, 'a')",
        f"({outer}.k, {outer}.v) IN ((1, 2), (0, -1), (NULL, 5))",
        f"{outer}.s LIKE {outer}.s", f"'a' || {outer}.s LIKE {r.choice(['s', 'upper(s)', 's || ' + repr('%')])}",
        f"{outer}.s NOT ILIKE coalesce({outer}.s, '%')",
        f"TRY(CAST({outer}.s AS INTEGER)) > 0", f"TRY({outer}.v // {outer}.k) = 1",
        f"{outer}.v > 0",
    ])


def _newforms(r: random.Random):
    glue = r.choice([" OR ", " AND ", " OR NOT "])
    pred = f"{_atom(r)}{glue}{_atom(r)}" if r.random() < 0.6 else _atom(r)
    if r.random() < 0.2:
        pred = f"NOT ({pred})"
    shape = r.random()
    if shape < 0.35:
        return f"SELECT id, {pred} AS p FROM t", None, "sql"
    if shape < 0.6:
        return f"SELECT id, v FROM t WHERE {pred}", None, "sql"
    if shape < 0.75:
        return f"SELECT id, CASE WHEN {pred} THEN 'y' ELSE 'n' END AS c FROM t", None, "sql"
    if shape < 0.9:
        return (f"SELECT k, count(*) AS n, count(*) FILTER (WHERE {pred}) AS f FROM t GROUP BY k "
                f"HAVING {r.choice(['count(*) > 0', 'max(v) IN (SELECT v FROM u)', 'NOT EXISTS (SELECT 1 FROM w WHERE w.k = t.k)', 'sum(v) > 0 OR k IS NULL'])}"), None, "sql"
    return f"SELECT {pred} AS p, count(*) AS n FROM t GROUP BY 1", None, "sql"


# ------------------------------------------------------------------------------------------------ compare
def _compare_case(session, connection, sql, params, how):
    """bench.fuzz_round5._compare, with ``how`` "member" (a pick among ties) and "approx" (an estimate)."""
    from gpu_engine.errors import ExecutionError, GpuEngineError

    if how == "sql":
        try:
            return _compare(session, connection, sql, params, how)
        except (OverflowError, ValueError):  # a date or timestamp Python cannot hold (year 0, 10000): as text
            return _compare_as_text(session, connection, sql)
    try:
        reference = (connection.sql(_allowed_sql(sql, params)) if how == "member" else
                     connection.sql(sql.replace(f"approx_count_distinct({params})", f"count(DISTINCT {params})")))
        reference = reference.to_arrow_table()
        duckdb_error = None
    except Exception as error:  # noqa: BLE001
        reference, duckdb_error = None, error
    try:
        actual = session.sql(sql)
    except GpuEngineError as error:
        text = f"{type(error).__name__}: {error}"
        if duckdb_error is not None:
            return "both_raised", f"DuckDB: {duckdb_error}; engine: {text}"
        return ("engine_raised" if isinstance(error, ExecutionError) else "refused"), text
    except Exception as error:  # noqa: BLE001 - a raw exception is what the fuzz looks for
        return "crash", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-8)}"
    if duckdb_error is not None:
        return "answered_where_duckdb_raised", f"DuckDB: {duckdb_error}"
    problem = _check_member(actual, reference) if how == "member" else _check_approx(actual, reference)
    return ("ok", "") if problem is None else ("wrong", problem)


def _compare_as_text(session, connection, sql):
    """Both answers with every column cast to text (DuckDB's and the engine's dates past year 9999 or before 1)."""
    import pyarrow as pa

    from duckdb_reference import rows_mismatch

    def text(table):
        return table.cast(pa.schema([(name, pa.string()) for name in table.column_names]))

    expected = connection.sql(sql).to_arrow_table()
    actual = session.sql(sql)
    if actual.schema.types != expected.schema.types:
        return "wrong", f"types differ: engine {actual.schema.types}, DuckDB {expected.schema.types}"
    problem = rows_mismatch(text(actual), text(expected))
    return ("ok", "") if problem is None else ("wrong", problem)


FAMILIES = {"windows": _windows, "gsets": _gsets, "setops": _setops, "aggs": _aggs, "scalars": _scalars,
            "newforms": _newforms}
RADIX_FAMILIES = ("gsets", "aggs", "newforms")


def run(seeds: range, device: str, families: list[str], verbose: bool) -> dict:
    result = {"counts": collections.defaultdict(collections.Counter), "reported": [],
              "refusals": collections.defaultdict(collections.Counter)}
    for seed in seeds:
        r = random.Random(seed)
        drivers, batch_rows = r.choice([1, 2, 3]), r.choice([7, None])
        split_rows = r.choice([3, 7, 100])
        for family in families:
            data = tables(r)
            radix = family in RADIX_FAMILIES and r.random() < 0.5
            sql, params, how = FAMILIES[family](r)
            connection = _duckdb(data)
            session = _session(data, device, drivers, batch_rows, split_rows)
            if radix:
                session.config = session.config.with_overrides(radix_aggregation_min_groups=1)
            try:
                status, detail = _compare_case(session, connection, sql, params, how)
            except Exception as error:  # noqa: BLE001 - the harness's own failure: shown, counted
                status, detail = "harness", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-4)}"
            finally:
                connection.close()
                session.close()
            case = {"seed": seed, "family": family, "sql": sql, "how": how, "drivers": drivers,
                    "batch_rows": batch_rows, "split_rows": split_rows, "radix": radix}
            record_family_outcome(result, case, status, detail, verbose,
                                  REPORTED_STATUSES)
    return {"counts": {f: dict(c) for f, c in result["counts"].items()}, "reported": result["reported"],
            "refusals": {f: dict(c.most_common()) for f, c in result["refusals"].items()}}


def main(argv=None) -> int:
    return family_fuzz_main(argv, __doc__.splitlines()[0], FAMILIES, run, refusals_shown=8)


if __name__ == "__main__":
    sys.exit(main())
