#!/usr/bin/env bash
# Run the GPU checks and figures of gpu_engine on a machine with an NVIDIA GPU, in steps that each fit
# one 10-minute call of the lent GPU machine (a fresh machine each call: every step sets itself up).
#
#   bench/gpu_run.sh data|tests|bench|micro|all [step ...]
#
#   data   generate TPC-H sf$SF Parquet with tpchgen-cli (multi-threaded) into $GPU_ENGINE_DATA
#   tests  the gpu-marked tests (pytest -m gpu: every device-parametrized test on cuda, plus the GPU-only ones)
#   bench  TPC-H primer/Q1/Q6 (or $QUERIES, e.g. all) on cuda, cold and hot, against DuckDB in the same run
#          (generates the data first when missing)
#   micro  kernel micro-benchmark: partition + gather maps, gather, hash aggregation, against a d2d copy;
#          then the launch micro-benchmark: host µs per launch, CUDA driver path against numba's dispatcher
#   all    data, micro, bench, then tests with whatever time is left of $BUDGET seconds
#
# Settings (environment): OUT (default bench/results; on the lent machine its $OUT comes back), SF (10),
# RUNS (5), DRIVERS (1: one driver per GPU Task; more are slower on cuda), QUERIES (primer,q1,q6),
# MICRO_ROWS (100000000), PYTEST_WORKERS (4),
# BUDGET (560 seconds for `all`), GPU_ENGINE_DATA (/tmp/gpu_engine_data). To try the script without a GPU:
#   DEVICE=cpu SKIP_SETUP=1 PYTHON=.venv/bin/python SF=0.01 MICRO_ROWS=20000 RUNS=1 bash bench/gpu_run.sh micro bench
#
# Packages the GPU machine lacks (duckdb, sqlglot, tpchgen-cli) travel as wheels in .whl/: fetch them on a
# machine with network with ../shared/gpu/fetch-wheels.sh at the pinned versions (numpy aside: the GPU needs 2.3.x),
#   CONSTRAINTS=<(grep -v '^numpy==' constraints.txt) ../shared/gpu/fetch-wheels.sh
# and carry .whl with the call. From the repo root:
#   device run: bash bench/gpu_run.sh all        (carry: .whl)
# Results: $OUT/<date>-gpu-<device>-sf<SF>.md/.json (with the micro-benchmark table), $OUT/micro-<date>.json,
# $OUT/tests.log, $OUT/gpu_run.log. Copy the .md/.json into bench/results/ of the repository afterwards.
set -uo pipefail

usage() {
  echo "usage: bench/gpu_run.sh data|tests|bench|micro|all [step ...]"
  echo "  (settings via environment: OUT SF RUNS DRIVERS QUERIES MICRO_ROWS PYTEST_WORKERS BUDGET GPU_ENGINE_DATA)"
}

if [ $# -eq 0 ]; then usage >&2; exit 2; fi
for step in "$@"; do
  case "$step" in
    -h|--help) usage; exit 0 ;;
    data|tests|bench|micro|all) ;;
    *) echo "unknown step '$step'" >&2; usage >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench/results}
SF=${SF:-10}
RUNS=${RUNS:-5}
DRIVERS=${DRIVERS:-1}
QUERIES=${QUERIES:-primer,q1,q6}
MICRO_ROWS=${MICRO_ROWS:-100000000}
PYTEST_WORKERS=${PYTEST_WORKERS:-4}
BUDGET=${BUDGET:-560}
DEVICE=${DEVICE:-cuda}
export GPU_ENGINE_DATA=${GPU_ENGINE_DATA:-/tmp/gpu_engine_data}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
LOG="$OUT/gpu_run.log"
DAY=$(date +%F)
MICRO_JSON="$OUT/micro-$DAY.json"
LAUNCH_JSON="$OUT/launch-$DAY.json"
PY=${PYTHON:-python3}

log() { echo "[gpu_run $(date +%T) +${SECONDS}s] $*" | tee -a "$LOG" >&2; }

remaining() { echo $(( BUDGET - SECONDS )); }

setup() {
  if [ "${SKIP_SETUP:-0}" = 1 ]; then return 0; fi
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      || { log "installing .whl/ failed"; return 1; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
  fi
  "$PY" -m pip install -q --no-deps --no-build-isolation -e . >>"$LOG" 2>&1 || { log "pip install -e . failed"; return 1; }
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG" >&2
  "$PY" - <<'EOF' 2>&1 | tee -a "$LOG" >&2
import cupy, numba, pyarrow
from gpu_engine.device import gpu_available
missing = [m for m in ("duckdb", "sqlglot") if __import__("importlib").util.find_spec(m) is None]
print("cupy", cupy.__version__, "numba", numba.__version__, "pyarrow", pyarrow.__version__,
      "gpu", gpu_available(), "missing:", missing or "none")
EOF
}

step_data() {
  log "data: TPC-H sf$SF into $GPU_ENGINE_DATA"
  timeout "${1:-300}" "$PY" -c "
import sys
from gpu_engine.connectors.tpch_data import ensure_tpch
print(ensure_tpch(float(sys.argv[1])))" "$SF" 2>&1 | tee -a "$LOG"
}

step_micro() {
  log "micro: $MICRO_ROWS rows"
  timeout "${1:-240}" "$PY" -m bench.kernel_microbench --device "$DEVICE" --rows "$MICRO_ROWS" --repeats 10 --sf "$SF" \
    --json "$MICRO_JSON" 2>&1 | tee -a "$LOG"
  log "micro: launch cost"
  timeout 120 "$PY" -m bench.launch_microbench --device "$DEVICE" --json "$LAUNCH_JSON" 2>&1 | tee -a "$LOG"
}

step_bench() {
  log "bench: sf$SF queries $QUERIES, $DRIVERS drivers, $RUNS runs"
  local micro=()
  if [ -f "$MICRO_JSON" ]; then micro=(--micro-json "$MICRO_JSON"); fi
  timeout "${1:-540}" "$PY" -m bench.run_gpu_bench --device "$DEVICE" --sf "$SF" --runs "$RUNS" --drivers "$DRIVERS" \
    --queries "$QUERIES" --output-dir "$OUT" "${micro[@]}" 2>&1 | tee -a "$LOG"
}

step_tests() {
  local workers=()
  if "$PY" -c "import xdist" 2>/dev/null && [ "$PYTEST_WORKERS" -gt 1 ]; then workers=(-n "$PYTEST_WORKERS"); fi
  log "tests: pytest -m gpu ${workers[*]}"
  timeout "${1:-560}" "$PY" -m pytest -m gpu -q -p no:cacheprovider -rfEs "${workers[@]}" tests 2>&1 \
    | tee "$OUT/tests.log" | tail -n 60
}

setup || exit 1
status=0
for step in "$@"; do
  case "$step" in
    data) step_data 540 || status=1 ;;
    micro) step_micro 540 || status=1 ;;
    bench) step_bench 560 || status=1 ;;
    tests) step_tests 560 || status=1 ;;
    all)
      step_data 200 || status=1
      step_micro 120 || status=1
      step_bench $(( $(remaining) > 300 ? 300 : $(remaining) )) || status=1
      if [ "$(remaining)" -gt 60 ]; then
        step_tests "$(remaining)" || status=1
      else
        log "tests skipped: too little time left in this call; run 'bench/gpu_run.sh tests' on its own"
      fi
      ;;
  esac
done
log "done (status $status)"
# The short tables last, so the end of the output holds them.
for report in "$OUT"/"$DAY"-*-sf"$SF".md; do
  [ -f "$report" ] && "$PY" -c "
import sys
from bench.run_gpu_bench import summary
print(summary(open(sys.argv[1]).read()))" "$report"
done
if [ -f "$MICRO_JSON" ]; then
  "$PY" -c "
import json, sys
from bench.kernel_microbench import render_table
print(render_table(json.load(open(sys.argv[1]))))" "$MICRO_JSON"
fi
if [ -f "$LAUNCH_JSON" ]; then
  "$PY" -c "
import json, sys
from bench.launch_microbench import render_table
print(render_table(json.load(open(sys.argv[1]))))" "$LAUNCH_JSON"
fi
exit $status
