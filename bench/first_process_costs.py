"""List the static kernels a new process still compiles after set-up, and what its first queries cost in CPU.

Issue 29: after ``gpu-engine precompile`` (set-up) no static kernel may
compile on a driver, and a new process's first queries should pay little
beyond the queries themselves. This bench runs, each in a process of its own:

1. set-up (unless ``--numba-cache`` names a folder already filled):
   ``python -m gpu_engine precompile --device <device>`` with
   ``NUMBA_CACHE_DIR`` a new, empty folder; its process CPU is reported;
2. a new process with an empty generated-kernel cache (``GPU_ENGINE_CACHE_DIR``
   a new folder) and that numba cache, with a listener on numba's compile
   events installed before the engine is imported. It imports the engine,
   then per workload (``--workloads tpch,tpcds``) registers the tables,
   plans every text (``Session.sql_plan``) and runs every text once
   (``--compile-mode``, default ``background`` as the product runs), timing
   each phase in process CPU seconds (user + system, all threads). Every
   numba compile is recorded with its function and thread; static ones
   (not generated modules) are what set-up missed;
3. the files numba added to the static kernels' cache folder during step 2:
   static kernels compiled anywhere (the compile process included).

``--profile FILE`` writes a cProfile of the execution phase (the lowest tier
alone with ``--compile-mode lowest``). Writes
``bench/results/<date>-first-process-costs-<device>-sf<sf>[-<tag>].md`` and ``.json``.

    python -m bench.first_process_costs --sf 0.01
    python -m bench.first_process_costs --sf 0.01 --numba-cache /tmp/numba-x --workloads tpcds
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.child_process import answered_as_child, run_as_child  # noqa: E402 (after the path it needs)

GENERATED_PREFIX = "gpu_engine_generated_"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--workloads", default="tpch,tpcds", help="comma-separated: tpch, tpcds")
    parser.add_argument("--compile-mode", default="background", choices=("background", "inline", "lowest"))
    parser.add_argument("--numba-cache", help="a numba cache folder already filled by set-up (skips step 1)")
    parser.add_argument("--profile", help="write a cProfile of the execution phase here")
    parser.add_argument("--setup-without-placeholders", action="store_true",
                        help="set-up without its placeholder kernels (static_kernels.compile_placeholder_kernels)")
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    parser.add_argument("--child-output", help=argparse.SUPPRESS)
    return parser


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def cache_files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*.nbc")} if folder.exists() else set()


# ------------------------------------------------------------------------------------------------ the new process
def _install_listener(compiles: list) -> None:
    from numba.core import event

    depth = threading.local()

    class Recorder(event.Listener):
        def on_start(self, ev) -> None:
            depth.value = getattr(depth, "value", 0) + 1
            if depth.value == 1:
                depth.started = time.perf_counter()

        def on_end(self, ev) -> None:
            depth.value -= 1
            if depth.value:
                return
            dispatcher = (ev.data or {}).get("dispatcher")
            function = getattr(dispatcher, "py_func", None)
            module = getattr(function, "__module__", "?")
            compiles.append({"function": f"{module}.{getattr(function, '__qualname__', '?')}",
                             "generated": module.startswith(GENERATED_PREFIX) or "generated" in module,
                             "thread": threading.current_thread().name,
                             "args": str((ev.data or {}).get("args", "")),
                             "seconds": time.perf_counter() - depth.started})

    event.register("numba:compile", Recorder())


def _workload(name: str, sf: float):
    """Return ``(texts by name, register(session))`` of a workload at ``sf``."""
    if name == "tpch":
        from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
        from gpu_engine.plans.tpch import TPCH_QUERY_NUMBERS, spec_sql

        folder = ensure_tpch(sf, progress=False)
        return {f"q{n}": spec_sql(n, sf) for n in TPCH_QUERY_NUMBERS}, lambda s: register_tpch(s, folder)
    from bench.tpcds import query_name, query_text
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds

    folder = ensure_tpcds(sf)
    return {query_name(n): query_text(n) for n in range(1, 100)}, lambda s: register_tpcds(s, folder)


def run_child(args) -> dict:
    compiles: list = []
    started = cpu_seconds()
    _install_listener(compiles)  # imports numba first: its import is reported apart from the engine's
    numba_import = cpu_seconds() - started
    modules_before = set(sys.modules)
    mark = cpu_seconds()
    from gpu_engine import Session

    phases = {"import numba (listener)": numba_import, "import gpu_engine": cpu_seconds() - mark}
    imported = {"import gpu_engine": len(set(sys.modules) - modules_before)}
    pandas_after = {"import gpu_engine": "pandas" in sys.modules}
    failures: dict[str, str] = {}
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    for workload in args.workloads.split(","):
        texts, register = _workload(workload, args.sf)
        session = Session(device=args.device, drivers=args.drivers, compile_mode=args.compile_mode)
        register(session)
        for phase in ("plan", "run"):
            before_modules = set(sys.modules)
            mark = cpu_seconds()
            if phase == "run" and profiler is not None:
                profiler.enable()
            for name, text in texts.items():
                if name in failures:
                    continue
                try:
                    session.sql_plan(text) if phase == "plan" else session.sql(text)
                except Exception as error:  # noqa: BLE001 - a refused query: named, left out of the run
                    failures[f"{workload}:{name}"] = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
            if phase == "run" and profiler is not None:
                profiler.disable()
            key = f"{workload} {phase} ({len(texts)} texts)"
            phases[key] = cpu_seconds() - mark
            imported[key] = len(set(sys.modules) - before_modules)
            pandas_after[key] = "pandas" in sys.modules
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return {"phases": phases, "modules_imported": imported, "pandas_imported_after": pandas_after,
            "compiles": compiles, "failures": failures, "load_average": os.getloadavg()}


# ---------------------------------------------------------------------------------------------------- the parent
def report(args, setup: dict | None, child: dict, added: list[str], command: str) -> str:
    when = datetime.datetime.now(datetime.timezone.utc)
    static = [c for c in child["compiles"] if not c["generated"]]
    generated = [c for c in child["compiles"] if c["generated"]]
    lines = [f"# A new process after set-up: static kernels it compiles, first-query CPU — {args.device}, "
             f"sf{args.sf:g}, {when:%Y-%m-%d %H:%M} UTC", "", f"Command: `{command}`", "",
             f"{args.drivers} drivers, compile mode `{args.compile_mode}`, workloads {args.workloads}, "
             f"{os.cpu_count()} cores, load average at the end {child['load_average'][0]:.1f}. CPU seconds are "
             "process CPU (user + system, all threads).", ""]
    if setup is not None:
        lines += [f"Set-up (`gpu-engine precompile`, empty numba cache): {setup['cpu_s']:.1f} s CPU, "
                  f"{setup['wall_s']:.1f} s wall; its last line: `{setup['summary']}`", ""]
    lines += ["| phase | process CPU (s) | modules imported | pandas imported |", "|---|---|---|---|"]
    for phase, seconds in child["phases"].items():
        lines.append(f"| {phase} | {seconds:.2f} | {child['modules_imported'].get(phase, '')} | "
                     f"{child['pandas_imported_after'].get(phase, '')} |")
    lines += ["", f"Static kernels numba compiled in the new process: **{len(static)}** "
              f"(generated: {len(generated)}); static kernel cache files added by any process: **{len(added)}**.", ""]
    for c in static:
        lines.append(f"- `{c['function']}` on thread `{c['thread']}` ({c['seconds']:.2f} s) {c['args'][:160]}")
    for path in added:
        lines.append(f"- cache file added: `{path}`")
    if child["failures"]:
        lines += ["", f"Refused or failed ({len(child['failures'])}): "
                  + "; ".join(f"{k} ({v})" for k, v in child["failures"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if answered_as_child(args, run_child):
        return
    scratch = Path(tempfile.mkdtemp(prefix="first-process-costs-"))
    numba_cache = Path(args.numba_cache) if args.numba_cache else scratch / "numba"
    print(f"scratch folder {scratch}, numba cache {numba_cache}", flush=True)
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(numba_cache))
    setup = None
    if not args.numba_cache:
        numba_cache.mkdir()
        wall, before = time.perf_counter(), cpu_seconds(resource.RUSAGE_CHILDREN)
        setup_code = ("import sys\nfrom gpu_engine.codegen import static_kernels\n"
                      + ("static_kernels.compile_placeholder_kernels = lambda device: (0, 0.0)\n"
                         if args.setup_without_placeholders else "")
                      + f"from gpu_engine.cli import main\nsys.exit(main(['precompile', '--device', {args.device!r}]))")
        done = subprocess.run([sys.executable, "-c", setup_code], env=environment, cwd=REPO_ROOT, check=True,
                              capture_output=True, text=True)
        setup = {"cpu_s": cpu_seconds(resource.RUSAGE_CHILDREN) - before, "wall_s": time.perf_counter() - wall,
                 "summary": done.stdout.strip().splitlines()[-1]}
        print(f"set-up: {setup}", flush=True)
    before_files = cache_files(numba_cache)
    output = scratch / "child.json"
    environment["GPU_ENGINE_CACHE_DIR"] = str(scratch / "generated")
    child = run_as_child("bench.first_process_costs", argv, output, environment)
    # numba keeps the generated modules' files there too, in a folder named after theirs ("generated_<hash>")
    added = sorted(p for p in cache_files(numba_cache) - before_files if not p.startswith("generated"))
    command = "python -m bench.first_process_costs " + " ".join(argv)
    text = report(args, setup, child, added, command)
    print(text)
    if args.no_write:
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}-first-process-costs-{args.device}-sf{args.sf:g}"
            + (f"-{args.tag}" if args.tag else ""))
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps({"command": command, "setup": setup, "child": child,
                                                  "cache_files_added": added}, indent=1, default=str))


if __name__ == "__main__":
    main()
