"""Type the arguments of a Range node as DuckDB types ``range`` / ``generate_series``' (their table function forms).

DuckDB has two overloads: integers (any integer type, computed as BIGINT, BIGINT out) and timestamps with an
INTERVAL step (a DATE bound is a TIMESTAMP, TIMESTAMP out). A bare NULL takes the other arguments' type (the
result then has no rows). Anything else (a DECIMAL, DOUBLE or string bound, a numeric step for timestamps) has no
overload in DuckDB either, and is refused with the overloads named. Shared by
:meth:`~gpu_engine.plans.plan_builder.PlanBuilder.range` and the plan validation, so a JSON plan is typed as a
built one.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_engine.columnar.types import INTERVAL, is_integer, is_interval
from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import Cast, Expr, Literal

__all__ = ["typed_range_arguments", "typed_unnest_arguments", "RANGE_TIMESTAMP", "UNNEST_FUNCTIONS"]

#: The element type of a timestamp series (DuckDB's TIMESTAMP: microseconds, no time zone).
RANGE_TIMESTAMP = pa.timestamp("us")

_OVERLOADS = ("(BIGINT, BIGINT, BIGINT) or (TIMESTAMP, TIMESTAMP, INTERVAL); a DATE bound counts as a TIMESTAMP")


def _is_null(expr: Expr) -> bool:
    return isinstance(expr, Literal) and expr.value is None and pa.types.is_null(expr.dtype)


def _is_time(dtype: pa.DataType) -> bool:
    return pa.types.is_timestamp(dtype) and dtype.tz is None or pa.types.is_date32(dtype)


def _as(expr: Expr, dtype: pa.DataType) -> Expr:
    if _is_null(expr):
        return Literal(None, dtype)
    return expr if expr.dtype == dtype else Cast(expr, dtype)


def typed_range_arguments(start: Expr, stop: Expr, step: Expr, label: str,
                          function: str = "range") -> tuple[Expr, Expr, Expr, pa.DataType]:
    """Return ``(start, stop, step, element type)`` cast to the overload DuckDB picks; PlanError if none fits."""
    bounds = [e.dtype for e in (start, stop) if not _is_null(e)]
    steps = [] if _is_null(step) else [step.dtype]
    if all(is_integer(t) for t in bounds + steps):
        return _as(start, pa.int64()), _as(stop, pa.int64()), _as(step, pa.int64()), pa.int64()
    if bounds and all(_is_time(t) for t in bounds) and all(is_interval(t) for t in steps):
        return (_as(start, RANGE_TIMESTAMP), _as(stop, RANGE_TIMESTAMP), _as(step, INTERVAL), RANGE_TIMESTAMP)
    given = ", ".join("NULL" if _is_null(e) else str(e.dtype) for e in (start, stop, step))
    raise PlanError(f"{function}({given}) has no overload: {function} takes {_OVERLOADS}; CAST the arguments",
                    node=label, column=function)


#: The list functions an Unnest node expands (see :class:`~gpu_engine.plans.nodes.UnnestNode`).
UNNEST_FUNCTIONS = ("range", "generate_series", "string_split")


def typed_unnest_arguments(function: str, arguments: tuple[Expr, ...], label: str
                           ) -> tuple[tuple[Expr, ...], pa.DataType]:
    """Return an Unnest's arguments cast as its list function takes them, and the element type; PlanError else."""
    if function not in UNNEST_FUNCTIONS:
        raise PlanError(f"an Unnest expands {', '.join(UNNEST_FUNCTIONS)} lists, not {function!r}", node=label)
    if function == "string_split":
        if len(arguments) != 2:
            raise PlanError("string_split takes (text, separator)", node=label, column=function)
        for argument in arguments:
            if not (pa.types.is_string(argument.dtype) or _is_null(argument)):
                given = ", ".join("NULL" if _is_null(e) else str(e.dtype) for e in arguments)
                raise PlanError(f"string_split({given}) has no overload: it takes (VARCHAR, VARCHAR); CAST the "
                                "arguments", node=label, column=function)
        return tuple(_as(argument, pa.string()) for argument in arguments), pa.string()
    if len(arguments) != 3:
        raise PlanError(f"{function} takes (start, stop, step)", node=label, column=function)
    start, stop, step, dtype = typed_range_arguments(*arguments, label, function)
    if dtype != pa.int64():
        raise PlanError(f"{function}(...) over timestamps reading another FROM item's columns is not supported; "
                        "give it constant timestamp bounds (a series source joined on the columns), or make an "
                        "integer series and add it: start + INTERVAL (k) DAY", node=label, column=function)
    return (start, stop, step), dtype
