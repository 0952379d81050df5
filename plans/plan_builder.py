"""Build plan trees fluently from SQL snippets, as Velox's ``exec::test::PlanBuilder`` does.

Tests and the TPC-H plans write fragments as chains such as
``PlanBuilder(catalog).table_scan("lineitem").filter("l_quantity > 10")``. Each
call validates its snippets against the current output schema at once (through
:mod:`gpu_engine.plans.sql_translator`), so a malformed plan fails here with a
:class:`PlanError` naming the node (``Filter[1]``) and the column, never later
in a Task. Node ids are strings ``"0"``, ``"1"``, … in build order, drawn from a
:class:`PlanNodeIdGenerator` that several builders may share (a join's build
side, the fragments of a distributed plan) so ids stay unique across them.

A snippet may also be the sqlglot tree parsed from one (the SQL planner hands
over the query's own parsed expressions, renamed: see
:mod:`gpu_engine.sql.renaming`); errors name it by its SQL text all the same.

Schemas are the engine's logical types (``gpu_engine.columnar.types.normalize_type``:
large strings become ``string``, dictionaries their value type).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import Callable, Mapping, Sequence

import pyarrow as pa

from gpu_engine.columnar.types import is_interval, normalize_type
from gpu_engine.errors import PlanError
from gpu_engine.plans.aggregates import (
    TWO_ARGUMENT_FUNCTIONS, aggregation_output_schema, final_step_aggregates, intermediate_names, then_by_types,
)
from gpu_engine.plans.expressions import AggregateCall, ColumnRef, Expr, Literal, referenced_columns
from gpu_engine.plans.null_type import NULL_STORAGE, null_type_metadata, null_typed_field, plan_field
from gpu_engine.plans.nodes import (
    AggregationNode,
    AggregationStep,
    EnforceSingleRowNode,
    ExchangeNode,
    FilterNode,
    GroupIdNode,
    HashJoinNode,
    JOIN_TYPES,
    LimitNode,
    LocalPartitionNode,
    NESTED_LOOP_JOIN_TYPES,
    NestedLoopJoinNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanNode,
    ProjectNode,
    RangeNode,
    TableScanNode,
    UnnestNode,
    RANK_FUNCTIONS,
    TopNNode,
    TopNRowNumberNode,
    ValuesNode,
    WindowNode,
    walk_plan,
)
from gpu_engine.plans.range_arguments import typed_range_arguments, typed_unnest_arguments
from gpu_engine.plans.type_coercion import is_hugeint, is_hugeint_result
from gpu_engine.plans.window_functions import check_frame_order, keeps_null_type, parse_window_function
from gpu_engine.plans.sql_translator import (
    Snippet,
    parse_aggregate,
    parse_column_name,
    parse_expression,
    parse_projection,
    parse_sort_key,
    snippet_text,
)

__all__ = ["PlanBuilder", "PlanNodeIdGenerator", "join_key_layout"]

_PARTITIONED_OUTPUT_KINDS = ("partitioned", "broadcast", "arbitrary")


class PlanNodeIdGenerator:
    """Hand out plan node ids ``"0"``, ``"1"``, … ; share one between builders of one plan."""

    def __init__(self, start: int = 0):
        self._counter = itertools.count(start)
        self._lock = threading.Lock()

    def next_id(self) -> str:
        """Return the next unused id."""
        with self._lock:
            return str(next(self._counter))


def _normalized_schema(schema: pa.Schema, label: str) -> pa.Schema:
    names = set()
    fields = []
    for f in schema:
        if f.name in names:
            raise PlanError(f"duplicate column name {f.name!r}", node=label, column=f.name)
        names.add(f.name)
        try:
            fields.append(pa.field(f.name, normalize_type(f.type), metadata=null_type_metadata(f)))
        except TypeError as exc:
            raise PlanError(str(exc), node=label, column=f.name) from None
    return pa.schema(fields)


def _unique_names(names: Sequence[str], label: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise PlanError(f"duplicate output column name {name!r}", node=label, column=name)
        seen.add(name)


def join_key_layout(dtype: pa.DataType) -> object:
    """Return what a join key's normalized words depend on; keys join only when both sides agree.

    Integers of any width (and floats of any width) normalize to the same
    64-bit words for equal values; decimals are scaled integers, so their
    scales must match; any other type must match exactly. A uint64 joins only
    a uint64: its values from 2**63 up have the words of negative int64s
    (2**64 - 1 joined -1), so beside a signed key the equality stays a filter
    or both keys are cast to a common type.
    """
    if pa.types.is_uint64(dtype):
        return "uint64"
    if pa.types.is_integer(dtype):
        return "integer"
    if pa.types.is_floating(dtype):
        return "floating point"
    if pa.types.is_decimal(dtype):
        return f"decimal with scale {dtype.scale}"
    return str(dtype)


def _intermediate_names(name: str, aggregate: AggregateCall) -> list[str]:
    """Return the columns a partial step emits for one aggregate (see ``AggregationNode``)."""
    return intermediate_names(aggregate.function, None if aggregate.arg is None else aggregate.arg.dtype, name,
                              None if aggregate.second is None else aggregate.second.dtype, then_by_types(aggregate))


def _distinct_kinds(calls: Sequence[AggregateCall]) -> int:
    """Return how many kinds of aggregates ``calls`` mixes: one per DISTINCT argument, one for the plain ones."""
    return len({(call.arg, _distinct_second(call)) if call.distinct else None for call in calls})


def _greatest(column: ColumnRef) -> AggregateCall:
    """Return ``max(column)``; of an INTERVAL (which ``max`` folds no word of), the first value in descending
    order, NULLs last, as :func:`~gpu_engine.plans.sql_translator.parse_aggregate` plans ``max`` of one."""
    if is_interval(column.dtype):
        return AggregateCall("first", column, column.dtype, second=column, descending=True)
    return AggregateCall("max", column, column.dtype)


def _cloned(node: PlanNode, ids) -> PlanNode:
    """Return a copy of a plan subtree with fresh node ids (a second evaluation of the same input)."""
    return dataclasses.replace(node, id=ids.next_id(), sources=tuple(_cloned(s, ids) for s in node.sources))


def _distinct_second(call: AggregateCall) -> Expr | None:
    """Return the second argument DISTINCT applies to: a two-argument aggregate's (``corr(DISTINCT y, x)`` is over
    the distinct pairs, as DuckDB), None for the others (``string_agg``'s ORDER BY key is its argument)."""
    return call.second if call.function in TWO_ARGUMENT_FUNCTIONS else None


class PlanBuilder:
    """Build one plan fragment bottom-up; every method returns the builder.

    Parameters
    ----------
    catalog
        Table name -> Arrow schema, for :meth:`table_scan`; may be None or empty
        for plans that start with :meth:`values` or :meth:`exchange`.
    id_generator
        Shared id source, so ids are unique across several builders.
    """

    def __init__(self, catalog: Mapping[str, pa.Schema] | None = None, *,
                 id_generator: PlanNodeIdGenerator | None = None):
        self._catalog = dict(catalog or {})
        self._ids = id_generator or PlanNodeIdGenerator()
        self._node: PlanNode | None = None

    # -- plumbing -----------------------------------------------------------------

    def _add(self, kind: str, make: Callable[[str, str], PlanNode], *, leaf: bool = False) -> "PlanBuilder":
        """Draw an id, build the node with ``make(id, label)`` and make it the current node."""
        node_id = self._ids.next_id()
        label = f"{kind}[{node_id}]"
        if leaf and self._node is not None:
            raise PlanError(f"{kind} must start a plan; this builder already has {self._node.label}", node=label)
        if not leaf and self._node is None:
            raise PlanError("no input: start the plan with table_scan, values or exchange", node=label)
        self._node = make(node_id, label)
        return self

    @property
    def _schema(self) -> pa.Schema:
        return self._node.output_schema

    def _columns(self, names: Sequence[str], label: str, role: str) -> tuple[str, ...]:
        if isinstance(names, str):
            raise PlanError(f"{role}s must be a list of column names", node=label, column=names)
        columns = tuple(parse_column_name(name, self._schema, label, role=role) for name in names)
        _unique_names(columns, label)
        return columns

    # -- sources ------------------------------------------------------------------

    def table_scan(self, table_name: str, columns: Sequence[str] | None = None) -> "PlanBuilder":
        """Read ``columns`` (default: all) of a catalog table."""

        def make(node_id: str, label: str) -> PlanNode:
            if table_name not in self._catalog:
                available = ", ".join(sorted(self._catalog)) or "(none)"
                raise PlanError(f"unknown table {table_name!r}; available tables: {available}",
                                node=label, column=table_name)
            table_schema = self._catalog[table_name]
            wanted = list(table_schema.names if columns is None else columns)
            _unique_names(wanted, label)
            for name in wanted:
                if name not in table_schema.names:
                    raise PlanError(f"unknown column {name!r} in table {table_name!r}; available columns: "
                                    + ", ".join(table_schema.names), node=label, column=name)
            schema = _normalized_schema(pa.schema([table_schema.field(name) for name in wanted]), label)
            return TableScanNode(id=node_id, output_schema=schema, table_name=table_name, columns=tuple(wanted))

        return self._add("TableScan", make, leaf=True)

    def values(self, table: pa.Table) -> "PlanBuilder":
        """Produce the rows of an in-memory Arrow table."""
        return self._add("Values", lambda node_id, label: ValuesNode(
            id=node_id, output_schema=_normalized_schema(table.schema, label), data=table), leaf=True)

    def range(self, start: Snippet, stop: Snippet, step: Snippet = "1", *, inclusive: bool = False,
              name: str = "range") -> "PlanBuilder":
        """Produce one column ``name``: ``start, start + step, ...`` before ``stop`` (through it if ``inclusive``).

        DuckDB's ``range(start, stop, step)`` (``inclusive=False``) and ``generate_series`` (``True``):
        integer bounds and step give BIGINT rows, TIMESTAMP or DATE bounds with an INTERVAL step TIMESTAMP
        rows. The arguments are constant expressions, evaluated when the query runs.
        """

        def make(node_id: str, label: str) -> PlanNode:
            empty = pa.schema([])
            parts = [parse_expression(part, empty, label) for part in (start, stop, step)]
            function = "generate_series" if inclusive else "range"
            first, last, increment, dtype = typed_range_arguments(*parts, label, function)
            schema = _normalized_schema(pa.schema([pa.field(name, dtype)]), label)
            return RangeNode(id=node_id, output_schema=schema, start=first, stop=last, step=increment,
                             inclusive=bool(inclusive))

        return self._add("Range", make, leaf=True)

    def unnest_series(self, start: Snippet, stop: Snippet, step: Snippet = "1", *, inclusive: bool = False,
                      name: str = "range", outer: bool = False) -> "PlanBuilder":
        """Repeat each row once per element of its own series ``start, start + step, ...``, the element as ``name``.

        DuckDB's ``FROM t, range(t.a, t.b)`` (``inclusive=False``) / ``generate_series`` (``True``) reading the
        row's columns: integer arguments over the current schema, BIGINT elements. A timestamp series per row
        is refused by name (only constant timestamp series are built, as a :meth:`range` source). ``outer``: an
        empty or NULL series gives one row with a NULL element (``LEFT JOIN LATERAL ... ON true``), not none.
        """
        return self._unnest("generate_series" if inclusive else "range", (start, stop, step), name, outer)

    def unnest_split(self, text: Snippet, separator: Snippet, *, name: str = "unnest",
                     outer: bool = False) -> "PlanBuilder":
        """Repeat each row once per piece of ``string_split(text, separator)``, the piece (VARCHAR) as ``name``;
        ``outer``: a NULL text gives one row with a NULL piece (Spark's ``LATERAL VIEW OUTER``), not none."""
        return self._unnest("string_split", (text, separator), name, outer)

    def _unnest(self, function: str, parts: Sequence[Snippet], name: str, outer: bool = False) -> "PlanBuilder":
        def make(node_id: str, label: str) -> PlanNode:
            arguments = tuple(parse_expression(part, self._schema, label) for part in parts)
            arguments, dtype = typed_unnest_arguments(function, arguments, label)
            if name in self._schema.names:
                raise PlanError(f"the list's column {name!r} is already a column of the input", node=label,
                                column=name)
            schema = _normalized_schema(pa.schema(list(self._schema) + [pa.field(name, dtype)]), label)
            return UnnestNode(id=node_id, output_schema=schema, sources=(self._node,), function=function,
                              arguments=arguments, outer=outer)

        return self._add("Unnest", make)

    def exchange(self, schema: pa.Schema) -> "PlanBuilder":
        """Receive pages with ``schema`` from other Tasks' PartitionedOutput."""
        return self._add("Exchange", lambda node_id, label: ExchangeNode(
            id=node_id, output_schema=_normalized_schema(schema, label)), leaf=True)

    # -- row-wise -----------------------------------------------------------------

    def filter(self, predicate: Snippet) -> "PlanBuilder":
        """Keep rows where the boolean ``predicate`` is true (SQL text, or its parsed sqlglot tree)."""

        def make(node_id: str, label: str) -> PlanNode:
            expr = parse_expression(predicate, self._schema, label)
            if pa.types.is_null(expr.dtype) and isinstance(expr, Literal):
                expr = Literal(None, pa.bool_())
            if not pa.types.is_boolean(expr.dtype):
                raise PlanError(f"a filter predicate must be boolean, got {expr.dtype}", node=label,
                                column=snippet_text(predicate))
            return FilterNode(id=node_id, output_schema=self._schema, sources=(self._node,), predicate=expr)

        return self._add("Filter", make)

    def project(self, projections: Sequence[Snippet]) -> "PlanBuilder":
        """Compute one output column per ``"expr [AS name]"`` snippet."""

        def make(node_id: str, label: str) -> PlanNode:
            if isinstance(projections, str):
                raise PlanError("projections must be a list of SQL snippets", node=label, column=projections)
            pairs = [parse_projection(text, self._schema, label, position=i) for i, text in enumerate(projections)]
            names = tuple(name for name, _ in pairs)
            _unique_names(names, label)
            # A bare NULL is a column of SQL's NULL type: INTEGER storage, typed by what it meets later.
            # (a CASE of only NULL results too: its every value is NULL)
            schema = pa.schema([plan_field(name, expr.dtype, hugeint=is_hugeint(expr)) for name, expr in pairs])
            return ProjectNode(id=node_id, output_schema=schema, sources=(self._node,), names=names,
                               expressions=tuple(Literal(None, NULL_STORAGE) if pa.types.is_null(expr.dtype)
                                                 else expr for _, expr in pairs))

        return self._add("Project", make)

    # -- aggregation ----------------------------------------------------------------

    def aggregation(self, grouping_keys: Sequence[str], aggregates: Sequence[Snippet]) -> "PlanBuilder":
        """Group by ``grouping_keys`` and compute ``aggregates`` in one (SINGLE) step."""
        return self._raw_aggregation(AggregationStep.SINGLE, grouping_keys, aggregates)

    def partial_aggregation(self, grouping_keys: Sequence[str], aggregates: Sequence[str]) -> "PlanBuilder":
        """Group and emit intermediate results (PARTIAL step) for a later final_aggregation."""
        return self._raw_aggregation(AggregationStep.PARTIAL, grouping_keys, aggregates)

    def intermediate_aggregation(self, *, partial: AggregationNode | None = None) -> "PlanBuilder":
        """Merge intermediate results into intermediate results (INTERMEDIATE step); see final_aggregation."""
        return self._merge_aggregation(AggregationStep.INTERMEDIATE, partial)

    def final_aggregation(self, *, partial: AggregationNode | None = None) -> "PlanBuilder":
        """Merge intermediate results into final values (FINAL step).

        The keys and aggregates come from the nearest PARTIAL or INTERMEDIATE
        aggregation below the current node (looking through LocalPartition
        nodes), or from ``partial`` when it lies in another fragment (after an
        Exchange).
        """
        return self._merge_aggregation(AggregationStep.FINAL, partial)

    def group_id(self, grouping_sets: Sequence[Sequence[str]], aggregation_inputs: Sequence[str],
                 group_id_name: str = "group_id",
                 grouping_keys: Sequence["str | tuple[str, str]"] | None = None) -> "PlanBuilder":
        """Repeat every row once per grouping set, NULLing the keys not in it (``GROUPING SETS``, ``ROLLUP``, ``CUBE``).

        Aggregate the result by the keys and ``group_id_name`` (an ``int64``, the
        set's position in ``grouping_sets``) to get each set's groups; the
        aggregation then also gives each set without keys its row over an empty
        input, as SQL does.

        Parameters
        ----------
        grouping_sets
            Per set, the key names it groups by (an empty list: the grand total).
        aggregation_inputs
            Input columns the aggregates read, passed through unchanged; a column
            that is also a key must be given a key name of its own (see ``grouping_keys``).
        group_id_name
            The name of the group id column.
        grouping_keys
            The keys in output order, each an input column name or an ``(output name,
            input column)`` pair; by default the columns the sets name, in order of appearance.
        """

        def make(node_id: str, label: str) -> PlanNode:
            schema = self._schema
            if isinstance(grouping_sets, str) or not grouping_sets or any(
                    isinstance(keys, str) for keys in grouping_sets):
                raise PlanError("grouping_sets must be a non-empty list of lists of key names", node=label)
            wanted = grouping_keys
            if wanted is None:
                wanted = list(dict.fromkeys(name for keys in grouping_sets for name in keys))
            if isinstance(wanted, str):
                raise PlanError("grouping keys must be a list of column names", node=label, column=wanted)
            names, inputs = [], []
            for key in wanted:
                output, column = (key, key) if isinstance(key, str) else tuple(key)
                inputs.append(parse_column_name(column, schema, label, role="grouping key"))
                names.append(inputs[-1] if output is column else output)
            key_schema = pa.schema([pa.field(n, schema.field(c).type, metadata=null_type_metadata(schema.field(c)))
                                    for n, c in zip(names, inputs)])
            _unique_names(names, label)
            sets = tuple(self._grouping_set(keys, key_schema, label) for keys in grouping_sets)
            passed = self._columns(aggregation_inputs, label, "aggregation input")
            if not isinstance(group_id_name, str) or not group_id_name:
                raise PlanError("group_id_name must be a column name", node=label)
            fields = list(key_schema) + [schema.field(n) for n in passed] + [pa.field(group_id_name, pa.int64())]
            _unique_names([f.name for f in fields], label)
            return GroupIdNode(id=node_id, output_schema=pa.schema(fields), sources=(self._node,),
                               key_names=tuple(names), key_inputs=tuple(inputs), grouping_sets=sets,
                               aggregation_inputs=passed, group_id_name=group_id_name)

        return self._add("GroupId", make)

    @staticmethod
    def _grouping_set(keys: Sequence[str], key_schema: pa.Schema, label: str) -> tuple[str, ...]:
        members = tuple(parse_column_name(name, key_schema, label, role="grouping set key") for name in keys)
        _unique_names(members, label)
        return tuple(name for name in key_schema.names if name in members)

    def _raw_aggregation(self, step: AggregationStep, grouping_keys: Sequence[str],
                         aggregates: Sequence[Snippet]) -> "PlanBuilder":
        def make(node_id: str, label: str) -> PlanNode:
            keys = self._columns(grouping_keys, label, "grouping key")
            if isinstance(aggregates, str):
                raise PlanError("aggregates must be a list of SQL snippets", node=label, column=aggregates)
            if not keys and not aggregates:
                raise PlanError("an aggregation needs grouping keys or aggregates", node=label)
            pairs = [parse_aggregate(text, self._schema, label, position=i) for i, text in enumerate(aggregates)]
            names, calls = tuple(n for n, _ in pairs), tuple(c for _, c in pairs)
            schema = aggregation_output_schema(step, [self._schema.field(key) for key in keys], names, calls)
            _unique_names(schema.names, label)
            source = self._node
            if any(call.distinct for call in calls):
                if _distinct_kinds(calls) > 1 and keys and step is AggregationStep.SINGLE:
                    source, calls = self._mixed_distinct_input(keys, names, calls, aggregates, label)
                else:
                    source, calls = self._distinct_input(step, keys, names, calls, aggregates, label)
            group_id = self._node if isinstance(self._node, GroupIdNode) else None  # also under a DISTINCT rewrite
            global_sets = ()
            if (group_id is not None and group_id.group_id_name in keys
                    and set(keys) <= {*group_id.key_names, group_id.group_id_name}):
                global_sets = group_id.global_grouping_sets
            return AggregationNode(id=node_id, output_schema=schema, sources=(source,), step=step,
                                   grouping_keys=keys, aggregate_names=names, aggregates=calls,
                                   global_grouping_sets=global_sets,
                                   group_id_key=group_id.group_id_name if global_sets else None)

        return self._add("Aggregation", make)

    def _mixed_distinct_input(self, keys: tuple[str, ...], names: tuple[str, ...], calls: tuple[AggregateCall, ...],
                              texts: Sequence[Snippet], label: str) -> tuple[PlanNode, tuple[AggregateCall, ...]]:
        """Rewrite ``count(DISTINCT a), count(DISTINCT b), sum(c) GROUP BY keys`` as a UNION ALL of one
        aggregation per kind (each DISTINCT argument, and the plain aggregates) over its own copy of the input,
        then ``max`` of each result per group.

        Why: the DISTINCT rewrite (:meth:`_distinct_input`) groups by one argument at a time. Each branch has
        exactly one row per group with its results and NULL in the others' columns, so ``max`` picks each
        result (NULL where the aggregate is NULL); groups of NULL keys meet as the aggregation groups them.
        Spark's RewriteDistinctAggregates expands rows once per kind for the same reason.
        """
        kinds: dict = {}
        for index, call in enumerate(calls):
            kind = (call.arg, _distinct_second(call)) if call.distinct else None
            kinds.setdefault(kind, []).append(index)
        fields = [self._schema.field(key) for key in keys] + [pa.field(n, c.dtype) for n, c in zip(names, calls)]
        union_schema = pa.schema(fields)
        # Over a GroupId each branch gives the sets without keys their row over an empty input (count 0), as
        # the aggregation it replaces would; the max above then finds one row per set in some branch.
        group_id = self._node if isinstance(self._node, GroupIdNode) and self._node.group_id_name in keys \
            and set(keys) <= {*self._node.key_names, self._node.group_id_name} else None
        global_sets = group_id.global_grouping_sets if group_id is not None else ()
        branches = []
        for number, members in enumerate(kinds.values()):
            source = self._node if number == 0 else _cloned(self._node, self._ids)
            part_names = tuple(names[i] for i in members)
            part_calls = tuple(calls[i] for i in members)
            if part_calls[0].distinct:
                source, part_calls = self._distinct_input(AggregationStep.SINGLE, keys, part_names, part_calls,
                                                          [texts[i] for i in members], label, source)
            schema = aggregation_output_schema(AggregationStep.SINGLE, [self._schema.field(k) for k in keys],
                                               part_names, part_calls)
            part = AggregationNode(id=self._ids.next_id(), output_schema=schema, sources=(source,),
                                   step=AggregationStep.SINGLE, grouping_keys=keys, aggregate_names=part_names,
                                   aggregates=part_calls, global_grouping_sets=global_sets,
                                   group_id_key=group_id.group_id_name if global_sets else None)
            outputs = [ColumnRef(f.name, f.type) if f.name in schema.names else Literal(None, f.type)
                       for f in union_schema]
            branches.append(ProjectNode(id=self._ids.next_id(), output_schema=union_schema, sources=(part,),
                                        names=tuple(union_schema.names), expressions=tuple(outputs)))
        union = LocalPartitionNode(id=self._ids.next_id(), output_schema=union_schema, sources=tuple(branches),
                                   partition_kind="arbitrary")
        return union, tuple(_greatest(ColumnRef(n, c.dtype)) for n, c in zip(names, calls))

    def _distinct_input(self, step: AggregationStep, keys: tuple[str, ...], names: tuple[str, ...],
                        calls: tuple[AggregateCall, ...], texts: Sequence[Snippet],
                        label: str, source: PlanNode | None = None) -> tuple[PlanNode, tuple[AggregateCall, ...]]:
        """Rewrite ``f(DISTINCT x) GROUP BY keys`` as ``f(x)`` over ``SELECT DISTINCT keys, x``.

        Why a rewrite rather than per-group sets in the operator: the inner
        aggregation is an ordinary group-by on ``keys + x`` (a hash table on the
        device, partial/final across drivers like any other), so DISTINCT costs
        no new kernel; Spark (RewriteDistinctAggregates) and cuDF do the same.
        Supported when every aggregate is DISTINCT over the same argument (TPC-H
        Q16's shape); NULL arguments form their own group and are then skipped
        by ``f``, as SQL requires. A two-argument aggregate (``corr(DISTINCT y, x)``)
        is over the distinct pairs, as DuckDB's: the inner aggregation groups by both.
        """
        if step is not AggregationStep.SINGLE:
            raise PlanError("DISTINCT aggregates need a single-step aggregation (aggregation(...))", node=label)
        pairs = [(call.arg, _distinct_second(call)) for call in calls]
        if not all(call.distinct for call in calls) or len(set(pairs)) != 1:
            mixed = next(t for t, c, pair in zip(texts, calls, pairs) if not c.distinct or pair != pairs[0])
            raise PlanError("DISTINCT aggregates are supported when every aggregate is DISTINCT over the "
                            "same argument", node=label, column=snippet_text(mixed))
        argument, second = calls[0].arg, _distinct_second(calls[0])
        source = self._node if source is None else source
        # project the arguments that are no columns first, so the inner aggregation groups by columns
        projected = [(argument, f"{names[0]}$distinct")] + (
            [] if second is None else [(second, f"{names[0]}$distinct2")])
        columns = [value.name if isinstance(value, ColumnRef) else name for value, name in projected]
        if not all(isinstance(value, ColumnRef) for value, _ in projected):
            outputs = {k: ColumnRef(k, source.output_schema.field(k).type) for k in keys}
            for column, (value, _) in zip(columns, projected):
                outputs.setdefault(column, value)
            source = ProjectNode(id=self._ids.next_id(), sources=(source,),
                                 output_schema=pa.schema([pa.field(n, e.dtype) for n, e in outputs.items()]),
                                 names=tuple(outputs), expressions=tuple(outputs.values()))
        distinct_keys = tuple(dict.fromkeys(keys + tuple(columns)))
        schema = aggregation_output_schema(AggregationStep.SINGLE,
                                           [source.output_schema.field(key) for key in distinct_keys], (), ())
        source = AggregationNode(id=self._ids.next_id(), output_schema=schema, sources=(source,),
                                 step=AggregationStep.SINGLE, grouping_keys=distinct_keys,
                                 aggregate_names=(), aggregates=())
        plain = [ColumnRef(column, schema.field(column).type) for column in columns]
        # string_agg(DISTINCT x ORDER BY x) orders the distinct values themselves
        return source, tuple(dataclasses.replace(call, arg=plain[0], distinct=False,
                                                 second=plain[1] if second is not None else
                                                 plain[0] if call.second == argument else call.second)
                             for call in calls)

    def _find_partial(self, label: str) -> AggregationNode:
        node = self._node
        while isinstance(node, LocalPartitionNode) and node.sources:
            node = node.sources[0]
        if isinstance(node, AggregationNode) and node.step in (AggregationStep.PARTIAL, AggregationStep.INTERMEDIATE):
            return node
        raise PlanError("no partial or intermediate aggregation below (looking through LocalPartition nodes); "
                        "pass partial= when it lies in another fragment", node=label)

    def _merge_aggregation(self, step: AggregationStep, partial: AggregationNode | None) -> "PlanBuilder":
        def make(node_id: str, label: str) -> PlanNode:
            source = partial if partial is not None else self._find_partial(label)
            if not isinstance(source, AggregationNode) or source.step.output_is_final:
                raise PlanError("partial= must be a PARTIAL or INTERMEDIATE aggregation", node=label)
            keys = self._columns(source.grouping_keys, label, "grouping key")
            for name, call in zip(source.aggregate_names, source.aggregates):
                for f in (source.output_schema.field(n) for n in _intermediate_names(name, call)):
                    if f.name not in self._schema.names or self._schema.field(f.name).type != f.type:
                        raise PlanError(f"intermediate column {f.name}:{f.type} of {source.label} is missing "
                                        "from the input", node=label, column=f.name)
            if source.step is AggregationStep.PARTIAL:
                merged = final_step_aggregates(source.aggregates, source.aggregate_names)
            else:  # an INTERMEDIATE step's calls already read intermediate columns
                merged = source.aggregates
            schema = aggregation_output_schema(step, [self._schema.field(key) for key in keys],
                                               source.aggregate_names, merged)
            return AggregationNode(id=node_id, output_schema=schema, sources=(self._node,), step=step,
                                   grouping_keys=keys, aggregate_names=source.aggregate_names, aggregates=merged)

        return self._add("Aggregation", make)

    # -- joins ------------------------------------------------------------------------

    def hash_join(self, left_keys: Sequence[str], right_keys: Sequence[str], build_side: "PlanNode | PlanBuilder",
                  output_columns: Sequence[str], join_type: str = "inner",
                  filter: Snippet | None = None) -> "PlanBuilder":
        """Join the current plan (probe, left) with ``build_side`` (build, right) where the keys are equal.

        Parameters
        ----------
        left_keys, right_keys
            Key column names of each side, pairwise of compatible types.
        build_side
            The build input: a plan (or builder) made with a ``PlanBuilder``
            sharing this builder's id generator, so node ids stay unique.
        output_columns
            Columns of either side, in output order (semi and anti joins: probe
            columns only; right_semi and right_anti: build columns only). A name
            both sides have is ambiguous.
        join_type
            One of ``inner left right full left_semi anti null_aware_anti
            right_semi right_anti``.
        filter
            Optional extra condition (SQL) over both sides' columns.
        """

        def make(node_id: str, label: str) -> PlanNode:
            build = self._build_input(build_side, label)
            if join_type not in JOIN_TYPES:
                raise PlanError(f"join_type must be one of {', '.join(JOIN_TYPES)}", node=label, column=str(join_type))
            probe_schema, build_schema = self._schema, build.output_schema
            left = self._columns(left_keys, label, "left key")
            if isinstance(right_keys, str):
                raise PlanError("right keys must be a list of column names", node=label, column=right_keys)
            right = tuple(parse_column_name(name, build_schema, label, role="right key") for name in right_keys)
            if not left or len(left) != len(right):
                raise PlanError(f"a hash join needs as many right keys as left keys (at least one); got "
                                f"{len(left)} and {len(right)}", node=label)
            for left_key, right_key in zip(left, right):
                left_type, right_type = probe_schema.field(left_key).type, build_schema.field(right_key).type
                if join_key_layout(left_type) != join_key_layout(right_type):
                    raise PlanError(f"join keys {left_key}:{left_type} and {right_key}:{right_type} have "
                                    "incompatible types", node=label, column=f"{left_key} = {right_key}")
            if join_type == "null_aware_anti" and len(left) != 1:
                raise PlanError("a null_aware_anti join (NOT IN) takes exactly one key", node=label)
            probe_only = join_type in ("left_semi", "anti", "null_aware_anti")
            build_only = join_type in ("right_semi", "right_anti")
            schema = self._join_output(build, output_columns, label, join_type, probe_only, build_only)
            if filter is not None and join_type == "null_aware_anti":
                raise PlanError("a null_aware_anti join with a filter is not supported yet", node=label)
            return HashJoinNode(id=node_id, output_schema=schema, sources=(self._node, build),
                                join_type=join_type, left_keys=left, right_keys=right,
                                output_columns=tuple(schema.names), filter=self._join_filter(build, filter, label))

        return self._add("HashJoin", make)

    def nested_loop_join(self, build_side: "PlanNode | PlanBuilder", output_columns: Sequence[str],
                         filter: Snippet | None = None, join_type: str = "inner") -> "PlanBuilder":
        """Pair every row of the current plan (probe, left) with every row of ``build_side`` where ``filter`` holds.

        Parameters
        ----------
        build_side
            The build input (a plan or builder sharing this builder's id
            generator); all of it is kept in memory and broadcast to every
            probe driver, so it should be small (a scalar subquery's one row).
        output_columns
            Columns of either side, in output order; a name both sides have is ambiguous.
        filter
            Optional boolean condition (SQL) over both sides' columns; without
            one an inner join is a cross join.
        join_type
            One of ``inner left right full``.
        """

        def make(node_id: str, label: str) -> PlanNode:
            build = self._build_input(build_side, label)
            if join_type not in NESTED_LOOP_JOIN_TYPES:
                raise PlanError(f"join_type must be one of {', '.join(NESTED_LOOP_JOIN_TYPES)}", node=label,
                                column=str(join_type))
            schema = self._join_output(build, output_columns, label, join_type)
            return NestedLoopJoinNode(id=node_id, output_schema=schema, sources=(self._node, build),
                                      join_type=join_type, output_columns=tuple(schema.names),
                                      filter=self._join_filter(build, filter, label))

        return self._add("NestedLoopJoin", make)

    def cross_join(self, build_side: "PlanNode | PlanBuilder", output_columns: Sequence[str]) -> "PlanBuilder":
        """Pair every row of the current plan with every row of ``build_side`` (an inner nested loop join)."""
        return self.nested_loop_join(build_side, output_columns)

    def _build_input(self, build_side: "PlanNode | PlanBuilder", label: str) -> PlanNode:
        """Return a join's build plan, refusing one whose node ids clash with the probe side's."""
        build = build_side.plan() if isinstance(build_side, PlanBuilder) else build_side
        if not isinstance(build, PlanNode):
            raise PlanError("build_side must be a plan node or a PlanBuilder", node=label)
        probe_ids = {n.id for n in walk_plan(self._node)}
        for node in walk_plan(build):
            if node.id in probe_ids:
                raise PlanError(f"node id {node.id} is on both sides; build both with one PlanNodeIdGenerator",
                                node=label)
        return build

    def _join_output(self, build: PlanNode, output_columns: Sequence[str], label: str, join_type: str,
                     probe_only: bool = False, build_only: bool = False) -> pa.Schema:
        """Return a join's output schema: ``output_columns`` from either side (or only the probe's / build's)."""
        probe_schema, build_schema = self._schema, build.output_schema
        both = set(probe_schema.names) & set(build_schema.names)
        if isinstance(output_columns, str):
            raise PlanError("output_columns must be a list of column names", node=label, column=output_columns)
        fields = []
        for name in output_columns:
            if name in both:
                raise PlanError("output column is on both sides of the join", node=label, column=name)
            if name in probe_schema.names and not build_only:
                fields.append(probe_schema.field(name))
            elif name in build_schema.names and not probe_only:
                fields.append(build_schema.field(name))
            else:
                side = "probe (left) side" if probe_only else "build (right) side" if build_only else "either side"
                raise PlanError(f"unknown output column {name!r}; a {join_type} join outputs columns of the {side}",
                                node=label, column=name)
        _unique_names([f.name for f in fields], label)
        return pa.schema(fields)

    def _join_filter(self, build: PlanNode, filter: Snippet | None, label: str) -> Expr | None:
        """Translate a join filter over both sides' columns; it must be boolean and name no ambiguous column."""
        if filter is None:
            return None
        probe_schema, build_schema = self._schema, build.output_schema
        both = set(probe_schema.names) & set(build_schema.names)
        combined = pa.schema(list(probe_schema) + [f for f in build_schema if f.name not in both])
        condition = parse_expression(filter, combined, label)
        if pa.types.is_null(condition.dtype) and isinstance(condition, Literal):  # ON ... AND NULL: keeps no pair
            condition = Literal(None, pa.bool_())
        if not pa.types.is_boolean(condition.dtype):
            raise PlanError(f"a join filter must be boolean, got {condition.dtype}", node=label,
                            column=snippet_text(filter))
        for name in referenced_columns(condition):
            if name in both:
                raise PlanError("filter column is on both sides of the join", node=label, column=name)
        return condition

    # -- partitioning -----------------------------------------------------------------

    def local_partition(self, keys: Sequence[str]) -> "PlanBuilder":
        """Repartition rows among this Task's drivers by hash of ``keys``; no keys gathers them."""

        def make(node_id: str, label: str) -> PlanNode:
            columns = self._columns(keys, label, "partition key")
            return LocalPartitionNode(id=node_id, output_schema=self._schema, sources=(self._node,),
                                      partition_kind="repartition" if columns else "gather", keys=columns)

        return self._add("LocalPartition", make)

    def union_all(self, *others: "PlanNode | PlanBuilder") -> "PlanBuilder":
        """Merge this plan's rows with those of ``others`` (SQL's UNION ALL): one LocalPartition fed by each.

        Why no node of its own: as in Velox, every branch is a producer pipeline of the Task and their rows meet
        in one local exchange. Each branch must yield the same column names and types, in order (cast and
        rename them first). Batches go round-robin (``arbitrary``) to the drivers of the pipeline above.
        """

        def make(node_id: str, label: str) -> PlanNode:
            sources = [self._node]
            for other in others:
                branch = self._build_input(other, label)
                if branch.output_schema.names != self._schema.names or any(
                        a.type != b.type for a, b in zip(branch.output_schema, self._schema)):
                    raise PlanError(f"a UNION ALL branch yields {branch.output_schema.to_string(show_schema_metadata=False)!r}"
                                    f" where the first yields {self._schema.to_string(show_schema_metadata=False)!r}; "
                                    "project each branch onto the same names and types", node=label)
                sources.append(branch)
            return LocalPartitionNode(id=node_id, output_schema=self._schema, sources=tuple(sources),
                                      partition_kind="arbitrary", keys=())

        return self._add("LocalPartition", make)

    def local_gather(self) -> "PlanBuilder":
        """Merge every driver's rows into one stream (LocalPartition GATHER)."""
        return self.local_partition([])

    def partitioned_output(self, keys: Sequence[str], num_partitions: int,
                           kind: str = "partitioned") -> "PlanBuilder":
        """Send rows to ``num_partitions`` consumer Tasks: by key hash, broadcast, or arbitrary."""

        def make(node_id: str, label: str) -> PlanNode:
            if kind not in _PARTITIONED_OUTPUT_KINDS:
                raise PlanError(f"kind must be one of {', '.join(_PARTITIONED_OUTPUT_KINDS)}", node=label, column=kind)
            if not isinstance(num_partitions, int) or num_partitions < 1:
                raise PlanError(f"num_partitions must be a positive integer, got {num_partitions!r}", node=label)
            columns = self._columns(keys, label, "partition key")
            return PartitionedOutputNode(id=node_id, output_schema=self._schema, sources=(self._node,),
                                         partition_kind=kind, keys=columns, num_partitions=num_partitions)

        return self._add("PartitionedOutput", make)

    # -- ordering and limits -------------------------------------------------------------

    def _sort_keys(self, keys: Sequence[str], label: str):
        if isinstance(keys, str) or not keys:
            raise PlanError("sort keys must be a non-empty list", node=label, column=str(keys))
        return tuple(parse_sort_key(text, self._schema, label) for text in keys)

    @staticmethod
    def _count(value: int, what: str, label: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise PlanError(f"{what} must be a non-negative integer, got {value!r}", node=label)
        return value

    def order_by(self, keys: Sequence[str], *, is_partial: bool = False) -> "PlanBuilder":
        """Sort by ``"name [ASC|DESC] [NULLS FIRST|LAST]"`` keys (default ASC NULLS LAST)."""
        return self._add("OrderBy", lambda node_id, label: OrderByNode(
            id=node_id, output_schema=self._schema, sources=(self._node,), keys=self._sort_keys(keys, label),
            is_partial=is_partial))

    def top_n(self, keys: Sequence[str], count: int, *, is_partial: bool = False,
              with_ties: bool = False) -> "PlanBuilder":
        """Keep the first ``count`` rows in key order; ``with_ties`` keeps the rows tied with the last one too
        (SQL's ``FETCH FIRST count ROWS WITH TIES``: the rows whose rank is at most ``count``)."""
        return self._add("TopN", lambda node_id, label: TopNNode(
            id=node_id, output_schema=self._schema, sources=(self._node,), keys=self._sort_keys(keys, label),
            count=self._count(count, "count", label), is_partial=is_partial, with_ties=bool(with_ties)))

    def limit(self, count: int, offset: int = 0, *, is_partial: bool = False) -> "PlanBuilder":
        """Skip ``offset`` rows, then pass at most ``count`` rows."""
        return self._add("Limit", lambda node_id, label: LimitNode(
            id=node_id, output_schema=self._schema, sources=(self._node,), count=self._count(count, "count", label),
            offset=self._count(offset, "offset", label), is_partial=is_partial))

    def window(self, partition_keys: Sequence[str], sort_keys: Sequence[str],
               functions: Sequence[str]) -> "PlanBuilder":
        """Compute window ``functions`` over the partitions of ``partition_keys``, ordered by ``sort_keys``.

        Velox's Window: the output is every input column, then one column per function. A function is
        ``"name(args) [OVER (frame)] [AS alias]"``, its arguments input columns and constants (``rank() AS r``,
        ``lag(x, 2, 0) AS prev``, ``sum(x) OVER (ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s``); sort keys
        are ``"name [ASC|DESC] [NULLS FIRST|LAST]"``. Without a frame a function reads SQL's default one
        (RANGE UNBOUNDED PRECEDING to CURRENT ROW: the whole partition when there are no sort keys).
        """

        def make(node_id: str, label: str) -> PlanNode:
            keys = self._columns(partition_keys, label, "partition key")
            if isinstance(sort_keys, str):
                raise PlanError("sort keys must be a list", node=label, column=sort_keys)
            order = tuple(parse_sort_key(text, self._schema, label) for text in sort_keys)
            if isinstance(functions, str) or not functions:
                raise PlanError("window functions must be a non-empty list of SQL snippets", node=label,
                                column=str(functions))
            pairs = [parse_window_function(text, self._schema, label, position=i) for i, text in enumerate(functions)]
            for _, call in pairs:
                check_frame_order(call, order, self._schema, label)
            names = tuple(name for name, _ in pairs)
            schema = pa.schema(list(self._schema) + [
                null_typed_field(name) if keeps_null_type(call, self._schema)
                else plan_field(name, call.dtype, hugeint=is_hugeint_result(call.dtype, call.args))
                for name, call in pairs])
            _unique_names(schema.names, label)
            return WindowNode(id=node_id, output_schema=schema, sources=(self._node,), partition_keys=keys,
                              sort_keys=order, function_names=names, functions=tuple(call for _, call in pairs))

        return self._add("Window", make)

    def top_n_row_number(self, partition_keys: Sequence[str], sort_keys: Sequence[str], limit: int,
                         row_number: str | None = None, *, function: str = "row_number",
                         is_partial: bool = False) -> "PlanBuilder":
        """Keep each partition's rows whose ``function()`` over ``sort_keys`` is at most ``limit``.

        Velox's TopNRowNumber: the rows of ``window(partition_keys, sort_keys, [f"{function}() AS n"])``
        filtered on ``n <= limit``, found as a top-``limit`` per partition instead of numbering every row.
        ``row_number`` names the function's output column (None: the output is the input's columns);
        ``function`` is ``row_number``, ``rank`` (ties with the last kept row stay) or ``dense_rank``.
        """

        def make(node_id: str, label: str) -> PlanNode:
            keys = self._columns(partition_keys, label, "partition key")
            if isinstance(sort_keys, str):
                raise PlanError("sort keys must be a list", node=label, column=sort_keys)
            order = tuple(parse_sort_key(text, self._schema, label) for text in sort_keys)
            if function not in RANK_FUNCTIONS:
                raise PlanError(f"TopNRowNumber computes {', '.join(RANK_FUNCTIONS)}, not {function!r}", node=label)
            fields = list(self._schema)
            if row_number is not None:
                if is_partial:
                    raise PlanError("a partial TopNRowNumber produces no row number column", node=label)
                if not isinstance(row_number, str) or not row_number:
                    raise PlanError(f"the row number column needs a name, got {row_number!r}", node=label)
                fields.append(pa.field(row_number, pa.int64()))
            schema = pa.schema(fields)
            _unique_names(schema.names, label)
            return TopNRowNumberNode(id=node_id, output_schema=schema, sources=(self._node,), partition_keys=keys,
                                     sort_keys=order, limit=self._count(limit, "limit", label), function=function,
                                     row_number_name=row_number, is_partial=bool(is_partial))

        return self._add("TopNRowNumber", make)

    def enforce_single_row(self) -> "PlanBuilder":
        """Pass the input's one row; no row gives one row of NULLs, several fail the query (a scalar subquery)."""
        return self._add("EnforceSingleRow", lambda node_id, label: EnforceSingleRowNode(
            id=node_id, output_schema=self._schema, sources=(self._node,)))

    # -- result ------------------------------------------------------------------------

    def plan(self) -> PlanNode:
        """Return the root of the plan built so far."""
        if self._node is None:
            raise PlanError("the plan is empty: start it with table_scan, values or exchange")
        return self._node
