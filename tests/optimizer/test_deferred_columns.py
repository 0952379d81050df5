"""A top N's carried string columns of a table are fetched after it by the table's key proven unique and never NULL
(:mod:`gpu_engine.optimizer.deferred_columns`).

TPC-H q10's shape with a top 7 over customers whose key is unique and never NULL: the names and phones come from a
second scan joined on the key above the top N. Not fetched later: a key with one NULL (the join on it would lose
that row), a key held twice (two rows of one key: the join would double them), a string the sort or a filter reads.
Answers are DuckDB's, with ties in the sort key (a revenue shared by several customers).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer import deferred_columns, optimize_plan
from gpu_engine.plans.nodes import TableScanNode, walk_plan
from gpu_engine.sql.ordering import order_key_columns
from test_unique_groupings import _N, _Q10, CUST, DUPES, LINES, NATION, _customers

# 240 customers: a top 5 or 7 is under a tenth of them (the floor of 10 rows a top row needs).
TABLES = {"cust": CUST, "dupes": DUPES, "keyed": _customers(list(range(_N))), "nation": NATION, "lines": LINES,
          "tied": pa.table({"l_cust": pa.array([k % 40 for k in range(200)], pa.int64()),
                            "l_price": pa.array([1] * 200, pa.decimal128(15, 2))})}
_TOP = _Q10 + " ORDER BY revenue DESC, c_key LIMIT 7"
FETCHED = {  # query -> the columns the fetch scan reads
    "q10_top": (_TOP.format(t="keyed"), {"c_key", "c_name"}),
    "ties": (_Q10.replace("FROM lines", "FROM tied").format(t="keyed") + " ORDER BY revenue DESC, c_key LIMIT 5",
             {"c_key", "c_name"}),
    "no_aggregation": ("SELECT c_key, c_name, c_balance, n_name, l_price FROM keyed, nation, lines "
                       "WHERE c_nation = n_key AND l_cust = c_key ORDER BY l_price DESC, c_key LIMIT 9",
                       {"c_key", "c_name"}),
}
KEPT = {
    "key_with_a_null": _TOP.format(t="cust"),
    "key_held_twice": _TOP.format(t="dupes"),
    "sorted_by_the_string": _Q10.format(t="keyed") + " ORDER BY c_name DESC NULLS LAST, c_key LIMIT 7",
    "filtered_by_the_string": _Q10.replace("c_nation = n_key", "c_nation = n_key AND c_name LIKE '%1%'").format(t="keyed")
                              + " ORDER BY revenue DESC, c_key LIMIT 7",
}


@pytest.fixture(autouse=True)
def small_tables(monkeypatch):
    """These tables are a few hundred rows: the rule's floor lowered to fit them."""
    monkeypatch.setattr(deferred_columns, "MIN_TABLE_ROWS", 0)


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _fetch_scans(sql: str) -> list[TableScanNode]:
    session = session_with_tables(TABLES, device="cpu")
    plan = optimize_plan(session.sql_plan(sql), session.statistics())
    return [n for n in walk_plan(plan) if isinstance(n, TableScanNode) and n.id.endswith(".fetch")]


@pytest.mark.parametrize("name", list(FETCHED))
def test_carried_strings_are_fetched_after_the_top_n(name):
    sql, columns = FETCHED[name]
    [fetch] = _fetch_scans(sql)
    assert set(fetch.columns) == columns, name


@pytest.mark.parametrize("name", list(KEPT))
def test_nothing_is_fetched_without_a_key_or_where_the_string_is_read(name):
    fetched = _fetch_scans(KEPT[name])
    assert not fetched or "c_name" not in fetched[0].columns, name
    if name.startswith("key_"):
        assert fetched == []


def test_answers_match_duckdb(device_name, reference):
    queries = [sql for sql, _ in FETCHED.values()] + list(KEPT.values())
    small = {"split_rows": 64, "drivers": 3, "batch_rows": 64}
    if device_name == "cuda-sim":
        queries, small = [FETCHED["q10_top"][0]], {"splits": 2, "drivers": 2}
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest", **small)
    assert_queries_match_duckdb(session, reference, queries, ordered=order_key_columns, exact_types=True)
