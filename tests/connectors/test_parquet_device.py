"""The device Parquet decoder (kernels/parquet_device.py) against pyarrow and against the host decoder.

Runs the CUDA kernels (on ``cuda-sim`` without a GPU, on ``cuda`` with one):
every fixed-width physical type, PLAIN and dictionary pages, required and
optional columns with NULLs, Snappy and uncompressed, data pages v1 and v2,
several pages and row groups a chunk, empty and all-NULL chunks. Damaged
files must fail as the host decoder fails, with the same message naming file,
column, row group and page, and never crash; a column costs a fixed number of
launches and one host sync however many pages it has. Files are tiny: the
simulator interprets every thread.
"""

from __future__ import annotations

import dataclasses
import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import parquet_surgery
from bench.device_decode_fuzz import decoder_outcomes, same_outcome
from bench.parquet_fuzz import Recipe, write_file
from gpu_engine.columnar.column import Column
from gpu_engine.connectors.parquet_columns import decodable_columns, read_decoded_columns
from gpu_engine.connectors.parquet_device_columns import read_device_columns
from gpu_engine.errors import DataSourceError
from gpu_engine.exec.device_counters import counts_now
from gpu_engine.kernels.parquet_device import LAUNCHES_PER_COLUMN, _snappy

from tests.conftest import GPU_PRESENT


@pytest.fixture(scope="module")
def cuda_device():
    """Return the device whose kernels are the CUDA twins: ``cuda`` on a GPU machine, else the simulator."""
    from gpu_engine.device import get_device

    return get_device("cuda" if GPU_PRESENT else "cuda-sim")


if GPU_PRESENT:
    pytestmark = pytest.mark.gpu


@pytest.fixture
def keeps_thread_switches():
    """Ask for Python's usual thread switch interval: a test running the engine's other kernels takes it.

    Why: the fused aggregation's kernels take shared arrays too, and numba's simulator allocates a shared
    array without a lock (see kernels/parquet_device.py's _levels): switching threads every 0.1 ms made
    lanes get arrays of their own there, and a query's answer wrong now and then.
    """


@pytest.fixture(autouse=True)
def _short_thread_switches(request):
    """Switch threads often while a test runs: the simulator's block barrier waits for all its threads by polling.

    Why: each simulated thread is a Python thread, and a barrier ends only once the polling thread has
    seen every lane arrive, which under Python's default 5 ms switch interval costs about that much a lane.
    """
    import sys

    if "keeps_thread_switches" in request.fixturenames:
        yield
        return
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(interval)


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)

    def mask(fraction=0.3):
        return rng.random(rows) < fraction

    few = rng.integers(0, 5, rows)
    return pa.table({
        "i32": pa.array(rng.integers(-2**31, 2**31, rows).astype(np.int32)),
        "i32_null": pa.array((few * 1_000_003 - 7).astype(np.int32), mask=mask()),
        "i64": pa.array(few * 10_000_000_019 - 3),
        "i64_null": pa.array(rng.integers(-2**62, 2**62, rows), mask=mask()),
        "f32": pa.array(rng.standard_normal(rows).astype(np.float32), mask=mask()),
        "f64": pa.array(few * 1.5 - 2.25),
        "i16": pa.array((few * 1001 - 5000).astype(np.int16), mask=mask()),
        "day": pa.array((few * 37 + 9000).astype(np.int32), mask=mask()).cast(pa.date32()),
        "price": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**9, 10**9, rows)],
                          pa.decimal128(12, 2), mask=mask()),
        "all_null": pa.array([None] * rows, pa.int64()),
    })


def _expected(path: Path, name: str, device) -> pa.Array:
    """Return pyarrow's read of a column, brought to the engine's layout as any Arrow input is."""
    return Column.from_arrow(pq.read_table(path, columns=[name]).column(name), device).to_arrow(device)


def _write(path: Path, table: pa.Table, compression: str, dictionary: bool, version: str) -> pq.FileMetaData:
    pq.write_table(table, path, compression=compression, use_dictionary=dictionary, data_page_version=version,
                   data_page_size=1, write_batch_size=25, row_group_size=60, store_decimal_as_integer=True)
    return pq.read_metadata(path)


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("compression", ["none", "snappy"])
@pytest.mark.parametrize("dictionary", [False, True])
def test_device_decoder_reads_what_pyarrow_reads(tmp_path, cuda_device, version, compression, dictionary):
    path = tmp_path / "t.parquet"
    table = _table(150, seed=len(version) + len(compression) + dictionary)
    metadata = _write(path, table, compression, dictionary, version)
    assert metadata.num_row_groups == 3 and metadata.row_group(0).num_rows == 60  # pages of 25 rows: 3 a chunk
    columns = decodable_columns(metadata, table.column_names)
    assert set(columns) == set(table.column_names)
    before = counts_now()
    decoded = read_device_columns(str(path), metadata, [0, 1, 2], columns, cuda_device)
    spent = counts_now() - before
    assert set(decoded) == set(columns)
    for name, column in decoded.items():
        assert column.to_arrow(cuda_device).equals(_expected(path, name, cuda_device)), name
    # A fixed number of launches a column, for its three chunks of three or four pages, and one status read for all.
    assert spent.kernel_launches == LAUNCHES_PER_COLUMN * len(columns)
    assert spent.host_syncs == 1
    assert decoded["all_null"].validity is not None and decoded["i64"].validity is None


def test_some_row_groups_and_empty_ones(tmp_path, cuda_device):
    """Row groups read out of order, an empty row group among them, and a piece of one empty row group."""
    path = tmp_path / "t.parquet"
    write_file(Recipe(3, (40, 0, 70), (("int64", True), ("double", False), ("int32", True), ("float", False)),
                      "snappy", True, "2.0", 16), path)
    metadata = pq.read_metadata(path)
    columns = decodable_columns(metadata, metadata.schema.to_arrow_schema().names)
    assert len(columns) == 4
    expected = read_decoded_columns(str(path), metadata, [2, 1, 0], columns)
    decoded = read_device_columns(str(path), metadata, [2, 1, 0], columns, cuda_device)
    for name, column in decoded.items():
        assert column.to_arrow(cuda_device).equals(expected[name].combine_chunks()
                                                   if isinstance(expected[name], pa.ChunkedArray)
                                                   else expected[name]), name
    empty = read_device_columns(str(path), metadata, [1], columns, cuda_device)
    assert set(empty) == set(columns) and all(len(column) == 0 for column in empty.values())


def test_decimals_stored_as_int32_and_timestamps(tmp_path, cuda_device):
    """A DECIMAL(9, 3) stored as INT32 widens to the engine's int64; a timestamp reads as INT64, both with NULLs."""
    rng = np.random.default_rng(9)
    rows = 80
    mask = rng.random(rows) < 0.25
    table = pa.table({
        "small_dec": pa.array([decimal.Decimal(int(v)).scaleb(-3) for v in rng.integers(-10**8, 10**8, rows)],
                              pa.decimal128(9, 3), mask=mask),
        "ts": pa.array(rng.integers(0, 2**40, rows), mask=mask).cast(pa.timestamp("ms")),
    })
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, compression="snappy", data_page_version="2.0", data_page_size=1, write_batch_size=30,
                   store_decimal_as_integer=True)
    metadata = pq.read_metadata(path)
    assert metadata.schema.column(0).physical_type == "INT32"
    columns = decodable_columns(metadata, table.column_names)
    decoded = read_device_columns(str(path), metadata, [0], columns, cuda_device)
    assert set(decoded) == {"small_dec", "ts"} and decoded["small_dec"].data.dtype == np.int64
    for name, column in decoded.items():
        assert column.to_arrow(cuda_device).equals(_expected(path, name, cuda_device)), name


def test_strings_and_other_codecs_are_left_to_the_host(tmp_path, cuda_device):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"s": ["a", "b"] * 50, "x": np.arange(100)}), path, compression="zstd")
    metadata = pq.read_metadata(path)
    assert read_device_columns(str(path), metadata, [0], decodable_columns(metadata, ["s", "x"]), cuda_device) == {}


#: Five of the fuzz test's layouts (both codecs, both page kinds, both page versions, and zstd): the simulator is slow.
FUZZ_LAYOUTS = [__import__("tests.connectors.test_parquet_fuzz", fromlist=["LAYOUTS"]).LAYOUTS[k] for k in (0, 3, 5, 6, 8)]


@pytest.mark.parametrize("recipe", FUZZ_LAYOUTS,
                         ids=lambda recipe: f"{recipe.compression}-{'dict' if recipe.dictionary else 'plain'}-v{recipe.version}")
def test_the_fuzz_layouts_read_as_pyarrow_reads_them(tmp_path, cuda_device, recipe):
    """The hardening issue's undamaged files (every column kind, required and optional, an empty row group, pages of
    16 rows): each column the device decodes equals pyarrow's read; zstd is left to the host."""
    path = tmp_path / "layout.parquet"
    write_file(dataclasses.replace(recipe, row_groups=(20, 0, 33, 7)), path)  # (fewer rows: the simulator is slow)
    metadata = pq.read_metadata(path)
    columns = decodable_columns(metadata, metadata.schema.to_arrow_schema().names)
    decoded = read_device_columns(str(path), metadata, range(metadata.num_row_groups), columns, cuda_device)
    fixed = {name for name, arrow_type in columns.items() if not pa.types.is_large_string(arrow_type)
             and not pa.types.is_dictionary(arrow_type)}
    assert set(decoded) == (set() if recipe.compression == "zstd" else fixed) and len(fixed) == 14
    for name, column in decoded.items():
        assert column.to_arrow(cuda_device).equals(_expected(path, name, cuda_device)), name


@settings(max_examples=15, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.integers(-2**63, 2**63 - 1), st.none()), min_size=1, max_size=150),
       st.sampled_from(["1.0", "2.0"]), st.booleans(), st.sampled_from([64, 4096]), st.sampled_from(["none", "snappy"]))
def test_random_int64_columns(tmp_path_factory, cuda_device, values, version, dictionary, page_size, compression):
    path = tmp_path_factory.mktemp("p") / "r.parquet"
    pq.write_table(pa.table({"v": pa.array(values, pa.int64())}), path, data_page_version=version,
                   use_dictionary=dictionary, data_page_size=page_size, compression=compression)
    decoded = read_device_columns(str(path), pq.read_metadata(path), [0], {"v": pa.int64()}, cuda_device)
    assert decoded["v"].to_arrow(cuda_device).equals(pa.array(values, pa.int64()))


@settings(max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=0, max_size=600), st.integers(1, 20))
def test_snappy_round_trip(data, repeat):
    """The kernels' Snappy (run here as the Python function the simulator runs): pyarrow's blocks, cut ones refused."""
    raw = (data * repeat)[:8000]
    compressed = np.frombuffer(pa.compress(raw, codec="snappy", asbytes=True), np.uint8)
    out = np.zeros(len(raw) + 3, np.uint8)
    assert _snappy(compressed, 0, len(compressed), out, 3, len(raw))
    assert out[3:].tobytes() == raw
    assert not _snappy(compressed, 0, len(compressed), out, 3, len(raw) + 1)  # another declared size
    if len(compressed) > 2:
        assert not _snappy(compressed, 0, len(compressed) - 1, out, 3, len(raw))


# ----------------------------------------------------------------- damaged files
def _assert_same_outcome(path: Path, device) -> list[str]:
    """Assert the device read each column as the host did, or failed with the host's message; return the messages."""
    errors = []
    for name, host, ours in decoder_outcomes(path, device):
        assert same_outcome(host, ours), (name, host, ours)
        if isinstance(ours, str):
            errors.append(ours)
    return errors


def _dictionary_file(path: Path, compression: str) -> None:
    table = pa.table({"id": np.arange(200), "n": pa.array([(i % 7) * 1_000_003 for i in range(200)], pa.int64())})
    pq.write_table(table, path, compression=compression, use_dictionary=True, write_batch_size=50, data_page_size=1)


@pytest.mark.parametrize("compression", ["none", "snappy"])
def test_codes_outside_the_dictionary_fail_as_on_the_host(tmp_path, cuda_device, compression):
    path = tmp_path / "dict.parquet"
    _dictionary_file(path, compression)
    data = bytearray(path.read_bytes())
    dictionary_page = parquet_surgery.pages(data, str(path), 0, 1)[0]
    parquet_surgery.write_int(data, dictionary_page.body_struct.get(1), 3)  # 3 values; the codes reach 6
    path.write_bytes(bytes(data))
    errors = _assert_same_outcome(path, cuda_device)
    assert len(errors) == 1 and "column 'n', row group 0, page 1 (at byte" in errors[0]
    assert "dictionary code points outside" in errors[0]


def test_bad_snappy_fails_as_on_the_host(tmp_path, cuda_device):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(400, dtype=np.int64)}), path, use_dictionary=False,
                   write_batch_size=100, data_page_size=1)
    data = bytearray(path.read_bytes())
    third = parquet_surgery.pages(data, str(path), 0, 0)[2]
    data[third.body + 2:third.end] = b"\xff" * (third.end - third.body - 2)
    path.write_bytes(bytes(data))
    errors = _assert_same_outcome(path, cuda_device)
    assert len(errors) == 1 and "column 'x', row group 0, page 2" in errors[0] and "uncompress" in errors[0]


@pytest.mark.parametrize("version, damage, message", [
    ("1.0", "levels", "the page's values run past the page"),
    ("1.0", "level_bytes", "the page's definition levels are malformed or run past the page"),
    ("2.0", "levels", "the page's row or null count disagrees"),
])
def test_pages_shorter_than_their_levels_say_fail_as_on_the_host(tmp_path, cuda_device, version, damage, message):
    """The second page's levels say no row is NULL (its values then run past it), or their byte count runs past it."""
    path = tmp_path / "t.parquet"
    v = pa.array([None if i % 4 == 0 else i * 10 for i in range(300)], pa.int64())
    pq.write_table(pa.table({"v": v}), path, compression="none", use_dictionary=False, data_page_version=version,
                   write_batch_size=100, data_page_size=1)
    data = bytearray(path.read_bytes())
    second = parquet_surgery.pages(data, str(path), 0, 0)[1]
    levels = second.body + (4 if version == "1.0" else 0)  # (a v1 page's levels follow their 4-byte length)
    if damage == "levels":
        data[levels:levels + 3] = bytes([0xC8, 0x01, 0x01])  # one run: 100 times level 1
    else:
        data[second.body:second.body + 4] = (second.end - second.body).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    errors = _assert_same_outcome(path, cuda_device)
    assert len(errors) == 1 and "column 'v', row group 0, page 1" in errors[0] and message in errors[0]


_COLUMNS = (("int64", True), ("int32", False), ("double", True))
#: Damaged pages of several layouts (found by bench/device_decode_fuzz.py's sweep): a v2 page's null count rewritten, Snappy and
#: dictionary-page bytes flipped (a bad copy, damaged levels), flips that only change values, a dictionary page
#: header's integer rewritten.
DAMAGE = [
    Recipe(105, (60, 45), _COLUMNS, "snappy", False, "2.0", 16, (("page", 15, 4),)),
    Recipe(109, (60, 45), _COLUMNS, "snappy", False, "1.0", 16, (("flip", 0.32973171649909216, 116),)),
    Recipe(167, (60, 45), _COLUMNS, "snappy", True, "1.0", 16, (("flip", 0.6913370352777413, 81),)),
    Recipe(114, (60, 45), _COLUMNS, "none", True, "2.0", 16, (("page", 30, 2),)),
    Recipe(21, (60, 45), _COLUMNS, "snappy", False, "2.0", 16, (("flip", 0.6, 0x01),)),
    Recipe(22, (60, 45), _COLUMNS, "none", True, "1.0", 16, (("flip", 0.12, 0x80),)),
    Recipe(26, (60, 45), _COLUMNS, "snappy", False, "1.0", 16, (("page", 25, 4),)),
    # The first dictionary page's size halved: its chunk ends there, and the values kernel indexed the value slots
    # of the rows no page covered with the next chunk's first page (an IndexError in the simulator).
    Recipe(339, (60, 45), _COLUMNS, "snappy", True, "2.0", 16, (("page", 1, 7),)),
]


@pytest.mark.parametrize("recipe", DAMAGE, ids=lambda recipe: f"seed{recipe.seed}")
def test_damaged_pages_fail_or_read_as_on_the_host(tmp_path, cuda_device, recipe):
    path = tmp_path / "damaged.parquet"
    write_file(recipe, path)
    try:
        _assert_same_outcome(path, cuda_device)
    except DataSourceError:  # the footer itself was refused: neither decoder is reached
        pass


# ----------------------------------------------------------------- through a query
def test_a_query_reads_through_the_device_decoder(tmp_path, cuda_device, keeps_thread_switches):
    """parquet_reader='device' (the default on cuda without cuDF): the scan's bounded launches and one sync a piece."""
    from gpu_engine import Session

    rng = np.random.default_rng(5)
    rows = 300
    table = pa.table({"k": pa.array(rng.integers(0, 4, rows)), "s": [["a", "bb", "c"][i % 3] for i in range(rows)],
                      "v": pa.array(rng.standard_normal(rows), mask=rng.random(rows) < 0.2),
                      "d": pa.array(rng.integers(0, 100, rows).astype(np.int32))})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=100, compression="snappy")  # (a page a chunk: barriers are slow here)
    query = "SELECT k, s, count(*) AS c, count(v) AS cv, sum(v) AS sv, sum(d) AS sd FROM t GROUP BY k, s ORDER BY k, s"
    results = {}
    for reader in ("device", "pyarrow"):
        session = Session(device=cuda_device.name, parquet_reader=reader, batch_rows=100)
        session.register("t", path)
        results[reader] = session.sql(query).to_pylist()
        scans = [s for stats in session.last_stats().operator_stats_by_node().values() for s in stats
                 if s.operator_type == "TableScan"]
        pieces = sum(s.runtime.get("device_decoded_pieces", 0) for s in scans)
        columns = sum(s.runtime.get("device_decoded_columns", 0) for s in scans)
        if reader == "device":
            assert (pieces, columns) == (3, 9)  # k, v and d of each row group; s is read on the host
            assert sum(s.kernel_launches for s in scans) == LAUNCHES_PER_COLUMN * columns
            assert sum(s.host_syncs for s in scans) == pieces
        else:
            assert pieces == 0
    assert [r["c"] for r in results["device"]] == [r["c"] for r in results["pyarrow"]]
    for ours, theirs in zip(results["device"], results["pyarrow"]):
        assert ours.keys() == theirs.keys() and ours["sd"] == theirs["sd"] and ours["cv"] == theirs["cv"]
        assert ours["sv"] == pytest.approx(theirs["sv"])
    assert len(results["device"]) == 12


def test_a_query_on_a_damaged_file_fails_naming_the_page(tmp_path, cuda_device, keeps_thread_switches):
    from gpu_engine import Session
    from gpu_engine.errors import ExecutionError

    path = tmp_path / "dict.parquet"
    _dictionary_file(path, "snappy")
    data = bytearray(path.read_bytes())
    parquet_surgery.write_int(data, parquet_surgery.pages(data, str(path), 0, 1)[0].body_struct.get(1), 2)
    path.write_bytes(bytes(data))
    session = Session(device=cuda_device.name, parquet_reader="device")
    session.register("t", path)
    with pytest.raises(ExecutionError, match=r"DataSourceError: .*dict\.parquet: column 'n', row group 0, page 1 "
                                             r"\(at byte \d+\): a dictionary code points outside") as caught:
        session.sql("SELECT n, count(*) FROM t GROUP BY n")
    assert isinstance(caught.value.__cause__, DataSourceError)
    assert session.sql("SELECT sum(id) FROM t").column(0).to_pylist() == [19900]  # the Session stays usable
