"""Plan quantified comparisons ``x op ANY|SOME|ALL (subquery)`` with SQL's three-valued logic, as joins.

Why: ``x > ALL (SELECT …)`` is SQL's spelling of "above every value" and
DuckDB users write it; sqlglot parses it into a node the planner had no rule
for ("unsupported SQL construct Any"). Each comparison of a SELECT is
rewritten before the SELECT is planned, so the rest of the planner sees only
forms it already plans:

* ``x = ANY (S)`` is ``x IN (S)`` and ``x <> ALL (S)`` is ``NOT x IN (S)``
  (SQL defines IN that way) where the comparison is a WHERE conjunct: a semi
  join, a null-aware anti join, or under OR a mark join
  (:mod:`~gpu_engine.sql.decorrelation`; typed predicates :mod:`~gpu_engine.optimizer.decorrelation` joins).
* Every other comparison becomes a CASE over a few facts of ``S`` joined to
  the row: its row count ``n``, its non-NULL count ``nn``, its ``min`` and
  ``max`` (one row, cross joined, for an uncorrelated subquery; grouped by the
  correlation columns and LEFT joined on them for one correlated by column
  equalities), and for ``= ANY`` / ``<> ALL`` elsewhere the distinct non-NULL
  values of ``S`` LEFT joined on ``x`` (a mark join). ``x > ANY (S)`` is TRUE
  where ``x > min``; else FALSE for an empty ``S``, NULL when ``x`` is NULL or
  ``S`` holds a NULL, FALSE otherwise. ``x > ALL (S)`` is TRUE for an empty
  ``S``, FALSE where ``x <= max``, then NULL or TRUE alike. ``<> ANY`` and
  ``= ALL`` compare with both ``min`` and ``max``.

The joined facts are columns of the SELECT's rows, so the CASE may stand
anywhere in its WHERE or its SELECT list (under OR, NOT, inside CASE). It may
not stand in HAVING or beside aggregates (the facts are not grouping keys) or in
a JOIN's ON condition: those are refused by name, with an alternative. Over a
subquery correlated otherwise than by column equalities (``u.d < t.d``) each
fact is a correlated scalar subquery (``EXISTS (... AND v = x)`` for
membership), which :mod:`~gpu_engine.sql.subquery_values` computes per
distinct outer value.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from gpu_engine.plans.scalar_translation import membership_equality
from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.aggregate_planning import aggregates_of
from gpu_engine.sql.decorrelation import correlation, split_correlated, subquery_select
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.predicates import conjuncts_of, defined_aliases, free_columns, own_scope_nodes

__all__ = ["with_quantified_comparisons"]

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_SYMBOL = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
#: Clauses that make a correlated subquery more than a filtered set of values (planned only uncorrelated).
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


def _output_column(query: exp.Expression, node: exp.Expression) -> str:
    if len(query.selects) != 1:
        raise unsupported(f"{_spelled(node)} over a subquery of {len(query.selects)} columns (it must select one)",
                          node)
    return query.selects[0].alias_or_name


def _derived_join(select: exp.Select, alias: str, *, side: str | None = None,
                  on: exp.Expression | None = None) -> exp.Join:
    join = exp.Join(this=exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    if side:
        join.set("side", side)
        join.set("on", on)
    return join


class _Facts:
    """The joins that bring a subquery's facts (counts, bounds, values) to each row, and the columns naming them."""

    def __init__(self, query: exp.Expression, value: exp.Expression, outer_aliases: set[str], node, planner):
        self.node, self.planner = node, planner
        self.joins: list[exp.Join] = []
        self.correlated = bool(free_columns(query))
        self.per_row = False  # each fact a correlated scalar subquery (set below)
        if not self.correlated:  # any query: its one column read from a derived table
            source_alias = planner._synthetic_alias()
            self.value = exp.column(_output_column(query, node), table=source_alias, quoted=True)
            self.sources = [exp.From(this=exp.Subquery(this=query.copy(), alias=exp.TableAlias(
                this=exp.to_identifier(source_alias))))]
            self.local, self.keys = [], []
            return
        if not isinstance(query, exp.Select) or any(query.args.get(key) for key in _SHAPING) or any(
                e.find(*SQL_AGGREGATES) is not None for e in query.expressions):
            raise unsupported(f"{_spelled(node)} over a correlated subquery that aggregates, groups, orders, limits "
                              "or is DISTINCT (compare with a scalar subquery instead)", node)
        _output_column(query, node)
        inner, self.local, correlated = split_correlated(query, outer_aliases)
        self.keys, others = correlation(correlated, inner)
        # correlated otherwise than by column equalities: each fact a correlated scalar subquery, computed per
        # distinct outer value by the value planning (subquery_values), as DuckDB's general decorrelation does
        self.per_row = bool(others) or not self.keys
        if self.per_row:
            self.local, self.keys = self.local + correlated, []
        self.value = value.this if isinstance(value, exp.Alias) else value
        self.sources = [query.args["from_"]] + list(query.args.get("joins") or [])

    def _select(self, outputs: list[exp.Expression], extra_filters: list[exp.Expression]) -> exp.Select:
        select = exp.Select(expressions=outputs)
        select.set("from_", self.sources[0].copy())
        if self.sources[1:]:
            select.set("joins", [join.copy() for join in self.sources[1:]])
        filters = [f.copy() for f in self.local] + extra_filters
        if filters:
            select.set("where", exp.Where(this=exp.and_(*filters)))
        return select

    def _keys_on(self, alias: str) -> list[exp.Expression]:
        return [exp.EQ(this=outer.copy(), expression=exp.column(f"k{n}", table=alias))
                for n, (outer, _inner) in enumerate(self.keys)]

    def counts_and_bounds(self) -> Callable[[str], exp.Expression]:
        """Join ``n``, ``nn``, ``lo`` and ``hi`` of the subquery's values; return the expression naming each."""
        if self.per_row:
            facts = {"n": exp.Count(this=exp.Star()), "nn": exp.Count(this=self.value.copy()),
                     "lo": exp.Min(this=self.value.copy()), "hi": exp.Max(this=self.value.copy())}
            return lambda name: exp.Subquery(this=self._select([exp.alias_(facts[name].copy(), name)], []))
        alias = self.planner._synthetic_alias()
        keys = [exp.alias_(inner.copy(), f"k{n}") for n, (_outer, inner) in enumerate(self.keys)]
        facts = [exp.alias_(exp.Count(this=exp.Star()), "n"), exp.alias_(exp.Count(this=self.value.copy()), "nn"),
                 exp.alias_(exp.Min(this=self.value.copy()), "lo"), exp.alias_(exp.Max(this=self.value.copy()), "hi")]
        select = self._select(keys + facts, [])
        if self.keys:
            select.set("group", exp.Group(expressions=[inner.copy() for _outer, inner in self.keys]))
            self.joins.append(_derived_join(select, alias, side="LEFT", on=exp.and_(*self._keys_on(alias))))
        else:
            self.joins.append(_derived_join(select, alias))
        return lambda name: exp.column(name, table=alias)

    def matched(self, operand: exp.Expression) -> exp.Expression:
        """Return whether a non-NULL value of the subquery equals ``operand`` (a joined value, or EXISTS per row)."""
        if self.per_row:
            return exp.Exists(this=self._select([exp.Literal.number(1)], [
                exp.EQ(this=self.value.copy(), expression=operand.copy())]))
        return exp.Not(this=exp.Is(this=exp.column("v", table=self.values(operand)), expression=exp.Null()))

    def values(self, operand: exp.Expression) -> str:
        """LEFT join the distinct non-NULL values equal to ``operand``; return the alias of their column ``v``."""
        if not isinstance(operand, exp.Column):
            raise unsupported(f"{_spelled(self.node)} of an expression outside a WHERE conjunct (compare a column, "
                              "or write it as a WHERE condition x IN (SELECT ...))", self.node)
        alias = self.planner._synthetic_alias()
        keys = [exp.alias_(inner.copy(), f"k{n}") for n, (_outer, inner) in enumerate(self.keys)]
        not_null = exp.Not(this=exp.Is(this=self.value.copy(), expression=exp.Null()))
        select = self._select([exp.alias_(self.value.copy(), "v")] + keys, [not_null])
        select.set("distinct", exp.Distinct())
        on = exp.and_(membership_equality(operand.copy(), exp.column("v", table=alias)), *self._keys_on(alias))
        self.joins.append(_derived_join(select, alias, side="LEFT", on=on))
        return alias


def _case(whens: list[tuple[exp.Expression, exp.Expression]], default: exp.Expression) -> exp.Expression:
    return exp.Paren(this=exp.Case(ifs=[exp.If(this=c, true=v) for c, v in whens], default=default))


def _truth(value: bool | None) -> exp.Expression:
    return exp.Null() if value is None else exp.Boolean(this=value)


def _replacement(comparison: exp.Expression, facts: _Facts) -> exp.Expression:
    """Return the CASE that is ``comparison`` over the joined facts (see the module docstring)."""
    operand = comparison.this
    every = isinstance(comparison.expression, exp.All)
    kind = type(comparison)
    fact = facts.counts_and_bounds()
    empty = (exp.Is(this=fact("n"), expression=exp.Null()) if facts.correlated and not facts.per_row
             else exp.EQ(this=fact("n"), expression=exp.Literal.number(0)))
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
    # ANY: TRUE once a value decides it; ALL: FALSE once a value fails it (either only where S has a non-NULL
    # value, so the order of the first two branches does not matter). Then the empty set, then NULL, else the rest.
    return _case([(decided, _truth(not every)), (empty, _truth(every)), (unknown, _truth(None))], _truth(every))


def with_quantified_comparisons(select: exp.Select, planner) -> exp.Select:
    """Return ``select`` with each ``x op ANY|SOME|ALL (subquery)`` of its own scope rewritten (module docstring).

    ``planner`` is the planning state (its synthetic aliases). The SELECT comes back unchanged when it holds no
    quantified comparison; one that cannot be planned is refused, naming the comparison and its position.
    """
    found: list[exp.Expression] = []
    for key in ("expressions", "where", "having", "order", "qualify", "joins"):
        for tree in _clause_trees(select, key):
            _quantified(tree, found)
    if not found:
        return select
    select = select.copy()  # rewritten in place below; the caller's tree stays as it was
    found = []
    placed = {}
    for key in ("expressions", "where", "having", "order", "qualify", "joins"):
        for tree in _clause_trees(select, key):
            for node in _quantified(tree, []):
                found.append(node)
                placed[id(node)] = key
    outer_aliases = defined_aliases(select)
    aggregating = _aggregating(select)  # before the facts' scalar subqueries (aggregates) stand in the SELECT list
    joins = []
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
        if clause in ("having", "joins", "qualify") or (clause != "where" and aggregating):
            where = {"having": "HAVING", "joins": "a JOIN condition", "qualify": "QUALIFY"}.get(
                clause, "the SELECT list of an aggregating query")
            raise unsupported(f"{_spelled(comparison)} (subquery) in {where} (compare with a scalar subquery, e.g. "
                              f"x > (SELECT max(...) ...), or filter in WHERE)", comparison)
        every = isinstance(node, exp.All)
        membership = (isinstance(comparison, exp.EQ) and not every) or (isinstance(comparison, exp.NEQ) and every)
        negated = _top_level_where_conjunct(comparison, select) if clause == "where" else None
        # a WHERE conjunct x [NOT] IN (S): a semi or null-aware anti join, but NOT IN over a correlated S only as
        # the facts below (the WHERE path plans no correlated null-aware anti join)
        if membership and negated is not None and not ((negated != every) and free_columns(query)):
            as_in = exp.In(this=comparison.this.copy(), query=exp.Subquery(this=query.copy()))
            comparison.replace(exp.Not(this=exp.Paren(this=as_in)) if every else as_in)
            continue
        facts = _Facts(query, query.selects[0] if query.selects else node, outer_aliases, comparison, planner)
        comparison.replace(_replacement(comparison, facts))
        joins.extend(facts.joins)
    select.set("joins", list(select.args.get("joins") or []) + joins)
    return select
