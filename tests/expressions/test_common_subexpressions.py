"""Shared subexpressions are hoisted once, each after the ones it uses, and nothing else changes."""

import pyarrow as pa

from gpu_engine.expressions.common_subexpressions import hoist_common_subexpressions, hoists_from_branches
from gpu_engine.plans.sql_translator import parse_projection

SCHEMA = pa.schema([("ep", pa.decimal128(15, 2)), ("d", pa.decimal128(15, 2)), ("t", pa.decimal128(15, 2))])


def _hoist(*texts):
    expressions = tuple(parse_projection(text, SCHEMA, "Project[0]")[1] for text in texts)
    definitions, rewritten = hoist_common_subexpressions(expressions)
    return [(name, e.sql()) for name, e in definitions], [e.sql() for e in rewritten]


def test_q1_prices_share_the_discounted_price():
    definitions, rewritten = _hoist("ep * (1 - d) AS a", "ep * (1 - d) * (1 + t) AS b")
    assert definitions == [("$cse0", "(ep * (1 - d))")]
    assert rewritten == ["$cse0", "($cse0 * (1 + t))"]


def test_nested_definitions_come_after_what_they_use():
    definitions, rewritten = _hoist("ep * (1 - d) AS a", "ep * (1 - d) * (1 + t) + 1 AS b",
                                    "ep * (1 - d) * (1 + t) + 2 AS c", "(1 - d) + t AS e")
    names = [name for name, _ in definitions]
    for position, (_, text) in enumerate(definitions):
        for later in names[position:]:
            assert later not in text
    assert "(1 - d)" not in rewritten[-1] and rewritten[-1].endswith(" + t)")


def test_nothing_shared_changes_nothing():
    definitions, rewritten = _hoist("ep + d AS a", "ep - t AS b")
    assert definitions == [] and rewritten == ["(ep + d)", "(ep - t)"]


def _from_branches(*texts):
    expressions = tuple(parse_projection(text, SCHEMA, "Project[0]")[1] for text in texts)
    return hoists_from_branches(expressions, hoist_common_subexpressions(expressions)[0])


def test_only_what_case_branches_alone_share_is_computed_on_rows_they_skip():
    """Such a definition may fail where its expressions would not: FilterProject then evaluates them as written."""
    assert not _from_branches("ep * (1 - d) AS a", "ep * (1 - d) * (1 + t) AS b")  # Q1: no extra host sync
    assert _from_branches("CASE WHEN t > 0 THEN ep * d END AS a", "CASE WHEN t > 0 THEN ep * d + 1 END AS b")
    assert _from_branches("coalesce(ep, ep * d) AS a", "coalesce(t, ep * d) AS b")  # coalesce is a CASE
    assert not _from_branches("CASE WHEN t > 0 THEN ep * d END AS a", "ep * d AS b")  # on every row anyway
    assert not _from_branches("CASE WHEN ep * d > 0 THEN 1 END AS a", "ep * d AS b")  # a first condition
    assert _from_branches("CASE WHEN t > 0 THEN 1 WHEN ep * d > 0 THEN 2 END AS a",  # a later condition,
                          "CASE WHEN t > 0 THEN 1 ELSE ep * d END AS b")  # an ELSE
