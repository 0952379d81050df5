"""Run a single-node plan on Spark: fragments as ``mapInArrow`` stages, Spark's shuffles between them.

``SparkRunner(spark).execute(plan, tables={"lineitem": df})`` returns a lazy
``pyspark.sql.DataFrame``; :meth:`SparkRunner.collect` runs it into a
``pyarrow.Table``. The plan is an ordinary plan built with
:class:`~gpu_engine.plans.PlanBuilder` over :meth:`SparkRunner.catalog`.

1. Boundaries are added (:func:`~gpu_engine.spark.broadcast_joins.add_spark_exchanges`:
   partial aggregation before a shuffle and final after it, a gather before a
   final ORDER BY / TopN / Limit, and for each join either a broadcast under
   its build side or a keyed shuffle under both sides, as
   :class:`~gpu_engine.spark.join_sizes.SizeJoinStrategy` picks from the
   build side's estimated size); a plan that already has
   PartitionedOutput/Exchange boundaries is taken as given. The plan is cut
   into fragments by :func:`~gpu_engine.cluster.plan_fragments`, producers first.
2. Each fragment becomes one ``mapInArrow`` over its one input DataFrame: a
   table (only the columns it scans; a bare ``spark.read.parquet`` table is
   read by the engine itself, see :mod:`gpu_engine.spark.parquet_scans`,
   the partitions then naming the splits each Task reads), or its producer's output routed by
   Spark: ``repartitionById(n, partition id)`` after a keyed shuffle (the
   producer computed the ids on the engine's device; on Spark < 4.1,
   ``repartition(n, keys)``), ``repartition(1)`` after a gather. With
   ``packed_shuffles`` (default) a keyed shuffle moves one Spark row per
   destination and producer batch, the rows as Arrow IPC bytes, which the
   consumer unpacks: Spark never converts the rows themselves. A fragment
   whose rows must meet in one place runs on one partition. A shuffled
   join's fragment reads both sides from one DataFrame: the two producers'
   rows, tagged by side, routed by the same engine partition ids and sorted
   build side first within each partition (see :meth:`SparkRunner._co_partitioned_frame`).
3. A broadcast boundary's producer is collected on the driver when
   ``execute`` is called (as Spark collects a broadcast join's small side),
   kept as Arrow IPC bytes in a Spark broadcast variable, and handed whole to
   every Task of the consuming fragment. A producer that reads only Parquet
   files the engine can open (or other broadcasts) and whose scanned columns
   are estimated within the broadcast threshold runs on the driver itself,
   as one engine Task (``driver_broadcasts``): its rows end up there anyway,
   and a Spark job costs ~100-150 ms of scheduling and Python-worker round
   trips where the engine reads a small table in a few milliseconds.

``n`` is ``shuffle_partitions``, else ``spark.sql.shuffle.partitions`` where
set, else the cluster's cores (not Spark's default of 200). The runner gives
the executors a Python that imports ``gpu_engine`` (the driver's own on a
local master) or fails at once saying why
(:mod:`gpu_engine.spark.executor_python`).
Errors a fragment raises on an executor come back from :meth:`collect` (and
from ``execute``'s broadcasts) as the engine's own
:class:`~gpu_engine.errors.ExecutionError`, not as a Java stack trace.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Iterator, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from gpu_engine.cluster import Fragment, plan_fragments
from gpu_engine.columnar.types import normalize_type
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.planning import prepare_plan
from gpu_engine.exec.query_ctx import EngineConfig
from gpu_engine.plans.explain import format_plan
from gpu_engine.plans.nodes import (
    ExchangeNode,
    HashJoinNode,
    NestedLoopJoinNode,
    PartitionedOutputNode,
    PlanNode,
    TableScanNode,
    walk_plan,
)
from gpu_engine.spark.broadcast_joins import add_spark_exchanges, aggregation_under
from gpu_engine.spark.executor_device import TaskDeviceLog
from gpu_engine.spark.executor_python import default_shuffle_partitions, use_engine_python
from gpu_engine.spark.join_sizes import SizeJoinStrategy
from gpu_engine.spark.map_in_arrow import (
    BUILD_SIDE,
    PROBE_SIDE,
    SIDE_COLUMN,
    FragmentFunction,
    check_shuffle_compression,
    exchanges_as_inputs,
    fragment_function,
    side_column,
)
from gpu_engine.spark.fragment_task import ERROR_MARKER
from gpu_engine.spark.parquet_scans import parquet_scan_files, parquet_split_documents
from gpu_engine.spark.partition_ids import PARTITION_ID_COLUMN
from gpu_engine.spark.spark_types import arrow_schema_for, conform_to_wire, reads_same_values, wire_schema_for

__all__ = ["SparkRunner", "SparkStage", "StageInput"]


@dataclass(frozen=True)
class StageInput:
    """Where a stage's partitions come from.

    ``kind`` is ``table`` (``name`` a table of ``tables``), ``shuffle`` (the
    producer fragment's rows routed into ``partitions`` partitions), ``gather``
    (all of them in one partition), ``arbitrary`` (the producer's partitions
    as they are) or ``none`` (a fragment that reads only broadcasts or Values).
    """

    kind: str
    node_id: str | None = None
    name: str | None = None
    producer: int | None = None
    partitions: int | None = None
    keys: tuple[str, ...] = ()
    #: More producers whose rows join ``producer``'s, routed alike: the branches of a set operation.
    union: tuple[int, ...] = ()

    def describe(self) -> str:
        if self.kind == "table":
            return f"table {self.name}"
        if self.kind == "none":
            return "no input"
        routed = {"shuffle": f"shuffle into {self.partitions} by [{', '.join(self.keys)}]",
                  "gather": "gather into 1", "arbitrary": "as produced"}[self.kind]
        stages = ", ".join(map(str, (self.producer, *self.union)))
        return f"stage{'s' if self.union else ''} {stages}{' unioned' if self.union else ''}, {routed}"


@dataclass(frozen=True)
class SparkStage:
    """One fragment as it runs on Spark: its plan, its input(s), its broadcasts and what becomes of its rows.

    ``build_input`` is the second input of a stage that runs a shuffled join:
    the build side, routed to the same partitions as ``input`` (the probe
    side). ``replicate_keys`` names the key columns of a build side feeding a
    null-aware anti join: its rows with a NULL key, and one more row of each
    Task, go to every partition.
    """

    fragment: Fragment
    plan: PlanNode
    input: StageInput
    broadcasts: tuple[tuple[str, int], ...]
    output: str  # "partition ids" | "rows" | "broadcast" | "gather" | "keys"
    build_input: StageInput | None = None
    replicate_keys: tuple[str, ...] = ()

    @property
    def stage_id(self) -> int:
        return self.fragment.fragment_id

    @property
    def single(self) -> bool:
        """Return True when the stage must run as one partition."""
        return self.fragment.max_width == 1


class SparkRunner:
    """Run plans over Spark DataFrames, each fragment an engine Task per Spark partition.

    Parameters
    ----------
    spark
        The SparkSession.
    device
        The engine device on executors: ``auto`` (a GPU where the executor
        has one, else ``cpu``), ``cpu``, ``cuda`` or ``cuda-sim``.
    drivers
        Drivers per pipeline in each Task (Spark's tasks already run in parallel).
    shuffle_partitions
        Partitions of each keyed shuffle (default ``spark.sql.shuffle.partitions``
        where set, else the cluster's cores: ``defaultParallelism``).
    profile
        An optional ``pyspark.resource.ResourceProfile`` for every stage
        (stage-level scheduling, e.g. one GPU per task).
    engine_parquet_scans
        Let the engine read the files of tables that are bare Parquet scans
        (default); False feeds every table through Arrow from Spark's reader.
    broadcast_threshold
        Bytes: a join whose build side is estimated at most this large is a
        broadcast join, a larger one a shuffled join (default Spark's
        ``spark.sql.autoBroadcastJoinThreshold``; negative never broadcasts).
    joins
        Join id -> ``broadcast`` / ``shuffle`` (or one for every join),
        overriding the size rule; ``execute`` takes the same per plan.
    packed_shuffles
        Shuffle rows as Arrow IPC bytes, one Spark row per destination and
        batch (default), instead of one Spark row per row: Spark moves the
        bytes without converting every row to its row format and back.
    shuffle_compression
        The codec of packed shuffles' Arrow IPC bytes: ``lz4`` (default),
        ``zstd`` or None. Spark's own shuffle compression still applies; this
        shrinks what the JVM copies, sorts and writes before it does.
    driver_broadcasts
        Run a broadcast build side on the driver, as one engine Task, when it
        reads only Parquet files the engine opens itself (or other
        broadcasts) and its scanned columns are estimated at most the
        broadcast threshold (default); False runs every build side as a Spark job.
    **config
        :class:`~gpu_engine.exec.query_ctx.EngineConfig` overrides for every Task.
    """

    def __init__(self, spark, device: str = "auto", *, drivers: int = 1, shuffle_partitions: int | None = None,
                 profile=None, engine_parquet_scans: bool = True, broadcast_threshold: int | None = None,
                 joins: Mapping[str, str] | str | None = None, packed_shuffles: bool = True,
                 shuffle_compression: str | None = "lz4", driver_broadcasts: bool = True, **config):
        EngineConfig().with_overrides(**config)  # unknown settings fail here
        check_shuffle_compression(shuffle_compression)
        use_engine_python(spark)  # the executors' Python must import gpu_engine: fail here, in one line, if not
        self.spark = spark
        self.device = device
        self.drivers = max(1, int(drivers))
        self.shuffle_partitions = shuffle_partitions
        self.profile = profile
        self.config = dict(config)
        self.engine_parquet_scans = engine_parquet_scans
        self._broadcast_threshold = None if broadcast_threshold is None else int(broadcast_threshold)
        SizeJoinStrategy(None, 0, joins if not isinstance(joins, str) else None,
                         default=joins if isinstance(joins, str) else None)  # unknown strategies fail here
        self.joins = joins
        self.packed_shuffles = packed_shuffles
        self.shuffle_compression = shuffle_compression
        self.driver_broadcasts = driver_broadcasts
        #: Stage ids of the broadcast build sides the last execute ran on the driver.
        self.last_driver_broadcasts: set[int] = set()
        self._last_sizes: SizeJoinStrategy | None = None
        #: Join id -> (``broadcast`` / ``shuffle``, estimated build bytes or None) of the last plan.
        self.last_join_strategies: dict[str, tuple[str, int | None]] = {}
        #: Route shuffles by the engine's partition ids (Spark >= 4.1), else let Spark hash the keys.
        self.route_by_partition_id = hasattr(DataFrame, "repartitionById")
        self.last_stages: list[SparkStage] = []
        #: Stage id -> (table, splits, partitions) of each table the engine read itself in the last execute.
        self.last_engine_scans: dict[int, tuple[str, int, int]] = {}
        #: The plan :meth:`sql` made last.
        self.last_plan: PlanNode | None = None
        #: Per task of the last execute: the GPU addresses Spark assigned and the device the engine chose.
        self.task_devices: TaskDeviceLog | None = None

    # -------------------------------------------------------------- planning
    @property
    def time_zone(self) -> str:
        return self.spark.conf.get("spark.sql.session.timeZone")

    def catalog(self, tables: Mapping[str, DataFrame]) -> dict[str, pa.Schema]:
        """Return table name -> Arrow schema of each DataFrame, what ``PlanBuilder`` resolves scans with."""
        return {name: arrow_schema_for(frame.schema, self.time_zone) for name, frame in tables.items()}

    def partitions(self) -> int:
        """Return the partition count of a keyed shuffle."""
        return int(self.shuffle_partitions or default_shuffle_partitions(self.spark))

    def join_strategy(self, tables: Mapping[str, DataFrame] | None = None,
                      joins: Mapping[str, str] | str | None = None) -> SizeJoinStrategy:
        """Return the strategy that picks broadcast or shuffle for each join (sizes from ``tables`` when given).

        ``joins`` (join id -> ``broadcast`` / ``shuffle``, or one for every
        join) override the runner's ``joins``, which override the size rule.
        """
        default, per_join = None, {}
        for given in (self.joins, joins):  # the plan's after the runner's, so they win
            if isinstance(given, str):
                default, per_join = given, {}
            elif given:
                per_join = {**per_join, **given}
        return SizeJoinStrategy(tables, self.broadcast_threshold(), per_join, default=default)

    def broadcast_threshold(self) -> int:
        """Return the largest build side (bytes) a join broadcasts: the runner's, else Spark's ``autoBroadcastJoinThreshold``."""
        if self._broadcast_threshold is not None:
            return self._broadcast_threshold
        return _byte_size(self.spark.conf.get("spark.sql.autoBroadcastJoinThreshold", "10485760b"))

    def plan_stages(self, plan: PlanNode, tables: Mapping[str, DataFrame] | None = None,
                    joins: Mapping[str, str] | str | None = None, statistics=None) -> list[SparkStage]:
        """Return the stages ``plan`` runs as, producers first (nothing runs).

        With ``tables``, each join is broadcast or shuffled by its build
        side's estimated size (see :mod:`gpu_engine.spark.join_sizes`);
        without, every join that can be broadcast is. ``joins`` overrides per
        join id. :attr:`last_join_strategies` says what was chosen and why.
        ``statistics`` (table name -> :class:`~gpu_engine.optimizer.statistics.TableStatistics`, as
        :meth:`sql` takes them) go to the optimizer's choices from estimates.
        """
        config = EngineConfig().with_overrides(**self.config)
        if config.optimize:  # on the whole plan: a filter moves across what become stage boundaries
            from gpu_engine.optimizer import optimize_plan

            plan = optimize_plan(plan, statistics)
        else:  # the subquery predicates still become joins: no operator evaluates them
            from gpu_engine.optimizer import required_rewrites

            plan = required_rewrites(plan)
        strategy = self.join_strategy(tables, joins)
        fragments = plan_fragments(add_spark_exchanges(plan, strategy))
        self.last_join_strategies = dict(strategy.chosen)
        self._last_sizes = strategy
        count = self.partitions()
        outputs = {f.fragment_id: f.output for f in fragments}
        joined = {f.fragment_id: _shuffled_join(f, outputs) for f in fragments}
        feeds_join = {producer: consumer for consumer, found in joined.items() if found is not None
                      for producer in found[1:]}
        replicate = {found[2]: tuple(found[0].right_keys) for found in joined.values()
                     if found is not None and found[0].join_type == "null_aware_anti"}
        stages = []
        for fragment in fragments:
            root, output = fragment.root, "rows"
            if fragment.output is not None:
                consumer = fragments[feeds_join[fragment.fragment_id]] if fragment.fragment_id in feeds_join else None
                output, root = self._output(fragment.output, count, consumer)
            # The executors' device is known only there; what cannot run fails on every device alike.
            executed = prepare_plan(exchanges_as_inputs(root), "cpu", self.drivers, config, optimize=False).plan
            broadcasts, inputs = [], []
            for exchange_id, producer in fragment.producers:
                producer_output = outputs[producer]
                if producer_output.partition_kind == "broadcast":
                    broadcasts.append((exchange_id, producer))
                elif producer_output.partition_kind == "arbitrary":
                    inputs.append(StageInput("arbitrary", exchange_id, producer=producer))
                elif producer_output.keys and fragment.max_width != 1 and count > 1:
                    inputs.append(StageInput("shuffle", exchange_id, producer=producer, partitions=count,
                                             keys=tuple(producer_output.keys)))
                else:
                    inputs.append(StageInput("gather", exchange_id, producer=producer, partitions=1))
            inputs = _unions(inputs)
            for scan in walk_plan(fragment.root):
                if isinstance(scan, TableScanNode):
                    inputs.append(StageInput("table", scan.id, name=scan.table_name))
            build_input = None
            if joined[fragment.fragment_id] is not None and len(inputs) == 2:
                probe_producer, build_producer = joined[fragment.fragment_id][1:]
                by_producer = {i.producer: i for i in inputs}
                inputs, build_input = [by_producer[probe_producer]], by_producer[build_producer]
            if len(inputs) > 1:
                raise PlanError("a Spark stage reads one partitioned input (two for a shuffled join) and broadcasts "
                                f"the others, but this fragment reads {', '.join(i.describe() for i in inputs)}; "
                                "broadcast the smaller side of its join", node=fragment.root.label)
            stage_input = inputs[0] if inputs else StageInput("none")
            replicate_keys = replicate.get(fragment.fragment_id, ()) if output == "partition ids" else ()
            stages.append(SparkStage(fragment, executed, stage_input, tuple(broadcasts), output, build_input,
                                     replicate_keys))
        return stages

    def _output(self, output: PartitionedOutputNode, count: int,
                consumer: Fragment | None = None) -> tuple[str, PlanNode]:
        """Return what becomes of a fragment's rows and the plan that yields them.

        A side of a shuffled join always computes the engine's partition ids:
        both sides must agree on them, which Spark's own hashing of
        differently named and typed key columns would not guarantee.
        """
        if output.partition_kind == "broadcast":
            return "broadcast", output.source
        if output.partition_kind == "partitioned" and output.keys and count > 1:
            if consumer is not None and consumer.max_width == 1:
                return "gather", output.source
            if self.route_by_partition_id or consumer is not None:
                return "partition ids", replace(output, num_partitions=count)
            return "keys", output.source
        return ("gather" if output.partition_kind == "partitioned" else "rows"), output.source

    def explain(self, plan: PlanNode, tables: Mapping[str, DataFrame] | None = None,
                joins: Mapping[str, str] | str | None = None) -> str:
        """Return the stages as text: input(s), broadcasts, output and each stage's plan.

        With ``tables``, a table the engine reads itself says how many splits,
        and joins are broadcast or shuffled by size as ``execute`` would.
        """
        lines = []
        for stage in self.plan_stages(plan, tables, joins):
            broadcasts = "".join(f", broadcast {leaf} from stage {producer}" for leaf, producer in stage.broadcasts)
            width = "1 partition" if stage.single else "per partition"
            scan = self._engine_scan(stage, tables) if tables is not None else None
            on_driver = tables is not None and self._runs_on_driver(stage, scan)
            read = (f" (engine reads {len(scan[0])} Parquet splits "
                    + ("on the driver)" if on_driver else f"in {scan[1]} partitions)") if scan else "")
            build = f" joined with {stage.build_input.describe()}" if stage.build_input is not None else ""
            output = stage.output + (f" (NULL {', '.join(stage.replicate_keys)} and one row per Task to every "
                                     "partition)" if stage.replicate_keys else "")
            where = "on the driver" if on_driver else width
            lines.append(f"Stage {stage.stage_id}: {stage.input.describe()}{read}{build}{broadcasts} -> {output} "
                         f"({where})")
            lines.extend("  " + line for line in format_plan(stage.plan).splitlines())
        return "\n".join(lines)

    # ------------------------------------------------------------- execution
    def execute(self, plan: PlanNode, tables: Mapping[str, DataFrame],
                joins: Mapping[str, str] | str | None = None, statistics=None) -> DataFrame:
        """Return the DataFrame of ``plan``'s rows; broadcast build sides run now, the rest when it is read.

        ``joins``: join id -> ``broadcast`` / ``shuffle`` (or one for all) for this plan; ``statistics``: see
        :meth:`plan_stages`.
        """
        stages = self.plan_stages(plan, tables, joins, statistics)
        self._check_tables(stages, tables)
        frames: dict[int, DataFrame] = {}
        broadcasts: dict[int, object] = {}
        self.last_engine_scans = {}
        self.last_driver_broadcasts = set()
        try:
            self.task_devices = TaskDeviceLog(self.spark) if self.device != "cpu" else None
        except Exception:  # Spark Connect: no SparkContext, no accumulators
            self.task_devices = None
        packed: set[int] = set()
        for stage in stages:
            scan = self._engine_scan(stage, tables)
            splits, partitions = scan or ((), 0)
            packs = self.packed_shuffles and stage.output == "partition ids"
            unpacks = stage.input.producer in packed  # a union's branches all pack or all do not: alike outputs
            if packs:
                packed.add(stage.stage_id)
            function = self.stage_function(stage, {leaf: broadcasts[producer] for leaf, producer in stage.broadcasts},
                                           splits, packed_output=packs, packed_input=unpacks)
            if self._runs_on_driver(stage, scan):
                broadcasts[stage.stage_id] = self._broadcast_payload(self._run_on_driver(function))
                self.last_driver_broadcasts.add(stage.stage_id)
                continue
            if splits:
                frame = self.spark.range(0, len(splits), 1, partitions)  # split numbers, column id
                self.last_engine_scans[stage.stage_id] = (stage.input.name, len(splits), partitions)
            elif stage.build_input is not None:
                frame = self._co_partitioned_frame(stage, frames, function)
            else:
                frame = self._input_frame(stage, tables, frames)
                if stage.input.kind != "none" and frame.columns != function.input_columns:
                    frame = frame.select(*map(_column, function.input_columns))  # Spark sends only what is read
            mapped = frame.mapInArrow(function, function.spark_schema,
                                      **({"profile": self.profile} if self.profile is not None else {}))
            if stage.output == "broadcast":
                broadcasts[stage.stage_id] = self._broadcast(mapped)
            frames[stage.stage_id] = mapped
        self.last_stages = stages
        return frames[stages[-1].stage_id]

    def prepare(self, text: str, dialect: str = "spark"):
        """Return a :class:`~gpu_engine.sql.parameters.PreparedQuery` of ``text`` (``?``/``$n`` placeholders),
        run by ``.execute(params, tables=...)`` (the keywords of :meth:`sql`) as often as wanted."""
        from gpu_engine.sql.parameters import PreparedQuery

        return PreparedQuery(self, text, dialect)

    def sql(self, text: str, tables: Mapping[str, DataFrame], *, dialect: str = "spark", statistics=None,
            joins: Mapping[str, str] | str | None = None, params=None) -> DataFrame:
        """Return the DataFrame of the SQL query ``text`` over ``tables``, planned by the engine and run as stages.

        The engine plans the SQL (:func:`gpu_engine.sql.plan_sql`, in
        sqlglot's ``dialect``: Spark SQL by default) over the DataFrames'
        schemas, then runs it like :meth:`execute`; ``statistics`` (table name
        -> :class:`~gpu_engine.sql.TableStatistics`) guide its join order. A CTE
        read twice is computed once into a checkpointed DataFrame
        (:mod:`gpu_engine.sql.shared_ctes`).
        ``params`` bind the text's ``?`` or ``$n`` placeholders (:mod:`gpu_engine.sql.parameters`): new
        values plan anew but compile no new kernels on the executors.
        Errors in the text raise :class:`~gpu_engine.sql.SqlError` before anything runs.
        """
        from gpu_engine.plans.null_type import schema_with_null_types_of
        from gpu_engine.sql import plan_sql
        from gpu_engine.sql.parameters import bind_parameters
        from gpu_engine.sql.shared_ctes import split_shared_ctes

        text = bind_parameters(text, params, dialect)
        plan = plan_sql(text, self.catalog(tables), statistics, dialect=dialect)
        shared, query = split_shared_ctes(text, dialect)
        if shared:  # a CTE read twice (TPC-H Q15) runs once, checkpointed, and the query reads it as a table
            tables, schemas = dict(tables), {}
            for cte in shared:
                tables[cte.table] = self.sql(cte.sql, tables, dialect=dialect, statistics=statistics,
                                             joins=joins).localCheckpoint()
                schemas[cte.table] = self.last_plan.output_schema
            catalog = self.catalog(tables)
            for name, schema in schemas.items():  # SQL's NULL type kept (a Spark column's type cannot say it)
                catalog[name] = schema_with_null_types_of(catalog[name], schema)
            plan = plan_sql(query, catalog, statistics, dialect=dialect)
        self.last_plan = plan
        return self.execute(plan, tables, joins, statistics)

    def collect(self, plan: PlanNode, tables: Mapping[str, DataFrame],
                joins: Mapping[str, str] | str | None = None) -> pa.Table:
        """Run ``plan`` and return its rows as a ``pyarrow.Table`` of the plan's output schema."""
        frame = self.execute(plan, tables, joins)
        with _engine_errors():
            table = frame.toArrow()
        schema = plan.output_schema
        return pa.Table.from_batches([conform_to_wire(b, schema) for b in table.to_batches()], schema=schema)

    def stage_function(self, stage: SparkStage, broadcasts: Mapping[str, object], input_splits: tuple[str, ...] = (),
                       packed_output: bool = False, packed_input: bool = False) -> FragmentFunction:
        """Return the ``mapInArrow`` callable of one stage (``packed_*``: see :class:`FragmentFunction`)."""
        input_id = stage.input.node_id if stage.input.kind != "none" else None
        build_id = stage.build_input.node_id if stage.build_input is not None else None
        return fragment_function(stage.plan, input_node=input_id, build_input_node=build_id,
                                 broadcast_inputs=broadcasts, device=self.device, drivers=self.drivers,
                                 config=self.config, spark=self.spark, runs_when_empty=stage.single,
                                 name=f"stage {stage.stage_id}", replicate_keys=stage.replicate_keys,
                                 device_log=self.task_devices.accumulator if self.task_devices else None,
                                 packed_output=packed_output, packed_input=packed_input,
                                 input_splits=input_splits,
                                 shuffle_compression=self.shuffle_compression if packed_output else None)

    def _engine_scan(self, stage: SparkStage, tables: Mapping[str, DataFrame]) -> tuple[tuple[str, ...], int] | None:
        """Return the split documents and partition count of a stage's table when the engine reads its files itself.

        As many partitions as Spark's own scan of the table would have; the
        engine's splits are merged into one run per file for each driver of each.
        """
        if not self.engine_parquet_scans or stage.input.kind != "table" or stage.input.name not in tables:
            return None
        frame = tables[stage.input.name]
        files = parquet_scan_files(frame)
        if files is None:
            return None
        scan = next(n for n in walk_plan(stage.fragment.root) if n.id == stage.input.node_id)
        partitions = 1 if stage.single else _spark_partitions(frame)
        splits = parquet_split_documents(files, scan.output_schema, partitions and partitions * self.drivers)
        if splits is None:
            return None
        return splits, min(len(splits), partitions or len(splits))

    # ------------------------------------------------------------- internals
    def _input_frame(self, stage: SparkStage, tables: Mapping[str, DataFrame],
                     frames: Mapping[int, DataFrame]) -> DataFrame:
        source = stage.input
        if source.kind == "table":
            frame = tables[source.name]
        elif source.kind == "none":
            return self.spark.range(0, 1, 1, 1)
        else:
            frame = frames[source.producer]
            for other in source.union:  # a set operation's branches: by position, the first branch's names
                frame = frame.unionAll(frames[other])
        if source.kind == "shuffle":
            if self.route_by_partition_id:
                frame = frame.repartitionById(source.partitions, _column(PARTITION_ID_COLUMN)).drop(PARTITION_ID_COLUMN)
            else:
                frame = frame.repartition(source.partitions, *map(_column, source.keys))
        elif source.kind == "gather" or stage.single:
            frame = frame.repartition(1)
        return frame

    def _co_partitioned_frame(self, stage: SparkStage, frames: Mapping[int, DataFrame],
                              function: FragmentFunction) -> DataFrame:
        """Return both inputs of a shuffled join in one DataFrame, routed to the same partitions, build rows first.

        Spark's ``mapInArrow`` reads one DataFrame, so the sides travel
        together: one union whose rows carry a side tag and, with packed
        shuffles, the Arrow IPC bytes of that side's rows (else the probe
        side's columns and the build side's, NULL for the other side's rows),
        routed by the engine's partition id the two producers computed, then
        sorted by the tag within each partition so the Task's hash table is
        built (and the build input closed) before the first probe row, and
        probe rows stream through with the usual back-pressure.
        """
        sides = []
        for tag, source, names in ((BUILD_SIDE, stage.build_input, function.build_columns),
                                   (PROBE_SIDE, stage.input, function.probe_columns)):
            frame = frames[source.producer]
            if function.packed_input:  # both sides are (partition id, IPC bytes): the same columns already
                sides.append(frame.select(F.lit(tag).cast("tinyint").alias(SIDE_COLUMN), *frame.columns))
                continue
            types = {field.name: field.dataType for field in frame.schema.fields}
            columns = [F.lit(tag).cast("tinyint").alias(SIDE_COLUMN)]
            if PARTITION_ID_COLUMN in types:
                columns.append(_column(PARTITION_ID_COLUMN))
            for other_tag, other_source, other_names, prefix in (
                    (PROBE_SIDE, stage.input, function.probe_columns, "p"),
                    (BUILD_SIDE, stage.build_input, function.build_columns, "b")):
                other_types = {f.name: f.dataType for f in frames[other_source.producer].schema.fields}
                for position, name in enumerate(other_names):
                    value = _column(name) if other_tag == tag else F.lit(None).cast(other_types[name])
                    columns.append(value.alias(side_column(prefix, position)))
            sides.append(frame.select(*columns))
        routed = sides[0].unionAll(sides[1])
        source = stage.input
        if source.kind == "shuffle":
            if self.route_by_partition_id:
                routed = routed.repartitionById(source.partitions, _column(PARTITION_ID_COLUMN))
            else:  # Spark < 4.1: Spark hashes the engine's partition id, the same on both sides
                routed = routed.repartition(source.partitions, _column(PARTITION_ID_COLUMN))
        else:
            routed = routed.repartition(1)
        if PARTITION_ID_COLUMN in routed.columns:
            routed = routed.drop(PARTITION_ID_COLUMN)
        return routed.sortWithinPartitions(SIDE_COLUMN)

    def _runs_on_driver(self, stage: SparkStage, scan: tuple[tuple[str, ...], int] | None) -> bool:
        """Return True when a broadcast build side is small and local enough to run on the driver.

        It must read nothing an executor produces: only a Parquet table the
        engine opens itself (or no table), besides other broadcasts; and the
        columns it scans must be estimated within the broadcast threshold,
        the same bound (filters not credited) that made its join a broadcast.
        ``scan`` is the stage's :meth:`_engine_scan`, looked up once by the caller.
        """
        if not self.driver_broadcasts or stage.output != "broadcast" or self._last_sizes is None:
            return False
        if stage.input.kind == "table":
            if scan is None:  # the stage's table is not one the engine reads itself (see _engine_scan)
                return False
        elif stage.input.kind != "none":
            return False
        size = self._last_sizes.scan_bytes(stage.fragment.root)
        return size is not None and 0 <= size <= self.broadcast_threshold()

    @staticmethod
    def _run_on_driver(function: FragmentFunction) -> pa.Table:
        """Run a stage's callable as one engine Task here, over all its splits, and return its rows."""
        ids = range(len(function.input_splits)) if function.input_splits else range(1)
        feed = pa.record_batch([pa.array(ids, pa.int64())], names=["id"])
        schema = wire_schema_for(function.spark_schema, function.time_zone, function.large_var_types)
        batches = list(replace(function, device_log=None)(iter([feed])))
        return pa.Table.from_batches(batches, schema=schema)

    def _broadcast(self, frame: DataFrame):
        """Collect a build side once and keep it as Arrow IPC bytes in a broadcast variable (bytes on Connect)."""
        with _engine_errors():
            table = frame.toArrow()
        return self._broadcast_payload(table)

    def _broadcast_payload(self, table: pa.Table):
        """Return ``table`` as Arrow IPC bytes in a Spark broadcast variable (the bytes themselves on Connect)."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        payload = sink.getvalue().to_pybytes()
        try:
            return self.spark.sparkContext.broadcast(payload)
        except Exception:  # Spark Connect has no SparkContext: the bytes travel with the function
            return payload

    def _check_tables(self, stages: list[SparkStage], tables: Mapping[str, DataFrame]) -> None:
        """Fail before anything runs when a scan names a missing table or column, or a column changed type."""
        for stage in stages:
            for scan in walk_plan(stage.fragment.root):
                if not isinstance(scan, TableScanNode):
                    continue
                if scan.table_name not in tables:
                    known = ", ".join(sorted(tables)) or "(none)"
                    raise PlanError(f"unknown table {scan.table_name!r}; tables: {known}", node=scan.label,
                                    column=scan.table_name)
                schema = arrow_schema_for(tables[scan.table_name].schema, self.time_zone)
                for name in scan.columns:
                    if name not in schema.names:
                        raise PlanError(f"table {scan.table_name!r} has no column {name!r}", node=scan.label,
                                        column=name)
                    have, want = normalize_type(schema.field(name).type), scan.output_schema.field(name).type
                    if not reads_same_values(have, want):
                        raise PlanError(f"column {name!r} of table {scan.table_name!r} is {have} in Spark but the "
                                        f"plan reads {want}", node=scan.label, column=name)


def _unions(inputs: list[StageInput]) -> list[StageInput]:
    """Return ``inputs`` with those of one Exchange (a set operation's branches) merged into one unioned input.

    The branches' PartitionedOutputs are alike (the same keys, or all
    ``arbitrary``), so their inputs are routed alike: one keeps its
    producer, the others go to ``union``.
    """
    merged: dict[str, StageInput] = {}
    for given in inputs:
        first = merged.get(given.node_id)
        merged[given.node_id] = given if first is None else replace(first, union=first.union + (given.producer,))
    return list(merged.values())


def _shuffled_join(fragment: Fragment, outputs: Mapping[int, PartitionedOutputNode | None] | None = None
                   ) -> tuple[PlanNode, int, int] | None:
    """Return the join that reads both its inputs from shuffles in ``fragment``, with its probe and build producers.

    A side is an Exchange, or (see :func:`~gpu_engine.spark.broadcast_joins.routed_by`)
    Filters, Projects and an aggregation over an Exchange whose producer routes by keys.
    """
    producers = dict(fragment.producers)
    for node in walk_plan(fragment.root):
        if not isinstance(node, (HashJoinNode, NestedLoopJoinNode)):
            continue
        if all(isinstance(source, ExchangeNode) and source.id in producers for source in node.sources):
            return node, producers[node.probe.id], producers[node.build.id]
        exchanges = [_aggregated_exchange(source) for source in node.sources]
        if outputs is not None and all(
                exchange is not None and exchange.id in producers
                and (output := outputs.get(producers[exchange.id])) is not None
                and output.partition_kind == "partitioned" and output.keys for exchange in exchanges):
            return node, producers[exchanges[0].id], producers[exchanges[1].id]
    return None


def _aggregated_exchange(side: PlanNode) -> ExchangeNode | None:
    """Return the Exchange a join side reads: itself, or the one under its Filters, Projects and aggregation."""
    chain, aggregation = aggregation_under(side)
    source = aggregation.sources[0] if aggregation is not None else (chain[-1].sources[0] if chain else side)
    return source if isinstance(source, ExchangeNode) else None


def _byte_size(text: str) -> int:
    """Return Spark's byte size setting (``10485760b``, ``10MB``, ``-1``) as bytes."""
    text = str(text).strip().lower()
    units = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
             "t": 1 << 40, "tb": 1 << 40}
    number = text.rstrip("bkmgt")
    try:
        return int(number) * units[text[len(number):]]
    except (KeyError, ValueError):
        raise PlanError(f"spark.sql.autoBroadcastJoinThreshold={text!r} is not a byte size") from None


def _spark_partitions(frame: DataFrame) -> int | None:
    """Return how many partitions Spark's own scan of ``frame`` has (None without the RDD API: Spark Connect)."""
    try:
        return max(1, frame.rdd.getNumPartitions())
    except Exception:
        return None


def _column(name: str):
    """Return a column by its exact name (backquoted, so dots and parentheses are not parsed)."""
    return F.col("`" + name.replace("`", "``") + "`")


@contextlib.contextmanager
def _engine_errors() -> Iterator[None]:
    """Raise an error a fragment raised on an executor as the engine's ExecutionError, with its own message."""
    try:
        yield
    except ExecutionError:
        raise
    except Exception as error:
        text = str(error)
        start = text.find(ERROR_MARKER)
        if start < 0:
            raise
        message = text[start + len(ERROR_MARKER):].splitlines()[0].strip()
        raise ExecutionError(message) from error
