"""Type aggregate functions: their result types and their intermediate columns.

One table of rules, shared by the SQL translator (result types), the
PlanBuilder (schemas of partial/final steps) and the HashAggregation operator
(what it accumulates), so the three can never disagree. Types follow DuckDB,
the reference the tests compare against: integer and bool sums are HUGEINT,
which DuckDB hands to Arrow as decimal128(38, 0), decimal sums decimal(38, s).

A partial step's exact sum is a 128-bit value, so it travels as two columns:
``name`` (the sum's type) holds the low 64 bits and ``name$high`` (int64) the
high 64 bits. Why two int64 columns rather than one 128-bit column: every
operator between the steps (exchanges, partitioning, generated merge kernels)
then moves plain int64 words, and no partial total, however large, depends on
how splits reached drivers.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_engine.columnar.types import is_decimal, is_floating, is_integer, is_numeric, is_string, is_temporal, is_boolean

__all__ = ["result_type", "sum_type", "intermediate_fields", "intermediate_names", "final_step_aggregates",
           "aggregation_output_schema", "AVG_COUNT_SUFFIX", "SUM_HIGH_SUFFIX"]

AVG_COUNT_SUFFIX = "$count"
#: Suffix of the column holding the high 64 bits of a partial exact sum (see the module docstring).
SUM_HIGH_SUFFIX = "$high"


def sum_type(input_type: pa.DataType) -> pa.DataType:
    """Return the type ``sum`` accumulates and returns for an input type."""
    if is_decimal(input_type):
        return pa.decimal128(38, input_type.scale)
    if is_integer(input_type) or is_boolean(input_type):
        return pa.decimal128(38, 0)  # DuckDB's HUGEINT, as DuckDB gives it to Arrow
    if is_floating(input_type):
        return pa.float64()
    raise TypeError(f"sum is not defined for {input_type}")


def _exact_sum(function: str, input_type: pa.DataType | None) -> bool:
    """Return True when a partial step emits ``function``'s running sum as 128 bits (two columns)."""
    return function in ("sum", "avg") and input_type is not None and not is_floating(input_type)


def intermediate_names(function: str, input_type: pa.DataType | None, name: str) -> list[str]:
    """Return the names of the intermediate columns of one aggregate, from its raw or intermediate input type."""
    names = [name]
    if _exact_sum(function, input_type):
        names.append(name + SUM_HIGH_SUFFIX)
    if function == "avg":
        names.append(name + AVG_COUNT_SUFFIX)
    return names


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
    an exact (integer or decimal) sum adds ``name$high`` after ``name`` (see
    the module docstring); every other function emits one column ``name``.
    """
    if function in ("count_star", "count"):
        return [pa.field(name, pa.int64())]
    if function in ("sum", "avg"):
        fields = [pa.field(name, sum_type(input_type))]
        if _exact_sum(function, input_type):
            fields.append(pa.field(name + SUM_HIGH_SUFFIX, pa.int64()))
        if function == "avg":
            fields.append(pa.field(name + AVG_COUNT_SUFFIX, pa.int64()))
        return fields
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
    if _exact_sum(call.function, call.arg.dtype):
        fields.append(pa.field(name + SUM_HIGH_SUFFIX, pa.int64()))
    if call.function == "avg":
        fields.append(pa.field(name + AVG_COUNT_SUFFIX, pa.int64()))
    return fields
