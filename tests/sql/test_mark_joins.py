"""EXISTS and IN subqueries under OR in a WHERE, as DuckDB answers them (TPC-DS q10, q35, q45).

They were refused ("a subquery inside OR, NOT or an expression"); now each is a
typed EXISTS / IN of the Filter's predicate (``sql.decorrelation.mark_predicates``)
which the optimizer's decorrelation rule makes a mark join: a LEFT JOIN to the
subquery's distinct keys whose match flag replaces the predicate. Cases: correlated EXISTS in both
branches, EXISTS beside a plain predicate, an uncorrelated IN beside an IN
list, NULL keys on both sides, a key matching many inner rows (no row may
repeat); negated forms and an uncorrelated EXISTS are subquery values, and
an IN correlated otherwise than by equalities stays refused.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import (
    assert_queries_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables,
)

C = pa.table({
    "id": pa.array([1, 2, 3, 4, 5, None], pa.int32()),
    "name": pa.array(["a", "b", "c", None, "e", "f"]),
    "zip": pa.array(["100", "200", "300", "400", None, "100"]),
})
WEB = pa.table({"cust": pa.array([1, 1, 1, 3, None], pa.int32()), "amt": pa.array([5, 6, 7, 8, 9], pa.int64())})
CAT = pa.table({"cust": pa.array([2, 3, None], pa.int32()), "amt": pa.array([1, 50, 3], pa.int64())})
ITEM = pa.table({"item_name": pa.array(["a", "c", None, "z"]), "sk": pa.array([1, 2, 3, 4], pa.int32())})

QUERIES = {
    "exists_or_exists": "SELECT id, name FROM c WHERE EXISTS (SELECT * FROM web WHERE web.cust = c.id) "
                        "OR EXISTS (SELECT * FROM cat WHERE cat.cust = c.id AND cat.amt > 2)",
    "exists_or_predicate": "SELECT id FROM c WHERE zip = '400' OR EXISTS (SELECT 1 FROM cat WHERE cat.cust = c.id)",
    "in_list_or_in_subquery": "SELECT id FROM c WHERE zip IN ('100', '300') "
                              "OR name IN (SELECT item_name FROM item WHERE sk IN (2, 3))",
    "in_subquery_with_null_values": "SELECT id FROM c WHERE zip = '200' OR name IN (SELECT item_name FROM item)",
    "or_inside_and": "SELECT id, count(*) AS n FROM c, web WHERE web.cust = c.id AND "
                     "(EXISTS (SELECT * FROM cat WHERE cat.cust = c.id) OR web.amt > 6) GROUP BY id",
    "nested_and_in_or": "SELECT id FROM c WHERE (zip = '100' AND EXISTS (SELECT * FROM web WHERE web.cust = c.id)) "
                        "OR (zip = '300' AND EXISTS (SELECT * FROM cat WHERE cat.cust = c.id))",
    "correlated_in_or": "SELECT id FROM c WHERE zip = '999' OR id IN (SELECT cust FROM web WHERE web.amt > c.id + 4 - 4 "
                        "AND web.cust = c.id)",
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"c": C, "web": WEB, "cat": CAT, "item": ITEM}) as connection:
        yield connection


def _session(device_name):
    return session_with_tables({"c": C, "web": WEB, "cat": CAT, "item": ITEM}, device=device_name)


@pytest.mark.parametrize("name", [n for n in QUERIES if n != "correlated_in_or"])
def test_subqueries_under_or_match_duckdb(name, device_name, reference):
    sql = QUERIES[name]
    assert_same_rows(_session(device_name).sql(sql), duckdb_table(reference, sql))


def test_negated_or_unmatched_forms_are_planned_as_values(reference):
    """What a mark join cannot say is a subquery value (:mod:`gpu_engine.sql.subquery_values`): a count joined."""
    assert_queries_match_duckdb(_session("cpu"), reference, [
        "SELECT id FROM c WHERE zip = '1' OR NOT EXISTS (SELECT * FROM web WHERE web.cust = c.id)",
        "SELECT id FROM c WHERE zip = '1' OR NOT name IN (SELECT item_name FROM item)",
        "SELECT id FROM c WHERE zip = '1' OR EXISTS (SELECT * FROM web)",  # uncorrelated EXISTS: a count
    ])


def test_an_in_under_or_correlated_otherwise_than_by_equalities_stays_refused():
    from gpu_engine.sql.errors import SqlError

    with pytest.raises(SqlError, match="subquery inside OR"):
        _session("cpu").sql(QUERIES["correlated_in_or"])
