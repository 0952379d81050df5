"""LocalPartition/LocalExchange: repartitioned rows reach exactly one consumer; back-pressure holds the byte cap."""

import pytest

from gpu_engine import Session
from gpu_engine.columnar import Batch
from gpu_engine.plans import PlanBuilder


@pytest.mark.parametrize("keys", [["k_int"], ["k_str"], ["k_dict", "d_date"], []], ids=lambda k: "+".join(k) or "gather")
def test_repartition_keeps_every_row(session, assert_query, keys):
    plan = PlanBuilder(session.catalog).table_scan("t").local_partition(keys).plan()
    assert_query(plan, "SELECT * FROM t")


def test_rows_of_one_key_meet_in_one_driver(session, assert_query):
    # A single-step aggregation placed right after a repartition on its keys is only
    # correct if every row of a key reached the same consumer driver.
    plan = (PlanBuilder(session.catalog).table_scan("t").local_partition(["k_str"])
            .aggregation(["k_str"], ["count(*) AS c", "sum(v_int) AS s"]).plan())
    assert_query(plan, "SELECT k_str, count(*) AS c, sum(v_int) AS s FROM t GROUP BY k_str")


def test_back_pressure_caps_buffered_bytes(device_name, table):
    # optimize=False: the exchange must carry the scanned rows whole (the allowance below is a whole
    # batch); projection pruning through LocalPartitions would send only k_int, never reaching the cap.
    session = Session(device=device_name, drivers=4, batch_rows=32, local_exchange_max_bytes=4096, optimize=False)
    session.register("t", table, split_rows=table.num_rows // 8)
    plan = (PlanBuilder(session.catalog).table_scan("t").local_partition(["k_int"])
            .aggregation(["k_int"], ["count(*) AS c"]).plan())
    result = session.execute(plan)
    assert sum(result.column("c").to_pylist()) == table.num_rows
    queue = next(iter(session.last_task.local_exchange_queues.values()))
    # Each of the 4 producer drivers may add one batch (its rows plus int32 gather maps) after
    # the cap is reached; then it blocks until consumers drain the queue. Batches differ in size
    # (string lengths, nulls), so the allowance is the largest one.
    one_batch = max(Batch.from_arrow(table.slice(start, 32), session.device).nbytes
                    for start in range(0, table.num_rows, 32)) + 4 * 32
    assert queue.peak_bytes <= 4096 + 4 * one_batch
    blocked = [s for ops in session.last_stats().operator_stats_by_node().values() for s in ops
               if s.operator_type == "LocalPartition"]
    assert sum(s.blocked_count for s in blocked) > 0


def test_consumer_finishing_early_releases_blocked_producers(device_name, table):
    # The Limit after the exchange finishes after 3 rows; producers that filled the tiny
    # queue must be released (their batches dropped) instead of waiting forever.
    session = Session(device=device_name, drivers=2, batch_rows=16, local_exchange_max_bytes=512)
    session.register("t", table, split_rows=64)
    plan = PlanBuilder(session.catalog).table_scan("t").local_partition(["k_int"]).limit(3).plan()
    assert session.execute(plan).num_rows == 3
