"""Bind a batch to a generated kernel's inputs: its fixed-width columns and its lifted subexpressions.

Every generated kernel (:mod:`~gpu_engine.codegen.fused_aggregation_kernel`,
:mod:`~gpu_engine.codegen.fused_filter_kernel`) reads the inputs a
:class:`~gpu_engine.codegen.fusion_program.FusionProgram` names, under the
parameter names ``c{k}`` (``c{k}_v`` for validity), ``l{m}_values``,
``l{m}_valid``, ``l{m}_codes``, ``l{m}_null`` and ``l{m}_codes_v``, and ``rows``
(the batch's gather map). :class:`KernelInputs` makes those arrays for one
batch and the :class:`~gpu_engine.codegen.fused_aggregation_kernel.KernelLayout`
that says which kernel variant reads them: a lifted subexpression over a
dictionary column becomes a lookup table (its value on each dictionary entry,
then on NULL) read by the row's code, cached by the dictionary's fingerprint,
so a dictionary shared by every batch is evaluated once; over plain strings
it is evaluated on the batch's rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pyarrow as pa

from gpu_engine.codegen.fused_aggregation_kernel import LIFTED_DICTIONARY, LIFTED_ROWS, KernelLayout
from gpu_engine.codegen.fusion_program import FusionProgram, LiftedExpression, may_be_wide
from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column, host_fingerprint
from gpu_engine.columnar.concat import concat_columns
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions import evaluate
from gpu_engine.expressions.deferred_checks import checks_read_together
from gpu_engine.kernels.gather import dictionary_row_validity, gather
from gpu_engine.kernels.string_keys import finish_together
from gpu_engine.plans.expressions import ColumnRef

__all__ = ["KernelInputs", "kernel_parameter_array"]

#: Lookup tables kept per operator (one per lifted subexpression and dictionary).
_LOOKUP_CACHE_ENTRIES = 64
#: Unfingerprinted dictionaries an operator keeps with their tables (each holds its dictionary alive).
_UNFINGERPRINTED_ENTRIES = 4
#: Lookup tables of expressions that do not depend on the operator (all but interned keys), kept per process.
_SHARED_LOOKUP_ENTRIES = 1024
_shared_lookups: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
_shared_lock = threading.Lock()
#: Program shapes whose kernels were bound with a validity: which of their inputs (``c{k}``, ``l{m}_codes``) had one.
_MAX_VALIDITY_SHAPES = 1024
_validity_seen: dict[FusionProgram, set[str]] = {}


def _inputs_seen_with_validity(program: FusionProgram) -> set[str]:
    """Return the set (shared by every operator of ``program``'s shape, in this process) of its inputs seen with
    a validity; an operator adds to it."""
    shape = program.shape()
    with _shared_lock:
        seen = _validity_seen.get(shape)
        if seen is None:
            if len(_validity_seen) >= _MAX_VALIDITY_SHAPES:
                _validity_seen.clear()
            seen = _validity_seen[shape] = set()
        return seen


def _shared_lookup(key: tuple) -> tuple[Any, Any] | None:
    with _shared_lock:
        table = _shared_lookups.get(key)
        if table is not None:
            _shared_lookups.move_to_end(key)
        return table


def _keep_shared_lookup(key: tuple, table: tuple[Any, Any]) -> None:
    with _shared_lock:
        _shared_lookups[key] = table
        while len(_shared_lookups) > _SHARED_LOOKUP_ENTRIES:
            _shared_lookups.popitem(last=False)


def _fingerprint(device, dictionary: Column) -> str | None:
    """Return the digest of a dictionary's values: kept from its Arrow conversion, else taken here on a host device."""
    if dictionary.fingerprint is not None or device.xp is not np:
        return dictionary.fingerprint
    return host_fingerprint(dictionary)


def _read_only(array: Any) -> Any:
    """Return a read-only view of a writable host array (anything else as it is).

    Why: numba types a read-only array apart from a writable one, so a kernel compiled for columns
    decoded from Arrow (read-only) compiled a second specialization when a later batch brought columns
    an operator had computed (writable): TPC-DS q14's second run compiled its fused aggregation again
    and, in the background compile mode, ran on the lowest tier meanwhile. Generated kernels only read
    their inputs, so binding every input read-only gives each kernel one signature; a writable array
    still converts to it at a launch of a kernel compiled before.
    """
    if isinstance(array, np.ndarray) and array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def kernel_parameter_array(device, program: FusionProgram) -> Any:
    """Return the program's parameter array on ``device`` (one int64 word at least: kernels index no empty array).

    Made once per operator: every batch's launch passes the same array, so new constants cost one
    small upload per query, and no kernel is generated or compiled for them
    (:mod:`~gpu_engine.codegen.kernel_parameters`).
    """
    return device.asarray(np.array(program.parameter_words or (0,), dtype=np.int64))


class KernelInputs:
    """Make a generated kernel's input arrays from batches; one per operator (it caches lookup tables).

    ``interners`` map the index of each interned lifted expression (a string grouping key) to the
    operator's interner, whose ``ids(column)`` gives the kernel an int64 id per string.
    """

    def __init__(self, device, program: FusionProgram, interners: dict[int, Any] | None = None, *,
                 mapped_dictionaries_by_rows: bool = False):
        self.device = device
        self.program = program
        self.interners = interners or {}
        #: Whether a dictionary-coded string key read through a gather map is interned by its mapped rows (cpu):
        #: set by a step fed by another step's groups (see :meth:`_interned_in_place`). A property of the step,
        #: never of a batch's sizes, so the kernel layout (and the generated kernel) does not change with the data
        #: or a query's parameter values.
        self.mapped_dictionaries_by_rows = mapped_dictionaries_by_rows
        self.placeholder = device.xp.zeros(1, dtype=device.xp.int32)
        self._lookup_tables: dict[tuple[int, str], tuple[Any, Any]] = {}
        #: (lifted index, id of a dictionary too large to fingerprint) -> (that dictionary, its table).
        self._unfingerprinted: dict[tuple[int, int], tuple[Column, tuple[Any, Any]]] = {}
        self._with_validity = _inputs_seen_with_validity(program)
        self._all_valid = device.xp.ones(0, dtype=device.xp.bool_)

    def bind(self, batch: Batch) -> tuple[KernelLayout, dict[str, Any]]:
        """Return the kernel layout ``batch`` needs and its input arrays by parameter name.

        Columns with a map of their own (a hash join's build columns, see
        :attr:`~gpu_engine.columnar.batch.Batch.column_maps`) are read through it inside the kernel as
        its second map; a batch whose columns bring more than one such map is materialized first.
        """
        batch, second = self._with_one_second_map(batch)
        arrays: dict[str, Any] = {"rows": batch.gather_map if batch.gather_map is not None else self.placeholder}
        if second is not None:
            arrays["rows2"] = second
        column_validity, wide_columns = [], []
        for k, ref in enumerate(self.program.columns):
            column = batch.base_column(ref.name)
            arrays[f"c{k}"] = column.data
            wide_columns.append(column.data.ndim == 2 and may_be_wide(ref.dtype))  # words (read by HighWord)
            validity = self._validity(f"c{k}", column)
            column_validity.append(validity is not None)
            if validity is not None:
                arrays[f"c{k}_v"] = validity
        modes = []
        together: list = []  # the string keys' parallel claims, read back in one sync below
        try:
            for m, lift in enumerate(self.program.lifted):
                column = batch.base_column(lift.column)
                in_place = self._interned_in_place(lift, batch)
                table = (self._lookup_table(m, lift, column.dictionary) if column.is_dictionary and not in_place
                         else None)
                if table is not None:
                    arrays[f"l{m}_values"], arrays[f"l{m}_valid"] = table
                    arrays[f"l{m}_codes"] = column.data
                    arrays[f"l{m}_null"] = np.int64(len(column.dictionary))
                    mode = LIFTED_DICTIONARY
                    validity = self._validity(f"l{m}_codes", column)
                    if validity is not None:
                        arrays[f"l{m}_codes_v"] = validity
                        mode += "+validity"
                elif in_place:
                    arrays[f"l{m}_values"], arrays[f"l{m}_valid"] = self._interned_through_map(m, lift, batch,
                                                                                               together)
                    mode = LIFTED_ROWS
                else:
                    rows = batch.materialize([lift.column])
                    arrays[f"l{m}_values"], arrays[f"l{m}_valid"] = self._evaluated(m, lift, rows, together)
                    mode = LIFTED_ROWS
                modes.append(mode)
        finally:  # also when a key fails to evaluate: the claims made so far leave the tables consistent
            finish_together(self.device, together)
        own = second is not None
        second_columns = tuple(own and batch.own_map(ref.name) is not None for ref in self.program.columns)
        second_lifted = tuple(own and modes[m] != LIFTED_ROWS and batch.own_map(lift.column) is not None
                              for m, lift in enumerate(self.program.lifted))
        layout = KernelLayout(batch.gather_map is not None, tuple(column_validity), tuple(modes),
                              second_columns if any(second_columns) else (), second_lifted if any(second_lifted) else (),
                              tuple(wide_columns) if any(wide_columns) else ())
        if not layout.second_mapped:
            arrays.pop("rows2", None)
        return layout, {name: _read_only(array) for name, array in arrays.items()}

    def forget_lifted(self, m: int) -> None:
        """Drop the cached lookup tables of lifted subexpression ``m`` (its interner was replaced: its ids changed)."""
        self._lookup_tables = {key: table for key, table in self._lookup_tables.items() if key[0] != m}
        self._unfingerprinted = {key: held for key, held in self._unfingerprinted.items() if key[0] != m}

    def _validity(self, name: str, column: Column) -> Any:
        """Return ``column``'s validity; an all-valid one where it has none but a batch of this shape had one.

        Why: whether a batch's column carries a validity depends on its data (a Parquet row group without
        NULLs brings none), and the kernel layout follows it, so batches of one query alternated between
        kernel variants, which drivers met in another order each run: TPC-DS q14's warm runs at SF1
        compiled a new variant run after run (4 compiles in 3 runs after two settling runs), and in the
        background compile mode each new variant ran its batches on the lowest tier again. Once an
        input of a shape was seen with a validity, the variant that reads one serves every batch.
        """
        if column.validity is not None:
            if name not in self._with_validity:
                with _shared_lock:
                    self._with_validity.add(name)
            return column.validity
        if name not in self._with_validity:
            return None
        rows = len(column.data)
        if len(self._all_valid) < rows:
            self._all_valid = self.device.xp.ones(max(rows, 2 * len(self._all_valid)), dtype=self.device.xp.bool_)
        return self._all_valid[:rows]

    def _with_one_second_map(self, batch: Batch) -> tuple[Batch, Any]:
        """Return ``batch`` (materialized if its read columns bring several maps of their own) and that one map."""
        if batch.column_maps is None:
            return batch, None
        names = list(dict.fromkeys([ref.name for ref in self.program.columns]
                                   + [lift.column for lift in self.program.lifted]))
        maps = {id(m): m for m in (batch.own_map(name) for name in names) if m is not None}
        if len(maps) > 1:
            return batch.materialize(names), None
        return batch, next(iter(maps.values()), None)

    def _lookup_table(self, m: int, lift: LiftedExpression, dictionary: Column) -> tuple[Any, Any] | None:
        """Return ``(values, valid)`` of ``lift`` on each dictionary value and, last, on NULL; None if it raises."""
        fingerprint = _fingerprint(self.device, dictionary)
        key = (m, fingerprint)
        if fingerprint is not None and key in self._lookup_tables:
            return self._lookup_tables[key]
        # A dictionary too large to fingerprint is known by the object itself (kept with its table, so its id is
        # not reused meanwhile): the batches a LocalPartition cuts from one emitted partial result share it, and
        # a FINAL step interned all its values again for each of them.
        held = self._unfingerprinted.get((m, id(dictionary))) if fingerprint is None else None
        if held is not None and held[0] is dictionary:
            return held[1]
        # Every driver of every query evaluating `l_shipmode IN (...)` over the same dictionary gets the
        # same table: evaluated eagerly once per process, not once per operator (~1 ms each time).
        shared = (self.device.name, repr(lift.expr), fingerprint) if fingerprint is not None and not lift.interned else None
        table = _shared_lookup(shared) if shared is not None else None
        if table is not None:
            self._keep(key, table)
            return table
        xp = self.device.xp
        null_entry = Column(pa.string(), xp.zeros(0, dtype=xp.uint8), xp.zeros(1, dtype=xp.bool_),
                            xp.zeros(2, dtype=xp.int64))
        entries = concat_columns(self.device, [dictionary, null_entry])
        try:  # its own scope: a check deferred to the operator's (a text a CAST cannot read) would escape the except
            with checks_read_together(self.device, own_scope=True):
                table = self._evaluated(m, lift, Batch((lift.column,), (entries,), self.device, None, len(entries)))
        except ExecutionError:  # a value no row may use failed (one a filter removed): evaluate on the rows instead
            return None
        table = (_read_only(table[0]), _read_only(table[1]))  # kept as bound (see _read_only): no view per batch
        if fingerprint is not None:
            self._keep(key, table)
        else:
            if len(self._unfingerprinted) >= _UNFINGERPRINTED_ENTRIES:
                self._unfingerprinted.pop(next(iter(self._unfingerprinted)))
            self._unfingerprinted[(m, id(dictionary))] = (dictionary, table)
        if shared is not None:
            _keep_shared_lookup(shared, table)
        return table

    def _keep(self, key: tuple[int, str], table: tuple[Any, Any]) -> None:
        if len(self._lookup_tables) >= _LOOKUP_CACHE_ENTRIES:
            self._lookup_tables.pop(next(iter(self._lookup_tables)))
        self._lookup_tables[key] = table

    def _interned_in_place(self, lift: LiftedExpression, batch: Batch) -> bool:
        """Whether ``lift`` is a string column read through the batch's gather map whose ids come from its base
        column's rows (:meth:`_interned_through_map`): a plain column (no bytes gathered), or a dictionary column
        whose dictionary holds more values than the map has rows -- a step fed by another step's groups
        (``mapped_dictionaries_by_rows``), where that holds by construction; deciding it by each batch's sizes
        made the kernel layout change with the data, so a prepared query with new parameter values generated a
        new kernel (tests/sql/test_bind_parameters.py).

        Why the latter: a FINAL step's batch is a slice of a PARTIAL step's emitted groups, whose key's dictionary
        holds every group that driver saw (db-benchmark's ``GROUP BY id3``: 100k strings, 50k rows a partition
        of two); interning the dictionary whole interned each driver's 100k strings into each FINAL driver's table
        and keyed the slots by hash, where the rows' own strings (as
        :func:`~gpu_engine.kernels.gather.rows_or_dictionary` does for a column) give ids that are the groups
        themselves, so the slot table takes each id as its slot
        (:func:`~gpu_engine.codegen.fused_aggregation_kernel.id_slotted_key`). cpu only: the CUDA twins gather a
        mapped column's rows before interning them (:meth:`~gpu_engine.kernels.string_keys.StringKeyTable.intern`),
        and decoding a dictionary's rows reads their bytes' size back, a host read a batch where the dictionary's
        lookup table costs none.
        """
        if not (lift.interned and isinstance(lift.expr, ColumnRef) and lift.expr.name == lift.column
                and batch.gather_map is not None and batch.own_map(lift.column) is None):
            return False
        column = batch.base_column(lift.column)
        return not column.is_dictionary or (self.mapped_dictionaries_by_rows and self.device.kernel_flavor == "cpu")

    def _interned_through_map(self, m: int, lift: LiftedExpression, batch: Batch,
                              together: list | None) -> tuple[Any, Any]:
        """Return the ids and validity of a string key's mapped rows, interned where its base column holds them.

        Why: a FINAL step's batches are its senders' columns under a repartition's map; gathering a key's bytes
        (:meth:`Batch.materialize`) only to intern them cost as much as the interning (see
        :meth:`~gpu_engine.kernels.string_keys.StringKeyTable.intern`).
        """
        xp = self.device.xp
        column, rows = batch.base_column(lift.column), batch.gather_map
        values = self.interners[m].ids(column, together, rows)
        validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
        if validity is None:
            return values, xp.ones(int(rows.shape[0]), dtype=xp.bool_)
        return values, gather(self.device, validity, rows)

    def _evaluated(self, m: int, lift: LiftedExpression, batch: Batch,
                   together: list | None = None) -> tuple[Any, Any]:
        xp = self.device.xp
        column = evaluate(lift.expr, batch)
        if lift.interned:
            validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
            values = self.interners[m].ids(column, together)
        else:
            validity, values = column.validity, column.data
        if validity is None:
            validity = xp.ones(len(column), dtype=xp.bool_)
        return values, validity
