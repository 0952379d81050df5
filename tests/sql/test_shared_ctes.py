"""A CTE read more than once is computed once: split out by gpu_engine.sql.shared_ctes, run first by Session.sql."""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table

from gpu_engine import Session
from gpu_engine.connectors.tpch_data import register_tpch
from gpu_engine.plans import tpch
from gpu_engine.plans.nodes import TableScanNode, walk_plan
from gpu_engine.sql import SqlError
from gpu_engine.sql.ordering import order_key_columns
from gpu_engine.sql.shared_ctes import split_shared_ctes


def test_only_ctes_read_twice_are_split_out_in_with_order():
    text = ("WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a), c AS (SELECT x FROM b) "
            "SELECT * FROM a, c, c AS c2")
    shared, query = split_shared_ctes(text)
    assert [cte.table.rsplit("_", 1)[-1] for cte in shared] == ["a", "c"]  # b is read once (by c): inlined
    a, c = shared
    assert a.sql == "SELECT 1 AS x"
    assert f"FROM {a.table} AS a" in c.sql and "WITH b AS" in c.sql  # c reads a's table and keeps b
    assert f"{a.table} AS a" in query and f"{c.table} AS c" in query and f"{c.table} AS c2" in query
    assert split_shared_ctes("WITH a AS (SELECT 1 AS x) SELECT * FROM a") == ([], "WITH a AS (SELECT 1 AS x) SELECT * FROM a")
    assert split_shared_ctes("SELECT 1") == ([], "SELECT 1")
    assert split_shared_ctes("SELEC nonsense") == ([], "SELEC nonsense")


@pytest.fixture(scope="module")
def tpch_sf001(tpch_data):
    return tpch_data(0.01)


@pytest.mark.parametrize("device_name", ["cpu", "cuda-sim"])
def test_q15_scans_lineitem_once_and_matches_duckdb(device_name, tpch_sf001, monkeypatch):
    session = Session(device=device_name, drivers=2)
    register_tpch(session, tpch_sf001)
    executed = []
    execute = Session.execute

    def recording(self, plan, *args, **kwargs):
        executed.append(plan)
        return execute(self, plan, *args, **kwargs)

    monkeypatch.setattr(Session, "execute", recording)
    text = tpch.sql(15)
    actual = session.sql(text)
    scans = [node.table_name for plan in executed for node in walk_plan(plan) if isinstance(node, TableScanNode)]
    assert scans.count("lineitem") == 1, scans
    assert len(session.sql_plan(text).output_schema) == 5  # the one-tree plan still inlines the view twice
    assert [t for t in session.catalog if t.startswith("__cte_")] == []  # the temporary table is gone
    with duckdb_connection(tpch_sf001) as connection:
        assert_same_rows(actual, duckdb_table(connection, text), ordered=order_key_columns(text))


def test_errors_point_into_the_text_as_written(tpch_sf001):
    session = Session(device="cpu")
    register_tpch(session, tpch_sf001)
    text = "WITH r AS (SELECT l_suppkey, sum(l_quantityy) AS q FROM lineitem GROUP BY 1)\nSELECT * FROM r, r AS r2"
    with pytest.raises(SqlError, match="l_quantity") as caught:
        session.sql(text)
    assert "line 1" in str(caught.value)
    assert [t for t in session.catalog if t.startswith("__cte_")] == []


def test_a_failing_query_drops_its_temporary_tables(tpch_sf001):
    session = Session(device="cpu")
    session.register("t", pa.table({"x": [1, 2, 3]}))
    text = "WITH a AS (SELECT x FROM t) SELECT CAST(a.x + 9223372036854775807 AS BIGINT) AS y FROM a, a AS b"
    with pytest.raises(Exception, match="[Oo]verflow|out of range"):
        session.sql(text)
    assert [t for t in session.catalog if t.startswith("__cte_")] == []


def test_a_text_is_parsed_once_and_each_call_names_its_tables_anew(monkeypatch):
    from gpu_engine.sql import shared_ctes

    parsed = []
    one_query = shared_ctes._one_query
    monkeypatch.setattr(shared_ctes, "_one_query", lambda text, dialect: parsed.append(text) or one_query(text, dialect))
    text = "WITH kept_once_test AS (SELECT 1 AS x) SELECT * FROM kept_once_test AS p, kept_once_test AS q"
    (first,), query = split_shared_ctes(text)
    (second,), again = split_shared_ctes(text)
    assert len(parsed) == 1  # the second call parsed nothing
    assert first.table != second.table and first.sql == second.sql == "SELECT 1 AS x"
    assert query.replace(first.table, second.table) == again and first.table in query
    assert split_shared_ctes("WITH a AS (SELECT 1 AS x) SELECT * FROM a") == ([], "WITH a AS (SELECT 1 AS x) SELECT * FROM a")
    marked = f"WITH a AS (SELECT '{shared_ctes._MARK}' AS x) SELECT * FROM a, a AS b"  # holds the mark: split per call
    (cte,), _ = split_shared_ctes(marked)
    assert shared_ctes._MARK in cte.sql and shared_ctes._MARK not in cte.table
