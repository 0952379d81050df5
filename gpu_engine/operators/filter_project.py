"""Filter rows and compute projections in one operator (Velox's FilterProject).

A filter alone hands on its input with a gather map of the surviving rows, so
nothing is copied until someone reads a column. With fusion on (the default)
the predicate runs as one generated kernel per batch layout
(:mod:`gpu_engine.codegen.fused_filter_kernel`) that reads each input column
once, instead of one eager pass per expression node; a predicate the
generator cannot express is evaluated eagerly. A projection of plain column
references keeps that map too. With fusion on, a projection's computed
fixed-width columns come from one generated kernel per batch
(:class:`~gpu_engine.codegen.compiled_projection.CompiledProjection`) that
reads its inputs through the batch's maps; a computed string (or an expression
without row code) is evaluated eagerly on the gathered columns it reads.

A predicate is evaluated whole on every row of a batch; when that fails and it is a conjunction of which a
conjunct may fail (arithmetic, casts from text), the batch is filtered again a conjunct at a time, each on the
rows the others kept, as DuckDB answers ``WHERE b <> 0 AND a % b = 1`` (the common case pays nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from gpu_engine.codegen.compiled_predicate import CompiledPredicate
from gpu_engine.codegen.compiled_projection import CompiledProjection
from gpu_engine.codegen.fusion_program import FusionProgram
from gpu_engine.columnar.batch import Batch
from gpu_engine.errors import ExecutionError, MemoryCapExceeded
from gpu_engine.exec.made_once import MadePerNode
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.expressions import evaluate, evaluate_predicate
from gpu_engine.expressions.common_subexpressions import hoist_common_subexpressions, hoists_from_branches
from gpu_engine.expressions.deferred_checks import checks_read_together
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.plans.expressions import (BinaryOp, Cast, ColumnRef, Function, InList, Like, Literal, UnaryOp,
                                         referenced_columns, walk)
from gpu_engine.plans.functions import SCALAR_SUBQUERY_VALUE
from gpu_engine.plans.nodes import FilterNode, ProjectNode

__all__ = ["FilterProject"]


class _EagerExpressions:
    """Expressions evaluated one node at a time over the columns they read (shared subexpressions once).

    A shared subexpression is evaluated on every row; one that sits only in CASE branches may fail on a
    row no branch computes it for (``CASE WHEN b < 10 THEN a * b END`` overflowing where ``b >= 10``), so
    then the batch's expressions are evaluated as written (the CASE decides), as DuckDB answers.
    """

    def __init__(self, expressions: tuple):
        needed: dict[str, None] = {}
        for expression in expressions:
            needed.update(dict.fromkeys(referenced_columns(expression)))
        self.needed = tuple(needed)
        self.written = tuple(expressions)
        self.shared, self.expressions = hoist_common_subexpressions(self.written)
        #: Whether a shared one may fail where the expressions as written would not (checked in a scope of its own).
        self.from_branches = hoists_from_branches(self.written, self.shared)

    def evaluate(self, batch: Batch) -> tuple:
        """Return a column per expression over ``batch`` (its gather map applied to the columns read)."""
        if not self.expressions:
            return ()
        flat = batch.materialize(self.needed) if self.needed else Batch((), (), batch.device, None, batch.num_rows)
        if not self.from_branches:
            return self._with_shared(flat)
        try:
            with checks_read_together(flat.device, own_scope=True):  # learn of a failure here, to fall back
                return self._with_shared(flat)
        except ExecutionError:
            return tuple(evaluate(e, flat) for e in self.written)

    def _with_shared(self, flat: Batch) -> tuple:
        for name, expression in self.shared:
            flat = Batch(flat.names + (name,), flat.columns + (evaluate(expression, flat),), flat.device, None,
                         flat.num_rows)
        return tuple(evaluate(e, flat) for e in self.expressions)


@dataclass(frozen=True)
class _NodeSetup:
    """What a FilterProject derives from its nodes alone, shared by its drivers and runs (none changes it):
    the programs of its generated kernels (None: evaluated eagerly) and its eager expressions."""

    predicate: FusionProgram | None
    projection: FusionProgram | None
    compiled_positions: tuple[int, ...]  # the projection's expressions its kernel computes
    pass_through: bool
    eager: _EagerExpressions | None  # the expressions left to evaluate eagerly
    lowest_tier: _EagerExpressions | None  # every expression, while the kernel is not compiled yet
    guarded_conjuncts: tuple = ()  # the predicate's conjuncts when one of them may fail (see FilterProject)

    @classmethod
    def of(cls, device, filter_node: FilterNode | None, project_node: ProjectNode | None, fuse: bool) -> "_NodeSetup":
        predicate, conjuncts = None, ()
        if filter_node is not None:
            conjuncts = _guarded_conjuncts(filter_node.predicate)
        if filter_node is not None and fuse:
            schema = {f.name: f.type for f in filter_node.source.output_schema}
            compiled = CompiledPredicate.of(device, filter_node.predicate, schema, "lowest")
            predicate = None if compiled is None else compiled.program
        if project_node is None:
            return cls(predicate, None, (), False, None, None, conjuncts)
        pass_through = all(isinstance(e, ColumnRef) for e in project_node.expressions)
        projection, positions, eager = None, (), tuple(project_node.expressions)
        if fuse and not pass_through:
            projection, positions = _projection_program(device, project_node)
            eager = tuple(e for k, e in enumerate(project_node.expressions) if k not in positions)
        eager_expressions = _EagerExpressions(eager)
        lowest_tier = (_EagerExpressions(tuple(project_node.expressions)) if projection is not None
                       else eager_expressions)
        return cls(predicate, projection, positions, pass_through, eager_expressions, lowest_tier, conjuncts)


#: Comparison and boolean operators: they cannot fail on any row (arithmetic can overflow or divide by zero).
_SAFE_OPERATORS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "is_null", "is_not_null"})


def _may_fail(expression) -> bool:
    """Return whether ``expression`` may raise on some row (arithmetic, functions, casts from text...)."""
    for node in walk(expression):
        if isinstance(node, (ColumnRef, Literal, InList, Like)):
            continue
        if isinstance(node, (BinaryOp, UnaryOp)) and node.op in _SAFE_OPERATORS:
            continue
        if isinstance(node, Cast) and not pa.types.is_string(node.operand.dtype) \
                and not pa.types.is_large_string(node.operand.dtype) and pa.types.is_floating(node.dtype):
            continue
        return True
    return False


def _guarded_conjuncts(predicate) -> tuple:
    """Return the top-level conjuncts of ``predicate`` when there are several and one of them may fail, else ()."""
    conjuncts, stack = [], [predicate]
    while stack:
        node = stack.pop()
        if isinstance(node, BinaryOp) and node.op == "and":
            stack += [node.right, node.left]
        else:
            conjuncts.append(node)
    if len(conjuncts) < 2 or not any(_may_fail(c) for c in conjuncts):
        return ()
    return tuple(conjuncts)


def _row_count_checks(conjuncts) -> list:
    """Return a check of each ``scalar_subquery_value`` in ``conjuncts`` over its row count alone.

    Why: it fails where an outer row met several subquery rows, an error DuckDB raises in the join whatever the
    rest of WHERE says of the row (``b = (SELECT e FROM u WHERE u.c = t.a)`` fails for a = 2 meeting two rows
    although b equals neither); retried a conjunct at a time it was excused by ``b = v`` dropping the row.
    """
    checks = []
    for conjunct in conjuncts:
        for node in walk(conjunct):
            if isinstance(node, Function) and node.name == SCALAR_SUBQUERY_VALUE:
                checks.append(Function(SCALAR_SUBQUERY_VALUE, (Literal(True, pa.bool_()), node.args[1]), pa.bool_()))
    return checks


def _projection_program(device, node: ProjectNode) -> tuple[FusionProgram | None, tuple[int, ...]]:
    """Return the program of one kernel computing the computed fixed-width expressions, and their positions."""
    schema = {f.name: f.type for f in node.source.output_schema}
    computed = [k for k, e in enumerate(node.expressions) if not isinstance(e, ColumnRef)]
    compiled = CompiledProjection.of(device, [node.expressions[k] for k in computed], schema, "lowest")
    if compiled is None:  # keep the ones with row code together in one kernel, the rest eager
        computed = [k for k in computed if CompiledProjection.of(device, [node.expressions[k]], schema, "lowest")]
        compiled = CompiledProjection.of(device, [node.expressions[k] for k in computed], schema, "lowest") \
            if computed else None
    return (None, ()) if compiled is None else (compiled.program, tuple(computed))


_SETUPS: MadePerNode[_NodeSetup] = MadePerNode()


class FilterProject(Operator):
    """Apply an optional filter, then an optional projection, batch by batch."""

    def __init__(self, ctx: OperatorCtx, filter_node: FilterNode | None, project_node: ProjectNode | None):
        super().__init__(ctx, project_node or filter_node)
        self.predicate = filter_node.predicate if filter_node is not None else None
        self.project = project_node
        mode = ctx.config.compile_mode
        # Once per node (the filter, if any, is the project's source): not per driver, not per run of a kept plan.
        setup = _SETUPS.get(project_node or filter_node,
                            lambda: _NodeSetup.of(self.device, filter_node, project_node, ctx.config.fuse),
                            variant=(self.device.name, ctx.config.fuse))  # one node may run on two devices
        self._compiled = None if setup.predicate is None else CompiledPredicate(self.device, setup.predicate, mode)
        self._guarded_conjuncts = setup.guarded_conjuncts
        if project_node is not None:
            self._pass_through = setup.pass_through
            self._compiled_projection = (None if setup.projection is None
                                         else CompiledProjection(self.device, setup.projection, mode))
            self._compiled_positions = setup.compiled_positions
            self._eager = setup.eager
            #: Every expression, for batches that run before the projection's kernel is compiled.
            self._lowest_tier = setup.lowest_tier

    def add_input(self, batch: Batch) -> None:
        try:
            with checks_read_together(self.device):  # the predicate's and the projection's checks, in one host sync
                self._filter_and_project(batch)
        except MemoryCapExceeded:
            raise
        except ExecutionError:
            if not self._guarded_conjuncts:
                raise
            # A conjunct failed on a row another conjunct drops (WHERE b <> 0 AND a % b = 1, WHERE s SIMILAR TO
            # '[0-9]+' AND CAST(s AS INT) > 5): DuckDB evaluates a conjunct only on the rows the ones before it
            # (cheapest first) kept, so it answers. Evaluated so, a conjunct at a time; any other error again.
            self.input = None  # a deferred check raises after the failed try has set its (unchecked) output
            with checks_read_together(self.device):
                self._filter_and_project(batch, by_conjuncts=True)

    def _filtered_by_conjuncts(self, batch: Batch) -> Batch:
        """Return ``batch`` with the rows every conjunct holds for, each conjunct evaluated on the rows the
        others kept: one that fails is tried again once the others have dropped rows, until none fails or none
        drops more (then its error is raised)."""
        # DuckDB fails where an outer row meets several rows of a scalar subquery (in its join, before any filter
        # above): that check is no conjunct another excuses by dropping the row (:func:`_row_count_checks`)
        for check in _row_count_checks(self._guarded_conjuncts):
            evaluate(check, batch.materialize(referenced_columns(check)))
        pending = list(self._guarded_conjuncts)
        while pending:
            failed, first_error = [], None
            for conjunct in pending:
                try:
                    with checks_read_together(self.device, own_scope=True):
                        mask = evaluate_predicate(conjunct, batch.materialize(referenced_columns(conjunct)))
                except ExecutionError as error:
                    failed.append(conjunct)
                    first_error = first_error or error
                    continue
                selected = selection_from_mask(self.device, mask)
                if int(selected.shape[0]) < batch.num_rows:
                    batch = batch.with_gather_map(selected)
                if batch.num_rows == 0:
                    return batch
            if first_error is not None and len(failed) == len(pending):
                raise first_error  # no conjunct left drops the rows the failing ones fail on: the error stands
            pending = failed
        return batch

    def _filter_and_project(self, batch: Batch, by_conjuncts: bool = False) -> None:
        if self.predicate is not None and by_conjuncts:
            rows = batch.num_rows
            batch = self._filtered_by_conjuncts(batch)
            self.add_runtime_stat("filtered_rows", rows - batch.num_rows)
            if batch.num_rows == 0:
                return
        elif self.predicate is not None:
            # The kernel reads the columns through the batch's gather map; None until it is compiled.
            mask = self._compiled.mask(batch) if self._compiled is not None else None
            if mask is not None:
                self.add_runtime_stat("compiled_predicate_batches", 1)
            else:
                if self._compiled is not None:
                    self.add_runtime_stat("lowest_tier_batches", 1)
                mask = evaluate_predicate(self.predicate, batch.materialize(referenced_columns(self.predicate)))
            selected = selection_from_mask(self.device, mask)
            kept = int(selected.shape[0])
            self.add_runtime_stat("filtered_rows", batch.num_rows - kept)
            if kept == 0:
                return
            if kept < batch.num_rows:
                batch = batch.with_gather_map(selected)
        if self.project is not None:
            batch = self._project(batch)
        self.input = batch

    def _project(self, batch: Batch) -> Batch:
        node = self.project
        if self._pass_through:
            return batch.select([e.name for e in node.expressions], node.names)
        with checks_read_together(self.device):  # every expression's overflow checks, read back in one host sync
            compiled = self._compiled_projection.columns(batch) if self._compiled_projection is not None else None
            if compiled is None:
                if self._compiled_projection is not None:
                    self.add_runtime_stat("lowest_tier_batches", 1)
                columns = self._lowest_tier.evaluate(batch)
            else:
                self.add_runtime_stat("compiled_projection_batches", 1)
                compiled, eager = iter(compiled), iter(self._eager.evaluate(batch))
                columns = tuple(next(compiled) if k in self._compiled_positions else next(eager)
                                for k in range(len(node.expressions)))
        return Batch(node.names, columns, batch.device, None, batch.num_rows)

    def get_output(self) -> Batch | None:
        batch, self.input = self.input, None
        return batch
