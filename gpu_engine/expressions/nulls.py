"""Combine per-row validity arrays, where ``None`` means "no nulls" and costs nothing."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gpu_engine.columnar import Column

__all__ = ["and_validity", "all_null_bools"]


def and_validity(*validities: Any) -> Any:
    """Return the rows valid in every input (SQL null propagation), or None when none has nulls."""
    result = None
    for validity in validities:
        if validity is None:
            continue
        result = validity if result is None else result & validity
    return result


def all_null_bools(xp: Any, rows: int) -> Column:
    """Return a bool column that is NULL in every row (a comparison with NULL, ``x IN (NULL)``)."""
    return Column(pa.bool_(), xp.zeros(rows, dtype=xp.bool_), xp.zeros(rows, dtype=xp.bool_))
