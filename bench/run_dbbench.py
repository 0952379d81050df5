"""Run the h2oai db-benchmark groupby questions through ``Session.sql``, DuckDB and Polars in one process.

Why: issue 31 measures the engine on queries users write; the db-benchmark groupby task is ten of them
(string and integer keys from 100 to N/10 groups, sums, means, median and stddev, a top-2 per group,
a correlation). The data is :mod:`bench.dbbench`'s port of the benchmark's generator, written once as
Parquet under the data cache (``$GPU_ENGINE_DATA/dbbench``, else ``~/.cache/gpu_engine/dbbench``) and
loaded into memory by every side, as the benchmark does (its solutions answer from memory).

1. every question once on DuckDB (the reference), the engine and Polars; the engine's and Polars's
   answers are checked against DuckDB's (:func:`tests.duckdb_reference.rows_mismatch`: multisets, floats
   within 1e-9 relative); a refused question is reported with the engine's reason;
2. after its first run, each question the engine answered runs once more untimed, with waits for the
   background compile process before and after (:func:`bench.run_bench.settle_compiled_tier`), so the
   timed rounds run the compiled tier and not the lowest one (they mixed both before);
3. ``--runs`` rounds; each round runs every question once on each side in turn (interleaved, so a busy
   moment of the shared machine hits all of them); per question the median wall time and the median
   CPU time (user+sys of the whole process) of each side;
4. the load average before and after, and DuckDB's threads and Polars's (``POLARS_MAX_THREADS``) set to the
   engine's driver count.

Writes ``bench/results/<date>-dbbench-groupby-<device>-<data name>[-<tag>].json`` and ``.md``. Run from the
repository root::

    python -m bench.run_dbbench --rows 1e6 --groups 1e2 --runs 5
    python -m bench.run_dbbench --rows 1e7 --questions q1,q8 --runs 5 --tag 10m
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shlex
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python bench/run_dbbench.py` puts bench/ first, not the root
    sys.path.insert(0, str(REPO_ROOT))

from bench.dbbench import QUESTIONS, data_name, ensure_groupby  # noqa: E402

__all__ = ["main", "polars_question", "render_markdown"]

RESULTS_DIR = REPO_ROOT / "bench" / "results"
SIDES = ("engine", "duckdb", "polars")


def polars_question(name: str, frame):
    """Return the lazy Polars query of a question (the benchmark's Polars solution, q8 as a top-2 per group)."""
    import polars as pl

    v1, v2, v3 = pl.col("v1"), pl.col("v2"), pl.col("v3")
    queries = {
        "q1": lambda: frame.group_by("id1").agg(v1.sum()),
        "q2": lambda: frame.group_by("id1", "id2").agg(v1.sum()),
        "q3": lambda: frame.group_by("id3").agg(v1.sum(), v3.mean()),
        "q4": lambda: frame.group_by("id4").agg(v1.mean(), v2.mean(), v3.mean()),
        "q5": lambda: frame.group_by("id6").agg(v1.sum(), v2.sum(), v3.sum()),
        "q6": lambda: frame.group_by("id4", "id5").agg(v3.median().alias("median_v3"), v3.std().alias("sd_v3")),
        "q7": lambda: frame.group_by("id3").agg((v1.max() - v2.min()).alias("range_v1_v2")),
        "q8": lambda: frame.drop_nulls("v3").group_by("id6").agg(v3.top_k(2).alias("largest2_v3"))
                           .explode("largest2_v3"),
        "q9": lambda: frame.group_by("id2", "id4").agg((pl.corr("v1", "v2") ** 2).alias("r2")),
        "q10": lambda: frame.group_by("id1", "id2", "id3", "id4", "id5", "id6")
                            .agg(v3.sum().alias("v3"), pl.len().alias("count")),
    }
    return queries[name]()


#: Above this many rows an answer is compared column by column after sorting both sides with Arrow
#: (:func:`columnar_mismatch`), not as Python rows: q10's 10M rows as Python tuples took the process past
#: 13 GB and the kernel's OOM killer ended the run.
COLUMNAR_CHECK_ROWS = 1_000_000


def columnar_mismatch(actual, expected, rel_tol: float = 1e-9, abs_tol: float = 1e-12) -> str | None:
    """Return why two answers differ as multisets of rows, or None; vectorized (for answers of millions of rows).

    Both sides are sorted by every non-float column, then the float ones; the non-float columns must then be
    equal and the floats within ``rel_tol`` or ``abs_tol`` (the test suite's tolerances: an r2 of 1e-33 against 0
    is rounding, not a difference; NaN equal to NaN, NULLs where the other side has them). Rows that
    tie on every non-float column and differ in a float's last bits could sort apart: such a report is
    a false alarm, never a missed difference (equal multisets with distinct non-float keys always align).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if actual.column_names != expected.column_names:
        return f"column names differ: engine {actual.column_names}, DuckDB {expected.column_names}"
    if actual.num_rows != expected.num_rows:
        return f"row counts differ: engine {actual.num_rows}, DuckDB {expected.num_rows}"
    floats = [f.name for f in expected.schema if pa.types.is_floating(f.type)]
    others = [name for name in expected.column_names if name not in floats]
    order = [(name, "ascending") for name in others + floats]
    left, right = actual.sort_by(order), expected.sort_by(order)
    for name in expected.column_names:
        a, e = left.column(name).combine_chunks(), right.column(name).combine_chunks()
        if not pc.all(pc.equal(a.is_null(), e.is_null())).as_py():
            return f"column {name}: NULLs differ"
        if name in floats:
            x = a.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False)
            y = e.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False)
            close = np.isclose(x, y, rtol=rel_tol, atol=abs_tol, equal_nan=True)
            if not close.all():
                row = int(np.flatnonzero(~close)[0])
                return f"column {name} differs at sorted row {row}: engine {x[row]!r}, DuckDB {y[row]!r}"
        elif not a.cast(e.type).equals(e):
            same = pc.fill_null(pc.equal(a.cast(e.type), e), True).to_numpy(zero_copy_only=False)
            row = int(np.flatnonzero(~same)[0]) if (~same).any() else 0
            return f"column {name} differs at sorted row {row}: engine {a[row]!r}, DuckDB {e[row]!r}"
    return None


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(run) -> tuple[object, float, float]:
    """Return ``run()``'s value, its wall seconds and the process's CPU seconds (user+sys) meanwhile."""
    cpu, start = _cpu_seconds(), time.perf_counter()
    value = run()
    return value, time.perf_counter() - start, _cpu_seconds() - cpu


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"


def _ratio(side: float | None, duck: float | None) -> str:
    return f"{side / duck:.2f}x" if side and duck else "—"


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.1f}"


def render_markdown(report: dict) -> str:
    """Return the report as markdown: per question its check, median wall and CPU times and ratios; totals."""
    settings, results = report["settings"], report["results"]
    sides = [side for side in SIDES if any(r.get(f"{side}_wall_s") for r in results.values()) or side != "polars"]
    lines = [f"# db-benchmark groupby — {settings['data']}, {settings['device']}, {report['date']}", "",
             f"Command: `{report['command']}` at commit {report['machine'].get('git_commit')}"
             f"{' (dirty)' if report['machine'].get('git_dirty') else ''}.", "",
             f"Data: {settings['rows']:,} rows, K = {settings['groups']}, {settings['nas']}% NA, "
             f"{'sorted' if settings['sort'] else 'random order'}; `bench/dbbench.py`'s port of the benchmark's R "
             "generator (its distributions, NumPy's generator), loaded into memory by each side. "
             f"Engine {settings['drivers']} driver(s), DuckDB {settings['threads']} thread(s), Polars "
             f"POLARS_MAX_THREADS={settings['threads']}. Every answer is checked against DuckDB's (multiset, floats "
             f"within 1e-9 relative). Times: medians of {settings['runs']} interleaved rounds after a first run "
             "(the engine's first run includes compiling its kernels), ms; CPU = user+sys of the whole process "
             f"during the run. Load average before {report['load_before']}, after {report['load_after']}.", ""]
    header = "| question | engine check | " + " | ".join(f"{s} ms | {s} CPU ms" for s in sides)
    header += " | engine vs DuckDB | " + ("Polars vs DuckDB |" if "polars" in sides else "")
    lines += [header, "|" + "---|" * (header.count("|") - 1)]
    for name, r in results.items():
        cells = [name, r["check"] if r["check"] == "equal" else f"{r['check']}: {r.get('reason') or ''}"]
        for side in sides:
            cells += [_ms(r.get(f"{side}_wall_s")), _ms(r.get(f"{side}_cpu_s"))]
        cells.append(_ratio(r.get("engine_wall_s"), r.get("duckdb_wall_s")))
        if "polars" in sides:
            cells.append(_ratio(r.get("polars_wall_s"), r.get("duckdb_wall_s")))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    timed = [r for r in results.values() if r.get("engine_wall_s") and r.get("duckdb_wall_s")]
    if timed:
        engine = sum(r["engine_wall_s"] for r in timed)
        duck = sum(r["duckdb_wall_s"] for r in timed)
        worst = max(timed, key=lambda r: r["engine_wall_s"] / r["duckdb_wall_s"])
        lines += ["", f"Total over the {len(timed)} questions the engine answers: engine {_ms(engine)} ms, DuckDB "
                  f"{_ms(duck)} ms ({_ratio(engine, duck)}); slowest against DuckDB: {worst['question']} "
                  f"({_ratio(worst['engine_wall_s'], worst['duckdb_wall_s'])})."]
        polars = [r for r in timed if r.get("polars_wall_s")]
        if polars:
            lines.append(f"Polars over the same questions: {_ms(sum(r['polars_wall_s'] for r in polars))} ms; "
                         f"the engine against Polars {_ratio(sum(r['engine_wall_s'] for r in polars), sum(r['polars_wall_s'] for r in polars))}.")
    differing = [f"{name} ({r['polars_check']})" for name, r in results.items()
                 if r.get("polars_check") not in (None, "equal")]
    if differing:
        lines += ["", "Polars answers that differ from DuckDB's: " + "; ".join(differing) + "."]
    first = [f"{name} {_ms(r.get('engine_first_s'))}" for name, r in results.items()]
    lines += ["", "Engine first runs (ms): " + ", ".join(first) + "."]
    lines += ["", "## Machine", ""] + [f"- {key}: {value}" for key, value in report["machine"].items()]
    return "\n".join(lines) + "\n"


def _parse_count(text: str) -> int:
    value = float(text)
    if value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number like 1e6, got {text!r}")
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=_parse_count, default=1_000_000, help="N, rows (default 1e6)")
    parser.add_argument("--groups", type=_parse_count, default=100, help="K, groups (default 1e2)")
    parser.add_argument("--nas", type=int, default=0, help="percent of NAs (default 0)")
    parser.add_argument("--sort", action="store_true", help="rows sorted by id1..id6")
    parser.add_argument("--questions", default="all", help="'all' (default) or names: q1,q8")
    parser.add_argument("--runs", type=int, default=5, help="interleaved timed rounds after the first run (default 5)")
    parser.add_argument("--device", default="cpu", help="engine device: cpu, cuda-sim, cuda (default cpu)")
    parser.add_argument("--drivers", type=int, default=2, help="engine drivers; also DuckDB's and Polars's threads")
    parser.add_argument("--no-polars", action="store_true", help="leave Polars out")
    parser.add_argument("--data-dir", default=None, help="folder of the generated files (default: the data cache)")
    parser.add_argument("--tag", default=None, help="suffix of the result file names")
    parser.add_argument("--no-write", action="store_true", help="print only; write no result file")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the questions; print each; write the report. Return 0, or 1 when an answer differs from DuckDB's."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    names = list(QUESTIONS) if args.questions == "all" else [q.strip() for q in args.questions.split(",") if q.strip()]
    unknown = [name for name in names if name not in QUESTIONS]
    if unknown or not names:
        parser.error(f"unknown questions {unknown}; choose from {', '.join(QUESTIONS)}")
    os.environ["POLARS_MAX_THREADS"] = str(args.drivers)  # read when Polars is first imported

    import duckdb
    import pyarrow.parquet as pq

    from bench.run_bench import _git, _machine_facts, settle_compiled_tier
    from gpu_engine import Session
    from gpu_engine.errors import GpuEngineError, PlanError
    from tests.duckdb_reference import rows_mismatch as rows_mismatch_of_rows

    def rows_mismatch(actual, expected):
        if expected.num_rows > COLUMNAR_CHECK_ROWS:
            return columnar_mismatch(actual, expected)
        return rows_mismatch_of_rows(actual, expected)

    started = datetime.datetime.now()
    path = ensure_groupby(args.rows, args.groups, args.nas, args.sort, args.data_dir)
    table = pq.read_table(path)
    session = Session(device=args.device, drivers=args.drivers)
    session.register("x", table)
    duck = duckdb.connect()
    duck.execute(f"SET threads = {args.drivers}")
    duck.register("source", table)
    duck.execute("CREATE TABLE x AS SELECT * FROM source")
    duck.unregister("source")
    frame = None
    if not args.no_polars:
        try:
            import polars as pl

            frame = pl.from_arrow(table).lazy()
        except ImportError:
            frame = None
    sides = {"engine": lambda name: session.sql(QUESTIONS[name]),
             "duckdb": lambda name: duck.sql(QUESTIONS[name]).to_arrow_table()}
    if frame is not None:
        sides["polars"] = lambda name: polars_question(name, frame).collect()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())

    results: dict[str, dict] = {}
    for name in names:
        result = results[name] = {"question": name, "sql": QUESTIONS[name], "check": "equal", "reason": None}
        expected, result["duckdb_first_s"], _ = _timed(lambda: sides["duckdb"](name))
        result["rows"] = expected.num_rows
        try:
            actual, result["engine_first_s"], _ = _timed(lambda: sides["engine"](name))
            problem = rows_mismatch(actual, expected)
            if problem is not None:
                result["check"], result["reason"] = "wrong", problem.splitlines()[0]
        except Exception as error:  # noqa: BLE001 - every failure is reported, the run goes on
            result["check"] = "refused" if isinstance(error, PlanError) else \
                "error" if isinstance(error, GpuEngineError) else "internal"
            result["reason"] = _first_line(error)
        if result["check"] == "equal":  # time the compiled tier, not the lowest one its first runs take
            result["engine_settle_s"] = settle_compiled_tier(lambda: sides["engine"](name))
        if "polars" in sides:
            answer, result["polars_first_s"], _ = _timed(lambda: sides["polars"](name))
            problem = rows_mismatch(answer.to_arrow().rename_columns(expected.column_names), expected)
            result["polars_check"] = "equal" if problem is None else problem.splitlines()[0]
        print(f"{name:>4} {result['check']:<8} engine {_ms(result.get('engine_first_s')):>9} ms first, DuckDB "
              f"{_ms(result['duckdb_first_s']):>8} ms  {result['reason'] or ''}"
              + (f"  Polars: {result['polars_check']}" if "polars" in sides else ""), flush=True)

    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.runs):
        for name in names:
            for side, run in sides.items():
                if side == "engine" and results[name]["check"] != "equal":
                    continue
                _, wall, cpu = _timed(lambda: run(name))
                samples.setdefault((name, side), []).append((wall, cpu))
    for (name, side), pairs in samples.items():
        results[name][f"{side}_wall_s"] = statistics.median(wall for wall, _ in pairs)
        results[name][f"{side}_cpu_s"] = statistics.median(cpu for _, cpu in pairs)
        results[name][f"{side}_samples_s"] = [wall for wall, _ in pairs]

    report = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "command": shlex.join(["python", "-m", "bench.run_dbbench", *argv]),
        "settings": {"data": data_name(args.rows, args.groups, args.nas, args.sort), "rows": args.rows,
                     "groups": args.groups, "nas": args.nas, "sort": args.sort, "runs": args.runs,
                     "device": args.device, "drivers": args.drivers, "threads": args.drivers,
                     "generator_commit": _git(["log", "-1", "--format=%H", "--", "bench/dbbench.py"])},
        "load_before": load_before,
        "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "machine": _machine_facts(args.device),
        "results": results,
    }
    text = render_markdown(report)
    print(text)
    if not args.no_write:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stem = f"{started:%Y-%m-%d}-dbbench-groupby-{args.device}-{report['settings']['data']}" + (
            f"-{args.tag}" if args.tag else "")
        for suffix, content in ((".json", json.dumps(report, indent=1) + "\n"), (".md", text)):
            target = RESULTS_DIR / (stem + suffix)
            temporary = target.with_name(target.name + ".tmp")
            temporary.write_text(content)
            os.replace(temporary, target)
            print(f"wrote {target.relative_to(REPO_ROOT)}")
    return 1 if any(r["check"] in ("wrong", "internal") for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
