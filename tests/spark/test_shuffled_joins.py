"""Shuffled hash joins on Spark: every join type on co-partitioned inputs, against DuckDB.

Crafted tables with duplicate keys, NULL keys and keys on one side only,
shuffled into 4 partitions (so some partitions hold one side only, or
nothing). The null-aware anti join (``NOT IN``) is checked where the shuffle
could break it: a NULL build key or a non-empty build side must be seen by
every partition, not only by the one its key hashes to.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table  # noqa: E402
from gpu_engine.errors import PlanError  # noqa: E402
from gpu_engine.optimizer import optimize_plan  # noqa: E402
from gpu_engine.plans import PlanBuilder  # noqa: E402
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator  # noqa: E402
from gpu_engine.spark import SparkRunner  # noqa: E402
from gpu_engine.spark.broadcast_joins import SWAPPED_JOIN_TYPES, swapped_join  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

PROBE = pa.table({
    "k": pa.array([1, 1, 2, 3, None, 5, 6, 6, 7, None, 9, 10, 11, 12, 2, 3], pa.int64()),
    "v": pa.array(range(16), pa.int64()),
})
BUILD = pa.table({
    "uk": pa.array([1, 2, 2, 4, None, 6, 8, 13, 14, None, 12, 15], pa.int64()),
    "uv": pa.array([100 + i for i in range(12)], pa.int64()),
})
#: Engine join type -> the DuckDB query with the same result (columns in the plan's output order).
JOINS = {
    "inner": ("SELECT k, v, uv FROM t JOIN u ON k = uk", ("k", "v", "uv")),
    "left": ("SELECT k, v, uv FROM t LEFT JOIN u ON k = uk", ("k", "v", "uv")),
    "right": ("SELECT k, v, uk, uv FROM t RIGHT JOIN u ON k = uk", ("k", "v", "uk", "uv")),
    "full": ("SELECT k, v, uk, uv FROM t FULL JOIN u ON k = uk", ("k", "v", "uk", "uv")),
    "left_semi": ("SELECT k, v FROM t WHERE EXISTS (SELECT 1 FROM u WHERE uk = k)", ("k", "v")),
    "anti": ("SELECT k, v FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE uk = k)", ("k", "v")),
    "right_semi": ("SELECT uk, uv FROM u WHERE EXISTS (SELECT 1 FROM t WHERE k = uk)", ("uk", "uv")),
    "right_anti": ("SELECT uk, uv FROM u WHERE NOT EXISTS (SELECT 1 FROM t WHERE k = uk)", ("uk", "uv")),
}  # null_aware_anti: BUILD has NULL keys, so NOT IN is empty; its own test below varies the build side


@pytest.fixture(scope="module")
def join_tables(spark, tmp_path_factory):
    """Return (Spark tables fed through Arrow in 2 partitions each, a DuckDB connection over the same rows)."""
    folder = tmp_path_factory.mktemp("shuffled_joins")
    paths = {"t": folder / "t.parquet", "u": folder / "u.parquet"}
    pq.write_table(PROBE, paths["t"])
    pq.write_table(BUILD, paths["u"])
    tables = {"t": spark.createDataFrame(PROBE).repartition(2), "u": spark.createDataFrame(BUILD).repartition(2)}
    with duckdb_connection(paths) as connection:
        yield tables, connection


def _join_plan(catalog, join_type: str, output, build_filter: str | None = None, filter: str | None = None):
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(catalog, id_generator=ids).table_scan("u")
    if build_filter is not None:
        build = build.filter(build_filter)
    return (PlanBuilder(catalog, id_generator=ids).table_scan("t")
            .hash_join(["k"], ["uk"], build, list(output), join_type=join_type, filter=filter).plan())


@pytest.mark.parametrize("join_type", list(JOINS))
def test_every_join_type_shuffled_matches_duckdb(join_type, spark, join_tables):
    tables, connection = join_tables
    sql, output = JOINS[join_type]
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=4)
    plan = _join_plan(runner.catalog(tables), join_type, output)
    stages = runner.plan_stages(plan, tables, joins="shuffle")
    join_stage = stages[-1]
    assert join_stage.input.kind == "shuffle" and join_stage.build_input.kind == "shuffle"
    assert join_stage.build_input.keys == ("uk",) and join_stage.input.keys == ("k",)
    expected = duckdb_table(connection, sql)
    assert expected.num_rows > 0
    assert_same_rows(runner.collect(plan, tables, joins="shuffle"), expected)
    assert runner.last_join_strategies[plan.id][0] == "shuffle"


@pytest.mark.parametrize("build_filter, where", [
    ("uk IS NULL OR uk = 12", "uk IS NULL OR uk = 12"),   # a NULL build key: no row at all
    ("uk = 12", "uk = 12"),                               # one build key in one partition: NULL probe keys go
    ("uk < 0", "uk < 0"),                                 # an empty build side: every probe row, NULL keys too
], ids=["build-has-null", "one-build-key", "empty-build"])
@pytest.mark.parametrize("strategy", ["shuffle", "broadcast"])
def test_null_aware_anti_join_sees_the_whole_build_side_in_every_partition(build_filter, where, strategy, spark,
                                                                           join_tables):
    tables, connection = join_tables
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=4)
    plan = _join_plan(runner.catalog(tables), "null_aware_anti", ("k", "v"), build_filter=build_filter)
    if strategy == "shuffle":
        assert "(NULL uk and one row per Task to every partition)" in runner.explain(plan, tables, joins="shuffle")
    expected = duckdb_table(connection, f"SELECT k, v FROM t WHERE k NOT IN (SELECT uk FROM u WHERE {where})")
    actual = runner.collect(plan, tables, joins=strategy)
    assert_same_rows(actual, expected)
    assert (actual.num_rows == 0) is (build_filter.startswith("uk IS NULL"))


def test_a_full_join_with_a_filter_and_a_nested_loop_join_shuffle(spark, join_tables):
    tables, connection = join_tables
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=3)
    catalog = runner.catalog(tables)
    plan = _join_plan(catalog, "full", ("k", "v", "uk", "uv"), filter="v + 100 < uv")
    expected = duckdb_table(connection, "SELECT k, v, uk, uv FROM t FULL JOIN u ON k = uk AND v + 100 < uv")
    assert_same_rows(runner.collect(plan, tables), expected)  # a full join is shuffled by default
    assert runner.last_join_strategies[plan.id][0] == "shuffle"
    # No keys: a right nested-loop join's shuffle gathers both sides into one partition.
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(catalog, id_generator=ids).table_scan("u")
    nested = (PlanBuilder(catalog, id_generator=ids).table_scan("t")
              .nested_loop_join(build, ["k", "v", "uk", "uv"], filter="k > uk", join_type="right").plan())
    stages = runner.plan_stages(nested, tables)
    assert stages[-1].input.kind == "gather" and stages[-1].build_input.kind == "gather" and stages[-1].single
    expected = duckdb_table(connection, "SELECT k, v, uk, uv FROM t RIGHT JOIN u ON k > uk")
    assert_same_rows(runner.collect(nested, tables), expected)


@pytest.mark.parametrize("packed, compression", [(True, "lz4"), (True, "zstd"), (True, None), (False, None)],
                         ids=["packed-lz4", "packed-zstd", "packed-uncompressed", "row-shuffles"])
def test_a_shuffled_join_on_each_device(device_name, packed, compression, spark, join_tables):
    """Packed: each shuffle moves (partition id, Arrow IPC bytes) rows; else rows, the join's sides NULL-padded."""
    if device_name == "cuda-sim" and compression in ("zstd", None) and packed:
        pytest.skip("the IPC codec is host code: cuda-sim runs the lz4-packed and the row shuffles, cpu every codec")
    tables, connection = join_tables
    runner = SparkRunner(spark, device=device_name, shuffle_partitions=2, joins="shuffle", packed_shuffles=packed,
                         shuffle_compression=compression)
    sql, output = JOINS["full"]
    plan = _join_plan(runner.catalog(tables), "full", output)
    assert_same_rows(runner.collect(plan, tables), duckdb_table(connection, sql))


def test_an_unknown_shuffle_codec_is_refused_when_the_runner_is_made(spark):
    with pytest.raises(PlanError, match="shuffle_compression 'snappy' is not an Arrow IPC codec"):
        SparkRunner(spark, device="cpu", shuffle_compression="snappy")


@pytest.mark.parametrize("join_type", sorted(SWAPPED_JOIN_TYPES))
def test_a_swapped_join_gives_the_same_rows(join_type, join_tables):
    """Swapping probe and build (inner, right -> left, right semi -> left semi, right anti -> anti) keeps every row."""
    from gpu_engine import Session

    _, connection = join_tables
    sql, output = JOINS[join_type]
    session = Session(device="cpu")
    session.register("t", PROBE)
    session.register("u", BUILD)
    plan = _join_plan(session.catalog, join_type, output, filter="v + uv > 103")
    swapped = swapped_join(plan)
    assert (swapped.probe, swapped.build, swapped.left_keys) == (plan.build, plan.probe, ("uk",))
    assert swapped.join_type == SWAPPED_JOIN_TYPES[join_type] and swapped.output_schema == plan.output_schema
    condition = "k = uk AND v + uv > 103"  # the join's filter reads both sides: it must follow the swap
    expected = duckdb_table(connection, sql.replace("ON k = uk", f"ON {condition}").replace("WHERE k = uk",
                                                                                           f"WHERE {condition}"))
    assert_same_rows(session.execute(swapped), expected)
    assert_same_rows(session.execute(plan), expected)


@pytest.mark.parametrize("join_type", sorted(SWAPPED_JOIN_TYPES))
def test_a_join_whose_probe_side_is_small_broadcasts_it_instead(join_type, spark, tmp_path):
    """The build side is over the threshold, the probe side within it: the sides swap and the probe is broadcast."""
    big = pa.table({"uk": pa.array([i % 40 for i in range(4000)], pa.int64()),
                    "uv": pa.array(range(4000), pa.int64())})
    paths = {"t": tmp_path / "t.parquet", "u": tmp_path / "u.parquet"}
    pq.write_table(PROBE, paths["t"])
    pq.write_table(big, paths["u"])
    tables = {name: spark.read.parquet(str(path)) for name, path in paths.items()}
    sql, output = JOINS[join_type]
    probe_runner = SparkRunner(spark, device="cpu", shuffle_partitions=2)
    plan = _join_plan(probe_runner.catalog(tables), join_type, output)
    sizes = probe_runner.join_strategy(tables)
    optimized = optimize_plan(plan)  # the plan the runner cuts: its probe scan reads the key only (pruned)
    probe, build = sizes.scan_bytes(optimized.probe), sizes.scan_bytes(optimized.build)
    assert probe < build
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=2, broadcast_threshold=(probe + build) // 2)
    stages = runner.plan_stages(plan, tables)
    assert runner.last_join_strategies[plan.id] == ("broadcast", probe)
    assert [stage.output for stage in stages] == ["broadcast", "rows"] and stages[1].input.name == "u"
    with duckdb_connection(paths) as connection:
        expected = duckdb_table(connection, sql)
    assert expected.num_rows > 0
    assert_same_rows(runner.collect(plan, tables), expected)
    pinned = SparkRunner(spark, device="cpu", shuffle_partitions=2, broadcast_threshold=(probe + build) // 2,
                         joins={plan.id: "shuffle"})  # a join named in the overrides is never swapped
    assert [stage.output for stage in pinned.plan_stages(plan, tables)] == ["partition ids", "partition ids", "rows"]
