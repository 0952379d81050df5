"""Measure Spark's Arrow batches to the device: pinned PCIe GB/s, the scan's copier, the partition function's rows/s.

Why (issue 32 item 3): a ``mapInArrow`` partition function gets Arrow record
batches from the JVM; on ``cuda`` they go to the device through the scan's
pinned staging (:mod:`gpu_engine.columnar.transfers`: gathered into device
batches, packed into pinned slots on prefetch threads, one asynchronous copy a
batch). The target: host to device at >= 50% of the measured pinned PCIe
bandwidth for batches of >= 1M rows. Measured in-process, without a JVM: the
partition function is called on record batches of TPC-H ``lineitem``'s Q1
columns (read from the Parquet file of ``--sf``, repeated when it is smaller).

Sections, each the median of ``--runs`` timed runs after one untimed run (kernel compiles):

* ``pinned``: CuPy, a pinned host buffer to the device (``--pinned-mib`` MiB), and the same from pageable
  memory; the device synchronized around the clock (``cuda`` only);
* ``copier``: :class:`~gpu_engine.columnar.transfers.HostToDeviceCopier` on prepared runs of ``--rows``
  rows, staged and copied batch after batch as a scan's driver does (two slots), synchronized at the end:
  GB/s of the whole (packing included) and of the copy engine alone (CUDA events);
* ``partition``: the partition function (:func:`gpu_engine.spark.fragment_task.run_partition`) running
  Q1's filter and aggregation over ``--batches`` device batches of ``--rows`` rows (``--cpu-batches`` on
  ``cpu``, 1 by default: it is the slow one) fed as Arrow batches of ``--spark-batch-rows`` rows, on the
  device and on ``cpu`` in the same process, one driver each, interleaved run by run: rows/s, and from
  the Task's stats the copies a batch, the bytes, the copy engine's GB/s and the host-to-device GB/s over
  the wall time. The Task ends with its result on the host, so its clock
  includes every device step.

Usage::

    python -m bench.spark_arrow_device --device cuda --sf 10 --rows 1000000,4000000 --json out.json
    python -m bench.spark_arrow_device --device cpu --small          # checks the script on a host
    python -m bench.spark_arrow_device --device cuda-sim --small     # the copier's GPU steps on the simulator

The ``partition`` section needs PySpark's Python package (its types fix the wire schema); without it
the section is skipped, saying so. ``bench/gpu_session.py``'s ``arrow`` step runs this module.
No GPU figure was taken when this was written.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main", "measure"]

#: Q1's lineitem columns, as Spark sends them (decimals, a date, two one-letter strings).
Q1_COLUMNS = ("l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate")
Q1_AGGREGATES = ("sum(l_quantity) AS sum_qty", "sum(l_extendedprice) AS sum_base_price",
                 "sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price",
                 "sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge", "count(*) AS count_order")


def lineitem_batch(sf: float, rows: int):
    """Return ``rows`` rows of lineitem's Q1 columns as one record batch with Spark's wire types (file repeated).

    Above SF1 the file is read only when it exists (the GPU script's data step made it); else SF1's.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_engine.connectors.tpch_data import ensure_tpch, tpch_directory

    if sf > 1 and not (tpch_directory(sf) / "lineitem.parquet").exists():
        sf = 1.0  # SF1's 6M rows are enough: a larger scale is read only when this machine has it already
    path = ensure_tpch(sf, tables=["lineitem"], progress=False) / "lineitem.parquet"
    parquet = pq.ParquetFile(path)
    parts, held = [], 0
    for record_batch in parquet.iter_batches(batch_size=1 << 20, columns=list(Q1_COLUMNS)):
        parts.append(record_batch)
        held += record_batch.num_rows
        if held >= rows:
            break
    table = pa.Table.from_batches(parts)
    schema = pa.schema([pa.field(f.name, pa.string() if pa.types.is_string(f.type) or
                                 str(f.type) == "string_view" else f.type) for f in table.schema])
    table = table.cast(schema)
    while table.num_rows < rows:
        table = pa.concat_tables([table, table])
    return table.slice(0, rows).combine_chunks().to_batches()[0]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pinned_bandwidth(device, mib: int, runs: int) -> dict:
    """Return the median GB/s of one copy of ``mib`` MiB to the device from pinned and from pageable memory."""
    import cupy
    import cupyx
    import numpy as np

    nbytes = mib << 20
    pinned = cupyx.empty_pinned(nbytes, dtype=np.uint8)
    pinned[:] = 1
    pageable = np.ones(nbytes, dtype=np.uint8)
    target = cupy.empty(nbytes, dtype=np.uint8)
    stream = cupy.cuda.get_current_stream()
    figures = {}
    for name, source in (("pinned", pinned), ("pageable", pageable)):
        seconds = []
        for run in range(runs + 1):
            stream.synchronize()
            began = time.perf_counter()
            target.set(source, stream=stream)
            stream.synchronize()
            if run:
                seconds.append(time.perf_counter() - began)
        figures[f"{name}_gb_per_s"] = nbytes / _median(seconds) / 1e9
    return {"bytes": nbytes, **figures}


def copier_rate(device, record_batch, batches: int, runs: int) -> dict:
    """Return GB/s of staging and copying ``batches`` prepared runs through one copier, as a scan's driver does."""
    from gpu_engine.columnar.transfers import HostToDeviceCopier, prepare_run

    run = prepare_run([record_batch])
    walls, engine, nbytes = [], [], 0
    for attempt in range(runs + 1):
        stats: dict[str, float] = {}
        copier = HostToDeviceCopier(device, lambda name, value: stats.__setitem__(name, stats.get(name, 0) + value))
        copier.attach()
        device.synchronize()
        began = time.perf_counter()
        kept = [copier.upload(run) for _ in range(batches)]
        device.synchronize()
        wall = time.perf_counter() - began
        copier.close()
        del kept
        if attempt:
            walls.append(wall)
            engine.append(stats.get("h2d_seconds", 0.0))
            nbytes = stats["h2d_bytes"]
    return {"bytes": nbytes, "copies": batches, "gb_per_s": nbytes / _median(walls) / 1e9,
            "copy_engine_gb_per_s": (nbytes / _median(engine) / 1e9) if _median(engine) > 0 else None,
            "seconds": _median(walls)}


def _q1_function(schema, device_name: str, rows: int, prefetch: int | None):
    from gpu_engine.plans import PlanBuilder
    from gpu_engine.spark import fragment_function

    plan = (PlanBuilder({"lineitem": schema}).table_scan("lineitem").filter("l_shipdate <= date '1998-09-02'")
            .aggregation(["l_returnflag", "l_linestatus"], list(Q1_AGGREGATES)).plan())
    config = {"batch_rows": rows, "compile_mode": "inline"}
    if prefetch is not None:
        config["scan_prefetch_depth"] = prefetch
    if device_name == "cuda-sim":
        config["scan_pinned_staging"] = True  # the GPU's staging steps on the simulator
    return fragment_function(plan, device=device_name, config=config)


def partition_rate(device_batches: dict[str, int], record_batch, spark_rows: int, runs: int,
                   prefetch: int | None) -> dict:
    """Return per device the median seconds and rows/s of the partition function, and the device's copy figures.

    ``device_batches``: device name -> device batches its partition holds (``cpu`` gets fewer: it is the slow one).
    """
    device_names = list(device_batches)
    most = max(device_batches.values())
    if any(most % batches for batches in device_batches.values()):
        raise ValueError(f"the partitions' device batches must divide each other, got {device_batches}")
    from gpu_engine.device import get_device
    from gpu_engine.spark.fragment_task import run_partition

    import pyarrow as pa

    # One device batch's worth of Arrow batches, fed `batches` times.
    spark_batches = (pa.Table.from_batches([record_batch]).to_batches(max_chunksize=spark_rows) if spark_rows
                     else [record_batch])
    functions = {name: _q1_function(record_batch.schema, name, record_batch.num_rows, prefetch)
                 for name in device_names}
    seconds = {name: [] for name in device_names}
    scans = {name: [] for name in device_names}
    results = {}
    for attempt in range(runs + 1):
        for name in device_names:  # interleaved run by run
            device = get_device(name)
            seen = []
            device.synchronize()
            began = time.perf_counter()
            out = list(run_partition(functions[name], (b for _ in range(device_batches[name]) for b in spark_batches),
                                     seen.append))
            device.synchronize()
            wall = time.perf_counter() - began
            # The same rows fed k times: Q1's sums and counts are k times one batch's (groups are the strings).
            results[name] = sorted(tuple(value if isinstance(value, str) else value * (most // device_batches[name])
                                         for value in row.values()) for b in out for row in b.to_pylist())
            if attempt:
                seconds[name].append(wall)
                scans[name].append(next(s for group in seen[0].operator_stats_by_node().values() for s in group
                                        if s.operator_type == "TableScan"))
    figures = {}
    for name in device_names:
        wall = _median(seconds[name])
        rows = record_batch.num_rows * device_batches[name]
        figure = {"rows": rows, "seconds": wall, "rows_per_s": rows / wall, "runs": len(seconds[name])}
        scan = scans[name][len(scans[name]) // 2]
        runtime = scan.runtime
        if "h2d_bytes" in runtime:
            figure.update({
                "h2d_bytes": runtime["h2d_bytes"], "h2d_copies": runtime.get("h2d_copies", 0),
                "device_batches": scan.output_batches, "splits": runtime.get("splits", 0),
                "h2d_staging_waits": runtime.get("h2d_staging_waits", 0),
                "h2d_pack_seconds": runtime.get("h2d_pack_seconds", 0.0),
                "h2d_gb_per_s_over_wall": runtime["h2d_bytes"] / wall / 1e9,
                "copy_engine_gb_per_s": (runtime["h2d_bytes"] / runtime["h2d_seconds"] / 1e9
                                         if runtime.get("h2d_seconds") else None),
            })
        figures[name] = figure
    first = next(iter(results.values()))
    figures["same_result"] = all(_close(first, other) for other in results.values())
    return figures


def _close(left: list, right: list) -> bool:
    if len(left) != len(right):
        return False
    for a, b in zip(left, right):
        for x, y in zip(a, b):
            if isinstance(x, float) or isinstance(y, float):
                if abs(float(x) - float(y)) > 1e-6 * max(1.0, abs(float(x))):
                    return False
            elif x != y:
                return False
    return True


def measure(args: argparse.Namespace, on_size=None) -> dict:
    """Run the sections for every ``--rows`` size; return the figures (``on_size`` gets them after each size)."""
    from gpu_engine.device import get_device

    device = get_device(args.device)
    result: dict = {"sizes": {}}
    if device.is_gpu:
        result["pinned"] = pinned_bandwidth(device, args.pinned_mib, args.runs)
    for rows in args.rows:
        record_batch = lineitem_batch(args.sf, rows)
        size: dict = {"rows": rows, "bytes": record_batch.nbytes}
        if args.device != "cpu":
            size["copier"] = copier_rate(device, record_batch, args.batches, args.runs)
        try:
            import pyspark  # noqa: F401  (its types fix the wire schema)
        except ImportError:
            size["partition"] = {"skipped": "PySpark is not installed: the partition function needs its types"}
        else:
            batches = {args.device: args.batches}
            if args.device != "cpu":
                batches["cpu"] = args.cpu_batches
            size["partition"] = partition_rate(batches, record_batch, args.spark_batch_rows, args.runs, args.prefetch)
        result["sizes"][str(rows)] = size
        if on_size is not None:
            on_size(result)
    return result


def headline(result: dict, device_name: str) -> str:
    """Return one line: pinned GB/s, then per size the copier's share of it and rows/s on the device and cpu."""
    parts = []
    pinned = result.get("pinned", {}).get("pinned_gb_per_s")
    if pinned:
        parts.append(f"pinned {pinned:.1f} GB/s (pageable {result['pinned']['pageable_gb_per_s']:.1f})")
    for rows, size in result["sizes"].items():
        words = [f"{int(rows) / 1e6:g}M rows:"]
        copier = size.get("copier")
        if copier:
            share = f" = {copier['gb_per_s'] / pinned:.0%} of pinned" if pinned else ""
            words.append(f"copier {copier['gb_per_s']:.2f} GB/s{share}")
        partition = size.get("partition", {})
        if "skipped" in partition:
            words.append(f"partition skipped ({partition['skipped']})")
        else:
            own = partition.get(device_name, {})
            if device_name != "cpu" and own:
                wire = own.get("h2d_gb_per_s_over_wall")
                engine = own.get("copy_engine_gb_per_s")
                words.append(f"{device_name} {own['rows_per_s'] / 1e6:.2f} Mrows/s vs cpu "
                             f"{partition['cpu']['rows_per_s'] / 1e6:.2f} "
                             f"(x{own['rows_per_s'] / partition['cpu']['rows_per_s']:.2f}); "
                             f"{own.get('h2d_copies', 0):g} copies for {own.get('device_batches', 0):g} device batches"
                             + (f"; h2d {engine:.1f} GB/s on the copy engine" if engine else "")
                             + (f", {wire:.2f} GB/s over the wall" if wire is not None else ""))
            elif own:
                words.append(f"cpu {own['rows_per_s'] / 1e6:.2f} Mrows/s")
            if not partition.get("same_result", True):
                words.append("RESULTS DIFFER")
        parts.append(words[0] + " " + ", ".join(words[1:]))
    return "; ".join(parts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_arrow_device", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu", "cuda-sim"))
    parser.add_argument("--sf", type=float, default=None, help="TPC-H scale factor of the lineitem file (default 1)")
    parser.add_argument("--rows", default=None, help="rows per device batch, comma-separated (default 1000000,4000000)")
    parser.add_argument("--batches", type=int, default=None, help="device batches per partition (default 4)")
    parser.add_argument("--cpu-batches", type=int, default=None,
                        help="device batches of cpu's partition (default 1; the device's --batches when it is cpu)")
    parser.add_argument("--spark-batch-rows", type=int, default=0,
                        help="rows of the Arrow batches fed (default 0: one Arrow batch a device batch)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs (default 3; --small 1)")
    parser.add_argument("--prefetch", type=int, default=None, help="scan_prefetch_depth (default: the device's)")
    parser.add_argument("--pinned-mib", type=int, default=256, help="MiB of the pinned bandwidth copy (default 256)")
    parser.add_argument("--small", action="store_true", help="tiny sizes: checks the script on a host device")
    parser.add_argument("--json", default=None, help="write the figures here")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Measure, print the figures and one headline line last; return 1 when a device's result differs from cpu's."""
    args = build_parser().parse_args(argv)
    if args.device == "cuda-sim":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    small = args.small
    args.sf = args.sf if args.sf is not None else (0.01 if small else 1.0)
    args.rows = [int(float(v)) for v in (args.rows or ("2000" if small else "1000000,4000000")).split(",")]
    args.batches = args.batches or (2 if small else 4)
    args.cpu_batches = args.cpu_batches or (args.batches if small else 1)
    args.runs = args.runs or (1 if small else 3)
    if small and not args.spark_batch_rows:
        args.spark_batch_rows = 500
    load_before = [round(v, 2) for v in os.getloadavg()]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()

    def report_of(result: dict, partial: bool) -> dict:
        after = resource.getrusage(resource.RUSAGE_SELF)
        return {"date": f"{datetime.datetime.now():%Y-%m-%d %H:%M}", "command": " ".join(sys.argv),
                "device": args.device, "sf": args.sf, "batches": args.batches, "cpu_batches": args.cpu_batches,
                "runs": args.runs, "spark_batch_rows": args.spark_batch_rows, "partial": partial,
                "load_before": load_before, "load_after": [round(v, 2) for v in os.getloadavg()],
                "process_cpu_seconds": round(after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime, 2),
                "wall_seconds": round(time.perf_counter() - began, 2), "result": result}

    def write(result: dict, partial: bool) -> None:  # after every size: a run cut off keeps what it measured
        if args.json:
            Path(args.json).write_text(json.dumps(report_of(result, partial), indent=1, default=str) + "\n")

    result = measure(args, lambda figures: write(figures, True))
    write(result, False)
    print(json.dumps(report_of(result, False), indent=1, default=str))
    line = headline(result, args.device)
    print(line, flush=True)
    differs = any(not size.get("partition", {}).get("same_result", True) for size in result["sizes"].values())
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
