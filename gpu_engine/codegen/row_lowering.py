"""Lower typed expression IR to straight-line row code: each node becomes a value and a validity local.

Why: a fused kernel evaluates a pipeline stretch per row in registers instead
of one column per expression node. The rules are the eager evaluator's
(:mod:`gpu_engine.expressions`), restated per row so both give the same
answers: DuckDB's result types, exact int64/decimal arithmetic that raises on
overflow (an error is recorded as ``row * 256 + code`` and the kernel stops),
rounding half away from zero when decimal scales drop, IEEE floats, DuckDB's
float order (NaN greatest), Kleene logic for AND/OR/NOT, and CASE branches
evaluated only on the rows that reach them.

Values are held as: int64 for every integer, decimal (scaled), date (days)
and timestamp (ticks); ``np.float32``/``np.float64`` for floats; bool for
booleans. Strings never reach row code: a subexpression over one string column
(a comparison, LIKE, IN, a substring key) is *lifted* by
:mod:`gpu_engine.codegen.fusion_program` and evaluated per batch on the
column's dictionary, so the kernel reads a lookup table by code.

Constants never appear in the code: :mod:`gpu_engine.codegen.kernel_parameters`
turns each into a :class:`~gpu_engine.codegen.kernel_parameters.KernelParameter`,
read once per kernel from its parameter array into a local ``p{k}``, and an IN
list into a :class:`~gpu_engine.codegen.kernel_parameters.ParameterSet` searched
by bisection; a literal that reaches this module is refused (only NULL is
written, as a validity of False).

Anything this module cannot lower raises :class:`Unsupported`; the fusion pass
then leaves that stretch to the eager operators, so fusion never changes what
a plan can run.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa

from gpu_engine.codegen.kernel_parameters import FractionParameter, KernelParameter, ParameterSet
from gpu_engine.codegen.source_writer import SourceWriter
from gpu_engine.columnar.types import (
    is_boolean, is_decimal, is_floating, is_integer, is_numeric, is_string, is_temporal, is_time, physical_dtype,
)
from gpu_engine.expressions.temporal import EXTRACT_FIELDS, TICKS_PER_DAY
from gpu_engine.plans.expressions import (
    ARITHMETIC_OPS, COMPARISON_OPS, BinaryOp, Case, Cast, ColumnRef, Expr, Extract, Literal, UnaryOp,
)

__all__ = ["Unsupported", "RowValue", "RowLowering", "row_dtype_code", "ERROR_CODE_BASE", "error_word", "error_parts"]

#: The most distinct error codes (messages) one kernel hands out.
ERROR_CODE_BASE = 256
#: Errors are recorded as ``code << ERROR_ROW_BITS | row`` and the least wins (a kernel keeps the minimum of its
#: rows' errors): the first error in evaluation order (codes are handed out as the row code is written, which is
#: the order it runs in), at its first row. Why code first: DuckDB evaluates an expression over a whole vector
#: before the next, as the engine's eager evaluator does over a batch, so a later row's error in an earlier
#: expression is the one they report (``sum(v + v), sum(v * 4)`` with row 10 overflowing only ``v * 4`` and row 20
#: both: the addition's); row first, fused kernels reported the multiplication's.
ERROR_ROW_BITS = 40


def error_word(code: int) -> str:
    """Return the source of row ``i``'s error word for ``code`` (see :data:`ERROR_ROW_BITS`)."""
    return f"(np.int64({code << ERROR_ROW_BITS}) + np.int64(i))"


def error_parts(word: int) -> tuple[int, int]:
    """Return ``(row, code)`` of an error word."""
    code, row = divmod(int(word), 1 << ERROR_ROW_BITS)
    return row, code
_INT64_MIN = -(2**63)
_NAMES = {"add": "addition", "sub": "subtraction", "mul": "multiplication", "div": "division", "mod": "modulo"}


#: IN lists of at most this many values are scanned whole per row; longer ones are bisected.
SHORT_IN_LIST = 16


class Unsupported(Exception):
    """Raise when an expression cannot be evaluated in generated row code (the stretch stays unfused)."""


@dataclass(frozen=True)
class RowValue:
    """A lowered expression: Python source of its value and of its validity, and its logical type."""

    value: str
    valid: str
    dtype: pa.DataType


def row_dtype_code(dtype: pa.DataType) -> str:
    """Return the NumPy constructor generated code wraps a value of ``dtype`` in."""
    if is_floating(dtype):
        return f"np.{np.dtype(physical_dtype(dtype)).name}"
    if is_boolean(dtype):
        return "bool"
    if is_integer(dtype) or is_decimal(dtype) or is_temporal(dtype):
        return "np.int64"
    raise Unsupported(f"values of type {dtype} are not evaluated in generated kernels")


def _scale(dtype: pa.DataType) -> int:
    if not is_decimal(dtype):
        return 0
    if dtype.scale > 18:
        raise Unsupported(f"{dtype} has a scale above 18")
    return dtype.scale


_INT_CONSTANT = re.compile(r"^(?:np\.int64\()*(-?\d+)\)*$")


def _may_need_128_bits(op: str, dtype: pa.DataType) -> bool:
    """Return True when an exact result of ``dtype`` may exceed int64 where DuckDB answers exactly.

    Row code computes in int64; the eager evaluator widens decimal(p > 18)
    results to 128 bits. A sum or difference of decimal(19) stays below
    2 * 10**18 (its operands have at most 18 digits at the result's scale), so
    it stays fused; wider sums and every decimal(p > 18) product do not.
    """
    if not is_decimal(dtype) or dtype.precision <= 18:
        return False
    return op == "mul" or (op in ("add", "sub") and dtype.precision > 19)


def _integer_digits(dtype: pa.DataType) -> int:
    """Return the digits left of the point that values of an integer, bool or decimal type can have."""
    if is_decimal(dtype):
        return dtype.precision - dtype.scale
    if is_boolean(dtype):
        return 1
    return {8: 3, 16: 5, 32: 10, 64: 19}[dtype.bit_width]


def _int_constant(code: str) -> int | None:
    """Return the value of generated code that is an int64 constant (``np.int64(-5)``), else None."""
    match = _INT_CONSTANT.match(code)
    if match is None or code.count("(") != code.count(")"):
        return None
    value = int(match.group(1))
    return value if -(2**63) <= value < 2**63 else None


def _and(*terms: str) -> str:
    terms = tuple(t for t in terms if t != "True")
    if "False" in terms:
        return "False"
    if not terms:
        return "True"
    return "(" + " and ".join(terms) + ")"


def _fits(value: int, dtype: pa.DataType) -> bool:
    if is_decimal(dtype):
        return dtype.precision > 18 or abs(value) < 10**dtype.precision
    if is_integer(dtype):
        info = np.iinfo(physical_dtype(dtype))
        return max(info.min, -(2**63)) <= value <= min(info.max, 2**63 - 1)
    return False


class RowLowering:
    """Write the row code of expressions into a :class:`SourceWriter`.

    Parameters
    ----------
    writer
        Where lines go; its memo makes each distinct subexpression computed once per block.
    read_input
        ``read_input(expr) -> RowValue | None``: the kernel's read of an input
        column or lifted subexpression (writing its lines), or None when
        ``expr`` is neither.
    on_error
        ``on_error(code) -> list[str]``: the lines that record error ``code``
        for the current row and leave it.
    messages
        The error messages, appended to as codes are handed out (index = code).
    """

    def __init__(self, writer: SourceWriter, read_input: Callable[[Expr], RowValue | None],
                 on_error: Callable[[int], list[str]], messages: list[str]):
        self.writer = writer
        self.read_input = read_input
        self.on_error = on_error
        self.messages = messages

    # ------------------------------------------------------------ plumbing
    def lower(self, expr: Expr) -> RowValue:
        """Return the row value of ``expr``, writing the lines that compute it (once per block)."""
        known = self.writer.remembered(expr)
        if known is not None:
            return known
        result = self.read_input(expr)
        if result is None:
            result = self._lower(expr)
        self.writer.remember(expr, result)
        return result

    def _assign(self, prefix: str, code: str) -> str:
        if code in ("True", "False") or code.isidentifier():
            return code
        name = self.writer.fresh(prefix)
        self.writer.line(f"{name} = {code}")
        return name

    def _fail_if(self, condition: str, message: str) -> None:
        """Write: where ``condition`` holds, record ``message`` for this row and leave it."""
        if condition == "False":
            return
        code = len(self.messages)
        if code >= ERROR_CODE_BASE:
            raise Unsupported("too many distinct error messages in one kernel")
        self.messages.append(message)
        with self.writer.block(f"if {condition}:"):
            self.writer.extend(self.on_error(code))

    @functools.singledispatchmethod
    def _lower(self, expr: Expr) -> RowValue:
        raise Unsupported(f"{type(expr).__name__} is not evaluated in generated kernels")

    # ------------------------------------------------------------- leaves
    @_lower.register
    def _(self, expr: ColumnRef) -> RowValue:
        raise Unsupported(f"column {expr.name} ({expr.dtype}) is not an input of the kernel")

    @_lower.register
    def _(self, expr: Literal) -> RowValue:
        dtype = expr.dtype
        if expr.value is not None:  # kernels never hold values (see kernel_parameters): refused, never written
            raise Unsupported(f"literal {expr.sql()} of type {dtype} is not a kernel parameter")
        if pa.types.is_null(dtype):
            return RowValue("np.int64(0)", "False", pa.int64())
        return RowValue(self._zero(dtype), "False", dtype)

    @_lower.register
    def _(self, expr: KernelParameter) -> RowValue:
        row_dtype_code(expr.dtype)  # refuses types without row values
        return RowValue(f"p{expr.index}", "True", expr.dtype)

    def _zero(self, dtype: pa.DataType) -> str:
        maker = row_dtype_code(dtype)
        return "False" if maker == "bool" else f"{maker}(0)"

    # ---------------------------------------------------------- arithmetic
    def _as_float(self, value: RowValue) -> str:
        scale = _scale(value.dtype)
        if is_floating(value.dtype):
            return f"np.float64({value.value})"
        if scale:
            return f"(np.float64({value.value}) / np.float64({float(10**scale)!r}))"
        return f"np.float64({value.value})"

    def _rescaled(self, value: str, from_scale: int, to_scale: int, valid: str, what: str) -> str:
        """Return int64 ``value`` moved between decimal scales: up is checked, down rounds half away."""
        if to_scale > from_scale:
            return self._checked("MULTIPLY", value, f"np.int64({10 ** (to_scale - from_scale)})", valid, what)
        if to_scale < from_scale:
            power = 10 ** (from_scale - to_scale)
            constant = _int_constant(value)
            if constant is not None:  # rounds half away from zero, as the kernel would
                quotient = abs(constant) // power + (1 if abs(constant) % power * 2 >= power else 0)
                return f"np.int64({quotient if constant >= 0 else -quotient})"
            return self._assign("down", f"divide_round_half_away({value}, np.int64({power}))")
        return value

    def _as_scaled(self, value: RowValue, scale: int, what: str) -> str:
        if is_floating(value.dtype):
            raise Unsupported("floats have no exact scaled value")
        return self._rescaled(f"np.int64({value.value})", _scale(value.dtype), scale, value.valid, what)

    def _checked(self, op: str, left: str, right: str, valid: str, what: str) -> str:
        a, b = _int_constant(left), _int_constant(right)
        if a is not None and b is not None:  # fold constants; an overflow is left to the row check
            folded = {"ADD": a + b, "SUBTRACT": a - b, "MULTIPLY": a * b}[op]
            if -(2**63) <= folded < 2**63:
                return f"np.int64({folded})"
        result, bad = self.writer.fresh("v"), self.writer.fresh("bad")
        self.writer.line(f"{result}, {bad} = checked_int64_op({op}, np.int64({left}), np.int64({right}))")
        self._fail_if(_and(valid, bad),
                      f"Overflow in {what}: the result does not fit in 64-bit integers")
        return result

    def _fit(self, value: str, dtype: pa.DataType, valid: str, what: str) -> str:
        """Check that int64 ``value`` fits ``dtype`` (decimal precision, integer width), as the eager ``fit_to_type``."""
        constant = _int_constant(value)
        if constant is not None and _fits(constant, dtype):
            return value
        if is_decimal(dtype):
            if dtype.precision <= 18:
                limit = 10**dtype.precision
                self._fail_if(_and(valid, f"({value} >= {limit} or {value} <= {-limit})"),
                              f"{what}: value is out of range for {dtype}")
            return value
        if is_integer(dtype):
            target = np.dtype(physical_dtype(dtype))
            if target != np.dtype(np.int64):
                info = np.iinfo(target)
                low, high = int(max(info.min, -(2**63))), int(min(info.max, 2**63 - 1))
                self._fail_if(_and(valid, f"({value} < {low} or {value} > {high})"),
                              f"{what}: value is out of range for {dtype}")
            return value
        raise Unsupported(f"cannot store integers as {dtype}")

    def _arithmetic(self, expr: BinaryOp) -> RowValue:
        left, right = self.lower(expr.left), self.lower(expr.right)
        dtype = expr.dtype
        if not (is_numeric(left.dtype) and is_numeric(right.dtype)):
            raise Unsupported(f"{expr.op} of {left.dtype} and {right.dtype}")
        valid = self._assign("ok", _and(left.valid, right.valid))
        if is_floating(dtype):
            maker = row_dtype_code(dtype)
            a = self._assign("f", f"{maker}({self._as_float(left)})")
            b = self._assign("f", f"{maker}({self._as_float(right)})")
            if expr.op == "mod":
                code = f"{maker}(float_remainder({a}, {b}))"
            else:
                symbol = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[expr.op]
                code = f"{maker}({a} {symbol} {b})"
            return RowValue(self._assign("f", code), valid, dtype)
        if not (is_integer(dtype) or is_decimal(dtype)) or is_floating(left.dtype) or is_floating(right.dtype):
            raise Unsupported(f"{expr.op} of {left.dtype} and {right.dtype} into {dtype}")
        what = f"{_NAMES[expr.op]} of {dtype}"
        if _may_need_128_bits(expr.op, dtype):
            raise Unsupported(f"{_NAMES[expr.op]} into {dtype} may need 128 bits (computed unfused)")
        scale = _scale(dtype)
        if expr.op == "mul":
            product = self._checked("MULTIPLY", f"np.int64({left.value})", f"np.int64({right.value})", valid, what)
            value = self._rescaled(product, _scale(left.dtype) + _scale(right.dtype), scale, valid, what)
        elif expr.op in ("add", "sub"):
            a, b = self._as_scaled(left, scale, what), self._as_scaled(right, scale, what)
            value = self._checked("ADD" if expr.op == "add" else "SUBTRACT", a, b, valid, what)
        elif expr.op == "mod":
            a, b = self._as_scaled(left, scale, what), self._as_scaled(right, scale, what)
            # x % -1 is 0 (INT64_MIN's too, as in DuckDB); dividing by 1 keeps INT64_MIN % -1 (a trap in C) out.
            self._fail_if(_and(valid, f"{b} == 0"), f"Division by zero in {what}")  # DuckDB raises, never NULL
            divisor = self._assign("d", f"(np.int64(1) if ({b} == 0 or {b} == -1) else {b})")
            value = self._assign("v", f"truncated_remainder({a}, {divisor})")
        else:
            raise Unsupported(f"{_NAMES[expr.op]} cannot produce {dtype}")
        return RowValue(self._fit(value, dtype, valid, what), valid, dtype)

    # ---------------------------------------------------------- comparison
    def _time_values(self, value: RowValue, unit: str | None) -> str:
        dtype = value.dtype
        if unit is None:
            return self._days(value)
        if pa.types.is_date32(dtype):
            return f"(np.int64({value.value}) * np.int64({TICKS_PER_DAY[unit]}))"
        return f"(np.int64({value.value}) * np.int64({TICKS_PER_DAY[unit] // TICKS_PER_DAY[dtype.unit]}))"

    def _days(self, value: RowValue) -> str:
        if pa.types.is_date32(value.dtype):
            return f"np.int64({value.value})"
        if pa.types.is_timestamp(value.dtype):
            return f"(np.int64({value.value}) // np.int64({TICKS_PER_DAY[value.dtype.unit]}))"
        raise Unsupported(f"expected a date or timestamp, got {value.dtype}")

    def _order(self, left: RowValue, right: RowValue) -> tuple[str, str]:
        """Return source of ``(less, equal)`` for two comparable values (exact for mixed decimal scales)."""
        lt, rt = left.dtype, right.dtype
        if (is_numeric(lt) and is_numeric(rt)) or (is_boolean(lt) and is_boolean(rt)):
            if is_floating(lt) or is_floating(rt):
                a, b = self._assign("f", self._as_float(left)), self._assign("f", self._as_float(right))
                return f"float_less({a}, {b})", f"float_equal({a}, {b})"
            if is_decimal(lt) or is_decimal(rt):
                ls, rs = _scale(lt), _scale(rt)
                a, b = f"np.int64({left.value})", f"np.int64({right.value})"
                if ls == rs:
                    return f"({a} < {b})", f"({a} == {b})"
                less, equal = self.writer.fresh("lt"), self.writer.fresh("eq")
                if ls < rs:
                    self.writer.line(f"{less}, {equal} = scaled_order({a}, {b}, np.int64({10 ** (rs - ls)}))")
                    return less, equal
                self.writer.line(f"{less}, {equal} = scaled_order({b}, {a}, np.int64({10 ** (ls - rs)}))")
                return f"(not ({less} or {equal}))", equal
            return f"({left.value} < {right.value})", f"({left.value} == {right.value})"
        if is_temporal(lt) and is_temporal(rt):
            units = [t.unit for t in (lt, rt) if pa.types.is_timestamp(t)]
            unit = max(units, key=TICKS_PER_DAY.get) if units else None
            a = self._assign("t", self._time_values(left, unit))
            b = self._assign("t", self._time_values(right, unit))
            return f"({a} < {b})", f"({a} == {b})"
        if is_time(lt) and is_time(rt):  # microseconds of the day
            return f"({left.value} < {right.value})", f"({left.value} == {right.value})"
        raise Unsupported(f"cannot compare {lt} with {rt}")

    def _compare(self, op: str, left: RowValue, right: RowValue) -> str:
        less, equal = self._order(left, right)
        return {"eq": equal, "ne": f"(not {equal})", "lt": less, "le": f"({less} or {equal})",
                "gt": f"(not ({less} or {equal}))", "ge": f"(not {less})"}[op]

    def _comparison(self, expr: BinaryOp) -> RowValue:
        if any(isinstance(side, Literal) and side.value is None for side in (expr.left, expr.right)):
            return RowValue("False", "False", pa.bool_())
        if isinstance(expr.left, FractionParameter) or isinstance(expr.right, FractionParameter):
            return self._fraction_comparison(expr)
        left, right = self.lower(expr.left), self.lower(expr.right)
        valid = self._assign("ok", _and(left.valid, right.valid))
        return RowValue(self._assign("c", self._compare(expr.op, left, right)), valid, pa.bool_())

    def _fraction_comparison(self, expr: BinaryOp) -> RowValue:
        """Compare a value with a constant between ``p{k}`` and ``p{k} + 1`` (a :class:`FractionParameter`)."""
        constant_left = isinstance(expr.left, FractionParameter)
        fraction, other = (expr.left, expr.right) if constant_left else (expr.right, expr.left)
        value = self.lower(other)
        if not (is_integer(value.dtype) or is_decimal(value.dtype)) or _scale(value.dtype) != _scale(fraction.dtype):
            raise Unsupported(f"cannot compare {value.dtype} with {fraction.dtype}")
        op = expr.op
        if constant_left:  # c op x is x op' c
            op = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(op, op)
        below = f"(np.int64({value.value}) <= p{fraction.index})"  # x < c and x <= c alike: no x equals c
        code = {"eq": "False", "ne": "True", "lt": below, "le": below,
                "gt": f"(not {below})", "ge": f"(not {below})"}[op]
        return RowValue(self._assign("c", code), value.valid, pa.bool_())

    # ------------------------------------------------------------- boolean
    def _boolean(self, expr: BinaryOp) -> RowValue:
        left, right = self.lower(expr.left), self.lower(expr.right)
        if not (is_boolean(left.dtype) and is_boolean(right.dtype)):
            raise Unsupported(f"{expr.op.upper()} needs booleans")
        both = _and(left.valid, right.valid)
        if expr.op == "and":
            left_false, right_false = _and(left.valid, f"not {left.value}"), _and(right.valid, f"not {right.value}")
            valid = self._assign("ok", f"({both} or {left_false} or {right_false})")
            return RowValue(self._assign("b", f"({left.value} and {right.value})"), valid, pa.bool_())
        left_true, right_true = _and(left.valid, left.value), _and(right.valid, right.value)
        valid = self._assign("ok", f"({both} or {left_true} or {right_true})")
        return RowValue(self._assign("b", f"({left.value} or {right.value})"), valid, pa.bool_())

    @_lower.register
    def _(self, expr: BinaryOp) -> RowValue:
        if expr.op in COMPARISON_OPS:
            return self._comparison(expr)
        if expr.op in ("and", "or"):
            return self._boolean(expr)
        if expr.op in ARITHMETIC_OPS:
            return self._arithmetic(expr)
        raise Unsupported(f"unknown binary operator {expr.op!r}")

    @_lower.register
    def _(self, expr: UnaryOp) -> RowValue:
        if expr.op in ("is_null", "is_not_null"):
            if isinstance(expr.operand, Literal) and expr.operand.value is None:
                return RowValue("True" if expr.op == "is_null" else "False", "True", pa.bool_())
            operand = self.lower(expr.operand)
            code = f"(not {operand.valid})" if expr.op == "is_null" else operand.valid
            return RowValue(self._assign("b", code), "True", pa.bool_())
        operand = self.lower(expr.operand)
        if expr.op == "not":
            if not is_boolean(operand.dtype):
                raise Unsupported("NOT needs a boolean")
            return RowValue(self._assign("b", f"(not {operand.value})"), operand.valid, pa.bool_())
        if expr.op == "negate":
            dtype = expr.dtype
            if is_floating(dtype):
                maker = row_dtype_code(dtype)
                return RowValue(self._assign("f", f"{maker}(-{self._as_float(operand)})"), operand.valid, dtype)
            if not (is_integer(dtype) or is_decimal(dtype)) or is_floating(operand.dtype):
                raise Unsupported(f"cannot negate {operand.dtype} into {dtype}")
            what = f"negation of {dtype}"
            value = self._as_scaled(operand, _scale(dtype), what)
            self._fail_if(_and(operand.valid, f"{value} == {_INT64_MIN}"), f"Overflow in negation of {dtype}")
            negated = self._assign("v", f"(-{value})")
            return RowValue(self._fit(negated, dtype, operand.valid, what), operand.valid, dtype)
        raise Unsupported(f"unknown unary operator {expr.op!r}")

    # ----------------------------------------------------------------- CASE
    @_lower.register
    def _(self, expr: Case) -> RowValue:
        dtype = expr.dtype
        maker = row_dtype_code(dtype)
        value, valid = self.writer.fresh("case"), self.writer.fresh("case_ok")
        self.writer.line(f"{value} = {self._zero(dtype)}")
        self.writer.line(f"{valid} = False")
        self._case_branches(expr.whens, expr.default, value, valid, dtype)
        return RowValue(value, valid, dtype)

    def _case_branches(self, whens, default, value: str, valid: str, dtype: pa.DataType) -> None:
        """Write nested if/else: each condition only where the earlier ones were not TRUE (DuckDB's order)."""
        if not whens:
            if default is not None:
                self._assign_branch(default, value, valid, dtype)
            return
        (condition, result), rest = whens[0], whens[1:]
        test = self.lower(condition)
        if not is_boolean(test.dtype):
            raise Unsupported("a CASE condition must be boolean")
        with self.writer.block(f"if {_and(test.valid, test.value)}:"):
            self._assign_branch(result, value, valid, dtype)
        if rest or default is not None:
            with self.writer.block("else:"):
                self._case_branches(rest, default, value, valid, dtype)

    def _assign_branch(self, expr: Expr, value: str, valid: str, dtype: pa.DataType) -> None:
        branch = self._cast(self.lower(expr), dtype)
        maker = row_dtype_code(dtype)
        self.writer.line(f"{value} = {maker}({branch.value})" if maker != "bool" else f"{value} = {branch.value}")
        self.writer.line(f"{valid} = {branch.valid}")

    # ------------------------------------------------------------------- IN
    @_lower.register
    def _(self, expr: ParameterSet) -> RowValue:
        """Bisect the sorted values of the set in the parameter array (slots ``p{index}``: start, ``p{index+1}``: count)."""
        operand = self.lower(expr.operand)
        if expr.floating:
            if not is_numeric(operand.dtype):
                raise Unsupported(f"IN over {operand.dtype}")
            key, values = self._assign("f", self._as_float(operand)), "parameters_f64"
            less, equal = "float_less({}, {})", "float_equal({}, {})"
        else:
            row_dtype_code(operand.dtype)
            key, values = self._assign("v", f"np.int64({operand.value})"), "parameters"
            less, equal = "({} < {})", "({} == {})"
        low, high, end = self.writer.fresh("lo"), self.writer.fresh("hi"), self.writer.fresh("end")
        middle, matched, item = self.writer.fresh("mid"), self.writer.fresh("m"), self.writer.fresh("e")
        self.writer.line(f"{low} = p{expr.index}")
        self.writer.line(f"{end} = p{expr.index} + p{expr.index + 1}")
        # A short list is scanned whole without branching on the values (a bisection's data-dependent
        # branches mispredicted: TPC-H's 8-value IN lists ran at half the speed); a long one is bisected.
        with self.writer.block(f"if p{expr.index + 1} <= {SHORT_IN_LIST}:"):
            self.writer.line(f"{matched} = False")
            with self.writer.block(f"for {item} in range({low}, {end}):"):
                self.writer.line(f"{matched} = {matched} | {equal.format(f'{values}[{item}]', key)}")
        with self.writer.block("else:"):
            self.writer.line(f"{high} = {end}")
            with self.writer.block(f"while {low} < {high}:"):
                self.writer.line(f"{middle} = ({low} + {high}) >> 1")
                with self.writer.block(f"if {less.format(f'{values}[{middle}]', key)}:"):
                    self.writer.line(f"{low} = {middle} + 1")
                with self.writer.block("else:"):
                    self.writer.line(f"{high} = {middle}")
            self.writer.line(f"{matched} = ({low} < {end} and {equal.format(f'{values}[{low}]', key)})")
        valid = operand.valid if not expr.has_null else self._assign("ok", _and(operand.valid, matched))
        value = self._assign("b", f"(not {matched})") if expr.negated else matched
        return RowValue(value, valid, pa.bool_())

    # ----------------------------------------------------------------- CAST
    @_lower.register
    def _(self, expr: Cast) -> RowValue:
        return self._cast(self.lower(expr.operand), expr.dtype)

    def _cast(self, value: RowValue, dtype: pa.DataType) -> RowValue:
        source = value.dtype
        if source == dtype:
            return value
        if pa.types.is_null(source):
            return RowValue(self._zero(dtype), "False", dtype)
        if is_string(source) or is_string(dtype):
            raise Unsupported(f"casting {source} to {dtype} in a kernel")
        what = f"Conversion of {source} to {dtype}"
        valid = value.valid
        if pa.types.is_date32(dtype) or pa.types.is_timestamp(dtype):
            if not is_temporal(source):
                raise Unsupported(f"casting {source} to {dtype}")
            if pa.types.is_date32(dtype) and pa.types.is_timestamp(source) and source.unit == "ns" and not source.tz:
                # the day of the rounded microseconds, as DuckDB (expressions/temporal.as_timestamp_micros)
                raise Unsupported(f"casting {source} to {dtype} (of its rounded microseconds: computed unfused)")
            if pa.types.is_date32(dtype):
                return RowValue(self._assign("t", self._days(value)), valid, dtype)
            if pa.types.is_timestamp(source) and TICKS_PER_DAY[source.unit] > TICKS_PER_DAY[dtype.unit]:
                # rounded half away from zero, and TIMESTAMP_NS -> TIMESTAMP_S raises (expressions/cast.py)
                raise Unsupported(f"casting {source} to {dtype} (a coarser unit: computed unfused)")
            factor = TICKS_PER_DAY[dtype.unit] // (TICKS_PER_DAY[source.unit] if pa.types.is_timestamp(source) else 1)
            if factor > 1:  # ticks past int64 (TIMESTAMP_NS past 2262) raise, as expressions/cast.finer_ticks_fit
                limit = (2**63 - 1) // factor
                kind = "DATE" if pa.types.is_date32(source) else "Timestamp"
                self._fail_if(_and(valid, f"({value.value} > {limit} or {value.value} < {-limit})"),
                              f"Conversion Error: Could not convert {kind} to higher precision: the value is out of "
                              f"{dtype}'s range")
            return RowValue(self._assign("t", self._time_values(value, dtype.unit)), valid, dtype)
        if not (is_numeric(source) or is_boolean(source)):
            raise Unsupported(f"casting {source} to {dtype}")
        if is_boolean(dtype):
            zero = "0.0" if is_floating(source) else "0"
            return RowValue(self._assign("b", f"({value.value} != {zero})"), valid, dtype)
        if is_floating(dtype):
            maker = row_dtype_code(dtype)
            result = self._assign("f", f"{maker}({self._as_float(value)})")
            if source == pa.float64() and dtype == pa.float32():  # expressions.numeric.narrowed_to_infinity
                top, wide_top = float(np.finfo(np.float32).max), float(np.finfo(np.float64).max)
                finite = f"({value.value} <= {wide_top!r} and {value.value} >= {-wide_top!r})"
                self._fail_if(_and(valid, f"({finite} and ({result} > {top!r} or {result} < {-top!r}))"),
                              f"{what}: value is out of range")
            return RowValue(result, valid, dtype)
        if is_integer(dtype):
            if is_floating(source):
                rounded = self._assign("f", f"round_half_even(np.float64({value.value}))")
                bad = f"(not ({rounded} >= {-float(2**63)!r} and {rounded} < {float(2**63)!r}))"
                self._fail_if(_and(valid, bad), f"{what}: value is out of range")
                integral = self._assign("v", f"(np.int64({rounded}) if {rounded} == {rounded} and "
                                             f"{rounded} >= {-float(2**63)!r} and {rounded} < {float(2**63)!r} "
                                             "else np.int64(0))")
                return RowValue(self._fit(integral, dtype, valid, what), valid, dtype)
            integral = f"np.int64({value.value})"
            if is_decimal(source) and _scale(source):
                integral = self._assign("v", f"divide_round_half_away({integral}, np.int64({10 ** _scale(source)}))")
            else:
                integral = self._assign("v", integral)
            return RowValue(self._fit(integral, dtype, valid, what), valid, dtype)
        if is_decimal(dtype):
            if dtype.precision > 18 and (is_floating(source) or _integer_digits(source) + _scale(dtype) > 18):
                raise Unsupported(f"casting {source} to {dtype} may need 128 bits (computed unfused)")
            if is_floating(source):
                scaled = self._assign("f", f"round_half_away(np.float64({value.value}) * {float(10 ** _scale(dtype))!r})")
                limit = float(10**dtype.precision) if dtype.precision <= 18 else float(2**63)
                in_range = f"({scaled} > {-limit!r} and {scaled} < {limit!r})"
                self._fail_if(_and(valid, f"(not {in_range})"), f"{what}: value is out of range")
                return RowValue(self._assign("v", f"(np.int64({scaled}) if {in_range} else np.int64(0))"), valid, dtype)
            scaled = self._as_scaled(value, _scale(dtype), what)
            return RowValue(self._fit(self._assign("v", scaled), dtype, valid, what), valid, dtype)
        raise Unsupported(f"casting {source} to {dtype}")

    # -------------------------------------------------------------- EXTRACT
    @_lower.register
    def _(self, expr: Extract) -> RowValue:
        if expr.field not in EXTRACT_FIELDS:
            raise Unsupported(f"EXTRACT({expr.field})")
        operand = self.lower(expr.operand)
        days = self._assign("days", self._days(operand))
        field = self._assign("x", f"np.int64(civil_{expr.field}({days}))")
        return self._cast(RowValue(field, operand.valid, pa.int64()), expr.dtype)
