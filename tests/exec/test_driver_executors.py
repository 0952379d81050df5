"""A Session runs its next query on the driver threads of its last finished one (gpu_engine.exec.driver_executors)."""

from __future__ import annotations

import os
import threading

import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.errors import ExecutionError
from gpu_engine.exec.driver_executors import DRIVER_THREAD_PREFIX, DriverExecutors, working_driver_threads

QUERY = "SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k"


def _pool_names() -> set[str]:
    """Return the pool prefixes of the driver threads alive now."""
    return {t.name.rsplit("_", 1)[0] for t in threading.enumerate() if t.name.startswith(DRIVER_THREAD_PREFIX)}


def _session() -> Session:
    session = Session(device="cpu", drivers=2, batch_rows=2)
    session.register("t", pa.table({"k": [1, 2, 1, 3, 2, 1], "v": [1, 2, 3, 4, 5, 6]}), split_rows=2)
    return session


def test_the_next_query_runs_on_the_threads_of_the_last_one():
    session = _session()
    expected = session.sql(QUERY)
    pools = _pool_names()  # the finished query's pool is kept, idle (with any an earlier test's sessions left)
    assert working_driver_threads() == []  # idle threads are no query's
    for _ in range(3):
        assert session.sql(QUERY).equals(expected)
    assert _pool_names() == pools  # no new pool: kept threads ran every query
    assert expected.to_pydict() == {"k": [1, 2, 3], "s": [10, 7, 4]}


def test_a_new_session_runs_on_the_threads_an_earlier_session_s_query_left():
    """The kept pools are the process's: a new Session starts no threads of its own (a thread start waits for
    the new thread to run: milliseconds each on a loaded machine, four a query)."""
    first = _session()
    expected = first.sql(QUERY)
    pools = _pool_names()
    del first
    for _ in range(2):
        assert _session().sql(QUERY).equals(expected)
    assert _pool_names() == pools
    assert working_driver_threads() == []


def test_a_failed_query_joins_its_threads_and_the_session_keeps_working():
    session = _session()
    session.sql(QUERY)
    kept = _pool_names()
    with pytest.raises(ExecutionError, match="[Oo]verflow|out of range"):
        session.sql("SELECT CAST(v + 9223372036854775807 AS BIGINT) AS x FROM t")
    assert working_driver_threads() == []
    assert _pool_names() <= kept  # the failed query's pool (the kept one, taken) was shut down, not kept
    assert session.sql(QUERY).to_pydict() == {"k": [1, 2, 3], "s": [10, 7, 4]}


def test_queries_on_several_threads_each_get_a_pool():
    session = _session()
    expected = session.sql(QUERY)
    results, errors = [], []

    def run():
        try:
            for _ in range(4):
                results.append(session.sql(QUERY))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 16 and all(r.equals(expected) for r in results)
    assert working_driver_threads() == []


def test_at_most_keep_pools_are_kept_per_width():
    executors = DriverExecutors(keep=1)
    first, second = executors.take(2), executors.take(2)
    assert first is not second
    executors.give_back(first, 2, finished=True)
    executors.give_back(second, 2, finished=True)  # one is kept already: shut down
    assert executors.take(2) is first and executors.take(2) is not second
    executors.give_back(first, 2, finished=False)  # a failed query's pool is never kept
    assert executors.take(2) is not first
    executors.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_queries_on_threads_of_its_own():
    """The kept pools' threads stay in the parent: a child must not queue drivers on them (it would wait forever)."""
    session = _session()
    session.sql(QUERY)  # a pool is kept, idle
    pid = os.fork()
    if pid == 0:  # the child: answer within the timeout, or fail
        code = 1
        try:
            code = 0 if session.sql(QUERY, timeout=20).to_pydict() == {"k": [1, 2, 3], "s": [10, 7, 4]} else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
