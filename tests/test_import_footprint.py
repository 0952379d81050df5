"""Importing the engine loads no compiler, no generated kernel and no library a query may not need.

Why: every new process (the CLI, a Spark executor, a test worker) pays for
what ``import gpu_engine`` pulls in before its first query (issue 29 item 4:
``import gpu_engine`` + the CLI took 3.3 s under load). numba's CUDA target,
generated kernel modules and pandas load when a query uses them, not at
import. Module sets, not seconds, so the test is stable on a loaded machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Loaded on first use only: numba's CUDA target (and simulator), the pandas bridge, DuckDB, Spark.
HEAVY = ("numba.cuda", "numba.cuda.simulator", "pandas", "duckdb", "pyspark")


def _modules_after(statement: str) -> list[str]:
    """Return the modules a new interpreter holds after running ``statement`` (and none before it)."""
    code = ("import sys, json\nbefore = set(sys.modules)\n" + statement
            + "\nprint(json.dumps(sorted(set(sys.modules) - before)))")
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_gpu_engine_loads_only_the_package_and_its_errors():
    loaded = _modules_after("import gpu_engine")
    assert set(loaded) <= {"gpu_engine", "gpu_engine.errors"}, loaded


def test_the_cli_module_loads_no_compiler():
    loaded = set(_modules_after("import gpu_engine.cli"))
    assert not loaded & {"numba", "pyarrow", *HEAVY}, sorted(loaded & {"numba", "pyarrow", *HEAVY})


def test_session_loads_no_cuda_target_and_no_generated_kernel():
    loaded = _modules_after("from gpu_engine import Session\nSession(device='cpu', drivers=1)")
    assert not set(loaded) & set(HEAVY), sorted(set(loaded) & set(HEAVY))
    assert not [name for name in loaded if name.startswith("gpu_engine_generated")]


#: Each runs in a new cpu process over Parquet with NULLs in every column: the scan's conversions (integers, dates,
#: decimals, booleans, dictionary strings), a join's key filters (integer and string, one build side empty), a wide
#: DECIMAL literal.
COLD_QUERIES = (
    "SELECT f.s, count(*) AS n, sum(f.amount) AS total, min(f.d) AS first_day, max(f.x) AS top, "
    "CAST(0 AS DECIMAL(38, 0)) AS zero FROM fact f JOIN dim d ON f.k = d.k "
    "WHERE f.d >= DATE '2020-01-05' AND f.flag GROUP BY f.s",
    "SELECT count(*) AS n FROM fact f JOIN dim d ON f.s = d.name",
    "SELECT count(*) AS n FROM fact f JOIN dim d ON f.k = d.k WHERE d.name = 'nobody'",
)


def _cold_tables(folder: Path) -> dict[str, Path]:
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 600
    every = lambda step, value: [None if i % step == 0 else value(i) for i in range(rows)]  # noqa: E731
    fact = pa.table({
        "k": pa.array(every(7, lambda i: i % 40), pa.int64()),
        "s": pa.array(every(5, lambda i: f"name{i % 9}"), pa.string()),
        "d": pa.array(every(11, lambda i: datetime.date(2020, 1, 1) + datetime.timedelta(days=i % 30)), pa.date32()),
        "amount": pa.array(every(13, lambda i: decimal.Decimal(i).scaleb(-2)), pa.decimal128(12, 2)),
        "flag": pa.array(every(3, lambda i: i % 4 != 0), pa.bool_()),
        "x": pa.array(every(17, lambda i: i / 7), pa.float64()),
    })
    dim = pa.table({"k": pa.array(range(0, 40, 2), pa.int64()),
                    "name": pa.array([f"name{i % 12}" for i in range(20)], pa.string())})
    paths = {"fact": folder / "fact.parquet", "dim": folder / "dim.parquet"}
    pq.write_table(fact, paths["fact"], row_group_size=200)
    pq.write_table(dim, paths["dim"])
    return paths


def test_a_cpu_process_s_first_queries_import_neither_pandas_nor_numba_cuda_and_cuda_sim_can_follow(tmp_path):
    """pyarrow imports pandas (~300 modules, ~0.2 s CPU) at its first NumPy conversion (``to_numpy``,
    ``pa.array``, a Python scalar in ``fill_null``): the engine's scan, key-filter and literal paths read and
    wrap Arrow buffers instead (``gpu_engine.columnar.arrow_numpy``). Kernel modules define CUDA twins, which
    import numba.cuda only at a first use (``gpu_engine.kernels.lazy_cuda``): so the same process can then make
    a ``cuda-sim`` device (refused before: numba.cuda was imported without its simulator) and its kernels, lazy
    until then, run as numba's simulated dispatchers."""
    import pyarrow as pa

    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    paths = _cold_tables(tmp_path)
    folder = str(tmp_path)
    statement = (
        "import json, sys\nimport pyarrow as pa\nfrom gpu_engine import Session\n"
        "def answer(session, number, text):\n"
        "    table = session.sql(text)\n"
        f"    with pa.ipc.new_file({folder!r} + f'/answer{{number}}.arrow', table.schema) as out:\n"
        "        out.write_table(table)\n"
        "session = Session(device='cpu', drivers=2)\n"
        + "".join(f"session.register({name!r}, {str(path)!r})\n" for name, path in paths.items())
        + "for number, text in enumerate(" + repr(COLD_QUERIES) + "):\n"
        "    answer(session, number, text)\n"
        f"open({folder!r} + '/cpu_modules.json', 'w').write(json.dumps(sorted(set(sys.modules) - before)))\n"
        "simulated = Session(device='cuda-sim', drivers=1)\n"
        + "".join(f"simulated.register({name!r}, {str(path)!r})\n" for name, path in paths.items())
        + f"answer(simulated, 'sim', {COLD_QUERIES[0]!r})\n"
    )
    loaded = set(_modules_after(statement))
    assert "numba.cuda.simulator" in loaded
    connection = duckdb_connection(paths)
    for number, text in [*enumerate(COLD_QUERIES), ("sim", COLD_QUERIES[0])]:
        answer = pa.ipc.open_file(tmp_path / f"answer{number}.arrow").read_all()
        assert rows_mismatch(answer, duckdb_table(connection, text)) is None, (number, text)
    cpu_loaded = set(json.loads((tmp_path / "cpu_modules.json").read_text()))
    assert "pandas" not in cpu_loaded, "a cpu query imported pandas"
    assert "numba.cuda" not in cpu_loaded, "a cpu query imported numba's CUDA target"


#: Constant rows (VALUES, a SELECT without FROM: built from Python values), TIME columns (microseconds of the day),
#: TIME/TIMESTAMP literals (text parsed on the host) and a string split's pieces, each with NULLs.
COLD_CONSTANT_QUERIES = (
    "SELECT * FROM (VALUES (1, 'a', 1.5), (2, NULL, NULL), (NULL, 'c', 2.25)) v(x, y, z)",
    "SELECT 1.5::DECIMAL(10, 2) AS d, TIME '12:34:56.5' AS t, DATE '2020-02-29' AS day, 'x' AS s, NULL AS n",
    "SELECT t, t > TIME '01:00:00' AS later, ts > TIMESTAMP '2020-06-01 00:00:00' AS newer FROM times",
    "SELECT unnest(string_split(s, ',')) AS piece FROM times",
)


def _time_table(folder: Path) -> Path:
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "times.parquet"
    pq.write_table(pa.table({
        "t": pa.array([datetime.time(1, 2, 3, 400000), None, datetime.time(23, 0)], pa.time64("us")),
        "ts": pa.array([datetime.datetime(2020, 1, 1, 3), datetime.datetime(2021, 5, 6), None], pa.timestamp("us")),
        "s": pa.array(["a,b", None, "c"], pa.string()),
    }), path)
    return path


def test_a_cpu_process_s_constant_rows_time_columns_and_split_pieces_import_no_pandas(tmp_path):
    """``pa.array(list)``, ``pa.scalar`` and pyarrow's arithmetic with a Python scalar import pandas: constant rows
    and split pieces are written into Arrow buffers (``arrow_numpy.arrow_from_pylist``), TIME columns converted
    in NumPy, and the host text parser reads Arrow buffers (``expressions/text_on_host.py``)."""
    import pyarrow as pa

    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    path = _time_table(tmp_path)
    folder = str(tmp_path)
    statement = (
        "import json, os, sys\nimport pyarrow as pa\n"
        "os.environ['GPU_ENGINE_COMPILE_MODE'] = 'lowest'  # the conversions are the point, not fused kernels\n"
        "from gpu_engine import Session\n"
        "session = Session(device='cpu', drivers=1)\n"
        f"session.register('times', {str(path)!r})\n"
        "for number, text in enumerate(" + repr(COLD_CONSTANT_QUERIES) + "):\n"
        "    table = session.sql(text)\n"
        f"    with pa.ipc.new_file({folder!r} + f'/answer{{number}}.arrow', table.schema) as out:\n"
        "        out.write_table(table)\n"
    )
    loaded = set(_modules_after(statement))
    assert "pandas" not in loaded, "a cpu query imported pandas"
    connection = duckdb_connection({"times": path})
    for number, text in enumerate(COLD_CONSTANT_QUERIES):
        answer = pa.ipc.open_file(tmp_path / f"answer{number}.arrow").read_all()
        assert rows_mismatch(answer, duckdb_table(connection, text)) is None, (number, text)


def test_reading_a_plan_s_json_with_literals_imports_no_pandas():
    """A Spark worker reads each fragment from JSON and validates it: the literal check used ``pa.scalar``, which
    imports pandas (~2 s of a Spark worker's first fragment under load); it converts as ``arrow_from_pylist``."""
    statement = (
        "import datetime, decimal\nimport pyarrow as pa\n"
        "from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal\n"
        "from gpu_engine.plans.nodes import FilterNode, TableScanNode\n"
        "from gpu_engine.plans.serialization import plan_from_json, plan_to_json\n"
        "schema = pa.schema([('d', pa.date32()), ('x', pa.float64()), ('m', pa.decimal128(9, 2)), ('s', pa.string())])\n"
        "source = TableScanNode(id='0', output_schema=schema, sources=(), table_name='t', columns=tuple(schema.names))\n"
        "checks = [BinaryOp('lt', ColumnRef('d', pa.date32()), Literal(datetime.date(1995, 6, 17), pa.date32()), "
        "pa.bool_()), BinaryOp('gt', ColumnRef('x', pa.float64()), Literal(150000.5, pa.float64()), pa.bool_()), "
        "BinaryOp('gt', ColumnRef('m', pa.decimal128(9, 2)), Literal(decimal.Decimal('1.25'), pa.decimal128(9, 2)), "
        "pa.bool_()), BinaryOp('eq', ColumnRef('s', pa.string()), Literal('x', pa.string()), pa.bool_())]\n"
        "plan = source\n"
        "for number, check in enumerate(checks, 1):\n"
        "    plan = FilterNode(id=str(number), output_schema=schema, sources=(plan,), predicate=check)\n"
        "assert plan_from_json(plan_to_json(plan)) == plan\n"
    )
    loaded = set(_modules_after(statement))
    assert "pandas" not in loaded, "reading a plan's JSON imported pandas"
