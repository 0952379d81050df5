"""Generate random queries that nest relational operators inside each other, reproducibly from a seed.

The composition fuzz: tests/sql/breadth_queries.py and tests/sql/edge_queries.py draw one construct each over a
base table; planner rules go wrong where constructs meet (a filter pushed through a window, an outer join or a
set operation; a window over an aggregate; grouping sets over an outer join; a correlated subquery over a
derived table; a LIMIT inside a join). This module builds each query bottom-up from derived tables: a base
``SELECT`` (typed expressions: CASE/coalesce/nullif mixing integers, decimals and doubles, string functions,
date arithmetic) under random layers of filter, projection, inner/outer join on NULL-holding keys (extra ON
conditions, WHERE above), [NOT] EXISTS / [NOT] IN (NULLs inside), aggregation (GROUP BY, ROLLUP, CUBE,
GROUPING SETS with ``grouping()``, HAVING, DISTINCT aggregates), windows (ROWS/RANGE/GROUPS frames with
offsets, ranks, lag/lead; a named WINDOW), set operations ([ALL] over mixed numeric types and NULL literals),
DISTINCT, DISTINCT ON, QUALIFY, COLUMNS('regex') / ``* EXCLUDE`` / ``* REPLACE``, ORDER BY ... LIMIT/OFFSET,
correlated scalar subqueries, row IN, correlated EXISTS / IN subqueries that pick rows (ORDER BY ... LIMIT/OFFSET,
QUALIFY), and a CTE read twice; columns of only NULLs (DuckDB's NULL type), VALUES branches of set operations,
LIMIT inside scalar and IN subqueries, a window as a correlated subquery's value and ORDER BY on expressions
with NULLS FIRST/LAST. Expressions add casts (TRY_CAST, text <-> number <-> date <-> timestamp), string,
date, timestamp and interval functions and decimal precision (products, rescaling casts that may overflow),
numbers and dates compared with text, and string functions over NULL, empty and multi-byte operands; a table
``td`` of ``t``'s rows in other layouts (SMALLINT/TINYINT/BIGINT keys, DECIMAL(12, 4), REAL, dictionary-encoded
strings) and a layer re-typing columns to other integer widths, decimal scales and REAL, so joins, set
operations, IN and RANGE frames meet keys of different layouts; layers that empty their input (LIMIT 0, a false
filter, a join or IN over the empty table); HAVING on grouping keys that are NULL (data or rolled-up rows).

Every answer is deterministic as a multiset: order-dependent functions (ROWS frames, row_number, lag/lead,
first/last/nth_value, ntile) and LIMIT are ordered by every column of their input, so the rows that tie are
equal rows. The tables are :func:`breadth_queries.tables` (``t``, ``u`` sharing rows, ``e`` empty, ``one``).
:func:`breadth_queries.run_case` classifies the outcome. ``bench/sql_fuzz_breadth.py --generator compose``
runs thousands; tests/sql/test_compose_fuzz.py a fixed few and the answers it found wrong.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

import breadth_queries
from breadth_queries import BreadthCase

__all__ = ["SHAPES", "tables", "generate_case", "run_case"]

#: Columns of the breadth tables and their kinds. "wide": a decimal(38) or 128-bit sum, which the engine does not
#: group, join, order or set-compare on (a clean refusal), so only projections, filters and aggregates use it.
_BASE = {"id": "int", "k": "int", "i": "int", "j": "int", "d": "dec", "f": "dbl", "s": "str", "g": "str",
         "dt": "date", "b": "bool", "n": "str"}
_NUMERIC = ("int", "dec", "dbl")
_KEYABLE = ("int", "dec", "dbl", "str", "date", "bool", "ts")


@dataclass
class Rel:
    """A derived table: its SELECT text and its output columns (name, kind)."""

    sql: str
    cols: list[tuple[str, str]]


@dataclass
class _Gen:
    rng: random.Random
    counter: int = 0
    budget: int = 4
    notes: list[str] = field(default_factory=list)

    def name(self, prefix: str = "c") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


def tables() -> dict[str, pa.Table]:
    """Return :func:`breadth_queries.tables` and ``td``: ``t``'s rows in other layouts (SMALLINT ``k``, TINYINT ``i``,
    BIGINT ``j``, INTEGER ``id``, DECIMAL(12, 4) ``d``, REAL ``f``, dictionary-encoded strings with their NULLs),
    so joins, set operations, IN lists and comparisons meet keys of different widths and scales, and string
    functions read dictionary columns."""
    out = breadth_queries.tables()
    t = out["t"]
    out["td"] = pa.table({
        "id": t["id"].cast(pa.int32()), "k": t["k"].cast(pa.int16()), "i": t["i"].cast(pa.int8()),
        "j": t["j"].cast(pa.int64()), "d": t["d"].cast(pa.decimal128(12, 4)), "f": t["f"].cast(pa.float32()),
        "s": pc.dictionary_encode(t["s"]), "g": pc.dictionary_encode(t["g"]), "dt": t["dt"], "b": t["b"],
        "n": pc.dictionary_encode(t["n"])})
    return out


def _compatible(a: str, b: str) -> bool:
    return a == b or (a in _NUMERIC and b in _NUMERIC)


def _literal(rng: random.Random, kind: str) -> str:
    return rng.choice({
        "int": ["0", "1", "2", "-1", "7", "NULL"],
        "dec": ["0.00", "2.25", "-1.50", "10.1", "CAST(NULL AS DECIMAL(9, 2))"],
        "dbl": ["1.5::DOUBLE", "0.0::DOUBLE", "-3.25::DOUBLE", "CAST(NULL AS DOUBLE)"],
        "str": ["'a'", "''", "'x'", "'é'", "'zz'", "CAST(NULL AS VARCHAR)"],
        "date": ["DATE '1995-01-02'", "DATE '1995-02-01'", "DATE '1994-12-31'", "CAST(NULL AS DATE)"],
        "bool": ["TRUE", "FALSE", "CAST(NULL AS BOOLEAN)"],
        "ts": ["TIMESTAMP '1995-01-02 01:30:00'", "TIMESTAMP '1995-02-01 00:00:00'", "CAST(NULL AS TIMESTAMP)"],
        "wide": ["0", "1"],
    }[kind])


def _pick(rng: random.Random, cols: list[tuple[str, str]], alias: str, kinds=None) -> tuple[str, str] | None:
    fitting = [(n, k) for n, k in cols if kinds is None or k in kinds]
    if not fitting:
        return None
    name, kind = rng.choice(fitting)
    return (f"{alias}.{name}" if alias else name), kind


def predicate(gen: _Gen, cols, alias: str, depth: int = 0) -> str:
    """Return a boolean expression (TRUE, FALSE or NULL per row) over ``cols``."""
    rng = gen.rng
    if depth < 2 and rng.random() < 0.25:
        left, right = predicate(gen, cols, alias, depth + 1), predicate(gen, cols, alias, depth + 1)
        return rng.choice([f"({left} AND {right})", f"({left} OR {right})", f"NOT ({left})"])
    column = _pick(rng, cols, alias)
    if column is None:
        return rng.choice(["TRUE", "FALSE"])
    text, kind = column
    roll = rng.random()
    if roll < 0.15:
        return f"{text} IS {rng.choice(['', 'NOT '])}NULL"
    if kind == "bool":
        return rng.choice([text, f"NOT {text}", f"{text} IS NOT TRUE", f"coalesce({text}, FALSE)"])
    if kind == "wide":
        return f"{text} {rng.choice(['>', '<=', '<>'])} {rng.choice(['0', '1', '-2'])}"
    if roll < 0.3:
        other = _pick(rng, cols, alias, [k for k in _KEYABLE if _compatible(k, kind)])
        if other is not None and other[0] != text:
            return f"{text} {rng.choice(['=', '<', '>=', '<>', 'IS DISTINCT FROM'])} {other[0]}"
    if roll < 0.45:
        values = ", ".join(_literal(rng, kind) for _ in range(rng.randint(1, 3)))
        return f"{text} {rng.choice(['IN', 'NOT IN'])} ({values})"
    if roll < 0.55 and kind != "str":
        low, high = sorted([_literal(rng, kind), _literal(rng, kind)])
        return f"{text} BETWEEN {low} AND {high}"
    if kind == "str" and roll < 0.65:
        return f"{text} LIKE '{rng.choice(['a%', '%b', '_', '%', 'x'])}'"
    if roll < 0.7 and kind in ("int", "dec", "date"):  # a number or date beside text, as users write it
        written = {"int": ["'1'", "'-1'", "' 2'"], "dec": ["'1.5'", "'0'", "'2.25'"],
                   "date": ["'1995-01-02'", "'1995-2-1'"]}[kind]
        return f"{text} {rng.choice(['=', '<', '>=', '<>'])} {rng.choice(written)}"
    return f"{text} {rng.choice(['=', '<', '>', '<=', '>=', '<>'])} {_literal(rng, kind)}"


def expression(gen: _Gen, cols, alias: str, kind: str) -> str | None:
    """Return an expression of ``kind`` over ``cols`` (None when none can be built), mixing types as users do."""
    rng = gen.rng
    same = _pick(rng, cols, alias, [kind])
    num = _pick(rng, cols, alias, ["int", "dec", "dbl"])
    pred = lambda: predicate(gen, cols, alias, 1)  # noqa: E731
    options = []
    if same:
        s = same[0]
        options += [s, s, f"coalesce({s}, {_literal(rng, kind)})", f"CASE WHEN {pred()} THEN {s} END",
                    f"nullif({s}, {_literal(rng, kind)})"]
    if kind == "int":
        if same:
            s = same[0]
            options += [f"{s} + 1", f"{s} * 3", f"abs({s})", f"{s} % 3", f"-{s}", f"greatest({s}, 0)"]
            divisor = _pick(rng, cols, alias, ["int"])[0]
            if rng.random() < 0.2:  # by zero: an error in DuckDB, unless no row gets there (a guard, LIMIT 0)
                options += [f"{s} // {divisor}", f"{s} % {divisor}"]
            else:
                options += [f"{s} // nullif({divisor}, 0)", f"{s} % nullif({divisor}, 0)"]
        text = _pick(rng, cols, alias, ["str"])
        if text:
            options += [f"length({text[0]})"]
        date = _pick(rng, cols, alias, ["date"])
        if date:
            options += [f"extract(month FROM {date[0]})", f"date_diff('day', DATE '1995-01-01', {date[0]})"]
        options += [f"CASE WHEN {pred()} THEN 1 WHEN {pred()} THEN 2 ELSE 0 END"]
    elif kind == "dec":
        if same:
            s = same[0]
            options += [f"{s} + 1", f"{s} * 2", f"round({s}, 1)", f"{s} - 0.5", f"{s} * {s}", f"-{s}",
                        f"CAST({s} AS DECIMAL(12, 4)) - {s}"]
        integer = _pick(rng, cols, alias, ["int"])
        if integer:
            options += [f"CASE WHEN {pred()} THEN {integer[0]} ELSE 2.50 END", f"coalesce({integer[0]}, 0.25)",
                        f"{integer[0]} * 1.50"]
            if same:
                options += [f"coalesce({same[0]}, {integer[0]})", f"{same[0]} * {integer[0]}",
                            f"CASE WHEN {pred()} THEN {same[0]} ELSE {integer[0]} END"]
    elif kind == "dbl":
        if num:
            options += [f"{num[0]} / 4", f"CAST({num[0]} AS DOUBLE) * 0.5"]
            divisor = _pick(rng, cols, alias, ["int", "dec"])
            if divisor:
                options += [f"{num[0]} / {divisor[0]}"]  # by zero: infinity or NaN in DuckDB
        if same:
            options += [f"{same[0]} * 2", f"{same[0]} + 0.25"]
            other = _pick(rng, cols, alias, ["int", "dec"])
            if other:
                options += [f"CASE WHEN {pred()} THEN {same[0]} ELSE {other[0]} END",
                            f"coalesce({same[0]}, {other[0]})", f"{same[0]} + {other[0]}"]
    elif kind == "str":
        if same:
            s = same[0]
            options += [f"upper({s})", f"{s} || 'x'", f"substr({s}, 1, 1)", f"trim({s})",
                        f"CASE WHEN {pred()} THEN {s} ELSE 'other' END"]
            other = _pick(rng, cols, alias, ["str"])
            if other:
                options += [f"coalesce({s}, {other[0]})", f"{s} || {other[0]}"]
        integer = _pick(rng, cols, alias, ["int"])
        if integer:
            options += [f"CAST({integer[0]} AS VARCHAR)"]
    elif kind == "date":
        if same:
            s = same[0]
            options += [f"{s} + 1", f"{s} - 7", f"greatest({s}, DATE '1995-01-15')",
                        f"CASE WHEN {pred()} THEN {s} ELSE DATE '2000-01-01' END"]
    elif kind == "ts":
        if same:
            s = same[0]
            options += [f"{s} + INTERVAL 90 MINUTE", f"date_trunc('month', {s})", f"{s} - INTERVAL 1 DAY"]
        date = _pick(rng, cols, alias, ["date"])
        if date:
            options += [f"CAST({date[0]} AS TIMESTAMP)", f"{date[0]} + INTERVAL 1 MONTH",
                        f"CAST({date[0]} AS TIMESTAMP) + INTERVAL 36 HOUR", f"date_trunc('week', {date[0]})"]
    elif kind == "bool":
        options += [pred(), f"{pred()} AND {pred()}"]
    options += _function_forms(gen, cols, alias, kind)
    return rng.choice(options) if options else None


def _function_forms(gen: _Gen, cols, alias: str, kind: str) -> list[str]:
    """Return casts (TRY_CAST, text <-> number <-> date), string / date / timestamp / interval functions and
    decimal precision forms of ``kind`` over ``cols``: what users write and the fuzz covered least."""
    rng = gen.rng
    pick = lambda *kinds: _pick(rng, cols, alias, list(kinds))  # noqa: E731
    text, integer, dec, dbl, date, ts = pick("str"), pick("int"), pick("dec"), pick("dbl"), pick("date"), pick("ts")
    out = []
    if kind == "int":
        if text:
            out += [f"TRY_CAST({text[0]} AS INTEGER)", f"strpos({text[0]}, 'a')", f"TRY_CAST({text[0]} AS BIGINT) % 7",
                    f"length(lpad({text[0]}, 3, '*'))", f"strpos({text[0]}, '')", f"position('é' IN {text[0]})",
                    f"length(NULLIF({text[0]}, ''))", f"length({text[0]} || 'ü日')"]
        if dec:
            out += [f"CAST({dec[0]} AS INTEGER)", f"TRY_CAST({dec[0]} * 100 AS SMALLINT)"]
        if dbl:
            out += [f"CAST(round({dbl[0]}) AS BIGINT)"]
        if date:
            out += [f"year({date[0]})", f"date_part('dow', {date[0]})", f"dayofyear({date[0]})",
                    f"{date[0]} - DATE '1995-01-01'"]
        if ts:
            out += [f"hour({ts[0]})", f"date_diff('hour', TIMESTAMP '1995-01-01 00:00:00', {ts[0]})"]
    elif kind == "dec":
        if text:
            out += [f"TRY_CAST({text[0]} AS DECIMAL(9, 2))"]
        if dec:
            out += [f"{dec[0]} * {dec[0]} * {dec[0]}", f"round({dec[0]} / 3, 2)", f"CAST({dec[0]} AS DECIMAL(5, 1))",
                    f"CAST({dec[0]} * 10 AS DECIMAL(5, 2))", f"TRY_CAST({dec[0]} * 10 AS DECIMAL(4, 2))",
                    f"{dec[0]} * 1.005", f"trunc({dec[0]})", f"CAST({dec[0]} AS DECIMAL(18, 6)) / 7"]
        if integer:
            out += [f"CAST({integer[0]} AS DECIMAL(6, 2)) / 4", f"{integer[0]} + 0.001"]
    elif kind == "dbl":
        if text:
            out += [f"TRY_CAST({text[0]} AS DOUBLE)"]
        number = pick("int", "dec", "dbl")
        if number:
            out += [f"sqrt(abs({number[0]}))", f"power({number[0]}, 2)", f"CAST({number[0]} AS REAL) * 2",
                    f"exp(least({number[0]}, 5))"]
    elif kind == "str":
        if text:
            s = text[0]
            out += [f"replace({s}, 'a', 'xy')", f"left({s}, 2)", f"right({s}, 1)", f"reverse({s})",
                    f"split_part({s}, ' ', 1)", f"lower({s})", f"ltrim({s}, ' ')", f"concat_ws('-', {s}, 'k')",
                    f"rpad({s}, 4, '.')", f"substring({s}, 2)", f"repeat({s}, 2)"]
            # NULL, empty and multi-byte operands, zero and negative lengths
            out += [f"upper(coalesce({s}, 'ßé'))", f"{s} || NULL", f"concat({s}, NULL, 'ü')", f"lpad({s}, 0, 'x')",
                    f"left({s}, -1)", f"substring({s}, 0, 2)", f"repeat({s}, 0)", f"replace({s}, 'é', '')",
                    f"reverse('ñé' || {s})", f"rpad(coalesce({s}, ''), 3, '日')", f"lower(upper({s} || 'Ä'))",
                    f"trim(' ' || {s} || ' ')", f"CAST(length('日本' || {s}) AS VARCHAR)",
                    f"right({s}, 0)", f"split_part({s}, '', 1)", f"substr('', 1, 1) || {s}"]
        if date:
            out += [f"strftime({date[0]}, '%Y-%m')", f"CAST({date[0]} AS VARCHAR)", f"monthname({date[0]})"]
        if dec:
            out += [f"CAST({dec[0]} AS VARCHAR)"]
        if integer:
            out += [f"CAST({integer[0]} AS VARCHAR) || 'x'", f"lpad(CAST({integer[0]} AS VARCHAR), 3, '0')"]
        if ts:
            out += [f"strftime({ts[0]}, '%Y-%m-%d %H:%M')", f"CAST({ts[0]} AS VARCHAR)"]
    elif kind == "date":
        if text:
            out += [f"TRY_CAST({text[0]} AS DATE)"]
        if date:
            out += [f"last_day({date[0]})", f"CAST({date[0]} + INTERVAL 1 MONTH AS DATE)",
                    f"CAST(date_trunc('month', {date[0]}) AS DATE)", f"{date[0]} + 40"]
        if ts:
            out += [f"CAST({ts[0]} AS DATE)"]
        if integer:
            out += [f"DATE '1995-01-01' + CAST({integer[0]} AS INTEGER)"]  # DuckDB has no DATE + BIGINT
    elif kind == "ts":
        if text:
            out += [f"TRY_CAST({text[0]} AS TIMESTAMP)"]
        if ts:
            out += [f"{ts[0]} + INTERVAL '1 day 2 hours'", f"date_trunc('hour', {ts[0]})",
                    f"{ts[0]} - INTERVAL 45 SECOND"]
        if date:
            out += [f"{date[0]} - INTERVAL 2 MONTH", f"date_trunc('quarter', {date[0]})"]
    elif kind == "bool":
        if text:
            out += [f"TRY_CAST({text[0]} AS BOOLEAN)", f"starts_with({text[0]}, 'a')", f"contains({text[0]}, 'b')",
                    f"{text[0]} ILIKE 'A%'", f"regexp_matches({text[0]}, '^[a-z]+$')"]
        if date:
            out += [f"{date[0]} < DATE '1995-01-01' + INTERVAL 1 MONTH"]
    return out


# ------------------------------------------------------------------------------------------------- relations
def _base(gen: _Gen) -> Rel:
    rng = gen.rng
    table = rng.choices(["t", "u", "e", "one", "td"], weights=[8, 4, 2, 1, 3])[0]
    base = list(_BASE.items())
    items, cols = [], []
    for _ in range(rng.randint(2, 4)):
        kind = rng.choice(["int", "int", "dec", "dbl", "str", "date", "bool", "ts"])
        if rng.random() < 0.6:
            pick = _pick(rng, base, "", [kind])
            text = pick[0] if pick else None
        else:
            text = expression(gen, base, "", kind)
        if text is None:
            continue
        name = gen.name()
        items.append(f"{text} AS {name}")
        cols.append((name, kind))
    if not items:
        name = gen.name()
        items, cols = [f"k AS {name}"], [(name, "int")]
    where = f" WHERE {predicate(gen, base, '')}" if rng.random() < 0.4 else ""
    return Rel(f"SELECT {', '.join(items)} FROM {table}{where}", cols)


def _filter(gen: _Gen, inner: Rel) -> Rel:
    rng, alias = gen.rng, gen.name("q")
    condition = predicate(gen, inner.cols, alias)
    number = _pick(rng, inner.cols, alias, ["int", "dec", "dbl"])
    if number and rng.random() < 0.3:  # a scalar subquery, correlated or not, NULL when it has no rows
        key = _pick(rng, inner.cols, alias, ["int"])
        table = rng.choice(["t", "u", "e", "one", "td"])
        correlation = f" WHERE y.k = {key[0]}" if key and rng.random() < 0.6 else \
            rng.choice(["", " WHERE y.b", " WHERE y.i > 100"])
        aggregate = rng.choice(["avg(y.i)", "max(y.d)", "min(y.f)", "count(*)", "sum(y.j)"])
        operator = rng.choice([">", "<=", "=", "<>"])
        comparison = f"{number[0]} {operator} (SELECT {aggregate} FROM {table} y{correlation})"
        if rng.random() < 0.3:  # a LIMIT inside the subquery: a picked row, or a list cut to its first rows
            order = rng.choice(["y.id", "y.id DESC", "y.i NULLS FIRST, y.id", "coalesce(y.j, 0) DESC, y.id"])
            comparison = rng.choice([
                f"{number[0]} {operator} (SELECT y.i FROM {table} y{correlation} ORDER BY {order} LIMIT 1)",
                f"{number[0]} {rng.choice(['IN', 'NOT IN'])} (SELECT y.i FROM {table} y ORDER BY {order} "
                f"LIMIT {rng.randint(0, 4)})",
                f"{number[0]} {operator} (SELECT y.i FROM {table} y{correlation} ORDER BY {order} LIMIT 1 "
                f"OFFSET {rng.randint(1, 2)})"])
        condition = rng.choice([comparison, f"({comparison} OR {condition})", f"NOT ({comparison})",
                                f"({comparison}) IS NULL"])
    return Rel(f"SELECT * FROM ({inner.sql}) {alias} WHERE {condition}", inner.cols)


def _project(gen: _Gen, inner: Rel) -> Rel:
    rng, alias = gen.rng, gen.name("q")
    items, cols = [], []
    for name, kind in inner.cols:
        if rng.random() < 0.6:
            items.append(f"{alias}.{name} AS {name}")
            cols.append((name, kind))
    for _ in range(rng.randint(1, 2)):
        kind = rng.choice(["int", "dec", "dbl", "str", "date", "bool", "ts"])
        text = expression(gen, inner.cols, alias, kind)
        if text is None:
            continue
        if rng.random() < 0.15:  # a correlated scalar subquery over a base table
            key = _pick(rng, inner.cols, alias, ["int"])
            if key:
                aggregate = rng.choice(["max(y.i)", "count(*)", "sum(y.j)", "min(y.s)", "avg(y.d)"])
                kind = {"max(y.i)": "int", "count(*)": "int", "sum(y.j)": "wide", "min(y.s)": "str",
                        "avg(y.d)": "dbl"}[aggregate]
                text = f"(SELECT {aggregate} FROM {rng.choice(['t', 'u', 'e', 'td'])} y WHERE y.k = {key[0]})"
                if rng.random() < 0.4:  # a window as the value (one row per id), or a row picked by LIMIT 1
                    window = rng.choice([("sum(y.i) OVER (PARTITION BY y.k)", "wide"),
                                         ("count(*) OVER ()", "int"), ("row_number() OVER (ORDER BY y.id)", "int"),
                                         ("max(y.s) OVER (ORDER BY y.j NULLS FIRST)", "str")])
                    picked = rng.choice([("y.i", "int"), ("y.s", "str"), ("y.d", "dec")])
                    (value, kind), where = rng.choice([(window, f"y.id = {key[0]}"), (picked, f"y.k = {key[0]}")])
                    text = (f"(SELECT {value} FROM {rng.choice(['t', 'u', 'e'])} y WHERE {where} "
                            f"ORDER BY y.id{rng.choice(['', ' DESC'])} LIMIT 1)" if value == picked[0] else
                            f"(SELECT {value} FROM {rng.choice(['t', 'e'])} y WHERE {where})")
        name = gen.name()
        items.append(f"{text} AS {name}")
        cols.append((name, kind))
    if not items:
        return inner
    return Rel(f"SELECT {', '.join(items)} FROM ({inner.sql}) {alias}", cols)


def _join(gen: _Gen, left: Rel, right: Rel) -> Rel:
    rng = gen.rng
    a, b = gen.name("q"), gen.name("q")
    pairs = [(x, y) for x, kx in left.cols for y, ky in right.cols
             if kx in _KEYABLE and ky in _KEYABLE and _compatible(kx, ky)]
    how = rng.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "LEFT JOIN", "JOIN"])
    if pairs:
        keys = rng.sample(pairs, min(len(pairs), rng.choice([1, 1, 2])))
        condition = " AND ".join(f"{a}.{x} {rng.choice(['=', '=', '=', 'IS NOT DISTINCT FROM'])} {b}.{y}"
                                 for x, y in keys)
    else:
        condition = "TRUE" if rng.random() < 0.5 else predicate(gen, left.cols, a)
    roll = rng.random()
    if roll < 0.2:
        condition += f" AND {predicate(gen, right.cols, b)}"
    elif roll < 0.35:
        condition += f" AND {predicate(gen, left.cols, a)}"
    items, cols = [], []
    for alias, rel in ((a, left), (b, right)):
        for name, kind in rel.cols:
            if rng.random() < 0.7 or not items:
                new = gen.name()
                items.append(f"{alias}.{name} AS {new}")
                cols.append((new, kind))
    where = ""
    if rng.random() < 0.35:
        both = [(f"{a}.{n}", k) for n, k in left.cols] + [(f"{b}.{n}", k) for n, k in right.cols]
        where = f" WHERE {predicate(gen, both, '')}"
    return Rel(f"SELECT {', '.join(items)} FROM ({left.sql}) {a} {how} ({right.sql}) {b} ON {condition}{where}",
               cols)


def _semi(gen: _Gen, outer: Rel, inner: Rel) -> Rel:
    rng = gen.rng
    a, b = gen.name("q"), gen.name("q")
    pairs = [(x, y) for x, kx in outer.cols for y, ky in inner.cols
             if kx in _KEYABLE and ky in _KEYABLE and _compatible(kx, ky)]
    if not pairs:
        return _filter(gen, outer)
    x, y = rng.choice(pairs)
    extra = f" AND {predicate(gen, inner.cols, b)}" if rng.random() < 0.3 else ""
    form = rng.choice([
        f"EXISTS (SELECT 1 FROM ({inner.sql}) {b} WHERE {b}.{y} = {a}.{x}{extra})",
        f"NOT EXISTS (SELECT 1 FROM ({inner.sql}) {b} WHERE {b}.{y} = {a}.{x}{extra})",
        f"{a}.{x} IN (SELECT {b}.{y} FROM ({inner.sql}) {b}{' WHERE ' + extra[5:] if extra else ''})",
        f"{a}.{x} NOT IN (SELECT {b}.{y} FROM ({inner.sql}) {b}{' WHERE ' + extra[5:] if extra else ''})",
    ])
    roll = rng.random()
    if roll < 0.15 and len(pairs) > 1:  # a row IN: every column compared, NULLs in either row
        (x1, y1), (x2, y2) = rng.sample(pairs, 2)
        form = (f"({a}.{x1}, {a}.{x2}) {rng.choice(['IN', 'NOT IN'])} (SELECT {b}.{y1}, {b}.{y2} "
                f"FROM ({inner.sql}) {b})")
    elif roll < 0.35 and all(k in _KEYABLE for _, k in inner.cols):
        # a correlated subquery that picks among its rows: ORDER BY every column (ties are equal rows)
        order = ", ".join(f"{b}.{n}{rng.choice(['', ' DESC', ' DESC NULLS LAST'])}"
                          for n, _ in rng.sample(inner.cols, len(inner.cols)))
        pick = rng.choice([f"ORDER BY {order} LIMIT {rng.randint(0, 2)}",
                           f"ORDER BY {order} OFFSET {rng.randint(1, 3)}",
                           f"QUALIFY row_number() OVER (ORDER BY {order}) <= {rng.randint(1, 2)}",
                           f"QUALIFY count(*) OVER () > {rng.randint(1, 3)}"])
        form = rng.choice([f"EXISTS (SELECT 1 FROM ({inner.sql}) {b} WHERE {b}.{y} = {a}.{x} {pick})",
                           f"NOT EXISTS (SELECT 1 FROM ({inner.sql}) {b} WHERE {b}.{y} = {a}.{x} {pick})",
                           f"{a}.{x} IN (SELECT {b}.{y} FROM ({inner.sql}) {b} WHERE {b}.{y} = {a}.{x} {pick})"])
    if rng.random() < 0.25:
        form = f"({form} {rng.choice(['OR', 'AND'])} {predicate(gen, outer.cols, a)})"
    return Rel(f"SELECT * FROM ({outer.sql}) {a} WHERE {form}", outer.cols)


def _aggregate(gen: _Gen, inner: Rel) -> Rel:
    rng, alias = gen.rng, gen.name("q")
    keyable = [(n, k) for n, k in inner.cols if k in _KEYABLE]
    keys = rng.sample(keyable, min(len(keyable), rng.choice([0, 1, 1, 2, 2, 3])))
    items, cols = [], []
    for name, kind in keys:
        new = gen.name()
        items.append(f"{alias}.{name} AS {new}")
        cols.append((new, kind))
    grouping = ""
    if keys:
        names = [f"{alias}.{n}" for n, _ in keys]
        roll = rng.random()
        if roll < 0.55:
            grouping = f" GROUP BY {', '.join(names)}"
        elif roll < 0.7:
            grouping = f" GROUP BY ROLLUP ({', '.join(names)})"
        elif roll < 0.8:
            grouping = f" GROUP BY CUBE ({', '.join(names)})"
        else:
            sets = ["()"] + [f"({n})" for n in names] + ([f"({', '.join(names)})"] if len(names) > 1 else [])
            chosen = rng.sample(sets, rng.randint(1, len(sets)))
            if not all(any(n in text for text in chosen) for n in names):  # every key must be grouped somewhere
                chosen.append(f"({', '.join(names)})")
            grouping = f" GROUP BY GROUPING SETS ({', '.join(chosen)})"
        if "GROUP BY (" not in grouping and grouping.startswith(" GROUP BY ") and "ROLLUP" not in grouping \
                and "CUBE" not in grouping and "SETS" not in grouping:
            pass
        elif rng.random() < 0.6:
            new = gen.name()
            items.append(f"grouping({rng.choice(names)}) AS {new}")
            cols.append((new, "int"))
    for _ in range(rng.randint(1, 3)):
        column = _pick(rng, inner.cols, alias)
        if column is None:
            break
        text, kind = column
        choices = [("count(*)", "int"), (f"count({text})", "int"), (f"min({text})", kind), (f"max({text})", kind)]
        if kind in _KEYABLE:
            choices.append((f"count(DISTINCT {text})", "int"))
        if kind == "int":
            choices += [(f"sum({text})", "wide"), (f"avg({text})", "dbl"), (f"sum(DISTINCT {text})", "wide")]
        elif kind == "dec":
            choices += [(f"sum({text})", "wide"), (f"avg({text})", "dbl")]
        elif kind == "dbl":
            choices += [(f"sum({text})", "dbl"), (f"avg({text})", "dbl")]
        elif kind == "bool":
            choices += [(f"bool_and({text})", "bool"), (f"count(*) FILTER (WHERE {text})", "int")]
        elif kind == "str":
            choices += [(f"max({text}) FILTER (WHERE {predicate(gen, inner.cols, alias, 1)})", "str")]
        text, kind = rng.choice(choices)
        new = gen.name()
        items.append(f"{text} AS {new}")
        cols.append((new, kind))
    having = ""
    if grouping and rng.random() < 0.3:
        conditions = ['count(*) > 1', 'count(*) < 3', f'min({alias}.{keys[0][0]}) IS NOT NULL']
        key = f"{alias}.{rng.choice(keys)[0]}"  # a grouping key: NULL in the data and in the rolled-up rows
        conditions += [f"{key} IS NULL OR count(*) > 1", f"{key} IS NOT NULL AND count(*) >= 1",
                       f"coalesce(CAST({key} AS VARCHAR), 'none') <> 'x'"]
        if any(word in grouping for word in ("ROLLUP", "CUBE", "SETS")):
            conditions += [f"grouping({alias}.{keys[0][0]}) = 0 OR count(*) > 2",
                           f"grouping({', '.join(f'{alias}.{n}' for n, _ in keys)}) > 0"]
        having = f" HAVING {rng.choice(conditions)}"
    return Rel(f"SELECT {', '.join(items)} FROM ({inner.sql}) {alias}{grouping}{having}", cols)


def _full_order(alias: str, cols) -> str:
    return ", ".join(f"{alias}.{n}" for n, _ in cols)


def _window(gen: _Gen, inner: Rel) -> Rel:
    rng, alias = gen.rng, gen.name("q")
    orderable = [(n, k) for n, k in inner.cols if k in _KEYABLE]
    total = len(orderable) == len(inner.cols)  # ordering by every column makes ties equal rows
    items = [f"{alias}.{n} AS {n}" for n, _ in inner.cols]
    cols = list(inner.cols)
    for _ in range(rng.randint(1, 2)):
        # Two row-order windows over equal rows may pair their values differently (both right): one a layer.
        total = total and not any(" ROWS " in item or "row_number" in item or "lag(" in item or "lead(" in item
                                  or "ntile" in item for item in items)
        partition_keys = rng.sample(orderable, min(len(orderable), rng.choice([0, 0, 1, 2])))
        partition = f"PARTITION BY {', '.join(f'{alias}.{n}' for n, _ in partition_keys)} " if partition_keys else ""
        column = _pick(rng, inner.cols, alias)
        text, kind = column
        direction = lambda: rng.choice(["", " DESC", " NULLS FIRST", " DESC NULLS LAST"])  # noqa: E731
        full = ", ".join(f"{alias}.{n}{direction()}" for n, _ in rng.sample(orderable, len(orderable)))
        roll = rng.random()
        numeric = [(n, k) for n, k in orderable if k in ("int", "dec", "date", "ts")]
        if roll < 0.3 and total and orderable:
            call, out = rng.choice([("row_number()", "int"), (f"lag({text}, {rng.choice([1, 2])})", kind),
                                    (f"lead({text}, 1, {_literal(rng, kind)})", kind),
                                    (f"first_value({text})", kind), (f"last_value({text})", kind),
                                    (f"nth_value({text}, 2)", kind), ("ntile(3)", "int")])
            frame = ""
            if call.startswith(("first", "last", "nth")):
                low, high = rng.choice([("1 PRECEDING", "1 FOLLOWING"), ("UNBOUNDED PRECEDING", "CURRENT ROW"),
                                        ("2 PRECEDING", "1 PRECEDING"), ("CURRENT ROW", "UNBOUNDED FOLLOWING")])
                frame = f" ROWS BETWEEN {low} AND {high}"
            over = f"{partition}ORDER BY {full}{frame}"
        elif roll < 0.5 and total and orderable:
            call, out = _window_aggregate(rng, text, kind)
            low, high = rng.choice([("1 PRECEDING", "1 FOLLOWING"), ("UNBOUNDED PRECEDING", "1 PRECEDING"),
                                    ("2 FOLLOWING", "3 FOLLOWING"), ("CURRENT ROW", "CURRENT ROW")])
            over = f"{partition}ORDER BY {full} ROWS BETWEEN {low} AND {high}"
        elif roll < 0.65 and numeric:
            key, key_kind = rng.choice(numeric)
            call, out = _window_aggregate(rng, text, kind)
            offset = {"int": rng.choice(["1", "2"]), "dec": rng.choice(["0.5", "2.25", "0.005"]),
                      "date": rng.choice(["INTERVAL 3 DAY", "INTERVAL 1 MONTH"]), "ts": "INTERVAL 36 HOUR"}[key_kind]
            low, high = rng.choice([(f"{offset} PRECEDING", f"{offset} FOLLOWING"),
                                    ("UNBOUNDED PRECEDING", f"{offset} PRECEDING"), ("CURRENT ROW", "CURRENT ROW"),
                                    (f"{offset} FOLLOWING", "UNBOUNDED FOLLOWING")])
            over = f"{partition}ORDER BY {alias}.{key}{direction()} RANGE BETWEEN {low} AND {high}"
        elif roll < 0.8 and orderable:
            key = rng.choice(orderable)[0]
            call, out = rng.choice([("rank()", "int"), ("dense_rank()", "int"), ("percent_rank()", "dbl"),
                                    ("cume_dist()", "dbl"), _window_aggregate(rng, text, kind)])
            frame = rng.choice(["", "", " GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW"]) \
                if "rank" not in call and "cume" not in call else ""
            over = f"{partition}ORDER BY {alias}.{key}{direction()}{frame}"
        else:
            call, out = _window_aggregate(rng, text, kind)
            over = partition.strip()
        new = gen.name()
        items.append(f"{call} OVER ({over}) AS {new}")
        cols.append((new, out))
    where = f" WHERE {predicate(gen, inner.cols, alias)}" if rng.random() < 0.2 else ""
    named = ""
    last = items[-1]
    if rng.random() < 0.25 and " OVER (" in last:  # the last window's OVER as a named window
        call, over = last.split(" OVER (", 1)
        over, name = over.rsplit(") AS ", 1)
        items[-1] = f"{call} OVER w AS {name}"
        named = f" WINDOW w AS ({over})"
    return Rel(f"SELECT {', '.join(items)} FROM ({inner.sql}) {alias}{where}{named}", cols)


def _window_aggregate(rng: random.Random, text: str, kind: str) -> tuple[str, str]:
    choices = [("count(*)", "int"), (f"count({text})", "int"), (f"min({text})", kind), (f"max({text})", kind)]
    if kind in ("int", "dec"):
        choices += [(f"sum({text})", "wide"), (f"avg({text})", "dbl")]
    elif kind == "dbl":
        choices += [(f"sum({text})", "dbl")]
    return rng.choice(choices)


def _coerce(gen: _Gen, rel: Rel, alias: str, kinds: list[str]) -> str:
    rng = gen.rng
    items = []
    for n, kind in enumerate(kinds):
        pick = _pick(rng, rel.cols, alias, [k for k in _KEYABLE if _compatible(k, kind)])
        if pick is None or rng.random() < 0.1:
            text = rng.choice(["NULL", _literal(rng, kind)])
        else:
            text = pick[0]
        items.append(f"{text} AS s{n}")
    return ", ".join(items)


def _set_operation(gen: _Gen, left: Rel, right: Rel) -> Rel:
    rng = gen.rng
    kinds = [rng.choice([k for _, k in left.cols if k in _KEYABLE] or ["int"]) for _ in range(rng.randint(1, 3))]
    a, b = gen.name("q"), gen.name("q")
    operator = rng.choice(["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL", "UNION ALL"])
    right_branch = f"SELECT {_coerce(gen, right, b, kinds)} FROM ({right.sql}) {b}"
    if rng.random() < 0.25:  # a VALUES list branch: literals and bare NULLs (a column of only NULLs now and then)
        nulls = [rng.random() < 0.3 for _ in kinds]
        rows = ", ".join("(" + ", ".join("NULL" if null or rng.random() < 0.2 else _literal(rng, kind)
                                         for kind, null in zip(kinds, nulls)) + ")" for _ in range(rng.randint(1, 3)))
        right_branch = f"SELECT * FROM (VALUES {rows}) {b}({', '.join(f's{n}' for n in range(len(kinds)))})"
    sql = f"SELECT {_coerce(gen, left, a, kinds)} FROM ({left.sql}) {a} {operator} {right_branch}"
    alias = gen.name("q")
    names = [gen.name() for _ in kinds]
    # A numeric column of a set operation takes the branches' common type: decimal and double stay apart here.
    out_kinds = kinds
    items = ", ".join(f"{alias}.s{n} AS {name}" for n, name in enumerate(names))
    return Rel(f"SELECT {items} FROM ({sql}) {alias}", list(zip(names, out_kinds)))


def _distinct(gen: _Gen, inner: Rel) -> Rel:
    alias = gen.name("q")
    keyable = [(n, k) for n, k in inner.cols if k in _KEYABLE] or inner.cols[:1]
    return Rel(f"SELECT DISTINCT {', '.join(f'{alias}.{n} AS {n}' for n, _ in keyable)} FROM ({inner.sql}) {alias}",
               keyable)


def _limit(gen: _Gen, inner: Rel) -> Rel:
    rng, alias = gen.rng, gen.name("q")
    if any(k not in _KEYABLE for _, k in inner.cols):
        return _distinct(gen, inner)
    order = ", ".join(f"{alias}.{n}{rng.choice(['', ' DESC', ' NULLS FIRST', ' DESC NULLS LAST'])}"
                      for n, _ in rng.sample(inner.cols, len(inner.cols)))
    if rng.random() < 0.4:  # an expression first (NULLS placed), then every column: ties are equal rows
        order = f"{_order_expression(gen, inner.cols, alias)}, {order}"
    cut = rng.choice([f"LIMIT {rng.randint(0, 6)}", f"LIMIT {rng.randint(1, 5)} OFFSET {rng.randint(1, 10)}",
                      f"OFFSET {rng.randint(1, 12)}", f"LIMIT {rng.randint(2, 30)}"])
    return Rel(f"SELECT * FROM ({inner.sql}) {alias} ORDER BY {order} {cut}", inner.cols)


def _order_expression(gen: _Gen, cols, alias: str) -> str:
    """Return an ORDER BY term over an expression of ``cols`` with a direction and NULLS placement."""
    rng = gen.rng
    kind = rng.choice(["int", "str", "dec", "date", "bool"])
    text = expression(gen, cols, alias, kind) or f"{alias}.{cols[0][0]}"
    return f"{text}{rng.choice(['', ' DESC', ' NULLS FIRST', ' DESC NULLS FIRST', ' ASC NULLS LAST'])}"


def _null_columns(gen: _Gen, inner: Rel) -> Rel:
    """Add columns of only NULLs (DuckDB's NULL type: a bare NULL, a CASE or COALESCE of only NULLs, a scalar
    ``(SELECT NULL)``), each drawn a kind that the layers above compare, join, union and aggregate it as."""
    rng, alias = gen.rng, gen.name("q")
    items = [f"{alias}.{n} AS {n}" for n, _ in inner.cols]
    cols = list(inner.cols)
    for _ in range(rng.randint(1, 2)):
        kind = rng.choice(["int", "dec", "dbl", "str", "str", "date", "date", "bool"])
        text = rng.choice(["NULL", "NULL", f"CASE WHEN {predicate(gen, inner.cols, alias, 1)} THEN NULL END",
                           "coalesce(NULL, NULL)", "(SELECT NULL)", "nullif(NULL, NULL)"])
        new = gen.name()
        items.append(f"{text} AS {new}")
        cols.append((new, kind))
    return Rel(f"SELECT {', '.join(items)} FROM ({inner.sql}) {alias}", cols)


def _distinct_on(gen: _Gen, inner: Rel) -> Rel:
    """``SELECT DISTINCT ON (keys) ... ORDER BY keys, every other column``: the kept row is decided."""
    rng, alias = gen.rng, gen.name("q")
    if any(k not in _KEYABLE for _, k in inner.cols):
        return _distinct(gen, inner)
    keys = rng.sample(inner.cols, min(len(inner.cols), rng.choice([1, 1, 2])))
    rest = [c for c in inner.cols if c not in keys]
    direction = lambda: rng.choice(["", " DESC", " NULLS FIRST", " DESC NULLS LAST"])  # noqa: E731
    order = ", ".join(f"{alias}.{n}{direction()}" for n, _ in keys + rng.sample(rest, len(rest)))
    on = ", ".join(f"{alias}.{n}" for n, _ in keys)
    items = ", ".join(f"{alias}.{n} AS {n}" for n, _ in inner.cols)
    return Rel(f"SELECT DISTINCT ON ({on}) {items} FROM ({inner.sql}) {alias} ORDER BY {order}", inner.cols)


def _qualify(gen: _Gen, inner: Rel) -> Rel:
    """A QUALIFY on a window over the rows (ranks over every column, or an aggregate per partition)."""
    rng, alias = gen.rng, gen.name("q")
    orderable = [(n, k) for n, k in inner.cols if k in _KEYABLE]
    if not orderable:
        return _filter(gen, inner)
    partition_keys = rng.sample(orderable, min(len(orderable), rng.choice([0, 1, 1])))
    partition = f"PARTITION BY {', '.join(f'{alias}.{n}' for n, _ in partition_keys)} " if partition_keys else ""
    conditions = [f"count(*) OVER ({partition.strip()}) > {rng.randint(1, 3)}",
                  f"rank() OVER ({partition}ORDER BY {alias}.{rng.choice(orderable)[0]} DESC) <= 2"]
    if len(orderable) == len(inner.cols):
        full = ", ".join(f"{alias}.{n}{rng.choice(['', ' DESC'])}" for n, _ in rng.sample(orderable, len(orderable)))
        conditions.append(f"row_number() OVER ({partition}ORDER BY {full}) = 1")
    number = _pick(rng, inner.cols, alias, ["int", "dec", "dbl"])
    if number:
        conditions.append(f"{number[0]} >= avg({number[0]}) OVER ({partition.strip()})")
    items = ", ".join(f"{alias}.{n} AS {n}" for n, _ in inner.cols)
    return Rel(f"SELECT {items} FROM ({inner.sql}) {alias} QUALIFY {rng.choice(conditions)}", inner.cols)


def _columns(gen: _Gen, inner: Rel) -> Rel:
    """``COLUMNS('regex')``, ``* EXCLUDE (...)`` or ``* REPLACE (...)`` over the inner relation's columns."""
    rng, alias = gen.rng, gen.name("q")
    if len(inner.cols) < 2:
        return inner
    chosen = rng.sample(inner.cols, rng.randint(1, len(inner.cols) - 1))
    kept = [c for c in inner.cols if c in chosen]
    roll = rng.random()
    if roll < 0.4:
        pattern = "|".join(n for n, _ in kept)
        return Rel(f"SELECT COLUMNS('^({pattern})$') FROM ({inner.sql}) {alias}", kept)
    if roll < 0.75:
        dropped = ", ".join(n for n, _ in inner.cols if (n, _) not in kept)
        return Rel(f"SELECT * EXCLUDE ({dropped}) FROM ({inner.sql}) {alias}", kept)
    integer = _pick(rng, inner.cols, "", ["int"])
    if integer is None:
        return inner
    return Rel(f"SELECT * REPLACE ({alias}.{integer[0]} * 2 AS {integer[0]}) FROM ({inner.sql}) {alias}",
               inner.cols)


def _widths(gen: _Gen, inner: Rel) -> Rel:
    """Re-type columns: integers to other widths, decimals to other scales, doubles to REAL, so the layers above
    join, union, compare and frame keys of different layouts (a value past a narrow type raises in both)."""
    rng, alias = gen.rng, gen.name("q")
    items, cols = [], []
    for name, kind in inner.cols:
        text = f"{alias}.{name}"
        if kind == "int" and rng.random() < 0.6:
            text = f"CAST({text} AS {rng.choice(['SMALLINT', 'BIGINT', 'INTEGER', 'SMALLINT', 'TINYINT'])})"
        elif kind == "dec" and rng.random() < 0.6:
            text = f"CAST({text} AS DECIMAL{rng.choice(['(12, 4)', '(18, 1)', '(7, 3)', '(10, 0)', '(5, 2)'])})"
        elif kind == "dbl" and rng.random() < 0.3:
            text = f"CAST({text} AS REAL)"
        items.append(f"{text} AS {name}")
        cols.append((name, kind))
    return Rel(f"SELECT {', '.join(items)} FROM ({inner.sql}) {alias}", cols)


def _emptied(gen: _Gen, inner: Rel) -> Rel:
    """Make the relation empty (or keep only what matches an empty table), so every layer above meets no rows."""
    rng, alias = gen.rng, gen.name("q")
    key = _pick(rng, inner.cols, alias, ["int"])
    forms = [f"SELECT * FROM ({inner.sql}) {alias} LIMIT 0",
             f"SELECT * FROM ({inner.sql}) {alias} WHERE {predicate(gen, inner.cols, alias)} AND 1 = 0",
             f"SELECT {alias}.* FROM ({inner.sql}) {alias}, (SELECT 1 AS z FROM e) z0"]
    if key:
        forms += [f"SELECT * FROM ({inner.sql}) {alias} WHERE {key[0]} IN (SELECT y.k FROM e y)",
                  f"SELECT * FROM ({inner.sql}) {alias} WHERE {key[0]} > (SELECT max(y.i) FROM e y)"]
    return Rel(rng.choice(forms), inner.cols)


def relation(gen: _Gen, depth: int) -> Rel:
    """Return a random relation of at most ``depth`` layers above its base SELECTs."""
    rng = gen.rng
    if depth <= 0 or rng.random() < 0.15:
        return _base(gen)
    op = rng.choices(["filter", "project", "join", "semi", "aggregate", "window", "set", "distinct", "limit",
                      "distinct_on", "qualify", "columns", "nulls", "widths", "emptied"],
                     weights=[2, 2, 3, 2, 3, 3, 2, 1, 1, 1, 1, 1, 1, 2, 1])[0]
    if op in ("join", "semi", "set"):
        left = relation(gen, depth - 1)
        right = relation(gen, depth - 2)
        return {"join": _join, "semi": _semi, "set": _set_operation}[op](gen, left, right)
    inner = relation(gen, depth - 1)
    return {"filter": _filter, "project": _project, "aggregate": _aggregate, "window": _window,
            "distinct": _distinct, "limit": _limit, "distinct_on": _distinct_on, "qualify": _qualify,
            "columns": _columns, "nulls": _null_columns, "widths": _widths, "emptied": _emptied}[op](gen, inner)


def _shape(top: str):
    def shape(rng: random.Random) -> dict:
        gen = _Gen(rng)
        if top == "deep":
            rel = relation(gen, rng.randint(3, 4))
        elif top == "cte":
            inner = relation(gen, 2)
            keyable = [(n, k) for n, k in inner.cols if k in _KEYABLE]
            if keyable and rng.random() < 0.6:
                key = rng.choice(keyable)[0]
                how = rng.choice(["JOIN", "LEFT JOIN", "FULL JOIN"])
                names = [n for n, _ in inner.cols]
                items = ", ".join([f"a.{n} AS a_{n}" for n in names] + [f"b.{names[-1]} AS b_{names[-1]}"])
                sql = f"WITH w AS ({inner.sql}) SELECT {items} FROM w a {how} w b ON a.{key} = b.{key}"
            else:
                sql = (f"WITH w AS ({inner.sql}) SELECT * FROM w UNION ALL SELECT * FROM w q WHERE "
                       f"{predicate(gen, inner.cols, 'q')}")
            return dict(sql=sql)
        else:
            op = {"window_over": _window, "aggregate_over": _aggregate, "limit_over": _limit}[top]
            rel = op(gen, relation(gen, rng.randint(1, 3)))
        return dict(sql=rel.sql)
    return shape


def _shape_ordered(rng: random.Random) -> dict:
    """A relation under ORDER BY every column (ties are equal rows), checked row for row."""
    gen = _Gen(rng)
    rel = relation(gen, rng.randint(1, 3))
    if any(k not in _KEYABLE for _, k in rel.cols):
        rel = _distinct(gen, rel)
    order = ", ".join(f"{n}{rng.choice(['', ' DESC', ' NULLS FIRST', ' DESC NULLS LAST', ' ASC NULLS LAST'])}"
                      for n, _ in rng.sample(rel.cols, len(rel.cols)))
    return dict(sql=f"SELECT * FROM ({rel.sql}) top ORDER BY {order}", ordered=True)


SHAPES = {
    "ordered": _shape_ordered,
    "deep": _shape("deep"),
    "window_over": _shape("window_over"),
    "aggregate_over": _shape("aggregate_over"),
    "limit_over": _shape("limit_over"),
    "cte": _shape("cte"),
}


def generate_case(seed: int) -> BreadthCase:
    """Return the case of ``seed``: the shape by seed, its contents drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    shape = list(SHAPES)[seed % len(SHAPES)]
    return BreadthCase(seed=seed, shape=shape, **SHAPES[shape](rng))


def run_case(case, session, connection):
    """Run ``case`` on the engine and in DuckDB and classify the outcome (as breadth_queries does)."""
    import breadth_queries

    return breadth_queries.run_case(case, session, connection)
