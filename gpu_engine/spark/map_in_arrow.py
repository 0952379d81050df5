"""Turn one plan fragment into the callable ``DataFrame.mapInArrow`` runs on Spark's executors.

The low-level piece of the Spark integration, for users who compose stages
themselves::

    fn = fragment_function(plan, spark=spark)        # plan built with PlanBuilder
    out = df.select(*fn.input_columns).mapInArrow(fn, fn.spark_schema)

Why a callable object and not a closure: Spark pickles whatever it ships to
executors, and a plan must never travel as pickle (a pickle runs code on load
and ties both sides to one Python build). So the object holds only text and
plain values: the fragment as versioned plan JSON
(:func:`gpu_engine.plans.serialization.plan_to_json`), the declared Spark
schema as JSON, the device name, engine settings. Broadcast inputs (a join's
small side, collected once) are Arrow IPC bytes, best wrapped in a Spark
broadcast variable so each executor fetches them once.

A fragment reads from leaves that are fed, not scanned: one *input* leaf gets
the Spark partition's record batches as splits, as they arrive, and each
*broadcast* leaf gets its whole table. A shuffled join's fragment has a second
fed leaf, its *build input*: the partition then carries both sides, each row
tagged by :data:`SIDE_COLUMN` with the columns of both under positional names,
build rows first, and the Task closes the build input at the first probe row. Exchanges in the fragment (the consumer
side of a shuffle) are turned into such leaves here, since on Spark the
shuffle's output *is* the partition. A fragment whose root is a partitioned
PartitionedOutput with keys yields its rows plus the engine-computed
destination column :data:`~gpu_engine.spark.partition_ids.PARTITION_ID_COLUMN`
for ``repartitionById``; any other PartitionedOutput root (broadcast, gather)
just yields its rows, and Spark does the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import types as T

from gpu_engine.errors import PlanError
from gpu_engine.exec.query_ctx import EngineConfig
from gpu_engine.plans.nodes import (
    AggregationNode,
    EnforceSingleRowNode,
    ExchangeNode,
    PartitionedOutputNode,
    PlanNode,
    TableScanNode,
    ValuesNode,
    RangeNode,
    walk_plan,
)
from gpu_engine.plans.serialization import plan_from_json, plan_to_json
from gpu_engine.spark.partition_ids import PARTITION_ID_COLUMN
from gpu_engine.spark.spark_types import spark_schema_for

__all__ = ["FragmentFunction", "fragment_function", "check_shuffle_compression", "exchanges_as_inputs", "emits_partition_ids", "SIDE_COLUMN",
           "BUILD_SIDE", "PROBE_SIDE", "side_column", "PAYLOAD_COLUMN"]

#: The side tag of a shuffled join's partition (both inputs in one DataFrame): BUILD_SIDE rows sort first.
SIDE_COLUMN = "__gpu_engine_side"
#: A packed shuffle's one data column: the rows of one batch for one destination, as an Arrow IPC stream.
PAYLOAD_COLUMN = "__gpu_engine_rows"
BUILD_SIDE = 0
PROBE_SIDE = 1


def side_column(prefix: str, position: int) -> str:
    """Return the wire name of a shuffled join input's column: ``__p<i>`` (probe) or ``__b<i>`` (build).

    Positional names, so the two sides' columns never collide whatever they are called.
    """
    return f"__{prefix}{position}"


@dataclass(frozen=True)
class FragmentFunction:
    """The ``mapInArrow`` callable: runs ``plan_json`` as one engine Task per Spark partition.

    Attributes
    ----------
    plan_json
        The fragment, as plan JSON.
    spark_schema_json
        The Spark schema the ``mapInArrow`` declares (``StructType.json()``).
    input_node_id
        The leaf fed with the partition's batches; None for a fragment that
        reads only broadcast inputs or Values (its partition's rows are ignored).
    broadcast_inputs
        ``(leaf id, Arrow IPC stream bytes or a Spark Broadcast of them)`` pairs.
    device
        ``auto``, ``cpu``, ``cuda`` or ``cuda-sim``, resolved on the executor.
    drivers
        Drivers per pipeline of each Task.
    config_json
        :class:`~gpu_engine.exec.query_ctx.EngineConfig` overrides, as JSON.
    time_zone, large_var_types
        Spark's session time zone and ``useLargeVarTypes``: with the schema,
        they fix the exact Arrow types Spark reads back.
    runs_when_empty
        Run the Task even on a partition without rows (a global aggregation's
        default row, Values, EnforceSingleRow); otherwise such a partition
        yields nothing.
    name
        Names the fragment in Task ids and error messages.
    max_pending_splits
        Partition batches handed to the Task but not yet read, at most; the
        feeder waits (yielding output meanwhile) above it.
    input_splits
        When not empty, the input leaf is a table scan the engine reads
        itself: the partition's rows are numbers into this list of split
        JSON documents (:mod:`gpu_engine.spark.parquet_scans`), not table rows.
    build_input_node_id
        The second fed leaf of a shuffled join (its build side): the
        partition then holds both inputs, each row tagged by
        :data:`SIDE_COLUMN`, build rows first, columns named by :func:`side_column`.
    replicate_keys
        Key columns of a build side that feeds a null-aware anti join: rows
        with a NULL key, and the Task's first row, are sent to every partition.
    packed_output
        A fragment that emits partition ids yields one row per destination
        and output batch, ``(partition id, Arrow IPC bytes of those rows)``,
        instead of its rows: Spark's shuffle then moves a few binary values
        rather than converting every row to its row format and back.
    packed_input
        The input (and build input) rows are such packed rows (the partition
        id dropped; a shuffled join's with :data:`SIDE_COLUMN` first).
    shuffle_compression
        The codec of packed output's Arrow IPC buffers (``lz4``, ``zstd``,
        or None for none); the reader needs no setting.
    device_log
        A Spark accumulator (:class:`~gpu_engine.spark.executor_device.TaskDeviceLog`)
        each Task reports its GPU addresses and chosen device to, or None.
    """

    plan_json: str
    spark_schema_json: str
    input_node_id: str | None = None
    broadcast_inputs: tuple[tuple[str, Any], ...] = ()
    device: str = "auto"
    drivers: int = 1
    config_json: str = "{}"
    time_zone: str = "UTC"
    large_var_types: bool = False
    runs_when_empty: bool = False
    name: str = "fragment"
    max_pending_splits: int = 4
    input_splits: tuple[str, ...] = ()
    build_input_node_id: str | None = None
    replicate_keys: tuple[str, ...] = ()
    device_log: Any = None
    packed_output: bool = False
    packed_input: bool = False
    shuffle_compression: str | None = None

    @property
    def spark_schema(self) -> T.StructType:
        """Return the schema to declare in ``df.mapInArrow(fn, fn.spark_schema)``."""
        return T.StructType.fromJson(json.loads(self.spark_schema_json))

    @property
    def plan(self) -> PlanNode:
        """Return the fragment (parsed from its JSON)."""
        return plan_from_json(self.plan_json)

    @property
    def input_columns(self) -> list[str]:
        """Return the columns the input leaf reads: select them before ``mapInArrow`` so Spark sends no others."""
        if self.input_node_id is None:
            return []
        if self.input_splits:
            return ["id"]
        if self.packed_input:
            return ([SIDE_COLUMN] if self.build_input_node_id is not None else []) + [PAYLOAD_COLUMN]
        if self.build_input_node_id is not None:
            return ([SIDE_COLUMN] + [side_column("p", i) for i in range(len(self.probe_columns))]
                    + [side_column("b", i) for i in range(len(self.build_columns))])
        return self.probe_columns

    @property
    def probe_columns(self) -> list[str]:
        """Return the columns of the input leaf (the probe side of a shuffled join)."""
        node = next(n for n in walk_plan(self.plan) if n.id == self.input_node_id)
        return list(node.columns)

    @property
    def build_columns(self) -> list[str]:
        """Return the columns of the build input leaf of a shuffled join (none without)."""
        if self.build_input_node_id is None:
            return []
        node = next(n for n in walk_plan(self.plan) if n.id == self.build_input_node_id)
        return list(node.columns)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from gpu_engine.spark.fragment_task import run_partition

        return run_partition(self, batches)


def check_shuffle_compression(codec: str | None) -> None:
    """Raise PlanError unless ``codec`` is None or an Arrow IPC codec this pyarrow has (``lz4``, ``zstd``)."""
    if codec is None:
        return
    try:
        available = codec in ("lz4", "zstd") and pa.Codec.is_available(codec)
    except (ValueError, TypeError):
        available = False
    if not available:
        raise PlanError(f"shuffle_compression {codec!r} is not an Arrow IPC codec this pyarrow has; use 'lz4', "
                        "'zstd' or None")


def emits_partition_ids(root: PlanNode) -> bool:
    """Return True when a fragment yields a destination column: its root shuffles by keys."""
    return (isinstance(root, PartitionedOutputNode) and root.partition_kind == "partitioned"
            and bool(root.keys) and root.num_partitions > 1)


def exchanges_as_inputs(root: PlanNode) -> PlanNode:
    """Return ``root`` with every source-less Exchange replaced by a TableScan leaf of the same id and columns.

    On Spark a shuffle's consumer reads the shuffle's output as its partition,
    so the Exchange becomes a leaf that is fed Arrow splits, like a table.
    """
    if isinstance(root, ExchangeNode) and not root.sources:
        return TableScanNode(id=root.id, output_schema=root.output_schema, table_name=f"exchange {root.id}",
                             columns=tuple(root.output_schema.names))
    if not root.sources:
        return root
    return replace(root, sources=tuple(exchanges_as_inputs(source) for source in root.sources))


def _produces_rows_without_input(root: PlanNode) -> bool:
    for node in walk_plan(root):
        if isinstance(node, (ValuesNode, RangeNode, EnforceSingleRowNode)):
            return True
        if isinstance(node, AggregationNode) and not node.grouping_keys and node.step.output_is_final:
            return True
    return False


def _broadcast_payload(value: Any) -> Any:
    """Return IPC stream bytes for a table; pass bytes and Spark Broadcast variables through."""
    if isinstance(value, pa.RecordBatch):
        value = pa.Table.from_batches([value])
    if isinstance(value, pa.Table):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, value.schema) as writer:
            writer.write_table(value)
        return sink.getvalue().to_pybytes()
    return value


def fragment_function(fragment: PlanNode | str, *, input_node: str | None = None,
                      broadcast_inputs: Mapping[str, Any] | None = None, device: str = "auto", drivers: int = 1,
                      config: Mapping[str, Any] | None = None, spark=None, time_zone: str | None = None,
                      large_var_types: bool | None = None, runs_when_empty: bool | None = None,
                      name: str = "fragment", input_splits: Sequence[str] = (), build_input_node: str | None = None,
                      replicate_keys: Sequence[str] = (), device_log: Any = None, packed_output: bool = False,
                      packed_input: bool = False, shuffle_compression: str | None = None) -> FragmentFunction:
    """Return the callable to pass to ``DataFrame.mapInArrow`` with its ``spark_schema``.

    Parameters
    ----------
    fragment
        A plan (or its JSON) whose leaves are TableScans or Exchanges: one is
        fed the partition's batches, the others are broadcast inputs.
    input_node
        Id of the leaf fed with the partition; default: the only leaf that is
        not a broadcast input (a ValuesNode is no such leaf).
    broadcast_inputs
        Leaf id -> ``pyarrow.Table``, IPC bytes, or a Spark Broadcast of IPC bytes.
    device, drivers
        The engine device (resolved on each executor; ``auto`` falls back to
        ``cpu`` without a GPU) and drivers per pipeline.
    config
        :class:`~gpu_engine.exec.query_ctx.EngineConfig` overrides.
    spark
        A SparkSession to read the time zone and ``useLargeVarTypes`` from,
        unless ``time_zone`` / ``large_var_types`` are given (default UTC, False).
    runs_when_empty
        Default: True when the fragment makes rows from no input (a global
        aggregation, Values, EnforceSingleRow); run such a fragment on exactly
        one partition, or its row comes once per partition.
    input_splits
        Split JSON documents the input leaf reads itself; the partition then
        holds split numbers (``spark.range(n)``'s column ``id``).
    build_input_node
        The build leaf of a shuffled join, fed from the same partition as
        ``input_node`` (see :attr:`FragmentFunction.build_input_node_id`).
    replicate_keys
        See :attr:`FragmentFunction.replicate_keys`.
    """
    root = plan_from_json(fragment) if isinstance(fragment, str) else fragment
    root = exchanges_as_inputs(root)
    broadcasts = {key: _broadcast_payload(value) for key, value in (broadcast_inputs or {}).items()}
    leaves = [node for node in walk_plan(root) if isinstance(node, TableScanNode)]
    leaf_ids = {node.id for node in leaves}
    for key in broadcasts:
        if key not in leaf_ids:
            raise PlanError(f"broadcast input {key!r} is not a TableScan or Exchange leaf of the fragment; leaves: "
                            + (", ".join(sorted(leaf_ids)) or "(none)"))
    fed = [node for node in leaves if node.id not in broadcasts]
    if build_input_node is not None:
        if input_node is None or build_input_node not in {node.id for node in fed} or input_node == build_input_node:
            raise PlanError(f"a shuffled join's build input {build_input_node!r} needs a distinct probe input; fed "
                            f"leaves: {', '.join(node.id for node in fed) or '(none)'}")
        fed = [node for node in fed if node.id != build_input_node]
    if input_node is None:
        if len(fed) > 1:
            raise PlanError("a Spark fragment reads one partition input; the others must be broadcast inputs, but "
                            f"{', '.join(node.label for node in fed)} are all unbroadcast leaves", node=fed[1].label)
        input_node = fed[0].id if fed else None
    elif input_node not in {node.id for node in fed}:
        raise PlanError(f"input node {input_node!r} is not an unbroadcast TableScan or Exchange leaf of the fragment")
    elif len(fed) > 1:
        others = [node.label for node in fed if node.id != input_node]
        raise PlanError(f"leaves {', '.join(others)} get no rows: pass them as broadcast inputs", node=others[0])
    output_schema = root.output_schema
    if replicate_keys and not emits_partition_ids(root):
        raise PlanError("replicate_keys needs a fragment that shuffles by keys (a partitioned PartitionedOutput root)",
                        node=root.label)
    if packed_output and not emits_partition_ids(root):
        raise PlanError("packed_output needs a fragment that shuffles by keys (a partitioned PartitionedOutput root)",
                        node=root.label)
    check_shuffle_compression(shuffle_compression)
    if packed_output:
        output_schema = pa.schema([(PARTITION_ID_COLUMN, pa.int32()), (PAYLOAD_COLUMN, pa.binary())])
    elif emits_partition_ids(root):
        output_schema = output_schema.append(pa.field(PARTITION_ID_COLUMN, pa.int32()))
    if spark is not None:
        time_zone = time_zone or spark.conf.get("spark.sql.session.timeZone")
        if large_var_types is None:
            large_var_types = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false").lower() == "true"
    overrides = dict(config or {})
    EngineConfig().with_overrides(**overrides)  # unknown settings fail here, on the driver
    return FragmentFunction(
        plan_json=plan_to_json(root),
        spark_schema_json=spark_schema_for(output_schema).json(),
        input_node_id=input_node,
        broadcast_inputs=tuple(sorted(broadcasts.items(), key=lambda item: item[0])),
        device=device,
        drivers=max(1, int(drivers)),
        config_json=json.dumps(overrides),
        time_zone=time_zone or "UTC",
        large_var_types=bool(large_var_types),
        runs_when_empty=_produces_rows_without_input(root) if runs_when_empty is None else runs_when_empty,
        name=name,
        input_splits=tuple(input_splits),
        build_input_node_id=build_input_node,
        replicate_keys=tuple(replicate_keys),
        device_log=device_log,
        packed_output=bool(packed_output),
        packed_input=bool(packed_input),
        shuffle_compression=shuffle_compression,
    )

