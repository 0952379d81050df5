"""Check quantified comparisons ``x op ANY|SOME|ALL (subquery)`` where they stand; leave those typed plans take.

Why: ``x > ALL (SELECT …)`` is SQL's spelling of "above every value" and
DuckDB users write it. The SQL planner types it as a
:class:`~gpu_engine.plans.subqueries.QuantifiedComparison` (planned as ``x IN
(S)`` is: :func:`~gpu_engine.sql.decorrelation.semi_join_of`), wherever an
``IN (SELECT …)`` is a typed predicate — in WHERE under AND / OR / NOT or
inside an expression (:func:`~gpu_engine.sql.decorrelation.mark_predicates`),
in the SELECT list or ORDER BY (:func:`~gpu_engine.sql.subquery_values.typed_value_mark`)
— and the optimizer's decorrelation rule answers it with SQL's three values
from the subquery's ``count(*)``, ``count(column)``, ``min`` and ``max`` per
correlation key (``= ANY`` and ``<> ALL`` are IN and NOT IN there). This
module checks each comparison of a SELECT before it is planned:

* ``x = ANY (S)`` / ``x <> ALL (S)`` as a WHERE conjunct (through NOT) is
  written ``x [NOT] IN (S)`` (SQL defines them so): a semi or null-aware anti
  join at its table's scan, as an IN is planned (not over a correlated ``S``
  negated: that stays a mark join's NULL-aware flag).
* One correlated otherwise than by column equalities (``u.w < t.a``), which no
  mark join keys, is a CASE over correlated scalar subqueries — the facts
  ``count(*)``, ``count(v)``, ``min(v)``, ``max(v)`` and ``count(*) ... AND v =
  x`` — each split on a null-safe correlation's outer column by
  :mod:`~gpu_engine.sql.correlation_domains` (run again after this module), then
  typed scalar subqueries the decorrelation rule joins.
* In HAVING and an aggregating query's SELECT list it is typed over the groups
  (its value over their keys and aggregates: ``sum(a) > ALL (...)``).
* Refused by name, with an alternative: in QUALIFY or a JOIN condition, in
  HAVING correlated otherwise than by equalities with grouping keys, inside an
  aggregate or a window; over a list; a correlated subquery that
  aggregates, groups, orders or limits where no mark join plans it; a
  conjunct the typed path does not take (one that also holds a scalar
  subquery).
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.aggregate_planning import aggregates_of
from gpu_engine.sql.decorrelation import (
    correlation, mark_planned, mark_predicates, split_correlated, subquery_select)
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.predicates import conjuncts_of, defined_aliases, free_columns, own_scope_nodes
from gpu_engine.sql.subquery_values import typed_value_mark

__all__ = ["with_quantified_comparisons"]

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_SYMBOL = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
#: Clauses that make a correlated subquery more than a filtered set of values (not planned per outer value).
_SHAPING = ("group", "having", "limit", "offset", "distinct", "qualify", "windows", "order")


def _spelled(comparison: exp.Expression) -> str:
    quantifier = "ALL" if isinstance(comparison.expression, exp.All) else "ANY"
    return f"{_SYMBOL[type(comparison)]} {quantifier}"


def _quantified(tree: exp.Expression | None, found: list[exp.Expression]) -> list[exp.Expression]:
    """Collect the ANY/ALL nodes of ``tree``'s own scope (not those of the SELECTs nested in it)."""
    if tree is not None:
        found.extend(own_scope_nodes(tree, (exp.Any, exp.All)))
    return found


def _clause_trees(select: exp.Select, key: str) -> list[exp.Expression]:
    value = select.args.get(key)
    return value if isinstance(value, list) else [value] if value is not None else []


def _aggregating(select: exp.Select) -> bool:
    if select.args.get("group") or select.args.get("having"):
        return True
    return any(call.find_ancestor(exp.Window) is None for node in select.expressions  # not a subquery's own
               for call in aggregates_of(node))


def _top_level_where_conjunct(comparison: exp.Expression, select: exp.Select) -> bool | None:
    """Return whether ``comparison`` is one of the WHERE's AND-ed conjuncts (through NOT and parentheses): None
    where it is not, else whether an odd number of NOTs stands over it."""
    where = select.args.get("where")
    for conjunct in conjuncts_of(where.this if where is not None else None):
        negated = False
        while isinstance(conjunct, (exp.Not, exp.Paren)):
            negated ^= isinstance(conjunct, exp.Not)
            conjunct = conjunct.this
        if conjunct is comparison:
            return negated
    return None


def _typed_where(select: exp.Select, outer_aliases: set[str]) -> set[int]:
    """Return the ids of the WHERE's quantified comparisons the typed path plans: those of a conjunct whose
    subquery predicates :func:`~gpu_engine.sql.decorrelation.mark_predicates` takes (mark joins' flags)."""
    where = select.args.get("where")
    typed: set[int] = set()
    for conjunct in conjuncts_of(where.this if where is not None else None):
        marks = mark_predicates(conjunct, outer_aliases) if _quantified(conjunct, []) else None
        typed.update(id(mark) for mark in marks or [])
    return typed


class _PerRow:
    """A quantified comparison's facts as correlated scalar subqueries over its subquery's FROM and WHERE (a
    correlation other than column equalities: the planner runs :mod:`~gpu_engine.sql.correlation_domains` again
    over them, which splits a null-safe one on its outer column; the typed path binds each)."""

    def __init__(self, query: exp.Select, node: exp.Expression):
        self.node = node
        if len(query.selects) != 1:
            raise unsupported(f"{_spelled(node)} over a subquery of {len(query.selects)} columns (it must select "
                              "one)", node)
        value = query.selects[0]
        self.value = value.this if isinstance(value, exp.Alias) else value
        self.query = query

    def _select(self, outputs: list[exp.Expression], extra: list[exp.Expression]) -> exp.Select:
        select = exp.Select(expressions=outputs)
        select.set("from_", self.query.args["from_"].copy())
        if self.query.args.get("joins"):
            select.set("joins", [join.copy() for join in self.query.args["joins"]])
        where = self.query.args.get("where")
        filters = ([where.this.copy()] if where is not None else []) + extra
        if filters:
            select.set("where", exp.Where(this=exp.and_(*filters)))
        return select

    def fact(self, name: str) -> exp.Expression:
        call = {"n": exp.Count(this=exp.Star()), "nn": exp.Count(this=self.value.copy()),
                "lo": exp.Min(this=self.value.copy()), "hi": exp.Max(this=self.value.copy())}[name]
        return exp.Subquery(this=self._select([exp.alias_(call, name)], []))

    def matched(self, operand: exp.Expression) -> exp.Expression:
        """Whether a non-NULL value of the subquery equals ``operand``: its count per outer row above 0.

        Why a count, not EXISTS: a scalar fact as the others, split on a null-safe correlation's outer column and
        typed as they are (:mod:`~gpu_engine.sql.correlation_domains`); an EXISTS holding the key ``v = x`` beside
        that correlation was computed per distinct outer value on the sqlglot tree.
        """
        counted = exp.Subquery(this=self._select([exp.alias_(exp.Count(this=exp.Star()), "m")], [
            exp.EQ(this=self.value.copy(), expression=operand.copy())]))
        return exp.GT(this=counted, expression=exp.Literal.number(0))


def _case(whens: list[tuple[exp.Expression, exp.Expression]], default: exp.Expression) -> exp.Expression:
    return exp.Paren(this=exp.Case(ifs=[exp.If(this=c, true=v) for c, v in whens], default=default))


def _truth(value: bool | None) -> exp.Expression:
    return exp.Null() if value is None else exp.Boolean(this=value)


def _replacement(comparison: exp.Expression, facts: _PerRow) -> exp.Expression:
    """Return the CASE that is ``comparison`` over its facts (the same three-valued rules as the typed
    :class:`~gpu_engine.plans.subqueries.QuantifiedComparison`)."""
    operand = comparison.this
    every = isinstance(comparison.expression, exp.All)
    kind = type(comparison)
    fact = facts.fact
    empty = exp.EQ(this=fact("n"), expression=exp.Literal.number(0))
    unknown = exp.or_(exp.Is(this=operand.copy(), expression=exp.Null()),
                      exp.LT(this=fact("nn"), expression=fact("n")))
    if (kind is exp.EQ and not every) or (kind is exp.NEQ and every):  # membership: = ANY, <> ALL
        decided = facts.matched(operand)
    elif kind in (exp.EQ, exp.NEQ):  # <> ANY holds, = ALL fails, where x differs from the least or the greatest
        decided = exp.or_(exp.NEQ(this=operand.copy(), expression=fact("lo")),
                          exp.NEQ(this=operand.copy(), expression=fact("hi")))
    else:
        upward = kind in (exp.GT, exp.GTE)  # x > ANY: above the least; x > ALL: above the greatest
        bound = fact("lo" if upward != every else "hi")
        holds = kind(this=operand.copy(), expression=bound)
        decided = exp.Not(this=exp.Paren(this=holds)) if every else holds
    return _case([(decided, _truth(not every)), (empty, _truth(every)), (unknown, _truth(None))], _truth(every))


def _per_row(query: exp.Expression, comparison: exp.Expression, outer_aliases: set[str]) -> _PerRow | None:
    """Return the per-row facts of a comparison over a subquery correlated otherwise than by column equalities,
    None for one the typed path would take but for its position; refuse a correlated one of another shape."""
    if not free_columns(query):
        return None
    if not isinstance(query, exp.Select) or any(query.args.get(key) for key in _SHAPING) or any(
            e.find(*SQL_AGGREGATES) is not None for e in query.expressions):
        raise unsupported(f"{_spelled(comparison)} over a correlated subquery that aggregates, groups, orders, "
                          "limits or is DISTINCT (compare with a scalar subquery instead)", comparison)
    inner, _local, correlated = split_correlated(query, outer_aliases)
    keys, others = correlation(correlated, inner)
    return _PerRow(query, comparison) if others or not keys else None


def with_quantified_comparisons(select: exp.Select, planner) -> exp.Select:
    """Return ``select`` with its quantified comparisons checked (see the module docstring): those the typed
    path plans kept as written, a WHERE conjunct's ``= ANY`` / ``<> ALL`` an IN / NOT IN, one correlated
    otherwise than by column equalities a CASE over per-row facts; others refused, naming the comparison and its
    position. ``planner`` is the planning state (unused; the SELECT-rewrite signature)."""
    del planner
    found: list[exp.Expression] = []
    for key in ("expressions", "where", "having", "order", "qualify", "joins"):
        for tree in _clause_trees(select, key):
            _quantified(tree, found)
    if not found:
        return select
    select = select.copy()  # rewritten in place below; the caller's tree stays as it was
    placed = {}
    found = []
    for key in ("expressions", "where", "having", "order", "qualify", "joins"):
        for tree in _clause_trees(select, key):
            for node in _quantified(tree, []):
                found.append(node)
                placed[id(node)] = key
    outer_aliases = defined_aliases(select)
    aggregating = _aggregating(select)
    typed_where = _typed_where(select, outer_aliases)  # before any rewrite below changes a conjunct
    decided: list[tuple[exp.Expression, exp.Expression | None]] = []
    for node in found:
        comparison = node.parent
        if not isinstance(comparison, _COMPARISONS) or comparison.expression is not node:
            what = "ALL" if isinstance(node, exp.All) else "ANY"
            raise unsupported(f"{what} (...) other than on the right of a comparison (=, <>, <, <=, >, >=); "
                              "for a list of patterns write x LIKE 'a%' OR x LIKE 'b%'", comparison or node)
        query = subquery_select(node.this)
        if not isinstance(query, (exp.Select, exp.SetOperation)):
            raise unsupported(f"{_spelled(comparison)} over a list (write x IN (...) or x = a OR x = b)", comparison)
        clause = placed[id(node)]
        # in HAVING and an aggregating query's SELECT list: typed over the groups (their keys and aggregates)
        typed_over_groups = clause == "having" and mark_planned(comparison, outer_aliases) or (
            clause in ("expressions", "order") and typed_value_mark(select, comparison, clause))
        if clause in ("joins", "qualify") or (clause != "where" and aggregating and not typed_over_groups):
            where = {"having": "HAVING over a subquery correlated otherwise than by equalities with grouping keys",
                     "joins": "a JOIN condition", "qualify": "QUALIFY"}.get(
                clause, "the SELECT list of an aggregating query, inside an aggregate or a window")
            raise unsupported(f"{_spelled(comparison)} (subquery) in {where} (compare with a scalar subquery, e.g. "
                              f"x > (SELECT max(...) ...), or filter in WHERE)", comparison)
        if isinstance(comparison.this, exp.Tuple):
            raise unsupported(f"a row {_spelled(comparison)} (subquery) other than = ANY / <> ALL (compare the "
                              "columns one by one)", comparison)
        every = isinstance(node, exp.All)
        membership = (isinstance(comparison, exp.EQ) and not every) or (isinstance(comparison, exp.NEQ) and every)
        negated = _top_level_where_conjunct(comparison, select) if clause == "where" else None
        # a WHERE conjunct x [NOT] IN (S): a semi or null-aware anti join, but NOT IN over a correlated S only as
        # a NULL-aware mark join (the WHERE path plans no correlated null-aware anti join)
        if membership and negated is not None and not ((negated != every) and free_columns(query)):
            as_in = exp.In(this=comparison.this.copy(), query=exp.Subquery(this=query.copy()))
            decided.append((comparison, exp.Not(this=exp.Paren(this=as_in)) if every else as_in))
            continue
        typed = id(comparison) in typed_where if clause == "where" else typed_over_groups
        if typed:
            continue
        facts = _per_row(query, comparison, outer_aliases)
        selected = query.selects[0] if isinstance(query, exp.Select) and len(query.selects) == 1 else None
        selected = selected.this if isinstance(selected, exp.Alias) else selected
        if facts is None and free_columns(query) and not isinstance(selected, exp.Column):
            # (the typed mark join compares with a column of the subquery: it keys no computed value)
            raise unsupported(f"{_spelled(comparison)} over a correlated subquery selecting an expression (select "
                              "a column: compute it in a derived table, e.g. FROM (SELECT w + 1 AS x, k FROM s) s)",
                              comparison)
        if facts is None:
            where = "WHERE" if clause == "where" else "the SELECT list" if clause == "expressions" else "ORDER BY"
            raise unsupported(f"{_spelled(comparison)} (subquery) in {where} beside another subquery or inside an "
                              "aggregate, a window or a GROUP BY key holding a subquery (split the condition, or "
                              "compute the comparison in a derived table)", comparison)
        decided.append((comparison, _replacement(comparison, facts)))
    for comparison, replacement in decided:
        comparison.replace(replacement)
    return select
