"""Why first runs wait longer than the lowest tier alone: separate the compile process's presence from the engine's own work.

Issue 29: over TPC-DS SF1 (quiet rounds), first runs took 1.17-1.28x the
lowest tier alone, with 4 s more process CPU and 5.6 s more waiting for a
CPU, although the compile process runs ``SCHED_IDLE``. This runs, in one
process whose generated-kernel cache is empty (after the static kernels are
loaded by an unfused and a lowest-tier pass, untimed), timed passes over the
same queries, each in a new session:

``lowest``
    ``compile_mode="lowest"`` (nothing generated or compiled);
``lowest+idle-busy``
    the same while a ``SCHED_IDLE`` busy-loop process runs (a CPU's idle
    cycles taken, as the compile process takes them, with no compiling and no
    engine work): separates "a CPU taken" from everything else;
``first``
    the first runs (``background``, the compile process stopped during each
    query's first ``--compile-pause`` seconds, ``$GPU_ENGINE_COMPILE_PAUSE``,
    under the ``"young"`` pause policy unless ``$GPU_ENGINE_COMPILE_POLICY``
    says otherwise; ``1e9``: the engine's tier-switch work without any
    compiling beside it);
``lowest`` again (the machine's drift between passes).

Per pass: wall, the process's CPU (user + sys), its threads' wait for a CPU
(schedstat), voluntary / involuntary context switches, and the CPU the helper
process (compile worker or busy loop) got meanwhile. Results are not checked
against DuckDB here (bench/first_runs.py does that for the same plans).

    python -m bench.first_run_interference --sf 1 --queries 4,14,75 --compile-pause 0
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

BUSY_LOOP = "import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile True:\n    pass\n"


def _process_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _run_delays() -> dict[str, int]:
    from bench.first_runs import _run_delay_by_thread

    return _run_delay_by_thread()


def _waited(before: dict[str, int]) -> float:
    """Seconds the process's threads waited for a CPU since ``before`` (threads started since count from 0;
    threads that ended meanwhile, an earlier session's drivers, are not seen: as bench/first_runs.py counts)."""
    return sum(ns - before.get(tid, 0) for tid, ns in _run_delays().items()) / 1e9


def measure_pass(session, texts: dict[str, str], helper_pid) -> dict:
    from bench.first_runs import settle_heap

    settle_heap()
    pid = helper_pid() if callable(helper_pid) else helper_pid
    helper_before = _process_cpu(pid) if pid else 0.0
    usage, times, delays = resource.getrusage(resource.RUSAGE_SELF), os.times(), _run_delays()
    started = time.perf_counter()
    for text in texts.values():
        session.sql(text)
    wall = time.perf_counter() - started
    after_usage, after_times = resource.getrusage(resource.RUSAGE_SELF), os.times()
    pid = pid or (helper_pid() if callable(helper_pid) else None)
    return {"wall_s": wall,
            "cpu_s": (after_times.user - times.user) + (after_times.system - times.system),
            "run_delay_s": _waited(delays),
            "voluntary_switches": after_usage.ru_nvcsw - usage.ru_nvcsw,
            "involuntary_switches": after_usage.ru_nivcsw - usage.ru_nivcsw,
            "helper_cpu_s": (_process_cpu(pid) - helper_before) if pid else 0.0,
            "load": os.getloadavg()[0]}


def run(args) -> dict:
    os.environ["GPU_ENGINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpe-interference-")
    os.environ["GPU_ENGINE_COMPILE_PAUSE"] = str(args.compile_pause)  # before the compiler is made
    os.environ.setdefault("GPU_ENGINE_COMPILE_POLICY", "young")  # what --compile-pause times (the default
    # policy, "hold", stops the compile process for whole queries on 2 cores: bench/first_runs.py --compile-policy)
    from bench.first_runs import Workload
    from gpu_engine.codegen.background_compiles import background_compiler

    args.workload, args.data, args.device = "tpcds", None, "cpu"
    work = Workload(args)
    for name, text in work.texts.items():  # static kernels compiled / loaded, files in the OS cache
        work.session(fuse=False).sql(text)
    warmed = work.session(compile_mode="lowest")
    for text in work.texts.values():
        warmed.sql(text)

    def worker_pid():
        process = background_compiler()._process
        return process.pid if process is not None else None

    passes = {}
    passes["lowest"] = measure_pass(work.session(compile_mode="lowest"), work.texts, None)
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        time.sleep(0.1)
        passes["lowest+idle-busy"] = measure_pass(work.session(compile_mode="lowest"), work.texts, busy.pid)
    finally:
        busy.kill()
        busy.wait()
    passes["first"] = measure_pass(work.session(compile_mode="background"), work.texts, worker_pid)
    compiler = background_compiler()
    passes["first"].update(compiled=compiler.compiled, pending=compiler.pending(), pauses=compiler.pauses)
    compiler.close()
    passes["lowest again"] = measure_pass(work.session(compile_mode="lowest"), work.texts, None)
    return {"compile_pause": args.compile_pause, "queries": list(work.texts), "passes": passes}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--queries", default="4,14,75,47,44,77,51,5,78,31,49,23,10,35,80,76,74,53,36,11")
    parser.add_argument("--compile-pause", type=float, default=0.0,
                        help="$GPU_ENGINE_COMPILE_PAUSE for the first runs (1e9: stopped the whole pass)")
    parser.add_argument("--output", help="append the result as one JSON line here")
    args = parser.parse_args(argv)
    result = run(args)
    for name, p in result["passes"].items():
        print(f"pause {result['compile_pause']:g} {name:18s} wall {p['wall_s']:6.2f} cpu {p['cpu_s']:6.2f} "
              f"wait {p['run_delay_s']:6.2f} vcsw {p['voluntary_switches']:6d} ivcsw {p['involuntary_switches']:6d} "
              f"helper {p['helper_cpu_s']:5.2f} load {p['load']:.1f}", flush=True)
    if args.output:
        with open(args.output, "a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
