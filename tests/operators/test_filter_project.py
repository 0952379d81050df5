"""FilterProject against DuckDB: filters, projections, both fused, on every device and driver count."""

import pytest

from gpu_engine.plans import PlanBuilder

FILTERS = [
    "v_int > 0",
    "k_int IS NULL OR v_float < 0",
    "k_str = 'apple' AND v_dec >= 0",
    "k_dict IN ('apple', 'banana')",
    "d_date BETWEEN DATE '1995-01-01' AND DATE '1996-06-30'",
    "k_str LIKE '%an%'",
    "NOT (k_int < 5)",
    "v_int > 10000000",  # selects nothing
]

PROJECTIONS = [
    ["k_int", "v_int"],
    ["v_int + k_int AS s", "v_dec * 2 AS d2", "v_float / 3 AS f"],
    ["CASE WHEN v_int > 0 THEN 'pos' WHEN v_int < 0 THEN 'neg' END AS sign", "EXTRACT(year FROM d_date) AS y"],
    ["SUBSTRING(k_str, 2, 3) AS sub", "v_dec - 1 AS dm", "k_dict AS kd"],
]


def _sql_projection(items):
    return ", ".join(items).replace("EXTRACT(year FROM d_date)", "CAST(EXTRACT(year FROM d_date) AS BIGINT)")


@pytest.mark.parametrize("predicate", FILTERS)
def test_filter(session, assert_query, predicate):
    plan = PlanBuilder(session.catalog).table_scan("t").filter(predicate).plan()
    assert_query(plan, f"SELECT * FROM t WHERE {predicate}")


@pytest.mark.parametrize("projection", PROJECTIONS, ids=lambda p: p[0])
def test_project(session, assert_query, projection):
    plan = PlanBuilder(session.catalog).table_scan("t").project(projection).plan()
    assert_query(plan, f"SELECT {_sql_projection(projection)} FROM t")


@pytest.mark.parametrize("predicate,projection", [(FILTERS[0], PROJECTIONS[1]), (FILTERS[2], PROJECTIONS[2]), (FILTERS[3], PROJECTIONS[0])])
def test_filter_then_project(session, assert_query, predicate, projection):
    plan = PlanBuilder(session.catalog).table_scan("t").filter(predicate).project(projection).plan()
    assert_query(plan, f"SELECT {_sql_projection(projection)} FROM t WHERE {predicate}")
