"""Describe a query fragment as a tree of immutable plan nodes (Velox's core::PlanNode).

Every node has an ``id`` (unique in its plan, assigned by :class:`PlanBuilder`),
an ``output_schema`` resolved at build time, and ``sources``: its inputs. Nodes
are frozen, keyword-only dataclasses; passes over plans (validation, pipeline
splitting, explain, serialization) are free functions dispatched on node type,
never methods that mutate a node. ``dataclasses.replace(node, sources=...)``
rebuilds one.

The node kinds mirror Velox: Values, TableScan, Filter, Project, GroupId, Aggregation,
HashJoin, NestedLoopJoin, EnforceSingleRow, LocalPartition, OrderBy, TopN,
Limit, Window, TopNRowNumber, PartitionedOutput and Exchange; and Range, DuckDB's
``range``/``generate_series`` table functions, and Unnest (Velox's UnnestNode), which expands a series per input
row.
A Filter directly under a Project (or alone) becomes one FilterProject operator.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa

from gpu_engine.plans.expressions import AggregateCall, ColumnRef, Expr

__all__ = [
    "PlanNode",
    "ValuesNode",
    "RangeNode",
    "UnnestNode",
    "TableScanNode",
    "FilterNode",
    "ProjectNode",
    "GroupIdNode",
    "AggregationStep",
    "AggregationNode",
    "FusedAggregationNode",
    "JOIN_TYPES",
    "HashJoinNode",
    "NESTED_LOOP_JOIN_TYPES",
    "NestedLoopJoinNode",
    "EnforceSingleRowNode",
    "LocalPartitionNode",
    "SortKey",
    "OrderByNode",
    "TopNNode",
    "LimitNode",
    "WindowFrame",
    "WindowFunctionCall",
    "WindowNode",
    "RANK_FUNCTIONS",
    "TopNRowNumberNode",
    "PartitionedOutputNode",
    "ExchangeNode",
    "walk_plan",
    "find_node",
]


@dataclass(frozen=True, kw_only=True)
class PlanNode:
    """Base of every plan node."""

    id: str
    output_schema: pa.Schema = field(compare=False)
    sources: tuple["PlanNode", ...] = ()

    @property
    def kind(self) -> str:
        """Return the node kind as shown by explain (class name without ``Node``)."""
        return type(self).__name__.removesuffix("Node")

    @property
    def source(self) -> "PlanNode":
        """Return the only input of a single-input node."""
        if len(self.sources) != 1:
            raise ValueError(f"{self.kind}[{self.id}] has {len(self.sources)} sources")
        return self.sources[0]

    @property
    def label(self) -> str:
        """Return ``Kind[id]``, the name errors and explain use for this node."""
        return f"{self.kind}[{self.id}]"

    def describe(self) -> str:
        """Return the node's own details for explain (no sources, no schema)."""
        return ""


@dataclass(frozen=True, kw_only=True)
class ValuesNode(PlanNode):
    """Produce rows from an in-memory Arrow table (Velox's ValuesNode)."""

    data: pa.Table = field(compare=False, repr=False)

    def describe(self) -> str:
        return f"{self.data.num_rows} rows"


@dataclass(frozen=True, kw_only=True)
class RangeNode(PlanNode):
    """Produce ``start, start + step, ...`` up to ``stop`` (DuckDB's ``range`` / ``generate_series`` table functions).

    One BIGINT column, or TIMESTAMP where ``start``/``stop`` are timestamps and ``step`` an INTERVAL.
    ``start``, ``stop`` and ``step`` are constant expressions (no column references), evaluated once when the
    query runs (``generate_series(current_date - 7, current_date, INTERVAL 1 DAY)`` answers the day it runs);
    ``inclusive`` keeps ``stop`` itself (generate_series) or not (range). A NULL bound or step gives no rows,
    a zero step raises, as in DuckDB. The rows are generated on the device, split over the pipeline's
    drivers batch by batch, so ``range(10_000_000_000)`` never sits in memory.
    """

    start: Expr
    stop: Expr
    step: Expr
    inclusive: bool = False

    def describe(self) -> str:
        end = "stop" if self.inclusive else "stop (excluded)"
        return f"start: {self.start.sql()}, {end}: {self.stop.sql()}, step: {self.step.sql()}"


@dataclass(frozen=True, kw_only=True)
class UnnestNode(PlanNode):
    """Repeat each input row once per element of its own list, the element in a new last column (Velox's UnnestNode).

    The engine's columns hold no lists, so the list is named by the call that makes it, ``function`` over
    ``arguments`` (expressions over the input row), and never built: each row's length is computed, and the output
    rows are the input rows repeated that often with the element beside them. The lists:

    * ``range`` / ``generate_series`` (start, stop, step: BIGINT; stop excluded / included): DuckDB's
      ``FROM t, generate_series(1, t.n)`` and ``unnest(generate_series(...))``; BIGINT elements. A NULL argument
      gives no rows, a zero step raises, as in DuckDB.
    * ``string_split`` (text, separator: VARCHAR): DuckDB's ``unnest(string_split(s, ','))``, Spark's
      ``explode(split(s, ','))``; VARCHAR pieces. A NULL text gives no rows; a NULL separator the whole text; an
      empty one its characters.

    ``outer`` (Spark's ``LATERAL VIEW OUTER``, DuckDB's ``LEFT JOIN LATERAL generate_series(...) ON true``): a row
    whose ``string_split`` list is NULL, or whose series is empty or NULL, gives one row, its element NULL, instead
    of none.

    Output: the input's columns, then the element.
    """

    function: str
    arguments: tuple[Expr, ...]
    outer: bool = False

    def describe(self) -> str:
        outer = " outer" if self.outer else ""
        return f"{self.output_schema.names[-1]}: {self.function}({', '.join(a.sql() for a in self.arguments)}){outer}"


@dataclass(frozen=True, kw_only=True)
class TableScanNode(PlanNode):
    """Read ``columns`` of a registered table; the Task's splits say which pieces."""

    table_name: str
    columns: tuple[str, ...]

    def describe(self) -> str:
        return f"table: {self.table_name}, columns: {', '.join(self.columns)}"


@dataclass(frozen=True, kw_only=True)
class FilterNode(PlanNode):
    """Keep rows where ``predicate`` is true (NULL counts as false)."""

    predicate: Expr

    def describe(self) -> str:
        return f"expression: {self.predicate.sql()}"


@dataclass(frozen=True, kw_only=True)
class ProjectNode(PlanNode):
    """Compute one output column per expression, named by ``names``."""

    names: tuple[str, ...]
    expressions: tuple[Expr, ...]

    def describe(self) -> str:
        return "expressions: " + ", ".join(f"({n}:{e.sql()})" for n, e in zip(self.names, self.expressions))


@dataclass(frozen=True, kw_only=True)
class GroupIdNode(PlanNode):
    """Repeat every input row once per grouping set, the keys outside the set NULL (Velox's GroupIdNode).

    ``GROUP BY GROUPING SETS / ROLLUP / CUBE`` is this node under an ordinary
    aggregation keyed on ``key_names`` and ``group_id_name``: the group id keeps
    a key's own NULLs apart from the NULLs of the sets that leave it out, and
    makes the aggregation a plain one, PARTIAL and FINAL across drivers and
    stages. ``key_names[i]`` outputs input column ``key_inputs[i]``;
    ``grouping_sets`` name the keys each set keeps (set ``i`` gets group id
    ``i``, so a set written twice gives its groups twice, as SQL asks);
    ``aggregation_inputs`` pass through unchanged (a column that is also a key
    is passed under its own name, the key under another). Output: the keys,
    the aggregation inputs, then the ``int64`` group id.
    """

    key_names: tuple[str, ...]
    key_inputs: tuple[str, ...]
    grouping_sets: tuple[tuple[str, ...], ...]
    aggregation_inputs: tuple[str, ...]
    group_id_name: str

    @property
    def global_grouping_sets(self) -> tuple[int, ...]:
        """Return the ids of the sets without keys: their aggregation gives a row even for empty input."""
        return tuple(i for i, keys in enumerate(self.grouping_sets) if not keys)

    def describe(self) -> str:
        keys = ", ".join(name if name == source else f"{name} := {source}"
                         for name, source in zip(self.key_names, self.key_inputs))
        sets = ", ".join("(" + ", ".join(keys_of_set) + ")" for keys_of_set in self.grouping_sets)
        inputs = ", ".join(self.aggregation_inputs)
        return f"[{keys}] sets: {sets}; inputs: [{inputs}]; id: {self.group_id_name}"


class AggregationStep(enum.Enum):
    """Velox's aggregation steps: raw->intermediate, intermediate->intermediate, ->final, raw->final."""

    PARTIAL = "partial"
    INTERMEDIATE = "intermediate"
    FINAL = "final"
    SINGLE = "single"

    @property
    def input_is_raw(self) -> bool:
        """Return True when the step reads raw input rather than intermediate results."""
        return self in (AggregationStep.PARTIAL, AggregationStep.SINGLE)

    @property
    def output_is_final(self) -> bool:
        """Return True when the step outputs final values rather than intermediate results."""
        return self in (AggregationStep.FINAL, AggregationStep.SINGLE)


@dataclass(frozen=True, kw_only=True)
class AggregationNode(PlanNode):
    """Group by ``grouping_keys`` (column names) and compute ``aggregates``.

    Output is the keys, then one column per aggregate in the order given (in an
    intermediate output an exact sum adds ``name$high``, its high 64 bits, and
    ``avg`` adds ``name$count``; see :func:`gpu_engine.plans.aggregates.intermediate_fields`).
    For FINAL and INTERMEDIATE steps each aggregate's ``arg`` is a ColumnRef to
    the intermediate column of that name.

    Over a :class:`GroupIdNode`, ``global_grouping_sets`` are the group ids of
    its sets without keys and ``group_id_key`` its group id column: a step
    reading raw rows adds those groups (every other key NULL) even when it saw
    no row, as SQL gives ``GROUP BY ROLLUP (a)`` over an empty table its
    grand-total row (Velox's ``globalGroupingSets``); their empty states merge
    away wherever another driver did see rows.
    """

    step: AggregationStep
    grouping_keys: tuple[str, ...]
    aggregate_names: tuple[str, ...]
    aggregates: tuple[AggregateCall, ...]
    global_grouping_sets: tuple[int, ...] = ()
    group_id_key: str | None = None
    #: Whether parallel planning may split a SINGLE step into PARTIAL -> exchange -> FINAL
    #: (:mod:`gpu_engine.planning.local_exchanges`); False where the planner's estimates say a partial step
    #: would keep about a group per row (:mod:`gpu_engine.optimizer.partial_steps`): the raw rows cross the exchange.
    partial_step: bool = True
    #: The grouping keys parallel planning's exchange in front of this step hashes (:mod:`gpu_engine.planning.local_exchanges`);
    #: () for all of them. Set by :mod:`gpu_engine.optimizer.exchange_keys` to one fixed-width key of many
    #: distinct values where the others hold strings: any subset of the keys partitions the groups correctly.
    exchange_keys: tuple[str, ...] = ()

    def describe(self) -> str:
        aggs = ", ".join(f"{n} := {a.sql()}" for n, a in zip(self.aggregate_names, self.aggregates))
        keys = ", ".join(self.grouping_keys)
        text = f"{self.step.name} [{keys}] {aggs}".rstrip()
        if self.exchange_keys:
            text += f"; exchange on [{', '.join(self.exchange_keys)}]"
        if self.global_grouping_sets:
            text += f"; global sets: {self.group_id_key} in ({', '.join(map(str, self.global_grouping_sets))})"
        if not self.partial_step and self.step is AggregationStep.SINGLE:
            text += "; no partial step"
        return text


@dataclass(frozen=True, kw_only=True)
class FusedAggregationNode(PlanNode):
    """Filters, projections and an aggregation run as one generated kernel per batch.

    Made by the fusion pass (:mod:`gpu_engine.planning.fusion`), never by
    PlanBuilder. Its expressions read the source's columns directly: the
    projections it replaced are inlined into ``grouping_keys`` and the
    aggregates' arguments. ``predicates`` apply in order (a row failing one is
    not evaluated further). A FINAL or INTERMEDIATE step has neither
    predicates nor projections: it merges the partial results it reads. The output is the aggregation's: ``key_names``,
    then the aggregates' columns. ``fused`` lists the labels of the nodes it
    replaced, for explain; ``replaced`` holds those nodes themselves (the
    AggregationNode first, then the Filters and Projects below it, top down),
    from which the operator builds its lowest tier: the operators the unfused
    plan would run, for batches that arrive before the kernel is compiled
    (:mod:`gpu_engine.codegen.background_compiles`).
    """

    predicates: tuple[Expr, ...]
    step: AggregationStep
    key_names: tuple[str, ...]
    grouping_keys: tuple[Expr, ...]
    aggregate_names: tuple[str, ...]
    aggregates: tuple[AggregateCall, ...]
    fused: tuple[str, ...]
    replaced: tuple["PlanNode", ...] = field(default=(), compare=False, repr=False)

    def describe(self) -> str:
        parts = []
        if self.predicates:
            parts.append("where " + " AND ".join(p.sql() for p in self.predicates))
        keys = ", ".join(name if isinstance(key, ColumnRef) and key.name == name else f"{name} := {key.sql()}"
                         for name, key in zip(self.key_names, self.grouping_keys))
        aggs = ", ".join(f"{n} := {a.sql()}" for n, a in zip(self.aggregate_names, self.aggregates))
        parts.append(f"{self.step.name} [{keys}] {aggs}".rstrip())
        parts.append("fused: " + ", ".join(self.fused))
        return "; ".join(parts)


JOIN_TYPES = ("inner", "left", "right", "full", "left_semi", "anti", "null_aware_anti", "right_semi", "right_anti")


@dataclass(frozen=True, kw_only=True)
class HashJoinNode(PlanNode):
    """Join the probe (left, ``sources[0]``) and build (right, ``sources[1]``) inputs on equal keys.

    ``join_type`` is one of :data:`JOIN_TYPES`: ``left_semi`` keeps probe rows
    with a match (EXISTS), ``anti`` those without one (NOT EXISTS), and
    ``null_aware_anti`` follows ``NOT IN``: nothing when the build side has a
    NULL key, and probe rows with a NULL key only when the build side is empty.
    ``right_semi`` / ``right_anti`` keep *build* rows with / without a matching
    probe row (Velox's kRightSemiFilter; EXISTS / NOT EXISTS with the small
    outer side as the build), so a big subquery side is probed, never built.
    ``filter`` is an extra condition over both sides' columns, evaluated on
    candidate pairs before a pair counts as a match. ``output_columns`` name
    columns of either side (Velox's outputType); semi and anti joins output
    probe columns only, right semi and right anti joins build columns only.
    ``fused`` lists the labels of the Filters the fusion pass folded into
    ``filter`` (see :mod:`gpu_engine.planning.fusion`). ``output_as_maps``,
    set by the same pass when a fused aggregation or a computing projection
    reads this join's output in its pipeline, makes the probe hand its pairs as gather maps over the probe
    batch and the build table instead of gathering output columns (the
    aggregation's kernel reads through them; see
    :attr:`~gpu_engine.columnar.batch.Batch.column_maps`).
    """

    join_type: str
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    output_columns: tuple[str, ...]
    filter: Expr | None = None
    fused: tuple[str, ...] = ()
    output_as_maps: bool = False

    @property
    def probe(self) -> "PlanNode":
        """Return the probe (left) input."""
        return self.sources[0]

    @property
    def build(self) -> "PlanNode":
        """Return the build (right) input, run as its own pipeline."""
        return self.sources[1]

    def describe(self) -> str:
        keys = ", ".join(f"{left} = {right}" for left, right in zip(self.left_keys, self.right_keys))
        text = f"{self.join_type.upper()} {keys}"
        text += f", filter: {self.filter.sql()}" if self.filter is not None else ""
        text += f"; fused: {', '.join(self.fused)}" if self.fused else ""
        return text + ("; output: gather maps" if self.output_as_maps else "")


NESTED_LOOP_JOIN_TYPES = ("inner", "left", "right", "full")


@dataclass(frozen=True, kw_only=True)
class NestedLoopJoinNode(PlanNode):
    """Pair every probe (``sources[0]``) row with every build (``sources[1]``) row (Velox's NestedLoopJoinNode).

    Joins without equal keys need it: a cross join (inner, no ``filter``) puts a
    scalar subquery's one row beside every row, and a non-equi ``filter`` over
    both sides' columns decides which pairs match. ``join_type`` is one of
    :data:`NESTED_LOOP_JOIN_TYPES`; outer joins add the unmatched rows of their
    side with NULLs for the other. ``output_columns`` name columns of either side.
    """

    join_type: str
    output_columns: tuple[str, ...]
    filter: Expr | None = None

    @property
    def probe(self) -> "PlanNode":
        """Return the probe (left) input."""
        return self.sources[0]

    @property
    def build(self) -> "PlanNode":
        """Return the build (right) input, run as its own pipeline."""
        return self.sources[1]

    def describe(self) -> str:
        return self.join_type.upper() + (f", filter: {self.filter.sql()}" if self.filter is not None else "")


@dataclass(frozen=True, kw_only=True)
class EnforceSingleRowNode(PlanNode):
    """Pass exactly one row: a scalar subquery's result (Velox's EnforceSingleRowNode).

    No input row gives one row of NULLs (SQL's value of an empty scalar
    subquery); more than one row fails the query.
    """

    def describe(self) -> str:
        return ""


@dataclass(frozen=True, kw_only=True)
class LocalPartitionNode(PlanNode):
    """Repartition rows inside a Task by key hash (``repartition``), merge them (``gather``) or pass whole batches
    round-robin (``arbitrary``: a UNION ALL's branches feeding every driver of the pipeline above, as Velox does)."""

    partition_kind: str  # "repartition" | "gather" | "arbitrary"
    keys: tuple[str, ...] = ()

    def describe(self) -> str:
        return self.partition_kind.upper() + (f" [{', '.join(self.keys)}]" if self.keys else "")


@dataclass(frozen=True)
class SortKey:
    """One ORDER BY key; SQL's default (DuckDB's) is ascending with NULLS LAST."""

    name: str
    ascending: bool = True
    nulls_first: bool = False

    def sql(self) -> str:
        return f"{self.name} {'ASC' if self.ascending else 'DESC'} NULLS {'FIRST' if self.nulls_first else 'LAST'}"


@dataclass(frozen=True, kw_only=True)
class OrderByNode(PlanNode):
    """Sort all input; a pipeline barrier."""

    keys: tuple[SortKey, ...]
    is_partial: bool = False

    def describe(self) -> str:
        return ("PARTIAL " if self.is_partial else "") + ", ".join(k.sql() for k in self.keys)


@dataclass(frozen=True, kw_only=True)
class TopNNode(PlanNode):
    """Keep the first ``count`` rows in key order; ``with_ties`` also keeps the rows tied with the last of them."""

    keys: tuple[SortKey, ...]
    count: int
    is_partial: bool = False
    with_ties: bool = False

    def describe(self) -> str:
        return (("PARTIAL " if self.is_partial else "") + f"{self.count} " + ("WITH TIES " if self.with_ties else "")
                + ", ".join(k.sql() for k in self.keys))


@dataclass(frozen=True, kw_only=True)
class LimitNode(PlanNode):
    """Skip ``offset`` rows, then pass at most ``count`` rows."""

    count: int
    offset: int = 0
    is_partial: bool = False

    def describe(self) -> str:
        return ("PARTIAL " if self.is_partial else "") + f"{self.count}" + (f" offset {self.offset}" if self.offset else "")


#: Frame bound kinds of :class:`WindowFrame`, as SQL spells them.
FRAME_BOUNDS = ("UNBOUNDED PRECEDING", "PRECEDING", "CURRENT ROW", "FOLLOWING", "UNBOUNDED FOLLOWING")


@dataclass(frozen=True)
class WindowFrame:
    """The rows a window function reads around each row: ``kind`` ``ROWS`` or ``RANGE`` BETWEEN start AND end.

    A bound is one of :data:`FRAME_BOUNDS`; ``PRECEDING`` and ``FOLLOWING`` take a row count (``start_offset``,
    ``end_offset``), which only ``ROWS`` frames have here. SQL's default (DuckDB's) is
    ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``: with ORDER BY the rows up to the current one and its
    peers (rows of equal order keys), without ORDER BY the whole partition (every row is a peer).
    """

    kind: str = "RANGE"
    start: str = "UNBOUNDED PRECEDING"
    end: str = "CURRENT ROW"
    #: Rows (ROWS) or the distance in the ORDER BY key (RANGE): an int; in RANGE also a Decimal or float (over a
    #: number) or an IntervalValue (over a DATE or TIMESTAMP).
    start_offset: Any = 0
    end_offset: Any = 0
    #: The rows left out of each row's frame: "" (EXCLUDE NO OTHERS), "CURRENT ROW", "GROUP" (the row and its
    #: peers) or "TIES" (its peers, not the row).
    exclude: str = ""

    def sql(self) -> str:
        def bound(side: str, offset: Any) -> str:
            spelled = offset.sql() if hasattr(offset, "sql") else offset
            return f"{spelled} {side}" if side in ("PRECEDING", "FOLLOWING") else side

        text = f"{self.kind} BETWEEN {bound(self.start, self.start_offset)} AND {bound(self.end, self.end_offset)}"
        return text + (f" EXCLUDE {self.exclude}" if self.exclude else "")


@dataclass(frozen=True)
class WindowFunctionCall:
    """One window function: ``function`` over ``args`` (input columns and constants), typed ``dtype``, over ``frame``.

    Ranking functions (``row_number``, ``rank``, ``dense_rank``, ``percent_rank``, ``cume_dist``, ``ntile``) and
    ``lag``/``lead`` ignore the frame, as in SQL. ``ignore_nulls`` (value functions only) skips rows whose
    value is NULL: ``lag(x, 1 IGNORE NULLS)`` is the nearest earlier non-NULL ``x``.
    """

    function: str
    args: tuple[Expr, ...]
    dtype: pa.DataType
    frame: WindowFrame = WindowFrame()
    ignore_nulls: bool = False

    def sql(self) -> str:
        arguments = "*" if self.function == "count_star" else ", ".join(a.sql() for a in self.args)
        name = "count" if self.function == "count_star" else self.function
        arguments += " IGNORE NULLS" if self.ignore_nulls else ""
        return f"{name}({arguments})" + ("" if self.frame == WindowFrame() else f" OVER ({self.frame.sql()})")


@dataclass(frozen=True, kw_only=True)
class WindowNode(PlanNode):
    """Compute window functions over partitions of the input sorted by ``sort_keys`` (Velox's WindowNode).

    The output is every input column, then one column per function named by ``function_names``. All rows of
    a partition (equal ``partition_keys``, NULLs equal) must reach the same driver: the local exchange pass
    hash-partitions by the keys, or gathers when there are none.
    """

    partition_keys: tuple[str, ...]
    sort_keys: tuple[SortKey, ...]
    function_names: tuple[str, ...]
    functions: tuple[WindowFunctionCall, ...]

    def describe(self) -> str:
        parts = []
        if self.partition_keys:
            parts.append("partition by " + ", ".join(self.partition_keys))
        if self.sort_keys:
            parts.append("order by " + ", ".join(k.sql() for k in self.sort_keys))
        parts.append(", ".join(f"{n} := {f.sql()}" for n, f in zip(self.function_names, self.functions)))
        return "; ".join(parts)


#: The ranking functions a :class:`TopNRowNumberNode` bounds: each row's number within its partition.
RANK_FUNCTIONS = ("row_number", "rank", "dense_rank")


@dataclass(frozen=True, kw_only=True)
class TopNRowNumberNode(PlanNode):
    """Keep each partition's rows whose ``function`` value is at most ``limit`` (Velox's TopNRowNumberNode).

    The same rows as a Window computing ``function`` followed by a filter ``<= limit``, without sorting
    and numbering every row: ``row_number`` keeps the first ``limit`` rows of each partition in
    ``sort_keys`` order, ``rank`` also the rows tied with the last of them, ``dense_rank`` the rows of the
    first ``limit`` distinct sort-key values. The output is every input column, then the function's value
    named ``row_number_name`` when that is set (None: not produced). A partial step (``is_partial``, no
    number column) runs per driver or Task before the rows meet by partition keys; a row kept by the
    final step is kept by every partial step it passed, since its number among a subset of its partition
    is never larger than among the whole partition.
    """

    partition_keys: tuple[str, ...]
    sort_keys: tuple[SortKey, ...]
    limit: int
    function: str = "row_number"
    row_number_name: str | None = None
    is_partial: bool = False

    def describe(self) -> str:
        parts = ["PARTIAL" if self.is_partial else ""]
        if self.partition_keys:
            parts.append("partition by " + ", ".join(self.partition_keys))
        if self.sort_keys:
            parts.append("order by " + ", ".join(k.sql() for k in self.sort_keys))
        number = f"{self.row_number_name} := " if self.row_number_name else ""
        parts.append(f"{number}{self.function}() <= {self.limit}")
        return "; ".join(part for part in parts if part)


@dataclass(frozen=True, kw_only=True)
class PartitionedOutputNode(PlanNode):
    """Send rows to other Tasks: by key hash into ``num_partitions``, broadcast, or arbitrary."""

    partition_kind: str  # "partitioned" | "broadcast" | "arbitrary"
    keys: tuple[str, ...] = ()
    num_partitions: int = 1

    def describe(self) -> str:
        keys = f" [{', '.join(self.keys)}]" if self.keys else ""
        return f"{self.partition_kind.upper()}{keys} {self.num_partitions}"


@dataclass(frozen=True, kw_only=True)
class ExchangeNode(PlanNode):
    """Receive the pages other Tasks' PartitionedOutput sent to this Task."""

    def describe(self) -> str:
        return ""


def walk_plan(node: PlanNode) -> Iterator[PlanNode]:
    """Yield ``node`` and every node below it, parents first (each source's subtree before the next source's).

    An explicit stack, not recursion: a plan handed in directly can be deeper than the interpreter's stack
    (:mod:`gpu_engine.planning.plan_depth` names such a plan; walking it must get that far).
    """
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.sources))


def find_node(root: PlanNode, node_id: str) -> PlanNode:
    """Return the node with ``node_id`` under ``root``."""
    for node in walk_plan(root):
        if node.id == node_id:
            return node
    raise KeyError(f"no plan node with id {node_id!r}")
