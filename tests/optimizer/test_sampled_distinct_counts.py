"""A key-like integer column's distinct values from its Parquet dictionary (gpu_engine.optimizer.statistics).

An integer column whose ``[min, max]`` spans about the table's rows reads as a key by its range; a sparse key
repeated across rows (TPC-H's ``l_orderkey``: 1.5M values over 1..6M in 6M rows) is not one. The first row
group's dictionary page says how many values it holds: the whole table's count where it is the only row group,
the table's by density where the rows are in the column's order, in another order its count where it repeats
each value a hundred times or more (so an in-memory column's sample), nothing (the range stands) otherwise. The
typed estimates read that count (a scan's ``ndv``); the SQL planner reads the range's until its eager
aggregation weighs runtime filters (see ``statistics._sampled_ndv``).
"""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine import Session
from gpu_engine.optimizer.cardinality import estimate
from gpu_engine.optimizer import statistics as statistics_module
from gpu_engine.optimizer.statistics import RegisteredStatistics
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import AggregationNode, walk_plan

ROWS = 4000
#: four rows a key, keys 0, 4, 8, ...: 1,000 values over a range of ~4,000 (as l_orderkey's four lines an order)
SPARSE = [(i // 4) * 4 for i in range(ROWS)]


def _ndv(tmp_path, values, name="t", **write) -> float:
    table = pa.table({"k": pa.array(values, pa.int64()), "x": pa.array(range(len(values)), pa.int64())})
    path = tmp_path / f"{name}.parquet"
    pq.write_table(table, path, **write)
    session = Session(device="cpu")
    session.register(name, str(path))
    statistics = RegisteredStatistics(session._tables)
    scanned = estimate(PlanBuilder({name: table.schema}).table_scan(name).plan(), statistics)
    return scanned.columns["k"].ndv if "k" in scanned.columns else 0.0


def test_a_sorted_sparse_key_counts_its_values_from_the_first_row_groups_dictionary(tmp_path):
    assert _ndv(tmp_path, SPARSE, row_group_size=ROWS // 4) == pytest.approx(1000, rel=0.01)  # range: 3,997
    assert _ndv(tmp_path, SPARSE, "one", row_group_size=ROWS) == 1000  # one row group: its dictionary's count
    assert _ndv(tmp_path, list(range(ROWS)), "dense", row_group_size=ROWS // 4) == ROWS  # a key: one a row
    with_nulls = [None if i % 5 == 0 else v for i, v in enumerate(SPARSE)]  # NULLs are no value
    assert _ndv(tmp_path, with_nulls, "nulls", row_group_size=ROWS // 4) == pytest.approx(1000, rel=0.01)


def test_a_groupby_on_a_sorted_sparse_key_estimates_its_groups(tmp_path):
    table = pa.table({"k": pa.array(SPARSE, pa.int64()), "q": pa.array([1] * ROWS, pa.int64())})
    pq.write_table(table, tmp_path / "lines.parquet", row_group_size=ROWS // 4)
    session = Session(device="cpu")
    session.register("lines", str(tmp_path / "lines.parquet"))
    plan = PlanBuilder({"lines": table.schema}).table_scan("lines").aggregation(["k"], ["sum(q) AS s"]).plan()
    assert estimate(plan, RegisteredStatistics(session._tables)).rows == pytest.approx(1000, rel=0.01)


def test_rows_in_another_order_or_without_a_dictionary_keep_the_range_count(tmp_path):
    shuffled = SPARSE[:]
    random.Random(7).shuffle(shuffled)
    spanned = max(SPARSE) - min(SPARSE) + 1
    # a row group's values say nothing of the others' where each spans the whole range
    assert _ndv(tmp_path, shuffled, "shuffled", row_group_size=ROWS // 4) == spanned
    assert _ndv(tmp_path, SPARSE, "plain", row_group_size=ROWS // 4, use_dictionary=False) == spanned
    assert _ndv(tmp_path, [], "empty") == 0


def test_a_column_chunk_over_the_read_bound_keeps_the_range_count(tmp_path, monkeypatch):
    """Planning reads a chunk whole to walk its page headers: one over the bound is not read."""
    monkeypatch.setattr(statistics_module, "SAMPLED_CHUNK_MAX_BYTES", 64)
    spanned = max(SPARSE) - min(SPARSE) + 1
    assert _ndv(tmp_path, SPARSE, "big", row_group_size=ROWS // 4) == spanned


def test_few_values_of_a_wide_range_are_counted_in_any_order_in_parquet_and_in_memory(tmp_path):
    """A row group (or an in-memory column's sample) that repeats each value a hundred times or more has seen
    about all of them: eight int64 values drawn from [0, 1e9) over 4,000 shuffled rows are eight, not a value a
    row (issue 31: such a GROUP BY lost its partial step). Ten rows a value (SPARSE shuffled) keep the range."""
    wide = [v * 123_456_789 for v in range(8)]
    rows = [wide[i % 8] for i in range(ROWS)]
    random.Random(5).shuffle(rows)
    assert _ndv(tmp_path, rows, "wide", row_group_size=ROWS // 4) == 8
    table = pa.table({"k": pa.array(rows, pa.int64())})
    session = Session(device="cpu")
    session.register("memory", table)
    scanned = estimate(PlanBuilder({"memory": table.schema}).table_scan("memory").plan(),
                       RegisteredStatistics(session._tables))
    assert scanned.columns["k"].ndv == 8
    shuffled = SPARSE[:]
    random.Random(7).shuffle(shuffled)
    session.register("tens", pa.table({"k": pa.array(shuffled, pa.int64())}))
    scanned = estimate(PlanBuilder({"tens": table.schema}).table_scan("tens").plan(),
                       RegisteredStatistics(session._tables))
    assert scanned.columns["k"].ndv == max(SPARSE) - min(SPARSE) + 1



def test_a_plain_file_key_of_a_range_wider_than_the_rows_is_sampled_where_its_partial_step_hangs_on_it(
        tmp_path, monkeypatch):
    """A PLAIN-encoded file: a row group's rows are read and counted where the range is wider than the rows and
    the partial-step rule would refuse on it (eight values of [0, 1e9): eight, the partial step kept); a range
    within the rows (SPARSE) reads nothing and keeps its count."""
    from gpu_engine.optimizer import partial_steps

    monkeypatch.setattr(partial_steps, "MIN_ESTIMATED_ROWS", 0)
    monkeypatch.setattr(partial_steps, "WIDE_KEY_SAMPLE_MIN_ROWS", 0)
    rows = [(i % 8) * 123_456_789 for i in range(ROWS)]
    random.Random(3).shuffle(rows)
    shuffled = SPARSE[:]
    random.Random(7).shuffle(shuffled)
    session = Session(device="cpu")
    kept = {}
    for name, values in (("wideplain", rows), ("narrowplain", shuffled)):
        table = pa.table({"k": pa.array(values, pa.int64()), "v": pa.array(range(ROWS), pa.int64())})
        pq.write_table(table, tmp_path / f"{name}.parquet", row_group_size=ROWS // 4, use_dictionary=False)
        session.register(name, str(tmp_path / f"{name}.parquet"))
        plan = PlanBuilder({name: table.schema}).table_scan(name).aggregation(["k"], ["sum(v) AS s"]).plan()
        (chosen,) = [n for n in walk_plan(partial_steps.choose_partial_steps(plan, RegisteredStatistics(
            session._tables))) if isinstance(n, AggregationNode)]
        kept[name] = chosen.partial_step
    statistics = RegisteredStatistics(session._tables)
    assert statistics.wide_key_count("wideplain", "k") == 8 and statistics.wide_key_count("narrowplain", "k") is None
    assert kept == {"wideplain": True, "narrowplain": False}
