"""A correlated MIN/MAX/AVG subquery repeating the outer join is a window over it (``sql/window_subqueries.py``).

The plan reads each table once (TPC-H Q2's shape read partsupp, supplier, nation and region twice), and
the answers equal DuckDB's, also where the rewrite must not apply: SUM (it counts an outer table's
duplicate keys), a subquery filtering its tables more or less than the outer query does, an outer table
joined to the shared ones by more than the correlation, a correlation column of a shared table.
Likewise a HAVING comparison against the grand total of the query's own join (TPC-H Q11) is a window
over the groups, and stays a subquery where the join or the aggregate differs.
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables
from gpu_engine.plans.nodes import TableScanNode, WindowNode, walk_plan

# p: outer-only table, duplicate key 1 (every s row of key 1 appears twice in the join); s and r: shared tables.
P = pa.table({"pk": pa.array([1, 1, 2, 3, 4], pa.int64()), "size": pa.array([5, 6, 5, 5, 9], pa.int64())})
S = pa.table({
    "sk": pa.array([1, 1, 1, 2, 2, 3, 3, 5], pa.int64()),
    "rk": pa.array([10, 20, 10, 10, 20, 20, 10, 10], pa.int64()),
    "cost": pa.array([3.0, 1.0, 2.0, None, 7.0, 4.0, 4.0, 1.0], pa.float64()),
    "qty": pa.array([2, 9, 4, 1, 3, 5, 8, 30], pa.int64()),  # sk 5: no p row
})
R = pa.table({"rk": pa.array([10, 20], pa.int64()), "region": pa.array(["EU", "US"])})
TABLES = {"p": P, "s": S, "r": R}

#: Q2's shape: the subquery repeats the join of s and r and its filter, correlated by the key joining p.
MIN_OVER_OUTER_JOIN = ("SELECT p.pk, p.size, s.cost FROM p, s, r WHERE p.pk = s.sk AND s.rk = r.rk AND r.region = 'EU' "
                       "AND s.cost = (SELECT min(s2.cost) FROM s s2, r r2 WHERE s2.sk = p.pk AND s2.rk = r2.rk "
                       "AND r2.region = 'EU') ORDER BY p.pk, p.size")
REWRITTEN = [
    MIN_OVER_OUTER_JOIN,
    # Q17's shape: AVG (duplicate p keys repeat each s row evenly), the outer query aggregating over it.
    "SELECT sum(s.qty) AS total, count(*) AS n FROM s, p WHERE p.pk = s.sk AND p.size = 5 "
    "AND s.qty < (SELECT 0.9 * avg(s2.qty) FROM s s2 WHERE s2.sk = p.pk)",
    "SELECT p.size, max(s.qty) AS q FROM s, p WHERE s.sk = p.pk AND "
    "s.qty >= (SELECT avg(s2.qty) FROM s s2 WHERE p.pk = s2.sk) GROUP BY p.size",
    "SELECT DISTINCT p.pk FROM p, s WHERE s.sk = p.pk AND (SELECT max(s2.cost) - 1 FROM s s2 WHERE s2.sk = p.pk) "
    "< s.cost",
]
NOT_REWRITTEN = [
    # SUM counts p's duplicate key 1 twice over the join: stays decorrelated.
    "SELECT p.pk, s.qty FROM p, s WHERE p.pk = s.sk AND s.qty * 3 > (SELECT sum(s2.qty) FROM s s2 WHERE s2.sk = p.pk)",
    # The subquery filters its table (s2.qty > 1) where the outer query does not, and the other way round.
    "SELECT p.pk, s.qty FROM p, s WHERE p.pk = s.sk AND s.qty = (SELECT max(s2.qty) FROM s s2 WHERE s2.sk = p.pk "
    "AND s2.qty < 9)",
    "SELECT p.pk, s.qty FROM p, s WHERE p.pk = s.sk AND s.rk = 10 AND s.qty = (SELECT max(s2.qty) FROM s s2 "
    "WHERE s2.sk = p.pk)",
    # p joins s by more than the correlation: the window's partition would miss rows the subquery reads.
    "SELECT p.pk, s.qty FROM p, s WHERE p.pk = s.sk AND p.size < s.qty AND s.qty = (SELECT min(s2.qty) FROM s s2 "
    "WHERE s2.sk = p.pk)",
    # Correlated by a column of the shared table itself (TPC-DS q6's shape).
    "SELECT p.pk, s.qty FROM p, s WHERE p.pk = s.sk AND s.qty > (SELECT avg(s2.qty) FROM s s2 WHERE s2.rk = s.rk)",
]

#: Q11's shape: HAVING against the grand total of the join the groups come from (a window over the groups).
TOTALS_REWRITTEN = [
    "SELECT s.sk, sum(s.qty) AS q FROM s, r WHERE s.rk = r.rk AND r.region = 'EU' GROUP BY s.sk HAVING sum(s.qty) > "
    "(SELECT sum(s2.qty) * 0.2 FROM s s2, r r2 WHERE r2.region = 'EU' AND r2.rk = s2.rk) ORDER BY q DESC",
    "SELECT rk, min(cost) AS c FROM s GROUP BY rk HAVING max(cost) = (SELECT max(cost) FROM s)",
    "SELECT sk, sum(qty) AS q FROM s GROUP BY sk HAVING count(*) > 1 AND sum(qty) > (SELECT sum(qty) / 4 FROM s)",
]
TOTALS_NOT_REWRITTEN = [
    "SELECT sk, sum(qty) AS q FROM s GROUP BY sk HAVING sum(qty) > (SELECT sum(qty) * 0.3 FROM s WHERE rk = 10)",
    "SELECT sk, sum(qty) AS q FROM s WHERE sk < 5 GROUP BY sk HAVING sum(qty) > (SELECT sum(qty) * 0.4 FROM s)",
    "SELECT sk, max(qty) AS q FROM s GROUP BY sk HAVING max(qty) > (SELECT avg(qty) FROM s)",  # not an avg of avgs
    # Grouping sets repeat each row in several groups (the rollup's total row holds them all): no sum of the groups.
    "SELECT sk, rk, sum(qty) AS q FROM s GROUP BY ROLLUP (sk, rk) HAVING sum(qty) > (SELECT sum(qty) * 0.4 FROM s)",
    "SELECT sk, rk, sum(qty) AS q FROM s GROUP BY GROUPING SETS ((sk), (rk)) HAVING sum(qty) > "
    "(SELECT sum(qty) * 0.4 FROM s)",
]


def _scans(plan) -> list[str]:
    return sorted(node.table_name for node in walk_plan(plan) if isinstance(node, TableScanNode))


def test_a_subquery_repeating_the_outer_join_is_a_window_reading_each_table_once():
    session = session_with_tables(TABLES, device="cpu")
    plan = session.sql_plan(MIN_OVER_OUTER_JOIN)
    assert _scans(plan) == ["p", "r", "s"]
    assert any(isinstance(node, WindowNode) for node in walk_plan(plan))
    for sql in REWRITTEN[1:]:
        assert sorted(set(_scans(session.sql_plan(sql)))) == _scans(session.sql_plan(sql)), sql
    for sql in TOTALS_REWRITTEN:
        assert any(isinstance(node, WindowNode) for node in walk_plan(session.sql_plan(sql))), sql
        assert sorted(set(_scans(session.sql_plan(sql)))) == _scans(session.sql_plan(sql)), sql
    for sql in NOT_REWRITTEN + TOTALS_NOT_REWRITTEN:
        assert not any(isinstance(node, WindowNode) for node in walk_plan(session.sql_plan(sql))), sql


def test_window_subqueries_match_duckdb(reference):
    session = session_with_tables(TABLES, device="cpu", fuse=False)
    assert_queries_match_duckdb(session, reference, REWRITTEN[1:] + NOT_REWRITTEN + TOTALS_REWRITTEN[1:]
                                + TOTALS_NOT_REWRITTEN)


def test_min_over_the_outer_join_matches_duckdb(device_name, reference):
    """Runs unfused: the window and its QUALIFY are under test, not the kernels fused around them."""
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name, fuse=False), reference,
                                [MIN_OVER_OUTER_JOIN, REWRITTEN[1], TOTALS_REWRITTEN[0]])
