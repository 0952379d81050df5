"""The column sets a typed plan node's rows are proven unique on: no two output rows agree on every column of a set.

Why: a GROUP BY whose input is already unique on some of its grouping keys makes one group per input row, so
its partial step (:mod:`gpu_engine.optimizer.partial_steps`) shrinks nothing: it hashes every row, emits it,
and the final step hashes every row again. The estimates that rule reads see this only where a key column has a
distinct count; uniqueness that an earlier aggregation made (a GROUP BY over a derived table grouped by more
columns, a DISTINCT over a GROUP BY, a join that matches each row to at most one row of an aggregated side)
is known from the plan alone, whatever the statistics say.

Proven, never estimated: no declared keys (the catalog holds Arrow schemas only) and no statistics. "Unique"
means as a grouping compares rows (NULLs equal), so a set here makes one group per row of every aggregation
grouped by a superset of it. The facts, conservatively:

* a SINGLE or FINAL aggregation's rows are unique on its grouping keys (a global one, one row: on no column);
  ``EnforceSingleRow`` and ``LIMIT 1`` give at most one row;
* a filter keeps its input's sets, and a conjunct ``column = constant`` (not a float: ``-0.0 = 0.0``) makes
  the column constant: a set stays unique without its constant columns;
* a projection keeps a set whose columns it passes on as plain column references (renamed); a constant
  expression (``'w' AS sale_type``) outputs a constant column;
* an inner hash join keeps the probe side's sets when the build side is unique on its join keys (each probe row
  matches at most one build row), the build side's when the probe side is unique on its keys, and always the
  union of one set from each side (each output row is one pair); a join key dropped from the output is replaced
  by the column it equals on the other side; left/right joins keep the preserved side's sets when the other
  side is unique on its keys, semi and anti joins the kept side's;
* a nested-loop join with one side of at most one row keeps the other side's sets;
* order, limits, windows and a one-input local exchange keep the sets whose columns they output;
* a table scan is unique on the columns a caller's ``scans`` proves unique in the table, read from its rows
  (:func:`~gpu_engine.optimizer.statistics.unique_column`; never from min/max or a range: those estimate).

Anything else (scans without ``scans``, VALUES, UNION ALL, unnest, grouping sets' GroupId) is unique on nothing
known.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from gpu_engine.optimizer.conjuncts import conjuncts
from gpu_engine.plans.expressions import BinaryOp, Cast, ColumnRef, Expr, Literal, UnaryOp, walk
from gpu_engine.plans.nodes import (AggregationNode, AggregationStep, EnforceSingleRowNode, FilterNode,
                                    HashJoinNode, LimitNode, LocalPartitionNode, NestedLoopJoinNode, OrderByNode,
                                    PlanNode, ProjectNode, TableScanNode, TopNNode, TopNRowNumberNode, WindowNode)

__all__ = ["UniqueKeys", "is_unique_on", "unique_keys"]

#: At most this many sets are kept per node (the smallest first): pairs over joins of joins grow as a product.
MAX_SETS = 16


@dataclass(frozen=True)
class UniqueKeys:
    """The sets of output columns a node's rows are unique on (each without constant columns), and the columns
    every row holds the same value in."""

    sets: frozenset[frozenset[str]] = frozenset()
    constants: frozenset[str] = frozenset()

    def unique_on(self, columns) -> bool:
        """Return True when the rows are proven unique on ``columns`` (any superset of a set)."""
        have = frozenset(columns) | self.constants
        return any(s <= have for s in self.sets)


_NOTHING = UniqueKeys()
_ONE_ROW = UniqueKeys(frozenset({frozenset()}))


def unique_keys(plan: PlanNode, memo: dict | None = None, scans=None) -> UniqueKeys:
    """Return what ``plan``'s output rows are proven unique on (see the module docstring).

    ``memo`` (by node id) lets a caller walking a whole tree compute each node once (one memo per ``scans``).
    ``scans``: ``(table name, column) -> bool``, True where the column is proven unique in the table
    (:meth:`~gpu_engine.optimizer.statistics.RegisteredStatistics.unique_column`); None: scans are unique on
    nothing known.
    """
    memo = {} if memo is None else memo
    key = id(plan)
    if key not in memo:
        memo[key] = (plan, _keys(plan, memo, scans))  # the node kept: its id stays its own
    return memo[key][1]


def is_unique_on(plan: PlanNode, columns, memo: dict | None = None) -> bool:
    """Return True when ``plan``'s rows are proven unique on ``columns`` (or on a subset of them)."""
    return unique_keys(plan, memo).unique_on(columns)


def _made(sets, constants, outputs) -> UniqueKeys:
    """Return the sets (constants dropped from each) over ``outputs`` only, the smallest :data:`MAX_SETS`."""
    outputs, constants = frozenset(outputs), frozenset(constants)
    kept = {frozenset(s) - constants for s in sets}
    kept = {s for s in kept if s <= outputs}
    minimal = sorted((s for s in kept if not any(other < s for other in kept)), key=lambda s: (len(s), sorted(s)))
    return UniqueKeys(frozenset(minimal[:MAX_SETS]), constants & outputs)


def _keys(node: PlanNode, memo: dict, scans) -> UniqueKeys:
    outputs = node.output_schema.names
    if isinstance(node, TableScanNode):
        if scans is None:
            return _NOTHING
        return _made([frozenset({c}) for c in node.columns if scans(node.table_name, c)], (), outputs)
    if isinstance(node, AggregationNode):
        if node.step not in (AggregationStep.SINGLE, AggregationStep.FINAL):
            return _NOTHING
        below = unique_keys(node.sources[0], memo, scans)
        inherited = [s for s in below.sets if s <= frozenset(node.grouping_keys)]
        constants = below.constants & frozenset(node.grouping_keys)
        return _made([frozenset(node.grouping_keys), *inherited], constants, outputs)
    if isinstance(node, EnforceSingleRowNode):
        return _ONE_ROW
    if isinstance(node, FilterNode):
        below = unique_keys(node.sources[0], memo, scans)
        return _made(below.sets, below.constants | _fixed_columns(node.predicate), outputs)
    if isinstance(node, ProjectNode):
        return _projected(node, unique_keys(node.sources[0], memo, scans))
    if isinstance(node, LimitNode | TopNNode):
        if node.count <= 1 and not getattr(node, "with_ties", False) and not node.is_partial:
            return _ONE_ROW
        below = unique_keys(node.sources[0], memo, scans)
        return _made(below.sets, below.constants, outputs)
    if isinstance(node, OrderByNode | WindowNode | TopNRowNumberNode) or (
            isinstance(node, LocalPartitionNode) and len(node.sources) == 1):
        below = unique_keys(node.sources[0], memo, scans)
        return _made(below.sets, below.constants, outputs)
    if isinstance(node, HashJoinNode):
        return _hash_joined(node, unique_keys(node.probe, memo, scans), unique_keys(node.build, memo, scans))
    if isinstance(node, NestedLoopJoinNode):
        return _loop_joined(node, unique_keys(node.probe, memo, scans), unique_keys(node.build, memo, scans))
    return _NOTHING


def _fixed_columns(predicate: Expr) -> frozenset[str]:
    """Return the columns a conjunct ``column = constant`` fixes (not floats: ``-0.0 = 0.0`` yet they group apart)."""
    fixed = set()
    for part in conjuncts(predicate):
        if not (isinstance(part, BinaryOp) and part.op == "eq"):
            continue
        for column, other in ((part.left, part.right), (part.right, part.left)):
            if (isinstance(column, ColumnRef) and _is_constant(other)
                    and not pa.types.is_floating(column.dtype)):
                fixed.add(column.name)
    return frozenset(fixed)


def _is_constant(expr: Expr) -> bool:
    """Return True for an expression of literals only (``2001 + 1``): the same value on every row."""
    return all(isinstance(e, Literal | BinaryOp | UnaryOp | Cast) for e in walk(expr))


def _projected(node: ProjectNode, below: UniqueKeys) -> UniqueKeys:
    renames: dict[str, str] = {}  # input column -> one output name
    constants = set()
    for name, expr in zip(node.names, node.expressions):
        if isinstance(expr, ColumnRef):
            renames.setdefault(expr.name, name)
            if expr.name in below.constants:
                constants.add(name)
        elif _is_constant(expr):
            constants.add(name)
    sets = [frozenset(renames[c] for c in s) for s in below.sets if all(c in renames for c in s)]
    return _made(sets, constants, node.names)


def _hash_joined(node: HashJoinNode, probe: UniqueKeys, build: UniqueKeys) -> UniqueKeys:
    kind = node.join_type
    if kind in ("left_semi", "anti", "null_aware_anti"):
        return _made(probe.sets, probe.constants, node.output_schema.names)
    if kind in ("right_semi", "right_anti"):
        return _made(build.sets, build.constants, node.output_schema.names)
    build_unique = build.unique_on(node.right_keys)
    probe_unique = probe.unique_on(node.left_keys)
    if kind == "left":
        return _made(probe.sets if build_unique else (), probe.constants, node.output_schema.names)
    if kind == "right":
        return _made(build.sets if probe_unique else (), build.constants, node.output_schema.names)
    if kind != "inner":
        return _NOTHING
    sets = [p | b for p in probe.sets for b in build.sets]
    if build_unique:
        sets += probe.sets
    if probe_unique:
        sets += build.sets
    equal = {}
    for left, right in zip(node.left_keys, node.right_keys):
        equal.setdefault(left, right)
        equal.setdefault(right, left)
    outputs = frozenset(node.output_schema.names)
    constants = probe.constants | build.constants
    constants |= {c for c, other in equal.items() if other in constants}
    return _made([_through_equalities(s, equal, outputs) for s in sets], constants, outputs)


def _through_equalities(columns: frozenset[str], equal: dict[str, str], outputs: frozenset[str]) -> frozenset[str]:
    """Return ``columns`` with each one the join does not output replaced by the key it equals, where output."""
    return frozenset(equal[c] if c not in outputs and equal.get(c) in outputs else c for c in columns)


def _loop_joined(node: NestedLoopJoinNode, probe: UniqueKeys, build: UniqueKeys) -> UniqueKeys:
    outputs = node.output_schema.names
    build_one, probe_one = build.unique_on(()), probe.unique_on(())
    if node.join_type == "left":
        return _made(probe.sets if build_one else (), probe.constants, outputs)
    if node.join_type == "right":
        return _made(build.sets if probe_one else (), build.constants, outputs)
    if node.join_type != "inner":
        return _NOTHING
    sets = [p | b for p in probe.sets for b in build.sets]
    sets += (probe.sets if build_one else frozenset()) | (build.sets if probe_one else frozenset())
    return _made(sets, probe.constants | build.constants, outputs)
