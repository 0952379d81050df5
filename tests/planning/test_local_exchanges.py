"""The plan a Session runs with several drivers: local exchanges inserted where correctness needs them."""

import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.plans import PlanBuilder


@pytest.fixture
def session_catalog():
    def make(drivers, fuse=False):
        session = Session(device="cpu", drivers=drivers, fuse=fuse)
        # k repeats: a grouping on a key proven unique is a projection (optimizer.unique_groupings), no exchange.
        session.register("t", pa.table({"k": pa.array([1, 2, 2], pa.int32()), "v": [1.0, 2.0, 2.0]}))
        return session

    return make


def _plan(catalog):
    return (PlanBuilder(catalog).table_scan("t").filter("v > 0")
            .aggregation(["k"], ["sum(v) AS s", "avg(v) AS a"]).top_n(["s DESC"], 3).plan())


def test_explain_with_several_drivers_shows_inserted_exchanges(session_catalog):
    session = session_catalog(2)
    assert session.explain(_plan(session.catalog)) == """\
-- TopN[3][3 s DESC NULLS LAST] -> k:int32, s:double, a:double @ cpu
  -- LocalPartition[3.exchange][GATHER] -> k:int32, s:double, a:double @ cpu
    -- TopN[3.partial][PARTIAL 3 s DESC NULLS LAST] -> k:int32, s:double, a:double @ cpu
      -- Aggregation[2][FINAL [k] s := sum(s), a := avg(a)] -> k:int32, s:double, a:double @ cpu
        -- LocalPartition[2.exchange][REPARTITION [k]] -> k:int32, s:double, a:double, a$count:int64 @ cpu
          -- Aggregation[2.partial][PARTIAL [k] s := sum(v), a := avg(v)] -> k:int32, s:double, a:double, a$count:int64 @ cpu
            -- Filter[1][expression: (v > 0)] -> k:int32, v:double @ cpu
              -- TableScan[0][table: t, columns: k, v] -> k:int32, v:double @ cpu"""


def test_fusion_replaces_the_aggregation_steps_and_the_partial_steps_filter(session_catalog):
    session = session_catalog(2, fuse=True)
    assert session.explain(_plan(session.catalog)) == """\
-- TopN[3][3 s DESC NULLS LAST] -> k:int32, s:double, a:double @ cpu
  -- LocalPartition[3.exchange][GATHER] -> k:int32, s:double, a:double @ cpu
    -- TopN[3.partial][PARTIAL 3 s DESC NULLS LAST] -> k:int32, s:double, a:double @ cpu
      -- FusedAggregation[2][FINAL [k] s := sum(s), a := avg(a); fused: Aggregation[2]] -> k:int32, s:double, a:double @ cpu
        -- LocalPartition[2.exchange][REPARTITION [k]] -> k:int32, s:double, a:double, a$count:int64 @ cpu
          -- FusedAggregation[2.partial][…] -> k:int32, s:double, a:double, a$count:int64 @ cpu
             [where (v > 0); PARTIAL [k] s := sum(v), a := avg(v); fused: Filter[1], Aggregation[2.partial]]
            -- TableScan[0][table: t, columns: k, v] -> k:int32, v:double @ cpu"""


def test_one_driver_runs_the_plan_as_built(session_catalog):
    session = session_catalog(1)
    plan = _plan(session.catalog)
    assert "LocalPartition" not in session.explain(plan)
    assert "SINGLE [k]" in session.explain(plan)


def test_repartitioned_input_needs_no_second_exchange(session_catalog):
    session = session_catalog(4)
    plan = (PlanBuilder(session.catalog).table_scan("t").local_partition(["k"])
            .aggregation(["k"], ["count(*) AS c"]).plan())
    assert session.explain(plan).count("LocalPartition") == 1


def test_a_holistic_aggregation_repartitions_raw_rows_into_single_steps(session_catalog):
    # A partial step of median could not reduce its rows (it emits every value): the rows cross instead.
    session = session_catalog(2)
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation(["k"], ["median(v) AS m", "count(*) AS c"]).plan()
    assert session.explain(plan) == """\
-- Aggregation[1][SINGLE [k] m := median(v), c := count(*)] -> k:int32, m:double, c:int64 @ cpu
  -- LocalPartition[1.exchange][REPARTITION [k]] -> k:int32, v:double @ cpu
    -- TableScan[0][table: t, columns: k, v] -> k:int32, v:double @ cpu"""
    assert session.execute(plan).sort_by("k").to_pydict() == {"k": [1, 2], "m": [1.0, 2.0], "c": [1, 2]}
    decomposable = PlanBuilder(session.catalog).table_scan("t").aggregation(["k"], ["max(v) AS m"]).plan()
    assert "PARTIAL [k]" in session.explain(decomposable)
