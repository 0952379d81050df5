"""Measure the host Parquet decode: GB/s per core of the engine's page decoder on the decode pool, by thread count.

Why (issue 32 item 2): where the device decoder does not apply (other codecs,
nested columns, ``cpu``), a cold scan is as fast as the host decodes; the
decode pool (:mod:`gpu_engine.connectors.decode_pool`) runs a piece's column
chunks on all cores. This bench decodes TPC-H ``lineitem`` columns of one
file as one piece (a GPU batch holds a whole SF1 file: 16M rows on an 80 GB
card) with 0 (the calling thread), 1, 2, ... pool threads, the settings
interleaved run by run, and reports medians: wall seconds, GB/s of
compressed and of decoded bytes, GB/s per thread, and the process's CPU
seconds (how busy the threads were). pyarrow's ``read_row_groups`` of the
same columns on one thread is the reference. The load average before and
after is in the report: on a shared machine, threads beyond the idle cores
cannot scale.

    python -m bench.host_decode_bench --sf 1 --threads 0,1,2 --runs 5
    python -m bench.host_decode_bench --sf 10 --threads 1,2,4,8,16 --columns q1   # on a 16-core machine

Writes ``bench/results/<date>-host-decode-<tag>.md`` and ``.json`` (``--output-dir``, ``--tag``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main", "run_decode_bench"]

Q1_COLUMNS = ("l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_shipdate")


def _threads(text: str) -> list[int]:
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"thread counts must be integers >= 0, got {text!r}")
    return values


def run_decode_bench(path: str, columns: list[str], thread_counts: list[int], runs: int) -> dict:
    """Decode ``columns`` of every row group of ``path`` per thread count, interleaved; return the figures."""
    import pyarrow.parquet as pq

    from gpu_engine.connectors.decode_pool import decode_pool
    from gpu_engine.connectors.parquet_columns import _chunk_layout, decodable_columns, read_decoded_columns

    metadata = pq.read_metadata(path)
    types = decodable_columns(metadata, columns)
    groups = list(range(metadata.num_row_groups))
    layout = _chunk_layout(path, metadata)
    leaves = [layout.leaves[name] for name in types]
    compressed = int(layout.lengths[:, leaves].sum())
    uncompressed = int(layout.uncompressed[:, leaves].sum())
    read_decoded_columns(path, metadata, groups, types)  # compile the decoder, warm the page cache
    for threads in thread_counts:
        read_decoded_columns(path, metadata, groups, types, decode_pool(threads))  # start the pool's threads
    settings = [("pyarrow-1", None)] + [(f"pool-{threads}", threads) for threads in thread_counts]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in settings}
    output_bytes = 0
    for _ in range(runs):
        for name, threads in settings:
            wall, cpu = time.perf_counter(), time.process_time()
            if threads is None:
                pq.ParquetFile(path, memory_map=True).read_row_groups(groups, columns=list(types), use_threads=False)
            else:
                decoded = read_decoded_columns(path, metadata, groups, types, decode_pool(threads))
                output_bytes = sum(array.nbytes for array in decoded.values())
            samples[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    figures = {}
    for name, threads in settings:
        wall = statistics.median(s for s, _ in samples[name])
        cpu = statistics.median(c for _, c in samples[name])
        cores = max(1, threads or 1)
        figures[name] = {
            "threads": threads, "wall_s": wall, "cpu_s": cpu, "wall_samples_s": [s for s, _ in samples[name]],
            "compressed_gb_per_s": compressed / wall / 1e9, "decoded_gb_per_s": uncompressed / wall / 1e9,
            "compressed_gb_per_s_per_thread": compressed / wall / 1e9 / cores,
            "cpu_busy": cpu / wall,
            "compressed_gb_per_cpu_s": compressed / cpu / 1e9 if cpu > 0 else None,
        }
    return {"path": path, "rows": metadata.num_rows, "row_groups": len(groups), "columns": list(types),
            "compressed_bytes": compressed, "uncompressed_bytes": uncompressed, "output_bytes": output_bytes,
            "runs": runs, "figures": figures}


def render_markdown(report: dict) -> str:
    """Return the report: the command, the load, then one row per setting."""
    result = report["result"]
    lines = [f"# Host Parquet decode, {report['date']}: {Path(result['path']).name} ({result['rows']:,} rows, "
             f"{result['row_groups']} row groups), {len(result['columns'])} columns", "",
             f"Command: `{report['command']}` at commit {report['commit']}.", "",
             f"Machine: {report['machine']['cpu_count']} cores ({report['machine']['cpu_model']}), Python "
             f"{report['machine']['python']}. Load average (1, 5, 15 min) before {report['load_before']}, after "
             f"{report['load_after']}: other processes shared the cores.", "",
             f"Columns: {', '.join(result['columns'])}. {result['compressed_bytes'] / 1e6:.1f} MB compressed, "
             f"{result['uncompressed_bytes'] / 1e6:.1f} MB of pages uncompressed, decoded into "
             f"{result['output_bytes'] / 1e6:.1f} MB of columns. One piece holds every row group (as one GPU batch "
             f"would). Medians of {result['runs']} runs, the settings interleaved run by run; \"pool-0\" decodes on "
             "the calling thread, \"pyarrow-1\" is `read_row_groups(use_threads=False)` of the same columns. "
             "GB/s count compressed bytes (decoded bytes in brackets); per thread divides by the threads; CPU busy is "
             "the process's CPU seconds over the wall seconds; GB per CPU-second divides the compressed bytes by the "
             "process's CPU seconds: the decoder's speed per core, whatever share of the cores the load left it.", "",
             "| setting | wall ms | GB/s compressed (decoded) | GB/s per thread | CPU busy | GB per CPU-second | "
             "speed-up over pool-0 |", "|---|---|---|---|---|---|---|"]
    base = result["figures"].get("pool-0", {}).get("wall_s")
    for name, figure in result["figures"].items():
        speedup = f"{base / figure['wall_s']:.2f}×" if base else "—"
        lines.append(f"| {name} | {figure['wall_s'] * 1000:.1f} | {figure['compressed_gb_per_s']:.3f} "
                     f"({figure['decoded_gb_per_s']:.3f}) | {figure['compressed_gb_per_s_per_thread']:.3f} | "
                     f"{figure['cpu_busy']:.2f} | {figure['compressed_gb_per_cpu_s'] or 0:.3f} | {speedup} |")
    lines += ["", "Samples (ms): " + "; ".join(
        f"{name} " + ", ".join(f"{s * 1000:.0f}" for s in figure["wall_samples_s"])
        for name, figure in result["figures"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the bench and write its report; print the table."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.host_decode_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--threads", type=_threads, default=[0, 1, 2], help="pool threads to compare (default 0,1,2)")
    parser.add_argument("--runs", type=int, default=5, help="runs per setting (default 5)")
    parser.add_argument("--columns", default="all", help="'all' lineitem columns the decoder reads, 'q1', or names")
    parser.add_argument("--file", default=None, help="a Parquet file instead of TPC-H lineitem")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "bench" / "results")
    parser.add_argument("--tag", default=None, help="file name suffix (default cpu-<cores>core-sf<SF>-<columns>)")
    parser.add_argument("--json", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.file:
        path = args.file
    else:
        from gpu_engine.connectors.tpch_data import ensure_tpch

        folder = Path(ensure_tpch(args.sf))
        files = sorted(folder.glob("lineitem*.parquet")) or sorted((folder / "lineitem").glob("*.parquet"))
        path = str(files[0])
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    columns = names if args.columns == "all" else list(Q1_COLUMNS) if args.columns == "q1" else args.columns.split(",")
    load_before = [round(value, 2) for value in os.getloadavg()]
    result = run_decode_bench(path, columns, args.threads, args.runs)
    load_after = [round(value, 2) for value in os.getloadavg()]
    from bench.run_bench import _cpu_model, _git

    report = {"date": f"{datetime.datetime.now():%Y-%m-%d %H:%M}",
              "command": shlex.join(["python", "-m", "bench.host_decode_bench", *argv]),
              "commit": _git(["rev-parse", "--short", "HEAD"]) or "?",
              "machine": {"cpu_count": os.cpu_count(), "cpu_model": _cpu_model(), "python": platform.python_version()},
              "load_before": load_before, "load_after": load_after, "result": result}
    markdown = render_markdown(report)
    print(markdown)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    tag = args.tag or f"cpu-{os.cpu_count()}core-sf{args.sf:g}-{args.columns if args.columns in ('all', 'q1') else 'cols'}"
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = args.output_dir / f"{datetime.date.today():%Y-%m-%d}-host-decode-{tag}"
    Path(f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
    Path(f"{stem}.md").write_text(markdown)
    print(f"wrote {stem}.md and .json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
