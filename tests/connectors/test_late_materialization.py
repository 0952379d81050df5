"""Late materialization (gpu_engine.connectors.late_materialization): a join-filtered scan reads its other columns only
for the rows kept.

The probe file holds 6 row groups of 50 rows whose key statistics all span the same range (no row group can be
skipped by them), so the build keys' matches fall in row groups 2, 3 (two rows) and 4 (one row) only; pieces are two
row groups each. The counts of rows and row groups whose other columns are never read are known exactly.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.connectors.data_source import split_pieces
from gpu_engine.connectors.late_materialization import read_filtered_piece
from gpu_engine.exec.split import ParquetSplit

GROUPS, GROUP_ROWS = 6, 50
SQL = "SELECT f.v, f.s, f.p, d.tag FROM fact f JOIN dim d ON f.k = d.dk"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Write ``fact`` (keys of row group g near g * 1000, each group also holding 0 and 99999) and ``dim``."""
    folder = tmp_path_factory.mktemp("late_materialization")
    keys = []
    for group in range(GROUPS):
        keys += [0] + [group * 1000 + i for i in range(1, GROUP_ROWS - 1)] + [99999]
    rows = len(keys)
    fact = pa.table({
        "k": pa.array(keys, pa.int64()),
        "v": pa.array([None if i % 9 == 0 else i * 3 for i in range(rows)], pa.int32()),
        "s": pa.array([None if i % 11 == 0 else f"w{i % 7}" for i in range(rows)]),
        "p": pa.array([None if i % 13 == 0 else i for i in range(rows)], pa.decimal128(7, 2)),
    })
    dim = pa.table({"dk": pa.array([2005, 2010, 3007, 4020], pa.int64()), "tag": pa.array(["a", "b", "c", "d"])})
    pq.write_table(fact, folder / "fact.parquet", row_group_size=GROUP_ROWS)
    pq.write_table(dim, folder / "dim.parquet")
    return {"fact": str(folder / "fact.parquet"), "dim": str(folder / "dim.parquet")}


def _late_counts(session: Session) -> tuple[int, int]:
    scans = [s for p in session.last_stats().pipelines for s in p.operators if s.operator_type == "TableScan"]
    return (sum(s.runtime.get("late_materialized_rows_skipped", 0) for s in scans),
            sum(s.runtime.get("late_materialized_row_groups_skipped", 0) for s in scans))


def test_other_columns_are_read_only_for_rows_kept(device_name, files):
    """Pieces (0, 1), (2, 3) and (4, 5) keep 0, 3 and 1 rows: the other 296 rows' v, s and p are never converted, and
    row groups 0, 1 and 5 (every row dropped, though their statistics could not tell) never decoded. Same rows as
    DuckDB."""
    session = Session(device=device_name, batch_rows=2 * GROUP_ROWS, parquet_reader="auto")
    for name, path in files.items():
        session.register(name, path)
    result = session.sql(SQL)
    reference = duckdb.connect()
    for name, path in files.items():
        reference.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
    assert_same_rows(result, duckdb_table(reference, SQL))
    assert result.num_rows == 4
    assert _late_counts(session) == (GROUPS * GROUP_ROWS - 4, 3)


def test_a_quarter_of_each_piece_kept_is_read_late(files):
    """A dimension matching 12 of each row group's 50 keys (24%: a month of a year's dates keeps about as many)
    leaves the other 228 rows' v, s and p unconverted (``LATE_CUT_SHARE``; at 1/8 the pieces were read whole).
    Same rows as DuckDB."""
    quarter = pa.table({"dk": pa.array([g * 1000 + i for g in range(GROUPS) for i in range(1, 13)], pa.int64()),
                        "tag": pa.array([f"t{i % 5}" for i in range(GROUPS * 12)])})
    session = Session(device="cpu", batch_rows=2 * GROUP_ROWS, parquet_reader="auto")
    session.register("fact", files["fact"])
    session.register("dim", quarter)
    result = session.sql(SQL)
    reference = duckdb.connect()
    reference.execute(f"CREATE VIEW fact AS SELECT * FROM read_parquet('{files['fact']}')")
    reference.register("dim", quarter)
    assert_same_rows(result, duckdb_table(reference, SQL))
    assert result.num_rows == GROUPS * 12
    assert _late_counts(session)[0] == GROUPS * (GROUP_ROWS - 12)


def test_a_piece_read_late_equals_a_piece_read_whole(files):
    """Each piece read late (the kept rows only; or, over ``cut_share``, every row with each batch's selection), its
    two filters' columns in either order (the second read for the rows the first kept), holds the same rows as the
    piece read whole and cut to the rows its filters keep."""
    from gpu_engine.columnar.column import Column
    from gpu_engine.connectors.runtime_filters import select_rows
    from gpu_engine.device import get_device
    from gpu_engine.exec.dynamic_filters import JoinKeyFilter

    device = get_device("cpu")
    keys = Column.from_arrow(pa.array([2005, 2010, 3007, 4020, 4030, 4031], pa.int64()), device)
    key_filter = JoinKeyFilter.of_build_keys(device, keys, "k", "int")
    values = Column.from_arrow(pa.array(range(0, 900, 2), pa.int32()), device)  # even v: half the rows
    every_v = Column.from_arrow(pa.array(range(900), pa.int32()), device)  # every v of the rows k keeps
    halves = [key_filter, JoinKeyFilter.of_build_keys(device, values, "v", "int")]
    columns = ("v", "k", "s", "p")
    # Every piece read late (each filter's column in either order; k first, then a v filter keeping every row k kept:
    # v read late needs no cut), then every piece with a row kept read whole.
    for filters, cut_share, shares in ((halves, 1.0, {}), (halves, 1.0, {"v": 0.0}), (halves, 0.0, {}),
                                       ([key_filter, JoinKeyFilter.of_build_keys(device, every_v, "v", "int")],
                                        1.0, {"k": 0.0, "v": 1.0})):
        for piece in split_pieces(ParquetSplit(files["fact"]), columns, 2 * GROUP_ROWS):
            late = read_filtered_piece(piece, filters, cut_share, shares=shares)
            assert set(shares) == {"k", "v"}  # what each kept, for the next piece's order
            whole = pa.Table.from_batches(piece.read()).combine_chunks()
            rows = select_rows(whole.to_batches()[0], filters)
            expected = whole if rows is None else whole.take(pa.array(rows))
            got = [b if rows is None else b.take(pa.array(rows)) for b, rows in zip(late.batches, late.selections)]
            assert late.cut == (cut_share == 1.0 or not expected.num_rows)
            table = pa.Table.from_batches(got, whole.schema) if got else whole.slice(0, 0)
            assert table.column_names == list(columns)
            assert table.combine_chunks().cast(expected.schema).equals(expected)


@pytest.mark.parametrize("version, dictionary, compression", [("1.0", True, "snappy"), ("2.0", False, "none"),
                                                              ("2.0", True, "snappy")])
def test_decoding_wanted_rows_equals_decoding_all_and_gathering(tmp_path, version, dictionary, compression):
    """decode_chunk with wanted rows over many small pages (PLAIN or dictionary, v1 or v2, NULLs, long repeats and bit-packed
    runs) gives exactly the wanted rows of a whole decode, for sparse, clustered, edge, empty and full selections."""
    from gpu_engine.connectors.data_source import _read_plan, parquet_metadata
    from gpu_engine.connectors.parquet_columns import read_decoded_columns

    rng = np.random.default_rng(7)
    rows = 3000
    table = pa.table({
        "a": pa.array([None if i % 5 == 0 else int(x) for i, x in enumerate(rng.integers(0, 40, rows))], pa.int32()),
        "b": pa.array(np.repeat(np.arange(rows // 100), 100), pa.int64()),  # long repeats
        "c": pa.array([None if x < 0.3 else int(x * 1e6) for x in rng.random(rows)], pa.int32()),
        "d": pa.array([i * 7 for i in range(rows)], pa.int64()),  # distinct
    })
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path, row_group_size=1000, data_page_size=512, data_page_version=version,
                   use_dictionary=dictionary, compression=compression)
    metadata = parquet_metadata(path)
    _, decodable = _read_plan(path, tuple(table.column_names))
    groups = list(range(metadata.num_row_groups))
    whole = read_decoded_columns(path, metadata, groups, decodable)
    assert set(whole) == set(table.column_names)
    selections = [np.sort(rng.choice(rows, 40, replace=False)), np.arange(1200, 1260), np.array([0, 999, 1000, rows - 1]),
                  np.array([], np.int64), np.arange(rows)]
    for kept in selections:
        kept = kept.astype(np.int32)
        late = read_decoded_columns(path, metadata, groups, decodable, kept=kept)
        for name, column in whole.items():
            assert late[name].equals(column.take(pa.array(kept))), (name, kept[:5])
