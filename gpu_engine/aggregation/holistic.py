"""Holistic and approximate aggregates: each group keeps its values, merged by concatenation (Velox's accumulators).

Why their own kind of state: ``median``, ``quantile_cont``/``quantile_disc``
(``percentile_*`` WITHIN GROUP), ``approx_quantile``, ``mode`` and
``string_agg`` need every value of a group, and the answer is known only when
the last one arrived. A group's state is therefore its values (and, for
``string_agg(x, sep ORDER BY y)``, their sort keys): each batch appends its
rows with their group ids (:attr:`AggregateState.values`; NULL values are
dropped when the pieces are joined, so a batch costs no host read), and the
final step computes every group at once with device array operations: one
sort by group then value (:func:`_group_order` over the ORDER BY kernels' key
words), segment bounds from the group counts, and gathers. Nothing
branches on the device.

``approx_count_distinct`` keeps HyperLogLog registers instead of values
(:data:`HLL_BITS` index bits, so a standard error of
``1.04 / sqrt(2 ** HLL_BITS)``, 1.6 %): each value's 64-bit hash
(:func:`~gpu_engine.kernels.hash.hash_columns`) names a register and a rank,
kept as one word ``register << 8 | rank``; words are compacted to the largest
rank per group and register whenever enough arrived, so a group holds at most
``2 ** HLL_BITS`` of them.

Partial steps: Arrow would carry a group's values as a list; the engine's
columns hold no lists, so a partial step emits a group's values one per row
(:class:`ValueRows`): a group with ``k`` values (the most of any of its value
lists) takes ``k`` rows with its keys repeated, each value list fills its own
rows and is NULL beyond its length, and every other aggregate's intermediate
columns are in the group's first row and NULL in the others -- NULL is the
identity of every merge, so the final step's result is as if the lists had
been concatenated. The final step then appends the intermediate values as a
raw step appends rows (registers: compacts them).

Types follow DuckDB (:func:`gpu_engine.plans.aggregates.result_type`):
continuous quantiles interpolate as ``lo * (1 - d) + hi * d`` in double
precision (decimals: ``lo + (hi - lo) * d`` exactly, rounded once to a double, truncated toward
zero; timestamps: ``lo`` plus the product rounded half away from zero), discrete ones take
the value at ``ceil(n * f) - 1``; a negative fraction counts from the greatest
value. Groups without values are NULL (``approx_count_distinct``: 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from gpu_engine.aggregation.functions import AggregateFunction, AggregateState, StateArray
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_columns
from gpu_engine.columnar.types import is_decimal, is_floating, is_integer, is_interval, is_string, physical_dtype
from gpu_engine.device import Device
from gpu_engine.kernels.gather import dictionary_row_validity, gather_column
from gpu_engine.kernels.hash import hash_columns
from gpu_engine.kernels.order_statistics import value_rank_rows
from gpu_engine.kernels.sort import sort_key_words
from gpu_engine.plans.aggregates import order_key_names

__all__ = ["ValueList", "Quantile", "Mode", "StringAgg", "ApproxCountDistinct", "ValueRows", "HLL_BITS",
           "VALUE_LIST_CLASSES"]

#: Index bits of ``approx_count_distinct``'s HyperLogLog: ``2 ** HLL_BITS`` registers per group.
HLL_BITS = 12
_REGISTERS = 1 << HLL_BITS
#: Uncompacted register words a state gathers before it is compacted again (at least; see ApproxCountDistinct).
_COMPACT_AFTER = 1 << 16


def _null_column(device: Device, dtype: pa.DataType, rows: int) -> Column:
    """Return ``rows`` NULLs of ``dtype``."""
    xp = device.xp
    validity = xp.zeros(rows, dtype=xp.bool_)
    if is_string(dtype):
        return Column(dtype, xp.zeros(0, dtype=xp.uint8), validity, xp.zeros(rows + 1, dtype=xp.int64))
    shape = (rows, 3) if is_interval(dtype) else rows  # an INTERVAL holds months, days and microseconds a row
    return Column(dtype, xp.zeros(shape, dtype=physical_dtype(dtype)), validity)


def _plain(device: Device, column: Column) -> Column:
    """Return a dictionary-encoded string column as plain strings (value lists concatenate and gather them)."""
    if not column.is_dictionary:
        return column
    if len(column.dictionary) == 0:  # an all-NULL column: its codes index nothing (gathering read out of bounds)
        return _null_column(device, column.dtype, len(column))
    values = gather_column(device, column.dictionary, column.data)
    validity = dictionary_row_validity(device, column)
    return Column(column.dtype, values.data, validity, values.offsets)


def _with_null_row(device: Device, column: Column) -> Column:
    """Return ``column`` with one NULL row appended (the row a gather reads for "no value")."""
    return concat_columns(device, [column, _null_column(device, column.dtype, 1)])


def _group_order(device: Device, group_ids: Any, groups: int, columns: list[Column] = (), ascending=(),
                 nulls_first=(), stable: bool = True) -> tuple[Any, Any]:
    """Return the row order by group, then by ``columns``, and the columns' sort words in that order.

    Rows with equal keys keep their input order when ``stable`` (else any order: equal values are
    interchangeable for a quantile or a mode, and an unstable sort is faster on the CPU).

    Why not one multi-key sort: ``xp.lexsort`` over 64-bit key words is several times slower than two
    stable argsorts, one over the values' order-preserving word and one over the group ids narrowed to
    16 bits when they fit (NumPy radix-sorts those; CuPy's sorts are radix sorts anyway).
    """
    xp = device.xp
    words = None
    if columns:
        words = sort_key_words(device, list(columns), list(ascending), list(nulls_first))
        order = xp.argsort(words[0], kind="stable" if stable else None) if words.shape[0] == 1 else xp.lexsort(words)
    else:
        order = xp.arange(group_ids.shape[0], dtype=xp.int64)
    narrow = xp.int16 if groups <= 1 << 15 else xp.int64
    order = order[xp.argsort(group_ids[order].astype(narrow), kind="stable")]
    return order, (None if words is None else words[:, order])


def _segments(device: Device, group_ids: Any, groups: int) -> tuple[Any, Any]:
    """Return each group's value count and the start of its values once sorted by group."""
    xp = device.xp
    counts = xp.bincount(group_ids, minlength=groups).astype(xp.int64) if group_ids.shape[0] else xp.zeros(
        groups, dtype=xp.int64)
    return counts, xp.cumsum(counts) - counts


class ValueList(AggregateFunction):
    """An aggregate whose state is its groups' values (see the module docstring); subclasses compute results."""

    def state_arrays(self) -> tuple[StateArray, ...]:
        return ()

    @property
    def input_columns(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.call.inputs())

    def order_directions(self) -> tuple[list[bool], list[bool]]:
        """Return each ORDER BY key's ascending and nulls-first flags, the first key first."""
        keys = self.call.order_keys()
        return [not descending for _, descending, _ in keys], [nulls_first for _, _, nulls_first in keys]

    @property
    def fusable(self) -> str | None:
        return f"{self.call.function} keeps every value of a group (no fused-kernel update)"

    def update(self, device, state, group_ids, column):
        self.update_rows(device, state, group_ids, [column])

    def update_rows(self, device, state, group_ids, columns):
        self._keep(device, state, group_ids, columns)

    def merge(self, device, state, group_ids, columns):
        self._keep(device, state, group_ids, columns)

    def _keep(self, device: Device, state: AggregateState, group_ids: Any, columns: list[Column]) -> None:
        """Append a batch's rows with their groups (NULL values are dropped once, in :meth:`gathered`: no
        per-batch host read of how many remain)."""
        if int(group_ids.shape[0]):
            state.values.append((group_ids.astype(device.xp.int64), tuple(columns)))

    def gathered(self, device: Device, state: AggregateState) -> tuple[Any, list[Column]] | None:
        """Return every kept non-NULL value's group and columns (plain strings), in one piece, kept so; None
        when there are none."""
        if not state.values:
            return None
        xp = device.xp
        pieces = state.values
        if len(pieces) > 1 or pieces[0][1][0].validity is not None or any(c.is_dictionary for c in pieces[0][1]):
            group_ids = xp.concatenate([ids for ids, _ in state.values])
            columns = [concat_columns(device, list(parts)) for parts in zip(*(cols for _, cols in state.values))]
            columns = [_plain(device, column) for column in columns]
            if columns[0].validity is not None:
                rows = xp.nonzero(columns[0].validity)[0]
                group_ids = group_ids[rows]
                columns = [gather_column(device, column, rows) for column in columns]
            state.values[:] = [(group_ids, tuple(columns))] if int(group_ids.shape[0]) else []
            if not state.values:
                return None
        group_ids, columns = state.values[0]
        return group_ids, list(columns)

    def value_rows(self, device: Device, state: AggregateState, groups: int
                   ) -> tuple[Any, list[tuple[str, Column]]] | None:
        """Return the kept values sorted by group (stably) with their groups, as intermediate columns."""
        kept = self.gathered(device, state)
        if kept is None:
            return None
        group_ids, columns = kept
        order, _ = _group_order(device, group_ids, groups)
        names = [name for name, _ in self.intermediate_columns()]
        return group_ids[order], [(name, gather_column(device, column, order)) for name, column in zip(names, columns)]

    def intermediate_columns(self) -> list[tuple[str, pa.DataType]]:
        """Return the names and types of the value list columns a partial step emits."""
        keys = self.call.order_keys()
        return [(self.name, self.output_type)] + list(zip(order_key_names(self.name, len(keys)),
                                                          (key.dtype for key, _, _ in keys)))

    def extract(self, device, state, groups):
        if not self.final_output:
            raise NotImplementedError(f"{self.call.function}'s partial rows are emitted through ValueRows")
        kept = self.gathered(device, state)
        if kept is None:
            return [(self.name, self.empty_result(device, groups))]
        return [(self.name, self.result(device, kept[0], kept[1], groups))]

    def empty_result(self, device: Device, groups: int) -> Column:
        """Return the result of ``groups`` groups that kept no value."""
        return _null_column(device, self.output_type, groups)

    def result(self, device: Device, group_ids: Any, columns: list[Column], groups: int) -> Column:
        """Return the result of every group from all kept values (at least one)."""
        raise NotImplementedError


class Quantile(ValueList):
    """``median``, ``quantile_cont``/``quantile_disc`` and ``approx_quantile`` (exact: a discrete quantile)."""

    @property
    def fraction(self) -> float:
        return 0.5 if self.call.function == "median" else float(self.call.parameter)

    @property
    def interpolates(self) -> bool:
        """Return True for a continuous quantile over a type with an average (``median`` of strings is discrete)."""
        function, value_type = self.call.function, self.value_type
        return function in ("median", "quantile_cont") and not (is_string(value_type)
                                                                or pa.types.is_boolean(value_type))

    def result(self, device, group_ids, columns, groups):
        xp = device.xp
        values = columns[0]
        counts, starts = _segments(device, group_ids, groups)
        valid = counts > 0
        n = xp.where(valid, counts, 1)
        fraction = self.fraction
        descending = fraction < 0 or (fraction == 0 and np.signbit(fraction))
        fraction = abs(fraction)
        if self.interpolates:
            position = (n - 1).astype(xp.float64) * fraction
            low = xp.floor(position).astype(xp.int64)
            high = xp.ceil(position).astype(xp.int64)
            delta = position - low
        else:
            low = xp.clip(xp.ceil(n.astype(xp.float64) * fraction).astype(xp.int64) - 1, 0, n - 1)
            high, delta = low, None
        if descending:  # positions count from the greatest value
            low, high = n - 1 - low, n - 1 - high
        # Kept values are never NULL (gathered drops them): their words carry no null word.
        # Groups without values read row 0: NULL anyway.
        first, second = value_rank_rows(device, group_ids, groups, Column(
            values.dtype, values.data, None, values.offsets, values.dictionary), counts, starts, low, high)
        if delta is None:
            picked = gather_column(device, values, first)
            return Column(picked.dtype, picked.data, valid & (True if picked.validity is None else picked.validity),
                          picked.offsets, picked.dictionary)
        return Column(self.output_type, self._interpolated(device, values, first, second, delta), valid)

    def _interpolated(self, device: Device, values: Column, first: Any, second: Any, delta: Any) -> Any:
        """Return ``a`` interpolated toward ``b`` by ``d`` per group in the result's physical type (DuckDB's
        formula and rounding for each type)."""
        xp = device.xp
        value_type, out = self.value_type, self.output_type
        a, b = values.data[first], values.data[second]
        if pa.types.is_date32(value_type):  # days -> microseconds
            a = a.astype(xp.int64) * 86_400_000_000
            b = b.astype(xp.int64) * 86_400_000_000
        if is_floating(out) or is_integer(value_type):
            low, high = a.astype(xp.float64), b.astype(xp.float64)
            with np.errstate(invalid="ignore", over="ignore"):  # DuckDB's lo * (1 - d) + hi * d: no hi - lo to
                mixed = xp.where(delta == 0, low, low * (1.0 - delta) + high * delta)  # overflow, -inf stays -inf
            return mixed.astype(physical_dtype(out))
        low, high = a.astype(xp.int64), b.astype(xp.int64)
        if pa.types.is_timestamp(out) or pa.types.is_time64(out):  # DuckDB: lo + llround((hi - lo) * d), a double product
            step = (high - low).astype(xp.float64) * delta
            whole = xp.trunc(step)
            halfway = xp.abs(step - whole) >= 0.5  # exact: a double less its integer part
            return low + (whole + xp.where(halfway, xp.sign(step), 0.0)).astype(xp.int64)
        # decimals: interpolated exactly, rounded once to a double and truncated toward zero; a quantile that
        # falls on one value (delta 0) is that value, exact past 2 ** 53 too (DuckDB interpolates only between two)
        return xp.where(delta == 0, low, _truncated_interpolation(xp, low, high, delta))


def _product_error(x: Any, y: Any, product: Any) -> Any:
    """Return ``x * y - product`` exactly (Dekker's two-product: Veltkamp splits, no fused multiply-add needed)."""
    def split(value):
        scaled = 134217729.0 * value  # 2 ** 27 + 1
        high = scaled - (scaled - value)
        return high, value - high

    x_high, x_low = split(x)
    y_high, y_low = split(y)
    return ((x_high * y_high - product) + x_high * y_low + x_low * y_high) + x_low * y_low


def _truncated_interpolation(xp, low: Any, high: Any, delta: Any) -> Any:
    """Return ``low + (high - low) * delta`` of int64 values rounded once to a double, truncated (DuckDB's answer).

    Why not plain double arithmetic: it rounds twice (the product, then the sum). With ``delta`` the double
    nearest 0.85, ``11925080 * delta`` is just below 10136318 but rounds to it, and the truncation then
    lands one unit high. The product is kept as its double and its exact error (:func:`_product_error`),
    the sum as its double and its exact error (Knuth's two-sum), and the errors join the result once
    (spans and values below 2 ** 53, as decimals of up to 15 digits and timestamps within 285 years are).
    """
    span = (high - low).astype(xp.float64)
    base = low.astype(xp.float64)
    product = span * delta
    error = _product_error(span, delta, product)
    total = base + product
    virtual = total - base
    rounding = (base - (total - virtual)) + (product - virtual)
    return xp.trunc(total + (rounding + error)).astype(xp.int64)


class Mode(ValueList):
    """``mode(x)``: a group's most frequent value (among equally frequent ones, the least)."""

    def result(self, device, group_ids, columns, groups):
        xp = device.xp
        values = columns[0]
        order, ordered = _group_order(device, group_ids, groups, [values], [True], [False], stable=False)
        sorted_groups = group_ids[order]
        m = int(order.shape[0])
        new_run = xp.ones(m, dtype=xp.bool_)
        if m > 1:
            new_run[1:] = xp.any(ordered[:, 1:] != ordered[:, :-1], axis=0) | (sorted_groups[1:] != sorted_groups[:-1])
        run_starts = xp.nonzero(new_run)[0]
        run_lengths = xp.diff(xp.concatenate([run_starts, xp.asarray([m], dtype=run_starts.dtype)]))
        run_groups = sorted_groups[run_starts]
        # per group: the longest run, the earliest (least value) among equally long ones: runs are in group
        # then value order, so one stable sort by (group, longest first) puts each group's winner first
        best = xp.argsort(run_groups * (m + 1) + (m - run_lengths), kind="stable")
        best_groups = run_groups[best]
        first_of_group = xp.ones(best.shape[0], dtype=xp.bool_)
        if best.shape[0] > 1:
            first_of_group[1:] = best_groups[1:] != best_groups[:-1]
        winners = best[first_of_group]
        rows = xp.zeros(groups, dtype=xp.int64)
        valid = xp.zeros(groups, dtype=xp.bool_)
        rows[run_groups[winners]] = order[run_starts[winners]]
        valid[run_groups[winners]] = True
        picked = gather_column(device, values, rows)
        return Column(picked.dtype, picked.data, valid, picked.offsets, picked.dictionary)


class StringAgg(ValueList):
    """``string_agg(x, sep [ORDER BY y])``: a group's strings joined by ``sep`` (NULL separator: NULL).

    Without ORDER BY the strings keep the order they arrived in (DuckDB's
    order is unspecified too); with it, rows sort by ``y`` (then by each further key) stably.
    """

    def result(self, device, group_ids, columns, groups):
        xp = device.xp
        separator = self.call.parameter
        if separator is None:
            return self.empty_result(device, groups)
        values = columns[0]
        order, _ = _group_order(device, group_ids, groups, columns[1:], *self.order_directions())
        order = order.astype(xp.int64)
        m = int(order.shape[0])
        counts, starts = _segments(device, group_ids, groups)
        sorted_groups = group_ids[order]
        last = xp.ones(m, dtype=xp.bool_)
        if m > 1:
            last[:-1] = sorted_groups[1:] != sorted_groups[:-1]
        # pieces: each value, then the separator unless it ends its group; the separator is the row after the values
        pieces = xp.stack([order, xp.full(m, m, dtype=xp.int64)], axis=1).reshape(-1)
        keep = xp.stack([xp.ones(m, dtype=xp.bool_), ~last], axis=1).reshape(-1)
        sep = Column(pa.string(), xp.asarray(np.frombuffer(separator.encode(), dtype=np.uint8).copy()), None,
                     xp.asarray(np.asarray([0, len(separator.encode())], dtype=np.int64)))
        joined = gather_column(device, concat_columns(device, [Column(values.dtype, values.data, None, values.offsets),
                                                               sep]), pieces[keep])
        piece_counts = xp.where(counts > 0, 2 * counts - 1, 0)
        bounds = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(piece_counts)])
        return Column(pa.string(), joined.data, counts > 0, joined.offsets[bounds])


class ApproxCountDistinct(ValueList):
    """``approx_count_distinct(x)``: HyperLogLog over each group's values (see the module docstring); 0 for none."""

    def update_rows(self, device, state, group_ids, columns):
        xp = device.xp
        column = columns[0]
        validity = dictionary_row_validity(device, column) if column.is_dictionary else column.validity
        hashes = hash_columns(device, [column])
        register = (hashes >> np.uint64(64 - HLL_BITS)).astype(xp.int64)
        rest = hashes & np.uint64((1 << (64 - HLL_BITS)) - 1)
        rank = (64 - HLL_BITS) - self._bit_length(device, rest) + 1  # leading zeros of the 52 bits, plus one
        words = Column(pa.int64(), (register << 8) | rank, validity)
        self._keep(device, state, group_ids, [words])
        self._compact_when_due(device, state)

    def merge(self, device, state, group_ids, columns):
        self._keep(device, state, group_ids, columns)
        self._compact_when_due(device, state)

    @staticmethod
    def _bit_length(device: Device, words: Any) -> Any:
        """Return the bit length of each ``uint64`` word below ``2 ** 52`` (0 for 0), exactly."""
        xp = device.xp
        exact = words.astype(xp.int64)
        positive = exact > 0
        # log2 of a float is the bit length less one, except that it may round up just below a power of two
        top = xp.floor(xp.log2(xp.where(positive, exact, 1).astype(xp.float64))).astype(xp.int64)
        top = xp.where(xp.left_shift(xp.ones_like(exact), top) > exact, top - 1, top)
        return xp.where(positive, top + 1, 0)

    def _compact_when_due(self, device: Device, state: AggregateState) -> None:
        pending = sum(int(ids.shape[0]) for ids, _ in state.values[1:])
        if len(state.values) > 1 and pending >= max(_COMPACT_AFTER, int(state.values[0][0].shape[0])):
            self._compacted(device, state)

    def _compacted(self, device: Device, state: AggregateState) -> tuple[Any, Any] | None:
        """Keep only the greatest rank per group and register; return the groups and words."""
        kept = self.gathered(device, state)
        if kept is None:
            return None
        xp = device.xp
        group_ids, (words,) = kept
        data = words.data
        # one int64 key: group, register, then the greatest rank first (ranks are below 64)
        order = xp.argsort((group_ids << (HLL_BITS + 6)) | ((data >> 8) << 6) | (63 - (data & 0xFF)))
        group_ids, data = group_ids[order], data[order]
        first = xp.ones(int(data.shape[0]), dtype=xp.bool_)
        if data.shape[0] > 1:
            first[1:] = (group_ids[1:] != group_ids[:-1]) | ((data[1:] >> 8) != (data[:-1] >> 8))
        group_ids, data = group_ids[first], data[first]
        state.values[:] = [(group_ids, (Column(pa.int64(), data),))]
        return group_ids, data

    def value_rows(self, device, state, groups):
        kept = self._compacted(device, state)
        if kept is None:
            return None
        group_ids, data = kept  # sorted by group
        return group_ids, [(self.name, Column(pa.int64(), data))]

    def extract(self, device, state, groups):
        if not self.final_output:
            raise NotImplementedError("approx_count_distinct's partial rows are emitted through ValueRows")
        xp = device.xp
        kept = self._compacted(device, state)
        if kept is None:
            return [(self.name, Column(pa.int64(), xp.zeros(groups, dtype=xp.int64)))]
        group_ids, data = kept
        ranks = (data & 0xFF).astype(xp.float64)
        inverse = xp.bincount(group_ids, weights=xp.exp2(-ranks), minlength=groups)
        filled, _ = _segments(device, group_ids, groups)
        empty = _REGISTERS - filled
        m = float(_REGISTERS)
        alpha = 0.7213 / (1.0 + 1.079 / m)
        raw = alpha * m * m / (inverse + empty)
        # small ranges: linear counting over the empty registers (HyperLogLog's correction)
        with np.errstate(divide="ignore"):
            linear = m * xp.log(m / xp.maximum(empty, 1).astype(xp.float64))
        estimate = xp.where((raw <= 2.5 * m) & (empty > 0), linear, raw)
        estimate = xp.where(filled > 0, estimate, 0.0)
        return [(self.name, Column(pa.int64(), xp.rint(estimate).astype(xp.int64)))]


#: The value-list aggregates by engine function name (registered in :mod:`gpu_engine.aggregation.functions`).
VALUE_LIST_CLASSES = {"median": Quantile, "quantile_cont": Quantile, "quantile_disc": Quantile,
                      "approx_quantile": Quantile, "mode": Mode, "string_agg": StringAgg,
                      "approx_count_distinct": ApproxCountDistinct}


class ValueRows:
    """The rows of a partial step whose aggregates include value lists (see the module docstring).

    Built from the functions and states of ``groups`` groups; :attr:`rows` rows
    in all, :attr:`row_group` the group of each (groups in order, each at least
    one row).
    """

    def __init__(self, device: Device, functions: list[AggregateFunction], states: list[AggregateState],
                 groups: int):
        xp = device.xp
        self.device = device
        self._lists: dict[int, tuple[Any, Any, list[tuple[str, Column]]]] = {}
        rows_per_group = xp.ones(groups, dtype=xp.int64)
        for function, state in zip(functions, states):
            if not isinstance(function, ValueList):
                continue
            sorted_rows = function.value_rows(device, state, groups)
            if sorted_rows is None:
                counts, starts, columns = xp.zeros(groups, dtype=xp.int64), xp.zeros(groups, dtype=xp.int64), None
            else:
                counts, starts = _segments(device, sorted_rows[0], groups)
                columns = sorted_rows[1]
            self._lists[id(function)] = (counts, starts, columns)
            rows_per_group = xp.maximum(rows_per_group, counts)
        ends = xp.cumsum(rows_per_group)
        self.rows = int(device.read_scalar(ends, -1)) if groups else 0
        positions = xp.arange(self.rows, dtype=xp.int64)
        self.row_group = xp.searchsorted(ends, positions, side="right").astype(xp.int64)
        self._rank = positions - (ends - rows_per_group)[self.row_group]

    @staticmethod
    def needed(functions: list[AggregateFunction]) -> bool:
        """Return True when a partial step of ``functions`` emits value lists (so rows are not one per group)."""
        return any(isinstance(f, ValueList) and not f.final_output for f in functions)

    def holds(self, function: AggregateFunction) -> bool:
        """Return True when ``function``'s columns are a value list spread here."""
        return id(function) in self._lists

    def keys(self, column: Column) -> Column:
        """Return a grouping key column (one row per group) repeated on each of its group's rows."""
        return gather_column(self.device, column, self.row_group)

    def first_rows(self, results: list[tuple[str, Column]], groups: int) -> list[tuple[str, Column]]:
        """Return one-row-per-group intermediate columns on each group's first row, NULL on the others."""
        xp = self.device.xp
        index = xp.where(self._rank == 0, self.row_group, groups)
        return [(name, gather_column(self.device, _with_null_row(self.device, column), index))
                for name, column in results]

    def values(self, function: ValueList) -> list[tuple[str, Column]]:
        """Return ``function``'s value list columns: a group's values on its rows, NULL beyond them."""
        xp = self.device.xp
        counts, starts, columns = self._lists[id(function)]
        if columns is None:
            return [(name, _null_column(self.device, dtype, self.rows))
                    for name, dtype in function.intermediate_columns()]
        total = len(columns[0][1])
        index = xp.where(self._rank < counts[self.row_group], starts[self.row_group] + self._rank, total)
        return [(name, gather_column(self.device, _with_null_row(self.device, column), index))
                for name, column in columns]
