"""The rewrite passes for rare constructs run only where the parsed query holds theirs (gpu_engine.sql.tree_census).

Planning a new text walked the whole tree once per such pass (USING SAMPLE, range() in FROM, SEMI/ANTI JOIN,
COLUMNS(...), * EXCLUDE/REPLACE, GROUP/ORDER BY ALL, set operations, string_agg, current_date, random()), each
walk finding nothing in most queries. A query without them plans without calling any of those passes (each
replaced by one that raises: fails where a pass still walks every query); each construct still reaches its
pass; the census notes what a tree holds. What the passes answer is tested in their own modules' tests.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlglot
from pass_spies import record_calls, refuse_calls
from sqlglot import exp

import gpu_engine.sql.rewrite as rewrite
from gpu_engine.sql import plan_sql
from gpu_engine.sql.tree_census import tree_census

CATALOG = {"t": pa.schema([("k", pa.int32()), ("s", pa.string()), ("d", pa.date32())]),
           "u": pa.schema([("k", pa.int32()), ("v", pa.float64())])}

#: rewrite's name of each pass -> a query that needs it.
PASSES = {
    "with_samples_as_random_filters": "SELECT count(*) FROM t USING SAMPLE 10%",
    "with_series_as_sources": "SELECT count(*) FROM range(5) r",
    "check_set_operation_widths": "SELECT k FROM t UNION ALL SELECT k FROM u",
    "note_written_names": "SELECT string_agg(s, ',') FROM t",
    "note_current_date_names": "SELECT count(*) FROM t WHERE d < current_date",
    "with_semi_anti_joins_as_exists": "SELECT t.k FROM t SEMI JOIN u ON t.k = u.k",
    "with_columns_expanded": "SELECT min(COLUMNS(*)) FROM u",
    "check_star_modifiers": "SELECT * EXCLUDE (s) FROM t",
    "_desugar": "SELECT k, count(*) FROM t GROUP BY ALL ORDER BY ALL",
}

PLAIN = ("SELECT t.s, sum(u.v) AS total, count(*) FROM t JOIN u ON t.k = u.k "
         "WHERE t.k IN (SELECT k FROM u WHERE v > 1) GROUP BY t.s HAVING count(*) > 1 ORDER BY total DESC LIMIT 5")


def test_a_query_without_rare_constructs_plans_without_their_passes(monkeypatch):
    refuse_calls(monkeypatch, rewrite, PASSES, "walked a query without its construct")
    assert plan_sql(PLAIN, CATALOG) is not None


@pytest.mark.parametrize("name", list(PASSES))
def test_each_rare_construct_reaches_its_pass(monkeypatch, name):
    called = record_calls(monkeypatch, rewrite, [name])
    plan_sql(PASSES[name], CATALOG)
    assert called


def test_the_census_notes_what_the_tree_holds():
    plain = tree_census(sqlglot.parse_one(PLAIN, read="duckdb"))
    assert plain.holds(exp.Join, exp.Subquery) and not plain.holds(exp.SetOperation, exp.TableSample)
    assert not (plain.semi_anti_joins or plain.star_modifiers or plain.all_keys)
    assert tree_census(sqlglot.parse_one(PASSES["with_semi_anti_joins_as_exists"], read="duckdb")).semi_anti_joins
    assert tree_census(sqlglot.parse_one("SELECT * REPLACE (k + 1 AS k) FROM t", read="duckdb")).star_modifiers
    assert tree_census(sqlglot.parse_one("SELECT k FROM t ORDER BY ALL", read="duckdb")).all_keys
    assert tree_census(sqlglot.parse_one("SELECT k FROM t EXCEPT SELECT k FROM u", read="duckdb")).holds(
        exp.SetOperation)
