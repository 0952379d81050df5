"""A file's version is read once per file and query run (gpu_engine.connectors.file_versions), and a rewrite between
runs is seen.

Each lookup of the per-file-version caches (footer, metadata, chunk layout, memory mapping, read plan) asked
``os.stat`` first: about eight calls for one piece read. Now a driver asks once per file and Task; the next run
asks again, so a file rewritten between two runs of a kept plan is read again, with its new footer and bytes.
"""

from __future__ import annotations

import os
import threading

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.connectors.file_versions import file_version
from gpu_engine.errors import DataSourceError
from gpu_engine.exec.cancel_points import running_task

QUERY = "SELECT k, sum(v) AS s, count(*) AS n, min(name) AS lo FROM t WHERE v > 1 GROUP BY k"


def _write(path, rows: int, offset: int) -> None:
    pq.write_table(pa.table({
        "k": pa.array([i % 3 for i in range(rows)], pa.int64()),
        "v": pa.array([None if i % 5 == 0 else i + offset for i in range(rows)], pa.int64()),
        "name": pa.array([f"n{(i * 7 + offset) % 11}" for i in range(rows)], pa.string()),
    }), path, row_group_size=16)


def _bump_mtime(path) -> None:
    status = os.stat(path)  # a new mtime even where the clock is coarse or the rewrite kept it
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 1_000_000_000))


def _expected(path) -> pa.Table:
    return duckdb_table(duckdb.connect(), QUERY.replace("FROM t", f"FROM '{path}'"))


def test_a_file_rewritten_between_runs_of_one_text_is_read_again(device_name, tmp_path):
    path = tmp_path / "t.parquet"
    _write(path, 40, 0)
    session = Session(device=device_name, drivers=2)
    session.register("t", path)
    assert_same_rows(session.sql(QUERY), _expected(path))
    assert_same_rows(session.sql(QUERY), _expected(path))  # the kept plan, warm caches
    _write(path, 70, 100)  # another size: new footer, row groups and bytes
    _bump_mtime(path)
    assert_same_rows(session.sql(QUERY), _expected(path))
    _write(path, 70, 3)  # the same row count, other values (a same-size rewrite is told by its mtime)
    _bump_mtime(path)
    assert_same_rows(session.sql(QUERY), _expected(path))
    _write(path, 0, 0)  # no rows at all
    _bump_mtime(path)
    assert_same_rows(session.sql(QUERY), _expected(path))


def test_a_driver_asks_the_file_system_once_per_file_and_run(tmp_path, monkeypatch):
    path = tmp_path / "t.parquet"
    _write(path, 200, 0)
    # One driver, whose reads run on one prefetch thread that runs as part of the Task: the driver looks at
    # the file (its footer, to cut the splits) before it queues any read, so no two threads race to the first look.
    session = Session(device="cpu", drivers=1, scan_prefetch_depth=1)
    session.register("t", path)
    session.sql(QUERY)
    asked = []
    real_stat = os.stat

    def counting_stat(target, *args, **kwargs):
        if str(target) == str(path) and threading.current_thread() is not threading.main_thread():  # a driver's,
            # or a scan's prefetch thread's (planning and Session's checks run on the calling thread)
            asked.append(target)
        return real_stat(target, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    for runs in (1, 2):
        assert_same_rows(session.sql(QUERY), _expected(path))
        assert len(asked) == runs  # was 9 a run: footer, read plan, layout, mapping (5 times) each asked


def test_outside_a_task_every_lookup_reads_the_file_system(tmp_path):
    path = tmp_path / "t.parquet"
    _write(path, 10, 0)
    first = file_version(str(path))
    _bump_mtime(path)
    assert file_version(str(path)) == (first[0], first[1] + 1_000_000_000)


def test_inside_a_task_the_first_version_stays_and_the_next_task_sees_the_rewrite(tmp_path):
    class FakeTask:  # what current_task() returns on a driver thread: any object a weak reference can hold
        pass

    path = tmp_path / "t.parquet"
    _write(path, 10, 0)
    first_task, second_task = FakeTask(), FakeTask()
    with running_task(first_task):
        before = file_version(str(path))
        _bump_mtime(path)
        assert file_version(str(path)) == before  # one query reads one version of a file
    with running_task(second_task):
        assert file_version(str(path)) == (before[0], before[1] + 1_000_000_000)


def test_a_file_s_splits_are_cut_once_per_version_and_a_rewrite_is_cut_and_checked_again(tmp_path):
    path = tmp_path / "t.parquet"
    _write(path, 64, 0)  # 4 row groups of 16
    session = Session(device="cpu")
    session.register("t", path, split_rows=32)
    first = session.splits("t")
    assert [s.row_groups for s in first] == [(0, 1), (2, 3)]
    again = session.splits("t")
    assert all(a is b for a, b in zip(first, again))  # kept: the schema checked and row groups walked once
    _write(path, 80, 0)  # 5 row groups: cut again
    _bump_mtime(path)
    assert [s.row_groups for s in session.splits("t")] == [(0, 1), (2, 3), (4,)]
    pq.write_table(pa.table({"k": pa.array(["x"]), "v": pa.array([1]), "name": pa.array(["a"])}), path)
    _bump_mtime(path)  # k is text now: refused on every run, never cut from a kept version
    for _ in range(2):
        with pytest.raises(DataSourceError, match="column 'k' is string, was int64"):
            session.splits("t")
