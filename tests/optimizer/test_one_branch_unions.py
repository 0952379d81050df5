"""A UNION ALL left with one branch after empty-relation elimination is that branch, without its LocalPartition
(TPC-DS q4 / q11 / q74: the outer filter on the kind of sale empties two of the three branches of each year's
total, and 14 LocalPartition(arbitrary) nodes of one source each passed the batches through a queue). The exchange
stays where the branch's pipeline runs on one driver (a TopN, a global aggregate): there it gives the operators
above their drivers."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer import optimize_plan
from gpu_engine.plans.nodes import LocalPartitionNode, walk_plan

T = pa.table({"k": pa.array([1, 2, 2, 3, None, 4, 4, 4], pa.int64()), "v": pa.array([5, 1, 7, None, 3, 2, 9, 4])})

KINDS = ("SELECT k, v, 's' AS kind FROM t UNION ALL SELECT k, v + 1, 'c' FROM t UNION ALL "
         "SELECT k, v * 2, 'w' FROM t")
REMOVED = [
    f"SELECT k, sum(v) AS s FROM ({KINDS}) x WHERE kind = 'c' GROUP BY k",
    "SELECT k, c FROM (SELECT k, count(*) AS c, 1 AS b FROM t GROUP BY k UNION ALL "
    "SELECT k, count(v), 2 FROM t GROUP BY k) x WHERE b = 1",
    f"SELECT a.k, a.v, b.v AS w FROM ({KINDS}) a JOIN ({KINDS}) b ON a.k = b.k WHERE a.kind = 's' AND b.kind = 'w'",
]
KEPT = [
    "SELECT k, v FROM ((SELECT k, v FROM t ORDER BY v NULLS FIRST, k LIMIT 3) UNION ALL "
    "(SELECT k, v FROM t WHERE 1 = 0)) x",
    "SELECT s FROM (SELECT sum(v) AS s, 1 AS b FROM t UNION ALL SELECT max(v), 2 FROM t) x WHERE b = 1",
]


def _one_source_exchanges(session, sql: str) -> int:
    plan = optimize_plan(session.sql_plan(sql), session.statistics())
    return sum(isinstance(node, LocalPartitionNode) and node.partition_kind == "arbitrary" and len(node.sources) == 1
               for node in walk_plan(plan))


def test_a_one_branch_union_is_its_branch_unless_the_exchange_gives_drivers():
    session = session_with_tables({"t": T}, device="cpu", drivers=2)
    assert [_one_source_exchanges(session, sql) for sql in REMOVED] == [0, 0, 0]
    assert [_one_source_exchanges(session, sql) for sql in KEPT] == [1, 1]


@pytest.mark.parametrize("drivers", [1, 3])
def test_one_branch_unions_match_duckdb(device_name, drivers):
    session = session_with_tables({"t": T}, split_rows=3, device=device_name, drivers=drivers, batch_rows=2)
    with duckdb_with_tables({"t": T}) as connection:
        assert_queries_match_duckdb(session, connection, REMOVED + KEPT if device_name == "cpu" else REMOVED[:1])
