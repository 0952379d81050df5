"""Generate random queries over a small schema of awkward values, and check them against DuckDB and themselves.

The differential SQL fuzz (issue 28, "fix classes"): tests/sql/test_differential_fuzz.py runs fixed seeds in
CI, bench/sql_fuzz.py runs many. Every seed draws one query from :func:`generate_case` and

* runs it on the engine and in DuckDB over the same Parquet files and compares the multisets of rows (row for
  row under ORDER BY), and
* partitions it by ternary logic (TLP): for a random predicate ``p`` the rows of ``Q WHERE p``,
  ``Q WHERE NOT p`` and ``Q WHERE p IS NULL`` (each run on the engine, then as one UNION ALL query) together
  are the rows of ``Q``; for an aggregate query the three parts' count/sum/min/max, recombined (per group
  under GROUP BY), are ``Q``'s.

The schema (:func:`write_tables`) holds the value classes that break engines: doubles with NaN, ``-0.0``,
``0.0``, infinities and NULL (also as join and grouping keys), NULL join keys, decimals, strings with LIKE
metacharacters and the empty string, dates; ``e`` is an empty table and ``r`` a file whose row groups include
empty ones. Queries use the engine's SQL surface: SELECT/WHERE/JOIN (inner, left, right, full, [NOT] IN,
[NOT] EXISTS)/GROUP BY/HAVING/DISTINCT/ORDER BY/LIMIT/OFFSET, CASE, IN lists, BETWEEN, LIKE, IS NULL,
arithmetic and constants, constant predicates (``1 = 0``, ``NULL``) among them.

Kept away, until their issue-28 items land (each is a class of its own with its own tests):
division and ``%`` (item 7: ``a % 0``, ``1.0 / 4.0``'s type), products that could overflow an INT32
(item 7: ``int32 * 2147483647``): integer columns hold small values and are multiplied by small constants.
A query the engine refuses as unsupported (:func:`is_unsupported`) is skipped and counted; any other error,
or an answer where DuckDB raises, is a failure.
"""

from __future__ import annotations

import datetime
import decimal
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["FuzzCase", "Outcome", "TABLES", "generate_case", "write_tables", "reference_connection", "fuzz_session",
           "run_case", "is_unsupported"]

#: Table name -> row count (``e`` is empty; ``r`` has empty row groups around its rows).
TABLES = {"a": 40, "b": 24, "e": 0, "r": 12}
_NAN = float("nan")
_DOUBLES = [_NAN, -0.0, 0.0, 0.5, -1.25, 2.0, 3.5, float("inf"), float("-inf"), None]
_KEY_DOUBLES = [_NAN, -0.0, 0.0, 1.5, None]
_STRINGS = ["a", "b", "ab", "B", "", " a", "a%b", "a_b", "xyz", None]
_LIKES = ["a%", "%b", "_", "a\\%%", "%", "", "a_b", "%a%", "x_z"]


def _table(rows: int, seed: int) -> pa.Table:
    rng = random.Random(seed)

    def pick(values, nulls=0.15):
        return [None if rng.random() < nulls else rng.choice(values) for _ in range(rows)]

    start = datetime.date(1995, 1, 1)
    return pa.table({
        "k": pa.array(pick(list(range(6))), pa.int32()),
        "i": pa.array(pick(list(range(-20, 21))), pa.int64()),
        "d": pa.array([None if v is None else decimal.Decimal(v).scaleb(-2) for v in pick(list(range(-999, 1000)))],
                      pa.decimal128(8, 2)),
        "f": pa.array([rng.choice(_DOUBLES) for _ in range(rows)], pa.float64()),
        "fk": pa.array([rng.choice(_KEY_DOUBLES) for _ in range(rows)], pa.float64()),
        "s": pa.array([rng.choice(_STRINGS) for _ in range(rows)], pa.string()),
        "dt": pa.array([None if v is None else start + datetime.timedelta(days=v) for v in pick(list(range(60)))],
                       pa.date32()),
    })


def write_tables(folder: Path) -> dict[str, Path]:
    """Write the fuzz tables as Parquet files (several row groups each) and return name -> file."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for number, (name, rows) in enumerate(TABLES.items()):
        table = _table(rows, seed=number)
        path = folder / f"{name}.parquet"
        with pq.ParquetWriter(path, table.schema) as writer:
            if name == "r":  # empty row groups before, between and after rows
                for piece in (table.slice(0, 0), table.slice(0, 5), table.slice(0, 0), table.slice(5), table.slice(0, 0)):
                    writer.write_table(piece)
            else:
                for offset in range(0, max(rows, 1), 7):
                    writer.write_table(table.slice(offset, 7))
        paths[name] = path
    return paths


def reference_connection(paths: dict[str, Path]):
    """Return a DuckDB connection with each table registered as the Arrow table read from its file.

    Not DuckDB's own Parquet reader: for the NaNs DuckDB 2.0.1 reads from a Parquet double column (plain or
    dictionary-encoded), ``isnan(fk)`` and ``fk > 3.5`` are false, where its own order, applied to the same
    values from Arrow, has NaN equal to NaN and greater than every number.
    """
    import duckdb

    connection = duckdb.connect()
    for name, path in paths.items():
        connection.register(name, pq.read_table(path))
    return connection


def fuzz_session(seed: int, device: str, paths: dict[str, Path], fuse: bool | None = None):
    """Return a Session over the fuzz tables at the seed's driver count (1, 3, 2) and batch rows (5, 64, 65536).

    ``fuse`` None takes fusion from the seed too (every other nine seeds), as the operator suite runs both.
    """
    from gpu_engine import Session

    drivers = (1, 3, 2)[seed % 3]
    batch_rows = (5, 64, 1 << 16)[(seed // 3) % 3]
    session = Session(device=device, drivers=drivers, batch_rows=batch_rows,
                      fuse=(seed // 9) % 2 == 0 if fuse is None else fuse)
    for name, path in paths.items():
        session.register(name, str(path))
    return session


# ---------------------------------------------------------------------------------------------- expressions
_COLUMN_TYPES = {"k": "int", "i": "int", "d": "dec", "f": "dbl", "fk": "dbl", "s": "str", "dt": "date"}


def _constant(rng: random.Random, kind: str) -> str:
    if kind == "int":
        return rng.choice(["0", "1", "3", "-2", "17", "NULL"]) if rng.random() < 0.95 else "CAST(NULL AS INTEGER)"
    if kind == "dec":
        return rng.choice(["0.00", "1.50", "-3.25", "9.99", "-0.01"])
    if kind == "dbl":
        return rng.choice(["0.5", "-0.0", "0.0", "2.0", "CAST('NaN' AS DOUBLE)", "CAST('NaN' AS DOUBLE)",
                           "CAST('inf' AS DOUBLE)", "CAST(-1.25 AS DOUBLE)", "3.5"])
    if kind == "str":
        return "'" + rng.choice(["a", "b", "ab", "", "xyz", "a%b", "B"]) + "'"
    return f"DATE '1995-01-{rng.randint(1, 28):02d}'" if rng.random() < 0.7 else f"DATE '1995-02-{rng.randint(1, 28):02d}'"


def _literal(rng: random.Random, kind: str) -> str:
    """Return a constant of ``kind`` written as one literal (no CAST)."""
    if kind == "dbl":
        return rng.choice(["0.5", "-0.0", "0.0", "2.0", "3.5", "-1.25", "1.5"])
    if kind == "int":
        return rng.choice(["0", "1", "3", "-2", "17"])
    return _constant(rng, kind)


def _column(rng: random.Random, alias: str, kind: str) -> str:
    return f"{alias}.{rng.choice([c for c, k in _COLUMN_TYPES.items() if k == kind])}"


def _value(rng: random.Random, aliases: list[str], kind: str, depth: int = 0) -> str:
    """Return a scalar expression of ``kind`` over the columns of ``aliases``."""
    alias = rng.choice(aliases)
    roll = rng.random()
    if depth >= 2 or roll < 0.55:
        return _column(rng, alias, kind)
    if roll < 0.65:
        return _constant(rng, kind)
    if roll < 0.72 and kind != "date":
        return rng.choice([
            f"CASE WHEN {_predicate(rng, aliases, depth + 1)} THEN {_value(rng, aliases, kind, depth + 1)} "
            f"ELSE {_value(rng, aliases, kind, depth + 1)} END",
            f"coalesce({_column(rng, alias, kind)}, {_literal(rng, kind)})",
            f"nullif({_column(rng, alias, kind)}, {_literal(rng, kind)})",
        ])
    if roll < 0.78 and kind in ("int", "dbl", "str"):
        return {"int": f"extract(day FROM {_column(rng, alias, 'date')})",
                "dbl": f"CAST({_column(rng, alias, rng.choice(['int', 'dec']))} AS DOUBLE)",
                "str": f"substring({_column(rng, alias, 'str')}, {rng.randint(1, 2)}, {rng.randint(0, 2)})"}[kind]
    if kind == "int":
        op = rng.choice(["+", "-", "*"])
        right = rng.choice(["1", "2", "3", "-1"]) if op == "*" else _value(rng, aliases, "int", depth + 1)
        return f"({_value(rng, aliases, 'int', depth + 1)} {op} {right})"
    if kind == "dec":
        op = rng.choice(["+", "-"])
        return f"({_value(rng, aliases, 'dec', depth + 1)} {op} {_value(rng, aliases, 'dec', depth + 1)})"
    if kind == "dbl":
        if rng.random() < 0.3:
            return f"(-{_value(rng, aliases, 'dbl', depth + 1)})"
        op = rng.choice(["+", "-", "*"])
        return f"({_value(rng, aliases, 'dbl', depth + 1)} {op} {_value(rng, aliases, 'dbl', depth + 1)})"
    if kind == "str":
        if rng.random() < 0.5:
            return (f"CASE WHEN {_predicate(rng, aliases, depth + 1)} THEN {_value(rng, aliases, 'str', depth + 1)} "
                    f"ELSE {_value(rng, aliases, 'str', depth + 1)} END")
        return f"coalesce({_column(rng, alias, 'str')}, {_constant(rng, 'str')})"
    if kind == "date":  # no date + INTERVAL here: interval arithmetic on columns has its own tests (test_intervals.py)
        return f"coalesce({_column(rng, alias, 'date')}, {_constant(rng, 'date')})"
    raise AssertionError(kind)


def _predicate(rng: random.Random, aliases: list[str], depth: int = 0) -> str:
    """Return a boolean expression (TRUE, FALSE or NULL per row) over the columns of ``aliases``."""
    roll = rng.random()
    if depth < 2 and roll < 0.25:
        op = rng.choice(["AND", "OR"])
        return f"({_predicate(rng, aliases, depth + 1)} {op} {_predicate(rng, aliases, depth + 1)})"
    if depth < 2 and roll < 0.32:
        return f"(NOT {_predicate(rng, aliases, depth + 1)})"
    if roll < 0.37:
        return rng.choice(["1 = 0", "1 = 1", "TRUE", "FALSE", "NULL", "NULL = 1", "'a' = 'b'", "NOT (1 = 0)"])
    if depth < 2 and roll < 0.42:
        return (f"(CASE WHEN {_predicate(rng, aliases, depth + 1)} THEN {_predicate(rng, aliases, depth + 1)} "
                f"ELSE {_predicate(rng, aliases, depth + 1)} END)")
    kind = rng.choice(["int", "int", "dec", "dbl", "dbl", "dbl", "str", "str", "date"])
    shape = rng.random()
    left = _value(rng, aliases, kind, depth + 1)
    if shape < 0.12:
        return f"{left} IS {rng.choice(['', 'NOT '])}NULL"
    if shape < 0.24 and kind != "str":
        low, high = _constant(rng, kind), _constant(rng, kind)
        return f"{left} {rng.choice(['', 'NOT '])}BETWEEN {low} AND {high}"
    if shape < 0.38:
        # Plain literals only: the engine refuses a constant expression such as CAST('NaN' AS DOUBLE) in an IN
        # list ("IN list values must be constants"; item 4's constant folding), which DuckDB folds.
        items = [_literal(rng, kind) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.2:
            items.append("NULL")
        return f"{left} {rng.choice(['', 'NOT '])}IN ({', '.join(items)})"
    if shape < 0.62 and kind == "str":
        pattern = rng.choice(_LIKES).replace("'", "''")
        escape = " ESCAPE '\\'" if "\\" in pattern else ""
        return f"{_column(rng, rng.choice(aliases), 'str')} {rng.choice(['', 'NOT '])}LIKE '{pattern}'{escape}"
    op = rng.choice(["=", "<>", "<", "<=", ">", ">="])
    right = _constant(rng, kind) if rng.random() < 0.6 else _value(rng, aliases, kind, depth + 1)
    return f"{left} {op} {right}"


# -------------------------------------------------------------------------------------------------- queries
@dataclass(frozen=True)
class FuzzCase:
    """One generated query, how to compare it, and its ternary-logic partitioning.

    ``sql`` is the query; ``ordered`` whether its row order is part of the answer. ``tlp`` holds the query
    with the placeholder ``{where}`` for its WHERE clause, and ``tlp_predicate`` the ``p`` partitioning it;
    ``tlp_aggregates`` names the recombination of each output column (``key``, ``count``, ``sum``,
    ``min``, ``max``), empty for a query whose parts' rows are simply concatenated.
    """

    seed: int
    shape: str
    sql: str
    ordered: bool = False
    tlp: str | None = None
    tlp_base: str = "TRUE"
    tlp_predicate: str | None = None
    tlp_aggregates: tuple[str, ...] = ()

    def tlp_parts(self) -> list[str]:
        """Return ``Q WHERE p``, ``Q WHERE NOT p`` and ``Q WHERE p IS NULL`` (each beside Q's own WHERE)."""
        p, base = self.tlp_predicate, self.tlp_base
        return [self.tlp.format(where=f"({base}) AND ({part})") for part in (p, f"NOT ({p})", f"({p}) IS NULL")]

    def tlp_whole(self) -> str:
        return self.tlp.format(where=self.tlp_base)


def _pick_table(rng: random.Random) -> str:
    return rng.choices(list(TABLES), weights=[5, 3, 1, 1])[0]


def _select_list(rng: random.Random, aliases: list[str], count: int) -> list[str]:
    out = []
    for position in range(count):
        if rng.random() < 0.6:
            alias = rng.choice(aliases)
            column = rng.choice(list(_COLUMN_TYPES))
            out.append(f"{alias}.{column} AS c{position}")
        else:
            value = _value(rng, aliases, rng.choice(sorted(set(_COLUMN_TYPES.values()))))
            out.append(f"{_typed(value)} AS c{position}")
    return out


def _typed(value: str) -> str:
    """Return ``value``, a bare NULL cast to INTEGER: the engine refuses an untyped NULL as an output or an
    aggregate's argument ("cannot infer the type of NULL"; DuckDB types it NULL), a typing question of item 7
    kept away until it is settled."""
    return "CAST(NULL AS INTEGER)" if value == "NULL" else value


_AGGREGATED = ["i", "k", "d", "f", "fk"]


def _aggregate_list(rng: random.Random, alias: str) -> tuple[list[str], list[str]]:
    """Return aggregates TLP can recombine (count, sum, min, max) and how each recombines."""
    items, how = ["count(*) AS n"], ["count"]
    for position in range(rng.randint(1, 3)):
        function = rng.choice(["count", "sum", "min", "max"])
        column = rng.choice(_AGGREGATED + (["s", "dt"] if function in ("min", "max", "count") else []))
        items.append(f"{function}({alias}.{column}) AS a{position}")
        how.append(function)
    return items, how


def _from_join(rng: random.Random) -> tuple[str, list[str]]:
    left, right = _pick_table(rng), _pick_table(rng)
    kind = rng.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
    keys = rng.choice([["k"], ["fk"], ["k", "fk"], ["s"], ["dt"]])
    condition = " AND ".join(f"x.{key} = y.{key}" for key in keys)
    if rng.random() < 0.3:
        condition += f" AND {_predicate(rng, ['x', 'y'], 1)}"
    return f"{left} x {kind} {right} y ON {condition}", ["x", "y"]


def _shape_project(rng):
    table = _pick_table(rng)
    select = ", ".join(_select_list(rng, ["t"], rng.randint(1, 4)))
    base = _predicate(rng, ["t"]) if rng.random() < 0.5 else "TRUE"
    sql = f"SELECT {select} FROM {table} t WHERE {base}"
    return dict(sql=sql, tlp=f"SELECT {select} FROM {table} t WHERE {{where}}", tlp_base=base)


def _shape_aggregate(rng):
    table = _pick_table(rng)
    items, how = _aggregate_list(rng, "t")
    base = _predicate(rng, ["t"]) if rng.random() < 0.5 else "TRUE"
    select = ", ".join(items)
    return dict(sql=f"SELECT {select} FROM {table} t WHERE {base}",
                tlp=f"SELECT {select} FROM {table} t WHERE {{where}}", tlp_base=base, tlp_aggregates=tuple(how))


def _shape_group_by(rng):
    table = _pick_table(rng)
    keys = rng.sample(["k", "f", "fk", "s", "dt", "d"], rng.randint(1, 2))
    items, how = _aggregate_list(rng, "t")
    base = _predicate(rng, ["t"]) if rng.random() < 0.5 else "TRUE"
    select = ", ".join([f"t.{key} AS g{n}" for n, key in enumerate(keys)] + items)
    group = ", ".join(f"t.{key}" for key in keys)
    tlp = f"SELECT {select} FROM {table} t WHERE {{where}} GROUP BY {group}"
    if rng.random() < 0.3:  # HAVING filters groups: no TLP recombination of a group's parts
        return dict(sql=f"SELECT {select} FROM {table} t WHERE {base} GROUP BY {group} "
                        f"HAVING count(*) > {rng.randint(0, 3)}")
    return dict(sql=tlp.format(where=base), tlp=tlp, tlp_base=base,
                tlp_aggregates=tuple(["key"] * len(keys) + how))


def _shape_distinct(rng):
    table = _pick_table(rng)
    columns = rng.sample(list(_COLUMN_TYPES), rng.randint(1, 2))
    where = _predicate(rng, ["t"]) if rng.random() < 0.6 else "TRUE"
    return dict(sql=f"SELECT DISTINCT {', '.join(f't.{c} AS c{n}' for n, c in enumerate(columns))} "
                    f"FROM {table} t WHERE {where}")


def _shape_count_distinct(rng):
    table = _pick_table(rng)
    column = rng.choice(list(_COLUMN_TYPES))
    where = _predicate(rng, ["t"]) if rng.random() < 0.6 else "TRUE"
    return dict(sql=f"SELECT count(DISTINCT t.{column}) AS n, count(*) AS m FROM {table} t WHERE {where}")


def _shape_join(rng):
    from_, aliases = _from_join(rng)
    select = ", ".join(_select_list(rng, aliases, rng.randint(1, 4)))
    base = _predicate(rng, aliases) if rng.random() < 0.4 else "TRUE"
    tlp = f"SELECT {select} FROM {from_} WHERE {{where}}"
    return dict(sql=tlp.format(where=base), tlp=tlp, tlp_base=base, aliases=aliases)


def _shape_join_aggregate(rng):
    from_, aliases = _from_join(rng)
    items, how = _aggregate_list(rng, rng.choice(aliases))
    base = _predicate(rng, aliases) if rng.random() < 0.4 else "TRUE"
    select = ", ".join(items)
    if rng.random() < 0.5:
        key = f"{rng.choice(aliases)}.{rng.choice(['k', 'fk', 's'])}"
        tlp = f"SELECT {key} AS g0, {select} FROM {from_} WHERE {{where}} GROUP BY {key}"
        how = ["key"] + how
    else:
        tlp = f"SELECT {select} FROM {from_} WHERE {{where}}"
    return dict(sql=tlp.format(where=base), tlp=tlp, tlp_base=base, tlp_aggregates=tuple(how), aliases=aliases)


def _shape_semi(rng):
    outer, inner = _pick_table(rng), _pick_table(rng)
    key = rng.choice(["k", "fk", "s"])
    inner_where = _predicate(rng, ["y"]) if rng.random() < 0.5 else "TRUE"
    negate = rng.choice(["", "NOT "])
    if rng.random() < 0.5:
        condition = f"{negate}EXISTS (SELECT * FROM {inner} y WHERE y.{key} = x.{key} AND {inner_where})"
    else:
        condition = f"x.{key} {negate}IN (SELECT y.{key} FROM {inner} y WHERE {inner_where})"
    select = ", ".join(_select_list(rng, ["x"], rng.randint(1, 3)))
    tlp = f"SELECT {select} FROM {outer} x WHERE {condition} AND {{where}}"
    return dict(sql=tlp.format(where="TRUE"), tlp=tlp, aliases=["x"])


def _shape_order_limit(rng):
    table = _pick_table(rng)
    select = _select_list(rng, ["t"], rng.randint(1, 3))
    where = _predicate(rng, ["t"]) if rng.random() < 0.5 else "TRUE"
    order = ", ".join(f"{n + 1} {rng.choice(['ASC', 'DESC'])}{rng.choice(['', ' NULLS FIRST', ' NULLS LAST'])}"
                      for n in range(len(select)))
    # Every output column is an ORDER BY key, so the rows a LIMIT keeps are the same in both engines.
    limit = rng.choice(["", f" LIMIT {rng.randint(0, 12)}", f" LIMIT {rng.randint(1, 8)} OFFSET {rng.randint(0, 6)}"])
    return dict(sql=f"SELECT {', '.join(select)} FROM {table} t WHERE {where} ORDER BY {order}{limit}", ordered=True)


def _shape_order_by_key(rng):
    """TopN / ORDER BY on one float key (NaN largest, NULLS placed, -0.0 tying 0.0), ties broken by a unique id."""
    table = rng.choice(["a", "b"])
    column = rng.choice(["f", "fk", "d", "s", "dt"])
    direction = rng.choice(["ASC", "DESC"])
    nulls = rng.choice(["", " NULLS FIRST", " NULLS LAST"])
    limit = rng.choice(["", f" LIMIT {rng.randint(1, 15)}"])
    return dict(sql=f"SELECT t.{column} AS c0 FROM {table} t ORDER BY t.{column} {direction}{nulls}{limit}",
                ordered=True)


def _shape_group_expression(rng):
    """GROUP BY an expression, with avg or count(DISTINCT) (no TLP: those do not recombine)."""
    table = _pick_table(rng)
    kind = rng.choice(["int", "dbl", "str", "dec"])
    key = _value(rng, ["t"], kind, 1)
    while "t." not in key:  # a constant key would be a position (GROUP BY 1) or one group
        key = _value(rng, ["t"], kind, 1)
    value = rng.choice(["i", "d", "f"])
    where = _predicate(rng, ["t"]) if rng.random() < 0.5 else "TRUE"
    if rng.random() < 0.3:  # DISTINCT beside a plain aggregate: one aggregation per kind over a UNION ALL
        aggregates = f"count(DISTINCT t.{rng.choice(list(_COLUMN_TYPES))}) AS a0, count(*) AS n"
    else:
        aggregates = f"avg(t.{value}) AS a0, count(*) AS n, max({_typed(_value(rng, ['t'], kind, 1))}) AS a1"
    return dict(sql=f"SELECT {key} AS g0, {aggregates} FROM {table} t WHERE {where} GROUP BY {key}")


def _shape_derived(rng):
    """A grouped derived table joined back to a table on its key (aggregation below a join)."""
    outer, inner = _pick_table(rng), _pick_table(rng)
    key = rng.choice(["k", "fk", "s"])
    function = rng.choice(["count", "sum", "min", "max"])
    inner_where = _predicate(rng, ["y"]) if rng.random() < 0.5 else "TRUE"
    kind = rng.choice(["JOIN", "LEFT JOIN"])
    tlp = (f"SELECT x.i AS c0, x.{key} AS c1, g.v AS c2 FROM {outer} x {kind} (SELECT y.{key} AS gk, "
           f"{function}(y.i) AS v FROM {inner} y WHERE {inner_where} GROUP BY y.{key}) AS g ON x.{key} = g.gk "
           f"WHERE {{where}}")
    return dict(sql=tlp.format(where="TRUE"), tlp=tlp, aliases=["x"])


def _shape_scalar_subquery(rng):
    outer, inner = _pick_table(rng), _pick_table(rng)
    column = rng.choice(["i", "d", "f", "k"])
    function = rng.choice(["min", "max", "avg", "sum"])
    op = rng.choice(["<", "<=", ">", ">=", "=", "<>"])
    inner_where = _predicate(rng, ["y"]) if rng.random() < 0.5 else "TRUE"
    tlp = (f"SELECT x.id_ AS c0 FROM {outer} x WHERE x.{column} {op} (SELECT {function}(y.{column}) FROM {inner} y "
           f"WHERE {inner_where}) AND {{where}}").replace("x.id_", f"x.{rng.choice(list(_COLUMN_TYPES))}")
    return dict(sql=tlp.format(where="TRUE"), tlp=tlp, aliases=["x"])


def _shape_three_way_join(rng):
    a, b, c = _pick_table(rng), _pick_table(rng), _pick_table(rng)
    first = rng.choice(["JOIN", "LEFT JOIN", "FULL JOIN"])
    second = rng.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN"])
    key1, key2 = rng.choice(["k", "fk", "s"]), rng.choice(["k", "fk", "s", "dt"])
    from_ = (f"{a} x {first} {b} y ON x.{key1} = y.{key1} {second} {c} z ON "
             f"{rng.choice(['x', 'y'])}.{key2} = z.{key2}")
    aliases = ["x", "y", "z"]
    items, how = _aggregate_list(rng, rng.choice(aliases))
    base = _predicate(rng, aliases) if rng.random() < 0.4 else "TRUE"
    tlp = f"SELECT {', '.join(items)} FROM {from_} WHERE {{where}}"
    return dict(sql=tlp.format(where=base), tlp=tlp, tlp_base=base, tlp_aggregates=tuple(how), aliases=aliases)


SHAPES = {
    "project": _shape_project,
    "aggregate": _shape_aggregate,
    "group_by": _shape_group_by,
    "distinct": _shape_distinct,
    "count_distinct": _shape_count_distinct,
    "join": _shape_join,
    "join_aggregate": _shape_join_aggregate,
    "semi": _shape_semi,
    "order_limit": _shape_order_limit,
    "order_by_key": _shape_order_by_key,
    "group_expression": _shape_group_expression,
    "derived": _shape_derived,
    "scalar_subquery": _shape_scalar_subquery,
    "three_way_join": _shape_three_way_join,
}


def generate_case(seed: int) -> FuzzCase:
    """Return the query of ``seed``: shape by seed, contents drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    shape = list(SHAPES)[seed % len(SHAPES)]
    fields = SHAPES[shape](rng)
    aliases = fields.pop("aliases", ["t"])
    if fields.get("tlp"):
        fields["tlp_predicate"] = _predicate(rng, aliases)
    return FuzzCase(seed=seed, shape=shape, **fields)


# ------------------------------------------------------------------------------------------------- checking
@dataclass
class Outcome:
    """What one case came to: ``status`` is ``ok``, ``skipped`` (unsupported), ``both_raised`` or ``failed``."""

    case: FuzzCase
    status: str
    detail: str = ""
    checks: list[str] = field(default_factory=list)


def is_unsupported(error: Exception) -> bool:
    """Return whether ``error`` is the engine's clean refusal of something it does not implement."""
    from gpu_engine.errors import PlanError

    text = str(error).lower()  # "unsupported SQL: ...", "... not supported yet", "... are supported when ..."
    return isinstance(error, PlanError) and ("supported" in text or "not implemented" in text)


def _canonical(value):
    if isinstance(value, float):
        if math.isnan(value):
            return ("nan",)
        return value + 0.0  # -0.0 -> 0.0
    return value


def _combine(how: str, values: list):
    present = [v for v in values if v is not None]
    if how == "count":
        return sum(values)
    if not present:
        return None
    if how == "sum":
        return sum(present) if not all(isinstance(v, decimal.Decimal) for v in present) else sum(present, decimal.Decimal(0))
    def order(v):  # DuckDB's order: NaN greatest
        return (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v)
    return min(present, key=order) if how == "min" else max(present, key=order)


def _recombine(parts: list[pa.Table], how: tuple[str, ...], schema: pa.Schema) -> pa.Table:
    """Return the aggregate query's answer from its three TLP parts (per group where ``how`` has keys)."""
    keys = [n for n, h in enumerate(how) if h == "key"]
    groups: dict[tuple, list[list]] = {}
    order: list[tuple] = []
    for part in parts:
        for row in zip(*[c.to_pylist() for c in part.columns]):
            key = tuple(_canonical(row[n]) for n in keys)
            if key not in groups:
                groups[key] = [[] for _ in how]
                order.append(key)
                for n in keys:
                    groups[key][n] = [row[n]]
            for n, h in enumerate(how):
                if h != "key":
                    groups[key][n].append(row[n])
    if not keys and not groups:
        groups[()] = [[] for _ in how]
        order.append(())
    rows = []
    for key in order:
        rows.append([values[0] if h == "key" else _combine(h, values) for h, values in zip(how, groups[key])])
    columns = [pa.array([row[n] for row in rows], type=schema.field(n).type) for n in range(len(how))]
    return pa.Table.from_arrays(columns, names=schema.names)


def run_case(case: FuzzCase, session, connection, tlp: bool = True) -> Outcome:
    """Run ``case`` on the engine and in DuckDB, compare, then check its TLP parts; return the outcome."""
    from duckdb_reference import rows_mismatch
    from gpu_engine.errors import GpuEngineError

    outcome = Outcome(case, "ok")
    try:
        expected = connection.sql(case.sql).to_arrow_table()
        duckdb_error = None
    except Exception as error:  # DuckDB refuses the query (an overflow, a type error): so must the engine
        expected, duckdb_error = None, error
    try:
        actual = session.sql(case.sql)
    except Exception as error:
        if is_unsupported(error):
            return Outcome(case, "skipped", f"{type(error).__name__}: {error}")
        if duckdb_error is not None and isinstance(error, GpuEngineError):
            return Outcome(case, "both_raised", f"DuckDB: {duckdb_error}; engine: {error}")
        return Outcome(case, "failed", f"engine raised {type(error).__name__}: {error}"
                       + (f" (DuckDB raised too: {duckdb_error})" if duckdb_error else ""))
    if duckdb_error is not None:
        return Outcome(case, "failed", f"engine answered {actual.num_rows} rows where DuckDB raised: {duckdb_error}")
    problem = rows_mismatch(actual, expected, ordered=case.ordered)
    outcome.checks.append("duckdb")
    if problem is not None:
        return Outcome(case, "failed", f"differs from DuckDB: {problem}", outcome.checks)
    if not (tlp and case.tlp and case.tlp_predicate):
        return outcome
    try:
        whole = session.sql(case.tlp_whole())
        parts = [session.sql(sql) for sql in case.tlp_parts()]
    except Exception as error:
        if is_unsupported(error):
            return outcome
        return Outcome(case, "failed", f"a TLP part raised {type(error).__name__}: {error}", outcome.checks)
    if case.tlp_aggregates:
        combined = _recombine(parts, case.tlp_aggregates, whole.schema)
    else:
        combined = pa.concat_tables(parts)
    problem = rows_mismatch(combined, whole)
    outcome.checks.append("tlp")
    if problem is not None:
        return Outcome(case, "failed", f"TLP parts (p = {case.tlp_predicate}) do not add up to the whole: {problem}",
                       outcome.checks)
    if case.tlp_aggregates:
        return outcome
    union = " UNION ALL ".join(case.tlp_parts())  # the same parts as one query: the engine's UNION ALL
    try:
        united = session.sql(union)
    except Exception as error:
        if is_unsupported(error):
            return outcome
        return Outcome(case, "failed", f"the TLP parts' UNION ALL raised {type(error).__name__}: {error}",
                       outcome.checks)
    problem = rows_mismatch(united, whole)
    outcome.checks.append("tlp_union")
    if problem is not None:
        return Outcome(case, "failed", f"the TLP parts' UNION ALL (p = {case.tlp_predicate}) differs from the whole: "
                                       f"{problem}", outcome.checks)
    return outcome
