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

from gpu_engine.columnar.types import (
    is_boolean, is_decimal, is_floating, is_integer, is_interval, is_numeric, is_string, is_temporal,
)
from gpu_engine.plans.null_type import null_typed_field, plan_field
from gpu_engine.plans.type_coercion import is_hugeint

__all__ = ["result_type", "sum_type", "intermediate_fields", "intermediate_names", "final_step_aggregates",
           "aggregation_output_schema", "AVG_COUNT_SUFFIX", "SUM_HIGH_SUFFIX", "VARIANCE_FUNCTIONS",
           "COVARIANCE_FUNCTIONS", "TWO_ARGUMENT_FUNCTIONS", "HOLISTIC_FUNCTIONS", "MOMENT_SUFFIXES",
           "COMOMENT_SUFFIXES", "ARG_KEY_SUFFIX", "HOLISTIC_AGGREGATES", "VALUE_LIST_FUNCTIONS", "ORDER_KEY_SUFFIX",
           "QUANTILE_FUNCTIONS", "ORDERED_PICK_FUNCTIONS", "ROW_MARK_SUFFIX", "picks_a_row", "order_key_names",
           "then_by_types"]

AVG_COUNT_SUFFIX = "$count"
#: Suffix of the column holding the high 64 bits of a partial exact sum (see the module docstring).
SUM_HIGH_SUFFIX = "$high"

#: Functions over one variable that keep per-group moments (count, mean, sum of squared deviations).
VARIANCE_FUNCTIONS = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
#: Functions over two variables that keep co-moments (count, both means and squared deviations, co-deviation).
#: ``regr_*(y, x)`` take the dependent variable first, as SQL.
COVARIANCE_FUNCTIONS = ("covar_samp", "covar_pop", "corr", "regr_slope", "regr_avgx", "regr_avgy", "regr_sxx",
                        "regr_syy", "regr_sxy", "regr_intercept", "regr_r2", "regr_count")
#: Suffixes of the intermediate columns after ``name`` (the count) of a moments state, in order: each
#: variable's shift and mean relative to it, sums of squared deviations, and the co-deviations.
MOMENT_SUFFIXES = ("$shift_x", "$mean_x", "$m2_x")
COMOMENT_SUFFIXES = ("$shift_x", "$mean_x", "$m2_x", "$shift_y", "$mean_y", "$m2_y", "$c")
#: Suffix of arg_min/arg_max's intermediate key column (``name`` holds the value).
ARG_KEY_SUFFIX = "$key"
#: Functions that take two arguments.
TWO_ARGUMENT_FUNCTIONS = COVARIANCE_FUNCTIONS + ("arg_min", "arg_max")
#: Functions whose one intermediate column is their result type (folded like min/max, or multiplied).
_VALUE_FUNCTIONS = ("min", "max", "bool_and", "bool_or", "any_value", "bit_and", "bit_or", "bit_xor", "product")
#: Holistic aggregates the engine computes: they keep every value of a group (see
#: :mod:`gpu_engine.aggregation.holistic`); a partial step emits a group's values one per row.
HOLISTIC_AGGREGATES = ("median", "quantile_cont", "quantile_disc", "mode", "string_agg", "approx_quantile")
#: The quantiles among them (``median`` is ``quantile_cont(x, 0.5)``, discrete over types without an average).
QUANTILE_FUNCTIONS = ("median", "quantile_cont", "quantile_disc", "approx_quantile")
#: Functions whose intermediate is a list of values per group, one per row of a partial step: the holistic
#: ones and ``approx_count_distinct`` (its HyperLogLog registers, one word each).
VALUE_LIST_FUNCTIONS = HOLISTIC_AGGREGATES + ("approx_count_distinct",)
#: Suffix of the ORDER BY key column of ``string_agg(x, sep ORDER BY y)``'s intermediate (``name`` holds ``x``);
#: further keys (``ORDER BY y, z``) travel as ``name$order2``, ``name$order3``, ... (:func:`order_key_names`).
ORDER_KEY_SUFFIX = "$order"
#: ``first(x ORDER BY y)``/``last(x ORDER BY y)``: the ``x`` of a group's first/last row in ``y``'s order, a
#: NULL ``x`` too (see :mod:`gpu_engine.aggregation.ordered_pick`); a partial step emits each group's candidate
#: row as ``name`` (``x``), ``name$order`` (``y``) and ``name$row`` (true: a row, NULL: no row).
ORDERED_PICK_FUNCTIONS = ("first", "last")
ROW_MARK_SUFFIX = "$row"
#: Aggregates that return lists (or maps), refused by name.
HOLISTIC_FUNCTIONS = ("array_agg", "list", "histogram")


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
    return function in ("sum", "avg", "count_if") and input_type is not None and not is_floating(input_type)


def _state_suffixes(function: str) -> tuple[str, ...]:
    """Return the suffixes of the intermediate columns after ``name`` that do not depend on the input type."""
    if function in VARIANCE_FUNCTIONS:
        return MOMENT_SUFFIXES
    if function in COVARIANCE_FUNCTIONS:
        return COMOMENT_SUFFIXES
    return ()


def picks_a_row(function: str, second_type: pa.DataType | None) -> bool:
    """Return True when ``function`` keeps a candidate row per group (:data:`ORDERED_PICK_FUNCTIONS`): ``first``/
    ``last`` with ORDER BY, and ``arg_min``/``arg_max`` over keys no 64-bit word holds (strings, wide decimals)."""
    return function in ORDERED_PICK_FUNCTIONS or (function in ("arg_min", "arg_max") and second_type is not None
                                                  and not _is_orderable(second_type))


def order_key_names(name: str, keys: int) -> list[str]:
    """Return the intermediate columns of an aggregate's ``keys`` ORDER BY keys: ``name$order``, ``name$order2``, ..."""
    return [name + ORDER_KEY_SUFFIX + ("" if i == 0 else str(i + 1)) for i in range(keys)]


def _order_fields(name: str, second_type: pa.DataType, then_types: tuple[pa.DataType, ...]) -> list[pa.Field]:
    types = (second_type,) + tuple(then_types)
    return [pa.field(column, dtype) for column, dtype in zip(order_key_names(name, len(types)), types)]


def _extra_fields(function: str, name: str, second_type: pa.DataType | None,
                  then_types: tuple[pa.DataType, ...] = ()) -> list[pa.Field]:
    """Return the intermediate columns after ``name`` (and ``name$high``) of the functions beyond the five
    (``then_types``: the types of the ORDER BY keys after the first, :attr:`AggregateCall.then_by`)."""
    fields = [pa.field(name + suffix, pa.float64()) for suffix in _state_suffixes(function)]
    if function in ("arg_min", "arg_max") and not picks_a_row(function, second_type):
        fields.append(pa.field(name + ARG_KEY_SUFFIX, second_type))
    if function == "string_agg" and second_type is not None:
        fields += _order_fields(name, second_type, then_types)
    if picks_a_row(function, second_type):
        fields += _order_fields(name, second_type, then_types) + [pa.field(name + ROW_MARK_SUFFIX, pa.bool_())]
    return fields


def _holistic_result_type(function: str, input_type: pa.DataType) -> pa.DataType:
    """Return the result type of a holistic aggregate (or ``approx_count_distinct``), as DuckDB types it.

    ``median``/``quantile_cont`` interpolate: DOUBLE over integers, the
    input's type over floats and decimals, TIMESTAMP over dates and
    timestamps; ``median`` over strings and bools is discrete (their type).
    The discrete ones and ``mode`` keep the input's type; ``string_agg``
    is VARCHAR (its argument is cast), ``approx_count_distinct`` BIGINT.
    """
    if is_decimal(input_type) and input_type.precision > 18:
        raise TypeError(f"{function} over {input_type} (more than 18 digits) is not supported")
    if function == "approx_count_distinct":
        if _is_orderable(input_type) or is_string(input_type) or is_decimal(input_type):
            return pa.int64()
        raise TypeError(f"{function} is not defined for {input_type}")
    if function == "string_agg":
        if not is_string(input_type):
            raise TypeError(f"{function} is not defined for {input_type} (it takes a string)")
        return pa.string()
    fixed = _is_orderable(input_type)
    if function in ("median", "quantile_cont") and (fixed and not is_boolean(input_type)):
        if is_integer(input_type):
            return pa.float64()
        if pa.types.is_date32(input_type):
            return pa.timestamp("us")
        return input_type
    if function == "quantile_cont" or (function == "approx_quantile" and (is_string(input_type) or is_boolean(input_type))):
        raise TypeError(f"{function} is not defined for {input_type} (it takes a number, date or timestamp)")
    if fixed or is_string(input_type):
        return input_type
    raise TypeError(f"{function} is not defined for {input_type}")


def _is_orderable(dtype: pa.DataType) -> bool:
    """Return True for a fixed-width type an aggregate keeps in one 64-bit word (numbers, dates, bools)."""
    if is_decimal(dtype):
        return dtype.precision <= 18
    return is_integer(dtype) or is_floating(dtype) or is_boolean(dtype) or pa.types.is_date32(dtype) \
        or pa.types.is_timestamp(dtype) or pa.types.is_time64(dtype)


def intermediate_names(function: str, input_type: pa.DataType | None, name: str,
                       second_type: pa.DataType | None = None, then_types: tuple[pa.DataType, ...] = ()) -> list[str]:
    """Return the names of the intermediate columns of one aggregate, from its raw or intermediate input type."""
    names = [name]
    if _exact_sum(function, input_type):
        names.append(name + SUM_HIGH_SUFFIX)
    if function == "avg":
        names.append(name + AVG_COUNT_SUFFIX)
    names.extend(name + suffix for suffix in _state_suffixes(function))
    if picks_a_row(function, second_type):
        names += order_key_names(name, 1 + len(then_types)) + [name + ROW_MARK_SUFFIX]
    elif function in ("arg_min", "arg_max"):
        names.append(name + ARG_KEY_SUFFIX)
    return names


def result_type(function: str, input_type: pa.DataType | None, second_type: pa.DataType | None = None
                ) -> pa.DataType:
    """Return the final result type of ``function`` over ``input_type`` (and ``second_type``, its second argument).

    DuckDB's types: the moments (variance, stddev, covariance, corr, ``regr_*``)
    and ``product`` are DOUBLE over any number (``regr_count`` UINTEGER); ``count_if`` is HUGEINT, as ``sum`` of bools;
    ``bool_and``/``bool_or`` BOOLEAN; ``any_value``, ``bit_*`` and
    ``arg_min``/``arg_max`` (the type of the value, a string too; the key is a
    fixed-width type) keep the argument's type.

    Raises
    ------
    TypeError
        When the function is not defined for the input type.
    """
    if function in TWO_ARGUMENT_FUNCTIONS and second_type is None:
        raise TypeError(f"{function} takes two arguments")
    if function == "string_agg" and second_type is not None and not (_is_orderable(second_type) or is_string(
            second_type) or is_decimal(second_type)):
        raise TypeError(f"string_agg cannot order by {second_type}")
    if function in ORDERED_PICK_FUNCTIONS:
        if second_type is None:
            raise TypeError(f"{function} with ORDER BY takes its key")
        for role, dtype in (("values", input_type), ("keys", second_type)):
            if not (_is_orderable(dtype) or is_string(dtype) or is_decimal(dtype) or is_interval(dtype)):
                raise TypeError(f"{function} is not defined for {role} of {dtype} (numbers, decimals, dates, "
                                "timestamps, intervals, bools and strings are)")
        return input_type
    if function not in TWO_ARGUMENT_FUNCTIONS and second_type is not None and function != "string_agg":
        raise TypeError(f"{function} takes one argument")
    if function in VALUE_LIST_FUNCTIONS:
        return _holistic_result_type(function, input_type)
    if function in VARIANCE_FUNCTIONS or function in COVARIANCE_FUNCTIONS or function == "product":
        for dtype in (input_type, second_type):
            if dtype is not None and not is_numeric(dtype):
                raise TypeError(f"{function} is not defined for {dtype}")
        return pa.uint32() if function == "regr_count" else pa.float64()
    if function in ("bool_and", "bool_or", "count_if"):
        if not is_boolean(input_type):
            raise TypeError(f"{function} is not defined for {input_type} (it takes a boolean)")
        return pa.bool_() if function != "count_if" else pa.decimal128(38, 0)
    if function == "any_value":
        if _is_orderable(input_type) or is_decimal(input_type) or is_string(input_type):
            return input_type
        raise TypeError(f"{function} is not defined for {input_type}")
    if function in ("bit_and", "bit_or", "bit_xor"):
        if not is_integer(input_type):
            raise TypeError(f"{function} is not defined for {input_type} (it takes an integer)")
        return input_type
    if function in ("arg_min", "arg_max"):
        if not (_is_orderable(input_type) or is_string(input_type)):
            raise TypeError(f"{function} is not defined for values of {input_type} (numbers, dates, timestamps, "
                            "bools and strings are)")
        if not (_is_orderable(second_type) or is_string(second_type) or is_decimal(second_type)):
            raise TypeError(f"{function} is not defined for keys of {second_type} (numbers, decimals, dates, "
                            "timestamps, bools and strings are)")
        return input_type
    if function in ("count_star", "count"):
        return pa.int64()
    if function == "sum":
        return sum_type(input_type)
    if function == "avg":
        if not is_numeric(input_type):
            raise TypeError(f"avg is not defined for {input_type}")
        return pa.float64()
    if function in ("min", "max"):
        if (is_numeric(input_type) or is_string(input_type) or is_temporal(input_type) or is_boolean(input_type)
                or pa.types.is_time64(input_type)):
            return input_type
        raise TypeError(f"{function} is not defined for {input_type}")
    raise TypeError(f"unknown aggregate function {function!r}")


def intermediate_fields(function: str, input_type: pa.DataType | None, name: str,
                        second_type: pa.DataType | None = None, then_types: tuple[pa.DataType, ...] = ()
                        ) -> list[pa.Field]:
    """Return the columns a partial step emits for one aggregate named ``name``.

    ``avg`` emits its running sum as ``name`` and its count as ``name$count``;
    an exact (integer or decimal) sum adds ``name$high`` after ``name`` (see
    the module docstring), as ``count_if`` (a sum of bools); the moments emit
    their count as ``name`` and float64 means and sums of squared deviations
    (:data:`MOMENT_SUFFIXES`, :data:`COMOMENT_SUFFIXES`); ``arg_min``/``arg_max``
    their value as ``name`` and its key as ``name$key``; the holistic ones a
    group's values as ``name``, one per row (``string_agg`` with ORDER BY: their
    keys as ``name$order``), ``approx_count_distinct`` its HyperLogLog register
    words (int64; see :mod:`gpu_engine.aggregation.holistic`); every other
    function emits one column ``name``.
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
    if function in _VALUE_FUNCTIONS:
        return [pa.field(name, result_type(function, input_type))]
    if function == "count_if":
        return [pa.field(name, pa.decimal128(38, 0)), pa.field(name + SUM_HIGH_SUFFIX, pa.int64())]
    if function in VARIANCE_FUNCTIONS or function in COVARIANCE_FUNCTIONS:
        return [pa.field(name, pa.int64())] + _extra_fields(function, name, None)
    if function in ("arg_min", "arg_max"):
        return [pa.field(name, input_type)] + _extra_fields(function, name, second_type)
    if function == "approx_count_distinct":  # HyperLogLog registers, one int64 word each
        return [pa.field(name, pa.int64())]
    if function in ORDERED_PICK_FUNCTIONS:  # a group's candidate row: value, keys, and a mark that it is a row
        return [pa.field(name, input_type)] + _extra_fields(function, name, second_type, then_types)
    if function in HOLISTIC_AGGREGATES:  # the group's values (string_agg: and their ORDER BY keys)
        value_type = pa.string() if function == "string_agg" else input_type
        return [pa.field(name, value_type)] + _extra_fields(function, name, second_type, then_types)
    raise TypeError(f"unknown aggregate function {function!r}")



def final_step_aggregates(partial_aggregates, aggregate_names):
    """Return the aggregate calls of the FINAL (or INTERMEDIATE) step matching a PARTIAL step.

    Each call keeps its function (``count_star`` included: the final step sums
    counts) and its final ``dtype``; its ``arg`` becomes a ``ColumnRef`` to the
    intermediate column of the same name, typed as the partial step emits it
    (``arg_min``/``arg_max``: its ``second`` the key column ``name$key``).
    Shared by ``PlanBuilder.final_aggregation`` and the pass that splits single
    aggregations across drivers, so both agree.
    """
    import dataclasses

    from gpu_engine.plans.expressions import ColumnRef

    calls = []
    for name, call in zip(aggregate_names, partial_aggregates):
        input_type = call.arg.dtype if call.arg is not None else None
        second_type = None if call.second is None else call.second.dtype
        fields = intermediate_fields(call.function, input_type, name, second_type, then_by_types(call))
        by_name = {f.name: f for f in fields}
        first = fields[0]
        key, then_by = None, ()
        if picks_a_row(call.function, None if call.second is None else call.second.dtype) or (
                call.function == "string_agg" and call.second is not None):
            keys = [ColumnRef(n, by_name[n].type) for n in order_key_names(name, 1 + len(call.then_by))]
            key = keys[0]
            then_by = tuple((column, descending, nulls_first)
                            for column, (_, descending, nulls_first) in zip(keys[1:], call.then_by))
        elif call.function in ("arg_min", "arg_max"):
            key = ColumnRef(fields[-1].name, fields[-1].type)
        calls.append(dataclasses.replace(call, arg=ColumnRef(first.name, first.type), second=key, then_by=then_by))
    return tuple(calls)


def then_by_types(call) -> tuple[pa.DataType, ...]:
    """Return the types of an aggregate call's ORDER BY keys after the first (:attr:`AggregateCall.then_by`)."""
    return tuple(key.dtype for key, _, _ in call.then_by)


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
            out.append(null_typed_field(name) if call.null_typed
                       else plan_field(name, call.dtype, hugeint=is_hugeint(call)))
        elif step.input_is_raw:
            out.extend(intermediate_fields(call.function, call.arg.dtype if call.arg is not None else None, name,
                                           call.second.dtype if call.second is not None else None, then_by_types(call)))
        else:  # intermediate -> intermediate: same columns as the input's intermediates
            out.extend(_intermediate_from_final_arg(call, name))
    return pa.schema(out)


def _intermediate_from_final_arg(call, name: str) -> list[pa.Field]:
    fields = [pa.field(name, call.arg.dtype)]
    if _exact_sum(call.function, call.arg.dtype):
        fields.append(pa.field(name + SUM_HIGH_SUFFIX, pa.int64()))
    if call.function == "avg":
        fields.append(pa.field(name + AVG_COUNT_SUFFIX, pa.int64()))
    return fields + _extra_fields(call.function, name, None if call.second is None else call.second.dtype,
                                  then_by_types(call))
