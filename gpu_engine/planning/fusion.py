"""Fuse filter/project/aggregation stretches of a plan into nodes run by one generated kernel per batch.

Why: evaluated node by node, a stretch ``Filter -> Project -> Aggregation``
writes a column per expression, gathers each column through the filter's map
and runs one pass per aggregate: dozens of passes over memory and, on a GPU,
dozens of launches per batch. Fused, one kernel reads each input column once,
keeps everything else in registers and updates the aggregation state in the
same pass (Crystal, Sirius).

The pass replaces every PARTIAL or SINGLE :class:`AggregationNode` and the
Filters and Projects directly below it by one :class:`FusedAggregationNode`
whose expressions read the stretch's source columns (projections are inlined;
the generator computes each distinct subexpression once). FINAL and
INTERMEDIATE aggregations are fused alone: their kernel merges the partial
results by slot in one pass instead of one pass per aggregate. A stretch is fused
only if the generator can lower all of it
(:func:`~gpu_engine.codegen.fusion_program.plan_fusion_program` and
:func:`~gpu_engine.codegen.fused_aggregation_kernel.generate_fused_aggregation`
raise :class:`~gpu_engine.codegen.row_lowering.Unsupported` otherwise), so
fusion never changes what a plan can run, only how. ``EngineConfig.fuse=False``
skips the pass.

A fused aggregation or a computing Project directly above a hash join (any
join type; they share a pipeline) reads the join's output through the pairs'
gather maps: the join is marked ``output_as_maps`` and hands the probe batch's
and the build table's columns with the probe rows and build rows as maps,
which the aggregation's or the projection's kernel reads inside its loop, so
no output column of the join is gathered.

The probe side of an inner hash join fuses with the Filters above it (those
an aggregation did not take): their predicates, with the Projects between
inlined, join the join's own filter, which the probe evaluates as one
generated kernel over the candidate pairs
(:class:`~gpu_engine.codegen.compiled_predicate.CompiledPredicate`) before it
gathers any output column. Rows the filter drops are never materialized and
no FilterProject runs; the Projects stay above the join, in order (a filter
does not change a schema, so each still reads the names it read). Only inner
joins: above an outer join a filter also sees the NULL-extended rows, and
above an anti join it would change which rows count as matches.
"""

from __future__ import annotations

from dataclasses import fields, replace
from functools import singledispatch
from typing import Mapping

import pyarrow as pa

from gpu_engine.aggregation import aggregate_functions_of
from gpu_engine.codegen.fused_aggregation_kernel import KernelLayout, LIFTED_DICTIONARY, generate_fused_aggregation
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.codegen.kernel_bounds import refuse_before_planning, refuse_oversized
from gpu_engine.codegen.row_lowering import Unsupported
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Expr, InList, Literal
from gpu_engine.plans.functions import is_volatile
from gpu_engine.plans.nodes import (
    AggregationNode, FilterNode, FusedAggregationNode, HashJoinNode, PlanNode, ProjectNode,
)

__all__ = ["fuse_pipelines", "inline_columns"]


def inline_columns(expr: Expr, columns: Mapping[str, Expr]) -> Expr:
    """Return ``expr`` with every column reference replaced by its definition in ``columns``."""
    if isinstance(expr, ColumnRef):
        return columns.get(expr.name, expr)
    if isinstance(expr, Literal):
        return expr
    if isinstance(expr, InList):  # its values are literals: only the operand can read a column
        operand = inline_columns(expr.operand, columns)
        return expr if operand is expr.operand else replace(expr, operand=operand)
    changes = {}
    for item in fields(expr):
        value = getattr(expr, item.name)
        rebuilt = _inline_value(value, columns)
        if rebuilt is not value:
            changes[item.name] = rebuilt
    return replace(expr, **changes) if changes else expr


def _inline_value(value, columns):
    if isinstance(value, Expr):
        return inline_columns(value, columns)
    if isinstance(value, tuple):
        items = tuple(_inline_value(item, columns) for item in value)
        return items if any(a is not b for a, b in zip(items, value)) else value
    return value


def _inline_stretch(chain: list[PlanNode], below: PlanNode) -> tuple[dict[str, Expr], list[Expr]]:
    """Return a Filter/Project stretch (``chain``, top first, above ``below``) as expressions over ``below``'s columns.

    The result is ``(columns, predicates)``: each column name the top of the stretch outputs with its
    definition, and each Filter's predicate in order from ``below`` up, Projects below it inlined.
    """
    columns: dict[str, Expr] = {f.name: ColumnRef(f.name, f.type) for f in below.output_schema}
    predicates: list[Expr] = []
    for step in reversed(chain):  # from the source up
        if isinstance(step, FilterNode):
            predicates.append(inline_columns(step.predicate, columns))
        else:
            columns = {name: inline_columns(expr, columns) for name, expr in zip(step.names, step.expressions)}
    return columns, predicates


def _draws(chain: list[PlanNode]) -> bool:
    """Return True when a Project of ``chain`` computes ``random()``: inlined, each reader would draw anew."""
    return any(isinstance(step, ProjectNode) and any(is_volatile(expr) for expr in step.expressions) for step in chain)


def fuse_pipelines(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with every fusable filter/project/aggregation stretch replaced by a fused node."""
    return _fuse(plan)


@singledispatch
def _fuse(node: PlanNode) -> PlanNode:
    sources = tuple(_fuse(source) for source in node.sources)
    if all(a is b for a, b in zip(sources, node.sources)):
        return node
    return replace(node, sources=sources)


@_fuse.register(FilterNode)
@_fuse.register(ProjectNode)
def _(node: PlanNode) -> PlanNode:
    folded = _filters_into_join(node)
    if folded is None:
        return _projection_reads_join_maps(_fuse.dispatch(PlanNode)(node))
    return _fuse(folded)


def _projection_reads_join_maps(node: PlanNode) -> PlanNode:
    """Mark the hash join under a computing Project ``output_as_maps``: the projection's kernel reads its pairs.

    Only a Project that computes something: its FilterProject then hands on flat columns it made, so the
    join's maps never travel further (a pass-through projection or a filter would hand them on).
    """
    if not (isinstance(node, ProjectNode) and isinstance(node.source, HashJoinNode)
            and not all(isinstance(expr, ColumnRef) for expr in node.expressions)):
        return node
    return replace(node, sources=(replace(node.source, output_as_maps=True),))


def _filters_into_join(top: PlanNode) -> PlanNode | None:
    """Return the Filter/Project stretch at ``top`` with its Filters folded into the inner join below, or None."""
    chain: list[PlanNode] = []
    below = top
    while isinstance(below, (FilterNode, ProjectNode)):
        chain.append(below)
        below = below.source
    if not (isinstance(below, HashJoinNode) and below.join_type == "inner"
            and any(isinstance(step, FilterNode) for step in chain)) or _draws(chain):
        return None
    _, inlined = _inline_stretch(chain, below)
    predicates = ([below.filter] if below.filter is not None else []) + inlined
    condition = predicates[0]
    for predicate in predicates[1:]:
        condition = BinaryOp("and", condition, predicate, pa.bool_())
    fused = below.fused + tuple(step.label for step in reversed(chain) if isinstance(step, FilterNode))
    result: PlanNode = replace(below, filter=condition, fused=fused)
    for step in reversed(chain):
        if isinstance(step, ProjectNode):
            result = replace(step, sources=(result,))
    return result


@_fuse.register
def _(node: AggregationNode) -> PlanNode:
    fused = _fused_aggregation(node)
    if fused is None:
        return _fuse.dispatch(PlanNode)(node)
    source = _fuse(fused.source)
    if isinstance(source, HashJoinNode):
        # The aggregation's kernel reads the join's pairs through their maps: no output column is gathered.
        source = replace(source, output_as_maps=True)
    return replace(fused, sources=(source,))


def _fused_aggregation(node: AggregationNode) -> FusedAggregationNode | None:
    """Return the fused node replacing ``node`` and the Filters/Projects below it, or None when it cannot be fused."""
    # the fused operator adds no empty-input groups (raw and INTERMEDIATE steps do: hash_aggregation)
    if node.global_grouping_sets and (node.step.input_is_raw or not node.step.output_is_final):
        return None
    chain: list[PlanNode] = []
    below = node.source
    while node.step.input_is_raw and isinstance(below, (FilterNode, ProjectNode)):
        chain.append(below)
        below = below.source
    if _draws(chain):
        return None
    columns, predicates = _inline_stretch(chain, below)
    try:
        keys = tuple(columns[name] for name in node.grouping_keys)
    except KeyError:
        return None
    aggregates = tuple(
        call if call.arg is None else replace(call, arg=inline_columns(call.arg, columns),
                                              second=None if call.second is None
                                              else inline_columns(call.second, columns),
                                              then_by=tuple((inline_columns(key, columns), descending, nulls_first)
                                                            for key, descending, nulls_first in call.then_by))
        for call in node.aggregates)
    fused = FusedAggregationNode(
        id=node.id, output_schema=node.output_schema, sources=(below,), predicates=tuple(predicates), step=node.step,
        key_names=node.grouping_keys, grouping_keys=keys, aggregate_names=node.aggregate_names, aggregates=aggregates,
        fused=tuple(n.label for n in reversed(chain)) + (node.label,), replaced=(node, *chain))
    return fused if fusion_refusal(fused) is None else None


def fusion_refusal(node: FusedAggregationNode) -> str | None:
    """Return why the generator cannot produce ``node``'s kernel, or None when it can."""
    schema = {f.name: f.type for f in node.source.output_schema}
    try:
        refuse_before_planning((*node.predicates, *node.grouping_keys,
                                *(call.arg for call in node.aggregates if call.arg is not None)))
        functions = aggregate_functions_of(node)
        program = plan_fusion_program(node.predicates, node.grouping_keys, functions, schema)
        refuse_oversized(program, functions)  # per kernel where the aggregates split
        layout = KernelLayout(False, (True,) * len(program.columns), (LIFTED_DICTIONARY,) * len(program.lifted))
        generate_fused_aggregation(program, functions, layout)
    except (Unsupported, NotImplementedError) as reason:
        return str(reason)
    return None
