"""Plan a qualified sqlglot query into the engine's plan nodes: scans, joins, subqueries, aggregation, ordering.

The query arrives qualified (every column names its table alias, every
projection its output name; see :mod:`gpu_engine.sql.rewrite`). Each SELECT
is planned in this order, as a textbook optimizer would:

1. **Sources.** Every FROM item becomes a relation: a TableScan of the
   columns the query reads, or the plan of a derived table or CTE (planned at
   each reference: plans are trees, so a CTE referenced twice, as in TPC-H
   Q15, is computed twice — the executor has no shared subplans).
2. **Predicates.** The WHERE clause and inner-join ON conditions are split
   into conjuncts (common conjuncts of an OR are pulled out first, and an OR
   whose every branch restricts one table also filters that table, as TPC-H
   Q19 needs). A conjunct over one relation filters its scan; an equality of
   two relations' columns is a join edge; the rest are join filters applied
   as soon as their relations are joined. A constant conjunct (no column)
   keeps every row or none: TRUE is dropped, any other filters every input
   not NULL-extended by an outer join (FALSE or NULL empties them; one that
   fails, such as ``CAST('x' AS INTEGER) = 1``, fails on their first row).
3. **Subqueries.** ``x IN (SELECT …)`` is a left semi join (NOT IN a
   null-aware anti join), applied at the scan of ``x`` when it reads one
   table; ``[NOT] EXISTS`` is a semi (anti) join on its correlation
   equalities, with the other correlated conditions as the join filter (a
   semi or anti join of a smaller outer side is a right semi / right anti
   join that builds it); an uncorrelated scalar subquery (and an
   uncorrelated EXISTS, as a count) is an EnforceSingleRow build side of a
   nested-loop join; a correlated scalar aggregate (Q2, Q17, Q20) becomes
   the aggregate grouped by the correlation columns, joined like any
   relation, its input first restricted to the keys of the outer table's
   filtered rows (a "magic set" semi join). COUNT there is refused (its
   empty groups are 0, not NULL, which an inner join loses).
4. **Joins.** Greedy operator ordering: repeatedly join the two connected
   relations whose estimated result is smallest, building the smaller side
   (estimates: :mod:`gpu_engine.sql.statistics`). Queries with outer joins
   keep the written order; WHERE conditions on a NULL-extended side are
   applied after the joins, never pushed below them.
5. **Aggregation, HAVING, SELECT, DISTINCT, ORDER BY, LIMIT.** One
   single-step aggregation (the executor splits it into partial and final
   steps across drivers); ORDER BY with LIMIT is a TopN.

Every node is built through :class:`~gpu_engine.plans.plan_builder.PlanBuilder`
from SQL snippets over internal column names (the column's own name where it
is unique in the query, else ``alias.column``), so the builder's type checks
apply to SQL-planned queries as to hand-written plans.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from sqlglot import exp
from sqlglot.optimizer.simplify import simplify

from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanBuilder, _join_key_layout
from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES, allowed_argument, takes_order, unsupported_aggregate_text
from gpu_engine.sql.join_ordering import join_greedy, join_in_order
from gpu_engine.sql.mark_joins import with_mark_joins
from gpu_engine.sql.errors import SqlError, position_of, unsupported
from gpu_engine.sql.grouping_sets import GROUPING_CALLS, plan_grouping_sets, uses_grouping_sets
from gpu_engine.sql.set_operations import ordered_set_operation, plan_set_operation
from gpu_engine.sql.output_names import with_output_names_resolved
from gpu_engine.sql.planning_context import PlanningContext, Relation, quoted
from gpu_engine.sql.predicates import (
    conjoined, conjuncts_of, constant_truth, defined_aliases, factor_or, filter_estimate, filtered, free_columns,
    has_subquery, pushed_down,
)
from gpu_engine.sql.renaming import aliased, conjunction
from gpu_engine.sql.values_lists import plan_values
from gpu_engine.sql.windows import check_window_positions, extract_windows, is_window_function, plan_windows
from gpu_engine.sql.statistics import DEFAULT_TABLE_ROWS

__all__ = ["QueryPlanner"]

_AGGREGATES = SQL_AGGREGATES  # the aggregate nodes the engine computes (gpu_engine.plans.sql_aggregates)
#: SELECT clauses the planner reads (``hint``: optimizer hints, which never change a result); any other is refused.
_PLANNED_SELECT_CLAUSES = {"expressions", "from_", "joins", "where", "group", "having", "order", "limit", "offset",
                           "distinct", "with_", "hint", "qualify"}
_SELECT_CLAUSE_NAMES = {
    "windows": "WINDOW", "qualify": "QUALIFY", "pivots": "PIVOT", "connect": "CONNECT BY", "prewhere": "PREWHERE",
    "sample": "SAMPLE", "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY", "sort": "SORT BY",
    "locks": "FOR UPDATE / FOR SHARE", "into": "SELECT ... INTO", "laterals": "LATERAL VIEW",
    "match": "MATCH_RECOGNIZE", "kind": "SELECT AS STRUCT/VALUE", "exclude": "EXCLUDE", "for_": "FOR",
}


@dataclass
class _SemiJoin:
    """A pending [NOT] EXISTS / [NOT] IN: join ``relation`` on key pairs, with an optional filter."""

    join_type: str  # left_semi | anti | null_aware_anti
    relation: Relation
    keys: list[tuple[exp.Expression, exp.Column]]  # (outer column, subquery column)
    filters: list[exp.Expression]
    tree: exp.Expression
    early: bool = False  # an uncorrelated IN: applied at the scan of its one outer table, like a filter


def _aggregates_of(tree: exp.Expression) -> list[exp.Expression]:
    """Return the aggregate calls of ``tree`` itself, not those of subqueries nested in it."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, _AGGREGATES):
            out.append(node)
            continue
        if isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.Select) and node is not tree):
            continue
        stack.extend(node.iter_expressions())
    return out


#: Clauses a parenthesized query may carry after its parentheses: ``(SELECT …) ORDER BY a LIMIT 1``.
_PARENTHESIZED_QUERY_CLAUSES = ("order", "limit", "offset")


def _subquery_select(tree: exp.Expression) -> exp.Expression:
    """Return the query inside parentheses, with the ORDER BY / LIMIT / OFFSET written after them applied.

    Why: ``(SELECT a FROM t) LIMIT 1`` parses as a Subquery carrying the
    LIMIT; unwrapping it alone dropped the clause and returned every row.
    """
    while isinstance(tree, (exp.Subquery, exp.Paren)):
        clauses = {key: value for key, value in tree.args.items() if key not in ("this", "alias") and value}
        if clauses:
            return _with_clauses(tree, clauses)
        tree = tree.this
    return tree


def _with_clauses(tree: exp.Expression, clauses: dict) -> exp.Expression:
    """Return a SELECT computing the parenthesized query ``tree.this`` followed by ``clauses``."""
    for key, value in clauses.items():
        if key not in _PARENTHESIZED_QUERY_CLAUSES:
            raise unsupported(f"{key.upper()} after a parenthesized query", value if isinstance(value, exp.Expression)
                               else tree)
    inner = _subquery_select(tree.this)
    if not isinstance(inner, (exp.Select, exp.SetOperation)):
        raise unsupported(f"{inner.key.upper()} after a parenthesized query", inner)
    if not any(inner.args.get(key) for key in _PARENTHESIZED_QUERY_CLAUSES):
        merged = inner.copy()  # (SELECT …) ORDER BY x LIMIT n is SELECT … ORDER BY x LIMIT n
    else:  # the inner query orders or limits too: SELECT <its columns> FROM (<it>) <clauses>
        alias = "$parenthesized"
        merged = exp.Select(expressions=[exp.alias_(exp.column(e.alias_or_name, table=alias, quoted=True),
                                                    e.alias_or_name, quoted=True) for e in inner.selects])
        merged.set("from_", exp.From(this=exp.Subquery(this=inner.copy(), alias=exp.TableAlias(
            this=exp.to_identifier(alias, quoted=True)))))
    for key, value in clauses.items():
        merged.set(key, value.copy())
    return merged


# Operations that are NULL when an operand is: a scalar subquery under them may be decorrelated into a join.
_NULL_STRICT = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren, exp.Cast)


def _strict_subquery(side: exp.Expression) -> exp.Subquery | None:
    """Return the scalar subquery ``side`` is, or holds under NULL-strict arithmetic only (``1.2 * (SELECT ...)``).

    Why: a comparison with such a side is NULL wherever the subquery's value is, so a correlated subquery
    planned as an inner join with its aggregate per key (missing keys dropped) keeps the rows it should
    (TPC-DS q6); under a function such as coalesce a missing value would count, and that stays refused.
    """
    while isinstance(side, _NULL_STRICT) and not isinstance(side, exp.Subquery):
        operands = [operand for operand in (side.this, side.args.get("expression")) if operand is not None]
        holding = [operand for operand in operands if has_subquery(operand)]
        if len(holding) != 1:
            return None
        side = holding[0]
    return side if isinstance(side, exp.Subquery) else None


def _fails_on_empty_group(comparison: exp.Expression, subquery: exp.Subquery, value: exp.Expression) -> bool:
    """Return whether ``comparison`` is FALSE or NULL when the correlated subquery's group is empty.

    Why: a correlated aggregate is joined per key, so an outer row whose key has no inner rows is dropped.
    That is what the filter does anyway when the comparison fails for the empty group's value (COUNT 0,
    any other aggregate NULL): ``(SELECT count(*) ...) > 0`` (TPC-DS q41) is planned, ``= 0`` is not.
    """
    empty = value.copy().transform(
        lambda node: exp.Literal.number(0) if isinstance(node, exp.Count)
        else exp.Null() if isinstance(node, _AGGREGATES) else node)
    folded = simplify(_with_subquery_replaced(comparison, subquery, exp.paren(empty)))
    return constant_truth(folded) is False


def _with_subquery_replaced(tree: exp.Expression, subquery: exp.Subquery, by: exp.Expression) -> exp.Expression:
    """Return a copy of ``tree`` with ``subquery`` (a node of it) replaced by ``by``.

    The subquery is swapped out while ``tree`` is copied and put back after, so neither it (the deep part of
    nested subqueries) is copied nor every nested subquery rendered to find it: comparing SQL texts made
    planning 200 nested subqueries cubic (minutes).
    """
    if subquery is tree:
        return by.copy()
    stand_in = by.copy()
    subquery.replace(stand_in)
    try:
        return tree.copy()
    finally:
        stand_in.replace(subquery)


def _check_aggregate_arguments(aggregate: exp.Expression) -> None:
    """Refuse an aggregate call with an argument or clause the engine would otherwise drop.

    ``max(v, 2)`` (DuckDB: the two largest values, as a list) parses as ``max``
    with a ``count``; ``count(a, b)`` has more ``expressions``; ``sum(a ORDER BY b)``
    wraps its argument in an ORDER BY.
    """
    name = aggregate.sql_name().lower()
    if isinstance(aggregate.this, exp.Order) and not takes_order(aggregate):
        raise unsupported(f"ORDER BY inside {name}(...)", aggregate)
    for key, value in aggregate.args.items():
        if key == "big_int" or not value or allowed_argument(aggregate, key):
            continue
        if key == "count" and isinstance(aggregate, (exp.Min, exp.Max)):
            raise unsupported(f"{name}(x, n) (the n {'largest' if name == 'max' else 'smallest'} values); "
                               f"{name} takes one argument", aggregate)
        raise unsupported(f"{name}(...) with more than one argument", aggregate)


def _fetch_with_ties(clause: exp.Expression | None) -> bool:
    """Return True for ``FETCH FIRST n ROWS WITH TIES`` (sqlglot parses FETCH into the select's ``limit``)."""
    if not isinstance(clause, exp.Fetch):
        return False
    options = clause.args.get("limit_options")
    return bool(options is not None and options.args.get("with_ties"))


class QueryPlanner(PlanningContext):
    """Plan qualified sqlglot queries over ``catalog`` (see the module docstring; the state: its base class)."""

    # ---------------------------------------------------------------- queries
    def plan(self, query: exp.Query) -> PlanNode:
        """Return the plan of a whole query, its output columns named as the SELECT names them."""
        relation, outputs = self._plan_query(query, {})
        spelled = query.meta.get("output_names", {}) if query.meta else {}
        outputs = [(spelled.get(name, name), internal) for name, internal in outputs]
        names = [name for name, _ in outputs]
        if len(set(names)) != len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            raise unsupported(f"two output columns named {duplicate!r}; give them distinct aliases", query)
        if [internal for _, internal in outputs] == names and list(relation.node.output_schema.names) == names:
            return relation.node
        projections = [f"{quoted(internal)} AS {quoted(name)}" for name, internal in outputs]
        return self._builder(relation.node).project(projections).plan()

    def _plan_query(self, query: exp.Expression, ctes: Mapping[str, exp.Expression]
                    ) -> tuple[Relation, list[tuple[str, str]]]:
        query = _subquery_select(query)
        with_ = query.args.get("with_") or query.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise unsupported("WITH RECURSIVE", with_)
            ctes = dict(ctes)
            for cte in with_.expressions:
                ctes[cte.alias_or_name] = cte.this
        if isinstance(query, exp.SetOperation):
            if any(query.args.get(key) is not None for key in _PARENTHESIZED_QUERY_CLAUSES):
                return self._plan_select(ordered_set_operation(query, self._synthetic_alias()), ctes)
            return plan_set_operation(self, query, ctes)
        if not isinstance(query, exp.Select):
            raise unsupported(f"{query.key.upper()} queries", query)
        return self._plan_select(query, ctes)

    # ----------------------------------------------------------------- select
    def _plan_select(self, select: exp.Select, ctes: Mapping[str, exp.Expression]
                     ) -> tuple[Relation, list[tuple[str, str]]]:
        for key, value in select.args.items():  # a clause the planner does not read is refused, never ignored
            if value and key not in _PLANNED_SELECT_CLAUSES:
                node = value[0] if isinstance(value, list) else value
                raise unsupported(_SELECT_CLAUSE_NAMES.get(key, key.upper()),
                                   node if isinstance(node, exp.Expression) else select)
        check_window_positions(select)
        select = with_mark_joins(select, self)  # EXISTS / IN subqueries under OR: LEFT JOINs to their keys
        from_ = select.args.get("from_")
        if from_ is None:
            raise unsupported("SELECT without FROM", select)
        joins = select.args.get("joins") or []
        outer_joins = any(j.side or (j.kind or "").upper() in ("OUTER", "FULL") for j in joins)
        for join in joins:
            if join.args.get("using"):
                raise unsupported("JOIN ... USING (write ON)", join)
            if (join.kind or "").upper() in ("SEMI", "ANTI", "ASOF", "POSITIONAL", "LATERAL"):
                raise unsupported(f"{join.kind} JOIN", join)
            if join.args.get("method"):  # ASOF, POSITIONAL (NATURAL is an ON condition once qualified)
                raise unsupported(f"{str(join.args['method']).upper()} JOIN", join)
            for key in ("match_condition", "directed", "nearest", "global_"):
                if join.args.get(key):
                    raise unsupported(f"JOIN with {key.rstrip('_').replace('_', ' ').upper()}", join)

        items = [(from_.this, None)] + [(j.this, j) for j in joins]
        null_supplying = set()
        for item, join in items[1:]:
            side = (join.side or "").upper()
            if side in ("LEFT", "FULL"):
                null_supplying.add(item.alias_or_name)
            if side in ("RIGHT", "FULL"):
                null_supplying.update(other.alias_or_name for other, j in items if j is not join
                                      and items.index((other, j)) < items.index((item, join)))

        where = conjuncts_of(select.args.get("where").this) if select.args.get("where") else []
        pool: list[exp.Expression] = []
        for conjunct in where:
            pool.extend(factor_or(conjunct))
        if not outer_joins:
            for _, join in items[1:]:
                if join.args.get("on") is not None:
                    for conjunct in conjuncts_of(join.args["on"]):
                        pool.extend(factor_or(conjunct))

        local_aliases = {item.alias_or_name for item, _ in items}
        needed = self._needed_columns(select)
        if outer_joins:  # ON conditions are applied in the written order, after the WHERE is split
            for _, join in items[1:]:
                if join.args.get("on") is not None:
                    needed.update((c.table, c.name) for c in free_columns(join.args["on"]))

        # Subquery predicates become relations, join edges and semi joins.
        plain: list[exp.Expression] = []
        semi_joins: list[_SemiJoin] = []
        extra_relations: list[Relation] = []
        attach: dict[str, list[tuple[Relation, exp.Expression]]] = {}
        self._scopes.append((items, pool, null_supplying))
        try:
            for conjunct in pool:
                if not has_subquery(conjunct):
                    plain.append(conjunct)
                    continue
                self._subquery_conjunct(conjunct, local_aliases, ctes, plain, semi_joins, extra_relations, attach)
        finally:
            self._scopes.pop()

        # Predicates of one relation filter it; the others wait for their join.
        pushed, pending = pushed_down(plain, local_aliases, null_supplying, outer_joins)

        semi_needed = set()
        for semi in semi_joins:
            for outer, _ in semi.keys:
                semi_needed.update((c.table, c.name) for c in free_columns(outer))
            for f in semi.filters:
                semi_needed.update((c.table, c.name) for c in free_columns(f))
        needed |= semi_needed
        for relation_list in attach.values():
            for _, conjunct in relation_list:
                needed.update((c.table, c.name) for c in free_columns(conjunct))

        scanned = set(needed)
        for conjuncts in list(pushed.values()) + [pending]:
            for conjunct in conjuncts:
                scanned.update((c.table, c.name) for c in free_columns(conjunct))
        relations = {}
        for item, join in items:
            alias = item.alias_or_name
            relation = self._plan_source(item, ctes, scanned)
            relation = filtered(self, relation, pushed[alias])
            for sub, conjunct in attach.get(alias, []):
                relation = self._cross_join_filter(relation, sub, conjunct, scanned)
            for semi in [s for s in semi_joins if s.early and self._single_alias(s) == alias
                         and alias not in null_supplying]:
                relation = self._semi_join(relation, semi, scanned)
                semi_joins.remove(semi)
            relations[alias] = relation

        if outer_joins:
            relation = join_in_order(self, items, relations, pending, needed)
            if extra_relations:  # scalar subqueries: joined after the outer joins, like WHERE conjuncts
                relation = join_greedy(self, [relation] + extra_relations, pending, needed)
        else:
            relation = join_greedy(self, list(relations.values()) + extra_relations, pending, needed)
        if pending:
            relation = filtered(self, relation, pending)
        for semi in semi_joins:
            relation = self._semi_join(relation, semi, needed)
        return self._finish_select(select, relation, ctes)

    @staticmethod
    def _single_alias(semi: _SemiJoin) -> str | None:
        aliases = {c.table for outer, _ in semi.keys for c in free_columns(outer)}
        aliases |= {c.table for f in semi.filters for c in free_columns(f) if not c.table.startswith("$")}
        return next(iter(aliases)) if len(aliases) == 1 and not semi.filters else None

    def _needed_columns(self, select: exp.Select) -> set[tuple[str, str]]:
        """Return the (alias, column) pairs a SELECT reads after its joins (its clauses other than FROM/WHERE)."""
        out = set()
        for key in ("expressions", "group", "having", "order", "distinct"):
            value = select.args.get(key)
            for tree in (value if isinstance(value, list) else [value] if value is not None else []):
                out.update((c.table, c.name) for c in free_columns(tree))
        return out

    # ----------------------------------------------------------------- sources
    def _plan_source(self, item: exp.Expression, ctes: Mapping[str, exp.Expression],
                     needed: set[tuple[str, str]]) -> Relation:
        alias = item.alias_or_name
        if isinstance(item, exp.Table) and item.name in ctes and not item.args.get("db"):
            return self._derived(ctes[item.name], alias, ctes)
        if isinstance(item, exp.Subquery):
            return self._derived(item.this, alias, ctes)
        if isinstance(item, exp.Values):
            return plan_values(self, item, alias, ctes)
        if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier):
            raise unsupported(f"{item.key.upper()} as a FROM item", item)
        return self._scan(item, alias, needed)

    def _scan(self, item: exp.Table, alias: str, needed: set[tuple[str, str]]) -> Relation:
        table = item.name
        schema = self.catalog.get(table)
        if schema is None:
            matches = [t for t in self.catalog if t.lower() == table.lower()]
            if not matches:
                line, col = position_of(item)
                raise SqlError(f"unknown table {table!r}", line=line, col=col, name=table)
            table, schema = matches[0], self.catalog[matches[0]]
        by_lower = {name.lower(): name for name in schema.names}
        wanted = [by_lower[name.lower()] for name in dict.fromkeys(n for a, n in needed if a == alias)
                  if name.lower() in by_lower]
        wanted = [name for name in schema.names if name in wanted] or [schema.names[0]]
        internal = [self._fresh(name, alias) for name in wanted]
        statistics = self.statistics.get(table)
        rows = statistics.rows if statistics is not None else float(DEFAULT_TABLE_ROWS)
        try:
            builder = PlanBuilder(self.catalog, id_generator=self.ids).table_scan(table, wanted)
            if internal != wanted:
                builder = builder.project([f"{quoted(w)} AS {quoted(i)}" for w, i in zip(wanted, internal)])
        except PlanError as error:
            raise self._plan_error(error, item) from None
        columns = {(alias, w.lower()): i for w, i in zip(wanted, internal)}
        columns.update({(alias, w): i for w, i in zip(wanted, internal)})
        stats = {}
        for w, i in zip(wanted, internal):
            if statistics is not None and w in statistics.columns:
                stats[i] = statistics.columns[w]
        return Relation(builder.plan(), columns, frozenset([alias]), rows, stats)

    def _derived(self, query: exp.Expression, alias: str, ctes: Mapping[str, exp.Expression]) -> Relation:
        relation, outputs = self._plan_query(query, ctes)
        columns = {(alias, name): internal for name, internal in outputs}
        return Relation(relation.node, columns, frozenset([alias]), relation.rows, relation.stats)

    # -------------------------------------------------------------- subqueries
    def _subquery_conjunct(self, conjunct, local_aliases, ctes, plain, semi_joins, extra_relations, attach) -> None:
        """Turn one WHERE conjunct holding a subquery into semi joins, relations and plain predicates."""
        tree = conjunct
        negated = False
        while isinstance(tree, exp.Not):
            negated, tree = not negated, tree.this
            while isinstance(tree, exp.Paren):
                tree = tree.this
        if isinstance(tree, exp.Exists):
            select = _subquery_select(tree.this)
            if isinstance(select, exp.Select) and not ({c.table for c in free_columns(select)}
                                                       - defined_aliases(select)):
                # Uncorrelated: one count for the whole query, compared on a nested-loop join.
                counted = select.copy()
                counted.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "n")])
                for clause in ("order", "limit", "offset", "distinct"):
                    counted.set(clause, None)
                subquery = exp.Subquery(this=counted)
                comparison = (exp.EQ if negated else exp.GT)(this=subquery, expression=exp.Literal.number(0))
                self._scalar_comparison(comparison, subquery, local_aliases, ctes, plain, extra_relations, attach)
                return
            semi_joins.append(self._exists(tree, negated, local_aliases, ctes, conjunct))
            return
        if isinstance(tree, exp.In) and tree.args.get("query") is not None:
            semi_joins.append(self._in_subquery(tree, negated, local_aliases, ctes, conjunct))
            return
        comparisons = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
        if not negated and isinstance(tree, comparisons):
            found = [(side, _strict_subquery(side)) for side in (tree.this, tree.expression)]
            subqueries = [subquery for _, subquery in found if subquery is not None]
            other = tree.expression if found[0][1] is not None else tree.this
            if len(subqueries) == 1 and not has_subquery(other):
                self._scalar_comparison(tree, subqueries[0], local_aliases, ctes, plain, extra_relations, attach)
                return
        raise unsupported("a subquery inside OR, NOT or an expression (only [NOT] EXISTS, [NOT] IN and "
                           "comparisons with a scalar subquery are planned)", conjunct)

    def _split_correlated(self, select: exp.Select, outer_aliases: set[str]):
        """Split a subquery's WHERE into local conjuncts and those that read the outer query's columns."""
        inner = defined_aliases(select)
        local, correlated = [], []
        where = select.args["where"].this if select.args.get("where") else None
        # (k = outer.k AND a) OR (k = outer.k AND b): the correlation shared by every branch comes out (TPC-DS q41)
        for conjunct in [part for conjunct in conjuncts_of(where) for part in factor_or(conjunct)]:
            free = {c.table for c in free_columns(conjunct)}
            if free - inner:
                if free - inner - outer_aliases:
                    raise unsupported("a correlated reference to a query more than one level out", conjunct)
                correlated.append(conjunct)
            else:
                local.append(conjunct)
        for key in ("expressions", "group", "having", "order"):
            value = select.args.get(key)
            for tree in value if isinstance(value, list) else [value] if value is not None else []:
                tables = {c.table for c in free_columns(tree)}
                if key == "order":
                    tables.discard("")  # ORDER BY an output name (the subquery's own, unqualified)
                if tables - inner:
                    raise unsupported("an outer column outside the subquery's WHERE", tree)
        for join in select.args.get("joins") or []:
            if join.args.get("on") is not None and {c.table for c in free_columns(join.args["on"])} - inner:
                raise unsupported("an outer column in a subquery's JOIN condition", join)
        return inner, local, correlated

    def _correlation(self, correlated: list[exp.Expression], inner: set[str]):
        """Return (key pairs (outer, inner column), other correlated conjuncts) of a subquery's correlation."""
        keys, others = [], []
        for conjunct in correlated:
            if isinstance(conjunct, exp.EQ):
                for inner_side, outer_side in ((conjunct.this, conjunct.expression),
                                               (conjunct.expression, conjunct.this)):
                    if (isinstance(inner_side, exp.Column) and inner_side.table in inner
                            and isinstance(outer_side, exp.Column) and outer_side.table not in inner):
                        keys.append((outer_side, inner_side))
                        break
                else:
                    others.append(conjunct)
            else:
                others.append(conjunct)
        return keys, others

    def _inner_select(self, select: exp.Select, local: list[exp.Expression],
                      columns: list[exp.Column]) -> tuple[exp.Select, dict[tuple[str, str], str]]:
        """Return ``SELECT <columns> FROM <select's FROM> WHERE <local>`` and each column's output name."""
        names = {}
        projections = []
        for column in columns:
            key = (column.table, column.name)
            if key not in names:
                names[key] = f"c{len(names)}"
                projections.append(exp.alias_(column.copy(), names[key]))
        inner = exp.Select(expressions=projections)
        inner.set("from_", select.args["from_"].copy())
        if select.args.get("joins"):
            inner.set("joins", [j.copy() for j in select.args["joins"]])
        if local:
            inner.set("where", exp.Where(this=conjoined(local)))
        return inner, names

    def _exists(self, tree: exp.Exists, negated: bool, outer_aliases, ctes, conjunct) -> _SemiJoin:
        select = _subquery_select(tree.this)
        if not isinstance(select, exp.Select):
            raise unsupported("EXISTS over a set operation", tree)
        if select.args.get("group") or select.args.get("having") or any(select.find_all(*_AGGREGATES)):
            raise unsupported("EXISTS over an aggregate subquery", tree)
        if select.args.get("limit") is not None:
            raise unsupported("LIMIT inside EXISTS", tree)
        inner, local, correlated = self._split_correlated(select, outer_aliases)
        keys, others = self._correlation(correlated, inner)
        if not keys:
            raise unsupported("EXISTS without an equality between a subquery column and an outer column", tree)
        return self._semi_relation("anti" if negated else "left_semi", select, inner, local, keys, others, ctes,
                                   conjunct)

    def _semi_relation(self, join_type, select, inner, local, keys, others, ctes, conjunct) -> _SemiJoin:
        inner_columns = [i for _, i in keys] + [c for o in others for c in free_columns(o) if c.table in inner]
        sub_select, names = self._inner_select(select, local, inner_columns)
        relation, outputs = self._plan_query(sub_select, ctes)
        alias = self._synthetic_alias()
        by_name = dict(outputs)
        relation = Relation(relation.node, {(alias, n): by_name[n] for n in names.values()}, frozenset([alias]),
                            relation.rows, relation.stats)

        def to_sub(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and (node.table, node.name) in names:
                return exp.column(names[(node.table, node.name)], table=alias)
            return node

        return _SemiJoin(join_type, relation,
                         [(outer.copy(), to_sub(inner_column.copy())) for outer, inner_column in keys],
                         [o.copy().transform(to_sub) for o in others], conjunct)

    def _in_subquery(self, tree: exp.In, negated: bool, outer_aliases, ctes, conjunct) -> _SemiJoin:
        select = _subquery_select(tree.args["query"])
        if not isinstance(select, (exp.Select, exp.SetOperation)) or len(select.selects) != 1:
            raise unsupported("IN over a subquery that is not a one-column SELECT", tree)
        if has_subquery(tree.this):
            raise unsupported("a subquery on the left of IN", tree)
        if isinstance(select, exp.SetOperation):  # planned as a whole: only an uncorrelated one
            if any(c.table for c in free_columns(select)):
                raise unsupported("IN over a correlated set operation", tree)
            inner, local, correlated = set(), [], []
        else:
            inner, local, correlated = self._split_correlated(select, outer_aliases)
        if not correlated:
            relation, outputs = self._plan_query(select, ctes)
            alias = self._synthetic_alias()
            name, internal = outputs[0]
            relation = Relation(relation.node, {(alias, name): internal}, frozenset([alias]), relation.rows,
                                relation.stats)
            return _SemiJoin("null_aware_anti" if negated else "left_semi", relation,
                             [(tree.this.copy(), exp.column(name, table=alias))], [], conjunct, early=True)
        if negated:
            raise unsupported("NOT IN over a correlated subquery (write NOT EXISTS)", tree)
        value = select.expressions[0]
        value = value.this if isinstance(value, exp.Alias) else value
        if select.args.get("group") or any(select.find_all(*_AGGREGATES)) or not isinstance(value, exp.Column):
            raise unsupported("IN over a correlated subquery that aggregates or selects an expression", tree)
        keys, others = self._correlation(correlated, inner)
        return self._semi_relation("left_semi", select, inner, local, [(tree.this, value)] + keys, others, ctes,
                                   conjunct)

    def _scalar_relation(self, subquery: exp.Subquery, ctes) -> tuple[Relation, exp.Column]:
        """Plan an uncorrelated scalar subquery as a one-row relation (EnforceSingleRow)."""
        relation, outputs = self._plan_query(subquery.this, ctes)
        if len(outputs) != 1:
            raise unsupported(f"a scalar subquery with {len(outputs)} columns", subquery)
        try:
            node = self._builder(relation.node).enforce_single_row().plan()
        except PlanError as error:
            raise self._plan_error(error, subquery) from None
        alias = self._synthetic_alias()
        name, internal = outputs[0]
        return Relation(node, {(alias, name): internal}, frozenset([alias]), 1.0, {}), exp.column(name, table=alias)

    def _scalar_comparison(self, tree, subquery, local_aliases, ctes, plain, extra_relations, attach) -> None:
        select = _subquery_select(subquery.this)
        if isinstance(select, exp.SetOperation):  # planned as a whole: only an uncorrelated one
            if any(c.table for c in free_columns(select)):
                raise unsupported("a correlated scalar subquery over a set operation", subquery)
            inner, local, correlated = set(), [], []
        elif not isinstance(select, exp.Select):
            raise unsupported(f"a scalar subquery over {select.key.upper()}", subquery)
        else:
            inner, local, correlated = self._split_correlated(select, set(local_aliases))
        if not correlated:
            relation, column = self._scalar_relation(subquery, ctes)
            rewritten = _with_subquery_replaced(tree, subquery, column)
            outer = {c.table for c in free_columns(rewritten)} - {column.table}
            if len(outer) == 1 and not self._null_supplying(next(iter(outer))):
                attach.setdefault(next(iter(outer)), []).append((relation, rewritten))
            else:
                extra_relations.append(relation)
                plain.append(rewritten)
            return
        # Correlated: the aggregate grouped by the correlation columns, joined on them.
        if len(select.expressions) != 1 or select.args.get("group") or select.args.get("having"):
            raise unsupported("a correlated scalar subquery other than one aggregate without GROUP BY", subquery)
        value = select.expressions[0]
        value = value.this if isinstance(value, exp.Alias) else value
        aggregates = list(value.find_all(*_AGGREGATES))
        if not aggregates:
            raise unsupported("a correlated scalar subquery that does not aggregate", subquery)
        if any(isinstance(a, exp.Count) for a in aggregates) and not _fails_on_empty_group(tree, subquery, value):
            raise unsupported("COUNT in a correlated scalar subquery (its empty groups are 0, not NULL)", subquery)
        keys, others = self._correlation(correlated, inner)
        if others or not keys:
            raise unsupported("a correlated scalar subquery whose correlation is not column equalities", subquery)
        grouped = exp.Select(expressions=[exp.alias_(i.copy(), f"k{n}") for n, (_, i) in enumerate(keys)]
                             + [exp.alias_(value.copy(), "v")])
        grouped.set("from_", select.args["from_"].copy())
        if select.args.get("joins"):
            grouped.set("joins", [j.copy() for j in select.args["joins"]])
        local = local + self._magic_sets(keys, inner)
        if local:
            grouped.set("where", exp.Where(this=conjoined(local)))
        grouped.set("group", exp.Group(expressions=[i.copy() for _, i in keys]))
        relation, outputs = self._plan_query(grouped, ctes)
        alias = self._synthetic_alias()
        relation = Relation(relation.node, {(alias, n): i for n, i in outputs}, frozenset([alias]), relation.rows,
                            relation.stats)
        extra_relations.append(relation)
        for n, (outer, _) in enumerate(keys):
            plain.append(exp.EQ(this=outer.copy(), expression=exp.column(f"k{n}", table=alias)))
        rewritten = _with_subquery_replaced(tree, subquery, exp.column("v", table=alias))
        plain.append(rewritten)

    def _magic_sets(self, keys: list[tuple[exp.Column, exp.Column]], inner_aliases: set[str]) -> list[exp.Expression]:
        """Return ``EXISTS (SELECT * FROM t WHERE <t's filters> AND t.key = inner.key …)`` per filtered outer table.

        Why: a decorrelated scalar aggregate is computed for every group of
        the inner table (TPC-H Q17: all of lineitem by part), although only
        the groups the outer query's filtered rows ask for are joined back
        (Q17: 2 of 1000 parts). Restricting the inner rows to the keys of the
        outer table's qualifying rows (a "magic set") is a semi join before
        the aggregation, as the hand-written Q2 and Q17 plans do. The groups
        kept are exactly those an outer row can match, so results are equal.
        """
        if not self._scopes:
            return []
        items, pool, null_supplying = self._scopes[-1]
        tables = {item.alias_or_name: item for item, _ in items if item.alias_or_name not in null_supplying}
        by_alias: dict[str, list[tuple[exp.Column, exp.Column]]] = {}
        for outer, inner in keys:
            by_alias.setdefault(outer.table, []).append((outer, inner))
        out = []
        for alias, pairs in by_alias.items():
            table = tables.get(alias)
            if (not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier)
                    or table.name not in self.catalog or alias in inner_aliases):
                continue
            filters = [c for c in pool if {col.table for col in free_columns(c)} == {alias}
                       and not any(isinstance(n, exp.Subquery) and not isinstance(n.parent, exp.In)
                                   for n in c.walk())]
            if not filters:
                continue
            restriction = exp.Select(expressions=[exp.Star()])
            restriction.set("from_", exp.From(this=table.copy()))
            equalities = [exp.EQ(this=outer.copy(), expression=inner.copy()) for outer, inner in pairs]
            restriction.set("where", exp.Where(this=conjoined(filters + equalities)))
            out.append(exp.Exists(this=restriction))
        return out

    def _cross_join_filter(self, relation: Relation, scalar: Relation, conjunct: exp.Expression,
                           needed: set[tuple[str, str]]) -> Relation:
        """Pair every row with a scalar subquery's one row, keeping those where ``conjunct`` holds."""
        columns = {**relation.columns, **scalar.columns}
        keep = [i for (a, n), i in relation.columns.items() if (a, n) in needed]
        keep = list(dict.fromkeys(keep)) or [relation.node.output_schema.names[0]]
        try:
            node = self._builder(relation.node).nested_loop_join(
                scalar.node, keep, filter=self._renamed(conjunct, columns)).plan()
        except PlanError as error:
            raise self._plan_error(error, conjunct) from None
        rows = filter_estimate(relation, [conjunct])
        kept = {k: v for k, v in relation.columns.items() if v in keep}
        return Relation(node, kept, relation.aliases, rows, {k: v.capped(rows) for k, v in relation.stats.items()})

    def _semi_join(self, relation: Relation, semi: _SemiJoin, needed: set[tuple[str, str]]) -> Relation:
        """Apply a pending [NOT] EXISTS / [NOT] IN to ``relation`` as a semi, anti or null-aware anti join."""
        keys = []
        for outer, inner in semi.keys:  # an expression on the outer side (x + 1 IN (...)) is projected first
            if not isinstance(outer, exp.Column):
                name = self._fresh("$in_key")
                passthrough = [quoted(n) for n in relation.node.output_schema.names]
                try:
                    node = self._builder(relation.node).project(
                        passthrough + [aliased(self._renamed(outer, relation.columns), name)]).plan()
                except PlanError as error:
                    raise self._plan_error(error, outer) from None
                relation = dataclasses.replace(relation, node=node,
                                               columns={**relation.columns, ("$in_key", name): name})
                outer = exp.column(name, table="$in_key")
            keys.append((outer, inner))
        columns = {**relation.columns, **semi.relation.columns}
        left, right = [], []
        filters = list(semi.filters)
        for outer, inner in keys:
            outer_name = columns.get((outer.table, outer.name))
            inner_name = columns[(inner.table, inner.name)]
            if outer_name is None:
                raise self._plan_error(PlanError(f"column {outer.sql()} is not available"), outer)
            outer_type = relation.node.output_schema.field(outer_name).type
            inner_type = semi.relation.node.output_schema.field(inner_name).type
            if (outer_name in left or _join_key_layout(outer_type) != _join_key_layout(inner_type)) \
                    and semi.join_type != "null_aware_anti":
                filters.append(exp.EQ(this=outer.copy(), expression=inner.copy()))
                continue
            if _join_key_layout(outer_type) != _join_key_layout(inner_type):
                raise self._plan_error(PlanError(f"NOT IN compares {outer_type} with {inner_type}"), semi.tree)
            left.append(outer_name)
            right.append(inner_name)
        keep = list(dict.fromkeys(i for (a, n), i in relation.columns.items() if (a, n) in needed))
        keep = keep or [relation.node.output_schema.names[0]]
        join_filter = conjunction([self._renamed(f, columns) for f in filters]) if filters else None
        # Build the smaller side: a semi (anti) join of a small outer side is a right semi (anti) join.
        right_side = semi.join_type in ("left_semi", "anti") and relation.rows < semi.relation.rows
        try:
            if right_side:
                node = self._builder(semi.relation.node).hash_join(
                    right, left, relation.node, keep, join_type="right_semi" if semi.join_type == "left_semi"
                    else "right_anti", filter=join_filter).plan()
            else:
                node = self._builder(relation.node).hash_join(
                    left, right, semi.relation.node, keep, join_type=semi.join_type, filter=join_filter).plan()
        except PlanError as error:
            raise self._plan_error(error, semi.tree) from None
        rows = max(1.0, relation.rows * (0.5 if semi.join_type == "left_semi" else 0.5))
        kept = {k: v for k, v in relation.columns.items() if v in keep}
        return Relation(node, kept, relation.aliases, rows, {k: v.capped(rows) for k, v in relation.stats.items()})

    # ------------------------------------------------------ aggregation & output
    def _finish_select(self, select: exp.Select, relation: Relation, ctes) -> tuple[Relation, list[tuple[str, str]]]:
        projections = list(select.expressions)
        for p in projections:
            if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
                raise unsupported("* that could not be expanded", p)
        group = list(select.args["group"].expressions) if select.args.get("group") else []
        group = [key for key in group if not (isinstance(key, exp.Tuple) and not key.expressions)]  # GROUP BY ()
        having = select.args["having"].this if select.args.get("having") else None
        order = list(select.args["order"].expressions) if select.args.get("order") else []
        output_names = [p.alias_or_name for p in projections]
        order_trees = []
        for ordered in order:
            key = ordered.this
            if isinstance(key, exp.Column) and not key.table and key.name in output_names:
                order_trees.append(None)
            else:
                order_trees.append(key)
        order_trees = [with_output_names_resolved(tree, projections) for tree in order_trees]
        # Windows run after aggregation: each becomes a placeholder column; the aggregates inside them count.
        qualify = select.args["qualify"].this if select.args.get("qualify") else None  # filters window results
        projections, [*order_trees, qualify], windows, window_inputs = extract_windows(
            self, projections, order_trees + [with_output_names_resolved(qualify, projections)], _AGGREGATES)
        if qualify is not None and not windows:
            raise unsupported("QUALIFY without a window function (filter with WHERE or HAVING)", select.args["qualify"])
        trees = (projections + ([having] if having is not None else []) + [t for t in order_trees if t is not None]
                 + window_inputs + ([qualify] if qualify is not None else []))
        for t in trees:
            for node in t.find_all(exp.AggFunc):
                if not isinstance(node, (*_AGGREGATES, *GROUPING_CALLS)) and not is_window_function(node):
                    raise unsupported(unsupported_aggregate_text(node), node)
        aggregates = [a for t in trees for a in _aggregates_of(t)]
        for a in aggregates:
            if any(isinstance(inner, _AGGREGATES) for inner in a.walk() if inner is not a):
                raise unsupported("an aggregate inside an aggregate", a)
            _check_aggregate_arguments(a)
        for ordered in order:
            if ordered.args.get("with_fill"):
                raise unsupported("ORDER BY ... WITH FILL", ordered)
        replacements: dict[str, str] = {}
        columns = relation.columns
        if having is not None and not group and not aggregates:  # HAVING makes the query one group (DuckDB)
            column = next((c for t in trees for c in free_columns(t)), None)
            if column is not None:
                line, col = position_of(column)
                raise SqlError(f"column {column.name!r} must appear in the GROUP BY clause or be used in an aggregate "
                               "function (HAVING makes the query one group)", line=line, col=col, name=column.name)
            raise unsupported("HAVING without GROUP BY or an aggregate", select.args["having"])
        if uses_grouping_sets(group, trees, select):
            relation, replacements, columns = plan_grouping_sets(self, relation, group, aggregates, trees, select)
        elif group or aggregates:
            relation, replacements, columns = self._aggregate(relation, group, aggregates, select)
        if having is not None:
            relation = self._post_filter(relation, having, columns, replacements, ctes)
        if windows:
            relation, columns = plan_windows(self, relation, windows, columns, replacements)
        if qualify is not None:
            relation = self._post_filter(relation, qualify, columns, replacements, ctes)
        # The SELECT list (and hidden ORDER BY expressions), computed in one projection.
        outputs, exprs, texts = [], [], []  # texts: each renamed expression's SQL, to find an ORDER BY key among them
        for p, name in zip(projections, output_names):
            tree = p.this if isinstance(p, exp.Alias) else p
            tree, relation, columns = self._scalar_subqueries(tree, relation, columns, ctes)
            renamed = self._renamed(tree, columns, replacements)
            outputs.append(name)
            exprs.append(renamed)
            texts.append(renamed.sql(dialect="duckdb"))
        sort_keys = []
        hidden = []
        for ordered, key in zip(order, order_trees):
            direction = "DESC" if ordered.args.get("desc") else "ASC"
            nulls_first = ordered.args.get("nulls_first")
            nulls = " NULLS FIRST" if nulls_first else " NULLS LAST"
            if key is None:
                index = output_names.index(ordered.this.name)
            else:
                renamed = self._renamed(key, columns, replacements)
                text = renamed.sql(dialect="duckdb")
                if text in texts:
                    index = texts.index(text)
                else:
                    texts.append(text)
                    hidden.append(renamed)
                    index = len(exprs) + len(hidden) - 1
            sort_keys.append((index, direction + nulls))
        internal = [self._fresh(name) for name in outputs] + [self._fresh(f"$sort{n}") for n in range(len(hidden))]
        all_exprs = exprs + hidden
        try:
            builder = self._builder(relation.node).project(
                [aliased(tree, name) for tree, name in zip(all_exprs, internal)])
            if select.args.get("distinct"):
                if select.args["distinct"].args.get("on"):
                    raise unsupported("DISTINCT ON", select.args["distinct"])
                builder = builder.aggregation([quoted(n) for n in internal], [])
            limit_clause = select.args.get("limit")
            with_ties = _fetch_with_ties(limit_clause)
            limit = self._count(limit_clause, "LIMIT")
            offset = self._count(select.args.get("offset"), "OFFSET") or 0
            keys = [f"{quoted(internal[i])} {d}" for i, d in sort_keys]
            if with_ties and (not keys or offset):
                raise unsupported("FETCH ... WITH TIES " + ("with OFFSET" if keys else "without ORDER BY"),
                                   limit_clause)
            if keys and limit is not None and not offset:
                builder = builder.top_n(keys, limit, with_ties=with_ties)
            elif keys:
                builder = builder.order_by(keys)
                if limit is not None or offset:
                    builder = builder.limit(limit if limit is not None else 2 ** 62, offset)
            elif limit is not None or offset:
                builder = builder.limit(limit if limit is not None else 2 ** 62, offset)
            if hidden:
                builder = builder.project([quoted(n) for n in internal[:len(outputs)]])
            node = builder.plan()
        except PlanError as error:
            raise self._plan_error(error, select) from None
        rows = relation.rows if limit is None or with_ties else min(relation.rows, limit)
        stats = {}
        for tree, name in zip(exprs, internal):
            if isinstance(tree, exp.Column) and tree.name in relation.stats:
                stats[name] = relation.stats[tree.name]
        result = Relation(node, {}, frozenset(), rows, stats)
        return result, list(zip(outputs, internal[:len(outputs)]))

    def _count(self, clause: exp.Expression | None, what: str) -> int | None:
        if clause is None:
            return None
        if isinstance(clause, exp.Fetch):
            options = clause.args.get("limit_options")
            if options is not None and options.args.get("percent"):
                raise unsupported("FETCH ... PERCENT", clause)
            value = clause.args.get("count")
            if value is None:  # FETCH FIRST ROW ONLY
                return 1
        else:
            options = clause.args.get("limit_options")
            if options is not None and options.args.get("percent"):
                raise unsupported(f"{what} n% / {what} n PERCENT (a share of the rows; write a row count)", clause)
            if clause.args.get("expressions"):
                raise unsupported(f"{what} ... BY", clause)
            value = clause.args.get("expression") or clause.this
        if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
            raise unsupported(f"{what} other than an integer constant", clause)
        return int(value.this)

    def _aggregate(self, relation: Relation, group: list[exp.Expression], aggregates: list[exp.Expression],
                   select: exp.Select):
        """Plan GROUP BY and the aggregates; return the relation and how later clauses find keys and results."""
        replacements: dict[str, str] = {}
        key_names: list[str] = []
        key_columns: dict[tuple[str, str], str] = {}
        pre = []  # projections ahead of the aggregation, when a key is an expression
        for key in group:
            if isinstance(key, exp.Literal):
                raise unsupported("GROUP BY a constant", key)
            text = key.sql()
            if text in replacements:
                continue
            if isinstance(key, exp.Column):
                name = relation.columns.get((key.table, key.name))
                if name is None:
                    line, col = position_of(key)
                    raise SqlError(f"column {key.sql()} is not available", line=line, col=col)
                key_columns[(key.table, key.name)] = name
            else:
                name = self._fresh(f"$key{len(key_names)}")
                pre.append(aliased(self._renamed(key, relation.columns), name))
            replacements[text] = name
            key_names.append(name)
        calls, names = [], []
        kinds: dict[str | None, list[str]] = {}  # DISTINCT argument (None: not DISTINCT) -> its calls
        for aggregate in aggregates:
            text = aggregate.sql()
            if text in replacements:
                continue
            name = self._fresh(f"${aggregate.key}{len(names)}")
            call = aliased(self._renamed(aggregate, relation.columns), name)
            calls.append(call)
            names.append(name)
            replacements[text] = name
            argument = aggregate.this
            kinds.setdefault(argument.sql() if isinstance(argument, exp.Distinct) else None, []).append(call)
        if not key_names and len(kinds) > 1 and any(kind is not None for kind in kinds):
            return self._split_global_aggregation(relation, list(kinds.values()), replacements, select)
        node = relation.node
        try:
            builder = self._builder(node)
            if pre:
                passthrough = [quoted(n) for n in node.output_schema.names]
                builder = builder.project(passthrough + pre)
            node = builder.aggregation([quoted(k) for k in key_names], calls).plan()
        except PlanError as error:
            raise self._plan_error(error, aggregates[0] if aggregates else group[0]) from None
        if key_names:
            ndv = 1.0
            for k in key_names:
                known = relation.stats[k].ndv if k in relation.stats else 0
                ndv *= known or max(1.0, relation.rows / 10)
            rows = max(1.0, min(relation.rows, ndv))
        else:
            rows = 1.0
        stats = {k: relation.stats[k].capped(rows) for k in key_names if k in relation.stats}
        aggregated = Relation(node, dict(key_columns), relation.aliases, rows, stats)
        return aggregated, replacements, dict(key_columns)

    def _clone(self, node: PlanNode) -> PlanNode:
        """Return a copy of a plan subtree with fresh node ids (a second evaluation of the same input)."""
        sources = tuple(self._clone(source) for source in node.sources)
        return dataclasses.replace(node, id=self.ids.next_id(), sources=sources)

    def _split_global_aggregation(self, relation: Relation, call_groups: list[list], replacements, select):
        """Compute ``count(DISTINCT a), sum(b)`` without GROUP BY as one aggregation per DISTINCT argument.

        Why: the aggregation operator runs DISTINCT as a group-by on the
        argument first, which serves one argument at a time; each group of
        calls aggregates its own evaluation of the input (planned again, as a
        CTE referenced twice is) and the one-row results are cross joined.
        """
        node = None
        try:
            for number, calls in enumerate(call_groups):
                source = relation.node if number == 0 else self._clone(relation.node)
                part = self._builder(source).aggregation([], calls).plan()
                if node is None:
                    node = part
                else:
                    columns = list(node.output_schema.names) + list(part.output_schema.names)
                    node = self._builder(node).nested_loop_join(part, columns).plan()
        except PlanError as error:
            raise self._plan_error(error, select) from None
        return Relation(node, {}, relation.aliases, 1.0, {}), replacements, {}

    def _scalar_subqueries(self, tree: exp.Expression, relation: Relation, columns, ctes):
        """Cross join each uncorrelated scalar subquery in ``tree`` and replace it by its column."""
        subqueries = [s for s in tree.find_all(exp.Subquery)]
        if not subqueries:
            if has_subquery(tree):
                raise unsupported("EXISTS or IN (SELECT ...) outside WHERE", tree)
            return tree, relation, columns
        tree = tree.copy()
        # Outermost first (breadth-first), one at a time: a subquery nested inside one just planned (a derived
        # table in its FROM) went with it and is not a scalar subquery of this tree.
        while (subquery := tree.find(exp.Subquery, bfs=True)) is not None:
            select = _subquery_select(subquery.this)
            outer = {c.table for c in free_columns(select)} - defined_aliases(select) - {""}  # "": an output name
            if isinstance(select, exp.Select) and outer:
                raise unsupported("a correlated subquery outside WHERE", subquery)
            scalar, column = self._scalar_relation(subquery, ctes)
            keep = list(dict.fromkeys(list(relation.node.output_schema.names) + list(scalar.columns.values())))
            try:
                node = self._builder(relation.node).nested_loop_join(scalar.node, keep).plan()
            except PlanError as error:
                raise self._plan_error(error, subquery) from None
            columns = {**columns, **scalar.columns}
            relation = dataclasses.replace(relation, node=node, columns=columns)
            if subquery is tree:
                return column, relation, columns
            subquery.replace(column)
        return tree, relation, columns

    def _post_filter(self, relation: Relation, having: exp.Expression, columns, replacements, ctes) -> Relation:
        tree, relation, columns = self._scalar_subqueries(having, relation, columns, ctes)
        try:
            node = self._builder(relation.node).filter(self._renamed(tree, columns, replacements)).plan()
        except PlanError as error:
            raise self._plan_error(error, having) from None
        rows = max(1.0, relation.rows / 10)  # HAVING usually keeps few groups (Q18: 57 of 1.5 million)
        return dataclasses.replace(relation, node=node, rows=rows)
