"""DuckDB's ``a SEMI JOIN b ON c`` and ``a ANTI JOIN b ON c`` as ``WHERE [NOT] EXISTS (SELECT 1 FROM b WHERE c)``.

Why: DuckDB users write the semi and anti joins by name; the planner plans ``[NOT] EXISTS`` as a semi or anti
join already (:mod:`gpu_engine.sql.decorrelation`), with DuckDB's meaning: a row of ``a`` is kept once when
some row of ``b`` meets ``c`` (SEMI) or when none does (ANTI: a NULL key meets nothing, so it is kept), and only
``a``'s columns come out (``SELECT *`` lists no column of ``b``). Rewritten before the stars are expanded.

Only SEMI/ANTI joins with ON written after every other join of their FROM clause are rewritten (the filter then
applies to the joined rows, as the join did; one followed by another join, or written with USING, is refused by
the planner naming it, as before).
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["with_semi_anti_joins_as_exists"]


def _semi_or_anti(join: exp.Join) -> str | None:
    kind = (join.args.get("kind") or "").upper()
    return kind if kind in ("SEMI", "ANTI") else None


def with_semi_anti_joins_as_exists(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` (parsed, in place) with each trailing SEMI/ANTI JOIN ... ON written as [NOT] EXISTS."""
    for select in list(tree.find_all(exp.Select)):
        joins = list(select.args.get("joins") or [])
        trailing = []
        for join in reversed(joins):
            if _semi_or_anti(join) is None or join.args.get("on") is None or join.args.get("using"):
                break
            trailing.append(join)
        if not trailing:
            continue
        select.set("joins", joins[:len(joins) - len(trailing)] or None)
        for join in reversed(trailing):
            inner = exp.select("1").from_(join.this.copy()).where(join.args["on"].copy())
            test: exp.Expression = exp.Exists(this=inner)
            if _semi_or_anti(join) == "ANTI":
                test = exp.Not(this=test)
            select.where(test, copy=False)
    return tree
