"""Runtime join-key filters (gpu_engine.exec.dynamic_filters): what they skip and drop, where they must not apply.

The probe side is a crafted Parquet file of 12 row groups of 40 rows, sorted
on its integer key (every 7th key NULL), so the build side's few keys fall in
two row groups and the counts of row groups skipped and rows dropped are
known exactly. Every result is compared with DuckDB over the same data.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator

GROUPS, GROUP_ROWS = 12, 40
#: Build keys: two in row group 1, one in row group 7, one past the file's keys; plus a NULL key.
DIM_KEYS = [44, 50, 290, 5000, None]
#: Rows of the two row groups read that the filter drops: all but the three matching ones.
DROPPED = 2 * GROUP_ROWS - 3


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Write the probe file ``fact`` (sorted keys, NULLs, strings) and the build file ``dim``."""
    folder = tmp_path_factory.mktemp("dynamic_filters")
    rows = GROUPS * GROUP_ROWS
    keys = [None if k % 7 == 0 else k for k in range(rows)]
    fact = pa.table({
        "k": pa.array(keys, pa.int64()),
        "s": pa.array([None if k % 11 == 0 else f"w{k % 40:02d}" for k in range(rows)]),
        "v": pa.array([k * 3 for k in range(rows)], pa.int64()),
    })
    dim = pa.table({
        "dk": pa.array(DIM_KEYS, pa.int64()),
        "ds": pa.array(["w04", "w10", None, "zz", "w30"]),
        "tag": pa.array(["a", "a", "b", "a", "b"]),
    })
    pq.write_table(fact, folder / "fact.parquet", row_group_size=GROUP_ROWS)
    pq.write_table(dim, folder / "dim.parquet")
    return {"fact": str(folder / "fact.parquet"), "dim": str(folder / "dim.parquet")}


@pytest.fixture(scope="module")
def reference(files):
    connection = duckdb.connect()
    for name, path in files.items():
        connection.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
    return connection


def _session(device_name, files, drivers=1, batch_rows=1 << 16, **config) -> Session:
    """Return a Session over ``files``; on cuda-sim and cuda its scans decode fixed-width columns on the device (the
    GPU's path: the filters must drop rows there too)."""
    config.setdefault("parquet_reader", "auto" if device_name == "cpu" else "device")  # (conftest's parquet_reader)
    session = Session(device=device_name, drivers=drivers, batch_rows=batch_rows, **config)
    for name, path in files.items():
        session.register(name, path, split_rows=3 * GROUP_ROWS)  # four splits of three row groups
    return session


def _scan_counts(session: Session) -> tuple[int, int]:
    """Return (row groups skipped, rows dropped) by the dynamic filters over every TableScan of the last query."""
    skipped = dropped = 0
    for pipeline in session.last_stats().pipelines:
        for stats in pipeline.operators:
            if stats.operator_type == "TableScan":
                skipped += stats.runtime.get("dynamic_filter_row_groups_skipped", 0)
                dropped += stats.runtime.get("dynamic_filter_rows_dropped", 0)
    return skipped, dropped


def _plan(session, join_type, left_key="k", right_key="dk", output=None, probe=None, build_filter=None):
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(session.catalog, id_generator=ids).table_scan("dim")
    if build_filter:
        build = build.filter(build_filter)
    side = PlanBuilder(session.catalog, id_generator=ids).table_scan("fact")
    if probe is not None:
        side = probe(side, ids, session.catalog)
    if output is None:
        output = ["k", "s", "v", "tag"] if join_type in ("inner", "left", "right", "full") else \
            ["dk", "tag"] if join_type in ("right_semi", "right_anti") else ["k", "s", "v"]
    return side.hash_join([left_key], [right_key], build, output, join_type).plan()


@pytest.mark.parametrize("drivers, prefetch", [(1, 0), (2, 2)])
@pytest.mark.parametrize("batch_rows", [64, 1 << 16])
def test_inner_join_skips_row_groups_and_drops_rows(device_name, files, reference, drivers, prefetch, batch_rows):
    """The build keys {44, 50, 290} lie in row groups 1 and 7: ten of twelve are skipped, and of the 80 rows
    read only the three matching ones are kept (the NULL build key and 5000 match nothing). Exact counts with
    two drivers decoding two pieces ahead: no probe-side split is read before the build side is done."""
    session = _session(device_name, files, drivers, batch_rows, scan_prefetch_depth=prefetch)
    result = session.execute(_plan(session, "inner"))
    assert_same_rows(result, duckdb_table(reference, "SELECT k, s, v, tag FROM fact JOIN dim ON k = dk"))
    assert _scan_counts(session) == (10, DROPPED)
    probe = session.explain(_plan(session, "inner"), analyze=True)
    assert "dynamic_filter_row_groups_skipped=10" in probe and f"dynamic_filter_rows_dropped={DROPPED}" in probe


@pytest.mark.parametrize("join_type, counts", [
    ("left_semi", (10, DROPPED)),
    ("right_semi", (10, DROPPED)),
    ("right_anti", (10, DROPPED)),
    ("right", (10, DROPPED)),
])
def test_join_types_that_drop_unmatched_probe_rows_filter(device_name, files, reference, join_type, counts):
    session = _session(device_name, files, drivers=2, batch_rows=64)
    result = session.execute(_plan(session, join_type))
    sql = {
        "left_semi": "SELECT k, s, v FROM fact WHERE EXISTS (SELECT 1 FROM dim WHERE dk = k)",
        "right_semi": "SELECT dk, tag FROM dim WHERE EXISTS (SELECT 1 FROM fact WHERE dk = k)",
        "right_anti": "SELECT dk, tag FROM dim WHERE NOT EXISTS (SELECT 1 FROM fact WHERE dk = k)",
        "right": "SELECT k, s, v, tag FROM fact RIGHT JOIN dim ON k = dk",
    }[join_type]
    assert_same_rows(result, duckdb_table(reference, sql))
    assert _scan_counts(session) == counts


@pytest.mark.parametrize("join_type", ["left", "full", "anti", "null_aware_anti"])
def test_joins_that_output_unmatched_probe_rows_do_not_filter(device_name, files, reference, join_type):
    session = _session(device_name, files, drivers=2, batch_rows=64,
                       parquet_reader="auto")  # no filter: the device default (cuda-sim: host decoder)
    result = session.execute(_plan(session, join_type))
    sql = {
        "left": "SELECT k, s, v, tag FROM fact LEFT JOIN dim ON k = dk",
        "full": "SELECT k, s, v, tag FROM fact FULL JOIN dim ON k = dk",
        "anti": "SELECT k, s, v FROM fact WHERE NOT EXISTS (SELECT 1 FROM dim WHERE dk = k)",
        "null_aware_anti": "SELECT k, s, v FROM fact WHERE k NOT IN (SELECT dk FROM dim)",
    }[join_type]
    assert_same_rows(result, duckdb_table(reference, sql))
    assert _scan_counts(session) == (0, 0)


def test_filter_follows_renames_and_filters_and_earlier_left_joins(device_name, files, reference):
    """fact -> rename k to key -> filter -> LEFT join (probe columns unchanged) -> inner join on key: filtered."""
    def probe(side, ids, catalog):
        other = PlanBuilder(catalog, id_generator=ids).table_scan("dim").project(["dk AS ok", "ds AS os"])
        return (side.project(["k AS key", "s", "v"]).filter("v >= 0")
                .hash_join(["s"], ["os"], other, ["key", "s", "v", "ok"], "left"))

    session = _session(device_name, files, drivers=2, batch_rows=64)
    result = session.execute(_plan(session, "inner", left_key="key", output=["key", "s", "v", "ok", "tag"],
                                   probe=probe))
    expected = duckdb_table(reference, "SELECT key, f.s, f.v, ok, tag FROM (SELECT k AS key, s, v FROM fact "
                                       "WHERE v >= 0) f LEFT JOIN (SELECT dk AS ok, ds AS os FROM dim) o ON f.s = os "
                                       "JOIN dim ON key = dk")
    assert_same_rows(result, expected)
    assert _scan_counts(session) == (10, DROPPED)


def test_filter_reaches_the_scans_of_union_all_branches(device_name, files, reference):
    """fact UNION ALL fact (one branch renamed and filtered, under a second exchange) -> inner join: each branch's
    scan runs in a pipeline of its own, waits for the build side and skips and drops as a probe's scan would."""
    def probe(side, ids, catalog):
        other = (PlanBuilder(catalog, id_generator=ids).table_scan("fact").filter("v >= 0")
                 .project(["k AS key", "s", "v"]).local_partition(["key"]))
        return side.project(["k AS key", "s", "v"]).union_all(other)

    session = _session(device_name, files, drivers=2, batch_rows=64)
    result = session.execute(_plan(session, "inner", left_key="key", output=["key", "v", "tag"], probe=probe))
    expected = duckdb_table(reference, "SELECT key, v, tag FROM (SELECT k AS key, v FROM fact UNION ALL "
                                       "SELECT k, v FROM fact WHERE v >= 0) f JOIN dim ON key = dk")
    assert_same_rows(result, expected)
    assert _scan_counts(session) == (2 * 10, 2 * DROPPED)


@pytest.mark.parametrize("step", ["computed", "cast", "after_full_join"])
def test_computed_cast_or_nulled_keys_do_not_filter(device_name, files, reference, step):
    """A key computed from the scan column, cast, or behind a join that makes probe columns NULL gets no filter."""
    def probe(side, ids, catalog):
        if step == "computed":
            return side.project(["k + 0 AS key", "s", "v"])
        if step == "cast":
            return side.project(["CAST(k AS INTEGER) AS key", "s", "v"])
        other = PlanBuilder(catalog, id_generator=ids).table_scan("dim").project(["ds AS os"])
        return side.project(["k AS key", "s", "v"]).hash_join(["s"], ["os"], other, ["key", "s", "v"], "full")

    session = _session(device_name, files, drivers=1, batch_rows=64,
                       parquet_reader="auto")  # no filter: the device default (cuda-sim: host decoder)
    result = session.execute(_plan(session, "inner", left_key="key", output=["key", "v", "tag"], probe=probe))
    source = {
        "computed": "SELECT k + 0 AS key, v FROM fact",
        "cast": "SELECT CAST(k AS INTEGER) AS key, v FROM fact",
        "after_full_join": "SELECT k AS key, v FROM fact FULL JOIN (SELECT ds AS os FROM dim) o ON s = os",
    }[step]
    expected = duckdb_table(reference, f"SELECT key, v, tag FROM ({source}) f JOIN dim ON key = dk")
    assert_same_rows(result, expected)
    assert _scan_counts(session) == (0, 0)


def test_string_keys_and_null_keys_filter_exactly(device_name, files, reference):
    """String keys {w04, w10, w30, zz} (a NULL build key matches nothing): NULL probe strings are dropped too."""
    session = _session(device_name, files, drivers=2, batch_rows=64)
    result = session.execute(_plan(session, "inner", left_key="s", right_key="ds", output=["k", "s", "tag"]))
    assert_same_rows(result, duckdb_table(reference, "SELECT k, s, tag FROM fact JOIN dim ON s = ds"))
    matches = sum(1 for k in range(GROUPS * GROUP_ROWS) if k % 11 and k % 40 in (4, 10, 30))
    assert _scan_counts(session) == (0, GROUPS * GROUP_ROWS - matches)  # every row group holds w04..w39


def test_an_empty_build_side_filters_everything(device_name, files, reference):
    session = _session(device_name, files, drivers=1, batch_rows=64)
    result = session.execute(_plan(session, "left_semi", build_filter="tag = 'nothing'"))
    assert result.num_rows == 0


def test_sql_queries_match_duckdb(device_name, files, reference):
    """Through Session.sql: a selective dimension filter, a semi join (IN) and an aggregation over the join."""
    session = _session(device_name, files, drivers=2, batch_rows=64)
    for sql in ("SELECT tag, count(*) AS n, sum(v) AS total FROM fact JOIN dim ON k = dk WHERE tag = 'a' GROUP BY tag",
                "SELECT k, v FROM fact WHERE k IN (SELECT dk FROM dim WHERE tag = 'b')",
                "SELECT s, count(*) AS n FROM fact JOIN dim ON s = ds GROUP BY s"):
        assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


#: Launches a filtered, device-decoded piece adds per device column: the gather of the rows kept (values, validity).
GATHERS_PER_COLUMN = 2


def test_filters_add_no_per_batch_device_work(device_name, files, parquet_reader):
    """The scan filters on the host before its batches reach the device, and the build side's one copy of its keys
    does not grow with the probe's batches. Host-decoded pieces: no launches or syncs in the scan. Device-decoded
    pieces (cuda-sim, cuda): the decoder's launches a column and its one status read a piece, plus one gather of the
    rows kept a column, and a gathered batch's read of its strings' offsets; nothing a scan batch. The optimizer
    rules are off: projection pruning leaves the semi join's build scan its string key only, decoded on the host."""
    from gpu_engine.kernels.parquet_device import LAUNCHES_PER_COLUMN

    counts = []
    for batch_rows in (64, 1 << 16):
        session = _session(device_name, files, drivers=1, batch_rows=batch_rows, optimize=False)
        session.execute(_plan(session, "left_semi", left_key="s", right_key="ds"))
        operators = [s for stats in session.last_stats().operator_stats_by_node().values() for s in stats]
        scans = [s for s in operators if s.operator_type == "TableScan"]
        (build,) = [s for s in operators if s.operator_type == "HashBuild"]
        assert [s.runtime.get("dynamic_filter_rows_dropped", 0) > 0 for s in scans].count(True) == 1
        decoded = [(s.runtime.get("device_decoded_columns", 0), s.runtime.get("device_decoded_pieces", 0))
                   for s in scans]
        assert all(columns for columns, _ in decoded) == (parquet_reader == "device")
        bounds = [((LAUNCHES_PER_COLUMN + GATHERS_PER_COLUMN) * columns, pieces + s.runtime.get("gathered_batches", 0))
                  for s, (columns, pieces) in zip(scans, decoded)]
        assert all(s.kernel_launches <= launches and s.host_syncs <= syncs for s, (launches, syncs) in
                   zip(scans, bounds)), ([(s.kernel_launches, s.host_syncs) for s in scans], bounds)
        counts.append((build.kernel_launches, build.host_syncs))
    assert counts[0] == counts[1]


def test_a_filter_that_drops_few_rows_stops_testing_rows(device_name, files, reference, monkeypatch, parquet_reader):
    """Build keys covering all but three of the probe's values, one in the first split: after it (120 rows, one
    dropped: under a tenth) the scan tests no more rows, and the other two reach the probe; the result is the same."""
    import gpu_engine.operators.table_scan as table_scan

    monkeypatch.setattr(table_scan, "ADAPTIVE_FILTER_ROWS", GROUP_ROWS)
    most = pa.table({"mv": pa.array([3 * k for k in range(GROUPS * GROUP_ROWS) if k not in (1, 200, 400)], pa.int64())})
    session = Session(device=device_name, drivers=1, batch_rows=64, scan_prefetch_depth=0,
                      parquet_reader=parquet_reader)
    session.register("fact", files["fact"], split_rows=3 * GROUP_ROWS)
    session.register("most", most)
    reference.register("most", most)
    sql = "SELECT k, v FROM fact WHERE v IN (SELECT mv FROM most)"
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
    assert _scan_counts(session) == (0, 1)


def test_key_filter_tests_exactly_at_the_edges():
    """Flags (dense keys), a sorted set (sparse keys) and a range (no set) agree with plain membership, at int64's
    extremes, for dates against row-group statistics, and for dictionary-encoded strings with NULLs."""
    import datetime

    import numpy as np

    from gpu_engine.device import get_device
    from gpu_engine.columnar.column import Column
    from gpu_engine.exec.dynamic_filters import JoinKeyFilter

    device = get_device("cpu")
    lowest, highest = -2**63, 2**63 - 1
    probe = pa.array([lowest, -7, -6, 0, 5, 6, 7, 10**12, highest, None], pa.int64())
    for keys in ([-6, 5, 6, None], [-6, 5, 10**12], [lowest, highest]):
        key_filter = JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array(keys, pa.int64()), device), "k", "int")
        expected = [value is not None and value in keys for value in probe.to_pylist()]
        assert key_filter.mask(probe).tolist() == expected, key_filter.describe()
    for low, high in ((-6, 10**12), (lowest, highest), (lowest, -7), (7, highest)):  # the range alone
        expected = [value is not None and low <= value <= high for value in probe.to_pylist()]
        assert JoinKeyFilter("k", "int", low, high, None).mask(probe).tolist() == expected, (low, high)
    dense = JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array([3, 9], pa.int64()), device), "k", "int")
    assert dense.is_exact and not dense.may_match(4, 8) and dense.may_match(4, 9) and not dense.may_match(10, 20)
    sparse = JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array([0, 10**10]), device), "k", "int")
    assert sparse.is_exact and not sparse.may_match(1, 10**10 - 1) and sparse.may_match(-5, 0)
    day = datetime.date(1995, 3, 15)
    dates = JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array([day], pa.date32()), device), "d", "int")
    assert dates.may_match(day, day) and not dates.may_match(day + datetime.timedelta(days=1), datetime.date(2000, 1, 1))
    assert dates.mask(pa.array([day, None, datetime.date(1995, 3, 16)], pa.date32())).tolist() == [True, False, False]
    words = JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array(["b", "d", None]), device), "s", "string")
    probe_words = pa.array(["a", "b", None, "d", "e", "b"]).dictionary_encode()
    assert words.mask(probe_words).tolist() == [False, True, False, True, False, True]
    assert not words.may_match("bb", "cz") and words.may_match("c", "d") and words.may_match(1, 2)  # no conclusion


def test_row_group_test_reads_the_bit_table_exactly():
    """A row group's [min, max] may match exactly when some build key lies in it: random keys and ranges (fixed
    seed) over tables of one byte to many 512-byte blocks."""
    import numpy as np

    from gpu_engine.columnar.column import Column
    from gpu_engine.device import get_device
    from gpu_engine.exec.dynamic_filters import JoinKeyFilter

    device = get_device("cpu")
    rng = np.random.default_rng(3)
    for span in (5, 100, 40_000, 300_000):
        for _ in range(10):
            keys = np.unique(rng.integers(0, span, int(rng.integers(1, 30)))) + int(rng.integers(-10**6, 10**6))
            key_filter = JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array(keys), device), "k", "int")
            for _ in range(20):
                low = int(rng.integers(keys.min() - 50, keys.max() + 50))
                high = low + int(rng.integers(0, span))
                assert key_filter.may_match(low, high) == bool(((keys >= low) & (keys <= high)).any()), (keys, low, high)


def test_keep_into_tests_arrow_buffers_exactly():
    """The compiled test over Arrow's own buffers (every integer width, dates, NULLs, sliced arrays whose
    validity bitmap starts mid-byte) keeps exactly the rows :meth:`JoinKeyFilter.mask` keeps, for a bit table, a
    Bloom table, a range, an empty build side and strings; after an earlier filter it tests only the rows left,
    and each call says how many rows it dropped."""
    import datetime

    import numpy as np

    from gpu_engine.columnar.column import Column
    from gpu_engine.device import get_device
    from gpu_engine.exec.dynamic_filters import JoinKeyFilter

    device = get_device("cpu")
    rng = np.random.default_rng(5)
    values = [None if k % 6 == 0 else int(v) for k, v in enumerate(rng.integers(-50, 120, 203))]
    filters = [JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array(keys, pa.int64()), device), "k", "int")
               for keys in ([3, 7, 8, 60, 100, None], [0, 10**10, 5, -40])]  # bit table, Bloom table
    filters += [JoinKeyFilter("k", "int", -10, 30, None), JoinKeyFilter("k", "int", None, None, None)]
    for dtype in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint32(), pa.date32()):
        typed = [v if v is None or not pa.types.is_unsigned_integer(dtype) else abs(v) for v in values]
        if pa.types.is_date32(dtype):
            typed = [None if v is None else datetime.date(1970, 1, 1) + datetime.timedelta(days=v) for v in typed]
        for array in (pa.array(typed, dtype), pa.array(typed, dtype).slice(13, 150)):
            for key_filter in filters:
                expected = key_filter.mask(array)
                keep = np.empty(len(array), dtype=np.bool_)
                dropped = key_filter.keep_into(array, keep, True)
                assert keep.tolist() == expected.tolist() and dropped == len(array) - expected.sum(), dtype
                earlier = rng.random(len(array)) < 0.5
                keep = earlier.copy()
                dropped = key_filter.keep_into(array, keep, False)
                assert keep.tolist() == (earlier & expected).tolist() and dropped == (earlier & ~expected).sum()
    words = JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array(["b", "d", None]), device), "s", "string")
    keep = np.array([True, True, False, True, True])
    assert words.keep_into(pa.array(["a", "b", "b", None, "d"]), keep, False) == 2
    assert keep.tolist() == [False, True, False, False, True]


def test_a_host_batch_whose_filter_keeps_few_rows_is_cut_before_conversion(files, reference, monkeypatch):
    """Of the 80 probe rows read the filter keeps 3: on the host only those 3 are converted to the engine's layout
    (a gather map over the whole batch converted all 80, which cost TPC-DS q7 what its filters saved)."""
    from gpu_engine.columnar.batch import Batch

    converted = []
    from_arrow = Batch.from_arrow.__func__

    def counting(cls, data, device):
        if "v" in data.schema.names:  # the probe side's (fact's) batches
            converted.append(data.num_rows)
        return from_arrow(cls, data, device)

    monkeypatch.setattr(Batch, "from_arrow", classmethod(counting))
    session = _session("cpu", files)
    result = session.execute(_plan(session, "inner"))
    assert_same_rows(result, duckdb_table(reference, "SELECT k, s, v, tag FROM fact JOIN dim ON k = dk"))
    assert _scan_counts(session) == (10, DROPPED) and sum(converted) == 3


def test_cut_record_batches_cuts_only_sparse_selections():
    import numpy as np

    from gpu_engine.connectors.runtime_filters import cut_record_batches

    batches = [pa.record_batch([pa.array(range(n))], names=["x"]) for n in (10, 10, 10, 10)]
    selections = [None, np.array([1, 2, 3, 4, 5, 6], np.int32), np.array([7], np.int32), np.array([], np.int32)]
    kept, left = cut_record_batches(batches, selections, 0.5)
    assert [b.column(0).to_pylist() for b in kept] == [list(range(10)), list(range(10)), [7]]  # the empty one goes
    assert [None if s is None else s.tolist() for s in left] == [None, [1, 2, 3, 4, 5, 6], None]
    kept, left = cut_record_batches(batches, selections, 1.0)
    assert [b.num_rows for b in kept] == [10, 6, 1] and left == [None, None, None]


@pytest.mark.parametrize("drivers", [1, 2])
def test_rows_kept_by_a_filter_are_gathered_into_few_batches(device_name, files, reference, drivers):
    """Build keys spread over every row group (no row group is skipped) keep a few rows of each record batch:
    a scan hands on at most ceil(kept / batch_rows) batches a driver, not one a record batch or piece (each
    batch costs every operator above it its per-batch launches and syncs). Same rows as DuckDB."""
    import math

    keys = list(range(3, GROUPS * GROUP_ROWS, 17))  # 29 keys, a few in each of the 12 row groups
    batch_rows = 64  # pieces of two row groups: eight pieces over four splits, ~4 rows kept of each
    session = _session(device_name, files, drivers, batch_rows)
    session.register("dim", pa.table({"dk": pa.array(keys, pa.int64()), "ds": pa.array(["x"] * len(keys)),
                                      "tag": pa.array(["t"] * len(keys))}))
    plan = _plan(session, "inner")
    result = session.execute(plan)
    sql = f"SELECT k, s, v, 't' AS tag FROM fact WHERE k IN ({', '.join(map(str, keys))})"
    assert_same_rows(result, duckdb_table(reference, sql))
    kept = result.num_rows
    scans = [s for p in session.last_stats().pipelines for s in p.operators
             if s.operator_type == "TableScan" and s.runtime.get("dynamic_filter_rows_dropped")]
    assert sum(s.runtime["dynamic_filter_rows_dropped"] for s in scans) == GROUPS * GROUP_ROWS - kept
    batches = sum(s.output_batches for s in scans)
    assert sum(s.output_rows for s in scans) == kept
    assert 0 < batches <= drivers * math.ceil(kept / batch_rows), (batches, kept)


def test_a_string_key_set_is_built_once_per_filter(device_name, monkeypatch):
    """A string filter hashes its build side's strings once, on its first probe batch, and tests every later
    batch against that table (``pc.is_in`` rebuilt Arrow's hash set of the whole build side each batch); it
    keeps exactly the rows whose key is a build string (no false positive: a hash is confirmed byte by byte),
    for ``string`` and ``large_string`` columns, sliced ones, NULLs, empty strings and strings Arrow stores
    with shared prefixes, and a dictionary's values."""
    import numpy as np
    import pyarrow.compute as pc

    import gpu_engine.exec.dynamic_filters as module
    from gpu_engine.columnar.column import Column
    from gpu_engine.device import get_device

    builds, arrow_sets = [], []
    build_table = getattr(module, "_string_table_insert", None)
    monkeypatch.setattr(module, "_string_table_insert", lambda *args: builds.append(1) or build_table(*args),
                        raising=False)
    is_in = pc.is_in
    monkeypatch.setattr(pc, "is_in", lambda *args, **kwargs: arrow_sets.append(1) or is_in(*args, **kwargs))
    device = get_device(device_name)
    keys = ["", "ab", "abc", "b\u00e9", "zz", "ab", None]
    key_filter = module.JoinKeyFilter.of_build_keys(device, Column.from_arrow(pa.array(keys), device), "s", "string")
    words = ["", "a", "ab", "abc", "abcd", "b\u00e9", "b\u00e8", "zz", "zzz", None]
    batches = [pa.array(words), pa.array(words, pa.large_string()).slice(3, 6), pa.array(words).slice(1, 7),
               pa.array(words[::-1]).dictionary_encode(), pa.array([], pa.string())]
    for batch in batches:
        keep = np.empty(len(batch), dtype=np.bool_)
        key_filter.keep_into(batch, keep, True)
        assert keep.tolist() == [value in set(keys) - {None} for value in batch.to_pylist()], batch
    assert (len(builds), len(arrow_sets)) == (1, 0)
