"""Time queries through Spark + engine against Spark SQL's own execution, on the same local Spark, in one run.

Why: the Spark integration is worth having only if running the engine's
fragments inside Spark beats Spark's own engine on the same cores. Both
runners share one SparkSession (``local[<cores>]``, UI off, one shuffle
partition count), read the same Parquet files as DataFrames, and return a
``pyarrow.Table`` (``toArrow``). Each runner runs once (timed apart; its result
is checked against DuckDB's), then the runners take turns ``--runs`` times,
so a busy machine slows them alike; medians are reported. For the last run of
each runner the report lists Spark's stages: tasks, wall and executor time,
shuffle bytes read and written (from Spark's status store).

Runners: ``spark-sql`` (``spark.sql(SQL)``), ``spark+engine`` (the engine's
plan through :class:`gpu_engine.spark.SparkRunner`; a bare Parquet table is
read by the engine itself) and, with ``--arrow-feed``, ``spark+engine-arrow``
(every table fed to the engine through Arrow by Spark's own reader).
``--feed-cost`` also times feeding each scanned table's columns through
Arrow alone; ``--broadcast-threshold`` sets which joins are shuffled (the
report lists each query's broadcast and shuffled joins).
Writes ``bench/results/<date>-spark-<device>-<cores>core-sf<sf>.json``, ``.md`` and a ``.png`` chart.
Run from the repository root::

    python -m bench.run_spark_bench --sf 1 --runs 5 --queries primer,q1 --arrow-feed
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.run_bench import (  # noqa: E402 - after the path fix above
    RESULTS_DIR,
    RunnerResult,
    _available_cores,
    _machine_facts,
    _ms,
    _parse_sf,
    _write_atomically,
)
from bench.charts import chart_link, write_chart  # noqa: E402
from bench.tpch_queries import bench_query  # noqa: E402
from gpu_engine.cli import speed_ratio  # noqa: E402

__all__ = ["main"]

#: Spark SQL's avg of a decimal is a decimal rounded to 6 places: Q1's avg_disc 0.049985 where DuckDB's
#: double is 0.0499853 (6e-6 relative).
SPARK_SQL_TOLERANCE = 1e-4
TABLES_OF = {"primer": ("lineitem",), "q1": ("lineitem",), "q6": ("lineitem",),
             "q3": ("lineitem", "orders", "customer"), "q18": ("lineitem", "orders", "customer")}
ALL_TABLES = ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region")


@dataclass
class StageMetrics:
    """One Spark stage of a runner's last run, from Spark's status store."""

    job: int
    stage: int
    tasks: int
    wall_ms: int | None
    executor_run_ms: int
    shuffle_read_bytes: int
    shuffle_write_bytes: int
    input_bytes: int
    name: str


@dataclass
class SparkRunnerReport:
    """A runner's times on one query and the stages of its last run."""

    result: RunnerResult
    stages: list[StageMetrics] = field(default_factory=list)


def build_parser() -> argparse.ArgumentParser:
    """Return the Spark benchmark's argument parser."""
    parser = argparse.ArgumentParser(prog="python -m bench.run_spark_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=_parse_sf, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per runner after the first (default 5)")
    parser.add_argument("--queries", default="primer,q1", help="comma-separated query names (default primer,q1)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "cuda-sim", "auto"),
                        help="engine device on the executors (default cpu)")
    parser.add_argument("--cores", type=int, default=_available_cores(), help="local[N] Spark cores (default: all)")
    parser.add_argument("--shuffle-partitions", type=int, default=None,
                        help="spark.sql.shuffle.partitions for both runners (default: the cores)")
    parser.add_argument("--batch-rows", type=int, default=131072,
                        help="spark.sql.execution.arrow.maxRecordsPerBatch (default 131072)")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory (default 4g)")
    parser.add_argument("--arrow-feed", action="store_true",
                        help="also run the engine with every table fed through Arrow by Spark's reader")
    parser.add_argument("--feed-cost", action="store_true",
                        help="also time feeding each query's scanned columns to Python through Arrow, against "
                             "Spark's scan of them alone (the cost a table that is not a Parquet file pays)")
    parser.add_argument("--broadcast-threshold", type=int, default=None,
                        help="bytes: larger join build sides are shuffled (default Spark's autoBroadcastJoinThreshold)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="root of the TPC-H cache (default $GPU_ENGINE_DATA/tpch or ~/.cache/gpu_engine/tpch)")
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
    return parser


def _spark_session(args):
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors' Python workers import this environment's engine
    session = (
        SparkSession.builder.master(f"local[{args.cores}]")
        .appName("gpu_engine spark bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions or args.cores))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.batch_rows))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def _stage_metrics(spark, group: str) -> list[StageMetrics]:
    """Return the stages Spark ran for the jobs of ``group`` (skipped stages left out)."""
    context = spark.sparkContext
    jvm_context = context._jsc.sc()
    try:
        jvm_context.listenerBus().waitUntilEmpty(10_000)  # the status store is filled by a listener, asynchronously
    except Exception:  # noqa: BLE001 - an internal API; a pause does the same
        time.sleep(1.0)
    store = jvm_context.statusStore()
    stages = []
    for job in sorted(context.statusTracker().getJobIdsForGroup(group)):
        info = context.statusTracker().getJobInfo(job)
        for stage_id in sorted(info.stageIds if info else ()):
            try:
                data = store.lastStageAttempt(stage_id)
            except Exception:  # noqa: BLE001 - a stage that never ran has no attempt
                continue
            if data.status().toString() == "SKIPPED":
                continue
            submitted, completed = data.submissionTime(), data.completionTime()
            wall = (completed.get().getTime() - submitted.get().getTime()
                    if submitted.isDefined() and completed.isDefined() else None)
            stages.append(StageMetrics(job, stage_id, data.numTasks(), wall, data.executorRunTime(),
                                       data.shuffleReadBytes(), data.shuffleWriteBytes(), data.inputBytes(),
                                       data.name().split(" at ")[0]))
    return stages


def _drain_rows(batches):
    """Count the rows of a partition fed through Arrow (the Python side of the feed, nothing else)."""
    import pyarrow as pa

    rows = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pylist([{"rows": rows}], schema=pa.schema([("rows", pa.int64())]))


def feed_cost(spark, plan, tables, runs: int) -> list[dict]:
    """Return, per table the plan scans, the median seconds of Spark's scan of the columns and of feeding them.

    ``scan_s``: Spark reads the columns and discards them (the ``noop``
    sink; no row conversion). ``feed_s``: the same columns go through
    ``mapInArrow`` to a Python function that only counts rows: Spark's
    columnar-to-row and row-to-Arrow conversion plus the transfer, what an
    engine Task pays before its first operator when a table is not a bare
    Parquet scan the engine reads itself.
    """
    from gpu_engine.plans.nodes import TableScanNode, walk_plan

    results = []
    for scan in {(n.table_name, tuple(n.columns)): n for n in walk_plan(plan) if isinstance(n, TableScanNode)}:
        frame = tables[scan[0]].select(*scan[1])
        samples = {"scan_s": [], "feed_s": []}
        for _ in range(max(1, runs)):
            start = time.perf_counter()
            frame.write.format("noop").mode("overwrite").save()
            samples["scan_s"].append(time.perf_counter() - start)
            start = time.perf_counter()
            fed = frame.mapInArrow(_drain_rows, "rows long").groupBy().sum("rows").collect()[0][0]
            samples["feed_s"].append(time.perf_counter() - start)
        results.append({"table": scan[0], "columns": list(scan[1]), "rows": fed,
                        **{key: statistics.median(values) for key, values in samples.items()}})
    return results


def _timed(spark, group: str, run):
    spark.sparkContext.setJobGroup(group, group)
    start = time.perf_counter()
    table = run()
    return table, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; return 0, or 1 when a runner failed or disagreed with DuckDB."""
    from gpu_engine.connectors.tpch_data import ensure_tpch
    from gpu_engine.spark import SparkRunner

    from tests.duckdb_reference import FLOAT_RELATIVE_TOLERANCE, duckdb_connection, duckdb_table, rows_mismatch

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    queries = [bench_query(name) for name in args.queries.split(",") if name.strip()]
    data_dir = ensure_tpch(args.sf, args.data_dir, progress=True)
    started = datetime.datetime.now()
    load_at_start = os.getloadavg()  # the machine may be shared: say how busy it was
    spark = _spark_session(args)
    names = sorted({table for query in queries for table in TABLES_OF.get(query.name, ALL_TABLES)})
    tables = {name: spark.read.parquet(str(data_dir / f"{name}.parquet")) for name in names}
    for name, frame in tables.items():
        frame.createOrReplaceTempView(name)
    engine = SparkRunner(spark, device=args.device, broadcast_threshold=args.broadcast_threshold)
    runners = {"spark-sql": None, "spark+engine": engine}
    if args.arrow_feed:
        runners["spark+engine-arrow"] = SparkRunner(spark, device=args.device, engine_parquet_scans=False,
                                                    broadcast_threshold=args.broadcast_threshold)

    report_queries = {}
    join_strategies: dict[str, dict] = {}
    feeds: dict[str, list[dict]] = {}
    failed = False
    group_ids = iter(range(1 << 30))
    for query in queries:
        with duckdb_connection(data_dir, threads=args.cores) as connection:
            reference = duckdb_table(connection, query.sql)
        plan = query.build_plan(engine.catalog(tables))
        for label, runner in runners.items():  # how each join runs: broadcast or shuffled, and the estimate
            if runner is not None:
                runner.plan_stages(plan, tables)
                joins = {j: {"strategy": s, "build_bytes": b} for j, (s, b) in runner.last_join_strategies.items()}
                join_strategies.setdefault(query.name, {})[label] = joins
        jobs = {"spark-sql": lambda: spark.sql(query.sql).toArrow()}
        for label, runner in runners.items():
            if runner is not None:
                jobs[label] = lambda runner=runner: runner.collect(plan, tables)
        reports = {label: SparkRunnerReport(RunnerResult(label)) for label in jobs}
        for label, run in jobs.items():  # the first run of each: warm-up, checked against DuckDB
            result = reports[label].result
            try:
                table, seconds = _timed(spark, f"first-{label}-{next(group_ids)}", run)
            except Exception as error:  # noqa: BLE001 - report it and go on
                result.error = f"{type(error).__name__}: {error}"
                failed = True
                continue
            result.first_run_s, result.rows = seconds, table.num_rows
            problem = rows_mismatch(table, reference, ordered=query.ordered,
                                    rel_tol=SPARK_SQL_TOLERANCE if label == "spark-sql" else FLOAT_RELATIVE_TOLERANCE)
            result.correct = problem is None
            if problem is not None:
                result.error, failed = "result differs from DuckDB: " + problem, True
            print(f"{query.name} {label}: first run {seconds * 1000:.0f} ms, {table.num_rows} rows, "
                  f"{'correct' if problem is None else 'WRONG'}", file=sys.stderr)
        live = [label for label in jobs if reports[label].result.error is None]
        for turn in range(args.runs):  # runners take turns, so load on the machine hits them alike
            for label in live:
                group = f"run-{label}-{next(group_ids)}"
                _, seconds = _timed(spark, group, jobs[label])
                reports[label].result.samples_s.append(seconds)
                if turn == args.runs - 1:
                    reports[label].stages = _stage_metrics(spark, group)
        for label in live:
            result = reports[label].result
            result.median_s, result.min_s = statistics.median(result.samples_s), min(result.samples_s)
            print(f"{query.name} {label}: median {result.median_s * 1000:.0f} ms", file=sys.stderr)
        report_queries[query.name] = {label: {"result": asdict(r.result), "stages": [asdict(s) for s in r.stages]}
                                      for label, r in reports.items()}
        if args.feed_cost:
            feeds[query.name] = feed_cost(spark, plan, tables, args.runs)
            for feed in feeds[query.name]:
                print(f"{query.name} feed {feed['table']} ({len(feed['columns'])} columns, {feed['rows']} rows): "
                      f"scan {feed['scan_s'] * 1000:.0f} ms, Arrow feed {feed['feed_s'] * 1000:.0f} ms",
                      file=sys.stderr)

    facts = _machine_facts(args.device if args.device != "auto" else "cpu")
    import pyspark

    facts["pyspark"] = pyspark.__version__
    facts["java"] = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
    facts["load_average_start_end"] = f"{load_at_start[0]:.2f} / {os.getloadavg()[0]:.2f}"
    settings = {"sf": args.sf, "runs": args.runs, "device": args.device, "cores": args.cores,
                "shuffle_partitions": args.shuffle_partitions or args.cores, "batch_rows": args.batch_rows,
                "driver_memory": args.driver_memory, "queries": [q.name for q in queries],
                "repartition_by_id": engine.route_by_partition_id,
                "broadcast_threshold": engine.broadcast_threshold()}
    report = {"date": started.strftime("%Y-%m-%d %H:%M"),
              "command": " ".join(["python", "-m", "bench.run_spark_bench", *argv]),
              "settings": settings, "machine": facts, "queries": report_queries, "joins": join_strategies,
              "feed_cost": feeds}
    spark.stop()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{started:%Y-%m-%d}-spark-{args.device}-{args.cores}core-sf{args.sf:g}"
    json_path, markdown_path = args.output_dir / f"{stem}.json", args.output_dir / f"{stem}.md"
    chart = write_chart(args.output_dir / f"{stem}.png",
                        f"gpu_engine through Spark vs Spark SQL — TPC-H sf{args.sf:g}, {report['date']}",
                        list(report_queries), spark_medians_ms(report_queries))
    if chart is not None:
        report["chart"] = chart.name
    _write_atomically(json_path, json.dumps(report, indent=2) + "\n")
    markdown = render_markdown(report)
    _write_atomically(markdown_path, markdown)
    print(markdown)
    print(f"wrote {json_path} and {markdown_path}", file=sys.stderr)
    return 1 if failed else 0


def spark_medians_ms(queries: dict) -> dict[str, list[float | None]]:
    """Return runner label -> median milliseconds per query (None where it failed or was wrong), for the chart."""
    labels = list(dict.fromkeys(label for runners in queries.values() for label in runners))
    series: dict[str, list[float | None]] = {label: [] for label in labels}
    for runners in queries.values():
        for label in labels:
            result = (runners.get(label) or {}).get("result") or {}
            good = result.get("median_s") is not None and not result.get("error") and result.get("correct") is not False
            series[label].append(result["median_s"] * 1000 if good else None)
    return series


def runner_totals(queries: dict) -> dict[str, float]:
    """Return runner label -> the sum of its medians (seconds), for runners with a good median on every query."""
    labels = list(dict.fromkeys(label for runners in queries.values() for label in runners))
    totals = {}
    for label in labels:
        results = [(runners.get(label) or {}).get("result") or {} for runners in queries.values()]
        if all(r.get("median_s") is not None and not r.get("error") and r.get("correct") is not False
               for r in results):
            totals[label] = sum(r["median_s"] for r in results)
    return totals


def render_markdown(report: dict) -> str:
    """Return the report as markdown: medians, speed-ups over Spark SQL, each runner's stages, the machine."""
    settings = report["settings"]
    lines = [
        f"# gpu_engine through Spark vs Spark SQL — TPC-H sf{settings['sf']:g}, {report['date']}",
        "",
        f"Command: `{report['command']}`",
        "",
        f"One SparkSession, `local[{settings['cores']}]`, "
        f"spark.sql.shuffle.partitions={settings['shuffle_partitions']}, "
        f"arrow maxRecordsPerBatch={settings['batch_rows']}, driver memory {settings['driver_memory']}; engine "
        f"device `{settings['device']}`, shuffles by "
        f"{'repartitionById on engine partition ids' if settings['repartition_by_id'] else 'repartition(n, keys)'}. "
        f"Medians of {settings['runs']} runs after a first run (ms), runners taking turns; every first result "
        "checked against DuckDB's (Spark SQL's within 1e-4 relative: its avg of a decimal is rounded to 6 places). "
        "\"vs Spark SQL\" says how many times faster or slower than Spark SQL a runner is; Spark SQL runs the "
        "TPC-H SQL text, the engine runners the engine's plan of the same query.",
        "",
        *chart_link(report),
        "| query | runner | median | min | first run | vs Spark SQL |",
        "|---|---|---|---|---|---|",
    ]
    for query, runners in report["queries"].items():
        spark_sql = runners.get("spark-sql", {}).get("result", {}).get("median_s")
        for label, entry in runners.items():
            result = RunnerResult(**entry["result"])
            cell = "WRONG" if result.correct is False else ("FAILED" if result.error else _ms(result.median_s))
            speedup = ("—" if not (result.median_s and spark_sql) or label == "spark-sql"
                       else speed_ratio(result.median_s, spark_sql))
            lines.append(f"| {query} | {label} | {cell} | {_ms(result.min_s)} | {_ms(result.first_run_s)} | "
                         f"{speedup} |")
    totals = runner_totals(report["queries"])
    for label, total in totals.items():
        speedup = "—" if label == "spark-sql" or "spark-sql" not in totals else speed_ratio(total, totals["spark-sql"])
        lines.append(f"| **total of {len(report['queries'])}** | {label} | {_ms(total)} | | | {speedup} |")
    lines += ["", "## Stages of each runner's last run", "",
              "| query | runner | job | stage | tasks | wall ms | executor ms | shuffle read B | shuffle write B |",
              "|---|---|---|---|---|---|---|---|---|"]
    for query, runners in report["queries"].items():
        for label, entry in runners.items():
            for s in entry["stages"]:
                lines.append(f"| {query} | {label} | {s['job']} | {s['stage']} | {s['tasks']} | {s['wall_ms']} | "
                             f"{s['executor_run_ms']} | {s['shuffle_read_bytes']} | {s['shuffle_write_bytes']} |")
    if report.get("joins"):
        lines += ["", "## Joins (spark+engine)", "", "| query | broadcast | shuffled | largest shuffled build side B |",
                  "|---|---|---|---|"]
        for query, by_runner in report["joins"].items():
            joins = list(by_runner.get("spark+engine", {}).values())
            shuffled = [j["build_bytes"] or 0 for j in joins if j["strategy"] == "shuffle"]
            lines.append(f"| {query} | {len(joins) - len(shuffled)} | {len(shuffled)} | {max(shuffled, default='—')} |")
    if report.get("feed_cost"):
        lines += ["", "## Arrow feed cost (a table that is not a bare Parquet scan)", "",
                  "Median of Spark scanning the columns alone (noop sink) and of feeding them through `mapInArrow` "
                  "to a Python function that only counts rows.", "",
                  "| query | table | columns | rows | Spark scan ms | Arrow feed ms | feed rows/s |", "|---|---|---|---|---|---|---|"]
        for query, feeds in report["feed_cost"].items():
            for f in feeds:
                lines.append(f"| {query} | {f['table']} | {len(f['columns'])} | {f['rows']} | {f['scan_s'] * 1000:.0f} | "
                             f"{f['feed_s'] * 1000:.0f} | {f['rows'] / f['feed_s']:,.0f} |")
    failures = [f"- {query} {label}: {entry['result']['error']}" for query, runners in report["queries"].items()
                for label, entry in runners.items() if entry["result"]["error"]]
    if failures:
        lines += ["", "## Failures", ""] + failures
    lines += ["", "## Machine", ""] + [f"- {k}: {v}" for k, v in report["machine"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
