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


# Issue 28 item 9: arguments of the public API are checked where they are passed, with messages naming them.

@pytest.fixture
def small_session():
    session = Session(device="cpu")
    session.register("t", pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}))
    return session


@pytest.mark.parametrize("timeout, error, message", [
    (-5, ValueError, "timeout must be a positive number of seconds"),
    (0, ValueError, "timeout must be a positive number of seconds"),
    (float("nan"), ValueError, "timeout must be a positive number of seconds"),
    ("abc", TypeError, "timeout must be a number of seconds or None, got str 'abc'"),
    (True, TypeError, "timeout must be a number of seconds or None, got bool"),
])
def test_bad_timeouts_are_refused_before_the_query_runs(small_session, timeout, error, message):
    plan = PlanBuilder(small_session.catalog).table_scan("t", ["a"]).plan()
    with pytest.raises(error, match=message):
        small_session.sql("SELECT a FROM t", timeout=timeout)
    with pytest.raises(error, match=message):
        small_session.execute(plan, timeout=timeout)
    assert small_session.last_task is None  # refused before any Task started


@pytest.mark.parametrize("timeout", [None, 30, 2.5, float("inf")])
def test_good_timeouts_run(small_session, timeout):
    assert small_session.sql("SELECT a FROM t", timeout=timeout).num_rows == 3


def test_sql_text_and_plans_of_the_wrong_kind_are_refused(small_session):
    with pytest.raises(TypeError, match="the SQL text must be a string, got int"):
        small_session.sql(3)
    with pytest.raises(TypeError, match="expected a plan .* got str; run SQL text with Session.sql"):
        small_session.execute("SELECT a FROM t")
    with pytest.raises(TypeError, match="expected a plan .* got str"):
        small_session.explain("SELECT a FROM t")


@pytest.mark.parametrize("split_rows", [0, -1, 2.5, "abc", True, float("nan")])
def test_bad_split_rows_are_refused_at_register(split_rows):
    with pytest.raises(ValueError, match=r"table 'x': split_rows must be a positive integer"):
        Session(device="cpu").register("x", pa.table({"a": [1]}), split_rows=split_rows)


def test_a_directory_skips_hidden_and_underscore_files_and_folders_as_pyarrow_dataset_does(tmp_path):
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    good = pa.table({"a": pa.array([1, 2], pa.int64())})
    pq.write_table(good, tmp_path / "part-0.parquet")
    (tmp_path / "nested").mkdir()
    pq.write_table(pa.table({"a": pa.array([3], pa.int64())}), tmp_path / "nested" / "part-1.parquet")
    other = pa.table({"z": ["not", "this", "table"]})  # a different schema: reading it would fail the register
    pq.write_table(other, tmp_path / ".hidden.parquet")
    pq.write_table(other, tmp_path / "_common.parquet")
    for folder in ("_temporary", ".spark-staging", "nested/_tmp"):
        (tmp_path / folder).mkdir(parents=True)
        pq.write_table(other, tmp_path / folder / "part-9.parquet")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    session = Session(device="cpu")
    session.register("d", tmp_path)
    assert sorted(session.sql("SELECT a FROM d")["a"].to_pylist()) == [1, 2, 3]
    assert ds.dataset(tmp_path, format="parquet").to_table().num_rows == 3  # pyarrow.dataset reads the same files


def test_a_json_plan_naming_another_table_is_refused_naming_the_tables(small_session):
    from gpu_engine.errors import PlanError
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json

    small_session.register("u", pa.table({"c": [1.5]}))
    small_session.register("v", pa.table({"a": ["p"], "b": ["q"]}))
    text = plan_to_json(PlanBuilder(small_session.catalog).table_scan("t", ["a", "b"]).filter("a > 1").plan())
    plans = {target: plan_from_json(text.replace('"table_name": "t"', f'"table_name": "{target}"'))
             for target in ("u", "v", "nosuch")}
    with pytest.raises(PlanError, match=r"table 'u' has no column 'a' .*its columns: c"):
        small_session.execute(plans["u"])
    with pytest.raises(PlanError, match=r"column 'a' of table 'v' is string, the plan reads it as int64"):
        small_session.execute(plans["v"])
    with pytest.raises(PlanError, match=r"unknown table 'nosuch'; registered: t, u, v"):
        small_session.explain(plans["nosuch"])


@pytest.mark.parametrize("dialect, error", [("nosuch", ValueError), (3, TypeError)])
def test_an_unknown_dialect_is_refused_by_sql_and_prepare_naming_the_known_ones(small_session, dialect, error):
    with pytest.raises(error, match=r"dialect.*duckdb, spark"):
        small_session.sql("SELECT a FROM t", dialect=dialect)
    with pytest.raises(error, match=r"dialect.*duckdb, spark"):
        small_session.prepare("SELECT a FROM t", dialect=dialect)


def test_a_subquerys_scans_are_checked_up_front_as_the_outer_plans_are(small_session):
    """A hand-built plan's typed subquery (plans.subqueries) is a plan of its own, built maybe for another catalog:
    its scans get the outer scans' check before the decorrelation rule joins them in (an unknown table was an
    error naming no registered table, found after preparing; a missing or retyped column ran)."""
    from gpu_engine.errors import PlanError
    from gpu_engine.plans.expressions import BinaryOp, ColumnRef
    from gpu_engine.plans.subqueries import Exists, InSubquery, ScalarSubquery

    small_session.register("u", pa.table({"k": pa.array([1, 3], pa.int64())}))
    cases = [("w", pa.schema([("k", pa.int64())]), r"unknown table 'w'; registered: t, u"),
             ("u", pa.schema([("k", pa.int64()), ("z", pa.int64())]), r"table 'u' has no column 'z' .*its columns: k"),
             ("u", pa.schema([("k", pa.int32())]), r"column 'k' of table 'u' is int64, the plan reads it as int32")]
    over_t = lambda predicate: PlanBuilder(small_session.catalog).table_scan("t").filter(predicate).plan()  # noqa: E731
    for table, schema, message in cases:
        sub = PlanBuilder({table: schema}).table_scan(table).plan()
        in_a_subquery = PlanBuilder(small_session.catalog).table_scan("u").filter(  # two levels down
            BinaryOp("gt", ScalarSubquery(sub, "k", schema.field("k").type), ColumnRef("k", pa.int64()),
                     pa.bool_())).plan()
        for plan in (over_t(InSubquery(ColumnRef("a", pa.int64()), sub, "k")), over_t(Exists(sub)),
                     over_t(Exists(in_a_subquery))):
            for run in (small_session.execute, small_session.explain):
                with pytest.raises(PlanError, match=message):
                    run(plan)
