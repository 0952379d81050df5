"""TopNRowNumber (issue 30 item 1) built with PlanBuilder against DuckDB's window + filter, on every device.

Checked: row_number, rank and dense_rank bounded by 0, 1, 2 and more than any partition holds; partition keys
with NULLs (NULLs form one partition), several keys, none (a gather); sort keys with ties and NULLs (NULLS
FIRST/LAST, DESC), none; several drivers (a partial step per driver before the exchange) and batches of a
few rows (the buffer is cut down many times); empty input; the row number produced or not. Where ties leave
row_number free, the rows compare on the partition and sort columns and the number only (tied rows agree
there); rank and dense_rank keep all ties, so their rows compare whole.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_table_over, rows_mismatch

from gpu_engine import MemoryCapExceeded, Session
from gpu_engine.errors import PlanError
from gpu_engine.plans import PlanBuilder, format_node


def _table(rows: int) -> pa.Table:
    ids = list(range(rows))

    def null_every(values, step, offset=0):
        return [None if (i + offset) % step == 0 else v for i, v in enumerate(values)]

    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "k": pa.array(null_every([100 + i if i % 13 == 5 else (i * 7) % 5 for i in ids], 11), pa.int32()),
        "s": pa.array(null_every([["x", "yy", "", "a long string key"][(i * 3) % 4] for i in ids], 9, 4)),
        "o": pa.array(null_every([(i * 5) % 7 for i in ids], 8, 3), pa.int64()),
        "v": pa.array(null_every([((i * 37) % 23 - 11) * 0.25 for i in ids], 6, 1), pa.float64()),
    })


ROWS = {"cpu": 300, "cuda-sim": 30, "cuda": 300}

# (partition keys, sort keys, columns that identify a row up to ties on the sort keys)
CASES = [
    (["k"], ["o", "id DESC"], None),  # a total order: whole rows are defined
    (["k"], ["o DESC NULLS FIRST"], ["k", "o"]),
    (["k", "s"], ["v NULLS FIRST", "o DESC"], ["k", "s", "v", "o"]),
    ([], ["o NULLS FIRST", "v"], ["o", "v"]),
    (["s"], [], ["s"]),
    (["k"], ["s DESC NULLS FIRST", "id"], None),  # string sort keys: a later batch's may encode in more words
]
CASE_IDS = ["by_k_total", "by_k_ties", "by_k_s", "global", "by_s_unordered", "by_k_string_order"]


@pytest.fixture
def tables(device_name):
    data = _table(ROWS[device_name])
    return {"t": data, "e": data.slice(0, 0)}


def _session(device_name, drivers, batch_rows, tables, **options) -> Session:
    session = Session(device=device_name, drivers=drivers, batch_rows=batch_rows, **options)
    for name, data in tables.items():
        session.register(name, data, split_rows=max(1, data.num_rows // 4))
    return session


def _reference(sql: str, tables) -> pa.Table:
    return duckdb_table_over(tables, sql)


def _duckdb_sql(table, partition, order, function, limit, number) -> str:
    over = (f"PARTITION BY {', '.join(partition)} " if partition else "") + (
        f"ORDER BY {', '.join(order)}" if order else "")
    inner = f"SELECT *, {function}() OVER ({over}) AS rn FROM {table}"
    columns = "*" if number else "* EXCLUDE (rn)"
    return f"SELECT {columns} FROM ({inner}) WHERE rn <= {limit}"


def _compared(table: pa.Table, columns, function, number) -> pa.Table:
    """Return the columns a comparison may read: all but where row_number's choice among ties is free."""
    if columns is None or function != "row_number":
        return table
    return table.select(list(columns) + (["rn"] if number else []))


# (drivers, rows per batch, limit): batches of a few rows cut the buffer down many times; a limit past every
# partition's size keeps all rows (the buffer's bound doubles). Limit 0 has a test of its own.
SETTINGS = [(1, 1 << 16, 1), (3, 4, 2), (2, 8, 1000)]
#: The simulator's cases (it is an interpreter): each function once, at several drivers and small batches.
SIM_CASES = {("row_number", "by_k_total"), ("rank", "by_k_ties"), ("dense_rank", "by_k_s"), ("row_number", "global")}


@pytest.mark.parametrize("setting", SETTINGS, ids=["drivers1-limit1", "drivers3-batches4-limit2",
                                                   "drivers2-batches8-limit1000"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("function", ["row_number", "rank", "dense_rank"])
def test_top_n_row_number_matches_duckdb(device_name, setting, case, function, tables):
    drivers, batch_rows, limit = setting
    if device_name == "cuda-sim" and (setting != (3, 4, 2) or (function, CASE_IDS[CASES.index(case)]) not in SIM_CASES):
        pytest.skip("the simulator runs a few several-driver cases (it is an interpreter)")
    partition, order, columns = case
    number = limit != 2  # the number column produced at some limits, not at others
    session = _session(device_name, drivers, batch_rows, tables)
    plan = (PlanBuilder(session.catalog).table_scan("t")
            .top_n_row_number(partition, order, limit, "rn" if number else None, function=function).plan())
    actual = session.execute(plan)
    expected = _reference(_duckdb_sql("t", partition, order, function, limit, number), tables)
    assert actual.schema.names == expected.schema.names
    problem = rows_mismatch(_compared(actual, columns, function, number),
                            _compared(expected, columns, function, number))
    assert problem is None, problem


@pytest.mark.parametrize("table, limit", [("e", 3), ("t", 0)], ids=["empty_input", "limit0"])
def test_no_rows_in_or_none_kept_gives_no_rows(device_name, table, limit, tables):
    session = _session(device_name, 2, 4, tables)
    plan = PlanBuilder(session.catalog).table_scan(table).top_n_row_number(["k"], ["o"], limit, "rn").plan()
    actual = session.execute(plan)
    assert actual.num_rows == 0 and actual.schema.names == ["id", "k", "s", "o", "v", "rn"]


def test_the_plan_explains_round_trips_and_runs_a_partial_step_per_driver(tables):
    from gpu_engine.plans.serialization import SerializationError, plan_from_json, plan_to_json

    session = _session("cpu", 2, 16, tables)
    plan = PlanBuilder(session.catalog).table_scan("t").top_n_row_number(["k"], ["o DESC"], 2, "rn",
                                                                          function="rank").plan()
    assert plan_from_json(plan_to_json(plan)) == plan
    document = json.loads(plan_to_json(plan))
    document["plan"]["function"] = "ntile"  # a document is checked as a built plan is
    with pytest.raises(SerializationError, match="function must be one of row_number, rank, dense_rank, got 'ntile'"):
        plan_from_json(json.dumps(document))
    assert format_node(plan).startswith(
        "-- TopNRowNumber[1][partition by k; order by o DESC NULLS LAST; rn := rank() <= 2] -> id:int64, ")
    text = session.explain(plan, full=True)
    assert "-- LocalPartition[1.exchange][REPARTITION [k]]" in text
    assert "-- TopNRowNumber[1.partial][PARTIAL; partition by k; order by o DESC NULLS LAST; rank() <= 2]" in text
    unpartitioned = PlanBuilder(session.catalog).table_scan("t").top_n_row_number([], ["o"], 2).plan()
    assert "-- LocalPartition[1.exchange][GATHER]" in session.explain(unpartitioned)


@pytest.mark.parametrize("call, message", [
    (lambda b: b.top_n_row_number(["k"], ["o"], 2, "rn", function="ntile"),
     "TopNRowNumber computes row_number, rank, dense_rank, not 'ntile'"),
    (lambda b: b.top_n_row_number(["k"], ["o"], -1), "limit must be a non-negative integer"),
    (lambda b: b.top_n_row_number(["nope"], ["o"], 1), "nope"),
    (lambda b: b.top_n_row_number(["k"], ["o"], 1, "id"), "duplicate output column name 'id'"),
    (lambda b: b.top_n_row_number(["k"], ["o"], 1, "rn", is_partial=True), "a partial TopNRowNumber"),
])
def test_bad_arguments_are_refused_at_build_time(call, message, tables):
    session = _session("cpu", 1, 16, tables)
    with pytest.raises(PlanError) as raised:
        call(PlanBuilder(session.catalog).table_scan("t"))
    assert message in str(raised.value) and "TopNRowNumber[1]" in str(raised.value)


def test_the_buffer_holds_only_the_top_rows_so_a_cap_that_stops_a_window_passes():
    # The same rows: a Window holds all 20,000 input rows; TopNRowNumber about limit rows per partition.
    data = _table(20_000)
    session = Session(device="cpu", drivers=1, batch_rows=512, query_memory_limit_bytes=300_000)
    session.register("t", data, split_rows=2000)
    window = (PlanBuilder(session.catalog).table_scan("t").window(["k"], ["o", "id"], ["row_number() AS rn"])
              .filter("rn <= 2").plan())
    with pytest.raises(MemoryCapExceeded):
        session.execute(window)
    top = PlanBuilder(session.catalog).table_scan("t").top_n_row_number(["k"], ["o", "id"], 2, "rn").plan()
    expected = _reference(_duckdb_sql("t", ["k"], ["o", "id"], "row_number", 2, True), {"t": data})
    assert rows_mismatch(session.execute(top), expected) is None


def test_rows_past_the_memory_cap_fail_and_the_session_keeps_working():
    data = _table(20_000)
    session = Session(device="cpu", drivers=1, batch_rows=512, query_memory_limit_bytes=200_000)
    session.register("t", data, split_rows=2000)
    plan = PlanBuilder(session.catalog).table_scan("t").top_n_row_number(["id"], ["o"], 1).plan()  # keeps all
    with pytest.raises(MemoryCapExceeded) as raised:
        session.execute(plan)
    assert raised.value.operator == "TopNRowNumber"
    small = PlanBuilder(session.catalog).table_scan("t", ["id"]).filter("id < 3").plan()
    assert sorted(session.execute(small).column("id").to_pylist()) == [0, 1, 2]


@pytest.mark.parametrize("partition, widths", [(["k"], (3, 2, 1)), ([], (3, 1))], ids=["by_k", "global"])
def test_on_a_cluster_each_stage_keeps_its_top_rows_before_the_shuffle(partition, widths):
    from gpu_engine.cluster import LocalCluster, add_remote_exchanges
    from gpu_engine.plans import walk_plan
    from gpu_engine.plans.nodes import TopNRowNumberNode

    tables = {"t": _table(200)}
    session = _session("cpu", 1, 16, tables)
    plan = PlanBuilder(session.catalog).table_scan("t").top_n_row_number(partition, ["o", "id"], 2, "rn").plan()
    steps = [n for n in walk_plan(add_remote_exchanges(plan)) if isinstance(n, TopNRowNumberNode)]
    assert [n.is_partial for n in steps] == [False, True]
    actual = LocalCluster(session, widths).execute(plan)
    expected = _reference(_duckdb_sql("t", partition, ["o", "id"], "row_number", 2, True), tables)
    problem = rows_mismatch(actual, expected)
    assert problem is None, problem


def test_the_operator_reads_the_device_a_bounded_number_of_times_a_batch(device_name):
    # A GPU pays for every host sync. Per batch: the partition table's new-partition count and the rows that
    # pass the partitions' bounds; per cut one more (the rows kept), at most one cut a batch; none per row.
    data = _table(4 * ROWS[device_name])
    for batch_rows in (16, 4) if device_name != "cuda-sim" else (16,):
        session = Session(device=device_name, drivers=1, batch_rows=batch_rows)
        session.register("t", data, split_rows=batch_rows)
        plan = (PlanBuilder(session.catalog).table_scan("t", ["id", "k", "o"])  # gathering strings reads sizes
                .top_n_row_number(["k"], ["o", "id"], 2, "rn")
                .aggregation([], ["count(*) AS c", "sum(rn) AS n"]).plan())  # delivering rows reads them too
        session.execute(plan)
        stats = [s for found in session.last_stats().operator_stats_by_node().values() for s in found]
        (top,) = [s for s in stats if s.operator_type == "TopNRowNumber"]
        assert top.input_batches >= data.num_rows // batch_rows
        assert top.host_syncs <= 3 * top.input_batches + 1, (batch_rows, top.host_syncs, top.input_batches)


@pytest.mark.parametrize("function", ["row_number", "rank", "dense_rank"])
def test_partition_ranks_sort_one_word_without_a_lexsort_and_rank_as_one(device, device_name, function, monkeypatch):
    """A cut sorts by one sort word then stably by narrow partition ids (two radix-friendly sorts), never by a
    two-key lexsort of 64-bit words; ranks and numbers equal those of the reference order."""
    import numpy as np

    from gpu_engine.operators.top_n_row_number import partition_ranks

    rng = np.random.default_rng(5)
    n = 40 if device_name == "cuda-sim" else 2000
    ids = rng.integers(0, 7, n).astype(np.int32)
    words = rng.integers(0, 5, (1, n)).astype(np.uint64)
    if device_name == "cpu":
        monkeypatch.setattr(np, "lexsort", lambda *a, **k: pytest.fail("a lexsort over one sort word"))
    xp = device.xp
    order, values, numbers = (device.to_host(a) for a in partition_ranks(device, xp.asarray(ids), xp.asarray(words),
                                                                         function, True, 7))
    assert sorted(order.tolist()) == list(range(n))
    assert (np.diff(ids[order]) >= 0).all()  # by partition, then by word inside each
    same = ids[order][1:] == ids[order][:-1]
    assert (np.diff(words[0, order])[same] >= 0).all()
    for p in range(7):
        mine = words[0, order][ids[order] == p]
        expected = {"row_number": np.arange(1, len(mine) + 1),
                    "rank": np.searchsorted(mine, mine, side="left") + 1,
                    "dense_rank": np.searchsorted(np.unique(mine), mine) + 1}[function]
        assert values[ids[order] == p].tolist() == expected.tolist()
        assert numbers[ids[order] == p].tolist() == list(range(1, len(mine) + 1))


@pytest.mark.parametrize("limit", [1, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_row_number_cuts_keep_each_partitions_rows_in_slots_without_sorting(device, device_name, case, limit, tables,
                                                                            monkeypatch):
    """On the CPU a row_number cut keeps each partition's first rows in slots, one pass over the buffer
    (kernels.partition_top), so the sort of every buffered row is never reached; elsewhere the cut sorts."""
    import gpu_engine.operators.top_n_row_number as module

    if device_name != "cpu":
        if (case, limit) != (CASES[0], 2):
            pytest.skip("the simulator sorts (partition_first_rows answers None there): one case checks that")
        from gpu_engine.kernels.partition_top import partition_first_rows

        xp = device.xp
        assert partition_first_rows(device, xp.zeros(4, dtype=xp.int32), xp.zeros((1, 4), dtype=xp.uint64), 2,
                                    1) is None
    else:
        sorted_ranks = module.partition_ranks
        monkeypatch.setattr(module, "partition_ranks", lambda device, ids, words, function, *a: (
            pytest.fail("a row_number cut sorted its buffer") if function == "row_number"
            else sorted_ranks(device, ids, words, function, *a)))
    partition, order, columns = case
    session = _session(device_name, 3, 4, tables)
    plan = (PlanBuilder(session.catalog).table_scan("t")
            .top_n_row_number(partition, order, limit, "rn").plan())
    actual = session.execute(plan)
    expected = _reference(_duckdb_sql("t", partition, order, "row_number", limit, True), tables)
    problem = rows_mismatch(_compared(actual, columns, "row_number", True),
                            _compared(expected, columns, "row_number", True))
    assert problem is None, problem


def test_partition_first_rows_keep_the_rows_a_stable_sort_numbers_first(device_name):
    """Several words (primary last), ties, no words at all, a partition without rows; None past SLOT_LIMIT."""
    import numpy as np

    from gpu_engine.device import get_device
    from gpu_engine.kernels.partition_top import SLOT_LIMIT, partition_first_rows

    if device_name != "cpu":
        pytest.skip("the CPU's kernel; other devices sort (checked in the test above)")
    device = get_device("cpu")
    rng = np.random.default_rng(11)
    n = 3000
    ids = rng.integers(0, 40, n).astype(np.int64)
    ids[ids == 17] = 18  # partition 17 holds no rows
    for num_words in (0, 1, 3):
        words = rng.integers(0, 4, (num_words, n)).astype(np.uint64)
        for limit in (1, 2, 5, SLOT_LIMIT):
            kept, numbers = partition_first_rows(device, ids, words, limit, 40)
            order = np.lexsort(np.vstack([words, ids[None, :]])) if num_words else np.argsort(ids, kind="stable")
            expected = [row for p in range(40) for row in order[ids[order] == p][:limit]]
            assert kept.tolist() == [int(row) for row in expected], (num_words, limit)
            assert numbers.tolist() == [i + 1 for p in range(40) for i in range(min(limit, int((ids == p).sum())))]
    assert partition_first_rows(device, ids, words, SLOT_LIMIT + 1, 40) is None
