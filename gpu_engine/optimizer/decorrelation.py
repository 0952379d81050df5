"""Decorrelate ``[NOT] EXISTS``, ``x [NOT] IN (SELECT …)`` and scalar subqueries of filters into semi, anti, null-aware
anti, inner and left joins (DataFusion's ``decorrelate_predicate_subquery`` and ``scalar_subquery_to_join``).

Why a typed rule: a subquery predicate (:mod:`gpu_engine.plans.subqueries`)
says what the query asks; the join that answers it is chosen here, over the
typed plan, for every plan — planned from SQL, built by hand with
:class:`~gpu_engine.plans.plan_builder.PlanBuilder` or read from JSON. No
operator evaluates a subquery per row, so this rule runs on every plan before
it executes, also with ``EngineConfig.optimize=False``
(:func:`~gpu_engine.optimizer.required_rewrites`).

Each conjunct of a Filter that is a subquery predicate becomes a join of the
Filter's input (probe side) with the subquery's plan (build side), applied in
the conjuncts' order after the Filter's other conjuncts:

* ``EXISTS`` is a ``left_semi`` join, ``NOT EXISTS`` an ``anti`` join, on the
  correlation's equalities of an outer expression with a subquery expression
  (each side that is not a plain column is projected first); the correlation's
  other conjuncts are the join's filter, over both sides' columns.
* ``x IN (SELECT c …)`` is an EXISTS whose first key is ``x = c``; ``x NOT IN
  (SELECT c …)`` (uncorrelated) a ``null_aware_anti`` join on it, which keeps
  SQL's three-valued answer: no row when ``c`` holds a NULL, a row with a NULL
  ``x`` only when the subquery is empty.

A key pair whose two sides join on different layouts (``plan_builder.join_key_layout``), or whose outer column
is already a key, stays in the filter as written; a correlation with no key left is refused by name, as is a
NOT IN with a correlation (write NOT EXISTS).

An EXISTS / IN under OR or NOT, inside an expression (a CASE) or in a Project's expressions is a **mark join**
(Velox's left semi project, DataFusion's ``LeftMark``; ``_mark``): every outer row kept once with a match flag, a
left join to the subquery's distinct keys (correlation equalities, IN's value with its column; an uncorrelated
EXISTS a row count, nested-loop joined); IN's flag is NULL-aware (NULL where nothing matched and the value or a
subquery value of the key is NULL, from counts per key), but where the predicate is reached through AND / OR
alone (NULL and FALSE drop the row alike). The Filter's conjunct reads the flags (and the values of scalar
subqueries beside them, joined as a Project's keeping every row); a projection back to its input's
columns follows. A correlation other than key equalities is refused by name there. The semi and anti joins
probe the outer side; :func:`~gpu_engine.optimizer.build_sides.build_smaller_sides` makes them right semi / right
anti joins that build a smaller outer side.

A quantified comparison ``x op ANY|ALL (SELECT c …)`` (:class:`~gpu_engine.plans.subqueries.QuantifiedComparison`)
is ``x IN`` for ``= ANY`` and ``x NOT IN`` for ``<> ALL``; the other forms are mark joins wherever they stand (a
conjunct too: ``x > ALL`` over no rows is TRUE, no semi join's answer), their flag SQL's three values over the
subquery's ``count(*)``, ``count(c)``, ``min(c)`` and ``max(c)`` per correlation key (``_quantified``). A bare
``NOT IN`` over a correlated subquery, which no null-aware anti join keys, is a NULL-aware mark join too.

A conjunct holding uncorrelated scalar subqueries (:class:`~gpu_engine.plans.subqueries.ScalarSubquery`, anywhere
in it: under OR, in arithmetic) becomes an inner nested-loop join of the Filter's input with each subquery's plan
under an EnforceSingleRow (added unless the plan ends in one: no row is one row of NULLs, several fail the
query), the conjunct, each subquery read as its build column, the last join's filter (DataFusion's
``scalar_subquery_to_join``, uncorrelated case; the SQL translator emits them for WHERE comparisons). These come
after the other conjuncts and before the EXISTS / IN joins.

A correlated scalar subquery (its ``correlation`` equalities of subquery columns with outer expressions: TPC-H Q20,
TPC-DS q1, q30, q41, q81) is a hash join on those keys with the subquery's rows per key (``scalar_subquery_to_join``
proper): an inner join whose filter is the conjunct where the conjunct is FALSE or NULL for an outer row meeting no
row (a NULL value through comparisons and arithmetic, or COUNT's 0 in ``count > 0``), else a left join, a Filter
and a projection back to the input's columns, an outer row without a match reading the subquery's value over no
rows — COUNT's 0 where the subquery is an aggregation grouped by exactly its correlation columns (the "COUNT bug";
through the projections above it: ``count(*) + 1`` is 1), NULL otherwise — through a match flag. A subquery plan
not known to give one row a key is grouped by the keys (``any_value`` and the row count; DuckDB's "More than one
row returned by a subquery used as an expression" for an outer row meeting several). Key pairs of two numeric
layouts join as their common type; a correlation other than key equalities is refused by name.

A scalar subquery in a Project's expressions (SELECT list, ORDER BY keys) is joined under the Project the same
way, every outer row kept: uncorrelated, a nested-loop join with its EnforceSingleRow side; correlated, a left hash
join on its keys with the value over no rows through the match flag (COUNT's 0 or NULL); an EXISTS / IN there is a
mark join's flag (the SQL planner types those correlated by column equalities, an uncorrelated IN or EXISTS:
:func:`gpu_engine.sql.subquery_values.typed_value_mark`). The Project keeps its id.

Node ids: the last join made of a Filter takes the Filter's id (a Filter of one subquery conjunct — how
the SQL planner emits them — becomes a join of the same id; with a left join, the projection back takes it);
other new nodes take ``<id>.<n>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa

from gpu_engine.errors import PlanError
from gpu_engine.optimizer.conjuncts import conjunction, conjuncts
from gpu_engine.optimizer.constant_folding import folded
from gpu_engine.plans.aggregates import aggregation_output_schema
from gpu_engine.plans.expressions import (
    ARITHMETIC_OPS, COMPARISON_OPS, AggregateCall, BinaryOp, Case, Cast, ColumnRef, Expr, Function, Literal, UnaryOp,
    walk,
)
from gpu_engine.plans.functions import SCALAR_SUBQUERY_VALUE
from gpu_engine.plans.nodes import (
    AggregationNode, AggregationStep, EnforceSingleRowNode, FilterNode, HashJoinNode, NestedLoopJoinNode, PlanNode,
    ProjectNode, WindowNode, walk_plan,
)
from gpu_engine.plans.plan_builder import join_key_layout
from gpu_engine.plans.subqueries import (
    Exists, InSubquery, OuterColumn, QuantifiedComparison, ScalarSubquery, is_subquery, is_subquery_predicate,
    transformed,
)

__all__ = ["decorrelate_subqueries", "holds_subqueries"]


def holds_subqueries(plan: PlanNode) -> bool:
    """Return True when a Filter or a Project of ``plan`` holds a subquery (the rule has work)."""
    return any(is_subquery(e) for node in walk_plan(plan) for e in _expressions_of(node))


def _expressions_of(node: PlanNode):
    """Yield every expression node of a Filter's predicate or a Project's expressions (where subqueries stand)."""
    if isinstance(node, FilterNode):
        yield from walk(node.predicate)
    elif isinstance(node, ProjectNode):
        for expr in node.expressions:
            yield from walk(expr)


def decorrelate_subqueries(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with every subquery of its Filters a join (the same object when it has none).

    Raises
    ------
    PlanError
        For a NOT IN with a correlation, a correlation with no equality of an outer and a subquery expression to
        join on, or a mark join's (an EXISTS / IN under OR, NOT, in an expression) correlation other than
        equalities.
    """
    if not holds_subqueries(plan):
        return plan
    decorrelator = _Decorrelator(plan)
    return decorrelator.as_tree(decorrelator.visit(plan))


class _Decorrelator:
    def __init__(self, plan: PlanNode):
        self.used: set[str] = set()
        self._collect_ids(plan)
        self.memo: dict[int, tuple[PlanNode, PlanNode]] = {}
        #: Subquery plan nodes (by id()) that take a new id: their own repeats an id of the outer plan or of an
        #: earlier subquery (see _repeated_ids).
        self.renamed: dict[int, str] = self._repeated_ids(plan)

    def _collect_ids(self, plan: PlanNode) -> None:
        for node in walk_plan(plan):
            self.used.add(node.id)
            for expr in _expressions_of(node):
                if is_subquery(expr):
                    self._collect_ids(expr.subquery)

    def _repeated_ids(self, plan: PlanNode) -> dict[int, str]:
        """Return a new id for each subquery node whose id an outer node or an earlier subquery's node has.

        Why: a subquery is a plan of its own, validated alone, and a hand-built one (a PlanBuilder of its own,
        a JSON document) numbers its nodes from the same start as the outer plan; joined in, two nodes had one
        id and the task handed one scan the other's splits ('split for node 0 after no_more_splits'). The
        outer plan's ids are kept (a caller may name them); one node object reached twice keeps its id.
        """
        owner: dict[str, int] = {}
        for node in walk_plan(plan):
            owner.setdefault(node.id, id(node))
        renamed: dict[int, str] = {}
        pending = [plan]
        while pending:
            for node in walk_plan(pending.pop(0)):
                for expr in _expressions_of(node):
                    subquery = getattr(expr, "subquery", None)  # any typed subquery (plans.subqueries)
                    if not isinstance(subquery, PlanNode):
                        continue
                    for inner in walk_plan(subquery):
                        if id(inner) in renamed or owner.setdefault(inner.id, id(inner)) == id(inner):
                            continue
                        renamed[id(inner)] = self.new_id(inner.id)
                        owner[renamed[id(inner)]] = id(inner)
                    pending.append(subquery)
        return renamed

    def new_id(self, base: str) -> str:
        n = 1
        while f"{base}.{n}" in self.used:
            n += 1
        self.used.add(f"{base}.{n}")
        return f"{base}.{n}"

    def visit(self, node: PlanNode) -> PlanNode:
        key = id(node)
        if key in self.memo:
            return self.memo[key][1]
        sources = tuple(self.visit(source) for source in node.sources)
        new = node
        if any(s is not o for s, o in zip(sources, node.sources)):
            new = replace(node, sources=sources)
        if key in self.renamed:
            new = replace(new, id=self.renamed[key])
        if isinstance(new, FilterNode):
            new = self._filter(new)
        elif isinstance(new, ProjectNode):
            new = self._project(new)
        self.memo[key] = (node, new)  # the node kept: its id() stays its own
        return new

    def _filter(self, node: FilterNode) -> PlanNode:
        parts = [_as_membership(part) for part in conjuncts(node.predicate)]
        # (a quantified comparison alone is a mark join's flag too: ALL's TRUE over no rows is no semi join's; so is
        # a NOT IN over a correlated subquery, NULL-aware, where no null-aware anti join keys it)
        subqueries = [part for part in parts if is_subquery_predicate(part) and not isinstance(
            part, QuantifiedComparison) and not (isinstance(part, InSubquery) and part.negated
                                                 and part.correlation is not None)]
        rest = [part for part in parts if not any(part is sub for sub in subqueries)]
        marked = [part for part in rest if _subquery_predicates(part)]  # under OR / NOT / inside an expression
        rest = [part for part in rest if not _subquery_predicates(part)]
        scalars = [part for part in rest if _scalar_subqueries(part)]
        rest = [part for part in rest if not _scalar_subqueries(part)]
        if not subqueries and not scalars and not marked:
            return node
        current = node.source
        names = tuple(current.output_schema.names)
        if rest:
            current = FilterNode(id=self.new_id(node.id), output_schema=current.output_schema, sources=(current,),
                                 predicate=conjunction(rest))  # (the other conjuncts first, as written)
        steps = len(scalars) + len(marked) + len(subqueries)
        for n, part in enumerate(scalars):
            join_id = node.id if n == steps - 1 else self.new_id(node.id)
            current = self._scalar_joined(current, part, join_id, names)
        for n, part in enumerate(marked, start=len(scalars)):
            join_id = node.id if n == steps - 1 else self.new_id(node.id)
            current = self._marked_filter(current, part, join_id, names, node.label)
        for n, subquery in enumerate(subqueries, start=len(scalars) + len(marked)):
            join_id = node.id if n == steps - 1 else self.new_id(node.id)
            current = self._joined(current, subquery, join_id, names, node.label)
        return current

    def _project(self, node: ProjectNode) -> PlanNode:
        """Return a Project whose expressions read scalar subqueries as one over its input joined with each: an
        uncorrelated one nested-loop joined (an EnforceSingleRow build side), a correlated one left hash joined on
        its keys, an outer row meeting no row reading the value over no rows (COUNT's 0 or NULL, through a match
        flag: :meth:`_correlated_joined`). The Project keeps its id and output; the joins take new ids.

        Why: a scalar subquery in SELECT (``SELECT a, (SELECT max(b) FROM u WHERE u.k = t.k) FROM t``, or over the
        grouping keys of an aggregating query) is a value of each output row, DataFusion's
        ``scalar_subquery_to_join`` over a projection; an EXISTS / IN there is a mark join's flag (:meth:`_mark`).
        """
        found: dict[int, ScalarSubquery] = {}
        predicates: dict[int, Exists | InSubquery | QuantifiedComparison] = {}
        expressions = tuple(_as_membership(expr) for expr in node.expressions)
        if any(a is not b for a, b in zip(expressions, node.expressions)):
            node = replace(node, expressions=expressions)
        for expr in node.expressions:
            for sub in walk(expr):
                if is_subquery_predicate(sub):
                    predicates.setdefault(id(sub), sub)
                if isinstance(sub, ScalarSubquery):
                    found.setdefault(id(sub), sub)
        if not found and not predicates:
            return node
        current = node.source
        taken = set(current.output_schema.names)
        values: dict[int, Expr] = {}
        for n, predicate in enumerate(predicates.values()):  # EXISTS / IN as values: mark joins, flags
            current, values[id(predicate)] = self._mark(current, predicate, f"{node.id}.m{n}", False, node.label)
        current = self._values_joined(current, list(found.values()), node.id, values)
        return replace(node, sources=(current,), expressions=tuple(
            transformed(expr, lambda sub: values.get(id(sub))) for expr in node.expressions))

    def _values_joined(self, outer: PlanNode, found: list[ScalarSubquery], join_id: str,
                       values: dict[int, Expr]) -> PlanNode:
        """Return ``outer`` joined with each scalar subquery of ``found``, every outer row kept once: an
        uncorrelated one nested-loop joined with its EnforceSingleRow side, a correlated one left hash joined on its
        keys (:meth:`_correlated_joined`: the value over no rows through the match flag); ``values`` gets the
        expression each subquery's value is over the result (by ``id``)."""
        current, taken = outer, set(outer.output_schema.names)
        for n, subquery in enumerate(found):
            if subquery.correlation is None:
                inner, name = self._single_row(subquery, join_id, n, taken)
                values[id(subquery)] = ColumnRef(name, subquery.dtype)
                fields = list(current.output_schema) + list(inner.output_schema)
                current = NestedLoopJoinNode(
                    id=self.new_id(join_id), output_schema=pa.schema(fields), sources=(current, inner),
                    join_type="inner", output_columns=tuple(f.name for f in fields))
            else:
                current, values[id(subquery)], _ = self._correlated_joined(current, subquery, join_id, n, taken,
                                                                           None)
        return current

    def _marked_filter(self, outer: PlanNode, part: Expr, join_id: str, names: tuple[str, ...],
                       label: str) -> PlanNode:
        """Return ``outer`` filtered by ``part``, a conjunct holding EXISTS / IN predicates under OR, NOT or inside
        an expression: each predicate a mark join's flag (:meth:`_mark`), each scalar subquery beside them (``c >
        (SELECT ...) OR EXISTS (...)``) a value of every outer row (:meth:`_values_joined`: as in a Project), then
        a Filter by ``part`` reading the flags and values and a projection back to the input's columns (the
        projection takes ``join_id``).

        Why not a semi join: under OR the row must stay when the predicate is false (TPC-DS q10, q35: ``EXISTS
        (web sales of c) OR EXISTS (catalog sales of c)``); under NOT, IN's NULL is not FALSE.
        """
        predicates = _subquery_predicates(part)
        positive = _positive_predicates(part)
        current = outer
        flags: dict[int, Expr] = {}
        for n, predicate in enumerate(predicates):
            current, flags[id(predicate)] = self._mark(current, predicate, f"{join_id}.m{n}",
                                                       id(predicate) in positive, label)
        # its scalar subqueries beside them (``c > (SELECT ...) OR EXISTS (...)``): values of every outer row
        current = self._values_joined(current, _scalar_subqueries(part), join_id, flags)
        current = FilterNode(id=self.new_id(join_id), output_schema=current.output_schema, sources=(current,),
                             predicate=transformed(part, lambda expr: flags.get(id(expr))))
        fields = {field.name: field for field in current.output_schema}
        return ProjectNode(id=join_id, output_schema=pa.schema([fields[c] for c in names]), sources=(current,),
                           names=names, expressions=tuple(ColumnRef(c, fields[c].type) for c in names))

    def _mark(self, outer: PlanNode, predicate: Exists | InSubquery, base: str, positive: bool,
              label: str) -> tuple[PlanNode, Expr]:
        """Return ``outer`` joined with the match flag of one EXISTS / IN (a mark join: Velox's left semi project,
        DataFusion's ``LeftMark``; every outer row kept once), and the predicate's value over the join's output.

        The flag is a left hash join on the correlation's key equalities (and IN's value with its column) to the
        subquery's distinct keys, the first of them (``k0``) NULL where no row matched (a NULL key matches
        nothing). EXISTS is ``k0 IS NOT NULL``; an uncorrelated EXISTS the subquery's row count (one row,
        nested-loop joined) compared with 0. IN is NULL-aware (SQL's three values, so NOT IN and IN as a value are right):
        TRUE on a match, else FALSE where the key has no subquery rows, else NULL where the value or some
        subquery value of the key is NULL, else FALSE; the row counts come from the subquery grouped by the
        correlation keys (``count(*)``, ``count(column)``), left joined (uncorrelated: one row, nested-loop
        joined). Where the predicate is ``positive`` (reached from its Filter conjunct through AND / OR only, so
        NULL and FALSE both drop the row) the counts are not needed and IN is ``k0 IS NOT NULL``.
        """
        name = f"$mark.{base}"
        inner, predicate = self._apart(outer, self.visit(predicate.subquery), predicate, base)
        if isinstance(predicate, QuantifiedComparison) and not isinstance(predicate.value, Expr):
            raise PlanError("a quantified comparison's value must be an expression", node=label)
        pairs: list[tuple[Expr, Expr]] = []
        for _part, pair in _correlation_pairs(predicate, label):
            if pair is None:
                raise PlanError("unsupported: an EXISTS / IN under OR, NOT or inside an expression whose "
                                "correlation is not equalities of an outer and a subquery expression (write it as "
                                "a conjunct of WHERE, or correlate by equalities)", node=label, column=predicate.sql())
            pairs.append(self._one_layout(*pair, predicate, label))
        if isinstance(predicate, QuantifiedComparison):
            return self._quantified(outer, inner, predicate, pairs, name, base, label)
        value = None
        if isinstance(predicate, InSubquery):
            if predicate.column not in inner.output_schema.names:
                raise PlanError(f"IN compares with column {predicate.column!r}, which its subquery does not output",
                                node=label, column=predicate.sql())
            column = ColumnRef(predicate.column, inner.output_schema.field(predicate.column).type)
            value = self._one_layout(predicate.value, column, predicate, label)
        if isinstance(predicate, Exists) and not pairs:  # uncorrelated: the row count, one row
            count = AggregateCall("count_star", None, pa.int64())
            counted = AggregationNode(
                id=self.new_id(base), sources=(inner,), step=AggregationStep.SINGLE, grouping_keys=(),
                aggregate_names=(f"{name}.n",), aggregates=(count,),
                output_schema=aggregation_output_schema(AggregationStep.SINGLE, [], (f"{name}.n",), (count,)))
            current = self._cross(outer, counted, base)
            flag: Expr = BinaryOp("gt", ColumnRef(f"{name}.n", pa.int64()), Literal(0, pa.int64()), pa.bool_())
            return current, UnaryOp("not", flag, pa.bool_()) if predicate.negated else flag
        keys = pairs + ([value] if value is not None else [])
        current, matched = self._left_joined(outer, inner, keys, name, "k", [], base, True)
        flag = UnaryOp("is_not_null", ColumnRef(matched, keys[0][1].dtype), pa.bool_())
        if value is not None and not positive:
            column = value[1]
            counts = (AggregateCall("count_star", None, pa.int64()), AggregateCall("count", column, pa.int64()))
            current, _ = self._left_joined(current, self._copied(inner, base), pairs, name, "c", [
                (f"{name}.n", counts[0]), (f"{name}.nn", counts[1])], base, False)
            rows, values = ColumnRef(f"{name}.n", pa.int64()), ColumnRef(f"{name}.nn", pa.int64())
            no_rows = BinaryOp("or", UnaryOp("is_null", rows, pa.bool_()),
                               BinaryOp("eq", rows, Literal(0, pa.int64()), pa.bool_()), pa.bool_())
            null = Literal(None, pa.bool_())
            flag = Case(((flag, Literal(True, pa.bool_())), (no_rows, Literal(False, pa.bool_())),
                         (UnaryOp("is_null", value[0], pa.bool_()), null),
                         (BinaryOp("gt", rows, values, pa.bool_()), null)), Literal(False, pa.bool_()), pa.bool_())
        return current, UnaryOp("not", flag, pa.bool_()) if predicate.negated else flag

    def _quantified(self, outer: PlanNode, inner: PlanNode, predicate: QuantifiedComparison,
                    pairs: list[tuple[Expr, Expr]], name: str, base: str, label: str) -> tuple[PlanNode, Expr]:
        """Return ``outer`` left joined with the facts of a quantified comparison's subquery per correlation key
        (``count(*)``, ``count(column)``, ``min``, ``max``; uncorrelated: one row, nested-loop joined), and the
        comparison's value over them, SQL's three values (:class:`~gpu_engine.plans.subqueries.QuantifiedComparison`).

        ``x > ANY`` holds where ``x > min`` (``<``: ``x < max``); ``x > ALL`` fails where ``x <= max``; ``<> ANY``
        holds and ``= ALL`` fails where ``x`` differs from ``min`` or ``max``. Past that: no rows (a key without
        rows: the left join's NULL count) gives ALL's TRUE and ANY's FALSE, then a NULL ``x`` or a NULL value of the
        subquery (``count(column) < count(*)``) NULL, else ALL's TRUE and ANY's FALSE.
        """
        column = ColumnRef(predicate.column, inner.output_schema.field(predicate.column).type)
        value, column = self._one_layout(predicate.value, column, predicate, label)
        int64 = pa.int64()
        facts = [(f"{name}.n", AggregateCall("count_star", None, int64)),
                 (f"{name}.nn", AggregateCall("count", column, int64)),
                 (f"{name}.lo", AggregateCall("min", column, column.dtype)),
                 (f"{name}.hi", AggregateCall("max", column, column.dtype))]
        current, _ = self._left_joined(outer, inner, pairs, name, "q", facts, base, False)
        rows, values = ColumnRef(f"{name}.n", int64), ColumnRef(f"{name}.nn", int64)
        lo, hi = ColumnRef(f"{name}.lo", column.dtype), ColumnRef(f"{name}.hi", column.dtype)
        boolean, every, op = pa.bool_(), predicate.every, predicate.op
        if op in ("eq", "ne"):  # <> ANY holds, = ALL fails, where x differs from the least or the greatest value
            decided: Expr = BinaryOp("or", BinaryOp("ne", value, lo, boolean), BinaryOp("ne", value, hi, boolean),
                                     boolean)
        else:  # x > ANY: above the least; x > ALL: above the greatest (fails where not)
            bound = lo if (op in ("gt", "ge")) != every else hi
            decided = BinaryOp(op, value, bound, boolean)
            if every:
                decided = UnaryOp("not", decided, boolean)
        no_rows = BinaryOp("or", UnaryOp("is_null", rows, boolean),
                           BinaryOp("eq", rows, Literal(0, int64), boolean), boolean)
        unknown = BinaryOp("or", UnaryOp("is_null", value, boolean), BinaryOp("lt", values, rows, boolean), boolean)
        flag = Case(((decided, Literal(not every, boolean)), (no_rows, Literal(every, boolean)),
                     (unknown, Literal(None, boolean))), Literal(every, boolean), boolean)
        return current, UnaryOp("not", flag, boolean) if predicate.negated else flag

    def _left_joined(self, outer: PlanNode, inner: PlanNode, keys: list[tuple[Expr, Expr]], name: str, tag: str,
                     aggregates: list[tuple[str, AggregateCall]], base: str, flag: bool) -> tuple[PlanNode, str]:
        """Return ``outer`` left joined with ``inner`` grouped by the inner sides of ``keys`` (with ``aggregates``)
        on those keys (no keys: ``inner`` aggregated to one row, nested-loop joined), and the first build key's
        name. The join emits ``outer``'s columns, the aggregates and, with ``flag``, that key: NULL exactly where no
        row matched, since a NULL key matches nothing. The keys and arguments are projected under new names
        (``<name>.<tag><i>``) unless each is already a column of ``inner`` no outer column is named as."""
        exprs = [inner_side for _, inner_side in keys] + [call.arg for _, call in aggregates if call.arg is not None]
        names = [e.name for e in exprs if isinstance(e, ColumnRef)]
        if len(names) == len(exprs) and len(set(names)) == len(names) and not set(names) & set(
                outer.output_schema.names):
            key_names, arg_names, projected = names[:len(keys)], names[len(keys):], inner
        else:
            key_names = [f"{name}.{tag}{i}" for i in range(len(keys))]
            arg_names = [f"{name}.{tag}a{i}" for i in range(len(exprs) - len(keys))]
            projected = ProjectNode(id=self.new_id(base), sources=(inner,), names=tuple(key_names + arg_names),
                                    output_schema=pa.schema([pa.field(n, e.dtype) for n, e in zip(
                                        key_names + arg_names, exprs)]), expressions=tuple(exprs))
        args = iter(arg_names)
        calls = tuple(replace(call, arg=ColumnRef(next(args), call.arg.dtype)) if call.arg is not None else call
                      for _, call in aggregates)
        agg_names = tuple(n for n, _ in aggregates)
        build: PlanNode = AggregationNode(
            id=self.new_id(base), sources=(projected,), step=AggregationStep.SINGLE, grouping_keys=tuple(key_names),
            aggregate_names=agg_names, aggregates=calls, output_schema=aggregation_output_schema(
                AggregationStep.SINGLE, [projected.output_schema.field(k) for k in key_names], agg_names, calls))
        if not keys:
            return self._cross(outer, build, base), ""
        outer_projected: list[tuple[str, Expr]] = []
        left = [self._key_name(outer_side, outer_projected, base) for outer_side, _ in keys]
        outer = self._projected(outer, outer_projected, base)
        emitted = [f for f in outer.output_schema] + [build.output_schema.field(n) for n in agg_names + (
            (key_names[0],) if flag else ())]
        return HashJoinNode(id=self.new_id(base), output_schema=pa.schema(emitted), sources=(outer, build),
                            join_type="left", left_keys=tuple(left), right_keys=tuple(key_names),
                            output_columns=tuple(f.name for f in emitted)), key_names[0]

    def _copied(self, plan: PlanNode, base: str) -> PlanNode:
        """Return ``plan`` with every node under a new id (a second use of a subquery's plan: plans are trees, and
        two nodes of one id would share one scan's splits)."""
        memo: dict[int, PlanNode] = {}

        def copy(node: PlanNode) -> PlanNode:
            if id(node) not in memo:
                memo[id(node)] = replace(node, id=self.new_id(base), sources=tuple(copy(s) for s in node.sources))
            return memo[id(node)]

        return copy(plan)

    def as_tree(self, plan: PlanNode) -> PlanNode:
        """Return ``plan`` with each node object reached a second time copied, its subtree under new ids.

        Why: one subquery object may stand in two Filters (the SQL planner's branches for ``count(DISTINCT v)``
        beside ``count(*)`` copy the outer plan, not the subquery inside its predicate), and ``visit`` joins it
        in as one plan object under both joins; the Task then handed its scan splits twice ('split for node 0
        after no_more_splits'). Plans are trees.
        """
        reached: set[int] = set()
        if all(not (id(n) in reached or reached.add(id(n))) for n in walk_plan(plan)):
            return plan
        seen: set[int] = set()
        copies: dict[int, PlanNode] = {}

        def fresh(node: PlanNode) -> PlanNode:  # a second use: every node new (one object twice within: one copy)
            if id(node) not in copies:
                copies[id(node)] = replace(node, id=self.new_id(node.id), sources=tuple(fresh(s) for s in node.sources))
            return copies[id(node)]

        def rebuild(node: PlanNode) -> PlanNode:
            if id(node) in seen:
                copies.clear()
                return fresh(node)
            seen.add(id(node))
            sources = tuple(rebuild(source) for source in node.sources)
            return node if all(a is b for a, b in zip(sources, node.sources)) else replace(node, sources=sources)

        return rebuild(plan)

    def _cross(self, outer: PlanNode, one_row: PlanNode, base: str) -> PlanNode:
        """Return ``outer`` nested-loop joined with a plan of one row (a global aggregation's)."""
        fields = list(outer.output_schema) + list(one_row.output_schema)
        return NestedLoopJoinNode(id=self.new_id(base), output_schema=pa.schema(fields), sources=(outer, one_row),
                                  join_type="inner", output_columns=tuple(f.name for f in fields))

    @staticmethod
    def _one_layout(outer_side: Expr, inner_side: Expr, predicate: Expr, label: str) -> tuple[Expr, Expr]:
        """Return a mark join's key pair cast to one join layout (numbers: their common type), else refuse it."""
        if join_key_layout(outer_side.dtype) == join_key_layout(inner_side.dtype):
            return outer_side, inner_side
        from gpu_engine.plans.type_coercion import common_type

        numeric = all(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                      for t in (outer_side.dtype, inner_side.dtype))
        try:
            target = common_type(outer_side.dtype, inner_side.dtype) if numeric else None
        except Exception:  # noqa: BLE001 - no common type: refused below
            target = None
        if target is None:
            raise PlanError(f"an EXISTS / IN compares {outer_side.dtype} with {inner_side.dtype}; cast one side",
                            node=label, column=predicate.sql())
        return (outer_side if outer_side.dtype == target else Cast(outer_side, target),
                inner_side if inner_side.dtype == target else Cast(inner_side, target))

    def _scalar_joined(self, outer: PlanNode, part: Expr, join_id: str, names: tuple[str, ...]) -> PlanNode:
        """Return ``outer`` joined with each scalar subquery of ``part``: an uncorrelated one nested-loop joined
        (an EnforceSingleRow build side), a correlated one hash joined on its keys (:meth:`_correlated_joined`);
        ``part`` the last join's filter (each subquery read as its build column), or a Filter over the joins where
        one is a left join."""
        found = _scalar_subqueries(part)
        if any(subquery.correlation is not None for subquery in found):
            return self._with_correlated(outer, part, found, join_id, names)
        taken = set(outer.output_schema.names)
        columns: dict[int, ColumnRef] = {}
        current = outer
        for n, subquery in enumerate(found):
            inner, name = self._single_row(subquery, join_id, n, taken)
            columns[id(subquery)] = ColumnRef(name, subquery.dtype)
            last = n == len(found) - 1
            output = names if last else tuple(current.output_schema.names) + (name,)
            fields = {field.name: field for source in (current, inner) for field in source.output_schema}
            current = NestedLoopJoinNode(
                id=join_id if last else self.new_id(join_id), output_schema=pa.schema([fields[c] for c in output]),
                sources=(current, inner), join_type="inner", output_columns=output,
                filter=transformed(part, lambda expr: columns.get(id(expr))) if last else None)
        return current

    def _single_row(self, subquery: ScalarSubquery, join_id: str, n: int, taken: set[str]) -> tuple[PlanNode, str]:
        """Return an uncorrelated subquery's plan under an EnforceSingleRow, and the column its value is."""
        inner = self.visit(subquery.subquery)
        if not isinstance(inner, EnforceSingleRowNode):
            inner = EnforceSingleRowNode(id=self.new_id(join_id), output_schema=inner.output_schema,
                                         sources=(inner,))
        name = subquery.column
        if name in taken:  # (a hand-built plan's subquery column named as an outer one)
            name = f"$scalar.{join_id}.{n}"
            inner = ProjectNode(id=self.new_id(join_id), output_schema=pa.schema([pa.field(name, subquery.dtype)]),
                                sources=(inner,), names=(name,),
                                expressions=(ColumnRef(subquery.column, subquery.dtype),))
        taken.add(name)
        return inner, name

    def _with_correlated(self, outer: PlanNode, part: Expr, found: list[ScalarSubquery], join_id: str,
                         names: tuple[str, ...]) -> PlanNode:
        """Return ``outer`` joined with ``part``'s scalar subqueries, at least one correlated, and filtered by it.

        One correlated subquery whose key without rows is NULL in a ``part`` that a NULL value fails (``x <
        (SELECT 0.2 * avg(…) …)``, TPC-H Q17) is an inner hash join whose filter is ``part`` (the join-ordering
        rule may move it among the other inner joins, as the SQL planner did); otherwise left joins, then a
        Filter and a projection back to the input's columns.
        """
        taken = set(outer.output_schema.names)
        values: dict[int, Expr] = {}
        current = outer
        inner_only = part if len(found) == 1 else None
        for n, subquery in enumerate(found):
            if subquery.correlation is None:
                inner, name = self._single_row(subquery, join_id, n, taken)
                values[id(subquery)] = ColumnRef(name, subquery.dtype)
                fields = list(current.output_schema) + list(inner.output_schema)
                current = NestedLoopJoinNode(
                    id=self.new_id(join_id), output_schema=pa.schema(fields), sources=(current, inner),
                    join_type="inner", output_columns=tuple(f.name for f in fields))
                continue
            current, value, inner_join = self._correlated_joined(current, subquery, join_id, n, taken, inner_only)
            values[id(subquery)] = value
            if inner_join:  # the one subquery, its join filtered by part and emitting the input's columns
                predicate = transformed(part, lambda expr: values.get(id(expr)))
                fields = {field.name: field for field in current.output_schema}
                return replace(current, id=join_id, filter=predicate, output_columns=names,
                               output_schema=pa.schema([fields[c] for c in names]))
        predicate = transformed(part, lambda expr: values.get(id(expr)))
        current = FilterNode(id=self.new_id(join_id), output_schema=current.output_schema, sources=(current,),
                             predicate=predicate)
        fields = {field.name: field for field in current.output_schema}
        return ProjectNode(id=join_id, output_schema=pa.schema([fields[c] for c in names]), sources=(current,),
                           names=names, expressions=tuple(ColumnRef(c, fields[c].type) for c in names))

    def _correlated_joined(self, outer: PlanNode, subquery: ScalarSubquery, join_id: str, n: int, taken: set[str],
                           part: Expr | None) -> tuple[HashJoinNode, Expr, bool]:
        """Return ``outer`` hash joined with a correlated scalar subquery's rows per key, the expression its value
        is over the join's output, and whether the join is inner.

        Inner where ``part`` (given for the one subquery of its conjunct) is FALSE or NULL for an outer row meeting
        no row: NULL through comparisons and arithmetic (``x < 0.2 * (…)``), or a value over no rows that folds
        so (``(SELECT count(*) …) > 0``, TPC-DS q41). The build side is the subquery's plan, projected where its
        keys need a cast or a name of the outer side's, or a match flag is needed (a left join and a value over
        no rows that is not NULL: COUNT's 0), under new names (``$scalar.<join>.<n>…``). A plan not known to give
        one row a key (an aggregation grouped by the keys, through projections) is grouped by the keys first, its
        value ``any_value`` beside the row count, and the value read through ``scalar_subquery_value``, which fails where an outer row meets several rows (DuckDB's
        error, raised only for rows that do).
        """
        label = subquery.sql()
        inner = self.visit(subquery.subquery)
        if subquery.column not in inner.output_schema.names:
            raise PlanError(f"a scalar subquery reads column {subquery.column!r}, which its subquery does not output",
                            column=label)
        pairs = []
        for conjunct in conjuncts(subquery.correlation):
            pair = _key_pair(conjunct)
            if pair is None:
                raise PlanError("unsupported: a correlated scalar subquery whose correlation is not equalities of "
                                "an outer and a subquery expression", column=label)
            pairs.append(pair)
        base = f"$scalar.{join_id}.{n}"
        key_columns = [_key_column(inner_side) for _, inner_side in pairs]
        unique, empty = _per_key_shape(inner, [c for c in key_columns if c is not None], subquery.column,
                                       all(c is not None for c in key_columns))
        value_type = inner.output_schema.field(subquery.column).type
        count_name = None
        if not unique:  # group it by the keys: any one value beside the row count
            keys = [(f"{base}.g{i}", side) for i, (_, side) in enumerate(pairs)]
            projected = ProjectNode(
                id=self.new_id(join_id), sources=(inner,),
                output_schema=pa.schema([pa.field(k, side.dtype) for k, side in keys]
                                        + [pa.field(f"{base}.x", value_type)]),
                names=tuple(k for k, _ in keys) + (f"{base}.x",),
                expressions=tuple(side for _, side in keys) + (ColumnRef(subquery.column, value_type),))
            calls = (AggregateCall("any_value", ColumnRef(f"{base}.x", value_type), value_type),
                     AggregateCall("count_star", None, pa.int64()))
            aggregate_names = (f"{base}.any", f"{base}.rows")
            inner = AggregationNode(
                id=self.new_id(join_id), sources=(projected,), step=AggregationStep.SINGLE,
                grouping_keys=tuple(k for k, _ in keys), aggregate_names=aggregate_names, aggregates=calls,
                output_schema=aggregation_output_schema(AggregationStep.SINGLE, [
                    projected.output_schema.field(k) for k, _ in keys], aggregate_names, calls))
            pairs = [(outer_side, ColumnRef(k, side.dtype)) for (outer_side, side), (k, _) in zip(pairs, keys)]
            value_column, count_name = f"{base}.any", f"{base}.rows"
            empty = None
        else:
            value_column = subquery.column
        inner_join = part is not None and (_rejects_null(part, subquery) if empty is None
                                           else _fails_over_no_rows(part, subquery, empty))
        if inner_join:
            empty = None  # every row joined met a row
        # the build side: keys (cast to one layout with the outer side's), value, row count, match flag
        outer_projected: list[tuple[str, Expr]] = []
        left: list[str] = []
        build: list[tuple[str, Expr]] = []
        for i, (outer_side, inner_side) in enumerate(pairs):
            if join_key_layout(outer_side.dtype) != join_key_layout(inner_side.dtype):
                target = _key_common_type(outer_side.dtype, inner_side.dtype, label)
                outer_side = outer_side if outer_side.dtype == target else Cast(outer_side, target)
                inner_side = inner_side if inner_side.dtype == target else Cast(inner_side, target)
            left.append(self._key_name(outer_side, outer_projected, join_id))
            build.append((f"{base}.k{i}", inner_side))
        build.append((base, ColumnRef(value_column, value_type)))
        if count_name is not None:
            build.append((f"{base}.rows", ColumnRef(count_name, pa.int64())))
        if empty is not None:
            build.append((f"{base}.matched", Literal(True, pa.bool_())))
        if all(isinstance(e, ColumnRef) and e.name not in taken for _, e in build) and len(
                {e.name for _, e in build}) == len(build):
            build = [(e.name, e) for _, e in build]  # its own columns serve (SQL plans name theirs apart)
            if len(build) < len(inner.output_schema):
                inner = ProjectNode(id=self.new_id(join_id), sources=(inner,), output_schema=pa.schema(
                    [inner.output_schema.field(name) for name, _ in build]), names=tuple(name for name, _ in build),
                    expressions=tuple(e for _, e in build))
        else:
            inner = ProjectNode(id=self.new_id(join_id), sources=(inner,),
                                output_schema=pa.schema([pa.field(name, e.dtype) for name, e in build]),
                                names=tuple(name for name, _ in build), expressions=tuple(e for _, e in build))
        value_name = build[len(left)][0]
        taken.update(name for name, _ in build)
        outer = self._projected(outer, outer_projected, join_id)
        value: Expr = ColumnRef(value_name, value_type)
        if count_name is not None:
            value = Function(SCALAR_SUBQUERY_VALUE, (value, ColumnRef(build[len(left) + 1][0], pa.int64())),
                             value_type)
        if empty is not None:
            value = Case(((UnaryOp("is_null", ColumnRef(build[-1][0], pa.bool_()), pa.bool_()),
                           empty if empty.dtype == value_type else Cast(empty, value_type)),), value, value_type)
        if value_type != subquery.dtype:
            value = Cast(value, subquery.dtype)
        fields = list(outer.output_schema) + list(inner.output_schema)
        join = HashJoinNode(id=self.new_id(join_id), output_schema=pa.schema(fields), sources=(outer, inner),
                            join_type="inner" if inner_join else "left", left_keys=tuple(left),
                            right_keys=tuple(name for name, _ in build[:len(left)]),
                            output_columns=tuple(f.name for f in fields))
        if count_name is not None and not inner_join:
            # checked on every joined row, as DuckDB checks at its join: a CASE branch no row takes fails too
            checked = f"{base}.checked"
            join = ProjectNode(id=self.new_id(join_id), sources=(join,), output_schema=pa.schema(
                fields + [pa.field(checked, value.dtype)]), names=tuple(f.name for f in fields) + (checked,),
                expressions=tuple(ColumnRef(f.name, f.type) for f in fields) + (value,))
            taken.add(checked)
            value = ColumnRef(checked, value.dtype)
        return join, value, inner_join

    def _joined(self, outer: PlanNode, predicate: Exists | InSubquery, join_id: str, names: tuple[str, ...],
                label: str) -> HashJoinNode:
        """Return ``outer`` semi (anti, null-aware anti) joined with the predicate's subquery."""
        inner, predicate = self._apart(outer, self.visit(predicate.subquery), predicate, join_id)
        null_aware = isinstance(predicate, InSubquery) and predicate.negated
        if null_aware and predicate.correlation is not None:
            raise PlanError("NOT IN over a correlated subquery (write NOT EXISTS)", node=label, column=predicate.sql())
        pairs: list[tuple[Expr, Expr, Expr | None]] = []  # (outer side, inner side, the conjunct as written)
        others: list[Expr] = []
        if isinstance(predicate, InSubquery):
            if predicate.column not in inner.output_schema.names:
                raise PlanError(f"IN compares with column {predicate.column!r}, which its subquery does not output",
                                node=label, column=predicate.sql())
            column = ColumnRef(predicate.column, inner.output_schema.field(predicate.column).type)
            pairs.append((predicate.value, column, None))
        for part, pair in _correlation_pairs(predicate, label):
            if pair is None:
                others.append(_as_joined(part))
            else:
                pairs.append((*pair, part))
        outer_projected: list[tuple[str, Expr]] = []
        inner_projected: list[tuple[str, Expr]] = []
        left: list[str] = []
        right: list[str] = []
        demoted: list[Expr] = []
        for outer_side, inner_side, written in pairs:
            if join_key_layout(outer_side.dtype) != join_key_layout(inner_side.dtype) or (
                    isinstance(outer_side, ColumnRef) and outer_side.name in left and not null_aware):
                if written is None:  # IN's own pair: no typed equality to filter on
                    raise PlanError(f"{'NOT ' if null_aware else ''}IN compares {outer_side.dtype} with "
                                    f"{inner_side.dtype}; cast one side", node=label, column=predicate.sql())
                demoted.append(_as_joined(written))
                continue
            left.append(self._key_name(outer_side, outer_projected, join_id))
            right.append(self._key_name(inner_side, inner_projected, join_id))
        if not left:
            raise PlanError("unsupported: a [NOT] EXISTS / IN whose correlation has no equality of an outer and a "
                            "subquery expression of one type to join on; cast one side", node=label,
                            column=predicate.sql())
        filters = others + demoted
        if null_aware and (filters or len(left) != 1):
            raise PlanError("a NOT IN with a condition beside its one key is not supported", node=label,
                            column=predicate.sql())
        outer = self._projected(outer, outer_projected, join_id)
        inner = self._projected(inner, inner_projected, join_id)
        both = set(outer.output_schema.names) & set(inner.output_schema.names)
        for expr in filters:
            for ref in walk(expr):
                if isinstance(ref, ColumnRef) and ref.name in both:
                    raise PlanError(f"column {ref.name!r} is both an outer column and a subquery column in a "
                                    "correlation; rename one", node=label, column=predicate.sql())
        join_type = "null_aware_anti" if null_aware else "anti" if predicate.negated else "left_semi"
        schema = pa.schema([outer.output_schema.field(name) for name in names])
        return HashJoinNode(id=join_id, output_schema=schema, sources=(outer, inner), join_type=join_type,
                            left_keys=tuple(left), right_keys=tuple(right), output_columns=names,
                            filter=_balanced(filters) if filters else None)

    def _apart(self, outer: PlanNode, inner: PlanNode, predicate: Exists | InSubquery,
               join_id: str) -> tuple[PlanNode, Exists | InSubquery]:
        """Return the subquery's plan with each column named as an outer column renamed (``$subquery.<join>.<name>``,
        projected), and the predicate reading it so.

        Why: a join's two inputs may not share a column name (PlanBuilder and the plan validator refuse one: it is
        ambiguous). A hand-built or JSON subquery over a table with the outer table's column names (``k IN
        (SELECT k FROM u)``) made a join on ``k`` of both sides: its filter was refused ('rename one'), and a
        semi or anti join that :mod:`~gpu_engine.optimizer.build_sides` swapped emitted the kept side's ``k`` as
        NULLs. SQL plans name their columns apart and pass through unchanged.
        """
        outer_names = set(outer.output_schema.names)
        clashing = [name for name in inner.output_schema.names if name in outer_names]
        if not clashing:
            return inner, predicate
        new = {name: f"$subquery.{join_id}.{name}" for name in clashing}
        schema = inner.output_schema
        names = tuple(new.get(name, name) for name in schema.names)
        inner = ProjectNode(id=self.new_id(join_id), output_schema=pa.schema(
            [pa.field(new.get(f.name, f.name), f.type, f.nullable) for f in schema]), sources=(inner,), names=names,
            expressions=tuple(ColumnRef(f.name, f.type) for f in schema))
        changes = {}
        if predicate.correlation is not None:  # its ColumnRefs are the subquery's columns (OuterColumns the outer's)
            changes["correlation"] = transformed(predicate.correlation, lambda node: ColumnRef(
                new[node.name], node.dtype) if isinstance(node, ColumnRef) and node.name in new else None)
        if isinstance(predicate, (InSubquery, QuantifiedComparison)):
            changes["column"] = new.get(predicate.column, predicate.column)
        return inner, replace(predicate, **changes)

    def _key_name(self, side: Expr, projected: list[tuple[str, Expr]], join_id: str) -> str:
        """Return the column a key side is: its own, or a projected one's (``$key.<join>.<n>``)."""
        if isinstance(side, ColumnRef):
            return side.name
        name = f"$key.{join_id}.{len(projected)}"
        projected.append((name, side))
        return name

    def _projected(self, node: PlanNode, projected: list[tuple[str, Expr]], join_id: str) -> PlanNode:
        """Return ``node`` with the key expressions ``projected`` computed beside its columns."""
        if not projected:
            return node
        schema = node.output_schema
        names = tuple(schema.names) + tuple(name for name, _ in projected)
        exprs = tuple(ColumnRef(field.name, field.type) for field in schema) + tuple(e for _, e in projected)
        out = pa.schema(list(schema) + [pa.field(name, expr.dtype) for name, expr in projected])
        return ProjectNode(id=self.new_id(join_id), output_schema=out, sources=(node,), names=names,
                           expressions=exprs)


#: Aggregates whose value over no rows is 0, not NULL (DuckDB's; ``count_if`` over no rows is NULL there).
_ZERO_WHEN_EMPTY = ("count", "count_star", "regr_count", "approx_count_distinct")


def _key_column(side: Expr) -> str | None:
    """Return the subquery column a correlation key's subquery side is (through a cast that keeps integers
    apart: an integer widened), else None."""
    while isinstance(side, Cast) and pa.types.is_integer(side.operand.dtype) and (
            pa.types.is_integer(side.dtype) and side.dtype.bit_width >= side.operand.dtype.bit_width
            or pa.types.is_decimal(side.dtype) or pa.types.is_float64(side.dtype)):
        side = side.operand
    return side.name if isinstance(side, ColumnRef) else None


def _per_key_shape(plan: PlanNode, keys: list[str], column: str, every_key: bool) -> tuple[bool, Expr | None]:
    """Return whether ``plan`` gives at most one row per value of its columns ``keys``, and the value its
    ``column`` takes over no input rows where that is not NULL (None: NULL).

    Known through projections down to an aggregation: grouped by keys among ``keys``, one row a key; grouped
    by exactly ``keys`` (``every_key``: each correlation key is a column), a key without rows is the group of
    no rows, whose COUNT is 0, and the projections' arithmetic over it is the value (``count(*) + 1``).
    """
    value: Expr = ColumnRef(column, plan.output_schema.field(column).type)
    node = plan
    while isinstance(node, ProjectNode):
        exprs = dict(zip(node.names, node.expressions))
        value = transformed(value, lambda ref, exprs=exprs: exprs[ref.name] if isinstance(ref, ColumnRef) else None)
        mapped = []
        for key in keys:
            below = exprs.get(key)
            if not isinstance(below, ColumnRef):
                return False, None
            mapped.append(below.name)
        keys = mapped
        node = node.sources[0]
    if isinstance(node, FilterNode):  # a row_number() <= 1 per key (a correlated ORDER BY ... LIMIT 1): one row a key
        return _first_row_per_key(node, keys), None
    if not isinstance(node, AggregationNode) or not node.step.output_is_final or node.group_id_key is not None:
        return False, None
    grouping = set(node.grouping_keys)
    if not grouping <= set(keys):
        return False, None
    if not (every_key and grouping == set(keys)):
        return True, None
    calls = dict(zip(node.aggregate_names, node.aggregates))

    def over_no_rows(ref: Expr) -> Expr | None:
        if not isinstance(ref, ColumnRef):
            return None
        call = calls.get(ref.name)
        zero = call is not None and call.function in _ZERO_WHEN_EMPTY
        return Literal(0, ref.dtype) if zero else Literal(None, ref.dtype)

    empty = transformed(value, over_no_rows)
    return True, None if _null_through_strict(empty) else empty


def _first_row_per_key(node: FilterNode, keys: list[str]) -> bool:
    """Return whether ``node`` keeps at most one row per value of ``keys``: conjuncts bounding a ``row_number()``
    of a Window partitioned by keys among ``keys`` to one number (``rn <= 1``, ``rn = 2``, ``rn > 1 AND rn <= 2``:
    LIMIT 1 OFFSET 1), through projections that pass them on.

    Why: a correlated ``(SELECT v ... ORDER BY x LIMIT 1)`` is planned as its first row per correlation key
    (:mod:`~gpu_engine.sql.correlated_scalar_rows`); without this the rule grouped those rows again (``any_value``
    and a row count, its check for several rows), ~15% more CPU than the left join of the rows
    (bench/results/2026-11-29-having.md).
    """
    ranges: dict[str, list[int]] = {}  # a column -> [lo, hi]: lo < rn <= hi
    for part in conjuncts(node.predicate):
        if isinstance(part, BinaryOp) and isinstance(part.left, ColumnRef) and isinstance(part.right, Literal) \
                and isinstance(part.right.value, int) and not isinstance(part.right.value, bool):
            bounds, c = ranges.setdefault(part.left.name, [0, 1 << 62]), part.right.value
            if part.op in ("le", "lt", "eq"):
                bounds[1] = min(bounds[1], c - (part.op == "lt"))
            if part.op in ("gt", "ge", "eq"):
                bounds[0] = max(bounds[0], c - (part.op != "gt"))
    bounded = {name for name, (lo, hi) in ranges.items() if hi - lo <= 1}
    current = node.sources[0]
    while isinstance(current, ProjectNode):
        exprs = dict(zip(current.names, current.expressions))
        renamed = [exprs.get(name) for name in keys]
        numbers = {exprs[name].name for name in bounded if isinstance(exprs.get(name), ColumnRef)}
        if not all(isinstance(ref, ColumnRef) for ref in renamed) or not numbers:
            return False
        keys, bounded, current = [ref.name for ref in renamed], numbers, current.sources[0]
    if not isinstance(current, WindowNode) or not set(current.partition_keys) <= set(keys):
        return False
    return any(name in bounded and call.function == "row_number"
               for name, call in zip(current.function_names, current.functions))


def _null_through_strict(expr: Expr) -> bool:
    """Return whether ``expr`` is NULL through NULL-strict operations (arithmetic, negation, casts) of a NULL."""
    if isinstance(expr, Literal):
        return expr.value is None
    if isinstance(expr, BinaryOp) and expr.op in ARITHMETIC_OPS:
        return _null_through_strict(expr.left) or _null_through_strict(expr.right)
    if isinstance(expr, UnaryOp) and expr.op == "negate" or isinstance(expr, Cast):
        return _null_through_strict(expr.operand)
    return False


def _rejects_null(part: Expr, subquery: ScalarSubquery) -> bool:
    """Return whether ``part`` is NULL (the row dropped) wherever ``subquery``'s value is: a comparison with a side
    holding the subquery under NULL-strict operations only, the other side not holding it."""
    if not (isinstance(part, BinaryOp) and part.op in COMPARISON_OPS):
        return False
    holding = [side for side in (part.left, part.right) if any(e is subquery for e in walk(side))]
    return len(holding) == 1 and _strictly_holds(holding[0], subquery)


def _strictly_holds(expr: Expr, subquery: ScalarSubquery) -> bool:
    if expr is subquery:
        return True
    if isinstance(expr, BinaryOp) and expr.op in ARITHMETIC_OPS:
        operands = [e for e in (expr.left, expr.right) if any(x is subquery for x in walk(e))]
        return len(operands) == 1 and _strictly_holds(operands[0], subquery)
    if isinstance(expr, UnaryOp) and expr.op == "negate" or isinstance(expr, Cast):
        return _strictly_holds(expr.operand, subquery)
    return False


def _fails_over_no_rows(part: Expr, subquery: ScalarSubquery, empty: Expr) -> bool:
    """Return whether ``part`` folds to FALSE or NULL with ``subquery`` read as its value over no rows ``empty``
    (``(SELECT count(*) …) > 0``; integer constants compared as one type; anything not folded: False)."""
    probe = transformed(part, lambda expr: empty if expr is subquery else None)
    probe = transformed(probe, lambda expr: Literal(expr.value, pa.int64()) if isinstance(expr, Literal) and isinstance(
        expr.value, int) and not isinstance(expr.value, bool) and pa.types.is_integer(expr.dtype) else None)
    result = folded(probe)
    return isinstance(result, Literal) and result.value is not True


def _key_common_type(outer: pa.DataType, inner: pa.DataType, label: str) -> pa.DataType:
    """Return the type a correlated scalar subquery's key pair of two layouts joins as (numbers: their common
    type, as DuckDB compares them), else refuse the pair by name."""
    from gpu_engine.plans.type_coercion import common_type

    numeric = all(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) for t in (outer, inner))
    if numeric:
        try:
            target = common_type(outer, inner)
        except Exception:  # noqa: BLE001 - no common type: refused below
            target = None
        if target is not None:
            return target
    raise PlanError(f"a correlated scalar subquery's correlation compares {outer} with {inner}; cast one side",
                    column=label)


def _as_membership(expr: Expr) -> Expr:
    """Return ``expr`` with each ``x = ANY (S)`` an ``x IN (S)`` and each ``x <> ALL (S)`` an ``x NOT IN (S)`` (SQL
    defines them so), which are semi, null-aware anti or mark joins; the other quantified comparisons stay."""
    def membership(node: Expr) -> Expr | None:
        if isinstance(node, QuantifiedComparison) and (node.op, node.every) in (("eq", False), ("ne", True)):
            return InSubquery(node.value, node.subquery, node.column, node.correlation,
                              negated=node.negated != node.every)
        return None

    return transformed(expr, membership)


def _subquery_predicates(expr: Expr) -> list[Exists | InSubquery]:
    """Return the EXISTS / IN predicates ``expr`` holds (outside other subqueries), each once, in reading order."""
    out: dict[int, Exists | InSubquery] = {}
    for node in walk(expr):
        if is_subquery_predicate(node):
            out.setdefault(id(node), node)
    return list(out.values())


def _positive_predicates(expr: Expr) -> set[int]:
    """Return the ids of the EXISTS / IN predicates reached from ``expr`` through AND and OR only (as a filter's
    conjunct: there a NULL and a FALSE both drop the row, so IN needs no NULL-aware flag)."""
    out, stack = set(), [expr]
    while stack:
        node = stack.pop()
        if is_subquery_predicate(node) and not node.negated:
            out.add(id(node))
        elif isinstance(node, BinaryOp) and node.op in ("and", "or"):
            stack.extend((node.left, node.right))
    return out


def _scalar_subqueries(expr: Expr) -> list[ScalarSubquery]:
    """Return the scalar subqueries ``expr`` holds (outside other subqueries), each once, in reading order."""
    out: dict[int, ScalarSubquery] = {}
    for node in walk(expr):
        if isinstance(node, ScalarSubquery):
            out.setdefault(id(node), node)
    return list(out.values())


def _sides(expr: Expr) -> tuple[bool, bool]:
    """Return whether ``expr`` reads outer columns, and whether it reads subquery columns."""
    outer = inner = False
    for node in walk(expr):
        if isinstance(node, OuterColumn):
            outer = True
        elif isinstance(node, ColumnRef):
            inner = True
        elif is_subquery_predicate(node):
            return True, True  # a nested subquery: never a key
    return outer, inner


def _correlation_pairs(predicate: Exists | InSubquery | QuantifiedComparison,
                       label: str) -> Iterator[tuple[Expr, tuple[Expr, Expr] | None]]:
    """Yield each conjunct of an EXISTS / IN's correlation with its :func:`_key_pair` (None where it is no equality
    of an outer and a subquery expression); a scalar subquery inside one is refused."""
    for part in conjuncts(predicate.correlation) if predicate.correlation is not None else []:
        if _scalar_subqueries(part):
            raise PlanError("a scalar subquery inside an EXISTS / IN correlation is not supported", node=label,
                            column=predicate.sql())
        yield part, _key_pair(part)


def _key_pair(part: Expr) -> tuple[Expr, Expr] | None:
    """Return (outer side over the outer row's columns, subquery side) of an equality joining the two, else None."""
    if not (isinstance(part, BinaryOp) and part.op == "eq"):
        return None
    left, right = _sides(part.left), _sides(part.right)
    if left == (True, False) and right == (False, True):
        return _as_joined(part.left), part.right
    if left == (False, True) and right == (True, False):
        return _as_joined(part.right), part.left
    return None


def _as_joined(expr: Expr) -> Expr:
    """Return ``expr`` with each outer column read as the join's probe column of that name."""
    return transformed(expr, lambda node: ColumnRef(node.name, node.dtype) if isinstance(node, OuterColumn) else None)


def _balanced(parts: list[Expr]) -> Expr:
    """Return ``parts`` AND-ed as a balanced tree, pairing neighbours level by level (the SQL planner's
    ``plans.sql_connectives.balanced``, so a filter it types reads the same)."""
    level = list(parts)
    while len(level) > 1:
        paired = [BinaryOp("and", level[i], level[i + 1], pa.bool_()) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]
