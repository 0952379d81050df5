"""Collect a join's build side into one table that every probe driver shares (Velox's HashBuild).

The build side of a HashJoinNode runs as its own pipeline ending in this sink.
Each build driver keeps the columns the probe will need (keys, build columns in
the output, build columns the filter reads); when it runs out of input it hands
them to the Task's :class:`~gpu_engine.exec.join_bridge.HashJoinBridge`. The *last* build driver to finish
concatenates every driver's batches, builds one
:class:`~gpu_engine.kernels.hash_join.JoinHashTable` over the normalized keys
(a large CPU table on as many threads as the join has build drivers, which are
idle by then: 10M distinct keys took ~1.2 s of one core while the other waited)
and publishes it; probe drivers wait on the bridge's future
(``WAIT_FOR_JOIN_BUILD``) until then. So the table is broadcast to all probe
drivers, and the probe side may be distributed arbitrarily. Before it publishes
the table, the last build driver hands the Task the join-key filters the local
planner found for this join (the keys' range and set, made from the build's key
columns: :mod:`gpu_engine.exec.dynamic_filters`), which the probe side's
TableScan applies to every split it reads.

For right and full joins, which also emit build rows no probe row matched, each
probe driver marks the build rows it matched and reports them to the bridge when
its input ends; the last probe driver to finish gets the union and emits the
unmatched rows (Velox does the same).
"""

from __future__ import annotations

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_batches, concat_columns
from gpu_engine.columnar.types import is_interval, is_string, physical_dtype
from gpu_engine.device import Device
from gpu_engine.exec.join_bridge import HashJoinBridge, HashJoinTable
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.kernels.group_by import normalize_keys
from gpu_engine.kernels.hash_join import JoinHashTable
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, referenced_columns
from gpu_engine.plans.nodes import HashJoinNode, NestedLoopJoinNode

__all__ = ["HashBuild", "null_column", "build_side_columns", "distinct_value_filter", "JOINS_WITH_NULL_ROW",
           "JOINS_BY_VALUE_BOUNDS"]


def null_column(device: Device, dtype: pa.DataType, rows: int) -> Column:
    """Return ``rows`` NULLs of ``dtype``: the missing side of an outer join's unmatched rows."""
    xp = device.xp
    validity = xp.zeros(rows, dtype=xp.bool_)
    if is_string(dtype):
        return Column(dtype, xp.zeros(0, dtype=xp.uint8), validity, xp.zeros(rows + 1, dtype=xp.int64))
    shape = (rows, 3) if is_interval(dtype) else rows  # an INTERVAL holds months, days and microseconds a row
    return Column(dtype, xp.zeros(shape, dtype=physical_dtype(dtype)), validity)


#: The join types whose unmatched probe rows read the build side's all-NULL row (see :class:`HashJoinTable`).
JOINS_WITH_NULL_ROW = ("left", "full")

#: A build side of at most this many rows keeps its plain string columns as dictionaries (see :func:`_as_dictionary`).
#: 65,536, not 4,096: TPC-DS's item (18,000 rows at SF1) feeds q23's ``substr(i_item_desc, 1, 30)`` to 1.65M
#: store_sales rows grouped by it, which gathered, hashed and interned the strings per row on both
#: aggregation steps (its CTE: 619 -> 473 ms CPU as codes); the per-value work later operators do once
#: per dictionary stays bounded by the cap.
DICTIONARY_BUILD_MAX_ROWS = 65536


def _as_dictionary(device: Device, column: Column) -> Column:
    """Return a small build side's plain string column dictionary-encoded (its distinct values, fingerprinted).

    Why: a probe gathers build columns for every match, so a dimension's strings (TPC-H's ``n_name``
    through nation, 25 rows) become a string per probe row, copied by every later gather and interned
    again, batch by batch, where they are a grouping key (Q7's 6K joined rows cost 25 ms of
    per-batch interning). As codes they gather as 4-byte ints, and the dictionary's fingerprint lets
    every later operator do its per-value work once. Small sides only: encoding reads the column on
    the host.
    """
    if not column.is_string or column.is_dictionary:
        return column
    import pyarrow.compute as pc

    return Column.from_arrow(pc.dictionary_encode(column.to_arrow(device)), device)


def _with_null_row(device: Device, column: Column) -> Column:
    """Return ``column`` with one NULL row appended (a dictionary column keeps its dictionary)."""
    xp = device.xp
    if not column.is_dictionary:
        return concat_columns(device, [column, null_column(device, column.dtype, 1)])
    valid = column.validity if column.validity is not None else xp.ones(len(column), dtype=xp.bool_)
    return Column(column.dtype, xp.concatenate([column.data, xp.zeros(1, dtype=column.data.dtype)]),
                  xp.concatenate([valid, xp.zeros(1, dtype=xp.bool_)]), None, column.dictionary)


#: The joins whose ``probe.c <> build.c`` condition each key's bounds of ``c`` decide (:func:`distinct_value_filter`).
JOINS_BY_VALUE_BOUNDS = ("left_semi", "anti", "right_semi", "right_anti")


def _bounds_comparable(probe: pa.DataType, build: pa.DataType) -> bool:
    """Return True when two column types compare as their ``int64`` values: integers (no ``uint64``), or one
    date, timestamp or decimal (of one word: 18 digits at most) type on both sides (floats are left out:
    ``-0.0 = 0.0`` and NaN)."""
    if pa.types.is_integer(probe) and pa.types.is_integer(build):
        return pa.uint64() not in (probe, build)
    one_word = pa.types.is_date(probe) or pa.types.is_timestamp(probe) or (pa.types.is_decimal(probe)
                                                                         and probe.precision <= 18)
    return one_word and probe == build


def distinct_value_filter(node: HashJoinNode) -> tuple[str, str] | None:
    """Return ``(probe column, build column)`` when a semi or anti join's extra condition is just ``probe.c <>
    build.c`` over integer-like columns, else None.

    Why: such a join matches a probe row iff its key's build rows hold a non-NULL ``c`` other than its own, which
    the key's lowest and highest ``c`` tell (:meth:`~gpu_engine.kernels.hash_join.JoinHashTable.value_bounds`):
    the probe then looks key ids up and forms no pairs (TPC-DS q16, q94, q95: an order's lines in another
    warehouse; every pair of an order's lines was formed, then filtered).
    """
    condition = node.filter
    if (node.join_type not in JOINS_BY_VALUE_BOUNDS or not isinstance(condition, BinaryOp) or condition.op != "ne"
            or not isinstance(condition.left, ColumnRef) or not isinstance(condition.right, ColumnRef)):
        return None
    probe_names, build_names = set(node.probe.output_schema.names), set(node.build.output_schema.names)
    left, right = condition.left, condition.right
    if left.name in build_names and right.name in probe_names:
        left, right = right, left
    if left.name not in probe_names or right.name not in build_names or left.name in build_names:
        return None
    probe_type = node.probe.output_schema.field(left.name).type
    build_type = node.build.output_schema.field(right.name).type
    return (left.name, right.name) if _bounds_comparable(probe_type, build_type) else None


def build_side_columns(node: HashJoinNode | NestedLoopJoinNode) -> tuple[str, ...]:
    """Return the build columns a join's probe reads: those in the output, then those the filter reads."""
    names = set(node.build.output_schema.names) - set(node.probe.output_schema.names)
    wanted = list(node.output_columns) + (list(referenced_columns(node.filter)) if node.filter is not None else [])
    return tuple(dict.fromkeys(name for name in wanted if name in names))


class HashBuild(Operator):
    """Sink of the build pipeline: keep the needed build columns; the last driver builds the table."""

    def __init__(self, ctx: OperatorCtx, node: HashJoinNode):
        super().__init__(ctx, node)
        self.bridge: HashJoinBridge = ctx.task.bridges[node.id]
        self._keys = tuple(node.right_keys)
        self._columns = build_side_columns(node)
        self._kept = tuple(dict.fromkeys(self._keys + self._columns))
        self._batches: list[Batch] = []
        self._held_bytes = 0

    def add_input(self, batch: Batch) -> None:
        # Copy just the needed columns now, so the upstream batches (whole scans) can be freed.
        self._batches.append(batch.materialize(self._kept))
        self._held_bytes += self._batches[-1].nbytes
        self.set_memory_reservation(self._held_bytes)

    def get_output(self) -> Batch | None:
        return None

    def no_more_input(self) -> None:
        super().no_more_input()
        batches, self._batches = self._batches, []
        table_pool = self.bridge.hold_memory_of(self.memory_pool)
        everything = self.bridge.add_build_batches(batches)
        if everything is not None:
            table_pool.reserve(sum(b.nbytes for b in everything))  # the concatenated copy, while the batches live
            table = self._build(everything)
            table_pool.set_reservation(table.nbytes)
            self.stats.peak_memory_bytes = max(self.stats.peak_memory_bytes, table_pool.peak_bytes)
            self.bridge.publish(table)

    def _build(self, batches: list[Batch]) -> HashJoinTable:
        device = self.device
        if batches:
            flat = concat_batches(batches)
        else:
            schema = self.node.build.output_schema
            flat = Batch.empty(pa.schema([schema.field(name) for name in self._kept]), device)
        words, widths = normalize_keys(device, [flat.column(k) for k in self._keys])
        keys = JoinHashTable(device, words, widths, threads=self.bridge.num_builders)
        pushed = self.bridge.push_key_filters(device, [flat.column(k) for k in self._keys])
        if pushed:
            self.add_runtime_stat("dynamic_filters", pushed)
        if 0 < flat.num_rows <= DICTIONARY_BUILD_MAX_ROWS:
            flat = Batch(flat.names, tuple(_as_dictionary(device, c) if n in self._columns else c
                                           for n, c in zip(flat.names, flat.columns)), device, None, flat.num_rows)
        if self.node.join_type in JOINS_WITH_NULL_ROW:
            columns = Batch(self._columns, tuple(_with_null_row(device, flat.column(n)) for n in self._columns),
                            device, None, flat.num_rows + 1)
        else:  # no probe row gathers a NULL build row: keep the concatenated columns as they are
            columns = Batch(self._columns, tuple(flat.column(n) for n in self._columns), device, None, flat.num_rows)
        self.add_runtime_stat("build_rows", keys.num_rows)
        self.add_runtime_stat("distinct_keys", keys.num_keys)
        return HashJoinTable(keys, columns, self._value_bounds(keys, flat))

    def _value_bounds(self, keys: JoinHashTable, flat: Batch) -> tuple | None:
        """Return the table's ``value_bounds`` for a ``probe.c <> build.c`` semi or anti join, else None."""
        names = distinct_value_filter(self.node)
        if names is None or self.node.join_type not in ("left_semi", "anti"):  # right_semi/anti: the probe's bounds
            return None
        column = flat.column(names[1])
        self.add_runtime_stat("value_bounds", 1)
        return (names[0], *keys.value_bounds(column.data.astype(self.device.xp.int64, copy=False), column.validity))

    def is_finished(self) -> bool:
        return self.no_more_input_received

    def close(self) -> None:
        super().close()
        self._batches = []
