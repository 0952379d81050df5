"""PlanBuilder builds quoted column names, ``"a" AS "b"`` and quoted sort keys without sqlglot's parser.

Issue 29 item 4 / issue 31 item 4 (the cost of a new query text): the SQL
planner hands PlanBuilder its columns as quoted snippets, and planning the 99
TPC-DS texts tokenized and parsed ~3,700 of them, a tenth of planning. Those
forms are now made directly (:func:`gpu_engine.plans.sql_translator._simple_snippet`)
as the very nodes the parser makes, so plans and errors are unchanged.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

import gpu_engine.plans.sql_translator as translator
from gpu_engine.errors import PlanError
from gpu_engine.plans.plan_builder import PlanBuilder
from gpu_engine.sql import plan_sql

#: Names as the planner makes them (``alias.column``, ``name#2``, ``$sort0``) and odd ones a user may register.
NAMES = ["a", "MixedCase", 'quo"te', 'two""quotes', "x#2", "store_returns.sr_customer_sk", "$sort0", "with space",
         "ünïcödé", "back\\slash", "select", "1st", "tab\tin"]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@pytest.mark.parametrize("name", NAMES)
def test_the_simple_forms_are_the_trees_the_parser_makes(name):
    other = NAMES[(NAMES.index(name) + 1) % len(NAMES)]
    for text in (_quoted(name), f"{_quoted(name)} AS {_quoted(other)}"):
        assert repr(translator._simple_snippet(text, None)) == repr(sqlglot.parse_one(text, dialect="duckdb"))
    for suffix in ("ASC", "DESC", "ASC NULLS FIRST", "ASC NULLS LAST", "DESC NULLS FIRST", "DESC NULLS LAST"):
        text = f"{_quoted(name)} {suffix}"
        parsed = exp.maybe_parse(text, into=exp.Ordered, dialect="duckdb")
        assert repr(translator._simple_snippet(text, exp.Ordered)) == repr(parsed), text


@pytest.mark.parametrize("text", ['"a" as "b"', '"a"  AS "b"', '"a" AS b', 'a', '"a" + 1', '"a" DESC NULLS', '""',
                                  '"a" AS "b" AS "c"', '"a"."b"', '"a" AS "b"; DROP TABLE t'])
def test_other_texts_go_to_the_parser(text):
    assert translator._simple_snippet(text, None) is None
    assert translator._simple_snippet(text, exp.Ordered) is None


def test_plan_builder_gives_the_same_plans_and_errors_for_simple_snippets():
    catalog = {"t": pa.schema([("a", pa.int64()), ('quo"te', pa.string()), ("x#2", pa.float64())])}
    plan = (PlanBuilder(catalog).table_scan("t").project(['"a" AS "k"', '"quo""te"', '"x#2" AS "v"'])
            .aggregation(['"k"'], ['sum("v") AS "s"']).order_by(['"s" DESC NULLS FIRST', '"k" ASC']).plan())
    assert plan.output_schema.names == ["k", "s"]
    assert [(k.name, k.ascending, k.nulls_first) for k in plan.keys] == [("s", False, True), ("k", True, False)]
    with pytest.raises(PlanError, match="unknown column 'nope'"):
        PlanBuilder(catalog).table_scan("t").project(['"nope" AS "k"'])
    with pytest.raises(PlanError, match="unknown column 'nope'"):
        PlanBuilder(catalog).table_scan("t").order_by(['"nope" DESC NULLS LAST'])
    with pytest.raises(PlanError, match="must be an input column name"):
        PlanBuilder(catalog).table_scan("t").order_by(['"a" + 1 DESC'])


def test_planning_a_query_tokenizes_no_snippet(monkeypatch):
    """Scans renamed, joins, grouping, ORDER BY with LIMIT: every snippet the planner writes is a simple form."""
    tokenized = []
    tokenize = translator._DUCKDB.tokenize
    monkeypatch.setattr(translator._DUCKDB, "tokenize", lambda text: tokenized.append(text) or tokenize(text))
    catalog = {"t": pa.schema([("k", pa.int64()), ("v", pa.float64()), ("s", pa.string())]),
               "u": pa.schema([("k", pa.int64()), ("s", pa.string())])}
    plan = plan_sql("SELECT t.s, u.s AS us, sum(t.v) AS total, count(*) AS n FROM t JOIN u ON t.k = u.k "
                    "WHERE t.v > 1 GROUP BY t.s, u.s ORDER BY total DESC, t.s LIMIT 5", catalog)
    assert plan.output_schema.names == ["s", "us", "total", "n"]
    assert tokenized == []
