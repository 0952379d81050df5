"""Rewrite a scalar subquery correlated by other than column equalities (``u.d < t.d``, ``u.d BETWEEN t.lo AND
t.hi``, ``u.k <> t.k``, ``u.k = t.k + 1``) into one correlated by column equalities over its *domain*: DuckDB's
general decorrelation, written once on the SELECT before the subquery paths see it.

Why: such a subquery was computed on the sqlglot tree, per distinct outer value, by a LEFT-joined derived table
(``subquery_values._Joined._per_domain``, gone: every form reaching it is rewritten here), apart from the typed path
every equality-correlated subquery takes
(:mod:`~gpu_engine.sql.correlated_scalar_rows` binds it into a typed ``ScalarSubquery`` the optimizer's
decorrelation rule joins). Over its domain it *is* equality-correlated:

    (SELECT count(*) FROM u WHERE u.d < t.d)
    -> (SELECT count(*) FROM u, (SELECT DISTINCT t.d AS d0 FROM t) AS "$domain" WHERE u.d < "$domain".d0
        AND "$domain".d0 = t.d)

the domain — the distinct values of the outer columns the correlation reads — joined to the subquery's sources by
the correlation, the subquery computed per domain row (an aggregate grouped by it, rows numbered per it, windows
partitioned by it: whatever the equality path does per correlation key), joined back on the domain's columns. So
every shape and position the typed path binds (SELECT list, WHERE under OR / NOT, HAVING, ORDER BY, an aggregate's
or a window's input, a GROUP BY key) holds for these correlations too, with the typed path's "More than one row"
check and COUNT's 0 for an outer value meeting no row. The domain of one outer table is read from its FROM item
(its distinct values, a superset of the values its filtered rows carry: the join back keeps only theirs).

An EXISTS / IN / ANY / ALL correlated without any column equality (``EXISTS (SELECT * FROM u WHERE u.w < t.v)``)
is rewritten the same way: over the domain it is a semi / anti / mark join keyed on the domain's columns (it was a
``count(*)`` per outer value on the tree), and ``x IN (SELECT max(w) ... GROUP BY ...)`` so correlated an aggregate
set per domain key (:mod:`~gpu_engine.sql.correlated_aggregate_sets`; refused before). One with a key equality
keeps its other conjuncts as the join's filter (TPC-H q21's ``<>``) where it is a semi / anti join (a WHERE or
HAVING conjunct); elsewhere (a value, under OR) an EXISTS so correlated is a mark join's flag, over the domain
too; and IN / ANY / ALL selecting an expression over rows stays with
:mod:`~gpu_engine.sql.quantified_comparisons`' per-row facts (which the planner passes here again).

Rewritten only where every outer column of the domain is rejected by the correlation where it is NULL (a
comparison reaching it through NULL-strict arithmetic): then a NULL outer value meets no inner row, which is
exactly what the equality join back gives it (no domain row equals NULL: the value over no rows). A scalar
subquery or EXISTS whose correlation may hold where an outer column is NULL (``IS NOT DISTINCT FROM``, ``OR t.d IS
NULL``) is split on that column first (:func:`_rewritten`): ``CASE WHEN t.d IS NULL THEN <t.d read as NULL> ELSE
<t.d known not NULL> END``, each branch an equality or domain correlation — the answer of DuckDB's null-safe join
back, as two typed subqueries (the NULL one no longer correlated by ``t.d``). IN / ANY / ALL so correlated are left
to :mod:`~gpu_engine.sql.quantified_comparisons`, whose per-row facts (scalar subqueries) the planner passes here
again. A domain reads its outer table's FROM item — a table, an uncorrelated derived table, or a series with the
items its arguments read (:func:`_domain_items`); a subquery whose outer table is another item (a derived table
reading other items) is refused by name (:mod:`~gpu_engine.sql.subquery_values`), one reading a query further out
too (``split_correlated``).
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.decorrelation import NULL_STRICT, correlation, own_aggregates, split_correlated
from gpu_engine.sql.errors import SqlError
from gpu_engine.sql.planning_context import TreeKey
from gpu_engine.sql.predicates import conjoined, conjuncts_of, defined_aliases, free_columns
from gpu_engine.sql.series_sources import SERIES, is_correlated_series

__all__ = ["with_correlation_domains", "rejects_null"]

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
#: Subquery forms whose subquery is not a scalar value of this scope (planned by their own paths).
_NOT_SCALAR = (exp.In, exp.Any, exp.All, exp.Exists, exp.From, exp.Join, exp.Lateral)


def rejects_null(conjunct: exp.Expression, column: exp.Column) -> bool:
    """Return whether ``conjunct`` is never TRUE where ``column`` is NULL (a comparison reaching it strictly)."""
    while isinstance(conjunct, exp.Paren) or (isinstance(conjunct, exp.Not) and isinstance(
            conjunct.this.unnest(), _COMPARISONS)):  # NOT over a comparison: NULL where it is (``<>`` is written so)
        conjunct = conjunct.this
    if isinstance(conjunct, exp.Between):
        conjunct = exp.and_(exp.GTE(this=conjunct.this.copy(), expression=conjunct.args["low"].copy()),
                            exp.LTE(this=conjunct.this.copy(), expression=conjunct.args["high"].copy()))
    if isinstance(conjunct, exp.And):
        return rejects_null(conjunct.this, column) or rejects_null(conjunct.expression, column)
    if not isinstance(conjunct, _COMPARISONS):
        return False
    for found in conjunct.find_all(exp.Column):
        if (found.table, found.name) != (column.table, column.name):
            continue
        node = found.parent
        while node is not conjunct and isinstance(node, NULL_STRICT):
            node = node.parent
        if node is conjunct:
            return True
    return False


def _subqueries(select: exp.Select) -> list[tuple[exp.Expression, bool, bool]]:
    """Return the subqueries of ``select``'s own scope (not FROM items), each as the node holding its SELECT (a
    scalar ``Subquery``, an ``EXISTS``, IN's ``Subquery``, ANY / ALL), whether it is a scalar subquery and whether
    it stands in the WHERE clause."""
    found = []
    for key in ("expressions", "where", "group", "having", "order", "qualify"):
        value = select.args.get(key)
        for tree in value if isinstance(value, list) else [value] if value is not None else []:
            stack = [tree]
            while stack:
                node = stack.pop()
                if isinstance(node, (exp.Any, exp.All)) and not isinstance(node.this, exp.Select):
                    stack.append(node.this)  # ANY ((SELECT ...)): its Subquery
                    continue
                if isinstance(node, (exp.Subquery, exp.Exists, exp.Any, exp.All)):
                    predicate = isinstance(node.parent, (exp.In, exp.Any, exp.All))
                    if predicate or not isinstance(node.parent, _NOT_SCALAR):
                        found.append((node, isinstance(node, exp.Subquery) and not predicate, key == "where"))
                    continue
                if isinstance(node, (exp.Select, exp.SetOperation)):
                    continue
                stack.extend(node.iter_expressions())
    return found


def _unaliased(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def _over_domain(query: exp.Select, outer_aliases: set[str], items: dict[str, exp.Expression],
                 synthetic_alias, scalar: bool, holder_kind: type,
                 known: frozenset = frozenset(), as_flag: bool = False) -> exp.Select | exp.Column | None:
    """Return ``query`` correlated by column equalities over the domain of its other correlation, or None where
    it is not such a subquery or is left to the tree path (module docstring); where an outer column of the domain
    may meet inner rows while NULL (not rejected by the correlation, not in ``known``, the columns known not to be
    NULL here), that column, for :func:`_rewritten` to split the subquery on. ``as_flag``: an EXISTS that is no
    semi join's (a value, under OR or NOT in WHERE, a branch of such a split), with a key equality beside its other
    correlation: a mark join's flag, which keys the equalities only, so over the domain too."""
    if (scalar and len(query.expressions) != 1) or query.args.get("from_") is None:
        return None
    if holder_kind is not exp.Exists and not scalar and not (  # IN / ANY / ALL: the mark join keys a column,
            len(query.expressions) == 1 and (isinstance(_unaliased(query.expressions[0]), exp.Column) or (
                query.args.get("group") is not None or own_aggregates(query)))):  # or an aggregate set per key
        return None
    try:
        inner, local, correlated = split_correlated(query, outer_aliases)
    except SqlError:
        return None  # refused by name where it is planned
    keys, others = correlation(correlated, inner)
    if not others or (keys and not scalar and not as_flag):  # EXISTS / IN with a key: a semi join, the others its filter
        return None
    columns = list({(c.table, c.name): c for part in others for c in free_columns(part)
                    if c.table and c.table not in inner}.values())
    if not columns:
        return None
    open_ = [c for c in columns if (c.table, c.name) not in known and not any(rejects_null(part, c) for part in others)]
    sources = {table: _domain_items(table, items) for table in {c.table for c in columns}}
    if any(found is None for found in sources.values()):
        return None
    if open_:
        return open_[0]
    rewritten = query.copy()
    domains: dict[str, tuple[str, exp.Select]] = {}
    names: dict[tuple[str, str], exp.Column] = {}
    for column in columns:
        alias, distinct = domains.get(column.table) or domains.setdefault(column.table, (
            synthetic_alias(), _distinct_over(sources[column.table])))
        name = f"d{len(distinct.expressions)}"
        distinct.select(exp.alias_(column.copy(), name), copy=False)
        if (column.table, column.name) in known:  # its NULL row would be computed and never joined back
            distinct.where(exp.Not(this=exp.Is(this=column.copy(), expression=exp.Null())), copy=False)
        names[(column.table, column.name)] = exp.column(name, table=alias, quoted=True)
    kept = [part for part in correlated if not any(part is other for other in others)]

    def over_domain(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and (node.table, node.name) in names:
            return names[(node.table, node.name)].copy()
        return node

    moved = [part.copy().transform(over_domain) for part in others]
    equalities = [exp.EQ(this=domain.copy(), expression=exp.column(name, table=table))
                  for (table, name), domain in names.items()]
    for alias, distinct in domains.values():
        rewritten.append("joins", exp.Join(this=exp.Subquery(
            this=distinct, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))))
    rewritten.set("where", exp.Where(this=conjoined([part.copy() for part in local + kept] + moved + equalities)))
    return rewritten


def _domain_items(table: str, items: dict[str, exp.Expression]) -> list[exp.Expression] | None:
    """Return the FROM items a domain of ``table``'s columns reads, in FROM order: a table, an uncorrelated
    derived table or a VALUES list (a series or an unnested list planned as one) alone; a series reading other
    items' columns (``FROM t, generate_series(1, t.n) g``) with the items it reads (its values exist only beside
    them); None for another item (left to the tree path).

    Why the series: ``(SELECT count(*) FROM u WHERE u.w < g.i)`` over such a series was computed per distinct
    outer value on the sqlglot tree, whose domain read the series alone and was refused ("generate_series(...)
    reads t.n, not a column of a FROM item before it").
    """
    item = items.get(table)
    if isinstance(item, exp.Table) or (isinstance(item, exp.Subquery) and not any(
            c.table for c in free_columns(item.this))):
        return [item]
    if isinstance(item, exp.Values) and not is_correlated_series(item) and item.find(exp.Column) is None:
        return [item]  # a VALUES list, an uncorrelated series, an unnested list's positions
    if not is_correlated_series(item) or not isinstance(item.meta.get(SERIES), exp.GenerateSeries):
        return None
    read = list(item.meta[SERIES].find_all(exp.Column))
    if not read or any(not c.table or c.table == table for c in read):
        return None  # an unqualified argument: which item it reads is the series planner's to say
    needed = {id(item): item}
    for other in dict.fromkeys(c.table for c in read):
        found = _domain_items(other, items)
        if found is None:
            return None
        needed.update((id(each), each) for each in found)
    return [each for each in items.values() if id(each) in needed]  # FROM order: a series after what it reads


def _distinct_over(sources: list[exp.Expression]) -> exp.Select:
    """``SELECT DISTINCT FROM <sources>`` (cross joined; the projections are added by the caller)."""
    distinct = exp.Select(distinct=exp.Distinct()).from_(sources[0].copy())
    if len(sources) > 1:
        distinct.set("joins", [exp.Join(this=source.copy()) for source in sources[1:]])
    return distinct


def _is_null(node: exp.Expression, of: exp.Expression | None = None) -> bool:
    return (isinstance(node, exp.Is) and isinstance(node.expression, exp.Null)
            and (of is None or node.this == of))


def _null_safe_equality(conjunct: exp.Expression) -> exp.EQ | None:
    """Return ``x = y`` where ``conjunct`` is ``x IS NOT DISTINCT FROM y`` (as written, or as the rewriter spells
    it: ``CASE WHEN x IS NULL THEN y IS NULL WHEN y IS NULL THEN FALSE ELSE x = y END``), else None. Where ``y``
    is not NULL the two conjuncts keep the same rows (a NULL ``x``: FALSE beside NULL)."""
    if isinstance(conjunct, exp.NullSafeEQ):
        return exp.EQ(this=conjunct.this.copy(), expression=conjunct.expression.copy())
    while isinstance(conjunct, exp.Paren):
        conjunct = conjunct.this
    if not isinstance(conjunct, exp.Case) or not isinstance(conjunct.args.get("default"), exp.EQ):
        return None
    equal = conjunct.args["default"]
    left, right = equal.this, equal.expression
    ifs = conjunct.args.get("ifs") or []
    if len(ifs) == 2 and _is_null(ifs[0].this, left) and _is_null(ifs[0].args.get("true"), right) and _is_null(
            ifs[1].this, right) and ifs[1].args.get("true") == exp.Boolean(this=False):
        return equal
    return None


def _rewritten(holder: exp.Expression, outer_aliases: set[str], items: dict[str, exp.Expression], synthetic_alias,
               scalar: bool, known: frozenset = frozenset(), as_flag: bool = False) -> exp.Expression | None:
    """Return what replaces ``holder`` (a scalar ``Subquery``, ``EXISTS``, IN's ``Subquery``, ANY / ALL) where
    its subquery is correlated over a domain, else None.

    A scalar subquery or EXISTS whose correlation may hold where an outer column ``c`` is NULL (``u.b IS NOT
    DISTINCT FROM t.a``, ``u.b = t.a OR (u.b IS NULL AND t.a IS NULL)``) is split on it, as DuckDB's null-safe
    join back answers it: ``CASE WHEN c IS NULL THEN <the subquery, c read as NULL> ELSE <the subquery, c known
    not NULL> END``. With ``c`` NULL the correlation no longer reads it; with ``c`` known, a top-level ``X IS NOT
    DISTINCT FROM c`` is ``X = c`` (NULL and FALSE drop an inner row alike), a key equality, and the other
    conjuncts go over a domain of ``c``'s non-NULL values, joined back by equality: no NULL ``c`` reaches that
    branch. Each branch is rewritten again (another outer column, another domain) or left to its own path. In a
    WHERE conjunct the two branches are two subqueries of one typed Filter
    (:func:`~gpu_engine.sql.correlated_scalar_rows.conjunct_scalars`), the rule joining each.
    """
    query = holder.this
    found = _over_domain(query, outer_aliases, items, synthetic_alias, scalar, type(holder), known, as_flag)
    if found is None or isinstance(found, exp.Select):
        if found is None:
            return None
        rewritten = holder.copy()
        rewritten.set("this", found)
        return rewritten
    if not (scalar or isinstance(holder, exp.Exists)):
        return None  # IN / ANY / ALL: split through quantified_comparisons' per-row facts (planner: passed again)
    column = (found.table, found.name)

    def is_column(node: exp.Expression) -> bool:
        return isinstance(node, exp.Column) and (node.table, node.name) == column

    def as_null(node: exp.Expression) -> exp.Expression:
        return exp.Null() if is_column(node) else node

    def as_null_conjunct(node: exp.Expression) -> exp.Expression:
        equal = _null_safe_equality(node)
        if equal is not None and is_column(equal.this) != is_column(equal.expression):  # X IS NOT DISTINCT FROM NULL
            return exp.Is(this=(equal.expression if is_column(equal.this) else equal.this).copy(), expression=exp.Null())
        return node.transform(as_null)

    def as_known(node: exp.Expression) -> exp.Expression:
        equal = _null_safe_equality(node)
        return equal.copy() if equal is not None and any(is_column(side) for side in equal.iter_expressions()) else node

    branches = []
    for rewrite, now_known in ((as_null_conjunct, known), (as_known, known | {column})):
        branch = holder.copy()
        where = branch.this.args.get("where")
        if where is None:
            return None  # correlated elsewhere than its WHERE: its own path refuses or plans it
        parts = [rewrite(part) for part in conjuncts_of(where.this)]
        where.set("this", conjoined(parts))
        branches.append(_rewritten(branch, outer_aliases, items, synthetic_alias, scalar, now_known, True) or branch)
    return exp.Paren(this=exp.Case(ifs=[exp.If(this=exp.Is(this=found.copy(), expression=exp.Null()),
                                               true=branches[0])], default=branches[1]))


def with_correlation_domains(select: exp.Select, planner) -> exp.Select:
    """Return ``select`` with each scalar subquery correlated by other than column equalities (and rewritable:
    module docstring) correlated by column equalities over its domain; the same object where none is."""
    from_ = select.args.get("from_")
    if from_ is None:
        return select
    items = {item.alias_or_name: item for item in [from_.this] + [j.this for j in select.args.get("joins") or []]}
    outer_aliases = defined_aliases(select)
    semi_joins = set()  # [NOT] EXISTS conjuncts of WHERE / HAVING: semi / anti joins, their other correlation a filter
    for clause in (select.args.get("where"), select.args.get("having")):
        for conjunct in conjuncts_of(clause.this if clause is not None else None):
            while isinstance(conjunct, (exp.Paren, exp.Not)):
                conjunct = conjunct.this
            semi_joins.add(id(conjunct))
    rewrites, by_tree = {}, {}
    for n, (node, scalar, _in_where) in enumerate(_subqueries(select)):
        if isinstance(node.this, exp.Select):
            flag = isinstance(node, exp.Exists) and id(node) not in semi_joins
            key = (TreeKey(node), flag)  # one subquery written twice (coalesce's desugared CASE) stays one rewrite
            if key not in by_tree:
                by_tree[key] = _rewritten(node, outer_aliases, items, planner._synthetic_alias, scalar, as_flag=flag)
            if by_tree[key] is not None:
                rewrites[n] = by_tree[key].copy()
    if not rewrites:
        return select
    select = select.copy()  # the caller's tree stays as written (a CTE's body is planned again where named)
    for n, (node, _scalar, _in_where) in enumerate(_subqueries(select)):
        if n in rewrites:
            node.replace(rewrites[n])
    return select
