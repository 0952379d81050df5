"""How much the compile process slows the queries running beside it, under each pause policy (in-process A/B).

Issue 29: "compiling never makes a running query slower than its lowest tier
would be alone". ``bench/first_runs.py`` compares a first run with the lowest
tier alone, but each side is one pass in its own process, so on a loaded
2-core machine the spread between processes (5-20%) hides a few percent.
Here one process keeps the compile process busy with real generated kernels
(TPC-H's or TPC-DS's, harvested from a first pass and written again as new
files, so each job compiles from scratch) and times passes of the *lowest
tier alone* (``compile_mode="lowest"``: identical work in every pass) while
the compile process

``stopped``
    is stopped (``SIGSTOP``): the lowest tier alone, the baseline;
``hold``
    compiles its queue under the engine's default pause policy, ``"hold"``
    (stopped while the queries' drivers fill the CPUs: on 2 cores and 2
    drivers for the whole query, since lowest-tier passes wait for no kernel);
``pause<S>``
    compiles its queue under stop 47's policy, ``"young"``, with
    ``BackgroundCompiler.pause_seconds = S`` (``pause2`` was the default;
    ``pause0`` never pauses: only ``SCHED_IDLE``; ``pause1e9`` runs it only
    between queries).

Each round runs every variant once, the order rotating round by round; each
variant's figure is its pass's wall (and process CPU) over the same round's
``stopped`` pass, median over the rounds. Queries are checked against DuckDB
once (the warm-up pass). The compile process's CPU during each pass is read
from ``/proc``.

    python -m bench.compile_interference --sf 1 --rounds 6
    python -m bench.compile_interference --workload tpcds --queries 1-20 --variants stopped,hold,pause2
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="tpch", choices=("tpch", "tpcds"))
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--queries", default="all")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--variants", default="stopped,hold,pause2,pause0",
                        help="comma-separated: stopped, hold (the default policy), pause<S> (the young policy, "
                             "S seconds; 1e9: only between queries)")
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", default="bench/results")
    return parser


def _worker_cpu(process) -> float:
    """Return the compile process's user + sys seconds so far (0 when it is gone)."""
    try:
        with open(f"/proc/{process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, AttributeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class JobSupply:
    """Keep the compile process's queue filled with real generated kernels, each a new file (compiled from scratch)."""

    def __init__(self, templates: list[tuple]):
        self.templates = templates  # (GeneratedFile, function, signature)
        self.made = 0

    def refill(self, compiler, depth: int = 3) -> None:
        from gpu_engine.codegen.compiled_modules import generated_file

        while compiler.pending() < depth:
            file, function, signature = self.templates[self.made % len(self.templates)]
            self.made += 1
            copy = generated_file(f"{file.source}\n# compile_interference copy {self.made}\n", stem=file.stem,
                                  evict=False)
            compiler.state_new(copy, function, signature)


def run(args) -> dict:
    os.environ["GPU_ENGINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpe-interference-")  # every kernel new
    from bench.first_runs import QueryMeter, Workload, build_parser as first_runs_parser, settle_heap
    from gpu_engine.codegen import background_compiles

    work = Workload(first_runs_parser().parse_args(
        ["--workload", args.workload, "--sf", str(args.sf), "--drivers", str(args.drivers), "--queries", args.queries]))
    work.expected()
    static = work.session(fuse=False)  # static kernels loaded (compiled once per machine), files in the OS cache
    for text in work.texts.values():
        static.sql(text)
    lowest = work.session(compile_mode="lowest")
    for name, text in work.texts.items():
        problem = work.mismatch(name, lowest.sql(text))
        if problem is not None:
            raise SystemExit(f"{name}: result differs from DuckDB's: {problem}")

    # Harvest the generated kernels a first pass asks for (every shape: no cap on queued jobs meanwhile).
    templates = []
    asked = background_compiles.BackgroundCompiler.state_new

    def record(self, file, function, signature):
        templates.append((file, function, signature))
        return asked(self, file, function, signature)

    background_compiles.BackgroundCompiler.state_new = record
    cap, background_compiles._MAX_QUEUED_JOBS = background_compiles._MAX_QUEUED_JOBS, 10**9
    try:
        harvest = work.session(compile_mode="background")
        for text in work.texts.values():
            harvest.sql(text)
    finally:
        background_compiles.BackgroundCompiler.state_new = asked
        background_compiles._MAX_QUEUED_JOBS = cap
    compiler = background_compiles.background_compiler()
    compiler.close()  # a fresh queue: only the supply's copies from here on
    background_compiles._COMPILER = None
    compiler = background_compiles.background_compiler()
    supply = JobSupply(templates)
    supply.refill(compiler)  # the compile process starts with the first of these

    meter = QueryMeter()
    variants = args.variants.split(",")
    passes = []
    for round_number in range(args.rounds):
        order = variants[round_number % len(variants):] + variants[:round_number % len(variants)]
        for variant in order:
            supply.refill(compiler)
            process = compiler._process
            if variant == "stopped":
                os.kill(process.pid, signal.SIGSTOP)
            elif variant == "hold":
                compiler.policy = "hold"
            else:
                compiler.policy = "young"
                compiler.pause_seconds = float(variant.removeprefix("pause"))
            compiled, worker_before = compiler.compiled, _worker_cpu(process)
            settle_heap()
            wall = cpu = delay = 0.0
            for text in work.texts.values():
                _, costs = meter.measure(lambda: lowest.sql(text))
                wall += costs["seconds"]
                cpu += costs["cpu_s"]
                delay += costs["run_delay_s"]
            worker = _worker_cpu(process) - worker_before
            if variant == "stopped":
                os.kill(process.pid, signal.SIGCONT)
            compiler.pause_seconds = background_compiles.DEFAULT_PAUSE_SECONDS
            compiler.policy = background_compiles._compile_policy()
            passes.append({"round": round_number, "variant": variant, "wall_s": wall, "cpu_s": cpu,
                           "run_delay_s": delay, "worker_cpu_s": worker, "compiled": compiler.compiled - compiled,
                           "pauses": compiler.pauses, "load": os.getloadavg()[0]})
            print(f"round {round_number} {variant:9s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  waiting {delay:5.2f} s  "
                  f"compile process cpu {worker:5.2f} s  compiled {compiler.compiled - compiled}  "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    meter.close()
    compiler.close()
    return {"passes": passes, "templates": len(templates), "queries": len(work.texts)}


def report(args, result: dict, command: str) -> str:
    passes = result["passes"]
    variants = args.variants.split(",")
    base = {p["round"]: p for p in passes if p["variant"] == "stopped"}
    lines = [f"# Compile process beside running queries: lowest-tier passes, {args.workload} sf{args.sf:g} "
             f"({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)", "", f"Command: `{command}`", "",
             f"cpu, {args.drivers} drivers, {os.cpu_count()} cores, {result['queries']} queries a pass, "
             f"{args.rounds} rounds (variant order rotating), the compile process kept busy with copies of the "
             f"{result['templates']} generated kernels a first pass asked for. Ratios: a pass over the same "
             "round's `stopped` pass; medians over the rounds.", "",
             "| variant | wall (s, median) | wall / stopped | process CPU / stopped | waiting for a CPU (s) "
             "| compile process CPU during the pass (s) | kernels compiled a pass |", "|---|---|---|---|---|---|---|"]
    for variant in variants:
        mine = [p for p in passes if p["variant"] == variant]
        if not mine:
            continue
        wall_ratio = statistics.median(p["wall_s"] / base[p["round"]]["wall_s"] for p in mine if p["round"] in base)
        cpu_ratio = statistics.median(p["cpu_s"] / base[p["round"]]["cpu_s"] for p in mine if p["round"] in base)
        lines.append(f"| {variant} | {statistics.median(p['wall_s'] for p in mine):.2f} | {wall_ratio:.3f}× | "
                     f"{cpu_ratio:.3f}× | {statistics.median(p['run_delay_s'] for p in mine):.2f} | "
                     f"{statistics.median(p['worker_cpu_s'] for p in mine):.2f} | "
                     f"{statistics.median(p['compiled'] for p in mine):g} |")
    lines += ["", "Passes:", "", "| round | variant | wall (s) | CPU (s) | waiting (s) | compile process CPU (s) | load |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {p['round']} | {p['variant']} | {p['wall_s']:.2f} | {p['cpu_s']:.2f} | {p['run_delay_s']:.2f} | "
              f"{p['worker_cpu_s']:.2f} | {p['load']:.1f} |" for p in passes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    result = run(args)
    command = "python -m bench.compile_interference " + " ".join(argv)
    text = report(args, result, command)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}-compile-interference-{args.workload}"
            f"-sf{args.sf:g}" + (f"-{args.tag}" if args.tag else ""))
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps({"command": command, **result}, indent=1))


if __name__ == "__main__":
    main()
