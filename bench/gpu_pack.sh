#!/usr/bin/env bash
# Packs here what a GPU call carries beside the working tree, and checks it fits the 64 MiB a call may carry:
#
#   .gpusite.tar.xz   the wheels the GPU machine lacks (../shared/gpu/fetch-wheels.sh: duckdb, sqlglot, tpchgen-cli,
#                     tpcgen-cli, numpy 2.3.x, ...) installed ahead for Python 3.12 / x86-64 into one folder
#                     (pip install --target with --python-version/--platform), xz-compressed: ~29 MiB where the
#                     wheels themselves are ~50 MiB (2026-11-29), which with the ~20 MiB working tree was over 64 MiB
#   .pyspark.tgz      PySpark's Python package without its jars (the arrow step's partition function; ~1 MiB)
#
# bench/gpu_session.sh unpacks .gpusite.tar.xz into /tmp/site (no pip on the device, none of its seconds spent);
# without it, it installs .whl/*.whl as before. Usage, at the repository root:
#
#   bash bench/gpu_pack.sh            # fetch (when .whl/ is absent), install, pack, then print what travels
#   bash bench/gpu_pack.sh --check    # only print what travels: the working tree and the carried files
#
# Then carry [".gpusite.tar.xz", ".pyspark.tgz"] (and ".gpucache.tgz", ".gpu_retest.tsv" on a second call).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
for name in /.whl/ /.gpusite.tar.xz /.pyspark.tgz; do
  grep -qx "$name" "$exclude" 2>/dev/null || echo "$name" >> "$exclude"
done
mib() { awk '{s+=$1} END {printf "%.1f", s/1048576}'; }

if [ "${1:-}" != --check ]; then
  if ! compgen -G ".whl/*.whl" >/dev/null; then
    CONSTRAINTS=<(grep -v '^numpy==' constraints.txt) bash ../shared/gpu/fetch-wheels.sh tpcgen-cli
  fi
  site=$(mktemp -d /tmp/gpusite.XXXXXX)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" --python-version 3.12 \
    --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 .whl/*.whl
  # numpy's own tests and the byte code are of no use there. -9: 28.5 MiB (-6: 31.1 MiB; 2026-11-29); about two
  # minutes of CPU here, two seconds to unpack there.
  tar cf - -C "$site" --exclude=__pycache__ --exclude='numpy/tests' --exclude='numpy/*/tests' . \
    | xz -T0 -9 > .gpusite.tar.xz.tmp
  mv .gpusite.tar.xz.tmp .gpusite.tar.xz
  rm -rf "$site"
  # shellcheck disable=SC2086
  tar czf .pyspark.tgz -C .venv/lib/python3.*/site-packages --exclude=__pycache__ --exclude=tests \
    --exclude=pyspark/{jars,examples,ml,mllib,pandas,data,licenses,bin,sbin,pipelines,python} pyspark py4j
fi

tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | mib)
carried=0
for f in .gpusite.tar.xz .pyspark.tgz .gpucache.tgz .gpu_retest.tsv; do
  if [ -f "$f" ]; then
    echo "carried: $f $(stat -c %s "$f" | mib) MiB"
    carried=$((carried + $(stat -c %s "$f")))
  fi
done
carried=$(echo "$carried" | mib)
total=$(echo "$tree $carried" | awk '{printf "%.1f", $1 + $2}')
echo "working tree (tracked + untracked, not ignored) $tree MiB + carried $carried MiB = $total MiB of the 64 MiB a call takes"
awk -v t="$total" 'BEGIN {exit !(t > 62)}' && { echo "OVER: carry less (leave .pyspark.tgz for part2, or .gpucache.tgz)"; exit 1; }
exit 0
