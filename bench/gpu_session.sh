#!/usr/bin/env bash
# One call of the lent GPU machine, in steps that each stop at their own time limit and never stop the rest:
#
#   bench/gpu_session.sh STEP[:SECONDS] ...
#
#   launch          the launch micro-benchmark (host µs per kernel launch)
#   sf1             all 22 TPC-H at SF1 on cuda through the CLI, each checked against DuckDB (tracebacks shown)
#   bench           bench.run_gpu_bench at SF$SF, $QUERIES, hot and cold, DuckDB in the same process
#   tests           pytest -m gpu over $PYTEST_WORKERS processes, verbose into $OUT/tests.log
#   retest          pytest -m gpu $TEST_ARGS with short tracebacks into $OUT/retest.log
#   profile         sampled host profile of hot queries ($PROFILE_QUERY, comma-separated; each within the limit)
#
# Kernels compiled on the machine (PTX and generated modules) live in $GPU_ENGINE_CACHE_DIR (.gpucache, ignored by
# git); at the end they are packed into $OUT/gpucache.tgz: copied to .gpucache.tgz and carried, the next call skips the JIT.
# Every step appends to $OUT/session.log; the bench writes its report into $OUT.
# The wheels in .whl (installed first) come from ../shared/gpu/fetch-wheels.sh at the repository's pins:
#   CONSTRAINTS=<(grep -v '^numpy==' constraints.txt) ../shared/gpu/fetch-wheels.sh   (numpy: the GPU needs 2.3.x)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/gpu_out}
SF=${SF:-10}
RUNS=${RUNS:-3}
QUERIES=${QUERIES:-primer,q1,q6}
PYTEST_WORKERS=${PYTEST_WORKERS:-12}
PROFILE_QUERY=${PROFILE_QUERY:-1}
export GPU_ENGINE_CACHE_DIR=${GPU_ENGINE_CACHE_DIR:-$PWD/.gpucache}
export GPU_ENGINE_PTX_CACHE=${GPU_ENGINE_PTX_CACHE:-$GPU_ENGINE_CACHE_DIR/ptx}
export GPU_ENGINE_DATA=${GPU_ENGINE_DATA:-/tmp/gpu_engine_data}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$GPU_ENGINE_CACHE_DIR"
if [ -f .gpucache.tgz ]; then tar xzf .gpucache.tgz -C "$GPU_ENGINE_CACHE_DIR"; fi  # the last call's kernels
LOG="$OUT/session.log"
log() { echo "[gpu_session $(date +%T) +${SECONDS}s] $*" | tee -a "$LOG"; }

if [ -d .whl ] && [ "${SKIP_SETUP:-0}" != 1 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >>"$LOG" 2>&1 || log "installing .whl failed"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
  python3 -m pip install -q --no-deps --no-build-isolation -e . >>"$LOG" 2>&1 || log "pip install -e . failed"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
python3 -c "import cupy, numba, numpy, pyarrow; print('cupy', cupy.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'pyarrow', pyarrow.__version__)" 2>&1 | tee -a "$LOG"
log "cache: $(du -sh "$GPU_ENGINE_CACHE_DIR" 2>/dev/null | cut -f1)"

for spec in "$@"; do
  step=${spec%%:*}
  limit=${spec#*:}; [ "$limit" = "$spec" ] && limit=300
  log "step $step (limit ${limit}s)"
  case "$step" in
    launch)
      timeout "$limit" python3 -m bench.launch_microbench --device cuda 2>&1 | tee -a "$LOG" | tail -n 15 ;;
    sf1)
      timeout "$limit" python3 -m gpu_engine tpch --sf 1 --device cuda --queries "${SF1_QUERIES:-all}" --runs 1 \
        --rows 1 --traceback 2>&1 | tee -a "$LOG" | grep -v '^\s*$' | tail -n 40 ;;
    bench)
      timeout "$limit" python3 -m bench.run_gpu_bench --device cuda --sf "$SF" --runs "$RUNS" --drivers 1 \
        --queries "$QUERIES" --output-dir "$OUT" ${BENCH_TAG:+--tag "$BENCH_TAG"} ${MODES:+--modes "$MODES"} 2>&1 | tee -a "$LOG" | tail -n 40 ;;
    retest)  # $TEST_ARGS (shell words: paths, -k '...') with tracebacks, not verbose
      eval "test_args=($TEST_ARGS)"
      timeout "$limit" python3 -m pytest -m gpu -q -p no:cacheprovider -p no:benchmark -rfE --tb=short --timeout 120 \
        -n "$PYTEST_WORKERS" "${test_args[@]}" 2>&1 | tee "$OUT/retest.log" | grep -E "^FAILED|^ERROR| passed| failed" \
        | cut -c1-300 | tail -n 60 ;;
    tests)
      timeout "$limit" python3 -m pytest -m gpu -v -p no:cacheprovider -rfE --tb=short --timeout 240 -n "$PYTEST_WORKERS" \
        -p no:benchmark tests 2>&1 | tee "$OUT/tests.log" \
        | grep -E "^FAILED|^ERROR| passed| failed" | cut -c1-200 | tail -n 40 ;;
    profile)
      for query in ${PROFILE_QUERY//,/ }; do
        timeout "$limit" python3 bench/gpu_profile.py "$query" "$SF" 2>&1 | tee -a "$LOG" | tail -n 45
      done ;;
    *) log "unknown step $step" ;;
  esac
  log "step $step: exit ${PIPESTATUS[0]}"
done
tar czf "$OUT/gpucache.tgz" -C "$GPU_ENGINE_CACHE_DIR" . 2>/dev/null
log "done; cache $(du -sh "$OUT/gpucache.tgz" | cut -f1)"
