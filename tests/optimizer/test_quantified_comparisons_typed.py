"""``x op ANY|ALL (subquery)`` as a typed predicate the decorrelation rule plans (issue 30 item 0).

A :class:`~gpu_engine.plans.subqueries.QuantifiedComparison` in a Filter (a conjunct, under OR / NOT) or a Project
becomes a left join of the subquery's ``count(*)``, ``count(column)``, ``min`` and ``max`` per correlation key (one
row, nested-loop joined, uncorrelated) and SQL's three values over them; ``= ANY`` / ``<> ALL`` are IN / NOT IN
(semi, null-aware anti or mark joins). Against DuckDB: ``x > ALL (empty)`` TRUE, NULLs in the subquery, NULL ``x``,
keys without subquery rows; hand-built plans and their JSON form on cpu and cuda-sim, drivers 1 and 2; the same
forms through SQL typed (no CASE written on the sqlglot tree), including positions that were refused before (a
correlated subquery with ORDER BY ... LIMIT; HAVING, an aggregating SELECT list, IN under OR in HAVING).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_built_plans_match_duckdb, assert_queries_match_duckdb, session_with_tables
from gpu_engine.errors import PlanError
from gpu_engine.optimizer import required_rewrites
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal, UnaryOp, walk
from gpu_engine.plans.nodes import FilterNode, HashJoinNode, ProjectNode, walk_plan
from gpu_engine.plans.plan_builder import PlanBuilder
from gpu_engine.plans.subqueries import InSubquery, OuterColumn, QuantifiedComparison, is_subquery_predicate
from subquery_tables import BOOL, HandPlans, I64, TABLES


def _col(name, dtype=I64):
    return ColumnRef(name, dtype)


def _plans(catalog):
    """Return name -> (hand-built plan over t holding quantified comparisons, DuckDB's SQL)."""
    shapes = HandPlans(catalog)
    scan, where, select = shapes.scan, shapes.where, shapes.select

    def keyed():
        return BinaryOp("eq", _col("k"), OuterColumn("k", I64), BOOL)

    def q(op, every, table="u", correlation=None, value="v", predicate=None):
        return QuantifiedComparison(_col(value), scan(table, predicate), "w", op, every, correlation)

    return {
        "gt_all_conjunct": (where(q("gt", True)), "SELECT k, v FROM t WHERE v > ALL (SELECT w FROM u)"),
        "gt_all_empty": (where(q("gt", True, "e")), "SELECT k, v FROM t WHERE v > ALL (SELECT w FROM e)"),
        "ge_all_not_null": (where(q("ge", True, predicate="w IS NOT NULL")),
                            "SELECT k, v FROM t WHERE v >= ALL (SELECT w FROM u WHERE w IS NOT NULL)"),
        "lt_any_or": (where(BinaryOp("or", q("lt", False), UnaryOp("is_null", _col("k"), BOOL), BOOL)),
                      "SELECT k, v FROM t WHERE v < ANY (SELECT w FROM u) OR k IS NULL"),
        "not_le_all": (where(UnaryOp("not", q("le", True, predicate="w < 20"), BOOL)),
                       "SELECT k, v FROM t WHERE NOT (v <= ALL (SELECT w FROM u WHERE w < 20))"),
        "values_uncorrelated": (select(q("ge", False)), "SELECT k, v, v >= ANY (SELECT w FROM u) AS m FROM t"),
        "ne_any_value": (select(q("ne", False)), "SELECT k, v, v <> ANY (SELECT w FROM u) AS m FROM t"),
        "eq_all_value": (select(q("eq", True, predicate="w = 15")),
                         "SELECT k, v, v = ALL (SELECT w FROM u WHERE w = 15) AS m FROM t"),
        "eq_any_value": (select(q("eq", False)), "SELECT k, v, v = ANY (SELECT w FROM u) AS m FROM t"),
        "ne_all_value": (select(q("ne", True)), "SELECT k, v, v <> ALL (SELECT w FROM u) AS m FROM t"),
        "correlated_value": (select(q("gt", True, correlation=keyed(), value="k")),
                             "SELECT k, v, k > ALL (SELECT w FROM u WHERE u.k = t.k) AS m FROM t"),
        "correlated_lt_any": (select(q("lt", False, correlation=keyed())),
                              "SELECT k, v, v < ANY (SELECT w FROM u WHERE u.k = t.k) AS m FROM t"),
        "correlated_conjunct": (where(q("le", True, correlation=keyed(), value="k")),
                                "SELECT k, v FROM t WHERE k <= ALL (SELECT w FROM u WHERE u.k = t.k)"),
        "correlated_ne_all_conjunct": (where(q("ne", True, correlation=keyed())),
                                       "SELECT k, v FROM t WHERE v <> ALL (SELECT w FROM u WHERE u.k = t.k)"),
    }


@pytest.mark.parametrize("device, drivers", [("cpu", 1), ("cpu", 2), ("cuda-sim", 2)])
def test_hand_built_quantified_comparisons_answer_as_duckdb(device, drivers):
    session = session_with_tables(TABLES, split_rows=3, device=device, drivers=drivers, compile_mode="lowest")
    plans = _plans(session.catalog)
    names = list(plans) if device == "cpu" else ["gt_all_empty", "correlated_lt_any", "not_le_all"]
    assert_built_plans_match_duckdb(session, TABLES, plans, names, json_round_trip=device == "cpu" and drivers == 2)


def test_a_quantified_comparison_is_a_left_join_of_facts_and_equality_forms_are_membership():
    session = session_with_tables(TABLES, device="cpu")
    plans = _plans(session.catalog)
    plan = required_rewrites(plans["correlated_conjunct"][0])
    assert not any(is_subquery_predicate(e) for n in walk_plan(plan) if isinstance(n, (FilterNode, ProjectNode))
                   for expr in (n.expressions if isinstance(n, ProjectNode) else (n.predicate,)) for e in walk(expr))
    assert [j.join_type for j in walk_plan(plan) if isinstance(j, HashJoinNode)] == ["left"]
    # <> ALL as a conjunct: NOT IN over a correlated subquery, a NULL-aware mark join (not the facts' min / max)
    ne_all = required_rewrites(plans["correlated_ne_all_conjunct"][0])
    assert not any(call.function in ("min", "max") for n in walk_plan(ne_all) for call in getattr(n, "aggregates", ()))


def test_a_quantified_comparison_over_a_non_key_correlation_is_refused_by_name():
    session = session_with_tables(TABLES, device="cpu")
    inner = PlanBuilder(session.catalog).table_scan("u").plan()
    compared = QuantifiedComparison(_col("v"), inner, "w", "gt", True, BinaryOp("lt", _col("k"), OuterColumn(
        "k", I64), BOOL))
    plan = PlanBuilder(session.catalog).table_scan("t").filter(compared).plan()
    with pytest.raises(PlanError, match="correlation is not equalities"):
        required_rewrites(plan)


def test_a_quantified_comparison_of_a_missing_column_or_operator_is_refused_by_validation():
    session = session_with_tables(TABLES, device="cpu")
    inner = PlanBuilder(session.catalog).table_scan("u").plan()
    with pytest.raises(PlanError, match="does not output"):
        PlanBuilder(session.catalog).table_scan("t").filter(QuantifiedComparison(_col("v"), inner, "x", "gt")).plan()
    with pytest.raises(PlanError, match="op must be one of"):
        PlanBuilder(session.catalog).table_scan("t").filter(QuantifiedComparison(_col("v"), inner, "w", "like")).plan()


N = pa.table({
    "a": pa.array([1, 2, 3, 4, None, None, 7, 2], pa.int32()),
    "g": pa.array(["x", "y", None, "y", "x", None, "q", "x"]),
    "d": pa.array([0.5, None, 2.5, None, 4.0, 1.0, None, 2.0], pa.float64()),
})
M = pa.table({
    "k": pa.array(["x", "x", "y", None, "y", "z", None], pa.string()),
    "w": pa.array([2, None, 3, 4, None, 1, None], pa.int64()),
    "o": pa.array([3, 1, 2, 5, 4, 6, 7], pa.int64()),
})
SQL_TABLES = {"n": N, "m": M}
SQL_QUERIES = [
    # correlated by an equality, NULL keys, keys without rows, subqueries holding only NULLs (x > ALL: NULL or TRUE)
    "SELECT a, g, a > ALL (SELECT w FROM m WHERE m.k = n.g) AS p, a <= ANY (SELECT w FROM m WHERE m.k = n.g) AS q, "
    "a <> ANY (SELECT w FROM m WHERE m.k = n.g) AS r, a = ALL (SELECT w FROM m WHERE m.k = n.g) AS s FROM n",
    # under OR / NOT, an expression as the value, a decimal-free numeric widening (int32 against int64, double)
    "SELECT a, g FROM n WHERE NOT (a + 1 > ALL (SELECT w FROM m WHERE m.k = n.g)) OR g IS NULL",
    "SELECT a, d FROM n WHERE d < ANY (SELECT w FROM m WHERE m.k = n.g) OR a = 7",
    # inside a CASE in WHERE and in ORDER BY
    "SELECT a FROM n WHERE CASE WHEN a >= ALL (SELECT w FROM m) THEN TRUE ELSE a IS NULL END",
    # a correlated subquery that orders and limits (each key's first row): refused before, typed now
    "SELECT a, g, a < ANY (SELECT w FROM m WHERE m.k = n.g ORDER BY o LIMIT 1) AS p FROM n",
    "SELECT a, g FROM n WHERE a >= ALL (SELECT w FROM m WHERE m.k = n.g AND w IS NOT NULL ORDER BY o DESC LIMIT 1)",
    # over the groups: HAVING (correlated by a grouping key, under OR), an aggregating SELECT list, IN under OR in
    # HAVING (each refused before)
    "SELECT g, sum(a) AS s FROM n GROUP BY g HAVING sum(a) > ALL (SELECT w FROM m WHERE m.k = n.g) OR g IS NULL",
    "SELECT g, count(*) AS c, max(a) <= ANY (SELECT w FROM m) AS p, min(a) < ALL (SELECT w FROM m WHERE m.k = n.g) "
    "AS q FROM n GROUP BY g",
    "SELECT g, sum(a) AS s FROM n GROUP BY g HAVING sum(a) IN (SELECT w FROM m) OR g = 'q'",
    "SELECT g, count(*) AS c FROM n GROUP BY g HAVING NOT (count(*) + 1 IN (SELECT w FROM m WHERE m.k = n.g)) "
    "OR g IS NULL",
]


@pytest.mark.parametrize("device, drivers", [("cpu", 1), ("cpu", 2), ("cuda-sim", 2)])
def test_sql_quantified_comparisons_match_duckdb(device, drivers, reference_tables):
    session = session_with_tables(SQL_TABLES, device=device, drivers=drivers, fuse=False)
    queries = SQL_QUERIES if device == "cpu" else SQL_QUERIES[:1] + SQL_QUERIES[4:5]
    assert_queries_match_duckdb(session, reference_tables, queries)


def test_sql_quantified_comparisons_are_typed_predicates():
    """Each text's plan holds a typed predicate (before: a CASE over joined derived tables, or a refusal)."""
    session = session_with_tables(SQL_TABLES, device="cpu")
    for sql in SQL_QUERIES:
        plan = session.sql_plan(sql)
        found = [e for n in walk_plan(plan) if isinstance(n, (FilterNode, ProjectNode))
                 for expr in (n.expressions if isinstance(n, ProjectNode) else (n.predicate,)) for e in walk(expr)
                 if is_subquery_predicate(e)]
        assert found, sql


@pytest.fixture
def reference_tables():
    from duckdb_reference import duckdb_with_tables

    with duckdb_with_tables(SQL_TABLES) as connection:
        yield connection


def test_membership_forms_stay_in_subqueries():
    """``= ANY`` / ``<> ALL`` typed by hand are IN / NOT IN to the rule: an uncorrelated ``= ANY`` conjunct a semi
    join, no facts."""
    session = session_with_tables(TABLES, device="cpu")
    inner = PlanBuilder(session.catalog).table_scan("u").plan()
    plan = PlanBuilder(session.catalog).table_scan("t").filter(
        QuantifiedComparison(_col("v"), inner, "w", "eq")).plan()
    joins = [j.join_type for j in walk_plan(required_rewrites(plan)) if isinstance(j, HashJoinNode)]
    assert joins in (["left_semi"], ["right_semi"])
    assert isinstance(InSubquery(_col("v"), inner, "w"), InSubquery)
    assert Literal(1, I64).value == 1
