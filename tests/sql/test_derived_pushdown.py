"""Conditions on derived tables and CTEs pushed into their queries, and shared CTEs filtered by their readers.

Answers against DuckDB (conditions on grouping keys, on pass-through and computed columns, on aggregates that
must stay above, through outer joins inside, LIMIT and windows that block the push, NULLs), and the plans a
Session runs: the filter lands below the derived query's aggregation (the optimizer's pushdown,
:mod:`gpu_engine.optimizer.predicate_pushdown`, places it; the SQL planner's copy, ``sql/derived_pushdown.py``, went
with the SQL planner's eager aggregation),
and a CTE read twice is computed for the rows its readers keep (:mod:`gpu_engine.sql.cte_reader_filters`).
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

T = pa.table({
    "k": pa.array([1, 2, 3, 1, 2, 3, 1, None, 2, 4], pa.int64()),
    "m": pa.array([1, 1, 2, 2, 3, 1, 2, 2, None, 1], pa.int32()),
    "v": pa.array([10.0, 2.5, None, 4.0, 7.5, 1.0, 3.0, 8.0, 6.0, 0.5], pa.float64()),
    "s": pa.array(["a", "b", "a", None, "c", "b", "a", "c", "b", "d"]),
})
#: Key 2 of ``u`` has two rows: with ``k`` unique, ``u``'s ``GROUP BY k`` was a projection
#: (optimizer/unique_groupings.py), with no grouping for a filter to go below.
U = pa.table({"k": pa.array([1, 2, 3, 5, 2], pa.int64()), "name": pa.array(["x", "y", "x", "z", "y"])})
TABLES = {"t": T, "u": U}

GROUPED = "SELECT * FROM (SELECT k, m, sum(v) total, count(*) n FROM t GROUP BY k, m) g WHERE g.m = 2 AND g.total > 1"
SHARED = ("WITH c AS (SELECT k, m, sum(v) total FROM t GROUP BY k, m) "
          "SELECT a.k, a.total ta, b.total tb FROM c a, c b WHERE a.k = b.k AND a.m = 1 AND b.m = 2 ORDER BY a.k")

QUERIES = [
    GROUPED, SHARED,
    # pass-through and computed columns, a condition across two derived tables (stays above), an OR
    "SELECT x.kk, x.w FROM (SELECT k + 1 kk, v * 2 w, s FROM t) x WHERE x.kk > 2 AND (x.s = 'a' OR x.w < 5)",
    "SELECT x.k xk, y.k yk FROM (SELECT k FROM t) x, (SELECT k FROM u) y WHERE x.k < y.k AND x.k IS NOT NULL",
    # an outer join inside the derived query: its NULL-extended rows are filtered after it, as written
    "SELECT * FROM (SELECT t.k, u.name FROM t LEFT JOIN u ON t.k = u.k) x WHERE x.name IS NULL OR x.name = 'x'",
    # blocked: LIMIT, a window, an aggregate without GROUP BY, a condition on an aggregate only
    "SELECT * FROM (SELECT k, v FROM t ORDER BY v NULLS LAST LIMIT 4) x WHERE x.k = 1",
    "SELECT * FROM (SELECT k, m, sum(v) OVER (PARTITION BY k) w FROM t) x WHERE x.m = 1",
    "SELECT * FROM (SELECT count(*) n FROM t) x WHERE x.n > 100",
    "SELECT * FROM (SELECT k, max(v) mv FROM t GROUP BY k) x WHERE x.mv > 5",
    # a CTE read once (inlined) and one read twice whose reader has no condition of its own (left whole)
    "WITH c AS (SELECT k, count(*) n FROM t GROUP BY k) SELECT * FROM c WHERE c.k = 2",
    "WITH c AS (SELECT k, m FROM t) SELECT count(*) FROM c a, c b WHERE a.k = b.k AND a.m = 1",
    # a DISTINCT derived query, a set of readers under UNION ALL
    "SELECT * FROM (SELECT DISTINCT k, s FROM t) x WHERE x.s = 'a'",
    "WITH c AS (SELECT k, sum(v) total FROM t GROUP BY k) SELECT * FROM c WHERE c.k = 1 "
    "UNION ALL SELECT * FROM c WHERE c.k = 3",
]
#: An OR whose branches each restrict a grouping key filters below the grouping (the OR itself stays above).
IMPLIED_OR = "SELECT * FROM (SELECT k, sum(v) total FROM t GROUP BY k) x WHERE (x.k = 1 AND x.total > 1) OR x.k = 3"
#: A UNION ALL takes a condition into each branch by position, a constant output read in a grouped branch.
UNION_BRANCHES = ("SELECT * FROM (SELECT k, sum(v) total, 'a' kind FROM t GROUP BY k UNION ALL "
                  "SELECT k, count(*) n, 'b' FROM u GROUP BY k) x "
                  "WHERE (x.k = 1 AND x.kind = 'a') OR (x.k < 3 AND x.kind = 'b' AND x.total > 0)")
QUERIES += [IMPLIED_OR, UNION_BRANCHES,
            "SELECT * FROM (SELECT k, s FROM t UNION SELECT k, name FROM u) x WHERE x.s <> 'x' AND x.k < 3",
            "SELECT * FROM (SELECT k, m FROM t UNION ALL (SELECT k, 0 FROM u UNION ALL SELECT m, k FROM t)) x "
            "WHERE x.m = 1 OR x.k IS NULL"]
SET_READERS = ("WITH c AS (SELECT t.k, t.m, t2.s FROM t, t t2 WHERE t.k = t2.k AND t.m <> t2.m) "
               "SELECT u.k, u.name FROM u WHERE u.k IN (SELECT k FROM c) "
               "AND EXISTS (SELECT * FROM t x WHERE x.k = u.k AND x.m IN (SELECT c.m FROM c, t WHERE c.k = t.k))")
QUERIES.append(SET_READERS)
SIMULATED = [GROUPED, SHARED, UNION_BRANCHES]


def test_pushed_conditions_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", drivers=2, split_rows=4, compile_mode="lowest")  # CI time
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_pushed_conditions_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")  # CI time: no kernel generated
    assert_queries_match_duckdb(session, reference, SIMULATED)


def _filtered_below_aggregation(plan) -> bool:
    """Return whether a Filter reads the rows an Aggregation groups (not only its results)."""
    from gpu_engine.plans.nodes import AggregationNode, FilterNode, walk_plan

    return any(isinstance(below, FilterNode) for node in walk_plan(plan) if isinstance(node, AggregationNode)
               for below in walk_plan(node) if below is not node)


def _optimized(session, sql: str):
    """The plan the Session runs (before its exchanges): the SQL planner's, through the optimizer."""
    from gpu_engine.optimizer import optimize_plan

    return optimize_plan(session.sql_plan(sql), session.statistics())


def test_a_condition_on_a_grouping_key_filters_before_grouping():
    session = session_with_tables(TABLES, device="cpu")
    assert _filtered_below_aggregation(_optimized(session, GROUPED))
    assert not _filtered_below_aggregation(_optimized(session, QUERIES[8]))  # on an aggregate: above


def test_an_or_and_a_union_filter_below_the_grouping():
    session = session_with_tables(TABLES, device="cpu")
    assert _filtered_below_aggregation(_optimized(session, IMPLIED_OR))
    assert _filtered_below_aggregation(_optimized(session, UNION_BRANCHES))


def test_a_cte_read_twice_is_computed_for_the_rows_its_readers_keep():
    from gpu_engine.sql.shared_ctes import split_shared_ctes

    session = session_with_tables(TABLES, device="cpu")
    shared, _ = split_shared_ctes(SHARED)
    assert len(shared) == 1
    assert _filtered_below_aggregation(_optimized(session, shared[0].sql))
    unfiltered, _ = split_shared_ctes(QUERIES[10])
    assert not any(n in unfiltered[0].sql.upper() for n in ("WHERE",))


def test_a_cte_only_in_and_exists_read_is_computed_as_its_distinct_rows():
    from gpu_engine.sql.shared_ctes import split_shared_ctes

    session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
    shared, _ = split_shared_ctes(SET_READERS)
    rows = session.sql(shared[0].sql)
    assert rows.column_names == ["k", "m"]  # the columns the readers read, not s
    assert rows.num_rows == len(set(zip(*[rows.column(n).to_pylist() for n in rows.column_names])))


def test_an_implied_or_on_the_typed_plan_leaves_out_false_constant_branches():
    """Each union branch is filtered, below its grouping, by what the OR's branch for its constant ``kind`` says
    of ``k`` (the other branch compares two different constants: false, left out); the OR itself reads an
    aggregate, so it stays above."""
    from gpu_engine.plans.nodes import FilterNode, TableScanNode, walk_plan

    session = session_with_tables(TABLES, device="cpu")
    plan = _optimized(session, "SELECT * FROM (SELECT k, sum(v) AS total, 'a' AS kind FROM t GROUP BY k UNION ALL "
                               "SELECT k, count(*), 'b' FROM u GROUP BY k) AS x "
                               "WHERE (x.kind = 'a' AND x.k = 1 AND x.total > 0) OR (x.kind = 'b' AND x.k = 2 "
                               "AND x.total > 0)")
    over_scans = {node.sources[0].table_name: node.predicate.sql() for node in walk_plan(plan)
                  if isinstance(node, FilterNode) and isinstance(node.sources[0], TableScanNode)}
    assert over_scans == {"t": "(k = 1)", "u": "(k = 2)"}
