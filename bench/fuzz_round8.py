"""Fuzz joins, bind parameters, grouping, Parquet row-group pruning and memory caps / cancellation against DuckDB
(fuzz hardening round 8).

Why: rounds 1-7 drew joins mostly as two-table equi joins over int keys, parameters only in round 5's 40 fixed
texts, grouping over 0-2 small keys, Parquet through files of 1/2/100-row groups without filters that prune, and
never a memory cap or a cancelled query. Each seed draws ``t``, ``u``, ``w``, ``p``, ``q`` of round 7's shape
(``id, k, v, x, s, d, m decimal(9,2), n decimal(18,4)``) plus ``i`` (``k`` as int32), a session of 1-3 drivers
and batches of 7 rows or the default.

Families:

* ``joins``: inner / left / right / full / semi / anti joins, non-equi residuals, USING / NATURAL, self joins,
  cross joins with filters, keys that are expressions or of mixed types (int32 / int64 / decimal / double /
  string / date), NULL keys; under aggregation and ``ORDER BY <every output column> LIMIT n`` (ties: the rows
  kept are the same multiset whatever the tie order).
* ``graphs``: 3-5 tables joined in a comma FROM list by WHERE equalities (chains, stars, a cycle), one text
  per permutation of the FROM list (three drawn): each must equal DuckDB's answer.
* ``params``: ``Session.sql(text, params=...)`` with ``?`` / ``$n`` in WHERE, SELECT, IN lists, LIMIT, CASE,
  date arithmetic, NULL values and values needing coercion; and one prepared text run with 4 value sets, whose
  later runs of the same non-NULL value types must compile no kernel (``kernels_compiled`` 0, issue 29).
* ``grouping``: 1-5 keys of mixed types, keys that are expressions, high-cardinality keys over 50-1500 rows
  (with batches of 7 rows a third of the time), DISTINCT aggregates over NULLs, holistic aggregates (median,
  quantile_cont/disc, mode, string_agg ordered) beside sum / count / avg / min / max.
* ``parquet``: a table written with pyarrow (row groups of 1-1000 rows, empty row groups, dictionary or plain,
  statistics or none, sorted / clustered / NULL-only row groups) read through ``Session.register(path)``
  with filters at row-group min/max edges, ``IS [NOT] NULL``, IN lists, ranges; DuckDB reads the same file.
* ``memcap``: a query of the families above under ``query_memory_limit_bytes`` of 4 KB - 4 MB must equal
  DuckDB or raise ``MemoryCapExceeded``; a query over a 20,000-row self join with a timeout of 0.1-20 ms, or
  cancelled from another thread after 1-200 ms (``Task.cancel``), may answer (equal DuckDB) or raise
  ``TimeoutError`` / ``TaskCancelled``; then every driver of it must end within 120 s and the same Session
  answer a follow-up query as DuckDB does.

    python -m bench.fuzz_round8 --seeds 0:300 [--device cuda-sim] [--families joins,params] [--out F]

Prints every wrong case, crash, engine error where DuckDB answered, or answer where DuckDB raised; then counts
per family and status. Exits 1 when any case was wrong or crashed. Comparison: bench/fuzz_round5._compare
(multisets, floats to 1e-7); tables and sessions: bench/fuzz_round7.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import decimal
import itertools
import json
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.fuzz_round5 import _compare  # noqa: E402 (after the path it needs)
from bench.fuzz_round7 import DATES, STRINGS, _duckdb, _session, _table  # noqa: E402
from bench.sql_fuzz import head_commit, print_counts  # noqa: E402

NAMES = ("t", "u", "w", "p", "q")


def tables(rng: random.Random, big: bool = False) -> dict:
    """t (0-16 rows; 50-1500 with ``big``), u, w, p, q (0-8 rows, each empty a fifth of the time), each with
    ``i``: ``k`` as int32 (a key of another width)."""
    import pyarrow as pa

    out = {}
    for name in NAMES:
        if name == "t":
            rows = rng.randint(50, 1500) if big else (0 if rng.random() < 0.1 else rng.randint(1, 16))
        else:
            rows = 0 if rng.random() < 0.2 else rng.randint(1, 8)
        table = _table(rng, rows)
        if big and name == "t":  # high-cardinality keys: v over a wide range, s of many values
            table = table.set_column(2, "v", pa.array([None if rng.random() < 0.05 else rng.randint(-rows, rows)
                                                       for _ in range(rows)], pa.int64()))
            table = table.set_column(4, "s", pa.array([None if rng.random() < 0.05 else f"s{rng.randint(0, rows)}"
                                                       for _ in range(rows)], pa.string()))
        out[name] = table.append_column("i", table.column("k").cast(pa.int32()))
    return out


# ------------------------------------------------------------------------------------------------ joins
KEY_PAIRS = [  # (left column, right column): equal types, other widths, int vs decimal / double, strings, dates
    ("k", "k"), ("i", "k"), ("k", "i"), ("v", "v"), ("i", "v"), ("k", "m"), ("m", "n"), ("v", "x"), ("x", "m"),
    ("s", "s"), ("d", "d"), ("m", "m"), ("n", "v"),
]


def _key(r: random.Random, a: str, b: str) -> str:
    left, right = r.choice(KEY_PAIRS)
    shape = r.random()
    if shape < 0.7:
        return f"{a}.{left} = {b}.{right}"
    if shape < 0.8:
        return f"{a}.k + 1 = {b}.k"
    if shape < 0.85:
        return f"lower({a}.s) = lower({b}.s)"
    if shape < 0.9:
        return f"{a}.d = {b}.d + 1"
    if shape < 0.95:
        return f"{a}.k = {b}.k AND {a}.s = {b}.s"
    return f"coalesce({a}.k, -1) = coalesce({b}.k, -1)"


def _residual(r: random.Random, a: str, b: str) -> str:
    return r.choice(["", "", "", f" AND {a}.v < {b}.v", f" AND {a}.x <> {b}.x", f" AND {b}.s IS NOT NULL",
                     f" AND {a}.v + {b}.v > 0", f" AND ({a}.d < {b}.d OR {b}.v IS NULL)", f" AND {a}.m >= {b}.n"])


def _joins(r: random.Random):
    kind = r.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "SEMI JOIN", "ANTI JOIN", "USING", "NATURAL",
                     "self", "cross", "LEFT JOIN", "FULL JOIN"])
    right = r.choice(["u", "w", "p"])
    cols_l = ["t.id", "t.k", "t.v", "t.s", "t.d", "t.m"]
    cols_r = [f"{right}.id", f"{right}.k", f"{right}.v", f"{right}.x", f"{right}.s"]
    if kind in ("JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"):
        source = f"t {kind} {right} ON {_key(r, 't', right)}{_residual(r, 't', right)}"
    elif kind in ("SEMI JOIN", "ANTI JOIN"):
        source = f"t {kind} {right} ON {_key(r, 't', right)}{_residual(r, 't', right)}"
        cols_r = []
    elif kind == "USING":
        using = r.choice(["k", "s", "k, s", "d", "v"])
        source = f"t {r.choice(['JOIN', 'LEFT JOIN', 'FULL JOIN', 'RIGHT JOIN'])} {right} USING ({using})"
        cols_l = [c.strip() for c in using.split(",")] + ["t.id", "t.v"]
        cols_r = [f"{right}.id", f"{right}.x"]
    elif kind == "NATURAL":
        source = f"(SELECT id AS tid, k, s, v FROM t) a NATURAL {r.choice(['', 'LEFT ', 'FULL '])}JOIN " \
                 f"(SELECT id AS rid, k, s FROM {right}) b"
        cols_l, cols_r = ["tid", "k", "s", "v"], ["rid"]
    elif kind == "self":
        source = f"t AS a {r.choice(['JOIN', 'LEFT JOIN', 'FULL JOIN'])} t AS b ON {_key(r, 'a', 'b')}" \
                 f"{r.choice(['', ' AND a.id < b.id', ' AND a.id <> b.id', ' AND a.v <= b.v'])}"
        cols_l, cols_r = ["a.id", "a.k", "a.s"], ["b.id", "b.v", "b.d"]
    else:
        source = f"t CROSS JOIN {right}"
        cols_l, cols_r = ["t.id", "t.k", "t.v"], [f"{right}.id", f"{right}.v"]
        source += f" WHERE {r.choice(['t.v > ' + right + '.v', 't.k = ' + right + '.k OR t.v IS NULL', 't.s < ' + right + '.s', 't.d BETWEEN ' + right + '.d - 2 AND ' + right + '.d'])}"
    where = "" if "WHERE" in source else r.choice(["", "", " WHERE t.v IS NOT NULL", " WHERE t.k <> 2"])
    if where and kind in ("NATURAL", "self"):
        where = ""
    cols = r.sample(cols_l + cols_r, r.randint(1, min(4, len(cols_l + cols_r))))
    shape = r.random()
    if shape < 0.35:
        return f"SELECT {', '.join(cols)} FROM {source}{where}", None, "sql"
    if shape < 0.7:
        key = cols[0]
        aggs = r.sample([f"count(*)", f"count({cols[-1]})", "sum(" + (cols_r or cols_l)[-1 if cols_r else 2] + ")",
                         f"min({cols[-1]})", f"max({cols[0]})", f"count(DISTINCT {cols[-1]})"], r.randint(1, 3))
        aggs = [a for a in aggs if not re.match(r"sum\([^)]*\.(s|d)\)", a)]
        keyless = r.random() < 0.25
        select = ", ".join(aggs or ["count(*)"]) if keyless else f"{key}, " + ", ".join(aggs or ["count(*)"])
        group = "" if keyless else f" GROUP BY {key}"
        having = r.choice(["", "", " HAVING count(*) > 1"]) if not keyless else ""
        return f"SELECT {select} FROM {source}{where}{group}{having}", None, "sql"
    # ORDER BY every output column (ties broken by all of them) then LIMIT: the kept rows are one multiset
    order = ", ".join(f"{i + 1}{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}"
                      for i in range(len(cols)))
    return (f"SELECT {', '.join(cols)} FROM {source}{where} ORDER BY {order} LIMIT {r.choice([0, 1, 2, 3, 5, 10])}"
            f"{r.choice(['', '', ' OFFSET 1', ' OFFSET 3'])}"), None, "sql"


def _graphs(r: random.Random):
    """3-5 tables in a comma FROM list joined by WHERE conjuncts (a chain, a star or a cycle, keys of mixed
    types), 1-2 filters; three permutations of the FROM list, each compared with DuckDB."""
    count = r.randint(3, 5)
    names = list(NAMES[:count])
    edges = []
    shape = r.choice(["chain", "star", "cycle"])
    for index in range(1, count):
        a = names[index - 1] if shape != "star" else names[0]
        edges.append((a, names[index]))
    if shape == "cycle":
        edges.append((names[-1], names[0]))
    conjuncts = []
    for a, b in edges:
        left, right = r.choice(KEY_PAIRS[:10] + [("k", "k")] * 4)
        conjuncts.append(f"{a}.{left} = {b}.{right}")
    for _ in range(r.choice([0, 1, 2])):
        a = r.choice(names)
        conjuncts.append(r.choice([f"{a}.v > {r.choice([-2, 0, 3])}", f"{a}.s IS NOT NULL", f"{a}.d >= DATE '2024-01-01'",
                                   f"{a}.x < 1", f"{names[0]}.v <> {names[-1]}.v"]))
    r.shuffle(conjuncts)
    shape = r.random()
    if shape < 0.4:
        select = "count(*) AS n, " + ", ".join(f"sum({a}.v) AS s{i}" for i, a in enumerate(names[:2]))
        tail = ""
    elif shape < 0.7:
        select = f"{names[0]}.k AS g, count(*) AS n, max({names[-1]}.id) AS m"
        tail = " GROUP BY 1"
    else:
        select = ", ".join(f"{a}.id AS {a}id" for a in names)
        tail = ""
    perms = list(itertools.permutations(names))
    r.shuffle(perms)
    texts = [f"SELECT {select} FROM {', '.join(perm)} WHERE {' AND '.join(conjuncts)}{tail}" for perm in perms[:3]]
    return texts, None, "perms"


# ------------------------------------------------------------------------------------------------ parameters
def _value(r: random.Random, kind: str, null: float = 0.25):
    if r.random() < null:
        return None
    return {"int": lambda: r.choice([0, 1, 2, -1, 3, 10, -7]),
            "small": lambda: r.choice([0, 1, 2, 3, 5]),
            "float": lambda: r.choice([0.5, 1.0, -1.25, 2.0, 1e3]),
            "dec": lambda: decimal.Decimal(r.choice(["1.50", "0", "-1.25", "3.5", "99999.99", "0.001"])),
            "str": lambda: r.choice(STRINGS[:6] + ["%a%", "_"]),
            "datestr": lambda: r.choice(["2024-02-29", "2024-01-31", "2000-01-01"]),
            "date": lambda: r.choice(DATES),
            "bool": lambda: r.choice([True, False])}[kind]()


PARAM_FORMS = [
    ("SELECT id, v FROM t WHERE v = ?", ["int"]),
    ("SELECT id FROM t WHERE v > ? AND k <= ?", ["float", "dec"]),
    ("SELECT id, v + ? AS a, ? * x AS b FROM t", ["int", "dec"]),
    ("SELECT id FROM t WHERE m > ?", ["float"]),
    ("SELECT id FROM t WHERE m BETWEEN ? AND ?", ["dec", "int"]),
    ("SELECT id FROM t WHERE n = ? OR n IS NULL", ["dec"]),
    ("SELECT id FROM t WHERE v IN (?, ?, ?)", ["int", "int", "int"]),
    ("SELECT id FROM t WHERE v NOT IN (?, 2)", ["int"]),
    ("SELECT id FROM t WHERE s IN (?, 'a') OR s = $2".replace("?", "$1"), ["str", "str"]),
    ("SELECT id FROM t WHERE d IN (?, ?)", ["date", "date"]),
    ("SELECT id FROM t WHERE d > ?", ["datestr"]),
    ("SELECT id FROM t ORDER BY id LIMIT ?", ["small"]),
    ("SELECT id FROM t ORDER BY id LIMIT ? OFFSET ?", ["small", "small"]),
    ("SELECT id, CASE WHEN v > $1 THEN $2 WHEN v IS NULL THEN $3 ELSE v END AS c FROM t", ["int", "int", "int"]),
    ("SELECT id, CASE k WHEN $1 THEN s ELSE $2 END AS c FROM t", ["int", "str"]),
    ("SELECT id, d + ? AS a FROM t", ["small"]),
    ("SELECT id, date_diff('day', ?, d) AS a FROM t", ["date"]),
    ("SELECT id FROM t WHERE d + ? > DATE '2024-02-28'", ["small"]),
    ("SELECT id, d - CAST(? AS DATE) AS a FROM t", ["datestr"]),
    ("SELECT id, d + INTERVAL (?) DAY AS a FROM t", ["small"]),
    ("SELECT k, count(*) AS n, sum(v) + ? AS s FROM t WHERE v <> ? GROUP BY k HAVING count(*) >= ?",
     ["dec", "int", "small"]),
    ("SELECT id, coalesce(v, $1, 0) AS a, nullif(k, $1) AS b FROM t", ["int"]),
    ("SELECT id FROM t WHERE (v > $1) IS NOT DISTINCT FROM $2", ["int", "bool"]),
    ("SELECT t.id, u.id AS uid FROM t JOIN u ON t.k = u.k AND t.v > ? WHERE u.v <> ?", ["int", "int"]),
    ("SELECT id FROM t WHERE v = (SELECT max(v) FROM u WHERE k <> ?)", ["int"]),
    ("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.v > ?)", ["int"]),
    ("SELECT ? AS a, ? AS b, id FROM t WHERE id < 3", ["str", "dec"]),
    ("SELECT count(*) AS n FROM t WHERE ? IS NULL OR v = ?", ["int", "int"]),
    ("SELECT id, substr(s, ?, ?) AS a FROM t", ["small", "small"]),
    ("SELECT id, x / ? AS a FROM t", ["float"]),
    ("SELECT id, m * ? AS a, m + ? AS b FROM t", ["dec", "dec"]),
    ("SELECT id, v // ? AS a FROM t", ["small"]),
    ("SELECT id FROM t WHERE s LIKE ?", ["str"]),
    ("SELECT id, v, sum(v) OVER (PARTITION BY k ORDER BY id) * ? AS w FROM t", ["int"]),
    ("SELECT k + $1 AS g, count(*) AS n FROM t GROUP BY k + $1", ["int"]),
    ("SELECT id FROM t WHERE k = $1 UNION ALL SELECT id FROM u WHERE k = $1", ["int"]),
    ("SELECT id, greatest(v, ?) AS g, least(m, ?) AS l FROM t", ["int", "dec"]),
    ("SELECT id FROM t WHERE v BETWEEN $2 AND $1", ["int", "int"]),
    ("SELECT id, CAST(? AS INTEGER) + v AS a FROM t", ["str"]),
    ("SELECT id FROM t WHERE k IN (SELECT k FROM u WHERE v > ?) AND v < ?", ["int", "int"]),
    ("SELECT id, ?::DATE + 1 AS a FROM t WHERE d >= ?::DATE", ["datestr", "datestr"]),
    ("SELECT id, ?::VARCHAR AS a, v + ?::INTEGER AS b FROM t", ["float", "small"]),
]


def _params(r: random.Random):
    text, kinds = r.choice(PARAM_FORMS)
    if "$" in text:
        count = max(int(n) for n in re.findall(r"\$(\d+)", text))
        kinds = kinds[:count]
    if r.random() < 0.35:  # one prepared text, four value sets
        runs = [[_value(r, kind, 0.15) for kind in kinds] for _ in range(4)]
        return text, runs, "reexec8"
    return text, [_value(r, kind) for kind in kinds], "params"


# ------------------------------------------------------------------------------------------------ grouping
GROUP_KEYS = ["k", "i", "v", "s", "d", "m", "n", "x", "k % 2", "upper(s)", "date_trunc('month', d)", "m * 2",
              "CASE WHEN v > 0 THEN 'p' WHEN v < 0 THEN 'n' END", "v IS NULL", "coalesce(s, 'none')", "length(s)",
              "year(d)", "id % 7", "x > 0"]
PLAIN = ["count(*)", "count(v)", "sum(v)", "avg(x)", "min(s)", "max(d)", "sum(m)", "avg(n)", "min(m)", "max(v)"]
DISTINCT = ["count(DISTINCT v)", "count(DISTINCT s)", "sum(DISTINCT v)", "avg(DISTINCT m)", "count(DISTINCT d)",
            "sum(DISTINCT k)", "count(DISTINCT x)"]
HOLISTIC = ["median(v)", "median(m)", "quantile_cont(x, 0.25)", "quantile_disc(v, 0.5)", "quantile_disc(s, 0.75)",
            "mode(k)", "string_agg(s, ',' ORDER BY s)", "string_agg(DISTINCT s, '|' ORDER BY s)", "median(d)",
            "arg_min(s, id)", "string_agg(CAST(v AS VARCHAR), ';' ORDER BY v DESC, id)"]


def _grouping(r: random.Random):
    keys = r.sample(GROUP_KEYS, r.randint(0 if r.random() < 0.1 else 1, 5))
    aggs = (r.sample(PLAIN, r.randint(0, 3)) + r.sample(DISTINCT, r.randint(0, 2))
            + r.sample(HOLISTIC, r.randint(0, 2)))
    aggs = [a for a in aggs if not (a == "mode(k)")] + (["mode(k)"] if "mode(k)" in aggs and "k" in keys else [])
    aggs = aggs or ["count(*)"]
    source = r.choice(["t", "t", "t", "(SELECT * FROM t WHERE v IS NOT NULL)", "t WHERE false",
                       "(SELECT t.* FROM t JOIN u ON t.k = u.k)"])
    select = ", ".join([f"{key} AS g{i}" for i, key in enumerate(keys)] + [f"{a} AS a{i}" for i, a in enumerate(aggs)])
    group = f" GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}" if keys else ""
    having = r.choice(["", "", "", " HAVING count(*) > 1", f" HAVING {aggs[0]} IS NOT NULL"]) if keys else ""
    text = f"SELECT {select} FROM {source}{group}{having}"
    if r.random() < 0.15:
        text = f"SELECT count(*) AS groups, count(a0) AS filled FROM ({text}) g"
    return text, None, "sql"


# ------------------------------------------------------------------------------------------------ parquet
def _write_parquet(r: random.Random, table, path: Path) -> dict:
    """Write ``table`` sorted / clustered / as drawn into row groups of 1-1000 rows, some empty, dictionary or plain,
    statistics or none; return what was drawn."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    order = r.choice(["none", "v", "k", "s", "d"])
    if order != "none":  # NULLs last (or first): NULL-only row groups at one end
        placement = r.choice(["at_end", "at_start"])
        table = table.sort_by([(order, "ascending", placement)])
    group_rows = r.choice([1, 3, 7, 50, 100, 1000])
    dictionary = r.choice([True, False, ["s"], ["k", "d"]])
    statistics = r.choice([True, True, False, ["v", "s"]])
    empty = r.random() < 0.3
    with pq.ParquetWriter(path, table.schema, use_dictionary=dictionary, write_statistics=statistics) as writer:
        if empty:
            writer.write_table(table.slice(0, 0))
        for start in range(0, table.num_rows, group_rows):
            writer.write_table(table.slice(start, group_rows))
            if empty and r.random() < 0.1:
                writer.write_table(table.slice(0, 0))
        if table.num_rows == 0 and not empty:
            writer.write_table(table)
    return {"order": order, "group_rows": group_rows, "dictionary": dictionary, "statistics": statistics,
            "empty_groups": empty}


def _parquet_filters(r: random.Random, table) -> str:
    """1-2 conjuncts (sometimes under OR) at the values' edges: min, max, one past, IS NULL, IN lists."""
    values = {name: sorted({v for v in table.column(name).to_pylist() if v is not None}) for name in ("v", "k", "s", "d")}

    def edge(name):
        present = values[name]
        if not present:
            return {"v": 0, "k": 1, "s": "a", "d": DATES[0]}[name]
        pick = r.choice([present[0], present[-1], r.choice(present)])
        if name in ("v", "k") and r.random() < 0.3:
            pick += r.choice([-1, 1])
        if name == "d" and r.random() < 0.3:
            pick += datetime.timedelta(days=r.choice([-1, 1]))
        return pick

    def literal(name, value):
        if name == "s":
            return "'" + value.replace("'", "''") + "'"
        if name == "d":
            return f"DATE '{value.isoformat()}'"
        return str(value) if value >= 0 else f"({value})"

    def conjunct():
        name = r.choice(["v", "v", "k", "s", "d"])
        shape = r.random()
        if shape < 0.5:
            return f"{name} {r.choice(['=', '<', '<=', '>', '>=', '<>'])} {literal(name, edge(name))}"
        if shape < 0.65:
            low, high = sorted([edge(name), edge(name)])
            return f"{name} BETWEEN {literal(name, low)} AND {literal(name, high)}"
        if shape < 0.8:
            return f"{name} IS {r.choice(['', 'NOT '])}NULL"
        return f"{name} {r.choice(['', 'NOT '])}IN ({', '.join(literal(name, edge(name)) for _ in range(r.randint(1, 3)))})"

    parts = [conjunct() for _ in range(r.choice([1, 1, 2, 3]))]
    joiner = " OR " if r.random() < 0.2 else " AND "
    return joiner.join(parts)


def _parquet_query(r: random.Random, table) -> str:
    where = _parquet_filters(r, table)
    return r.choice([
        f"SELECT id, k, v, s, d FROM t WHERE {where}",
        f"SELECT count(*) AS n, sum(v) AS s, min(d) AS lo, max(s) AS hi FROM t WHERE {where}",
        f"SELECT k, count(*) AS n, max(v) AS m FROM t WHERE {where} GROUP BY k",
        f"SELECT count(*) AS n FROM t WHERE {where}",
        f"SELECT id, m, n FROM t WHERE {where} ORDER BY id LIMIT 5",
    ])


# ------------------------------------------------------------------------------------------------ compare
def _compare_reexec(session, connection, text, runs):
    """One prepared text run with each value set: each answer against DuckDB's; a later run of the same
    non-NULL value types as an earlier run must compile no kernel."""
    from gpu_engine.errors import GpuEngineError

    prepared = None
    seen_types = set()
    statuses = []
    for values in runs:
        try:
            if prepared is None:
                prepared = session.prepare(text)
        except GpuEngineError as error:
            return _compare(session, connection, text, values, "params")
        status, detail = _compare(session, connection, (lambda s, v=values: prepared.execute(v), (text, values), text),
                                  None, "call8")
        if status != "ok":
            return status, detail
        signature = tuple(type(v).__name__ for v in values)
        compiled = session.last_stats().kernels_compiled if session.last_stats() else 0
        if None not in values and signature in seen_types and compiled:
            statuses.append(f"compiled {compiled} kernels again for {values!r}")
        if None not in values:
            seen_types.add(signature)
    if statuses:
        return "compiled_again", "; ".join(statuses)
    return "ok", ""


def _compare_case(session, connection, sql, params, how):
    if how == "perms":
        for index, text in enumerate(sql):
            status, detail = _compare(session, connection, text, None, "sql")
            if status != "ok":
                return status, f"permutation {index}: {detail}"
        return "ok", ""
    if how == "reexec8":
        return _compare_reexec(session, connection, sql, params)
    return _compare(session, connection, sql, params, how)


def _patch_call8():
    """Teach round 5's answers ``how`` "call8": the engine's answer from a function, DuckDB's from (text, params)."""
    import bench.fuzz_round5 as round5

    if getattr(round5, "_round8_patched", False):
        return
    engine, duck = round5._engine_answer, round5._duckdb_answer

    def engine_answer(session, sql, params, how):
        return sql[0](session) if how == "call8" else engine(session, sql, params, how)

    def duckdb_answer(connection, sql, params, how):
        if how == "call8":
            text, values = sql[1]
            return connection.sql(text, params=values).to_arrow_table()
        return duck(connection, sql, params, how)

    round5._engine_answer, round5._duckdb_answer = engine_answer, duckdb_answer
    round5._round8_patched = True


# ------------------------------------------------------------------------------------------------ memcap
def _memcap_case(r, data, device, drivers, batch_rows, split_rows):
    """A query under a small memory cap (equal DuckDB or MemoryCapExceeded), or a query cut short by a timeout;
    then a follow-up query on the same Session must equal DuckDB's."""
    import pyarrow as pa

    from duckdb_reference import rows_mismatch
    from gpu_engine.errors import GpuEngineError, MemoryCapExceeded, TaskCancelled

    connection = _duckdb(data)
    cancel = r.random() < 0.4
    if cancel:  # a join that runs for a while: 20,000 x 20,000 rows over 500 keys (800,000 rows)
        rows = 20000
        big = pa.table({"a": pa.array([r.randrange(500) for _ in range(rows)], pa.int64()),
                        "b": pa.array(range(rows), pa.int64())})
        data = dict(data, big=big)
        connection.register("big", big)
        query = r.choice(["SELECT count(*) AS n, sum(x.b) AS s FROM big x JOIN big y ON x.a = y.a",
                          "SELECT x.a, count(*) AS n FROM big x JOIN big y ON x.a = y.a GROUP BY x.a",
                          "SELECT a, median(b) AS m, count(DISTINCT b) AS d FROM big GROUP BY a"])
        session = _session(data, device, drivers, batch_rows, split_rows)
        timeout = r.choice([0.0001, 0.001, 0.005, 0.02])
        how = "timeout"
        if r.random() < 0.5:  # cancelled from another thread after a delay instead (Task.cancel)
            delay, timeout, how = timeout * 10, None, "cancel"
            canceller = threading.Timer(delay, lambda: session.last_task is not None and session.last_task.cancel())
    else:
        family = r.choice(["joins", "grouping", "graphs"])
        query, _, how = FAMILIES[family](r)
        if how == "perms":
            query = query[0]
        cap = r.choice([4 << 10, 64 << 10, 512 << 10, 4 << 20])
        session = _session(data, device, drivers, batch_rows, split_rows)
        session.config = session.config.with_overrides(query_memory_limit_bytes=cap)  # as Session(..., cap) sets it
        timeout = None
    status = "ok"
    detail = ""
    if how == "cancel":
        canceller.start()
    try:
        try:
            expected = connection.sql(query).to_arrow_table()
        except Exception:  # noqa: BLE001 - DuckDB refuses it: not a cap case
            return "duckdb_raised", query
        try:
            actual = session.sql(query, timeout=timeout)
            problem = rows_mismatch(actual, expected, rel_tol=1e-7)
            if problem is not None:
                return "wrong", f"{query}: {problem}"
            status = "ok"
        except MemoryCapExceeded:
            status = "capped"
        except TimeoutError:
            status = "timed_out"
        except TaskCancelled:
            status = "cancelled"
        except GpuEngineError as error:
            if how in ("timeout", "cancel"):
                return "engine_raised", f"{query}: {type(error).__name__}: {error}"
            status, detail = "refused", f"{type(error).__name__}: {error}"
        except Exception as error:  # noqa: BLE001
            return "crash", f"{query}: {type(error).__name__}: {error}\n{traceback.format_exc(limit=-8)}"
        if how == "cancel":
            canceller.join()
        # every driver of the query cut short ends (none left running on the process's pools)
        if status in ("timed_out", "cancelled", "capped") and session.last_task is not None \
                and not session.last_task.wait_done(120):
            return "stuck", f"{status} query's drivers still running after 120 s: {query}"
        # the same Session again, without a cap or a timeout
        session.config = session.config.with_overrides(query_memory_limit_bytes=None)
        follow = "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k"
        try:
            again = session.sql(follow)
        except Exception as error:  # noqa: BLE001
            return "crash", f"follow-up after {status} of {query}: {type(error).__name__}: {error}\n" \
                            f"{traceback.format_exc(limit=-8)}"
        problem = rows_mismatch(again, connection.sql(follow).to_arrow_table(), rel_tol=1e-7)
        if problem is not None:
            return "wrong", f"follow-up after {status} of {query}: {problem}"
        return status, detail or query
    finally:
        connection.close()
        session.close()


FAMILIES = {"joins": _joins, "graphs": _graphs, "params": _params, "grouping": _grouping}
ALL = ["joins", "graphs", "params", "grouping", "parquet", "memcap"]


def run(seeds: range, device: str, families: list[str], verbose: bool) -> dict:
    _patch_call8()
    counts = collections.defaultdict(collections.Counter)
    reported, refusals = [], collections.Counter()
    threads_before = threading.active_count()
    thread_peak = threads_before
    for seed in seeds:
        r = random.Random(seed)
        drivers, batch_rows = r.choice([1, 2, 3]), r.choice([7, None])
        split_rows = r.choice([3, 7, 100])
        for family in families:
            folder = None
            shown = None
            if family == "memcap":
                data = tables(r)
                status, detail = _memcap_case(r, data, device, drivers, batch_rows, split_rows)
                sql = how = "memcap"
            else:
                big = family == "grouping" and r.random() < 0.4 or family == "parquet"
                data = tables(r, big=big)
                if big and family == "grouping" and r.random() < 0.5:
                    batch_rows = 7
                connection = _duckdb(data)
                if family == "parquet":
                    import pyarrow.parquet  # noqa: F401

                    folder = Path(tempfile.mkdtemp(prefix=f"fuzz8-{seed}-"))
                    path = folder / "t.parquet"
                    drawn = _write_parquet(r, data["t"], path)
                    options = {"device": device, "drivers": drivers}
                    if batch_rows is not None:
                        options["batch_rows"] = batch_rows
                    from gpu_engine import Session

                    session = Session(**options)
                    session.register("t", str(path))
                    connection.execute(f"CREATE OR REPLACE VIEW t AS SELECT * FROM read_parquet('{path}')")
                    sql, params, how = _parquet_query(r, data["t"]), None, "sql"
                    shown = f"{sql}  -- file {drawn}"
                else:
                    session = _session(data, device, drivers, batch_rows, split_rows)
                    sql, params, how = FAMILIES[family](r)
                try:
                    status, detail = _compare_case(session, connection, sql, params, how)
                finally:
                    connection.close()
                    session.close()
                    if folder is not None:
                        shutil.rmtree(folder, ignore_errors=True)
                if how in ("params", "reexec8"):
                    shown = f"{sql}  params={params!r}"
            thread_peak = max(thread_peak, threading.active_count())
            counts[family][status] += 1
            if status == "refused":
                refusals[re.sub(r"'[^']*'", "'…'", detail.splitlines()[0])[:140]] += 1
            if status in ("wrong", "crash", "engine_raised", "answered_where_duckdb_raised", "compiled_again",
                          "stuck") or (
                    verbose and status not in ("ok", "capped", "timed_out", "cancelled")):
                shown = shown or sql
                reported.append({"seed": seed, "family": family, "status": status, "sql": shown, "how": how,
                                 "drivers": drivers, "batch_rows": batch_rows, "split_rows": split_rows,
                                 "why": detail[:2000]})
                print(f"{status.upper()} seed {seed} ({family}/{how}, drivers {drivers}, batch {batch_rows}, "
                      f"split {split_rows}): {shown}\n  {detail[:1500]}", flush=True)
    return {"counts": {f: dict(c) for f, c in counts.items()}, "reported": reported,
            "refusals": dict(refusals.most_common()),
            "threads": {"before": threads_before, "peak": thread_peak, "after": threading.active_count()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:100", help="start:stop")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--families", default=",".join(ALL))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--verbose", action="store_true", help="print refusals and both-raised cases too")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))
    began, cpu_began = time.perf_counter(), time.process_time()
    result = run(range(start, stop), args.device, args.families.split(","), args.verbose)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    total = print_counts(result["counts"], 10,
                         f"  (seeds {start}:{stop} on {args.device}; {elapsed:.0f} s wall, {cpu:.0f} s CPU)")
    print(f"  threads: {result['threads']}")
    for why, n in list(result["refusals"].items())[:30]:
        print(f"  refused {n}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"commit": head_commit(), "seeds": [start, stop], "device": args.device,
                                        "seconds": round(elapsed, 1), "cpu_seconds": round(cpu, 1), **result},
                                       indent=1, ensure_ascii=False, default=str))
    return 1 if total["wrong"] or total["crash"] or total["stuck"] else 0


if __name__ == "__main__":
    sys.exit(main())
