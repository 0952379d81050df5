"""Aggregate functions as objects: state layout, update, merge and extract (Velox's ``exec::Aggregate``).

Why: two operators keep aggregation state, the eager HashAggregation (a table
of dense group ids, one kernel per aggregate per batch) and the fused
aggregation (a hash table of slots updated inside one generated kernel). Both
must lay out state, read intermediate columns and produce results the same
way, or fused and unfused plans would disagree. Each function therefore
declares, once:

* :meth:`AggregateFunction.state_arrays` -- the device arrays it keeps per group
  (name, dtype, the value a fresh group starts from);
* :meth:`~AggregateFunction.update` / :meth:`~AggregateFunction.merge` -- the
  eager updates from raw rows and from a partial step's intermediate columns;
* :meth:`~AggregateFunction.emit_update` / :meth:`~AggregateFunction.emit_merge`
  -- the same updates as lines of a generated kernel (:mod:`gpu_engine.codegen`);
* :meth:`~AggregateFunction.extract` -- the output columns from the state of
  ``groups`` groups: intermediate columns for partial and intermediate steps,
  results for final and single ones.

Integer and decimal sums (and merged counts) accumulate as two 64-bit halves
(:func:`~gpu_engine.kernels.aggregate.group_sum_int`), so they never wrap, and
are extracted as 128-bit values (DuckDB's HUGEINT and decimal(38, s)): a
partial step emits them as two int64 columns (``name``, ``name$high``), a
final step as a decimal column checked at 38 digits. Steps that add 128-bit
values (merges, and raw decimals of more than 18 digits, which may be wide)
keep four 32-bit limbs instead (:func:`~gpu_engine.kernels.aggregate.group_sum_words`):
the raw int64 fast path stays two adds per row. ``min``/``max`` keep values in a
64-bit type that CUDA atomics update and a packed slot table holds (integers,
dates and bools widen to int64, float32 to float64); strings keep a string
column instead
(:class:`~gpu_engine.operators.hash_aggregation.HashAggregation` folds them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from gpu_engine.columnar.column import Column
from gpu_engine.columnar.types import is_decimal, is_floating, is_string, physical_dtype
from gpu_engine.device import Device
from gpu_engine.kernels import aggregate as kernels
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions.deferred_checks import defer_row_check
from gpu_engine.expressions.numeric import as_float, as_words, narrowed, raise_at_first
from gpu_engine.plans.aggregates import (
    ARG_KEY_SUFFIX, AVG_COUNT_SUFFIX, COMOMENT_SUFFIXES, COVARIANCE_FUNCTIONS, MOMENT_SUFFIXES, SUM_HIGH_SUFFIX,
    VARIANCE_FUNCTIONS, picks_a_row,
)
from gpu_engine.plans.expressions import AggregateCall

__all__ = ["StateArray", "AggregateState", "AggregateFunction", "aggregate_function", "aggregate_functions_of",
           "unsupported_aggregate", "StateEmitter", "StateRef"]


@dataclass(frozen=True)
class StateArray:
    """One per-group array of an aggregate's state: its name, NumPy dtype and the value of a fresh group."""

    name: str
    dtype: np.dtype
    fill: Any


@dataclass
class AggregateState:
    """The state of one aggregate over all groups: arrays named as in its layout (and strings for min/max of text)."""

    arrays: dict[str, Any] = field(default_factory=dict)
    strings: Column | None = None
    #: A holistic aggregate's kept values: ``(group ids, columns)`` pieces (:mod:`gpu_engine.aggregation.holistic`).
    values: list = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        """Return the bytes this state holds."""
        total = sum(int(array.nbytes) for array in self.arrays.values())
        shared = set()  # a dictionary that batches share (same contents: its fingerprint) is held once
        for ids, columns in self.values:
            total += int(ids.nbytes)
            for column in columns:
                total += column.nbytes
                if column.dictionary is not None:
                    key = column.dictionary.fingerprint or id(column.dictionary)
                    if key in shared:
                        total -= column.dictionary.nbytes
                    shared.add(key)
        return total + (self.strings.nbytes if self.strings is not None else 0)


@dataclass(frozen=True)
class StateRef:
    """Where one state array lives in generated code: ``array[slot]``, or ``array[slot, column]`` in a packed table."""

    array: str
    column: int | None = None

    def at(self, slot: str) -> str:
        """Return the index expression of ``slot``'s value."""
        return slot if self.column is None else f"{slot}, {self.column}"

    def item(self, slot: str) -> str:
        """Return the expression reading ``slot``'s value."""
        return f"{self.array}[{self.at(slot)}]"


class StateEmitter:
    """Write the lines of a generated kernel that change aggregation state (see :mod:`gpu_engine.codegen`).

    ``atomic`` emitters (the CUDA twin's shared state) use ``cuda.atomic``;
    plain ones (the CPU twin, or a thread's own local state) update in place.
    Aggregates only call these methods, so one description serves both.
    """

    def __init__(self, atomic: bool):
        self.atomic = atomic

    def add(self, ref: StateRef, slot: str, value: str) -> str:
        """Return a line adding ``value`` to the state at ``slot``."""
        if self.atomic:
            return f"cuda.atomic.add({ref.array}, ({ref.at(slot)}), {value})"
        return f"{ref.item(slot)} += {value}"

    def minimum(self, ref: StateRef, slot: str, value: str, is_float: bool) -> str:
        """Return a line keeping the least of the state and ``value`` (NaN greatest, as DuckDB)."""
        if self.atomic:  # callers never pass NaN (see MinMax), so float and integer atomics agree
            return f"cuda.atomic.min({ref.array}, ({ref.at(slot)}), {value})"
        item = ref.item(slot)
        if is_float:
            return f"if {value} < {item} or {item} != {item}: {item} = {value}"
        return f"if {value} < {item}: {item} = {value}"

    def maximum(self, ref: StateRef, slot: str, value: str, is_float: bool) -> str:
        """Return a line keeping the greatest of the state and ``value`` (NaN greatest)."""
        if self.atomic:  # callers never pass NaN (see MinMax)
            return f"cuda.atomic.max({ref.array}, ({ref.at(slot)}), {value})"
        item = ref.item(slot)
        if is_float:
            return f"if {value} > {item} or {value} != {value}: {item} = {value}"
        return f"if {value} > {item}: {item} = {value}"

    @staticmethod
    def flag(ref: StateRef, slot: str) -> str:
        """Return a line setting a flag (idempotent, so no atomic is needed)."""
        return f"{ref.item(slot)} = True"


def unsupported_aggregate(call: AggregateCall) -> str | None:
    """Return why no aggregation operator can compute ``call``, or None when one can (asked at plan time)."""
    if call.function not in ("min", "max", "any_value") or call.arg is None:
        return None
    value_type = call.arg.dtype
    if (pa.types.is_integer(value_type) or is_floating(value_type) or is_decimal(value_type) or is_string(value_type)
            or pa.types.is_boolean(value_type) or pa.types.is_date32(value_type) or pa.types.is_timestamp(value_type)
            or pa.types.is_time64(value_type)):
        return None
    return f"{call.function} over {value_type} is not supported"


class AggregateFunction:
    """One aggregate of one aggregation step (see the module docstring for the contract).

    Parameters
    ----------
    call
        The aggregate as planned; ``call.arg`` is a raw expression (raw steps)
        or a reference to the intermediate column (merging steps).
    name
        The output name (``avg`` also emits ``name$count`` from partial steps).
    raw_input
        True when the step reads raw rows (PARTIAL, SINGLE), False when it
        merges intermediate columns (INTERMEDIATE, FINAL).
    output_type
        The type of the ``name`` column the step emits: the final type for
        final/single steps, the intermediate type otherwise.
    final_output
        True when the step emits results rather than intermediate columns.
    """

    def __init__(self, call: AggregateCall, name: str, raw_input: bool, output_type: pa.DataType, final_output: bool):
        self.call = call
        self.name = name
        self.raw_input = raw_input
        self.output_type = output_type
        self.final_output = final_output
        #: Type of the values folded in: the argument's (raw) or the intermediate column's (merge).
        self.value_type: pa.DataType | None = None if call.arg is None else call.arg.dtype

    # ----------------------------------------------------------- contract
    def state_arrays(self) -> tuple[StateArray, ...]:
        """Return the per-group arrays this aggregate keeps."""
        raise NotImplementedError

    def new_state(self) -> AggregateState:
        """Return an empty state (arrays are grown by the operator)."""
        return AggregateState()

    @property
    def input_columns(self) -> tuple[str, ...]:
        """Return the intermediate columns a merging step reads."""
        return (self.call.arg.name,)

    def update(self, device: Device, state: AggregateState, group_ids: Any, column: Column | None) -> None:
        """Fold raw rows into ``state``; ``column`` is the evaluated argument (None for ``count(*)``)."""
        raise NotImplementedError

    def merge(self, device: Device, state: AggregateState, group_ids: Any, columns: list[Column]) -> None:
        """Fold a partial step's intermediate columns (:attr:`input_columns`, in order) into ``state``."""
        raise NotImplementedError

    def update_rows(self, device: Device, state: AggregateState, group_ids: Any, columns: list[Column]) -> None:
        """Fold raw rows into ``state``; ``columns`` are the evaluated arguments, in order (none for ``count(*)``).

        One-argument aggregates fold through :meth:`update`; two-argument ones override this.
        """
        self.update(device, state, group_ids, columns[0] if columns else None)

    def extract(self, device: Device, state: AggregateState, groups: int) -> list[tuple[str, Column]]:
        """Return the output columns of ``groups`` groups (state arrays at least that long)."""
        raise NotImplementedError

    def emit_update(self, emit: StateEmitter, states: dict[str, StateRef], slot: str,
                    inputs: list[tuple[str, str]]) -> list[str]:
        """Return kernel lines folding one row into the states at ``slot``.

        ``inputs`` are ``(value, valid)`` locals: the argument of a raw step
        (none for ``count(*)``; its low and high words where :attr:`folds_words`), or one per
        :attr:`input_columns` of a merging step.
        """
        raise NotImplementedError

    def emit_merge(self, emit: StateEmitter, target: dict[str, StateRef], slot: str, source: dict[str, StateRef],
                   source_slot: str) -> list[str]:
        """Return kernel lines folding one group's state (``source`` at ``source_slot``) into ``target`` at ``slot``."""
        raise NotImplementedError

    @property
    def fusable(self) -> str | None:
        """Return why a generated kernel cannot update this aggregate, or None when it can."""
        return None

    @property
    def folds_words(self) -> bool:
        """Return True when a raw step's generated update takes a wide decimal argument as (low, high) words.

        Why: int64 row code cannot hold a decimal(p > 18) value, but a sum only adds its words to
        128-bit state, so a kernel may read such a column when it is the whole argument (the
        re-aggregation of eager aggregation's decimal(38) partial sums).
        """
        return False


# ---------------------------------------------------------------- building blocks
def _exact_sum_arrays(prefix: str = "") -> tuple[StateArray, ...]:
    return (StateArray(prefix + "high", np.dtype(np.int64), 0), StateArray(prefix + "low", np.dtype(np.int64), 0),
            StateArray(prefix + "has", np.dtype(np.bool_), False))


def _float_sum_arrays() -> tuple[StateArray, ...]:
    return (StateArray("sum", np.dtype(np.float64), 0.0), StateArray("has", np.dtype(np.bool_), False))


_LIMBS = ("limb0", "limb1", "limb2", "limb3")


def _limb_sum_arrays() -> tuple[StateArray, ...]:
    return tuple(StateArray(name, np.dtype(np.int64), 0) for name in _LIMBS) + (
        StateArray("has", np.dtype(np.bool_), False),)


def _emit_exact_add(emit: StateEmitter, high: StateRef, low: StateRef, slot: str, value: str,
                    unsigned: bool = False) -> list[str]:
    upper = (f"np.int64(np.uint64({value}) >> np.uint64(32))" if unsigned
             else f"np.int64({value}) >> np.int64(32)")
    return [emit.add(low, slot, f"np.int64({value}) & np.int64(0xFFFFFFFF)"), emit.add(high, slot, upper)]


def _emit_limb_add(emit: StateEmitter, states: dict[str, StateRef], slot: str, low: str, high: str | None) -> list[str]:
    """Return lines adding a 128-bit value (``high`` None: the int64 ``low`` sign-extended) to four limbs."""
    if high is None:
        return _emit_exact_add(emit, states["limb1"], states["limb0"], slot, low)
    return (_emit_exact_add(emit, states["limb1"], states["limb0"], slot, low, unsigned=True)
            + _emit_exact_add(emit, states["limb3"], states["limb2"], slot, high))


def _pair_words(device: Device, low: Column, high: Column) -> Any:
    """Return (n, 2) words from a partial sum's low and high intermediate columns."""
    xp = device.xp
    words = xp.empty((len(low), 2), dtype=xp.int64)
    words[:, 0] = low.data
    words[:, 1] = high.data
    return words


def _combined(device: Device, state: AggregateState, groups: int, what: str, prefix: str = "") -> Any:
    arrays = state.arrays
    try:
        return kernels.combine_split_sum(device, arrays[prefix + "high"][:groups], arrays[prefix + "low"][:groups])
    except OverflowError as error:
        raise OverflowError(f"{what}: {error}") from None


def _guarded(valid: str | None, lines: list[str]) -> list[str]:
    if valid is None or valid == "True":
        return lines
    return [f"if {valid}:"] + ["    " + line for line in lines]


# ------------------------------------------------------------------ the functions
class Count(AggregateFunction):
    """``count(*)`` and ``count(x)``: rows (or non-null rows) per group; merging sums the counts exactly."""

    def state_arrays(self) -> tuple[StateArray, ...]:
        if self.raw_input:
            return (StateArray("count", np.dtype(np.int64), 0),)
        return _exact_sum_arrays()

    def update(self, device, state, group_ids, column):
        validity = None if column is None else _row_validity(device, column)
        kernels.group_count(device, group_ids, validity, state.arrays["count"])

    def merge(self, device, state, group_ids, columns):
        (counts,) = columns
        arrays = state.arrays
        kernels.group_sum_int(device, group_ids, counts.data, counts.validity, arrays["high"], arrays["low"], arrays["has"])

    def counts(self, device: Device, state: AggregateState, groups: int) -> Any:
        """Return the int64 counts of ``groups`` groups."""
        if self.raw_input:
            return state.arrays["count"][:groups].copy()
        return _combined(device, state, groups, f"{self.call.sql()} AS {self.name}")

    def extract(self, device, state, groups):
        return [(self.name, Column(pa.int64(), self.counts(device, state, groups)))]

    def emit_update(self, emit, states, slot, inputs):
        if not self.raw_input:  # add a partial count exactly
            (value, valid), = inputs
            lines = _emit_exact_add(emit, states["high"], states["low"], slot, value)
            return _guarded(valid, lines + [emit.flag(states["has"], slot)])
        valid = inputs[0][1] if inputs else None
        return _guarded(valid, [emit.add(states["count"], slot, "1")])

    @property
    def folds_words(self) -> bool:
        return self.raw_input  # a wide argument counts by its validity: its words go unread

    def emit_merge(self, emit, target, slot, source, source_slot):
        if self.raw_input:
            return [emit.add(target["count"], slot, source["count"].item(source_slot))]
        return [emit.add(target["high"], slot, source["high"].item(source_slot)),
                emit.add(target["low"], slot, source["low"].item(source_slot))]


class Sum(AggregateFunction):
    """``sum(x)``: exact 128-bit sums for integers and decimals, float64 for floats; NULL for a group of no values."""

    @property
    def is_float(self) -> bool:
        return is_floating(self.value_type)

    @property
    def sums_words(self) -> bool:
        """Return True when the state is four limbs: merged partial sums, or raw decimals that may be wide."""
        if self.is_float:
            return False
        return not self.raw_input or (is_decimal(self.value_type) and self.value_type.precision > 18)

    def state_arrays(self) -> tuple[StateArray, ...]:
        if self.is_float:
            return _float_sum_arrays()
        return _limb_sum_arrays() if self.sums_words else _exact_sum_arrays()

    @property
    def input_columns(self) -> tuple[str, ...]:
        if self.is_float:
            return (self.call.arg.name,)
        return (self.call.arg.name, self.call.arg.name + SUM_HIGH_SUFFIX)

    def _fold(self, device: Device, state: AggregateState, group_ids: Any, column: Column,
              high: Column | None = None) -> None:
        arrays = state.arrays
        validity = _row_validity(device, column)
        if self.is_float:
            kernels.group_sum_float(device, group_ids, column.data.astype(device.xp.float64, copy=False), validity,
                                    arrays["sum"], arrays["has"])
        elif self.sums_words:
            words = as_words(device, column) if high is None else _pair_words(device, column, high)
            kernels.group_sum_words(device, group_ids, words, validity, tuple(arrays[name] for name in _LIMBS),
                                    arrays["has"])
        else:
            kernels.group_sum_int(device, group_ids, column.data, validity, arrays["high"], arrays["low"], arrays["has"])

    def update(self, device, state, group_ids, column):
        self._fold(device, state, group_ids, column)

    def merge(self, device, state, group_ids, columns):
        self._fold(device, state, group_ids, columns[0], None if self.is_float else columns[1])

    @property
    def _what(self) -> str:
        return f"{self.call.sql()} AS {self.name}"

    def sum_words(self, device: Device, state: AggregateState, groups: int) -> Any:
        """Return the groups' exact sums as ``(groups, 2)`` int64 words (zero where a group saw no value)."""
        arrays = state.arrays
        if not self.sums_words:
            return kernels.split_sum_words(device, arrays["high"][:groups], arrays["low"][:groups])
        words, fits = kernels.limb_sum_words(device, tuple(arrays[name][:groups] for name in _LIMBS))
        raise_at_first(device, ~fits, None, f"Overflow in {self._what}: the sum does not fit in 128 bits")
        return words

    def sum_columns(self, device: Device, state: AggregateState, groups: int, dtype: pa.DataType
                    ) -> list[tuple[str, Column]]:
        """Return the groups' sums as ``dtype`` (NULL where a group saw no value): results, or a partial's two columns."""
        xp = device.xp
        has = state.arrays["has"][:groups].copy()
        if self.is_float:
            return [(self.name, Column(dtype, state.arrays["sum"][:groups].copy(), has))]
        names = _LIMBS if self.sums_words else ("high", "low")
        values, highs, status = kernels.sum_results(device, tuple(state.arrays[name][:groups] for name in names))
        beyond_128 = lambda row: ExecutionError(f"Overflow in {self._what}: the sum does not fit in 128 bits "
                                                f"(first at row {row})")
        if not self.final_output:  # words go on as they are: the check joins the caller's deferred reads
            if self.sums_words:  # (split sums of int64 values cannot pass 128 bits)
                at = kernels.SUM_BEYOND_128_BITS
                defer_row_check(device, status[at:at + 1], groups, beyond_128)
            return [(self.name, Column(dtype, values, has)), (self.name + SUM_HIGH_SUFFIX, Column(pa.int64(), highs, has))]
        status = device.to_host(status)  # the layout of the result depends on it: read now, every check at once
        row = int(status[kernels.SUM_BEYOND_128_BITS])
        if row < groups:
            raise beyond_128(row)
        row = int(status[kernels.SUM_BEYOND_38_DIGITS])
        if row < groups:
            raise ExecutionError(f"Overflow in SUM of {dtype} ({self._what}): the result does not fit in 38 digits "
                                 f"(first at row {row})")
        if status[kernels.SUM_NEEDS_WORDS]:
            return [(self.name, Column(dtype, xp.stack([values, highs], axis=1), has))]
        return [(self.name, Column(dtype, values, has))]

    def extract(self, device, state, groups):
        return self.sum_columns(device, state, groups, self.output_type)

    def emit_update(self, emit, states, slot, inputs):
        value, valid = inputs[0]
        if self.is_float:
            lines = [emit.add(states["sum"], slot, f"np.float64({value})")]
        elif self.sums_words:  # a merge's high column, or a wide raw argument's high word (see folds_words)
            lines = _emit_limb_add(emit, states, slot, value, inputs[1][0] if len(inputs) > 1 else None)
        else:
            lines = _emit_exact_add(emit, states["high"], states["low"], slot, value,
                                    unsigned=self.value_type == pa.uint64())
        return _guarded(valid, lines + [emit.flag(states["has"], slot)])

    @property
    def folds_words(self) -> bool:
        return self.raw_input and self.sums_words

    def emit_merge(self, emit, target, slot, source, source_slot):
        names = ("sum",) if self.is_float else _LIMBS if self.sums_words else ("high", "low")
        lines = [emit.add(target[name], slot, source[name].item(source_slot)) for name in names]
        return _guarded(source["has"].item(source_slot), lines + [emit.flag(target["has"], slot)])


class Avg(Sum):
    """``avg(x)``: a sum (as :class:`Sum`) and a count; partial steps emit both, final steps the float64 mean."""

    def state_arrays(self) -> tuple[StateArray, ...]:
        counts = (StateArray("count", np.dtype(np.int64), 0),) if self.raw_input else _exact_sum_arrays("count_")
        return super().state_arrays() + counts

    @property
    def input_columns(self) -> tuple[str, ...]:
        return super().input_columns + (self.call.arg.name + AVG_COUNT_SUFFIX,)

    def update(self, device, state, group_ids, column):
        self._fold(device, state, group_ids, column)
        kernels.group_count(device, group_ids, _row_validity(device, column), state.arrays["count"])

    def merge(self, device, state, group_ids, columns):
        counts = columns[-1]
        super().merge(device, state, group_ids, columns[:-1])
        arrays = state.arrays
        kernels.group_sum_int(device, group_ids, counts.data, counts.validity,
                              arrays["count_high"], arrays["count_low"], arrays["count_has"])

    def _counts(self, device: Device, state: AggregateState, groups: int) -> Any:
        if self.raw_input:
            return state.arrays["count"][:groups].copy()
        return _combined(device, state, groups, f"{self.call.sql()} AS {self.name}", "count_")

    def extract(self, device, state, groups):
        xp = device.xp
        counts = self._counts(device, state, groups)
        if not self.final_output:
            totals = self.sum_columns(device, state, groups, self.output_type)
            return totals + [(self.name + AVG_COUNT_SUFFIX, Column(pa.int64(), counts))]
        if self.is_float:
            total = state.arrays["sum"][:groups]
        else:
            total = as_float(xp, Column(pa.decimal128(38, 0), self.sum_words(device, state, groups)))
        scale = self.value_type.scale if is_decimal(self.value_type) else 0
        nonzero = counts > 0
        averages = total.astype(xp.float64) / xp.where(nonzero, counts, 1)
        if scale:
            averages = averages / float(10**scale)
        return [(self.name, Column(pa.float64(), averages, nonzero))]

    def emit_update(self, emit, states, slot, inputs):
        lines = super().emit_update(emit, states, slot, inputs[:-1] if not self.raw_input else inputs)
        if self.raw_input:
            return lines + _guarded(inputs[0][1], [emit.add(states["count"], slot, "1")])
        value, valid = inputs[-1]  # a partial count, added exactly
        counts = _emit_exact_add(emit, states["count_high"], states["count_low"], slot, value)
        return lines + _guarded(valid, counts + [emit.flag(states["count_has"], slot)])

    def emit_merge(self, emit, target, slot, source, source_slot):
        lines = super().emit_merge(emit, target, slot, source, source_slot)
        if self.raw_input:
            return lines + [emit.add(target["count"], slot, source["count"].item(source_slot))]
        return lines + [emit.add(target["count_high"], slot, source["count_high"].item(source_slot)),
                        emit.add(target["count_low"], slot, source["count_low"].item(source_slot))]


class MinMax(AggregateFunction):
    """``min(x)``/``max(x)`` over numbers, dates, timestamps, TIMEs, decimals and bools (strings: see the module
    docstring).

    Floats order as DuckDB: NaN is greater than every number and ``-0.0``
    equals ``0.0``. The kept value never holds NaN, so CUDA's float atomics
    (whose NaN handling varies) only ever compare numbers: it starts at +inf
    (min) or -inf (max) and folds only non-NaN values; a flag says what the
    value cannot: ``number_seen`` for min (a group of only NaNs is NaN, and
    +inf is then told apart from "no number"), ``nan_seen`` for max (any NaN
    makes the max NaN).
    """

    @property
    def want_max(self) -> bool:
        return self.call.function in ("max", "bool_or")

    @property
    def over_strings(self) -> bool:
        return is_string(self.value_type)

    @property
    def over_floats(self) -> bool:
        return is_floating(self.value_type)

    @property
    def flag_name(self) -> str:
        """Return the name of the float flag state: ``nan_seen`` (max) or ``number_seen`` (min)."""
        return "nan_seen" if self.want_max else "number_seen"

    @property
    def state_dtype(self) -> np.dtype:
        """Return the 64-bit dtype values are kept in: one CUDA atomics update and a packed slot table holds."""
        dtype = np.dtype(physical_dtype(self.value_type))
        if dtype.kind == "f":
            return np.dtype(np.float64)
        return np.dtype(np.uint64) if dtype.kind == "u" else np.dtype(np.int64)

    @property
    def over_wide_decimals(self) -> bool:
        """Return True for decimals of more than 18 digits: values may be 128-bit words (high and low state)."""
        return is_decimal(self.value_type) and self.value_type.precision > 18

    def state_arrays(self) -> tuple[StateArray, ...]:
        if self.over_strings:
            return ()
        if self.over_wide_decimals:  # "value" keeps the high word, "low" the low word (unsigned)
            high = kernels.identity_for_max(np.int64) if self.want_max else kernels.identity_for_min(np.int64)
            low = kernels.identity_for_max(np.uint64) if self.want_max else kernels.identity_for_min(np.uint64)
            return (StateArray("value", np.dtype(np.int64), high), StateArray("low", np.dtype(np.uint64), low),
                    StateArray("has", np.dtype(np.bool_), False))
        dtype = self.state_dtype
        if self.over_floats:
            fill = -np.inf if self.want_max else np.inf
            return (StateArray("value", dtype, fill), StateArray("has", np.dtype(np.bool_), False),
                    StateArray(self.flag_name, np.dtype(np.bool_), False))
        fill = kernels.identity_for_max(dtype) if self.want_max else kernels.identity_for_min(dtype)
        return (StateArray("value", dtype, fill), StateArray("has", np.dtype(np.bool_), False))

    def update(self, device, state, group_ids, column):
        if column.is_string:
            raise NotImplementedError("min/max over strings is folded by HashAggregation")
        fold = kernels.group_max if self.want_max else kernels.group_min
        arrays = state.arrays
        if self.over_wide_decimals:
            self._fold_words(device, state, group_ids, column)
            return
        if not self.over_floats:
            values = column.data.astype(self.state_dtype, copy=False)
            fold(device, group_ids, values, column.validity, arrays["value"], arrays["has"])
            return
        xp = device.xp
        values = column.data.astype(xp.float64, copy=False)
        valid = xp.ones(values.shape[0], dtype=xp.bool_) if column.validity is None else column.validity
        is_nan = values != values
        numbers = xp.where(is_nan | (values == 0.0), 0.0, values)  # -0.0 folds into 0.0; NaN rows are masked
        fold(device, group_ids, numbers, valid & ~is_nan, arrays["value"], arrays["has"])
        flagged = valid & is_nan if self.want_max else valid & ~is_nan
        _set_flags(device, group_ids, flagged, arrays[self.flag_name])
        _set_flags(device, group_ids, valid, arrays["has"])

    def _fold_words(self, device: Device, state: AggregateState, group_ids: Any, column: Column) -> None:
        """Fold 128-bit values in two passes of 64-bit atomics: the high word, then the low word among the
        rows at their group's high word (a low word kept under a high word that just moved is reset first)."""
        xp = device.xp
        fold = kernels.group_max if self.want_max else kernels.group_min
        arrays = state.arrays
        words = as_words(device, column)
        high = xp.ascontiguousarray(words[:, 1])
        low = xp.ascontiguousarray(words[:, 0]).view(xp.uint64)
        validity = _row_validity(device, column)
        kept, had = arrays["value"].copy(), arrays["has"].copy()
        fold(device, group_ids, high, validity, arrays["value"], arrays["has"])
        moved = arrays["value"] != kept
        reset = kernels.identity_for_max(np.uint64) if self.want_max else kernels.identity_for_min(np.uint64)
        arrays["low"][moved] = reset
        at_top = high == arrays["value"][group_ids]
        low_kept = had & ~moved  # where the kept low word still belongs to the group's high word
        fold(device, group_ids, low, at_top if validity is None else at_top & validity, arrays["low"], low_kept)

    def merge(self, device, state, group_ids, columns):
        self.update(device, state, group_ids, columns[0])

    def extract(self, device, state, groups):
        if self.over_strings:
            raise NotImplementedError("min/max over strings is extracted by HashAggregation")
        xp = device.xp
        if self.over_wide_decimals:
            has = state.arrays["has"][:groups].copy()
            words = xp.empty((groups, 2), dtype=xp.int64)
            words[:, 0] = state.arrays["low"][:groups].view(xp.int64)
            words[:, 1] = state.arrays["value"][:groups]
            words[~has] = 0
            return [(self.name, Column(self.output_type, narrowed(device, words, has), has))]
        values = state.arrays["value"][:groups]
        if self.over_floats:
            flag = state.arrays[self.flag_name][:groups]
            values = xp.where(flag, xp.nan, values) if self.want_max else xp.where(flag, values, xp.nan)
        values = values.astype(physical_dtype(self.output_type))
        return [(self.name, Column(self.output_type, values, state.arrays["has"][:groups].copy()))]

    @property
    def fusable(self) -> str | None:
        if self.over_strings:
            return f"{self.call.function} over strings"
        if self.over_wide_decimals:  # values may be 128-bit words; the kernel reads int64
            return f"{self.call.function} over {self.value_type}"
        return None

    def _emit_fold(self, emit: StateEmitter, ref: StateRef, slot: str, value: str) -> str:
        fold = emit.maximum if self.want_max else emit.minimum
        return fold(ref, slot, value, False)  # floats fold numbers only (see the class docstring)

    def emit_update(self, emit, states, slot, inputs):
        value, valid = inputs[0]
        cast = f"np.{self.state_dtype.name}({value})"
        if not self.over_floats:
            return _guarded(valid, [self._emit_fold(emit, states["value"], slot, cast), emit.flag(states["has"], slot)])
        number = [self._emit_fold(emit, states["value"], slot, "_mm")]
        if not self.want_max:
            number.append(emit.flag(states["number_seen"], slot))
        nan = [emit.flag(states["nan_seen"], slot)] if self.want_max else ["pass"]
        lines = [f"_mm = {cast}", "if _mm != _mm:", *("    " + line for line in nan), "else:",
                 "    if _mm == 0.0: _mm = 0.0", *("    " + line for line in number), emit.flag(states["has"], slot)]
        return _guarded(valid, lines)

    def emit_merge(self, emit, target, slot, source, source_slot):
        lines = [self._emit_fold(emit, target["value"], slot, source["value"].item(source_slot)),
                 emit.flag(target["has"], slot)]
        if self.over_floats:
            lines += _guarded(source[self.flag_name].item(source_slot), [emit.flag(target[self.flag_name], slot)])
        return _guarded(source["has"].item(source_slot), lines)


class BoolAndOr(MinMax):
    """``bool_and(b)``/``bool_or(b)``: the least/greatest bool of a group (false < true), folded as ``min``/``max``."""


class AnyValue(MinMax):
    """``any_value(x)`` (and ``first``/``arbitrary``): some non-NULL value of the group, NULL when it has none.

    Which value is unspecified (DuckDB's first in scan order is not an order a
    parallel engine has); the group's least value is one, so it folds as
    ``min``: the same state, merges and fused code, and strings too.
    """


class CountIf(Sum):
    """``count_if(b)``: the number of true rows, as DuckDB's HUGEINT sum of the bools (NULL for a group of NULLs)."""


class BitFold(AggregateFunction):
    """``bit_and``/``bit_or``/``bit_xor`` over integers: one int64 word per group (sign-extended), and a flag."""

    @property
    def operation(self) -> int:
        return kernels.BIT_OPERATIONS[self.call.function]

    def state_arrays(self) -> tuple[StateArray, ...]:
        fill = -1 if self.call.function == "bit_and" else 0
        return (StateArray("value", np.dtype(np.int64), fill), StateArray("has", np.dtype(np.bool_), False))

    def update(self, device, state, group_ids, column):
        xp = device.xp
        data = column.data
        values = data.view(xp.int64) if data.dtype == np.dtype(np.uint64) else data.astype(xp.int64, copy=False)
        kernels.group_bits(device, group_ids, values, _row_validity(device, column), state.arrays["value"],
                           state.arrays["has"], self.operation)

    def merge(self, device, state, group_ids, columns):
        self.update(device, state, group_ids, columns[0])

    def extract(self, device, state, groups):
        values = state.arrays["value"][:groups]
        dtype = np.dtype(physical_dtype(self.output_type))
        values = values.view(dtype) if dtype == np.dtype(np.uint64) else values.astype(dtype)
        return [(self.name, Column(self.output_type, values, state.arrays["has"][:groups].copy()))]

    @property
    def fusable(self) -> str | None:
        return f"{self.call.function} has no fused-kernel update"


class Product(AggregateFunction):
    """``product(x)``: the float64 product of a group's values (DuckDB's DOUBLE), NULL for a group of none."""

    def state_arrays(self) -> tuple[StateArray, ...]:
        return (StateArray("product", np.dtype(np.float64), 1.0), StateArray("has", np.dtype(np.bool_), False))

    def update(self, device, state, group_ids, column):
        kernels.group_product(device, group_ids, as_float(device.xp, column), _row_validity(device, column),
                              state.arrays["product"], state.arrays["has"])

    def merge(self, device, state, group_ids, columns):
        self.update(device, state, group_ids, columns[0])

    def extract(self, device, state, groups):
        has = state.arrays["has"][:groups].copy()
        return [(self.name, Column(pa.float64(), state.arrays["product"][:groups].copy(), has))]

    @property
    def fusable(self) -> str | None:
        return "product has no fused-kernel update (CUDA has no atomic multiply)"


#: A deviation at least this large folds its square (and its co-deviation's product) into the scaled sums
#: (``huge_*``): below it ``count * d * d`` stays under 2**959; above it the square is kept times 2**-64.
_WIDE_DEVIATION = kernels.WIDE_DEVIATION


def _constants() -> list[str]:
    """Return the lines naming the scaled deviation sums' constants in a generated kernel (see
    :data:`~gpu_engine.kernels.aggregate.PIVOT_SCALE`)."""
    return [f"_MO_SCALE = {kernels.PIVOT_SCALE!r}", f"_MO_HUGE = {kernels.HUGE_PIVOT!r}",
            f"_MO_WIDE = {_WIDE_DEVIATION!r}"]


def _settle_lines(out: str, plain: str, huge: str, offset: str, deviations: str, scaled: str) -> list[str]:
    """Return lines setting ``out`` to a sum of squares or co-deviations from the shift, less the mean offset's
    share: ``plain + huge * 2**64 - offset * (deviations + scaled * 2**64)`` (see :func:`_settled_sum`)."""
    product = (f"(({offset} * _MO_SCALE) * {deviations} if abs({offset}) >= abs({deviations}) "
               f"else {offset} * ({deviations} * _MO_SCALE))")  # the larger factor scaled: no subnormal
    return [f"if abs({plain}) == np.inf or abs({huge}) == np.inf:",
            f"    {out} = {plain} + {huge}",
            f"elif {huge} == 0.0:",
            f"    {out} = {plain} - ({offset} * {deviations} + {offset} * {scaled} / _MO_SCALE)",
            "else:",
            f"    {out} = (({plain} * _MO_SCALE + {huge}) - ({product} + {offset} * {scaled})) / _MO_SCALE"]


def _settled_sum(xp: Any, plain: Any, huge: Any, offset: Any, deviations: Any, scaled: Any) -> Any:
    """Return :func:`_settle_lines`' value over arrays: where no square passed 2**448 (``huge`` 0) the plain
    arithmetic, else the same in units of 2**-64, so a shift far from the mean (its squares past the largest
    double) still gives the finite m2 or co-moment; an overflowed sum stays infinite (DuckDB's inf)."""
    scale = kernels.PIVOT_SCALE
    direct = plain - (offset * deviations + offset * scaled / scale)
    product = xp.where(xp.abs(offset) >= xp.abs(deviations), (offset * scale) * deviations,
                       offset * (deviations * scale))  # the larger factor scaled: no subnormal
    scaled_form = ((plain * scale + huge) - (product + offset * scaled)) / scale
    value = xp.where(huge == 0.0, direct, scaled_form)
    return xp.where(xp.isinf(plain) | xp.isinf(huge), plain + huge, value)


def _pair_validity(device: Device, columns: list[Column]) -> Any:
    """Return where every column is valid (None when all are), dictionary rows included."""
    validity = None
    for column in columns:
        valid = _row_validity(device, column)
        if valid is not None:
            validity = valid if validity is None else validity & valid
    return validity


def _word_dtype(dtype: pa.DataType) -> np.dtype:
    """Return the 64-bit dtype one value of ``dtype`` is kept in (as :attr:`MinMax.state_dtype`)."""
    physical = np.dtype(physical_dtype(dtype))
    if physical.kind == "f":
        return np.dtype(np.float64)
    return np.dtype(np.uint64) if physical.kind == "u" else np.dtype(np.int64)


class Moments(AggregateFunction):
    """Variance, standard deviation, covariance, correlation and ``regr_*``: per-group moments merged by Chan's formula.

    The state of a group is its count and, per variable, a shift, the mean
    relative to it and the sum of squared deviations from the mean (``m2``);
    over two variables also the sum of co-deviations (``c``). Partial steps
    emit them as they are (the count as ``name``, the rest as
    :data:`~gpu_engine.plans.aggregates.MOMENT_SUFFIXES` or
    :data:`~gpu_engine.plans.aggregates.COMOMENT_SUFFIXES`), so merged partials
    are as exact as one pass (see :func:`~gpu_engine.kernels.aggregate.group_moments`).
    Sums of x and x² would cancel catastrophically for values with a large
    offset; these do not. The state also holds the kernels' batch sums (zero
    between batches), so a batch costs its rows, not the number of groups.
    Results follow DuckDB: the sample forms are NULL for
    fewer than two rows, the others for none; a pair with a NULL side is skipped.
    """

    @property
    def paired(self) -> bool:
        return self.call.function in COVARIANCE_FUNCTIONS

    @property
    def suffixes(self) -> tuple[str, ...]:
        return COMOMENT_SUFFIXES if self.paired else MOMENT_SUFFIXES

    @property
    def state_names(self) -> tuple[str, ...]:
        """Return the float64 state arrays, in the order of :attr:`suffixes` (their names without ``$``)."""
        return tuple(suffix[1:] for suffix in self.suffixes)

    def state_arrays(self) -> tuple[StateArray, ...]:
        batch = ("batch_sx", "batch_m2x", "batch_dx", "huge_m2x") + (
            ("batch_sy", "batch_m2y", "batch_c", "batch_dy", "huge_m2y", "huge_c") if self.paired else ())
        return ((StateArray("count", np.dtype(np.int64), 0),)
                + tuple(StateArray(name, np.dtype(np.float64), 0.0) for name in self.state_names)
                + (StateArray("batch_n", np.dtype(np.int64), 0),)
                + tuple(StateArray(name, np.dtype(np.float64), 0.0) for name in batch))

    @property
    def input_columns(self) -> tuple[str, ...]:
        base = self.call.arg.name
        return (base,) + tuple(base + suffix for suffix in self.suffixes)

    def update(self, device, state, group_ids, column):
        self.update_rows(device, state, group_ids, [column])

    def update_rows(self, device, state, group_ids, columns):
        xp = device.xp
        x = as_float(xp, columns[0])
        y = as_float(xp, columns[1]) if self.paired else None
        kernels.group_moments(device, group_ids, _pair_validity(device, columns), x, y, None, state.arrays)

    def merge(self, device, state, group_ids, columns):
        rows = {name: column.data for name, column in zip(("count",) + self.state_names, columns)}
        kernels.group_moments(device, group_ids, _row_validity(device, columns[0]), rows["shift_x"],
                              rows.get("shift_y"), rows, state.arrays)

    def extract(self, device, state, groups):
        xp = device.xp
        arrays = self._settled(xp, {name: array[:groups] for name, array in state.arrays.items()})
        count = arrays["count"]
        if not self.final_output:
            return [(self.name, Column(pa.int64(), count.copy()))] + [
                (self.name + suffix, Column(pa.float64(), arrays[name].copy()))
                for suffix, name in zip(self.suffixes, self.state_names)]
        function = self.call.function
        if function == "regr_count":  # the pairs with no NULL side, 0 (not NULL) for none, as DuckDB
            return [(self.name, Column(pa.uint32(), count.astype(xp.uint32)))]
        n = count.astype(xp.float64)
        sample = function.endswith("_samp")
        valid = count > (1 if sample else 0)
        divisor = xp.where(valid, n - 1.0 if sample else n, 1.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if function in VARIANCE_FUNCTIONS:
                values = arrays["m2_x"] / divisor
                if function.startswith("stddev"):
                    values = xp.sqrt(values)
            elif function in ("covar_samp", "covar_pop"):
                values = arrays["c"] / divisor
            elif function == "corr":
                values = self._corr(xp, arrays, n)
            else:  # regr_*(y, x): the first argument is the dependent variable
                values = {"regr_slope": lambda: self._slope(xp, arrays),
                          "regr_avgx": lambda: self._average(arrays, "y", n),
                          "regr_avgy": lambda: self._average(arrays, "x", n),
                          "regr_sxx": lambda: arrays["m2_y"], "regr_syy": lambda: arrays["m2_x"],
                          "regr_sxy": lambda: arrays["c"], "regr_intercept": lambda: self._intercept(xp, arrays, n),
                          "regr_r2": lambda: self._r2(xp, arrays, n)}[function]()
        if function in ("regr_intercept", "regr_r2"):  # NULL where DuckDB's is (see the two methods)
            valid = valid & ~xp.isnan(values[0])
            values = values[1]
        elif function in ("var_pop", "stddev_pop", "regr_sxx", "regr_syy"):
            values = xp.where(count == 1, 0.0, values)  # DuckDB's for one value, even NaN / inf (merged: NaN)
        values = xp.where(valid, values, 0.0)
        return [(self.name, Column(pa.float64(), values, valid))]

    @staticmethod
    def _average(arrays: dict[str, Any], variable: str, n: Any) -> Any:
        """Return the mean of ``variable``'s values as DuckDB's ``regr_avgx`` / ``regr_intercept`` compute it: their
        sum over their count, so a sum past the largest double is infinite (the mean itself is not)."""
        return (arrays["shift_" + variable] + arrays["mean_" + variable]) * n / n

    @staticmethod
    def _slope(xp: Any, arrays: dict[str, Any]) -> Any:
        """Return ``regr_slope``: the co-moment over x's sum of squares, NaN where that sum is 0 as in DuckDB,
        also where the co-moment is not (x's squares underflow: x in (0, 1e-300), y near 1e308: 5e7 / 0 was inf,
        and regr_intercept -inf where DuckDB's is NULL)."""
        m2 = arrays["m2_y"]
        return xp.where(m2 != 0.0, arrays["c"] / xp.where(m2 != 0.0, m2, 1.0), xp.nan)

    @staticmethod
    def _corr(xp: Any, arrays: dict[str, Any], n: Any) -> Any:
        """Return ``corr`` in DuckDB's order of operations: ``covar_pop / (stddev_pop(x) * stddev_pop(y))``, NaN
        where that product is 0. (``c / sqrt(m2_x * m2_y)`` overflowed to 0 where the two standard deviations
        multiply to a finite number, and gave 0 where DuckDB's ``finite / inf`` is 0 only by the same chance.)"""
        std_x = xp.sqrt(xp.where(n > 1.0, arrays["m2_x"] / n, 0.0))
        std_y = xp.sqrt(xp.where(n > 1.0, arrays["m2_y"] / n, 0.0))
        spread = std_x * std_y
        return xp.where(spread != 0.0, (arrays["c"] / n) / xp.where(spread != 0.0, spread, 1.0), xp.nan)

    @classmethod
    def _intercept(cls, xp: Any, arrays: dict[str, Any], n: Any) -> tuple[Any, Any]:
        """Return ``regr_intercept``'s NULL marker (NaN: NULL) and values: NULL where the slope is NaN, as DuckDB.

        DuckDB computes ``sum(y) / count - slope * (sum(x) / count)`` and returns NULL where
        ``regr_slope`` is NaN (a constant ``x``, one row, a NaN or infinite input); a sum past the largest
        double makes it infinite (or NaN, times a zero slope).
        """
        slope = cls._slope(xp, arrays)
        return slope, cls._average(arrays, "x", n) - slope * cls._average(arrays, "y", n)

    @classmethod
    def _r2(cls, xp: Any, arrays: dict[str, Any], n: Any) -> tuple[Any, Any]:
        """Return ``regr_r2``'s NULL marker (NaN: NULL) and values, as DuckDB's finalize orders its cases.

        NULL where ``var_pop(x)`` is 0 (one row or a constant ``x``), else 1
        where ``var_pop(y)`` is 0, else ``corr(y, x)²`` (NaN inputs give NaN; an infinite variance 0).
        """
        var_x = xp.where(n > 1.0, arrays["m2_y"] / n, 0.0)
        var_y = xp.where(n > 1.0, arrays["m2_x"] / n, 0.0)
        corr = cls._corr(xp, arrays, n)
        marker = xp.where(var_x == 0.0, xp.nan, 0.0)
        return marker, xp.where(var_y == 0.0, 1.0, corr * corr)

    # ------------------------------------------------------ the fused kernel's update
    # A generated kernel folds moments in one of two forms, in the same state arrays (a group holds one):
    #
    # * sequential twins (the CPU's table, a CUDA thread's own state) take Welford's update one row at a time
    #   into ``count`` / ``mean_*`` / ``m2_*`` / ``c`` relative to ``shift_*`` (the group's first value), the
    #   very arithmetic of :func:`~gpu_engine.kernels.aggregate.group_moments` on the CPU, and merge partial
    #   states by Chan's formula;
    # * atomic twins (CUDA's table and shared-memory cache) cannot chain a group's rows, so they add each
    #   row's deviation from the group's shift, its square and the co-deviation into the batch arrays
    #   (``batch_n``, ``batch_dx``, ``batch_m2x``, ``batch_dy``, ``batch_m2y``, ``batch_c``: sums of shifted
    #   data, exact where the shift is a value of the group, as :func:`group_moments`' pivot). The first row
    #   to reach a group claims it (``batch_n`` 0 -> -1 by compare-and-swap), writes the shift and releases it
    #   with its count; the others wait on the claim, then only add. A partial state (a merging step's row,
    #   or a cache entry flushed) folds as its count, its mean's deviation from the shift and its own m2.
    #   Near the largest double a shift far from the mean makes these sums overflow where the moments do
    #   not (1e308, 1.2e308, 1.5e308 from 1.5e308: a co-deviation sum of 2.1e308, a co-moment of 0.77e308),
    #   so deviations of at least 2**512 add into ``batch_s*`` and squares / products of deviations of at
    #   least 2**448 into ``huge_*``, all times 2**-64 (exact: see ``kernels.aggregate.PIVOT_SCALE``), and
    #   the settling subtracts in those units.
    #
    # :meth:`extract` turns the sums into the Welford form (:meth:`_settled`); the eager operator's batch
    # arrays are zero between batches (``huge_*`` always), so its states are already settled.
    @property
    def fusable(self) -> str | None:
        return None

    def _float_of(self, value: str, dtype: pa.DataType) -> str:
        """Return ``value`` (a row local of ``dtype``) as float64, a decimal divided by ``10**scale`` as as_float."""
        scale = dtype.scale if is_decimal(dtype) else 0
        return f"(np.float64({value}) / {float(10 ** scale)!r})" if scale else f"np.float64({value})"

    def emit_update(self, emit, states, slot, inputs):
        if self.raw_input:
            x, y = inputs[0], inputs[1] if self.paired else None
            valid = " and ".join(f"({v})" for _, v in ([x, y] if self.paired else [x]) if v not in (None, "True"))
            lines = [f"_mo_x = {self._float_of(x[0], self.value_type)}"]
            if self.paired:
                lines.append(f"_mo_y = {self._float_of(y[0], self.call.second.dtype)}")
            if emit.atomic:  # a row is a partial state of one value
                lines += self._emit_partial_fold(emit, states, slot, "np.int64(1)", ("_mo_x", "0.0", "0.0"),
                                                 ("_mo_y", "0.0", "0.0", "0.0") if self.paired else None)
            else:
                lines += self._emit_welford_row(states, slot)
            return _guarded(valid or None, lines)
        names = [value for value, _ in inputs]  # count, shift_x, mean_x, m2_x[, shift_y, mean_y, m2_y, c]
        lines = _constants() + [f"_mo_ns = np.int64({names[0]})"] + [f"_mo_s{k} = np.float64({value})"
                                                        for k, value in enumerate(names[1:])]
        x = ("_mo_s0", "_mo_s1", "_mo_s2")
        y = ("_mo_s3", "_mo_s4", "_mo_s5", "_mo_s6") if self.paired else None
        fold = (self._emit_partial_fold(emit, states, slot, "_mo_ns", x, y) if emit.atomic
                else self._emit_chan_merge(states, slot, "_mo_ns", x, y))
        return _guarded(inputs[0][1], lines + [f"if _mo_ns > 0:"] + ["    " + line for line in fold])

    def emit_merge(self, emit, target, slot, source, source_slot):
        item = lambda name: source[name].item(source_slot)
        lines = [f"_mo_ns = np.int64({item('count')})", f"_mo_s0 = {item('shift_x')}", f"_mo_s1 = {item('mean_x')}",
                 f"_mo_s2 = {item('m2_x')}"]
        sums = [f"_mo_ns = np.int64({item('batch_n')})", "_mo_nf = np.float64(_mo_ns)"]
        for v, mean, m2 in (("x", "_mo_s1", "_mo_s2"), ("y", "_mo_s4", "_mo_s5"))[:2 if self.paired else 1]:
            sums += [f"{mean} = {item('batch_d' + v)} / _mo_nf + {item('batch_s' + v)} / _mo_nf / _MO_SCALE",
                     *_settle_lines(m2, item("batch_m2" + v), item("huge_m2" + v), mean, item("batch_d" + v),
                                    item("batch_s" + v)),
                     f"{m2} = max({m2}, 0.0)"]
        if self.paired:
            lines += [f"_mo_s3 = {item('shift_y')}", f"_mo_s4 = {item('mean_y')}", f"_mo_s5 = {item('m2_y')}",
                      f"_mo_s6 = {item('c')}"]
            sums += _settle_lines("_mo_s6", item("batch_c"), item("huge_c"), "_mo_s1", item("batch_dy"),
                                  item("batch_sy"))
        lines += [f"if {item('batch_n')} > 0:"] + ["    " + line for line in sums]
        x = ("_mo_s0", "_mo_s1", "_mo_s2")
        y = ("_mo_s3", "_mo_s4", "_mo_s5", "_mo_s6") if self.paired else None
        fold = (self._emit_partial_fold(emit, target, slot, "_mo_ns", x, y) if emit.atomic
                else self._emit_chan_merge(target, slot, "_mo_ns", x, y))
        return _constants() + lines + ["if _mo_ns > 0:"] + ["    " + line for line in fold]

    def _emit_welford_row(self, states: dict[str, StateRef], slot: str) -> list[str]:
        """Return Welford's update of ``_mo_x`` (``_mo_y``) into the group (as :func:`_moment_rows_cpu`)."""
        s = {name: ref.item(slot) for name, ref in states.items()}
        first = [f"{s['count']} = 1", f"{s['shift_x']} = _mo_x", f"{s['mean_x']} = 0.0", f"{s['m2_x']} = 0.0"]
        step = [f"_mo_n += 1", f"{s['count']} = _mo_n", f"_mo_a = _mo_x - {s['shift_x']}",
                f"_mo_d = _mo_a - {s['mean_x']}", f"{s['mean_x']} += _mo_d / _mo_n",
                f"{s['m2_x']} += _mo_d * (_mo_a - {s['mean_x']})"]
        if self.paired:
            first += [f"{s['shift_y']} = _mo_y", f"{s['mean_y']} = 0.0", f"{s['m2_y']} = 0.0", f"{s['c']} = 0.0"]
            step += [f"_mo_b = _mo_y - {s['shift_y']}", f"_mo_e = _mo_b - {s['mean_y']}",
                     f"{s['mean_y']} += _mo_e / _mo_n", f"{s['m2_y']} += _mo_e * (_mo_b - {s['mean_y']})",
                     f"_mo_f = _mo_a - {s['mean_x']}",  # DuckDB's fused multiply-add: aggregate._fused_multiply_add
                     "_mo_p = _mo_e * _mo_f",
                     "if abs(_mo_p) != np.inf or abs(_mo_e) == np.inf or abs(_mo_f) == np.inf:",
                     f"    {s['c']} += _mo_p",
                     f"elif abs({s['c']}) != np.inf:",
                     f"    {s['c']} = ((_mo_e * {kernels.PIVOT_SCALE!r}) * _mo_f + {s['c']} * {kernels.PIVOT_SCALE!r})"
                     f" / {kernels.PIVOT_SCALE!r}"]
        return ([f"_mo_n = np.int64({s['count']})", "if _mo_n == 0:"] + ["    " + line for line in first]
                + ["else:"] + ["    " + line for line in step])

    def _emit_chan_merge(self, states: dict[str, StateRef], slot: str, n: str, x: tuple, y: tuple | None
                         ) -> list[str]:
        """Return Chan's merge of a partial state (count ``n``, shift, mean offset, m2[, c]) into the group, in
        :func:`~gpu_engine.kernels.aggregate._moment_join`'s order of operations."""
        s = {name: ref.item(slot) for name, ref in states.items()}
        first = [f"{s['count']} = {n}", f"{s['shift_x']} = {x[0]}", f"{s['mean_x']} = {x[1]}", f"{s['m2_x']} = {x[2]}"]
        step = [f"_mo_na = np.float64({s['count']})", f"_mo_nb = np.float64({n})", "_mo_t = _mo_na + _mo_nb",
                "_mo_w = _mo_na * _mo_nb / _mo_t", f"_mo_dx = ({x[0]} - {s['shift_x']}) + {x[1]} - {s['mean_x']}",
                f"{s['mean_x']} += _mo_dx / _mo_t * _mo_nb", f"{s['m2_x']} += {x[2]} + _mo_dx * _mo_dx * _mo_w"]
        if y is not None:
            first += [f"{s['shift_y']} = {y[0]}", f"{s['mean_y']} = {y[1]}", f"{s['m2_y']} = {y[2]}",
                      f"{s['c']} = {y[3]}"]
            step += [f"_mo_dy = ({y[0]} - {s['shift_y']}) + {y[1]} - {s['mean_y']}",
                     f"{s['mean_y']} += _mo_dy / _mo_t * _mo_nb", f"{s['m2_y']} += {y[2]} + _mo_dy * _mo_dy * _mo_w",
                     # kernels.aggregate._join_comoment: finite terms past the largest double in units of 2**-64
                     f"_mo_j = {s['c']} + ({y[3]} + (_mo_dx * _mo_w) * _mo_dy)",
                     f"if not abs(_mo_j) < np.inf and abs({y[3]}) != np.inf"
                     " and abs(_mo_dx * _mo_w) != np.inf and abs(_mo_dy) != np.inf:",  # (NaN is not below inf)
                     f"    if abs({s['c']}) == np.inf:",  # an infinite co-moment stays
                     f"        _mo_j = {s['c']}",
                     "    else:",
                     "        _mo_a = _mo_dx * _mo_w",
                     "        _mo_p = ((_mo_a * _MO_SCALE) * _mo_dy if abs(_mo_a) >= abs(_mo_dy)"
                     " else _mo_a * (_mo_dy * _MO_SCALE))",
                     f"        _mo_j = ({s['c']} * _MO_SCALE + ({y[3]} * _MO_SCALE + _mo_p)) / _MO_SCALE",
                     f"{s['c']} = _mo_j"]
        step.append(f"{s['count']} += {n}")
        return ([f"if {s['count']} == 0:"] + ["    " + line for line in first] + ["else:"]
                + ["    " + line for line in step])

    def _emit_partial_fold(self, emit: StateEmitter, states: dict[str, StateRef], slot: str, n: str, x: tuple,
                           y: tuple | None) -> list[str]:
        """Return atomic adds of a partial state (count ``n``, shift, mean offset, m2[, c]) into the group's
        shifted sums, claiming the group (and writing its shift) if no row has (see the comment above)."""
        claim = states["batch_n"]
        shifts = [states["shift_x"]] + ([states["shift_y"]] if y is not None else [])
        values = [x[0]] + ([y[0]] if y is not None else [])
        write = [f"{ref.item(slot)} = {value}" for ref, value in zip(shifts, values)]
        lines = [*_constants(), "_mo_own = False", f"_mo_c = {claim.item(slot)}",
                 "if _mo_c <= 0:",
                 f"    _mo_c = cuda.atomic.cas({claim.array}, ({claim.at(slot)}), np.int64(0), np.int64(-1))",
                 "    if _mo_c == 0:",
                 *("        " + line for line in write),
                 "        cuda.threadfence()",
                 f"        cuda.atomic.cas({claim.array}, ({claim.at(slot)}), np.int64(-1), np.int64({n}))",
                 "        _mo_own = True",
                 "    while _mo_c == -1:",  # every access to the claim word is atomic (see fused_aggregation_kernel)
                 f"        _mo_c = cuda.atomic.cas({claim.array}, ({claim.at(slot)}), np.int64(-1), np.int64(-1))",
                 "if not _mo_own:",
                 "    " + emit.add(claim, slot, f"np.int64({n})"),
                 "_mo_nb = np.float64({})".format(n)]
        # the shift read atomically: this SM's L1 may hold the slot's line from before the claimer wrote it
        for axis, (ref, (shift, mean, m2, *rest)) in enumerate(zip(shifts, [x] + ([y] if y is not None else []))):
            v = "xy"[axis]
            lines += [f"_mo_k{v} = cuda.atomic.add({ref.array}, ({ref.at(slot)}), 0.0)",
                      f"_mo_d{v} = ({shift} - _mo_k{v}) + {mean}",
                      f"if abs(_mo_d{v}) >= _MO_HUGE:",
                      "    " + emit.add(states[f"batch_s{v}"], slot, f"_mo_nb * (_mo_d{v} * _MO_SCALE)"),
                      "else:",
                      "    " + emit.add(states[f"batch_d{v}"], slot, f"_mo_nb * _mo_d{v}"),
                      f"if abs(_mo_d{v}) >= _MO_WIDE:",  # its square may pass the largest double: scaled
                      "    " + emit.add(states[f"batch_m2{v}"], slot, m2),
                      "    " + emit.add(states[f"huge_m2{v}"], slot, f"_mo_nb * (_mo_d{v} * _MO_SCALE) * _mo_d{v}"),
                      "else:",
                      "    " + emit.add(states[f"batch_m2{v}"], slot, f"{m2} + _mo_nb * _mo_d{v} * _mo_d{v}")]
        if y is not None:
            lines += ["if abs(_mo_dx) >= _MO_WIDE or abs(_mo_dy) >= _MO_WIDE:",
                      "    " + emit.add(states["batch_c"], slot, y[3]),
                      "    " + emit.add(states["huge_c"], slot,
                                    "_mo_nb * ((_mo_dx * _MO_SCALE) * _mo_dy if abs(_mo_dx) >= abs(_mo_dy) "
                                    "else _mo_dx * (_mo_dy * _MO_SCALE))"),
                      "else:",
                      "    " + emit.add(states["batch_c"], slot, f"{y[3]} + _mo_nb * _mo_dx * _mo_dy")]
        return lines

    def _settled(self, xp: Any, arrays: dict[str, Any]) -> dict[str, Any]:
        """Return ``arrays`` with the groups a fused CUDA twin kept as shifted sums in the Welford form (the
        vector form of :meth:`_emit_settle`; see the comment above :attr:`fusable`). A state without batch sums (a
        window frame's moments, :func:`~gpu_engine.kernels.window_moments.frame_comoments`) is in that form."""
        if "batch_n" not in arrays:
            return arrays
        sums = arrays["batch_n"]
        summed = sums > 0
        n = xp.where(summed, sums, 1).astype(xp.float64)
        out = dict(arrays)
        out["count"] = xp.where(summed, sums, arrays["count"])
        offsets = {}
        scale = kernels.PIVOT_SCALE
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for v in ("x", "y") if self.paired else ("x",):
                plain, scaled = arrays["batch_d" + v], arrays["batch_s" + v]
                offset = offsets[v] = plain / n + scaled / n / scale
                m2 = _settled_sum(xp, arrays["batch_m2" + v], arrays["huge_m2" + v], offset, plain, scaled)
                out["mean_" + v] = xp.where(summed, offset, arrays["mean_" + v])
                out["m2_" + v] = xp.where(summed, xp.maximum(m2, 0.0), arrays["m2_" + v])
            if self.paired:
                c = _settled_sum(xp, arrays["batch_c"], arrays["huge_c"], offsets["x"], arrays["batch_dy"],
                                 arrays["batch_sy"])
                out["c"] = xp.where(summed, c, arrays["c"])
        return out


class ArgMinMax(AggregateFunction):
    """``arg_min(x, y)``/``arg_max(x, y)`` (``min_by``/``max_by``): the ``x`` of a row whose ``y`` is least/greatest.

    Rows where either side is NULL are skipped, as DuckDB. Each batch folds
    the keys as ``min``/``max`` do (NaN greatest), then every row whose key
    equals its group's new key stores its value (one of them stays: ties give
    any of their values, as DuckDB's order gives one); partial steps emit the
    value as ``name`` and its key as ``name$key``. String values are kept as a
    string column: each batch gathers, per group, its winning row's string or
    the one kept before.
    """

    @property
    def want_max(self) -> bool:
        return self.call.function == "arg_max"

    @property
    def key_type(self) -> pa.DataType:
        return self.call.second.dtype

    @property
    def over_strings(self) -> bool:
        """Return True for string values: kept as a string column (:attr:`AggregateState.strings`)."""
        return is_string(self.value_type)

    def state_arrays(self) -> tuple[StateArray, ...]:
        key = _word_dtype(self.key_type)
        fill = kernels.identity_for_max(key) if self.want_max else kernels.identity_for_min(key)
        value = () if self.over_strings else (StateArray("value", _word_dtype(self.value_type), 0),)
        return (StateArray("key", key, fill), StateArray("key_has", np.dtype(np.bool_), False)) + value + (
            StateArray("has", np.dtype(np.bool_), False),)

    @property
    def input_columns(self) -> tuple[str, ...]:
        return (self.call.arg.name, self.call.second.name)

    def update(self, device, state, group_ids, column):
        raise NotImplementedError("arg_min/arg_max take two arguments (update_rows)")

    def update_rows(self, device, state, group_ids, columns):
        xp = device.xp
        values, keys = columns
        arrays = state.arrays
        validity = _pair_validity(device, columns)
        key_words = keys.data.astype(arrays["key"].dtype, copy=False)
        fold = kernels.group_max if self.want_max else kernels.group_min
        fold(device, group_ids, key_words, validity, arrays["key"], arrays["key_has"])
        best = arrays["key"][group_ids]
        rows = (key_words == best) | ((key_words != key_words) & (best != best))
        if validity is not None:
            rows = rows & validity
        if self.over_strings:
            self._keep_strings(device, state, group_ids, rows, values)
            return
        value_words = values.data.astype(arrays["value"].dtype, copy=False)
        kernels.group_keep_any(device, group_ids, rows, value_words, arrays["value"], arrays["has"])

    def _keep_strings(self, device: Device, state: AggregateState, group_ids: Any, rows: Any, values: Column) -> None:
        """Keep, for each group with a winning row in this batch, that row's string; the others keep theirs."""
        from gpu_engine.columnar.concat import concat_columns
        from gpu_engine.kernels.gather import gather_column

        xp = device.xp
        n = int(group_ids.shape[0])
        if n == 0:
            return
        has = state.arrays["has"]
        groups = int(has.shape[0])
        chosen = xp.zeros(groups, dtype=xp.int64)
        taken = xp.zeros(groups, dtype=xp.bool_)
        kernels.group_keep_any(device, group_ids, rows, xp.arange(n, dtype=xp.int64), chosen, taken)
        previous = state.strings
        known = 0 if previous is None else len(previous)
        candidates = values if previous is None else concat_columns(device, [previous, values])
        slots = xp.arange(groups, dtype=xp.int64)
        index = xp.where(taken, chosen + known, xp.where(slots < known, slots, 0))
        has |= taken
        kept = gather_column(device, candidates, index)
        state.strings = Column(kept.dtype, kept.data, has.copy(), kept.offsets, kept.dictionary)

    def _string_values(self, device: Device, state: AggregateState, groups: int) -> Column:
        from gpu_engine.kernels.gather import gather_column

        xp = device.xp
        has = state.arrays["has"][:groups].copy()
        if state.strings is None:
            return Column(self.output_type, xp.zeros(0, dtype=xp.uint8), has, xp.zeros(groups + 1, dtype=xp.int64))
        kept = gather_column(device, state.strings, xp.arange(groups, dtype=xp.int64))
        return Column(kept.dtype, kept.data, has, kept.offsets, kept.dictionary)

    def merge(self, device, state, group_ids, columns):
        self.update_rows(device, state, group_ids, columns)

    def extract(self, device, state, groups):
        has = state.arrays["has"][:groups].copy()
        if self.over_strings:
            out = [(self.name, self._string_values(device, state, groups))]
        else:
            value = state.arrays["value"][:groups].astype(physical_dtype(self.output_type))
            out = [(self.name, Column(self.output_type, value, has))]
        if not self.final_output:
            key = state.arrays["key"][:groups].astype(physical_dtype(self.key_type))
            out.append((self.name + ARG_KEY_SUFFIX, Column(self.key_type, key, has.copy())))
        return out

    @property
    def fusable(self) -> str | None:
        return f"{self.call.function} has no fused-kernel update"


def _set_flags(device: Device, group_ids: Any, rows: Any, flags: Any) -> None:
    """Set ``flags[group]`` for every group with a row where ``rows`` holds."""
    xp = device.xp
    ones = xp.ones(group_ids.shape[0], dtype=xp.int64)
    seen = xp.zeros(flags.shape[0], dtype=xp.int64)
    kernels.group_max(device, group_ids, ones, rows, seen, xp.zeros(flags.shape[0], dtype=xp.bool_))
    flags |= seen > 0


def _row_validity(device: Device, column: Column) -> Any:
    from gpu_engine.kernels.gather import dictionary_row_validity

    return dictionary_row_validity(device, column) if column.is_dictionary else column.validity


_FUNCTIONS: dict[str, Callable[..., AggregateFunction]] = {
    "count_star": Count, "count": Count, "sum": Sum, "avg": Avg, "min": MinMax, "max": MinMax,
    **{name: Moments for name in VARIANCE_FUNCTIONS + COVARIANCE_FUNCTIONS},
    "bool_and": BoolAndOr, "bool_or": BoolAndOr, "any_value": AnyValue, "count_if": CountIf,
    "bit_and": BitFold, "bit_or": BitFold, "bit_xor": BitFold, "arg_min": ArgMinMax, "arg_max": ArgMinMax,
    "product": Product,
}


def aggregate_function(call: AggregateCall, name: str, raw_input: bool, output_type: pa.DataType,
                       final_output: bool) -> AggregateFunction:
    """Return the object computing ``call`` in one aggregation step (see :class:`AggregateFunction`).

    Raises
    ------
    NotImplementedError
        For an aggregate no operator computes (:func:`unsupported_aggregate`).
    """
    reason = unsupported_aggregate(call)
    if reason is not None:
        raise NotImplementedError(reason)
    factory = _FUNCTIONS.get(call.function)
    if picks_a_row(call.function, None if call.second is None else call.second.dtype):
        factory = None  # arg_min/arg_max over string or wide decimal keys keep a candidate row (ordered_pick)
    if factory is None:  # the holistic ones subclass this module's AggregateFunction: imported when asked for
        from gpu_engine.aggregation.holistic import VALUE_LIST_CLASSES
        from gpu_engine.aggregation.ordered_pick import ORDERED_PICK_CLASSES

        factory = VALUE_LIST_CLASSES.get(call.function) or ORDERED_PICK_CLASSES.get(call.function)
    if factory is None:
        raise NotImplementedError(f"unknown aggregate function {call.function!r}")
    return factory(call, name, raw_input, output_type, final_output)


def aggregate_functions_of(node) -> list[AggregateFunction]:
    """Return the aggregate objects of an aggregation (or fused aggregation) node, in output order."""
    step = node.step
    functions = []
    for name, call in zip(node.aggregate_names, node.aggregates):
        output_type = call.dtype if step.output_is_final else node.output_schema.field(name).type
        functions.append(aggregate_function(call, name, step.input_is_raw, output_type, step.output_is_final))
    return functions
