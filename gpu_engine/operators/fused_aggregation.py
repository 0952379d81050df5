"""Filter, group and aggregate a batch in one generated kernel (the operator of a FusedAggregationNode).

Per batch the operator binds the batch's buffers to the kernel's parameters
(base columns read through the batch's gather map inside the kernel; lifted
string subexpressions as lookup tables by dictionary code), launches the one
kernel that fits the batch's layout, and reads back one small status array
(groups, rows left pending, first error): one launch and one host sync per
batch in the steady state (an aggregation of more aggregates than one kernel
takes launches its key kernel, then a kernel per slice of its aggregates over
the slots the key kernel wrote, and still reads one status:
:func:`~gpu_engine.codegen.kernel_bounds.aggregate_slices`). Keys and
aggregation state live in one slot table
the kernel claims rows of itself (a row per key: occupancy, key words, then
each aggregate's state as the shared aggregate objects of
:mod:`gpu_engine.aggregation.functions` lay it out; see
:func:`~gpu_engine.codegen.fused_aggregation_kernel.slot_table_layout`). The
same objects turn the state columns into output columns, exactly as
:class:`~gpu_engine.operators.hash_aggregation.HashAggregation` does. When the table is half full the kernel leaves new keys pending; the
operator grows the table (with the generated module's ``move`` twins, which
hash keys as the kernel does) and runs those rows again. One string key whose
strings are interned row by row takes its interned id as its slot (no hash;
:func:`~gpu_engine.codegen.fused_aggregation_kernel.id_slotted_key`), and the
table is kept above every id. A FINAL or
INTERMEDIATE step (partial results: mostly new keys) holds the batches that
would grow its table, up to the table's bytes, and grows it once for them all;
a FINAL step whose PARTIAL step gave up grouping (a key per row) sizes its
table once instead, from the scan's rows and what the PARTIAL step saw
(:mod:`gpu_engine.exec.abandoned_partials`). A slot table of 32 MiB or more is advised huge
pages before its fill (:func:`~gpu_engine.host_allocator.advise_huge_pages`): probed at random, it
missed the TLB on nearly every probe with 4 KiB pages. A step of fixed-width keys (not PARTIAL) expecting at
least ``radix_aggregation_min_groups`` groups a driver (a FINAL step after an abandoned PARTIAL step), or whose
one table reaches that many at about a group a row, holds its input instead (from then on), scatters it by the
high bits of its key hashes and aggregates one partition at a time into a table that stays in cache, the one
table's groups joining their partitions (:meth:`FusedAggregation._run_radix`; bench/results/2026-11-29-radix.md).

Lookup tables are cached by the dictionary's contents (Parquet row groups of a
column usually share their dictionary values), so a steady stream of batches
evaluates each string predicate once.

Until the kernel for a batch's layout is compiled (it compiles in a process of
its own: :mod:`gpu_engine.codegen.background_compiles`), batches run on the
lowest tier: the FilterProject and HashAggregation operators the unfused plan
would run (built from the nodes the fusion pass replaced). A PARTIAL step
switches to the kernel as soon as it is ready: both tiers emit the same
partial columns, which the final step merges. Any other step keeps the tier
its first batch took, so no state is ever split between the two.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from gpu_engine.aggregation.functions import AggregateState, aggregate_functions_of
from gpu_engine.codegen.background_compiles import TierSwitch, TwinRef, shape_once
from gpu_engine.codegen.compiled_modules import generated_file
from gpu_engine.codegen.fused_aggregation_kernel import (
    NO_ERROR, TAG_READY, KernelLayout, generate_fused_aggregation, id_slotted_key, slot_table_layout,
    slots_for_groups, max_groups,
)
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.codegen.generation_cache import aggregate_shape
from gpu_engine.codegen.kernel_inputs import KernelInputs, kernel_parameter_array
from gpu_engine.codegen.row_lowering import error_parts
from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_batches
from gpu_engine.columnar.types import is_boolean, is_string, physical_dtype
from gpu_engine.errors import ExecutionError
from gpu_engine.exec.buffer_recycler import MIN_BYTES, give_array, take_array
from gpu_engine.host_allocator import advise_huge_pages
from gpu_engine.exec.made_once import MadePerNode
from gpu_engine.aggregation.aggregation_operator import AggregationOperator
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.operators.hash_aggregation import can_pass_through
from gpu_engine.kernels.gather import gather_column
from gpu_engine.kernels.hash import hash_columns
from gpu_engine.kernels.launch import launch_twin
from gpu_engine.kernels.radix_partition import radix_bits_for, radix_destinations
from gpu_engine.kernels.slot_compaction import occupied_columns_twin, occupied_slot_columns
from gpu_engine.kernels.group_by import new_keys_after_sample as _new_keys_after_sample
from gpu_engine.kernels.string_keys import StringKeyTable
from gpu_engine.plans.expressions import ColumnRef
from gpu_engine.plans.nodes import (
    AggregationStep, FilterNode, FusedAggregationNode, LocalPartitionNode, PlanNode, ProjectNode, TableScanNode,
)

__all__ = ["FusedAggregation"]

_INITIAL_SLOTS = 1024
#: Rows of an aggregation's first batch that run alone to estimate its rate of new keys (see
#: FusedAggregation._expected_new_groups); at most the starting table's keys on every twin, so they
#: never go pending themselves.
_SAMPLE_ROWS = 512
#: Blocks of a fused kernel's CUDA grid: about one resident wave on an H100 (132 SMs x 8 blocks of 256
#: threads). Each block merges its shared-memory states into the slot table once at its end
#: (see gpu_engine.codegen.fused_aggregation_kernel), so more blocks would mean more merges, not more speed.
FUSED_KERNEL_BLOCKS = 1024
#: A full table doubles: a larger step left Q18's 1.5M groups in an 8M-slot (320 MB) table whose
#: fill and final scan cost more than the moves a doubling adds (new tables come from the buffer
#: recycler, so a repeated query does not page-fault through fresh memory either way).
_GROWTH = 2
#: A radix-partitioned step's partitions are sized so that each one's slot table (at most half full) is at
#: most this: in bench/radix_tables_ab.py (q10's row shape, one thread, this 2-core VM: 1 MiB L2 a core, 32 MiB
#: L3) tables of ~1.5-6 MiB ran fastest; more partitions (smaller tables) paid more write streams in the scatter.
RADIX_TABLE_BYTES = 8 << 20
#: A step switches to radix partitions at run time only while its rows bring at least a group per this many rows:
#: partitioning costs a hash and a scatter per row, the one table a cache miss per new key at most (rows of a key
#: in runs hit its slot again), so TPC-H q18's 4 rows a group (in runs) ran 1.20x slower partitioned, integer keys
#: of a group a row 0.60-0.78x.
_RADIX_MAX_ROWS_PER_GROUP = 2


def _sample_positions(xp, rows: int) -> tuple[Any, Any]:
    """Return a first batch's sample (every ``rows // _SAMPLE_ROWS``-th of its first rows) and the other rows'
    positions, both int32 and ascending, made by arithmetic on the device (no host read).

    The rows between two sampled ones are a block of ``stride - 1`` consecutive positions: one broadcast sum
    of block starts and offsets (a per-row division and remainder cost 14 ms for a million rows, 0.7 now).
    """
    stride = rows // _SAMPLE_ROWS
    sample = xp.arange(0, stride * _SAMPLE_ROWS, stride, dtype=xp.int32)
    between = (sample[:, None] + xp.arange(1, stride, dtype=xp.int32)[None, :]).ravel()
    return sample, xp.concatenate((between, xp.arange(stride * _SAMPLE_ROWS, rows, dtype=xp.int32)))


class _KeyInterner:
    """Give each distinct string of a string grouping key a stable int64 id, keeping the strings for output.

    Interning runs on the device, in a :class:`~gpu_engine.kernels.string_keys.StringKeyTable` that hashes
    and compares each row's bytes in place and keeps the known strings (the groups' key values at emit).
    A dictionary-encoded key interns its dictionary once (the operator caches ids by dictionary
    fingerprint); a plain string key is interned row by row, one hash and one probe pass a batch.
    """

    def __init__(self, device):
        self.device = device
        self._table = StringKeyTable(device)
        self._values: Column | None = None
        self._values_known = -1

    def ids(self, column: Column, together: list | None = None, rows: Any = None) -> Any:
        """Return the device int64 ids of ``column``'s rows (its rows ``rows`` where given: a gather map; NULL
        rows get id 0; the kernel masks them).

        With ``together``, the ids are written by :func:`~gpu_engine.kernels.string_keys.finish_together`
        (one read back for a batch's string keys, see :meth:`StringKeyTable.intern`)."""
        return self._table.intern(column, together, rows)

    def expect(self, strings: int, rows: int) -> bool:
        """Make room for ``strings`` strings at once where the key's ``rows`` rows so far were nearly all new (see
        :meth:`StringKeyTable.expect`); return whether it did."""
        return self._table.expect(strings, rows)

    @property
    def growths(self) -> int:
        """Return the times the key's slot table grew past its first."""
        return self._table.growths

    def cpu_twins(self) -> list:
        """Return the static CPU twins :meth:`ids` launches, with arguments of their types (for TierSwitch)."""
        return self._table.cpu_twins()

    def values(self) -> Column:
        """Return every interned string, at the position of its id."""
        if self._values_known != self._table.num_known:
            self._values = self._table.values()
            self._values_known = self._table.num_known
        return self._values

    @property
    def ids_below(self) -> int:
        """Return a bound that every id given out so far is below (no device read: an upper bound on cuda)."""
        return self._table.ids_below

    @property
    def nbytes(self) -> int:
        return self._table.nbytes + (self._values.nbytes if self._values is not None else 0)


def _recycle_words(xp: Any, words: Any, columns: list[Column]) -> list[Column]:
    """Give the emitted slot words back to the buffer recycler, copying out the output columns that view them.

    Why: Q18's emit reads 1.5M groups into a 42 MB words array, above glibc's 32 MiB mmap ceiling, so
    each query page-faulted through it afresh (~70 ms of kernel time a run on the 2-core VM). Most
    outputs are fresh arrays (casts, extracted sums), but a float sum or a count is a view of its state's
    words: it kept all of them alive (db-benchmark q10's ten words of 5M groups a driver, 400 MB faulted
    afresh each query for two 40 MB columns). So a viewing column gets a copy of its own and the words
    are reused. Returns the columns (the viewing ones replaced).
    """
    if xp is not np or int(words.nbytes) < MIN_BYTES:  # the recycler keeps only large buffers
        return columns
    out = []
    for column in columns:
        if column.dictionary is None and any(
                buffer is not None and np.may_share_memory(words, buffer)
                for buffer in (column.data, column.validity, column.offsets)):
            column = replace(column, data=column.data.copy(),
                             validity=None if column.validity is None else column.validity.copy(),
                             offsets=None if column.offsets is None else column.offsets.copy())
        out.append(column)
    if not any(np.may_share_memory(words, buffer) for column in out
               for part in (column, column.dictionary) if part is not None
               for buffer in (part.data, part.validity, part.offsets) if buffer is not None):
        give_array(xp, words)
    return out


def _scattered_columns(device, batch: Batch, destinations: Any) -> tuple[Column, ...]:
    """Return ``batch``'s columns with row ``i`` moved to ``destinations[i]`` (a permutation of the rows).

    Fixed-width values, validity and dictionary codes are scattered (each read once in order; a partition's
    rows are written as one stream); plain strings are gathered through the inverse permutation.
    """
    xp = device.xp
    inverse = None
    columns = []
    for column in batch.columns:
        if column.offsets is not None:  # plain strings: gather their bytes in the new order
            if inverse is None:
                inverse = xp.empty(destinations.shape[0], dtype=xp.int64)
                inverse[destinations] = xp.arange(destinations.shape[0], dtype=xp.int64)
            columns.append(gather_column(device, column, inverse))
            continue
        data = xp.empty_like(column.data)
        data[destinations] = column.data
        validity = None
        if column.validity is not None:
            validity = xp.empty_like(column.validity)
            validity[destinations] = column.validity
        columns.append(replace(column, data=data, validity=validity))
    return tuple(columns)


class _LowestTier:
    """The operators the unfused plan runs for a fused aggregation's stretch: FilterProjects, then a HashAggregation.

    They are built from the nodes the fusion pass replaced, with a context that turns fusion off, so they
    never generate a kernel of their own and answer exactly as a plan with ``fuse=False`` does.
    """

    def __init__(self, ctx: OperatorCtx, node: FusedAggregationNode):
        from dataclasses import replace

        from gpu_engine.operators.filter_project import FilterProject
        from gpu_engine.operators.hash_aggregation import HashAggregation

        lowest_ctx = replace(ctx, lowest_tier=True)
        aggregation, *chain = node.replaced
        chain.reverse()  # bottom up: the order batches pass through them
        self.stages: list[Operator] = []
        k = 0
        while k < len(chain):  # a Filter under a Project makes one FilterProject, as the local planner does
            step = chain[k]
            above = chain[k + 1] if k + 1 < len(chain) else None
            if isinstance(step, FilterNode) and isinstance(above, ProjectNode):
                self.stages.append(FilterProject(lowest_ctx, step, above))
                k += 2
                continue
            filter_node = step if isinstance(step, FilterNode) else None
            self.stages.append(FilterProject(lowest_ctx, filter_node, None if filter_node else step))
            k += 1
        self.aggregation = HashAggregation(lowest_ctx, aggregation)

    def add_input(self, batch: Batch) -> None:
        for stage in self.stages:
            stage.add_input(batch)
            batch = stage.get_output()
            if batch is None:  # every row filtered out
                return
        self.aggregation.add_input(batch)

    def outputs(self) -> list[Batch]:
        """Return (and take) the batches the aggregation has ready: flushes of a PARTIAL step, or its result."""
        batches = []
        while (batch := self.aggregation.get_output()) is not None:
            batches.append(batch)
        return batches

    def close(self) -> None:
        for operator in (*self.stages, self.aggregation):
            operator.close()


@dataclass(frozen=True)
class _NodeSetup:
    """What a FusedAggregation derives from its plan node alone, shared by its drivers and runs (none changes it)."""

    functions: tuple
    may_abandon: bool
    program: Any
    key_types: tuple
    table_layout: Any
    nonzero_fill: tuple[tuple[int, int], ...]  # slot columns an empty slot does not hold 0 in, and their words
    fed_by: tuple[str | None, str, str] | None  # see _partial_feeding

    @classmethod
    def of(cls, node: FusedAggregationNode) -> "_NodeSetup":
        functions = aggregate_functions_of(node)
        schema = {f.name: f.type for f in node.source.output_schema}
        layout = slot_table_layout(len(node.grouping_keys), functions)
        fresh_row = _fresh_row(layout, functions)
        return cls(tuple(functions), can_pass_through(functions),
                   plan_fusion_program(node.predicates, node.grouping_keys, functions, schema),
                   tuple(node.output_schema.field(name).type for name in node.key_names), layout,
                   tuple((int(c), int(fresh_row[c])) for c in np.flatnonzero(fresh_row)), _partial_feeding(node))


def _partial_feeding(node: PlanNode) -> tuple[str | None, str, str] | None:
    """Return (local exchange id or None, PARTIAL step id, table scan id) when ``node`` is a grouped FINAL step
    that reads (through a repartition or not) a PARTIAL step reading a table scan directly; else None.

    Why only then: the FINAL step sizes its table by the scan's rows and what the PARTIAL step saw when it gave
    up grouping (:meth:`FusedAggregation._size_for_abandoned_partials`), and the PARTIAL step's rows are the
    scan's only when nothing between them drops rows (a fused PARTIAL step counts the rows its own filters
    drop: it counts the rows it reads).
    """
    if node.step is not AggregationStep.FINAL or not node.grouping_keys or len(node.sources) != 1:
        return None
    exchange, partial = None, node.source
    if isinstance(partial, LocalPartitionNode):
        if partial.partition_kind != "repartition" or len(partial.sources) != 1:
            return None
        exchange, partial = partial, partial.source
    if getattr(partial, "step", None) is not AggregationStep.PARTIAL or len(partial.sources) != 1:
        return None
    scan = partial.source
    while isinstance(scan, ProjectNode):
        scan = scan.source
    if not isinstance(scan, TableScanNode):
        return None
    return (exchange.id if exchange is not None else None, partial.id, scan.id)


def _fresh_row(layout, functions) -> np.ndarray:
    """Return the int64 words of an empty slot: occupancy 0 and each state's starting value."""
    row = np.zeros(layout.width, dtype=np.int64)
    for function, columns in zip(functions, layout.state_columns):
        for state in function.state_arrays():
            view = row.view(np.float64) if state.dtype.kind == "f" else row.view(np.uint64) if state.dtype.kind == "u" else row
            view[columns[state.name]] = state.fill
    return row


_SETUPS: MadePerNode[_NodeSetup] = MadePerNode()


class FusedAggregation(AggregationOperator):
    """Blocking operator: consumes all input through one kernel per batch, then emits one row per group."""

    def __init__(self, ctx: OperatorCtx, node: FusedAggregationNode):
        super().__init__(ctx, node)
        setup = _SETUPS.get(node, lambda: _NodeSetup.of(node))  # once per node: not per driver, not per run
        self.functions = list(setup.functions)
        self._may_abandon = setup.may_abandon
        self.program = setup.program
        self.key_types = list(setup.key_types)
        self.max_groups = ctx.config.partial_aggregation_max_groups
        self.table_layout = setup.table_layout
        #: Slice kernels run after the key kernel, over the slots it writes to ``_row_slots`` (0: none; the same
        #: for every layout: set when the first is generated, before any batch binds or runs).
        self._slices = 0
        #: The slot columns an empty slot does not hold 0 in (min/max states), with their starting words.
        self._nonzero_fill = setup.nonzero_fill
        xp = self.device.xp
        self._placeholder = xp.zeros(1, dtype=xp.int32)
        self._kernels: dict[KernelLayout, tuple[Any, tuple[str, ...], tuple[str, ...]]] = {}
        self._module = None  # the latest kernel module: its move twins grow the table
        self._interners = {m: _KeyInterner(self.device) for m, lift in enumerate(self.program.lifted) if lift.interned}
        self._id_slotted: bool | None = None  # whether the key's ids are its slots: decided by the first batch
        self._inputs = KernelInputs(self.device, self.program, self._interners,
                                    mapped_dictionaries_by_rows=not self.step.input_is_raw)
        self._parameters = kernel_parameter_array(self.device, self.program)  # the constants, uploaded once
        self._pending = self._placeholder
        self._row_slots = xp.zeros(1, dtype=xp.int64)  # the key kernel's slot per row, for the slice kernels
        self._last_batch = (0, 0)  # (rows, new keys) of the latest batch: see _expected_new_groups
        #: Which tier runs each batch; any step but PARTIAL keeps its first batch's (see the module docstring).
        self._tiers = TierSwitch(self.device, ctx.config.compile_mode, sticky=self.step is not self.step.PARTIAL,
                                 shape=lambda: shape_once(self.program, lambda: (
                                     "fused", self.program.shape_key(), aggregate_shape(self.functions))))
        self._lowest_tier: _LowestTier | None = None
        self._status_placeholder = xp.zeros(3, dtype=xp.int64)
        #: Until used: where to learn this FINAL step's number of keys (see _size_for_abandoned_partials).
        self._fed_by = setup.fed_by
        #: Whether this step radix-partitions its input (see _radix_hold): decided by its first generated batch.
        self._radix: bool | None = None
        self._radix_eligible = False
        self._radix_held: list[Batch] = []
        self._radix_bytes = 0
        self._rows_bound = 0
        self._reset()

    # ----------------------------------------------------------------- state
    def _new_table(self, capacity: int) -> Any:
        xp = self.device.xp
        table = take_array(xp, (capacity, self.table_layout.width), xp.int64)
        advise_huge_pages(table)  # probed at random: a TLB miss a probe on 4 KiB pages (before the fill touches it)
        table.fill(0)  # a memset; broadcasting the empty row ran at a tenth of that speed
        for column, word in self._nonzero_fill:
            table[:, column] = word
        return table

    def _release_table(self) -> None:
        """Hand the slot table to the recycler: growth, another driver or a query of the same burst reuses it."""
        if getattr(self, "_table", None) is not None:
            give_array(self.device.xp, self._table)
            self._table = None

    def _reset(self) -> None:
        self._num_groups = 0
        self._deferred: list[tuple[int, tuple]] = []  # bound batches held for one growth (see _defer_growth)
        self._deferred_rows = self._deferred_bytes = 0
        self._rows_run = 0  # rows run into the table since it was last empty (see _run_deferred)
        self._release_table()
        self._table = self._new_table(_INITIAL_SLOTS if self.grouped else 1)

    def _grow(self, capacity: int) -> None:
        """Move every key and its state into a table of ``capacity`` slots (a power of two)."""
        grown = self._new_table(capacity)
        launch_twin(self.device, int(self._table.shape[0]), self._module.move_cpu, self._module.move_cuda,
                    self._table, grown)
        self._release_table()
        self._table = grown
        self.add_runtime_stat("table_growths", 1)

    def _state_bytes(self) -> int:
        total = int(self._table.nbytes) + sum(b.nbytes for b in self._output) + self._deferred_bytes + self._radix_bytes
        return total + sum(interner.nbytes for interner in self._interners.values())

    # ------------------------------------------------------------- binding
    def _kernel(self, layout: KernelLayout):
        """Return the layout's generated file (not imported until a batch runs it), parameters and messages."""
        compiled = self._kernels.get(layout)
        if compiled is None:
            generated = generate_fused_aggregation(self.program, self.functions, layout)
            self._slices = generated.slices
            # Compiled by the compile process, which keeps the cache's size bound: no scan on a driver.
            file = generated_file(generated.source, evict=not self._tiers.compiles_in_background)
            compiled = self._kernels[layout] = (file, generated.parameters, generated.messages)
        return compiled

    # ----------------------------------------------------------------- input
    def _launches(self, file, parameters, arrays) -> list:
        """Return the CPU twins a batch may launch with arguments of the types they would get (for TierSwitch)."""
        values = dict(arrays, n=0, positions=self._placeholder, has_positions=False, status=self._status_placeholder,
                      pending=self._pending, parameters=self._parameters, slot_table=self._table,
                      row_slots=self._row_slots)
        launches = [(TwinRef(file, name), [values[p] for p in parameters])
                    for name in ("fused_cpu", *(f"slice{g}_cpu" for g in range(self._slices)))]
        if self.grouped:  # the table's growth (an aggregation without keys has one slot and no move twin)
            launches.append((TwinRef(file, "move_cpu"), (self._table, self._table)))
        return launches

    def _host_twins(self) -> list:
        """Return the static CPU twins the generated tier runs on the host, with arguments of their types.

        Binding a batch interns its string keys (:class:`_KeyInterner`) and emitting compacts the slot
        table: in the background compile mode TierSwitch asks these before binding a batch, so a machine
        that never ran them compiles them in the compile process, not on this driver.
        """
        twins = next(iter(self._interners.values())).cpu_twins() if self._interners else []
        if self.grouped:
            twins.append(occupied_columns_twin(self._table, TAG_READY))
        return twins

    def _bind(self, batch: Batch) -> tuple:
        """Return ``batch``'s input arrays and its layout's generated file, parameter names and messages.

        The first batch bound decides whether the key's interned ids are its slots (:func:`id_slotted_key`);
        every later batch's kernel places keys the same way, since they share the table.
        """
        growths = sum(interner.growths for interner in self._interners.values())
        layout, arrays = self._inputs.bind(batch)
        grown = sum(interner.growths for interner in self._interners.values()) - growths
        self._rows_bound += batch.num_rows  # the rows the interners' strings came from (see _KeyInterner.expect)
        if grown:
            self.add_runtime_stat("string_table_growths", grown)
        if self._id_slotted is None:
            self._id_slotted = self.grouped and id_slotted_key(self.program, layout) is not None
        if self._id_slotted:
            layout = replace(layout, id_slotted=True)
        return (arrays, *self._kernel(layout))

    def add_input(self, batch: Batch) -> None:
        bound = []  # bound only when asked: a batch that waits for the compiler runs unbound, on the lowest tier

        def launches() -> list:
            bound.append(self._bind(batch))
            arrays, file, parameters, _ = bound[0]
            return self._launches(file, parameters, arrays)

        lowest = self._lowest_tier
        passing = lowest is not None and lowest.aggregation.passing_through
        if passing or not self._tiers.use_generated(launches, self._host_twins):
            # (a PARTIAL step that stopped grouping hands its rows on through the lowest tier: no kernel groups them)
            self.add_runtime_stat("rows_passed_through" if passing else "lowest_tier_batches",
                                  batch.num_rows if passing else 1)
            if self._lowest_tier is None:
                self._lowest_tier = _LowestTier(self.ctx, self.node)
            self._lowest_tier.add_input(batch)
            self._output.extend(self._lowest_tier.outputs())
            return
        self._seen_input = True
        if self._radix_hold(batch):
            return
        arrays, file, parameters, messages = bound[0] if bound else self._bind(batch)
        if self._defer_growth(batch, (arrays, file, parameters, messages)):
            return
        self._add_bound(batch.num_rows, arrays, file, parameters, messages)

    def _defer_growth(self, batch: Batch, bound: tuple) -> bool:
        """Hold a batch of partial results that would grow the table, so one growth takes many such batches.

        Why: a FINAL or INTERMEDIATE step's input is partial groups, mostly new keys (db-benchmark's q10: 5M
        distinct keys a driver after the PARTIAL step abandoned grouping), so its table grew by doubling
        through seven ever larger tables, each fresh memory that the kernel zero-fills on first touch and
        every key moved again (2026-11-28-scale-profiles.md: a third of q10 filling new tables). Held
        batches wait until they take as many bytes as the table (so the memory held never passes what a
        doubling holds: the old table beside one twice its size), then the table grows once for all their
        keys (:meth:`_run_deferred`). Raw input is never held: its new keys per row are estimated and it
        takes the table's growth as before. Nor is a batch whose key's interned ids are its slots: binding it
        interned its strings, so its table's size is known exactly (:meth:`_make_room_for_ids`), where held rows
        counted as new keys grew a FINAL step's table for db-benchmark's ``GROUP BY id3`` twice, the second time
        for the other PARTIAL driver's 50k strings it held already (a 262,144-slot table for 50k groups).
        """
        if not self.grouped or self.step.input_is_raw or self._id_slotted:
            return False
        if self._fed_by is not None:
            self._size_for_abandoned_partials()
        rows = batch.num_rows
        expected = self._num_groups + self._deferred_rows + rows
        if not self._deferred and expected <= max_groups(int(self._table.shape[0]), self.device.kernel_flavor):
            return False  # room for all its keys: run it now
        self._deferred.append((rows, bound))
        self._deferred_rows += rows
        self._deferred_bytes += batch.nbytes
        if self._deferred_bytes < self._table.nbytes:
            self.set_memory_reservation(self._state_bytes())
            return True
        self._run_deferred()
        return True

    # ------------------------------------------------------ radix partitions
    def _radix_hold(self, batch: Batch) -> bool:
        """Hold ``batch`` for :meth:`_run_radix` when this step radix-partitions its input; return whether held.

        A grouped step (not PARTIAL: it emits its table at ``partial_aggregation_max_groups``) of fixed-width column
        keys may partition when ``radix_aggregation_min_groups`` is set. It does from its first generated batch
        when the groups a driver expects before any runs (:meth:`_radix_expected_groups`) reach the setting; else
        it switches at run time, at the first batch after its one table holds that many groups at no more than
        :data:`_RADIX_MAX_ROWS_PER_GROUP` rows run a group (the table's groups join their partitions in
        :meth:`_run_radix`). A step with a string key keeps the one table: its
        held strings would be copied, hashed once to partition and again to intern, and gathered back (a random
        read of every string), where the one table interns each batch's strings once; db-benchmark's q10 (three
        string keys of six) ran 2.16x the one table's CPU partitioned
        (bench/results/2026-11-29-radix-tables-quiet-stop49.md), integer keys 0.60x.
        """
        minimum = self.ctx.config.radix_aggregation_min_groups
        if self._radix is None:
            keys = self.node.grouping_keys
            self._radix_eligible = bool(
                minimum is not None and self.grouped and self.step is not self.step.PARTIAL
                and all(isinstance(key, ColumnRef) for key in keys)
                and not any(is_string(key_type) for key_type in self.key_types))
            self._radix = self._radix_eligible and (self._radix_expected_groups() or 0) >= minimum
            if self._radix:
                self.add_runtime_stat("radix_partitioned", 1)
        elif (not self._radix and self._radix_eligible and self._num_groups >= minimum
              and self._num_groups * _RADIX_MAX_ROWS_PER_GROUP >= self._rows_run):
            self._run_deferred()  # batches held for one growth (_defer_growth) into the table, as they would run
            self._radix = True
            self.add_runtime_stat("radix_partitioned", 1)
            self.add_runtime_stat("radix_switched_at_groups", self._num_groups)
        if not self._radix:
            return False
        self._radix_held.append(batch)
        self._radix_bytes += batch.nbytes
        self.set_memory_reservation(self._state_bytes())
        return True

    def _table_groups_by_partition(self, bits: int) -> tuple[Any, list[int]]:
        """Return the one table's groups as slot rows ordered by partition (``(groups, width)`` int64), and the
        partitions' offsets: a step that switched to partitions at run time (:meth:`_radix_hold`).

        The rows are the table's occupied slots (:func:`occupied_slot_columns`, as :meth:`_emit` reads them);
        their keys, decoded as emit decodes them, hash as the held rows' key columns do
        (:func:`~gpu_engine.kernels.hash.hash_columns` hashes logical values, NULL a constant), so each group
        goes to the partition of its key's rows, whose table the move twin then takes it into.
        """
        xp = self.device.xp
        words = occupied_slot_columns(self.device, self._table, TAG_READY, self._num_groups)
        self._release_table()
        tags = words[0]
        keys = [self._key_column(k, dtype, words[column], ((tags >> (k + 2)) & 1) == 0)
                for k, (dtype, column) in enumerate(zip(self.key_types, self.table_layout.key_columns))]
        destinations, offsets = radix_destinations(self.device, hash_columns(self.device, keys), bits)
        del keys
        rows = xp.empty((words.shape[1], words.shape[0]), dtype=words.dtype)
        rows[destinations] = words.T
        return rows, [int(v) for v in self.device.to_host(offsets)]

    def _run_radix(self) -> None:
        """Aggregate the held batches partition by partition, each into a slot table that stays in cache.

        Why (issue 31; DuckDB's radix-partitioned aggregate hash table, Velox's spill partitions): a FINAL step of
        millions of groups probed one table of hundreds of megabytes at random, a cache and TLB miss nearly every
        row even on huge pages. Here the held rows are concatenated, hashed by their keys, and scattered by the
        hash's top bits (:func:`~gpu_engine.kernels.radix_partition.radix_destinations`: a count and a scatter
        pass, reading each column once in order) into partitions of at most :data:`RADIX_TABLE_BYTES` of table
        each; every partition's rows run through the same kernel into a table sized for them, which is emitted
        and reused by the next (equal keys share a partition, so each group is complete when emitted). Every
        partition is bound (its string keys interned) before any runs, so the interned values an emitted string
        key points into are built once. Host reads: the offsets once, then one status a partition, as a batch.
        """
        started = time.thread_time()
        held, self._radix_held = self._radix_held, []
        whole = concat_batches(held)
        del held
        rows = whole.num_rows
        in_table = self._num_groups if self._table is not None else 0  # a step that switched at run time
        bits = radix_bits_for(rows + in_table, self.table_layout.width * 8, RADIX_TABLE_BYTES)
        table_rows, table_ends = self._table_groups_by_partition(bits) if in_table else (None, None)
        hashes = hash_columns(self.device, [whole.column(key.name) for key in self.node.grouping_keys])
        destinations, offsets = radix_destinations(self.device, hashes, bits)
        del hashes
        columns = _scattered_columns(self.device, whole, destinations)
        names = whole.names
        del whole, destinations
        self._radix_bytes = 0
        parted = Batch(names, columns, self.device, None, rows)
        ends = [int(v) for v in self.device.to_host(offsets)]
        parts = [(p, parted.slice(lo, hi)) for p, (lo, hi) in enumerate(zip(ends, ends[1:]))
                 if hi > lo or (table_ends is not None and table_ends[p + 1] > table_ends[p])]
        self.add_runtime_stat("radix_partitions", len(parts))
        # Thread time of the partitioning (concatenate, hash, scatter) apart from the partitions' aggregation.
        self.add_runtime_stat("radix_partition_seconds", time.thread_time() - started)
        flavor = self.device.kernel_flavor
        for p, part, bound in [(p, part, self._bind(part) if part.num_rows else None) for p, part in parts]:
            moved = table_rows[table_ends[p]:table_ends[p + 1]] if table_ends is not None else None
            groups = 0 if moved is None else int(moved.shape[0])
            self._rows_run = 0
            self._release_table()
            self._table = self._new_table(slots_for_groups(part.num_rows + groups, flavor))
            if groups:  # this partition's groups of the one table, before its held rows
                launch_twin(self.device, groups, self._module.move_cpu, self._module.move_cuda, moved, self._table)
            self._num_groups = groups
            if bound is not None:
                self._add_bound(part.num_rows, *bound, sized=True)
            self._output.append(self._emit())
            self._num_groups = 0
        self.set_memory_reservation(self._state_bytes())

    def _radix_expected_groups(self) -> int | None:
        """Return the groups this driver expects, where known before its first batch runs (None: unknown).

        A FINAL step after a PARTIAL step that gave up grouping: :meth:`_abandoned_partials_keys` (from the rows and
        groups the PARTIAL step saw), where they are at least a key a :data:`_RADIX_MAX_ROWS_PER_GROUP` of the
        rows it will receive (None otherwise: the run-time switch decides). Raw input has no estimate to trust
        here: a SINGLE step the planner refused a partial step expected about a group per row, yet TPC-H q18's
        (lineitem by l_orderkey: 4 rows a group, in runs) ran 1.20x the one table's CPU partitioned by the scan's
        rows (bench/results/2026-11-29-radix.md); it switches at run time instead (:meth:`_radix_hold`).
        """
        if self.step.input_is_raw:
            return None
        keys = self._abandoned_partials_keys()
        if keys is None:
            return None
        exchange_id, _, scan_id = self._fed_by
        rows = -(-self.ctx.task.split_rows(scan_id) // self._exchange_partitions(exchange_id))
        # The rows this driver receives (the PARTIAL step hands on each row) against its keys: as at run time.
        return keys if keys * _RADIX_MAX_ROWS_PER_GROUP >= rows else None

    def _abandoned_partials_keys(self) -> int | None:
        """Return the keys this driver's FINAL step expects once its PARTIAL step gave up grouping (None: unknown).

        See :meth:`_size_for_abandoned_partials`, which sizes the table by the same estimate."""
        if self._fed_by is None:
            return None
        exchange_id, partial_id, scan_id = self._fed_by
        task = self.ctx.task
        seen = task.abandoned_partials.seen(partial_id) if task is not None else None
        scan_rows = task.split_rows(scan_id) if seen is not None else 0
        if not scan_rows:
            return None
        rows, groups = seen
        keys = groups + _new_keys_after_sample(rows, groups, max(0, scan_rows - rows))
        return -(-keys // self._exchange_partitions(exchange_id))

    def _exchange_partitions(self, exchange_id: str | None) -> int:
        """Return the partitions of the local exchange ``exchange_id`` feeds this step by (1 without one)."""
        if exchange_id is None:
            return 1
        return max(1, self.ctx.task.local_exchange_queues[exchange_id].num_partitions)

    def _size_for_abandoned_partials(self) -> None:
        """Grow the table once for the keys this FINAL step will receive, once its PARTIAL step gave up grouping.

        Why: a PARTIAL step that gave up hands on every row it reads, nearly each a new key here, and the held
        batches of :meth:`_defer_growth` still only doubled the table at each growth (db-benchmark's q10: 8
        growths to a 640 MB table a driver, each one a fresh zeroed table and a move of every key). The scan's
        rows (:meth:`~gpu_engine.exec.task.Task.split_rows`) and the rows and groups the PARTIAL step saw before
        giving up (:class:`~gpu_engine.exec.abandoned_partials.AbandonedPartials`) estimate the keys, as the
        first batch's sample does for raw input (:func:`_new_keys_after_sample`: equally likely keys; skew
        makes it an underestimate, whose extra keys grow the table as before); the repartition spreads them
        over its partitions evenly. Asked until a PARTIAL driver gave up, then never again; the table never
        shrinks, and takes at most a quarter of the query's memory cap where one is set.
        """
        if self.ctx.task.abandoned_partials.seen(self._fed_by[1]) is None:
            return  # not (yet) given up: keys repeat, the table grows with them as before
        expected = self._abandoned_partials_keys()
        partitions = self._exchange_partitions(self._fed_by[0])
        self._fed_by = None
        if expected is None:
            return
        flavor = self.device.kernel_flavor
        slots = slots_for_groups(expected, flavor)
        limit = self.ctx.config.query_memory_limit_bytes
        row_bytes = self.table_layout.width * 8
        while limit and slots > _INITIAL_SLOTS and slots * row_bytes * 4 * partitions > limit:
            slots //= 2
        # A string key of nearly a new string a row so far takes the same estimate (at most a string a group):
        # its table grew batch by batch beside the table sized once (db-benchmark q10's id3).
        strings = min(expected, max_groups(slots, flavor))
        sized = sum(interner.expect(strings, self._rows_bound) for interner in self._interners.values())
        if sized:
            self.add_runtime_stat("string_tables_sized", sized)
        current = int(self._table.shape[0])
        if slots <= current:
            if sized:
                self.set_memory_reservation(self._state_bytes())
            return
        self.add_runtime_stat("tables_sized_for_abandoned_partials", 1)
        if self._num_groups == 0:  # nothing to move
            self._release_table()
            self._table = self._new_table(slots)
        else:
            self._grow(slots)
        self.set_memory_reservation(self._state_bytes())

    def _run_deferred(self) -> None:
        """Grow the table once for the held batches' new keys, then run the batches.

        Their new keys are estimated at the rate of groups to rows run so far, a quarter more as margin (all
        of them before any row ran). Why a rate: partial results of keys spread at random bring fewer new
        keys as the table fills, so the rate so far bounds the next rows' (q10's is ~1: all new); counting
        every held row as new would size the table of a FINAL step whose partial steps flushed the same
        keys several times for all of their copies. Keys beyond the estimate go pending and grow the table.
        """
        if not self._deferred:
            return
        deferred, rows = self._deferred, self._deferred_rows
        self._deferred, self._deferred_rows, self._deferred_bytes = [], 0, 0
        new = rows if not self._rows_run else min(rows, -(-rows * self._num_groups * 5 // (4 * self._rows_run)))
        slots = int(self._table.shape[0])
        flavor = self.device.kernel_flavor
        if self._num_groups + new > max_groups(slots, flavor):
            self._module = deferred[0][1][1].module  # its move twin (a held batch may be the first to bind one)
            self._grow(max(_GROWTH * slots, slots_for_groups(self._num_groups + new, flavor)))
        self.add_runtime_stat("deferred_batches", len(deferred))
        for rows, bound in deferred:
            self._add_bound(rows, *bound, sized=True)

    def _add_bound(self, rows: int, arrays, file, parameters, messages, sized: bool = False) -> None:
        """Run a bound batch of ``rows`` rows through the kernel, growing the table first when its keys need room
        (unless it was ``sized`` for them with other held batches: see :meth:`_run_deferred`)."""
        xp = self.device.xp
        module = self._module = file.module
        groups_before = self._num_groups
        if self._pending.shape[0] < rows:
            self._pending = xp.empty(rows, dtype=xp.int32)
        if self._slices and self._row_slots.shape[0] < rows:
            self._row_slots = xp.empty(rows, dtype=xp.int64)
        positions, count = self._placeholder, rows
        if self.grouped and self._last_batch[0] == 0 and self.step.input_is_raw and rows > _SAMPLE_ROWS:
            # The first batch: run every (rows // _SAMPLE_ROWS)-th row alone to learn its keys' number, then the
            # rest (rows in runs of one key, as sorted or clustered input has them, spread the sample over runs).
            sample, positions = _sample_positions(xp, rows)
            self._run_rows(module, parameters, messages, arrays, _SAMPLE_ROWS, sample)
            self._last_batch = (_SAMPLE_ROWS, self._num_groups - groups_before)
            count = rows - _SAMPLE_ROWS
        # Room for the rows' new keys, as estimated (more go pending and run again); a key whose ids are its slots
        # needs no estimate: _make_room_for_ids sizes its table for the ids the batch's binding gave out.
        if self.grouped and not sized and not self._id_slotted:
            flavor = self.device.kernel_flavor
            expected = self._num_groups + self._expected_new_groups(count, sampled=positions is not self._placeholder)
            slots = int(self._table.shape[0])
            if expected > max_groups(slots, flavor):
                self._grow(max(_GROWTH * slots, slots_for_groups(expected, flavor)))
        self._run_rows(module, parameters, messages, arrays, count, positions)
        self._last_batch = (rows, self._num_groups - groups_before)
        self._rows_run += rows
        if self.step is self.step.PARTIAL and self.grouped and self._num_groups > self.max_groups:
            self.add_runtime_stat("partial_flushes", 1)
            self._output.append(self._emit())
            self._reset()
            slotted = module.ID_SLOTTED_KEY
            if slotted >= 0:  # ids restart: the emptied table need not stay above the old ones
                self._interners[slotted] = _KeyInterner(self.device)
                self._inputs.forget_lifted(slotted)
            self._rows_grouped = 0
        elif self._may_abandon and not self._grouping_pays(rows, self._num_groups):
            self._abandon()
        self.set_memory_reservation(self._state_bytes())

    def _abandon(self) -> None:
        """Stop grouping (a PARTIAL step whose groups nearly match its rows): emit the table's groups and run
        every later batch on the lowest tier, whose HashAggregation hands each row on as a group of one."""
        self.add_runtime_stat("partial_aggregation_abandoned", 1)
        self._record_abandoned()
        self._output.append(self._emit())
        self._reset()
        if self._lowest_tier is None:
            self._lowest_tier = _LowestTier(self.ctx, self.node)
        self._lowest_tier.aggregation.abandon()
        self._output.extend(self._lowest_tier.outputs())

    def _run_rows(self, module, parameters, messages, arrays, count: int, positions) -> None:
        """Run the kernel over ``count`` rows (``positions`` of the batch, or its first rows), growing the
        table and running again the rows it left pending when it filled up."""
        self._make_room_for_ids(module)
        while count:
            self._run(module, parameters, messages, arrays, count, positions)
            if self._pending_count == 0:
                break
            # The table filled up: grow it for the rows left pending and run just those again.
            self.add_runtime_stat("pending_runs", 1)
            positions, count = self._pending[:self._pending_count].copy(), self._pending_count
            needed = slots_for_groups(self._num_groups + count, self.device.kernel_flavor)
            self._grow(max(needed, _GROWTH * int(self._table.shape[0])))

    def _make_room_for_ids(self, module) -> None:
        """Grow the table of a key slotted by its interned id (the module's ``ID_SLOTTED_KEY``) to take every id and
        NULL (see :func:`~gpu_engine.codegen.fused_aggregation_kernel.id_slotted_key`).

        Why: the kernel puts id ``g`` in slot ``g`` (NULL in the last), so a table of at most ``g`` slots would
        wrap ids onto occupied slots and probe past them; the bound is the interner's (no device read), and
        every id is a group (one key, no predicate), so the table is the size the groups need anyway.
        """
        if module.ID_SLOTTED_KEY < 0:
            return
        flavor = self.device.kernel_flavor
        needed = self._interners[module.ID_SLOTTED_KEY].ids_below + 1
        if needed > max_groups(int(self._table.shape[0]), flavor):
            self._module = module
            self._grow(slots_for_groups(needed, flavor))

    def _expected_new_groups(self, rows: int, sampled: bool = False) -> int:
        """Estimate how many new keys a batch of ``rows`` brings, to size the table before its run.

        Partial results (FINAL, INTERMEDIATE steps) are mostly distinct keys: all of them. Raw rows:
        as many per row as the last batch brought, with a quarter more as margin; a sample of the first
        batch's rows (:data:`_SAMPLE_ROWS` of them, evenly spaced) runs alone first. (Without it a first
        batch of many keys filled the starting table, left nearly all its rows pending, a second pass over them, and
        on a GPU an atomic increment of one pending counter per row.)
        Why not grow at a fixed load instead: TPC-H Q18's PARTIAL step brings a quarter of its rows as
        new keys each batch, and a table grown at 4/5 of its load a batch before it had to grew
        twice where once did (a 2M-slot table emitted in place of 1M).
        Right after the first batch's sample (``sampled``), whose rows are a sample of the keys, the
        new keys of the next rows are estimated from the number of distinct keys that sample suggests (:func:`_new_keys_after_sample`), not by its rate. Why: 512 rows of 10k
        keys are nearly all distinct, and their rate sized the table of db-benchmark's id3 for 330k
        keys (a 25 MB table: every probe a cache miss, its fill and its emit's scan 30x longer). Only
        then: a later batch's keys are no sample (sorted input brings new keys batch after batch).
        """
        if not self.step.input_is_raw:
            return rows
        last_rows, last_new = self._last_batch
        if not last_rows:
            return 0
        if sampled and last_new == self._num_groups and last_new < last_rows:
            return -(-_new_keys_after_sample(last_rows, last_new, rows) * 5 // 4)
        return -(-rows * last_new * 5 // (4 * last_rows))

    def _run(self, module, parameters, messages, arrays, count: int, positions) -> None:
        xp = self.device.xp
        status = self.device.asarray(np.array([self._num_groups, 0, NO_ERROR], dtype=np.int64))
        values = dict(arrays, n=count, positions=positions, has_positions=positions is not self._placeholder,
                      status=status, pending=self._pending, parameters=self._parameters, row_slots=self._row_slots)
        values["slot_table"] = self._table
        arguments = [values[p] for p in parameters]
        launch_twin(self.device, count, module.fused_cpu, module.fused_cuda, *arguments, max_blocks=FUSED_KERNEL_BLOCKS)
        for g in range(self._slices):  # a split aggregation's slices, over the slots the key kernel found
            launch_twin(self.device, count, getattr(module, f"slice{g}_cpu"), getattr(module, f"slice{g}_cuda"),
                        *arguments, max_blocks=FUSED_KERNEL_BLOCKS)
        groups, pending, error = (int(v) for v in self.device.to_host(status))
        if error != NO_ERROR:
            row, code = error_parts(error)
            raise ExecutionError(f"{messages[code]} (first at row {row})")
        self._num_groups = groups if self.grouped else 1
        self._pending_count = pending

    # ---------------------------------------------------------------- output
    def _emit(self) -> Batch:
        xp = self.device.xp
        names: list[str] = list(self.node.key_names)
        columns: list[Column] = []
        if self.grouped:
            words = occupied_slot_columns(self.device, self._table, TAG_READY, self._num_groups, take_array)
            tags = words[0]  # TAG_READY | null_bits << 2
            # Key k's null bit into one scratch array, in place: per-key shifted and masked copies were two
            # int64 arrays a key (80 MB each for q10's 5M groups, freshly mapped, page-faulted each query).
            bit = take_array(xp, tags.shape, tags.dtype)
            for k, (dtype, column) in enumerate(zip(self.key_types, self.table_layout.key_columns)):
                xp.right_shift(tags, k + 2, out=bit)
                xp.bitwise_and(bit, 1, out=bit)
                columns.append(self._key_column(k, dtype, words[column], bit == 0))
            give_array(xp, bit)
        else:
            words = xp.ascontiguousarray(self._table[:1].T)
        groups = int(words.shape[1])
        for function, positions in zip(self.functions, self.table_layout.state_columns):
            state = AggregateState({})
            for layout in function.state_arrays():
                state_words = words[positions[layout.name]]
                state.arrays[layout.name] = ((state_words != 0) if layout.dtype.kind == "b"
                                             else state_words.view(layout.dtype))
            for name, column in function.extract(self.device, state, groups):
                names.append(name)
                columns.append(column)
        if self.grouped:
            columns = _recycle_words(self.device.xp, words, columns)
        return Batch(tuple(names), tuple(columns), self.device, None, groups)

    def _key_column(self, k: int, dtype: pa.DataType, words: Any, validity: Any) -> Column:
        xp = self.device.xp
        if is_string(dtype):
            dictionary = self._interners[self.program.keys[k].index].values()  # a LiftedInput
            return Column(dtype, words.astype(xp.int32), validity, None, dictionary)
        if is_boolean(dtype):
            return Column(dtype, words != 0, validity)
        return Column(dtype, words.astype(physical_dtype(dtype)), validity)


    def no_more_input(self) -> None:
        if self._radix_held:
            self._run_radix()
        self._run_deferred()
        lowest = self._lowest_tier
        if lowest is not None:
            lowest.aggregation.no_more_input()
            self._output.extend(lowest.outputs())
            if self._tiers.sticky:  # every batch ran on the lowest tier: its result is the whole result
                Operator.no_more_input(self)
                return
        super().no_more_input()

    def close(self) -> None:
        self._release_table()
        if self._lowest_tier is not None:
            self._lowest_tier.close()
        super().close()
