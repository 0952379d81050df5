"""Split out the CTEs a query reads more than once, so they are computed once (TPC-H Q15's ``revenue0``).

Why: plans are trees. A CTE that a query references twice is planned at each
reference (:mod:`gpu_engine.sql.planner`), so its input would be scanned and
aggregated twice (Q15 reads ``lineitem`` once for the revenues and again for
their maximum). A runner instead computes each such CTE first, registers the
result as a table, and runs the query reading that table: ``Session.sql`` and
``SparkRunner.sql`` do this (materialized CTEs, as Presto and Spark do for a
CTE they do not inline). ``Session.sql_plan`` still returns one plan tree, with
the CTE inlined at each reference.
"""

from __future__ import annotations

import functools
import itertools
import re
import secrets
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from gpu_engine.plans.sql_literal_lists import lift_literal_lists
from gpu_engine.sql.cte_reader_filters import with_reader_filters
from gpu_engine.sql.cte_set_readers import with_set_readers_distinct

__all__ = ["SharedCte", "split_shared_ctes"]

_NAMES = itertools.count(1)
_WITH = re.compile(r"\bwith\b", re.IGNORECASE)


@dataclass(frozen=True)
class SharedCte:
    """A CTE to compute first: the table name its result gets and the SQL computing it."""

    table: str
    sql: str


def _with_key(tree: exp.Expression) -> str | None:
    for key in ("with_", "with"):
        if isinstance(tree.args.get(key), exp.With):
            return key
    return None


def _rename_references(tree: exp.Expression, tables: dict[str, str]) -> exp.Expression:
    """Point table references to the CTEs in ``tables`` at their tables, keeping the CTE's name as the alias.

    A nested WITH's CTE of one of those names hides it from the CTEs written after it and from its query, as
    DuckDB scopes CTEs: a body reading its own name reads the outer one (``WITH a AS (...) SELECT * FROM (WITH
    a AS (SELECT ... FROM a) SELECT * FROM a)``: only the inner body's ``a`` is the shared table).
    """
    stack = [(tree, tables)]
    while stack:  # (a stack, not recursion: a tree may nest hundreds of levels)
        node, visible = stack.pop()
        if not visible:
            continue
        key = _with_key(node)
        if key is not None:
            inner = dict(visible)
            for cte in node.args[key].expressions:
                stack.append((cte.this, dict(inner)))
                inner.pop(cte.alias_or_name, None)
            stack.extend((child, inner) for child in node.iter_expressions() if child is not node.args[key])
            continue
        if isinstance(node, exp.Table) and node.name in visible and not node.args.get("db"):
            if not node.alias:
                node.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
            node.set("this", exp.to_identifier(visible[node.name]))
        stack.extend((child, visible) for child in node.iter_expressions())
    return tree


def _with_column_names(body: exp.Expression, cte: exp.CTE) -> exp.Expression:
    """Return a CTE's body with the column names its alias lists (``WITH x(c) AS (...)``) as its output names."""
    alias = cte.args.get("alias")
    if alias is None or not alias.columns:
        return body
    return exp.select("*").from_(exp.Subquery(this=body, alias=alias.copy()))


def _one_query(text: str, dialect: str) -> exp.Expression | None:
    """Return the parsed query of ``text``, or None when it is not one query (the planner reports that)."""
    try:
        statements = sqlglot.parse(text, read=dialect)
    except sqlglot.errors.SqlglotError:
        return None
    return statements[0] if len(statements) == 1 else None


def _references(tree: exp.Expression) -> dict[str, int]:
    """Return how often each CTE of the outer (non-recursive) WITH is read, only those read twice or more."""
    key = _with_key(tree)
    if key is None or tree.args[key].args.get("recursive"):
        return {}
    references = {cte.alias_or_name: 0 for cte in tree.args[key].expressions}
    for table in tree.find_all(exp.Table):
        if table.name in references and not table.args.get("db"):
            references[table.name] += 1
    return {name: count for name, count in references.items() if count >= 2}


def split_shared_ctes(text: str, dialect: str = "duckdb", call: str | None = None) -> tuple[list[SharedCte], str]:
    """Return the CTEs of ``text``'s outer WITH that are referenced twice or more, and the rest of the query.

    The CTEs come in WITH order (a later one may read an earlier one's table);
    the query text reads them as tables named ``__cte_<call>_<name>``. Without
    ``call`` each call gets a new number (two runs of one text at once never
    share a table). A caller that names its calls itself (the Session: a hash
    of the text and a slot free while the call runs) gets the same texts for
    the same call name, so their plans can be kept (:mod:`gpu_engine.sql.plan_cache`)
    while concurrent runs still use tables of their own. Nothing to split (no
    such CTE, WITH RECURSIVE, or text that does not parse as one query: the
    planner reports that) gives ``([], text)``.

    A text is parsed once per process (:func:`_split_template`, the 256 most recent
    texts): a query with a WITH clause was parsed by sqlglot once more on every run.
    """
    if not _WITH.search(text):
        return [], text  # no CTE can be written without WITH: a long chain's text is not parsed twice
    number = str(next(_NAMES)) if call is None else call
    if len(text) > _MAX_KEPT_TEXT or _MARK in text:
        computed, query = _split(text, dialect, number)
        return list(computed), query
    computed, query = _split_template(text, dialect)
    if not computed:
        return [], text

    def named(sql: str) -> str:
        return sql.replace(f"__cte_{_MARK}_", f"__cte_{number}_")

    return [SharedCte(named(cte.table), named(cte.sql)) for cte in computed], named(query)


#: Texts longer than this are split on every call rather than kept (their lists are kept by the planner's caches).
_MAX_KEPT_TEXT = 100_000
#: Stands for a call's number in a kept split; random, so no text holds it (one that does is split per call).
_MARK = f"m{secrets.token_hex(8)}"


@functools.lru_cache(maxsize=256)
def _split_template(text: str, dialect: str) -> tuple[tuple[SharedCte, ...], str]:
    """Return :func:`_split` of ``text`` with :data:`_MARK` for the call's number, kept per text."""
    return _split(text, dialect, _MARK)


def _split(text: str, dialect: str, number: str) -> tuple[tuple[SharedCte, ...], str]:
    """Split ``text`` (see :func:`split_shared_ctes`), naming the tables ``__cte_<number>_<name>``."""
    lifted, lists = lift_literal_lists(text, dialect)  # a long IN list is parsed whole only where a CTE is shared
    tree = _one_query(lifted, dialect)
    if tree is None or not _references(tree):
        return (), text
    if lists:
        tree = _one_query(text, dialect)
    key = _with_key(tree)
    ctes = tree.args[key].expressions
    references = _references(tree)
    tables: dict[str, str] = {}
    computed = []
    kept: list[tuple[exp.CTE, dict[str, str]]] = []  # each with the shared CTEs written before it (it reads those)
    for cte in ctes:
        name = cte.alias_or_name
        if name not in references:
            kept.append((cte, dict(tables)))
            continue
        body = with_reader_filters(_rename_references(cte.this.copy(), tables), name, tree, cte)
        body = with_set_readers_distinct(body, name, tree, cte)  # read only by IN / EXISTS: its distinct rows
        body = _with_column_names(body, cte)
        if kept:
            body.set(key, exp.With(expressions=[_rename_references(k.copy(), seen) for k, seen in kept]))
        tables[name] = f"__cte_{number}_{name}"
        computed.append(SharedCte(tables[name], body.sql(dialect=dialect)))
    query = tree.copy()
    seen_by = {cte.alias_or_name: seen for cte, seen in kept}
    remaining = [c for c in query.args[key].expressions if c.alias_or_name not in tables]
    with_ = query.args[key]
    query.set(key, None)
    _rename_references(query, tables)  # the query after its WITH reads every shared CTE
    if remaining:
        for cte in remaining:  # a CTE's body reads those written before it
            _rename_references(cte.this, seen_by[cte.alias_or_name])
        with_.set("expressions", remaining)
        query.set(key, with_)
    return tuple(computed), query.sql(dialect=dialect)
