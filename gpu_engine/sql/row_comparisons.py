"""Expand ``(a, b) = (c, d)`` and ``(a, b) <> (c, d)``: a row compared with a row, column by column.

Why a rewrite of its own: the engine's expressions hold no row values, and DuckDB compares two rows as
structs, where a NULL field equals a NULL field (``(1, NULL) = (1, NULL)`` is TRUE, ``(NULL, 'b') = (1, 'b')``
FALSE, never NULL). So ``(a, b) = (c, d)`` is ``a IS NOT DISTINCT FROM c AND b IS NOT DISTINCT FROM d`` (a join
on it matches NULL keys, as DuckDB's does), ``<>`` its negation (``IS DISTINCT FROM`` on any column), and ``IS
[NOT] DISTINCT FROM`` between rows the same. The conjunction then plans as any written ``IS NOT DISTINCT FROM``:
filters against constants, and a join on it is a nested-loop join (the hash join has no key on which NULL
matches NULL yet).

``(a, b) [NOT] IN ((1, 'x'), (2, 'y'))`` is [NOT] the disjunction of those equalities (DuckDB: never NULL).

Refused by name: rows of different widths (DuckDB refuses them too) and the ordering comparisons ``<``, ``<=``,
``>``, ``>=`` of two rows (lexicographic, NULL greatest in DuckDB): compare the columns one by one.
A row against a subquery (``(a, b) IN (SELECT ...)``, ``= ANY``) is :mod:`~gpu_engine.sql.tuple_membership`'s.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of, unsupported

__all__ = ["with_row_comparisons_expanded"]

_EQUAL = (exp.EQ, exp.NullSafeEQ)
_DIFFERENT = (exp.NEQ, exp.NullSafeNEQ)
_ORDERING = (exp.GT, exp.GTE, exp.LT, exp.LTE)


def _fields(node: exp.Expression) -> list[exp.Expression] | None:
    """Return the fields of a row written ``(a, b)`` or ``ROW(a, b)``, else None."""
    if isinstance(node, exp.Paren):
        return _fields(node.this)
    if isinstance(node, exp.Tuple):
        return list(node.expressions)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "row":
        return list(node.expressions)
    return None


def _same(node: exp.Expression, left: list[exp.Expression], right: list[exp.Expression]) -> exp.Expression:
    """Return ``left`` and ``right`` equal on every field (a NULL field equals a NULL field), parenthesized."""
    if len(left) != len(right):
        line, col = position_of(node)
        raise SqlError(f"a row of {len(left)} values is compared with a row of {len(right)} values "
                       f"(the rows of a comparison hold as many values)", line=line, col=col)
    if not left:
        return exp.true()
    pairs = [exp.NullSafeEQ(this=a.copy(), expression=b.copy()) for a, b in zip(left, right)]
    return exp.Paren(this=exp.and_(*pairs, copy=False))


def _expanded(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.In) and node.args.get("query") is None and node.expressions:
        row = _fields(node.this)  # (a, b) IN ((1, 'x'), (2, 'y')): equal to one of the rows (never NULL)
        rows = [_fields(value) for value in node.expressions]
        if row is None or any(fields is None for fields in rows):
            return node
        return exp.Paren(this=exp.or_(*(_same(node, row, fields) for fields in rows), copy=False))
    if not isinstance(node, (*_EQUAL, *_DIFFERENT, *_ORDERING)):
        return node
    left, right = _fields(node.this), _fields(node.expression)
    if left is None or right is None:
        return node
    if isinstance(node, _ORDERING):
        raise unsupported("an ordering comparison of two rows ((a, b) < (c, d)); compare the columns one by one "
                          "or use = / <> / IS [NOT] DISTINCT FROM between rows", node)
    same = _same(node, left, right)
    return same if isinstance(node, _EQUAL) else exp.Not(this=same)


def with_row_comparisons_expanded(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` with every ``=`` / ``<>`` / ``IS [NOT] DISTINCT FROM`` between two rows and every row IN a
    list of rows expanded (in place)."""
    return tree.transform(_expanded, copy=False)
