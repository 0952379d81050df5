"""Decide what a fused aggregation kernel reads: its fixed-width input columns and its lifted subexpressions.

Why: a kernel reads fixed-width values by row; strings cannot be compared or
matched per row in registers cheaply. Every maximal subexpression that reads
exactly one string column and yields a fixed-width value (``l_shipmode IN
('MAIL', 'SHIP')``, ``p_type LIKE '%BRASS'``, ``c_phone IS NULL``) is
*lifted*: per batch, the operator evaluates it with the eager evaluator on that
column's dictionary (a few distinct values, plus one NULL entry) and the
kernel reads the result through the row's code. A string-valued grouping key
over one string column is lifted too and *interned*: the kernel reads a stable
int64 id per row. A column that arrives as plain strings (no dictionary) is
evaluated on the batch's rows instead, the same expression either way.

:func:`plan_fusion_program` is pure plan-time analysis (no device); it raises
:class:`~gpu_engine.codegen.row_lowering.Unsupported` for what the kernel
cannot do (a string value needed per row, a float grouping key), and the
fusion pass then leaves the stretch unfused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import pyarrow as pa

from gpu_engine.codegen.generation_cache import GenerationCache, aggregate_key
from gpu_engine.codegen.kernel_parameters import LiftedInput, parameterize
from gpu_engine.codegen.row_lowering import Unsupported
from gpu_engine.columnar.types import is_floating, is_string
from gpu_engine.plans.expressions import ColumnRef, Expr, Literal, UnaryOp, referenced_columns

__all__ = ["LiftedExpression", "FusionProgram", "HighWord", "plan_fusion_program", "may_be_wide"]


@dataclass(frozen=True)
class LiftedExpression:
    """A subexpression over one string column, evaluated per batch outside the kernel.

    ``interned`` expressions are string-valued grouping keys: their values
    become ids of the operator's interner; the others yield fixed-width values.
    """

    expr: Expr
    column: str
    interned: bool


@dataclass(frozen=True)
class FusionProgram:
    """What one fused kernel evaluates, independent of any batch's layout.

    Attributes
    ----------
    predicates
        Filters in order; a row failing one is not evaluated further.
    keys
        Grouping key expressions over the input columns.
    arguments
        Per aggregate: the expressions it folds: its argument in a raw step
        (none for ``count(*)``; ``x IS NOT NULL`` for ``count(x)`` of a string
        ``x``, see ``counts_by_value``), the intermediate columns it merges in a
        FINAL or INTERMEDIATE step.
    counts_by_value
        Per aggregate: its one argument's *value* says whether the row counts
        (``count`` of a string column), rather than its validity.
    columns
        The fixed-width input columns the kernel reads, in parameter order.
    lifted
        The lifted subexpressions, in parameter order.
    outputs
        Expressions a projection kernel writes, one output column each (fixed-width types).
    parameter_types, parameter_words
        The kernel's parameters (:mod:`~gpu_engine.codegen.kernel_parameters`): the type of each
        scalar slot, and the words of the int64 array the kernel is launched with.

    The expressions hold no constants (they are :class:`~gpu_engine.codegen.kernel_parameters.KernelParameter`
    slots) and read lifted subexpressions as :class:`~gpu_engine.codegen.kernel_parameters.LiftedInput`;
    the values are in ``parameter_words`` and ``lifted``, which :meth:`shape` leaves out.
    """

    predicates: tuple[Expr, ...]
    keys: tuple[Expr, ...]
    arguments: tuple[tuple[Expr, ...], ...]
    columns: tuple[ColumnRef, ...]
    lifted: tuple[LiftedExpression, ...]
    counts_by_value: tuple[bool, ...]
    outputs: tuple[Expr, ...] = ()
    parameter_types: tuple[pa.DataType, ...] = ()
    parameter_words: tuple[int, ...] = ()

    def shape(self) -> "FusionProgram":
        """Return the program without its values: all a generated kernel depends on, and its cache key.

        Why: kernels are generated from the shape alone, so two queries that differ only in their
        constants (or their string literals, applied per dictionary) get the same source and share
        one compiled module. Made once per program and kept on it (see :meth:`__hash__`).
        """
        shape = self.__dict__.get("_shape")
        if shape is None:
            lifted = tuple(LiftedExpression(LiftedInput(m, lift.expr.dtype, lift.interned), "", lift.interned)
                           for m, lift in enumerate(self.lifted))
            shape = replace(self, lifted=lifted, parameter_words=())
            object.__setattr__(shape, "_shape", shape)
            object.__setattr__(self, "_shape", shape)
        return shape

    def shape_key(self) -> str:
        """Return ``repr(self.shape())``, made once per shape and kept on it: the key kernels are cached by.

        Why: the key was made again by every caller (the fusion pass's generation, each driver's operator
        at creation and per batch layout, the tier switch's program shape), each a walk of every
        expression: ~70-90 us a call, ~370 calls over 40 TPC-DS queries at SF 0.01 on the lowest tier
        and ~660 on a first run (bench/results/2026-11-29-firstruns2.md).
        """
        shape = self.shape()
        key = shape.__dict__.get("_key")
        if key is None:
            key = repr(shape)
            object.__setattr__(shape, "_key", key)
        return key

    def __hash__(self) -> int:
        """Hash the fields once per program and keep the hash on it.

        Why: a program is made once per plan node (kept with the node's set-up), but every operator an
        instance of that node builds looks its shape up in per-process tables (``KernelInputs``' validity
        sets, generation caches); the generated hash walked every expression of the program each time:
        TPC-DS q66's aggregations of 24-36 decimal sums spent ~12 ms of a run's ~190 ms CPU in
        ``hash`` at operator set-up (bench/results/2026-11-28-dsslow-q74-q66-profile.md).
        """
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.predicates, self.keys, self.arguments, self.columns, self.lifted,
                           self.counts_by_value, self.outputs, self.parameter_types, self.parameter_words))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        """Pickle the fields only: a string's hash differs between processes, so the kept hash must not travel."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_shape", "_key")}


@dataclass(frozen=True)
class HighWord(Expr):
    """The high word of a decimal(p > 18) input column's 128-bit value (the column itself reads as the low word).

    Only an aggregate that :attr:`~gpu_engine.aggregation.functions.AggregateFunction.folds_words`
    reads these, as its whole argument: the kernel adds both words to 128-bit state, so the
    decimal(38) partial sums eager aggregation hands up (``sum($eager0)``) fuse. A batch whose column
    is narrow (int64, as such sums nearly always are) gives the low word's sign.
    """

    column: ColumnRef
    dtype: pa.DataType = pa.int64()

    def sql(self) -> str:
        return f"high_word({self.column.sql()})"


def may_be_wide(dtype: pa.DataType) -> bool:
    """Return True for a decimal type whose column may hold 128-bit words (more than 18 digits)."""
    return pa.types.is_decimal(dtype) and dtype.precision > 18


def _check_row_column(ref: ColumnRef) -> None:
    """Refuse input columns whose values the kernel's int64 row code cannot hold.

    A decimal of more than 18 digits may be wide (128-bit words, see
    :mod:`gpu_engine.expressions.numeric`) and uint64 values from 2**63 up
    have no int64 form; the eager operators compute both exactly. (A partial
    sum's intermediate columns are int64 words and stay fusable, and a sum
    whose whole argument is a wide decimal column reads its words: :class:`HighWord`.)
    """
    dtype = ref.dtype
    if may_be_wide(dtype) or dtype == pa.uint64():
        raise Unsupported(f"column {ref.name} ({dtype}) may hold values beyond int64")


class _Collector:
    def __init__(self, schema: Mapping[str, pa.DataType]):
        self.schema = schema
        self.columns: dict[str, ColumnRef] = {}
        self.lifted: dict[Expr, LiftedExpression] = {}

    def _string_columns(self, expr: Expr) -> set[str]:
        return {name for name in referenced_columns(expr) if is_string(self.schema[name])}

    def visit(self, expr: Expr, key: bool = False, intermediate: bool = False, words: bool = False) -> None:
        """Collect ``expr``'s inputs; ``words``: it is a wide column read as words (or their :class:`HighWord`)."""
        if isinstance(expr, HighWord):
            expr = expr.column
        if isinstance(expr, Literal):
            return  # no input and nothing per row (an IN list's 100,000 values cost nothing here)
        names = referenced_columns(expr)
        unknown = [n for n in names if n not in self.schema]
        if unknown:
            raise Unsupported(f"columns {unknown} are not inputs of the stretch")
        strings = self._string_columns(expr)
        if strings:
            if set(names) == strings and len(strings) == 1:
                if not is_string(expr.dtype):
                    self.lifted.setdefault(expr, LiftedExpression(expr, names[0], False))
                    return
                if key:
                    self.lifted.setdefault(expr, LiftedExpression(expr, names[0], True))
                    return
            if is_string(expr.dtype):
                raise Unsupported(f"{expr.sql()} needs a string per row")
            for child in expr.children():
                self.visit(child)
            return
        if isinstance(expr, ColumnRef):
            if not (intermediate or words):
                _check_row_column(expr)
            self.columns.setdefault(expr.name, expr)
            return
        for child in expr.children():
            self.visit(child)


def plan_fusion_program(predicates: tuple[Expr, ...], keys: tuple[Expr, ...], functions,
                        schema: Mapping[str, pa.DataType], outputs: tuple[Expr, ...] = ()) -> FusionProgram:
    """Return the kernel's inputs for a filter + grouping + aggregation over ``schema`` (name -> type).

    ``functions`` are the step's :class:`~gpu_engine.aggregation.functions.AggregateFunction` objects;
    ``outputs`` the expressions of a projection kernel (each a fixed-width value per row).
    Planned once per process for each distinct request (:data:`PROGRAMS`).

    Raises
    ------
    Unsupported
        When part of it cannot run inside a generated kernel.
    """
    key = (repr(tuple(predicates)), repr(tuple(keys)), aggregate_key(functions), repr(tuple(schema.items())),
           repr(tuple(outputs)))
    return PROGRAMS.get(key, lambda: _plan_fusion_program(predicates, keys, functions, schema, tuple(outputs)))


#: Fusion programs planned so far, by the repr of what they were planned from.
PROGRAMS = GenerationCache()


def _plan_fusion_program(predicates: tuple[Expr, ...], keys: tuple[Expr, ...], functions,
                         schema: Mapping[str, pa.DataType], outputs: tuple[Expr, ...] = ()) -> FusionProgram:
    collector = _Collector(schema)
    for output in outputs:
        if is_string(output.dtype):
            raise Unsupported(f"{output.sql()} is a string per row")
        collector.visit(output)
    for predicate in predicates:
        if not pa.types.is_boolean(predicate.dtype):
            raise Unsupported("a predicate must be boolean")
        collector.visit(predicate)
    for key in keys:
        if is_floating(key.dtype):
            raise Unsupported(f"grouping key {key.sql()} is a float")
        collector.visit(key, key=True)
    arguments: list[tuple[Expr, ...]] = []
    counts_by_value: list[bool] = []
    for function in functions:
        call = function.call
        if call.distinct:
            raise Unsupported(f"{call.sql()} is DISTINCT")
        if function.fusable is not None:
            raise Unsupported(function.fusable)
        by_value = False
        if not function.raw_input:
            missing = [name for name in function.input_columns if name not in schema]
            if missing:
                raise Unsupported(f"intermediate columns {missing} are not inputs")
            inputs = tuple(ColumnRef(name, schema[name]) for name in function.input_columns)
        elif call.arg is None:
            inputs = ()
        elif is_string(call.arg.dtype):
            if call.function != "count":
                raise Unsupported(f"{call.sql()} folds strings")
            inputs, by_value = (UnaryOp("is_not_null", call.arg, pa.bool_()),), True
        elif function.folds_words and isinstance(call.arg, ColumnRef) and may_be_wide(call.arg.dtype):
            inputs = (call.arg, HighWord(call.arg))
        else:  # a two-argument aggregate's second argument too (the moments' co-moment: covar, corr, regr_*)
            inputs = (call.arg,) if call.second is None else (call.arg, call.second)
        words = len(inputs) == 2 and isinstance(inputs[1], HighWord)
        for expr in inputs:
            if is_string(expr.dtype):
                raise Unsupported(f"{call.sql()} folds strings")
            collector.visit(expr, intermediate=not function.raw_input, words=words)
        arguments.append(inputs)
        counts_by_value.append(by_value)
    lifted = tuple(collector.lifted.values())
    # Constants become kernel parameters, lifted subexpressions inputs by index (see FusionProgram.shape).
    flat = [*predicates, *keys, *(expr for inputs in arguments for expr in inputs), *outputs]
    done = parameterize(flat, {lift.expr: (m, lift.interned) for m, lift in enumerate(lifted)})
    rewritten = iter(done.expressions)
    predicates = tuple(next(rewritten) for _ in predicates)
    keys = tuple(next(rewritten) for _ in keys)
    arguments = [tuple(next(rewritten) for _ in inputs) for inputs in arguments]
    outputs = tuple(next(rewritten) for _ in outputs)
    return FusionProgram(tuple(predicates), tuple(keys), tuple(arguments), tuple(collector.columns.values()),
                         lifted, tuple(counts_by_value), outputs, done.types, done.words)
