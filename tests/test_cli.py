"""Test the ``gpu-engine`` command line: usage errors exit 2 with a message; the demo runs end to end."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpu_engine import cli
from gpu_engine.device import gpu_available
from gpu_engine.plans import tpch


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "required: COMMAND"),
        (["fly"], "invalid choice: 'fly'"),
        (["demo", "--sf", "0"], "--sf: must be a positive number"),
        (["demo", "--sf", "big"], "--sf: not a number"),
        (["demo", "--device", "tpu"], "--device: invalid choice: 'tpu'"),
        (["demo", "--drivers", "0"], "--drivers: must be at least 1"),
        (["query", "--runs", "x"], "--runs: not an integer"),
        (["demo", "--queries", "1"], "unrecognized arguments: --queries"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "queries, message",
    [
        ("q99", "there is no query 99"),
        ("lineitem", "unknown query 'lineitem'"),
        (",", "no query given"),
    ],
)
def test_bad_query_lists_exit_2_with_a_message(queries, message, capsys, tmp_path):
    code = cli.main(["query", "--queries", queries, "--data-dir", str(tmp_path), "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 2
    assert message in captured.err
    assert list(tmp_path.iterdir()) == []  # rejected before generating anything


def test_missing_tpchgen_cli_exits_2(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    code = cli.main(["demo", "--sf", "0.001", "--device", "cpu", "--data-dir", str(tmp_path / "data")])
    assert code == 2
    assert "pip install tpchgen-cli" in capsys.readouterr().err


@pytest.mark.skipif(gpu_available(), reason="this machine has a GPU, so device 'cuda' is not an error")
def test_cuda_without_a_gpu_exits_2(capsys, tmp_path):
    code = cli.main(["demo", "--device", "cuda", "--data-dir", str(tmp_path)])
    assert code == 2
    assert "cuda" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # the device is checked before data is generated


def test_python_dash_m_prints_usage_errors_without_traceback():
    completed = subprocess.run(
        [sys.executable, "-m", "gpu_engine", "demo", "--sf", "-3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 2
    assert "gpu-engine demo: error: argument --sf" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_format_table_aligns_and_counts_rows():
    import decimal

    import pyarrow as pa

    table = pa.table({"flag": ["A", "N", "R"], "sum": pa.array([decimal.Decimal("1.50")] * 3, pa.decimal128(15, 2))})
    text = cli.format_table(table, max_rows=2)
    assert text.splitlines() == [
        "flag   sum",
        "----  ----",
        "A     1.50",
        "N     1.50",
        "... 3 rows in all",
    ]


def test_demo_end_to_end(capsys, tmp_path):
    """Run the whole demo at SF 0.001 on the CPU: needs the complete engine (scan, filter, aggregation, order by)."""
    code = cli.main(["demo", "--sf", "0.001", "--device", "cpu", "--drivers", "2", "--data-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = captured.out
    for heading in ("== primer ==", "== q1 ==", "== q6 ==", "== explain analyze q1 =="):
        assert heading in out
    assert out.count("DuckDB:") == 3
    assert "returned" not in out  # the engine and DuckDB agree on row counts
    assert "l_returnflag" in out and "count_order" in out and "revenue" in out
    assert "lineitem" in captured.err  # generation progress went to stderr
    assert (tmp_path / "sf0.001" / "lineitem.parquet").is_file()


def test_query_command_end_to_end(capsys, tmp_path):
    """Run Q6 with explain through ``gpu-engine query``: needs the complete engine."""
    code = cli.main(
        [
            "query",
            "--sf",
            "0.001",
            "--queries",
            "q6",
            "--runs",
            "1",
            "--explain",
            "--device",
            "cpu",
            "--drivers",
            "1",
            "--no-duckdb",
            "--data-dir",
            str(tmp_path),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "== q6 ==" in captured.out and "== explain analyze q6 ==" in captured.out
    assert "DuckDB:" not in captured.out
    assert "(1 row)" in captured.out


def test_tpch_command_runs_queries_and_prints_a_summary(capsys, tmp_path):
    """``gpu-engine tpch`` generates the data, runs the chosen queries and ends with the DuckDB summary."""
    code = cli.main(["tpch", "--sf", "0.001", "--queries", "3,q6", "--runs", "1", "--device", "cpu",
                     "--drivers", "2", "--data-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = captured.out
    assert "== q3 ==" in out and "== q6 ==" in out
    assert "returned" not in out  # the engine and DuckDB agree on row counts
    summary = out[out.index("query  rows"):].splitlines()
    assert [line.split()[0] for line in summary[2:5]] == ["q3", "q6", "total"]
    assert all(line.rstrip().endswith("x") for line in summary[2:5])  # a ratio against DuckDB on every line


def test_tpch_query_list_all_means_every_planned_query():
    assert [c.name for c in cli.parse_query_list("all")] == [f"q{n}" for n in tpch.available_queries()]


def test_tpch_summary_without_duckdb_has_no_ratio():
    text = cli.format_summary([("q1", 4, 0.5, None), ("q6", 1, 0.25, None)])
    lines = text.splitlines()
    assert lines[2].split() == ["q1", "4", "500.0", "ms", "-", "-"]
    assert lines[4].split() == ["total", "750.0", "ms", "-", "-"]


def test_default_drivers_are_one_on_a_gpu_and_the_cores_elsewhere(capsys, tmp_path):
    import os
    from types import SimpleNamespace

    from gpu_engine.device import Device, get_device

    assert cli.default_drivers(Device("cuda", SimpleNamespace(), kernel_flavor="cuda")) == 1
    assert cli.default_drivers(get_device("cpu")) == max(1, min(4, os.cpu_count() or 1))
    assert cli.build_parser().parse_args(["tpch"]).drivers is None  # chosen once the device is known
    code = cli.main(["query", "--sf", "0.001", "--queries", "q6", "--runs", "1", "--device", "cpu", "--no-duckdb",
                     "--data-dir", str(tmp_path)])
    assert code == 0
    assert f"with {cli.default_drivers(get_device('cpu'))} driver(s)" in capsys.readouterr().out
