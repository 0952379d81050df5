"""``unnest(list)`` / Spark's ``explode(list)`` as a SELECT output, against DuckDB (issue 30 item 6; refused before).

Planned as the FROM item it means (gpu_engine/sql/unnest_selects.py): a series list (``generate_series`` /
``range`` with column or constant arguments) or a ``string_split`` / Spark ``split`` list becomes an Unnest over
the FROM items (empty texts, empty / NULL / multi-character / per-row separators, multi-byte text), a list of
constants a VALUES list. Covered: rows with NULL or empty series (no rows, as DuckDB), WHERE before and ORDER
BY/LIMIT after the unnest, SELECT without FROM, DuckDB's column names, empty input, Spark's ``explode(array(...))``
named ``col``, and its ``LATERAL VIEW explode(...)``.
Refusals name the construct and its position.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, rows_mismatch, session_with_tables

from gpu_engine.errors import PlanError

#: The last row repeats the first: with ``n`` unique, the correlated subqueries' domains over it and a CTE's
#: ``GROUP BY n`` were projections (optimizer/unique_groupings.py).
TABLES = {"t": pa.table({"n": pa.array([3, None, 0, 2, -1, 3], pa.int64()),
                         "s": pa.array(["a,b", "b", None, "", "c,,é,", "a,b"]),
                         "sep": pa.array([",", ",", ",", ",", ",,", ","])})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT t.n, unnest(generate_series(1, t.n)) AS x FROM t",
    "SELECT unnest(generate_series(1, t.n)) FROM t",
    "SELECT unnest(range(3))",
    "SELECT unnest([1, 2, 3])",
    "SELECT t.n, unnest(['a', 'b']) AS u FROM t WHERE t.n > 0",
    "SELECT t.n, unnest(range(t.n)) AS u FROM t ORDER BY t.n, u LIMIT 3",
    "SELECT n, s, unnest(range(n, 5, 2)) AS u FROM t",
    "SELECT count(*) AS c, sum(u) AS total FROM (SELECT unnest(generate_series(1, n)) AS u FROM t) q",
    "SELECT e.n, unnest(generate_series(1, e.n)) AS x FROM e",
    "SELECT unnest([10, 20]) AS u FROM e",
    "SELECT unnest(string_split(s, ',')) FROM t",
    "SELECT n, unnest(string_split(s, '')) AS p FROM t",
    "SELECT n, unnest(string_split(s, NULL)) AS p FROM t",
    "SELECT p, count(*) AS c FROM (SELECT unnest(string_split(s, ',')) AS p FROM t) q GROUP BY p",
    "SELECT n, unnest(string_split(s, sep)) AS p FROM t WHERE n > -1 ORDER BY n, p",
    "SELECT e.s, unnest(string_split(e.s, ',')) AS p FROM e",
    "SELECT * FROM unnest([1, 2, 3]) AS u(x)",
    "SELECT * FROM unnest([1, 2, 3]) u",
    "SELECT * FROM t, unnest(string_split(t.s, ',')) u(p)",
    "SELECT * FROM t, unnest(generate_series(1, t.n))",
    "SELECT t.n, u.p FROM t JOIN unnest(['a,b', 'b']) u(p) ON t.s = u.p",
    # lists of columns, and two unnests in one SELECT: DuckDB pairs their elements, NULL past the shorter one's end
    "SELECT n, unnest([n, n * 2, NULL]) AS u FROM t",
    "SELECT unnest([s, sep]) FROM t WHERE n > 0",
    "SELECT unnest([1, 2]) AS x, unnest([1, 2, 3]) AS y",
    "SELECT n, unnest([n, 2]) AS u, unnest(['p', s, 'q']) AS v FROM t WHERE n <> 0 ORDER BY n, u, v",
    "SELECT unnest([1, 2.5]) AS x, unnest([s]) AS y FROM t",
    "SELECT unnest([n]), unnest([s, 'z']) FROM e",
    "SELECT u, count(*) AS c FROM (SELECT unnest([n, -n]) AS u FROM t) q GROUP BY u",
    "SELECT t.n, u.x FROM t, unnest([t.n, length(t.s), 7]) u(x) WHERE x > 0",
    "SELECT t.n, u.x FROM t LEFT JOIN unnest([t.n, 2]) u(x) ON u.x > 1",
    # SELECT * beside such a list: the FROM items' columns, the element in its item's place; names in any case
    "SELECT * FROM t, unnest([t.n, 1]) u(x)",
    "SELECT *, x + 1 AS y FROM t, unnest([n, length(s)]) AS u(x) WHERE n > 0",
    "SELECT * FROM (SELECT n FROM t) d, unnest([d.n, 2]) u(x), e",
    "SELECT X, U.x FROM t, unnest([n, 2]) AS u(x) ORDER BY 1",
    # the element in a subquery reading a CTE (its columns known from its definition), and * beside a CTE
    "WITH c AS (SELECT n AS m FROM t) SELECT x FROM t, unnest([t.n, 2]) u(x) WHERE EXISTS (SELECT 1 FROM c "
    "WHERE c.m = x)",
    "WITH c AS (SELECT n AS m, count(*) AS k FROM t GROUP BY n) SELECT x, (SELECT max(m) FROM c WHERE m <= x) AS mm "
    "FROM t, unnest([t.n, 2]) u(x)",
    "WITH c AS (SELECT n AS m FROM t WHERE n > 0) SELECT * FROM c, unnest([c.m, 1]) u(x)",
    # string_split of a constant: the pieces, cut while planning
    "SELECT unnest(string_split('a,,b,', ',')) AS p",
    "SELECT n, x FROM t, unnest(string_split('p;q', ';')) u(x)",
    "SELECT unnest(string_split('abé', '')) AS c",
    # a constant series pairs with another unnest as the list of its elements
    "SELECT unnest(range(4)), unnest(['a', 'b'])",
    "SELECT n, unnest(generate_series(5, 0, -2)) AS i, unnest([n, n + 1]) AS v FROM t",
    # a NULL string's split is NULL (no rows, a VARCHAR column), as is an empty string's split into characters;
    # DuckDB splits by a NULL separator into the whole string
    "SELECT unnest(string_split(NULL, ',')) AS p",
    "SELECT n, x FROM t, unnest(string_split(CAST(NULL AS VARCHAR), ';')) u(x)",
    "SELECT unnest(string_split('', '')) AS c, 1 AS k",
    "SELECT unnest(string_split('a;b', NULL)) AS c",
]


def _check(device_name, queries, reference, drivers=1):
    session = session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=2)
    assert_queries_match_duckdb(session, reference, queries, ordered=lambda sql: "ORDER BY" in sql, exact_types=True)


def test_unnest_outputs_match_duckdb_on_cpu(reference):
    _check("cpu", QUERIES, reference, drivers=2)


def test_unnest_outputs_match_duckdb_on_each_device(device_name, reference):
    _check(device_name, [QUERIES[6], QUERIES[11], QUERIES[24]], reference)


@pytest.mark.parametrize("spark, duckdb", [
    ("SELECT explode(array(1, 2)) FROM t", "SELECT unnest([1, 2]) AS col FROM t"),
    ("SELECT n, explode(array('x', 'y')) AS v FROM t WHERE n > 0",
     "SELECT n, unnest(['x', 'y']) AS v FROM t WHERE n > 0"),
    ("SELECT n, explode(split(s, ',')) AS p FROM t", "SELECT n, unnest(string_split(s, ',')) AS p FROM t"),
    ("SELECT n, v, w FROM t LATERAL VIEW explode(split(s, ',')) a AS v LATERAL VIEW explode(array(1, 2)) b AS w",
     "SELECT n, v, w FROM t, unnest(string_split(s, ',')) a(v), unnest([1, 2]) b(w)"),
    # posexplode: its position (0-based, INT) then its element; arrays of columns
    ("SELECT posexplode(array(10, 20)) FROM t",
     "SELECT unnest(range(2))::INTEGER AS pos, unnest([10, 20]) AS col FROM t"),
    ("SELECT n, posexplode(array(n, 7, NULL)) AS (p, v) FROM t WHERE n > -1",
     "SELECT n, unnest(range(3))::INTEGER AS p, unnest([n, 7, NULL]) AS v FROM t WHERE n > -1"),
    ("SELECT n, p, v FROM t LATERAL VIEW posexplode(array(n, 2)) e AS p, v WHERE v > 0",
     "SELECT * FROM (SELECT n, unnest(range(2))::INTEGER AS p, unnest([n, 2]) AS v FROM t) q WHERE v > 0"),
    ("SELECT e.pos, e.col, count(*) AS c FROM t LATERAL VIEW OUTER posexplode(array(s, 'x')) e GROUP BY e.pos, e.col",
     "SELECT pos, col, count(*) AS c FROM (SELECT unnest(range(2))::INTEGER AS pos, unnest([s, 'x']) AS col FROM t) q "
     "GROUP BY pos, col"),
    ("SELECT v, count(*) AS c FROM t LATERAL VIEW explode(array(n, -n)) e AS v GROUP BY v",
     "SELECT v, count(*) AS c FROM (SELECT unnest([n, -n]) AS v FROM t) q GROUP BY v"),
    ("SELECT explode(array(s, sep)) FROM e", "SELECT unnest([s, sep]) AS col FROM e"),
    ("SELECT n, explode(split(NULL, ',')) FROM t", "SELECT n, unnest(string_split(NULL, ',')) AS col FROM t"),
])
def test_sparks_explode_of_an_array_is_the_same_rows(spark, duckdb, reference):
    actual = session_with_tables(TABLES, device="cpu").sql(spark, dialect="spark")
    problem = rows_mismatch(actual, reference.sql(duckdb).to_arrow_table())
    assert problem is None, problem


@pytest.mark.parametrize("sql, message, column", [
    ("SELECT unnest([1, 2]) AS a, unnest(range(n)) AS b FROM t", "two unnests in one SELECT where one is not a list",
     29),
    ("SELECT unnest([1, 2]) AS a, unnest([3, 4]) + 1 AS b", "two unnests in one SELECT where one is not a list", 29),
    ("SELECT explode(array(1)) AS a, explode(array(2)) AS b FROM t LATERAL VIEW explode(array(1)) e",
     "two generators in one SELECT", 32),
    ("SELECT n FROM t LATERAL VIEW posexplode(split(s, ',')) e AS p, v", "posexplode of split(...)", 30),
    ("SELECT unnest([(SELECT 1), 2]) AS a", "a list holding a subquery", 24),
    ("WITH c AS (SELECT * FROM t) SELECT * FROM c, unnest([c.n, 1]) u(x)", "SELECT * beside a list reading columns",
     36),
    ("SELECT unnest([1, 2]) + 1 AS a", "an unnest inside an expression", 8),
    ("SELECT n, unnest([1, 2]) AS a FROM t GROUP BY n", "an unnest in a grouping", 11),
    ("SELECT unnest(string_split_regex(s, ',')) FROM t", "unnest(...) of this list expands it into rows", 8),
    ("SELECT unnest(string_split(1, ',')) AS p", "unnest of a constant string's pieces other than", 15),
])
def test_unnests_the_engine_cannot_plan_are_refused_with_their_position(sql, message, column):
    with pytest.raises(PlanError) as info:
        session_with_tables(TABLES, device="cpu").sql(sql, dialect="spark" if "LATERAL VIEW" in sql else "duckdb")
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)
