"""The engine's Parquet footer reader: it agrees with pyarrow on real footers and refuses inconsistent ones.

Before it (issue 28, items 2, 3 and 9), any query on a file whose footer
contradicted itself aborted the process (a chunk typed INT64 under an INT32
schema column, an OPTIONAL column made REQUIRED: pyarrow's statistics read
threw a C++ exception that terminated), a row group declaring 2^40 rows made
the reader allocate terabytes, and a file truncated after ``register`` raised
a raw ``ArrowInvalid``. Each crafted file is queried in a subprocess, so a
process that dies fails its test instead of killing the test worker.

Files are crafted by re-serializing the footer with the small typed Thrift
compact codec below (a field keeps its Thrift type, so the writer needs no
schema of parquet.thrift), which lets an edit change a value's width.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine import Session
from gpu_engine.connectors.parquet_footer import MAX_DEPTH, read_footer
from gpu_engine.connectors.registered_table import register_source
from gpu_engine.errors import DataSourceError
from gpu_engine.sql.statistics import table_statistics

_LIST, _STRUCT = 9, 12


class _ThriftReader:
    """Parse compact-protocol structs into ``[field id, type, value]`` lists that keep each field's Thrift type."""

    def __init__(self, data: bytes):
        self.data, self.position = data, 0

    def _byte(self) -> int:
        self.position += 1
        return self.data[self.position - 1]

    def _varint(self) -> int:
        value = shift = 0
        while True:
            byte = self._byte()
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    def _zigzag(self) -> int:
        value = self._varint()
        return (value >> 1) ^ -(value & 1)

    def value(self, kind: int):
        if kind in (1, 2):
            return self._byte() == 1
        if kind == 3:
            return self._byte()
        if kind in (4, 5, 6):
            return self._zigzag()
        if kind == 7:
            self.position += 8
            return struct.unpack("<d", self.data[self.position - 8:self.position])[0]
        if kind == 8:
            length = self._varint()
            self.position += length
            return self.data[self.position - length:self.position]
        if kind in (_LIST, 10):
            header = self._byte()
            size = self._varint() if header >> 4 == 15 else header >> 4
            return [header & 15] + [self.value(header & 15) for _ in range(size)]  # [element type, elements...]
        assert kind == _STRUCT, kind
        return self.struct()

    def struct(self) -> list:
        fields, last = [], 0
        while True:
            header = self._byte()
            if header & 15 == 0:
                return fields
            last = last + (header >> 4) if header >> 4 else self._zigzag()
            kind = header & 15
            fields.append([last, kind, kind == 1 if kind in (1, 2) else self.value(kind)])


def _write_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _write_value(out: bytearray, kind: int, value) -> None:
    if kind in (1, 2):
        out.append(1 if value else 2)
    elif kind == 3:
        out.append(value & 0xFF)
    elif kind in (4, 5, 6):
        _write_varint(out, (value << 1) ^ (value >> 63))
    elif kind == 7:
        out += struct.pack("<d", value)
    elif kind == 8:
        _write_varint(out, len(value))
        out += value
    elif kind in (_LIST, 10):
        element, items = value[0], value[1:]
        if len(items) < 15:
            out.append(len(items) << 4 | element)
        else:
            out.append(0xF0 | element)
            _write_varint(out, len(items))
        for item in items:
            _write_value(out, element, item)
    else:
        _write_struct(out, value)


def _write_struct(out: bytearray, fields: list) -> None:
    last = 0
    for field_id, kind, value in sorted(fields, key=lambda f: f[0]):
        header_kind = (1 if value else 2) if kind in (1, 2) else kind
        if 0 < field_id - last <= 15:
            out.append((field_id - last) << 4 | header_kind)
        else:
            out.append(header_kind)
            _write_varint(out, (field_id << 1) ^ (field_id >> 63))
        if kind not in (1, 2):
            _write_value(out, kind, value)
        last = field_id
    out.append(0)


def _get(fields: list, *path: int) -> list:
    """Return the ``[id, type, value]`` entry at ``path`` (field ids of structs, 0-based indexes of lists)."""
    entry = [None, _STRUCT, fields]
    for key in path:
        if entry[1] in (_LIST, 10):
            entry = [key, entry[2][0], entry[2][1 + key]]
            continue
        entry = next(f for f in entry[2] if f[0] == key)
    return entry


def _set(fields: list, path: tuple[int, ...], value) -> None:
    """Set the value at ``path`` (see :func:`_get`); list elements are replaced in their list."""
    parent = _get(fields, *path[:-1])
    if parent[1] in (_LIST, 10):
        parent[2][1 + path[-1]] = value
    else:
        next(f for f in parent[2] if f[0] == path[-1])[2] = value


def _split(path: Path) -> tuple[bytes, list]:
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    return data[:-8 - length], _ThriftReader(data[-8 - length:-8]).struct()


def _join(path: Path, body: bytes, footer: bytes | list) -> None:
    if isinstance(footer, list):
        out = bytearray()
        _write_struct(out, footer)
        footer = bytes(out)
    path.write_bytes(body + footer + len(footer).to_bytes(4, "little") + b"PAR1")


# FileMetaData: 2 schema, 3 num_rows, 4 row_groups. RowGroup: 1 columns, 3 num_rows. ColumnChunk: 3 meta_data.
# ColumnMetaData: 1 type, 5 num_values, 7 total_compressed_size, 9 data_page_offset, 11 dictionary_page_offset.
# SchemaElement: 3 repetition_type, 5 num_children.
def _chunk(group: int, column: int, *field: int) -> tuple[int, ...]:
    return (4, group, 1, column, 3, *field)


ROWS = 600
TABLE = pa.table({"a": pa.array(range(ROWS), pa.int32()), "s": pa.array(["MAIL", "SHIP", None] * (ROWS // 3))})


def _edit_type(meta):
    _set(meta, _chunk(1, 0, 1), 2)  # INT64 where the schema says INT32


def _edit_optional_to_required(meta):
    _set(meta, (2, 1, 3), 0)


def _edit_string_optional_to_required(meta):
    _set(meta, (2, 2, 3), 0)


def _edit_huge_row_group(meta):
    _set(meta, (4, 0, 3), 2**40)
    for column in range(2):
        _set(meta, _chunk(0, column, 5), 2**40)
    _set(meta, (3,), 2**40 + 400)


def _edit_huge_row_count(meta):
    _set(meta, (4, 0, 3), 2**40)


def _edit_file_rows(meta):
    _set(meta, (3,), ROWS + 1)


def _edit_chunk_past_footer(meta):
    _set(meta, _chunk(2, 0, 7), 1 << 30)


def _edit_dictionary_after_data(meta):
    data = _get(meta, *_chunk(0, 1, 9))[2]
    _set(meta, _chunk(0, 1, 11), data + 1)


def _edit_children(meta):
    _set(meta, (2, 0, 5), 3)  # the root claims a third column


def _edit_missing_chunk(meta):
    columns = _get(meta, 4, 0, 1)[2]
    del columns[2:]


def _edit_huge_row_group_of_a_big_chunk(meta):
    """Declare 2^40 rows where 40 KB chunks could hold them (RLE pages): their page headers say otherwise."""
    _set(meta, (4, 0, 3), 2**40)
    for column in range(2):
        _set(meta, _chunk(0, column, 5), 2**40)
    _set(meta, (3,), 2**40)


def _edit_rows_without_columns(meta):
    _set(meta, (2, 0, 5), 0)
    del _get(meta, 2)[2][2:]  # the schema keeps its root only
    del _get(meta, 4)[2][2:]  # one row group, of 2^40 rows and no column chunks
    del _get(meta, 4, 0, 1)[2][1:]
    _set(meta, (4, 0, 3), 2**40)
    _set(meta, (3,), 2**40)
    meta[:] = [f for f in meta if f[0] != 7]  # column orders: one per column, so none


def _deep_nesting(meta):
    return bytes([0x1C]) * 10_000  # structs in structs: pyarrow's own parser refuses it; the engine's reader must


CASES = {
    # edit (of the parsed footer, or returning the footer's new bytes), what the error must say
    "chunk_type": (_edit_type, r"row group 1, column 'a'.*physical type INT64 differs from the schema's INT32"),
    "optional_to_required": (_edit_optional_to_required, r"row group 0, column 'a'.*REQUIRED"),
    "string_optional_to_required": (_edit_string_optional_to_required, r"row group 0, column 's'.*REQUIRED"),
    "rows_2_40": (_edit_huge_row_group, r"row group 0, column 'a'.*1099511627776 values in \d+ bytes"),
    "row_count_2_40": (_edit_huge_row_count, r"row group 0, column 'a'.*200 values for the row group's 1099511627776 rows"),
    "file_rows": (_edit_file_rows, r"declares 601 rows but its row groups hold 600"),
    "chunk_past_footer": (_edit_chunk_past_footer, r"row group 2, column 'a'.*lie outside the file's data"),
    "dictionary_after_data": (_edit_dictionary_after_data, r"row group 0, column 's'.*dictionary page"),
    "schema_children": (_edit_children, r"children"),
    "missing_chunk": (_edit_missing_chunk, r"row group 0.*holds 1 column chunks; the schema has 2 columns"),
    "deep_nesting": (_deep_nesting, r"nests values deeper than"),
    "rows_without_columns": (_edit_rows_without_columns, r"row group 0.*1099511627776 rows but the schema has no columns"),
    "rows_2_40_big_chunk": (_edit_huge_row_group_of_a_big_chunk, r"column '[as]'.*row group 0|row group 0.*column '[as]'"),
}
#: The file a case edits, when not TABLE's: 5,000 random int64s in one uncompressed PLAIN chunk.
BIG_CHUNK_CASES = ("rows_2_40_big_chunk",)

#: Runs in a fresh interpreter: for each file, registers it and runs each query; one JSON line per outcome.
_QUERY_SCRIPT = textwrap.dedent("""
    import json, sys
    from gpu_engine import Session
    paths, queries = sys.argv[1].split(","), sys.argv[2:]
    for path in paths:
        print(json.dumps({"start": path}), flush=True)  # names the file if the process dies on it
        session = Session(device="cpu")
        try:
            session.register("t", path)
        except Exception as exc:
            print(json.dumps({"path": path, "query": "register", "error": type(exc).__name__, "message": str(exc)}))
            continue
        for query in queries:
            try:
                outcome = {"rows": [list(r.values()) for r in session.sql(query, timeout=60).to_pylist()]}
            except Exception as exc:
                while exc.__cause__ is not None:  # an ExecutionError carries what the operator raised
                    exc = exc.__cause__
                outcome = {"error": type(exc).__name__, "message": str(exc)}
            print(json.dumps({"path": path, "query": query, **outcome}, default=str), flush=True)
""")

QUERIES = ("SELECT count(*) FROM t", "SELECT sum(a), count(s) FROM t", "SELECT s, count(*) FROM t GROUP BY s")


def _run_queries(paths: list[Path], queries=QUERIES) -> dict[str, list[dict]]:
    """Return each file's outcomes (register, then each query), run in subprocesses.

    One process runs the files in turn; one that dies gives the file it died on a ``died`` outcome, and
    a fresh process goes on with the files after it, so each file's test passes or fails on its own.
    """
    outcomes: dict[str, list[dict]] = {str(p): [] for p in paths}
    pending = [str(p) for p in paths]
    while pending:
        result = subprocess.run([sys.executable, "-c", _QUERY_SCRIPT, ",".join(pending), *queries],
                                capture_output=True, text=True, timeout=600)
        lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        for line in lines:
            if "path" in line:
                outcomes[line["path"]].append(line)
        started = [line["start"] for line in lines if "start" in line]
        if result.returncode == 0:
            break
        died = started[-1] if started else pending[0]
        outcomes[died].append({"died": f"the process died (rc {result.returncode}): {result.stderr[-1500:]}"})
        pending = pending[pending.index(died) + 1:]
    return outcomes


def _duckdb_rows(path: str, query: str):
    try:
        return [list(row) for row in duckdb.connect().sql(query.replace("FROM t", f"FROM '{path}'")).fetchall()]
    except duckdb.Error:
        return None


@pytest.fixture(scope="module")
def crafted_outcomes(tmp_path_factory) -> dict[str, list[dict]]:
    """Craft every case's file from one pyarrow-written file and query them all in one subprocess."""
    folder = tmp_path_factory.mktemp("crafted")
    base = folder / "base.parquet"
    pq.write_table(TABLE, base, row_group_size=ROWS // 3)
    paths = []
    big = folder / "big.parquet"
    pq.write_table(pa.table({"a": pa.array(range(0, 5000 * 7919, 7919), pa.int64()),
                             "s": pa.array(["x"] * 5000)}), big, compression="none", use_dictionary=False)
    for case, (edit, _) in sorted(CASES.items()):
        body, meta = _split(big if case in BIG_CHUNK_CASES else base)
        paths.append(folder / f"{case}.parquet")
        _join(paths[-1], body, edit(meta) or meta)
    return _run_queries(paths)


@pytest.mark.parametrize("case", sorted(CASES))
def test_inconsistent_footer_gives_a_clean_error_or_duckdbs_answer(crafted_outcomes, case):
    import re

    message = CASES[case][1]
    path, outcomes = next((p, o) for p, o in crafted_outcomes.items() if p.endswith(f"/{case}.parquet"))
    assert outcomes and not any("died" in o for o in outcomes), outcomes
    for outcome in outcomes:
        if "error" in outcome:
            assert outcome["error"] == "DataSourceError", outcome
            assert path in outcome["message"], outcome
            assert re.search(message, outcome["message"]), outcome
        else:
            expected = _duckdb_rows(path, outcome["query"])
            assert expected is not None, f"{outcome}: answered where DuckDB refuses the file"
            assert sorted(map(str, outcome["rows"])) == sorted(map(str, expected)), outcome


def _raw_footer_file(tmp_path: Path, footer: bytes) -> Path:
    path = tmp_path / "raw.parquet"
    _join(path, b"PAR1", footer)
    return path


@pytest.mark.parametrize("footer, message", [
    (bytes([0x19, 0xFC]) + b"\xff\xff\xff\xff\x0f", r"list of \d+ elements with \d+ bytes left"),  # schema: 2^32 structs
    (bytes([0x18]) + b"\xff\xff\xff\xff\x07", r"\d+-byte string with \d+ bytes left"),  # field 1 as a 2^31-byte string
    (bytes([0x1C]) * (MAX_DEPTH + 8), r"nests values deeper than"),  # structs in structs
    (bytes([0x36]) + b"\xff" * 12, r"varint longer than 10 bytes"),  # num_rows
    (bytes([0x15]), r"ends inside a value"),
    (bytes([0x1D]), r"unknown Thrift type code"),
], ids=["huge_list", "huge_string", "deep_nesting", "long_varint", "truncated", "unknown_type"])
def test_malformed_thrift_is_refused_naming_the_file(tmp_path, footer, message):
    path = _raw_footer_file(tmp_path, footer)
    with pytest.raises(DataSourceError, match=message) as caught:
        read_footer(str(path))
    assert str(path) in str(caught.value)


def _integer_fields(fields: list, found: list) -> list:
    """Return every integer ``[id, type, value]`` entry of a parsed footer, at any depth."""
    for entry in fields:
        kind, value = entry[1], entry[2]
        if kind in (4, 5, 6):
            found.append(entry)
        elif kind == _STRUCT:
            _integer_fields(value, found)
        elif kind in (_LIST, 10) and value[0] == _STRUCT:
            for item in value[1:]:
                _integer_fields(item, found)
    return found


def test_random_footer_damage_is_read_or_refused_never_raised_raw(tmp_path):
    """Flipped bytes, cuts and integer fields set to edge values: a footer parses and checks, or is refused."""
    import random

    from gpu_engine.connectors.parquet_footer import parse_footer

    path = tmp_path / "t.parquet"
    pq.write_table(_all_types_table(20, True).select(["i32", "dec38", "s", "list", "struct"]), path, row_group_size=10)
    body, meta = _split(path)
    out = bytearray()
    _write_struct(out, meta)
    footer = bytes(out)
    size = len(body) + len(footer) + 8
    rng = random.Random(28)
    edges = [0, 1, -1, 2, 7, 15, 16, 2**31 - 1, -2**31, 2**40, 2**63 - 1, -2**63]
    outcomes = {"read": 0, "refused": 0}
    for _ in range(400):
        damaged = bytearray(footer)
        for _ in range(rng.choice((1, 2, 8))):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        if rng.random() < 0.1:
            damaged = damaged[:rng.randrange(len(damaged))]
        edited = _ThriftReader(footer).struct()
        for entry in rng.sample(_integer_fields(edited, []), 2):
            entry[2] = rng.choice(edges + [entry[2] + 1, entry[2] - 1])
        rewritten = bytearray()
        _write_struct(rewritten, edited)
        for candidate in (bytes(damaged), bytes(rewritten)):
            try:
                parse_footer(candidate, str(path), size)
                outcomes["read"] += 1
            except DataSourceError as exc:
                assert str(path) in str(exc)
                outcomes["refused"] += 1
    assert outcomes["read"] and outcomes["refused"]


def _flip_first_byte(encoded: bytes) -> bytes:
    import base64

    message = bytearray(base64.b64decode(encoded))
    message[0] ^= 0xFF  # pyarrow: OSError "Invalid IPC stream: negative continuation token"
    return base64.b64encode(bytes(message))


@pytest.mark.parametrize("damage", [lambda value: b"not base64!", lambda value: b"A" * 40, _flip_first_byte],
                         ids=["base64", "empty_message", "ipc_stream"])
def test_a_damaged_arrow_schema_in_the_footer_is_a_data_source_error(tmp_path, damage):
    """pyarrow reads the footer's ARROW:schema itself; what it raises (OSError, ArrowInvalid) names the file."""
    from gpu_engine.connectors.data_source import parquet_metadata

    path = tmp_path / "t.parquet"
    pq.write_table(TABLE, path)
    body, meta = _split(path)
    entries = _get(meta, 5)[2][1:]
    entry = next(entry for entry in entries if _get(entry, 1)[2] == b"ARROW:schema")
    entry[1][2] = damage(entry[1][2])
    _join(path, body, meta)
    with pytest.raises(DataSourceError, match=rf"cannot read {path} as Parquet"):
        parquet_metadata(str(path))


# -- real footers: the reader agrees with pyarrow's metadata ---------------------------------------------------------

def _all_types_table(rows: int, with_nulls: bool) -> pa.Table:
    def maybe(values):
        return [None if with_nulls and i % 7 == 3 else v for i, v in enumerate(values)]

    base = datetime.datetime(2024, 1, 1)
    return pa.table({
        "b": pa.array(maybe([i % 3 == 0 for i in range(rows)]), pa.bool_()),
        "i8": pa.array(maybe([i % 100 - 50 for i in range(rows)]), pa.int8()),
        "i16": pa.array(maybe([i * 3 - 700 for i in range(rows)]), pa.int16()),
        "i32": pa.array(maybe([i * 1000 - 5 for i in range(rows)]), pa.int32()),
        "i64": pa.array(maybe([i * 10**12 - 7 for i in range(rows)]), pa.int64()),
        "u32": pa.array(maybe([4_000_000_000 - i for i in range(rows)]), pa.uint32()),
        "u64": pa.array(maybe([2**63 + i for i in range(rows)]), pa.uint64()),
        "f32": pa.array(maybe([i / 8 - 3 for i in range(rows)]), pa.float32()),
        "f64": pa.array(maybe([i * 1.5 - 100 for i in range(rows)]), pa.float64()),
        "d": pa.array(maybe([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(rows)]), pa.date32()),
        "ts": pa.array(maybe([base + datetime.timedelta(seconds=i) for i in range(rows)]), pa.timestamp("us")),
        "dec9": pa.array(maybe([decimal.Decimal(i * 7 - 300).scaleb(-2) for i in range(rows)]), pa.decimal128(9, 2)),
        "dec18": pa.array(maybe([decimal.Decimal(i * 10**9 + 1).scaleb(-3) for i in range(rows)]), pa.decimal128(18, 3)),
        "dec38": pa.array(maybe([decimal.Decimal(i * 10**20 - 1).scaleb(-4) for i in range(rows)]), pa.decimal128(38, 4)),
        "s": pa.array(maybe([f"v{i % 13:03d}" for i in range(rows)]), pa.string()),
        "bin": pa.array(maybe([bytes([i % 256, 7]) for i in range(rows)]), pa.binary()),
        "fixed": pa.array(maybe([bytes([i % 256, 1, 2]) for i in range(rows)]), pa.binary(3)),
        "list": pa.array(maybe([list(range(i % 4)) for i in range(rows)]), pa.list_(pa.int64())),
        "struct": pa.array(maybe([{"x": i, "y": f"y{i}"} for i in range(rows)]),
                           pa.struct([("x", pa.int32()), ("y", pa.string())])),
    })


def _pyarrow_statistics(statistics, leaf_type: pa.DataType):
    if statistics is None or not statistics.has_min_max:
        return None
    return statistics.min, statistics.max


@pytest.mark.parametrize("with_nulls", [False, True], ids=["dense", "nulls"])
@pytest.mark.parametrize("write_statistics", [True, False], ids=["statistics", "no_statistics"])
def test_reader_agrees_with_pyarrow_on_real_footers(tmp_path, with_nulls, write_statistics):
    table = _all_types_table(500, with_nulls)
    path = tmp_path / "all.parquet"
    pq.write_table(table, path, row_group_size=60, write_statistics=write_statistics,
                   use_dictionary=["s", "i32"], compression={"f64": "zstd", "s": "gzip"} | {
                       c: "snappy" for c in table.column_names if c not in ("f64", "s")})
    footer = read_footer(str(path))
    metadata = pq.read_metadata(path)
    assert footer.num_rows == metadata.num_rows == 500
    assert len(footer.row_groups) == metadata.num_row_groups == 9
    assert [leaf.path for leaf in footer.leaves] == [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    for i, leaf in enumerate(footer.leaves):
        column = metadata.schema.column(i)
        assert (leaf.physical, leaf.max_definition, leaf.max_repetition) == (
            column.physical_type, column.max_definition_level, column.max_repetition_level), leaf.path
    for g, group in enumerate(footer.row_groups):
        expected_group = metadata.row_group(g)
        assert group.num_rows == expected_group.num_rows
        for i, chunk in enumerate(group.columns):
            expected = expected_group.column(i)
            leaf = footer.leaves[i]
            assert (chunk.physical, chunk.codec, chunk.num_values, chunk.data_page_offset,
                    chunk.total_compressed_size, chunk.total_uncompressed_size) == (
                expected.physical_type, expected.compression, expected.num_values, expected.data_page_offset,
                expected.total_compressed_size, expected.total_uncompressed_size), leaf.path
            assert chunk.dictionary_page_offset == (expected.dictionary_page_offset
                                                    if expected.has_dictionary_page else None), leaf.path
            stats = expected.statistics
            if not write_statistics or stats is None:
                assert chunk.statistics is None or chunk.statistics.minimum is None, leaf.path
                continue
            assert chunk.statistics.null_count == stats.null_count, leaf.path
            if leaf.physical == "INT64" and leaf.path == "ts" or not stats.has_min_max:
                continue  # the planner reads no timestamp ranges
            if leaf.physical == "FIXED_LEN_BYTE_ARRAY" and leaf.path != "dec38" or leaf.path in ("bin",):
                assert (chunk.statistics.minimum, chunk.statistics.maximum) in ((stats.min, stats.max), (None, None))
                continue
            assert (chunk.statistics.minimum, chunk.statistics.maximum) == (stats.min, stats.max), leaf.path


def test_reader_reads_duckdb_written_footers(tmp_path):
    """Another writer's footers (DuckDB's) pass the checks and give the same statistics as pyarrow's reader."""
    path = tmp_path / "duck.parquet"
    duckdb.connect().execute(
        f"COPY (SELECT i::INTEGER AS a, i * 2.5 AS f, 'k' || (i % 9) AS s, CASE WHEN i % 5 = 0 THEN NULL ELSE i END AS n,"
        f" DATE '2021-03-01' + i::INTEGER AS d, (i / 3)::DECIMAL(12, 3) AS m FROM range(50000) t(i))"
        f" TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 8192)")
    footer = read_footer(str(path))
    metadata = pq.read_metadata(path)
    assert footer.num_rows == 50000 and len(footer.row_groups) == metadata.num_row_groups > 1
    for g, group in enumerate(footer.row_groups):
        for i, chunk in enumerate(group.columns):
            stats = metadata.row_group(g).column(i).statistics
            assert (chunk.statistics.minimum, chunk.statistics.maximum, chunk.statistics.null_count) == (
                stats.min, stats.max, stats.null_count), footer.leaves[i].path


def test_empty_row_groups_and_empty_files_are_read(tmp_path):
    """pyarrow writes an empty row group's chunks with data page offset 0 after their dictionary page."""
    table = pa.table({"a": pa.array([5, 2, 9], pa.int32()), "s": ["x", "y", None]})
    path, empty = tmp_path / "groups.parquet", tmp_path / "empty.parquet"
    with pq.ParquetWriter(path, table.schema) as writer:
        for part in (table, table.slice(0, 0), table):
            writer.write_table(part)
    pq.write_table(table.slice(0, 0), empty)
    footer = read_footer(str(path))
    assert [group.num_rows for group in footer.row_groups] == [3, 0, 3]
    assert read_footer(str(empty)).num_rows == 0
    stats = table_statistics(register_source("t", str(path)))
    assert (stats.rows, stats.columns["a"].minimum, stats.columns["a"].maximum) == (6, 2, 9)


def test_planner_statistics_come_from_the_checked_footer(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": pa.array(range(1000), pa.int64()), "d": pa.array(
        [datetime.date(2020, 1, 1) + datetime.timedelta(days=i % 30) for i in range(1000)])}), path, row_group_size=100)
    stats = table_statistics(register_source("t", str(path)))
    assert stats.rows == 1000
    assert (stats.columns["k"].minimum, stats.columns["k"].maximum, stats.columns["k"].ndv) == (0, 999, 1000)
    assert stats.columns["d"].ndv == 30


def test_tpch_statistics_equal_those_of_pyarrows_metadata(tpch_data):
    """The planner's statistics (rows, min, max, hence NDV and join order) did not change source with the reader."""
    paths = sorted(tpch_data(0.01).glob("*.parquet"))
    assert len(paths) == 8
    for path in paths:
        stats = table_statistics(register_source(path.stem, str(path)))
        metadata = pq.read_metadata(path)
        assert stats.rows == metadata.num_rows, path.stem
        for i in range(metadata.num_columns):
            chunks = [metadata.row_group(g).column(i).statistics for g in range(metadata.num_row_groups)]
            column = stats.columns[metadata.schema.column(i).name]
            assert (column.minimum, column.maximum) == (min(c.min for c in chunks), max(c.max for c in chunks))


# -- a file changed after register -----------------------------------------------------------------------------------

@pytest.mark.parametrize("change", ["truncated", "junk_appended", "not_parquet"])
def test_file_changed_after_register_names_the_file_and_the_change(tmp_path, change):
    path = tmp_path / "t.parquet"
    pq.write_table(TABLE, path, row_group_size=200)
    session = Session(device="cpu")
    session.register("t", path)
    data = path.read_bytes()
    path.write_bytes({"truncated": data[:len(data) // 2], "junk_appended": data + b"junk",
                      "not_parquet": b"a,b\n1,2\n"}[change])
    for query in ("SELECT count(*) FROM t", "SELECT sum(a) FROM t"):
        with pytest.raises(DataSourceError, match=rf"table 't'.*{path}.*changed since the table was registered"):
            session.sql(query, timeout=60)


def test_file_deleted_after_register_names_the_file(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(TABLE, path)
    session = Session(device="cpu")
    session.register("t", path)
    path.unlink()
    with pytest.raises(FileNotFoundError, match=rf"table 't': file {path} no longer exists"):
        session.sql("SELECT sum(a) FROM t", timeout=60)
