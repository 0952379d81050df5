"""Type aggregate functions: their result types and their intermediate columns.

One table of rules, shared by the SQL translator (result types), the
PlanBuilder (schemas of partial/final steps) and the HashAggregation operator
(what it accumulates), so the three can never disagree. Types follow DuckDB,
the reference the tests compare against, except that integer sums are int64
(DuckDB: HUGEINT) and checked for overflow rather than widened.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_engine.columnar.types import is_decimal, is_floating, is_integer, is_numeric, is_string, is_temporal, is_boolean

__all__ = ["result_type", "sum_type", "intermediate_fields", "final_step_aggregates", "aggregation_output_schema", "AVG_COUNT_SUFFIX"]

AVG_COUNT_SUFFIX = "$count"


def sum_type(input_type: pa.DataType) -> pa.DataType:
    """Return the type ``sum`` accumulates and returns for an input type."""
    if is_decimal(input_type):
        return pa.decimal128(38, input_type.scale)
    if is_integer(input_type) or is_boolean(input_type):
        return pa.int64()
    if is_floating(input_type):
        return pa.float64()
    raise TypeError(f"sum is not defined for {input_type}")


def result_type(function: str, input_type: pa.DataType | None) -> pa.DataType:
    """Return the final result type of ``function`` over ``input_type``.

    Raises
    ------
    TypeError
        When the function is not defined for the input type.
    """
    if function in ("count_star", "count"):
        return pa.int64()
    if function == "sum":
        return sum_type(input_type)
    if function == "avg":
        if not is_numeric(input_type):
            raise TypeError(f"avg is not defined for {input_type}")
        return pa.float64()
    if function in ("min", "max"):
        if is_numeric(input_type) or is_string(input_type) or is_temporal(input_type) or is_boolean(input_type):
            return input_type
        raise TypeError(f"{function} is not defined for {input_type}")
    raise TypeError(f"unknown aggregate function {function!r}")


def intermediate_fields(function: str, input_type: pa.DataType | None, name: str) -> list[pa.Field]:
    """Return the columns a partial step emits for one aggregate named ``name``.

    ``avg`` emits its running sum as ``name`` and its count as ``name$count``;
    every other function emits one column ``name``.
    """
    if function in ("count_star", "count"):
        return [pa.field(name, pa.int64())]
    if function == "sum":
        return [pa.field(name, sum_type(input_type))]
    if function == "avg":
        total = sum_type(input_type) if not is_floating(input_type) else pa.float64()
        return [pa.field(name, total), pa.field(name + AVG_COUNT_SUFFIX, pa.int64())]
    if function in ("min", "max"):
        return [pa.field(name, result_type(function, input_type))]
    raise TypeError(f"unknown aggregate function {function!r}")



def final_step_aggregates(partial_aggregates, aggregate_names):
    """Return the aggregate calls of the FINAL (or INTERMEDIATE) step matching a PARTIAL step.

    Each call keeps its function (``count_star`` included: the final step sums
    counts) and its final ``dtype``; its ``arg`` becomes a ``ColumnRef`` to the
    intermediate column of the same name, typed as the partial step emits it.
    Shared by ``PlanBuilder.final_aggregation`` and the pass that splits single
    aggregations across drivers, so both agree.
    """
    from gpu_engine.plans.expressions import AggregateCall, ColumnRef

    calls = []
    for name, call in zip(aggregate_names, partial_aggregates):
        input_type = call.arg.dtype if call.arg is not None else None
        first = intermediate_fields(call.function, input_type, name)[0]
        calls.append(AggregateCall(call.function, ColumnRef(first.name, first.type), call.dtype, call.distinct))
    return tuple(calls)


def aggregation_output_schema(step, key_fields, aggregate_names, aggregates) -> pa.Schema:
    """Return an aggregation's output schema: the keys, then each aggregate's columns.

    Parameters
    ----------
    step
        An :class:`~gpu_engine.plans.nodes.AggregationStep`; partial and
        intermediate steps emit intermediate columns, final and single steps
        the result types.
    key_fields
        The grouping keys' fields, in order.
    """
    out = list(key_fields)
    for name, call in zip(aggregate_names, aggregates):
        if step.output_is_final:
            out.append(pa.field(name, call.dtype))
        elif step.input_is_raw:
            out.extend(intermediate_fields(call.function, call.arg.dtype if call.arg is not None else None, name))
        else:  # intermediate -> intermediate: same columns as the input's intermediates
            out.extend(_intermediate_from_final_arg(call, name))
    return pa.schema(out)


def _intermediate_from_final_arg(call, name: str) -> list[pa.Field]:
    fields = [pa.field(name, call.arg.dtype)]
    if call.function == "avg":
        fields.append(pa.field(name + AVG_COUNT_SUFFIX, pa.int64()))
    return fields
