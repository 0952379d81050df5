"""Session(...) refuses bad settings and driver counts up front; explain(analyze=True) is safe from many threads.

Before issue 13: ``batch_rows=0`` or ``query_memory_limit_bytes="abc"`` failed
only at execute, ``batch_rowz`` gave a bare dataclass error, ``drivers=0``
was clamped to 1 silently, and ``explain(plan, analyze=True)`` on several
threads at once showed another query's plan (it read the Session's last Task).
"""

from __future__ import annotations

import threading

import duckdb
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.plans import PlanBuilder


@pytest.mark.parametrize("settings, message", [
    ({"batch_rows": 0}, "batch_rows must be positive"),
    ({"batch_rows": 2.5}, "batch_rows must be an integer or None, got 2.5"),
    ({"query_memory_limit_bytes": "abc"}, "query_memory_limit_bytes must be an integer or None, got 'abc'"),
    ({"driver_time_slice_seconds": -1}, "driver_time_slice_seconds must be positive"),
    ({"scan_prefetch_depth": -2}, "scan_prefetch_depth must be 0 or more"),
    ({"shuffle_compression": "gzip"}, "shuffle_compression must be one of None, 'lz4', 'zstd', got 'gzip'"),
    ({"parquet_reader": "fast"}, "parquet_reader must be one of 'auto', 'pyarrow', 'cudf'"),
    ({"fuse": "yes"}, "fuse must be one of True, False"),
    ({"partial_aggregation_max_groups": True}, "must be an integer, got True"),
])
def test_bad_setting_values_are_refused_at_session(settings, message):
    with pytest.raises(ValueError, match=message):
        Session(device="cpu", **settings)


def test_unknown_setting_names_the_closest_and_lists_the_valid_ones():
    with pytest.raises(TypeError, match=r"unknown setting 'batch_rowz'; did you mean 'batch_rows'\? valid settings: "
                                        r"batch_rows, partial_aggregation_max_groups, .*, fuse"):
        Session(device="cpu", batch_rowz=10)


@pytest.mark.parametrize("drivers", [0, -3, 1.5, True, "2"])
def test_bad_driver_counts_are_refused(drivers):
    with pytest.raises(ValueError, match="drivers must be a positive integer"):
        Session(device="cpu", drivers=drivers)


def test_good_settings_are_kept():
    session = Session(device="cpu", drivers=3, batch_rows=100, driver_time_slice_seconds=1, shuffle_compression="lz4")
    assert (session.drivers, session.config.batch_rows, session.config.shuffle_compression) == (3, 100, "lz4")


def test_explain_analyze_from_many_threads_shows_each_callers_own_plan(device_name):
    table = pa.table({"k": pa.array(range(40), pa.int64()), "v": pa.array(range(40), pa.int64())})
    session = Session(device=device_name, drivers=2, batch_rows=8, fuse=False)  # no kernel to generate per constant
    session.register("t", table)
    threads_count = 6 if device_name == "cpu" else 3
    rounds = 2 if device_name == "cpu" else 1
    texts: dict[tuple[int, int], str] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(threads_count)

    def run(number: int) -> None:
        try:
            start.wait()
            for round_number in range(rounds):
                plan = (PlanBuilder(session.catalog).table_scan("t").filter(f"k >= {number * 1000 + round_number}")
                        .aggregation([], ["count(*) AS n"]).plan())
                texts[number, round_number] = session.explain(plan, analyze=True)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    for (number, round_number), text in texts.items():
        assert f"(k >= {number * 1000 + round_number})" in text, text
        others = [f"(k >= {n * 1000 + r})" for n, r in texts if (n, r) != (number, round_number)]
        assert not any(other in text for other in others), text
    assert len(texts) == threads_count * rounds
    # and the Session still runs queries right afterwards
    plan = PlanBuilder(session.catalog).table_scan("t").filter("k >= 5").aggregation([], ["sum(v) AS s"]).plan()
    connection = duckdb.connect()
    connection.register("t", table)
    assert_same_rows(session.execute(plan), duckdb_table(connection, "SELECT sum(v) AS s FROM t WHERE k >= 5"))
