"""Plan a qualified sqlglot query into the engine's plan nodes: the pipeline that every SELECT goes through.

The query arrives qualified (every column names its table alias, every
projection its output name; see :mod:`gpu_engine.sql.rewrite`). Each SELECT
is planned in this order, as a textbook optimizer would. Each step's rules
live in a module of their own, as DataFusion splits its optimizer: free
functions over the planning state
(:class:`~gpu_engine.sql.planning_context.PlanningContext`, which
:class:`QueryPlanner` is, so a rule can plan a nested query through it).
This module keeps the order of the steps, the sources and the output.

1. **Sources.** Every FROM item becomes a relation: a TableScan of the
   columns the query reads, or the plan of a derived table or CTE (planned at
   each reference: plans are trees, so a CTE referenced twice, as in TPC-H
   Q15, is computed twice — the executor has no shared subplans), or a
   VALUES list (:mod:`~gpu_engine.sql.values_lists`).
2. **Predicates** (:mod:`~gpu_engine.sql.predicates`). The WHERE clause and
   inner-join ON conditions are split into conjuncts; one over a single
   relation filters its scan, an equality of two relations' columns is a
   join edge, the rest wait for their join.
3. **Subqueries** (:mod:`~gpu_engine.sql.decorrelation`). IN and EXISTS
   become typed subquery predicates of a Filter (also under OR), which the
   optimizer rule :mod:`~gpu_engine.optimizer.decorrelation` makes semi and
   anti joins (under OR: mark joins, a match flag per row);
   scalar subqueries (in WHERE, SELECT, ORDER BY) typed ScalarSubquery
   expressions the same rule joins: the one-row build of a nested-loop join or,
   when correlated, an aggregate grouped by the correlation columns; a
   MIN/MAX/AVG subquery repeating the outer join (or a HAVING against its grand
   total) is a window over it instead
   (:mod:`~gpu_engine.sql.window_subqueries`).
4. **Joins** (:mod:`~gpu_engine.sql.join_ordering`). Greedy ordering on
   estimates (:mod:`gpu_engine.sql.statistics`), building the smaller side;
   queries with outer joins keep the written order, but for inner joins that
   commute with them, and a LEFT JOIN whose NULL-extended rows a condition
   rejects is an inner join (:mod:`~gpu_engine.sql.outer_joins`). Eager aggregation (the side of inner
   joins the aggregates read pre-aggregated below them) is an optimizer rule over the typed plan
   (:mod:`gpu_engine.optimizer.eager_aggregation`), after the pushdown has placed every filter.
5. **Aggregation and HAVING** (:mod:`~gpu_engine.sql.aggregate_planning`,
   :mod:`~gpu_engine.sql.grouping_sets`), **windows and QUALIFY**
   (:mod:`~gpu_engine.sql.windows`), then **SELECT, DISTINCT, ORDER BY,
   LIMIT** here; ORDER BY with LIMIT is a TopN. Set operations:
   :mod:`~gpu_engine.sql.set_operations`.

Every node is built through :class:`~gpu_engine.plans.plan_builder.PlanBuilder`,
whose one translator (:mod:`gpu_engine.plans.scalar_translation`: a sqlglot
tree to the typed IR, DuckDB's type rules) types hand-written and SQL-planned
expressions alike. The planner hands it the query's own parsed expressions
renamed to internal column names (the column's own name where it is unique in
the query, else ``alias.column``; :mod:`gpu_engine.sql.renaming`), never SQL
text to parse again: WHERE/ON conjuncts, SELECT lists, keys, aggregates, HAVING,
QUALIFY, window calls, set-operation and ``grouping()`` columns. Each node it
substitutes records the query's node it stands for, so a type error names the
expression as written, at its line and column
(:mod:`gpu_engine.plans.snippet_sources`); ``bench/plan_snapshots.py`` checks
that a change to this hand-over leaves the 22 TPC-H and 99 TPC-DS plans as they
were. Still text, read without tokenizing (``sql_translator._simple_snippet``):
bare column names, ``"a" AS "b"`` renames and ``"a" DESC NULLS LAST`` sort keys.
The plan this module returns then goes through the optimizer rules over the
typed plan (:mod:`gpu_engine.optimizer`: constant folding, predicate pushdown
with the filters an OR implies on each input, empty relations, projection
pruning; run by ``prepare_plan`` for every plan a Session, Spark or
JSON path executes), as does any hand-built plan: a rule there sees what the
SQL rules above made of each other (a HAVING-like filter above a UNION ALL of
CTE readers reaches each branch; a branch filtered by a constant that is never
true, as TPC-DS q4/q11/q74's ``'s' = 'w'``, is empty). Still over the sqlglot
tree (issue 30 item 0 is not done): decorrelation but for [NOT] EXISTS /
[NOT] IN conjuncts, join ordering and
choosing the scanned columns. A derived table's or CTE reference's conditions
are not pushed into its query here: the optimizer's pushdown places them (OR-implied
ones too), and the rules that estimate from them run after it (eager
aggregation, partial steps, build sides: :mod:`gpu_engine.optimizer`); the
SQL planner's copies of that pushdown (``derived_pushdown``, and
``predicates.implied_filters`` for ORs over several FROM items) and its eager
aggregation went once those were typed rules
(bench/results/2026-11-28-eagermove.md).
"""

from __future__ import annotations

import functools
from typing import Mapping

from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanBuilder
from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.aggregate_planning import aggregate_calls, plan_group_by, post_filter, typed_scalar_subqueries
from gpu_engine.sql.correlated_aggregate_sets import with_correlated_aggregate_sets
from gpu_engine.sql.correlated_derived_tables import with_subquery_correlations_pulled_up
from gpu_engine.sql.correlation_domains import with_correlation_domains
from gpu_engine.sql.decorrelation import (
    PARENTHESIZED_QUERY_CLAUSES, SemiJoin, plan_subquery_conjunct, scalar_filter, single_alias, subquery_filter,
    subquery_select,
)
from gpu_engine.sql.distinct_on import with_distinct_on_as_qualify
from gpu_engine.sql.duplicate_output_names import remember_shown_names, unique_output_names
from gpu_engine.sql.errors import SqlError, position_of, unsupported
from gpu_engine.sql.join_condition_subqueries import (
    with_inner_join_subqueries_in_where, with_join_condition_subqueries_computed)
from gpu_engine.sql.join_ordering import join_in_order, join_written
from gpu_engine.sql.one_row_aggregates import with_one_row_aggregates_merged
from gpu_engine.sql.one_row_extremes import with_one_row_extremes_lifted
from gpu_engine.sql.outer_join_filters import with_filters_through_left_joins
from gpu_engine.sql.outer_joins import with_rejected_left_joins_inner
from gpu_engine.sql.output_names import with_output_names_resolved
from gpu_engine.sql.planning_context import PlanningContext, Relation, TreeKey, quoted
from gpu_engine.sql.predicates import (
    defined_aliases, filtered, free_columns, has_subquery, pushed_down, where_conjuncts)
from gpu_engine.sql.quantified_comparisons import with_quantified_comparisons
from gpu_engine.sql.renaming import aliased
from gpu_engine.sql.set_operations import ordered_set_operation, plan_set_operation
from gpu_engine.sql.statistics import DEFAULT_TABLE_ROWS
from gpu_engine.sql.tuple_membership import with_tuple_memberships
from gpu_engine.sql.subquery_values import with_subquery_values_as_comparisons, with_subquery_values_joined
from gpu_engine.sql.series_sources import (is_correlated_series, is_series_source, plan_series, series_columns,
                                           unnested)
from gpu_engine.sql.values_lists import plan_values
from gpu_engine.sql.window_subqueries import with_subqueries_as_windows
from gpu_engine.sql.windows import check_window_positions, extract_windows, plan_windows

__all__ = ["QueryPlanner"]

#: SELECT clauses the planner reads (``hint``: optimizer hints, which never change a result); any other is refused.
_PLANNED_SELECT_CLAUSES = {"expressions", "from_", "joins", "where", "group", "having", "order", "limit", "offset",
                           "distinct", "with_", "hint", "qualify"}
_SELECT_CLAUSE_NAMES = {
    "windows": "WINDOW", "qualify": "QUALIFY", "pivots": "PIVOT", "connect": "CONNECT BY", "prewhere": "PREWHERE",
    "sample": "SAMPLE", "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY", "sort": "SORT BY",
    "locks": "FOR UPDATE / FOR SHARE", "into": "SELECT ... INTO", "laterals": "LATERAL VIEW",
    "match": "MATCH_RECOGNIZE", "kind": "SELECT AS STRUCT/VALUE", "exclude": "EXCLUDE", "for_": "FOR",
}


def _fetch_with_ties(clause: exp.Expression | None) -> bool:
    """Return True for ``FETCH FIRST n ROWS WITH TIES`` (sqlglot parses FETCH into the select's ``limit``)."""
    if not isinstance(clause, exp.Fetch):
        return False
    options = clause.args.get("limit_options")
    return bool(options is not None and options.args.get("with_ties"))


def _ordinal(key: exp.Expression, count: int) -> int | None:
    """Return the 0-based output ``ORDER BY <n>`` names, or None for another key.

    The qualifier turns ordinals into output names, but not one naming an output whose name repeats
    (``SELECT t.a, u.a ... ORDER BY 2``): that stays a number, which must not sort as a constant.
    """
    if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
        n = int(key.this)
        if not 1 <= n <= count:
            raise unsupported(f"ORDER BY {n}: the SELECT list has {count} columns", key)
        return n - 1
    return None


_NESTED_QUERIES = (exp.Select, exp.SetOperation, exp.Subquery, exp.Exists, exp.Any, exp.All)


def _holds_nested_query(select: exp.Select) -> bool:
    """Return whether a clause of ``select`` (its WITH aside) holds a query: a subquery, derived table, EXISTS...

    Why: the subquery rewrites of :meth:`QueryPlanner._plan_select` each search the SELECT's clauses for their
    shape and return it unchanged (the same object) without one; most SELECTs hold none, and one walk that stops
    at the first nested query replaces their ten (issue 29: planning a new text). ANY/ALL count even over a list,
    which :func:`~gpu_engine.sql.quantified_comparisons.with_quantified_comparisons` refuses by name.
    """
    stack = [node for key, value in select.args.items() if key not in ("with_", "with")
             for node in (value if isinstance(value, list) else [value]) if isinstance(node, exp.Expression)]
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED_QUERIES):
            return True
        stack.extend(node.iter_expressions())
    return False


def _refuse_unplanned_clauses(select: exp.Select) -> None:
    """Refuse a SELECT clause the planner does not read, naming it (never ignore it)."""
    for key, value in select.args.items():
        if value and key not in _PLANNED_SELECT_CLAUSES:
            node = value[0] if isinstance(value, list) else value
            raise unsupported(_SELECT_CLAUSE_NAMES.get(key, key.upper()),
                              node if isinstance(node, exp.Expression) else select)


def _refuse_unplanned_joins(joins: list[exp.Join]) -> None:
    """Refuse the JOIN forms the planner does not plan (USING, SEMI/ANTI/ASOF/POSITIONAL/LATERAL, ...), naming them."""
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


def _null_extended(items: list[tuple[exp.Expression, exp.Join | None]]) -> set[str]:
    """Return the aliases of the FROM items an outer join NULL-extends (the right of LEFT, the left of RIGHT)."""
    null_supplying = set()
    for item, join in items[1:]:
        side = (join.side or "").upper()
        if side in ("LEFT", "FULL"):
            null_supplying.add(item.alias_or_name)
        if side in ("RIGHT", "FULL"):
            null_supplying.update(other.alias_or_name for other, j in items if j is not join
                                  and items.index((other, j)) < items.index((item, join)))
    return null_supplying


def _shown_names(item: exp.Table, table: str, schema: pa.Schema) -> list[str]:
    """Return the names a query reads a table's columns by: ``FROM t AS a(x, y)`` renames its first columns (DuckDB
    keeps the rest's names); more names than columns are refused."""
    alias = item.args.get("alias")
    renamed = [column.name for column in alias.columns] if alias is not None and alias.columns else []
    if len(renamed) > len(schema.names):
        line, col = position_of(item)
        raise SqlError(f"table {table!r} has {len(schema.names)} columns but the alias {alias.name!r} names "
                       f"{len(renamed)}", line=line, col=col, name=alias.name)
    return renamed + list(schema.names[len(renamed):])


class QueryPlanner(PlanningContext):
    """Plan qualified sqlglot queries over ``catalog`` (see the module docstring; the state: its base class)."""

    # ---------------------------------------------------------------- queries
    def plan(self, query: exp.Query) -> PlanNode:
        """Return the plan of a whole query, its output columns named as the SELECT names them."""
        relation, outputs = self._plan_query(query, {})
        spelled = query.meta.get("output_names", {}) if query.meta else {}
        outputs = [(spelled.get(name, name), internal) for name, internal in outputs]
        shown = [name for name, _ in outputs]
        names = unique_output_names(shown)  # two columns of one name: the plan's are unique, the result's as written
        if [internal for _, internal in outputs] == names and list(relation.node.output_schema.names) == names:
            plan = relation.node
        else:
            projections = [f"{quoted(internal)} AS {quoted(name)}" for (_, internal), name in zip(outputs, names)]
            plan = self._builder(relation.node).project(projections).plan()
        if names != shown:
            remember_shown_names(plan, shown)
        return plan

    def _plan_query(self, query: exp.Expression, ctes: Mapping[str, exp.Expression]
                    ) -> tuple[Relation, list[tuple[str, str]]]:
        """Plan a SELECT or set operation with its WITH clause; return it and its (output, column) names."""
        query = subquery_select(query)
        with_ = query.args.get("with_") or query.args.get("with")
        if with_ is not None:
            ctes = self._with_ctes(with_, ctes)
        if isinstance(query, exp.SetOperation):
            if any(query.args.get(key) is not None for key in PARENTHESIZED_QUERY_CLAUSES):
                return self._plan_select(ordered_set_operation(query, self._synthetic_alias()), ctes)
            return plan_set_operation(self, query, ctes)
        if not isinstance(query, exp.Select):
            raise unsupported(f"{query.key.upper()} queries", query)
        return self._plan_select(query, ctes)

    def _with_ctes(self, with_: exp.With, ctes: Mapping[str, exp.Expression]) -> dict[str, exp.Expression]:
        """Return ``ctes`` with the CTEs of ``with_`` added, each body's own scope recorded for :meth:`_plan_source`.

        Why: as in DuckDB, a CTE's body sees the CTEs written before it (and the enclosing queries'), not itself
        or later ones: ``WITH o AS (SELECT * FROM o WHERE ...)`` reads the table ``o`` in its body (planned in
        the scope of the whole WITH, it named itself without end, refused as nesting too deeply), and ``WITH u AS
        (SELECT * FROM o), o AS (...)`` reads the table in ``u``. Under WITH RECURSIVE a CTE that is not a UNION
        of a part reading itself is such a plain CTE, as in DuckDB.
        """
        ctes = dict(ctes)
        for cte in with_.expressions:  # (two CTEs of one name, a recursive one: refused before, sql/refusals.py)
            self._cte_scopes[id(cte.this)] = (cte.this, dict(ctes))
            ctes[cte.alias_or_name] = cte.this
        return ctes

    @functools.cached_property
    def _cte_scopes(self) -> dict[int, tuple[exp.Expression, Mapping[str, exp.Expression]]]:
        """Each CTE body planned so far (by ``id``) with the CTEs it sees (:meth:`_with_ctes`)."""
        return {}

    # ----------------------------------------------------------------- select
    def _plan_select(self, select: exp.Select, ctes: Mapping[str, exp.Expression]
                     ) -> tuple[Relation, list[tuple[str, str]]]:
        """Plan one SELECT through the steps of the module docstring; return it and its (output, column) names."""
        _refuse_unplanned_clauses(select)
        select = with_distinct_on_as_qualify(select)  # DISTINCT ON (k): QUALIFY row_number() OVER (...) = 1
        check_window_positions(select)
        nested = _holds_nested_query(select)  # without one, each subquery rewrite returns the SELECT as it is
        if nested:
            select = with_inner_join_subqueries_in_where(select)  # JOIN u ON ... (subquery): a WHERE conjunct
            select = with_subquery_correlations_pulled_up(select)  # (SELECT .. FROM (SELECT .. t.a ..) s)
            select = with_subqueries_as_windows(select)  # a subquery repeating the outer join: a window over it
            select = with_one_row_aggregates_merged(select, self)  # sibling one-row aggregates: one pass, FILTERs
            select = with_correlation_domains(select, self)  # u.d < t.d: correlated by equalities over its domain
            select = with_correlated_aggregate_sets(select, self)  # x IN (correlated GROUP BY): per key, or x = (S)
            select = with_tuple_memberships(select, self)  # (a, b) IN (SELECT x, y ...): EXISTS, or joined facts
            select = with_subquery_values_as_comparisons(select)  # x IN (SELECT ...) as a value: x = ANY (...)
            compared = with_quantified_comparisons(select, self)  # x > ALL (SELECT ...): checked, typed later
            if compared is not select:  # its per-row facts correlated null-safe (IN / ANY / ALL): split as others
                compared = with_correlation_domains(compared, self)
            select = compared
            select = with_join_condition_subqueries_computed(select, self, ctes)  # outer joins: a FROM item's column
        select = with_rejected_left_joins_inner(select)  # a LEFT JOIN whose NULL rows WHERE drops is inner
        if nested:
            select = with_subquery_values_joined(select, self)  # other subqueries used as values: LEFT JOINs
        select = with_one_row_extremes_lifted(select, ctes)  # GROUP BY over t, r: max(r.c) read after it
        from_ = select.args.get("from_")
        if from_ is None:
            raise unsupported("SELECT without FROM", select)
        joins = select.args.get("joins") or []
        outer_joins = any(j.side or (j.kind or "").upper() in ("OUTER", "FULL") for j in joins)
        _refuse_unplanned_joins(joins)

        # The FROM items, those an outer join NULL-extends, the WHERE's conjuncts, the columns read after the joins.
        items = [(from_.this, None)] + [(j.this, j) for j in joins]
        null_supplying = _null_extended(items)
        pool = where_conjuncts(select, items, outer_joins)

        local_aliases = {item.alias_or_name for item, _ in items}
        needed = self._needed_columns(select)
        correlated_series = any(is_correlated_series(item) for item, _ in items)
        if correlated_series:  # FROM t, generate_series(1, t.n): the scans read the series' arguments
            needed |= series_columns([item for item, _ in items])
        if outer_joins:  # ON conditions are applied in the written order, after the WHERE is split
            for _, join in items[1:]:
                if join.args.get("on") is not None:
                    needed.update((c.table, c.name) for c in free_columns(join.args["on"]))

        # Subquery predicates become relations, join edges and semi joins.
        plain: list[exp.Expression] = []
        semi_joins: list[SemiJoin] = []
        attach: dict[str | None, list[tuple[Relation, exp.Expression]]] = {}  # scalar subqueries: alias or None
        self._scopes.append((items, pool, null_supplying))
        try:
            for conjunct in pool:
                if not has_subquery(conjunct):
                    plain.append(conjunct)
                    continue
                plan_subquery_conjunct(self, conjunct, local_aliases, ctes, semi_joins, attach)
        finally:
            self._scopes.pop()

        # Predicates of one relation filter it; the others wait for their join.
        pushed, pending = pushed_down(plain, local_aliases, null_supplying)
        if outer_joins:  # a LEFT JOIN's NULL-extended item filtered by what WHERE keeps of the key it equals
            with_filters_through_left_joins(pushed, items, null_supplying)

        # The columns semi joins and one-row subquery filters read, and those the filters at the scans read.
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
        # Sources, each filtered by its own conjuncts, its one-row subquery filters and its uncorrelated IN.
        relations = {}
        for item, join in items:
            alias = item.alias_or_name
            if is_correlated_series(item):  # planned over the items it reads, once they are joined
                continue
            relation = self._plan_source(item, ctes, scanned)
            relation = filtered(self, relation, pushed[alias])
            for semi in [s for s in semi_joins if s.early and single_alias(s) == alias
                         and alias not in null_supplying]:
                relation = subquery_filter(self, relation, semi)
                semi_joins.remove(semi)
            for sub, conjunct in attach.get(alias, []):  # after its IN filters (TPC-H Q20: fewer rows to join)
                relation = scalar_filter(self, relation, sub, conjunct)
            relations[alias] = relation

        # Joins, then the conditions and semi joins left over.
        if correlated_series:
            if outer_joins:
                raise unsupported("a table function reading another FROM item's columns (FROM t, "
                                  "generate_series(1, t.n)) in a query with outer joins; put the outer join in a "
                                  "derived table", next(item for item, _ in items if is_correlated_series(item)))
            relations = unnested(self, [item for item, _ in items], relations, pushed, pending, needed)
        if outer_joins:
            relation = join_in_order(self, items, relations, pending, needed)
        else:
            relation = join_written(self, list(relations.values()), pending, needed)
        if pending:
            relation = filtered(self, relation, pending)
        for sub, conjunct in attach.get(None, []):  # comparisons with a scalar subquery reading several items
            relation = scalar_filter(self, relation, sub, conjunct)
        for semi in semi_joins:
            relation = subquery_filter(self, relation, semi)
        return self._finish_select(select, relation, ctes)

    def _needed_columns(self, select: exp.Select) -> set[tuple[str, str]]:
        """Return the (alias, column) pairs a SELECT reads after its joins (its clauses other than FROM/WHERE)."""
        out = set()
        for key in ("expressions", "group", "having", "order", "distinct", "qualify"):
            value = select.args.get(key)
            for tree in (value if isinstance(value, list) else [value] if value is not None else []):
                out.update((c.table, c.name) for c in free_columns(tree))
        return out

    # ----------------------------------------------------------------- sources
    def _plan_source(self, item: exp.Expression, ctes: Mapping[str, exp.Expression],
                     needed: set[tuple[str, str]]) -> Relation:
        """Plan one FROM item: a table's scan of the ``needed`` columns, a CTE, a derived table or VALUES."""
        alias = item.alias_or_name
        if isinstance(item, exp.Table) and item.name in ctes and not item.args.get("db"):
            body = ctes[item.name]
            scoped = self._cte_scopes.get(id(body))
            return self._derived(body, alias, scoped[1] if scoped is not None and scoped[0] is body else ctes)
        if isinstance(item, exp.Subquery):
            return self._derived(item.this, alias, ctes)
        if is_series_source(item):  # range(...) / generate_series(...)
            return plan_series(self, item, alias)
        if isinstance(item, exp.Values):
            return plan_values(self, item, alias, ctes)
        if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier):
            raise unsupported(f"{item.key.upper()} as a FROM item", item)
        return self._scan(item, alias, needed)

    def _scan(self, item: exp.Table, alias: str, needed: set[tuple[str, str]]) -> Relation:
        """Scan the columns of table ``item`` the query reads, renamed to internal names, with its statistics."""
        table = item.name
        schema = self.catalog.get(table)
        if schema is None:
            matches = [t for t in self.catalog if t.lower() == table.lower()]
            if not matches:
                line, col = position_of(item)
                raise SqlError(f"unknown table {table!r}", line=line, col=col, name=table)
            table, schema = matches[0], self.catalog[matches[0]]
        shown = _shown_names(item, table, schema)  # FROM t AS a(x, y): the columns' names in the query
        by_lower = {name.lower(): stored for name, stored in zip(shown, schema.names)}
        wanted = [by_lower[name.lower()] for name in dict.fromkeys(n for a, n in needed if a == alias)
                  if name.lower() in by_lower]
        wanted = [name for name in schema.names if name in wanted] or [schema.names[0]]
        visible = dict(zip(schema.names, shown))
        internal = [self._fresh(visible[name], alias) for name in wanted]
        statistics = self.statistics.get(table)
        rows = statistics.rows if statistics is not None else float(DEFAULT_TABLE_ROWS)
        try:
            builder = PlanBuilder(self.catalog, id_generator=self.ids).table_scan(table, wanted)
            if internal != wanted:
                builder = builder.project([f"{quoted(w)} AS {quoted(i)}" for w, i in zip(wanted, internal)])
        except PlanError as error:
            raise self._plan_error(error, item) from None
        columns = {(alias, visible[w].lower()): i for w, i in zip(wanted, internal)}
        columns.update({(alias, visible[w]): i for w, i in zip(wanted, internal)})
        stats = {}
        for w, i in zip(wanted, internal):
            if statistics is not None and w in statistics.columns:
                stats[i] = statistics.columns[w]
        return Relation(builder.plan(), columns, frozenset([alias]), rows, stats)

    def _derived(self, query: exp.Expression, alias: str, ctes: Mapping[str, exp.Expression]) -> Relation:
        """Plan a derived table or a CTE's query as a relation answering to ``alias``."""
        relation, outputs = self._plan_query(query, ctes)
        # two outputs of one name (SELECT * over a join): the first keeps it, the next are a_1, ... (as DuckDB)
        names = unique_output_names([name for name, _ in outputs])
        columns = {(alias, name): internal for name, (_, internal) in zip(names, outputs)}
        return Relation(relation.node, columns, frozenset([alias]), relation.rows, relation.stats)

    # ------------------------------------------------------ aggregation & output
    def _finish_select(self, select: exp.Select, relation: Relation, ctes) -> tuple[Relation, list[tuple[str, str]]]:
        """Plan what follows the joins: aggregation, HAVING, windows, QUALIFY, SELECT, DISTINCT, ORDER BY, LIMIT."""
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
            elif _ordinal(key, len(projections)) is not None:  # ORDER BY 2 the qualifier left: a repeated name
                order_trees.append(None)
            else:
                order_trees.append(key)
        order_trees = [with_output_names_resolved(tree, projections) for tree in order_trees]
        # Windows run after aggregation: each becomes a placeholder column; the aggregates inside them count.
        qualify = select.args["qualify"].this if select.args.get("qualify") else None  # filters window results
        projections, [*order_trees, qualify], windows, window_inputs = extract_windows(
            self, projections, order_trees + [with_output_names_resolved(qualify, projections)], SQL_AGGREGATES)
        if qualify is not None and not windows:
            raise unsupported("QUALIFY without a window function (filter with WHERE or HAVING)", select.args["qualify"])
        trees = (projections + ([having] if having is not None else []) + [t for t in order_trees if t is not None]
                 + window_inputs + ([qualify] if qualify is not None else []))
        aggregates = aggregate_calls(trees)
        for ordered in order:
            if ordered.args.get("with_fill"):
                raise unsupported("ORDER BY ... WITH FILL", ordered)
        relation, replacements, columns = plan_group_by(self, relation, select, group, aggregates, trees, having, ctes)
        if windows:
            relation, columns = plan_windows(self, relation, windows, columns, replacements, ctes,
                                             defined_aliases(select))
        if qualify is not None:
            relation = post_filter(self, relation, qualify, columns, replacements, ctes, defined_aliases(select))
        # The SELECT list (and hidden ORDER BY expressions), computed in one projection.
        outputs, exprs, texts = [], [], []  # texts: each renamed expression's key, to find an ORDER BY key among them
        outer_aliases = defined_aliases(select)  # a scalar subquery's correlated references (typed_scalar_subqueries)
        for p, name in zip(projections, output_names):
            tree = p.this if isinstance(p, exp.Alias) else p
            renamed = typed_scalar_subqueries(self, tree, relation, columns, replacements, ctes, outer_aliases)
            outputs.append(name)
            exprs.append(renamed)
            if order:  # only an ORDER BY looks keys up among them
                # typed (a ScalarSubquery): the tree as written, which an ORDER BY key holding the same subquery repeats
                texts.append((False, TreeKey(renamed)) if isinstance(renamed, exp.Expression)
                             else (True, TreeKey(tree)))
        sort_keys = []
        hidden = []
        for ordered, key in zip(order, order_trees):
            direction = "DESC" if ordered.args.get("desc") else "ASC"
            nulls_first = ordered.args.get("nulls_first")
            nulls = " NULLS FIRST" if nulls_first else " NULLS LAST"
            if key is None:
                index = _ordinal(ordered.this, len(projections))
                if index is None:
                    index = output_names.index(ordered.this.name)
            else:
                typed = (True, TreeKey(key)) if has_subquery(key) else None
                renamed = None if typed in texts else typed_scalar_subqueries(
                    self, key, relation, columns, replacements, ctes, outer_aliases)  # (a subquery planned once)
                text = typed if renamed is None or not isinstance(renamed, exp.Expression) \
                    else (False, TreeKey(renamed))
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
                [aliased(tree, name) if isinstance(tree, exp.Expression) else (name, tree)  # typed: a ScalarSubquery
                 for tree, name in zip(all_exprs, internal)])
            if select.args.get("distinct"):
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
        """Return the row count of a LIMIT, OFFSET or FETCH clause (None without one), refusing other forms."""
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
        if isinstance(value, exp.Null):  # LIMIT NULL / OFFSET NULL (a NULL parameter): no limit, no offset (DuckDB)
            return None
        if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
            raise unsupported(f"{what} other than an integer constant", clause)
        return int(value.this)
