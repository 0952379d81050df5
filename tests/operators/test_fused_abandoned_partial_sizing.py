"""A FINAL step whose PARTIAL step gave up grouping sizes its table once, from the scan's rows and what it saw.

Why: a PARTIAL step that finds about a group per row hands every row on, so its FINAL step receives as many rows
as were scanned, nearly all new keys, and its table grew by doubling (db-benchmark's q10 at 10M rows: 8 growths a
driver, each a fresh zeroed table and a move of every key). The scan's rows (its splits': an Arrow table's, a
Parquet footer's row groups) and the PARTIAL step's rows and groups give the keys to expect; the answers must
not change: keys repeated beyond the estimate (they grow the table as before), NULL keys, string keys of several
dictionaries, a repartition over two drivers, a memory cap that bounds the table, an empty input.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows
from operator_tables import KEYED_AGGREGATES as AGGREGATES, keyed_answer, keyed_chunks

from gpu_engine import Session
from gpu_engine.kernels.string_keys import StringKeyTable
from gpu_engine.operators.fused_aggregation import FusedAggregation
from gpu_engine.plans import PlanBuilder

#: Distinct keys: enough for several growths from the table's 1024 starting slots (cuda-sim interprets kernels).
GROUPS = {"cpu": 12_000, "cuda-sim": 1_500, "cuda": 12_000}


def _table(groups: int, copies: int, chunks: int) -> pa.Table:
    return keyed_chunks(groups, copies, chunks, seed=11)



def _final_runtime(session: Session, plan, final_id: str) -> dict[str, float]:
    """Return the FINAL step's runtime stats summed over its drivers, and its peak memory as ``peak_bytes``."""
    runtime: dict[str, float] = {"peak_bytes": 0}
    for operator in session.last_stats().operator_stats_by_node()[final_id]:
        assert operator.operator_type == "FusedAggregation", operator.operator_type
        for name, value in operator.runtime.items():
            runtime[name] = runtime.get(name, 0) + value
        runtime["peak_bytes"] += operator.peak_memory_bytes
    return runtime


def _run_one_driver(device_name, source, batch_rows: int, sized: bool, monkeypatch, **config):
    """Run scan -> PARTIAL -> FINAL on one driver (one pipeline: the order of batches is fixed); return the answer
    and the FINAL step's runtime stats. ``source`` is a table or a Parquet file's path."""
    if not sized:
        monkeypatch.setattr(FusedAggregation, "_size_for_abandoned_partials", lambda self: None)
    session = Session(device=device_name, drivers=1, batch_rows=batch_rows, partial_aggregation_abandon_rows=1,
                      **config)
    if isinstance(source, pa.Table):
        session.register("t", source, split_rows=batch_rows)
    else:
        session.register("t", source)
    plan = (PlanBuilder(session.catalog).table_scan("t").partial_aggregation(["s", "g"], AGGREGATES)
            .final_aggregation().plan())
    result = session.execute(plan)
    monkeypatch.undo()
    return result, _final_runtime(session, plan, str(plan.id))


def test_a_final_step_after_an_abandoned_partial_step_sizes_its_table_once(device_name, monkeypatch):
    """A key per row: the PARTIAL step gives up at its first batch; the FINAL step's table is sized before its
    first batch runs and never grows (it grew before)."""
    groups = GROUPS[device_name]
    table = _table(groups, 1, 6)
    batch_rows = groups // 12
    before, before_stats = _run_one_driver(device_name, table, batch_rows, False, monkeypatch)
    after, after_stats = _run_one_driver(device_name, table, batch_rows, True, monkeypatch)
    expected = keyed_answer(table)
    assert_same_rows(before, expected)
    assert_same_rows(after, expected)
    assert before_stats.get("table_growths", 0) >= 1, before_stats
    assert after_stats.get("tables_sized_for_abandoned_partials") == 1, after_stats
    assert after_stats.get("table_growths", 0) == 0, after_stats


@pytest.mark.parametrize("device_name", ["cpu"])
def test_a_parquet_scan_gives_its_footers_rows(device_name, monkeypatch, tmp_path):
    """A Parquet file's splits know their rows from the footer's row groups, as an Arrow table's do."""
    groups = GROUPS[device_name]
    table = _table(groups, 1, 1).cast(pa.schema([("s", pa.string()), ("g", pa.int64()), ("v", pa.int64())]))
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=groups // 5)
    result, stats = _run_one_driver(device_name, str(path), groups // 12, True, monkeypatch)
    assert_same_rows(result, keyed_answer(table))
    assert stats.get("tables_sized_for_abandoned_partials") == 1, stats
    assert stats.get("table_growths", 0) == 0, stats


@pytest.mark.parametrize("device_name", ["cpu"])
def test_repeated_keys_and_a_memory_cap_answer_the_same(device_name, monkeypatch):
    """Each key twice: the PARTIAL step's first batch looks nearly all distinct, so the estimate counts more keys
    than there are and the table never grows; under a query memory cap the table is sized below the keys, which
    grow it as before. The answer is the same."""
    groups = GROUPS[device_name] // 2
    table = _table(groups, 2, 4)
    growths = []
    for config in ({}, {"query_memory_limit_bytes": 3 << 20}):
        result, stats = _run_one_driver(device_name, table, groups // 10, True, monkeypatch, **config)
        assert_same_rows(result, keyed_answer(table))
        assert stats.get("tables_sized_for_abandoned_partials") == 1, (config, stats)
        growths.append(stats.get("table_growths", 0))
    assert growths[0] == 0 and growths[1] >= 1, growths


@pytest.mark.parametrize("device_name", ["cpu"])
def test_a_repartitioned_final_step_over_two_drivers_answers_the_same(device_name):
    """Two drivers, the FINAL step behind a repartition: which driver gives up first varies, the answer does not;
    one of them gives up (a row is enough), so a FINAL driver sizes its table."""
    groups = GROUPS[device_name]
    table = _table(groups, 1, 6)
    session = Session(device=device_name, drivers=2, batch_rows=groups // 12, partial_aggregation_abandon_rows=1)
    session.register("t", table, split_rows=groups // 12)
    plan = (PlanBuilder(session.catalog).table_scan("t").partial_aggregation(["s", "g"], AGGREGATES)
            .local_partition(["s", "g"]).final_aggregation().plan())
    result = session.execute(plan)
    assert_same_rows(result, keyed_answer(table))
    assert _final_runtime(session, plan, str(plan.id)).get("tables_sized_for_abandoned_partials", 0) >= 1


@pytest.mark.parametrize("device_name", ["cpu"])
def test_an_empty_input_sizes_nothing_and_answers_no_groups(device_name, monkeypatch):
    result, stats = _run_one_driver(device_name, _table(100, 1, 1).slice(0, 0), 256, True, monkeypatch)
    assert result.num_rows == 0
    assert "tables_sized_for_abandoned_partials" not in stats


def _named_rows(groups: int, copies: int, seed: int) -> pa.Table:
    """Return ``copies`` rows of each of ``groups`` keys: a long name a key (``n``, NULL for every 19th), a
    country of seven (``s``), the key number (``g``) and a value, in random order."""
    rng = np.random.default_rng(seed)
    key = rng.permutation(np.arange(groups * copies) % groups)
    names = pa.array([None if k % 19 == 0 else f"customer#{k:09d}, {k % 97} main street" for k in key])
    return pa.table({"n": names, "s": pa.array([f"country {k % 7}" for k in key]), "g": pa.array(key, pa.int64()),
                     "v": pa.array(rng.integers(-50, 50, len(key)), pa.int64())})


def _final_string_growths(device_name, table: pa.Table, batch_rows: int, expect: bool, monkeypatch) -> tuple:
    """Run scan -> PARTIAL -> FINAL by (n, s, g) on one driver; return the answer and the FINAL step's stats."""
    if not expect:
        monkeypatch.setattr(StringKeyTable, "expect", lambda self, strings, rows: False)
    session = Session(device=device_name, drivers=1, batch_rows=batch_rows, partial_aggregation_abandon_rows=1)
    session.register("t", table, split_rows=batch_rows)
    plan = (PlanBuilder(session.catalog).table_scan("t").partial_aggregation(["n", "s", "g"], AGGREGATES)
            .final_aggregation().plan())
    result = session.execute(plan)
    monkeypatch.undo()
    return result, _final_runtime(session, plan, str(plan.id))


def test_a_final_steps_string_key_of_a_string_a_row_is_sized_once(device_name, monkeypatch):
    """The FINAL step after an abandoned PARTIAL step sizes a string key whose rows were nearly all new strings
    (the names) for the keys it expects, as it sizes its table: the names' table grows once (the first batch),
    where it grew batch by batch; the countries' table (7 strings) is left small. Answers as DuckDB's."""
    import duckdb

    groups = GROUPS[device_name]
    table = _named_rows(groups, 1, 5)
    connection = duckdb.connect()
    connection.register("t", table)
    expected = connection.sql("SELECT n, s, g, count(*) AS c, sum(v) AS sv, min(v) AS mv FROM t GROUP BY n, s, g"
                              ).to_arrow_table()
    before, before_stats = _final_string_growths(device_name, table, groups // 6, False, monkeypatch)
    after, after_stats = _final_string_growths(device_name, table, groups // 6, True, monkeypatch)
    assert_same_rows(before, expected)
    assert_same_rows(after, expected)
    assert before_stats.get("string_table_growths", 0) >= 2, before_stats
    assert after_stats.get("string_tables_sized") == 1, after_stats
    assert after_stats.get("string_table_growths", 0) <= 1, after_stats
