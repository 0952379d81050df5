"""Evaluate AND, OR, NOT, IS [NOT] NULL and CASE with SQL's three-valued logic.

Bool columns keep values and validity apart; a NULL row's value is meaningless,
so every rule below decides validity from the *valid* operands only: ``FALSE AND
NULL`` is FALSE and ``TRUE OR NULL`` is TRUE (Kleene logic), anything else with a
NULL is NULL.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import is_string, physical_dtype
from gpu_engine.device import Device
from gpu_engine.expressions import strings
from gpu_engine.expressions.nulls import and_validity

__all__ = ["kleene_and", "kleene_or", "kleene_not", "null_test", "case", "scatter_branches", "true_rows"]


def true_rows(column: Column) -> Any:
    """Return the rows where a bool column is TRUE (NULL and FALSE give False)."""
    if column.validity is None:
        return column.data
    return column.data & column.validity


def kleene_and(xp: Any, left: Column, right: Column) -> Column:
    """Return ``left AND right``: FALSE if either side is FALSE, NULL if unknown, else TRUE."""
    data = left.data & right.data
    if left.validity is None and right.validity is None:
        return Column(pa.bool_(), data)
    left_false = ~left.data if left.validity is None else left.validity & ~left.data
    right_false = ~right.data if right.validity is None else right.validity & ~right.data
    validity = and_validity(left.validity, right.validity)
    validity = left_false | right_false if validity is None else validity | left_false | right_false
    return Column(pa.bool_(), data, validity)


def kleene_or(xp: Any, left: Column, right: Column) -> Column:
    """Return ``left OR right``: TRUE if either side is TRUE, NULL if unknown, else FALSE."""
    data = left.data | right.data
    if left.validity is None and right.validity is None:
        return Column(pa.bool_(), data)
    validity = and_validity(left.validity, right.validity)
    validity = true_rows(left) | true_rows(right) if validity is None else validity | true_rows(left) | true_rows(right)
    return Column(pa.bool_(), data, validity)


def kleene_not(xp: Any, operand: Column) -> Column:
    """Return ``NOT operand`` (NULL stays NULL)."""
    return Column(pa.bool_(), ~operand.data, operand.validity)


def null_test(xp: Any, validity: Any, rows: int, want_null: bool) -> Column:
    """Return ``IS NULL`` (``want_null``) or ``IS NOT NULL`` for rows with ``validity``; never NULL itself."""
    if validity is None:
        data = xp.full(rows, not want_null, dtype=xp.bool_)
    else:
        data = ~validity if want_null else validity.copy()
    return Column(pa.bool_(), data)


def case(device: Device, conditions: Sequence[Column], values: Sequence[Column], default: Column | None,
         dtype: pa.DataType, rows: int) -> Column:
    """Return ``CASE WHEN c1 THEN v1 … ELSE default END`` over evaluated branches.

    Each row takes the first branch whose condition is TRUE (NULL counts as not
    true); rows matching none take ``default``, or NULL without one. ``values``
    and ``default`` must already be of ``dtype``.
    """
    if not is_string(dtype):
        return _case_fixed_width(device, conditions, values, default, dtype, rows)
    xp = device.xp
    branches = list(values) + ([default] if default is not None else [])
    choice = xp.full(rows, len(values) if default is not None else -1, dtype=xp.int32)
    undecided = xp.ones(rows, dtype=xp.bool_)
    for k, condition in enumerate(conditions):
        hit = undecided & true_rows(condition)
        choice = xp.where(hit, k, choice)
        undecided &= ~hit
    validity = xp.zeros(rows, dtype=xp.bool_)
    for k, branch in enumerate(branches):
        branch_valid = strings.string_validity(device, branch)
        validity = xp.where(choice == k, True if branch_valid is None else branch_valid, validity)
    return strings.choose_strings(device, choice, branches, validity)


def _case_fixed_width(device: Device, conditions: Sequence[Column], values: Sequence[Column],
                      default: Column | None, dtype: pa.DataType, rows: int) -> Column:
    """Return a fixed-width CASE from the rows each branch takes (its condition TRUE, no earlier one TRUE).

    The branches' row sets are disjoint, so validity is their OR and integer values are the sum of each
    branch's values times its rows (bool masks: SIMD passes); floats, wide decimals and intervals are
    placed by ``where`` (a NaN or an infinity times 0 is not 0).
    Why: picking through a per-row branch number cost seven passes over the rows per branch; TPC-DS's
    conditional aggregates (q9, q28, q59: ``sum(CASE WHEN d_day_name = 'Sunday' THEN ss_sales_price END)``
    seven to fifteen times over a fact table) spent most of their lowest tier's time there.
    """
    xp = device.xp
    branches = list(values) + ([default] if default is not None else [])
    taken, undecided = [], None  # undecided: the rows no condition so far took (None: every row)
    for condition in conditions:
        hit = true_rows(condition)
        taken.append(hit if undecided is None else hit & undecided)
        undecided = ~hit if undecided is None else undecided & ~hit
    if default is not None:
        taken.append(xp.ones(rows, dtype=xp.bool_) if undecided is None else undecided)
    if (one := _one_branch(taken, branches, dtype)) is not None:
        return one
    validity = xp.zeros(rows, dtype=xp.bool_)
    for mask, branch in zip(taken, branches):
        validity |= mask if branch.validity is None else mask & branch.validity
    if any(branch.data.ndim == 2 for branch in branches):  # a wide decimal or an INTERVAL: place the words
        from gpu_engine.expressions.numeric import as_words

        data = xp.zeros((rows, _words(branches)), dtype=xp.int64)
        for mask, branch in zip(taken, branches):
            data = xp.where(mask[:, None], as_words(device, branch), data)
        return Column(dtype, data, validity)
    physical = np.dtype(physical_dtype(dtype))
    data = xp.zeros(rows, dtype=physical)
    for mask, branch in zip(taken, branches):
        if physical.kind == "b":
            data |= branch.data & mask
        elif physical.kind in "iu" and branch.data.dtype == physical:
            data += branch.data * mask
        else:
            data = xp.where(mask, branch.data, data).astype(physical, copy=False)
    return Column(dtype, data, validity)


def _one_branch(taken: Sequence[Any], branches: Sequence[Column], dtype: pa.DataType) -> Column | None:
    """Return a CASE of one fixed-width branch and no ELSE: the branch's values as they are, NULL where it is
    not taken (None: another shape).

    Why: a NULL row's value is meaningless, so nothing need be placed; conditional aggregates
    (``sum(CASE WHEN d_day_name = 'Sunday' THEN sales_price END)``, TPC-DS q2, q9, q28, q59) paid a zeroed
    array, a product and a sum over every row per argument in the lowest tier.
    """
    if len(branches) != 1 or branches[0].data.ndim != 1 or branches[0].data.dtype != physical_dtype(dtype):
        return None
    (mask,), (branch,) = taken, branches
    return Column(dtype, branch.data, mask if branch.validity is None else mask & branch.validity)


def scatter_branches(device: Device, parts: Sequence[tuple[Any, Column]], dtype: pa.DataType, rows: int) -> Column:
    """Return ``rows`` values of ``dtype`` placed by ``parts`` = ``[(target_rows, column)]``; other rows are NULL.

    This assembles a CASE whose branches were evaluated each on its own rows.
    """
    xp = device.xp
    if is_string(dtype):
        return strings.scatter_strings(device, rows, parts)
    wide = any(column.data.ndim == 2 for _, column in parts)  # wide decimals: place (low, high) words
    data = xp.zeros((rows, _words([c for _, c in parts])) if wide else rows,
                    dtype=xp.int64 if wide else physical_dtype(dtype))
    validity = xp.zeros(rows, dtype=xp.bool_)
    for target, column in parts:
        if wide:
            from gpu_engine.expressions.numeric import as_words

            data[target] = as_words(device, column)
            validity[target] = True if column.validity is None else column.validity
            continue
        data[target] = column.data
        validity[target] = True if column.validity is None else column.validity
    return Column(dtype, data, validity)


def _words(branches: Sequence[Column]) -> int:
    """Return the words a row of these two-dimensional branches holds: 3 for an INTERVAL, 2 for a wide decimal."""
    return max(branch.data.shape[1] if branch.data.ndim == 2 else 2 for branch in branches)
