"""Turn a fusion program's constants into kernel parameters: generated kernels never hold literal values.

Why: a kernel's source is its compile cache key (:mod:`gpu_engine.codegen.compiled_modules`). With the
literal values written into it, ``l_quantity > 20`` and then ``> 21`` were two modules, and each new
constant paid numba's compiler again (1.5-2.2 s against 0.07 s repeated, TPC-H SF1 on ``cpu``). Here
every non-null constant becomes a :class:`KernelParameter`: a slot of one int64 array the kernel is
launched with (floats as their bit patterns, booleans as 0/1), uploaded once per operator. An IN list
becomes a :class:`ParameterSet`: its values, sorted, in the same array, searched by bisection per row,
so a list of another length (or of 100k values) is the same kernel too.

A constant is first *normalized* to the type of what it meets, where that gives the same answers:
compared with a ``decimal(15,2)`` column, ``20`` and ``20.25`` are both ``decimal(18,2)`` (scaled
integers at the column's scale), so ``> 20`` and ``> 20.25`` share a kernel; compared with a float,
any number is the float64 the comparison would have converted it to; added to a decimal, it is
already at the result's scale; a CASE branch's value is already of the CASE's type. An IN list's
values meet the operand's type; a value the operand can never equal (``1.5`` against an integer
column) is left out of the set. Where normalizing would change an answer the constant keeps its own
type, and the kernel is keyed by that type instead.

Equal subexpressions (by structure and exact literal values) share their parameters, so the
generator still computes each once (``1 - l_discount`` in TPC-H Q1's two sums); equal constants in
different places do not, so changing one changes no shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar.types import (
    is_boolean, is_decimal, is_floating, is_integer, is_numeric, is_temporal, physical_dtype,
)
from gpu_engine.expressions.temporal import TICKS_PER_DAY
from gpu_engine.plans.expressions import (
    ARITHMETIC_OPS, COMPARISON_OPS, BinaryOp, Case, Expr, InList, Literal,
)

__all__ = ["KernelParameter", "FractionParameter", "ParameterSet", "LiftedInput", "Parameterized", "parameterize", "parameter_preamble",
           "PARAMETERS"]

#: The name of the kernel's parameter array (an int64 array; its float64 view is ``parameters_f64``).
PARAMETERS = "parameters"
_INT64_LIMIT = 2**63


@dataclass(frozen=True)
class KernelParameter(Expr):
    """A constant of type ``dtype``, read from slot ``index`` of the kernel's parameter array at launch."""

    index: int
    dtype: pa.DataType

    def sql(self) -> str:
        return f"${self.index}"


@dataclass(frozen=True)
class FractionParameter(Expr):
    """A constant strictly between two values of an exact type: ``p{index} + 1/2`` in its scaled integers.

    Why: compared for equality with a ``decimal(15,2)`` column, ``0.055`` has no value of the column's
    scale: ``x = 0.055`` never holds (NULL where ``x`` is) and ``x <> 0.055`` always does. Every such
    constant, whatever its scale, shares one kernel. (Order comparisons need no such node: see
    :func:`_threshold`.)
    """

    index: int
    dtype: pa.DataType

    def sql(self) -> str:
        return f"(${self.index} + 1/2)"


@dataclass(frozen=True)
class ParameterSet(Expr):
    """``operand [NOT] IN (values)`` with the values sorted in the parameter array.

    Slot ``index`` holds where they start and slot ``index + 1`` how many there are; they are of the
    operand's type class (:func:`_set_domain`), floats as bit patterns. ``has_null``: the list held a
    NULL (an unmatched row is then NULL, SQL's rule).
    """

    operand: Expr
    index: int
    floating: bool
    has_null: bool
    negated: bool = False
    dtype: pa.DataType = field(default_factory=pa.bool_)

    def sql(self) -> str:
        return f"({self.operand.sql()} {'NOT ' if self.negated else ''}IN ${self.index})"


@dataclass(frozen=True)
class LiftedInput(Expr):
    """Lifted subexpression ``index`` of a program (see :mod:`~gpu_engine.codegen.fusion_program`), by type only."""

    index: int
    dtype: pa.DataType
    interned: bool

    def sql(self) -> str:
        return f"$lifted{self.index}"


@dataclass(frozen=True)
class Parameterized:
    """Expressions with their constants as parameters, the parameters' types and the array's words."""

    expressions: tuple[Expr, ...]
    types: tuple[pa.DataType, ...]
    words: tuple[int, ...]


def parameter_preamble(types: Sequence[pa.DataType], used: set[int] | None = None) -> list[str]:
    """Return the lines a kernel starts with: slot ``k`` read once into local ``p{k}`` of its type.

    ``used`` (None: all) limits them to the slots the kernel's expressions read (:func:`used_slots`): a
    slice of a split aggregation reads its own aggregates' constants, not the whole program's.
    """
    lines = [f"{PARAMETERS}_f64 = {PARAMETERS}.view(np.float64)"]  # floats' bits, scalar or IN-set values
    for k, dtype in enumerate(types):
        if used is not None and k not in used:
            continue
        if is_floating(dtype):
            maker = "np.float32" if dtype == pa.float32() else "np.float64"
            lines.append(f"p{k} = {maker}({PARAMETERS}_f64[{k}])")
        elif is_boolean(dtype):
            lines.append(f"p{k} = {PARAMETERS}[{k}] != 0")
        else:
            lines.append(f"p{k} = np.int64({PARAMETERS}[{k}])")
    return lines


def used_slots(expressions: Sequence[Expr]) -> set[int]:
    """Return the parameter slots ``expressions`` read as ``p{k}`` (a parameter set its start's and its count's)."""
    slots: set[int] = set()
    stack = list(expressions)
    while stack:
        node = stack.pop()
        if isinstance(node, (KernelParameter, FractionParameter)):
            slots.add(node.index)
        elif isinstance(node, ParameterSet):
            slots.update((node.index, node.index + 1))
        stack.extend(node.children())
    return slots


def parameterize(expressions: Sequence[Expr], lifted: Mapping[Expr, tuple[int, bool]]) -> Parameterized:
    """Return ``expressions`` with constants as parameters and ``lifted`` subexpressions (expr -> (index, interned)) as inputs.

    Constants the generator cannot use (strings outside a lifted subexpression, wide decimals) stay
    literals, and the generator refuses them as before.
    """
    rewriter = _Rewriter(lifted)
    rewritten = tuple(rewriter.rewrite(expr) for expr in expressions)
    return rewriter.result(rewritten)


# ------------------------------------------------------------------ values
def _scalars(literals: Sequence[Literal]) -> list | None:
    """Return the physical values (ints, floats, bools) of non-null literals, or None when one has none."""
    from gpu_engine.expressions.literals import literal_scalars

    for literal in literals:
        dtype = literal.dtype
        if not (is_numeric(dtype) or is_boolean(dtype) or is_temporal(dtype)):
            return None
        if is_decimal(dtype) and (dtype.precision > 18 or dtype.scale > 18):
            return None
    values = literal_scalars(literals)
    out = []
    for literal, value in zip(literals, values):
        if isinstance(value, (bool, np.bool_)):
            out.append(bool(value))
        elif isinstance(value, (int, np.integer)):
            out.append(int(value))
        elif isinstance(value, (float, np.floating)):
            out.append(float(np.float32(value)) if literal.dtype == pa.float32() else float(value))
        else:
            return None
    return out


def _scale(dtype: pa.DataType) -> int:
    return dtype.scale if is_decimal(dtype) else 0


def _rescaled(value: int, from_scale: int, to_scale: int) -> int | None:
    """Return scaled integer ``value`` at another scale when exact and within int64, else None."""
    if to_scale >= from_scale:
        result = value * 10 ** (to_scale - from_scale)
    else:
        quotient, remainder = divmod(value, 10 ** (from_scale - to_scale))
        if remainder:
            return None
        result = quotient
    return result if -_INT64_LIMIT <= result < _INT64_LIMIT else None


def _as_float(value, dtype: pa.DataType) -> float:
    """Return the float64 the row lowering's ``_as_float`` makes of a value of ``dtype``."""
    if is_floating(dtype):
        return float(np.float64(value))
    scale = _scale(dtype)
    if scale:
        return float(np.float64(value) / np.float64(float(10**scale)))
    return float(np.float64(value))


def _exact_number(dtype: pa.DataType) -> bool:
    """Return True for types held as exact scaled integers (integers, decimals up to 18 digits)."""
    return is_integer(dtype) or (is_decimal(dtype) and dtype.precision <= 18)


def _compared(value, dtype: pa.DataType, other: pa.DataType) -> tuple[pa.DataType, object] | None:
    """Return ``(type, value)`` of a constant compared with a value of type ``other``, in ``other``'s terms.

    Only where the row lowering's comparison (``_order``) gives the same answers either way; None
    keeps the constant's own type.
    """
    if is_floating(other) and is_numeric(dtype):
        return pa.float64(), _as_float(value, dtype)
    if _exact_number(other) and _exact_number(dtype) and not isinstance(value, bool):
        scaled = _rescaled(value, _scale(dtype), _scale(other))
        if scaled is None:
            return None
        return (pa.decimal128(18, other.scale) if is_decimal(other) else pa.int64()), scaled
    if is_boolean(other) and is_boolean(dtype):
        return pa.bool_(), value
    if pa.types.is_date32(other) and pa.types.is_date32(dtype):
        return pa.date32(), value
    if pa.types.is_timestamp(other) and other.tz is None:
        if pa.types.is_timestamp(dtype) and dtype.unit == other.unit and dtype.tz is None:
            return other, value
        if pa.types.is_date32(dtype):
            ticks = value * TICKS_PER_DAY[other.unit]
            return (other, ticks) if -_INT64_LIMIT <= ticks < _INT64_LIMIT else None
    return None


#: ``c op x`` is ``x op' c``.
_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _threshold(value, dtype: pa.DataType, other: pa.DataType, op: str) -> tuple[pa.DataType, object] | None:
    """Return ``(type, value)`` of constant ``c`` in ``x op c`` with ``x`` of type ``other``, in ``other``'s terms.

    Over an exact type (integers, decimals) an order comparison with ``c`` is one with the scaled
    integer next to it: ``x > c`` is ``x > floor(c)``, ``x >= c`` is ``x >= ceil(c)`` (the same for
    ``<=`` and ``<``), so ``> 20``, ``> 20.25`` and ``> 20.125`` share a kernel. Otherwise see :func:`_compared`.
    """
    if op in ("eq", "ne") or not (_exact_number(other) and _exact_number(dtype)) or isinstance(value, bool):
        return _compared(value, dtype, other)
    from_scale, to_scale = _scale(dtype), _scale(other)
    if to_scale >= from_scale:
        return _compared(value, dtype, other)
    below, remainder = divmod(value, 10 ** (from_scale - to_scale))
    bound = below + 1 if remainder and op in ("ge", "lt") else below
    if not -_INT64_LIMIT <= bound < _INT64_LIMIT:
        return None
    return (pa.decimal128(18, other.scale) if is_decimal(other) else pa.int64()), bound


def _fraction(value, dtype: pa.DataType, other: pa.DataType) -> int | None:
    """Return the scaled integer just below a constant that lies between two values of exact type ``other``.

    None when the constant has an exact value of ``other``'s scale (see :func:`_compared`), is no exact
    number, or lies beyond int64 at that scale.
    """
    if not (_exact_number(other) and _exact_number(dtype)) or isinstance(value, bool):
        return None
    from_scale, to_scale = _scale(dtype), _scale(other)
    if to_scale >= from_scale:
        return None
    below, remainder = divmod(value, 10 ** (from_scale - to_scale))  # floor, also below zero
    return below if remainder and -_INT64_LIMIT <= below < _INT64_LIMIT - 1 else None


def _cast_value(value, dtype: pa.DataType, target: pa.DataType) -> object | None:
    """Return a constant cast to a CASE's type as the row lowering's ``_cast`` would, when exact; else None."""
    if dtype == target:
        return value
    if isinstance(value, bool):
        return None
    if is_floating(target) and is_numeric(dtype):
        number = _as_float(value, dtype)
        return float(np.float32(number)) if target == pa.float32() else number
    if _exact_number(target) and _exact_number(dtype):
        scaled = _rescaled(value, _scale(dtype), _scale(target))
        if scaled is None:
            return None
        if is_decimal(target):
            return scaled if abs(scaled) < 10**target.precision else None
        info = np.iinfo(physical_dtype(target))
        return scaled if info.min <= scaled <= info.max else None
    return None


def _word(value, dtype: pa.DataType) -> int:
    """Return the int64 word holding ``value`` (a float as its float64 bits, a boolean as 0/1)."""
    if is_floating(dtype):
        return int(np.array([value], dtype=np.float64).view(np.int64)[0])
    return int(value)


def _set_domain(operand: pa.DataType) -> str | None:
    """Return how an IN list's values compare with an operand of this type: ``"float"``, ``"int"`` or None."""
    if is_floating(operand):
        return "float"
    if _exact_number(operand) or is_boolean(operand) or pa.types.is_date32(operand) or (
            pa.types.is_timestamp(operand) and operand.tz is None):
        return "int"
    return None


# ---------------------------------------------------------------- rewriting
class _Rewriter:
    """Rewrite expressions once each, handing out parameter slots in the order constants are met."""

    def __init__(self, lifted: Mapping[Expr, tuple[int, bool]]):
        self.lifted = lifted
        self.types: list[pa.DataType] = []
        self.words: list[int] = []
        self.sets: list[tuple[int, list[int]]] = []  # (slot of the start, sorted words)
        self._keys: dict[int, int] = {}  # id(expr) -> structural key (see _key)
        self._interned: dict[tuple, int] = {}
        self._done: dict[int, Expr] = {}  # structural key -> rewritten subexpression
        self._alive: list[Expr] = []  # keeps keyed objects alive, so their ids are not reused

    # A structural key per subexpression: equal keys mean equal trees with identical literal values
    # (repr tells 0.0 from -0.0 and 1 from True), each node costing one flat tuple.
    def _key(self, expr: Expr) -> int:
        known = self._keys.get(id(expr))
        if known is not None:
            return known
        parts: list = [type(expr).__name__]
        if isinstance(expr, Literal):
            parts += [str(expr.dtype), type(expr.value).__name__, repr(expr.value)]
        elif isinstance(expr, InList):  # its values by identity (kept alive below): no Python step per value
            parts += [self._key(expr.operand), expr.negated, str(expr.dtype), ("values", id(expr.values))]
        else:
            for item in fields(expr):
                parts.append(self._part(getattr(expr, item.name)))
        key = self._interned.setdefault(tuple(parts), len(self._interned))
        self._keys[id(expr)] = key
        self._alive.append(expr)
        return key

    def _part(self, value):
        if isinstance(value, Expr):
            return ("e", self._key(value))
        if isinstance(value, tuple):
            return ("t",) + tuple(self._part(item) for item in value)
        if isinstance(value, pa.DataType):
            return ("d", str(value))
        return ("v", type(value).__name__, repr(value))

    def rewrite(self, expr: Expr) -> Expr:
        lifted = self.lifted.get(expr)
        if lifted is not None:
            return LiftedInput(lifted[0], expr.dtype, lifted[1])
        if isinstance(expr, Literal):
            return self._constant(expr)
        key = self._key(expr)
        done = self._done.get(key)
        if done is None:
            done = self._done[key] = self._rewrite(expr)
        return done

    def _slot(self, dtype: pa.DataType, value) -> KernelParameter:
        self.types.append(dtype)
        self.words.append(_word(value, dtype))
        return KernelParameter(len(self.types) - 1, dtype)

    def _constant(self, literal: Literal, meets=None) -> Expr:
        """Return the parameter of a literal; ``meets(value, dtype) -> (type, value) | None`` normalizes it."""
        if literal.value is None:
            return literal
        values = _scalars([literal])
        if values is None:
            return literal
        value, dtype = values[0], literal.dtype
        normalized = meets(value, dtype) if meets is not None else None
        if normalized is not None:
            dtype, value = normalized
        if not is_floating(dtype) and not -_INT64_LIMIT <= int(value) < _INT64_LIMIT:
            return literal  # no int64 word holds it (a uint64 above 2**63): refused, computed unfused
        return self._slot(dtype, value)

    def _fraction(self, literal: Literal, other: pa.DataType) -> FractionParameter | None:
        """Return a literal compared with exact type ``other`` as a :class:`FractionParameter`, when it lies between."""
        if literal.value is None:
            return None
        values = _scalars([literal])
        below = None if values is None else _fraction(values[0], literal.dtype, other)
        if below is None:
            return None
        dtype = pa.decimal128(18, other.scale) if is_decimal(other) else pa.int64()
        slot = self._slot(dtype, below)
        return FractionParameter(slot.index, dtype)

    def _rewrite(self, expr: Expr) -> Expr:
        if isinstance(expr, BinaryOp):
            return self._binary(expr)
        if isinstance(expr, InList):
            return self._in_list(expr)
        if isinstance(expr, Case):
            return self._case(expr)
        return self._children(expr)

    def _children(self, expr: Expr) -> Expr:
        changes = {}
        for item in fields(expr):
            value = getattr(expr, item.name)
            rebuilt = self._value(value)
            if rebuilt is not value:
                changes[item.name] = rebuilt
        return replace(expr, **changes) if changes else expr

    def _value(self, value):
        if isinstance(value, Expr):
            return self.rewrite(value)
        if isinstance(value, tuple):
            items = tuple(self._value(item) for item in value)
            return items if any(a is not b for a, b in zip(items, value)) else value
        return value

    def _binary(self, expr: BinaryOp) -> Expr:
        left, right = expr.left, expr.right
        left_constant, right_constant = isinstance(left, Literal), isinstance(right, Literal)
        if left_constant == right_constant:
            return self._children(expr)
        other = right if left_constant else left
        literal = left if left_constant else right
        meets = None
        if expr.op in COMPARISON_OPS:
            # x < c is x < ceil(c), x > c is x > floor(c) over an exact type: one kernel for c of any scale.
            op = _FLIPPED.get(expr.op, expr.op) if left_constant else expr.op
            meets = lambda value, dtype: _threshold(value, dtype, other.dtype, op)
            fraction = self._fraction(literal, other.dtype) if op in ("eq", "ne") else None
            if fraction is not None:
                rewritten = self.rewrite(other)
                if left_constant:
                    return replace(expr, left=fraction, right=rewritten)
                return replace(expr, left=rewritten, right=fraction)
        elif expr.op in ("add", "sub", "mod") and is_decimal(expr.dtype) and expr.dtype.scale <= 18:
            # At the result's scale already: the kernel rescales nothing (TPC-H Q1's 1 - l_discount).
            scale = expr.dtype.scale

            def meets(value, dtype):
                if not _exact_number(dtype) or isinstance(value, bool):
                    return None
                scaled = _rescaled(value, _scale(dtype), scale)
                return None if scaled is None else (pa.decimal128(18, scale), scaled)
        elif expr.op not in ARITHMETIC_OPS and expr.op not in ("and", "or"):
            return self._children(expr)
        parameter = self._constant(literal, meets)
        rewritten = self.rewrite(other)
        if left_constant:
            return replace(expr, left=parameter, right=rewritten)
        return replace(expr, left=rewritten, right=parameter)

    def _case(self, expr: Case) -> Expr:
        target = expr.dtype
        narrow = not (is_decimal(target) and target.precision > 18)  # wide results are cast in the kernel

        def meets(value, dtype):
            cast = _cast_value(value, dtype, target) if narrow else None
            return None if cast is None else (target, cast)

        def branch(value: Expr | None) -> Expr | None:
            if isinstance(value, Literal):
                return self._constant(value, meets)
            return None if value is None else self.rewrite(value)

        whens = tuple((self.rewrite(condition), branch(value)) for condition, value in expr.whens)
        return replace(expr, whens=whens, default=branch(expr.default))

    def _in_list(self, expr: InList) -> Expr:
        operand = self.rewrite(expr.operand)
        present = [v for v in expr.values if v.value is not None]
        domain = _set_domain(expr.operand.dtype)
        if domain == "int" and is_integer(expr.operand.dtype) and all(
                is_integer(dtype) for dtype in {v.dtype for v in present}):
            # Integers against an integer: each value is its own word (one out of int64 equals no row).
            words = sorted({int(v.value) for v in present if -_INT64_LIMIT <= int(v.value) < _INT64_LIMIT})
            return self._parameter_set(operand, words, False, len(present) < len(expr.values), expr.negated)
        values = _scalars(present) if domain is not None else None
        if values is None:
            return replace(expr, operand=operand)
        if domain == "float":
            if not all(is_numeric(v.dtype) for v in present):
                return replace(expr, operand=operand)
            floats = np.unique(np.array([_as_float(value, v.dtype) for value, v in zip(values, present)],
                                        dtype=np.float64))  # sorted, NaN last (DuckDB's order), one NaN
            words = floats.view(np.int64).tolist()
        else:
            if any(is_floating(v.dtype) for v in present):  # compared as floats, value by value
                return replace(expr, operand=operand)
            kept = set()
            for value, literal in zip(values, present):
                normalized = _compared(value, literal.dtype, expr.operand.dtype)
                if normalized is None:
                    if _never_equal(value, literal.dtype, expr.operand.dtype):
                        continue
                    return replace(expr, operand=operand)
                kept.add(int(normalized[1]))
            words = sorted(kept)
        return self._parameter_set(operand, words, domain == "float", len(present) < len(expr.values), expr.negated)

    def _parameter_set(self, operand: Expr, words: list[int], floats: bool, has_null: bool, negated: bool) -> Expr:
        """Return the set-membership node over ``words`` (sorted), its start and length given parameter slots."""
        start = self._slot(pa.int64(), 0)
        self._slot(pa.int64(), len(words))
        self.sets.append((start.index, words))
        return ParameterSet(operand, start.index, floats, has_null, negated)

    def result(self, expressions: tuple[Expr, ...]) -> Parameterized:
        words = list(self.words)
        for slot, values in self.sets:
            words[slot] = len(words)
            words.extend(values)
        return Parameterized(expressions, tuple(self.types), tuple(words))


def _never_equal(value, dtype: pa.DataType, operand: pa.DataType) -> bool:
    """Return True when no value of ``operand``'s type equals constant ``value`` (an IN list may drop it).

    A number with more fractional digits than an exact operand's scale (``1.5`` against an integer),
    or beyond int64 at that scale, equals none of its values.
    """
    return _exact_number(operand) and _exact_number(dtype) and not isinstance(value, bool)

