"""A string constant in a CASE branch or a COALESCE argument takes the other branches' type, as DuckDB's string
literal casts implicitly: ``coalesce(d, '2000-02-29')`` is a DATE, ``coalesce(i, '7.5')`` an INTEGER (8). The engine
refused them ("CASE branches have types date32[day], string"; fuzz round 11's ``coercion`` family, seed 14). A
constant that does not convert raises on both; branches of only strings stay text."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, assert_same_rows, duckdb_with_tables, session_with_tables

from gpu_engine import ExecutionError

TABLES = {"t": pa.table({
    "i": pa.array([1, None, 3], pa.int32()), "f": pa.array([1.5, None, None], pa.float64()),
    "d": pa.array([datetime.date(2000, 1, 1), None, datetime.date(1969, 12, 31)], pa.date32()),
    "ts": pa.array([datetime.datetime(2000, 1, 1, 12), None, None], pa.timestamp("us")),
    "s": pa.array(["x", None, "y"], pa.string()),
})}

QUERIES = [
    "SELECT coalesce(d, '2000-02-29') AS a, coalesce(ts, '2000-02-29 12:00:00') AS b, coalesce(i, '7') AS c, "
    "coalesce(i, '7.5') AS e, coalesce(f, '-0.25') AS g FROM t",
    "SELECT CASE WHEN i = 1 THEN '2000-02-29' ELSE d END AS a, CASE WHEN i = 3 THEN ts ELSE '1999-12-31' END AS b, "
    "CASE WHEN i IS NULL THEN '1' ELSE i END AS c, CASE WHEN i > 2 THEN f ELSE '2.5' END AS e FROM t",
    "SELECT coalesce(s, 'z') AS a, CASE WHEN i = 1 THEN NULL ELSE 'n' END AS b, CASE WHEN i = 1 THEN 'p' ELSE s END AS c "
    "FROM t",
]


def test_string_constants_take_the_other_branches_type(device_name):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[:1],
                                    exact_types=True)
        sql = "SELECT coalesce(i, 'abc') AS a FROM t"
        with pytest.raises(Exception, match="Could not convert"):
            connection.sql(sql).fetchall()
        with pytest.raises(ExecutionError, match="Could not convert"):
            session.sql(sql)


def test_a_null_between_coalesce_arguments_types_nothing():
    """``coalesce(i, NULL, '3')`` is ``coalesce(i, '3')``: the NULL's nested CASE typed the text branch and the
    query was refused ("CASE branches have types int32, string")."""
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, [
            "SELECT coalesce(i, NULL, '3') AS a, coalesce(NULL, d, NULL, '2000-01-02') AS b, "
            "coalesce(NULL, NULL, s) AS c, coalesce(i, NULL) AS e FROM t"], exact_types=True)


def test_plan_builder_coalesce_types_string_constants_as_sql_does():
    """The expression path's ``coalesce`` (PlanBuilder, not the SQL planner's CASE) shares the rule: it typed every
    argument through ``common_type`` and refused ``coalesce(d, '2000-02-29')`` ("arguments have no common type")."""
    from gpu_engine.plans import PlanBuilder

    columns = ["coalesce(d, '2000-02-29') AS a", "coalesce(i, '7.5') AS c", "coalesce(i, NULL, '3') AS e",
               "coalesce(s, 'z') AS g"]
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
        result = session.execute(PlanBuilder(session.catalog).table_scan("t").project(columns).plan())
        expected = connection.sql("SELECT " + ", ".join(columns) + " FROM t").to_arrow_table()
        assert result.schema.types == expected.schema.types
        assert_same_rows(result, expected)
