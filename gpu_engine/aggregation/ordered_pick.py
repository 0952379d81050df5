"""``first(x ORDER BY y)`` and ``last(x ORDER BY y)``: the ``x`` of a group's first/last row in ``y``'s order.

Several ORDER BY keys (``first(x ORDER BY a, b DESC)``) are several key columns, each with its direction and
NULL order (:meth:`~gpu_engine.plans.expressions.AggregateCall.order_keys`), sorted together and carried by a
partial step as ``name$order``, ``name$order2``, ...: a key of each row, not a rank that only one batch's rows
share, so candidates from any batch, driver or step compare.

Why a value list that keeps one candidate per group: the answer is one row of
the group, and a NULL ``x`` counts (DuckDB's ``first`` returns the value of the
first row, NULL or not), so neither ``min``'s folded word nor ``arg_min``
(which skips NULL values) holds it; and ``y`` may be a string, whose sort words
differ in width from batch to batch, so no fixed-width state compares them.
The state is therefore rows, as the other value lists keep
(:class:`~gpu_engine.aggregation.holistic.ValueList`): a mark (true for a kept
row), ``x`` and ``y``. Whenever enough rows arrived they are cut down to each
group's candidate: one stable sort by group, then ``y`` in the call's direction
and NULL order (:func:`~gpu_engine.aggregation.holistic._group_order`), and the
first (``first``) or last (``last``) row of each group's run. The first of the
groups' first rows is the first of all rows, so candidates merge by the same
cut across batches, drivers and partial/final steps.

``arg_min(x, y)``/``arg_max(x, y)`` over keys no 64-bit word holds (strings, decimals of more than 18 digits)
are the same pick (the least/greatest key first) over the rows whose ``x`` and ``y`` are both non-NULL, as
DuckDB skips the others: such a row gets a NULL mark.

Partial steps emit each group's candidate on its first row (``name``,
``name$order`` and the mark ``name$row``; the other rows of a group that other
value lists spread are NULL there): the mark tells a candidate whose ``x`` and
``y`` are NULL from a row that holds none, so a merging step keeps the one and
drops the other. Ties on ``y`` give any of the tied rows' ``x`` (DuckDB's order
among them is its scan order, which a parallel engine does not have).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gpu_engine.aggregation.functions import AggregateState, _pair_validity
from gpu_engine.aggregation.holistic import ValueList, _group_order, _with_null_row
from gpu_engine.columnar.column import Column
from gpu_engine.device import Device
from gpu_engine.kernels.gather import gather_column
from gpu_engine.plans.aggregates import ROW_MARK_SUFFIX, order_key_names

__all__ = ["OrderedPick", "ORDERED_PICK_CLASSES"]

#: Rows a state gathers beyond its candidates before it is cut down to one per group again.
_CUT_AFTER = 1 << 16


class OrderedPick(ValueList):
    """``first``/``last`` with ORDER BY (see the module docstring); kept columns are (mark, x, y)."""

    @property
    def picks_last(self) -> bool:
        return self.call.function == "last"

    @property
    def descending(self) -> bool:
        """Return True when the key sorts descending (``arg_max``: the greatest key first)."""
        return self.call.descending or self.call.function == "arg_max"

    @property
    def skips_nulls(self) -> bool:
        """Return True for ``arg_min``/``arg_max``, which skip rows whose value or key is NULL (as DuckDB)."""
        return self.call.function in ("arg_min", "arg_max")

    @property
    def input_columns(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.intermediate_columns())

    def intermediate_columns(self) -> list[tuple[str, pa.DataType]]:
        """Return the names and types of the columns a partial step emits: ``x``, the keys and the row mark."""
        keys = [key.dtype for key in self.call.inputs()[1:]]
        return [(self.name, self.output_type)] + list(zip(order_key_names(self.name, len(keys)), keys)) + [
            (self.name + ROW_MARK_SUFFIX, pa.bool_())]

    def _directions(self) -> tuple[list[bool], list[bool]]:
        """Return each key's ascending and nulls-first flags (``arg_min``/``arg_max``: their one key's)."""
        if self.call.function in ("arg_min", "arg_max"):
            return [not self.descending], [self.call.nulls_first]
        return self.order_directions()

    def update_rows(self, device, state, group_ids, columns):
        xp = device.xp
        skipped = _pair_validity(device, columns) if self.skips_nulls else None  # a NULL mark drops the row
        mark = Column(pa.bool_(), xp.ones(int(group_ids.shape[0]), dtype=xp.bool_), skipped)
        self._keep(device, state, group_ids, [mark] + list(columns))
        self._cut_when_due(device, state)

    def merge(self, device, state, group_ids, columns):
        value, *keys, mark = columns
        self._keep(device, state, group_ids, [mark, value] + keys)  # rows without a mark are dropped when gathered
        self._cut_when_due(device, state)

    def _cut_when_due(self, device: Device, state: AggregateState) -> None:
        pending = sum(int(ids.shape[0]) for ids, _ in state.values[1:])
        if len(state.values) > 1 and pending >= max(_CUT_AFTER, int(state.values[0][0].shape[0])):
            self._candidates(device, state)

    def _candidates(self, device: Device, state: AggregateState) -> tuple[Any, list[Column]] | None:
        """Cut the kept rows down to each group's first/last row; return their groups (ascending) and columns."""
        kept = self.gathered(device, state)
        if kept is None:
            return None
        xp = device.xp
        group_ids, (mark, value, *keys) = kept
        order, _ = _group_order(device, group_ids, 1 << 40, keys, *self._directions())
        order = order.astype(xp.int64)
        sorted_groups = group_ids[order]
        chosen = xp.ones(int(order.shape[0]), dtype=xp.bool_)
        if order.shape[0] > 1:
            change = sorted_groups[1:] != sorted_groups[:-1]
            if self.picks_last:
                chosen[:-1] = change
            else:
                chosen[1:] = change
        rows = order[chosen]
        group_ids = sorted_groups[chosen]
        columns = [gather_column(device, column, rows) for column in [mark, value] + keys]
        state.values[:] = [(group_ids, tuple(columns))]
        return group_ids, columns

    def value_rows(self, device, state, groups):
        kept = self._candidates(device, state)
        if kept is None:
            return None
        group_ids, (mark, value, *keys) = kept
        names = [name for name, _ in self.intermediate_columns()]
        return group_ids, list(zip(names, [value] + keys + [mark]))

    def extract(self, device, state, groups):
        if not self.final_output:
            raise NotImplementedError(f"{self.call.function}'s partial rows are emitted through ValueRows")
        kept = self._candidates(device, state)
        if kept is None:
            return [(self.name, self.empty_result(device, groups))]
        xp = device.xp
        group_ids, (_, value, *_) = kept
        index = xp.full(groups, int(group_ids.shape[0]), dtype=xp.int64)  # the appended NULL row: no candidate
        index[group_ids] = xp.arange(int(group_ids.shape[0]), dtype=xp.int64)
        picked = gather_column(device, _with_null_row(device, value), index)
        return [(self.name, Column(self.output_type, picked.data, picked.validity, picked.offsets,
                                   picked.dictionary))]


#: The classes by engine function name (looked up by :func:`gpu_engine.aggregation.functions.aggregate_function`).
ORDERED_PICK_CLASSES = {"first": OrderedPick, "last": OrderedPick, "arg_min": OrderedPick, "arg_max": OrderedPick}
