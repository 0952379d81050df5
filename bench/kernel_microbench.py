"""Time the engine's kernels against the device's own copy bandwidth, in one process.

What is measured, on one device, each after a warm-up run whose time (which
holds numba's JIT compilation) is reported apart as ``first_s``/``jit_s``:

* ``copy``: a device-to-device copy of ``rows`` int64 values (``xp.copyto``),
  the bandwidth ceiling, counting bytes read plus bytes written;
* ``partition``: :func:`~gpu_engine.kernels.partition.partition_gather_maps`
  (hash % P histogram, then the scatter of row numbers): 20 bytes a row moved
  at least (read the hash, write and re-read the partition, write the index);
* ``gather``: :func:`~gpu_engine.kernels.gather.gather` of int64 values by a
  random permutation: 20 bytes a row (index, random value read, write);
* ``hash_agg_few`` / ``hash_agg_many``: ``SELECT k, count(*), sum(v) GROUP BY
  k`` on int64 columns through the engine's kernels (normalize keys, insert
  into the group-by table, count, exact sum) with 8 groups and with
  ``200_000 × sf`` groups, in rows a second.

Clocks are read after the device is synchronized; each figure is the median
of ``--repeats`` runs. Targets (from the issue): partition ≥ 50% of the copy
bandwidth, hash aggregation ≥ 1 G rows/s; they are checked only on ``cuda``.

Run from the repository root::

    python -m bench.kernel_microbench --device cuda --rows 100000000 --sf 10
    python -m bench.kernel_microbench --device cpu --rows 20000 --repeats 3   # a smoke test
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python bench/kernel_microbench.py` puts bench/ first, not the root
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["run_microbench", "main", "TARGETS"]

#: The issue's targets: partition bandwidth as a share of the copy's, aggregation rows a second.
TARGETS = {"partition_fraction_of_copy": 0.5, "hash_agg_rows_per_s": 1e9}
PARTITIONS = 16
FEW_GROUPS = 8


def _time(device, run: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Return the first run's seconds, the median of ``repeats`` more, and their difference (JIT and warm-up)."""
    device.synchronize()
    start = time.perf_counter()
    run()
    device.synchronize()
    first = time.perf_counter() - start
    samples = []
    for _ in range(repeats):
        device.synchronize()
        start = time.perf_counter()
        run()
        device.synchronize()
        samples.append(time.perf_counter() - start)
    median = statistics.median(samples)
    return {"first_s": first, "median_s": median, "min_s": min(samples), "jit_s": max(0.0, first - median),
            "samples_s": samples}


def _aggregate(device, keys_column, values) -> Callable[[], Any]:
    from gpu_engine.kernels.aggregate import group_count, group_sum_int
    from gpu_engine.kernels.group_by import GroupByHashTable, normalize_keys

    xp = device.xp

    def run():
        words, widths = normalize_keys(device, [keys_column])
        table = GroupByHashTable(device, widths)
        group_ids, _ = table.insert(words)
        groups = table.num_groups
        counts = xp.zeros(groups, dtype=xp.int64)
        high, low = xp.zeros(groups, dtype=xp.int64), xp.zeros(groups, dtype=xp.int64)
        has_value = xp.zeros(groups, dtype=xp.bool_)
        group_count(device, group_ids, None, counts)
        group_sum_int(device, group_ids, values, None, high, low, has_value)
        return counts

    return run


def run_microbench(device_name: str, rows: int, repeats: int, scale_factor: float) -> dict[str, Any]:
    """Run every measurement on ``device_name``; return settings, figures and target checks."""
    import pyarrow as pa

    from gpu_engine.columnar.column import Column
    from gpu_engine.device import get_device
    from gpu_engine.kernels.gather import gather
    from gpu_engine.kernels.hash import hash_columns
    from gpu_engine.kernels.partition import partition_gather_maps

    device = get_device(device_name)
    xp = device.xp
    xp.random.seed(7)
    values = xp.random.randint(-(10**9), 10**9, size=rows).astype(xp.int64)
    copy_target = xp.empty_like(values)
    key_column = Column(pa.int64(), xp.random.randint(0, 1 << 40, size=rows).astype(xp.int64))
    hashes = hash_columns(device, [key_column])
    permutation = xp.random.permutation(rows).astype(xp.int32)
    many_groups = max(1, min(rows, int(200_000 * scale_factor)))
    few_keys = Column(pa.int64(), xp.random.randint(0, FEW_GROUPS, size=rows).astype(xp.int64))
    many_keys = Column(pa.int64(), xp.random.randint(0, many_groups, size=rows).astype(xp.int64))

    figures: dict[str, dict[str, Any]] = {}
    figures["copy"] = _time(device, lambda: xp.copyto(copy_target, values), repeats)
    figures["copy"]["bytes"] = 2 * values.nbytes
    figures["partition"] = _time(device, lambda: partition_gather_maps(device, hashes, PARTITIONS), repeats)
    figures["partition"]["bytes"] = 20 * rows
    figures["gather"] = _time(device, lambda: gather(device, values, permutation), repeats)
    figures["gather"]["bytes"] = 20 * rows
    figures["hash_agg_few"] = _time(device, _aggregate(device, few_keys, values), repeats)
    figures["hash_agg_few"]["groups"] = FEW_GROUPS
    figures["hash_agg_many"] = _time(device, _aggregate(device, many_keys, values), repeats)
    figures["hash_agg_many"]["groups"] = many_groups
    for name in ("copy", "partition", "gather"):
        figures[name]["gb_per_s"] = figures[name]["bytes"] / figures[name]["median_s"] / 1e9
    for name in ("partition", "gather"):
        figures[name]["fraction_of_copy"] = figures[name]["gb_per_s"] / figures["copy"]["gb_per_s"]
    for name in ("hash_agg_few", "hash_agg_many"):
        figures[name]["rows_per_s"] = rows / figures[name]["median_s"]

    checks = {
        "partition_fraction_of_copy": figures["partition"]["fraction_of_copy"] >= TARGETS["partition_fraction_of_copy"],
        "hash_agg_few_rows_per_s": figures["hash_agg_few"]["rows_per_s"] >= TARGETS["hash_agg_rows_per_s"],
        "hash_agg_many_rows_per_s": figures["hash_agg_many"]["rows_per_s"] >= TARGETS["hash_agg_rows_per_s"],
    }
    return {
        "device": device.name,
        "device_name": _device_name(device),
        "rows": rows,
        "repeats": repeats,
        "scale_factor": scale_factor,
        "partitions": PARTITIONS,
        "figures": figures,
        "targets": TARGETS,
        "targets_met": checks if device.is_gpu else None,
    }


def _device_name(device) -> str:
    if device.is_gpu:
        properties = device.xp.cuda.runtime.getDeviceProperties(0)
        name = properties["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    import platform

    return platform.processor() or platform.machine()


def render_table(report: dict[str, Any]) -> str:
    """Return the figures as a short markdown table."""
    figures = report["figures"]
    lines = [f"Kernel micro-benchmark on {report['device']} ({report['device_name']}), {report['rows']:,} rows, "
             f"median of {report['repeats']} runs after a warm-up (first run, JIT included, apart):", "",
             "| kernel | median ms | first ms (JIT) | GB/s | share of copy | rows/s |", "|---|---|---|---|---|---|"]
    for name, figure in figures.items():
        gbps = f"{figure['gb_per_s']:.1f}" if "gb_per_s" in figure else "—"
        share = f"{figure['fraction_of_copy'] * 100:.0f}%" if "fraction_of_copy" in figure else "—"
        rate = f"{figure['rows_per_s'] / 1e9:.2f} G" if "rows_per_s" in figure else "—"
        label = f"{name} ({figure['groups']:,} groups)" if "groups" in figure else name
        lines.append(f"| {label} | {figure['median_s'] * 1e3:.2f} | {figure['first_s'] * 1e3:.1f} "
                     f"| {gbps} | {share} | {rate} |")
    if report["targets_met"] is not None:
        met = ", ".join(f"{name}: {'met' if ok else 'MISSED'}" for name, ok in report["targets_met"].items())
        lines += ["", f"Targets (partition ≥ 50% of copy, hash aggregation ≥ 1 G rows/s): {met}"]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.kernel_microbench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cpu", "cuda", "cuda-sim"), help="device (default cuda)")
    parser.add_argument("--rows", type=int, default=100_000_000, help="rows per kernel call (default 100M)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs after the warm-up (default 10)")
    parser.add_argument("--sf", type=float, default=10.0, help="scale factor of the many-groups case: 200k x SF groups")
    parser.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the micro-benchmark and print its table; return 0."""
    args = build_parser().parse_args(argv)
    if args.rows < 1 or args.repeats < 1:
        raise SystemExit("--rows and --repeats must be at least 1")
    report = run_microbench(args.device, args.rows, args.repeats, args.sf)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(render_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
