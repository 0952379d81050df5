"""Group rows by key and aggregate them in a device hash table (Velox's HashAggregation).

Steps follow Velox: PARTIAL reads raw rows and emits intermediate columns,
flushing whenever its table passes ``partial_aggregation_max_groups`` (the
final step merges the pieces); INTERMEDIATE and FINAL read intermediate
columns; SINGLE goes from raw rows to results. Keys are normalized into int64
words (:func:`gpu_engine.kernels.group_by.normalize_keys`) so one table kernel
serves every key type (string keys, plain or dictionary-encoded, are first
interned to one id word a row, as the fused tier's are); the first row of each
new group is gathered to keep the group's key values for output (a string
key's ids, emitted as codes into its interned strings: no bytes copied per batch). Each aggregate is an
:class:`~gpu_engine.aggregation.functions.AggregateFunction` that declares its
state arrays, its updates and its output columns (the fused aggregation uses
the same objects); integer and decimal sums accumulate as two 64-bit halves and
never wrap: an out-of-range result is an error.

``min``/``max`` over strings keep each group's current value as a string
column: per batch, the groups' values and the batch's values are ranked
together by one device sort (:func:`~gpu_engine.kernels.sort.sort_indices`,
the ORDER BY kernels) and each group keeps its best rank (the ``group_min``
kernel), so no string is compared on the host.

Holistic aggregates (``median``, quantiles, ``mode``, ``string_agg``,
``approx_count_distinct``) keep their groups' values
(:mod:`gpu_engine.aggregation.holistic`); a partial step holding them emits a
group's values one per row (:class:`~gpu_engine.aggregation.holistic.ValueRows`).

The operator's state (hash table, interned strings, kept keys, accumulators,
output not yet taken) is reserved in its memory pool after every change, so a
query whose groups outgrow its cap fails naming this operator
(:mod:`gpu_engine.exec.memory_pool`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gpu_engine.aggregation.functions import AggregateState, MinMax, aggregate_functions_of
from gpu_engine.aggregation.holistic import ValueList, ValueRows
from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_columns
from gpu_engine.aggregation.aggregation_operator import AggregationOperator
from gpu_engine.exec.made_once import MadePerNode
from gpu_engine.exec.operator import OperatorCtx
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions import evaluate
from gpu_engine.expressions.common_subexpressions import hoist_common_subexpressions
from gpu_engine.expressions.deferred_checks import checks_read_together
from gpu_engine.kernels import aggregate as agg
from gpu_engine.kernels.gather import dictionary_row_validity, gather_column
from gpu_engine.kernels.group_by import GroupByHashTable, StringInterner, normalize_keys
from gpu_engine.kernels.sort import sort_indices
from gpu_engine.operators.hash_build import null_column
from gpu_engine.plans.expressions import referenced_columns
from gpu_engine.plans.nodes import AggregationNode

__all__ = ["HashAggregation", "can_pass_through"]


def can_pass_through(functions) -> bool:
    """Return True when a PARTIAL step of ``functions`` may hand rows on as groups of one (see
    :meth:`HashAggregation.abandon`): not value lists (a partial step spreads them over rows of their
    own) nor min/max of strings (folded by a sort per batch)."""
    return not any(isinstance(f, ValueList) or (isinstance(f, MinMax) and f.over_strings) for f in functions)


def interns_key(column: Column) -> bool:
    """Return True when a grouping key is kept as interned ids (every string key, plain or dictionary-encoded)."""
    return column.is_string


class _SharedArguments:
    """Evaluate the aggregates' arguments over a batch, each subexpression several of them share once.

    Why: conditional aggregates repeat their conditions and values (TPC-DS q9's fifteen
    ``avg(CASE WHEN ss_quantity BETWEEN 1 AND 20 THEN ss_net_paid END)``-style arguments test five
    ranges three times each; q66's twelve months each multiply ``ws_ext_sales_price * ws_quantity``),
    and a raw step evaluated every argument whole. A shared subexpression is evaluated once over all
    rows; one inside a CASE branch may fail on a row its branch never takes, so when evaluating the
    shared ones raises, the batch's arguments are evaluated one by one as written (the CASE decides).
    """

    def __init__(self, functions):
        self._written = [tuple(function.call.inputs()) for function in functions]
        self._shared, rewritten = hoist_common_subexpressions(tuple(a for args in self._written for a in args))
        rest = iter(rewritten)
        self._rewritten = [tuple(next(rest) for _ in args) for args in self._written]

    def columns(self, flat: Batch) -> list[list[Column]]:
        """Return each aggregate's argument columns over ``flat`` (the batch's columns the arguments read)."""
        if self._shared:
            try:
                with checks_read_together(flat.device, own_scope=True):  # learn of a failure here, to fall back
                    shared = flat
                    for name, expression in self._shared:
                        shared = Batch(shared.names + (name,), shared.columns + (evaluate(expression, shared),),
                                       shared.device, None, shared.num_rows)
                    return [[evaluate(arg, shared) for arg in args] for args in self._rewritten]
            except ExecutionError:
                pass
        return [[evaluate(arg, flat) for arg in args] for args in self._written]


#: A raw step's shared arguments, hoisted once per plan node (read-only: every driver and later run shares them).
#: Why: hoisting walks every argument expression; q66's raw steps over twelve months' CASE arguments spent ~40 ms of
#: serial Task start per run re-hoisting them for each driver (as FusedAggregation and FilterProject did, 2857ca9).
_SHARED_ARGUMENTS: MadePerNode[_SharedArguments] = MadePerNode()


def state_capacity(keyed: bool, groups: int, size: int) -> int:
    """Return the slots a state array grows to for ``groups`` groups (``size`` held now).

    Keyed: room to double, so growing costs amortized O(1) a group. Without keys exactly the one
    group: the CPU kernels fold a one-slot state in registers (:mod:`gpu_engine.kernels.aggregate`),
    not through memory a row at a time.
    """
    return max(groups, 2 * size, 16) if keyed else groups


class HashAggregation(AggregationOperator):
    """Blocking operator: consumes all input, then emits one row per group."""

    def __init__(self, ctx: OperatorCtx, node: AggregationNode):
        super().__init__(ctx, node)
        self.keys = tuple(node.grouping_keys)
        self.max_groups = ctx.config.partial_aggregation_max_groups
        self._arguments_read = {name for call in node.aggregates for arg in call.inputs()
                                for name in referenced_columns(arg)}
        self._functions = aggregate_functions_of(node)
        self._arguments = _SHARED_ARGUMENTS.get(node, lambda: _SharedArguments(self._functions)) \
            if self.step.input_is_raw else None
        #: Whether each later batch passes on as groups of one row (see abandon); not for value lists
        #: (a partial step spreads them over rows of their own) or string min/max (folded by a sort).
        self.passing_through = False
        self._can_pass_through = can_pass_through(self._functions)
        self._reset()

    # ----------------------------------------------------------------- state
    def _reset(self) -> None:
        self._table: GroupByHashTable | None = None
        self._widths: tuple[int, ...] | None = None
        self._interners: dict[int, StringInterner] | None = None
        self._key_parts: list[list[Column]] = [[] for _ in self.keys]
        self._key_bytes = 0
        self._num_groups = 0 if self.keys else 1
        self._states = [function.new_state() for function in self._functions]
        self._grow(self._num_groups)
        self._seen_input = False

    def _grow(self, groups: int, states: list[AggregateState] | None = None) -> None:
        xp = self.device.xp
        for function, state in zip(self._functions, self._states if states is None else states):
            for layout in function.state_arrays():
                current = state.arrays.get(layout.name)
                size = 0 if current is None else int(current.shape[0])
                if size >= groups:
                    continue
                capacity = state_capacity(bool(self.keys), groups, size)
                grown = xp.full(capacity, layout.fill, dtype=layout.dtype)
                if current is not None:
                    grown[:size] = current
                state.arrays[layout.name] = grown

    # ----------------------------------------------------------------- input
    def add_input(self, batch: Batch) -> None:
        self._seen_input = True
        xp = self.device.xp
        if self.passing_through:
            self._output.append(self._groups_of_one(batch))
            self.set_memory_reservation(self._state_bytes())
            return
        if self.keys:
            group_ids = self._insert_keys([batch.column(k) for k in self.keys])
        else:
            group_ids = xp.zeros(batch.num_rows, dtype=xp.int32)
        if self.step.input_is_raw:
            flat = batch.materialize([n for n in batch.names if n in self._arguments_read])
            for function, state, arguments in zip(self._functions, self._states, self._arguments.columns(flat)):
                if isinstance(function, MinMax) and function.over_strings:
                    self._fold_strings(function, state, group_ids, arguments[0])
                else:
                    function.update_rows(self.device, state, group_ids, arguments)
        else:
            for function, state in zip(self._functions, self._states):
                columns = [batch.column(name) for name in function.input_columns]
                if isinstance(function, MinMax) and function.over_strings:
                    self._fold_strings(function, state, group_ids, columns[0])
                else:
                    function.merge(self.device, state, group_ids, columns)
        if self.step is self.step.PARTIAL and self.keys and self._num_groups > self.max_groups:
            self.add_runtime_stat("partial_flushes", 1)
            self._output.append(self._emit())
            self._reset()
            self._rows_grouped = 0
        elif self._can_pass_through and not self._grouping_pays(batch.num_rows, self._num_groups):
            self.abandon()
        self.set_memory_reservation(self._state_bytes())

    def abandon(self) -> None:
        """Stop grouping (a PARTIAL step): emit the groups held, then hand each later row on as a group of one.

        Called when grouping does not pay (see :meth:`AggregationOperator._grouping_pays`), and by a fused
        aggregation that decided so itself and runs its later batches here.
        """
        if self.passing_through or not self._can_pass_through:
            return
        self.add_runtime_stat("partial_aggregation_abandoned", 1)
        self._record_abandoned()
        if self._num_groups:
            self._output.append(self._emit())
        self._reset()
        self.passing_through = True

    def _groups_of_one(self, batch: Batch) -> Batch:
        """Return ``batch``'s rows as a partial step's output, each row its own group: its keys and the
        intermediate columns of every aggregate over that one row (no hash table)."""
        xp = self.device.xp
        rows = batch.num_rows
        self.add_runtime_stat("rows_passed_through", rows)
        group_ids = xp.arange(rows, dtype=xp.int32)
        states = [function.new_state() for function in self._functions]
        self._grow(rows, states)
        flat = batch.materialize([n for n in batch.names if n in self._arguments_read])
        names: list[str] = list(self.keys)
        columns: list[Column] = [batch.column(key) for key in self.keys]
        for function, state, arguments in zip(self._functions, states, self._arguments.columns(flat)):
            function.update_rows(self.device, state, group_ids, arguments)
            for name, column in function.extract(self.device, state, rows):
                names.append(name)
                columns.append(column)
        return Batch(tuple(names), tuple(columns), self.device, None, rows)

    def _insert_keys(self, key_columns: list[Column]) -> Any:
        """Return each row's group, adding the groups not seen yet (their states start empty)."""
        key_columns = self._interned(key_columns)
        words, widths = normalize_keys(self.device, key_columns, self._widths, narrow=True)
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
        return group_ids

    def no_more_input(self) -> None:
        if self.node.global_grouping_sets and (self.step.input_is_raw or not self.step.output_is_final):
            self._add_global_groups()
        super().no_more_input()

    def _add_global_groups(self) -> None:
        """Add the groups of the GroupId's sets without keys, empty unless rows reached them.

        Why every raw or INTERMEDIATE step adds them, input or not: a set without
        keys has its one row even over no input, and no single driver knows whether
        another saw rows; an empty state merges into a filled one without changing
        it, so each partial adding it costs one row and the final step sees one group
        (an INTERMEDIATE step over a GroupId of pre-aggregated groups,
        :mod:`gpu_engine.sql.grouping_sets`, sees no rows for them on an empty input).
        """
        node = self.node
        xp = self.device.xp
        rows = len(node.global_grouping_sets)
        schema = node.output_schema
        columns = []
        for key in self.keys:
            if key == node.group_id_key:
                columns.append(Column(schema.field(key).type, xp.asarray(
                    list(node.global_grouping_sets), dtype=xp.int64)))
            else:
                columns.append(null_column(self.device, schema.field(key).type, rows))
        self._insert_keys(columns)
        self.set_memory_reservation(self._state_bytes())

    def _state_bytes(self) -> int:
        """Return the bytes of the table, interned strings, kept keys, accumulators and output not yet taken."""
        total = self._key_bytes + sum(b.nbytes for b in self._output)
        if self._table is not None:
            total += self._table.nbytes
        total += sum(interner.nbytes for interner in (self._interners or {}).values())
        return total + sum(state.nbytes for state in self._states)

    def _interned(self, key_columns: list[Column]) -> list[Column]:
        """Replace string keys, plain or dictionary-encoded, by stable int64 ids (one word a row).

        Why: a plain string key (a join's output, a high-cardinality column) was packed into a length
        word and its bytes 8 to a word for every row, and each new group's string copied into the kept
        keys every batch (TPC-DS q23's ``substr(i_item_desc, 1, 30)`` on the lowest tier: 2.39 -> 1.72 s CPU at
        SF1, ``bench/ab.py plain-string-keys``); the interner hashes each row's bytes
        in place, keeps each distinct string once, and the kept keys are the ids (the fused tier's way).
        """
        if self._interners is None:
            self._interners = {i: StringInterner(self.device) for i, c in enumerate(key_columns) if interns_key(c)}
            self._key_types = {i: key_columns[i].dtype for i in self._interners}
        return [self._narrow_ids(self._interners[i].intern(c)) if i in self._interners else c
                for i, c in enumerate(key_columns)]

    def _narrow_ids(self, ids: Column) -> Column:
        """Return interned ids as ``int32`` (as :meth:`_key_output` emits them), a narrow key of one word a row."""
        return Column(pa.int32(), ids.data.astype(self.device.xp.int32), ids.validity)

    def _key_output(self, k: int, parts: list[Column]) -> Column:
        """Return key ``k``'s values for the groups: an interned key's ids become codes into its known strings."""
        column = concat_columns(self.device, parts)
        interner = (self._interners or {}).get(k)
        if interner is None:
            return column
        return Column(self._key_types[k], column.data.astype(self.device.xp.int32), column.validity, None,
                      interner.values())

    def _fold_strings(self, function: MinMax, state: AggregateState, group_ids, column: Column) -> None:
        """Fold a batch's strings into each group's min/max: rank old and new values in one sort, keep the best."""
        xp = self.device.xp
        groups = self._num_groups
        previous = state.strings
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
        order = sort_indices(self.device, [candidates], [not function.want_max], [False])
        ranks = xp.empty(rows, dtype=xp.int64)
        ranks[order] = xp.arange(rows, dtype=xp.int64)
        best = xp.full(groups, agg.identity_for_min(xp.int64), dtype=xp.int64)
        has = xp.zeros(groups, dtype=xp.bool_)
        agg.group_min(self.device, owners, ranks, valid, best, has)
        chosen = gather_column(self.device, candidates, xp.take(order, xp.where(has, best, 0)))
        state.strings = Column(chosen.dtype, chosen.data, has, chosen.offsets, chosen.dictionary)

    def _string_results(self, state: AggregateState, groups: int, dtype: pa.DataType) -> Column:
        """Return each group's min/max string, NULL for groups that saw no value (or none since the last fold)."""
        xp = self.device.xp
        current = state.strings
        known = 0 if current is None else len(current)
        if known == groups:
            return current
        validity = xp.zeros(groups - known, dtype=xp.bool_)
        missing = Column(dtype, xp.zeros(0, dtype=xp.uint8), validity, xp.zeros(groups - known + 1, dtype=xp.int64))
        return missing if current is None else concat_columns(self.device, [current, missing])

    # ---------------------------------------------------------------- output
    def _emit(self) -> Batch:
        groups = self._num_groups
        names: list[str] = list(self.keys)
        columns: list[Column] = [self._key_output(k, parts) for k, parts in enumerate(self._key_parts)]
        # A partial step's value lists (median, string_agg, ...) take a row per value (see ValueRows).
        spread = ValueRows(self.device, self._functions, self._states, groups) if ValueRows.needed(
            self._functions) else None
        if spread is not None:
            columns = [spread.keys(column) for column in columns]
        for function, state in zip(self._functions, self._states):
            if spread is not None and spread.holds(function):
                results = spread.values(function)
            else:
                if isinstance(function, MinMax) and function.over_strings:
                    results = [(function.name, self._string_results(state, groups, function.output_type))]
                else:
                    results = function.extract(self.device, state, groups)
                if spread is not None:
                    results = spread.first_rows(results, groups)
            for name, column in results:
                names.append(name)
                columns.append(column)
        return Batch(tuple(names), tuple(columns), self.device, None, groups if spread is None else spread.rows)

