"""Session.close() / ``with Session(...)``: what a Session holds is let go, later calls raise SessionClosed, a
query running at close is cancelled, and the process-wide driver pools stay for the next Session."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows, duckdb_rows

from gpu_engine import Session
from gpu_engine.errors import SessionClosed, TaskCancelled
from gpu_engine.exec.driver_executors import process_executors
from gpu_engine.plans import PlanBuilder

TABLE = pa.table({"a": pa.array([3, None, 1, 2, 2], pa.int64()), "s": pa.array(["x", "y", None, "x", "z"])})
QUERY = "SELECT s, count(*) AS n, sum(a) AS total FROM t GROUP BY s"


def test_a_closed_session_lets_go_of_what_it_held_and_refuses_queries(device_name):
    with Session(device=device_name, fuse=False) as session:
        session.register("t", TABLE)
        session.register("empty", TABLE.slice(0, 0))
        session.cache("t")
        session.sql("CREATE VIEW v AS SELECT * FROM t WHERE a > 1")
        assert_same_rows(session.sql(QUERY), duckdb_rows(QUERY, t=TABLE))
        assert session.sql("SELECT count(*) AS n FROM empty").column("n").to_pylist() == [0]
        plan = PlanBuilder(session.catalog).table_scan("t").filter("a > 1").plan()
        assert sorted(session.execute(plan).column("a").to_pylist()) == [2, 2, 3]
        prepared = session.prepare("SELECT count(*) AS n FROM v WHERE a > ?")
        assert prepared.execute([2]).column("n").to_pylist() == [1]
        assert len(session.plan_cache) and len(session._prepared) and session.last_task is not None
    assert session.closed
    assert (dict(session.catalog), session.cached_tables(), session._views, len(session.plan_cache),
            len(session._prepared), session.last_task, session.last_plan) == ({}, {}, {}, 0, 0, None, None)
    for call in (lambda: session.sql(QUERY), lambda: session.execute(plan), lambda: prepared.execute([2]),
                 lambda: session.register("t", TABLE), lambda: session.cache("t"), lambda: session.sql_plan(QUERY),
                 lambda: session.explain(plan), lambda: session.prepare(QUERY), lambda: session.table("t")):
        with pytest.raises(SessionClosed, match="this Session is closed"):
            call()
    session.close()  # twice: nothing
    with pytest.raises(SessionClosed):
        with session:
            pass


def test_a_query_running_at_close_is_cancelled_and_the_next_session_answers():
    session = Session(device="cpu")
    session.register("t", TABLE)
    pools = process_executors()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            session.sql("SELECT sum(x) AS s FROM range(1000000000000) r(x)")  # hours: it ends only by cancelling
        except BaseException as error:  # noqa: BLE001 - recorded for the assertion below
            failures.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not session._running and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert session._running, failures
    session.close()
    thread.join(120)
    assert not thread.is_alive() and len(failures) == 1
    assert isinstance(failures[0], (TaskCancelled, SessionClosed)), repr(failures[0])
    assert process_executors() is pools  # the process's pools stay
    with Session(device="cpu") as again:
        again.register("t", TABLE)
        assert_same_rows(again.sql(QUERY), duckdb_rows(QUERY, t=TABLE))
