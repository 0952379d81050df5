"""Where the engine's memory goes per TPC-H query: resident set before, peak, after, and who holds what after.

Why: issue 31's SF10 run put the engine's peak resident set at 5.6x DuckDB's (6.94 against 1.24 GB) and showed that
memory stays resident between queries. ``bench/run_tpch_sql.py`` reports the peak and the rise of each query;
this script says what holds the memory once a query has returned, so a cause can be fixed rather than guessed:

- ``rss before/peak/after``: the process's resident set at the call's start, its highest (5 ms samples) and after
  it returned (``/proc/self/statm``);
- ``recycler``: bytes the buffer recycler keeps for reuse (:mod:`gpu_engine.exec.buffer_recycler`);
- ``heap free``: bytes glibc holds free in its arenas (``mallinfo2().fordblks``): memory freed by the engine but
  not returned to the OS (the allocator tuning in :mod:`gpu_engine.host_allocator` trades this for speed);
- ``after idle`` (``--idle``): the resident set once the process has been idle past its release
  (:func:`~gpu_engine.exec.idle_memory.idle_release_delay` of the query's wall: kept buffers dropped, the heap
  trimmed).

One process runs the queries in order (``--fresh`` runs each query in its own process instead, so a query's peak
does not include what earlier queries left). From the repository root::

    python -m bench.memory_per_query --sf 1 --idle
    python -m bench.memory_per_query --sf 1 --queries 18,9 --fresh
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.run_tpch_sql import RssSampler, _high_water_bytes, _rss_bytes  # noqa: E402

__all__ = ["main"]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _heap_free_bytes(libc) -> int | None:
    """glibc's free bytes in its arenas, or None where mallinfo2 is missing (not glibc, or glibc < 2.33)."""
    function = getattr(libc, "mallinfo2", None) if libc is not None else None
    if function is None:
        return None
    function.restype = _MallInfo2
    return int(function().fordblks)


def _status_bytes(*fields: str) -> dict[str, int]:
    """Fields of ``/proc/self/status`` in bytes (``RssAnon``: the heap and arrays; ``RssFile``: mapped files)."""
    out = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            name, _, value = line.partition(":")
            if name in fields:
                out[name] = int(value.split()[0]) * 1024
    return out


def _names(text: str) -> list[str]:
    return [f"q{int(part)}" for part in text.split(",") if part.strip()] if text else [f"q{i}" for i in range(1, 23)]


def _run(args) -> list[dict]:
    from bench.tpch_queries import bench_query
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.exec import buffer_recycler

    libc = _libc()
    folder = ensure_tpch(args.sf, None, progress=False)
    session = Session(device=args.device, drivers=args.drivers)
    register_tpch(session, folder)
    sampler = RssSampler()
    rows = []
    for name in _names(args.queries):
        gc.collect()
        before = sampler.start()
        started = time.perf_counter()
        table = session.sql(bench_query(name, args.sf).sql)
        wall = time.perf_counter() - started
        peak = sampler.stop()
        del table
        gc.collect()
        row = {"query": name, "wall_s": wall, "before": before, "peak": peak, "after": _rss_bytes(),
               "recycler": buffer_recycler.kept_bytes(), "heap_free": _heap_free_bytes(libc),
               **{k.lower(): v for k, v in _status_bytes("RssAnon", "RssFile").items()}}
        if args.idle:  # past the idle release (gpu_engine.exec.idle_memory), where this engine has one
            from gpu_engine.exec import idle_memory

            delay = getattr(idle_memory, "idle_release_delay", lambda busy: idle_memory.IDLE_RELEASE_SECONDS)(wall)
            time.sleep(delay + 0.5)  # (due after as long as the query ran, at least IDLE_RELEASE_SECONDS)
            row["after_idle"] = _rss_bytes()
        rows.append(row)
        print("ROW " + json.dumps(row), flush=True)
    sampler.close()
    print("HWM " + json.dumps({"peak_bytes": _high_water_bytes()}), flush=True)
    return rows


def _gb(value) -> str:
    return "—" if value is None else f"{value / 1e9:.2f}"


def _table(rows: list[dict]) -> str:
    lines = ["| query | wall ms | rss before GB | peak GB | rise GB | rss after GB | anon after GB | file after GB | "
             "recycler GB | heap free GB | after idle GB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['query']} | {r['wall_s'] * 1000:.0f} | {_gb(r['before'])} | {_gb(r['peak'])} | "
                     f"{_gb(r['peak'] - r['before'])} | {_gb(r['after'])} | {_gb(r.get('rssanon'))} | "
                     f"{_gb(r.get('rssfile'))} | {_gb(r['recycler'])} | {_gb(r['heap_free'])} | "
                     f"{_gb(r.get('after_idle'))} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--queries", default="", help="comma-separated query numbers (default: all 22)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--idle", action="store_true",
                        help="after each query wait past the engine's idle release and report the rss")
    parser.add_argument("--fresh", action="store_true", help="each query in its own process")
    args = parser.parse_args(argv)
    if not args.fresh:
        rows = _run(args)
        print(_table(rows))
        return 0
    rows, peaks = [], {}
    for name in _names(args.queries):
        command = [sys.executable, "-m", "bench.memory_per_query", "--sf", str(args.sf), "--queries", name[1:],
                   "--device", args.device, "--drivers", str(args.drivers)] + (["--idle"] if args.idle else [])
        done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
        for line in done.stdout.splitlines():
            if line.startswith("ROW "):
                rows.append(json.loads(line[4:]))
            elif line.startswith("HWM "):
                peaks[name] = json.loads(line[4:])["peak_bytes"]
        if done.returncode:
            print(f"{name}: failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    print(_table(rows))
    print("\nfresh-process peak (VmHWM) GB: " + ", ".join(f"{n} {_gb(v)}" for n, v in peaks.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
