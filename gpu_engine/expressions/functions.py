"""Evaluate :class:`~gpu_engine.plans.expressions.Function` calls, handing each to its family's module.

The families: :mod:`~gpu_engine.expressions.string_functions`,
:mod:`~gpu_engine.expressions.math_functions`,
:mod:`~gpu_engine.expressions.date_functions` and
:mod:`~gpu_engine.expressions.intervals`. Arguments a function reads as
constants (a date part's name, ``round``'s digits, a string function's
search string or width) are not evaluated into columns: the function reads
them from the call, so a constant never costs a column of its value per row.
"""

from __future__ import annotations

import datetime
import threading
import weakref
from typing import Callable

import pyarrow as pa

from gpu_engine.columnar import Batch, Column
from gpu_engine.errors import PlanError
from gpu_engine.expressions.date_functions import DATE_FUNCTIONS, evaluate_date_function
from gpu_engine.expressions.intervals import INTERVAL_FUNCTIONS, evaluate_interval_function
from gpu_engine.expressions.bitwise import BITWISE_FUNCTIONS, evaluate_bitwise_function
from gpu_engine.expressions.math_functions import MATH_FUNCTIONS, evaluate_math_function
from gpu_engine.expressions.numeric import raise_at_first
from gpu_engine.expressions.string_functions import STRING_FUNCTIONS, evaluate_string_function
from gpu_engine.expressions.strings import substring_rows
from gpu_engine.expressions.text_formatting import format_rows
from gpu_engine.expressions.try_cast import try_cast
from gpu_engine.plans.expressions import Expr, Function, Literal
from gpu_engine.plans.functions import SCALAR_SUBQUERY_VALUE

__all__ = ["evaluate_function"]

#: Per function, the argument positions read as constants (never evaluated into columns).
_CONSTANT_POSITIONS = {
    "round": (1,), "round_even": (1,), "date_part": (0,), "date_trunc": (0,), "date_diff": (0,),
    "add_interval": (1, 2, 3),
    "strftime": (1,), "try_cast": (1,), "strptime": (1,), "try_strptime": (1,), "interval_part": (0,),
}


_QUERY_INSTANTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # Task -> its now(), microseconds
_INSTANTS_LOCK = threading.Lock()


def query_instant() -> int:
    """Return ``now()`` in microseconds since 1970 (UTC): one instant per Task, the first its drivers read, so
    every batch of a query sees the same value (DuckDB's: the transaction's start); a call outside a Task
    reads the clock."""
    from gpu_engine.exec.cancel_points import current_task

    task = current_task()
    now = datetime.datetime.now(datetime.timezone.utc)
    micros = (now - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(microseconds=1)
    if task is None:
        return micros
    with _INSTANTS_LOCK:
        return _QUERY_INSTANTS.setdefault(task, micros)


def local_today() -> datetime.date:
    """Return today's local date (``current_date``), read each time a batch evaluates it."""
    return datetime.date.today()


#: Where the 32 hex digits of a UUID go among its 36 characters (the dashes at 8, 13, 18 and 23).
_UUID_DIGIT_PLACES = [i for i in range(36) if i not in (8, 13, 18, 23)]


def _random_uuids(device, rows: int) -> Column:
    """Return ``rows`` random version-4 UUIDs as text (RFC 4122's form, lower-case hex), drawn on the device.

    Sixteen random bytes a row, the version nibble set to 4 and the variant bits to 10, each nibble looked up
    in the hex digits, the dashes in place: array code, one string column of 36-byte rows.
    """
    xp = device.xp
    octets = xp.random.randint(0, 256, size=(rows, 16)).astype(xp.uint8)
    octets[:, 6] = (octets[:, 6] & 0x0F) | 0x40
    octets[:, 8] = (octets[:, 8] & 0x3F) | 0x80
    nibbles = xp.stack([octets >> 4, octets & 0x0F], axis=2).reshape(rows, 32)
    digits = xp.asarray(list(b"0123456789abcdef"), dtype=xp.uint8)
    text = xp.full((rows, 36), ord("-"), dtype=xp.uint8)
    text[:, xp.asarray(_UUID_DIGIT_PLACES)] = xp.take(digits, nibbles.astype(xp.int64))
    offsets = (xp.arange(rows + 1, dtype=xp.int64) * 36).astype(xp.int32)
    return Column(pa.string(), text.reshape(-1), None, offsets)


def evaluate_function(expr: Function, batch: Batch, evaluate: Callable[[Expr, Batch], Column]) -> Column:
    """Return the column of ``expr`` over ``batch``, its arguments evaluated with ``evaluate``."""
    device = batch.device
    if expr.name in ("printf", "format"):
        columns = [evaluate(arg, batch) for arg in expr.args[1:]]
        if expr.args[0].value is None:
            return Column.from_arrow(pa.nulls(batch.num_rows, pa.string()), device)
        return format_rows(device, expr.name, expr.args[0].value, columns, batch.num_rows)
    if expr.name in STRING_FUNCTIONS:
        columns = [None if isinstance(arg, Literal) else evaluate(arg, batch) for arg in expr.args]
        return evaluate_string_function(device, expr.name, expr.args, columns, batch.num_rows)
    if expr.name == "random":  # per row from [0, 1), drawn on the device (its argument only tells calls apart)
        return Column(pa.float64(), device.xp.random.random(batch.num_rows), None)
    if expr.name == "uuid":
        return _random_uuids(device, batch.num_rows)
    if expr.name == "current_timestamp":
        return Column(expr.dtype, device.xp.full(batch.num_rows, query_instant(), dtype=device.xp.int64), None)
    if expr.name == "current_date":  # the local date as the batch runs (DuckDB: the transaction's start)
        today = (local_today() - datetime.date(1970, 1, 1)).days
        return Column(pa.date32(), device.xp.full(batch.num_rows, today, dtype=device.xp.int32), None)
    constant = (0,) if expr.name == "date_sub" and len(expr.args) == 3 else _CONSTANT_POSITIONS.get(expr.name, ())
    columns = [None if k in constant else evaluate(arg, batch) for k, arg in enumerate(expr.args)]
    if expr.name in MATH_FUNCTIONS:
        return evaluate_math_function(device, expr.name, expr.args, columns, expr.dtype)
    if expr.name in BITWISE_FUNCTIONS:
        return evaluate_bitwise_function(device, expr.name, columns, expr.dtype)
    if expr.name in DATE_FUNCTIONS:
        return evaluate_date_function(device, expr.name, expr.args, columns, expr.dtype)
    if expr.name in INTERVAL_FUNCTIONS:
        return evaluate_interval_function(device, expr.name, expr.args, columns, expr.dtype)
    if expr.name == "try_cast":
        return try_cast(device, columns[0], expr.dtype)
    if expr.name == "substring":  # a start or length read per row (constant ones are the Substring node)
        return substring_rows(device, columns[0], columns[1], columns[2] if len(columns) > 2 else None)
    if expr.name == SCALAR_SUBQUERY_VALUE:  # DuckDB's error, where an outer row met several subquery rows
        raise_at_first(device, columns[1].data > 1, columns[1].validity, "More than one row returned by a "
                       "subquery used as an expression - scalar subqueries can only return a single row")
        return columns[0]
    raise PlanError(f"cannot evaluate function {expr.name!r}", column=expr.sql())
