"""PlanBuilder's aggregate translation copies a call only when a spelling needs rewriting (issue 31 item 4).

``parse_aggregate`` gives every aggregate spelling one node (:func:`normalize_aggregate_calls`); it deep-copied
each call it was handed for that, though the SQL planner's calls are normalized already: a third of the deep copies
planning TPC-DS made. A call needing no rewrite is now returned as it is; one that does is rewritten on a copy,
the caller's tree left as it was, with the same result as before (Spark's ``first_value`` inside a window too).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from gpu_engine.plans.sql_aggregates import normalize_aggregate_calls


def test_a_call_needing_no_rewrite_is_not_copied():
    for text in ["sum(x)", "count(DISTINCT x + 1)", "first(x ORDER BY y)", "string_agg(s, ',' ORDER BY y)"]:
        tree = sqlglot.parse_one(text, dialect="duckdb")
        assert normalize_aggregate_calls(tree) is tree, text


def test_a_rewritten_call_leaves_the_callers_tree_as_it_was():
    cases = [("arbitrary(x)", "duckdb", "FIRST(x)"),
             ("percentile_cont(0.5) WITHIN GROUP (ORDER BY x DESC)", "duckdb", "QUANTILE_CONT(x, -0.5)"),
             ("regr_avgx(y, x)", "duckdb", "AVG(CAST(CASE WHEN NOT y IS NULL THEN x END AS DOUBLE))"),
             ("product(x) FILTER (WHERE y > 1)", "duckdb", "PRODUCT(CASE WHEN y > 1 THEN x END)"),
             ("first_value(x)", "spark", "FIRST(x)")]
    for text, dialect, expected in cases:
        tree = sqlglot.parse_one(text, dialect=dialect)
        before = repr(tree)
        assert normalize_aggregate_calls(tree, dialect=dialect).sql(dialect) == expected, text
        assert repr(tree) == before, text


def test_spark_first_value_stays_a_window_function_inside_a_window_only():
    window = sqlglot.parse_one("first_value(x) OVER (ORDER BY y)", dialect="spark")
    assert isinstance(normalize_aggregate_calls(window, dialect="spark").this, exp.FirstValue)
    assert isinstance(normalize_aggregate_calls(window.this, dialect="spark"), exp.First)  # the call alone
