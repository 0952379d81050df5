"""Check a plan made outside PlanBuilder (read from JSON) against the rules PlanBuilder enforces.

Why: PlanBuilder refuses a bad plan while building it, naming the node and
the column; a plan read from a document skipped all of that, so a tampered or
hand-written plan (``LIMIT -5``, a ``join_type`` of ``"evil"`` that ran as an
inner join, a literal ``10**30`` typed int32, an aggregate named ``"median"``,
an output schema that contradicts the input) used to be accepted and then
failed half-way through execution, or silently ran as something else.
:func:`validate_plan` re-derives what PlanBuilder would have derived (each
node's output schema from its inputs, each expression's type from its
operands) and raises a :class:`~gpu_engine.errors.PlanError` naming the node
at the first disagreement.

The checks are free functions dispatched on node and expression type, as the
other passes over plans are. They use the rule tables PlanBuilder and the
SQL translator use (:data:`JOIN_TYPES`, :func:`aggregation_output_schema`,
:func:`result_type`, :mod:`gpu_engine.plans.type_coercion`), so the two can
only disagree where a rule is written in one place and not the other.
"""

from __future__ import annotations

import contextvars
import datetime
import decimal
import functools
from typing import Callable

import pyarrow as pa

from gpu_engine.columnar.arrow_numpy import arrow_from_pylist
from gpu_engine.columnar.types import (
    is_boolean,
    is_decimal,
    is_floating,
    is_integer,
    is_interval,
    is_numeric,
    is_string,
    is_temporal,
    normalize_type,
)
from gpu_engine.errors import PlanError
from gpu_engine.plans.aggregates import aggregation_output_schema, result_type
from gpu_engine.plans.expressions import (
    AGGREGATE_FUNCTIONS,
    ARITHMETIC_OPS,
    BOOLEAN_OPS,
    COMPARISON_OPS,
    MAX_EXPRESSION_DEPTH,
    AggregateCall,
    BinaryOp,
    Case,
    Cast,
    ColumnRef,
    Expr,
    Extract,
    Function,
    InList,
    Like,
    Literal,
    Substring,
    UnaryOp,
    allow_recursion_depth,
    expression_depth,
)
from gpu_engine.plans.nodes import (
    JOIN_TYPES,
    NESTED_LOOP_JOIN_TYPES,
    AggregationNode,
    AggregationStep,
    EnforceSingleRowNode,
    ExchangeNode,
    FilterNode,
    FusedAggregationNode,
    GroupIdNode,
    HashJoinNode,
    LimitNode,
    LocalPartitionNode,
    NestedLoopJoinNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanNode,
    ProjectNode,
    SortKey,
    TableScanNode,
    RANK_FUNCTIONS,
    TopNNode,
    TopNRowNumberNode,
    WindowFunctionCall,
    WindowNode,
    ValuesNode,
    RangeNode,
    UnnestNode,
)
from gpu_engine.plans.functions import function_type
from gpu_engine.plans.intervals import IntervalValue
from gpu_engine.plans.range_arguments import typed_range_arguments, typed_unnest_arguments
from gpu_engine.plans.subqueries import (
    QUANTIFIED_OPS, Exists, InSubquery, OuterColumn, QuantifiedComparison, ScalarSubquery,
)
from gpu_engine.plans.type_coercion import arithmetic_type, is_castable, is_comparable, unimplemented_cast

__all__ = ["validate_plan", "validate_expression", "UNARY_OPS", "EXTRACT_FIELDS",
           "LOCAL_PARTITION_KINDS", "PARTITIONED_OUTPUT_KINDS"]

UNARY_OPS = ("not", "negate", "is_null", "is_not_null")
EXTRACT_FIELDS = ("year", "month", "day")
LOCAL_PARTITION_KINDS = ("repartition", "gather", "arbitrary")
PARTITIONED_OUTPUT_KINDS = ("partitioned", "broadcast", "arbitrary")


def validate_plan(root: PlanNode) -> None:
    """Raise PlanError, naming the node, when ``root``'s tree breaks a rule PlanBuilder enforces.

    Checked: node ids are unique non-empty strings; each node has as many
    inputs as its kind takes; output schemas have unique names and supported
    types, and equal what the node computes from its inputs; counts, offsets,
    join types, partition kinds and aggregation steps are in range; every
    expression reads existing columns with their types, uses known operators
    and functions, has the type its operands give it, holds literals that fit
    their types and nests at most :data:`MAX_EXPRESSION_DEPTH` levels.
    """
    seen: dict[str, PlanNode] = {}
    stack = [root]
    order: list[PlanNode] = []
    while stack:  # iterative: a plan read from JSON may be deep
        node = stack.pop()
        if not isinstance(node, PlanNode):
            raise PlanError(f"expected a plan node, got {type(node).__name__}")
        if not isinstance(node.id, str) or not node.id:
            raise PlanError(f"a plan node id must be a non-empty string, got {node.id!r}", node=node.kind)
        if node.id in seen:
            raise PlanError(f"duplicate plan node id {node.id!r} (also {seen[node.id].label}); ids must be unique "
                            "in a plan", node=node.label)
        seen[node.id] = node
        order.append(node)
        stack.extend(node.sources)
    for node in reversed(order):  # inputs before the nodes reading them
        _check_schema(node.output_schema, node.label)
        inputs = _INPUTS.get(type(node))
        if inputs is not None and len(node.sources) != inputs:
            raise PlanError(f"a {node.kind} node takes {inputs} input(s), got {len(node.sources)}", node=node.label)
        _validate_node(node)


def validate_expression(expr: Expr, schema: pa.Schema, label: str) -> None:
    """Raise PlanError when ``expr`` over ``schema`` is not what the SQL translator would have built."""
    depth = expression_depth(expr)
    if depth > MAX_EXPRESSION_DEPTH:
        raise PlanError(f"the expression nests too deeply: {depth} levels, at most {MAX_EXPRESSION_DEPTH} are "
                        "supported", node=label)
    allow_recursion_depth(depth)
    _validate_expr(expr, schema, label)


# -- nodes ---------------------------------------------------------------------------------

_INPUTS = {
    ValuesNode: 0, RangeNode: 0, TableScanNode: 0, ExchangeNode: 0, FilterNode: 1, ProjectNode: 1, GroupIdNode: 1,
    AggregationNode: 1, UnnestNode: 1,
    FusedAggregationNode: 1, HashJoinNode: 2, NestedLoopJoinNode: 2, EnforceSingleRowNode: 1,
    OrderByNode: 1, TopNNode: 1, WindowNode: 1, TopNRowNumberNode: 1, LimitNode: 1, PartitionedOutputNode: 1,
}


def _check_schema(schema: pa.Schema, label: str) -> None:
    names: set[str] = set()
    for f in schema:
        if f.name in names:
            raise PlanError(f"duplicate column name {f.name!r} in the output schema", node=label, column=f.name)
        names.add(f.name)
        try:
            supported = normalize_type(f.type) == f.type
        except TypeError:
            supported = False
        if not supported:
            raise PlanError(f"unsupported column type {f.type} in the output schema", node=label, column=f.name)


def _same_schema(node: PlanNode, expected: pa.Schema, what: str) -> None:
    """Refuse an output schema other than the one the node computes (names and types, in order)."""
    actual = node.output_schema
    if actual.names != expected.names:
        raise PlanError(f"the output schema names {', '.join(actual.names) or '(none)'}, but {what} gives "
                        f"{', '.join(expected.names) or '(none)'}", node=node.label)
    for got, want in zip(actual, expected):
        if got.type != want.type:
            raise PlanError(f"the output schema types {got.name} as {got.type}, but {what} gives {want.type}",
                            node=node.label, column=got.name)


def _columns(names, schema: pa.Schema, label: str, role: str) -> None:
    if not isinstance(names, tuple):
        raise PlanError(f"{role}s must be a list of column names", node=label)
    seen = set()
    for name in names:
        if not isinstance(name, str) or name not in schema.names:
            raise PlanError(f"unknown {role} {name!r}; input columns: {', '.join(schema.names) or '(none)'}",
                            node=label, column=str(name))
        if name in seen:
            raise PlanError(f"duplicate {role} {name!r}", node=label, column=name)
        seen.add(name)


def _count(value, what: str, label: str, low: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        bound = "a non-negative" if low == 0 else "a positive"
        raise PlanError(f"{what} must be {bound} integer, got {value!r}", node=label)


def _choice(value, choices: tuple[str, ...], what: str, label: str) -> None:
    if value not in choices:
        raise PlanError(f"{what} must be one of {', '.join(choices)}, got {value!r}", node=label, column=str(value))


def _boolean(expr: Expr, schema: pa.Schema, label: str, what: str) -> None:
    validate_expression(expr, schema, label)
    if not is_boolean(expr.dtype):
        raise PlanError(f"{what} must be boolean, got {expr.dtype}", node=label, column=expr.sql())


@functools.singledispatch
def _validate_node(node: PlanNode) -> None:
    raise PlanError(f"no validation rule for {type(node).__name__}", node=node.label)


@_validate_node.register
def _(node: ValuesNode) -> None:
    try:
        data = pa.schema([pa.field(f.name, normalize_type(f.type)) for f in node.data.schema])
    except TypeError as exc:
        raise PlanError(f"the Values data has an unsupported column: {exc}", node=node.label) from None
    _same_schema(node, data, "the Values data")


@_validate_node.register
def _(node: RangeNode) -> None:
    empty = pa.schema([])
    for expr in (node.start, node.stop, node.step):  # constants: a column reference is an unknown column here
        validate_expression(expr, empty, node.label)
    if not isinstance(node.inclusive, bool):
        raise PlanError(f"inclusive must be true or false, got {node.inclusive!r}", node=node.label)
    function = "generate_series" if node.inclusive else "range"
    start, stop, step, dtype = typed_range_arguments(node.start, node.stop, node.step, node.label, function)
    if (start, stop, step) != (node.start, node.stop, node.step):
        raise PlanError(f"the bounds and step must be typed as {dtype} and its step type (as PlanBuilder.range "
                        "casts them)", node=node.label)
    if len(node.output_schema) != 1 or node.output_schema[0].type != dtype:
        raise PlanError(f"the output schema must be one {dtype} column", node=node.label)


@_validate_node.register
def _(node: TableScanNode) -> None:
    if not isinstance(node.table_name, str) or not node.table_name:
        raise PlanError("a table scan must name a table", node=node.label)
    if tuple(node.output_schema.names) != tuple(node.columns):
        raise PlanError(f"the output schema names {', '.join(node.output_schema.names)}, but the scan reads "
                        f"{', '.join(node.columns)}", node=node.label)


@_validate_node.register
def _(node: ExchangeNode) -> None:
    pass  # its schema is what the producers send; checked for supported types above


@_validate_node.register
def _(node: FilterNode) -> None:
    _boolean(node.predicate, node.source.output_schema, node.label, "a filter predicate")
    _same_schema(node, node.source.output_schema, "the input")


@_validate_node.register
def _(node: ProjectNode) -> None:
    if len(node.names) != len(node.expressions):
        raise PlanError(f"{len(node.names)} names for {len(node.expressions)} expressions", node=node.label)
    for expr in node.expressions:
        validate_expression(expr, node.source.output_schema, node.label)
    expected = pa.schema([pa.field(name, expr.dtype) for name, expr in zip(node.names, node.expressions)])
    _same_schema(node, expected, "the expressions")


def _aggregates(node, input_schema: pa.Schema, names: tuple[str, ...], calls: tuple[AggregateCall, ...]) -> None:
    if len(names) != len(calls):
        raise PlanError(f"{len(names)} aggregate names for {len(calls)} aggregates", node=node.label)
    for name, call in zip(names, calls):
        if not isinstance(call, AggregateCall):
            raise PlanError(f"aggregate {name!r} is not an aggregate call", node=node.label, column=name)
        _choice(call.function, AGGREGATE_FUNCTIONS, "an aggregate function", node.label)
        raw = node.step.input_is_raw  # later steps read each aggregate's intermediate column, count(*)'s too
        if raw and (call.arg is None) != (call.function == "count_star"):
            raise PlanError(f"{call.function} {'needs an' if call.arg is None else 'takes no'} argument",
                            node=node.label, column=name)
        if not raw and call.arg is None:
            raise PlanError(f"a {node.step.name} step's {call.function} reads an intermediate column",
                            node=node.label, column=name)
        if call.arg is None:
            if call.dtype != pa.int64():
                raise PlanError(f"count(*) is int64, not {call.dtype}", node=node.label, column=name)
            continue
        validate_expression(call.arg, input_schema, node.label)
        if call.then_by and (call.second is None or call.function not in ("string_agg", "first", "last") or not all(
                isinstance(key, tuple) and len(key) == 3 and isinstance(key[0], Expr)
                and all(isinstance(flag, bool) for flag in key[1:]) for key in call.then_by)):
            raise PlanError(f"{call.function}'s further ORDER BY keys must be (expression, descending, nulls_first) "
                            "after a first key, on string_agg, first or last", node=node.label, column=name)
        for key in call.inputs()[1:]:  # the second argument or ORDER BY keys
            validate_expression(key, input_schema, node.label)
            if node.step.input_is_raw and call.then_by:
                try:
                    result_type(call.function, call.arg.dtype, key.dtype)
                except TypeError as exc:
                    raise PlanError(str(exc), node=node.label, column=call.sql()) from None
        if node.step.input_is_raw:
            try:
                expected = result_type(call.function, call.arg.dtype, None if call.second is None else call.second.dtype)
            except TypeError as exc:
                raise PlanError(str(exc), node=node.label, column=call.sql()) from None
            if call.dtype != expected:
                raise PlanError(f"{call.function} over {call.arg.dtype} is {expected}, not {call.dtype}",
                                node=node.label, column=call.sql())
        elif not isinstance(call.arg, ColumnRef):
            raise PlanError(f"a {node.step.name} step reads intermediate columns, not expressions", node=node.label,
                            column=call.sql())


@_validate_node.register
def _(node: UnnestNode) -> None:
    schema = node.source.output_schema
    if not isinstance(node.arguments, tuple):
        raise PlanError("an Unnest's arguments must be a list of expressions", node=node.label)
    for expr in node.arguments:
        validate_expression(expr, schema, node.label)
    arguments, dtype = typed_unnest_arguments(node.function, node.arguments, node.label)
    if arguments != node.arguments:
        raise PlanError(f"an Unnest's arguments must be typed as {node.function} takes them (as PlanBuilder casts "
                        "them)", node=node.label)
    expected = pa.schema(list(schema) + [pa.field(node.output_schema.names[-1], dtype)])
    _same_schema(node, expected, f"its input's columns and the {node.function} element column")


@_validate_node.register
def _(node: GroupIdNode) -> None:
    schema = node.source.output_schema
    if not isinstance(node.key_names, tuple) or not isinstance(node.key_inputs, tuple) \
            or len(node.key_names) != len(node.key_inputs):
        raise PlanError("a GroupId needs one input column per key name", node=node.label)
    for name in node.key_names:
        if not isinstance(name, str) or not name:
            raise PlanError(f"a key name must be a column name, got {name!r}", node=node.label)
    for column in node.key_inputs:
        _columns((column,), schema, node.label, "grouping key")
    if not isinstance(node.grouping_sets, tuple) or not node.grouping_sets:
        raise PlanError("a GroupId needs at least one grouping set", node=node.label)
    keys = pa.schema([pa.field(n, schema.field(c).type) for n, c in zip(node.key_names, node.key_inputs)])
    for keys_of_set in node.grouping_sets:
        _columns(keys_of_set, keys, node.label, "grouping set key")
    _columns(node.aggregation_inputs, schema, node.label, "aggregation input")
    fields = list(keys) + [schema.field(n) for n in node.aggregation_inputs]
    if not isinstance(node.group_id_name, str) or not node.group_id_name:
        raise PlanError("a GroupId needs a group id column name", node=node.label)
    _same_schema(node, pa.schema(fields + [pa.field(node.group_id_name, pa.int64())]),
                 "the keys, the aggregation inputs and the group id")


@_validate_node.register
def _(node: AggregationNode) -> None:
    if not isinstance(node.step, AggregationStep):
        raise PlanError(f"unknown aggregation step {node.step!r}", node=node.label)
    schema = node.source.output_schema
    _columns(node.grouping_keys, schema, node.label, "grouping key")
    if not node.grouping_keys and not node.aggregates:
        raise PlanError("an aggregation needs grouping keys or aggregates", node=node.label)
    _aggregates(node, schema, node.aggregate_names, node.aggregates)
    try:
        expected = aggregation_output_schema(node.step, [schema.field(key) for key in node.grouping_keys],
                                             node.aggregate_names, node.aggregates)
    except TypeError as exc:
        raise PlanError(str(exc), node=node.label) from None
    _same_schema(node, expected, "the grouping keys and aggregates")
    if node.global_grouping_sets:
        if node.group_id_key not in node.grouping_keys:
            raise PlanError(f"global grouping sets need their group id among the grouping keys, got "
                            f"{node.group_id_key!r}", node=node.label)
        for set_id in node.global_grouping_sets:
            _count(set_id, "a global grouping set id", node.label)


@_validate_node.register
def _(node: FusedAggregationNode) -> None:
    schema = node.source.output_schema
    if not isinstance(node.step, AggregationStep):
        raise PlanError(f"unknown aggregation step {node.step!r}", node=node.label)
    for predicate in node.predicates:
        _boolean(predicate, schema, node.label, "a predicate")
    if len(node.key_names) != len(node.grouping_keys):
        raise PlanError(f"{len(node.key_names)} key names for {len(node.grouping_keys)} keys", node=node.label)
    for key in node.grouping_keys:
        validate_expression(key, schema, node.label)
    _aggregates(node, schema, node.aggregate_names, node.aggregates)
    keys = [pa.field(name, key.dtype) for name, key in zip(node.key_names, node.grouping_keys)]
    expected = aggregation_output_schema(node.step, keys, node.aggregate_names, node.aggregates)
    _same_schema(node, expected, "the keys and aggregates")


def _join_output(node, probe_only: bool = False, build_only: bool = False) -> None:
    probe, build = node.sources[0].output_schema, node.sources[1].output_schema
    both = set(probe.names) & set(build.names)
    fields = []
    for name in node.output_columns:
        if name in both:
            raise PlanError("output column is on both sides of the join", node=node.label, column=name)
        if name in probe.names and not build_only:
            fields.append(probe.field(name))
        elif name in build.names and not probe_only:
            fields.append(build.field(name))
        else:
            raise PlanError(f"unknown output column {name!r} for a {node.join_type} join", node=node.label,
                            column=str(name))
    _same_schema(node, pa.schema(fields), "the output columns")
    if node.filter is not None:
        combined = pa.schema(list(probe) + [f for f in build if f.name not in both])
        _boolean(node.filter, combined, node.label, "a join filter")


@_validate_node.register
def _(node: HashJoinNode) -> None:
    from gpu_engine.plans.plan_builder import join_key_layout

    _choice(node.join_type, JOIN_TYPES, "join_type", node.label)
    probe, build = node.sources[0].output_schema, node.sources[1].output_schema
    if not isinstance(node.left_keys, tuple) or not isinstance(node.right_keys, tuple):
        raise PlanError("join keys must be lists of column names", node=node.label)
    if not node.left_keys or len(node.left_keys) != len(node.right_keys):
        raise PlanError(f"a hash join needs as many right keys as left keys (at least one); got "
                        f"{len(node.left_keys)} and {len(node.right_keys)}", node=node.label)
    for left, right in zip(node.left_keys, node.right_keys):
        if left not in probe.names:
            raise PlanError(f"unknown left key {left!r}", node=node.label, column=str(left))
        if right not in build.names:
            raise PlanError(f"unknown right key {right!r}", node=node.label, column=str(right))
        if join_key_layout(probe.field(left).type) != join_key_layout(build.field(right).type):
            raise PlanError(f"join keys {left}:{probe.field(left).type} and {right}:{build.field(right).type} have "
                            "incompatible types", node=node.label, column=f"{left} = {right}")
    if node.join_type == "null_aware_anti" and (len(node.left_keys) != 1 or node.filter is not None):
        raise PlanError("a null_aware_anti join takes exactly one key and no filter", node=node.label)
    _join_output(node, probe_only=node.join_type in ("left_semi", "anti", "null_aware_anti"),
                 build_only=node.join_type in ("right_semi", "right_anti"))


@_validate_node.register
def _(node: NestedLoopJoinNode) -> None:
    _choice(node.join_type, NESTED_LOOP_JOIN_TYPES, "join_type", node.label)
    _join_output(node)


@_validate_node.register
def _(node: EnforceSingleRowNode) -> None:
    _same_schema(node, node.source.output_schema, "the input")


@_validate_node.register
def _(node: LocalPartitionNode) -> None:
    # Several sources are a UNION ALL (Velox's LocalPartition with several sources): each yields the same columns.
    if not node.sources:
        raise PlanError("a LocalPartition node takes at least 1 input, got 0", node=node.label)
    _choice(node.partition_kind, LOCAL_PARTITION_KINDS, "partition_kind", node.label)
    _columns(node.keys, node.sources[0].output_schema, node.label, "partition key")
    if (node.partition_kind == "repartition") != bool(node.keys):
        raise PlanError("a repartition needs keys and a gather takes none (nor does an arbitrary one)", node=node.label)
    for position, source in enumerate(node.sources):
        _same_schema(node, source.output_schema, "the input" if len(node.sources) == 1 else f"input {position + 1}")


def _sort_keys(node, keys) -> None:
    if not isinstance(keys, tuple) or not keys:
        raise PlanError("sort keys must be a non-empty list", node=node.label)
    for key in keys:
        if not isinstance(key, SortKey):
            raise PlanError(f"a sort key must be a SortKey, got {type(key).__name__}", node=node.label)
    _columns(tuple(key.name for key in keys), node.source.output_schema, node.label, "sort key")


@_validate_node.register
def _(node: OrderByNode) -> None:
    _sort_keys(node, node.keys)
    _same_schema(node, node.source.output_schema, "the input")


@_validate_node.register
def _(node: TopNNode) -> None:
    _sort_keys(node, node.keys)
    _count(node.count, "count", node.label)
    _same_schema(node, node.source.output_schema, "the input")


@_validate_node.register
def _(node: WindowNode) -> None:
    from gpu_engine.plans.window_functions import check_frame_order, check_window_call

    schema = node.source.output_schema
    _columns(node.partition_keys, schema, node.label, "partition key")
    if not isinstance(node.sort_keys, tuple) or not all(isinstance(key, SortKey) for key in node.sort_keys):
        raise PlanError("sort keys must be a list of SortKey", node=node.label)
    _columns(tuple(key.name for key in node.sort_keys), schema, node.label, "sort key")
    if not isinstance(node.functions, tuple) or not isinstance(node.function_names, tuple) \
            or not node.functions or len(node.functions) != len(node.function_names):
        raise PlanError("a Window needs one name per function and at least one function", node=node.label)
    for call in node.functions:
        if not isinstance(call, WindowFunctionCall):
            raise PlanError(f"a window function must be a WindowFunctionCall, got {type(call).__name__}",
                            node=node.label)
        check_window_call(call, schema, node.label)
        check_frame_order(call, node.sort_keys, schema, node.label)
    expected = pa.schema(list(schema) + [pa.field(name, call.dtype)
                                         for name, call in zip(node.function_names, node.functions)])
    _same_schema(node, expected, "the input and the functions")


@_validate_node.register
def _(node: TopNRowNumberNode) -> None:
    schema = node.source.output_schema
    _columns(node.partition_keys, schema, node.label, "partition key")
    if not isinstance(node.sort_keys, tuple) or not all(isinstance(key, SortKey) for key in node.sort_keys):
        raise PlanError("sort keys must be a list of SortKey", node=node.label)
    _columns(tuple(key.name for key in node.sort_keys), schema, node.label, "sort key")
    _count(node.limit, "limit", node.label)
    _choice(node.function, RANK_FUNCTIONS, "function", node.label)
    number = node.row_number_name
    if number is not None and (not isinstance(number, str) or not number or node.is_partial):
        raise PlanError("the row number column must be a name, and a partial step has none", node=node.label)
    expected = pa.schema(list(schema) + ([pa.field(number, pa.int64())] if number is not None else []))
    _same_schema(node, expected, "the input and the row number")


@_validate_node.register
def _(node: LimitNode) -> None:
    _count(node.count, "count", node.label)
    _count(node.offset, "offset", node.label)
    _same_schema(node, node.source.output_schema, "the input")


@_validate_node.register
def _(node: PartitionedOutputNode) -> None:
    _choice(node.partition_kind, PARTITIONED_OUTPUT_KINDS, "partition_kind", node.label)
    _count(node.num_partitions, "num_partitions", node.label, low=1)
    _columns(node.keys, node.source.output_schema, node.label, "partition key")
    _same_schema(node, node.source.output_schema, "the input")


# -- expressions -----------------------------------------------------------------------------


def _wrong_type(expr: Expr, expected: pa.DataType, label: str) -> PlanError:
    return PlanError(f"{type(expr).__name__} is typed {expr.dtype}, but its operands give {expected}", node=label,
                     column=expr.sql())


@functools.singledispatch
def _validate_expr(expr: Expr, schema: pa.Schema, label: str) -> None:
    raise PlanError(f"{type(expr).__name__} is not a scalar expression", node=label)


@_validate_expr.register
def _(expr: ColumnRef, schema: pa.Schema, label: str) -> None:
    if expr.name not in schema.names:
        raise PlanError(f"unknown column {expr.name!r}; input columns: {', '.join(schema.names) or '(none)'}",
                        node=label, column=expr.name)
    if schema.field(expr.name).type != expr.dtype:
        raise PlanError(f"column {expr.name!r} is {schema.field(expr.name).type}, but the expression types it "
                        f"{expr.dtype}", node=label, column=expr.name)


#: Python kinds a non-NULL literal of a type may hold (checked beyond with pyarrow's conversion, for ranges).
_LITERAL_KINDS: tuple[tuple[Callable[[pa.DataType], bool], tuple[type, ...]], ...] = (
    (is_boolean, (bool,)),
    (is_integer, (int,)),
    (is_floating, (int, float)),
    (is_decimal, (int, decimal.Decimal)),
    (is_string, (str,)),
    (pa.types.is_date32, (datetime.date,)),
    (pa.types.is_timestamp, (datetime.datetime,)),
    (is_interval, (IntervalValue,)),
)


@_validate_expr.register
def _(expr: Literal, schema: pa.Schema, label: str) -> None:
    value, dtype = expr.value, expr.dtype
    if value is None:
        return
    kinds = next((kinds for check, kinds in _LITERAL_KINDS if check(dtype)), None)
    if kinds is None:
        raise PlanError(f"a literal cannot be of type {dtype}", node=label, column=expr.sql())
    mismatched = (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
                  or (pa.types.is_date32(dtype) and isinstance(value, datetime.datetime)))
    if not mismatched and is_interval(dtype):  # months and days are int32, as DuckDB keeps them
        mismatched = not all(-(2**31) <= field < 2**31 for field in (value.months, value.days))
    elif not mismatched:
        try:  # (not pa.scalar: pyarrow's conversion of a Python value imports pandas, ~2 s of a Spark worker's
            arrow_from_pylist([value], dtype)  # first fragment under load; this writes the same value or defers)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            mismatched = True
        if is_integer(dtype) and isinstance(value, int):
            bits = dtype.bit_width
            low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if pa.types.is_signed_integer(dtype) else (0, 2**bits)
            mismatched = not low <= value < high
    if mismatched:
        raise PlanError(f"literal {value!r} does not fit its type {dtype}", node=label, column=expr.sql())


@_validate_expr.register
def _(expr: BinaryOp, schema: pa.Schema, label: str) -> None:
    _choice(expr.op, ARITHMETIC_OPS + COMPARISON_OPS + BOOLEAN_OPS, "a binary operator", label)
    _validate_expr(expr.left, schema, label)
    _validate_expr(expr.right, schema, label)
    left, right = expr.left.dtype, expr.right.dtype
    if expr.op in ARITHMETIC_OPS:
        try:
            expected = arithmetic_type(expr.op, left, right)
        except (TypeError, ValueError) as exc:
            raise PlanError(str(exc), node=label, column=expr.sql()) from None
    else:
        expected = pa.bool_()
        fits = is_comparable(left, right) if expr.op in COMPARISON_OPS else (is_boolean(left) and is_boolean(right))
        if not fits:
            raise PlanError(f"{expr.op} is not defined for {left} and {right}", node=label, column=expr.sql())
    if expr.dtype != expected:
        raise _wrong_type(expr, expected, label)


@_validate_expr.register
def _(expr: UnaryOp, schema: pa.Schema, label: str) -> None:
    _choice(expr.op, UNARY_OPS, "a unary operator", label)
    _validate_expr(expr.operand, schema, label)
    operand = expr.operand.dtype
    if expr.op == "negate":
        if not is_numeric(operand):
            raise PlanError(f"cannot negate {operand}", node=label, column=expr.sql())
        expected = operand
    else:
        if expr.op == "not" and not is_boolean(operand):
            raise PlanError(f"NOT needs a boolean, got {operand}", node=label, column=expr.sql())
        expected = pa.bool_()
    if expr.dtype != expected:
        raise _wrong_type(expr, expected, label)


@_validate_expr.register
def _(expr: Case, schema: pa.Schema, label: str) -> None:
    if not isinstance(expr.whens, tuple) or not expr.whens:
        raise PlanError("CASE needs at least one WHEN", node=label)
    values = []
    for when in expr.whens:
        if not (isinstance(when, tuple) and len(when) == 2):
            raise PlanError("each WHEN is a (condition, value) pair", node=label)
        condition, value = when
        _validate_expr(condition, schema, label)
        if not is_boolean(condition.dtype):
            raise PlanError(f"a WHEN condition must be boolean, got {condition.dtype}", node=label,
                            column=condition.sql())
        values.append(value)
    if expr.default is not None:
        values.append(expr.default)
    for value in values:
        _validate_expr(value, schema, label)
        if value.dtype != expr.dtype:
            raise PlanError(f"a CASE value is {value.dtype}, but the CASE is {expr.dtype}", node=label,
                            column=value.sql())


@_validate_expr.register
def _(expr: InList, schema: pa.Schema, label: str) -> None:
    _validate_expr(expr.operand, schema, label)
    for value in expr.values:
        if not isinstance(value, Literal):
            raise PlanError("IN list values must be constants", node=label, column=expr.sql())
        _validate_expr(value, schema, label)
        if value.dtype != expr.operand.dtype:
            raise PlanError(f"IN list value {value.sql()} is {value.dtype}, the operand {expr.operand.dtype}",
                            node=label, column=expr.sql())
    if expr.dtype != pa.bool_():
        raise _wrong_type(expr, pa.bool_(), label)


@_validate_expr.register
def _(expr: Like, schema: pa.Schema, label: str) -> None:
    _validate_expr(expr.operand, schema, label)
    if not is_string(expr.operand.dtype) or not isinstance(expr.pattern, str):
        raise PlanError("LIKE needs a string operand and a string pattern", node=label, column=expr.sql())
    if expr.dtype != pa.bool_():
        raise _wrong_type(expr, pa.bool_(), label)


@_validate_expr.register
def _(expr: Function, schema: pa.Schema, label: str) -> None:
    for arg in expr.args:
        _validate_expr(arg, schema, label)
    try:
        expected = function_type(expr.name, expr.args)
    except TypeError as error:
        raise PlanError(str(error), node=label, column=expr.sql()) from None
    if expr.dtype != expected:
        raise _wrong_type(expr, expected, label)


@_validate_expr.register
def _(expr: Cast, schema: pa.Schema, label: str) -> None:
    _validate_expr(expr.operand, schema, label)
    if not (is_castable(expr.operand.dtype, expr.dtype) or unimplemented_cast(expr.operand.dtype, expr.dtype)):
        raise PlanError(f"cannot cast {expr.operand.dtype} to {expr.dtype}", node=label, column=expr.sql())


@_validate_expr.register
def _(expr: Extract, schema: pa.Schema, label: str) -> None:
    _choice(expr.field, EXTRACT_FIELDS, "an EXTRACT field", label)
    _validate_expr(expr.operand, schema, label)
    if not is_temporal(expr.operand.dtype):
        raise PlanError(f"EXTRACT needs a date or timestamp, got {expr.operand.dtype}", node=label, column=expr.sql())
    if expr.dtype != pa.int64():
        raise _wrong_type(expr, pa.int64(), label)


@_validate_expr.register
def _(expr: Substring, schema: pa.Schema, label: str) -> None:
    _validate_expr(expr.operand, schema, label)
    if not is_string(expr.operand.dtype):
        raise PlanError(f"SUBSTRING needs a string, got {expr.operand.dtype}", node=label, column=expr.sql())
    if isinstance(expr.start, bool) or not isinstance(expr.start, int):
        raise PlanError(f"SUBSTRING's start must be an integer, got {expr.start!r}", node=label)
    if expr.length is not None and (isinstance(expr.length, bool) or not isinstance(expr.length, int)
                                    or expr.length < 0):
        raise PlanError(f"SUBSTRING's length must be a non-negative integer, got {expr.length!r}", node=label)
    if expr.dtype != pa.string():
        raise _wrong_type(expr, pa.string(), label)


# -- subquery predicates (gpu_engine.plans.subqueries) ------------------------------------------------------------

#: The outer row's schema while a subquery predicate's correlation is checked (its OuterColumns read it).
_outer_schema: contextvars.ContextVar[pa.Schema | None] = contextvars.ContextVar("outer_schema", default=None)


@_validate_expr.register
def _(expr: OuterColumn, schema: pa.Schema, label: str) -> None:
    outer = _outer_schema.get()
    if outer is None:
        raise PlanError(f"outer column {expr.name!r} outside a subquery's correlation", node=label,
                        column=expr.name)
    _validate_expr(ColumnRef(expr.name, expr.dtype), outer, label)


def _subquery_predicate(expr: Exists | InSubquery, schema: pa.Schema, label: str) -> None:
    """Check a subquery predicate over its Filter's input ``schema``: its plan, its correlation (the subquery's
    columns and the outer row's), its boolean type."""
    if not isinstance(expr.subquery, PlanNode):
        raise PlanError(f"a subquery must be a plan node, got {type(expr.subquery).__name__}", node=label)
    validate_plan(expr.subquery)
    if not isinstance(expr.negated, bool):
        raise PlanError(f"negated must be true or false, got {expr.negated!r}", node=label)
    if expr.correlation is not None:
        token = _outer_schema.set(schema)
        try:
            _boolean(expr.correlation, expr.subquery.output_schema, label, "a subquery's correlation")
        finally:
            _outer_schema.reset(token)
    if expr.dtype != pa.bool_():
        raise _wrong_type(expr, pa.bool_(), label)


@_validate_expr.register
def _(expr: Exists, schema: pa.Schema, label: str) -> None:
    _subquery_predicate(expr, schema, label)


@_validate_expr.register
def _(expr: ScalarSubquery, schema: pa.Schema, label: str) -> None:
    if not isinstance(expr.subquery, PlanNode):
        raise PlanError(f"a subquery must be a plan node, got {type(expr.subquery).__name__}", node=label)
    validate_plan(expr.subquery)
    names = expr.subquery.output_schema.names
    if expr.column not in names:
        raise PlanError(f"a scalar subquery's column {expr.column!r} is not an output of its subquery "
                        f"({', '.join(names)})", node=label, column=expr.column)
    column_type = expr.subquery.output_schema.field(expr.column).type
    if expr.dtype != column_type:
        raise _wrong_type(expr, column_type, label)


@_validate_expr.register
def _(expr: QuantifiedComparison, schema: pa.Schema, label: str) -> None:
    _validate_expr(expr.value, schema, label)
    _subquery_predicate(expr, schema, label)
    if expr.op not in QUANTIFIED_OPS or not isinstance(expr.every, bool):
        raise PlanError(f"a quantified comparison's op must be one of {', '.join(QUANTIFIED_OPS)} and every true or "
                        f"false, got {expr.op!r}, {expr.every!r}", node=label, column=expr.sql())
    names = expr.subquery.output_schema.names
    if expr.column not in names:
        raise PlanError(f"{QUANTIFIED_OPS[expr.op]} {'ALL' if expr.every else 'ANY'} compares with column "
                        f"{expr.column!r}, which its subquery does not output ({', '.join(names)})", node=label,
                        column=expr.column)
    if not is_comparable(expr.value.dtype, expr.subquery.output_schema.field(expr.column).type):
        raise PlanError(f"{QUANTIFIED_OPS[expr.op]} {'ALL' if expr.every else 'ANY'} compares {expr.value.dtype} "
                        f"with {expr.subquery.output_schema.field(expr.column).type}", node=label, column=expr.sql())


@_validate_expr.register
def _(expr: InSubquery, schema: pa.Schema, label: str) -> None:
    _validate_expr(expr.value, schema, label)
    _subquery_predicate(expr, schema, label)
    names = expr.subquery.output_schema.names
    if expr.column not in names:
        raise PlanError(f"IN compares with column {expr.column!r}, which its subquery does not output "
                        f"({', '.join(names)})", node=label, column=expr.column)
    if not is_comparable(expr.value.dtype, expr.subquery.output_schema.field(expr.column).type):
        raise PlanError(f"IN compares {expr.value.dtype} with {expr.subquery.output_schema.field(expr.column).type}",
                        node=label, column=expr.sql())
