"""Filter a CTE computed once by what its readers keep: the OR of each reader's own conditions on it.

Why: a CTE read twice is computed once, whole, into a temporary table
(:mod:`gpu_engine.sql.shared_ctes`), and each reader filters the table. When
every reader keeps only rows passing conditions of its own (TPC-DS q39 reads
``inv`` as ``inv1`` with ``inv1.d_moy = 1`` and as ``inv2`` with
``inv2.d_moy = 2``), no row failing all of them is ever read, so the CTE may
compute only the rows passing one of them: ``SELECT * FROM (<cte>) AS inv
WHERE inv.d_moy = 1 OR inv.d_moy = 2``, whose condition the optimizer's
pushdown then moves into the CTE's query
(:mod:`gpu_engine.optimizer.predicate_pushdown`), in q39 below its GROUP BY to
``date_dim``: a sixth of a year of ``inventory`` is
grouped instead of all of it. Each reader still applies its own conditions.

A reader's conditions are the conjuncts of the WHERE of the SELECT whose FROM
list (comma or inner joins; no outer join in that SELECT, which could bring
a NULL-extended row back) holds the reference, that read only the reference's
columns, qualified by its alias, and hold no subquery, window, aggregate or
random value. One reader without such a conjunct reads every row: the CTE is
left whole.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.predicates import conjuncts_of, disjoined

__all__ = ["with_reader_filters"]

_UNMOVABLE = (exp.Window, exp.AggFunc, exp.Subquery, exp.Exists, exp.Select, exp.Rand, exp.Uuid)


def _inner_item(reference: exp.Table) -> exp.Select | None:
    """Return the SELECT whose FROM list holds ``reference`` as an inner item, None when it is anywhere else."""
    parent = reference.parent
    if isinstance(parent, exp.From):
        select = parent.parent
    elif isinstance(parent, exp.Join) and not parent.side and (parent.kind or "").upper() in ("", "INNER", "CROSS"):
        select = parent.parent
    else:
        return None
    if not isinstance(select, exp.Select):
        return None
    for join in select.args.get("joins") or []:
        if join.side or (join.kind or "").upper() in ("FULL", "OUTER", "SEMI", "ANTI", "ASOF", "POSITIONAL"):
            return None
    return select


def _reader_condition(reference: exp.Table, name: str) -> exp.Expression | None:
    """Return the AND of the reader's own conditions on ``reference``, over the CTE's ``name``; None: none."""
    select = _inner_item(reference)
    if select is None or select.args.get("where") is None:
        return None
    alias = reference.alias_or_name
    own = []
    for conjunct in conjuncts_of(select.args["where"].this):
        columns = list(conjunct.find_all(exp.Column))
        if not columns or any(c.table != alias for c in columns):
            continue
        if any(isinstance(node, _UNMOVABLE) for node in conjunct.walk()):
            continue
        copy = conjunct.copy()
        for column in copy.find_all(exp.Column):
            column.set("table", exp.to_identifier(name))
        own.append(copy)
    if not own:
        return None
    return exp.and_(*own) if len(own) > 1 else own[0]


def with_reader_filters(body: exp.Expression, name: str, tree: exp.Expression,
                        definition: exp.CTE) -> exp.Expression:
    """Return the query computing CTE ``name`` (``body``), filtered by what its readers in ``tree`` keep.

    ``definition`` is the CTE in ``tree``'s WITH (a column list renaming its outputs leaves it whole).
    """
    alias = definition.args.get("alias")
    if alias is not None and alias.columns:
        return body
    references = [t for t in tree.find_all(exp.Table) if t.name == name and not t.args.get("db")
                  and not any(node is definition for node in _ancestors(t))]
    if not references:
        return body
    conditions = []
    for reference in references:
        condition = _reader_condition(reference, name)
        if condition is None:
            return body
        conditions.append(condition)
    distinct = list({c.sql(): c for c in conditions}.values())
    wrapper = exp.select(exp.Star()).from_(exp.Subquery(this=body, alias=exp.TableAlias(
        this=exp.to_identifier(name))), copy=False)
    return wrapper.where(disjoined(distinct), copy=False)


def _ancestors(node: exp.Expression):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent
