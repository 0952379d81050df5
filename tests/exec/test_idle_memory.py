"""Memory kept for reuse (the buffer recycler's arrays) is given back once no Task runs, not while one does.

Release is due :data:`IDLE_RELEASE_SECONDS` after the last Task ended; these tests set it to 0 (release as the last
Task ends) or call the due release themselves: nothing waits on the clock.
"""

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.exec import buffer_recycler, idle_memory

from tests.duckdb_reference import duckdb_table_over, rows_mismatch

MIN = buffer_recycler.MIN_BYTES
SQL = "SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k"


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    """Nothing kept and no Task counted as running when a test starts (other tests share the process)."""
    monkeypatch.setattr(buffer_recycler, "_kept", type(buffer_recycler._kept)(list))
    monkeypatch.setattr(buffer_recycler, "_kept_bytes", 0)
    monkeypatch.setattr(idle_memory, "_running", 0)
    monkeypatch.setattr(idle_memory, "IDLE_RELEASE_SECONDS", 0)


def _expected(table: pa.Table) -> pa.Table:
    return duckdb_table_over({"t": table}, SQL)


def test_release_kept_drops_the_largest_buffers_first_down_to_the_bound():
    for size in (MIN, 2 * MIN, 4 * MIN):
        buffer_recycler.give_array(np, np.empty(size, np.uint8))
    assert buffer_recycler.kept_bytes() == 7 * MIN
    assert buffer_recycler.release_kept(3 * MIN) == 4 * MIN
    assert buffer_recycler.kept_bytes() == 3 * MIN
    assert buffer_recycler.release_kept() == 3 * MIN
    assert buffer_recycler.kept_bytes() == 0 and not buffer_recycler._kept


def test_the_last_task_ending_releases_and_an_overlapping_one_does_not():
    buffer_recycler.give_array(np, np.empty(2 * MIN, np.uint8))
    idle_memory.task_started()
    idle_memory.task_started()
    idle_memory.task_ended()  # another Task still runs: its queries may reuse the buffer
    assert buffer_recycler.kept_bytes() == 2 * MIN and idle_memory.running_tasks() == 1
    idle_memory.task_ended()
    assert buffer_recycler.kept_bytes() == idle_memory.IDLE_KEPT_BYTES and idle_memory.running_tasks() == 0


def test_a_query_ending_gives_back_what_was_kept_for_reuse(device_name):
    session = Session(device=device_name, drivers=2)
    table = pa.table({"k": pa.array([1, 2, 1, None], pa.int64()), "v": pa.array([1.5, None, 2.0, 4.0])})
    session.register("t", table)
    buffer_recycler.give_array(np, np.empty(2 * MIN, np.uint8))  # as an earlier query's slot table would be
    assert buffer_recycler.kept_bytes() == 2 * MIN
    assert rows_mismatch(session.sql(SQL), _expected(table)) is None
    assert buffer_recycler.kept_bytes() == idle_memory.IDLE_KEPT_BYTES
    assert idle_memory.running_tasks() == 0


def test_a_release_due_after_a_delay_is_cancelled_by_a_task_starting(monkeypatch):
    monkeypatch.setattr(idle_memory, "IDLE_RELEASE_SECONDS", 3600)  # the waiting thread never gets there here
    buffer_recycler.give_array(np, np.empty(2 * MIN, np.uint8))
    idle_memory.task_started()
    idle_memory.task_ended()
    assert buffer_recycler.kept_bytes() == 2 * MIN  # kept for the next query of a burst
    due = idle_memory._generation
    idle_memory.task_started()  # a query starts before the release is due: the release must not happen
    assert not idle_memory._release_if_idle(due)
    idle_memory.task_ended()
    assert not idle_memory._release_if_idle(due)  # a Task started since: this due time is stale
    assert buffer_recycler.kept_bytes() == 2 * MIN
    assert idle_memory._release_if_idle(idle_memory._generation)
    assert buffer_recycler.kept_bytes() == idle_memory.IDLE_KEPT_BYTES


def test_a_failed_query_counts_its_task_out(device_name):
    session = Session(device=device_name, drivers=2)
    session.register("t", pa.table({"a": pa.array([1, 0, 2], pa.int64())}))
    with pytest.raises(Exception):
        session.sql("SELECT 10 // a FROM t").to_pylist()
    assert idle_memory.running_tasks() == 0


def test_the_release_waits_as_long_as_the_tasks_ran_within_bounds(monkeypatch):
    """A fixed 5 s released a loaded burst's tables between runs longer than the gaps between them (db-bench q10
    under load: 13.6 s runs, 6.5 s gaps), so each run paid their first touch again; the wait is now the busy time,
    at least IDLE_RELEASE_SECONDS and at most IDLE_RELEASE_MAX_SECONDS."""
    monkeypatch.setattr(idle_memory, "IDLE_RELEASE_SECONDS", 5.0)
    assert [idle_memory.idle_release_delay(busy) for busy in (0.1, 5.0, 13.6, 1e6)] == [
        5.0, 5.0, 13.6, idle_memory.IDLE_RELEASE_MAX_SECONDS]
    monkeypatch.setattr(idle_memory, "IDLE_RELEASE_MAX_SECONDS", 0.0)  # the fixed delay of before
    assert idle_memory.idle_release_delay(13.6) == 5.0
    monkeypatch.setattr(idle_memory, "IDLE_RELEASE_SECONDS", 0)  # the Tasks below release as they end
    before = idle_memory.time.monotonic()
    idle_memory.task_started()  # the first Task of a busy period marks its start; one overlapping it does not
    started = idle_memory._busy_since
    idle_memory.task_started()
    assert idle_memory._busy_since == started >= before
    idle_memory.task_ended()
    idle_memory.task_ended()
