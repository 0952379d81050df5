"""The engine's Parquet page decoder (kernels/parquet_pages.py) against pyarrow's reader, on every layout it meets.

Each file is written by pyarrow (or tpchgen-cli's parquet-rs) and read twice:
through :class:`SplitPiece` (decoder for fixed-width columns, pyarrow for the
rest) and by pyarrow alone; the values must be equal. Layouts cover both data
page versions, PLAIN and dictionary pages, Snappy, uncompressed and codecs the
decoder leaves to pyarrow, nulls, many pages and row groups, and every
fixed-width type the engine reads.
"""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_engine.columnar.types import is_string
from gpu_engine.connectors.data_source import SplitPiece
from gpu_engine.connectors import parquet_columns
from gpu_engine.connectors.parquet_columns import decodable_columns, read_decoded_columns
from gpu_engine.errors import DataSourceError, ExecutionError
from gpu_engine.exec.split import ParquetSplit
from gpu_engine.kernels.parquet_pages import CORRUPT, SLACK, _rle_hybrid, decode_chunk, snappy_decompress

from bench import parquet_surgery


def _table(rows: int, seed: int, null_fraction: float) -> pa.Table:
    rng = np.random.default_rng(seed)

    def mask():
        return rng.random(rows) < null_fraction if null_fraction else None

    few = rng.integers(0, 7, rows)  # repeats: dictionary pages with RLE runs
    return pa.table({
        "i8": pa.array(rng.integers(-128, 128, rows).astype(np.int8), mask=mask()),
        "i16": pa.array(rng.integers(-30000, 30000, rows).astype(np.int16), mask=mask()),
        "i32": pa.array(rng.integers(-2**31, 2**31, rows).astype(np.int32), mask=mask()),
        "i64": pa.array(rng.integers(-2**62, 2**62, rows), mask=mask()),
        "few": pa.array(few * 1_000_003, mask=mask()),
        "sorted": pa.array(np.sort(rng.integers(0, rows // 3 + 1, rows))),
        "f32": pa.array(rng.standard_normal(rows).astype(np.float32), mask=mask()),
        "f64": pa.array(rng.standard_normal(rows), mask=mask()),
        "day": pa.array((rng.integers(0, 20000, rows)).astype(np.int32), mask=mask()).cast(pa.date32()),
        "ts": pa.array(rng.integers(0, 2**40, rows), mask=mask()).cast(pa.timestamp("ms")),
        "price": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**12, 10**12, rows)],
                          pa.decimal128(15, 2), mask=mask()),
        "small_dec": pa.array([decimal.Decimal(int(v)).scaleb(-3) for v in rng.integers(-10**8, 10**8, rows)],
                              pa.decimal128(9, 3), mask=mask()),
        "name": pa.array([f"n{v}" for v in few], mask=mask()),
        "text": pa.array(["" if v % 11 == 0 else f"é{v}-" + "x" * int(v % 40) for v in rng.integers(0, 10**6, rows)],
                         mask=mask()),
    })


def _read_both(path, columns=None):
    metadata = pq.read_metadata(path)
    columns = tuple(columns or metadata.schema.to_arrow_schema().names)
    split = ParquetSplit(str(path))
    piece = SplitPiece(split, columns, metadata.num_rows, tuple(range(metadata.num_row_groups)))
    ours = pa.Table.from_batches(piece.read(), schema=None) if metadata.num_rows else None
    theirs = pq.read_table(path, columns=list(columns))
    return ours, theirs


def _assert_same(ours: pa.Table, theirs: pa.Table) -> None:
    assert ours.column_names == theirs.column_names
    for name in theirs.column_names:
        expected = theirs.column(name).combine_chunks()
        got = ours.column(name).combine_chunks()
        if pa.types.is_dictionary(got.type):
            got = got.dictionary_decode()
        if pa.types.is_decimal(got.type) and got.type.bit_width != expected.type.bit_width:
            got = got.cast(expected.type)
        if pa.types.is_dictionary(expected.type):
            expected = expected.dictionary_decode()
        if is_string(expected.type):  # string, large_string or string_view: compare the values
            got, expected = got.cast(pa.large_string()), expected.cast(pa.large_string())
        assert got.equals(expected), name


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("compression", ["none", "snappy", "zstd"])
@pytest.mark.parametrize("dictionary", [True, False])
@pytest.mark.parametrize("null_fraction", [0.0, 0.3])
def test_decoder_reads_what_pyarrow_reads(tmp_path, version, compression, dictionary, null_fraction):
    path = tmp_path / "t.parquet"
    table = _table(5000, seed=len(version) + len(compression) + dictionary, null_fraction=null_fraction)
    pq.write_table(table, path, compression=compression, use_dictionary=dictionary, data_page_version=version,
                   data_page_size=4096, row_group_size=1700, store_decimal_as_integer=True)
    ours, theirs = _read_both(path)
    _assert_same(ours, theirs)
    metadata = pq.read_metadata(path)
    types = decodable_columns(metadata, table.column_names)
    decoded = read_decoded_columns(str(path), metadata, range(metadata.num_row_groups), types)
    # The decoder took every column of the codecs it knows, strings too, and left zstd to pyarrow.
    assert set(decoded) == (set() if compression == "zstd" else set(types)) and len(types) == 14


def test_decoder_takes_the_fixed_width_columns_and_narrows_decimals(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(_table(100, 1, 0.1), path, store_decimal_as_integer=True)
    metadata = pq.read_metadata(path)
    types = decodable_columns(metadata, metadata.schema.to_arrow_schema().names)
    assert types["name"] == pa.large_string()
    assert decodable_columns(metadata, ["name"], ["name"])["name"] == pa.dictionary(pa.int32(), pa.large_string())
    assert types["price"] == pa.decimal64(15, 2) and types["small_dec"] == pa.decimal64(9, 3)
    assert types["day"] == pa.date32() and types["ts"] == pa.timestamp("ms")
    decoded = read_decoded_columns(str(path), metadata, [0], types)
    assert set(decoded) == set(types)  # Snappy and dictionary pages: all decoded here


@pytest.mark.parametrize("as_codes", [True, False])
def test_strings_whose_dictionary_overflows(tmp_path, as_codes):
    """A writer falls back to PLAIN pages when the dictionary grows too large: codes are refused, strings not."""
    path = tmp_path / "t.parquet"
    values = pa.array([f"value {i % 3000} " + "y" * (i % 17) for i in range(20_000)])
    pq.write_table(pa.table({"s": values}), path, dictionary_pagesize_limit=2048, data_page_size=1024)
    metadata = pq.read_metadata(path)
    types = decodable_columns(metadata, ["s"], ["s"] if as_codes else [])
    decoded = read_decoded_columns(str(path), metadata, [0], types)
    assert set(decoded) == (set() if as_codes else {"s"})
    ours, theirs = _read_both(path)
    _assert_same(ours, theirs)


def test_decimals_stored_as_bytes_go_to_pyarrow(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(_table(300, 2, 0.0), path)  # FIXED_LEN_BYTE_ARRAY decimals (pyarrow's default)
    metadata = pq.read_metadata(path)
    assert "price" not in decodable_columns(metadata, ["price"])
    ours, theirs = _read_both(path)
    _assert_same(ours, theirs)


def test_tpchgen_files_decode_like_pyarrow(tpch_data):
    for table in ("lineitem", "orders", "partsupp", "customer"):
        ours, theirs = _read_both(tpch_data(0.01) / f"{table}.parquet")
        _assert_same(ours, theirs)


def test_some_columns_of_some_row_groups(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(_table(4000, 3, 0.2), path, row_group_size=1000, store_decimal_as_integer=True)
    metadata = pq.read_metadata(path)
    piece = SplitPiece(ParquetSplit(str(path)), ("price", "name", "i64"), 2000, (1, 3))
    ours = pa.Table.from_batches(piece.read())
    theirs = pq.ParquetFile(path).read_row_groups([1, 3], columns=["price", "name", "i64"])
    _assert_same(ours, theirs)
    assert metadata.num_row_groups == 4


def test_a_corrupt_chunk_is_an_error_naming_where(tmp_path):
    """Bytes that contradict themselves are refused, never handed to pyarrow (whose checks are fewer)."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(10_000, dtype=np.int64)}), path, use_dictionary=False)
    metadata = pq.read_metadata(path)
    chunk = metadata.row_group(0).column(0)
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset + chunk.total_compressed_size // 2:chunk.data_page_offset
         + chunk.total_compressed_size] = b"\xff" * (chunk.total_compressed_size - chunk.total_compressed_size // 2)
    path.write_bytes(bytes(data))
    buffer = np.frombuffer(bytes(data), np.uint8)
    out = np.empty(10_000, np.int64)
    status, page, at, _, _ = decode_chunk(buffer, chunk.data_page_offset, chunk.total_compressed_size, 1, 0, 10_000,
                                          out, np.empty(0, np.uint8), np.empty(0, np.uint8), np.empty(0, np.uint8),
                                          None)  # wanted=None, as the scans pass it: no compile of its own (CI time)
    assert status <= CORRUPT and page == 0 and at == chunk.data_page_offset
    with pytest.raises(DataSourceError, match=r"t\.parquet: column 'x', row group 0, page 0 \(at byte 4\): "
                                              r"the page's compressed bytes do not uncompress"):
        read_decoded_columns(str(path), metadata, [0], {"x": pa.int64()})
    with pytest.raises(DataSourceError, match=r"column 'x', row group 0, page 0"):
        SplitPiece(ParquetSplit(str(path)), ("x",), 10_000, (0,)).read()


@pytest.mark.parametrize("compression", ["none", "snappy"])
def test_page_buffers_kept_between_row_groups_and_files_never_leak_values(tmp_path, compression):
    """Each row group's dictionary differs; one thread decodes them in turn with the same page buffers.

    The dictionary page is read in place in one of the thread's two buffers while the data pages go
    to the other: a row group must never see the previous row group's (or file's) dictionary or page.
    """
    rng = np.random.default_rng(7)
    paths = []
    for n, (rows, distinct) in enumerate([(3000, 2500), (500, 3), (4000, 4000)]):
        groups = [pa.table({"x": pa.array(rng.integers(0, distinct, rows) * (g + 1) * 1_000_003 + n),
                            "y": pa.array(rng.integers(0, distinct, rows).astype(np.int32) - g)})
                  for g in range(3)]
        path = tmp_path / f"groups{n}.parquet"
        with pq.ParquetWriter(path, groups[0].schema, compression=compression, use_dictionary=True) as writer:
            for group in groups:
                writer.write_table(group)
        paths.append(path)
    for path in paths + paths[::-1]:
        metadata = pq.read_metadata(path)
        assert metadata.num_row_groups == 3
        decoded = read_decoded_columns(str(path), metadata, [0, 1, 2], {"x": pa.int64(), "y": pa.int32()})
        expected = pq.read_table(path)
        assert decoded["x"].equals(expected.column("x").combine_chunks())
        assert decoded["y"].equals(expected.column("y").combine_chunks())


def test_row_groups_share_one_canonical_dictionary(tmp_path):
    """The same values in another order per row group (as Parquet writers leave them) come back as one dictionary.

    Row group 2 adds a value (the dictionary grows); pieces read separately share it, so consumers
    that cache by a dictionary's contents hit; the strings are pyarrow's throughout.
    """
    orders = [["MAIL", "SHIP", "AIR"], ["AIR", "MAIL", "SHIP"], ["SHIP", "RAIL", "AIR", "MAIL"]]
    rng = np.random.default_rng(11)
    path = tmp_path / "modes.parquet"
    schema = pa.schema([("mode", pa.string())])
    with pq.ParquetWriter(path, schema, compression="snappy", use_dictionary=True) as writer:
        for order in orders:  # a writer's dictionary lists values in order of first appearance
            writer.write_table(pa.table({"mode": order + [order[i] for i in rng.integers(0, len(order), 500)]}))
    metadata = pq.read_metadata(path)
    columns = {"mode": pa.dictionary(pa.int32(), pa.large_string())}
    pieces = [read_decoded_columns(str(path), metadata, [group], columns)["mode"] for group in range(3)]
    expected = pq.read_table(path).column("mode").to_pylist()
    assert sum((piece.to_pylist() for piece in pieces), []) == expected
    dictionaries = [piece.chunk(0).dictionary.to_pylist() for piece in pieces]
    assert dictionaries[0] == dictionaries[1] == ["MAIL", "SHIP", "AIR"]
    assert dictionaries[2] == ["MAIL", "SHIP", "AIR", "RAIL"]
    again = read_decoded_columns(str(path), metadata, [1], columns)["mode"]
    assert again.chunk(0).dictionary.to_pylist() == dictionaries[2] and again.to_pylist() == pieces[1].to_pylist()


def test_a_row_group_dictionary_seen_before_recodes_without_looking_its_values_up(tmp_path, monkeypatch):
    """Each distinct row-group dictionary is looked up in the canonical one once (its mapping kept by its bytes);
    a row group listing the canonical values in their order keeps its codes as they are."""
    orders = [["AIR", "MAIL"], ["MAIL", "AIR"], ["AIR", "MAIL"], ["MAIL", "AIR"]]
    path = tmp_path / "two.parquet"
    with pq.ParquetWriter(path, pa.schema([("mode", pa.string())]), use_dictionary=True) as writer:
        for order in orders:
            writer.write_table(pa.table({"mode": order + order[::-1] + [order[0]]}))
    metadata = pq.read_metadata(path)
    columns = {"mode": pa.dictionary(pa.int32(), pa.large_string())}
    looked_up = []
    index_in = parquet_columns.pc.index_in
    monkeypatch.setattr(parquet_columns.pc, "index_in", lambda *a, **k: looked_up.append(1) or index_in(*a, **k))
    remapped = []
    remap = parquet_columns.remap_codes
    monkeypatch.setattr(parquet_columns, "remap_codes", lambda m, c: remapped.append(len(c)) or remap(m, c))
    decoded = read_decoded_columns(str(path), metadata, [0, 1, 2, 3], columns)["mode"]
    assert decoded.to_pylist() == pq.read_table(path).column("mode").to_pylist()
    assert [chunk.dictionary.to_pylist() for chunk in decoded.chunks] == [["AIR", "MAIL"]] * 4
    assert len(looked_up) == 2 and remapped == [5, 5]  # groups 0 and 1 looked up; 1 and 3 recoded
    again = read_decoded_columns(str(path), metadata, [3, 1], columns)["mode"]
    assert again.to_pylist() == decoded.chunk(3).to_pylist() + decoded.chunk(1).to_pylist()
    assert len(looked_up) == 2 and remapped == [5, 5, 5, 5]


@pytest.mark.parametrize("all_null_group", [0, 1])
def test_an_all_null_row_group_keeps_its_empty_dictionary(tmp_path, all_null_group):
    path = tmp_path / "nulls.parquet"
    groups = [pa.table({"s": pa.array(["b", "a", None, "b"])}), pa.table({"s": pa.array(["a", "b"])})]
    groups.insert(all_null_group, pa.table({"s": pa.array([None, None, None], pa.string())}))
    with pq.ParquetWriter(path, pa.schema([("s", pa.string())]), use_dictionary=True) as writer:
        for group in groups:
            writer.write_table(group)
    metadata = pq.read_metadata(path)
    columns = {"s": pa.dictionary(pa.int32(), pa.large_string())}
    expected = pq.read_table(path).column("s").to_pylist()
    for pieces in ([[0, 1, 2]], [[0], [1], [2]]):
        got = sum((read_decoded_columns(str(path), metadata, groups_, columns)["s"].to_pylist() for groups_ in pieces), [])
        assert got == expected


def test_large_dictionaries_stay_per_row_group(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet_columns, "CANONICAL_DICTIONARY_MAX_VALUES", 2)
    path = tmp_path / "many.parquet"
    with pq.ParquetWriter(path, pa.schema([("s", pa.string())]), use_dictionary=True) as writer:
        writer.write_table(pa.table({"s": ["a", "b", "c"]}))
        writer.write_table(pa.table({"s": ["c", "b", "a"]}))
    metadata = pq.read_metadata(path)
    decoded = read_decoded_columns(str(path), metadata, [0, 1], {"s": pa.dictionary(pa.int32(), pa.large_string())})
    assert [chunk.dictionary.to_pylist() for chunk in decoded["s"].chunks] == [["a", "b", "c"], ["c", "b", "a"]]
    assert decoded["s"].to_pylist() == ["a", "b", "c", "c", "b", "a"]


def _bit_packed_run(values, bit_width: int, slack: int) -> np.ndarray:
    """Return one RLE/bit-packing hybrid run of ``values`` (bit-packed, groups of 8), then ``slack`` zero bytes."""
    groups = (len(values) + 7) // 8
    bits = np.zeros(groups * 8 * bit_width, np.uint8)
    for k in range(bit_width):
        bits[k::bit_width][:len(values)] = (np.asarray(values) >> k) & 1
    header = groups << 1 | 1
    assert header < 128  # one varint byte
    return np.frombuffer(bytes([header]) + np.packbits(bits, bitorder="little").tobytes() + bytes(slack), np.uint8)


@pytest.mark.parametrize("slack", [0, 16], ids=["at-the-end", "room-to-spare"])
def test_dictionary_indices_are_looked_up_and_checked(slack):
    """Both loops of the bit-packed runs: word loads checked at the buffer's end, or free of checks with room."""
    dictionary = np.arange(100, 300, dtype=np.int64) * 7
    values = np.random.default_rng(3).integers(0, 200, 37)
    run = _bit_packed_run(values, 8, slack)
    end = run.shape[0] - slack
    out = np.empty(37, np.int64)
    assert _rle_hybrid(run, 0, end, 8, dictionary, out, 0, 37, 200) == end and (out == dictionary[values]).all()
    indices = np.empty(37, np.int64)
    assert _rle_hybrid(run, 0, end, 8, np.empty(0, np.int64), indices, 0, 37, 200) > 0 and (indices == values).all()
    assert _rle_hybrid(run, 0, end, 8, np.empty(0, np.int64), indices, 0, 37, int(values.max())) == -2
    values[30] = 200  # one past the dictionary's end
    run = _bit_packed_run(values, 8, slack)
    assert _rle_hybrid(run, 0, end, 8, dictionary, out, 0, 37, 200) == -2
    assert _rle_hybrid(run, 0, end, 8, np.empty(0, np.int64), indices, 0, 37, 200) == -2  # codes: checked alike
    assert _rle_hybrid(run, 0, end - 1, 8, dictionary, out, 0, 37, 200) == -1  # the run's bytes past the end


def test_a_chunk_past_the_end_of_the_bytes_is_corrupt():
    out = np.empty(10, np.int64)
    empty = np.empty(0, np.uint8)
    # Typed as the scans call it (a read-only memory-mapped file, wanted=None): numba compiles decode_chunk once per
    # argument types, 10-16 s of CPU on a cold cache; a writable buffer or an omitted wanted compiled one for this
    # test alone (CI time).
    file_bytes = np.frombuffer(bytes(8), np.uint8)
    assert decode_chunk(file_bytes, 0, 100, 1, 0, 10, out, empty, empty, empty, None)[:3] == (CORRUPT, 0, 0)


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.integers(-2**63, 2**63 - 1), st.none()), min_size=1, max_size=400),
       st.sampled_from(["1.0", "2.0"]), st.booleans(), st.sampled_from([64, 256, 4096]))
def test_random_int64_columns(tmp_path_factory, values, version, dictionary, page_size):
    path = tmp_path_factory.mktemp("p") / "r.parquet"
    pq.write_table(pa.table({"v": pa.array(values, pa.int64())}), path, data_page_version=version,
                   use_dictionary=dictionary, data_page_size=page_size, compression="snappy")
    ours, theirs = _read_both(path)
    _assert_same(ours, theirs)
    metadata = pq.read_metadata(path)
    assert set(read_decoded_columns(str(path), metadata, [0], {"v": pa.int64()})) == {"v"}


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=0, max_size=3000), st.integers(1, 40))
def test_snappy_round_trip(data, repeat):
    raw = (data * repeat)[:100_000]
    compressed = np.frombuffer(pa.compress(raw, codec="snappy", asbytes=True), np.uint8)
    for slack in (0, SLACK):  # without room past the end the careful byte paths run
        out = np.zeros(len(raw) + slack, np.uint8)
        assert snappy_decompress(compressed, 0, len(compressed), out) == len(raw)
        assert out[:len(raw)].tobytes() == raw
    if len(compressed) > 2:  # a truncated block is reported, not read past
        out = np.zeros(len(raw) + SLACK, np.uint8)
        assert snappy_decompress(compressed, 0, len(compressed) - 1, out) == -1



# ----------------------------------------------------------------- files whose counts contradict each other
MODES = ["MAIL", "SHIP", "AIR", "RAIL", "TRUCK", "FOB", "REG AIR"]


def _dictionary_file(path, compression: str = "none", version: str = "1.0"):
    """Write ``id`` (int64), ``s`` (strings) and ``n`` (int64, 7 values): dictionary pages, one row group of 200."""
    table = pa.table({"id": np.arange(200), "s": [MODES[i % 7] for i in range(200)],
                      "n": pa.array([(i % 7) * 1_000_003 for i in range(200)], pa.int64())})
    pq.write_table(table, path, compression=compression, use_dictionary=True, data_page_version=version)
    return table


def _shrink_dictionary(path, column: int, declared: int) -> None:
    """Make the dictionary page of ``column`` declare ``declared`` values (its codes still reach 6)."""
    data = bytearray(path.read_bytes())
    dictionary_page = parquet_surgery.pages(data, str(path), 0, column)[0]
    assert parquet_surgery.page_kind(data, dictionary_page) == 2
    parquet_surgery.write_int(data, dictionary_page.body_struct.get(1), declared)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("compression", ["none", "snappy"])
@pytest.mark.parametrize("declared", [0, 3])
@pytest.mark.parametrize("column, arrow_type", [("s", pa.dictionary(pa.int32(), pa.large_string())),
                                                ("s", pa.large_string()), ("n", pa.int64())])
def test_codes_outside_the_dictionary_are_an_error(tmp_path, compression, declared, column, arrow_type):
    """A dictionary page declaring fewer values than the codes reach: the decoder's error names where (issue 28.1).

    Before, the decoder's CORRUPT sent the column to pyarrow, whose dictionary read does not check codes:
    the query returned NULLs and the fused aggregation segfaulted.
    """
    path = tmp_path / "dict.parquet"
    _dictionary_file(path, compression)
    _shrink_dictionary(path, {"s": 1, "n": 2}[column], declared)
    metadata = pq.read_metadata(path)
    with pytest.raises(DataSourceError, match=rf"dict\.parquet: column '{column}', row group 0, page 1 "
                                              r"\(at byte \d+\): .*dictionary"):
        read_decoded_columns(str(path), metadata, [0], {column: arrow_type})
    with pytest.raises(DataSourceError, match=rf"column '{column}', row group 0"):
        SplitPiece(ParquetSplit(str(path)), ("id", column), 200, (0,)).read()


@pytest.mark.parametrize("declared", [0, 3])
def test_codes_outside_the_dictionary_read_by_pyarrow_are_an_error(tmp_path, declared):
    """A codec the decoder leaves to pyarrow (zstd): pyarrow's dictionary read is checked before a kernel sees it."""
    path = tmp_path / "dict.parquet"
    _dictionary_file(path, "zstd")
    _shrink_dictionary(path, 1, declared)
    assert read_decoded_columns(str(path), pq.read_metadata(path), [0], {"s": pa.large_string()}) == {}
    with pytest.raises(DataSourceError, match=r"dict\.parquet: column 's', row group 0: .*dictionary"):
        SplitPiece(ParquetSplit(str(path)), ("id", "s"), 200, (0,)).read()


def _query_fails_on_the_data(session, query: str, message: str) -> None:
    """Assert the query fails as the engine reports a scan's error: ExecutionError naming the operator, caused by
    the connector's DataSourceError."""
    with pytest.raises(ExecutionError, match=rf"DataSourceError: .*{message}.*\[operator TableScan") as caught:
        session.sql(query)
    assert isinstance(caught.value.__cause__, DataSourceError)


@pytest.mark.parametrize("query", ["SELECT s, count(*) FROM t GROUP BY s", "SELECT s FROM t",
                                   "SELECT count(s) FROM t", "SELECT count(*) FROM t WHERE s = 'MAIL'",
                                   "SELECT n, count(*) FROM t GROUP BY n"])
def test_a_query_on_codes_outside_the_dictionary_is_an_error(tmp_path, device_name, query):
    from gpu_engine import Session

    path = tmp_path / "dict.parquet"
    _dictionary_file(path)
    _shrink_dictionary(path, 1, 0)
    _shrink_dictionary(path, 2, 0)
    session = Session(device=device_name)
    session.register("t", path)
    _query_fails_on_the_data(session, query, r"dict\.parquet: column '[sn]', row group 0")
    assert session.sql("SELECT sum(id) FROM t").column(0).to_pylist() == [19900]  # the Session stays usable


def _two_column_file(path, version: str, dictionary: bool, compression: str, nulls: bool):
    """Write ``id`` and ``v`` (= 10 id, every fifth NULL when ``nulls``): two row groups of 300 rows, 3 pages each."""
    v = pa.array([None if nulls and i % 5 == 0 else i * 10 for i in range(600)], pa.int64())
    pq.write_table(pa.table({"id": np.arange(600), "v": v}), path, compression=compression,
                   use_dictionary=dictionary, data_page_version=version, write_batch_size=100, data_page_size=1,
                   row_group_size=300)


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("dictionary", [False, True])
@pytest.mark.parametrize("compression", ["none", "snappy", "zstd"])
@pytest.mark.parametrize("nulls", [False, True])
def test_a_page_declaring_one_value_too_many_is_an_error(tmp_path, version, dictionary, compression, nulls):
    """The first data page of ``v`` declares 101 values: rows must not shift against ``id`` (issue 28.5).

    pyarrow reads an optional column so (id 102 gets 101's value); zstd pages go to pyarrow, whose
    pages' counts the engine checks first.
    """
    path = tmp_path / "extra.parquet"
    _two_column_file(path, version, dictionary, compression, nulls)
    data = bytearray(path.read_bytes())
    data_pages = [page for page in parquet_surgery.pages(data, str(path), 0, 1)
                  if parquet_surgery.page_kind(data, page) != 2]
    assert len(data_pages) == 3
    values = data_pages[0].body_struct.get(1)
    parquet_surgery.write_int(data, values, parquet_surgery.read_int(data, values) + 1)
    path.write_bytes(bytes(data))
    with pytest.raises(DataSourceError, match=r"extra\.parquet: column 'v', row group 0"):
        SplitPiece(ParquetSplit(str(path)), ("id", "v"), 600, (0, 1)).read()
    ours = pa.Table.from_batches(SplitPiece(ParquetSplit(str(path)), ("id", "v"), 300, (1,)).read())
    assert ours.column("v").to_pylist() == [None if nulls and i % 5 == 0 else i * 10 for i in range(300, 600)]


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("rows", [299, 200, 301])
def test_a_row_group_whose_num_rows_disagrees_with_its_pages_is_an_error(tmp_path, compression, rows):
    """The footer says ``rows`` rows where the pages hold 300 (200: a page boundary; 299: the issue's 598 of 600).

    The footer agrees with itself (its chunks' value counts and the file's rows are edited alike): only
    the pages tell.
    """
    path = tmp_path / "short.parquet"
    _two_column_file(path, "1.0", True, compression, False)
    _declare_rows(path, [rows, rows])
    for columns in (("id", "v"), ("v",), ()):
        with pytest.raises(DataSourceError, match=r"short\.parquet: column '(id|v)', row group 0"):
            SplitPiece(ParquetSplit(str(path)), columns, 2 * rows, (0, 1)).read()


def _declare_rows(path, rows: list[int]) -> None:
    """Make the footer declare ``rows[g]`` rows in row group ``g`` (its chunks' value counts, the file's total alike)."""
    data = bytearray(path.read_bytes())
    metadata = parquet_surgery.footer(data)
    for group, count in enumerate(rows):
        parquet_surgery.write_int(data, metadata.get(4, group, 3), count)
        for chunk in metadata.get(4, group, 1).members:
            parquet_surgery.write_int(data, chunk.get(3, 5), count)
    parquet_surgery.write_int(data, metadata.get(3), sum(rows))
    path.write_bytes(bytes(data))


def test_a_query_on_a_short_row_group_is_an_error(tmp_path, device_name):
    from gpu_engine import Session

    path = tmp_path / "short.parquet"
    _two_column_file(path, "1.0", True, "snappy", False)
    _declare_rows(path, [300, 299])
    session = Session(device=device_name)
    session.register("t", path)
    for query in ("SELECT count(*) FROM t", "SELECT sum(v) FROM t", "SELECT * FROM t"):
        _query_fails_on_the_data(session, query, r"short\.parquet: column '(id|v)', row group 1")


@pytest.mark.parametrize("version", ["V1", "V2"])
def test_duckdb_written_files_read_as_pyarrow_reads_them(tmp_path, version):
    """DuckDB's v2 files hold DELTA_LENGTH_BYTE_ARRAY strings, of which pyarrow makes no dictionary: read them plain.

    Before, the dictionary read's "Not yet implemented" OSError escaped the scan of a valid file.
    """
    import duckdb

    path = tmp_path / "duck.parquet"
    connection = duckdb.connect()  # its own: the module's default connection may hold another test's unfinished result
    connection.execute(f"""COPY (SELECT i::INTEGER AS a, i::BIGINT * 3 AS b, CASE WHEN i % 5 = 0 THEN NULL ELSE 'v' || (i % 13)
                   END AS s, 'text' || i AS t, (i % 100)::DECIMAL(12, 2) AS d FROM range(3000) r(i))
                   TO '{path}' (FORMAT parquet, PARQUET_VERSION {version}, ROW_GROUP_SIZE 1000)""")
    ours, theirs = _read_both(path)
    _assert_same(ours, theirs)


@pytest.mark.parametrize("layout", ["plain", "dictionary", "delta"])
def test_strings_that_are_not_utf8_are_an_error(tmp_path, layout):
    """Bytes that are not UTF-8 in a string column (found by bench/parquet_fuzz.py: a flipped byte).

    pyarrow hands them on; the engine's GROUP BY interned them as Python strings and failed with a raw
    UnicodeDecodeError. Like DuckDB, the engine refuses the file, naming where; ``delta`` pages are read
    by pyarrow and checked alike.
    """
    from gpu_engine import Session

    path = tmp_path / "utf8.parquet"
    values = ["plain", "caf\u00ff", "plain", "other"] * 50
    encoding = {"column_encoding": {"s": "DELTA_LENGTH_BYTE_ARRAY"}} if layout == "delta" else {}
    pq.write_table(pa.table({"s": values, "n": np.arange(200)}), path, compression="none",
                   use_dictionary=layout == "dictionary", **encoding)
    path.write_bytes(path.read_bytes().replace("\u00ff".encode(), b"\xff\xfe"))  # values and statistics alike
    assert pq.read_table(path).num_rows == 200  # pyarrow reads it
    with pytest.raises(DataSourceError, match=r"utf8\.parquet: column 's'.* not valid UTF-8"):
        SplitPiece(ParquetSplit(str(path)), ("s", "n"), 200, (0,)).read()
    session = Session(device="cpu")
    session.register("t", path)
    _query_fails_on_the_data(session, "SELECT s, count(*) FROM t GROUP BY s", r"utf8\.parquet: column 's'")
    assert session.sql("SELECT sum(n) FROM t").column(0).to_pylist() == [19900]


@pytest.mark.parametrize("strings, bad", [
    ([b"abc", b"\xc3\xa9t\xc3\xa9", "\u20ac\U0001F600".encode()], -1),  # ASCII, 2-, 3- and 4-byte sequences
    ([b"abc", b"\xc3", b"\xa9"], 1),  # a sequence split between two strings
    ([b"ok", b"\xed\xa0\x80"], 1),  # a surrogate
    ([b"\xc0\xaf"], 0),  # an overlong form
    ([b"\xf4\x90\x80\x80"], 0),  # past U+10FFFF
    ([b"x" * 20, b"\xe2\x82"], 1),  # a sequence cut short at the end
])
def test_utf8_check(strings, bad):
    from gpu_engine.kernels.parquet_pages import first_invalid_utf8

    offsets = np.cumsum([0] + [len(s) for s in strings]).astype(np.int64)
    chars = np.frombuffer(b"".join(strings), np.uint8)
    assert first_invalid_utf8(offsets, chars, len(strings)) == bad
