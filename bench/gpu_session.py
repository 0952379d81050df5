"""Run every check a lent GPU machine should make, as steps with their own time limits, in one or two calls.

Why one script: a GPU machine is lent for minutes (15 in all per session, at
most 10 a command, minutes to start), so what it runs must be prepared here,
run in priority order, stop each step at its limit without stopping the rest,
and leave whatever it measured under ``$OUT`` even when the call is cut off.
``bench/gpu_session.sh`` installs the carried wheels and calls this module.

Steps, in priority order (the issue's: tests, TPC-H, TPC-DS, micro-benchmarks)::

    env     the machine, the versions, the GPU's compute capability, the carried kernel cache
    data    TPC-H at --sf with tpchgen-cli (kept when the warm machine has it already)
    tests   pytest -m gpu, one process per test file, --workers at a time, each file under its own
            limit; the list of files and their result goes to tests.tsv as each file ends
    tpch    bench.run_gpu_bench: all 22 queries cold (Parquet) and hot (Session.cache) against DuckDB
            in the same process, the runners interleaved run by run, medians of --runs (>= 3),
            the first run (JIT; compile mode inline unless $GPU_ENGINE_COMPILE_MODE says otherwise)
            apart, the device synchronized before every clock
    ptxoff  bench.ptx_off_driver: TPC-H first runs (SF1) in the background compile mode with no generated
            kernel's PTX cached: none may compile on a driver (the compile process compiles them, the
            module loads off the drivers), results against DuckDB on both tiers (issue 29's cuda half)
    tpcds   bench.run_tpcds: the 99 queries at --tpcds-sf on the device, each result against DuckDB
    micro   bench.kernel_microbench (against a device-to-device copy) and bench.launch_microbench
    hostdecode  bench.host_decode_bench: lineitem's Q1 columns at --sf decoded on the host by 0, 1, 2, 4, 8, 16
            decode-pool threads (how the host decode scales on the machine's cores)
    decode  the device Parquet decode benchmark (--decode-module), skipped with a message when absent
    arrow   bench.spark_arrow_device: pinned host-to-device GB/s (CuPy), the scan's copier on 1M/4M-row batches
            of lineitem's Q1 columns, and the mapInArrow partition function fed those batches in-process (no
            JVM) on the device and on cpu: rows/s, copies a batch, host-to-device GB/s against the pinned figure

Parts (one call of at most 10 minutes each; ``--budget`` seconds in all, 570 by default):

    part1   env data tests tpch
    part2   env ptxoff tpcds micro hostdecode decode arrow

Each step gets the time left times its share of the steps still to run
(``STEPS`` below), so a step that ends early leaves its time to the next, and
a step with less than its minimum left is skipped, saying so. After every step
``$OUT`` holds: ``summary.md`` (the short table, also printed last),
``summary.json``, ``session.log`` (every step's output, as it comes),
``details.tgz`` (every step's files: reports, logs, tests.tsv) and
``gpucache.tgz`` (the PTX compiled so far, as ``ptx/``; carry it back as
``.gpucache.tgz`` and the next call skips that JIT).

``--small`` checks the script itself on a host device (``cpu``, ``cuda-sim``):
SF 0.01, a few queries, one run, a few test files, tiny micro-benchmarks.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["PARTS", "STEPS", "main", "plan_limits"]


@dataclass(frozen=True)
class Step:
    """One check: its share of a call's time (seconds at the default budget) and the least it can use."""

    name: str
    share_s: float
    min_s: float
    doc: str


STEPS = {
    "env": Step("env", 15, 5, "machine, versions, compute capability, kernel cache"),
    "data": Step("data", 60, 10, "TPC-H data with tpchgen-cli"),
    "tests": Step("tests", 230, 30, "pytest -m gpu, one process per file, a limit per file"),
    "tpch": Step("tpch", 265, 30, "TPC-H cold and hot against DuckDB, interleaved"),
    "ptxoff": Step("ptxoff", 60, 25, "first runs compile no generated kernel's PTX on a driver (background mode)"),
    "tpcds": Step("tpcds", 260, 30, "TPC-DS equality against DuckDB on the device"),
    "micro": Step("micro", 100, 20, "kernel and launch micro-benchmarks"),
    "hostdecode": Step("hostdecode", 60, 15, "host Parquet decode GB/s by decode-pool threads"),
    "decode": Step("decode", 90, 15, "device Parquet decode benchmark"),
    "arrow": Step("arrow", 90, 20, "Spark's Arrow batches to the device: pinned GB/s, copier, partition rows/s"),
}
PARTS = {
    "part1": ("env", "data", "tests", "tpch"),
    "part2": ("env", "ptxoff", "tpcds", "micro", "hostdecode", "decode", "arrow"),
    "all": tuple(STEPS),
}
#: Seconds kept at the end of a call for packing the results.
RESERVE_S = 10
DEFAULT_DECODE_MODULE = "bench.device_decode_bench"


def plan_limits(steps: list[str], remaining_s: float) -> float:
    """Return the first step's share of ``remaining_s`` among ``steps`` (the steps still to run).

    ``main`` raises it to the step's least seconds while the budget allows:
    in a short budget the steps first in priority keep what they need.
    """
    total = sum(STEPS[name].share_s for name in steps)
    return remaining_s * STEPS[steps[0]].share_s / total if total else remaining_s


@dataclass
class StepRecord:
    """What one step did: its status (ok, failed, timeout, skipped), seconds, limit and a one-line headline."""

    step: str
    status: str = "not run"
    seconds: float = 0.0
    limit_s: float = 0.0
    headline: str = ""
    details: dict = field(default_factory=dict)


class Session:
    """Hold the settings, the folders and the records of one call; write ``$OUT`` after every step."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out).resolve()
        self.work = Path(args.work).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.log_path = self.out / "session.log"
        self.records: list[StepRecord] = []
        self.started = time.monotonic() - args.budget_start  # the set-up in gpu_session.sh counts against the budget
        self._log_lock = threading.Lock()
        self.python = args.python or sys.executable

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def log(self, text: str, echo: bool = True) -> None:
        line = f"[gpu_session {datetime.datetime.now():%H:%M:%S} +{self.elapsed():.0f}s] {text}"
        with self._log_lock:
            with self.log_path.open("a") as log:
                log.write(line + "\n")
        if echo:
            print(line, flush=True)

    def run(self, command: list[str], limit_s: float, log_name: str, env: dict | None = None) -> tuple[int, str]:
        """Run ``command`` under ``limit_s`` (its process group killed at the limit); return (exit code, output).

        Exit code 124 means the limit stopped it. The output goes line by line
        to ``work/<log_name>`` and to ``session.log`` as it comes.
        """
        shown = [part if len(part) < 120 else part[:60].replace("\n", " ") + " ..." for part in command]
        self.log(f"$ {shlex.join(shown)}  (limit {limit_s:.0f}s)")
        lines: list[str] = []
        step_log = (self.work / log_name).open("a")
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", env={**os.environ, **(env or {})}, start_new_session=True)

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                step_log.write(line)
                step_log.flush()
                with self._log_lock, self.log_path.open("a") as log:
                    log.write(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            code = process.wait(timeout=max(1.0, limit_s))
        except subprocess.TimeoutExpired:
            _kill_group(process)
            code = 124
            self.log(f"stopped at its limit of {limit_s:.0f}s")
        reader.join(timeout=10)
        step_log.close()
        return code, "".join(lines)

    def save(self) -> None:
        """Write summary.md/json, details.tgz and gpucache.tgz under ``$OUT`` (after every step)."""
        summary = {"date": f"{datetime.datetime.now():%Y-%m-%d %H:%M}", "command": shlex.join(sys.argv),
                   "commit": self.args.commit, "device": self.args.device, "elapsed_s": round(self.elapsed(), 1),
                   "steps": [asdict(record) for record in self.records]}
        _write(self.out / "summary.json", json.dumps(summary, indent=1) + "\n")
        _write(self.out / "summary.md", render_table(summary))
        _pack(self.out / "details.tgz", self.work)
        ptx = Path(os.environ.get("GPU_ENGINE_PTX_CACHE", "") or Path(os.environ.get("GPU_ENGINE_CACHE_DIR", "")) / "ptx")
        if self.args.pack_cache and ptx.is_dir():  # only the PTX: numba's host caches are of no use to the next call
            _pack(self.out / "gpucache.tgz", ptx, "ptx")
            size = (self.out / "gpucache.tgz").stat().st_size
            if size > 15 << 20:
                self.log(f"gpucache.tgz is {size >> 20} MiB: over the 16 MiB a file that comes back may hold")


def _kill_group(process: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def _pack(path: Path, folder: Path, name: str = ".") -> None:
    temporary = path.with_name(path.name + ".tmp")
    with tarfile.open(temporary, "w:gz") as archive:
        archive.add(folder, arcname=name)
    os.replace(temporary, path)


def render_table(summary: dict) -> str:
    """Return the short table of a call: one row per step with its status, seconds, limit and headline."""
    lines = [f"# gpu_session {summary['date']}: device {summary['device']}, commit {summary['commit'] or '?'}, "
             f"{summary['elapsed_s']:.0f} s", "", "| step | status | s | limit s | result |", "|---|---|---|---|---|"]
    for record in summary["steps"]:
        headline = str(record["headline"]).replace("|", "/").replace("\n", " ")
        lines.append(f"| {record['step']} | {record['status']} | {record['seconds']:.0f} | {record['limit_s']:.0f} | "
                     f"{headline} |")
    return "\n".join(lines) + "\n"


def _status(code: int) -> str:
    return "ok" if code == 0 else "timeout" if code == 124 else "failed"


# ------------------------------------------------------------------ steps
def step_env(session: Session, record: StepRecord, limit_s: float) -> None:
    """Record the machine: GPU, driver, versions, compute capability, cores, load, the carried kernel cache."""
    script = r"""
import json, os, platform, shutil, subprocess, sys
from importlib import metadata
facts = {"python": platform.python_version(), "cores": os.cpu_count(), "load": os.getloadavg()}
for name in ("numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "numpy", "pyarrow", "duckdb", "sqlglot",
             "tpchgen-cli", "tpcgen-cli", "pytest", "pytest-xdist", "pytest-timeout"):
    try:
        facts[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
if shutil.which("nvidia-smi"):
    facts["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                                   "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
device = sys.argv[1]
if device == "cuda":
    try:
        import cupy
        facts["compute_capability"] = cupy.cuda.Device().compute_capability
    except Exception as error:
        facts["compute_capability"] = f"unknown: {type(error).__name__}: {error}"
from gpu_engine.kernels.ptx_cache import _toolchain, ptx_cache_directory
facts["ptx_toolchain"] = _toolchain()  # part of every PTX cache key: PTX compiled ahead must be keyed the same
ptx = ptx_cache_directory()
facts["ptx_cache"] = str(ptx)
facts["ptx_cached"] = len(list(ptx.glob("*.ptx"))) if ptx.is_dir() else 0
print("ENV " + json.dumps(facts))
"""
    code, output = session.run([session.python, "-c", script, session.args.device], limit_s, "env.log")
    facts = next((json.loads(line[4:]) for line in output.splitlines() if line.startswith("ENV ")), {})
    record.status, record.details = _status(code), facts
    ptx = facts.get("ptx_cached", 0)
    record.headline = (f"{facts.get('gpu') or 'no nvidia-smi'}; cc {facts.get('compute_capability', '-')}; "
                       f"python {facts.get('python')} numba {facts.get('numba')} numba-cuda {facts.get('numba-cuda', '-')}"
                       f" numpy {facts.get('numpy')}; {ptx} PTX cached"
                       + ("" if ptx or session.args.device != "cuda" else
                          " (none carried: kernels compile on the device in this call)"))


_DATA_SCRIPT = """
import sys, time
from gpu_engine.connectors.tpch_data import ensure_tpch
start = time.time()
folder = ensure_tpch(float(sys.argv[1]))
print("DATA", folder, round(time.time() - start, 1), flush=True)
for scale in (0.001, 0.01):  # what the tests read: made once here, not by every test process at once
    ensure_tpch(scale, progress=False)
try:
    from gpu_engine.connectors.tpcds_data import ensure_tpcds
    ensure_tpcds(0.01)
except Exception as error:
    print("no TPC-DS data for the tests:", error)
"""


def step_data(session: Session, record: StepRecord, limit_s: float) -> None:
    """Generate TPC-H at --sf (tpchgen-cli), and the tests' small scales; a warm machine that has them keeps them."""
    script = _DATA_SCRIPT
    code, output = session.run([session.python, "-c", script, str(session.args.sf)], limit_s, "data.log")
    record.status = _status(code)
    found = re.search(r"^DATA (\S+) (\S+)", output, re.M)
    record.headline = f"sf{session.args.sf:g} in {found.group(2)} s: {found.group(1)}" if found else _last_line(output)


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def gpu_test_files(root: Path = REPO_ROOT) -> list[str]:
    """Return the test files that may hold gpu-marked cases (device-parametrized or naming the GPU), largest first."""
    found = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        text = path.read_text(errors="replace")
        if re.search(r"\bdevice_name\b|\bdevice\b|mark\.gpu|GPU_PRESENT|\"cuda\"", text):
            found.append((path.stat().st_size, str(path.relative_to(root))))
    return [name for _, name in sorted(found, key=lambda item: (-item[0], item[1]))]


def test_files_from(text: str) -> list[str]:
    """Return the files ``--test-files`` names: comma-separated, or ``@PATH``: a list, one a line, or a previous
    call's ``tests.tsv``, of which the files that did not pass (failed, timed out, not started) are rerun."""
    if not text.startswith("@"):
        return [name for name in text.split(",") if name.strip()]
    lines = [line for line in Path(text[1:]).read_text().splitlines() if line.strip()]
    if lines and lines[0].startswith("file\tstatus"):
        return [row.split("\t")[0] for row in lines[1:] if row.split("\t")[1] not in ("passed", "no gpu tests")]
    return lines


_PYTEST_COUNTS = re.compile(r"(\d+) (passed|failed|error|errors|skipped|deselected|xfailed|xpassed)")


def _pytest_counts(output: str) -> dict[str, int]:
    lines = [line for line in output.splitlines() if re.search(r" in [\d.]+s", line) and "=" in line or
             re.match(r"^\d+ (passed|failed|deselected|skipped)", line)]
    counts: dict[str, int] = {}
    for number, kind in _PYTEST_COUNTS.findall(lines[-1] if lines else ""):
        counts["error" if kind == "errors" else kind] = int(number)
    return counts


def step_tests(session: Session, record: StepRecord, limit_s: float) -> None:
    """Run ``pytest -m <marker>`` file by file, ``--workers`` processes at a time, each under ``--file-limit``."""
    args = session.args
    files = test_files_from(args.test_files) if args.test_files else gpu_test_files()
    tsv = session.work / "tests.tsv"
    tsv.write_text("file\tstatus\tpassed\tfailed\terror\tskipped\tseconds\n")
    deadline = time.monotonic() + limit_s
    failures: list[str] = []
    results: dict[str, str] = {}
    lock = threading.Lock()
    env = {"GPU_ENGINE_COMPILE_MODE": os.environ.get("GPU_ENGINE_COMPILE_MODE", "inline")}

    def one(name: str) -> None:
        left = deadline - time.monotonic()
        if left < 5:
            status, counts, seconds = "not started", {}, 0.0
        else:
            start = time.monotonic()
            command = [session.python, "-m", "pytest", "-m", args.test_marker, "-q", "-p", "no:cacheprovider",
                       "-p", "no:randomly", "-rfE", "--tb=short", "--timeout", str(int(args.test_timeout)),
                       name]
            code, output = _quiet_run(command, min(args.file_limit, left), env)
            seconds = time.monotonic() - start
            counts = _pytest_counts(output)
            status = ("timeout" if code == 124 else "no gpu tests" if code == 5 else
                      "passed" if code == 0 else "failed")
            bad = [line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))]
            with lock:
                failures.extend(line[:400] for line in bad)
                if status in ("failed", "timeout"):
                    (session.work / "tests-failed.log").open("a").write(f"===== {name} ({status})\n{output[-20000:]}\n")
        with lock:
            results[name] = status
            with tsv.open("a") as table:
                table.write(f"{name}\t{status}\t{counts.get('passed', 0)}\t{counts.get('failed', 0)}\t"
                            f"{counts.get('error', 0)}\t{counts.get('skipped', 0)}\t{seconds:.1f}\n")
            session.log(f"tests: {name}: {status} {counts} {seconds:.0f}s", echo=status not in ("passed", "no gpu tests"))

    session.log(f"tests: {len(files)} files, {args.workers} at a time, marker {args.test_marker!r}, "
                f"{args.file_limit:.0f}s a file")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        list(pool.map(one, files))
    by_status: dict[str, int] = {}
    for status in results.values():
        by_status[status] = by_status.get(status, 0) + 1
    rows = [line.split("\t") for line in tsv.read_text().splitlines()[1:]]
    passed, failed = sum(int(row[2]) for row in rows), sum(int(row[3]) + int(row[4]) for row in rows)
    (session.work / "tests-failures.txt").write_text("\n".join(failures) + "\n")
    record.details = {"files": by_status, "passed": passed, "failed": failed}
    unfinished = by_status.get("timeout", 0) + by_status.get("not started", 0)
    record.status = "ok" if not failed and not unfinished and not by_status.get("failed") else \
        "failed" if failed or by_status.get("failed") else "timeout"
    record.headline = (f"{passed} passed, {failed} failed/errors; files: "
                       + ", ".join(f"{count} {status}" for status, count in sorted(by_status.items()))
                       + (f"; first failure: {failures[0][:160]}" if failures else ""))


def _quiet_run(command: list[str], limit_s: float, env: dict) -> tuple[int, str]:
    """Run ``command`` under ``limit_s`` capturing its output (a test file's process); 124 at the limit."""
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", env={**os.environ, **env}, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=max(1.0, limit_s))
        return process.returncode, output
    except subprocess.TimeoutExpired:
        _kill_group(process)
        output, _ = process.communicate()
        return 124, output + f"\n[stopped at its limit of {limit_s:.0f}s]\n"


def step_tpch(session: Session, record: StepRecord, limit_s: float) -> None:
    """Run bench.run_gpu_bench: every query cold and hot against DuckDB, interleaved, medians of --runs."""
    args = session.args
    folder = session.work / "tpch"
    command = [session.python, "-m", "bench.run_gpu_bench", "--device", args.device, "--sf", f"{args.sf:g}",
               "--runs", str(args.runs), "--drivers", "1", "--queries", args.queries, "--modes", args.modes,
               "--output-dir", str(folder)]
    # Inline compiles: the first run (timed apart) compiles every generated kernel, so the timed runs use them all
    # (in the product's background mode a timed run could still run a batch on the lowest tier).
    code, output = session.run(command, limit_s, "tpch.log",
                               env={"GPU_ENGINE_COMPILE_MODE": os.environ.get("GPU_ENGINE_COMPILE_MODE", "inline")})
    record.status = _status(code)
    reports = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not reports:
        done = output.count("\n[")
        record.headline = f"no report ({done} queries started); see session.log"
        return
    report = json.loads(reports[-1].read_text())
    record.details = tpch_totals(report)
    record.headline = record.details["headline"] + (f" (PARTIAL: {report['partial']})" if report.get("partial") else "")


def tpch_totals(report: dict) -> dict:
    """Return each runner's total of medians over the queries every runner answered, and the wrong or failed ones."""
    results = report["results"]
    runners = sorted({name for q in results for name in q["runners"]})
    complete = [q for q in results if all(q["runners"].get(name, {}).get("median_s") for name in runners)]
    totals = {name: sum(q["runners"][name]["median_s"] for q in complete) for name in runners}
    wrong = [q["query"] for q in results for r in q["runners"].values() if r.get("correct") is False]
    failed = sorted({q["query"] for q in results for r in q["runners"].values()
                     if r.get("error") and r.get("correct") is not False})
    first = {name: sum(q["runners"][name].get("first_run_s") or 0 for q in results if name in q["runners"])
             for name in runners}
    duck = totals.get("duckdb")
    parts = [f"{len(complete)}/{len(results)} queries"]
    for name in runners:
        ratio = "" if name == "duckdb" or not duck or not totals[name] else f" ({_versus(duck / totals[name])})"
        parts.append(f"{name} {totals[name]:.2f} s{ratio}")
    parts.append("first runs " + ", ".join(f"{name} {first[name]:.1f} s" for name in runners if name != "duckdb"))
    jit = [entry for query in (report.get("jit") or {}).values() for entry in query.values() if isinstance(entry, dict)]
    if jit:  # kernels the first runs still compiled: what the carried PTX cache did not hold
        parts.append(f"PTX compiled in first runs {sum(e['first_run_ptx_compiles'] for e in jit)} "
                     f"({sum(e['first_run_ptx_compile_s'] for e in jit):.1f} s)")
    if wrong:
        parts.append("WRONG " + " ".join(wrong))
    if failed:
        parts.append("failed " + " ".join(failed))
    return {"totals_s": totals, "first_runs_s": first, "wrong": wrong, "failed": failed,
            "headline": "; ".join(parts)}


def _versus(speedup: float) -> str:
    """Return ``speedup`` (DuckDB's time over the engine's) as words: "2.0x faster" or "5.0x slower"."""
    return f"{speedup:.2f}x faster" if speedup >= 1 else f"{1 / speedup:.2f}x slower"


def step_ptxoff(session: Session, record: StepRecord, limit_s: float) -> None:
    """Run bench.ptx_off_driver: first runs in the background compile mode count the PTX compiled on the drivers."""
    args = session.args
    command = [session.python, "-m", "bench.ptx_off_driver", "--device", args.device,
               # --small on cuda-sim: Q6 alone (the simulator's Q1 outlasts the step's limit on a loaded host)
               "--sf", "0.01" if args.small else "1",
               "--queries", ("6" if args.device == "cuda-sim" else "1,6") if args.small else "1,3,6,14",
               "--wait", f"{max(10.0, limit_s / 3):.0f}"]
    code, output = session.run(command, limit_s, "ptxoff.log", env={"GPU_ENGINE_COMPILE_MODE": "background"})
    record.status = _status(code)
    found = re.search(r"^PTXOFF (\{.*\})$", output, re.M)
    if found:
        record.details = json.loads(found.group(1))
    line = re.search(r"^generated PTX compiled in this process .*$", output, re.M)
    record.headline = line.group(0) if line else _last_line(output)


def step_tpcds(session: Session, record: StepRecord, limit_s: float) -> None:
    """Run bench.run_tpcds on the device (each result against DuckDB), no timed runs: equality first."""
    args = session.args
    folder = session.work / "tpcds"
    command = [session.python, "-m", "bench.run_tpcds", "--device", args.device, "--sf", f"{args.tpcds_sf:g}",
               "--runs", "0", "--timeout", str(args.tpcds_timeout), "--queries", args.tpcds_queries,
               "--output-dir", str(folder)]
    code, output = session.run(command, limit_s, "tpcds.log")
    counts: dict[str, int] = {}
    for outcome in re.findall(r"^\s*q\d+\s+(equal|names|wrong|refused|error|internal)\b", output, re.M):
        counts[outcome] = counts.get(outcome, 0) + 1
    record.status = "failed" if counts.get("wrong") or counts.get("internal") else _status(code)
    record.details = counts
    record.headline = (f"sf{args.tpcds_sf:g}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                       if counts else _last_line(output))


def step_micro(session: Session, record: StepRecord, limit_s: float) -> None:
    """Run the kernel micro-benchmark, then the launch micro-benchmark, each under part of the limit."""
    args = session.args
    start = time.monotonic()
    kernel_json, launch_json = session.work / "micro.json", session.work / "launch.json"
    code1, _ = session.run([session.python, "-m", "bench.kernel_microbench", "--device", args.device, "--rows",
                            str(args.micro_rows), "--repeats", str(args.micro_repeats), "--sf", f"{args.sf:g}",
                            "--json", str(kernel_json)], limit_s * 0.6, "micro.log")
    left = limit_s - (time.monotonic() - start)
    code2, _ = session.run([session.python, "-m", "bench.launch_microbench", "--device", args.device,
                            "--json", str(launch_json)] + (["--launches", "10", "--repeats", "2"] if args.small else []),
                           max(5.0, left), "micro.log")
    record.status = _status(code1 if code1 else code2)
    parts = []
    if kernel_json.exists():
        figures = json.loads(kernel_json.read_text()).get("figures", {})
        for name, figure in figures.items():
            value = figure.get("gb_per_s") or figure.get("rows_per_s")
            unit = "GB/s" if figure.get("gb_per_s") else "rows/s"
            if value:
                parts.append(f"{name} {value:.3g} {unit}")
    if launch_json.exists():
        for name, figure in json.loads(launch_json.read_text()).get("figures", {}).items():
            if isinstance(figure, dict) and figure.get("host_us") is not None:
                parts.append(f"launch {name} {figure['host_us']:.1f} us host")
    record.headline = "; ".join(parts) or "no figures"


def step_hostdecode(session: Session, record: StepRecord, limit_s: float) -> None:
    """Run bench.host_decode_bench on lineitem's Q1 columns by decode-pool threads up to the machine's cores."""
    args = session.args
    cores = os.cpu_count() or 1
    threads = [0] + [n for n in (1, 2, 4, 8, 16, 32) if n <= cores]
    report = session.work / "hostdecode.json"
    command = [session.python, "-m", "bench.host_decode_bench", "--sf", f"{args.sf:g}", "--columns", "q1",
               "--threads", ",".join(map(str, threads)), "--runs", "2" if args.small else "3",
               "--output-dir", str(session.work / "hostdecode"), "--json", str(report)]
    code, output = session.run(command, limit_s, "hostdecode.log")
    record.status = _status(code)
    if not report.exists():
        record.headline = _last_line(output)
        return
    figures = json.loads(report.read_text())["result"]["figures"]
    record.details = {name: round(figure["compressed_gb_per_s"], 3) for name, figure in figures.items()}
    record.headline = "GB/s compressed: " + ", ".join(f"{name} {value}" for name, value in record.details.items())


def step_decode(session: Session, record: StepRecord, limit_s: float) -> None:
    """Run the device Parquet decode benchmark (``--decode-module``) when this checkout has it."""
    args = session.args
    if importlib.util.find_spec(args.decode_module) is None:
        record.status = "skipped"
        record.headline = f"{args.decode_module} is not in this checkout yet"
        return
    if args.device == "cpu":
        record.status = "skipped"
        record.headline = "the device decoder runs on cuda (cuda-sim checks the script)"
        return
    extra = shlex.split(args.decode_args)
    if not {"--sf", "--synthetic"} & set(extra):  # the data of this call, never the module's default scale
        extra += ["--synthetic", "2000", "--runs", "1"] if args.small else ["--sf", f"{args.sf:g}"]
    command = [session.python, "-m", args.decode_module, "--device", args.device, "--json",
               str(session.work / "decode.json")] + extra
    code, output = session.run(command, limit_s, "decode.log", env={"NUMBA_ENABLE_CUDASIM": "1"}
                               if args.device == "cuda-sim" else None)
    record.status = _status(code)
    record.headline = _last_line(output)


def step_arrow(session: Session, record: StepRecord, limit_s: float) -> None:
    """Run bench.spark_arrow_device: Spark's Arrow batches to the device, against the pinned PCIe figure and cpu."""
    args = session.args
    report = session.work / "arrow.json"
    command = [session.python, "-m", "bench.spark_arrow_device", "--device", args.device, "--json", str(report)]
    # lineitem of --sf when the machine has it (the data step's), else the module generates SF1 (6M rows).
    command += ["--small"] if args.small else ["--sf", f"{args.sf:g}", "--runs", str(args.runs)]
    code, output = session.run(command, limit_s, "arrow.log", env={"NUMBA_ENABLE_CUDASIM": "1"}
                               if args.device == "cuda-sim" else None)
    record.status = _status(code)
    record.headline = _last_line(output)
    if report.exists():
        record.details = json.loads(report.read_text())["result"]


RUNNERS: dict[str, Callable[[Session, StepRecord, float], None]] = {
    "env": step_env, "data": step_data, "tests": step_tests, "tpch": step_tpch, "ptxoff": step_ptxoff,
    "tpcds": step_tpcds,
    "micro": step_micro, "hostdecode": step_hostdecode, "decode": step_decode, "arrow": step_arrow,
}


# ------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_session", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="parts: " + "; ".join(f"{k} = {' '.join(v)}" for k, v in PARTS.items()))
    parser.add_argument("what", nargs="+", help="parts (part1, part2, all) and/or steps (" + ", ".join(STEPS) + ")")
    parser.add_argument("--budget", type=float, default=570.0,
                        help="seconds for the whole call (default 570: one 10-minute command with room to spare)")
    parser.add_argument("--budget-start", type=float, default=0.0, help=argparse.SUPPRESS)  # the shell's set-up seconds
    parser.add_argument("--small", action="store_true",
                        help="check the script on a host device: SF 0.01, few queries and files, one run, tiny figures")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu", "cuda-sim"))
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu_out"), help="results folder (default $OUT)")
    parser.add_argument("--work", default=None, help="scratch folder of step files (default /tmp/gpu_session_work)")
    parser.add_argument("--python", default=None, help="interpreter for the steps (default this one)")
    parser.add_argument("--commit", default=os.environ.get("GIT_COMMIT"), help="commit under test (default $GIT_COMMIT)")
    parser.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 10; --small 0.01)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per runner (default 3; --small 1)")
    parser.add_argument("--queries", default=None, help="TPC-H queries (default all; --small primer,q1,q6)")
    parser.add_argument("--modes", default="cold,hot", help="engine runners of the tpch step (default cold,hot)")
    parser.add_argument("--workers", type=int, default=None, help="test files at a time (default cores - 4, at most 12)")
    parser.add_argument("--file-limit", type=float, default=None, help="seconds per test file (default 150)")
    parser.add_argument("--test-timeout", type=float, default=120, help="pytest-timeout per test (default 120)")
    parser.add_argument("--test-marker", default=None, help="pytest -m expression (default gpu; host devices: not slow)")
    parser.add_argument("--test-files", default=None,
                        help="comma-separated test files, or @PATH: a list, or a previous tests.tsv whose files that "
                             "did not pass are rerun (default every device test file)")
    parser.add_argument("--tpcds-sf", type=float, default=None, help="TPC-DS scale factor (default 1; --small 0.01)")
    parser.add_argument("--tpcds-queries", default=None, help="TPC-DS queries (default all; --small 3,7,42)")
    parser.add_argument("--tpcds-timeout", type=float, default=30.0, help="seconds per TPC-DS query run (default 30)")
    parser.add_argument("--micro-rows", type=int, default=None, help="rows of the kernel micro-benchmark (100M)")
    parser.add_argument("--micro-repeats", type=int, default=None, help="kernel micro-benchmark repeats (default 10)")
    parser.add_argument("--decode-module", default=os.environ.get("DECODE_MODULE", DEFAULT_DECODE_MODULE),
                        help=f"module of the decode step (default {DEFAULT_DECODE_MODULE})")
    parser.add_argument("--decode-args", default=os.environ.get("DECODE_ARGS", ""), help="its extra arguments")
    parser.add_argument("--no-pack-cache", dest="pack_cache", action="store_false",
                        help="do not pack $GPU_ENGINE_CACHE_DIR into $OUT/gpucache.tgz")
    return parser


def _settle(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """Fill the defaults that depend on --small and the device; return the steps to run, in order."""
    steps: list[str] = []
    for word in args.what:
        for name in PARTS.get(word, (word,)):
            if name not in STEPS:
                parser.error(f"unknown part or step {name!r}: parts {', '.join(PARTS)}; steps {', '.join(STEPS)}")
            if name not in steps:
                steps.append(name)
    steps.sort(key=list(STEPS).index)  # always in priority order
    small = args.small
    args.sf = args.sf if args.sf is not None else (0.01 if small else 10.0)
    args.runs = args.runs if args.runs is not None else (1 if small else 3)
    args.queries = args.queries or ("primer,q1,q6" if small else "all")
    args.tpcds_sf = args.tpcds_sf if args.tpcds_sf is not None else (0.01 if small else 1.0)
    args.tpcds_queries = args.tpcds_queries or ("3,7,42" if small else "all")
    args.micro_rows = args.micro_rows or (2000 if small else 100_000_000)
    args.micro_repeats = args.micro_repeats or (2 if small else 10)
    if small and not args.test_files:
        args.test_files = "tests/exec/test_query_ctx.py"
    args.workers = args.workers or max(1, min(12, (os.cpu_count() or 1) - 4))
    args.file_limit = args.file_limit or 150.0
    args.test_marker = args.test_marker or ("gpu" if args.device == "cuda" else "not slow")
    args.work = args.work or "/tmp/gpu_session_work"
    if not small and args.runs < 3 and args.device == "cuda":
        parser.error("--runs must be at least 3 for figures (DuckDB's own total varies between calls)")
    return steps


def main(argv: list[str] | None = None) -> int:
    """Run the steps asked for within the budget; print the short table last. Return 1 when a step failed."""
    parser = build_parser()
    args = parser.parse_args(argv)
    steps = _settle(args, parser)
    session = Session(args)
    if args.device == "cuda-sim":  # every step's process must start with the simulator on
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if args.device == "cuda" and not os.environ.get("GPU_ENGINE_PTX_CACHE"):
        session.log("note: GPU_ENGINE_PTX_CACHE is not set: compiled kernels are not packed for the next call")
    session.log(f"steps {' '.join(steps)}; budget {args.budget:.0f}s; device {args.device}; sf {args.sf:g}; "
                f"out {session.out}")
    for position, name in enumerate(steps):
        record = StepRecord(name)
        session.records.append(record)
        remaining = args.budget - session.elapsed() - RESERVE_S
        limit = min(remaining, max(plan_limits(steps[position:], remaining), STEPS[name].min_s))
        record.limit_s = max(limit, 0.0)
        if limit < STEPS[name].min_s:
            record.status = "skipped"
            record.headline = f"{remaining:.0f}s left in the budget: less than this step's least {STEPS[name].min_s:.0f}s"
        else:
            session.log(f"step {name} (limit {limit:.0f}s): {STEPS[name].doc}")
            start = time.monotonic()
            try:
                RUNNERS[name](session, record, limit)
            except Exception as error:  # noqa: BLE001 - a broken step must not stop the next one
                record.status = "failed"
                record.headline = f"{type(error).__name__}: {error}"
            record.seconds = time.monotonic() - start
        session.log(f"step {name}: {record.status} in {record.seconds:.0f}s: {record.headline}")
        session.save()
    table = (session.out / "summary.md").read_text()
    print("\n" + table, flush=True)
    return 1 if any(record.status in ("failed", "timeout") for record in session.records) else 0


if __name__ == "__main__":
    sys.exit(main())
