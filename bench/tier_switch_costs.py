"""Where a first run's CPU beyond its lowest tier goes: the tier switches' steps, per step, on the drivers.

Issue 29: "compiling never makes a running query slower than its lowest tier
would be alone". In quiet stop 48 the TPC-DS first runs spent 4.7% more process
CPU than the lowest tier alone although the compile process (not counted in
process CPU) was held during queries; this attributes the drivers' extra CPU to
the steps a first run takes that the lowest tier does not:

``decide``
    ``TierSwitch._decide``: everything below, for a batch that asks;
``shape``
    the operator's program shape key (``shape_once``: made once per program);
``query_waits``
    a batch waiting on the lowest tier told to the compile policy;
``bind``
    binding a batch to a generated kernel (``KernelInputs.bind``: lifted string
    expressions evaluated, string keys interned);
``generate``
    generating a kernel's source (``generate_fused_aggregation``, a row
    kernel's ``_generate``) and writing its file (``generated_file``);
``state``
    asking whether a twin is compiled (``kernel_state``: argument types, the
    compiler's queue), its loads below included;
``import``
    importing a generated module (``GeneratedFile.module``: its source
    compiled, numba dispatchers built);
``load``
    loading a compiled specialization from numba's disk cache (``_load_cached``);
``lowest_tier_build``
    building a fused aggregation's lowest-tier operators (``_LowestTier``).

Each is the inclusive thread CPU time (``time.thread_time``) of the calls made on
the engine's threads, summed over the pass. A round is a new process with an
empty ``GPU_ENGINE_CACHE_DIR``, set up as ``bench/first_runs.py`` does (an
unfused pass compiles the static kernels, a ``compile_mode="lowest"`` pass loads
the ones the lowest tier runs), then the lowest tier alone and the first runs
(``background``) are timed, each in a new session, the order alternating by
round. Process CPU is ``getrusage(RUSAGE_SELF)`` (user + sys, microseconds).

    python -m bench.tier_switch_costs --workload tpcds --sf 1 --rounds 2
"""

from __future__ import annotations

import argparse
import collections
import gc
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

STEPS = ("decide", "shape", "query_waits", "bind", "generate", "state", "import", "load", "lowest_tier_build")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class StepMeter:
    """Sum the thread CPU of instrumented calls by step (inclusive; a nested call of the same step counts once)."""

    def __init__(self):
        self.seconds: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self._local = threading.local()
        self.on = False

    def wrap(self, step: str, function):
        meter = self

        def timed(*args, **kwargs):
            active = getattr(meter._local, "active", None)
            if active is None:
                active = meter._local.active = set()
            if not meter.on or step in active:
                return function(*args, **kwargs)
            active.add(step)
            start = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                meter.seconds[step] += time.thread_time() - start
                meter.calls[step] += 1
                active.discard(step)

        timed.__wrapped__ = function
        return timed

    def take(self) -> dict:
        taken = {step: {"cpu_s": self.seconds[step], "calls": self.calls[step]} for step in STEPS}
        self.seconds.clear()
        self.calls.clear()
        return taken


def instrument(meter: StepMeter) -> None:
    """Wrap the steps' functions where their callers look them up."""
    from gpu_engine.codegen import background_compiles, compiled_modules, compiled_row_kernel, kernel_inputs
    from gpu_engine.operators import fused_aggregation

    bc = background_compiles
    bc.TierSwitch._decide = meter.wrap("decide", bc.TierSwitch._decide)
    kernel_inputs.KernelInputs.bind = meter.wrap("bind", kernel_inputs.KernelInputs.bind)
    fused_aggregation.generate_fused_aggregation = meter.wrap("generate", fused_aggregation.generate_fused_aggregation)
    for module in (fused_aggregation, compiled_row_kernel):
        module.generated_file = meter.wrap("generate", module.generated_file)
    for cls in compiled_row_kernel.CompiledRowKernel.__subclasses__():
        found = cls.__dict__.get("_generate")
        if isinstance(found, (classmethod, staticmethod)):
            setattr(cls, "_generate", type(found)(meter.wrap("generate", found.__func__)))
    bc.kernel_state = meter.wrap("state", bc.kernel_state)
    if hasattr(bc, "shape_once"):
        bc.shape_once = meter.wrap("shape", bc.shape_once)
        for module in (fused_aggregation, compiled_row_kernel):
            module.shape_once = bc.shape_once
    bc.BackgroundCompiler.query_waits = meter.wrap("query_waits", bc.BackgroundCompiler.query_waits)
    bc._load_cached = meter.wrap("load", bc._load_cached)
    module_property = compiled_modules.GeneratedFile.module
    compiled_modules.GeneratedFile.module = property(meter.wrap("import", module_property.fget))
    lowest_init = fused_aggregation._LowestTier.__init__
    fused_aggregation._LowestTier.__init__ = meter.wrap("lowest_tier_build", lowest_init)


def fill_cache(args) -> None:
    """Leave in the cache folder every generated kernel the queries' generated tier asks for, as an earlier process
    running them would: each query in ``background`` mode, then ``wait_idle``, again until a run has no batch on
    the lowest tier (at most 5 runs).

    Not ``inline`` runs (as before): they compile only the twins a batch launches, so a fused aggregation's
    ``move`` twins (launched when its table grows) and layouts only the tier switch asks for were missing, and
    the measured pass ran those queries on the lowest tier (TPC-H SF1: q1, q6, q12, q14, q18 wholly).
    """
    from bench.first_runs import Workload, _lowest_tier_batches
    from gpu_engine.codegen.background_compiles import background_compiler

    work = Workload(args)
    session = work.session(compile_mode="background")
    left = 0
    for text in work.texts.values():  # query by query: under `hold` a pass of them back to back queues the
        for _ in range(5):  # first few shapes' kernels only (a new shape is not asked while 4 jobs wait)
            try:
                session.sql(text)
            except Exception:  # noqa: BLE001 - refused: the round leaves it out
                break
            lowest = _lowest_tier_batches(session.last_stats())
            background_compiler().wait_idle(3600)
            if lowest == 0:
                break
        left += lowest
    print(f"fill: {left} batches on the lowest tier in the last runs", flush=True)


def run_round(args) -> dict:
    generated = tempfile.mkdtemp(prefix="gpe-tier-switch-")
    os.environ["GPU_ENGINE_CACHE_DIR"] = generated
    if args.compile_policy:
        os.environ["GPU_ENGINE_COMPILE_POLICY"] = args.compile_policy
    if args.fill_cache:  # every generated kernel compiled on disk by another process: each switch is a load
        subprocess.run([sys.executable, "-m", "bench.tier_switch_costs", *args.argv, "--fill-cache-only"],
                       check=True, cwd=REPO_ROOT)
    from bench.first_runs import Workload, _lowest_tier_batches, settle_heap
    from gpu_engine.codegen.background_compiles import background_compiler

    work = Workload(args)
    work.expected()
    static = work.session(fuse=False)
    for name, text in list(work.texts.items()):
        try:
            problem = work.mismatch(name, static.sql(text))
        except Exception as error:  # noqa: BLE001 - refused or failing unfused: left out
            problem = f"{type(error).__name__}: {error}"
        if problem is not None:
            work.left_out[name] = str(problem).splitlines()[0][:160]
            del work.texts[name]
    warmed = work.session(compile_mode="lowest")
    for text in work.texts.values():
        warmed.sql(text)
    meter = StepMeter()
    instrument(meter)
    gc_seconds, gc_started = [0.0], [0.0]

    def observe_gc(phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            gc_seconds[0] += time.perf_counter() - gc_started[0]

    gc.callbacks.append(observe_gc)

    def timed_pass(mode: str) -> dict:
        session = work.session(compile_mode=mode)
        settle_heap()
        per_query = {}
        meter.take()
        meter.on = True
        wall, cpu = time.perf_counter(), _cpu()
        for name, text in work.texts.items():
            q_wall, q_cpu, q_gc = time.perf_counter(), _cpu(), gc_seconds[0]
            table = session.sql(text)
            q_wall, q_cpu = time.perf_counter() - q_wall, _cpu() - q_cpu
            meter.on = False
            problem = work.mismatch(name, table)
            meter.on = True
            if problem is not None:
                raise SystemExit(f"{name} ({mode}): differs from DuckDB's: {problem}")
            stats = session.last_stats()
            per_query[name] = {"seconds": q_wall, "cpu_s": q_cpu, "lowest_tier_batches": _lowest_tier_batches(stats),
                               "gc_s": gc_seconds[0] - q_gc}
        meter.on = False
        return {"seconds": time.perf_counter() - wall, "cpu_s": _cpu() - cpu, "steps": meter.take(),
                "queries": per_query, "query_cpu_s": sum(q["cpu_s"] for q in per_query.values()),
                "query_seconds": sum(q["seconds"] for q in per_query.values())}

    order = ("lowest", "background") if args.round_number % 2 == 0 else ("background", "lowest")
    passes = {}
    for mode in order:
        passes[mode] = timed_pass(mode)
        if mode == "background":
            compiler = background_compiler()
            passes[mode]["compiled_during"] = compiler.compiled
            passes[mode]["pending_after"] = compiler.pending()
            passes[mode]["owed_runs"] = compiler.owed_runs
            compiler.close()
    return {"round": args.round_number, "order": list(order), "load_average": os.getloadavg(), "passes": passes,
            "left_out": work.left_out}


def report(rounds: list[dict], command: str) -> str:
    lines = [f"Command: `{command}`", "",
             "| round | order | load | lowest: wall / query CPU (s) | first: wall / query CPU (s) | CPU first / lowest "
             "| compiled during first (pending) | " + " | ".join(f"{s} CPU s (calls)" for s in STEPS) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * len(STEPS)]
    for r in rounds:
        low, first = r["passes"]["lowest"], r["passes"]["background"]
        lines.append(
            f"| {r['round']} | {' then '.join(r['order'])} | {r['load_average'][0]:.1f} | "
            f"{low['query_seconds']:.2f} / {low['query_cpu_s']:.2f} | {first['query_seconds']:.2f} / "
            f"{first['query_cpu_s']:.2f} | {first['query_cpu_s'] / low['query_cpu_s']:.3f}x | "
            f"{first['compiled_during']} ({first['pending_after']}) | "
            + " | ".join(f"{first['steps'][s]['cpu_s']:.3f} ({first['steps'][s]['calls']})" for s in STEPS) + " |")
    lines += ["", "Lowest tier's pass, the same steps: " + "; ".join(
        f"round {r['round']}: " + ", ".join(f"{s} {r['passes']['lowest']['steps'][s]['cpu_s']:.3f} "
                                            f"({r['passes']['lowest']['steps'][s]['calls']})" for s in STEPS)
        for r in rounds)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    from bench.first_runs import build_parser

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    parser.description = __doc__
    parser.add_argument("--fill-cache", action="store_true",
                        help="compile every generated kernel in another process first: each switch is a load")
    parser.add_argument("--fill-cache-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = [a for a in argv if a != "--fill-cache"]
    if args.fill_cache_only:
        fill_cache(args)
        return
    if args.round_output:
        os.environ["TMPDIR"] = str(Path(args.round_output).parent)
        tempfile.tempdir = None
        Path(args.round_output).write_text(json.dumps(run_round(args), default=str))
        return
    command = "python -m bench.tier_switch_costs " + " ".join(argv)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="tier-switch-") as folder:
        for number in range(args.rounds):
            output = Path(folder) / f"round{number}.json"
            subprocess.run([sys.executable, "-m", "bench.tier_switch_costs", *argv, "--round-output", str(output),
                            "--round-number", str(number)], check=True, cwd=REPO_ROOT)
            rounds.append(json.loads(output.read_text()))
            print(report(rounds[-1:], command), flush=True)
    text = report(rounds, command)
    print(text)
    if args.tag:
        out = Path(args.out) / f"{time.strftime('%Y-%m-%d')}-tier-switch-costs-{args.tag}.json"
        out.write_text(json.dumps({"command": command, "rounds": rounds}, indent=1, default=str))


if __name__ == "__main__":
    main()
