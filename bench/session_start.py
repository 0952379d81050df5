"""What a new process and a new session pay before a query's first rows, against the same query warm.

Issue 29 item 4 (start-up): a user's first query runs in a new process, and a
Spark executor or a test worker is a new process too; a new ``Session`` in a
running process (a bench pass, a notebook cell) pays again for what a session
keeps. Each of ``--processes`` new processes (one after another) times, in
process CPU (user + sys, all threads) and wall seconds:

1. ``import``: ``from gpu_engine import Session`` (the interpreter's own
   start-up not included);
2. ``session``: a ``Session`` made and the TPC-DS (or TPC-H) tables registered;
3. ``first query``: the queries (``--query``: one, or a list run in order) once,
   with the phases of :mod:`bench.fixed_cost` (parse, plan, prepare, task
   start, execute; wall, exclusive);
4. ``new session``: another ``Session`` in the same process, the tables
   registered again, the same queries once (what a second session pays);
5. ``warm``: the same queries again in that session, ``--warm`` times (median).

``--preload pandas,numba.cuda,numba-init`` imports those (``numba-init``: one
cached static kernel run, numba's target set-up) before the first query and
reports their CPU apart: what the first query then no longer pays is theirs.

Every answer is checked against DuckDB's in the parent process. The kernel
caches are the machine's (static kernels set up, generated ones as earlier runs
left them), so "first query" minus "new session" is what a new process pays
for its first query beyond a new session, and "new session" minus "warm" what
a session pays beyond a repeat. The processes run with bytecode (this machine
sets ``PYTHONDONTWRITEBYTECODE``; an installed engine has bytecode) kept in a
temporary ``PYTHONPYCACHEPREFIX``, after one untimed process that writes it.
``--trees before=DIR,after=DIR`` alternates new processes between two source
trees (each a ``git archive`` with links ``gpu_engine/kernels -> ../kernels``
and ``gpu_engine/plans -> ../plans``, run from its root) and reports
each tree's medians and their difference. ``--profile FILE`` writes a cProfile of the first process's first query. Writes
``bench/results/<date>-session-start-<workload>-<device>-sf<sf>[-<tag>].md``
unless ``--no-write``.

    python -m bench.session_start --sf 1 --query 1 --processes 5
    python -m bench.session_start --sf 0.1 --query 1-40 --processes 5 --warm 1
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.child_process import answered_as_child, run_as_child  # noqa: E402 (after the path it needs)

STEPS = ("import", "session", "first query", "new session", "warm")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("tpcds", "tpch"), default="tpcds")
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--query", default="1",
                        help="a query number, or numbers and ranges (1-40,42): each step runs them all, in order")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--warm", type=int, default=3, help="warm runs in the second session (median)")
    parser.add_argument("--profile", help="cProfile of the first process's first query")
    parser.add_argument("--preload", default="",
                        help="comma-separated modules each process imports (timed apart) before its first query; "
                             "'numba-init' runs a cached static kernel once (numba's target set-up)")
    parser.add_argument("--trees", default="",
                        help="name=DIR,name=DIR: source trees (git archive + gpu_engine/kernels, gpu_engine/plans links) "
                             "whose processes alternate (ABAB, then BABA), each tree's medians reported apart")
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child-output", help=argparse.SUPPRESS)
    return parser


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _texts(args) -> list[str]:
    from bench.run_tpcds import parse_query_numbers

    numbers = parse_query_numbers(args.query)
    if args.workload == "tpcds":
        from bench.tpcds import query_text

        return [query_text(n) for n in numbers]
    from gpu_engine.plans.tpch import spec_sql

    return [spec_sql(n, args.sf) for n in numbers]


def run_child(args) -> dict:
    wall, cpu = time.perf_counter(), _cpu()
    from gpu_engine import Session

    steps = {"import": {"seconds": time.perf_counter() - wall, "cpu_s": _cpu() - cpu}}
    from bench.fixed_cost import PhaseTimer, install_phase_timers

    timer = PhaseTimer()
    install_phase_timers(timer)
    if args.workload == "tpcds":
        from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds

        folder = ensure_tpcds(args.sf)
        register = lambda s: register_tpcds(s, folder)  # noqa: E731
    else:
        from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

        folder = ensure_tpch(args.sf, progress=False)
        register = lambda s: register_tpch(s, folder)  # noqa: E731
    texts = _texts(args)

    def measure(step: str, run):
        timer.reset()
        wall, cpu = time.perf_counter(), _cpu()
        result = run()
        steps[step] = {"seconds": time.perf_counter() - wall, "cpu_s": _cpu() - cpu, "phases": dict(timer.seconds)}
        return result

    def new_session():
        session = Session(device=args.device, drivers=args.drivers)
        register(session)
        return session

    session = measure("session", new_session)
    preloaded = {}
    for name in filter(None, args.preload.split(",")):
        cpu = _cpu()
        if name == "numba-init":
            import numpy as np

            from gpu_engine.kernels.gather import _gather_cpu

            _gather_cpu(np.arange(3, dtype=np.int64), np.arange(2, dtype=np.int32), np.empty(2, dtype=np.int64))
        else:
            __import__(name)
        preloaded[name] = _cpu() - cpu
    modules = set(sys.modules)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    answers = [measure("first query", lambda: [session.sql(text) for text in texts])]
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    imported = sorted(set(sys.modules) - modules)
    second = new_session()
    answers.append(measure("new session", lambda: [second.sql(text) for text in texts]))
    warm = []
    for _ in range(args.warm):
        answers.append(measure("warm", lambda: [second.sql(text) for text in texts]))
        warm.append(steps["warm"])
    steps["warm"] = {key: statistics.median(w[key] for w in warm) for key in ("seconds", "cpu_s")}
    steps["warm"]["phases"] = {p: statistics.median(w["phases"].get(p, 0.0) for w in warm)
                               for p in warm[-1]["phases"]}
    import pyarrow.parquet as pq

    answer_files = []
    for index, tables in enumerate(answers):
        paths = []
        for number, table in enumerate(tables):
            path = Path(args.child_output).with_suffix(f".{index}.{number}.parquet")
            pq.write_table(table, path)
            paths.append(str(path))
        answer_files.append(paths)
    by_package: dict[str, int] = {}
    for name in imported:
        by_package[name.split(".")[0]] = by_package.get(name.split(".")[0], 0) + 1
    return {"steps": steps, "answers": answer_files, "load_average": os.getloadavg(), "preloaded": preloaded,
            "first_query_imports": by_package}


def _check(args, answer_files: list[list[str]]) -> None:
    """Check every answer against DuckDB's on the same files."""
    import pyarrow.parquet as pq

    from tests.duckdb_reference import duckdb_connection, duckdb_table

    if args.workload == "tpcds":
        from bench.tpcds import result_mismatch
        from gpu_engine.connectors.tpcds_data import ensure_tpcds

        folder = ensure_tpcds(args.sf)
    else:
        from gpu_engine.connectors.tpch_data import ensure_tpch

        folder = ensure_tpch(args.sf, progress=False)
    from tests.duckdb_reference import rows_mismatch

    connection = duckdb_connection(folder, threads=args.drivers)
    texts = _texts(args)
    expected_tables = [duckdb_table(connection, text) for text in texts]
    for path, text, expected in ((p, t, e) for paths in answer_files for p, t, e in zip(paths, texts, expected_tables)):
        table = pq.read_table(path)
        if args.workload == "tpcds":
            table = table.rename_columns(expected.column_names)
            problem = result_mismatch(table, expected, text, rows_mismatch)
        else:
            problem = rows_mismatch(table, expected, ordered="order by" in text.lower())
        if problem is not None:
            raise SystemExit(f"answer differs from DuckDB's: {problem}")


def report(args, children: list[dict], command: str, load_before: float) -> str:
    when = datetime.datetime.now(datetime.timezone.utc)
    name = f"{'TPC-DS' if args.workload == 'tpcds' else 'TPC-H'} q{args.query}"
    if "," in args.query or "-" in args.query:
        name += f" ({len(_texts(args))} queries, in order, in each step)"

    def med(step: str, key: str) -> float:
        return statistics.median(c["steps"][step].get(key, 0.0) for c in children)

    def med_phase(step: str, phase: str) -> float:
        return statistics.median(c["steps"][step]["phases"].get(phase, 0.0) for c in children)

    phases = ["parse", "plan", "prepare", "task start", "execute"]
    lines = [f"# What a new process and a new session pay before {name}'s first rows — {args.device}, "
             f"sf{args.sf:g}, {when:%Y-%m-%d %H:%M} UTC", "", f"Command: `{command}`", "",
             f"{args.drivers} drivers; {len(children)} new processes one after another; medians over them; load "
             f"average (1 min) {load_before:.1f} before, {children[-1]['load_average'][0]:.1f} at the end; "
             f"{os.cpu_count()} cores. CPU = process user + sys (all threads). Every answer checked against DuckDB's. "
             "Phases (wall ms, exclusive) as in `bench/fixed_cost.py`.", "",
             "| step | wall ms | CPU ms | " + " | ".join(phases) + " |",
             "|---|---|---|" + "---|" * len(phases)]
    for step in STEPS:
        row = f"| {step} | {med(step, 'seconds') * 1e3:.1f} | {med(step, 'cpu_s') * 1e3:.1f} | "
        row += " | ".join(f"{med_phase(step, p) * 1e3:.1f}" if step not in ("import",) else "" for p in phases)
        lines.append(row + " |")
    if children[0]["preloaded"]:
        lines += ["", "Imported before the first query (`--preload`), CPU ms: " + ", ".join(
            f"`{name}` {statistics.median(c['preloaded'][name] for c in children) * 1e3:.1f}"
            for name in children[0]["preloaded"])]
    lines += ["", "Modules the first query imported, by package (first process): " + ", ".join(
        f"{name} {count}" for name, count in sorted(children[0]["first_query_imports"].items(), key=lambda x: -x[1]))]
    lines += ["", "Each process (wall / CPU ms): "
              + "; ".join(", ".join(f"{s} {c['steps'][s]['seconds'] * 1e3:.0f}/{c['steps'][s]['cpu_s'] * 1e3:.0f}"
                                    for s in STEPS) for c in children)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if answered_as_child(args, run_child):
        return
    load_before = os.getloadavg()[0]
    trees = [tuple(item.split("=", 1)) for item in args.trees.split(",") if item] or [("", "")]
    children: dict[str, list[dict]] = {name: [] for name, _ in trees}
    with tempfile.TemporaryDirectory(prefix="session-start-") as folder:
        # Bytecode as an installed engine has it (this machine sets PYTHONDONTWRITEBYTECODE; without bytecode
        # each new process compiles ~100 of the engine's modules from source), kept out of the checkout; an
        # untimed process (per tree) first writes it and reads the files into the OS cache.
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        environment["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "bytecode")
        order = [(-1, tree) for tree in trees]
        for number in range(args.processes):  # ABAB..., the next round BABA...: neither tree always goes first
            order += [(number, tree) for tree in (trees if number % 2 == 0 else trees[::-1])]
        for number, (tree_name, tree_path) in order:
            output = Path(folder) / f"child{number}{tree_name}.json"
            child_argv = [a for a in argv if not a.startswith("--trees=")]
            if "--trees" in child_argv:
                del child_argv[child_argv.index("--trees"):child_argv.index("--trees") + 2]
            if args.profile and number != 0:
                child_argv = [a for i, a in enumerate(child_argv) if a != "--profile" and child_argv[i - 1] != "--profile"]
            tree_environment = dict(environment, PYTHONPATH=tree_path) if tree_path else environment
            child = run_as_child("bench.session_start", child_argv, output, tree_environment, tree_path or REPO_ROOT)
            _check(args, child["answers"])
            if number < 0:
                continue
            children[tree_name].append(child)
            print(tree_name, " ".join(f"{s} {child['steps'][s]['seconds'] * 1e3:.0f}/"
                                      f"{child['steps'][s]['cpu_s'] * 1e3:.0f}" for s in STEPS), flush=True)
    command = "python -m bench.session_start " + " ".join(argv)
    text = ""
    for tree_name, tree_path in trees:
        part = report(args, children[tree_name], command, load_before)
        if tree_name:
            part = part.replace("# What", f"# [{tree_name}: {tree_path}] What", 1)
        text += part + "\n"
    if len(trees) == 2:
        (a, _), (b, _) = trees
        lines = [f"## {b} against {a} (medians of CPU ms)", "", f"| step | {a} | {b} | {b} - {a} |", "|---|---|---|---|"]
        for step in STEPS:
            first, second = (statistics.median(c["steps"][step]["cpu_s"] for c in children[t]) * 1e3 for t in (a, b))
            lines.append(f"| {step} | {first:.1f} | {second:.1f} | {second - first:+.1f} |")
        text += "\n".join(lines) + "\n"
    print(text)
    if args.no_write:
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}-session-start-{args.workload}-{args.device}"
            f"-sf{args.sf:g}" + (f"-{args.tag}" if args.tag else ""))
    (out / f"{stem}.md").write_text(text)


if __name__ == "__main__":
    main()
