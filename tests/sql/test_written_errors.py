"""A type error inside a query names the expression as its user wrote it, at its own position in the text.

The SQL planner hands PlanBuilder the query's parsed expressions renamed to the plan's internal columns
(``"$window0"``, ``"$sum0"``, ``"u.a"``) and used to write window calls out as SQL text that PlanBuilder
parsed again. Errors named that rewritten text (``at '"$window0" + 'x''``, ``at 'SUM("b") AS "$sum0"'``)
and were placed at the start of the clause or conjunct holding the expression. Now each substituted node
records the query's node it stands for (:mod:`gpu_engine.plans.snippet_sources`): the message names the
user's expression and the error's line and column are those of the offending sub-expression's first token.
Planning only (no query runs).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.sql import SqlError, plan_sql

CATALOG = {
    "t": pa.schema([("a", pa.int64()), ("b", pa.string()), ("d", pa.float64())]),
    "u": pa.schema([("a", pa.int64()), ("c", pa.string())]),
}

#: (query, the expression the message must name, the text its position must point at)
CASES = [
    ("SELECT a, row_number() OVER (ORDER BY b) + 'x' AS r FROM t",
     "ROW_NUMBER() OVER (ORDER BY b) + 'x'", "row_number()"),
    ("SELECT a, sum(b) OVER (PARTITION BY a) AS s FROM t", "SUM(b)", "sum(b)"),
    ("SELECT a, lag(d, 1, 'x') OVER (ORDER BY a) AS p FROM t", "LAG(d, 1, 'x')", "lag("),
    ("SELECT a, sum(b) FROM t GROUP BY ROLLUP (a)", "SUM(b)", "sum(b)"),
    ("SELECT a, sum(d) FROM t GROUP BY a HAVING sum(d) > 1 AND upper(max(a)) = 'X'", "UPPER(MAX(a))", "upper("),
    ("SELECT t.a FROM t JOIN u ON t.a = u.a AND u.c > 3 + b", "3 + b", "3 + b"),
    ("SELECT count(*) FROM t, u WHERE t.a = u.a AND (t.b > u.a OR t.d > 1)", "t.b > u.a", "t.b > u.a"),
    ("SELECT a FROM t WHERE a > 1 AND (a = 2 OR\n  d + 'x' > 0)", "d + 'x'", "d + 'x'"),
    ("SELECT a, d * 2 AS twice FROM t ORDER BY b + 1", "b + 1", "b + 1"),
]


@pytest.mark.parametrize("query, written, marker", CASES)
def test_an_error_names_the_users_expression_at_its_position(query, written, marker):
    with pytest.raises(SqlError) as caught:
        plan_sql(query, CATALOG)
    message = str(caught.value)
    assert f"at {written!r}" in message, message
    assert "$" not in message, message  # no internal column name
    before = query[:query.index(marker)]
    expected = (before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1)
    assert (caught.value.line, caught.value.column_number) == expected, message


def test_a_hand_written_snippet_error_keeps_its_text():
    """PlanBuilder's own text snippets are not the planner's: their errors name the text as given."""
    from gpu_engine.errors import PlanError
    from gpu_engine.plans.plan_builder import PlanBuilder

    with pytest.raises(PlanError, match=r"at '\"b\" \+ 1'") as caught:
        PlanBuilder({"t": CATALOG["t"]}).table_scan("t").filter('"b" + 1 > 0').plan()
    assert caught.value.tree is None  # its positions are the snippet's: nothing to place in a query
