"""Where a first run's extra driver CPU goes: thread CPU inside TierSwitch.use_generated and its callbacks."""
import os, sys, tempfile, time, threading, argparse, collections
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
os.environ["GPU_ENGINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpe-instr-")
if len(sys.argv) > 2:
    os.environ["GPU_ENGINE_COMPILE_PAUSE"] = sys.argv[2]
from bench import first_runs
from bench.first_runs import Workload, QueryMeter, settle_heap, build_parser
args = build_parser().parse_args(["--workload", sys.argv[1] if len(sys.argv) > 1 else "tpch", "--sf", "1"])
from gpu_engine.codegen import background_compiles as bc
from gpu_engine.codegen import compiled_modules, kernel_inputs
acc = collections.defaultdict(float); cnt = collections.Counter()
local = threading.local()
def wrap(owner, name, label):
    orig = getattr(owner, name)
    def w(*a, **k):
        depth = getattr(local, label, 0)
        setattr(local, label, depth + 1)
        t = time.thread_time()
        try:
            return orig(*a, **k)
        finally:
            setattr(local, label, depth)
            if depth == 0:
                acc[label] += time.thread_time() - t; cnt[label] += 1
    setattr(owner, name, w)
wrap(bc.TierSwitch, "use_generated", "use_generated")
wrap(bc.TierSwitch, "_state", "_state")
wrap(bc, "kernel_state", "kernel_state")
wrap(bc.BackgroundCompiler, "state", "compiler.state")
wrap(bc.BackgroundCompiler, "_start_worker", "start_worker")
wrap(bc.BackgroundCompiler, "_apply_pause", "apply_pause")
wrap(kernel_inputs.KernelInputs, "bind", "KernelInputs.bind")
import gpu_engine.operators.fused_aggregation as fa, gpu_engine.codegen.compiled_row_kernel as crk
wrap(fa.FusedAggregation, "_kernel", "agg._kernel(generate+file)")
wrap(crk.CompiledRowKernel, "_kernel", "row._kernel(generate+file)")
wrap(fa.FusedAggregation, "_host_twins", "agg._host_twins")
work = Workload(args); work.expected()
static = work.session(fuse=False)
for n, t in work.texts.items(): static.sql(t)
warmed = work.session(compile_mode="lowest")
for n, t in work.texts.items(): warmed.sql(t)
def worker_cpu():
    c = bc._COMPILER
    p = c._process if c else None
    if p is None: return 0.0
    f = open(f"/proc/{p.pid}/stat").read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def timed(session, label):
    settle_heap(); acc.clear(); cnt.clear()
    t0 = time.perf_counter(); c0 = os.times(); w0 = worker_cpu()
    for n, t in work.texts.items(): session.sql(t)
    c1 = os.times(); t1 = time.perf_counter()
    print(f"{label}: wall {t1-t0:.2f}s cpu {(c1.user-c0.user)+(c1.system-c0.system):.2f}s worker cpu {worker_cpu()-w0:.2f}s  load {os.getloadavg()[0]:.1f}")
    for k, v in sorted(acc.items(), key=lambda kv: -kv[1]): print(f"   {k:32s} {v*1e3:8.1f} ms  x{cnt[k]}")
order = sys.argv[3] if len(sys.argv) > 3 else "lf"
lowest = work.session(compile_mode="lowest"); first = work.session(compile_mode="background")
for o in order:
    timed(lowest, "lowest") if o == "l" else timed(first, "first")
c = bc._COMPILER
print("compiled", c.compiled if c else None, "pending", c.pending() if c else None, "pauses", c.pauses if c else None)
