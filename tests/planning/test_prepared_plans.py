"""A Session prepares a plan object once (gpu_engine.planning.prepared_plans) and runs it prepared from then on."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from gpu_engine import PlanError, Session
from gpu_engine.planning import prepare as prepare_module
from gpu_engine.planning import prepared_plans
from gpu_engine.planning.prepared_plans import PreparedPlans
from gpu_engine.plans.expressions import Cast, ColumnRef
from plans.plan_builder import PlanBuilder


@pytest.fixture
def counted(monkeypatch):
    """Count the calls of prepare_plan the cache makes."""
    calls = []

    def counting(plan, device, drivers, config=None, **options):
        calls.append(plan)
        return prepare_module.prepare_plan(plan, device, drivers, config, **options)

    monkeypatch.setattr(prepared_plans, "prepare_plan", counting)
    return calls


def _session(**config) -> Session:
    session = Session(device="cpu", drivers=2, **config)
    session.register("t", pa.table({"k": [1, 2, 1], "v": [3, 4, 5]}))
    return session


def test_a_plan_run_again_is_prepared_once(counted):
    session = _session()
    plan = session.sql_plan("SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k")
    first = session.execute(plan)
    executed = session.last_plan
    assert session.execute(plan).equals(first) and session.sql("SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k")
    assert len(counted) == 1 and session.last_plan is executed
    assert first.to_pydict() == {"k": [1, 2], "s": [8, 4]}
    other = session.sql_plan("SELECT k FROM t WHERE v > 3 ORDER BY k")  # another plan object: prepared for itself
    assert session.execute(other).to_pydict() == {"k": [1, 2]} and len(counted) == 2


def test_each_driver_count_and_config_gets_its_own(counted):
    session = _session()
    plan = session.sql_plan("SELECT sum(v) AS s FROM t")
    cache = PreparedPlans()
    one = cache.prepare(plan, session.device, 1, session.config)
    two = cache.prepare(plan, session.device, 2, session.config)
    unfused = cache.prepare(plan, session.device, 2, session.config.with_overrides(fuse=False))
    assert len({id(one), id(two), id(unfused)}) == 3 and len(counted) == 3
    assert cache.prepare(plan, session.device, 2, session.config) is two and len(counted) == 3


def test_a_plan_that_cannot_run_fails_every_time(counted):
    session = _session()
    session.register("w", pa.table({"ts": pa.array([0], pa.timestamp("us", tz="UTC"))}))
    # A cast with no implementation (TIMESTAMPTZ to TIME; PlanBuilder refuses to write it, so it is put in by hand).
    plan = PlanBuilder(session.catalog).table_scan("w", ["ts"]).project(["CAST(ts AS VARCHAR) AS text"]).plan()
    zoned = pa.timestamp("us", tz="UTC")
    plan = dataclasses.replace(plan, expressions=(Cast(ColumnRef("ts", zoned), pa.time64("us")),))
    for _ in range(2):
        with pytest.raises(PlanError, match="timestamp"):
            session.execute(plan)
    assert len(counted) == 2


def test_only_the_most_recent_are_kept(counted):
    session = _session()
    cache = PreparedPlans(entries=1)
    first, second = (session.sql_plan(f"SELECT k + {i} AS x FROM t") for i in range(2))
    cache.prepare(first, session.device, 2, session.config)
    cache.prepare(second, session.device, 2, session.config)
    cache.prepare(first, session.device, 2, session.config)
    assert len(cache) == 1 and len(counted) == 3
