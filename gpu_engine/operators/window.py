"""Compute window functions over sorted partitions (Velox's Window); a pipeline barrier."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_batches
from gpu_engine.columnar.types import is_decimal, is_floating, is_interval, physical_dtype
from gpu_engine.errors import ExecutionError
from gpu_engine.exec.operator import BarrierOperator
from gpu_engine.kernels.gather import dictionary_row_validity, gather_column
from gpu_engine.kernels.sort import dense_ranks, key_changes, packed_key_words, sort_key_words, stable_order
from gpu_engine.expressions.numeric import as_float
from gpu_engine.expressions.date_functions import add_interval
from gpu_engine.expressions.temporal import micros_of
from gpu_engine.kernels.window import (
    MAX, MIN, SUM, frame_loop, frame_tree, range_bound, segment_bounds, segmented_scan,
)
from gpu_engine.kernels.window_moments import frame_comoments, frame_moments, merged_moments, moments_result
from gpu_engine.plans.aggregates import COVARIANCE_FUNCTIONS, VARIANCE_FUNCTIONS
from gpu_engine.plans.intervals import MICROS_PER_DAY, IntervalValue
from gpu_engine.plans.nodes import WindowFrame, WindowFunctionCall, WindowNode
from gpu_engine.plans.window_functions import HOLISTIC_WINDOW_FUNCTIONS, covers_whole_partition

__all__ = ["Window"]

_SCAN_OPS = {"sum": SUM, "avg": SUM, "count": SUM, "min": MIN, "max": MAX}


#: The sign bit of an int64 word: flipping it orders UBIGINT words as signed ones (windowed min/max).
_SIGN_BIT = np.int64(-2**63)

#: The widest ROWS frame (in rows) an aggregate reads row by row; wider ones read a segment tree.
FRAME_LOOP_MAX_ROWS = 64


def _rows_width(frame: WindowFrame) -> int:
    """Return how many rows a ROWS frame bounded on both sides spans (before clipping to the partition)."""
    def position(bound: str, offset: int) -> int:
        return {"PRECEDING": -offset, "FOLLOWING": offset}.get(bound, 0)

    return position(frame.end, frame.end_offset) - position(frame.start, frame.start_offset) + 1


def _micros_between(offset: Any) -> int:
    """Return an INTERVAL offset (days and microseconds) as microseconds, a whole-days integer offset as days'."""
    if isinstance(offset, IntervalValue):
        return offset.days * MICROS_PER_DAY + offset.micros
    return int(offset) * MICROS_PER_DAY


def _has_range_offset(frame: WindowFrame) -> bool:
    return frame.kind == "RANGE" and bool({frame.start, frame.end} & {"PRECEDING", "FOLLOWING"})


class _SortedRows:
    """Per-row bounds of the sorted input, each computed once when a function first asks for it.

    Positions are in sorted order; ``part_*`` bound a row's partition, ``peer_*`` its peer group (rows of
    its partition with equal order keys; without order keys the whole partition).
    """

    def __init__(self, device, new_partition: Any, new_peer: Any):
        self.device = device
        xp = device.xp
        self.n = int(new_partition.shape[0])
        self.row = xp.arange(self.n, dtype=xp.int64)
        self.new_partition = new_partition
        self.new_peer = new_peer
        self.part_segment, self.part_start, self.part_end = segment_bounds(device, new_partition)
        self._peers = None
        self.range_key: tuple | None = None  # (sorted values, validity, descending, nulls_first, scale): see frame

    @property
    def peers(self) -> tuple[Any, Any, Any]:
        if self._peers is None:
            self._peers = segment_bounds(self.device, self.new_peer)
        return self._peers

    def frame(self, frame: WindowFrame) -> tuple[Any, Any]:
        """Return each row's frame as ``[start, end)`` positions, clipped to its partition (may be empty)."""
        xp = self.device.xp
        by_peers = frame.kind in ("RANGE", "GROUPS")  # CURRENT ROW is the row's peer group
        _, peer_start, peer_end = self.peers if by_peers else (None, None, None)
        starts = {"UNBOUNDED PRECEDING": lambda: self.part_start,
                  "PRECEDING": lambda: self.row - frame.start_offset,
                  "CURRENT ROW": lambda: peer_start if by_peers else self.row,
                  "FOLLOWING": lambda: self.row + frame.start_offset}
        ends = {"UNBOUNDED FOLLOWING": lambda: self.part_end,
                "FOLLOWING": lambda: self.row + frame.end_offset + 1,
                "CURRENT ROW": lambda: peer_end if by_peers else self.row + 1,
                "PRECEDING": lambda: self.row - frame.end_offset + 1}
        if frame.kind == "GROUPS":  # n PRECEDING / FOLLOWING: n peer groups away within the partition
            starts["PRECEDING"] = lambda: self._group_bound(-frame.start_offset, False)
            starts["FOLLOWING"] = lambda: self._group_bound(frame.start_offset, False)
            ends["PRECEDING"] = lambda: self._group_bound(-frame.end_offset, True)
            ends["FOLLOWING"] = lambda: self._group_bound(frame.end_offset, True)
        if frame.kind == "RANGE":  # n PRECEDING / FOLLOWING: the rows whose key is within n of this row's
            starts["PRECEDING"] = lambda: self._range(frame.start_offset, -1, False, peer_start)
            starts["FOLLOWING"] = lambda: self._range(frame.start_offset, 1, False, peer_start)
            ends["PRECEDING"] = lambda: self._range(frame.end_offset, -1, True, peer_end)
            ends["FOLLOWING"] = lambda: self._range(frame.end_offset, 1, True, peer_end)
        start = xp.minimum(xp.maximum(starts[frame.start](), self.part_start), self.part_end)
        end = xp.maximum(xp.minimum(ends[frame.end](), self.part_end), start)
        return start, end

    def _group_bound(self, step: int, end: bool) -> Any:
        """Return the first row (``end``: one past the last row) of the peer group ``step`` groups from each row's,
        or the partition's edge where no such group is in the partition (the frame is then clipped or empty)."""
        xp = self.device.xp
        group = xp.cumsum(self.new_peer.astype(xp.int64)) - 1  # each row's peer group, numbered over all rows
        firsts = xp.nonzero(self.new_peer)[0].astype(xp.int64)  # each group's first row
        ends = xp.concatenate([firsts[1:], xp.asarray([self.n], dtype=xp.int64)])
        low, high = group[self.part_start], group[xp.maximum(self.part_end - 1, 0)]  # the partition's groups
        target = group + step
        inside = (target >= low) & (target <= high)
        bound = (ends if end else firsts)[xp.clip(target, 0, firsts.shape[0] - 1)]
        edge = xp.where(target < low, self.part_start, self.part_end)
        return xp.where(inside, bound, edge)

    def pieces(self, frame: WindowFrame, start: Any, end: Any) -> list[tuple[Any, Any]]:
        """Return the ``[start, end)`` ranges left of each row's frame once ``frame.exclude`` takes its rows out:
        the part before the excluded rows, the part after them, and (EXCLUDE TIES) the row itself."""
        xp = self.device.xp
        if frame.exclude == "CURRENT ROW":
            gone_start, gone_end = self.row, self.row + 1
        else:  # GROUP and TIES take out the row's peers (its ORDER BY ties; without ORDER BY the partition)
            _, gone_start, gone_end = self.peers
        before_end = xp.maximum(start, xp.minimum(end, gone_start))
        after_start = xp.minimum(end, xp.maximum(start, gone_end))
        pieces = [(start, before_end), (after_start, end)]
        if frame.exclude == "TIES":
            inside = (self.row >= start) & (self.row < end)
            pieces.append((self.row, xp.where(inside, self.row + 1, self.row)))
        return pieces

    def _range(self, offset: Any, sign: int, inclusive: bool, peer_bound: Any) -> Any:
        """Return each row's bound ``offset`` away along the sort order (``sign`` -1: PRECEDING)."""
        values, valid, descending, nulls_first, targets_of = self.range_key
        return range_bound(self.device, values, valid, self.part_start, self.part_end, peer_bound, descending,
                           nulls_first, targets_of(offset, -sign if descending else sign), inclusive)


class Window(BarrierOperator):
    """Collect every batch, sort once by partition then order keys, compute each function, emit the rows.

    The output is the concatenated input plus the function columns, presented in sorted order through a
    gather map (no input column is copied). A function is computed in sorted order and moved back to input
    order through the inverse permutation, so it can sit beside the input columns under the same map. The
    buffered input, then its concatenated copy, the sort words and the results, are reserved in the operator's
    memory pool until it closes: under a memory cap a huge partition fails with MemoryCapExceeded.
    """

    node: WindowNode

    def result(self, data: Batch) -> Batch:
        if data.num_rows == 0:
            results = [Column.from_arrow(pa.array([], type=call.dtype), self.device) for call in self.node.functions]
            return Batch(data.names + self.node.function_names, data.columns + tuple(results), self.device, None, 0)
        order, rows, key_bytes = self._sort(data)
        self.set_memory_reservation(data.nbytes + key_bytes + 8 * 8 * int(order.shape[0]))  # + ~8 int64 bounds a row
        xp = self.device.xp
        inverse = xp.empty_like(order)
        inverse[order] = xp.arange(order.shape[0], dtype=order.dtype)
        statuses: list[tuple[Any, WindowFunctionCall]] = []
        if any(_has_range_offset(call.frame) for call in self.node.functions):
            rows.range_key = self._range_key(data, order)
        results = [self._compute(call, data, order, inverse, rows, statuses) for call in self.node.functions]
        overflowed = self._overflowed(statuses)
        results = [self._exact_sum(call, data, order, inverse, rows) if id(call) in overflowed else result
                   for call, result in zip(self.node.functions, results)]
        self.set_memory_reservation(data.nbytes + sum(column.nbytes for column in results) + int(order.nbytes))
        return Batch(data.names + self.node.function_names, data.columns + tuple(results), self.device,
                     order.astype(xp.int32), data.num_rows)

    # ------------------------------------------------------------------ sorting
    def _sort(self, data: Batch) -> tuple[Any, _SortedRows, int]:
        """Return the sort order, the per-row bounds and the bytes the sort words took."""
        xp = self.device.xp
        n = data.num_rows
        node = self.node
        partition = [data.column(name) for name in node.partition_keys]
        ordering = [data.column(key.name) for key in node.sort_keys]
        words = []  # each packed into one word where it fits (kernels.sort.packed_key_words): fewer sorts, compares
        if partition:
            words.append(packed_key_words(self.device, sort_key_words(
                self.device, partition, [True] * len(partition), [False] * len(partition))))
        if ordering:
            words.append(packed_key_words(self.device, sort_key_words(
                self.device, ordering, [k.ascending for k in node.sort_keys], [k.nulls_first for k in node.sort_keys])))
        if not words:
            order = xp.arange(n, dtype=xp.int64)
        else:
            order = stable_order(self.device, xp.concatenate(words[::-1], axis=0)).astype(xp.int64)
        new_partition = xp.zeros(n, dtype=xp.bool_)
        new_partition[0] = True
        if partition:
            new_partition[1:] = key_changes(self.device, words[0], order)
        new_peer = new_partition.copy()
        if ordering:
            new_peer[1:] |= key_changes(self.device, words[-1], order)
        return order, _SortedRows(self.device, new_partition, new_peer), sum(int(w.nbytes) for w in words)

    # ---------------------------------------------------------------- functions
    def _compute(self, call: WindowFunctionCall, data: Batch, order: Any, inverse: Any, rows: _SortedRows,
                 statuses: list) -> Column:
        """Return one function's column, in input order."""
        function = call.function
        if function in ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile"):
            values = self._ranking(call, rows)
            return Column(call.dtype, values[inverse])
        if function in ("lag", "lead", "first_value", "last_value", "nth_value"):
            return self._value(call, data, order, inverse, rows)
        if function in COVARIANCE_FUNCTIONS:
            return self._frame_comoments(call, data, order, inverse, rows)
        if function in HOLISTIC_WINDOW_FUNCTIONS:  # whole partitions (plan validation refuses other frames)
            return self._holistic(call, data, order, inverse, rows)
        if function in VARIANCE_FUNCTIONS:
            if call.frame.exclude or not covers_whole_partition(call.frame, self.node.sort_keys):
                return self._frame_moments(call, data, order, inverse, rows)
            return self._moments(call, data, inverse, rows)
        return self._aggregate(call, data, order, inverse, rows, statuses)

    def _moments(self, call: WindowFunctionCall, data: Batch, inverse: Any, rows: _SortedRows) -> Column:
        """Return variance/stddev over whole partitions: the aggregation's moments state per partition
        (shifted, so large offsets do not cancel), read back at each row."""
        from gpu_engine.aggregation.functions import AggregateState, aggregate_function
        from gpu_engine.plans.expressions import AggregateCall

        xp = self.device.xp
        function = aggregate_function(AggregateCall(call.function, call.args[0], call.dtype), call.sql(), True,
                                      call.dtype, True)
        state = AggregateState({array.name: xp.full(rows.n, array.fill, dtype=array.dtype)
                                for array in function.state_arrays()})
        partition = rows.part_segment[inverse].astype(xp.int64)  # each input row's partition
        function.update(self.device, state, partition, data.column(call.args[0].name))
        (_, result), = function.extract(self.device, state, rows.n)
        return Column(call.dtype, result.data[partition],
                      None if result.validity is None else result.validity[partition])

    def _holistic(self, call: WindowFunctionCall, data: Batch, order: Any, inverse: Any, rows: _SortedRows) -> Column:
        """Return ``median``, ``quantile_cont``/``quantile_disc`` or ``string_agg`` over whole partitions:
        the grouped aggregation's holistic function with one group per partition, its values handed over in the
        window's order (``string_agg`` joins them so), each partition's result read back at its rows."""
        from gpu_engine.aggregation.functions import AggregateState, aggregate_function
        from gpu_engine.plans.expressions import AggregateCall

        xp = self.device.xp
        function = call.function
        parameter = call.args[1].value if len(call.args) > 1 else None
        aggregate = aggregate_function(AggregateCall(function, call.args[0], call.dtype, parameter=parameter),
                                       call.sql(), True, call.dtype, True)
        state = AggregateState({array.name: xp.full(rows.n, array.fill, dtype=array.dtype)
                                for array in aggregate.state_arrays()})
        values = gather_column(self.device, data.column(call.args[0].name), order)
        aggregate.update(self.device, state, rows.part_segment.astype(xp.int64), values)
        (_, result), = aggregate.extract(self.device, state, rows.n)
        partition = rows.part_segment[inverse].astype(xp.int64)  # each input row's partition
        return gather_column(self.device, result, partition)

    def _frame_moments(self, call: WindowFunctionCall, data: Batch, order: Any, inverse: Any,
                       rows: _SortedRows) -> Column:
        """Return variance/stddev over running, sliding and RANGE frames: each frame's count, mean and squared
        deviations from a segment tree of moments (:mod:`gpu_engine.kernels.window_moments`; no sums of
        squares, so values far from zero keep their digits)."""
        xp = self.device.xp
        column = data.column(call.args[0].name)
        validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
        valid = xp.ones(rows.n, dtype=xp.bool_) if validity is None else validity[order]
        start, end = rows.frame(call.frame)
        values = as_float(xp, column)[order]
        if call.frame.exclude:  # the pieces left of each frame, their moments merged by Chan's formula
            counts = means = m2s = None
            for piece_start, piece_end in rows.pieces(call.frame, start, end):
                piece = frame_moments(self.device, values, valid, piece_start, piece_end)
                counts, means, m2s = piece if counts is None else merged_moments(xp, (counts, means, m2s), piece)
        else:
            counts, _, m2s = frame_moments(self.device, values, valid, start, end)
        values, has = moments_result(self.device, call.function, counts, m2s)
        return Column(call.dtype, values[inverse], has[inverse])

    def _frame_comoments(self, call: WindowFunctionCall, data: Batch, order: Any, inverse: Any,
                         rows: _SortedRows) -> Column:
        """Return ``covar_*``, ``corr`` or ``regr_*`` of each row's frame: the frame's pair moments from a segment
        tree (:func:`~gpu_engine.kernels.window_moments.frame_comoments`), finalized by the grouped aggregation's
        own :class:`~gpu_engine.aggregation.functions.Moments` (DuckDB's NULL and NaN cases)."""
        from gpu_engine.aggregation.functions import AggregateState, aggregate_function
        from gpu_engine.plans.expressions import AggregateCall

        xp = self.device.xp
        columns = [data.column(arg.name) for arg in call.args[:2]]
        valid = xp.ones(rows.n, dtype=xp.bool_)
        for column in columns:
            validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
            if validity is not None:
                valid = valid & validity[order]
        start, end = rows.frame(call.frame)
        x, y = (as_float(xp, column)[order] for column in columns)
        state = AggregateState(frame_comoments(self.device, x, y, valid, start, end))
        function = aggregate_function(AggregateCall(call.function, call.args[0], call.dtype, second=call.args[1]),
                                      call.sql(), True, call.dtype, True)
        (_, result), = function.extract(self.device, state, rows.n)
        return Column(call.dtype, result.data[inverse], None if result.validity is None else result.validity[inverse])

    def _ranking(self, call: WindowFunctionCall, rows: _SortedRows) -> Any:
        xp = self.device.xp
        function = call.function
        position = rows.row - rows.part_start  # 0-based row in its partition
        if function == "row_number":
            return position + 1
        size = rows.part_end - rows.part_start
        if function == "ntile":  # DuckDB's: the first (size mod buckets) buckets hold one row more
            buckets = xp.minimum(xp.int64(call.args[0].value), size)
            bucket_size = size // buckets
            large = size - buckets * bucket_size
            small_start = large * (bucket_size + 1)
            return xp.where(position < small_start, 1 + position // (bucket_size + 1),
                            1 + large + (position - small_start) // xp.maximum(bucket_size, 1))
        peer_segment, peer_start, peer_end = rows.peers
        if function == "rank":
            return peer_start - rows.part_start + 1
        if function == "dense_rank":
            return peer_segment - peer_segment[rows.part_start] + 1
        if function == "percent_rank":
            rank = (peer_start - rows.part_start).astype(xp.float64)
            return xp.where(size > 1, rank / xp.maximum(size - 1, 1).astype(xp.float64), 0.0)
        return (peer_end - rows.part_start).astype(xp.float64) / size.astype(xp.float64)  # cume_dist

    def _value(self, call: WindowFunctionCall, data: Batch, order: Any, inverse: Any, rows: _SortedRows) -> Column:
        """Gather another row's value: each row's source position in sorted order, or none (NULL or the default)."""
        xp = self.device.xp
        function = call.function
        column = data.column(call.args[0].name)
        if call.frame.exclude and function in ("first_value", "last_value", "nth_value"):
            source, found = self._excluded_source(call, column, order, rows)
        elif call.ignore_nulls:
            source, found = self._non_null_source(call, column, order, rows)
        elif function in ("lag", "lead"):
            offset = call.args[1].value if len(call.args) > 1 else 1
            source = rows.row - offset if function == "lag" else rows.row + offset
            found = (source >= rows.part_start) & (source < rows.part_end)
        else:
            start, end = rows.frame(call.frame)
            source = {"first_value": start, "last_value": end - 1}.get(function)
            if source is None:
                source = start + (call.args[1].value - 1)
            found = (source >= start) & (source < end)
        base = order[xp.where(found, source, 0)]  # the base row each sorted position reads
        base = base[inverse]
        found = found[inverse]
        default = call.args[2] if len(call.args) > 2 else None
        if default is not None and default.value is not None:
            extra = Batch(("v",), (Column.from_arrow(pa.array([default.value], type=call.dtype), self.device),),
                          self.device, None, 1)
            column = concat_batches([Batch(("v",), (column,), self.device, None, data.num_rows), extra]).columns[0]
            return gather_column(self.device, column, xp.where(found, base, data.num_rows))
        result = gather_column(self.device, column, base)
        validity = found if result.validity is None else result.validity & found
        return Column(result.dtype, result.data, validity, result.offsets, result.dictionary, result.fingerprint)

    def _excluded_source(self, call: WindowFunctionCall, column: Column, order: Any, rows: _SortedRows
                         ) -> tuple[Any, Any]:
        """Return the source position of ``first_value``/``last_value``/``nth_value`` over a frame with EXCLUDE.

        The frame's rows left are its pieces in position order (before the excluded rows, the row itself for
        TIES, after them); the wanted ordinal (0, the count - 1, or n - 1) is found in the piece holding it.
        With IGNORE NULLS the ordinal and the pieces count non-NULL rows only (their positions gathered).
        """
        xp = self.device.xp
        start, end = rows.frame(call.frame)
        pieces = rows.pieces(call.frame, start, end)
        if len(pieces) == 3:  # TIES: the row itself lies between the rows before and after its peers
            pieces = [pieces[0], pieces[2], pieces[1]]
        if call.ignore_nulls:
            validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
            valid = xp.ones(rows.n, dtype=xp.bool_) if validity is None else validity[order]
            before = xp.zeros(rows.n + 1, dtype=xp.int64)  # non-NULL rows before each position
            before[1:] = xp.cumsum(valid, dtype=xp.int64)
            positions = xp.concatenate([xp.flatnonzero(valid).astype(xp.int64), xp.zeros(1, dtype=xp.int64)])
            counts = [before[piece_end] - before[piece_start] for piece_start, piece_end in pieces]
        else:
            counts = [piece_end - piece_start for piece_start, piece_end in pieces]
        total = sum(counts)
        ordinal = {"first_value": xp.zeros_like(total), "last_value": total - 1}.get(call.function)
        if ordinal is None:
            ordinal = xp.full_like(total, call.args[1].value - 1)
        found = (ordinal >= 0) & (ordinal < total)
        source = xp.zeros_like(total)
        seen = xp.zeros_like(total)
        for (piece_start, _), count in zip(pieces, counts):
            inside = (ordinal >= seen) & (ordinal < seen + count)
            within = xp.where(inside, ordinal - seen, 0)
            position = positions[before[piece_start] + within] if call.ignore_nulls else piece_start + within
            source = xp.where(inside, position, source)
            seen = seen + count
        return source, found

    def _non_null_source(self, call: WindowFunctionCall, column: Column, order: Any, rows: _SortedRows
                         ) -> tuple[Any, Any]:
        """Return each row's source position and whether it has one, counting only non-NULL values (IGNORE NULLS).

        Why counting: with the running count of non-NULL rows before each position and the positions of the
        non-NULL rows, "the k-th non-NULL value before this row" is one subtraction and one gather per row,
        in parallel (finding the positions reads their count back: one host sync).
        """
        xp = self.device.xp
        validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
        valid = xp.ones(rows.n, dtype=xp.bool_) if validity is None else validity[order]
        before = xp.zeros(rows.n + 1, dtype=xp.int64)  # non-NULL rows before each position
        before[1:] = xp.cumsum(valid, dtype=xp.int64)
        positions = xp.concatenate([xp.flatnonzero(valid).astype(xp.int64), xp.zeros(1, dtype=xp.int64)])
        function = call.function
        if function in ("lag", "lead"):
            offset = call.args[1].value if len(call.args) > 1 else 1
            if offset == 0:  # the row itself, NULL or not
                return rows.row, xp.ones(rows.n, dtype=xp.bool_)
            if function == "lag":
                ordinal = before[rows.row] - offset
                found = ordinal >= before[rows.part_start]
            else:
                ordinal = before[rows.row + 1] + offset - 1
                found = ordinal < before[rows.part_end]
        else:
            start, end = rows.frame(call.frame)
            if function == "last_value":
                ordinal = before[end] - 1
                found = ordinal >= before[start]
            else:
                ordinal = before[start] + (call.args[1].value - 1 if function == "nth_value" else 0)
                found = ordinal < before[end]
        return positions[xp.where(found, ordinal, 0)], found

    def _aggregate(self, call: WindowFunctionCall, data: Batch, order: Any, inverse: Any, rows: _SortedRows,
                   statuses: list) -> Column:
        xp = self.device.xp
        start, end = rows.frame(call.frame)
        pieces = rows.pieces(call.frame, start, end) if call.frame.exclude else None
        if call.function == "count_star":
            if pieces is not None:
                return Column(call.dtype, sum(e - s for s, e in pieces)[inverse])
            return Column(call.dtype, (end - start)[inverse])
        column = data.column(call.args[0].name)
        unsigned = column.dtype == pa.uint64()  # values past 2^63 wrap as int64 words
        if unsigned and call.function in ("sum", "avg"):  # the halves' sums are exact whatever the values
            return self._exact_sum(call, data, order, inverse, rows)
        validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
        valid = xp.ones(rows.n, dtype=xp.bool_) if validity is None else validity[order]
        representatives = None
        if call.function == "count":  # counts read validity only
            values = xp.zeros(rows.n, dtype=xp.int64)
        elif column.is_string or is_interval(column.dtype):  # min/max of their ranks, then a row holding the value
            ranks, representatives = self._string_ranks(column)
            values = ranks[order]
        else:
            values = self._scan_values(column, call)[order]
            if unsigned:  # min/max: flipping the sign bit orders unsigned words as signed ones
                values = values ^ _SIGN_BIT
        op = _SCAN_OPS[call.function]
        status = xp.zeros(1, dtype=xp.int64)
        if pieces is not None:
            value, count = self._pieces_values(op, values, valid, pieces, status)
        else:
            value, count = self._frame_values(op, values, valid, call.frame, rows, start, end, status)
        if call.function == "count":
            return Column(call.dtype, count[inverse])
        if op == SUM and not is_floating(call.args[0].dtype):
            statuses.append((status, call))
        has = (count > 0)[inverse]
        value = value[inverse]
        count = count[inverse]
        if call.function == "avg":
            scale = call.args[0].dtype.scale if is_decimal(call.args[0].dtype) else 0
            average = value.astype(xp.float64) / xp.maximum(count, 1).astype(xp.float64)
            return Column(call.dtype, average / (10.0 ** scale) if scale else average, has)
        if call.function == "sum":
            return Column(call.dtype, value, has)
        if representatives is not None:
            result = gather_column(self.device, column, representatives[xp.where(has, value, 0)])
            return Column(result.dtype, result.data, has, result.offsets, result.dictionary, result.fingerprint)
        if unsigned:
            return Column(call.dtype, (value ^ _SIGN_BIT).view(xp.uint64), has)
        return Column(call.dtype, value.astype(physical_dtype(call.dtype), copy=False), has)

    def _pieces_values(self, op: int, values: Any, valid: Any, pieces: list, status: Any) -> tuple[Any, Any]:
        """Return each sorted row's result over a frame with rows excluded: the pieces' segment-tree results
        combined (a sum adds, min/max keep the better of the pieces that hold a value)."""
        xp = self.device.xp
        value = count = None
        for piece_start, piece_end in pieces:
            part, part_count = frame_tree(self.device, op, values, valid, piece_start, piece_end, status)
            if op == SUM:  # a piece without values holds no sum (its word is not zero)
                part = xp.where(part_count > 0, part, xp.zeros(1, dtype=part.dtype))
            if value is None:
                value, count = part, part_count
                continue
            if op == SUM:
                value = value + part
            else:
                better = xp.minimum(value, part) if op == MIN else xp.maximum(value, part)
                value = xp.where(count == 0, part, xp.where(part_count == 0, value, better))
            count = count + part_count
        return value, count

    def _frame_values(self, op: int, values: Any, valid: Any, frame: WindowFrame, rows: _SortedRows, start: Any,
                      end: Any, status: Any) -> tuple[Any, Any]:
        """Return each sorted row's frame result and non-NULL count, by the cheapest scan its frame allows."""
        xp = self.device.xp
        if frame.start == "UNBOUNDED PRECEDING":  # a running result, read at the frame's last row
            running, counts = segmented_scan(self.device, op, values, valid, rows.new_partition, rows.part_end,
                                             False, status)
            at = xp.maximum(end - 1, 0)
        elif frame.end == "UNBOUNDED FOLLOWING":  # a running result from the partition's end, read at its first
            running, counts = segmented_scan(self.device, op, values, valid, rows.new_partition, rows.part_end,
                                             True, status)
            at = xp.minimum(start, rows.n - 1)
        elif frame.kind == "ROWS" and _rows_width(frame) <= FRAME_LOOP_MAX_ROWS:  # a narrow frame: read it whole
            running, counts = frame_loop(self.device, op, values, valid, start, end, status)
            at = rows.row
        else:  # a wide frame, or a RANGE frame whose width the data decides: a segment tree
            running, counts = frame_tree(self.device, op, values, valid, start, end, status)
            at = rows.row
        return running[at], xp.where(end > start, counts[at], 0)

    def _exact_sum(self, call: WindowFunctionCall, data: Batch, order: Any, inverse: Any,
                   rows: _SortedRows) -> Column:
        """Recompute an integer/decimal ``sum``/``avg`` whose 64-bit frame sums overflowed, exactly (128 bits).

        Why two scans of halves: each 64-bit value is ``high * 2^32 + low``
        with ``low`` in [0, 2^32) and ``high`` in [-2^31, 2^31); frame sums of
        either half stay within 64 bits for frames under 2^31 rows, so the
        existing scans run on them unchanged and the two sums combine into
        DuckDB's HUGEINT/DECIMAL(38) words. Only a window whose sums overflow
        pays for it (the first scan's status says so), and every ``UBIGINT`` one
        (its values past 2^63 are negative as ``int64`` words: the high half is
        then the word's top 32 bits, not its sign-extended shift).
        """
        xp = self.device.xp
        if call.frame.exclude:
            raise ExecutionError(f"{call.sql()}: a sum past 64 bits (or of UBIGINT) over a frame with EXCLUDE is not "
                                 "supported")
        start, end = rows.frame(call.frame)
        column = data.column(call.args[0].name)
        validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
        valid = xp.ones(rows.n, dtype=xp.bool_) if validity is None else validity[order]
        values = self._scan_values(column, call)[order]
        # the high half of an unsigned word is its top 32 bits shifted in as zeros (an int64 word's: the sign)
        upper = (values.view(xp.uint64) >> 32).view(xp.int64) if column.dtype == pa.uint64() else values >> 32
        status = xp.zeros(1, dtype=xp.int64)
        low, count = self._frame_values(SUM, values & 0xFFFFFFFF, valid, call.frame, rows, start, end, status)
        high, _ = self._frame_values(SUM, upper, valid, call.frame, rows, start, end, status)
        self._check_statuses([(status, call)])  # only frames of 2^31 rows or more get here
        low, high, count = low[inverse], high[inverse], count[inverse]
        has = count > 0
        if call.function == "avg":
            scale = call.args[0].dtype.scale if is_decimal(call.args[0].dtype) else 0
            total = high.astype(xp.float64) * 4294967296.0 + low.astype(xp.float64)
            average = total / xp.maximum(count, 1).astype(xp.float64)
            return Column(call.dtype, average / (10.0 ** scale) if scale else average, has)
        shifted = (high & 0xFFFFFFFF) << 32  # high * 2^32's low word (as bits); its high word is high >> 32
        words = xp.empty((rows.n, 2), dtype=xp.int64)
        low_word = shifted.view(xp.uint64) + low.view(xp.uint64)
        words[:, 0] = low_word.view(xp.int64)
        words[:, 1] = (high >> 32) + (low_word < shifted.view(xp.uint64)).astype(xp.int64)
        words[~has] = 0
        return Column(call.dtype, words, has)

    def _string_ranks(self, column: Column) -> tuple[Any, Any]:
        """Return each row's dense rank among the column's values (equal strings share one) and a row per rank."""
        ranks, order, dense = dense_ranks(self.device, [column], [True], [False])
        representatives = self.device.xp.empty_like(dense)
        representatives[dense] = order  # any row of a rank holds its value
        return ranks, representatives

    def _range_key(self, data: Batch, order: Any) -> tuple:
        """Return the one sort key's values in sorted order as RANGE offsets compare them, and how an offset
        becomes a distance in those values' units.

        A decimal key is its scaled integers, scaled further when an offset has more decimal places (``0.005``
        over a DECIMAL(5, 2)), so every bound is exact; a DOUBLE offset over an integer or decimal key compares
        as DOUBLE. A DATE key is days (an integer offset counts days) or, with an INTERVAL offset, microseconds
        as a TIMESTAMP key is: ``date - INTERVAL`` is a TIMESTAMP in DuckDB; an offset with months moves each key
        by calendar months (``2000-03-31 - INTERVAL 1 MONTH`` is ``2000-02-29``, as DuckDB adds months first,
        then days and microseconds). Returns the sorted values, their validity, the order's direction and NULL
        placement, and ``targets(offset, step)``: each row's key moved by ``step`` (+1/-1) times the offset.
        """
        xp = self.device.xp
        key = self.node.sort_keys[0]
        column = data.column(key.name)
        offsets = [offset for call in self.node.functions if _has_range_offset(call.frame)
                   for bound, offset in ((call.frame.start, call.frame.start_offset),
                                         (call.frame.end, call.frame.end_offset))
                   if bound in ("PRECEDING", "FOLLOWING")]
        valid = xp.ones(len(column), dtype=xp.bool_) if column.validity is None else column.validity[order]
        dtype = column.dtype
        def moved_by(values: Any, delta_of) -> Callable[[Any, int], Any]:
            return lambda offset, step: values + values.dtype.type(step * delta_of(offset))

        if pa.types.is_timestamp(dtype) or (pa.types.is_date32(dtype) and any(
                isinstance(offset, IntervalValue) for offset in offsets)):
            values = micros_of(xp, column)[order]
            by_micros = moved_by(values, _micros_between)

            def targets(offset: Any, step: int) -> Any:  # months have no fixed length: each key moves by its own
                if isinstance(offset, IntervalValue) and offset.months:
                    return add_interval(xp, column, step * offset.months, step * offset.days,
                                        step * offset.micros)[order]
                return by_micros(offset, step)

            return values, valid, not key.ascending, key.nulls_first, targets
        values = self._scan_values(column, f"RANGE frames over {key.name}")[order]
        scale = dtype.scale if is_decimal(dtype) else 0
        if values.dtype.kind == "i" and any(isinstance(offset, float) for offset in offsets):
            values = values.astype(xp.float64) / 10 ** scale
            return values, valid, not key.ascending, key.nulls_first, moved_by(values, float)
        if values.dtype.kind == "f":
            return values, valid, not key.ascending, key.nulls_first, moved_by(values, float)
        places = max([scale] + [-offset.as_tuple().exponent for offset in offsets if isinstance(offset, Decimal)])
        if places > scale:
            values = values * 10 ** (places - scale)
        return values, valid, not key.ascending, key.nulls_first, moved_by(values, lambda offset: int(
            offset * 10 ** places))

    def _scan_values(self, column: Column, call: WindowFunctionCall | str) -> Any:
        """Return a column's values as the kernels read them: ``float64`` or ``int64``."""
        xp = self.device.xp
        data = column.data
        if data.ndim == 2:  # a wide decimal's (low, high) words: windows sum 64-bit values
            fits = xp.all(data[:, 1] == (data[:, 0] >> 63))
            if not self.device.read_scalars([fits])[0]:
                what = call if isinstance(call, str) else call.sql()
                raise ExecutionError(f"{what} over values beyond 64 bits is not supported yet")
            data = xp.ascontiguousarray(data[:, 0])
        return data.astype(xp.float64 if is_floating(column.dtype) else xp.int64, copy=False)

    def _overflowed(self, statuses: list) -> set[int]:
        """Return the ids of the calls whose 64-bit frame sums overflowed (one host read for all of them)."""
        if not statuses:
            return set()
        flags = self.device.read_scalars([status[0] for status, _ in statuses])
        return {id(call) for flag, (_, call) in zip(flags, statuses) if flag}

    def _check_statuses(self, statuses: list) -> None:
        overflowed = self._overflowed(statuses)
        for call in (call for _, call in statuses if id(call) in overflowed):
            raise ExecutionError(f"Overflow in {call.sql()}: a window frame of 2^31 rows or more summing "
                                 "values near 64 bits is not supported")
