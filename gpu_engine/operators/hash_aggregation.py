"""Group rows by key and aggregate them in a device hash table (Velox's HashAggregation).

Steps follow Velox: PARTIAL reads raw rows and emits intermediate columns,
flushing whenever its table passes ``partial_aggregation_max_groups`` (the
final step merges the pieces); INTERMEDIATE and FINAL read intermediate
columns; SINGLE goes from raw rows to results. Keys are normalized into int64
words (:func:`gpu_engine.kernels.group_by.normalize_keys`) so one table kernel
serves every key type (dictionary-encoded strings are first interned to one id
word a row); the first row of each new group is gathered to keep
the group's key values for output. Integer and decimal sums accumulate as two
64-bit halves and never wrap: an out-of-range result is an error.

``min``/``max`` over strings keep each group's current value as a string
column: per batch, the groups' values and the batch's values are ranked
together by one device sort (:func:`~gpu_engine.kernels.sort.sort_indices`,
the ORDER BY kernels) and each group keeps its best rank (the ``group_min``
kernel), so no string is compared on the host.

The operator's state (hash table, interned strings, kept keys, accumulators,
output not yet taken) is reserved in its memory pool after every change, so a
query whose groups outgrow its cap fails naming this operator
(:mod:`gpu_engine.exec.memory_pool`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_columns
from gpu_engine.columnar.types import is_decimal, is_floating, is_string, physical_dtype
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.expressions import evaluate
from gpu_engine.kernels import aggregate as agg
from gpu_engine.kernels.gather import dictionary_row_validity, gather_column
from gpu_engine.kernels.group_by import GroupByHashTable, StringInterner, normalize_keys
from gpu_engine.kernels.sort import sort_indices
from gpu_engine.plans.aggregates import AVG_COUNT_SUFFIX
from gpu_engine.plans.expressions import AggregateCall, referenced_columns
from gpu_engine.plans.nodes import AggregationNode

__all__ = ["HashAggregation", "unsupported_aggregate"]


def unsupported_aggregate(call: AggregateCall) -> str | None:
    """Return why HashAggregation cannot compute ``call``, or None when it can (the placement pass asks at plan time)."""
    if call.function not in ("min", "max") or call.arg is None:
        return None
    value_type = call.arg.dtype
    if (pa.types.is_integer(value_type) or is_floating(value_type) or is_decimal(value_type) or is_string(value_type)
            or pa.types.is_boolean(value_type) or pa.types.is_date32(value_type) or pa.types.is_timestamp(value_type)):
        return None
    return f"{call.function} over {value_type} is not supported"


@dataclass
class _Accumulator:
    """Device arrays holding one aggregate's running state, one slot per group."""

    call: AggregateCall
    name: str
    value_type: pa.DataType | None  # type of the values accumulated (sum/min/max input)
    arrays: dict[str, Any]
    strings: Column | None = None  # min/max over strings: each group's value so far (NULL: none yet)


class HashAggregation(Operator):
    """Blocking operator: consumes all input, then emits one row per group."""

    def __init__(self, ctx: OperatorCtx, node: AggregationNode):
        super().__init__(ctx, node)
        self.step = node.step
        self.keys = tuple(node.grouping_keys)
        self.max_groups = ctx.config.partial_aggregation_max_groups
        self._arguments_read = {name for call in node.aggregates if call.arg is not None
                                for name in referenced_columns(call.arg)}
        self._reset()
        self._output: list[Batch] = []
        self._finished = False

    # ----------------------------------------------------------------- state
    def _reset(self) -> None:
        self._table: GroupByHashTable | None = None
        self._widths: tuple[int, ...] | None = None
        self._interners: dict[int, StringInterner] | None = None
        self._key_parts: list[list[Column]] = [[] for _ in self.keys]
        self._key_bytes = 0
        self._num_groups = 0 if self.keys else 1
        self._accumulators = [self._new_accumulator(call, name)
                              for name, call in zip(self.node.aggregate_names, self.node.aggregates)]
        self._grow(self._num_groups)
        self._seen_input = False

    def _new_accumulator(self, call: AggregateCall, name: str) -> _Accumulator:
        value_type = None if call.arg is None else call.arg.dtype
        reason = unsupported_aggregate(call)
        if reason is not None:
            raise NotImplementedError(reason)
        return _Accumulator(call, name, value_type, {})

    def _layout(self, acc: _Accumulator) -> dict[str, tuple[Any, Any]]:
        """Return array name -> (dtype, fill value) for an accumulator."""
        xp = self.device.xp
        function = acc.call.function
        if function in ("count", "count_star"):
            return {"count": (xp.int64, 0)}
        if function in ("sum", "avg"):
            layout = {"count": (xp.int64, 0)} if function == "avg" else {}
            if is_floating(acc.value_type) or (function == "avg" and is_floating(acc.value_type)):
                layout.update(sum=(xp.float64, 0.0), has=(xp.bool_, False))
            else:
                layout.update(high=(xp.int64, 0), low=(xp.int64, 0), has=(xp.bool_, False))
            return layout
        if is_string(acc.value_type):
            return {}  # kept in ``acc.strings``
        dtype = physical_dtype(acc.value_type)
        fill = agg.identity_for_min(dtype) if function == "min" else agg.identity_for_max(dtype)
        return {"value": (dtype, fill), "has": (xp.bool_, False)}

    def _grow(self, groups: int) -> None:
        xp = self.device.xp
        for acc in self._accumulators:
            for key, (dtype, fill) in self._layout(acc).items():
                current = acc.arrays.get(key)
                size = 0 if current is None else int(current.shape[0])
                if size >= groups:
                    continue
                capacity = max(groups, 2 * size, 16)
                grown = xp.full(capacity, fill, dtype=dtype)
                if current is not None:
                    grown[:size] = current
                acc.arrays[key] = grown

    # ----------------------------------------------------------------- input
    def add_input(self, batch: Batch) -> None:
        self._seen_input = True
        xp = self.device.xp
        if self.keys:
            key_columns = [batch.column(k) for k in self.keys]
            words, widths = normalize_keys(self.device, self._interned(key_columns), self._widths)
            if self._table is None:
                self._table = GroupByHashTable(self.device, widths)
            elif widths != self._widths:
                self._table.widen(widths)
            self._widths = widths
            group_ids, new_rows = self._table.insert(words)
            if int(new_rows.shape[0]):
                for parts, column in zip(self._key_parts, key_columns):
                    parts.append(gather_column(self.device, column, new_rows))
                    self._key_bytes += parts[-1].nbytes
            self._num_groups = self._table.num_groups
            self._grow(self._num_groups)
        else:
            group_ids = xp.zeros(batch.num_rows, dtype=xp.int32)
        flat = None
        for acc in self._accumulators:
            if self.step.input_is_raw:
                if flat is None:
                    flat = batch.materialize([n for n in batch.names if n in self._arguments_read])
                self._update_raw(acc, group_ids, flat)
            else:
                self._update_intermediate(acc, group_ids, batch)
        if self.step is self.step.PARTIAL and self.keys and self._num_groups > self.max_groups:
            self.add_runtime_stat("partial_flushes", 1)
            self._output.append(self._emit())
            self._reset()
        self.set_memory_reservation(self._state_bytes())

    def _state_bytes(self) -> int:
        """Return the bytes of the table, interned strings, kept keys, accumulators and output not yet taken."""
        total = self._key_bytes + sum(b.nbytes for b in self._output)
        if self._table is not None:
            total += self._table.nbytes
        total += sum(interner.nbytes for interner in (self._interners or {}).values())
        for acc in self._accumulators:
            total += sum(int(array.nbytes) for array in acc.arrays.values())
            total += acc.strings.nbytes if acc.strings is not None else 0
        return total

    def _interned(self, key_columns: list[Column]) -> list[Column]:
        """Replace string keys that arrive dictionary-encoded by stable int64 ids (one word a row)."""
        if self._interners is None:
            self._interners = {i: StringInterner(self.device) for i, c in enumerate(key_columns) if c.is_dictionary}
        return [self._interners[i].intern(c) if i in self._interners else c for i, c in enumerate(key_columns)]


    def _update_raw(self, acc: _Accumulator, group_ids, flat: Batch) -> None:
        function = acc.call.function
        arrays = acc.arrays
        if function == "count_star":
            agg.group_count(self.device, group_ids, None, arrays["count"])
            return
        column = evaluate(acc.call.arg, flat)
        if column.dictionary is not None or column.is_string:
            if function == "count":
                agg.group_count(self.device, group_ids, column.validity, arrays["count"])
                return
            self._fold_strings(acc, group_ids, column)
            return
        self._accumulate(acc, function, group_ids, column.data, column.validity)

    def _fold_strings(self, acc: _Accumulator, group_ids, column: Column) -> None:
        """Fold a batch's strings into each group's min/max: rank old and new values in one sort, keep the best."""
        if acc.call.function not in ("min", "max"):
            raise NotImplementedError(f"{acc.call.function} over strings is not supported")
        xp = self.device.xp
        groups = self._num_groups
        previous = acc.strings
        known = 0 if previous is None else len(previous)
        candidates = column if previous is None else concat_columns(self.device, [previous, column])
        rows = len(candidates)
        if rows == 0:
            return
        owners = group_ids.astype(xp.int32, copy=False)
        if known:
            owners = xp.concatenate([xp.arange(known, dtype=xp.int32), owners])
        valid = dictionary_row_validity(self.device, candidates) if candidates.is_dictionary else candidates.validity
        # Ascending ranks for min, descending for max: either way each group keeps its smallest rank.
        order = sort_indices(self.device, [candidates], [acc.call.function == "min"], [False])
        ranks = xp.empty(rows, dtype=xp.int64)
        ranks[order] = xp.arange(rows, dtype=xp.int64)
        best = xp.full(groups, agg.identity_for_min(xp.int64), dtype=xp.int64)
        has = xp.zeros(groups, dtype=xp.bool_)
        agg.group_min(self.device, owners, ranks, valid, best, has)
        chosen = gather_column(self.device, candidates, xp.take(order, xp.where(has, best, 0)))
        acc.strings = Column(chosen.dtype, chosen.data, has, chosen.offsets, chosen.dictionary)

    def _string_results(self, acc: _Accumulator, groups: int, dtype: pa.DataType) -> Column:
        """Return each group's min/max string, NULL for groups that saw no value (or none since the last fold)."""
        xp = self.device.xp
        current = acc.strings
        known = 0 if current is None else len(current)
        if known == groups:
            return current
        validity = xp.zeros(groups - known, dtype=xp.bool_)
        missing = Column(dtype, xp.zeros(0, dtype=xp.uint8), validity, xp.zeros(groups - known + 1, dtype=xp.int64))
        return missing if current is None else concat_columns(self.device, [current, missing])

    def _accumulate(self, acc: _Accumulator, function: str, group_ids, values, validity) -> None:
        arrays = acc.arrays
        if function == "count":
            agg.group_count(self.device, group_ids, validity, arrays["count"])
        elif function in ("sum", "avg"):
            if "sum" in arrays:
                agg.group_sum_float(self.device, group_ids, values.astype(self.device.xp.float64, copy=False),
                                    validity, arrays["sum"], arrays["has"])
            else:
                agg.group_sum_int(self.device, group_ids, values, validity, arrays["high"], arrays["low"], arrays["has"])
            if function == "avg":
                agg.group_count(self.device, group_ids, validity, arrays["count"])
        elif function == "min":
            agg.group_min(self.device, group_ids, values, validity, arrays["value"], arrays["has"])
        else:
            agg.group_max(self.device, group_ids, values, validity, arrays["value"], arrays["has"])

    def _update_intermediate(self, acc: _Accumulator, group_ids, batch: Batch) -> None:
        function = acc.call.function
        column = batch.column(acc.call.arg.name)
        if function in ("count", "count_star"):
            agg.group_sum_int(self.device, group_ids, column.data, column.validity,
                              *self._count_split(acc))
            return
        if function == "avg":
            counts = batch.column(acc.call.arg.name + AVG_COUNT_SUFFIX)
            self._accumulate_sum_only(acc, group_ids, column)
            self._add_counts(acc, group_ids, counts)
            return
        if function == "sum":
            self._accumulate_sum_only(acc, group_ids, column)
            return
        if is_string(acc.value_type):
            self._fold_strings(acc, group_ids, column)
            return
        self._accumulate(acc, function, group_ids, column.data, column.validity)

    # Intermediate counts are summed exactly through the split accumulator, then
    # folded back into the int64 ``count`` array when output is built.
    def _count_split(self, acc: _Accumulator):
        xp = self.device.xp
        arrays = acc.arrays
        n = int(arrays["count"].shape[0])
        for key in ("count_high", "count_low"):
            if key not in arrays or int(arrays[key].shape[0]) < n:
                grown = xp.zeros(n, dtype=xp.int64)
                if key in arrays:
                    grown[: int(arrays[key].shape[0])] = arrays[key]
                arrays[key] = grown
        if "count_has" not in arrays or int(arrays["count_has"].shape[0]) < n:
            grown = xp.zeros(n, dtype=xp.bool_)
            if "count_has" in arrays:
                grown[: int(arrays["count_has"].shape[0])] = arrays["count_has"]
            arrays["count_has"] = grown
        return arrays["count_high"], arrays["count_low"], arrays["count_has"]

    def _add_counts(self, acc: _Accumulator, group_ids, counts: Column) -> None:
        agg.group_sum_int(self.device, group_ids, counts.data, counts.validity, *self._count_split(acc))

    def _accumulate_sum_only(self, acc: _Accumulator, group_ids, column: Column) -> None:
        arrays = acc.arrays
        if "sum" in arrays:
            agg.group_sum_float(self.device, group_ids, column.data.astype(self.device.xp.float64, copy=False),
                                column.validity, arrays["sum"], arrays["has"])
        else:
            agg.group_sum_int(self.device, group_ids, column.data, column.validity, arrays["high"], arrays["low"], arrays["has"])

    # ---------------------------------------------------------------- output
    def no_more_input(self) -> None:
        super().no_more_input()
        if self.keys and self._num_groups == 0:
            return
        if not self.keys and not self._seen_input and self.step is self.step.PARTIAL:
            return
        self._output.append(self._emit())
        self.set_memory_reservation(self._state_bytes())

    def _emit(self) -> Batch:
        groups = self._num_groups
        names: list[str] = list(self.keys)
        columns: list[Column] = [concat_columns(self.device, parts) for parts in self._key_parts]
        for acc in self._accumulators:
            for name, column in self._results(acc, groups):
                names.append(name)
                columns.append(column)
        return Batch(tuple(names), tuple(columns), self.device, None, groups)

    def _counts(self, acc: _Accumulator, groups: int):
        arrays = acc.arrays
        counts = arrays["count"][:groups]
        if "count_high" in arrays:
            counts = counts + agg.combine_split_sum(self.device, arrays["count_high"][:groups], arrays["count_low"][:groups])
        return counts

    def _sum_column(self, acc: _Accumulator, groups: int, dtype: pa.DataType) -> Column:
        arrays = acc.arrays
        has = arrays["has"][:groups].copy()
        if "sum" in arrays:
            return Column(dtype, arrays["sum"][:groups].copy(), has)
        try:
            values = agg.combine_split_sum(self.device, arrays["high"][:groups], arrays["low"][:groups])
        except OverflowError as error:
            raise OverflowError(f"{acc.call.sql()} AS {acc.name}: {error}") from None
        return Column(dtype, values, has)

    def _results(self, acc: _Accumulator, groups: int) -> list[tuple[str, Column]]:
        xp = self.device.xp
        function = acc.call.function
        final = self.step.output_is_final
        if function in ("count", "count_star"):
            return [(acc.name, Column(pa.int64(), self._counts(acc, groups).copy()))]
        if function == "sum":
            return [(acc.name, self._sum_column(acc, groups, acc.call.dtype if final else self.node.output_schema.field(acc.name).type))]
        if function == "avg":
            counts = self._counts(acc, groups)
            sum_type = self.node.output_schema.field(acc.name).type if not final else None
            if not final:
                total = self._sum_column(acc, groups, sum_type)
                return [(acc.name, total), (acc.name + AVG_COUNT_SUFFIX, Column(pa.int64(), counts.copy()))]
            total = self._sum_column(acc, groups, pa.float64())
            scale = acc.value_type.scale if is_decimal(acc.value_type) else 0
            nonzero = counts > 0
            averages = total.data.astype(xp.float64) / xp.where(nonzero, counts, 1)
            if scale:
                averages = averages / float(10**scale)
            return [(acc.name, Column(pa.float64(), averages, nonzero))]
        value_type = acc.call.dtype if final else self.node.output_schema.field(acc.name).type
        if is_string(acc.value_type):
            return [(acc.name, self._string_results(acc, groups, value_type))]
        return [(acc.name, Column(value_type, acc.arrays["value"][:groups].copy(), acc.arrays["has"][:groups].copy()))]

    def get_output(self) -> Batch | None:
        if self._output and (self.no_more_input_received or self.step is self.step.PARTIAL):
            batch = self._output.pop(0)
            self.set_memory_reservation(self._state_bytes())
            return batch
        return None

    def needs_input(self) -> bool:
        return not self.no_more_input_received

    def is_finished(self) -> bool:
        return self.no_more_input_received and not self._output
