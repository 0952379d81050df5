"""The split loader refuses paths outside the registered tables and row groups a file lacks (issue 13).

Before: ``split_from_json`` accepted any path (``/etc/passwd``) and row groups
-1 or 10**9, which then failed inside a scan with a raw pyarrow error.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import ExecutionError, Session
from gpu_engine.exec.query_ctx import QueryCtx
from gpu_engine.exec.split import ParquetSplit, RemoteSplit
from gpu_engine.exec.split_serialization import split_from_json, split_to_json
from gpu_engine.exec.task import Task
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.serialization import SerializationError


@pytest.fixture
def session_with_table(tmp_path):
    pq.write_table(pa.table({"x": pa.array(range(300), pa.int64())}), tmp_path / "t.parquet", row_group_size=100)
    session = Session(device="cpu")
    session.register("t", tmp_path / "t.parquet")
    return session, str(tmp_path / "t.parquet")


def _document(path: str, row_groups: list) -> str:
    return ('{"format": 1, "split": {"type": "ParquetSplit", "path": ' + f'"{path}", "row_groups": '
            + str(row_groups) + "}}")


@pytest.mark.parametrize(("row_groups", "where", "message"), [
    ([-1], "$.split.row_groups[0]", "row group -1 is negative"),
    ([0, 2, 0], "$.split.row_groups[2]", "row group 0 is repeated"),
])
def test_negative_and_repeated_row_groups_are_refused_always(session_with_table, row_groups, where, message):
    _, path = session_with_table
    with pytest.raises(SerializationError, match=message) as info:
        split_from_json(_document(path, row_groups))
    assert info.value.path == where


def test_row_groups_past_the_files_end_are_refused_naming_file_and_table(session_with_table):
    session, path = session_with_table
    with pytest.raises(SerializationError, match=r"row group 1000000000 is out of range: .*t\.parquet \(table 't'\) "
                                                 r"has 3 row group\(s\)") as info:
        split_from_json(_document(path, [1, 10**9]), tables=[session.table("t")])
    assert info.value.path == "$.split.row_groups[1]"


@pytest.mark.parametrize("path", ["/etc/passwd", "../t.parquet", "/nonexistent/t.parquet"])
def test_paths_outside_the_registered_tables_are_refused(session_with_table, path):
    session, _ = session_with_table
    with pytest.raises(SerializationError, match=r"is not a file of the registered tables 't'") as info:
        split_from_json(_document(path, [0]), tables=[session.table("t")])
    assert info.value.path == "$.split.path"


def test_a_checked_split_of_a_registered_file_loads_and_reads_its_row_groups(session_with_table):
    session, path = session_with_table
    split = split_from_json(split_to_json(ParquetSplit(path, (0, 2))), tables=[session.table("t")])
    assert split == ParquetSplit(path, (0, 2))
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation([], ["sum(x) AS s", "count(*) AS n"]).plan()
    batches = []
    query_ctx = QueryCtx.create(session.device, session.config)
    task = Task("split-check", plan, query_ctx, 1, lambda batch: batches.append(batch.to_arrow()))
    try:
        task.start()
        task.add_split(plan.source.id, split)
        task.no_more_splits(plan.source.id)
        task.wait(60)
    finally:
        query_ctx.shutdown()
    table = pq.read_table(path)
    connection = duckdb.connect()
    connection.register("t", table)
    expected = duckdb_table(connection, "SELECT sum(x) AS s, count(*) AS n FROM (SELECT x FROM t WHERE x < 100 OR x >= 200)")
    assert_same_rows(pa.Table.from_batches(batches), expected)


def test_a_scan_given_a_row_group_the_file_lacks_fails_naming_the_file(session_with_table):
    session, path = session_with_table
    plan = PlanBuilder(session.catalog).table_scan("t").plan()
    query_ctx = QueryCtx.create(session.device, session.config)
    task = Task("split-range", plan, query_ctx, 1, lambda batch: None)
    try:
        task.start()
        task.add_split(plan.id, ParquetSplit(path, (5,)))
        task.no_more_splits(plan.id)
        with pytest.raises(ExecutionError, match=r"t\.parquet names row group 5; the file has 3 row group\(s\)"):
            task.wait(60)
    finally:
        query_ctx.shutdown()


def test_remote_split_destinations_are_not_negative():
    with pytest.raises(SerializationError, match="a destination is 0 or more, got -2"):
        split_from_json(split_to_json(RemoteSplit("task-1", -2)))
