"""Interning micro A/B: db-benchmark-like string keys into a warm cpu StringKeyTable, one ``bench/ab.py`` switch off and on.

Why: a db-benchmark question's interning is a few ns a row among the whole query's CPU; this times the table's
``intern`` alone (hash pass and probe loop) on batches like a fused aggregation's, sides alternating in one
process (CPU user+sys a row, medians), after checking both sides give the same ids and stored hashes.

    python -m bench.intern_micro head-words --distinct 100000 --batches 16 --rounds 9
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("switch", help="a bench/ab.py switch that changes the cpu StringKeyTable")
    parser.add_argument("--distinct", type=int, default=100_000, help="distinct strings (id%%010d: 12 bytes)")
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--rows", type=int, default=131_072, help="rows a batch")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()

    import numpy as np
    import pyarrow as pa

    from bench.ab import SWITCHES
    from gpu_engine.columnar.column import Column
    from gpu_engine.device import get_device
    from gpu_engine.host_allocator import tune_host_allocator
    from gpu_engine.kernels.string_keys import HASH, StringKeyTable

    tune_host_allocator()  # as a Session does
    device = get_device("cpu")
    rng = np.random.default_rng(1)
    names = np.array([f"id{v:010d}" for v in range(1, args.distinct + 1)], dtype=object)
    batches = [Column.from_arrow(pa.array(names[rng.integers(0, args.distinct, args.rows)].tolist()), device)
               for _ in range(args.batches)]
    module, attribute, without = SWITCHES[args.switch]()
    sides = {"without": without, "with": getattr(module, attribute)}
    tables = {side: StringKeyTable(device) for side in sides}

    def run(side):
        setattr(module, attribute, sides[side])
        try:
            return [tables[side].intern(batch) for batch in batches]
        finally:
            setattr(module, attribute, sides["with"])

    first, second = run("without"), run("with")
    known = tables["with"].num_known
    if not (all(np.array_equal(a, b) for a, b in zip(first, second))
            and np.array_equal(tables["without"]._words[:known, HASH], tables["with"]._words[:known, HASH])):
        print("the sides' ids or hashes differ")
        return 1
    samples = {side: [] for side in sides}
    for round_ in range(args.rounds):
        for side in list(sides) if round_ % 2 == 0 else list(sides)[::-1]:
            cpu = _cpu()
            run(side)
            samples[side].append((_cpu() - cpu) / (args.batches * args.rows) * 1e9)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.switch}: {known:,} strings, {args.batches} x {args.rows:,} rows into a warm table, "
          f"{args.rounds} rounds, load {load}")
    for side, values in samples.items():
        print(f"  {side:8} CPU median {statistics.median(values):6.2f} ns a row  {[round(v, 1) for v in values]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
