"""A correlated scalar aggregate's magic set reads the outer table's key-only filters over the inner keys.

TPC-H Q20's shape: the aggregate over ``i`` correlated on (k1, k2) with ``o``, whose only filter reads its key
``k1``: the aggregate's input is filtered by that filter over ``i.a`` instead of a semi join with ``o`` scanned
again (:mod:`gpu_engine.sql.magic_set_key_filters`). A filter of another column, keys of two types, and NULL keys
keep the answers DuckDB gives.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer import optimize_plan
from gpu_engine.plans.nodes import TableScanNode

O = pa.table({
    "k1": pa.array([1, 1, 2, 3, 4, 5, None, 6], pa.int64()),
    "k2": pa.array([10, 11, 10, 12, None, 13, 10, 14], pa.int64()),
    "v": pa.array([5, 1, 7, 2, 3, 100, 4, 0], pa.int64()),
    "tag": pa.array(["x", "y", "x", None, "x", "y", "x", "x"]),
    "n": pa.array([1, 1, 2, 3, 4, 5, None, 6], pa.int32()),
})
I = pa.table({
    "a": pa.array([1, 1, 1, 2, 3, 3, 5, None, 4, 7, 6], pa.int64()),
    "b": pa.array([10, 10, 11, 10, 12, 12, 13, 10, None, 10, 14], pa.int64()),
    "q": pa.array([2, 2, 3, 4, 1, None, 50, 9, 1, 8, 0], pa.int64()),
    "m": pa.array([1, 1, 1, 2, 3, 3, 5, None, 4, 7, 6], pa.int32()),
})
P = pa.table({"pk": pa.array([1, 3, 5, 6, 7], pa.int64()), "name": ["fa", "gb", "fc", "fd", "fe"]})
TABLES = {"o": O, "i": I, "p": P}

QUERIES = {
    "in_subquery_of_a_key": "SELECT k1, k2 FROM o WHERE k1 IN (SELECT pk FROM p WHERE name LIKE 'f%') "
                            "AND v > (SELECT 0.5 * sum(q) FROM i WHERE i.a = o.k1 AND i.b = o.k2)",
    "comparison_of_a_key": "SELECT k1, k2 FROM o WHERE k1 > 1 AND v >= (SELECT sum(q) FROM i WHERE i.a = o.k1)",
    "null_keys_kept_by_the_filter": "SELECT k1, v FROM o WHERE (k1 IS NULL OR k1 >= 3) "
                                    "AND v > (SELECT avg(q) FROM i WHERE i.a = o.k1)",
    "count_true_for_an_empty_group": "SELECT k1, k2 FROM o WHERE k2 > 10 "
                                     "AND (SELECT count(*) FROM i WHERE i.b = o.k2) = 0",
    "another_column_filtered": "SELECT k1, k2 FROM o WHERE k1 > 1 AND tag = 'x' "
                               "AND v > (SELECT sum(q) FROM i WHERE i.a = o.k1)",
    "keys_of_two_types": "SELECT k1 FROM o WHERE k1 < 5 AND v > (SELECT sum(q) FROM i WHERE i.m = o.k1)",
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


@pytest.mark.parametrize("name", list(QUERIES))
def test_magic_set_key_filters_match_duckdb(name, device_name, reference):
    session = session_with_tables(TABLES, device=device_name)
    assert_same_rows(session.sql(QUERIES[name]), duckdb_table(reference, QUERIES[name]))


def _scans(plan, table: str) -> int:
    own = isinstance(plan, TableScanNode) and plan.table_name == table
    return int(own) + sum(_scans(source, table) for source in plan.sources)


@pytest.mark.parametrize("name, outer_scans", [("in_subquery_of_a_key", 1), ("comparison_of_a_key", 1),
                                               ("another_column_filtered", 2), ("keys_of_two_types", 2)])
def test_only_key_filters_of_one_type_skip_scanning_the_outer_table_again(name, outer_scans):
    """Key-only filters move onto the inner keys (one scan of ``o``); another column's filter or keys of two types
    keep the magic set's semi join with ``o`` scanned again."""
    session = session_with_tables(TABLES, device="cpu")
    plan = optimize_plan(session.sql_plan(QUERIES[name]), session.statistics())  # subqueries made joins
    assert _scans(plan, "o") == outer_scans
