"""A/B of the CPU join table's build: this tree's kernels/hash_join.py against a revision's, in one process.

``python -m bench.join_build_ab --base e33e285 --rows 1e6 3e6 1e7 --rounds 5``: the base revision's module is
loaded beside this tree's (``git show REV:kernels/hash_join.py``, imported under another name), and per shape
each side builds a :class:`JoinHashTable` over the same normalized keys, alternating per round; the build's CPU
time of the thread (``time.thread_time``: the machine is shared) is reported, medians. Shapes: ``uniqueN`` (N
distinct random int64 keys: hashed), ``dupN`` (N rows, 4 a key), ``fewN`` (N rows of 1,000 keys). Both sides'
tables are checked to find every key's rows equally for a sample of keys. ``--threads T`` builds this tree's side
with T threads (a join of T build drivers), and the base side too where its ``JoinHashTable`` takes a thread
count (revisions since the parallel build, 6924557; older ones build on one thread: then the A/B compares the
parallel build with the serial one); the process's CPU time (user + sys of every thread) and the wall are reported
instead.
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

import gpu_engine.kernels.hash_join as current
from gpu_engine.columnar.column import Column
from gpu_engine.device import get_device
from gpu_engine.kernels.group_by import normalize_keys


def _base_module(revision: str, source_path: str = "kernels/hash_join.py"):
    """Return the module ``source_path`` as it is at ``revision``, imported under a name of its own."""
    source = subprocess.run(["git", "show", f"{revision}:{source_path}"], check=True, capture_output=True,
                            text=True).stdout
    stem = os.path.splitext(os.path.basename(source_path))[0]
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"join_build_ab_{revision}_{stem}.py")
    with open(path, "w") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(f"join_build_ab_{revision}_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD")
    parser.add_argument("--rows", type=float, nargs="+", default=[1e6, 3e6, 1e7])
    parser.add_argument("--shapes", nargs="+", default=["unique", "dup", "few"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    device = get_device("cpu")
    base_class = _base_module(args.base).JoinHashTable
    sides = {"base": base_class, "this": current.JoinHashTable}
    if args.threads:
        sides["this"] = lambda device, words, widths: current.JoinHashTable(device, words, widths, args.threads)
        if len(inspect.signature(base_class).parameters) > 3:
            sides["base"] = lambda device, words, widths: base_class(device, words, widths, args.threads)
        else:
            print(f"the base revision's JoinHashTable takes no thread count: it builds on one thread", flush=True)
    rng = np.random.default_rng(5)
    print(f"load before {os.getloadavg()}", flush=True)
    for shape in args.shapes:
        for n in (int(r) for r in args.rows):
            keys_wanted = {"unique": n, "dup": n // 4, "few": 1000}[shape]
            distinct = rng.permutation(np.unique(rng.integers(0, 1 << 62, int(keys_wanted * 1.01)))[:keys_wanted])
            build = distinct[rng.integers(0, keys_wanted, n)] if shape != "unique" else distinct
            words, widths = normalize_keys(device, [Column.from_arrow(pa.array(build), device)])
            probe = Column.from_arrow(pa.array(build[rng.integers(0, n, 20_000)]), device)
            found = {}
            for name, table_class in sides.items():  # warm (compile) and check
                table = table_class(device, words, widths)
                ids = table.lookup_fixed_width(probe, None)
                found[name] = sorted(map(tuple, (table._rows[table._offsets[g]:table._offsets[g + 1]].tolist()
                                                 for g in ids[:200].tolist())))
                table.release()
            assert found["base"] == found["this"], f"{shape}{n}: the sides find different rows"
            samples: dict[str, list[float]] = {name: [] for name in sides}
            walls: dict[str, list[float]] = {name: [] for name in sides}
            for r in range(args.rounds):
                for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
                    times, wall = os.times(), time.perf_counter()
                    start = time.thread_time()
                    table = sides[name](device, words, widths)
                    end, done = time.thread_time(), os.times()
                    walls[name].append(time.perf_counter() - wall)
                    samples[name].append(done.user + done.system - times.user - times.system if args.threads
                                         else end - start)
                    table.release()
            base = statistics.median(samples["base"])
            print(f"| {shape} {n:,} rows | load {os.getloadavg()[0]:.1f} | "
                  + " | ".join(f"{name} {' '.join(f'{v:.3f}' for v in values)} median {statistics.median(values):.3f}"
                               for name, values in samples.items())
                  + f" | this / base {statistics.median(samples['this']) / base:.2f}x |"
                  + (f" wall base {statistics.median(walls['base']):.3f} this {statistics.median(walls['this']):.3f}"
                     f" ({statistics.median(walls['this']) / statistics.median(walls['base']):.2f}x) |"
                     if args.threads else ""), flush=True)


if __name__ == "__main__":
    main()
