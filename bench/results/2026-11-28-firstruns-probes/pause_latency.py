"""How long the compile process keeps running after a PAUSE word (its handler runs only between bytecodes)."""
import os, sys, time, tempfile, statistics
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
os.environ["GPU_ENGINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpe-pauselat-")
from bench.compile_interference import JobSupply
from gpu_engine.codegen import background_compiles as bc
from gpu_engine.codegen.compile_worker import PAUSE, RUN
from bench.first_runs import Workload, build_parser
work = Workload(build_parser().parse_args(["--workload", "tpch", "--sf", "0.01"]))
templates = []
asked = bc.BackgroundCompiler.state_new
def record(self, f, fn, sig):
    templates.append((f, fn, sig)); return asked(self, f, fn, sig)
bc.BackgroundCompiler.state_new = record
bc._MAX_QUEUED_JOBS = 10**9
s = work.session(compile_mode="background")
for t in work.texts.values(): s.sql(t)
bc.BackgroundCompiler.state_new = asked
c = bc.background_compiler(); c.close(); bc._COMPILER = None
c = bc.background_compiler()
supply = JobSupply(templates); supply.refill(c, 50); c.pause_seconds = 0.0
p = c._process
def stat():
    f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    return f[0], int(f[11]) + int(f[12])
time.sleep(3.0)  # imports
bc._set_worker_priority(p.pid, True)
lat = []
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 15):
    time.sleep(0.7)
    supply.refill(c, 5)
    st0, t0 = stat()
    c._tell(p, PAUSE); sent = time.perf_counter()
    last_change, last = sent, t0
    while time.perf_counter() - sent < 4.0:
        time.sleep(0.002)
        st, t = stat()
        if t != last:
            last, last_change = t, time.perf_counter()
        if st == "S" and time.perf_counter() - last_change > 0.1:
            break
    lat.append(last_change - sent)
    print(f"pause {i}: state before {st0}, cpu ticks after PAUSE {last - t0}, kept running {1e3*(last_change-sent):.0f} ms", flush=True)
    os.write(c._control, RUN)
print("median ms", 1e3*statistics.median(lat), "max ms", 1e3*max(lat))
bc._set_worker_priority(p.pid, False)
c.close()
