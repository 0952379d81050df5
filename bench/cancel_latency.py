"""Measure how late a timeout or a Ctrl-C takes effect (issue 28 item 10: "within about a second").

Five cases, each run ``--repeat`` times (medians and maxima are reported):

* ``timeout-query``: ``Session.sql(..., timeout=T)`` on a query whose one batch the eager evaluator runs for
  many seconds (a 1500-term predicate over 1M rows, ``fuse=False``), with deadlines spread over the query
  (``T`` = 0.3, 1, 2 s): the latency is the seconds from the deadline to the ``TimeoutError``;
* ``timeout-compile``: the same during compilation (``compile_mode="inline"``, an empty generated-kernel
  cache: the fused aggregation's kernel compiles on the driver for seconds);
* ``ctrl-c-compile``: the CLI (``python -m gpu_engine sql``, ``GPU_ENGINE_COMPILE_MODE=inline``, an empty
  kernel cache) gets SIGINT as soon as it prints its "compiling kernels" notice; the latency is the seconds
  from the signal to the process's exit (expected: exit code 130 and the one line ``interrupted``);
* ``ctrl-c-query``: the CLI running the long query (its predicate is past a kernel's bound: the eager
  evaluator runs it) gets SIGINT 4 s after the interpreter installed its SIGINT handler (start-up included);
* ``ctrl-c-start-up``: SIGINT 0.2 s after the interpreter installed its SIGINT handler (imports running).

Every CLI run's exit code is recorded; a run that ended with another code than 130 is listed with its stderr.

    python -m bench.cancel_latency --repeat 5 --out bench/results/<date>-cancel-latency-cpu
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

#: The fused aggregation whose kernel compiles for seconds (as tests/exec/test_cancellation.py uses).
COMPILE_QUERY = ("SELECT g, sum(v * 3 - g), max(v + g * 5), min(v * 7 % 13 - g), "
                 "sum(CASE WHEN v % 3 = 1 THEN v ELSE g END), avg(v * 2 + g * 9), max(v % 17 * g - 3), count(*) AS n "
                 "FROM t WHERE v % 11 <> 4 AND v * 2 > g GROUP BY g")
LONG_QUERY = "SELECT count(*) AS n FROM a WHERE " + " AND ".join(f"x <> {i * 7 + 1_000_003}" for i in range(1500))


def _tables(folder: Path) -> None:
    rows = 100_000
    pq.write_table(pa.table({"g": pa.array(np.arange(rows) % 7, pa.int64()),
                             "v": pa.array(np.arange(rows), pa.int64())}), folder / "t.parquet")
    pq.write_table(pa.table({"x": pa.array(np.arange(1_000_000, dtype=np.int64))}), folder / "a.parquet")


def _timeout_sample(folder: Path, case: str, deadline: float) -> dict:
    """Run one ``Session.sql(timeout=deadline)`` in a fresh process; return its seconds past the deadline."""
    code = f"""
import json, os, time
from gpu_engine import Session
case, deadline, folder = {case!r}, {deadline!r}, {str(folder)!r}
if case == "timeout-query":
    session = Session(device="cpu", drivers=2, fuse=False, batch_rows=1 << 21)
    session.register("a", os.path.join(folder, "a.parquet"))
    text = {LONG_QUERY!r}
else:
    session = Session(device="cpu", drivers=2, compile_mode="inline")
    session.register("t", os.path.join(folder, "t.parquet"))
    text = {COMPILE_QUERY!r}
start = time.monotonic()
try:
    session.sql(text, timeout=deadline)
    outcome = "finished"
except TimeoutError:
    outcome = "timeout"
print(json.dumps({{"outcome": outcome, "seconds": time.monotonic() - start}}))
"""
    env = dict(os.environ, GPU_ENGINE_CACHE_DIR=tempfile.mkdtemp(prefix="cancel-latency-kernels-"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        return {"deadline_s": deadline, "outcome": f"exit {done.returncode}", "stderr": done.stderr[-2000:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"deadline_s": deadline, "outcome": result["outcome"], "seconds": round(result["seconds"], 3),
            "late_s": round(result["seconds"] - deadline, 3)}


def _sigint_is_caught(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGINT - 1)))


def _ctrl_c_sample(folder: Path, case: str) -> dict:
    """Run the CLI, send SIGINT at the case's moment, return the seconds from the signal to the exit."""
    from gpu_engine.cli import COMPILING_MESSAGE

    env = dict(os.environ, PYTHONUNBUFFERED="1", GPU_ENGINE_COMPILE_MODE="inline",
               GPU_ENGINE_CACHE_DIR=tempfile.mkdtemp(prefix="cancel-latency-kernels-"))
    text = COMPILE_QUERY if case == "ctrl-c-compile" else LONG_QUERY if case == "ctrl-c-query" else "SELECT 1"
    command = [sys.executable, "-m", "gpu_engine", "sql", "--tables", str(folder), "--device", "cpu", text]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    if case == "ctrl-c-compile":
        for line in process.stderr:
            seen.append(line)
            if COMPILING_MESSAGE in line:
                break
    else:
        while not _sigint_is_caught(process.pid) and process.poll() is None:
            time.sleep(0.005)
        time.sleep(0.2 if case == "ctrl-c-start-up" else 4.0)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=600)
    seconds = time.monotonic() - sent
    sample = {"exit_code": process.returncode, "seconds": round(seconds, 3), "signal_at_s": round(sent - started, 2)}
    stderr = "".join(seen) + stderr
    if process.returncode != 130 or stderr.strip().splitlines()[-1:] != ["interrupted"]:
        sample["stderr"] = stderr[-2000:]
    return sample


def _summary(samples: list[dict], key: str) -> dict:
    values = [s[key] for s in samples if key in s]
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3), "n": len(values)} \
        if values else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", default="timeout-query,timeout-compile,ctrl-c-compile,ctrl-c-query,ctrl-c-start-up")
    parser.add_argument("--out", help="write <out>.json (samples and summaries)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cancel-latency-"))
    _tables(folder)
    report = {"load_average_start": os.getloadavg(), "cases": {}}
    for case in args.cases.split(","):
        samples = []
        for n in range(args.repeat):
            if case.startswith("timeout"):
                for deadline in (0.3, 1.0, 2.0):
                    samples.append(_timeout_sample(folder, case, deadline))
            else:
                samples.append(_ctrl_c_sample(folder, case))
            print(case, samples[-1] if not case.startswith("timeout") else samples[-3:], flush=True)
        key = "late_s" if case.startswith("timeout") else "seconds"
        report["cases"][case] = {"summary": _summary(samples, key), "samples": samples}
        print(case, report["cases"][case]["summary"], flush=True)
    report["load_average_end"] = os.getloadavg()
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
