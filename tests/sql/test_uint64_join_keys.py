"""A uint64 key beside a signed integer key is not hash-joined on its 64-bit words: its values from 2**63 up have
the words of negative int64s, so ``t.a = u.b`` joined -1 with 2**64 - 1 and -2**63 with 2**63 (fuzz round 11's
``coercion`` family, seed 147: wrong rows in joins, IN / EXISTS / = ANY subqueries). The equality stays a filter,
or the keys are cast to a common type (DECIMAL(20, 0): a key past 64 bits is then refused by name); uint64 with
uint64 still hash-joins."""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import GpuEngineError

BIG = {"t": pa.table({"id": pa.array(range(4), pa.int64()), "a": pa.array([-1, -2 ** 63, None, 1], pa.int64())}),
       "u": pa.table({"b": pa.array([2 ** 64 - 1, 2 ** 63, None, 1], pa.uint64())})}

QUERIES = [
    "SELECT t.id, u.b FROM t JOIN u ON t.a = u.b",
    "SELECT t.id, u.b FROM t LEFT JOIN u ON t.a = u.b",
    "SELECT t.id, u.b, v.b AS c FROM t JOIN u ON t.a = u.b JOIN u v ON v.b = u.b",
]


def test_uint64_keys_beside_signed_keys_join_as_duckdb(device_name):
    with duckdb_with_tables(BIG) as connection:
        session = session_with_tables(BIG, device=device_name, compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[:1])
        for sql in ["SELECT id FROM t WHERE a IN (SELECT b FROM u)",
                    "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.b = t.a)"]:
            try:
                answer = session.sql(sql)
            except GpuEngineError as error:  # the keys' common DECIMAL(20, 0) holds values past 64 bits
                assert "beyond 64 bits" in str(error)
            else:
                assert answer.to_pylist() == [{"id": 3}], sql


@pytest.mark.parametrize("sql", ["SELECT id FROM t WHERE a IN (SELECT b FROM u)",
                                 "SELECT t.id, u.b FROM t JOIN u ON t.a = u.b"])
def test_small_uint64_keys_still_match_signed_ones(sql):
    tables = {"t": BIG["t"], "u": pa.table({"b": pa.array([7, 1, None], pa.uint64())})}
    with duckdb_with_tables(tables) as connection:
        session = session_with_tables(tables, device="cpu", compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, [sql])
