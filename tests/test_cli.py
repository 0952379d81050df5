"""Test the ``gpu-engine`` command line: usage errors exit 2 with a message; the demo runs end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
        (["sql", "--dialect", "nosuch", "SELECT 1"], "--dialect: invalid choice: 'nosuch'"),
        (["sql", "--plan", "--explain-analyze", "SELECT 1"], "not allowed with argument --plan"),
        (["tpch", "--explain-analyze", "--plan"], "not allowed with argument --explain-analyze"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpu-engine {version('gpu-engine')}"


@pytest.mark.parametrize("command", ["demo", "query", "tpch", "sql"])
def test_every_command_speaks_one_vocabulary(command):
    """The data, device and explain options are spelled (and mean) the same in every command."""
    args = cli.build_parser().parse_args([command, "--sf", "0.5", "--data-dir", "d", "--device", "cpu",
                                          "--drivers", "2", "--rows", "3", "--full-explain", "--traceback"])
    assert (args.sf, str(args.data_dir), args.device, args.drivers, args.rows) == (0.5, "d", "cpu", 2, 3)
    if command != "demo":
        assert cli.build_parser().parse_args([command, "--plan"]).plan
        assert cli.build_parser().parse_args([command, "--explain-analyze"]).explain_analyze


@pytest.mark.parametrize("argv, expected, warning", [
    (["sql", "--tpch", "0.5", "x"], {"sf": 0.5}, "--tpch is deprecated; use --sf"),
    (["sql", "--data", "dir", "x"], {"tables": Path("dir")}, "--data is deprecated; use --tables"),
    (["sql", "--explain", "x"], {"plan": True, "explain_analyze": False}, "--explain is deprecated; use --plan"),
    (["query", "--explain"], {"explain_analyze": True, "plan": False}, "--explain is deprecated; use --explain-analyze"),
    (["tpch", "--explain"], {"explain_analyze": True, "plan": False}, "--explain is deprecated; use --explain-analyze"),
])
def test_old_spellings_still_work_with_a_deprecation_warning(argv, expected, warning, capsys):
    args = cli.build_parser().parse_args(argv)
    assert {name: getattr(args, name) for name in expected} == expected
    assert capsys.readouterr().err.strip() == f"gpu-engine {argv[0]}: warning: {warning}"


def test_sql_refuses_own_tables_together_with_tpch_in_one_line(capsys, tmp_path):
    code = cli.main(["sql", "SELECT 1", "--tables", str(tmp_path), "--sf", "0.01"])
    err = capsys.readouterr().err
    assert code == 2 and "give one or the other" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # nothing generated


def test_sql_plans_or_runs_then_explains(capsys, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [1, 2, 2, 3], "v": [1.0, 2.0, 3.0, 4.0]}), tmp_path / "t.parquet")
    query = "SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k"
    assert cli.main(["sql", query, "--tables", str(tmp_path), "--device", "cpu", "--plan"]) == 0
    planned = capsys.readouterr().out
    assert "-- TableScan" in planned and "rows in" not in planned and "Task" not in planned  # not run
    assert cli.main(["sql", query, "--tables", str(tmp_path), "--device", "cpu", "--explain-analyze"]) == 0
    out = capsys.readouterr().out
    assert "3 rows in" in out and out.index("3 rows in") < out.index("Task ")  # the rows, then the analysis
    assert "-- TableScan" in out[out.index("Task "):] and "output 3 rows" in out[out.index("Task "):]


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
    assert out.count("result matches DuckDB's") == 3 and "DIFFERS" not in out
    assert out.count("× slower)") + out.count("× faster)") + out.count("(engine as fast)") == 3
    assert "l_returnflag" in out and "count_order" in out and "revenue" in out
    primer_rows = out[out.index("== primer =="):].splitlines()[3:8]
    assert [int(line.split()[0]) for line in primer_rows] == [1, 2, 3, 4, 5]  # ORDER BY l_partkey
    explain = out[out.index("== explain analyze q1 =="):].splitlines()
    node_lines = [line.strip() for line in explain if line.lstrip().startswith("-- ")]
    assert max(len(line) for line in node_lines) <= 160 and "(10 columns)" in out  # shortened by default
    assert "lineitem" in captured.err  # generation progress went to stderr
    assert (tmp_path / "sf0.001" / "lineitem.parquet").is_file()


def test_query_command_end_to_end(capsys, tmp_path):
    """Run Q6 with explain-analyze through ``gpu-engine query``: needs the complete engine."""
    code = cli.main(
        [
            "query",
            "--sf",
            "0.001",
            "--queries",
            "q6",
            "--runs",
            "1",
            "--explain-analyze",
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
    assert out.count("result matches DuckDB's") == 2
    summary = out[out.index("query  rows"):].splitlines()
    assert summary[0].split()[-3:] == ["engine", "vs", "DuckDB"]
    assert [line.split()[0] for line in summary[2:5]] == ["q3", "q6", "total"]
    # every line says how the engine compares with DuckDB, in words
    assert all(line.rstrip().endswith(("× slower", "× faster", "as fast")) for line in summary[2:5])


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
    assert cli.default_drivers(get_device("cpu")) == max(1, min(4, len(os.sched_getaffinity(0))))
    assert cli.build_parser().parse_args(["tpch"]).drivers is None  # chosen once the device is known
    code = cli.main(["query", "--sf", "0.001", "--queries", "q6", "--runs", "1", "--device", "cpu", "--no-duckdb",
                     "--data-dir", str(tmp_path)])
    assert code == 0
    assert f"with {cli.default_drivers(get_device('cpu'))} driver(s)" in capsys.readouterr().out


@pytest.mark.parametrize("seconds, reference, expected", [
    (3.67, 1.0, "3.67× slower"),
    (1.0, 2.1, "2.10× faster"),
    (1.0, 1.001, "as fast"),
    (1.0, None, "-"),
    (None, 1.0, "-"),
])
def test_speed_ratio_says_slower_or_faster(seconds, reference, expected):
    assert cli.speed_ratio(seconds, reference) == expected


def test_query_runs_the_demo_scale_factor_by_default():
    parser = cli.build_parser()
    assert parser.parse_args(["query"]).sf == parser.parse_args(["demo"]).sf == cli.DEMO_SCALE_FACTOR
    assert parser.parse_args(["tpch"]).sf == 1.0


def test_compare_with_duckdb_finds_wrong_values_order_and_counts():
    import decimal

    import pyarrow as pa

    money = pa.decimal128(15, 2)
    duck = pa.table({"k": pa.array([1, 2, 3]), "s": pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("2")], money),
                     "f": [0.1 + 0.2, 1.0, 2.0]})
    engine = pa.table({"k": pa.array([3, 1, 2]), "s": pa.array([decimal.Decimal("2.00"), decimal.Decimal("1.5"), None],
                                                               pa.decimal128(38, 2)),
                       "f": [2.0, 0.3, 1.0]})
    assert cli.compare_with_duckdb(engine, duck, ordered=False) is None  # floats within 1e-9, decimals by value
    assert "row 0 differs" in cli.compare_with_duckdb(engine, duck, ordered=True)
    wrong = engine.set_column(1, "s", pa.array([decimal.Decimal("2.01"), decimal.Decimal("1.5"), None], money))
    assert cli.compare_with_duckdb(wrong, duck, ordered=False).startswith("row 2 differs: engine (3, Decimal('2.01')")
    assert "row counts differ" in cli.compare_with_duckdb(engine.slice(0, 2), duck, ordered=False)
    assert "column names differ" in cli.compare_with_duckdb(engine.rename_columns(["k", "s", "g"]), duck, False)


def test_a_result_that_differs_from_duckdb_fails_the_command(capsys, tmp_path, monkeypatch):
    """DuckDB runs SQL whose counts are one higher than the primer's: the command must say so and exit 1."""
    (primer,) = cli.parse_query_list("primer")
    wrong_sql = primer.sql.replace("count(*) AS count", "count(*) + 1 AS count")
    monkeypatch.setattr(cli, "parse_query_list", lambda text, *scale: [cli.QueryChoice("primer", primer.build_plan,
                                                                                        wrong_sql, ordered=True)])
    code = cli.main(["query", "--sf", "0.001", "--queries", "primer", "--runs", "1", "--device", "cpu",
                     "--drivers", "1", "--data-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 1
    assert "result DIFFERS from DuckDB's: row 0 differs" in captured.out
    assert "primer: the engine's result differs from DuckDB's" in captured.err


def test_full_explain_prints_whole_lines(capsys, tmp_path):
    code = cli.main(["query", "--sf", "0.001", "--queries", "q1", "--runs", "1", "--device", "cpu", "--drivers", "1",
                     "--no-duckdb", "--explain-analyze", "--full-explain", "--data-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    explain = out[out.index("== explain analyze q1 =="):]
    assert "[…]" not in explain and "sum_qty:decimal128(38, 2)" in explain
    assert max(len(line) for line in explain.splitlines()) > 300


def test_a_cold_kernel_cache_prints_a_compiling_line_once_and_a_warm_one_none(tmp_path):
    """Two processes share a new kernel cache folder: the first compiles (and says so), the second loads."""
    import os

    env = dict(os.environ, GPU_ENGINE_CACHE_DIR=str(tmp_path / "kernels"))
    command = [sys.executable, "-m", "gpu_engine", "query", "--sf", "0.001", "--queries", "q6", "--runs", "1",
               "--device", "cpu", "--drivers", "1", "--no-duckdb", "--data-dir", str(tmp_path / "data")]
    cold = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr.count(cli.COMPILING_MESSAGE) == 1
    warm = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert warm.returncode == 0, warm.stderr
    assert cli.COMPILING_MESSAGE not in warm.stderr


def test_an_empty_ptx_cache_is_seen_as_cold(tmp_path, monkeypatch):
    """On a GPU the CLI prints the compiling line up front when no kernel was ever compiled to PTX here."""
    monkeypatch.setenv("GPU_ENGINE_PTX_CACHE", str(tmp_path / "ptx"))
    assert cli.ptx_cache_is_empty()  # no folder yet
    (tmp_path / "ptx").mkdir()
    (tmp_path / "ptx" / ".partial.tmp").write_text("")
    assert cli.ptx_cache_is_empty()  # an unfinished write is not an entry
    (tmp_path / "ptx" / "kernel-0123.ptx").write_text("//")
    assert not cli.ptx_cache_is_empty()


def test_sql_skips_an_unreadable_file_of_its_tables_folder_and_names_it_where_a_query_reads_it(capsys, tmp_path):
    """One damaged file in ``--tables`` does not fail the queries that never read it (it did: every file was
    registered up front); a query that reads it fails with that file's error, not 'unknown table'."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [1, 2, 2, 3]}), tmp_path / "t.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is no parquet file PAR1")
    assert cli.main(["sql", "SELECT count(*) AS n FROM t", "--tables", str(tmp_path), "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert "4" in captured.out and "1 row in" in captured.out
    assert "skipped table 'bad'" in captured.err and "bad.parquet" in captured.err
    code = cli.main(["sql", "SELECT count(*) AS n FROM t JOIN bad ON t.k = bad.k", "--tables", str(tmp_path),
                     "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 1 and "DataSourceError" in err and "bad.parquet" in err and "unknown table" not in err


def test_the_first_run_line_says_what_the_first_run_did(capsys, tmp_path, monkeypatch):
    """The demo's first-run note comes from the Task's counters: kernels the drivers compiled (``inline``), else
    the batches that ran on the lowest tier while their kernels compile in the background; it used to say
    "which includes any JIT compilation" whatever happened (nothing compiles on the drivers by default)."""
    from gpu_engine.exec.operator import OperatorStats
    from gpu_engine.exec.task import PipelineStats, TaskStats

    waiting = OperatorStats("FusedAggregation", "3", 1, 0, runtime={"lowest_tier_batches": 4})
    stats = TaskStats("t", "FINISHED", 0.1, 1, [PipelineStats(0, 2, [waiting])])
    assert cli.first_run_note(stats) == ("nothing compiled on the drivers; 4 batch(es) ran on the lowest tier "
                                         "while their generated kernels compile in the background")
    assert cli.first_run_note(TaskStats("t", "FINISHED", 0.1, 1, [], 2, 1.5)) \
        == "2 kernel(s) compiled on the drivers, 1.50 s of it"
    assert cli.first_run_note(TaskStats("t", "FINISHED", 0.1, 1, [])) == "nothing compiled on the drivers"
    monkeypatch.setenv("GPU_ENGINE_COMPILE_MODE", "lowest")  # nothing can compile: the line must not say it did
    code = cli.main(["query", "--sf", "0.001", "--queries", "q6", "--runs", "1", "--device", "cpu", "--drivers", "1",
                     "--no-duckdb", "--data-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "JIT" not in out and "first run " in out and "nothing compiled on the drivers" in out


class _Exited(Exception):
    pass


@pytest.mark.parametrize("argv, torn_down", [(["precompile"], False), (["precompile", "--device", "cpu"], False),
                                             (["sql", "SELECT 1"], True)])
def test_precompile_ends_the_process_without_the_interpreter_teardown(monkeypatch, argv, torn_down):
    """After precompile, run() runs the atexit functions and ends the process with os._exit: the teardown's final
    garbage collection took 9-15 s of wall after the summary line. Other commands exit as before."""
    calls = []
    monkeypatch.setattr(sys, "argv", ["gpu-engine", *argv])
    monkeypatch.setattr(cli, "main", lambda: 0)
    monkeypatch.setattr(cli.signal, "signal", lambda *args: None)
    monkeypatch.setattr(cli.atexit, "_run_exitfuncs", lambda: calls.append("atexit"))

    def exit_now(code):
        calls.append(("os._exit", code))
        raise _Exited

    monkeypatch.setattr(cli.os, "_exit", exit_now)
    with pytest.raises(SystemExit if torn_down else _Exited):
        cli.run()
    assert calls == ([] if torn_down else ["atexit", ("os._exit", 0)])
