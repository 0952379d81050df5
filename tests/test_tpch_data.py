"""Test TPC-H generation with tpchgen-cli: files, types, caching, atomicity, registration."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.connectors.tpch_data import (
    TPCH_TABLES,
    TpchDataError,
    ensure_tpch,
    find_tpchgen_cli,
    register_tpch,
    tpch_directory,
)

TINY_SF = 0.001

# Fixed-size tables have the same row count at every scale factor.
FIXED_ROWS = {"region": 5, "nation": 25}


@pytest.fixture(scope="module")
def tiny_tpch(tmp_path_factory) -> Path:
    """Generate every table at SF 0.001 once for this module."""
    return ensure_tpch(TINY_SF, tmp_path_factory.mktemp("tpch-root"), progress=False)


def _write_script(path: Path, body: str) -> Path:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_generates_one_parquet_file_per_table(tiny_tpch):
    assert tiny_tpch.name == "sf0.001"
    assert sorted(p.name for p in tiny_tpch.iterdir()) == sorted(f"{t}.parquet" for t in TPCH_TABLES)
    for table, rows in FIXED_ROWS.items():
        assert pq.ParquetFile(tiny_tpch / f"{table}.parquet").metadata.num_rows == rows
    lineitem_rows = pq.ParquetFile(tiny_tpch / "lineitem.parquet").metadata.num_rows
    assert 5_000 < lineitem_rows < 7_000  # about 6,000 rows per 0.001


def test_money_is_decimal_and_dates_are_date32(tiny_tpch):
    schema = pq.read_schema(tiny_tpch / "lineitem.parquet")
    for column in ("l_quantity", "l_extendedprice", "l_discount", "l_tax"):
        assert schema.field(column).type == pa.decimal128(15, 2), column
    for column in ("l_shipdate", "l_commitdate", "l_receiptdate"):
        assert schema.field(column).type == pa.date32(), column
    assert pa.types.is_integer(schema.field("l_orderkey").type)
    returnflag = schema.field("l_returnflag").type
    assert pa.types.is_string(returnflag) or pa.types.is_large_string(returnflag) or returnflag == pa.string_view()
    assert pq.read_schema(tiny_tpch / "orders.parquet").field("o_totalprice").type == pa.decimal128(15, 2)


def test_second_call_generates_nothing(tiny_tpch):
    before = {p.name: p.stat().st_mtime_ns for p in tiny_tpch.iterdir()}
    # An executable that does not exist proves no generator runs when nothing is missing.
    again = ensure_tpch(TINY_SF, tiny_tpch.parent, executable="/nonexistent/tpchgen-cli")
    assert again == tiny_tpch
    assert {p.name: p.stat().st_mtime_ns for p in tiny_tpch.iterdir()} == before


def test_regenerates_only_missing_tables(tiny_tpch, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(tiny_tpch, root / tiny_tpch.name)
    folder = root / tiny_tpch.name
    (folder / "orders.parquet").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    log = tmp_path / "arguments.txt"
    wrapper = _write_script(tmp_path / "tpchgen-wrapper", f'echo "$@" > {log}\nexec {find_tpchgen_cli()} "$@"\n')

    ensure_tpch(TINY_SF, root, executable=wrapper, progress=False)

    assert "--tables orders " in log.read_text() + " "
    after = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert set(after) == {f"{t}.parquet" for t in TPCH_TABLES}
    assert {name: after[name] for name in before} == before
    assert pq.ParquetFile(folder / "orders.parquet").metadata.num_rows > 0


def test_failed_generation_leaves_no_partial_file(tmp_path):
    # A generator that writes half a file and dies, like an interrupted tpchgen-cli.
    broken = _write_script(
        tmp_path / "broken-tpchgen",
        'while [ $# -gt 0 ]; do if [ "$1" = --output-dir ]; then out=$2; fi; shift; done\n'
        'printf PAR1garbage > "$out/lineitem.parquet"\necho "disk full" >&2\nexit 3\n',
    )
    with pytest.raises(TpchDataError, match=r"exit code 3.*disk full"):
        ensure_tpch(TINY_SF, tmp_path / "root", tables=["lineitem"], executable=broken, progress=False)
    folder = tpch_directory(TINY_SF, tmp_path / "root")
    assert list(folder.iterdir()) == []


def test_generator_without_output_file_is_an_error(tmp_path):
    silent = _write_script(tmp_path / "silent-tpchgen", "exit 0\n")
    with pytest.raises(TpchDataError, match="wrote no region.parquet"):
        ensure_tpch(TINY_SF, tmp_path / "root", tables="region", executable=silent, progress=False)
    assert not (tpch_directory(TINY_SF, tmp_path / "root") / "region.parquet").exists()


def test_progress_names_each_table_on_stderr(tmp_path, capsys):
    ensure_tpch(TINY_SF, tmp_path, tables=["nation", "region"], progress=True)
    err = capsys.readouterr().err
    assert "nation" in err and "region" in err and "done in" in err


def test_missing_executable_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TpchDataError, match="pip install tpchgen-cli"):
        ensure_tpch(TINY_SF, tmp_path, tables=["region"])


def test_finds_the_executable_next_to_the_interpreter(tmp_path, monkeypatch):
    fake = _write_script(tmp_path / "tpchgen-cli", "exit 0\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", "")
    assert find_tpchgen_cli() == fake


def test_default_location_follows_gpu_engine_data(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_ENGINE_DATA", str(tmp_path))
    assert tpch_directory(0.1) == tmp_path / "tpch" / "sf0.1"
    assert tpch_directory(1) == tmp_path / "tpch" / "sf1"
    monkeypatch.delenv("GPU_ENGINE_DATA")
    assert tpch_directory(10) == Path.home() / ".cache" / "gpu_engine" / "tpch" / "sf10"


@pytest.mark.parametrize("scale_factor", [0, -1, float("nan"), "1"])
def test_rejects_bad_scale_factors(scale_factor, tmp_path):
    with pytest.raises(TpchDataError, match="scale factor"):
        ensure_tpch(scale_factor, tmp_path)


def test_rejects_unknown_tables(tmp_path):
    with pytest.raises(TpchDataError, match="unknown TPC-H table 'lineitems'"):
        ensure_tpch(TINY_SF, tmp_path, tables=["lineitems"])


class _RecordingRegistry:
    """Stand in for a Session: remember what was registered."""

    def __init__(self):
        self.registered: dict[str, str] = {}

    def register(self, name, source):
        self.registered[name] = source


def test_register_tpch_registers_every_table_file(tiny_tpch):
    registry = _RecordingRegistry()
    names = register_tpch(registry, tiny_tpch)
    assert names == list(TPCH_TABLES)
    assert registry.registered == {t: str(tiny_tpch / f"{t}.parquet") for t in TPCH_TABLES}


def test_register_tpch_with_a_real_session(tiny_tpch):
    from gpu_engine import Session

    session = Session(device="cpu")
    register_tpch(session, tiny_tpch)
    assert set(session.catalog) == set(TPCH_TABLES)
    assert session.catalog["lineitem"].field("l_quantity").type == pa.decimal128(15, 2)


def test_register_tpch_rejects_a_folder_without_tables(tmp_path):
    with pytest.raises(TpchDataError, match="no TPC-H table file"):
        register_tpch(_RecordingRegistry(), tmp_path)
    with pytest.raises(TpchDataError, match="does not exist"):
        register_tpch(_RecordingRegistry(), tmp_path / "missing")


def test_leaves_no_staging_files(tiny_tpch):
    # Nothing but the table files: no staging folder, no .inprogress file.
    leftovers = [p for p in tiny_tpch.iterdir() if not p.name.endswith(".parquet") or p.name.startswith(".")]
    assert leftovers == []
    assert all(os.path.getsize(p) > 0 for p in tiny_tpch.iterdir())
