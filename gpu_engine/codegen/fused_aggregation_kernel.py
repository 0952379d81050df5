"""Generate the source of a fused filter + group-by + aggregate kernel, as a CPU twin and a CUDA twin.

Why one generator for both: the row code (predicates, keys, aggregate
arguments) is the same text in both twins; only the loop, the hash-table
insert and the state updates differ (plain stores on the CPU, atomics on the
GPU). So the simulator in CI runs exactly the CUDA twin a GPU would, and the
CPU twin is its sibling from the same description.

The kernel, per row ``j`` of ``n`` (``i = positions[j]`` when re-running rows
left pending, else ``j``; ``r = rows[i]`` through the batch's gather map):

1. evaluates the predicates in order and leaves the row at the first that is
   not TRUE;
2. builds the key words (one int64 per key, then a word of null bits), hashes
   them and finds or claims the key's slot in an open-addressing table. A new
   key is refused once the table holds half its capacity: the row goes to
   ``pending`` and the operator grows the table and runs those rows again;
3. folds the aggregate arguments into the slot's state
   (:meth:`~gpu_engine.aggregation.functions.AggregateFunction.emit_update`).

The table is one int64 array, a row per slot (:func:`slot_table_layout`):
a tag (0 empty, 1 being written, else ``2 | null_bits << 2``), the key words,
then every aggregate's state, so a row touches one cache line (one memory
sector on a GPU) instead of one per array. Float and unsigned states are read
through float64/uint64 views of the same memory, made inside the kernel. Without keys the table has one row:
the CPU twin updates it in place; each CUDA thread folds into its own local
state and merges it into the row once at the end, so threads do not contend on
one address per row.

``status`` is ``[groups, pending rows, first error]``; an error (overflow, a
value out of range) is recorded as ``row * 256 + code`` with the smallest row
winning, and the messages (indexed by code) come back with the source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_engine.aggregation.functions import AggregateFunction, StateEmitter, StateRef
from gpu_engine.codegen.fusion_program import FusionProgram
from gpu_engine.codegen.row_lowering import ERROR_CODE_BASE, RowLowering, RowValue, Unsupported, row_dtype_code
from gpu_engine.codegen.source_writer import SourceWriter
from gpu_engine.plans.expressions import Expr

__all__ = ["KernelLayout", "GeneratedKernel", "SlotTableLayout", "slot_table_layout", "generate_fused_aggregation",
           "LIFTED_DICTIONARY", "LIFTED_ROWS", "STATUS_GROUPS", "STATUS_PENDING", "STATUS_ERROR", "NO_ERROR",
           "SLOT_TABLE_VIEWS", "TAG_READY"]

LIFTED_DICTIONARY = "dictionary"
LIFTED_ROWS = "rows"
STATUS_GROUPS, STATUS_PENDING, STATUS_ERROR = 0, 1, 2
NO_ERROR = np.iinfo(np.int64).max
#: The slot table's names in generated code by the kind of value read through them (one int64 buffer, three views).
SLOT_TABLE_VIEWS = {"i": "slot_table", "f": "slot_table_f64", "u": "slot_table_u64"}
#: A slot's tag: 0 empty, 1 being written (CUDA), ``TAG_READY | null_bits << 2`` holding a key.
TAG_EMPTY, TAG_WRITING, TAG_READY = 0, 1, 2

_HEADER = """\
import numba
import numpy as np
from numba import cuda, njit

from gpu_engine.kernels.fused_rows import (
    ADD, MULTIPLY, SUBTRACT, KEY_HASH_SEED, checked_int64_op, civil_day, civil_month, civil_year,
    divide_round_half_away, finish_key_hash, float_equal, float_less, key_word_bits, mix_key_word, round_half_away,
    scaled_order, truncated_remainder,
)
"""


@dataclass(frozen=True)
class KernelLayout:
    """How one batch presents the kernel's inputs; each distinct layout is its own compiled kernel.

    Attributes
    ----------
    mapped
        The batch has a gather map (columns are read at ``rows[i]``).
    column_validity
        Per input column: whether it has a validity array.
    lifted_modes
        Per lifted subexpression: ``"dictionary"`` (a lookup table read by the
        row's code), ``"dictionary+validity"`` (the codes have nulls too) or
        ``"rows"`` (evaluated on the batch's rows).
    """

    mapped: bool
    column_validity: tuple[bool, ...]
    lifted_modes: tuple[str, ...]


@dataclass(frozen=True)
class GeneratedKernel:
    """The module source holding both twins, their parameter names and the error messages by code."""

    source: str
    parameters: tuple[str, ...]
    messages: tuple[str, ...]


@dataclass(frozen=True)
class SlotTableLayout:
    """The columns of a fused aggregation's slot table (all int64 words).

    Keyed tables: column 0 is the slot's tag (occupancy and the keys' null
    bits), ``key_columns`` the key words; a table without keys has one row and
    no such columns. ``state_columns[a][name]`` is where aggregate ``a`` keeps state
    ``name`` and ``state_views`` the view (see :data:`SLOT_TABLE_VIEWS`) it is
    read through.
    """

    key_columns: tuple[int, ...]
    state_columns: tuple[dict, ...]
    state_views: tuple[dict, ...]
    width: int


def slot_table_layout(num_keys: int, aggregates: list[AggregateFunction]) -> SlotTableLayout:
    """Return the slot table layout of a kernel with ``num_keys`` keys and ``aggregates``."""
    key_columns = tuple(range(1, num_keys + 1))
    column = 1 + num_keys if num_keys else 0
    state_columns, state_views = [], []
    for function in aggregates:
        columns, views = {}, {}
        for state in function.state_arrays():
            columns[state.name] = column
            views[state.name] = SLOT_TABLE_VIEWS.get(state.dtype.kind, SLOT_TABLE_VIEWS["i"])
            column += 1
        state_columns.append(columns)
        state_views.append(views)
    return SlotTableLayout(key_columns, tuple(state_columns), tuple(state_views), max(column, 1))


def _parameters(program: FusionProgram, aggregates: list[AggregateFunction], layout: KernelLayout) -> list[str]:
    names = ["n", "positions", "has_positions", "rows"]
    for k, has_validity in enumerate(layout.column_validity):
        names.append(f"c{k}")
        if has_validity:
            names.append(f"c{k}_v")
    for m, mode in enumerate(layout.lifted_modes):
        names += [f"l{m}_values", f"l{m}_valid"]
        if mode != LIFTED_ROWS:
            names += [f"l{m}_codes", f"l{m}_null"]
            if mode.endswith("validity"):
                names.append(f"l{m}_codes_v")
    return names + ["slot_table", "status", "pending"]


class _Inputs:
    """Write the kernel's reads of input columns and lifted subexpressions."""

    def __init__(self, program: FusionProgram, layout: KernelLayout, writer: SourceWriter):
        self.writer = writer
        self.layout = layout
        self.columns = {ref.name: (k, ref) for k, ref in enumerate(program.columns)}
        self.lifted = {lift.expr: (m, lift) for m, lift in enumerate(program.lifted)}

    def __call__(self, expr: Expr) -> RowValue | None:
        from gpu_engine.plans.expressions import ColumnRef

        if expr in self.lifted:
            m, lift = self.lifted[expr]
            return self._lifted(m, lift)
        if isinstance(expr, ColumnRef) and expr.name in self.columns:
            k, ref = self.columns[expr.name]
            value, valid = self.writer.fresh(f"x{k}"), self.writer.fresh(f"x{k}_ok")
            self.writer.line(f"{value} = {row_dtype_code(ref.dtype)}(c{k}[r])")
            self.writer.line(f"{valid} = c{k}_v[r]" if self.layout.column_validity[k] else f"{valid} = True")
            return RowValue(value, valid, ref.dtype)
        return None

    def _lifted(self, m: int, lift) -> RowValue:
        mode = self.layout.lifted_modes[m]
        dtype = lift.expr.dtype
        maker = "np.int64" if lift.interned else row_dtype_code(dtype)
        value, valid = self.writer.fresh(f"y{m}"), self.writer.fresh(f"y{m}_ok")
        if mode == LIFTED_ROWS:
            index = "i"
        else:
            index = self.writer.fresh(f"code{m}")
            self.writer.line(f"{index} = np.int64(l{m}_codes[r])")
            if mode.endswith("validity"):
                self.writer.line(f"if not l{m}_codes_v[r]: {index} = l{m}_null")
        self.writer.line(f"{value} = {maker}(l{m}_values[{index}])")
        self.writer.line(f"{valid} = l{m}_valid[{index}]")
        from pyarrow import int64

        return RowValue(value, valid, int64() if lift.interned else dtype)


def _table_refs(table: SlotTableLayout) -> list[dict[str, StateRef]]:
    return [{name: StateRef(views[name], column) for name, column in columns.items()}
            for columns, views in zip(table.state_columns, table.state_views)]


def _local_refs(aggregates: list[AggregateFunction]) -> list[dict[str, StateRef]]:
    return [{state.name: StateRef(f"t_a{a}_{state.name}") for state in function.state_arrays()}
            for a, function in enumerate(aggregates)]


def _numba_type(dtype: np.dtype) -> str:
    return "numba.boolean" if dtype == np.dtype(np.bool_) else f"numba.{dtype.name}"


def _fill_literal(dtype: np.dtype, fill) -> str:
    if dtype.kind == "b":
        return "True" if fill else "False"
    if dtype.kind == "f":
        value = float(fill)
        if value != value:
            return "np.nan"
        if value in (float("inf"), float("-inf")):
            return f"{'-' if value < 0 else ''}np.inf"
        return repr(value)
    return str(int(fill))


def _write_twin(writer: SourceWriter, program: FusionProgram, aggregates: list[AggregateFunction],
                layout: KernelLayout, flavor: str, messages: list[str]) -> None:
    cuda_flavor = flavor == "cuda"
    keyed = bool(program.keys)
    if cuda_flavor:
        loop = "for j in range(cuda.grid(1), n, cuda.gridsize(1)):"
        on_error = lambda code: [f"cuda.atomic.min(status, {STATUS_ERROR}, np.int64(i) * {ERROR_CODE_BASE} + {code})",
                                 "continue"]
    else:
        loop = "for j in range(n):"
        leave = ([f"status[{STATUS_GROUPS}] = num_groups"] if keyed else []) + [f"status[{STATUS_PENDING}] = pending_count"]
        on_error = lambda code: [f"status[{STATUS_ERROR}] = np.int64(i) * {ERROR_CODE_BASE} + {code}", *leave, "return"]
    table = slot_table_layout(len(program.keys), aggregates)
    writer.line(f"{SLOT_TABLE_VIEWS['f']} = slot_table.view(np.float64)")
    writer.line(f"{SLOT_TABLE_VIEWS['u']} = slot_table.view(np.uint64)")
    if keyed:
        writer.line("slot_mask = np.int64(slot_table.shape[0] - 1)")
        writer.line("max_groups = np.int64(slot_table.shape[0] // 2)")
        if not cuda_flavor:
            writer.line(f"num_groups = status[{STATUS_GROUPS}]")
    if not cuda_flavor:
        writer.line(f"pending_count = status[{STATUS_PENDING}]")
    global_states = _table_refs(table)
    local_states = global_states
    if cuda_flavor and not keyed:  # each thread folds into its own state, merged once at the end
        local_states = _local_refs(aggregates)
        for function, refs in zip(aggregates, local_states):
            for state in function.state_arrays():
                writer.line(f"{refs[state.name].array} = cuda.local.array(1, {_numba_type(state.dtype)})")
                writer.line(f"{refs[state.name].array}[0] = {_fill_literal(state.dtype, state.fill)}")
    with writer.block(loop):
        writer.line("i = positions[j] if has_positions else j")
        writer.line("r = rows[i]" if layout.mapped else "r = i")
        lowering = RowLowering(writer, _Inputs(program, layout, writer), on_error, messages)
        for predicate in program.predicates:
            test = lowering.lower(predicate)
            with writer.block(f"if not ({test.valid} and {test.value}):"):
                writer.line("continue")
        if keyed:
            _write_insert(writer, lowering, program, table, cuda_flavor)
            slot = "slot"
        else:
            slot = "0"
        emit = StateEmitter(atomic=cuda_flavor and keyed)
        for function, argument, names in zip(aggregates, program.arguments, local_states):
            value = valid = None
            if argument is not None:
                lowered = lowering.lower(argument)
                value, valid = lowered.value, lowered.valid
                if function.call.arg is not None and argument is not function.call.arg:  # count(string): IS NOT NULL
                    valid = value
            writer.extend(function.emit_update(emit, names, slot, value, valid))
    if cuda_flavor and not keyed:
        merge = StateEmitter(atomic=True)
        for function, target, source in zip(aggregates, global_states, local_states):
            writer.extend(function.emit_merge(merge, target, "0", source, "0"))
    if not cuda_flavor:
        if keyed:
            writer.line(f"status[{STATUS_GROUPS}] = num_groups")
        writer.line(f"status[{STATUS_PENDING}] = pending_count")


def _write_insert(writer: SourceWriter, lowering: RowLowering, program: FusionProgram, table: SlotTableLayout,
                  cuda_flavor: bool) -> None:
    """Write the key words, their hash and the find-or-claim of the key's slot (``slot``; pending when full)."""
    words = []
    null_terms = []
    for k, key in enumerate(program.keys):
        lowered = lowering.lower(key)
        word = writer.fresh(f"w{k}")
        if lowered.valid == "True":
            writer.line(f"{word} = np.int64({lowered.value})")
        else:
            writer.line(f"{word} = np.int64({lowered.value}) if {lowered.valid} else np.int64(0)")
            null_terms.append(f"(np.int64(0) if {lowered.valid} else np.int64({1 << k}))")
        words.append(word)
    tag = writer.fresh("tag")
    nulls = " | ".join(null_terms) if null_terms else "np.int64(0)"
    writer.line(f"{tag} = np.int64({TAG_READY}) | (({nulls}) << np.int64(2))")
    writer.line("h = np.uint64(KEY_HASH_SEED)")
    for word in words + [tag]:
        writer.line(f"h = np.uint64(mix_key_word(h, np.uint64(key_word_bits({word}))))")
    writer.line(f"h = np.uint64(finish_key_hash(h, np.uint64({len(words) + 1})))")
    writer.line("slot = np.int64(h & np.uint64(slot_mask))")
    writer.line("found = np.int64(-1)")
    same = " and ".join([f"state == {tag}"] + [f"slot_table[slot, {c}] == {word}"
                                               for c, word in zip(table.key_columns, words)])
    with writer.block("while True:"):
        writer.line("state = slot_table[slot, 0]")
        if cuda_flavor:
            with writer.block("if state == 0:"):
                writer.line(f"reserved = cuda.atomic.add(status, {STATUS_GROUPS}, 1)")
                with writer.block("if reserved >= max_groups:"):
                    writer.line(f"cuda.atomic.add(status, {STATUS_GROUPS}, -1)")
                    writer.line("break")
                writer.line("state = cuda.atomic.cas(slot_table, (slot, 0), np.int64(0), np.int64(1))")
                with writer.block("if state == 0:"):
                    for c, word in zip(table.key_columns, words):
                        writer.line(f"slot_table[slot, {c}] = {word}")
                    writer.line("cuda.threadfence()")
                    writer.line(f"cuda.atomic.exch(slot_table, (slot, 0), {tag})")
                    writer.line("found = slot")
                    writer.line("break")
                writer.line(f"cuda.atomic.add(status, {STATUS_GROUPS}, -1)")
            with writer.block("while state == 1:"):
                writer.line("state = cuda.atomic.add(slot_table, (slot, 0), np.int64(0))")
        else:
            with writer.block("if state == 0:"):
                with writer.block("if num_groups >= max_groups:"):
                    writer.line("break")
                writer.line(f"slot_table[slot, 0] = {tag}")
                for c, word in zip(table.key_columns, words):
                    writer.line(f"slot_table[slot, {c}] = {word}")
                writer.line("num_groups += 1")
                writer.line("found = slot")
                writer.line("break")
        with writer.block(f"if {same}:"):
            writer.line("found = slot")
            writer.line("break")
        writer.line("slot = (slot + 1) & slot_mask")
    with writer.block("if found < 0:"):
        if cuda_flavor:
            writer.line(f"pending[cuda.atomic.add(status, {STATUS_PENDING}, 1)] = i")
        else:
            writer.line("pending[pending_count] = i")
            writer.line("pending_count += 1")
        writer.line("continue")
    writer.line("slot = found")


def generate_fused_aggregation(program: FusionProgram, aggregates: list[AggregateFunction],
                               layout: KernelLayout) -> GeneratedKernel:
    """Return the module source defining ``fused_cpu`` (njit) and ``fused_cuda`` (cuda.jit) for ``layout``.

    Raises
    ------
    Unsupported
        When an expression or aggregate cannot be generated.
    """
    for function in aggregates:
        if function.fusable is not None:
            raise Unsupported(function.fusable)
        if not function.raw_input:
            raise Unsupported("generated kernels fold raw rows only")
    parameters = _parameters(program, aggregates, layout)
    messages: list[str] = []
    signature = ", ".join(parameters)
    writer = SourceWriter()
    writer.extend(_HEADER.splitlines())
    writer.line("")
    writer.line("")
    writer.line('@njit(nogil=True, cache=True, error_model="numpy")')
    with writer.block(f"def fused_cpu({signature}):"):
        _write_twin(writer, program, aggregates, layout, "cpu", messages)
    cpu_messages = list(messages)
    messages.clear()
    writer.line("")
    writer.line("")
    writer.line("@cuda.jit")
    with writer.block(f"def fused_cuda({signature}):"):
        _write_twin(writer, program, aggregates, layout, "cuda", messages)
    if messages != cpu_messages:  # both twins hand out codes in the same order
        raise AssertionError("the CPU and CUDA twins disagree on error codes")
    return GeneratedKernel(writer.text(), tuple(parameters), tuple(messages))
