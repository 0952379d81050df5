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
