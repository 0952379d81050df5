"""Conjuncts restricting one column intersect, and constant comparisons fold, in the estimates (issue 31).

TPC-DS q74's ``year_total`` branches carry ``(d_year = 2001 OR d_year = 2002)``
beside a derived ``d_year = 2002``: multiplied, the two shares estimated the
branch at 1/40 of its rows, and its ``'s' = 'w'`` (a CTE's constant column
against a literal, folded later by the optimizer) at 1/2 more. One year is
kept, and a never-true comparison keeps none
(:func:`gpu_engine.sql.statistics.intersected_value_sets`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import sqlglot

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.sql.planning_context import Relation
from gpu_engine.sql.predicates import filter_estimate
from gpu_engine.sql.statistics import ColumnStatistics, selectivity

_STATS = {"y": ColumnStatistics(40.0, 1990, 2029), "k": ColumnStatistics(400.0, 0, 399),
          "t": ColumnStatistics(4.0, "a", "d")}
_COLUMNS = {("d", "d_year"): "y", ("d", "d_key"): "k", ("d", "d_type"): "t"}


def _column_stats(column):
    return _STATS.get(_COLUMNS.get((column.table, column.name), ""))


def _share(condition: str) -> float:
    return selectivity(sqlglot.parse_one(condition, read="duckdb"), _column_stats)


def _rows(*conditions: str) -> float:
    relation = Relation(node=None, columns=_COLUMNS, aliases=frozenset({"d"}), rows=400.0, stats=_STATS)
    return filter_estimate(relation, [sqlglot.parse_one(c, read="duckdb") for c in conditions])


def test_conjuncts_on_one_column_keep_the_values_they_share():
    assert _share("(d.d_year = 2001 OR d.d_year = 2002) AND d.d_year = 2002") == pytest.approx(1 / 40)
    assert _share("d.d_year IN (2001, 2002, 2003) AND d.d_year IN (2002, 2003, 2004)") == pytest.approx(2 / 40)
    assert _share("d.d_type IN ('a', 'b') AND d.d_type = 'b'") == pytest.approx(1 / 4)
    assert _share("d.d_year IN (2001, 2002) AND d.d_year = 2003") == 0.0  # no value in common: no rows
    # the planner's conjunct lists (a CTE's filter beside a derived one): the same, floored at one row
    assert _rows("d.d_year = 2001 OR d.d_year = 2002", "d.d_year = 2002") == pytest.approx(10.0)
    assert _rows("d.d_year = 2001 OR d.d_year = 2002", "2002 = d.d_year", "d.d_key < 200") == pytest.approx(
        10.0 * 200 / 399)
    assert _rows("d.d_year = 2001", "d.d_year = 2002") == 1.0


def test_other_conjuncts_are_estimated_as_before():
    assert _share("d.d_year IN (2001, 2002)") == pytest.approx(2 / 40)
    assert _share("d.d_year = 2001 AND d.d_key = 7") == pytest.approx(1 / 40 / 400)  # two columns multiply
    assert _share("d.d_year = 2001 AND d.d_year <> 2002") == pytest.approx(1 / 40 * 39 / 40)
    assert _share("d.d_year = 2001 AND d.d_year = '2001'") == pytest.approx(1 / 40 / 40)  # mixed kinds
    assert _share("(d.d_year = 2001 OR d.d_key = 3) AND d.d_year = 2001") == pytest.approx(
        (1 / 40 + 1 / 400 - 1 / 16000) / 40)  # an OR over two columns restricts neither


def test_a_comparison_of_constants_is_estimated_as_what_it_folds_to():
    assert _share("'s' = 'w'") == 0.0
    assert _share("'s' = 's'") == 1.0
    assert _share("'s' <> 'w'") == 1.0
    assert _share("1 < 2") == 1.0 and _share("2 <= 1") == 0.0
    assert _share("NOT ('s' = 'w')") == 1.0
    assert _share("'s' = 'w' OR d.d_year = 2001") == pytest.approx(1 / 40)
    assert _share("TRUE") == 1.0 and _share("FALSE") == 0.0
    assert _share("'1' = 1") == 0.5  # a string against a number: left to the default
    assert _rows("'s' = 'w'", "d.d_year = 2001") == 1.0


_RNG = np.random.default_rng(31)
DAYS = pa.table({"d_key": pa.array(np.arange(60), pa.int32()),
                 "d_year": pa.array(1990 + np.arange(60) // 10, pa.int32())})
SALES = pa.table({"s_day": pa.array(_RNG.integers(0, 60, 200), pa.int32()),
                  "s_type": pa.array(np.where(_RNG.random(200) < 0.5, "s", "w")),
                  "s_amount": pa.array(_RNG.integers(0, 1000, 200), pa.int64())})
QUERIES = [
    "SELECT d_year, count(*), sum(s_amount) FROM sales, days WHERE s_day = d_key "
    "AND (d_year = 1991 OR d_year = 1992) AND d_year = 1992 GROUP BY d_year",
    "SELECT s_type, sum(s_amount) FROM sales, days WHERE s_day = d_key AND d_year IN (1991, 1992) "
    "AND d_year = 1993 GROUP BY s_type",
    "WITH t AS (SELECT 's' AS kind, s_day, s_amount FROM sales WHERE s_type = 's' UNION ALL "
    "SELECT 'w' AS kind, s_day, s_amount FROM sales WHERE s_type = 'w') "
    "SELECT d_year, sum(s_amount) FROM t, days WHERE s_day = d_key AND kind = 's' GROUP BY d_year",
]


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_queries_with_intersected_and_constant_conjuncts_answer_as_duckdb(device):
    tables = {"sales": SALES, "days": DAYS}
    session = session_with_tables(tables, device=device)
    with duckdb_with_tables(tables) as reference:
        for sql in QUERIES if device == "cpu" else QUERIES[:1]:
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
