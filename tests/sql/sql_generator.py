"""Generate random SQL queries over the TPC-H tables, reproducibly from a seed, for comparisons with DuckDB.

Each query draws one of a few shapes (filters and projections, grouped and
global aggregation with HAVING, joins along foreign keys, [NOT] IN, [NOT]
EXISTS, uncorrelated and correlated scalar subqueries, LEFT JOIN, DISTINCT,
CTEs, ORDER BY + LIMIT, CASE, LIKE, EXTRACT, BETWEEN, date arithmetic) and
fills it with random columns, constants and predicates. Results are kept small
(aggregated, or cut by LIMIT after an ORDER BY over every output column, so
the rows a LIMIT keeps are the same in both engines).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["GeneratedQuery", "generate_query", "SHAPES"]


@dataclass(frozen=True)
class GeneratedQuery:
    """One generated query: its SQL and whether its row order is part of the answer."""

    shape: str
    sql: str
    ordered: bool


# Numeric columns and a range of constants to compare them with.
_NUMBERS = {
    "lineitem": [("l_quantity", 1, 50), ("l_discount", 0.0, 0.1), ("l_extendedprice", 1000, 90000),
                 ("l_tax", 0.0, 0.08), ("l_linenumber", 1, 7)],
    "orders": [("o_totalprice", 1000, 400000), ("o_shippriority", 0, 1)],
    "customer": [("c_acctbal", -999, 9999), ("c_nationkey", 0, 24)],
    "supplier": [("s_acctbal", -999, 9999), ("s_nationkey", 0, 24)],
    "part": [("p_size", 1, 50), ("p_retailprice", 900, 2000)],
    "partsupp": [("ps_availqty", 1, 9999), ("ps_supplycost", 1, 1000)],
    "nation": [("n_regionkey", 0, 4)],
}
_DATES = {"lineitem": ["l_shipdate", "l_commitdate", "l_receiptdate"], "orders": ["o_orderdate"]}
# String columns with values that occur, for equality / IN; and LIKE patterns.
_STRINGS = {
    "lineitem": [("l_returnflag", ["A", "N", "R"]), ("l_linestatus", ["O", "F"]),
                 ("l_shipmode", ["AIR", "MAIL", "SHIP", "TRUCK", "RAIL", "FOB", "REG AIR"]),
                 ("l_shipinstruct", ["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"])],
    "orders": [("o_orderstatus", ["F", "O", "P"]),
               ("o_orderpriority", ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"])],
    "customer": [("c_mktsegment", ["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD", "FURNITURE"])],
    "part": [("p_brand", [f"Brand#{a}{b}" for a in range(1, 6) for b in range(1, 6)]),
             ("p_container", ["SM CASE", "MED BOX", "LG PACK", "JUMBO JAR", "WRAP BAG"]),
             ("p_mfgr", [f"Manufacturer#{i}" for i in range(1, 6)])],
    "nation": [("n_name", ["FRANCE", "GERMANY", "BRAZIL", "CHINA", "JAPAN", "PERU"])],
    "region": [("r_name", ["AMERICA", "ASIA", "EUROPE", "AFRICA", "MIDDLE EAST"])],
    "supplier": [],
    "partsupp": [],
}
_LIKES = {
    "part": [("p_type", ["%BRASS", "PROMO%", "%POLISHED%", "STANDARD%"]), ("p_name", ["%green%", "forest%", "%red"])],
    "customer": [("c_phone", ["1%", "2_-%", "%5"])],
    "orders": [("o_comment", ["%special%", "%requests%"])],
    "lineitem": [("l_comment", ["%fluffily%", "%ironic%"])],
    "supplier": [("s_comment", ["%Customer%", "%quick%"])],
}
# Grouping keys with few values, per table.
_GROUP_KEYS = {
    "lineitem": ["l_returnflag", "l_linestatus", "l_shipmode", "l_linenumber"],
    "orders": ["o_orderstatus", "o_orderpriority", "o_shippriority"],
    "customer": ["c_mktsegment", "c_nationkey"],
    "supplier": ["s_nationkey"],
    "part": ["p_mfgr", "p_container", "p_size"],
    "partsupp": [],
    "nation": ["n_regionkey"],
    "region": ["r_name"],
}
# Foreign keys: (child table, child column, parent table, parent key).
_FOREIGN_KEYS = [
    ("lineitem", "l_orderkey", "orders", "o_orderkey"),
    ("lineitem", "l_partkey", "part", "p_partkey"),
    ("lineitem", "l_suppkey", "supplier", "s_suppkey"),
    ("orders", "o_custkey", "customer", "c_custkey"),
    ("customer", "c_nationkey", "nation", "n_nationkey"),
    ("supplier", "s_nationkey", "nation", "n_nationkey"),
    ("nation", "n_regionkey", "region", "r_regionkey"),
    ("partsupp", "ps_partkey", "part", "p_partkey"),
    ("partsupp", "ps_suppkey", "supplier", "s_suppkey"),
]
_SMALL_TABLES = ["orders", "customer", "supplier", "part", "partsupp", "lineitem"]


def _constant(rng: random.Random, low, high) -> str:
    if isinstance(low, float):
        return f"{rng.uniform(low, high):.2f}"
    return str(rng.randint(low, high))


def _date(rng: random.Random) -> str:
    return f"DATE '{rng.randint(1992, 1998)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}'"


def _predicate(rng: random.Random, table: str, prefix: str = "") -> str:
    """Return one random predicate over ``table`` (columns prefixed with ``prefix`` such as ``o.``)."""
    kinds = ["number"] if _NUMBERS.get(table) else []
    if _DATES.get(table):
        kinds.append("date")
    if _STRINGS.get(table):
        kinds += ["string", "in"]
    if _LIKES.get(table):
        kinds.append("like")
    kind = rng.choice(kinds)
    if kind == "number":
        column, low, high = rng.choice(_NUMBERS[table])
        op = rng.choice(["<", "<=", ">", ">=", "<>", "BETWEEN"])
        if op == "BETWEEN":
            a, b = sorted([_constant(rng, low, high), _constant(rng, low, high)], key=float)
            return f"{prefix}{column} BETWEEN {a} AND {b}"
        return f"{prefix}{column} {op} {_constant(rng, low, high)}"
    if kind == "date":
        column = rng.choice(_DATES[table])
        if rng.random() < 0.5:
            return f"{prefix}{column} {rng.choice(['<', '>=', '<='])} {_date(rng)}"
        unit = rng.choice(["DAY", "MONTH", "YEAR"])
        amount = {"DAY": rng.randint(1, 90), "MONTH": rng.randint(1, 12), "YEAR": 1}[unit]
        start = _date(rng)
        return f"{prefix}{column} >= {start} AND {prefix}{column} < {start} + INTERVAL '{amount}' {unit}"
    if kind == "string":
        column, values = rng.choice(_STRINGS[table])
        return f"{prefix}{column} {rng.choice(['=', '<>'])} '{rng.choice(values)}'"
    if kind == "in":
        column, values = rng.choice(_STRINGS[table])
        chosen = rng.sample(values, min(len(values), rng.randint(1, 3)))
        negate = "NOT " if rng.random() < 0.3 else ""
        return f"{prefix}{column} {negate}IN ({', '.join(repr(v) for v in chosen)})"
    column, patterns = rng.choice(_LIKES[table])
    negate = "NOT " if rng.random() < 0.3 else ""
    return f"{prefix}{column} {negate}LIKE '{rng.choice(patterns)}'"


def _where(rng: random.Random, table: str, prefix: str = "", at_least: int = 1) -> str:
    parts = [_predicate(rng, table, prefix) for _ in range(rng.randint(at_least, 2))]
    if len(parts) == 2 and rng.random() < 0.3:
        return f"({parts[0]} OR {parts[1]})"
    return " AND ".join(parts)


def _number(rng: random.Random, table: str, prefix: str = "") -> str:
    return prefix + rng.choice(_NUMBERS[table])[0]


def _aggregates(rng: random.Random, table: str, prefix: str = "") -> list[str]:
    out = ["count(*) AS cnt"]
    for i in range(rng.randint(1, 3)):
        function = rng.choice(["sum", "min", "max", "avg", "count"])
        out.append(f"{function}({_number(rng, table, prefix)}) AS a{i}")
    return out


def _filter_project(rng: random.Random) -> GeneratedQuery:
    table = rng.choice(_SMALL_TABLES)
    numbers = [c for c, _, _ in _NUMBERS[table]]
    columns = rng.sample(numbers, min(len(numbers), 2))
    expressions = list(columns)
    if rng.random() < 0.5:
        expressions.append(f"{columns[0]} * 2 + 1 AS twice")
    if rng.random() < 0.4:
        a, low, high = rng.choice(_NUMBERS[table])
        expressions.append(f"CASE WHEN {a} > {_constant(rng, low, high)} THEN 'high' ELSE 'low' END AS band")
    if _DATES.get(table) and rng.random() < 0.4:
        expressions.append(f"extract(year FROM {rng.choice(_DATES[table])}) AS yr")
    order = ", ".join(str(i + 1) for i in range(len(expressions)))
    return GeneratedQuery("filter", f"SELECT {', '.join(expressions)} FROM {table} WHERE {_where(rng, table)} "
                                    f"ORDER BY {order} LIMIT {rng.randint(1, 50)}", True)


def _group_by(rng: random.Random) -> GeneratedQuery:
    table = rng.choice([t for t in _SMALL_TABLES if _GROUP_KEYS[t]])
    keys = rng.sample(_GROUP_KEYS[table], rng.randint(1, min(2, len(_GROUP_KEYS[table]))))
    aggregates = _aggregates(rng, table)
    having = f" HAVING count(*) > {rng.randint(0, 50)}" if rng.random() < 0.4 else ""
    where = f" WHERE {_where(rng, table)}" if rng.random() < 0.7 else ""
    return GeneratedQuery("group_by", f"SELECT {', '.join(keys)}, {', '.join(aggregates)} FROM {table}{where} "
                                      f"GROUP BY {', '.join(keys)}{having}", False)


def _global_aggregate(rng: random.Random) -> GeneratedQuery:
    table = rng.choice(_SMALL_TABLES)
    aggregates = _aggregates(rng, table)
    if rng.random() < 0.3:  # DISTINCT beside plain aggregates: one aggregation per DISTINCT argument
        aggregates.append(f"count(DISTINCT {_number(rng, table)}) AS d")
    return GeneratedQuery("aggregate", f"SELECT {', '.join(aggregates)} FROM {table} WHERE {_where(rng, table)}",
                          False)


def _join_path(rng: random.Random, length: int) -> tuple[list[str], list[str]]:
    """Return tables along foreign keys and the equalities joining them."""
    child, column, parent, key = rng.choice(_FOREIGN_KEYS)
    tables, conditions = [child, parent], [f"{column} = {key}"]
    while len(tables) < length:
        options = [fk for fk in _FOREIGN_KEYS if (fk[0] in tables) != (fk[2] in tables)]
        if not options:
            break
        child, column, parent, key = rng.choice(options)
        tables.append(parent if child in tables else child)
        conditions.append(f"{column} = {key}")
    return tables, conditions


def _join(rng: random.Random) -> GeneratedQuery:
    tables, conditions = _join_path(rng, rng.randint(2, 4))
    filters = [_predicate(rng, t) for t in rng.sample(tables, rng.randint(1, len(tables)))]
    keyed = [t for t in tables if _GROUP_KEYS.get(t)]
    numbered = [t for t in tables if _NUMBERS.get(t)]
    key_table = rng.choice(keyed) if keyed else None
    value_table = rng.choice(numbered)
    select = [f"count(*) AS cnt", f"sum({_number(rng, value_table)}) AS total"]
    group = ""
    if key_table is not None:
        key = rng.choice(_GROUP_KEYS[key_table])
        select.insert(0, key)
        group = f" GROUP BY {key}"
    if rng.random() < 0.5:
        where = " AND ".join(conditions + filters)
        from_ = ", ".join(tables)
    else:  # explicit JOIN ... ON
        from_ = tables[0] + "".join(f" JOIN {t} ON {c}" for t, c in zip(tables[1:], conditions))
        where = " AND ".join(filters) or "TRUE"
    return GeneratedQuery("join", f"SELECT {', '.join(select)} FROM {from_} WHERE {where}{group}", False)


def _in_subquery(rng: random.Random) -> GeneratedQuery:
    child, column, parent, key = rng.choice(_FOREIGN_KEYS)
    negate = "NOT " if rng.random() < 0.4 else ""
    if rng.random() < 0.5:  # child rows whose parent qualifies
        outer, outer_column, inner, inner_column = child, column, parent, key
    else:  # parents that have a qualifying child
        outer, outer_column, inner, inner_column = parent, key, child, column
    inner_where = _where(rng, inner) if _NUMBERS.get(inner) or _STRINGS.get(inner) else "TRUE"
    number = _number(rng, outer) if _NUMBERS.get(outer) else outer_column
    return GeneratedQuery("in", f"SELECT count(*) AS cnt, sum({number}) AS total FROM {outer} "
                                f"WHERE {outer_column} {negate}IN (SELECT {inner_column} FROM {inner} "
                                f"WHERE {inner_where})", False)


def _exists(rng: random.Random) -> GeneratedQuery:
    child, column, parent, key = rng.choice(_FOREIGN_KEYS)
    if rng.random() < 0.5:
        outer, outer_column, inner, inner_column = parent, key, child, column
    else:
        outer, outer_column, inner, inner_column = child, column, parent, key
    negate = "NOT " if rng.random() < 0.5 else ""
    inner_where = f" AND {_predicate(rng, inner, 'i.')}" if (_NUMBERS.get(inner) or _STRINGS.get(inner)) else ""
    outer_where = f"{_predicate(rng, outer, 'o.')} AND " if rng.random() < 0.5 and _NUMBERS.get(outer) else ""
    keys = _GROUP_KEYS.get(outer) or []
    key = f"o.{rng.choice(keys)}" if keys else None
    select = (f"{key}, " if key else "") + "count(*) AS cnt"
    group = f" GROUP BY {key}" if key else ""
    return GeneratedQuery("exists", f"SELECT {select} FROM {outer} o WHERE {outer_where}{negate}EXISTS "
                                    f"(SELECT * FROM {inner} i WHERE i.{inner_column} = o.{outer_column}"
                                    f"{inner_where}){group}", False)


def _scalar_subquery(rng: random.Random) -> GeneratedQuery:
    table = rng.choice(_SMALL_TABLES)
    column, _, _ = rng.choice(_NUMBERS[table])
    function = rng.choice(["avg", "min", "max"])
    op = rng.choice(["<", ">", ">=", "<="])
    inner_where = f" WHERE {_where(rng, table)}" if rng.random() < 0.6 else ""
    if rng.random() < 0.5:
        return GeneratedQuery("scalar", f"SELECT count(*) AS cnt, sum({column}) AS total FROM {table} WHERE "
                                        f"{column} {op} (SELECT {function}({column}) FROM {table}{inner_where})",
                              False)
    other = _number(rng, table)
    return GeneratedQuery("scalar", f"SELECT max({other}) AS top, (SELECT {function}({column}) FROM {table}"
                                           f"{inner_where}) AS reference FROM {table}", False)


def _correlated_scalar(rng: random.Random) -> GeneratedQuery:
    choices = [
        ("part", "p", "p_partkey", "partsupp", "ps_partkey", "ps_supplycost", "p_retailprice"),
        ("orders", "o", "o_orderkey", "lineitem", "l_orderkey", "l_extendedprice", "o_totalprice"),
        ("supplier", "s", "s_suppkey", "partsupp", "ps_suppkey", "ps_supplycost", "s_acctbal"),
        ("customer", "c", "c_custkey", "orders", "o_custkey", "o_totalprice", "c_acctbal"),
    ]
    outer, alias, key, inner, inner_key, value, outer_value = rng.choice(choices)
    function = rng.choice(["avg", "min", "max", "sum"])
    factor = rng.choice(["", "0.5 * ", "2 * "])
    op = rng.choice(["<", ">"])
    where = f" AND {_predicate(rng, inner)}" if rng.random() < 0.5 and (_NUMBERS.get(inner) or _STRINGS.get(inner)) else ""
    return GeneratedQuery("correlated", f"SELECT count(*) AS cnt, sum({outer_value}) AS total FROM {outer} {alias} "
                                        f"WHERE {alias}.{outer_value} {op} (SELECT {factor}{function}({value}) FROM "
                                        f"{inner} WHERE {inner_key} = {alias}.{key}{where})", False)


def _left_join(rng: random.Random) -> GeneratedQuery:
    pairs = [("customer", "c_custkey", "orders", "o_custkey", "o_orderkey"),
             ("supplier", "s_suppkey", "partsupp", "ps_suppkey", "ps_partkey"),
             ("part", "p_partkey", "partsupp", "ps_partkey", "ps_suppkey"),
             ("nation", "n_nationkey", "customer", "c_nationkey", "c_custkey")]
    left, left_key, right, right_key, counted = rng.choice(pairs)
    condition = f" AND {_predicate(rng, right)}" if rng.random() < 0.7 and (_NUMBERS.get(right) or _STRINGS.get(right)) else ""
    return GeneratedQuery("left_join", f"SELECT n, count(*) AS groups FROM (SELECT {left_key}, count({counted}) AS n "
                                       f"FROM {left} LEFT JOIN {right} ON {left_key} = {right_key}{condition} "
                                       f"GROUP BY {left_key}) AS counts GROUP BY n", False)


def _distinct(rng: random.Random) -> GeneratedQuery:
    table = rng.choice([t for t in _SMALL_TABLES if _GROUP_KEYS[t]])
    keys = rng.sample(_GROUP_KEYS[table], min(2, len(_GROUP_KEYS[table])))
    if _DATES.get(table) and rng.random() < 0.5:
        keys.append(f"extract(month FROM {rng.choice(_DATES[table])}) AS m")
    return GeneratedQuery("distinct", f"SELECT DISTINCT {', '.join(keys)} FROM {table} WHERE {_where(rng, table)}",
                          False)


def _cte(rng: random.Random) -> GeneratedQuery:
    table = rng.choice([t for t in _SMALL_TABLES if _GROUP_KEYS[t]])
    key = rng.choice(_GROUP_KEYS[table])
    value = _number(rng, table)
    twice = rng.random() < 0.5
    body = f"WITH totals AS (SELECT {key} AS k, sum({value}) AS s FROM {table} WHERE {_where(rng, table)} GROUP BY {key}) "
    if twice:
        return GeneratedQuery("cte", body + "SELECT k, s FROM totals WHERE s >= (SELECT avg(s) FROM totals)", False)
    return GeneratedQuery("cte", body + "SELECT count(*) AS groups, max(s) AS top FROM totals", False)


def _top_n(rng: random.Random) -> GeneratedQuery:
    tables, conditions = _join_path(rng, 2)
    a, b = tables
    columns = [_number(rng, t) for t in (a, b) if _NUMBERS.get(t)]
    columns += [c for t in (a, b) for c in [conditions[0].split(" = ")[0]]][:1]
    columns = list(dict.fromkeys(columns))
    direction = rng.choice(["ASC", "DESC"])
    order = ", ".join(f"{i + 1} {direction}" for i in range(len(columns)))
    return GeneratedQuery("top_n", f"SELECT {', '.join(columns)} FROM {a}, {b} WHERE {conditions[0]} AND "
                                   f"{_where(rng, a) if (_NUMBERS.get(a) or _STRINGS.get(a)) else 'TRUE'} "
                                   f"ORDER BY {order} LIMIT {rng.randint(1, 20)}", True)


def _left_join_where(rng: random.Random) -> GeneratedQuery:
    """A LEFT JOIN filtered in WHERE on either side (IS NULL keeps the unmatched rows: an anti join)."""
    pairs = [("customer", "c_custkey", "orders", "o_custkey"), ("part", "p_partkey", "partsupp", "ps_partkey"),
             ("supplier", "s_suppkey", "partsupp", "ps_suppkey"), ("orders", "o_orderkey", "lineitem", "l_orderkey")]
    left, left_key, right, right_key = rng.choice(pairs)
    on_extra = f" AND {_predicate(rng, right)}" if rng.random() < 0.5 else ""
    where = rng.choice([f"{right_key} IS NULL", f"{right_key} IS NOT NULL", _predicate(rng, right),
                        _predicate(rng, left)])
    value = _number(rng, left)
    return GeneratedQuery("left_join_where", f"SELECT count(*) AS cnt, count({right_key}) AS matched, sum({value}) "
                                             f"AS total FROM {left} LEFT JOIN {right} ON {left_key} = {right_key}"
                                             f"{on_extra} WHERE {where}", False)


def _join_or(rng: random.Random) -> GeneratedQuery:
    """A join whose WHERE is an OR of per-branch conditions on both tables (TPC-H Q19's shape)."""
    child, column, parent, key = rng.choice([fk for fk in _FOREIGN_KEYS if fk[2] != "region"])
    branches = []
    for _ in range(rng.randint(2, 3)):
        branches.append(f"({column} = {key} AND {_predicate(rng, child)} AND {_predicate(rng, parent)})")
    value = _number(rng, child)
    return GeneratedQuery("join_or", f"SELECT count(*) AS cnt, sum({value}) AS total FROM {child}, {parent} "
                                     f"WHERE {' OR '.join(branches)}", False)


def _join_with_subquery(rng: random.Random) -> GeneratedQuery:
    """A two-table join filtered by an IN or EXISTS subquery on one of its tables."""
    tables, conditions = _join_path(rng, 2)
    table = rng.choice(tables)
    fks = [fk for fk in _FOREIGN_KEYS if fk[0] == table or fk[2] == table]
    child, column, parent, key = rng.choice(fks)
    mine, other_table, other = (column, parent, key) if child == table else (key, child, column)
    negate = "NOT " if rng.random() < 0.4 else ""
    other_where = _predicate(rng, other_table)
    if rng.random() < 0.5:
        condition = f"{mine} {negate}IN (SELECT {other} FROM {other_table} WHERE {other_where})"
    else:
        condition = f"{negate}EXISTS (SELECT * FROM {other_table} x WHERE x.{other} = {mine} AND {other_where})"
    key_tables = [t for t in tables if _GROUP_KEYS.get(t)]
    group_key = rng.choice(_GROUP_KEYS[rng.choice(key_tables)]) if key_tables else None
    select = (f"{group_key}, " if group_key else "") + "count(*) AS cnt"
    return GeneratedQuery("join_subquery", f"SELECT {select} FROM {', '.join(tables)} WHERE {conditions[0]} AND "
                                           f"{condition}" + (f" GROUP BY {group_key}" if group_key else ""), False)


SHAPES = {
    "filter": _filter_project,
    "group_by": _group_by,
    "aggregate": _global_aggregate,
    "join": _join,
    "in": _in_subquery,
    "exists": _exists,
    "scalar": _scalar_subquery,
    "correlated": _correlated_scalar,
    "left_join": _left_join,
    "distinct": _distinct,
    "cte": _cte,
    "top_n": _top_n,
    "left_join_where": _left_join_where,
    "join_or": _join_or,
    "join_subquery": _join_with_subquery,
}


def generate_query(seed: int) -> GeneratedQuery:
    """Return the query of ``seed``: shapes in turn (seed modulo the number of shapes), details drawn at random."""
    rng = random.Random(seed)
    shapes = list(SHAPES)
    return SHAPES[shapes[seed % len(shapes)]](rng)
