"""Plan ``(a, b) [NOT] IN (SELECT x, y ...)``: row membership in a subquery, with SQL's three-valued logic, as joins.

Why a rule of its own: a row IN compares several columns at once, and its
NULL semantics are not those of one column. ``(a, b) IN (S)`` is TRUE where a
row of ``S`` equals ``(a, b)`` on every column; else NULL where a row of ``S``
could equal it but for NULLs (on every column: ``a = x``, or ``a`` or ``x`` is
NULL); else FALSE (also for an empty ``S``). So ``(3, 'z') IN ((3, NULL))`` is
NULL and ``(NULL, 'y') NOT IN ((1, 'x'))`` is TRUE, as in DuckDB. The
single-column null-aware anti join (nothing when the build side holds a NULL)
is wrong here: a NULL in one column of a row does not make every other row's
answer NULL.

* Where only TRUE counts (a WHERE conjunct, or reached from one through AND
  and OR alone, no NOT) NULL and FALSE filter alike. A conjunct stays an IN:
  :mod:`~gpu_engine.sql.decorrelation` plans it as a semi join on every
  column, at the scan of the table it reads. Under OR it stays an IN too, typed
  as an ``Exists`` of the row's equalities (the optimizer's mark join), where
  the conjunct's other subqueries are typed marks; else a LEFT join of the
  subquery's distinct rows on equality. A correlated subquery that
  does not aggregate, group or limit is ``EXISTS`` with the equalities in its
  own WHERE (DuckDB refuses a correlated row IN).
* Anywhere else (``NOT IN``, the SELECT list, under NOT or inside CASE) the
  value is a CASE over three LEFT joins of derived tables, each with one row
  per key, so no outer row is repeated: the distinct rows of ``S`` joined on
  equality (TRUE), and the outer tuples that only NULLs keep from matching
  (NULL). Those come from the distinct outer tuples (of the one FROM item
  the left side reads) crossed with ``S``, where the outer tuple or the row
  of ``S`` has a NULL (two nested-loop products of the rows with NULLs, not
  of all rows); the ones without a NULL join back on equality (a hash join),
  the ones with a NULL by ``IS NOT DISTINCT FROM`` (a nested-loop join of the
  outer rows with the few tuples holding a NULL).

The distinct outer tuples are those of the one FROM item the row reads, or,
where it reads several or the side an outer join fills with NULLs, of the
query's FROM items joined as written (its join computed once more).

Refused by name: a value-position row IN over a correlated subquery, a left
side reading no FROM item, in an aggregating query's SELECT list, and
subqueries whose column count differs from the row's.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.aggregate_planning import aggregates_of
from gpu_engine.sql.decorrelation import mark_predicates, subquery_select
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.predicates import (
    conjuncts_of, defined_aliases, free_columns, has_subquery, reached_through_and_or)

__all__ = ["with_tuple_memberships"]

#: Clauses after which a correlated subquery is more than a filtered set of rows (its equalities cannot go inside).
_SHAPING = ("group", "having", "limit", "offset", "qualify", "windows", "order")


def _membership(node: exp.Expression) -> tuple[exp.Tuple, exp.Expression, bool] | None:
    """Return (row, subquery, negated) when ``node`` is a row compared with a subquery's rows, else None.

    ``(a, b) IN (S)`` and ``(a, b) = ANY (S)``; ``(a, b) <> ALL (S)`` is NOT IN.
    """
    if isinstance(node, exp.In) and isinstance(node.this, exp.Tuple) and node.args.get("query") is not None:
        return node.this, node.args["query"], False
    if isinstance(node, (exp.EQ, exp.NEQ)) and isinstance(node.this, exp.Tuple):
        quantifier = node.expression
        if isinstance(node, exp.EQ) and isinstance(quantifier, exp.Any):
            return node.this, quantifier.this, False
        if isinstance(node, exp.NEQ) and isinstance(quantifier, exp.All):
            return node.this, quantifier.this, True
    return None


def _own_memberships(tree: exp.Expression | None) -> list[exp.Expression]:
    """Return the row memberships of ``tree``'s own scope (not those of SELECTs nested in it), outermost first."""
    found, stack = [], [tree] if tree is not None else []
    while stack:
        node = stack.pop()
        if _membership(node) is not None:
            found.append(node)
            continue
        if isinstance(node, (exp.Select, exp.SetOperation, exp.Subquery)):
            continue
        stack.extend(node.iter_expressions())
    return found


def _outputs(query: exp.Expression) -> list[exp.Expression]:
    """Return the projections of a SELECT or of a set operation's first SELECT (which name its columns)."""
    while isinstance(query, exp.SetOperation):
        query = subquery_select(query.this)
    return list(query.expressions) if isinstance(query, exp.Select) else []


def _renamed(query: exp.Expression, names: list[str]) -> exp.Expression:
    """Return a copy of ``query`` whose output columns are called ``names`` (a set operation: its first SELECT)."""
    query = query.copy()
    first = query
    while isinstance(first, exp.SetOperation):
        first = first.this
        while isinstance(first, exp.Subquery):
            first = first.this
    first.set("expressions", [exp.alias_(e.this.copy() if isinstance(e, exp.Alias) else e.copy(), name)
                              for e, name in zip(first.expressions, names)])
    return query


def _derived(query: exp.Expression, alias: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _select(expressions: list[exp.Expression], *items: exp.Expression, where: exp.Expression | None = None,
            distinct: bool = False) -> exp.Select:
    select = exp.Select(expressions=expressions)
    select.set("from_", exp.From(this=items[0]))
    if len(items) > 1:
        select.set("joins", [exp.Join(this=item) for item in items[1:]])
    if where is not None:
        select.set("where", exp.Where(this=where))
    if distinct:
        select.set("distinct", exp.Distinct())
    return select


def _is_null(tree: exp.Expression) -> exp.Expression:
    return exp.Is(this=tree.copy(), expression=exp.Null())


def _null_extended(select: exp.Select) -> set[str]:
    """Return the aliases of the FROM items an outer join of ``select`` fills with NULLs."""
    items = [select.args["from_"].this] + [join.this for join in select.args.get("joins") or []]
    out = set()
    for n, join in enumerate(select.args.get("joins") or [], start=1):
        side = (join.side or "").upper()
        if side in ("LEFT", "FULL"):
            out.add(items[n].alias_or_name)
        if side in ("RIGHT", "FULL"):
            out.update(item.alias_or_name for item in items[:n])
    return out


def _stripped(tree: exp.Expression) -> exp.Expression:
    while isinstance(tree, exp.Paren):
        tree = tree.this
    return tree


def _equal(left: exp.Expression, right: exp.Expression) -> exp.Expression:
    return exp.EQ(this=left.copy(), expression=right.copy())


def _null_safe_equal(left: exp.Expression, right: exp.Expression) -> exp.Expression:
    """``left IS NOT DISTINCT FROM right`` as the CASE the expression IR has (the rewrite step ran before)."""
    return exp.Paren(this=exp.Case(ifs=[exp.If(this=_is_null(left), true=_is_null(right)),
                                        exp.If(this=_is_null(right), true=exp.false())],
                                   default=_equal(left, right)))


def _any_of(trees: list[exp.Expression]) -> exp.Expression:
    return exp.Paren(this=exp.or_(*trees)) if len(trees) > 1 else trees[0]


class _Memberships:
    """Rewrites one SELECT's row memberships; collects the LEFT joins their values read."""

    def __init__(self, select: exp.Select, planner):
        self.select, self.planner = select, planner
        self.aliases = defined_aliases(select)
        self.items = [select.args["from_"].this] + [join.this for join in select.args.get("joins") or []]
        self.item_joins = list(select.args.get("joins") or [])  # as written, before the LEFT joins added here
        where = select.args.get("where")
        # the WHERE's conjuncts without subqueries: every row of the query meets them (a domain may too)
        self.plain_where = [c.copy() for c in conjuncts_of(where.this if where is not None else None)
                            if not has_subquery(c)]
        self.joins: list[exp.Join] = []

    def _columns(self, count: int) -> list[str]:
        return [f"c{n}" for n in range(count)]

    def _checked(self, node: exp.Expression) -> tuple[list[exp.Expression], exp.Expression, bool, bool]:
        """Return the row's values, the subquery's query, whether negated and whether correlated (checked)."""
        row, subquery, negated = _membership(node)
        values = list(row.expressions)
        query = subquery_select(subquery.this if isinstance(subquery, exp.Subquery) else subquery)
        if not isinstance(query, (exp.Select, exp.SetOperation)):
            raise unsupported(f"a row IN over {query.key.upper()}", node)
        outputs = _outputs(query)
        if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
               for e in outputs):
            raise unsupported("a row IN over a subquery selecting *", node)
        if len(outputs) != len(values):
            raise unsupported(f"a row of {len(values)} values IN a subquery of {len(outputs)} columns (they must "
                              "match)", node)
        inner = defined_aliases(query) if isinstance(query, exp.Select) else set()
        correlated = any(c.table and c.table not in inner for c in free_columns(query))
        return values, query, negated, correlated

    def positive(self, node: exp.Expression, conjunct: exp.Expression) -> exp.Expression:
        """Return what replaces ``node`` where only its TRUE rows count (NULL and FALSE are dropped alike)."""
        values, query, negated, correlated = self._checked(node)
        if correlated:
            if not isinstance(query, exp.Select) or any(query.args.get(key) for key in _SHAPING) or any(
                    e.find(*SQL_AGGREGATES) for e in query.expressions):
                raise unsupported("a row IN over a correlated subquery that aggregates, groups, orders or limits "
                                  "(compare the columns one by one with EXISTS)", node)
            # a filtered set of rows: EXISTS with the equalities in the subquery's own WHERE
            inner = query.copy()
            equalities = [_equal((e.this if isinstance(e, exp.Alias) else e), v)
                          for e, v in zip(query.expressions, values)]
            where = inner.args.get("where")
            inner.set("where", exp.Where(this=exp.and_(*([where.this] if where is not None else []), *equalities)))
            inner.set("expressions", [exp.Literal.number(1)])
            inner.set("distinct", None)
            return exp.Exists(this=inner)
        as_in = exp.In(this=node.this.copy(), query=exp.Subquery(this=query.copy()))
        if _stripped(conjunct) is node:  # a semi join on every column (decorrelation)
            return as_in
        node.replace(as_in)  # under OR: a typed EXISTS of the row's equalities, a mark join, where the conjunct's
        typed = mark_predicates(conjunct, self.aliases) is not None  # other subqueries are typed marks too
        as_in.replace(node)
        return as_in if typed else self._found(values, query)  # (else a LEFT join to the distinct rows)

    def _found(self, values: list[exp.Expression], query: exp.Expression) -> exp.Expression:
        """LEFT join the distinct rows of ``query`` on equality with ``values``; return "a row was equal"."""
        names = self._columns(len(values))
        exact, inner = self.planner._synthetic_alias(), self.planner._synthetic_alias()
        self._join(_select([exp.alias_(exp.column(n, table=inner), n) for n in names] + [exp.alias_(exp.true(), "m")],
                           _derived(_renamed(query, names), inner), distinct=True), exact,
                   [_equal(exp.column(n, table=exact), v) for n, v in zip(names, values)])
        return exp.Not(this=_is_null(exp.column("m", table=exact)))

    def value(self, node: exp.Expression, clause: str) -> exp.Expression:
        """Return the three-valued expression replacing ``node``, after joining what it reads."""
        values, query, negated, correlated = self._checked(node)
        if correlated:
            raise unsupported(f"a row {'NOT IN' if negated else 'IN'} over a correlated subquery other than as a "
                              "WHERE condition (write EXISTS with the columns compared one by one)", node)
        if clause != "where" and (self.select.args.get("group") or self.select.args.get("having") or any(
                call.find_ancestor(exp.Window) is None for e in self.select.expressions for call in aggregates_of(e))):
            raise unsupported("a row IN in the SELECT list of an aggregating query (compute it in a derived table)",
                              node)
        tables = {c.table for v in values for c in free_columns(v)}
        if not tables or not tables <= self.aliases:
            raise unsupported("a row IN whose left side reads no column of its query's FROM items (compute the "
                              "row in a derived table)", node)
        if len(tables) == 1 and not tables & _null_extended(self.select):
            (table,) = tables  # the distinct tuples of the one FROM item the row reads
            item = next(i for i in self.items if i.alias_or_name == table)
            domain_from = [item.copy()]
        else:  # several items, or the NULL rows an outer join adds: the distinct tuples of the FROM items joined
            domain_from = [self.items[0].copy()] + [join.copy() for join in self.item_joins]
        names = self._columns(len(values))
        keys = [f"k{n}" for n in range(len(values))]
        rows = _renamed(query, names)

        found = self._found(values, query)  # TRUE: a distinct row of S equal on every column (NULL never equals)

        # NULL: an outer tuple that a row of S equals but for NULLs, the outer tuple or the row holding one.
        def products(null_side: str) -> exp.Select:
            domain, inner = self.planner._synthetic_alias(), self.planner._synthetic_alias()
            distinct = _select([exp.alias_(v.copy(), k) for v, k in zip(values, keys)], domain_from[0],
                               distinct=True)
            if len(domain_from) > 1:
                distinct.set("joins", [join.copy() for join in domain_from[1:]])
                if self.plain_where:  # the comma joins' equalities are there; the domain may hold more, not fewer
                    distinct.set("where", exp.Where(this=exp.and_(*[c.copy() for c in self.plain_where])))
            side = [exp.column(k, table=domain) for k in keys] if null_side == "outer" else \
                [exp.column(n, table=inner) for n in names]
            possible = [exp.Paren(this=exp.or_(exp.EQ(this=exp.column(n, table=inner), expression=exp.column(
                k, table=domain)), _is_null(exp.column(n, table=inner)), _is_null(exp.column(k, table=domain))))
                for n, k in zip(names, keys)]
            return _select([exp.alias_(exp.column(k, table=domain), k) for k in keys],
                           _derived(distinct, domain), _derived(rows.copy(), inner),
                           where=exp.and_(_any_of([_is_null(c) for c in side]), *possible))

        union = exp.Union(this=products("outer"), expression=products("inner"), distinct=False)
        both = _derived(union, self.planner._synthetic_alias())
        keyed = [exp.column(k, table=both.alias) for k in keys]
        for with_null in (False, True):  # the tuples without a NULL join on equality (hashed), the others null-safe
            alias = self.planner._synthetic_alias()
            held = _any_of([_is_null(c) for c in keyed])
            where = held if with_null else exp.Not(this=held)
            self._join(_select([exp.alias_(c.copy(), k) for c, k in zip(keyed, keys)]
                               + [exp.alias_(exp.true(), "m")], both.copy(), where=where, distinct=True), alias,
                       [(_null_safe_equal if with_null else _equal)(exp.column(k, table=alias), v)
                        for k, v in zip(keys, values)])
            if with_null:
                nulls_alias = alias
            else:
                hashed_alias = alias
        maybe = exp.or_(exp.Not(this=_is_null(exp.column("m", table=hashed_alias))),
                        exp.Not(this=_is_null(exp.column("m", table=nulls_alias))))
        truth, falsity = (exp.false(), exp.true()) if negated else (exp.true(), exp.false())
        return exp.Paren(this=exp.Case(ifs=[exp.If(this=found, true=truth), exp.If(this=maybe, true=exp.Null())],
                                       default=falsity))

    def _join(self, derived: exp.Select, alias: str, on: list[exp.Expression]) -> None:
        self.joins.append(exp.Join(this=_derived(derived, alias), side="LEFT", on=exp.and_(*on)))


def with_tuple_memberships(select: exp.Select, planner) -> exp.Select:
    """Return ``select`` with each row membership ``(a, b) [NOT] IN (subquery)`` of its own scope planned (see the
    module docstring): an EXISTS where only TRUE counts, else a CASE over LEFT-joined derived tables.

    ``planner`` is the planning state (its synthetic aliases).
    """
    where = select.args.get("where")
    trees = [(tree, "expressions") for tree in select.expressions]
    for key in ("order", "qualify"):
        value = select.args.get(key)
        if value is not None and _own_memberships(value):
            raise unsupported(f"a row IN in {key.upper()} BY" if key == "order" else "a row IN in QUALIFY",
                              _own_memberships(value)[0])
    for key in ("group", "having"):
        value = select.args.get(key)
        if value is not None and _own_memberships(value):
            raise unsupported(f"a row IN in {'GROUP BY' if key == 'group' else 'HAVING'}",
                              _own_memberships(value)[0])
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if on is not None and _own_memberships(on):
            raise unsupported("a row IN in a JOIN's ON condition (write it in WHERE)", _own_memberships(on)[0])
    conjuncts = conjuncts_of(where.this) if where is not None else []
    found = [node for tree, _ in trees for node in _own_memberships(tree)] + [
        node for conjunct in conjuncts for node in _own_memberships(conjunct)]
    if not found:
        return select
    select = select.copy()
    rewriter = _Memberships(select, planner)
    where = select.args.get("where")
    for conjunct in conjuncts_of(where.this) if where is not None else []:
        for node in _own_memberships(conjunct):
            if reached_through_and_or(conjunct, node) and not _membership(node)[2]:
                node.replace(rewriter.positive(node, conjunct))
            else:
                node.replace(rewriter.value(node, "where"))
    for tree in select.expressions:
        for node in _own_memberships(tree):
            node.replace(rewriter.value(node, "expressions"))
    if rewriter.joins:
        select.set("joins", list(select.args.get("joins") or []) + rewriter.joins)
    return select
