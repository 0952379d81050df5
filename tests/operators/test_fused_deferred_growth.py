"""A FINAL step holds partial batches that would grow its slot table and grows it once for all of them.

Why: partial results are mostly new keys, so a FINAL step's table grew by doubling through ever larger tables of
fresh memory, moving every key each time (db-benchmark's q10 at 10M rows: seven growths a driver, a third of the
question filling new tables). Held batches take at most the table's bytes, and the table then grows for their
keys at the rate of groups to rows seen so far. The answers must not change: keys of several batches with their
own dictionaries, NULL keys, keys the rate underestimates (they go pending and grow the table), an empty input.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows
from operator_tables import KEYED_AGGREGATES as AGGREGATES, keyed_answer, keyed_chunks

from gpu_engine import Session
from gpu_engine.operators.fused_aggregation import FusedAggregation
from gpu_engine.plans import PlanBuilder

#: Distinct keys: enough for several growths from the table's 1024 starting slots (cuda-sim interprets kernels).
GROUPS = {"cpu": 12_000, "cuda-sim": 3_000, "cuda": 12_000}


def _table(groups: int, copies: int, chunks: int) -> pa.Table:
    return keyed_chunks(groups, copies, chunks, seed=7, int_divisor=1009)


def _final_stats(device_name: str, table: pa.Table, batch_rows: int, defer: bool, monkeypatch, **config):
    """Run the PARTIAL/FINAL plan on one driver; return its answer and the FINAL step's runtime stats.

    The FINAL step is not sized from its abandoned PARTIAL step (tests/operators/test_fused_abandoned_partial_
    sizing.py): held batches are what a FINAL step has when it cannot learn its keys' number that way."""
    monkeypatch.setattr(FusedAggregation, "_size_for_abandoned_partials", lambda self: None)
    if not defer:
        monkeypatch.setattr(FusedAggregation, "_defer_growth", lambda self, batch, bound: False)
    session = Session(device=device_name, drivers=1, batch_rows=batch_rows, **config)
    session.register("t", table, split_rows=batch_rows)
    plan = (PlanBuilder(session.catalog).table_scan("t").partial_aggregation(["s", "g"], AGGREGATES)
            .final_aggregation().plan())
    result = session.execute(plan)
    monkeypatch.undo()
    (final,) = session.last_stats().operator_stats_by_node()[str(plan.id)]  # the FINAL step's node
    assert final.operator_type == "FusedAggregation", final.operator_type
    return result, final.runtime



def test_partial_batches_of_new_keys_grow_the_final_table_fewer_times(device_name, monkeypatch):
    """The PARTIAL step abandons grouping (a key per row), so the FINAL step gets batch after batch of new keys."""
    groups = GROUPS[device_name]
    table = _table(groups, 1, 6)
    batch_rows = groups // 12
    config = dict(partial_aggregation_abandon_rows=1)
    before, before_stats = _final_stats(device_name, table, batch_rows, False, monkeypatch, **config)
    after, after_stats = _final_stats(device_name, table, batch_rows, True, monkeypatch, **config)
    expected = keyed_answer(table)
    assert_same_rows(before, expected)
    assert_same_rows(after, expected)
    assert after_stats.get("deferred_batches", 0) > 0, after_stats
    assert after_stats["table_growths"] < before_stats["table_growths"], (after_stats, before_stats)


def test_repeated_keys_of_partial_flushes_grow_the_table_as_they_need(device_name, monkeypatch):
    """PARTIAL flushes of few groups each: every key reaches the FINAL step several times, so held batches bring
    fewer new keys than rows (the rate estimates them; keys beyond it go pending and run again)."""
    groups = GROUPS[device_name] // 4
    table = _table(groups, 4, 5)
    result, stats = _final_stats(device_name, table, max(256, groups // 16), True, monkeypatch,
                                 partial_aggregation_max_groups=max(64, groups // 40))
    assert_same_rows(result, keyed_answer(table))
    assert stats.get("deferred_batches", 0) > 0, stats


@pytest.mark.parametrize("device_name", ["cpu"])
def test_an_empty_input_holds_nothing_and_answers_no_groups(device_name, monkeypatch):
    table = _table(100, 1, 1).slice(0, 0)
    result, _ = _final_stats(device_name, table, 256, True, monkeypatch)
    assert result.num_rows == 0
