"""Evaluate expression IR trees on a batch's device columns.

One free function per node type, chosen by :func:`functools.singledispatch`
(as cudf_polars translates its IR): each evaluates its children and hands the
columns to the family module that knows the semantics (arithmetic, comparison,
logical, strings, temporal, cast). Everything is written against
``batch.device.xp`` and the kernel entry points, so the same code runs on the
CPU and on a GPU. Only columns the expression names are read.

A CASE first evaluates every branch on all rows and picks per row (cheap
``where`` selects, no compaction). Only if that raises :class:`ExecutionError`
(an overflow, a failed cast) is it redone as DuckDB defines it, each condition on
the rows still undecided and each value on the rows that chose it, so an error
in a row a branch never sees does not fail the query.

A predicate (:func:`evaluate_predicate`: filters, join filters) is evaluated
two-valued through its ANDs and ORs, since only its TRUE rows are asked for;
below them, and for NOT, the three-valued rules hold as everywhere.

A constant subtree (arithmetic, negation and casts over literals only, such as
SQL's ``x BETWEEN 459 AND 459 + 1000``) is evaluated on one row and repeated
(:func:`_constant_once`), not computed and overflow-checked on every row.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Batch, Column
from gpu_engine.columnar.types import is_boolean, is_string
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.exec.cancel_points import cancel_point
from gpu_engine.expressions import arithmetic, comparison, logical, strings, temporal
from gpu_engine.expressions.cast import cast
from gpu_engine.expressions.deferred_checks import checks_read_together
from gpu_engine.expressions.functions import evaluate_function
from gpu_engine.expressions.literals import is_null_literal, literal_column
from gpu_engine.expressions.nulls import all_null_bools
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.plans.expressions import (
    ARITHMETIC_OPS, BOOLEAN_OPS, COMPARISON_OPS, BinaryOp, Case, Cast, ColumnRef, Expr, Extract, Function, InList,
    Like, Literal, Substring, UnaryOp,
)

__all__ = ["evaluate", "evaluate_predicate"]


def evaluate(expr: Expr, batch: Batch) -> Column:
    """Return the column of ``expr`` over the rows of ``batch`` (after its gather map), of type ``expr.dtype``.

    Raises
    ------
    PlanError
        For an expression the evaluator does not support (unknown operator,
        unsupported cast, mismatched operand types).
    ExecutionError
        For a row the expression cannot evaluate (overflow, text that does not
        parse), as DuckDB raises. Row checks are read back together when the
        evaluation ends (one host sync), or when the caller's
        :func:`~gpu_engine.expressions.deferred_checks.checks_read_together` block does.
    """
    # Float results follow IEEE (x / 0 is inf); rows that are NULL may hold any
    # value, so NumPy's warnings about them mean nothing.
    with np.errstate(all="ignore"), checks_read_together(batch.device):
        return _evaluate(expr, batch)


def evaluate_predicate(expr: Expr, batch: Batch) -> Any:
    """Return a device bool array, True where the predicate is TRUE (FALSE and NULL drop the row).

    Evaluated two-valued through its ANDs and ORs (:func:`_truth`): a filter asks only which rows are TRUE.
    """
    if not is_boolean(expr.dtype):
        raise PlanError(f"a predicate must be boolean, got {expr.dtype}", column=expr.sql())
    with np.errstate(all="ignore"), checks_read_together(batch.device):
        return _true_of(_truth(expr, batch))


def _truth(expr: Expr, batch: Batch) -> tuple[Any, tuple[Any, ...]]:
    """Return ``(data, validities)``: the rows where boolean ``expr`` is TRUE are ``data`` AND every validity.

    Why: ``a AND b`` is TRUE exactly where both are TRUE and ``a OR b`` where either is, so under a filter
    the ANDs and ORs need no Kleene NULL tracking (four to six passes over the rows a node, against one);
    the comparisons of one column share its validity array, so an AND of them applies it once (TPC-DS
    q28's filter: 36 range tests over four columns with NULLs, on every row of store_sales in the lowest
    tier). Each side is evaluated on every row, as the three-valued evaluation does, so the same rows fail.
    """
    if isinstance(expr, BinaryOp) and expr.op in BOOLEAN_OPS and is_boolean(expr.left.dtype) \
            and is_boolean(expr.right.dtype):
        cancel_point()
        left, right = _truth(expr.left, batch), _truth(expr.right, batch)
        if expr.op == "or":
            return _true_of(left) | _true_of(right), ()
        validities = left[1] + tuple(v for v in right[1] if not any(v is w for w in left[1]))
        return left[0] & right[0], validities
    column = _evaluate(expr, batch)
    return column.data, () if column.validity is None else (column.validity,)


def _true_of(truth: tuple[Any, tuple[Any, ...]]) -> Any:
    data, validities = truth
    for validity in validities:
        data = data & validity
    return data


def _coerce(batch: Batch, column: Column, dtype: pa.DataType) -> Column:
    """Return ``column`` as ``dtype`` (the IR's declared type), casting when the translator left it implicit."""
    if column.dtype == dtype or (is_string(column.dtype) and is_string(dtype)):
        return column
    return cast(batch.device, column, dtype)


@functools.singledispatch
def _evaluate(expr: Expr, batch: Batch) -> Column:
    raise PlanError(f"cannot evaluate expression node {type(expr).__name__}", column=str(expr))


#: The most nodes a subtree may have for :func:`_constant_once` to try it (bounds the walk at each node).
_CONSTANT_NODES = 16


def _is_constant(expr: Expr, budget: list[int]) -> bool:
    """Return True when ``expr`` is arithmetic, negation and casts over literals only, in ``budget[0]`` nodes."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if isinstance(expr, Literal):
        return True
    if isinstance(expr, BinaryOp):
        return expr.op in ARITHMETIC_OPS and _is_constant(expr.left, budget) and _is_constant(expr.right, budget)
    if isinstance(expr, UnaryOp):
        return expr.op == "negate" and _is_constant(expr.operand, budget)
    if isinstance(expr, Cast):
        return _is_constant(expr.operand, budget)
    return False


def _constant_once(expr: Expr, batch: Batch) -> Column | None:
    """Return a constant ``expr``'s column over ``batch``, evaluated on one row and repeated; None if not constant.

    Why: the eager evaluator (the lowest tier that first runs execute on, and plans with fusion off)
    made every literal a full column, so ``459 + 1000`` was a decimal addition with its overflow check
    over every row of every batch (TPC-DS q28 has 18 of them per row). Every row would compute the same
    value and an error would fail at the first row either way, so one row tells it all (batches of one
    row or none are evaluated as they are: a constant that fails must not fail an empty batch).
    """
    rows = batch.num_rows
    if rows < 2 or is_string(expr.dtype) or not _is_constant(expr, [_CONSTANT_NODES]):
        return None
    one = _evaluate(expr, Batch((), (), batch.device, None, 1))
    if one.offsets is not None or one.dictionary is not None:
        return None
    xp = batch.device.xp
    validity = None if one.validity is None else xp.repeat(one.validity, rows, axis=0)
    return Column(one.dtype, xp.repeat(one.data, rows, axis=0), validity)


@_evaluate.register
def _(expr: ColumnRef, batch: Batch) -> Column:
    return batch.column(expr.name)


@_evaluate.register
def _(expr: Literal, batch: Batch) -> Column:
    return literal_column(batch.device, expr, batch.num_rows)


def _string_literal(expr: Expr) -> str | None:
    if isinstance(expr, Literal) and isinstance(expr.value, str) and is_string(expr.dtype):
        return expr.value
    return None


def _comparison(expr: BinaryOp, batch: Batch) -> Column:
    device = batch.device
    if is_null_literal(expr.left) or is_null_literal(expr.right):
        return all_null_bools(device.xp, batch.num_rows)
    if _string_literal(expr.right) is not None and is_string(expr.left.dtype):
        return comparison.compare_to_string(device, expr.op, _evaluate(expr.left, batch), _string_literal(expr.right))
    if _string_literal(expr.left) is not None and is_string(expr.right.dtype):
        flipped = comparison.FLIPPED[expr.op]
        return comparison.compare_to_string(device, flipped, _evaluate(expr.right, batch), _string_literal(expr.left))
    if batch.num_rows >= 2:  # (a constant that fails must not fail an empty batch, as in _constant_once)
        for side, constant_side, op in ((expr.left, expr.right, expr.op),
                                        (expr.right, expr.left, comparison.FLIPPED[expr.op])):
            constant = _host_constant(constant_side)
            if constant is None:
                continue
            column = _evaluate(side, batch)
            result = comparison.compare_to_constant(device, op, column, constant)
            if result is not None:
                return result
            other = _evaluate(constant_side, batch)
            left, right = (column, other) if side is expr.left else (other, column)
            return comparison.compare(device, expr.op, left, right)
    return comparison.compare(device, expr.op, _evaluate(expr.left, batch), _evaluate(expr.right, batch))


def _host_constant(expr: Expr) -> Column | None:
    """Return a non-string constant subtree's value as a one-row host column (None: not constant, or it fails).

    Why: compared with a column, a constant need not be a column (see
    :func:`~gpu_engine.expressions.comparison.compare_to_constant`), and a plan's constants are the same
    for every batch: each is evaluated once, on the host, and kept. One that fails (an overflow) is left
    to the evaluation on the batch's rows, which reports it as before.
    """
    if isinstance(expr, Literal):
        if expr.value is None or is_string(expr.dtype):
            return None
    elif is_string(expr.dtype) or not _is_constant(expr, [_CONSTANT_NODES]):
        return None
    try:
        return _host_constant_of(expr)
    except (ExecutionError, PlanError, TypeError):  # TypeError: a literal value that does not hash
        return None


@functools.lru_cache(maxsize=1024)
def _host_constant_of(expr: Expr) -> Column:
    from gpu_engine.device import get_device

    host = get_device("cpu")
    with checks_read_together(host, own_scope=True):
        return _evaluate(expr, Batch((), (), host, None, 1))


@_evaluate.register
def _(expr: BinaryOp, batch: Batch) -> Column:
    cancel_point()  # a long chain runs one pass per node: a cancelled query stops here, not after all of them
    if expr.op in COMPARISON_OPS:
        return _comparison(expr, batch)
    if expr.op in ARITHMETIC_OPS and (constant := _constant_once(expr, batch)) is not None:
        return constant
    left, right = _evaluate(expr.left, batch), _evaluate(expr.right, batch)
    xp = batch.device.xp
    if expr.op in BOOLEAN_OPS:
        if not (is_boolean(left.dtype) and is_boolean(right.dtype)):
            raise PlanError(f"{expr.op.upper()} needs booleans, got {left.dtype} and {right.dtype}", column=expr.sql())
        return logical.kleene_and(xp, left, right) if expr.op == "and" else logical.kleene_or(xp, left, right)
    if expr.op in ARITHMETIC_OPS:
        return arithmetic.arithmetic(batch.device, expr.op, left, right, expr.dtype)
    raise PlanError(f"unknown binary operator {expr.op!r}", column=expr.sql())


@_evaluate.register
def _(expr: UnaryOp, batch: Batch) -> Column:
    xp = batch.device.xp
    if expr.op in ("is_null", "is_not_null") and is_null_literal(expr.operand):
        # NULL IS NULL needs no column (and an untyped NULL has none).
        return logical.null_test(xp, xp.zeros(batch.num_rows, dtype=xp.bool_), batch.num_rows, expr.op == "is_null")
    if expr.op == "negate" and (constant := _constant_once(expr, batch)) is not None:
        return constant
    operand = _evaluate(expr.operand, batch)
    if expr.op == "not":
        if not is_boolean(operand.dtype):
            raise PlanError(f"NOT needs a boolean, got {operand.dtype}", column=expr.sql())
        return logical.kleene_not(xp, operand)
    if expr.op == "negate":
        return arithmetic.negate(batch.device, operand, expr.dtype)
    if expr.op in ("is_null", "is_not_null"):
        validity = strings.string_validity(batch.device, operand) if is_string(operand.dtype) else operand.validity
        return logical.null_test(xp, validity, batch.num_rows, expr.op == "is_null")
    raise PlanError(f"unknown unary operator {expr.op!r}", column=expr.sql())


def _case_condition(condition: Expr, batch: Batch) -> Column:
    column = _evaluate(condition, batch)
    if not is_boolean(column.dtype):
        raise PlanError(f"a CASE condition must be boolean, got {column.dtype}", column=condition.sql())
    return column


def _case_on_all_rows(expr: Case, batch: Batch) -> Column:
    conditions = [_case_condition(condition, batch) for condition, _value in expr.whens]
    values = [_coerce(batch, _evaluate(value, batch), expr.dtype) for _condition, value in expr.whens]
    # ELSE NULL is no ELSE (SQL's ``CASE WHEN d_day_name = 'Sunday' THEN sales_price ELSE NULL END``): one branch
    # left is taken as it is (logical._one_branch).
    default = None if expr.default is None or is_null_literal(expr.default) \
        else _coerce(batch, _evaluate(expr.default, batch), expr.dtype)
    return logical.case(batch.device, conditions, values, default, expr.dtype, batch.num_rows)


def _case_branch_by_branch(expr: Case, batch: Batch) -> Column:
    """Evaluate each condition on the undecided rows and each value on its own rows (DuckDB's order)."""
    device = batch.device
    xp = device.xp
    undecided = xp.arange(batch.num_rows, dtype=xp.int32)
    parts = []
    for condition, value in expr.whens:
        hit = logical.true_rows(_case_condition(condition, batch.with_gather_map(undecided)))
        chosen = xp.take(undecided, selection_from_mask(device, hit))
        undecided = xp.take(undecided, selection_from_mask(device, ~hit))
        parts.append((chosen, _coerce(batch, _evaluate(value, batch.with_gather_map(chosen)), expr.dtype)))
    if expr.default is not None:
        default = _evaluate(expr.default, batch.with_gather_map(undecided))
        parts.append((undecided, _coerce(batch, default, expr.dtype)))
    return logical.scatter_branches(batch.device, parts, expr.dtype, batch.num_rows)


@_evaluate.register
def _(expr: Case, batch: Batch) -> Column:
    try:
        with checks_read_together(batch.device, own_scope=True):  # learn of errors here, to fall back
            return _case_on_all_rows(expr, batch)
    except ExecutionError:
        return _case_branch_by_branch(expr, batch)


@_evaluate.register
def _(expr: InList, batch: Batch) -> Column:
    return comparison.in_list(batch.device, _evaluate(expr.operand, batch), expr.values, expr.negated)


@_evaluate.register
def _(expr: Like, batch: Batch) -> Column:
    operand = _evaluate(expr.operand, batch)
    if not is_string(operand.dtype):
        raise PlanError(f"LIKE needs a string, got {operand.dtype}", column=expr.sql())
    matches = strings.like_matches(batch.device, operand, expr.pattern)
    return Column(pa.bool_(), ~matches if expr.negated else matches, strings.string_validity(batch.device, operand))


@_evaluate.register
def _(expr: Cast, batch: Batch) -> Column:
    if (constant := _constant_once(expr, batch)) is not None:
        return constant
    return cast(batch.device, _evaluate(expr.operand, batch), expr.dtype)


@_evaluate.register
def _(expr: Extract, batch: Batch) -> Column:
    operand = _evaluate(expr.operand, batch)
    values = temporal.extract(batch.device.xp, expr.field, operand)
    return _coerce(batch, Column(pa.int64(), values, operand.validity), expr.dtype)


@_evaluate.register
def _(expr: Substring, batch: Batch) -> Column:
    operand = _evaluate(expr.operand, batch)
    if not is_string(operand.dtype):
        raise PlanError(f"SUBSTRING needs a string, got {operand.dtype}", column=expr.sql())
    return strings.substring(batch.device, operand, expr.start, expr.length)


def _try(operand: Expr, batch: Batch) -> Column:
    """Return DuckDB's ``TRY(operand)``: the operand over ``batch``, NULL on each row where it raises.

    As DuckDB does, the operand is evaluated on all rows first (the common case: nothing raises, one pass);
    where that raises, on the rows apart: around the row the error names (a deferred check's
    ``failing_row``) or in halves, down to single rows, each of which is NULL if it raises alone. Each
    failing row costs about log2(rows) evaluations of shrinking row sets: TRY_CAST is the cheaper form of a
    cast that fails on many rows.
    """
    device = batch.device
    xp = device.xp
    try:
        with checks_read_together(device, own_scope=True):  # learn of errors here, to go row by row
            return _coerce(batch, _evaluate(operand, batch), operand.dtype)
    except ExecutionError as error:
        pending = [(xp.arange(batch.num_rows, dtype=xp.int32), error)]
    parts = []
    while pending:
        cancel_point()
        rows, error = pending.pop()
        if error is None:
            try:
                with checks_read_together(device, own_scope=True):  # (its checks are read as it ends)
                    column = _coerce(batch, _evaluate(operand, batch.with_gather_map(rows)), operand.dtype)
                parts.append((rows, column))
                continue
            except ExecutionError as raised:
                error = raised
        count = int(rows.shape[0])
        if count == 1:  # it raises alone: NULL (scatter_branches leaves rows no part covers NULL)
            continue
        row = getattr(error, "failing_row", None)
        if isinstance(row, int) and 0 <= row < count:
            pieces = (rows[:row], rows[row:row + 1], rows[row + 1:])
        else:
            pieces = (rows[:count // 2], rows[count // 2:])
        pending.extend((piece, None) for piece in pieces if piece.shape[0])
    return logical.scatter_branches(device, parts, operand.dtype, batch.num_rows)


@_evaluate.register
def _(expr: Function, batch: Batch) -> Column:
    cancel_point()
    if expr.name == "try":
        return _coerce(batch, _try(expr.args[0], batch), expr.dtype)
    return _coerce(batch, evaluate_function(expr, batch, _evaluate), expr.dtype)
