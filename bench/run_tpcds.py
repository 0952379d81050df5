"""Run the 99 TPC-DS queries through ``Session.sql`` and DuckDB on the same Parquet files; classify each.

Why: TPC-DS is the breadth yardstick of issue 30: every query should equal
DuckDB's answer. For each query the engine's result is one of

- ``equal``: the same rows as DuckDB (:func:`bench.tpcds.result_mismatch`:
  multiset, floats within 1e-9 relative, ORDER BY keys in order, rows tied at
  a LIMIT free);
- ``names``: DuckDB's values, but a column named otherwise (DuckDB's own naming
  of an unaliased expression, or an alias's spelling);
- ``wrong``: a result that differs;
- ``refused``: a :class:`~gpu_engine.errors.PlanError` (the SQL front end or
  the planner said no, naming the construct);
- ``error``: another engine error while running (out of memory, the
  ``--timeout``, an execution error);
- ``internal``: any other exception (a bug: an engine must answer with its own
  error classes).

DuckDB runs first (its result is the reference); each side is then run
``--runs`` more times and the median reported, its first run apart (it
includes numba's compilation for the engine). Refusals are grouped by their
first line, positions left out, into a histogram: the constructs that block
most queries.

With ``--runner spark`` the engine side is :meth:`gpu_engine.spark.SparkRunner.sql`
on one local Spark session (``local[<cores>]``) for all queries, each table a
``spark.read.parquet`` of the same file (the engine reads those files itself in
its scan stages); Spark cannot stop a running job, so ``--timeout`` does not apply.

Data comes from ``tpcgen-cli tpcds parquet`` (:mod:`gpu_engine.connectors.tpcds_data`),
generated on first use. Writes ``bench/results/<date>-tpcds-<device>-sf<sf>[-<tag>].json``
and ``.md``. Run from the repository root::

    python -m bench.run_tpcds --sf 0.01 --device cpu
    python -m bench.run_tpcds --sf 0.01 --queries 1-10,42 --runs 3
    python -m bench.run_tpcds --sf 0.01 --runner spark --runs 0
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import shlex
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python bench/run_tpcds.py` puts bench/ first, not the root
    sys.path.insert(0, str(REPO_ROOT))

from bench.run_bench import _git, _machine_facts  # noqa: E402
from bench.tpcds import QUERY_NUMBERS, query_name, query_text, result_mismatch  # noqa: E402

__all__ = ["main", "QueryOutcome", "SparkQueries", "classify_error", "construct_of", "refusal_reason", "parse_query_numbers", "render_markdown"]

RESULTS_DIR = REPO_ROOT / "bench" / "results"
CLASSES = ("equal", "names", "wrong", "refused", "error", "internal")


@dataclass
class QueryOutcome:
    """What the engine and DuckDB did on one query."""

    query: str
    outcome: str = ""  # one of CLASSES
    reason: str | None = None  # refusal / error: class and first line of the message; wrong: first line
    detail: str | None = None  # the whole message, the mismatch, or an internal error's traceback tail
    rows: int | None = None  # DuckDB's row count
    engine_first_s: float | None = None
    engine_median_s: float | None = None
    duckdb_first_s: float | None = None
    duckdb_median_s: float | None = None
    engine_samples_s: list[float] = field(default_factory=list)
    duckdb_samples_s: list[float] = field(default_factory=list)
    compile_wait_s: float = 0.0  # waited for the background compile process before the timed runs


def parse_query_numbers(text: str) -> list[int]:
    """Return the query numbers of ``all`` or a list like ``1-10,q42,77``; raise ValueError on a bad one."""
    if text.strip() == "all":
        return list(QUERY_NUMBERS)
    numbers: list[int] = []
    for part in (p.strip().lower().removeprefix("q") for p in text.split(",")):
        if not part:
            continue
        low, _, high = part.partition("-")
        try:
            span = range(int(low), int(high.removeprefix("q") if high else low) + 1)
        except ValueError:
            raise ValueError(f"bad query {part!r}: give numbers 1..99, ranges like 1-10, or 'all'") from None
        for number in span:
            if number not in QUERY_NUMBERS:
                raise ValueError(f"TPC-DS queries are numbered 1 to 99, got {number}")
            if number not in numbers:
                numbers.append(number)
    if not numbers:
        raise ValueError("no query given")
    return numbers


_POSITION = re.compile(r"\s*\(line \d+, column \d+\)")


def refusal_reason(error: BaseException) -> str:
    """Return ``Class: first line of the message`` without the SQL position, for grouping refusals."""
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {_POSITION.sub('', first).strip()}"


def construct_of(reason: str) -> str:
    """Return the construct a reason names, for the histogram: no advice after ';', no trailing '(...)' detail.

    ``SqlError: unsupported SQL: GROUP BY ROLLUP (ROLLUP (a, b)); group by each set ...`` and the same
    refusal of another query's ROLLUP both become ``SqlError: unsupported SQL: GROUP BY ROLLUP``.
    """
    text = reason.split("; ", 1)[0]
    text = re.sub(r" \((in|at) .*$", "", text)
    while text.endswith(")"):
        depth = 0
        for index in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[index], 0)
            if depth == 0:
                break
        if depth != 0 or index == 0 or text[index - 1] != " ":
            break
        text = text[:index - 1]
    return text.strip()


def classify_error(error: BaseException) -> str:
    """Return ``refused``, ``error`` or ``internal`` for an exception the engine raised on a query."""
    from gpu_engine.errors import GpuEngineError, PlanError

    if isinstance(error, PlanError):
        return "refused"
    if isinstance(error, GpuEngineError):
        return "error"
    return "internal"


def _timed(run) -> tuple[object, float]:
    start = time.perf_counter()
    value = run()
    return value, time.perf_counter() - start


def run_query(number: int, session, duck, runs: int, timeout: float | None) -> QueryOutcome:
    """Run one query on DuckDB then the engine, compare, and time the rest of the runs."""
    from tests.duckdb_reference import duckdb_table, rows_mismatch

    sql = query_text(number)
    result = QueryOutcome(query_name(number))
    expected, result.duckdb_first_s = _timed(lambda: duckdb_table(duck, sql))
    result.rows = expected.num_rows
    for _ in range(runs):
        result.duckdb_samples_s.append(_timed(lambda: duckdb_table(duck, sql))[1])
    result.duckdb_median_s = statistics.median(result.duckdb_samples_s) if runs else None
    try:
        actual, result.engine_first_s = _timed(lambda: session.sql(sql, timeout=timeout))
    except Exception as error:  # noqa: BLE001 - every failure is classified and reported
        result.outcome = classify_error(error)
        result.reason = refusal_reason(error)
        result.detail = str(error) if result.outcome != "internal" else "".join(
            traceback.format_exception(type(error), error, error.__traceback__)[-6:])
        return result
    problem = result_mismatch(actual, expected, sql, rows_mismatch)
    if problem is not None and actual.num_columns == expected.num_columns and actual.column_names != \
            expected.column_names and result_mismatch(actual.rename_columns(expected.column_names), expected,
                                                      sql, rows_mismatch) is None:
        result.outcome, result.detail, result.reason = "names", problem, problem.splitlines()[0]
        return result
    if problem is not None:
        result.outcome, result.detail = "wrong", problem
        result.reason = problem.splitlines()[0]
        return result
    result.outcome = "equal"
    if runs and not isinstance(session, SparkQueries):
        from bench.run_bench import settle_compiled_tier

        result.compile_wait_s = settle_compiled_tier(lambda: session.sql(sql, timeout=timeout))
    for _ in range(runs):
        result.engine_samples_s.append(_timed(lambda: session.sql(sql, timeout=timeout))[1])
    result.engine_median_s = statistics.median(result.engine_samples_s) if runs else None
    return result


class SparkQueries:
    """Answer ``sql(text, timeout)`` as ``Session.sql`` does, through :class:`~gpu_engine.spark.SparkRunner` (local).

    Why: the bench's comparison and classification then apply unchanged to
    the Spark path. One SparkSession serves every query (starting one costs
    seconds); the rows come back cast to the engine plan's output schema.
    """

    def __init__(self, folder: Path, device: str, drivers: int, cores: int, shuffle_partitions: int | None,
                 driver_memory: str):
        from pyspark.sql import SparkSession

        from gpu_engine.connectors.tpcds_data import TPCDS_TABLES
        from gpu_engine.spark import SparkRunner

        os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors' Python workers import this engine
        self.spark = (
            SparkSession.builder.master(f"local[{cores}]")
            .appName("gpu_engine tpcds bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", driver_memory)
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions or cores))
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        self.tables = {table: self.spark.read.parquet(str(folder / f"{table}.parquet"))
                       for table in TPCDS_TABLES if (folder / f"{table}.parquet").is_file()}
        self.runner = SparkRunner(self.spark, device=device, drivers=drivers, shuffle_partitions=shuffle_partitions)

    def sql(self, text: str, timeout: float | None = None) -> "pa.Table":
        import pyarrow as pa

        from gpu_engine.spark.spark_runner import _engine_errors
        from gpu_engine.spark.spark_types import conform_to_wire

        frame = self.runner.sql(text, self.tables, dialect="duckdb")
        with _engine_errors():
            table = frame.toArrow()
        schema = self.runner.last_plan.output_schema
        return pa.Table.from_batches([conform_to_wire(b, schema) for b in table.to_batches()], schema=schema)

    def stop(self) -> None:
        self.spark.stop()


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.1f}"


def _ratio(engine: float | None, duck: float | None) -> str:
    from gpu_engine.cli import speed_ratio

    return speed_ratio(engine, duck) if engine and duck else "—"


def summary_lines(outcomes: list[QueryOutcome]) -> list[str]:
    """Return the counts per class and the histogram of refusal and error reasons, as markdown lines."""
    counts = collections.Counter(o.outcome for o in outcomes)
    lines = ["| class | queries |", "|---|---|"]
    lines += [f"| {name} | {counts.get(name, 0)} |" for name in CLASSES]
    lines += [f"| **total** | {len(outcomes)} |", ""]
    for title, classes in (("Refusal reasons", ("refused",)), ("Errors, internal errors and wrong results",
                                                               ("error", "internal", "wrong", "names"))):
        reasons: dict[str, list[str]] = collections.defaultdict(list)
        for o in outcomes:
            if o.outcome in classes:
                reasons[construct_of(o.reason or "?")].append(o.query)
        if not reasons:
            continue
        lines += [f"{title} (first construct that blocked each query), most queries first:", "",
                  "| queries | reason | which |", "|---|---|---|"]
        for reason, queries in sorted(reasons.items(), key=lambda item: (-len(item[1]), item[0])):
            cell = reason.replace("|", "\\|")
            lines.append(f"| {len(queries)} | {cell} | {' '.join(queries)} |")
        lines.append("")
    return lines


def render_markdown(report: dict) -> str:
    """Return the report as markdown: summary, histogram, then per query its class, times and ratio."""
    settings = report["settings"]
    outcomes = [QueryOutcome(**o) for o in report["results"]]
    through = "SparkRunner.sql (local Spark)" if settings.get("runner") == "spark" else "Session.sql"
    lines = [f"# TPC-DS through {through} — sf{settings['sf']:g}, {settings['device']}, {report['date']}", "",
             f"Command: `{report['command']}` at commit {report['machine'].get('git_commit')}"
             f"{' (dirty)' if report['machine'].get('git_dirty') else ''}.", "",
             "Query texts: `bench/tpcds/queries` (see its README); data: `tpcgen-cli tpcds parquet`. Each engine "
             "result is checked against DuckDB's on the same files (multiset; floats within 1e-9 relative; "
             "ORDER BY keys in order; rows tied at a LIMIT may differ). Times: medians of "
             f"{settings['runs']} runs after a first run (the engine's first run includes JIT compilation; through "
             "Session.sql the engine then waits for its background compile process and runs once untimed, so "
             "its median is the compiled tier's: first runs are measured by `bench/first_runs.py`), ms; "
             f"DuckDB with {settings['threads'] or 'all'} threads, the engine with {settings['drivers']} driver(s)"
             + (f" per Task on one local[{settings['cores']}] Spark session, "
                f"{settings['shuffle_partitions'] or settings['cores']} shuffle partitions (no timeout)."
                if settings.get("runner") == "spark" else f"; engine timeout {settings['timeout']} s."), ""]
    lines += summary_lines(outcomes)
    lines += ["| query | class | DuckDB rows | engine first | engine median | DuckDB first | DuckDB median | "
              "engine vs DuckDB | reason |", "|---|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        reason = (o.reason or "").replace("|", "\\|")
        lines.append(f"| {o.query} | {o.outcome} | {o.rows} | {_ms(o.engine_first_s)} | {_ms(o.engine_median_s)} | "
                     f"{_ms(o.duckdb_first_s)} | {_ms(o.duckdb_median_s)} | "
                     f"{_ratio(o.engine_median_s, o.duckdb_median_s)} | {reason} |")
    equal = [o for o in outcomes if o.outcome == "equal" and o.engine_median_s and o.duckdb_median_s]
    if equal:
        engine_total = sum(o.engine_median_s for o in equal)
        duck_total = sum(o.duckdb_median_s for o in equal)
        lines += ["", f"Total over the {len(equal)} equal queries: engine {_ms(engine_total)} ms, DuckDB "
                  f"{_ms(duck_total)} ms ({_ratio(engine_total, duck_total)})."]
    details = [o for o in outcomes if o.outcome in ("names", "wrong", "error", "internal")]
    if details:
        lines += ["", "## Details of wrong results and errors", ""]
        for o in details:
            lines += [f"### {o.query} ({o.outcome})", "", "```", (o.detail or "").rstrip(), "```", ""]
    lines += ["", "## Machine", ""] + [f"- {key}: {value}" for key, value in report["machine"].items()]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=0.01, help="TPC-DS scale factor (default 0.01)")
    parser.add_argument("--queries", default="all", help="'all' (default), or numbers and ranges: 1-10,42")
    parser.add_argument("--runs", type=int, default=3, help="timed runs after the first (default 3)")
    parser.add_argument("--device", default="cpu", help="engine device: cpu, cuda-sim, cuda (default cpu)")
    parser.add_argument("--drivers", type=int, default=1, help="engine drivers per pipeline (default 1)")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: its own)")
    parser.add_argument("--timeout", type=float, default=300.0, help="engine seconds per query run (default 300)")
    parser.add_argument("--data-dir", default=None, help="root of the generated data (default: $GPU_ENGINE_DATA)")
    parser.add_argument("--runner", choices=("session", "spark"), default="session",
                        help="the engine side: Session.sql (default) or SparkRunner.sql on local Spark")
    parser.add_argument("--cores", type=int, default=2, help="--runner spark: local[<cores>] (default 2)")
    parser.add_argument("--shuffle-partitions", type=int, default=None,
                        help="--runner spark: partitions of each shuffle (default --cores)")
    parser.add_argument("--driver-memory", default="2g", help="--runner spark: spark.driver.memory (default 2g)")
    parser.add_argument("--tag", default=None, help="suffix of the result file names")
    parser.add_argument("--no-write", action="store_true", help="print the summary only; write no result file")
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR, help="where the report goes (bench/results)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the queries; print the summary; write the report. Return 0, or 1 when a query is wrong or internal."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        numbers = parse_query_numbers(args.queries)
    except ValueError as error:
        parser.error(str(error))
    if args.runs < 0:
        parser.error("--runs must be at least 0")

    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from tests.duckdb_reference import duckdb_connection

    started = datetime.datetime.now()
    folder = ensure_tpcds(args.sf, args.data_dir)
    if args.runner == "spark":
        session = SparkQueries(folder, args.device, args.drivers, args.cores, args.shuffle_partitions,
                               args.driver_memory)
    else:
        session = Session(device=args.device, drivers=args.drivers)
        register_tpcds(session, folder)
    duck = duckdb_connection(folder, threads=args.threads)
    outcomes = []
    for number in numbers:
        outcome = run_query(number, session, duck, args.runs, args.timeout)
        outcomes.append(outcome)
        print(f"{outcome.query:>4} {outcome.outcome:<8} engine {_ms(outcome.engine_first_s):>9} ms first, "
              f"DuckDB {_ms(outcome.duckdb_first_s):>8} ms  {outcome.reason or ''}", flush=True)
    if args.runner == "spark":
        session.stop()
    report = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "command": shlex.join(["python", "-m", "bench.run_tpcds", *argv]),
        "settings": {"sf": args.sf, "runs": args.runs, "device": args.device, "drivers": args.drivers,
                     "runner": args.runner, **({"cores": args.cores, "shuffle_partitions": args.shuffle_partitions}
                                               if args.runner == "spark" else {}),
                     "threads": args.threads, "timeout": args.timeout, "queries": [query_name(n) for n in numbers],
                     "query_source": _git(["log", "-1", "--format=%H", "--", "bench/tpcds/queries"])},
        "machine": _machine_facts(args.device),
        "results": [asdict(o) for o in outcomes],
    }
    print("\n".join(summary_lines(outcomes)))
    if not args.no_write:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        runner = "-spark" if args.runner == "spark" else ""
        stem = f"{started:%Y-%m-%d}-tpcds{runner}-{args.device}-sf{args.sf:g}" + (f"-{args.tag}" if args.tag else "")
        for suffix, text in ((".json", json.dumps(report, indent=1) + "\n"), (".md", render_markdown(report))):
            path = args.output_dir / (stem + suffix)
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_text(text)
            os.replace(temporary, path)
            print(f"wrote {path}")
    return 1 if any(o.outcome in ("wrong", "internal") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
