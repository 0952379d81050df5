"""Compute a correlated MIN/MAX/AVG subquery over the outer query's own join as a window ("WinMagic").

Why: in ``SELECT ... FROM part, partsupp, supplier, nation, region WHERE <joins, filters> AND
ps_supplycost = (SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region WHERE p_partkey =
ps_partkey AND <the same joins and filters>)`` (TPC-H Q2) the subquery repeats the outer query's join
of partsupp, supplier, nation and region, correlated only by the key the outer query joins them to part
with. Decorrelated (:mod:`~gpu_engine.sql.decorrelation`) it is a second copy of that join, aggregated per
key and joined back: every shared table is scanned and joined twice. Its value for an outer row is the
aggregate over the rows of the outer join that share the row's correlation key, so the outer join is
computed once and the subquery becomes ``min(ps_supplycost) OVER (PARTITION BY p_partkey)``, compared in
a QUALIFY (Zuzarte et al., "WinMagic: subquery elimination using window aggregation", SIGMOD 2003).

When it holds. Write the outer FROM items as O (tables the subquery does not read) and S (one outer
table per subquery table, of the same table), the outer rows R = O x S joined. For an outer row r = (o, s)
the subquery reads Sub(r) = {s' : P_S(s') and s'.b = o.a} (b: its correlation columns, a: the outer ones);
the window reads the S part of the rows of R with r's values of a. The two are the same set when:

* the outer conjuncts over S alone are exactly the subquery's own conjuncts (mapped to S): R keeps every
  s' the subquery reads and no other;
* the outer conjuncts joining O and S are exactly the correlation equalities (mapped), each outer column a
  column of O: then (o, s') is in R for every s' in Sub(r), and no O row restricts S further;
* every conjunct with another subquery reads O only.

Each s' then appears once per O row with r's key: a uniform multiplicity, which MIN, MAX and AVG ignore
(SUM and COUNT do not, so they stay decorrelated). Sub(r) is never empty (it holds r's own s), so any
expression around the aggregate keeps its value. Tables only (no derived tables or CTEs with their own
scope), inner joins only; a query that aggregates reads the filtered join as a derived table, since
windows run after aggregation.

Also a HAVING comparison against an uncorrelated SUM/MIN/MAX subquery over exactly the outer query's join
and filters (TPC-H Q11: the parts whose value exceeds a share of the whole) reads the grand total off the
groups, ``sum(sum(v)) OVER ()``, rather than joining and aggregating the tables again.
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.decorrelation import correlation, subquery_select
from gpu_engine.sql.planning_context import conjunct_key
from gpu_engine.sql.predicates import conjoined, conjuncts_of, factor_or, free_columns, has_subquery

__all__ = ["with_subqueries_as_windows"]

#: Aggregates whose value over a multiset repeating every row the same number of times is their value over the set.
_MULTIPLICITY_FREE = (exp.Min, exp.Max, exp.Avg)
#: The most assignments of subquery tables to outer tables of the same table tried.
_MAX_MAPPINGS = 256
#: SELECT clauses that make a subquery more than one aggregate over its join.
_SHAPING = ("with_", "with", "group", "having", "distinct", "order", "limit", "offset", "qualify", "windows")
#: SELECT clauses of the outer query this rule does not rewrite around.
_OUTER_REFUSED = ("with_", "with", "qualify", "windows")
#: Comparisons a scalar subquery may stand in.
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def _tables(select: exp.Select) -> dict[str, exp.Table] | None:
    """Return alias -> table of a SELECT whose FROM items are all tables joined inner (None otherwise)."""
    from_ = select.args.get("from_")
    if from_ is None:
        return None
    items = [from_.this]
    for join in select.args.get("joins") or []:
        if join.side or (join.kind or "").upper() not in ("", "INNER", "CROSS") or join.args.get("using") \
                or join.args.get("method"):
            return None
        items.append(join.this)
    out = {}
    for item in items:
        if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier) \
                or {key for key, value in item.args.items() if value} - {"this", "db", "catalog", "alias"}:
            return None  # a sample, a time travel or a hint reads other rows at each reference
        out[item.alias_or_name] = item
    return out if len(out) == len(items) else None


def _conjuncts(select: exp.Select) -> list[exp.Expression]:
    """Return a SELECT's WHERE and inner ON conjuncts, ORs factored (as the planner splits them)."""
    trees = [select.args["where"].this] if select.args.get("where") else []
    trees += [join.args["on"] for join in select.args.get("joins") or [] if join.args.get("on") is not None]
    return [part for tree in trees for conjunct in conjuncts_of(tree) for part in factor_or(conjunct)]


def _table_identity(table: exp.Table) -> tuple[str, str, str]:
    """Return the table a FROM item reads, without its alias: its name parts without case or quotes, as DuckDB
    resolves them (:func:`_tables` admits no other part). Its SQL text told ``"T"`` from ``t``."""
    return table.catalog.lower(), table.db.lower(), table.name.lower()


def _volatile(tree: exp.Expression) -> bool:
    """Return whether ``tree`` calls a function whose value changes from call to call (one call, not two)."""
    return any(isinstance(node, (exp.Rand, exp.Uuid)) or (isinstance(node, exp.Anonymous) and str(
        node.this).lower() in ("random", "uuid", "gen_random_uuid", "nextval")) for node in tree.walk())


def _renamed(tree: exp.Expression, mapping: dict[str, str]) -> exp.Expression:
    """Return a copy of ``tree`` with the columns of the aliases in ``mapping`` read from the aliases they map to."""
    copy = tree.copy()
    for column in free_columns(copy):
        if column.table in mapping:
            column.set("table", exp.to_identifier(mapping[column.table]))
    return copy


def _aliases(tree: exp.Expression) -> set[str]:
    return {column.table for column in free_columns(tree)}


def _window_value(value: exp.Expression, partition: list[exp.Column]) -> exp.Expression | None:
    """Return ``value`` with each aggregate call an aggregate over the window partitioned by ``partition``."""
    value = value.copy()
    calls = [node for node in value.walk() if isinstance(node, SQL_AGGREGATES)]
    if not calls or any(not isinstance(call, _MULTIPLICITY_FREE) or call.args.get("expression") is not None
                        or isinstance(call.this, exp.Distinct) or isinstance(call.parent, exp.Filter)
                        for call in calls):
        return None
    if any(isinstance(node, (exp.Window, exp.Subquery, exp.Exists)) for node in value.walk()):
        return None
    for call in calls:
        if any(isinstance(node, SQL_AGGREGATES) for node in call.this.walk()):
            return None  # an aggregate of an aggregate
        window = exp.Window(this=call.copy(), partition_by=[column.copy() for column in partition])
        if call is value:
            value = window
        else:
            call.replace(window)
    if any(not _inside_aggregate(column) for column in value.find_all(exp.Column)):
        return None  # a column outside every aggregate: not one value per partition
    return value


def _inside_aggregate(column: exp.Column) -> bool:
    node = column.parent
    while node is not None:
        if isinstance(node, exp.Window):
            return True
        node = node.parent
    return False


def _comparison_subquery(conjunct: exp.Expression) -> exp.Subquery | None:
    """Return the scalar subquery one side of a comparison conjunct is (the other side holding none)."""
    if not isinstance(conjunct, _COMPARISONS):
        return None
    sides = [conjunct.this, conjunct.expression]
    holding = [side for side in sides if has_subquery(side)]
    if len(holding) != 1:
        return None
    found = [node for node in holding[0].walk() if isinstance(node, (exp.Subquery, exp.Exists))
             or (isinstance(node, exp.In) and node.args.get("query"))]
    if len(found) != 1 or not isinstance(found[0], exp.Subquery) or found[0].args.get("alias"):
        return None
    return found[0]


def _window_conjunct(conjunct: exp.Expression, outer: dict[str, exp.Table],
                     others: list[exp.Expression]) -> exp.Expression | None:
    """Return ``conjunct`` with its subquery as a window over the outer join, or None where that is not its value."""
    subquery = _comparison_subquery(conjunct)
    if subquery is None:
        return None
    select = subquery_select(subquery.this)
    if not isinstance(select, exp.Select) or any(select.args.get(key) for key in _SHAPING):
        return None
    if len(select.expressions) != 1:
        return None
    inner = _tables(select)
    if inner is None:
        return None
    value = select.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    if _aliases(value) - set(inner):
        return None  # an outer column outside the WHERE
    local, correlated = [], []
    for part in _conjuncts(select):
        if has_subquery(part) or _volatile(part):
            return None
        (correlated if _aliases(part) - set(inner) else local).append(part)
    keys, rest = correlation(correlated, set(inner))
    if rest or not keys or any(outer_column.table not in outer for outer_column, _ in keys):
        return None
    candidates = [[alias for alias, table in outer.items() if _table_identity(table) == _table_identity(inner_table)]
                  for inner_table in inner.values()]
    for images in itertools.islice(itertools.product(*candidates), _MAX_MAPPINGS):
        if len(set(images)) != len(images):
            continue
        mapping = dict(zip(inner, images))
        if _holds(mapping, outer, local, keys, others):
            partition = [outer_column for outer_column, _ in keys]
            window = _window_value(_renamed(value, mapping), partition)
            if window is None:
                return None
            rewritten = conjunct.copy()
            target = next(node for node in rewritten.walk() if isinstance(node, exp.Subquery))
            target.replace(exp.paren(window) if not isinstance(window, exp.Window) else window)
            return rewritten
    return None


def _holds(mapping: dict[str, str], outer: dict[str, exp.Table], local: list[exp.Expression],
           keys: list[tuple[exp.Column, exp.Column]], others: list[exp.Expression]) -> bool:
    """Return whether the outer conjuncts over S are the subquery's own and those joining O and S its correlation."""
    shared = set(mapping.values())
    own = set(outer) - shared
    if any(column.table not in own for column, _ in keys):
        return False
    subquery_own = {conjunct_key(_renamed(part, mapping)) for part in local}
    correlation_keys = {conjunct_key(exp.EQ(this=outer_column.copy(), expression=_renamed(inner_column, mapping)))
                         for outer_column, inner_column in keys}
    over_shared, joining = set(), set()
    for conjunct in others:
        aliases = _aliases(conjunct)
        if aliases <= own and aliases:
            continue
        if has_subquery(conjunct) or _volatile(conjunct):
            return False
        if aliases <= shared:
            over_shared.add(conjunct_key(conjunct))
        else:
            joining.add(conjunct_key(conjunct))
    return over_shared == subquery_own and joining == correlation_keys


def with_subqueries_as_windows(select: exp.Select) -> exp.Select:
    """Return ``select`` with one WHERE comparison against a correlated MIN/MAX/AVG subquery as a window,
    and one HAVING comparison against the grand total of its own join as a window over its groups.

    The subquery must read tables the outer query joins the same way (see the module docstring); the
    comparison moves to QUALIFY. An outer query that aggregates, or has a DISTINCT or QUALIFY of its
    own, reads ``SELECT <its columns> FROM <its join> WHERE <the rest> QUALIFY <the comparison>`` as a
    derived table. Any other query is returned unchanged.
    """
    if not isinstance(select, exp.Select) or any(select.args.get(key) for key in _OUTER_REFUSED):
        return select
    if any(column.table for column in free_columns(select)):
        return select  # correlated to a query further out: its own decorrelation splits it
    select = _with_grand_totals(select)
    if select.args.get("where") is None or select.args.get("qualify") is not None:
        return select
    outer = _tables(select)
    if outer is None or len(outer) < 2:
        return select
    where = [part for conjunct in conjuncts_of(select.args["where"].this) for part in factor_or(conjunct)]
    pool = _conjuncts(select)
    for conjunct in where:
        others = [part for part in pool if part is not conjunct]
        rewritten = _window_conjunct(conjunct, outer, others)
        if rewritten is not None:
            return _with_window_filter(select, rewritten, [part for part in where if part is not conjunct])
    return select


def _grand_total(subquery: exp.Subquery, outer: dict[str, exp.Table],
                 where: list[exp.Expression]) -> exp.Expression | None:
    """Return an uncorrelated SUM/MIN/MAX subquery over the outer query's own join as a window over its groups.

    Why: ``HAVING sum(v) > (SELECT sum(v) * 0.0001 FROM <the same join and filters>)`` (TPC-H Q11) computes
    again the join the groups were aggregated from; its groups partition that join's rows, so the total is
    the sum of the groups' sums (the least of their minimums, ...): ``sum(sum(v)) OVER ()``.
    """
    select = subquery_select(subquery.this)
    if not isinstance(select, exp.Select) or any(select.args.get(key) for key in _SHAPING) \
            or len(select.expressions) != 1 or any(column.table for column in free_columns(select)):
        return None
    inner = _tables(select)
    if inner is None or len(inner) != len(outer):
        return None
    own = _conjuncts(select)
    if any(has_subquery(part) or _volatile(part) for part in own + where):
        return None
    value = select.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    calls = [node for node in value.walk() if isinstance(node, SQL_AGGREGATES)]
    if not calls or any(not isinstance(call, (exp.Sum, exp.Min, exp.Max)) or call.args.get("expression") is not None
                        or isinstance(call.this, exp.Distinct) or isinstance(call.parent, exp.Filter)
                        or any(isinstance(node, (SQL_AGGREGATES, exp.Window, exp.Subquery)) for node in
                               call.this.walk()) for call in calls):
        return None
    written = {conjunct_key(part) for part in where}
    candidates = [[alias for alias, table in outer.items() if _table_identity(table) == _table_identity(inner_table)]
                  for inner_table in inner.values()]
    for images in itertools.islice(itertools.product(*candidates), _MAX_MAPPINGS):
        mapping = dict(zip(inner, images))
        if len(set(images)) != len(images) or {conjunct_key(_renamed(part, mapping)) for part in own} != written:
            continue
        total = _renamed(value, mapping)
        for call in [node for node in total.walk() if isinstance(node, SQL_AGGREGATES)]:
            window = exp.Window(this=call.__class__(this=call.copy()), partition_by=[])
            if call is total:
                total = window
            else:
                call.replace(window)
        if any(not _inside_aggregate(column) for column in total.find_all(exp.Column)):
            return None
        return total
    return None


def _with_grand_totals(select: exp.Select) -> exp.Select:
    """Return ``select`` with a HAVING comparison against its join's grand total as a QUALIFY over a window.

    The whole HAVING moves to QUALIFY (a HAVING conjunct left in place would drop groups before the window
    sums them); a query with windows or a QUALIFY of its own is returned unchanged.
    """
    outer = _tables(select)
    if outer is None or select.args.get("having") is None or any(select.args.get(key) for key in _OUTER_REFUSED):
        return select
    if any(isinstance(node, exp.Window) for tree in select.expressions for node in tree.walk()):
        return select
    group = select.args.get("group")
    if group is not None and (any(group.args.get(key) for key in ("rollup", "cube", "grouping_sets", "totals"))
                              or any(isinstance(item, (exp.Rollup, exp.Cube, exp.GroupingSets))
                                     for item in group.expressions)):
        return select  # grouping sets put a row in several groups: the groups' sum counts it more than once
    having = select.args["having"].this
    if sum(has_subquery(conjunct) for conjunct in conjuncts_of(having)) != 1:
        return select  # another subquery would move to QUALIFY with it
    for conjunct in conjuncts_of(having):
        subquery = _comparison_subquery(conjunct)
        total = _grand_total(subquery, outer, _conjuncts(select)) if subquery is not None else None
        if total is None:
            continue
        out = select.copy()
        target = next(node for node in out.args["having"].this.walk()
                      if isinstance(node, exp.Subquery) and node == subquery)
        target.replace(exp.paren(total) if not isinstance(total, exp.Window) else total)
        out.set("qualify", exp.Qualify(this=out.args["having"].this))
        out.set("having", None)
        return out
    return select


def _aggregates(select: exp.Select) -> bool:
    """Return whether the SELECT groups or aggregates (its windows would then run after the aggregation)."""
    if select.args.get("group") or select.args.get("having") or select.args.get("distinct"):
        return True
    trees = list(select.expressions) + ([select.args["order"]] if select.args.get("order") else [])
    return any(isinstance(node, (exp.AggFunc, exp.Window)) for tree in trees for node in tree.walk())


def _with_window_filter(select: exp.Select, qualify: exp.Expression, where: list[exp.Expression]) -> exp.Select:
    """Return ``select`` filtered by the window comparison ``qualify`` instead of its subquery conjunct."""
    out = select.copy()
    out.set("where", exp.Where(this=conjoined(where)) if where else None)
    if not _aggregates(select):
        out.set("qualify", exp.Qualify(this=qualify))
        return out
    # Windows run after GROUP BY: the join, filtered by the window comparison, is a derived table.
    aliases = set(_tables(select))
    clauses = [value for key, value in out.args.items() if key not in ("from_", "joins", "where") and value]
    read = [column for clause in clauses for tree in (clause if isinstance(clause, list) else [clause])
            if isinstance(tree, exp.Expression) for column in free_columns(tree) if column.table in aliases]
    names: dict[tuple[str, str], str] = {}
    for column in read:
        names.setdefault((column.table, column.name), f"{column.name}_{len(names)}")
    derived = exp.Select(expressions=[exp.alias_(exp.column(name, table=alias, quoted=True), names[(alias, name)],
                                                 quoted=True) for alias, name in names] or [exp.Literal.number(1)])
    derived.set("from_", out.args["from_"])
    derived.set("joins", out.args.get("joins"))
    derived.set("where", out.args.get("where"))
    derived.set("qualify", exp.Qualify(this=qualify))
    alias = "$window_subquery"
    for column in read:
        name = names[(column.table, column.name)]
        column.set("this", exp.to_identifier(name, quoted=True))
        column.set("table", exp.to_identifier(alias, quoted=True))
    out.set("from_", exp.From(this=exp.Subquery(this=derived, alias=exp.TableAlias(
        this=exp.to_identifier(alias, quoted=True)))))
    out.set("joins", None)
    out.set("where", None)
    return out
