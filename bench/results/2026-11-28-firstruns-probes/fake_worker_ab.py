"""First pass vs lowest tier alone, with the real compile process or a stand-in that takes every job and never answers."""
import json, os, subprocess, sys, tempfile, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))

def child(variant, order):
    os.environ["GPU_ENGINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpe-fakeworker-")
    from gpu_engine.codegen import compile_worker, background_compiles as bc
    if variant == "silent":  # jobs stay pending: the drivers do what they do in a first pass, nothing compiles
        compile_worker.worker_command = lambda control_fd=None: [sys.executable, "-c", "import sys; sys.stdin.buffer.read()"]
    from bench.first_runs import Workload, build_parser, settle_heap, QueryMeter
    work = Workload(build_parser().parse_args(["--workload", "tpch", "--sf", "1"]))
    static = work.session(fuse=False)
    for t in work.texts.values(): static.sql(t)
    warm = work.session(compile_mode="lowest")
    for t in work.texts.values(): warm.sql(t)
    meter = QueryMeter()
    out = {}
    def timed(session, label):
        settle_heap(); wall = cpu = delay = 0.0
        for t in work.texts.values():
            _, c = meter.measure(lambda: session.sql(t)); wall += c["seconds"]; cpu += c["cpu_s"]; delay += c["run_delay_s"]
        out[label] = {"wall": wall, "cpu": cpu, "delay": delay}
    lowest = work.session(compile_mode="lowest"); first = work.session(compile_mode="background")
    for o in order:
        timed(lowest, "lowest") if o == "l" else timed(first, "first")
    c = bc._COMPILER
    out.update(compiled=c.compiled if c else 0, pending=c.pending() if c else 0, load=os.getloadavg()[0])
    print(json.dumps(out))

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3]); sys.exit(0)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    for r in range(rounds):
        order = "lf" if r % 2 == 0 else "fl"
        for variant in (("real", "silent") if r % 2 == 0 else ("silent", "real")):
            done = subprocess.run([sys.executable, __file__, "child", variant, order], capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).resolve().parents[3]))
            if done.returncode != 0:
                print(variant, "failed", done.stderr[-2000:], flush=True); continue
            res = json.loads(done.stdout.strip().splitlines()[-1])
            f, l = res["first"], res["lowest"]
            print(json.dumps({"round": r, "variant": variant, "order": order, **res,
                              "wall_ratio": f["wall"] / l["wall"], "cpu_ratio": f["cpu"] / l["cpu"]}), flush=True)
