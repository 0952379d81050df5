"""A distinct set operation's branch planned without its own ``SELECT DISTINCT``: the set operation removes the
duplicates anyway.

Why: ``UNION``, ``INTERSECT`` and ``EXCEPT`` (the distinct forms) group the rows of their branches by every column
(:mod:`gpu_engine.sql.set_operations`), so a branch's own ``SELECT DISTINCT`` grouped the same rows by the same
columns once more: a partial step, a repartition and a final step per branch before the set operation's own three.
TPC-DS q38 (three ``SELECT DISTINCT c_last_name, c_first_name, d_date`` branches under ``INTERSECT``) and q87
(the same under ``EXCEPT``) grouped 540K store_sales rows by two strings and a date, then the 79K groups again
with their side tags; without the branches' DISTINCT the set operation's partial step groups the joined rows once
(SF1, CPU, one process: q38 249 -> 221 ms, bench/results/2026-11-28-q38-*.md).

Why it is correct: each of the distinct forms answers a *set* of rows: UNION the rows in either branch, INTERSECT
those in both, EXCEPT those in the left and not in the right; a row's presence in a branch is the same whether
the branch lists it once or many times. The ``ALL`` forms count copies and keep their branches as written.

A branch keeps its DISTINCT where something after it reads the deduplicated rows: a LIMIT / OFFSET / FETCH (the
first n distinct rows are not the first n rows), an ORDER BY (its keys must be SELECT items under DISTINCT, an
error to report as written), ``DISTINCT ON`` (one row per key, not per row).
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["without_redundant_distinct"]

#: A SELECT's clauses that read its rows after DISTINCT: with any of them the DISTINCT is kept.
_AFTER_DISTINCT = ("order", "limit", "offset", "fetch")


def without_redundant_distinct(branch: exp.Expression) -> exp.Expression:
    """Return a distinct set operation's ``branch``, without its ``SELECT DISTINCT`` where that changes no answer.

    The branch (under any parentheses that carry no ORDER BY / LIMIT) is a SELECT with a plain DISTINCT and no
    clause reading its rows after it: a shallow copy without the DISTINCT comes back (the parsed tree, which a
    plan cache may hold, stays as written). Anything else comes back as it is.
    """
    select = branch
    while isinstance(select, (exp.Subquery, exp.Paren)) and not any(select.args.get(k) for k in _AFTER_DISTINCT):
        select = select.this
    if not isinstance(select, exp.Select):
        return branch
    distinct = select.args.get("distinct")
    if not isinstance(distinct, exp.Distinct) or distinct.args.get("on") is not None:
        return branch
    if any(select.args.get(key) for key in _AFTER_DISTINCT):
        return branch
    copy = exp.Select()
    for key, value in select.args.items():
        if key != "distinct":
            copy.args[key] = value  # shared, not re-parented (as eager aggregation's copy): the original is kept
    copy.meta.update(select.meta)
    return copy
