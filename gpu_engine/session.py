"""Run plans from Python: register tables, execute, explain (the engine's front door)."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import numbers
import threading
import time
from collections import OrderedDict
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa

from gpu_engine.codegen.background_compiles import hold_compiles_during_call
from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.transfers import Transfer, batch_to_arrow
from gpu_engine.connectors.cudf_interop import check_parquet_reader, is_cudf_source, require_cudf
from gpu_engine.connectors.device_table import DeviceTable
from gpu_engine.connectors.registered_table import DEFAULT_SPLIT_ROWS, RegisteredTable, register_source
from gpu_engine.connectors.table_cache import CachedTable, load_cached_table
from gpu_engine.device import Device, get_device
from gpu_engine.errors import PlanError, SessionClosed
from gpu_engine.planning import placement_text, prepare_plan
from gpu_engine.planning.prepared_plans import PreparedPlans
from gpu_engine.optimizer.statistics import RegisteredStatistics
from gpu_engine.plans.null_type import with_null_types_of
from gpu_engine.exec.driver_executors import process_executors
from gpu_engine.exec.query_ctx import EngineConfig, QueryCtx
from gpu_engine.exec.split import ConnectorSplit
from gpu_engine.exec.task import Task, TaskStats
from gpu_engine.host_allocator import tune_host_allocator
from gpu_engine.plans.nodes import PlanNode, TableScanNode, walk_plan
from gpu_engine.plans.subqueries import walk_plan_and_subqueries
from gpu_engine.sql.plan_cache import PlanCache

__all__ = ["Session", "check_timeout", "conform_to_schema", "node_stats_text"]

_task_ids = itertools.count()
#: The calling thread runs one driver's first slice of each query (``Task.start(caller_runs=True)``); a switch
#: for ``bench/driver_timeline.py --ab-caller``.
CALLER_RUNS_A_DRIVER = True

#: What :meth:`Session.execute` can return: a ``pyarrow.Table``, or a ``cudf.DataFrame``.
RESULT_FORMATS = ("arrow", "cudf")


class Session:
    """Hold registered tables, a device, a driver count and config; run plans on them.

    Parameters
    ----------
    device
        ``"auto"`` (``cuda`` when a GPU and CuPy are present, else ``cpu``),
        ``"cpu"``, ``"cuda"`` or ``"cuda-sim"``.
    drivers
        Drivers per pipeline (threads working on one query).
    **config
        Overrides of :class:`~gpu_engine.exec.query_ctx.EngineConfig` fields,
        e.g. ``batch_rows=4096``.

    :meth:`close` (or leaving ``with Session(...) as s:``) lets go of what the
    Session holds; the driver thread pools are the process's and stay.
    """

    def __init__(self, device: str | Device = "auto", drivers: int = 1, **config):
        self.device = get_device(device)
        tune_host_allocator()
        if isinstance(drivers, bool) or not isinstance(drivers, int) or drivers < 1:
            raise ValueError(f"drivers must be a positive integer (threads per pipeline), got {drivers!r}")
        self.drivers = drivers
        self.config = EngineConfig().with_overrides(**config)
        check_parquet_reader(self.config.parquet_reader, self.device)
        self._tables: dict[str, RegisteredTable] = {}
        self._cached: dict[str, CachedTable] = {}
        #: The statistics of each cached table, taken when it was cached: its scans never read its files again
        #: (they may be gone), so neither may the optimizer's estimates (:meth:`statistics`).
        self._cached_statistics: dict = {}
        self.last_task: Task | None = None
        self.last_plan: PlanNode | None = None
        self._views: dict[str, Any] = {}  # name -> gpu_engine.sql.views.View (CREATE VIEW)
        #: The plans of recent SQL texts (:mod:`gpu_engine.sql.plan_cache`); ``PlanCache(0)`` keeps none.
        self.plan_cache = PlanCache()
        self._temporary: set[str] = set()  # the shared CTEs' tables registered now (Session.sql), not in plan_cache keys
        #: The hidden tables of files named in SQL text -> the paths as written, least recently named first
        #: (:mod:`gpu_engine.sql.file_sources`): not in ``catalog``, EXPLAIN prints the paths.
        self._file_sources: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._cte_calls = _CallSlots()  # names the shared CTEs' tables of the calls running now
        self._executors = process_executors()  # a new session reuses threads an earlier one's queries left idle
        self._prepared = PreparedPlans()
        self._running: set[Task] = set()  # the Tasks of queries running now: close() cancels them
        self._running_lock = threading.Lock()
        self.closed = False

    # ---------------------------------------------------------------- close
    def close(self) -> None:
        """Let go of what this Session holds; afterwards it refuses every query (:class:`SessionClosed`).

        Why: a long-lived process (a notebook, a server, a Spark executor) that makes Sessions one after another
        kept each one's registered tables (in-memory ones whole), cached device batches, views, planned and
        prepared plans and last Task until the Session object was collected. Here queries running now are
        cancelled (their calls raise ``TaskCancelled``), cached tables are uncached (device memory handed back
        at once), and the tables, views, plan caches and last Task/plan are dropped. What is the process's
        stays: the driver thread pools (:mod:`gpu_engine.exec.driver_executors`) and the compiled kernels,
        which later Sessions reuse. A Session holds no files of its own (registered files stay where they are).
        Closing twice does nothing.
        """
        with self._running_lock:
            if self.closed:
                return
            self.closed = True
            running = list(self._running)
        for task in running:
            task.cancel()
        for name in list(self._cached):
            self.uncache(name)
        self._tables.clear()
        self._views.clear()
        self._temporary.clear()
        self._file_sources.clear()
        self.plan_cache.clear()
        self._prepared = PreparedPlans()
        self.last_task = self.last_plan = None
        if self.device.is_gpu:  # tables registered from device memory (cuDF) go back to the GPU, as uncache's
            self.device.xp.get_default_memory_pool().free_all_blocks()

    def __enter__(self) -> "Session":
        self._check_open()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise SessionClosed("this Session is closed (Session.close() or the end of its with block); make a new "
                                "Session and register the tables again")

    # ---------------------------------------------------------------- tables
    def register(self, name: str, source, split_rows: int | None = None, column_names=None) -> None:
        """Register a Parquet file or directory, an in-memory table or a cuDF table under ``name`` (dropping its cache
        and a view of that name, as DuckDB's ``register`` replaces one).

        In-memory tables: a ``pyarrow.Table`` or ``RecordBatch``, a dict of
        column name -> values, a pandas or Polars DataFrame, or anything with
        ``__arrow_c_stream__``. A directory is its ``.parquet`` files, subfolders
        included, skipping names that start with ``.`` or ``_`` (as
        pyarrow.dataset and Spark do); its files must agree on their columns
        and types; a file that is not Parquet, duplicate column names or an
        empty name are refused naming the table and file; columns of
        unsupported types register and fail only in a plan that reads them
        (:mod:`gpu_engine.connectors.registered_table`).

        A ``cudf.DataFrame`` or ``pylibcudf.Table`` (``column_names`` names the
        latter's columns, default ``c0``, ``c1``, …) stays in device memory on
        ``cuda``: its buffers become the table's Columns without a copy
        (:mod:`gpu_engine.connectors.cudf_interop`); on other devices it is
        copied to Arrow. On ``cuda``, splits default to one scan batch of rows
        (whole row groups, at least ``scan_batch_rows``), so a split is read
        and copied to the device as one large batch while a scan's prefetch
        threads decode the next split (``scan_prefetch_depth``).
        """
        self._check_open()
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a table name must be a non-empty string, got {name!r}")
        if split_rows is None and self.device.is_gpu:
            split_rows = self.config.scan_batch_rows(self.device)
        if is_cudf_source(source):
            self._tables[name] = self._register_cudf(name, source, split_rows, column_names)
        else:
            self._tables[name] = register_source(name, source, split_rows)
        self.uncache(name)
        for view in [v for v in self._views if v.lower() == name.lower()]:  # the name is the table's now
            del self._views[view]

    def register_file_table(self, name: str, table: RegisteredTable | None, paths: tuple[str, ...]) -> None:
        """Register the table of a file source a SQL text names (:mod:`gpu_engine.sql.file_sources`) under ``name``;
        a new object where the files changed, so plan_cache plans the text anew (None: the table kept, named now)."""
        self._file_sources[name] = paths
        self._file_sources.move_to_end(name)
        if table is not None:
            self._tables[name] = table
            self.uncache(name)

    def drop_file_table(self, name: str) -> None:
        """Drop the hidden table of a file source (beyond ``file_sources.FILE_TABLES``); naming it registers it again."""
        self._file_sources.pop(name, None)
        self._tables.pop(name, None)
        self.uncache(name)

    def _register_cudf(self, name: str, source, split_rows: int | None, column_names) -> RegisteredTable:
        from gpu_engine.connectors.cudf_interop import batch_from_cudf, cudf_to_arrow

        if not self.device.is_gpu:
            return register_source(name, cudf_to_arrow(source, column_names), split_rows)
        batch = batch_from_cudf(source, self.device, column_names)
        return DeviceTable(name, batch.schema, split_rows=split_rows or DEFAULT_SPLIT_ROWS, batch=batch)

    def cache(self, name: str) -> CachedTable:
        """Read a registered table once into device batches, so later scans skip decoding and copying it.

        Every column is cached, in batches of the scan batch size; scans of
        the table then read those batches (one split per batch) until
        :meth:`uncache` or until ``name`` is registered again. Caching a cached
        table returns what is cached.
        """
        self._check_open()
        cached = self._cached.get(name)
        if cached is None:
            self._cached_statistics[name] = RegisteredStatistics({name: self.table(name)})[name]
            cached = load_cached_table(self.table(name), self.device, self.config.scan_batch_rows(self.device),
                                       self.config.scan_prefetch(self.device),
                                       self.config.scan_decode_pool_threads(self.device))
            self._cached[name] = cached
        return cached

    def uncache(self, name: str) -> bool:
        """Drop a table's cached batches and hand their device memory back; return False when none were cached."""
        cached = self._cached.pop(name, None)
        self._cached_statistics.pop(name, None)
        if cached is None:
            return False
        del cached  # the last reference to the batches, so their blocks are free now
        if self.device.is_gpu:  # blocks freed above go back to the GPU, not only to CuPy's pool
            self.device.xp.get_default_memory_pool().free_all_blocks()
        return True

    def cached_tables(self) -> dict[str, int]:
        """Return the cached tables' names and the device bytes each holds."""
        return {name: cached.nbytes for name, cached in self._cached.items()}

    def splits(self, name: str) -> list[ConnectorSplit]:
        """Return the splits a scan of ``name`` reads: one per cached batch when cached, else the table's."""
        cached = self._cached.get(name)
        return cached.splits() if cached is not None else self.table(name).splits()

    def table(self, name: str) -> RegisteredTable:
        """Return a registered table (its schema and splits), for coordinators that hand out splits."""
        self._check_open()
        try:
            return self._tables[name]
        except KeyError:
            raise PlanError(f"unknown table {name!r}; registered: {', '.join(sorted(self.catalog)) or '(none)'}") from None

    @property
    def catalog(self) -> Mapping[str, pa.Schema]:
        """Return table name -> schema of the tables registered (the hidden tables of files named in SQL text left
        out: they are the engine's), what PlanBuilder needs to resolve columns."""
        return MappingProxyType({name: table.schema for name, table in self._tables.items()
                                 if name not in self._file_sources})

    def _planning_catalog(self) -> Mapping[str, pa.Schema]:
        """Return table name -> schema of every table, the hidden ones of file sources included (the SQL planner's)."""
        return MappingProxyType({name: table.schema for name, table in self._tables.items()})

    # --------------------------------------------------------------- execute
    def execute(self, plan: PlanNode, timeout: float | None = None, output: str = "arrow"):
        """Run ``plan`` to completion and return its rows as a ``pyarrow.Table`` (or a ``cudf.DataFrame``).

        Parameters
        ----------
        output
            ``"arrow"`` (default): a ``pyarrow.Table``, copied from the device
            once per result batch (counted as ``d2h_bytes``/``d2h_seconds`` of
            the last operator on a GPU). ``"cudf"``: a ``cudf.DataFrame``; on
            ``cuda`` it shares the result's device buffers, elsewhere it is
            copied from Arrow. Needs cuDF.
        """
        self._check_open()
        timeout = check_timeout(timeout)
        if output not in RESULT_FORMATS:
            raise ValueError(f"unknown output {output!r}; choose one of {', '.join(RESULT_FORMATS)}")
        if output == "cudf":
            require_cudf("output='cudf'")
            if self.device.is_gpu:
                return self._execute_to_cudf(plan, timeout)
            from gpu_engine.connectors.cudf_interop import arrow_to_cudf

            return arrow_to_cudf(self.execute(plan, timeout))
        return self._execute_to_arrow(plan, timeout)[0]

    def _execute_to_arrow(self, plan: PlanNode, timeout: float | None) -> tuple[pa.Table, Task]:
        """Run ``plan``; return its rows and the Task that ran them (per call, so threads never see another's)."""
        batches: list[Batch] = []
        lock = threading.Lock()

        def collect(batch: Batch) -> Transfer | None:
            record_batch, transfer = batch_to_arrow(batch)
            with lock:
                batches.append(record_batch)
            return transfer

        task = self._run(plan, collect, timeout)
        schema = plan.output_schema
        record_batches = [conform_to_schema(b, schema) for b in batches]
        return pa.Table.from_batches(record_batches, schema=schema), task

    def _execute_to_cudf(self, plan: PlanNode, timeout: float | None):
        """Run ``plan`` keeping result batches on the device, then wrap them as one ``cudf.DataFrame``."""
        from gpu_engine.columnar.concat import concat_batches
        from gpu_engine.connectors.cudf_interop import batch_to_cudf

        batches: list[Batch] = []
        lock = threading.Lock()

        def collect(batch: Batch) -> None:
            flat = batch.materialize()
            self.device.synchronize()  # made on the driver's stream; this thread reads it on another
            with lock:
                batches.append(flat)

        self._run(plan, collect, timeout)
        result = concat_batches(batches) if batches else Batch.empty(plan.output_schema, self.device)
        return batch_to_cudf(result)

    def _check_scans(self, plan: PlanNode) -> None:
        """Refuse a plan whose scans name a table that is not registered, or columns (and types) it lacks.

        Why here, before anything runs: a plan loaded from JSON, or built for another catalog, can name any table;
        its scans must match what is registered under that name now, or the query fails mid-way in a reader. A
        typed subquery's plan (plans.subqueries) is checked too, before the decorrelation rule joins it in.
        """
        if not isinstance(plan, PlanNode):
            raise TypeError(f"expected a plan (a PlanNode, e.g. from PlanBuilder or sql_plan), got "
                            f"{type(plan).__name__}; run SQL text with Session.sql")
        for scan in walk_plan_and_subqueries(plan):
            if not isinstance(scan, TableScanNode):
                continue
            table = self.table(scan.table_name)  # PlanError naming the registered tables
            for field in scan.output_schema:
                if field.name not in table.schema.names:
                    raise PlanError(f"table {scan.table_name!r} has no column {field.name!r} (the plan was made for "
                                    f"another table?); its columns: {', '.join(table.schema.names)}",
                                    node=scan.label, column=field.name)
                registered = table.schema.field(field.name).type
                if not _same_column_type(registered, field.type):
                    raise PlanError(f"column {field.name!r} of table {scan.table_name!r} is {registered}, the plan "
                                    f"reads it as {field.type} (the plan was made for another table?)",
                                    node=scan.label, column=field.name)

    def _run(self, plan: PlanNode, consumer, timeout: float | None) -> Task:
        started = time.monotonic()  # the timeout counts preparing the plan and starting the Task too
        self._check_open()
        self._check_scans(plan)
        # What cannot run fails here; a plan run before (the same object, from plan_cache) is not prepared again.
        executed = self._prepared.prepare(plan, self.device, self.drivers, self.config, self.statistics()).plan
        scans = [node for node in walk_plan(executed) if isinstance(node, TableScanNode)]
        for scan in scans:
            if scan.table_name not in self._tables:
                raise PlanError(f"unknown table {scan.table_name!r}", node=scan.label)
        threads = max(2, self.drivers * 2)
        executor = self._executors.take(threads)  # a finished query's idle threads (gpu_engine.exec.driver_executors)
        query_ctx = QueryCtx(self.device, self.config, executor)
        task = Task(f"query-{next(_task_ids)}", executed, query_ctx, self.drivers, consumer)
        self.last_task, self.last_plan = task, executed
        finished = False
        self.device.synchronize()  # drivers' streams do not wait for work this thread queued (caching, cuDF tables)
        try:
            # Not with a timeout: only this thread would see it, and one step of a driver may run for seconds.
            task.start(caller_runs=CALLER_RUNS_A_DRIVER and timeout is None)
            with self._running_lock:  # after start: a Task is cancelled once it runs
                self._running.add(task)
            self._check_open()  # closed while this call planned or started: close() may not have seen the Task
            several = False  # a scan has splits for more than one driver
            for scan in scans:  # splits arrive after start, as from a coordinator
                splits = list(self.splits(scan.table_name))
                several = several or len(splits) > 1
                for split in splits:
                    task.add_split(scan.id, split)
                task.no_more_splits(scan.id)
            # This thread runs one driver's first slice instead of sleeping (Task.start). Not when no scan has a
            # second split: no two scan drivers to place, and this thread's Python beside the pool's costs CPU
            # (TPC-H SF 0.01, one split a table: +4.9% CPU with it).
            task.run_held_driver(on_this_thread=several)
            task.wait(None if timeout is None else max(0.0, timeout - (time.monotonic() - started)))
            finished = True
        except BaseException:
            task.cancel()
            raise
        finally:
            with self._running_lock:
                self._running.discard(task)
            self._executors.give_back(executor, threads, finished)  # else shut down: its threads joined
        return task

    # --------------------------------------------------------------- explain
    def explain(self, plan: PlanNode, analyze: bool = False, full: bool = False) -> str:
        """Return the plan as executed, as text; with ``analyze``, run it and show each node's stats.

        Lines over 120 characters are shortened (see :mod:`gpu_engine.plans.explain`); ``full`` prints them whole.
        """
        from gpu_engine.plans.explain import format_plan

        self._check_open()
        self._check_scans(plan)
        prepared = prepare_plan(plan, self.device, self.drivers, self.config, statistics=self.statistics())
        placements = placement_text(prepared.placements)
        labels = {name: ", ".join(map(repr, paths)) for name, paths in self._file_sources.items()}
        if not analyze:
            return format_plan(prepared.plan, placements=placements, full=full, table_labels=labels)
        _, task = self._execute_to_arrow(plan, None)  # this call's Task, not last_task: another thread may run one
        stats = task.task_stats()
        header = (f"Task {stats.task_id}: {stats.state}, {stats.wall_seconds * 1000:.1f} ms wall, "
                  f"device {self.device.name}, {self.drivers} driver(s), {stats.splits} split(s), "
                  f"kernels compiled {stats.kernels_compiled} ({stats.compile_seconds * 1000:.1f} ms)")
        return header + "\n" + format_plan(task.plan, node_stats_text(stats), placements, full=full,
                                           table_labels=labels)

    def last_stats(self) -> TaskStats | None:
        """Return the stats of the last executed Task."""
        return None if self.last_task is None else self.last_task.task_stats()

    # ------------------------------------------------------------------- SQL
    def sql_plan(self, text: str, dialect: str = "duckdb") -> PlanNode:
        """Return the plan of a SQL query over the registered tables (see :func:`gpu_engine.sql.plan_sql`).

        Join order and build sides come from each table's statistics (Parquet
        row counts and min/max, read once per file). A text planned before
        over the same registered tables returns the same plan, from
        :attr:`plan_cache`.
        """
        from gpu_engine.sql import check_dialect
        from gpu_engine.sql.file_sources import register_file_sources
        from gpu_engine.sql.views import expand

        self._check_open()
        check_dialect(dialect)  # before the cache is keyed by it
        expansion = expand(text, self._views, dialect)  # views are planned inline (gpu_engine.sql.views)
        with expansion.positions_as_written():  # an error points into the text as written
            # FROM 'x.parquet' (gpu_engine.sql.file_sources); a kept plan depends on the file tables its text names
            files = register_file_sources(self, expansion.text, dialect)
            return self.plan_cache.plan(expansion.text, dialect, self._lasting_tables(files),
                                        lambda: self._plan_sql(expansion.text, dialect))

    def _lasting_tables(self, files: frozenset[str] = frozenset()) -> Mapping[str, RegisteredTable]:
        """Return the registered tables but the temporary ones another call's shared CTEs hold now.

        Why: plan_cache keys a plan by the tables registered when it was planned; a temporary table comes and
        goes with one call, so counting it made every text planned meanwhile on another thread miss and be
        planned again. A kept text that reads one names it by the whole text's hash (``_CallSlots``): the same
        name holds the same CTE's result whenever the lasting tables are the same objects. The hidden tables of
        files named in SQL text (``files``: those this text names) are left out but this text's: a text can reach
        another's only by naming its files, so a new file set made every kept plan miss once for nothing.
        """
        tables = dict(self._tables)  # one atomic copy: another thread may register while this one reads
        for name in list(self._temporary):
            tables.pop(name, None)
        for name in list(self._file_sources):  # the tables of files other texts name (files: those this one names)
            if name not in files:
                tables.pop(name, None)
        return tables

    def statistics(self) -> RegisteredStatistics:
        """Return table name -> statistics of the registered tables (each read when first asked), which the SQL
        planner and the optimizer's choices from estimates read."""
        return RegisteredStatistics(self._tables, self._cached_statistics)

    def _plan_sql(self, text: str, dialect: str) -> PlanNode:
        """Plan ``text`` over the registered tables now, keeping nothing (a text over a temporary table)."""
        from gpu_engine.sql import plan_sql

        return plan_sql(text, self._planning_catalog(), self.statistics(), dialect=dialect)

    def prepare(self, text: str, dialect: str = "duckdb"):
        """Return a :class:`~gpu_engine.sql.parameters.PreparedQuery`: ``text`` with ``?``/``$n`` placeholders, run
        by ``.execute(params)`` as often as wanted (each run plans the bound text; kernels are shared)."""
        from gpu_engine.sql import check_dialect
        from gpu_engine.sql.parameters import PreparedQuery

        self._check_open()
        if not isinstance(text, str):
            raise TypeError(f"the SQL text must be a string, got {type(text).__name__}")
        check_dialect(dialect)
        return PreparedQuery(self, text, dialect)

    def sql(self, text: str, timeout: float | None = None, dialect: str = "duckdb",
            params: Sequence[Any] | None = None) -> pa.Table:
        """Run a SQL query over the registered tables and return its rows (``execute(sql_plan(text))``).

        ``params`` bind the text's ``?`` (in order) or ``$n`` placeholders
        (:mod:`gpu_engine.sql.parameters`); new values compile no new kernels.

        ``CREATE [OR REPLACE] [TEMP] VIEW``, ``CREATE TABLE … AS`` and ``DROP
        VIEW|TABLE`` change this Session's catalog and return DuckDB's
        ``Count``/``Success`` result (:mod:`gpu_engine.sql.statements`); a
        query reading a view plans the view's query in its place. ``SET
        TimeZone = 'UTC'`` / ``RESET TimeZone`` (the engine's zone) return
        DuckDB's empty ``Success`` result; another zone or setting is refused
        by name (:mod:`gpu_engine.sql.settings`).

        A CTE the query reads more than once (TPC-H Q15's view) is computed
        once, first, into a temporary table the query then reads
        (:mod:`gpu_engine.sql.shared_ctes`); the text is planned whole first,
        so errors point into it as written. The temporary tables are named by
        a hash of the text and a slot free while the call runs: a text run
        again reads tables of the same names, so the plans of its CTEs and of
        the query over them come from :attr:`plan_cache` (planning them anew
        on every run was a fifth of a warm TPC-DS q11), while calls running
        at once still read tables of their own.
        """
        from gpu_engine.sql import check_dialect
        from gpu_engine.sql.parameters import bind_parameters
        from gpu_engine.sql.settings import is_setting_statement, run_setting_statement
        from gpu_engine.sql.statements import is_catalog_statement, run_catalog_statement

        self._check_open()
        timeout = check_timeout(timeout)
        if not isinstance(text, str):
            raise TypeError(f"the SQL text must be a string, got {type(text).__name__}")
        check_dialect(dialect)  # before anything parses the text with it
        text = bind_parameters(text, params, dialect)
        if is_catalog_statement(text):  # CREATE VIEW / CREATE TABLE AS / DROP: the session's catalog changes
            return run_catalog_statement(self, text, dialect, timeout)
        if is_setting_statement(text):  # SET TimeZone = 'UTC' / RESET TimeZone (gpu_engine.sql.settings)
            return run_setting_statement(text, dialect)
        # The compile process is held for the whole call (planning and the result's conversion too), not only
        # while its Tasks run: gpu_engine.codegen.background_compiles.hold_compiles_during_call says why.
        with hold_compiles_during_call(self.drivers):
            return self._plan_and_run(text, dialect, timeout)

    def _plan_and_run(self, text: str, dialect: str, timeout: float | None) -> pa.Table:
        """Plan and run a query's text (views expanded, shared CTEs first) for :meth:`sql`."""
        from gpu_engine.sql.duplicate_output_names import with_shown_names
        from gpu_engine.sql.shared_ctes import split_shared_ctes
        from gpu_engine.sql.views import expand

        expansion = expand(text, self._views, dialect)
        text = expansion.text
        deadline = None if timeout is None else time.monotonic() + timeout
        with expansion.positions_as_written():
            plan = self.sql_plan(text, dialect=dialect)
        with self._cte_calls.slot(text, dialect) as call:
            shared, query = split_shared_ctes(text, dialect, call)
            if not shared:
                return with_shown_names(plan, self.execute(plan, _time_left(deadline, timeout)))
            try:
                for cte in shared:
                    # Kept in plan_cache: a text over temporary tables names them by this text and slot, so the
                    # same names hold the same CTEs' results in a later call (the base tables unchanged: the key).
                    plan = self.sql_plan(cte.sql, dialect)
                    self._temporary.add(cte.table)
                    self._tables[cte.table] = register_source(cte.table, with_null_types_of(
                        self.execute(plan, _time_left(deadline, timeout)), plan.output_schema), None)
                plan = self.sql_plan(query, dialect)
                return with_shown_names(plan, self.execute(plan, _time_left(deadline, timeout)))
            finally:
                for cte in shared:
                    self._tables.pop(cte.table, None)
                    self._temporary.discard(cte.table)


class _CallSlots:
    """Name the calls of :meth:`Session.sql` that run at once with shared CTEs: ``<hash of the text>s<slot>``.

    Why: a call's temporary tables are named after it; the same text run
    again (one at a time, the usual case) gets slot 0 again, hence the same
    table names, texts and kept plans, and a plan kept for one text never
    meets another text's tables (the hash). Calls of one text running at once
    get different slots.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._taken: set[tuple[str, int]] = set()

    @contextlib.contextmanager
    def slot(self, text: str, dialect: str) -> Iterator[str]:
        digest = hashlib.blake2b(f"{dialect}\0{text}".encode(), digest_size=6).hexdigest()
        with self._lock:
            number = next(n for n in itertools.count() if (digest, n) not in self._taken)
            self._taken.add((digest, number))
        try:
            yield f"{digest}s{number}"
        finally:
            with self._lock:
                self._taken.discard((digest, number))


def check_timeout(timeout) -> float | None:
    """Return ``timeout`` as seconds to wait (None: no limit), refusing what is not a positive number.

    ``math.inf`` means no limit, as None does; NaN, zero, negative numbers,
    booleans and strings are refused here rather than failing deep in the wait.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout must be a number of seconds or None, got {type(timeout).__name__} {timeout!r}")
    seconds = float(timeout)
    if math.isnan(seconds) or seconds <= 0:
        raise ValueError(f"timeout must be a positive number of seconds (or None for no limit), got {timeout!r}")
    return None if math.isinf(seconds) else seconds


def _same_column_type(registered: pa.DataType, planned: pa.DataType) -> bool:
    """Return whether a scan that expects ``planned`` can read a column of type ``registered`` (string kinds alike)."""
    def kind(dtype: pa.DataType) -> pa.DataType:
        if pa.types.is_dictionary(dtype):
            dtype = dtype.value_type
        return pa.string() if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) else dtype

    return kind(registered).equals(kind(planned))


def _time_left(deadline: float | None, timeout: float | None) -> float | None:
    """Return the seconds left before ``deadline`` (None: no limit); raise TimeoutError when none are left."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"the query did not finish within {timeout} s (planning took all of it)")
    return left


def conform_to_schema(record_batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast a result batch to the plan's output schema (string kinds, dictionaries differ by batch)."""
    if record_batch.schema.equals(schema):
        return record_batch
    arrays = [record_batch.column(i).cast(schema.field(i).type) for i in range(len(schema))]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def node_stats_text(stats: TaskStats) -> dict[str, str]:
    """Return explain-analyze text per plan node id from a Task's stats."""
    out: dict[str, str] = {}
    for node_id, operator_stats in stats.operator_stats_by_node().items():
        lines = []
        for s in operator_stats:
            line = (f"{s.operator_type} (pipeline {s.pipeline_id}, {s.drivers} driver(s)): "
                    f"input {s.input_rows} rows/{s.input_batches} batches, "
                    f"output {s.output_rows} rows/{s.output_batches} batches/{_megabytes(s.output_bytes)}, "
                    f"wall {s.wall_seconds * 1000:.1f} ms, cpu {s.cpu_seconds * 1000:.1f} ms, blocked {s.blocked_seconds * 1000:.1f} ms ({s.blocked_count}x), "
                    f"launches {s.kernel_launches}, syncs {s.host_syncs}")
            if s.device_allocations:  # counted on cuda only (see gpu_engine.exec.device_counters)
                line += f", allocations {s.device_allocations}"
            if s.kernels_compiled:
                line += f", compiled {s.kernels_compiled} ({s.compile_seconds * 1000:.1f} ms)"
            if s.peak_memory_bytes:
                line += f", peak memory {_megabytes(s.peak_memory_bytes)}"
            if s.runtime:
                line += ", " + ", ".join(f"{k}={_format_runtime(k, v)}" for k, v in sorted(s.runtime.items()))
            lines.append(line)
        out[node_id] = "\n".join(lines)
    return out


def _megabytes(nbytes: float) -> str:
    return f"{nbytes / 1e6:.2f} MB"


def _format_runtime(name: str, value: float) -> str:
    if name.endswith("seconds"):
        return f"{value * 1000:.1f} ms"
    if name.endswith("bytes"):
        return _megabytes(value)
    return f"{value:g}"
