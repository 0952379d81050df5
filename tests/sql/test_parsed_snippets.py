"""The SQL planner hands PlanBuilder the query's parsed expressions, never SQL text to parse again.

Issue 28 item 11 / issue 30 item 0: the planner wrote every expression out as
a SQL snippet over the plan's column names and PlanBuilder parsed it again (a
2000-term WHERE clause was tokenized and parsed twice, a third of its
planning). PlanBuilder now takes a parsed sqlglot tree wherever it takes a
snippet (:mod:`gpu_engine.plans.sql_translator`), the planner renames a copy
of each expression (:mod:`gpu_engine.sql.renaming`), and errors still name the
expression by its SQL text and place it in the query.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlglot

import gpu_engine.plans.sql_translator as translator
from gpu_engine.errors import PlanError
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.sql import SqlError, plan_sql
from gpu_engine.sql.renaming import renamed_copy

CATALOG = {
    "t": pa.schema([("a", pa.int64()), ("b", pa.string()), ("q", pa.decimal128(12, 2))]),
    "u": pa.schema([("k", pa.int64()), ("c", pa.string())]),
}


def _tree(text: str) -> sqlglot.exp.Expression:
    return sqlglot.parse_one(text, dialect="duckdb")


def _build(snippet):
    """Return a plan using ``snippet(text)`` for every expression: a filter, a join filter, projections, aggregates."""
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("u")
    return (PlanBuilder(CATALOG, id_generator=ids).table_scan("t")
            .filter(snippet("a > 1 AND (b LIKE 'x%' OR q BETWEEN 1.5 AND 7)"))
            .hash_join(["a"], ["k"], build, ["a", "b", "q", "c"], filter=snippet("b <> c OR a IS NULL"))
            .project([snippet("a + 1 AS a1"), snippet("CASE WHEN q > 2 THEN b ELSE c END AS s"), snippet("q")])
            .aggregation(["s"], [snippet("sum(a1) AS total"), snippet("count(*)"), snippet("max(q) AS top")])
            .plan())


def test_plan_builder_takes_parsed_trees_as_it_takes_their_text():
    assert repr(_build(_tree)) == repr(_build(str))


@pytest.mark.parametrize("call, text, message", [
    (lambda b, s: b.filter(s), "a + 1", "a filter predicate must be boolean"),
    (lambda b, s: b.filter(s), "nope > 1", "unknown column 'nope'"),
    (lambda b, s: b.project([s]), "nope + 1", "unknown column 'nope'"),
    (lambda b, s: b.aggregation([], [s]), "sum(b) AS x", "sum is not defined for string"),
    (lambda b, s: b.aggregation([], [s]), "a + 1", "expected an aggregate call"),
])
def test_an_error_names_a_parsed_tree_by_its_sql_text(call, text, message):
    tree = _tree(text)
    written = translator.snippet_text(tree)  # the tree's SQL: the text as the DuckDB dialect writes it
    errors = []
    for snippet in (tree, written):
        with pytest.raises(PlanError, match=message) as caught:
            call(PlanBuilder(CATALOG).table_scan("t"), snippet)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]  # the same words as for its text, never the tree's repr
    assert "exp." not in errors[0] and "this=" not in errors[0]


def test_the_planner_parses_no_expression_of_the_query_again(monkeypatch):
    """Only the text's own parse reads the WHERE chain; PlanBuilder tokenizes no more than a key's name."""
    tokenized = []
    tokenize = translator._DUCKDB.tokenize
    monkeypatch.setattr(translator._DUCKDB, "tokenize", lambda text: tokenized.append(text) or tokenize(text))
    chain = " AND ".join(f"t.a <> {i}" for i in range(300))
    plan = plan_sql(f"SELECT t.b, sum(t.a + 1) AS s, count(*) AS n FROM t JOIN u ON t.a = u.k AND t.b <> u.c "
                    f"WHERE {chain} AND t.q > 1 GROUP BY t.b HAVING sum(t.a) > 5 ORDER BY s DESC LIMIT 3", CATALOG)
    assert plan.output_schema.names == ["b", "s", "n"]
    assert max(map(len, tokenized), default=0) < 40, max(tokenized, key=len)


def test_a_planner_error_keeps_its_message_and_position():
    text = "SELECT a\nFROM t\nWHERE " + " AND ".join(f"a <> {i}" for i in range(100)) + " AND b > 1"
    with pytest.raises(SqlError, match=r"cannot compare string with int32 \(in Filter\[1\], at 'b > 1'\)") as caught:
        plan_sql(text, CATALOG)
    assert (caught.value.line, caught.value.column_number) == (3, text.split("\n")[2].index("b > 1") + 1)


def test_a_renamed_copy_leaves_the_query_tree_as_it_was():
    tree = _tree("a + 1 > b AND NOT (a IN (1, 2, 3))")
    before = tree.sql()
    copy = renamed_copy(tree, lambda node: sqlglot.exp.column("x") if isinstance(node, sqlglot.exp.Column) else node)
    assert tree.sql() == before
    assert copy.sql() == "x + 1 > x AND NOT (x IN (1, 2, 3))"
    assert all(node is not original for node in copy.walk() for original in tree.walk())


def test_windows_set_operations_and_grouping_columns_are_not_parsed_again(monkeypatch):
    """Window calls (frames, IGNORE NULLS), a tuple's count(DISTINCT ...), INTERSECT's side columns and
    grouping()'s CASE reach PlanBuilder as trees: it tokenizes nothing (it parsed each as text before)."""
    tokenized = []
    tokenize = translator._DUCKDB.tokenize
    monkeypatch.setattr(translator._DUCKDB, "tokenize", lambda text: tokenized.append(text) or tokenize(text))
    plan_sql("SELECT a, sum(a) OVER (PARTITION BY b ORDER BY a ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s, "
             "lag(a IGNORE NULLS) OVER (ORDER BY q) AS p FROM t", CATALOG)
    plan_sql("SELECT a FROM t INTERSECT SELECT k FROM u", CATALOG)
    plan_sql("SELECT a, b, grouping(a, b) AS g, count(*) AS n FROM t GROUP BY ROLLUP (a, b)", CATALOG)
    plan_sql("SELECT b, count(DISTINCT (a, q)) AS n FROM t GROUP BY b", CATALOG)
    assert tokenized == []
