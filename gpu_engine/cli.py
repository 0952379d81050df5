"""Run TPC-H on the engine from a shell: ``gpu-engine demo``, ``gpu-engine tpch`` and ``gpu-engine query``;
run any SQL query with ``gpu-engine sql`` (planned by :mod:`gpu_engine.sql`; the text, or standard input).

``demo`` generates TPC-H data if missing, runs the primer query, Q1 and Q6,
prints the first rows of each with the engine's and DuckDB's times on the same
Parquet files and whether the engine's rows match DuckDB's, then the
explain-analyze of Q1. ``tpch`` runs TPC-H queries (default: all 22) with the
same reporting and ends with a summary table: per query the rows, the engine's
and DuckDB's median times and how many times slower or faster the engine is,
and the totals. ``query`` is ``tpch`` with the demo's queries and scale factor
as defaults. While numba compiles kernels (the first run on a machine, ~10 s)
a line on stderr says so. A result that differs from DuckDB's makes the
command exit with code 1. User mistakes (bad arguments, an unknown device, a
query without a plan, no ``tpchgen-cli``) exit with code 2 and a one-line
message; engine failures exit with code 1 and a message (``--traceback`` shows
the Python traceback).

Every command speaks one vocabulary: ``--sf`` and ``--data-dir`` choose the
TPC-H data (``sql`` also reads your own files with ``--tables DIR``),
``--plan`` prints the plan without running it and ``--explain-analyze`` runs,
then prints the explain-analyze. The older spellings (``sql --tpch``, ``sql
--data``, and ``--explain``, which meant "plan only" in ``sql`` and "explain
analyze" elsewhere) still work for a release, with a warning on stderr.
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import decimal
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence


from gpu_engine.device import DEVICE_NAMES, Device, get_device  # NumPy only: numba loads on first use
from gpu_engine.host_cpus import usable_cpus

__all__ = ["main", "build_parser", "default_drivers", "QueryChoice", "parse_query_list", "format_table",
           "format_summary", "compare_with_duckdb", "first_run_note", "speed_ratio"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: Exit code after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130

_DEMO_QUERIES = "primer,1,6"
#: ``demo`` and ``query`` share it, so ``query`` reuses the demo's data; ``tpch`` (all 22 queries) runs SF 1.
DEMO_SCALE_FACTOR = 0.1
COMPILING_MESSAGE = "compiling kernels (first run only; later runs load them from the disk cache)…"


class UsageError(Exception):
    """Raise for a mistake the user can fix; main prints it and exits with code 2."""


#: What ``sql --dialect`` accepts: :data:`gpu_engine.sql.SQL_DIALECTS` (not imported: sqlglot is slow to load).
SQL_DIALECTS = ("duckdb", "spark")


class _Parser(argparse.ArgumentParser):
    """Exit with code 2 and one line on a usage error (argparse prints the whole usage before it)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Deprecated(argparse.Action):
    """Accept an old option spelling for a release: warn on stderr, then store as its replacement does."""

    def __init__(self, option_strings, dest, replacement: str, nargs=None, const=None, **kwargs):
        self.replacement = replacement
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is deprecated; use {self.replacement}", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-engine")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


@dataclass(frozen=True)
class QueryChoice:
    """One query the CLI can run: its display name, its engine plan and its DuckDB SQL."""

    name: str
    build_plan: Callable[[Mapping], object]
    sql: str
    ordered: bool | tuple[str, ...]  # see compare_with_duckdb


def parse_query_list(text: str, sf: float = 1) -> list[QueryChoice]:
    """Turn ``"primer,1,q6"`` into query choices at scale factor ``sf`` (Q11's FRACTION depends on it).

    Raises UsageError naming any query without a plan.
    """
    from gpu_engine.plans import tpch
    from gpu_engine.sql.ordering import order_key_columns

    choices: list[QueryChoice] = []
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        if item == "all":
            choices.extend(parse_query_list(",".join(str(n) for n in tpch.available_queries()), sf))
            continue
        if item == "primer":
            choices.append(QueryChoice("primer", tpch.primer_query, tpch.PRIMER_SQL, ordered=True))
            continue
        digits = item.removeprefix("q")
        if not digits.isdigit():
            raise UsageError(f"unknown query {raw.strip()!r}: use 'primer', 'all' or a TPC-H query number "
                             "such as 1 or q6")
        number = int(digits)
        try:
            sql = tpch.sql(number, sf)
        except ValueError as error:
            raise UsageError(str(error)) from None
        choices.append(
            QueryChoice(
                f"q{number}",
                lambda catalog, number=number: tpch.query(number, catalog, sf=sf),
                sql,
                ordered=order_key_columns(sql),
            )
        )
    if not choices:
        raise UsageError("no query given; e.g. --queries primer,1,6")
    return choices


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``gpu-engine``."""
    parser = _Parser(
        prog="gpu-engine",
        description="Run TPC-H queries on gpu_engine (cpu, cuda or cuda-sim) and compare with DuckDB.",
    )
    parser.add_argument("--version", action="version", version=f"gpu-engine {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    def add_common(sub: argparse.ArgumentParser, default_sf: float | None) -> None:
        sub.add_argument(
            "--sf", type=_positive_float, default=default_sf, metavar="SF",
            help=f"TPC-H scale factor (default {default_sf if default_sf is not None else DEMO_SCALE_FACTOR:g})"
        )
        sub.add_argument(
            "--device",
            choices=DEVICE_NAMES,
            default="auto",
            help="where operators run (default auto: cuda when a GPU is present, else cpu)",
        )
        sub.add_argument(
            "--drivers",
            type=_positive_int,
            default=None,
            help="drivers (threads) per pipeline (default: 1 on cuda, where more drivers are slower; "
            "else the cores, at most 4)",
        )
        sub.add_argument(
            "--data-dir",
            type=Path,
            default=None,
            help="root of the TPC-H cache; files go to DIR/sf<SF>/ "
            "(default $GPU_ENGINE_DATA/tpch or ~/.cache/gpu_engine/tpch)",
        )
        rows = 20 if sub.prog.endswith(" sql") else 5
        sub.add_argument("--rows", type=_positive_int, default=rows, help=f"result rows to print per query (default {rows})")
        if not sub.prog.endswith(" sql"):
            sub.add_argument("--no-duckdb", action="store_true", help="do not time DuckDB on the same files")
        sub.add_argument("--traceback", action="store_true", help="show the Python traceback of a failure")
        sub.add_argument("--full-explain", action="store_true",
                         help="print explain lines whole, every column with its type (default: lines over 120 "
                         "characters are shortened)")

    demo = commands.add_parser(
        "demo",
        help="generate TPC-H if missing; run the primer query, Q1 and Q6; explain Q1",
        description="Generate TPC-H data if missing, run the primer query, Q1 and Q6 on the "
        "engine and on DuckDB, print rows and times, and explain-analyze Q1.",
    )
    add_common(demo, DEMO_SCALE_FACTOR)

    def add_explain(sub: argparse.ArgumentParser, old_explain: str) -> None:
        """Add ``--plan`` and ``--explain-analyze``; ``--explain`` stays, deprecated, meaning ``old_explain``."""
        shown = sub.add_mutually_exclusive_group()
        shown.add_argument("--plan", action="store_true", help="print the plan as it would run; do not run it")
        shown.add_argument("--explain-analyze", action="store_true",
                           help="run, then print the explain-analyze (each node's rows, batches and times)")
        sub.add_argument("--explain", action=_Deprecated, nargs=0, const=True, replacement=old_explain,
                         dest=old_explain.removeprefix("--").replace("-", "_"))

    query = commands.add_parser(
        "query",
        help="run chosen TPC-H queries",
        description="Run chosen TPC-H queries on the engine (and DuckDB) and print rows and times.",
    )
    add_common(query, DEMO_SCALE_FACTOR)
    query.add_argument(
        "--queries",
        default=_DEMO_QUERIES,
        help=f"comma-separated: 'primer' and TPC-H query numbers (default {_DEMO_QUERIES})",
    )
    query.add_argument(
        "--runs", type=_positive_int, default=3, help="timed runs after the first (median reported; default 3)"
    )
    add_explain(query, "--explain-analyze")

    tpch_command = commands.add_parser(
        "tpch",
        help="run TPC-H queries (default all 22) and print a summary against DuckDB",
        description="Generate TPC-H data if missing, run TPC-H queries on the engine (and DuckDB on the "
        "same Parquet files), print each query's rows and time, then a summary table with totals.",
    )
    add_common(tpch_command, 1.0)
    tpch_command.add_argument(
        "--queries", default="all",
        help="comma-separated TPC-H query numbers, 'all' or 'primer' (default all)",
    )
    tpch_command.add_argument(
        "--runs", type=_positive_int, default=3, help="timed runs after the first (median reported; default 3)"
    )
    add_explain(tpch_command, "--explain-analyze")

    precompile = commands.add_parser(
        "precompile",
        help="compile the static kernels once (set-up: make demo runs it), so no first query waits for them",
        description="Run TPC-H unfused at scale factor 0.001 on the device, with one and two drivers, so "
        "numba compiles and caches the static kernels (joins, grouping, sorting, decoding). Generated kernels "
        "are not compiled here: they depend on queries and compile in the background while queries run.",
    )
    precompile.add_argument("--device", choices=DEVICE_NAMES, default="auto",
                            help="the device to compile for (default auto: cuda when a GPU is present, else cpu)")
    precompile.add_argument("--traceback", action="store_true", help="show the Python traceback of a failure")

    sql = commands.add_parser(
        "sql",
        help="run one SQL query (text, or standard input) over Parquet files or TPC-H",
        description="Plan a SQL query (DuckDB dialect) with gpu_engine.sql and run it; with no text the "
        "query is read from standard input. Tables: every <name>.parquet in --tables DIR, or TPC-H at --sf SF "
        "(in --data-dir, generated if missing).",
    )
    sql.add_argument("text", nargs="?", default=None, help="the query (default: read standard input)")
    add_common(sql, None)
    sql.add_argument("--tables", type=Path, default=None, metavar="DIR",
                     help="register each DIR/<table>.parquet (file or folder) as <table> instead of TPC-H")
    add_explain(sql, "--plan")
    sql.add_argument("--dialect", choices=SQL_DIALECTS, default="duckdb",
                     help="the SQL dialect of the text (default duckdb)")
    sql.add_argument("--tpch", type=_positive_float, action=_Deprecated, replacement="--sf", dest="sf")
    sql.add_argument("--data", type=Path, action=_Deprecated, replacement="--tables", dest="tables")
    return parser


# ----------------------------------------------------------------- printing
def _format_value(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    text = str(value)
    return text if len(text) <= 24 else text[:23] + "…"


def format_table(table, max_rows: int) -> str:
    """Return the first ``max_rows`` rows of a ``pyarrow.Table`` as aligned text, numbers right-aligned."""
    import pyarrow.types as pat

    head = table.slice(0, max_rows)
    names = list(head.column_names)
    columns = [[_format_value(v) for v in head.column(i).to_pylist()] for i in range(head.num_columns)]
    numeric = [pat.is_integer(f.type) or pat.is_floating(f.type) or pat.is_decimal(f.type) for f in head.schema]
    widths = [max([len(n)] + [len(v) for v in col]) for n, col in zip(names, columns)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)]
        return "  ".join(parts).rstrip()

    out = [line(names), line(["-" * w for w in widths])]
    out += [line([col[r] for col in columns]) for r in range(head.num_rows)]
    if table.num_rows > max_rows:
        out.append(f"... {table.num_rows} rows in all")
    else:
        out.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(out)


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


# ------------------------------------------------------------------ running
def _open_duckdb(data_dir: Path):
    """Return a DuckDB connection with a view per TPC-H file, or None when DuckDB is not installed."""
    try:
        import duckdb
    except ImportError:
        return None
    connection = duckdb.connect()
    for path in sorted(data_dir.glob("*.parquet")):
        location = str(path).replace("'", "''")
        connection.execute(f"CREATE VIEW \"{path.stem}\" AS SELECT * FROM read_parquet('{location}')")
    return connection


def _time_duckdb(connection, sql: str, runs: int):
    """Return DuckDB's median time over ``runs`` runs after a warm-up, and the warm-up's result table."""

    def run_once():
        relation = connection.sql(sql)
        fetch = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table  # DuckDB 2.x / 1.x
        return fetch()

    result = run_once()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run_once()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


_FLOAT_TOLERANCE = 1e-9  # relative; DuckDB and the engine sum doubles in different orders


def _comparable(value: object) -> object:
    """Return ``value`` in a form that compares across Arrow types: exact numbers as Decimal, floats as float."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, decimal.Decimal)):
        return decimal.Decimal(value)
    return value


def _same_value(engine: object, duck: object) -> bool:
    if isinstance(engine, float) or isinstance(duck, float):
        if engine is None or duck is None:
            return engine is None and duck is None
        a, b = float(engine), float(duck)
        if a != a or b != b:  # NaN
            return a != a and b != b
        return abs(a - b) <= _FLOAT_TOLERANCE * max(abs(a), abs(b)) + 1e-12
    return _comparable(engine) == _comparable(duck)


def compare_with_duckdb(engine_table, duck_table, ordered: bool | tuple[str, ...]) -> str | None:
    """Return why the engine's result differs from DuckDB's, or None when they hold the same rows.

    Names and row counts must be equal; values are compared exactly (integers
    and decimals as decimals, strings, dates), floats within 1e-9 relative.
    Without ``ordered``, both sides are sorted first (floats rounded for the
    sort, so last-bit differences do not reorder rows). With a tuple of ORDER BY
    columns the rows are compared as a multiset and those columns in order
    (rows tying on every key may come in any order, as SQL allows).
    """
    if isinstance(ordered, tuple):
        from gpu_engine.sql.ordering import mismatch_in_key_order

        return mismatch_in_key_order(compare_with_duckdb, engine_table, duck_table, ordered)
    if engine_table.column_names != duck_table.column_names:
        return f"column names differ: engine {engine_table.column_names}, DuckDB {duck_table.column_names}"
    if engine_table.num_rows != duck_table.num_rows:
        return f"row counts differ: engine {engine_table.num_rows}, DuckDB {duck_table.num_rows}"

    def rows(table) -> list[tuple]:
        return list(zip(*(column.to_pylist() for column in table.columns)))

    def sort_key(row: tuple) -> tuple:
        return tuple((value is None, float(f"{value:.9g}") if isinstance(value, float) else _comparable(value))
                     for value in row)

    engine_rows, duck_rows = rows(engine_table), rows(duck_table)
    if not ordered:
        engine_rows.sort(key=sort_key)
        duck_rows.sort(key=sort_key)
    for index, (mine, theirs) in enumerate(zip(engine_rows, duck_rows)):
        if not all(_same_value(a, b) for a, b in zip(mine, theirs)):
            return f"row {index} differs: engine {mine}, DuckDB {theirs}"
    return None


def first_run_note(stats) -> str:
    """Say what a query's first run did beyond a warm one: the kernels its drivers compiled, else how many
    batches ran on the lowest tier while the generated kernels they lacked compile in the background.

    Why not "includes any JIT compilation": with ``compile_mode="background"`` (the default) nothing compiles
    on the drivers (issue 29), so that line said something untrue of most first runs; the Task's counters
    say what happened.
    """
    if stats is None:
        return "no stats"
    if stats.kernels_compiled:
        return (f"{stats.kernels_compiled} kernel(s) compiled on the drivers, "
                f"{_seconds(stats.compile_seconds)} of it")
    lowest = sum(int(operator.runtime.get("lowest_tier_batches", 0))
                 for pipeline in stats.pipelines for operator in pipeline.operators)
    if lowest:
        return (f"nothing compiled on the drivers; {lowest} batch(es) ran on the lowest tier while "
                f"their generated kernels compile in the background")
    return "nothing compiled on the drivers"


def speed_ratio(seconds: float | None, reference_seconds: float | None) -> str:
    """Say how ``seconds`` compares with ``reference_seconds``: ``"3.67× slower"``, ``"2.10× faster"``.

    Why words: a bare ratio such as ``engine/duckdb 3.67x`` leaves the reader
    to work out which way it goes. ``-`` when either time is missing or zero.
    """
    if not seconds or not reference_seconds:
        return "-"
    ratio = seconds / reference_seconds
    if round(ratio, 2) == 1.0:
        return "as fast"
    return f"{ratio:.2f}× slower" if ratio > 1 else f"{1 / ratio:.2f}× faster"


def ptx_cache_is_empty() -> bool:
    """Return whether no CUDA kernel was ever compiled to PTX here (its disk cache holds no entry).

    On a GPU the kernels are compiled with ``numba.cuda.compile_ptx``, which
    fires no ``numba:compile`` event, so an empty PTX cache is how a command
    knows its first run will compile.
    """
    from gpu_engine.kernels.ptx_cache import ptx_cache_directory

    folder = ptx_cache_directory()
    return not folder.is_dir() or next(folder.glob("*.ptx"), None) is None


class _CompileNotice:
    """Print one line on stderr when numba starts compiling a kernel, at most once per command.

    Why: on a cold cache the first query spends ~10 s compiling kernels with no
    output. numba fires its ``numba:compile`` event only for real compilations,
    not for kernels loaded from its disk cache, so a warm run prints nothing.
    Use as a context manager around the first run of each query. numba is
    imported on entering, not with this module, so that the CLI starts (and a
    Ctrl-C during start-up is handled) before the heavy imports.
    """

    def __init__(self, stream=None):
        self.stream = stream
        self.printed = False
        self._listener = None

    def on_start(self, event=None) -> None:
        if not self.printed:
            self.printed = True
            print(COMPILING_MESSAGE, file=self.stream or sys.stderr, flush=True)

    def on_end(self, event) -> None:
        pass

    def __enter__(self) -> "_CompileNotice":
        from numba.core import event as numba_event

        notice = self

        class _Listener(numba_event.Listener):
            def on_start(self, event) -> None:
                notice.on_start(event)

            def on_end(self, event) -> None:
                pass

        self._listener = _Listener()
        numba_event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc_info) -> None:
        from numba.core import event as numba_event

        numba_event.unregister("numba:compile", self._listener)


def default_drivers(device: Device) -> int:
    """Return the drivers a command runs with when ``--drivers`` is not given.

    One on a GPU: per-batch host work there is Python that driver threads
    cannot run in parallel, and an H100 ran hot Q1 at SF10 in 5.8 s with 1
    driver, 10.7 s with 4 (README, "Drivers on a GPU"). On the CPU the kernels
    run on the drivers' threads, so one per core, at most 4.
    """
    return 1 if device.is_gpu else max(1, min(4, usable_cpus()))


def _run_queries(args: argparse.Namespace, choices: list[QueryChoice], explain: Sequence[str]) -> int:
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    device = get_device(args.device)  # a bad device fails before any generation
    session = Session(device=device, drivers=args.drivers or default_drivers(device))
    data_dir = ensure_tpch(args.sf, args.data_dir, progress=True)
    register_tpch(session, data_dir)
    if getattr(args, "plan", False):
        for number, choice in enumerate(choices):
            print(("\n" if number else "") + f"== plan {choice.name} ==")
            print(session.explain(choice.build_plan(session.catalog), full=args.full_explain))
        return EXIT_OK
    runs = getattr(args, "runs", 1)
    print(
        f"gpu_engine on device {session.device.name} with {session.drivers} driver(s); "
        f"TPC-H sf{args.sf:g} from {data_dir}"
    )
    duck = None if args.no_duckdb else _open_duckdb(data_dir)
    if duck is None and not args.no_duckdb:
        print("(DuckDB is not installed: `pip install duckdb` to compare times)")
    plans = {}
    summary: list[tuple[str, int, float, float | None]] = []
    mismatches: list[str] = []
    compile_notice = _CompileNotice()  # says "compiling kernels" once, when the first real compilation starts
    if session.device.is_gpu and ptx_cache_is_empty():
        compile_notice.on_start()
    for choice in choices:
        plan = choice.build_plan(session.catalog)
        plans[choice.name] = plan
        start = time.perf_counter()
        with compile_notice:
            result = session.execute(plan)
        first = time.perf_counter() - start
        first_note = first_run_note(session.last_stats())
        warm = []
        for _ in range(runs):
            start = time.perf_counter()
            result = session.execute(plan)
            warm.append(time.perf_counter() - start)
        print()
        print(f"== {choice.name} ==")
        print(format_table(result, args.rows))
        timing = (
            f"engine: {_seconds(statistics.median(warm))} "
            f"(median of {runs}; first run {_seconds(first)}: {first_note})"
        )
        duck_time = None
        if duck is not None:
            duck_time, duck_result = _time_duckdb(duck, choice.sql, runs)
            timing += f"; DuckDB: {_seconds(duck_time)} (engine {speed_ratio(statistics.median(warm), duck_time)})"
            problem = compare_with_duckdb(result, duck_result, choice.ordered)
            if problem is None:
                timing += f"\nresult matches DuckDB's ({result.num_rows} row{'s' if result.num_rows != 1 else ''})"
            else:
                timing += f"\nresult DIFFERS from DuckDB's: {problem}"
                mismatches.append(choice.name)
        print(timing)
        summary.append((choice.name, result.num_rows, statistics.median(warm), duck_time))
    for name in explain:
        print()
        print(f"== explain analyze {name} ==")
        print(_explain(session, plans[name], getattr(args, "full_explain", False)))
    if getattr(args, "summary", False):
        print()
        print(format_summary(summary))
    if mismatches:
        print(f"{', '.join(mismatches)}: the engine's result differs from DuckDB's", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _explain(session, plan, full: bool) -> str:
    """Return the explain-analyze text, every line whole when ``full``."""
    return session.explain(plan, analyze=True, full=True) if full else session.explain(plan, analyze=True)


def format_summary(summary: Sequence[tuple[str, int, float, float | None]]) -> str:
    """Return the per-query table ``tpch`` ends with: rows, engine and DuckDB medians, ratio, totals."""
    import pyarrow as pa

    names = [name for name, *_ in summary]
    engine_total = sum(engine for *_, engine, _ in summary)
    duck_times = [duck for *_, duck in summary]
    duck_total = sum(duck_times) if all(t is not None for t in duck_times) else None
    table = pa.table({
        "query": names + ["total"],
        "rows": [str(rows) for _, rows, _, _ in summary] + [""],
        "engine": [_seconds(engine) for _, _, engine, _ in summary] + [_seconds(engine_total)],
        "duckdb": [_seconds(d) if d is not None else "-" for d in duck_times]
        + [_seconds(duck_total) if duck_total is not None else "-"],
        "engine vs DuckDB": [speed_ratio(engine, duck) for _, _, engine, duck in summary]
        + [speed_ratio(engine_total, duck_total)],
    })
    return format_table(table, table.num_rows)


def _demo(args: argparse.Namespace) -> int:
    args.runs = 1
    return _run_queries(args, parse_query_list(_DEMO_QUERIES, args.sf), explain=["q1"])


def _query(args: argparse.Namespace) -> int:
    choices = parse_query_list(args.queries, args.sf)
    return _run_queries(args, choices, explain=[c.name for c in choices] if args.explain_analyze else [])


def _tpch(args: argparse.Namespace) -> int:
    args.summary = True
    choices = parse_query_list(args.queries, args.sf)
    return _run_queries(args, choices, explain=[c.name for c in choices] if args.explain_analyze else [])


def _precompile(args: argparse.Namespace) -> int:
    """Run ``gpu-engine precompile``: compile the static kernels for the device; print what it took."""
    from gpu_engine.codegen.static_kernels import precompile_static_kernels
    from gpu_engine.device import get_device

    device = get_device(args.device)
    summary = precompile_static_kernels(device.name, progress=lambda line: print(line, flush=True))
    print(f"precompile: {device.name}: {summary.queries} queries, {summary.kernels_compiled} kernels compiled "
          f"({summary.compile_seconds:.1f} s of compiling) in {summary.seconds:.1f} s")
    return 0


def _sql(args: argparse.Namespace) -> int:
    """Run ``gpu-engine sql``: register the tables, plan the text, print the plan or the rows and the time."""
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.sql import SqlError

    if args.tables is not None and (args.sf is not None or args.data_dir is not None):
        raise UsageError("--tables DIR reads your own Parquet files, --sf and --data-dir choose TPC-H: "
                         "give one or the other")
    text = args.text if args.text is not None else sys.stdin.read()
    if not text.strip():
        raise UsageError("no query: give the SQL text as an argument or on standard input")
    device = get_device(args.device)
    session = Session(device=device, drivers=args.drivers or default_drivers(device))
    if args.tables is not None:
        if not args.tables.is_dir():
            raise UsageError(f"--tables {args.tables} is not a folder")
        tables = sorted(args.tables.glob("*.parquet"))
        if not tables:
            raise UsageError(f"--tables {args.tables} holds no <table>.parquet file or folder")
        unreadable = _register_readable(session, tables)
    else:
        register_tpch(session, ensure_tpch(args.sf or DEMO_SCALE_FACTOR, args.data_dir, progress=True))
        unreadable = {}
    try:
        plan = session.sql_plan(text, dialect=args.dialect)
    except SqlError as error:
        skipped = [name for name in unreadable if f"unknown table '{name}'" in str(error)]
        if skipped:  # the query reads a table whose file could not be registered: that file's error, not "unknown"
            raise unreadable[skipped[0]] from None
        raise UsageError(str(error)) from None
    if args.plan:
        print(session.explain(plan, full=args.full_explain))
        return EXIT_OK
    start = time.perf_counter()
    with _CompileNotice():
        result = session.execute(plan)
    elapsed = time.perf_counter() - start
    print(format_table(result, args.rows))
    print(f"{result.num_rows} row{'s' if result.num_rows != 1 else ''} in {_seconds(elapsed)} "
          f"on {session.device.name} ({session.drivers} driver(s))")
    if args.explain_analyze:
        print()
        print(_explain(session, plan, args.full_explain))
    return EXIT_OK


def _register_readable(session, paths) -> dict:
    """Register each ``<table>.parquet`` of ``--tables``; return ``{table: its error}`` for those that cannot be.

    Why: one damaged or foreign file in the folder must not make every query fail, also those that never
    read it: it is skipped with a line on stderr, and a query that reads it fails with that file's error.
    """
    from gpu_engine.errors import DataSourceError

    unreadable = {}
    for path in paths:
        try:
            session.register(path.stem, str(path))
        except (DataSourceError, OSError) as error:
            unreadable[path.stem] = error
            print(f"gpu-engine: skipped table {path.stem!r} ({path}): {error}", file=sys.stderr)
    return unreadable


def _is_usage_error(error: BaseException) -> bool:
    from gpu_engine.connectors.tpch_data import TpchDataError
    from gpu_engine.errors import DeviceError

    return isinstance(error, (UsageError, DeviceError, TpchDataError))


def _interrupted() -> int:
    """Say in one line that the command was interrupted; return :data:`EXIT_INTERRUPTED`."""
    print("interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def _interrupted_while_exiting(_signum: int, _frame: object) -> None:
    """End the process at once as interrupted (SIGINT's handler from :func:`run`'s exit on)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - mid-write in the main thread, or closed: what is buffered is lost
            pass
    os.write(2, b"interrupted\n")
    os._exit(EXIT_INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code (0 ok, 1 failure, 2 usage error)."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)  # exits 2 with a message on bad arguments
    except KeyboardInterrupt:
        return _interrupted()
    handlers = {"demo": _demo, "query": _query, "tpch": _tpch, "sql": _sql, "precompile": _precompile}
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:  # the running query was cancelled and its threads joined (Session._run)
        return _interrupted()
    except Exception as error:  # noqa: BLE001 - the CLI's job is to turn errors into messages
        if args.traceback:
            raise
        code = EXIT_USAGE if _is_usage_error(error) else EXIT_FAILURE
        label = "error" if code == EXIT_USAGE else f"error ({type(error).__name__})"
        print(f"{parser.prog}: {label}: {error}", file=sys.stderr)
        if code == EXIT_FAILURE:
            print("(run with --traceback for details)", file=sys.stderr)
        return code


def run() -> None:
    """Run the command line as a process (the ``gpu-engine`` script, ``python -m gpu_engine``) and exit with its code.

    After a Ctrl-C (the query cancelled, ``interrupted`` printed) the process ends at once: the interpreter's
    teardown would take 1-3 s more (numba's, after a compile), and the user asked to stop. Nothing is left
    half-written: kernel and cache files are written aside and renamed, and the compile worker ends when its
    stdin closes. :func:`main` returns the code instead, for callers in a process that goes on.

    Once the command is done, a Ctrl-C while the process exits (the background compiler's atexit hook waiting
    for its worker, numba's teardown) ends it the same way: exit 130, ``interrupted``, no traceback (an
    exception in an atexit callback or a finalizer is printed with its traceback and the exit code stays 0).
    """
    try:
        code = main()
        signal.signal(signal.SIGINT, _interrupted_while_exiting)
    except KeyboardInterrupt:  # after main returned, before the handler was in place
        code = _interrupted()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if code == 0 and _command(sys.argv[1:]) in _WITHOUT_TEARDOWN:
        atexit._run_exitfuncs()  # the background compiler's close, anything else registered: as at exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


#: Commands after which :func:`run` ends the process without the interpreter's teardown (its atexit functions
#: run first). Why: the teardown's final garbage collection frees every object the command left (precompile's
#: 114 runs: numba's dispatchers and types, plans, SQL trees), 9-15 s of wall after the summary line on a loaded
#: machine, ~1-1.5 s of CPU, for nothing: the kernels are on disk (written aside and renamed) and nothing else
#: is left to write.
_WITHOUT_TEARDOWN = frozenset({"precompile"})


def _command(argv: Sequence[str]) -> str | None:
    """Return the command ``argv`` names (None where it names none)."""
    try:
        return build_parser().parse_known_args(argv)[0].command
    except (SystemExit, Exception):  # noqa: BLE001 - only asked which command ran: none
        return None
