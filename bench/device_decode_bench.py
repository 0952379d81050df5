"""Measure the device Parquet decode against the host decoder: GB/s of TPC-H ``lineitem``'s fixed-width columns.

Why (issue 32 item 1): the device decoder (:mod:`gpu_engine.connectors.parquet_device_columns`)
should make a cold scan's decode cheaper than the host's; only a GPU can say by how much, and
whether a per-page sequential Snappy (one thread a page) is fast enough or nvCOMP's batched
decompressors are needed. This bench decodes the columns of one file as one piece (as a scan's
batch would) on the host (the engine's page decoder, the calling thread) and on the device,
interleaved run by run, and reports medians:

* ``host``: :func:`~gpu_engine.connectors.parquet_columns.read_decoded_columns`;
* ``device-plan``: the host part of the device path (page headers, staging the compressed chunks);
* ``device-copy``: the staged bytes and page tables to the device (the scan's pinned copier);
* ``device-kernels``: the three kernels a column and the one status read;
* ``device``: the three together, as a scan pays them (the plan runs on prefetch threads there).

GB/s count the chunks' compressed bytes (the decoded columns' bytes in brackets). The first run of
each (kernel compiles, page cache) is left out. Every device column is checked against the host's.

    python -m bench.device_decode_bench --device cuda --sf 10 --runs 3
    python -m bench.device_decode_bench --device cuda-sim --synthetic 2000 --runs 1   # checks the script only

``bench/gpu_session.py``'s ``decode`` step runs it (``--device``, ``--json``; DECODE_ARGS adds more).
No GPU figure was taken when this was written: only the simulator ran it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main", "run_device_decode_bench"]

#: Fixed-width lineitem columns: Q1's (decimals and a date) and two keys (large dictionaries or PLAIN pages).
LINEITEM_COLUMNS = ("l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_shipdate", "l_orderkey", "l_partkey")


def _synthetic_file(folder: Path, rows: int) -> tuple[str, list[str]]:
    """Write a small file in the layouts the device decodes (for checking the script on a host device)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    table = pa.table({"key": pa.array(rng.integers(0, 50, rows) * 1_000_003),
                      "price": pa.array(rng.standard_normal(rows)),
                      "qty": pa.array(rng.integers(0, 100, rows).astype(np.int32), mask=rng.random(rows) < 0.1)})
    path = folder / "synthetic.parquet"
    pq.write_table(table, path, compression="snappy", row_group_size=max(1, rows // 2), data_page_size=4096)
    return str(path), list(table.column_names)


def run_device_decode_bench(path: str, columns: list[str], device_name: str, runs: int,
                            row_groups: int | None = None) -> dict:
    """Decode ``columns`` of ``path`` (its first ``row_groups``) on the host and the device, interleaved; return figures."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_engine.columnar.column import Column
    from gpu_engine.columnar.transfers import HostToDeviceCopier, array_buffer
    from gpu_engine.connectors.parquet_columns import _chunk_layout, decodable_columns, read_decoded_columns
    from gpu_engine.connectors.parquet_device_columns import decode_device_columns, plan_device_columns
    from gpu_engine.device import get_device

    device = get_device(device_name)
    metadata = pq.read_metadata(path)
    groups = list(range(metadata.num_row_groups if row_groups is None else min(row_groups, metadata.num_row_groups)))
    types = decodable_columns(metadata, columns)
    layout = _chunk_layout(path, metadata)
    compressed = int(sum(layout.lengths[groups, layout.leaves[name]].sum() for name in types))
    rows = int(layout.rows[groups].sum())
    copier = HostToDeviceCopier(device)

    def host():
        return read_decoded_columns(path, metadata, groups, types)

    def device_run():
        began = time.perf_counter()
        planned = plan_device_columns(path, metadata, groups, types)
        planned_at = time.perf_counter()
        buffers = [array_buffer(array) for column in planned.values() for array in column.host_arrays()]
        arrays = copier.upload_buffers(buffers)
        device.synchronize()
        copied_at = time.perf_counter()
        decoded = decode_device_columns(device, list(planned.values()), arrays)  # ends with the status read
        device.synchronize()
        done = time.perf_counter()
        return dict(zip(planned, decoded)), (planned_at - began, copied_at - planned_at, done - copied_at,
                                             done - began)

    expected = host()  # (compiles the host decoder; the device's first run compiles its kernels)
    decoded, _ = device_run()
    output_bytes = sum(int(column.data.nbytes) for column in decoded.values())
    mismatched = []
    for name, column in decoded.items():
        want = expected[name]
        want = want.combine_chunks() if isinstance(want, pa.ChunkedArray) else want
        if not column.to_arrow(device).equals(Column.from_arrow(want, get_device("cpu")).to_arrow(get_device("cpu"))):
            mismatched.append(name)
    samples: dict[str, list[float]] = {"host": [], "device-plan": [], "device-copy": [], "device-kernels": [],
                                       "device": []}
    for _ in range(runs):
        began = time.perf_counter()
        host()
        samples["host"].append(time.perf_counter() - began)
        _, (plan, copy, kernels, total) = device_run()
        for name, seconds in zip(("device-plan", "device-copy", "device-kernels", "device"),
                                 (plan, copy, kernels, total)):
            samples[name].append(seconds)
    copier.close()
    figures = {}
    for name, values in samples.items():
        wall = statistics.median(values)
        figures[name] = {"wall_s": wall, "wall_samples_s": values,
                         "gb_per_s": compressed / wall / 1e9 if wall > 0 else None,
                         "decoded_gb_per_s": output_bytes / wall / 1e9 if wall > 0 else None}
    return {"path": path, "device": device.name, "rows": rows, "row_groups": len(groups),
            "columns": list(types), "device_columns": sorted(decoded), "host_only_columns": sorted(set(types) - set(decoded)),
            "compressed_bytes": compressed, "output_bytes": output_bytes, "runs": runs, "mismatched": mismatched,
            "equal": not mismatched, "figures": figures, "device_counts_note": "3 launches a column, 1 sync a run"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (or cuda-sim to check the script)")
    parser.add_argument("--sf", type=float, default=10.0, help="TPC-H scale factor of lineitem (default 10)")
    parser.add_argument("--columns", default=",".join(LINEITEM_COLUMNS), help="comma-separated lineitem columns")
    parser.add_argument("--row-groups", type=int, default=None, help="decode only the first N row groups")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each, after one untimed (default 3)")
    parser.add_argument("--synthetic", type=int, default=None, metavar="ROWS",
                        help="decode a small synthetic file of ROWS rows instead of lineitem (script checks)")
    parser.add_argument("--json", default=None, help="write the report here")
    args = parser.parse_args(argv)
    if args.device == "cuda-sim":
        from gpu_engine.device import get_device

        get_device("cuda-sim")  # before numba.cuda is imported
        sys.setswitchinterval(1e-4)  # the simulator's block barriers poll its threads
    with tempfile.TemporaryDirectory() as folder:
        if args.synthetic:
            path, columns = _synthetic_file(Path(folder), args.synthetic)
        else:
            from gpu_engine.connectors.tpch_data import ensure_tpch

            path = str(ensure_tpch(args.sf, tables=["lineitem"]) / "lineitem.parquet")
            columns = [c for c in args.columns.split(",") if c]
        result = run_device_decode_bench(path, columns, args.device, args.runs, args.row_groups)
    report = {"date": datetime.date.today().isoformat(), "command": " ".join(sys.argv), "result": result}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    figures = result["figures"]
    print(json.dumps({name: round(figure["wall_s"] * 1000, 2) for name, figure in figures.items()}), "(ms)")

    def rate(name):
        value = figures[name]["gb_per_s"]
        return f"{value:.3g}" if value is not None else "-"

    print(f"{result['device']}: {len(result['device_columns'])} columns, {result['rows']:,} rows, "
          f"{result['compressed_bytes'] / 1e6:.1f} MB compressed: device {rate('device')} GB/s "
          f"(kernels {rate('device-kernels')}, copy {rate('device-copy')}, plan {rate('device-plan')}), "
          f"host {rate('host')} GB/s; {'equal' if result['equal'] else 'MISMATCH ' + ','.join(result['mismatched'])}")
    return 0 if result["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
