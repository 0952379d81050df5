"""Find subexpressions that several expressions share, so each is computed once per batch.

TPC-H Q1 computes ``l_extendedprice * (1 - l_discount)`` for one column and
again inside ``... * (1 + l_tax)`` for the next; decimal arithmetic with
overflow checks costs several passes over memory, so evaluating it once
matters. The rewrite is done once, when an operator is built: repeated
subtrees become columns ``$cse0``, ``$cse1``, … computed first (each after
the ones it uses) and referenced by the rewritten
expressions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, is_dataclass, replace

from gpu_engine.plans.expressions import Case, ColumnRef, Expr, Function, Literal, walk

__all__ = ["hoist_common_subexpressions", "hoists_from_branches"]


def _size(expr: Expr) -> int:
    return sum(1 for _ in walk(expr))


def _substitute(expr: Expr, target: Expr, ref: ColumnRef) -> Expr:
    if expr == target:
        return ref
    changes = {}
    for f in fields(expr):
        value = getattr(expr, f.name)
        if isinstance(value, Expr):
            new = _substitute(value, target, ref)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and any(isinstance(v, (Expr, tuple)) for v in value):
            new_items = tuple(
                tuple(_substitute(x, target, ref) if isinstance(x, Expr) else x for x in v) if isinstance(v, tuple)
                else (_substitute(v, target, ref) if isinstance(v, Expr) else v)
                for v in value
            )
            if new_items != value:
                changes[f.name] = new_items
    return replace(expr, **changes) if changes else expr


def hoist_common_subexpressions(expressions: tuple[Expr, ...]) -> tuple[list[tuple[str, Expr]], tuple[Expr, ...]]:
    """Return ``(definitions, rewritten)``: shared subtrees to evaluate first, in order, and the expressions using them."""
    definitions: list[tuple[str, Expr]] = []
    rewritten = tuple(expressions)
    while True:
        counts = Counter(node for e in rewritten + tuple(d for _, d in definitions) for node in walk(e)
                         if not isinstance(node, (ColumnRef, Literal)) and is_dataclass(node))
        repeated = [node for node, count in counts.items() if count > 1]
        if not repeated:
            break
        target = max(repeated, key=_size)
        ref = ColumnRef(f"$cse{len(definitions)}", target.dtype)
        rewritten = tuple(_substitute(e, target, ref) for e in rewritten)
        definitions = [(name, _substitute(d, target, ref)) for name, d in definitions]
        definitions.append((ref.name, target))
    return _dependency_order(definitions), rewritten


def _dependency_order(definitions: list[tuple[str, Expr]]) -> list[tuple[str, Expr]]:
    """Order definitions so that each comes after the ones it references."""
    pending = dict(definitions)
    ordered: list[tuple[str, Expr]] = []
    while pending:
        for name, expr in list(pending.items()):
            uses = {n.name for n in walk(expr) if isinstance(n, ColumnRef)} & pending.keys()
            if not uses - {name}:
                ordered.append((name, expr))
                del pending[name]
    return ordered


def _evaluated_on_every_row(expressions: tuple[Expr, ...]) -> set[Expr]:
    """Return the subtrees of ``expressions`` that their evaluation computes on every row.

    A CASE computes its first condition on every row, but its later conditions only on the rows the
    earlier ones left undecided and each value only on its own rows (coalesce, nullif and IF are CASEs).
    TRY's operand counts as never computed: hoisted out of it, a failure would raise where TRY answers NULL.
    """
    found: set[Expr] = set()
    pending = list(expressions)
    while pending:
        expr = pending.pop()
        if expr in found:
            continue
        found.add(expr)
        if isinstance(expr, Case):
            pending.extend(expr.whens[0][:1] if expr.whens else ())
        elif isinstance(expr, Function) and expr.name == "try":  # its operand's errors are NULLs: not hoisted
            continue
        else:
            pending.extend(expr.children())
    return found


def hoists_from_branches(expressions: tuple[Expr, ...], definitions: list[tuple[str, Expr]]) -> bool:
    """Return whether a hoisted definition of ``expressions`` is computed on rows the expressions never
    compute it for (it sits only in CASE branches): evaluated on every row, it may fail where they would
    not (an overflow, a text that does not parse), so its caller must fall back to them as written."""
    expanded: dict[str, Expr] = {}
    for name, definition in definitions:  # in dependency order: what a definition reads is expanded already
        for used, target in expanded.items():
            definition = _substitute(definition, ColumnRef(used, target.dtype), target)
        expanded[name] = definition
    every_row = _evaluated_on_every_row(expressions)
    return any(target not in every_row for target in expanded.values())
