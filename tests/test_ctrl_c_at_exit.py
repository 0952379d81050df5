"""A Ctrl-C that lands while a finished process exits ends it as interrupted: exit 130, no traceback.

Why: the background compiler's atexit hook waits up to 0.5 s for its worker, so a Ctrl-C pressed as a command
finishes lands there; an exception in an atexit callback is only printed ('Exception ignored in atexit
callback' with a KeyboardInterrupt traceback) and the process exited 0. The signal is raised from inside the
exit path itself (the worker's ``wait``, or an atexit callback that runs after the engine's), never on a
timer, so it lands there on every machine. The worker is a stand-in process (a real one would compile).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.interrupted_children import sigint_ignored_by_the_test_process, with_default_sigint  # noqa: F401

#: Every test here runs with SIGINT ignored in the test process (tests/interrupted_children.py says why).
pytestmark = pytest.mark.usefixtures("sigint_ignored_by_the_test_process")

#: Gives the process's background compiler a stand-in worker whose ``wait`` (what the compiler's atexit hook
#: calls) raises SIGINT in the calling thread first; prints the stand-in's pid.
_STAND_IN_WORKER = """
import os, signal, subprocess, sys
from gpu_engine.codegen import background_compiles

compiler = background_compiles.background_compiler()
worker = subprocess.Popen([sys.executable, "-c", STAND_IN], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
real_wait = worker.wait

def wait(timeout=None):
    worker.wait = real_wait
    signal.raise_signal(signal.SIGINT)
    return real_wait(timeout)

worker.wait = wait
compiler._process = worker
print(worker.pid, flush=True)
"""

#: Raises SIGINT from an atexit callback registered before the CLI's modules load (so it runs after theirs).
_CTRL_C_IN_TEARDOWN = """
import atexit, signal
atexit.register(signal.raise_signal, signal.SIGINT)
print(0, flush=True)
"""

_RUN_CLI = """
import runpy
sys.argv = ["gpu_engine"] + sys.argv[1:]
runpy.run_module("gpu_engine", run_name="__main__")
"""


def _gone(pid: int) -> bool:
    """Return True once ``pid`` has ended (exited and reaped, or a zombie)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    state = next((line.split()[1] for line in status.splitlines() if line.startswith("State:")), "")
    return state in ("Z", "X")


def _run(script: str, args: list[str], cwd: Path, stand_in: str) -> tuple[subprocess.CompletedProcess, int]:
    code = f"STAND_IN = {stand_in!r}\n" + script
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=dict(os.environ, PYTHONUNBUFFERED="1"), preexec_fn=with_default_sigint)
    return done, int(done.stdout.split()[0]) if done.stdout.strip() else 0


@pytest.mark.parametrize("when", ["compiler worker", "later teardown"])
def test_ctrl_c_while_the_cli_exits_ends_with_130_and_one_line(tmp_path, when):
    """The CLI's query is done and printed; a Ctrl-C during its exit gives exit 130 and ``interrupted``."""
    pq.write_table(pa.table({"v": pa.array(np.arange(10), pa.int64())}), tmp_path / "t.parquet")
    setup = _STAND_IN_WORKER if when == "compiler worker" else _CTRL_C_IN_TEARDOWN
    stand_in = "import sys; sys.stdin.read()"  # as the real worker: it ends when its input closes
    done, pid = _run("import sys\n" + setup + _RUN_CLI,
                     ["sql", "--tables", str(tmp_path), "--device", "cpu", "SELECT count(*) AS n FROM t"],
                     tmp_path, stand_in)
    try:
        assert done.returncode == 130, done.stderr
        assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1] == "interrupted", done.stderr
        assert "10" in done.stdout  # the query's answer was printed before the exit
    finally:
        if pid:
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def test_ctrl_c_while_a_program_exits_kills_the_worker_and_ends_with_130(tmp_path):
    """A program using the engine (no CLI): the compiler's atexit hook kills its worker and exits 130 silently."""
    stand_in = "import time; time.sleep(300)"  # does not end by itself within the test
    done, pid = _run(_STAND_IN_WORKER, [], tmp_path, stand_in)
    try:
        assert done.returncode == 130, done.stderr
        assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
        deadline = time.monotonic() + 60  # SIGKILL was sent before the exit; the kernel ends it promptly
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(pid)
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
