"""cuDF interop: bitmask conversion, device-resident tables, ``output=`` and ``parquet_reader`` checks, and cuDF itself.

The bitmask helpers and device tables run on every device. The tests that
need cuDF import it with ``pytest.importorskip`` and carry the ``gpu`` marker:
they are skipped wherever cuDF or a GPU is missing, and the engine works
unchanged there.
"""

from __future__ import annotations

import decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows
from gpu_engine import Session
from gpu_engine.columnar.batch import Batch
from gpu_engine.connectors.cudf_interop import (
    bitmask_from_validity,
    cudf_available,
    is_cudf_source,
    validity_from_bitmask,
)
from gpu_engine.connectors.device_table import DeviceTable, slice_batch
from gpu_engine.plans import PlanBuilder


def _nullable(rows: int) -> pa.Array:
    return pa.array([None if (i * 7) % 5 == 0 else i for i in range(rows)], pa.int64())


# --------------------------------------------------------------- bitmasks
@pytest.mark.parametrize("rows, offset", [(0, 5), (1, 0), (13, 0), (64, 3), (200, 9), (517, 63)])
def test_bitmask_unpacks_like_arrow(rows, offset):
    array = _nullable(rows + offset).slice(offset)
    bitmap = np.frombuffer(array.buffers()[0], dtype=np.uint8)
    validity = validity_from_bitmask(np, bitmap, array.offset, len(array))
    assert validity.dtype == np.bool_
    assert validity.tolist() == array.is_valid().to_pylist()


@pytest.mark.parametrize("rows", [0, 1, 8, 13, 512, 1000])
def test_bitmask_packs_like_arrow_and_pads_like_libcudf(rows):
    array = _nullable(rows)
    validity = np.array(array.is_valid().to_pylist(), dtype=np.bool_)
    mask = bitmask_from_validity(np, validity)
    assert mask.dtype == np.uint8 and mask.shape[0] % 64 == 0 and mask.shape[0] >= 64
    if array.null_count:
        arrow_bits = np.frombuffer(array.buffers()[0], dtype=np.uint8)[: (rows + 7) // 8]
        assert mask[: (rows + 7) // 8].tolist() == arrow_bits.tolist()  # Arrow's bit order: LSB first
    assert validity_from_bitmask(np, mask, 0, rows).tolist() == validity.tolist()


# ---------------------------------------------------------- device tables
def test_a_device_resident_table_is_scanned_as_views(device_name, device):
    table = pa.table({"k": pa.array([i % 4 for i in range(300)], pa.int32()),
                      "s": pa.array([None if i % 9 == 0 else f"v{i % 17}" for i in range(300)]),
                      "m": pa.array([decimal.Decimal(i).scaleb(-2) for i in range(300)], pa.decimal128(10, 2))})
    batch = Batch.from_arrow(table, device)
    session = Session(device=device_name, drivers=2, batch_rows=40)
    session._tables["t"] = DeviceTable("t", batch.schema, split_rows=70, batch=batch)
    plan = (PlanBuilder(session.catalog).table_scan("t").filter("s IS NOT NULL")
            .aggregation(["k"], ["count(*) AS c", "sum(m) AS sm", "max(s) AS ms"]).plan())
    connection = duckdb.connect()
    connection.register("t", table)
    expected = connection.sql("SELECT k, count(*) AS c, sum(m) AS sm, max(s) AS ms FROM t "
                              "WHERE s IS NOT NULL GROUP BY k").to_arrow_table()
    assert_same_rows(session.execute(plan), expected)
    assert len(session.table("t").splits()) == 5


def test_slices_of_a_device_batch_share_its_buffers(device):
    table = pa.table({"s": ["a", "bb", None, "dddd", "e"], "x": [1, 2, 3, None, 5]})
    batch = Batch.from_arrow(table, device)
    part = slice_batch(batch, 1, 4)
    assert part.to_arrow().to_pylist() == table.slice(1, 3).to_pylist()
    assert part.base_column("s").data is batch.base_column("s").data  # chars shared; offsets are absolute
    assert part.base_column("x").data.base is not None
    with pytest.raises(ValueError, match="gather map"):
        slice_batch(batch.slice(0, 2), 0, 1)


# ---------------------------------------------------------- engine -> cuDF without cuDF
def _recording_pylibcudf():
    """A stand-in for pylibcudf's Column/DataType/gpumemoryview that keeps what it is given (no cuDF needed)."""
    from types import SimpleNamespace

    def column(data_type, rows, data, mask, null_count, offset, children):
        return SimpleNamespace(type=data_type, rows=rows, data=data, mask=mask, null_count=null_count,
                               children=children)

    type_id = SimpleNamespace(STRING="STRING", INT32="INT32", INT64="INT64")
    return SimpleNamespace(Column=column, DataType=lambda *args: args, TypeId=type_id, gpumemoryview=lambda x: x)


@pytest.mark.parametrize("dictionary", [[], ["a", "bb"]])
def test_a_dictionary_column_reaches_pylibcudf_as_plain_strings(device, dictionary):
    """An empty dictionary (every row NULL) gives 3 NULL strings: its codes are not gathered (fuzz round 4's guard;
    cuda-sim raised IndexError reading past the one offset before; a GPU read out of bounds)."""
    from gpu_engine.columnar.column import Column
    from gpu_engine.connectors.cudf_interop import _plc_column

    xp = device.xp
    values = Column.from_arrow(pa.array(dictionary, pa.string()), device)
    codes = xp.asarray(np.array([0, 1, 0], np.int32) if dictionary else np.zeros(3, np.int32))
    validity = xp.asarray(np.array([True, False, True]) if dictionary else np.zeros(3, np.bool_))
    made = _plc_column(device, _recording_pylibcudf(), Column(pa.string(), codes, validity, None, values))
    offsets = device.to_host(made.children[0].data)
    assert made.rows == 3 and made.null_count == (1 if dictionary else 3)
    assert offsets.tolist() == ([0, 1, 3, 4] if dictionary else [0, 0, 0, 0])


# --------------------------------------------------------- user-facing checks
def test_execute_rejects_unknown_output():
    session = Session(device="cpu")
    plan = PlanBuilder({}).values(pa.table({"x": [1]})).plan()
    with pytest.raises(ValueError, match="unknown output 'pandas'; choose one of arrow, cudf"):
        session.execute(plan, output="pandas")
    assert session.execute(plan, output="arrow").to_pylist() == [{"x": 1}]


def test_output_cudf_without_cudf_says_what_is_missing():
    if cudf_available():
        pytest.skip("cuDF is installed here")
    session = Session(device="cpu")
    plan = PlanBuilder({}).values(pa.table({"x": [1]})).plan()
    with pytest.raises(ImportError, match="output='cudf' needs cuDF"):
        session.execute(plan, output="cudf")


def test_parquet_reader_is_checked_when_the_session_is_made():
    with pytest.raises(ValueError, match="parquet_reader must be one of 'auto', 'pyarrow', 'cudf', 'device', got 'duckdb'"):
        Session(device="cpu", parquet_reader="duckdb")
    with pytest.raises(ValueError, match="needs device 'cuda'"):
        Session(device="cpu", parquet_reader="cudf")
    with pytest.raises(ValueError, match="parquet_reader='device' decodes pages with CUDA kernels and needs device"):
        Session(device="cpu", parquet_reader="device")
    assert Session(device="cpu", parquet_reader="pyarrow").config.parquet_reader == "pyarrow"


def _fake_gpu():
    from types import SimpleNamespace

    from gpu_engine.device import Device

    return Device("cuda", SimpleNamespace(), kernel_flavor="cuda")


@pytest.mark.parametrize("installed", [False, True], ids=["without_cudf", "with_cudf"])
def test_auto_parquet_reader_is_cudf_only_on_a_gpu_with_cudf(installed, monkeypatch):
    from gpu_engine.connectors import cudf_interop
    from gpu_engine.device import get_device

    monkeypatch.setattr(cudf_interop, "cudf_available", lambda: installed)
    assert cudf_interop.resolve_parquet_reader("auto", _fake_gpu()) == ("cudf" if installed else "device")
    assert cudf_interop.resolve_parquet_reader("auto", get_device("cpu")) == "pyarrow"
    assert cudf_interop.resolve_parquet_reader("pyarrow", _fake_gpu()) == "pyarrow"  # explicit values are kept
    if not installed:  # an explicit "cudf" still says what is missing
        with pytest.raises(ImportError, match="parquet_reader='cudf' needs cuDF"):
            cudf_interop.resolve_parquet_reader("cudf", _fake_gpu())


def test_auto_is_the_default_parquet_reader_and_reads_with_pyarrow_without_cudf(device_name, tmp_path):
    import pyarrow.parquet as pq

    if cudf_available():
        pytest.skip("cuDF is installed here")
    table = pa.table({"x": pa.array(range(500), pa.int64())})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=100)
    session = Session(device=device_name, batch_rows=128)
    assert session.config.parquet_reader == "auto"
    session.register("t", str(tmp_path / "t.parquet"))
    result = session.execute(PlanBuilder(session.catalog).table_scan("t").aggregation([], ["sum(x) AS s"]).plan())
    assert result.to_pylist() == [{"s": sum(range(500))}]


def test_arrow_tables_are_not_taken_for_cudf_ones():
    assert not is_cudf_source(pa.table({"x": [1]}))
    assert not is_cudf_source("lineitem.parquet")


# ------------------------------------------------------------ with cuDF
@pytest.fixture
def cudf():
    module = pytest.importorskip("cudf")
    from gpu_engine.device import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    return module


def _mixed_table(rows: int = 2000) -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table({
        "k": pa.array([None if i % 13 == 0 else int(v) for i, v in enumerate(rng.integers(0, 20, rows))], pa.int64()),
        "s": pa.array([None if i % 11 == 0 else f"w{i % 37}" for i in range(rows)]),
        "m": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**6, 10**6, rows)], pa.decimal128(15, 2)),
        "f": pa.array(rng.normal(size=rows)),
        "d": pa.array([f"c{i % 3}" for i in range(rows)]).dictionary_encode(),
    })


_MIXED_SQL = ("SELECT k, count(*) AS c, count(s) AS cs, sum(m) AS sm, sum(f) AS sf, max(d) AS md FROM t "
              "GROUP BY k")


def _mixed_plan(catalog):
    return PlanBuilder(catalog).table_scan("t").aggregation(
        ["k"], ["count(*) AS c", "count(s) AS cs", "sum(m) AS sm", "sum(f) AS sf", "max(d) AS md"]).plan()


def _duckdb(table: pa.Table, sql: str) -> pa.Table:
    connection = duckdb.connect()
    connection.register("t", table)
    return connection.sql(sql).to_arrow_table()


@pytest.mark.gpu
@pytest.mark.parametrize("drivers", [1, 4])
def test_cudf_dataframe_registers_without_a_copy_and_matches_duckdb(cudf, drivers):
    table = _mixed_table()
    frame = cudf.DataFrame.from_arrow(table)
    session = Session(device="cuda", drivers=drivers, batch_rows=300)
    session.register("t", frame)
    wrapped = session.table("t").batch
    # The values buffer of a column without nulls is cuDF's own memory.
    assert wrapped.base_column("f").data.data.ptr == frame["f"].to_pylibcudf()[0].data().ptr
    assert_same_rows(session.execute(_mixed_plan(session.catalog)), _duckdb(table, _MIXED_SQL))


@pytest.mark.gpu
def test_pylibcudf_table_registers_with_names(cudf):
    import pylibcudf as plc

    table = _mixed_table(500).select(["k", "s", "m"])
    plc_table = plc.interop.from_arrow(table)
    session = Session(device="cuda")
    session.register("t", plc_table, column_names=["k", "s", "m"])
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation(["k"], ["count(s) AS cs", "sum(m) AS sm"]).plan()
    assert_same_rows(session.execute(plan), _duckdb(table, "SELECT k, count(s) AS cs, sum(m) AS sm FROM t GROUP BY k"))


@pytest.mark.gpu
def test_results_come_back_as_cudf(cudf):
    table = _mixed_table()
    session = Session(device="cuda", drivers=2)
    session.register("t", table)
    frame = session.execute(_mixed_plan(session.catalog), output="cudf")
    assert isinstance(frame, cudf.DataFrame)
    assert_same_rows(frame.to_arrow(preserve_index=False), _duckdb(table, _MIXED_SQL))


@pytest.mark.gpu
def test_parquet_through_cudfs_reader_matches_pyarrows(cudf, tmp_path):
    import pyarrow.parquet as pq

    table = _mixed_table(5000)
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=700)
    results = {}
    for reader in ("pyarrow", "cudf"):
        session = Session(device="cuda", drivers=2, parquet_reader=reader)
        session.register("t", str(tmp_path / "t.parquet"), split_rows=1400)
        results[reader] = session.execute(_mixed_plan(session.catalog))
    assert_same_rows(results["cudf"], results["pyarrow"])
    assert_same_rows(results["cudf"], _duckdb(table, _MIXED_SQL))
