"""Check on a GPU that first runs compile no generated kernel's PTX on a driver (issue 29's ``cuda`` half).

Why: in the ``"background"`` compile mode a generated kernel's PTX is compiled
by the compile process and its module loaded off the drivers
(:mod:`gpu_engine.codegen.background_compiles`), while the batches run on the
lowest tier; this was built without a GPU, so a GPU machine checks here what
only it can: that the drivers compile no generated kernel's PTX, that the
compile process did compile them (for the GPU's compute capability), and that
the results equal DuckDB's on both tiers.

One process: a new, empty generated-kernel folder and a new PTX folder holding
only the *static* kernels' entries of ``--ptx-from`` (default
``$GPU_ENGINE_PTX_CACHE``; generated entries are left out, so every generated
kernel is new). The TPC-H spec SQL texts of ``--queries`` run unfused and with
``compile_mode="lowest"`` first (static kernels compiled or read: set-up), then
once in ``"background"`` mode (first runs: counted), then, after the compile
process finished (``--wait`` seconds at most), once more in a new session
(their generated kernels loaded: lowest-tier batches should be 0). The last
line, ``PTXOFF {json}``, holds the counts; the exit code is 1 when a generated
kernel's PTX compiled in this process, a result differs from DuckDB's, or (on
``cuda``) the compile process compiled nothing.

    python -m bench.ptx_off_driver --device cuda --sf 1 --queries 1,3,6,14
    python -m bench.ptx_off_driver --device cuda-sim --sf 0.01 --queries 1,6   # the script itself, no GPU

Not run on a GPU yet (written when none was lent); ``bench/gpu_session.sh``'s ``ptxoff`` step runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main"]

#: How generated modules' names start; PTX entries are named after their kernel's module.
_GENERATED = "gpu_engine_generated_"


def _static_entries(source: Path | None, target: Path) -> int:
    """Copy the static kernels' PTX entries of ``source`` into ``target``; return how many."""
    target.mkdir(parents=True, exist_ok=True)
    copied = 0
    if source is not None and source.is_dir():
        for entry in source.glob("*.ptx"):
            if not entry.name.startswith(_GENERATED):
                shutil.copy2(entry, target / entry.name)
                copied += 1
    return copied


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.ptx_off_driver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cuda-sim", "cpu"))
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--queries", default="1,3,6,14", help="TPC-H query numbers (default 1,3,6,14)")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--data", default=None, help="data root (default the engine's data folder)")
    parser.add_argument("--ptx-from", default=os.environ.get("GPU_ENGINE_PTX_CACHE"),
                        help="PTX folder whose static entries are copied (default $GPU_ENGINE_PTX_CACHE)")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the compile process")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ptx-off-driver-"))
    copied = _static_entries(Path(args.ptx_from) if args.ptx_from else None, work / "ptx")
    os.environ["GPU_ENGINE_CACHE_DIR"] = str(work / "generated")  # before the engine is imported
    os.environ["GPU_ENGINE_PTX_CACHE"] = str(work / "ptx")

    from bench.first_runs import Workload, _lowest_tier_batches
    from gpu_engine.codegen.background_compiles import background_compiler
    from gpu_engine.kernels.ptx_cache import clear_compile_records, compile_records

    workload = Workload(argparse.Namespace(workload="tpch", sf=args.sf, queries=args.queries, drivers=args.drivers,
                                           device=args.device, data=args.data))
    workload.expected()
    wrong: list[str] = []

    def run_all(session, label: str) -> dict[str, dict]:
        counts = {}
        for name, text in workload.texts.items():
            start = time.perf_counter()
            table = session.sql(text)
            seconds = time.perf_counter() - start
            problem = workload.mismatch(name, table)
            if problem is not None:
                wrong.append(f"{label} {name}: {problem.splitlines()[0][:200]}")
            stats = session.last_stats()
            counts[name] = {"seconds": round(seconds, 3), "lowest_tier_batches": _lowest_tier_batches(stats),
                            "kernels_compiled_on_drivers": stats.kernels_compiled}
        return counts

    setup_start = time.perf_counter()
    run_all(workload.session(fuse=False), "unfused")  # static kernels: compiled here or read from the copied entries
    run_all(workload.session(compile_mode="lowest"), "lowest")
    setup_s = time.perf_counter() - setup_start
    static_compiled_in_setup = sum(record.outcome == "compiled" for record in compile_records())

    clear_compile_records()
    first = run_all(workload.session(compile_mode="background"), "first")
    first_records = compile_records()
    compiler = background_compiler()
    wait_start = time.perf_counter()
    idle = compiler.wait_idle(timeout=args.wait)
    waited_s = time.perf_counter() - wait_start
    clear_compile_records()
    second = run_all(workload.session(compile_mode="background"), "second")
    second_records = compile_records()

    def driver_compiles(records, generated: bool) -> int:
        return sum(record.outcome == "compiled" and record.kernel.startswith(_GENERATED) == generated
                   for record in records)

    summary = {
        "device": args.device, "sf": args.sf, "queries": list(workload.texts), "static_ptx_entries_copied": copied,
        "setup_s": round(setup_s, 1), "static_ptx_compiled_in_setup": static_compiled_in_setup,
        "first": first, "second": second,
        "generated_ptx_compiled_in_this_process": driver_compiles(first_records, True)
        + driver_compiles(second_records, True),
        "static_ptx_compiled_in_first_runs": driver_compiles(first_records, False),
        "generated_ptx_loaded": sum(record.outcome == "disk" and record.kernel.startswith(_GENERATED)
                                    for record in first_records + second_records),
        "background_compiled": compiler.compiled, "background_compile_s": round(compiler.compile_seconds, 2),
        "background_failures": [f"{key[0]}.{key[1]}: {reason[:200]}" for key, reason in compiler.failures.items()],
        "compile_process_idle": idle, "waited_s": round(waited_s, 1),
        "first_lowest_tier_batches": sum(q["lowest_tier_batches"] for q in first.values()),
        "second_lowest_tier_batches": sum(q["lowest_tier_batches"] for q in second.values()),
        "wrong": wrong,
    }
    compiler.close()
    shutil.rmtree(work, ignore_errors=True)
    ok = (summary["generated_ptx_compiled_in_this_process"] == 0 and not wrong
          and (args.device != "cuda" or summary["background_compiled"] > 0))
    print(f"generated PTX compiled in this process {summary['generated_ptx_compiled_in_this_process']} "
          f"(static {summary['static_ptx_compiled_in_first_runs']}), by the compile process "
          f"{summary['background_compiled']} ({summary['background_compile_s']} s, "
          f"{len(summary['background_failures'])} failed), loaded {summary['generated_ptx_loaded']}; "
          f"lowest-tier batches first {summary['first_lowest_tier_batches']}, "
          f"second {summary['second_lowest_tier_batches']}; wrong {len(wrong)}", flush=True)
    print("PTXOFF " + json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
