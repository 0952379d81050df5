"""Profile the host Parquet decoder column by column and step by step, against pyarrow's reader on one thread.

Why (issues 31/32): TPC-DS q76's gap to DuckDB was its Parquet decode (four
``store_sales`` columns), and a cold scan on a GPU machine is as fast as the
host decodes. This bench says where the decoder's time goes, per column, so a
change is aimed at a step and not guessed at:

* ``engine``: :func:`~gpu_engine.connectors.parquet_columns.read_decoded_columns` of the column
  on the calling thread (page headers, Snappy, levels, values, the Arrow array);
* ``pyarrow``: ``ParquetFile.read_row_groups(columns=[c], use_threads=False)``;
* the steps of a fixed-width column's pages, cumulative (a kernel here walks the same pages with
  the decoder's own functions and stops after a step): ``headers+snappy``, ``+levels`` (definition
  levels into the validity bytes), ``+indices`` (the dictionary codes or PLAIN values unpacked),
  ``+gather`` (codes looked up in the dictionary); ``decode_chunk`` is the whole decoder, the rest
  (nulls spread over their rows) is its difference from ``+gather``;
* ``--base REV``: the same column decoded by ``kernels/parquet_pages.py`` as of git revision
  ``REV`` (loaded as a module of its own), alternating with the working tree's in one process: an A/B
  of a decoder change.

Figures are medians of CPU time (user+sys of the process, one thread decodes), the variants
interleaved run by run; GB/s divide a column's uncompressed page bytes by them (one core). The load
average before and after is reported: on a shared machine, CPU time is what compares. malloc is tuned as a
Session tunes it (:mod:`gpu_engine.host_allocator`; ``--system-malloc`` not): without, each engine read
page-faults its fresh output in (l_partkey at SF1: ~60 of its ~100 ms), which pyarrow's allocator avoids.

    python -m bench.parquet_decode_steps --table store_sales --columns ss_sold_date_sk,ss_item_sk,ss_store_sk,ss_ext_sales_price --base HEAD
    python -m bench.parquet_decode_steps --file lineitem.parquet --columns l_quantity,l_shipmode
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main", "profile_columns"]

_STEPS = ("headers+snappy", "+levels", "+indices", "+gather")


def _step_kernel():
    """Return a kernel that walks a fixed-width chunk's pages with the decoder's functions and stops after a step."""
    from numba import njit

    from gpu_engine.kernels.parquet_pages import (
        _DATA_PAGE, _DICTIONARY_PAGE, _PLAIN, _SKIP_PAGE, _levels_into, _next_page, _read_le32, _rle_hybrid)

    @njit(nogil=True)
    def steps(buf, start, length, codec, max_definition, out, valid, scratch, spare, step):
        header = np.empty(16, np.int64)
        page = np.empty(16, np.int64)
        no_dictionary = np.empty(0, np.int64)
        dictionary = np.empty(0, out.dtype)
        out_bytes = out.view(np.uint8)
        end = start + length
        pos = start
        row = 0
        while pos < end:
            status, pos, kind, data, data_start, data_end, prefix, scratch = _next_page(buf, pos, end, codec, header,
                                                                                      page, scratch)
            if status == _SKIP_PAGE:
                continue
            if status != 0:
                return status, scratch, spare
            if kind == _DICTIONARY_PAGE:
                count = page[1]
                if codec != 0:
                    scratch, spare = spare, scratch
                    dictionary = spare[:count * out.itemsize].view(out.dtype)
                else:
                    dictionary = data[data_start:data_start + count * out.itemsize].copy().view(out.dtype)
                continue
            values = page[1]
            encoding = page[2] if kind == _DATA_PAGE else page[4]
            at = data_start
            present = values
            if step >= 1 and max_definition:
                size = _read_le32(data, at) if kind == _DATA_PAGE else prefix
                at += 4 if kind == _DATA_PAGE else prefix
                _, present = _levels_into(data, at, at + size, values, valid, row)
                at += size
            elif kind != _DATA_PAGE:
                at += prefix
            if step >= 2:
                if encoding == _PLAIN:
                    out_bytes[row * out.itemsize:(row + present) * out.itemsize] = \
                        data[at:at + present * out.itemsize]
                elif present:
                    width = np.int64(data[at])
                    if step == 2:
                        _rle_hybrid(data, at + 1, data_end, width, no_dictionary, out, row, present, 1 << 40)
                    else:
                        _rle_hybrid(data, at + 1, data_end, width, dictionary, out, row, present, dictionary.shape[0])
            row += values
        return 0, scratch, spare

    return steps


def _load_pages_at(revision: str, folder: Path):
    """Return ``kernels/parquet_pages.py`` as of git ``revision``, imported as a module of its own."""
    text = subprocess.run(["git", "show", f"{revision}:kernels/parquet_pages.py"], cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = folder / "parquet_pages_base.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("parquet_pages_base", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def profile_columns(path: str, columns: list[str], runs: int, base_revision: str | None = None) -> dict:
    """Return per column: CPU ms medians of the engine, pyarrow, the steps, ``decode_chunk`` (and the base's)."""
    import pyarrow.parquet as pq

    from gpu_engine.connectors import parquet_columns as pc_module
    from gpu_engine.kernels import parquet_pages

    metadata = pq.read_metadata(path)
    types = pc_module.decodable_columns(metadata, columns)
    layout = pc_module._chunk_layout(path, metadata)
    file_bytes = pc_module._file_bytes(path)
    groups = list(range(metadata.num_row_groups))
    steps = _step_kernel()
    scratch_dir = tempfile.TemporaryDirectory()
    base = _load_pages_at(base_revision, Path(scratch_dir.name)) if base_revision else None
    report = {}
    for name in columns:
        leaf = layout.leaves[name]
        physical = layout.physical[leaf]
        max_definition = layout.max_definition[leaf]
        fixed = physical in ("INT32", "INT64", "FLOAT", "DOUBLE") and name in types
        rows = int(layout.rows.sum())
        variants = {
            "engine": lambda n=name: pc_module.read_decoded_columns(path, metadata, groups, {n: types[n]}),
            "pyarrow": lambda n=name: pq.ParquetFile(path, memory_map=True).read_row_groups(
                groups, columns=[n], use_threads=False),
        }
        if fixed:
            dtype = {"INT32": np.int32, "INT64": np.int64, "FLOAT": np.float32, "DOUBLE": np.float64}[physical]
            out = np.empty(rows, dtype)
            valid = np.empty(rows, np.uint8)
            buffers = [np.empty(0, np.uint8), np.empty(0, np.uint8)]

            def chunks(decode, step=0, leaf=leaf, max_definition=max_definition, out=out, valid=valid,
                       buffers=buffers):
                first = 0
                for group in groups:
                    count = int(layout.rows[group])
                    start, length = int(layout.starts[group, leaf]), int(layout.lengths[group, leaf])
                    codec = int(layout.codecs[group, leaf])
                    part, part_valid = out[first:first + count], valid[first:first + count]
                    if decode is None:
                        status, buffers[0], buffers[1] = steps(file_bytes, start, length, codec, max_definition,
                                                               part, part_valid, buffers[0], buffers[1], step)
                    else:
                        status, _, _, buffers[0], buffers[1] = decode(file_bytes, start, length, codec,
                                                                      max_definition, count, part, part_valid,
                                                                      buffers[0], buffers[1])
                    if status != 0:
                        raise RuntimeError(f"{name}: row group {group}: status {status}")
                    first += count

            for step, label in enumerate(_STEPS):
                variants[label] = lambda step=step, chunks=chunks: chunks(None, step)
            variants["decode_chunk"] = lambda chunks=chunks: chunks(parquet_pages.decode_chunk)
            if base is not None:
                variants[f"decode_chunk@{base_revision}"] = lambda chunks=chunks: chunks(base.decode_chunk)
        for run in variants.values():  # compile, warm the pages
            run()
        samples: dict[str, list[float]] = {label: [] for label in variants}
        for _ in range(runs):
            for label, run in variants.items():
                began = time.process_time()
                run()
                samples[label].append(time.process_time() - began)
        report[name] = {
            "physical": physical, "optional": bool(max_definition), "rows": rows,
            "compressed_bytes": int(layout.lengths[:, leaf].sum()),
            "uncompressed_bytes": int(layout.uncompressed[:, leaf].sum()),
            "cpu_ms": {label: statistics.median(values) * 1e3 for label, values in samples.items()},
        }
    scratch_dir.cleanup()
    return report


def render(report: dict, header: str) -> str:
    """Return a markdown table: one row per column, CPU ms (GB/s of uncompressed pages a core)."""
    labels: list[str] = []
    for figures in report.values():
        labels += [label for label in figures["cpu_ms"] if label not in labels]
    lines = [header, "", "| column | type | MB (compressed / pages) | " + " | ".join(labels) + " |",
             "|---|---|---|" + "---|" * len(labels)]
    for name, figures in report.items():
        megabytes = figures["uncompressed_bytes"] / 1e6
        cells = []
        for label in labels:
            ms = figures["cpu_ms"].get(label)
            cells.append("—" if ms is None else f"{ms:.1f} ({megabytes / ms:.2f})" if ms > 0 else f"{ms:.1f}")
        kind = figures["physical"] + (" optional" if figures["optional"] else "")
        lines.append(f"| {name} | {kind} | {figures['compressed_bytes'] / 1e6:.1f} / {megabytes:.1f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Profile the columns and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.parquet_decode_steps", description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default=None, help="a Parquet file")
    parser.add_argument("--table", default=None, help="a TPC-DS table at --sf (e.g. store_sales), instead of --file")
    parser.add_argument("--tpch", default=None, help="a TPC-H table at --sf (e.g. lineitem), instead of --file")
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--columns", required=True, help="comma-separated column names")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--base", default=None, help="a git revision whose decode_chunk to A/B against")
    parser.add_argument("--system-malloc", action="store_true",
                        help="leave malloc untuned (a Session tunes it: gpu_engine.host_allocator); the engine's "
                             "column then page-faults its output in on every read, pyarrow's allocator does not")
    args = parser.parse_args(argv)
    if args.table:
        from gpu_engine.connectors.tpcds_data import ensure_tpcds

        path = str(Path(ensure_tpcds(args.sf)) / f"{args.table}.parquet")
    elif args.tpch:
        from gpu_engine.connectors.tpch_data import ensure_tpch

        folder = Path(ensure_tpch(args.sf))
        path = str((sorted(folder.glob(f"{args.tpch}*.parquet")) or sorted((folder / args.tpch).glob("*.parquet")))[0])
    elif args.file:
        path = args.file
    else:
        parser.error("give --file, --table or --tpch")
    if not args.system_malloc:  # as a Session does: freed output buffers are reused, not faulted in again
        from gpu_engine.host_allocator import tune_host_allocator

        tune_host_allocator()
    load_before = [round(value, 2) for value in os.getloadavg()]
    report = profile_columns(path, args.columns.split(","), args.runs, args.base)
    load_after = [round(value, 2) for value in os.getloadavg()]
    print(render(report, f"{Path(path).name}: CPU ms medians of {args.runs} runs (GB/s of uncompressed pages a core); "
                         f"load before {load_before}, after {load_after}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
