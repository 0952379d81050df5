"""Queries whose result has two columns of one name (``SELECT * FROM t JOIN u ...`` where both have ``a``).

Why: DuckDB keeps both columns under the same name (``SELECT t.a, u.a``; ``SELECT DISTINCT *`` over a join,
TPC-DS-style queries), while a plan's columns are named uniquely (operators find columns by name). The plan
names a repeated output as DuckDB names it inside a derived table (``a``, ``a_1``, ``a_2``, skipping names the
query already uses), and :meth:`~gpu_engine.session.Session.sql` shows the result under the names as written.
The shown names are kept beside the plan object (plans are frozen; the plan cache hands back the same object
for the same text), dropped with it. A plan run by ``Session.execute`` shows its unique names.
"""

from __future__ import annotations

import threading
import weakref

import pyarrow as pa

__all__ = ["unique_output_names", "remember_shown_names", "shown_names", "with_shown_names"]

_SHOWN: dict[int, tuple[str, ...]] = {}  # id(plan) -> the names its result is shown under
_LOCK = threading.Lock()


def unique_output_names(names: list[str]) -> list[str]:
    """Return ``names`` with each repeat renamed ``<name>_<n>`` (the first free n from 1), as DuckDB's binder does."""
    taken = set(names)
    seen: set[str] = set()
    out = []
    for name in names:
        if name not in seen:
            seen.add(name)
            out.append(name)
            continue
        n = 1
        while f"{name}_{n}" in taken:
            n += 1
        renamed = f"{name}_{n}"
        taken.add(renamed)
        seen.add(renamed)
        out.append(renamed)
    return out


def remember_shown_names(plan: object, names: list[str]) -> None:
    """Keep ``names`` as the names ``plan``'s result is shown under, as long as ``plan`` lives."""
    key = id(plan)
    with _LOCK:
        _SHOWN[key] = tuple(names)
    weakref.finalize(plan, _forget, key)


def _forget(key: int) -> None:
    with _LOCK:
        _SHOWN.pop(key, None)


def shown_names(plan: object) -> tuple[str, ...] | None:
    """Return the names ``plan``'s result is shown under where they repeat a name, else None."""
    with _LOCK:
        return _SHOWN.get(id(plan))


def with_shown_names(plan: object, table: pa.Table) -> pa.Table:
    """Return ``table`` (``plan``'s result) with its columns named as the query wrote them."""
    names = shown_names(plan)
    if names is None or len(names) != table.num_columns:
        return table
    return table.rename_columns(list(names))


def _star_expanded(select, root, schema, dialect):
    """Return ``select``'s projections with its ``*`` expanded (qualified copies), or None when they cannot be
    listed apart from the query (a correlated reference, star modifiers, a failure of the qualifier)."""
    from sqlglot import exp
    from sqlglot.optimizer.qualify import qualify

    if any(p.args.get(k) for p in select.expressions for k in ("except_", "except", "replace", "rename")):
        return None
    probe = select.copy()
    with_ = root.args.get("with_") or root.args.get("with")
    if with_ is not None and probe.args.get("with_") is None and probe.args.get("with") is None:
        probe.set("with_", with_.copy())
    try:
        qualified = qualify(probe, schema=schema, dialect=dialect, quote_identifiers=False,
                            validate_qualify_columns=True, identify=False)
    except Exception:  # noqa: BLE001 - left to the query's own qualification and its error
        return None
    out = []
    for projection in qualified.expressions:
        if not isinstance(projection, exp.Alias) or not isinstance(projection.this, exp.Column):
            return None
        out.append(projection.copy())
    return out if len(out) >= len(select.expressions) else None


def with_derived_names_unique(tree, schema=None, dialect="duckdb"):
    """Return ``tree`` (parsed, not yet qualified) with the repeated output names of its derived tables, CTEs and
    subqueries made unique as DuckDB makes them (``a``, ``a_1``): ``SELECT s.a FROM (SELECT t.a, u.a ...) s`` reads
    the first ``a`` (the second is ``s.a_1``), and ``*`` over it has two columns.

    Why: a derived table's columns are found by name; with two of one name the planner read the last one (a
    wrong answer) and sqlglot's qualifier refused ``*`` over it. Only SELECT lists without ``*`` (whose names are
    known before qualification) are renamed, and a SELECT of ``*`` and plain columns, its ``*`` expanded by
    qualifying it apart (with the query's WITH); the outermost query keeps its names (module docstring).
    """
    from sqlglot import exp

    root = tree
    for select in list(tree.find_all(exp.Select)):
        if select is root or not isinstance(select.parent, (exp.Subquery, exp.CTE)):
            continue
        projections = list(select.expressions)
        if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
               for p in projections):
            # only a SELECT * of plain columns (over a join), listed apart from the query; else left as it was
            if schema is None or any(not isinstance(p, (exp.Star, exp.Column)) for p in projections):
                continue
            if not select.args.get("joins"):  # one FROM item's columns are unique already (no qualifying)
                continue
            expanded = _star_expanded(select, root, schema, dialect)
            if expanded is None:
                continue
            names = [p.alias.lower() for p in expanded]
            if len(set(names)) == len(names):
                continue
            select.set("expressions", [exp.alias_(p.this, new, quoted=True)
                                       for p, new in zip(expanded, unique_output_names(names))])
            continue
        names = [p.alias_or_name for p in projections]
        lowered = [name.lower() for name in names]
        if len(set(lowered)) == len(lowered):
            continue
        unique = unique_output_names(lowered)
        select.set("expressions", [
            p if new == old else exp.alias_(p.this if isinstance(p, exp.Alias) else p, new, quoted=True)
            for p, old, new in zip(projections, lowered, unique)])
    return tree
