"""Time the host cost of one kernel launch: the CUDA driver path against numba's dispatcher, in µs per launch.

Why: on a GPU the engine is bound by host work per batch, and every batch
launches tens of kernels; the issue's target is ≤ 10 µs of host time per
launch (numba's dispatcher typing CuPy arguments costs ~130 µs on the H100).

The kernel is the hash-combine step (``_combine_column_cuda``: three arrays
and two flags, a typical mix) over ``--rows`` rows, small enough that the GPU
keeps up with the host. Paths timed, each after a first launch whose time
(compile, JIT or PTX disk load) is reported apart:

* ``launch_twin``: the engine's launch seam as a query runs it, on every
  device (the njit twin on ``cpu``, the simulator on ``cuda-sim``; on
  ``cuda`` the driver path unless ``GPU_ENGINE_KERNEL_LAUNCHER=numba``);
* on ``cuda`` only, ``driver`` (:class:`~gpu_engine.kernels.driver_launch.KernelLauncher`
  called directly) and ``numba_dispatcher`` (``kernel[blocks, threads, stream](*cupy_arrays)``),
  both on a non-blocking stream as a driver's, plus whether both compute the
  same hashes.

For each path, ``--repeats`` times: synchronize, read the clock, issue
``--launches`` launches, read the clock (``host_us``: host time per launch;
the launches queue up behind each other), synchronize, read the clock
(``total_us``). Medians are reported.

Run from the repository root::

    python -m bench.launch_microbench --device cuda
    python -m bench.launch_microbench --device cpu --rows 1000 --launches 50 --repeats 3   # a smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python bench/launch_microbench.py` puts bench/ first, not the root
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["run_launch_microbench", "render_table", "main", "TARGET_HOST_US"]

#: The issue's target: host time per launch on ``cuda`` through the engine's launch seam.
TARGET_HOST_US = 10.0


def _time_launches(device, launch: Callable[[], Any], launches: int, repeats: int) -> dict[str, Any]:
    """Return the first launch's ms and the medians of host and total µs per launch over ``repeats`` rounds."""
    device.synchronize()
    start = time.perf_counter()
    launch()
    device.synchronize()
    first_ms = (time.perf_counter() - start) * 1e3
    host, total = [], []
    for _ in range(repeats):
        device.synchronize()
        start = time.perf_counter()
        for _ in range(launches):
            launch()
        issued = time.perf_counter()
        device.synchronize()
        done = time.perf_counter()
        host.append((issued - start) / launches * 1e6)
        total.append((done - start) / launches * 1e6)
    return {"first_ms": first_ms, "host_us": statistics.median(host), "total_us": statistics.median(total),
            "samples_host_us": host, "samples_total_us": total}


def _gpu_paths(device, kernel, arguments_for: Callable[[], tuple], rows: int) -> tuple[dict, Callable[[], bool]]:
    """Return the cuda-only paths and a check that both give the same hashes (same inputs, fresh outputs)."""
    from gpu_engine.kernels import driver_launch
    from gpu_engine.kernels.launch import _disable_array_interface_sync, launch_stream
    from gpu_engine.kernels.ptx_cache import PtxCache

    xp = device.xp
    blocks, threads = device.launch_shape(rows)
    launcher = driver_launch.KernelLauncher(driver_launch.CudaDriver(),
                                            PtxCache(driver_launch._current_compute_capability()))
    _disable_array_interface_sync()  # as launch_cuda does before numba launches
    driver_arguments, numba_arguments = arguments_for(), arguments_for()

    def through_driver(arguments=driver_arguments):
        if not launcher.launch(kernel, blocks, threads, xp.cuda.get_current_stream().ptr, arguments):
            raise RuntimeError("the driver path fell back to numba; see gpu_engine.kernels.ptx_cache.compile_records()")

    def through_numba(arguments=numba_arguments):
        kernel[blocks, threads, launch_stream(device)](*arguments)

    def same_result() -> bool:
        left, right = arguments_for(), arguments_for()
        through_driver(left)
        through_numba(right)
        device.synchronize()
        return bool((left[0] == right[0]).all())

    return {"driver": through_driver, "numba_dispatcher": through_numba}, same_result


def run_launch_microbench(device_name: str, rows: int, launches: int, repeats: int) -> dict[str, Any]:
    """Time every launch path ``device_name`` has; return settings, figures, compile records and the target check."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels.hash import _combine_column_cpu, _combine_column_cuda
    from gpu_engine.kernels.launch import launch_twin
    from gpu_engine.kernels.ptx_cache import clear_compile_records, compile_records

    device = get_device(device_name)
    xp = device.xp
    words = xp.arange(rows, dtype=xp.uint64)
    validity = (xp.arange(rows) % 7) != 0

    def arguments_for() -> tuple:
        return (xp.zeros(rows, dtype=xp.uint64), words, validity, True, False)

    seam_arguments = arguments_for()
    paths: dict[str, Callable[[], Any]] = {
        "launch_twin": lambda: launch_twin(device, rows, _combine_column_cpu, _combine_column_cuda, *seam_arguments)}
    clear_compile_records()
    same_result = None
    stream = xp.cuda.Stream(non_blocking=True) if device.is_gpu else None
    with (stream if stream is not None else contextlib.nullcontext()):
        if device.is_gpu:
            gpu_paths, check = _gpu_paths(device, _combine_column_cuda, arguments_for, rows)
            paths.update(gpu_paths)
        figures = {name: _time_launches(device, launch, launches, repeats) for name, launch in paths.items()}
        if device.is_gpu:
            same_result = check()
    records = [dataclasses.asdict(record) for record in compile_records()]
    return {
        "device": device.name,
        "rows": rows,
        "launches": launches,
        "repeats": repeats,
        "figures": figures,
        "same_result": same_result,
        "compile_records": records,
        "target_host_us": TARGET_HOST_US,
        "target_met": figures["launch_twin"]["host_us"] <= TARGET_HOST_US if device.is_gpu else None,
    }


def render_table(report: dict[str, Any]) -> str:
    """Return the figures, and the compile records, as short markdown."""
    lines = [f"Launch micro-benchmark on {report['device']}: {report['rows']:,} rows, {report['launches']} launches "
             f"a round, median of {report['repeats']} rounds (first launch, compile included, apart):", "",
             "| path | host µs / launch | total µs / launch | first launch ms |", "|---|---|---|---|"]
    for name, figure in report["figures"].items():
        lines.append(f"| {name} | {figure['host_us']:.1f} | {figure['total_us']:.1f} | {figure['first_ms']:.1f} |")
    if report["same_result"] is not None:
        lines += ["", f"driver path and numba's dispatcher compute the same hashes: {report['same_result']}"]
    if report["target_met"] is not None:
        lines += [f"Target (launch_twin ≤ {report['target_host_us']:.0f} µs of host time): "
                  f"{'met' if report['target_met'] else 'MISSED'}"]
    if report["compile_records"]:
        lines += ["", "| kernel | signature | outcome | seconds |", "|---|---|---|---|"]
        for record in report["compile_records"]:
            outcome = record["outcome"] + (f" ({record['reason']})" if record.get("reason") else "")
            lines.append(f"| {record['kernel']} | {record['signature']} | {outcome} | {record['seconds']:.3f} |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.launch_microbench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cpu", "cuda", "cuda-sim"), help="device (default cuda)")
    parser.add_argument("--rows", type=int, default=100_000, help="rows the kernel covers (default 100k)")
    parser.add_argument("--launches", type=int, default=1000,
                        help="launches timed back to back per round (default 1000)")
    parser.add_argument("--repeats", type=int, default=7, help="rounds; the median is reported (default 7)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the launch micro-benchmark and print its table; return 0."""
    args = build_parser().parse_args(argv)
    if args.rows < 1 or args.launches < 1 or args.repeats < 1:
        raise SystemExit("--rows, --launches and --repeats must be at least 1")
    report = run_launch_microbench(args.device, args.rows, args.launches, args.repeats)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(render_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
