#!/usr/bin/env bash
# Everything a lent GPU machine should check, in one or two calls of at most 10 minutes each:
#
#   bench/gpu_session.sh part1 [options]    env data tests tpch      (pytest -m gpu; TPC-H SF10 cold/hot vs DuckDB)
#   bench/gpu_session.sh part2 [options]    env ptxoff tpcds micro hostdecode decode arrow (PTX off the drivers; TPC-DS SF1 on cuda; micro-benchmarks)
#   bench/gpu_session.sh STEP ... [options] any steps, always run in priority order
#   bench/gpu_session.sh --help             every option (python -m bench.gpu_session --help)
#
# This shell part only sets up: it unpacks the packages carried in .gpusite.tar.xz (duckdb, sqlglot, tpchgen-cli,
# numpy 2.3.x, ...: installed ahead for Python 3.12 by bench/gpu_pack.sh, xz: ~29 MiB against ~50 MiB of wheels) into
# /tmp/site, or else installs the wheels carried in .whl/ there with `pip install --no-index --no-deps --target`, installs the
# repository (editable, no deps), unpacks a carried kernel cache .gpucache.tgz (the previous call's $OUT/gpucache.tgz)
# into .gpucache, and hands over to python -m bench.gpu_session, which runs the steps, each under its own time limit,
# and writes $OUT/summary.md (the short table, also printed last), summary.json, session.log, details.tgz and
# gpucache.tgz after every step. A warm machine keeps /tmp: set-up and data are reused when a second call follows.
#
# Settings (environment): OUT (results, default /tmp/gpu_out), GIT_COMMIT (the commit under test, for the table),
# PYTHON (default python3), SKIP_SETUP=1 (no pip: the checks of the script itself on a host), GPU_ENGINE_DATA
# (default /tmp/gpu_engine_data). Options after the steps go to bench.gpu_session: --budget SECONDS (default 570;
# shorter budgets shorten every step in proportion), --small, --device, --sf, --runs, --queries, --workers, ...
#
# From the `run` tool, carrying .gpusite.tar.xz and .pyspark.tgz (bench/gpu_pack.sh makes both and checks the 64 MiB),
# and (when you have one) .gpucache.tgz:
#   GIT_COMMIT=<hash> bash bench/gpu_session.sh part1
#   GIT_COMMIT=<hash> bash bench/gpu_session.sh part2 --budget 300
# Without a GPU (checks the script end to end):
#   SKIP_SETUP=1 PYTHON=.venv/bin/python OUT=/tmp/out bash bench/gpu_session.sh part1 part2 --small --device cpu
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
case "${1:-}" in
  ""|-h|--help)
    awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'
    [ -n "${1:-}" ] && exec "${PYTHON:-python3}" -m bench.gpu_session --help
    exit 2 ;;
esac
PY=${PYTHON:-python3}
export OUT=${OUT:-/tmp/gpu_out}
export GPU_ENGINE_DATA=${GPU_ENGINE_DATA:-/tmp/gpu_engine_data}
export GPU_ENGINE_CACHE_DIR=${GPU_ENGINE_CACHE_DIR:-$PWD/.gpucache}
export GPU_ENGINE_PTX_CACHE=${GPU_ENGINE_PTX_CACHE:-$GPU_ENGINE_CACHE_DIR/ptx}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$GPU_ENGINE_CACHE_DIR"
setup_log="$OUT/session.log"
note() { echo "[gpu_session.sh $(date +%T) +${SECONDS}s] $*" | tee -a "$setup_log"; }

if [ -f .gpucache.tgz ]; then
  tar xzf .gpucache.tgz -C "$GPU_ENGINE_CACHE_DIR" && note "kernel cache unpacked: $(find "$GPU_ENGINE_PTX_CACHE" -name '*.ptx' 2>/dev/null | wc -l) PTX files"
else
  note "no .gpucache.tgz carried: kernels compile on this machine in this call (carry \$OUT/gpucache.tgz back as .gpucache.tgz)"
fi
if [ -f .pyspark.tgz ] && [ "${SKIP_SETUP:-0}" != 1 ]; then  # PySpark's Python package, no jars: the arrow step's
  mkdir -p /tmp/site && tar xzf .pyspark.tgz -C /tmp/site && note "PySpark's Python package unpacked (no JVM)"
fi
if [ "${SKIP_SETUP:-0}" != 1 ]; then
  if [ -f /tmp/site/.gpu_session_done ] && [ -z "$(find .whl .gpusite.tar.xz -newer /tmp/site/.gpu_session_done \
       \( -name '*.whl' -o -name .gpusite.tar.xz \) 2>/dev/null)" ]; then
    note "set-up kept from the last call on this warm machine"
  else
    if [ -f .gpusite.tar.xz ]; then  # the wheels installed ahead for Python 3.12 (bench/gpu_pack.sh): no pip here
      mkdir -p /tmp/site && tar xJf .gpusite.tar.xz -C /tmp/site >>"$setup_log" 2>&1 \
        && note "packages unpacked from .gpusite.tar.xz" || note "unpacking .gpusite.tar.xz failed (see session.log)"
    elif compgen -G ".whl/*.whl" >/dev/null; then
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        >>"$setup_log" 2>&1 || note "installing .whl/ failed (see session.log)"
    else
      note "no .gpusite.tar.xz or wheels in .whl/: duckdb, sqlglot and tpchgen-cli must be on the machine already"
    fi
    mkdir -p /tmp/site && touch /tmp/site/.gpu_session_done
  fi
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
  "$PY" -m pip install -q --no-deps --no-build-isolation -e . >>"$setup_log" 2>&1 || note "pip install -e . failed"
fi
note "set-up done"
exec "$PY" -m bench.gpu_session "$@" --budget-start "$SECONDS"
