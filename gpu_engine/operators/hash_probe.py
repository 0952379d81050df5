"""Probe a join's shared build table with each input batch (Velox's HashProbe).

The probe waits (``WAIT_FOR_JOIN_BUILD``) until the build side publishes its
table on the Task's :class:`~gpu_engine.exec.join_bridge.HashJoinBridge`.
Then, per batch: normalize the left keys, find every ``(probe_row, build_row)``
pair with equal keys (:meth:`~gpu_engine.kernels.hash_join.JoinHashTable.match`),
drop the pairs the extra filter rejects (with fusion on, one generated kernel
over the pairs' columns: :class:`~gpu_engine.codegen.compiled_predicate.CompiledPredicate`),
and decide per join type:

* inner: the pairs; left/full add each unmatched probe row once, paired with
  the table's all-NULL row;
* right/full: mark the matched build rows; the last probe driver to finish
  emits the unmatched ones with NULL probe columns;
* left_semi / anti: probe rows with / without a pair, each once;
* null_aware_anti (``NOT IN``): like anti, but nothing when the build side
  has a NULL key, and probe rows with a NULL key only when the build side is empty;
* right_semi / right_anti: nothing per batch, only the matched build rows are
  marked; the last probe driver emits the build rows that were (not) matched.

Without an extra filter the semi and anti joins never form pairs: a probe row
matches when its key id is found (:meth:`~gpu_engine.kernels.hash_join.JoinHashTable.lookup`),
and right_semi / right_anti mark key ids, turned into build rows once at the end
(:meth:`~gpu_engine.kernels.hash_join.JoinHashTable.rows_of_keys`). With duplicate
build keys the pairs were the probe rows times the rows per key (TPC-DS q95's
IN over a self-join: 80M pairs from 6.6M probe rows). A semi or anti join
whose filter is just ``probe.c <> build.c`` (integer-like columns:
:func:`~gpu_engine.operators.hash_build.distinct_value_filter`) forms none either:
for left_semi / anti the build publishes each key's lowest and highest non-NULL
``c`` and a probe row matches iff its non-NULL ``c`` differs from one of them;
for right_semi / right_anti the probe drivers collect those bounds of the probe
side's ``c`` per key id, the bridge merges them, and the last driver tests each
build row's ``c`` the same way (TPC-DS q16, q94, q95).

Output is gather maps, not copies: when only probe columns are output the
result is the input batch with a gather map; otherwise probe columns are
gathered through the pairs' probe rows and build columns by their build rows,
unless the node says ``output_as_maps`` (a fused aggregation or a computing
projection reads the output):
then the batch carries the probe batch's and the build table's columns with
those rows as their maps, and nothing is gathered. The compiled join filter
likewise reads the pairs' columns through the maps inside its kernel.
An empty build side finishes inner, right and semi probes before they read
any input (nothing could match), as Velox does.
"""

from __future__ import annotations

from collections import deque

from gpu_engine.codegen.compiled_predicate import CompiledPredicate
from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.operator import NOT_BLOCKED, BlockingReason, Operator, OperatorCtx
from gpu_engine.expressions import evaluate_predicate
from gpu_engine.expressions.deferred_checks import checks_read_together
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.kernels.gather import gather, gather_column
from gpu_engine.kernels.group_by import FIXED_WIDTH_BLOCK, normalize_keys
from gpu_engine.kernels.hash_join import null_key_rows
from gpu_engine.exec.join_bridge import HashJoinBridge, HashJoinTable
from gpu_engine.operators import hash_build
from gpu_engine.operators.hash_build import JOINS_WITH_NULL_ROW, null_column
from gpu_engine.plans.expressions import referenced_columns
from gpu_engine.plans.nodes import HashJoinNode

__all__ = ["HashProbe"]

_PROBE_ONLY = ("left_semi", "anti", "null_aware_anti")
_BUILD_ONLY = ("right_semi", "right_anti")
_EMITS_UNMATCHED_PROBE = JOINS_WITH_NULL_ROW
_MARKS_BUILD_ROWS = ("right", "full") + _BUILD_ONLY
_EMPTY_BUILD_FINISHES = ("inner", "right", "left_semi") + _BUILD_ONLY


class HashProbe(Operator):
    """Join each input batch against the build table; outer joins add their unmatched rows."""

    def __init__(self, ctx: OperatorCtx, node: HashJoinNode):
        super().__init__(ctx, node)
        self.bridge: HashJoinBridge = ctx.task.bridges[node.id]
        self.join_type = node.join_type
        self._keys = tuple(node.left_keys)
        self._probe_names = frozenset(node.probe.output_schema.names)
        self._output_names = tuple(node.output_columns)
        self._only_probe_output = all(name in self._probe_names for name in self._output_names)
        self._output_as_maps = node.output_as_maps
        self._filter_names = referenced_columns(node.filter) if node.filter is not None else ()
        self._compiled_filter = None
        #: ``(probe column, build column)`` of a ``probe.c <> build.c`` semi or anti join, decided by bounds of c
        self._value_filter = hash_build.distinct_value_filter(node)
        # one generated kernel over the pairs (CompiledPredicate); none where the bounds decide, no pairs formed
        if node.filter is not None and ctx.config.fuse and self._value_filter is None:
            sides = {f.name: f.type for f in node.build.output_schema} | {f.name: f.type for f in node.probe.output_schema}
            self._compiled_filter = CompiledPredicate.of(self.device, node.filter,
                                                         {name: sides[name] for name in self._filter_names},
                                                         ctx.config.compile_mode)
        self._table: HashJoinTable | None = None
        self._matched_build_rows = None
        #: Semi / anti joins without a filter look key ids up instead of forming pairs (module docstring).
        self._by_key_ids = node.filter is None and self.join_type in _PROBE_ONLY + _BUILD_ONLY
        #: right_semi / right_anti on ``probe.c <> build.c``: the probe side's bounds of c per key id, merged
        #: over the probe drivers, decide each build row (module docstring).
        self._bounds_per_key = self._value_filter is not None and self.join_type in _BUILD_ONLY
        self._by_key_ids = self._by_key_ids or self._bounds_per_key
        self._output: deque[Batch] = deque()
        self._finished_early = False

    # ------------------------------------------------------------- blocking
    def is_blocked(self):
        if self._table is None:
            table, future = self.bridge.table_or_future()
            if table is None:
                return BlockingReason.WAIT_FOR_JOIN_BUILD, future
            self._start_probing(table)
        return NOT_BLOCKED

    def _start_probing(self, table: HashJoinTable) -> None:
        self._table = table
        if table.value_bounds is not None:  # probe.c <> build.c decided by each key's bounds of c: no pairs
            self._by_key_ids = True
        if self.join_type in _MARKS_BUILD_ROWS:
            # right_semi / right_anti without a filter flag key ids, the last one a sink for the -1 of a miss
            flags = table.keys.num_keys + 1 if self._by_key_ids else table.num_rows + 1
            self._matched_build_rows = self.device.xp.zeros(flags, dtype=self.device.xp.bool_)
            if self._bounds_per_key:
                self._matched_build_rows = table.keys.empty_bounds()
        nothing_matches = table.num_rows == 0 and self.join_type in _EMPTY_BUILD_FINISHES
        self._finished_early = nothing_matches or (self.join_type == "null_aware_anti" and table.keys.has_null_key)

    # ---------------------------------------------------------------- input
    def needs_input(self) -> bool:
        return (self._table is not None and not self._finished_early and not self.no_more_input_received
                and not self._output)

    def add_input(self, batch: Batch) -> None:
        device, xp, table = self.device, self.device.xp, self._table
        if self._by_key_ids:
            self._add_by_key_ids(batch)
            return
        key = batch.base_column(self._keys[0]) if self._one_fixed_width_key(table) else None
        if key is not None and not key.is_string and key.data.ndim == 1:
            # One integer-like key: the kernel hashes the values through the batch's gather map.
            words = widths = None
            probe_rows, build_rows = table.keys.match_fixed_width(key, batch.gather_map)
        else:
            words, widths = normalize_keys(device, [batch.column(k) for k in self._keys], table.keys.widths)
            probe_rows, build_rows = table.keys.match(words, widths)
        if self.node.filter is not None and probe_rows.shape[0]:  # a constant filter names no column, and counts
            pairs = self._pairs(batch, probe_rows, build_rows, self._filter_names)
            mask = None
            if self._compiled_filter is not None:
                with checks_read_together(device):  # an overflow in the filter raises when the block ends
                    mask = self._compiled_filter.mask(pairs)  # reads the columns through the pairs' maps
                # None while the kernel compiles in the background: this batch runs on the lowest tier.
                self.add_runtime_stat("compiled_filter_batches" if mask is not None else "lowest_tier_batches", 1)
            if mask is None:
                mask = evaluate_predicate(self.node.filter, pairs.materialize())
            kept = selection_from_mask(device, mask)
            probe_rows, build_rows = gather(device, probe_rows, kept), gather(device, build_rows, kept)
        if self.join_type in _PROBE_ONLY:
            self._emit_probe_rows(batch, self._kept_probe_rows(batch, probe_rows, words, widths))
            return
        if self._matched_build_rows is not None:
            self._matched_build_rows[build_rows] = True
            if self.join_type in _BUILD_ONLY:
                return
        if self.join_type in _EMITS_UNMATCHED_PROBE:
            matched = xp.zeros(batch.num_rows, dtype=xp.bool_)
            matched[probe_rows] = True
            unmatched = selection_from_mask(device, ~matched)
            probe_rows = xp.concatenate([probe_rows, unmatched])
            build_rows = xp.concatenate([build_rows, xp.full(unmatched.shape[0], table.null_row, dtype=xp.int32)])
        if probe_rows.shape[0] == 0:
            return
        if self._only_probe_output:
            self._emit_probe_rows(batch, probe_rows)
        else:
            pairs = self._pairs(batch, probe_rows, build_rows, self._output_names)
            self._output.append(pairs if self._output_as_maps else pairs.materialize())

    def _add_by_key_ids(self, batch: Batch) -> None:
        """Join a semi or anti join's batch by the key id each probe row finds, no pairs formed."""
        device, xp, keys = self.device, self.device.xp, self._table.keys
        words = widths = None
        if batch.num_rows == 0 or keys.num_keys == 0:
            key_ids = xp.full(batch.num_rows, -1, dtype=xp.int32)
        elif self._one_fixed_width_key(self._table):
            key = batch.base_column(self._keys[0])
            key_ids = (keys.lookup_fixed_width(key, batch.gather_map) if not key.is_string and key.data.ndim == 1
                       else None)
        else:
            key_ids = None
        if key_ids is None:
            words, widths = normalize_keys(device, [batch.column(k) for k in self._keys], keys.widths)
            key_ids = (keys.lookup(words, widths) if batch.num_rows and keys.num_keys
                       else xp.full(batch.num_rows, -1, dtype=xp.int32))
        if self._bounds_per_key:
            column = batch.column(self._value_filter[0])
            keys.add_value_bounds(self._matched_build_rows, key_ids, column.data.astype(xp.int64, copy=False),
                                  column.validity)
            return
        if self.join_type in _BUILD_ONLY:
            self._matched_build_rows[key_ids] = True  # a miss's -1 lands on the sink flag past the last key id
            return
        matched = key_ids >= 0 if self._table.value_bounds is None else self._differs_from_bounds(batch, key_ids)
        if self.join_type == "null_aware_anti" and self._table.num_rows:
            if words is None:  # NOT IN: x NOT IN (non-empty set) is NULL, not TRUE, when x is NULL
                words, widths = normalize_keys(device, [batch.column(k) for k in self._keys], keys.widths)
            matched |= null_key_rows(device, words, widths)
        rows = selection_from_mask(device, matched if self.join_type == "left_semi" else ~matched)
        self._emit_probe_rows(batch, rows)

    def _differs_from_bounds(self, batch: Batch, key_ids):
        """Return per probe row whether its key's build rows hold a non-NULL ``c`` other than its own non-NULL
        ``c``: its ``c`` differs from the key's low or high (a miss's -1 reads the empty range at the end)."""
        xp = self.device.xp
        name, lows, highs = self._table.value_bounds
        column = batch.column(name)
        values = column.data.astype(xp.int64, copy=False)
        low, high = xp.take(lows, key_ids), xp.take(highs, key_ids)
        matched = (low <= high) & ((low != values) | (high != values))
        return matched if column.validity is None else matched & column.validity

    def _one_fixed_width_key(self, table: HashJoinTable) -> bool:
        """Return True when probe keys need no normalizing: one key, a fixed-width block, and no NOT IN semantics."""
        return (len(self._keys) == 1 and table.keys.widths == (FIXED_WIDTH_BLOCK,)
                and self.join_type != "null_aware_anti")

    def _kept_probe_rows(self, batch: Batch, probe_rows, words, widths):
        """Return the probe rows a semi or anti join keeps, each once, in input order."""
        xp = self.device.xp
        if self.join_type == "left_semi" and self._table.keys.unique_keys:
            return probe_rows  # one build row a key: each matched probe row is there once, in input order
        matched = xp.zeros(batch.num_rows, dtype=xp.bool_)
        matched[probe_rows] = True
        if self.join_type == "left_semi":
            return selection_from_mask(self.device, matched)
        if self.join_type == "null_aware_anti" and self._table.num_rows:
            # NOT IN: x NOT IN (non-empty set) is NULL, not TRUE, when x is NULL.
            matched |= null_key_rows(self.device, words, widths)
        return selection_from_mask(self.device, ~matched)

    def _pairs(self, batch: Batch, probe_rows, build_rows, names) -> Batch:
        """Return ``names`` over the pairs, nothing gathered: probe columns through the probe rows, build columns
        through the build rows as their own maps (see :attr:`~gpu_engine.columnar.batch.Batch.column_maps`)."""
        mapped = batch.with_gather_map(probe_rows)
        build = self._table.columns
        if build.gather_map is not None:
            build_rows = self.device.xp.take(build.gather_map, build_rows)
        columns = tuple(mapped.base_column(name) if name in self._probe_names else build.base_column(name)
                        for name in names)
        maps = tuple(None if name in self._probe_names else build_rows for name in names)
        return Batch(tuple(names), columns, self.device, mapped.gather_map, mapped.base_rows, maps)

    def _emit_probe_rows(self, batch: Batch, rows) -> None:
        if rows.shape[0]:
            self._output.append(batch.select(self._output_names).with_gather_map(rows))

    # --------------------------------------------------------------- output
    def get_output(self) -> Batch | None:
        return self._output.popleft() if self._output else None

    def no_more_input(self) -> None:
        super().no_more_input()
        if self._matched_build_rows is None or self._finished_early:
            return
        matched = self.bridge.probe_finished(self._matched_build_rows, self._merge)
        self._matched_build_rows = None
        if matched is not None:  # the last probe driver emits the build rows nobody (right_semi: somebody) matched
            if self._bounds_per_key:
                column = self._table.columns.column(self._value_filter[1])
                matched = self._table.keys.rows_differing(matched, column.data.astype(self.device.xp.int64, copy=False),
                                                          column.validity)
            elif self._by_key_ids:
                matched = self._table.keys.rows_of_keys(matched[: self._table.keys.num_keys])
            self._emit_build_rows(matched[: self._table.num_rows] if self.join_type == "right_semi"
                                  else ~matched[: self._table.num_rows])

    @property
    def _merge(self):
        """Return how the bridge merges two probe drivers' marks: None (their flags' union), or the union of
        their bounds per key (the lower low, the higher high)."""
        if not self._bounds_per_key:
            return None
        xp = self.device.xp
        return lambda one, other: xp.stack([xp.minimum(one[0], other[0]), xp.maximum(one[1], other[1])])

    def _emit_build_rows(self, chosen) -> None:
        """Emit the build rows where ``chosen`` is true, with NULL probe columns (right and full joins)."""
        table = self._table
        rows = selection_from_mask(self.device, chosen)
        count = int(rows.shape[0])
        if count == 0:
            return
        schema = self.node.output_schema
        columns = tuple(null_column(self.device, schema.field(name).type, count) if name in self._probe_names
                        else gather_column(self.device, table.columns.column(name), rows) for name in self._output_names)
        self._output.append(Batch(self._output_names, columns, self.device, None, count))

    def is_finished(self) -> bool:
        return self._finished_early or (self.no_more_input_received and not self._output)

    def close(self) -> None:
        super().close()
        if self._matched_build_rows is not None and not self._finished_early:
            # Ended without its input ending (a Limit downstream was satisfied): count this driver
            # out, so a later probe driver can still be the last one and emit the unmatched build rows.
            self.bridge.probe_finished(self._matched_build_rows, self._merge)
            self._matched_build_rows = None
        self._table = None
        self.bridge.prober_closed()
        self._output.clear()
