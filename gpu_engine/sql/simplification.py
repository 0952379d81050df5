"""Keep sqlglot's simplifier away from constant arithmetic, whose result type and errors the engine decides.

sqlglot folds constant arithmetic with Python numbers: ``1.0 / 4.0`` becomes
the decimal ``0.25`` (DuckDB: the DOUBLE 0.25), ``2147483647 + 1`` the BIGINT
``2147483648`` (DuckDB: an INT32 overflow error). The engine's translator
types arithmetic as DuckDB does (:mod:`gpu_engine.plans.type_coercion`) and
computes it with DuckDB's overflow checks, so arithmetic is marked final
(sqlglot's own mark for what its simplifier must leave alone) while the query
is simplified; the other rules still apply: boolean logic, comparisons of
constants, DATE +/- INTERVAL (folded to the date, which the planner's
selectivity estimates read), BETWEEN, and moving a constant across a
comparison (``a + 1 = 3`` is ``a = 2``, as DuckDB's optimizer moves it too).

A CASE (or IF) whose every condition folds to FALSE or NULL (``CASE WHEN k >= NULL THEN b END``) folds to a bare
NULL, whose type nothing decides any more (the planner refused it: "cannot infer the type of NULL"); DuckDB
types it by its branches. Such a CASE keeps its results' type: its ELSE is held, while simplifying, as a CASE
whose one branch is never taken (left as written), and only what is left of it once the CASE folded away
stays: ``CASE WHEN FALSE THEN b END``, NULL typed as ``b``.

A test of a test written without parentheses, ``x IS NULL IS NULL`` (parsed ``(x IS NULL) IS NULL``: FALSE),
sqlglot's simplifier re-associates as ``x IS (NULL IS NULL)``, that is ``x IS TRUE`` (a wrong answer for a NULL
or boolean ``x``, a type error for others); the inner test is parenthesized first (:func:`tests_parenthesized`),
which sqlglot leaves as written.

A DATE or TIMESTAMP text the engine (like DuckDB) does not read, ``TIMESTAMP '20200101'``, sqlglot's simplifier
parses leniently when it folds it with an INTERVAL or moves an INTERVAL across a comparison with it (``ts + INTERVAL
1 DAY >= TIMESTAMP '20200101'`` became ``ts >= '2019-12-31 00:00:00'``, an answer where DuckDB raises). Such a
cast, and the arithmetic and comparisons holding it, are marked final (:func:`_hold_unread_text`): the planner
then reads the text itself and refuses it with its position, as it does without the INTERVAL. A comparison
under a connective the simplifier folds away (``FALSE AND d > DATE '20200101'``) still goes, as DuckDB's
optimizer removes it before the cast runs.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.simplify import FINAL

from gpu_engine.plans.sql_literals import compared_interval_arithmetic

__all__ = ["simplify_keeping_arithmetic", "tests_parenthesized"]

_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod)
#: What sqlglot's simplifier folds a DATE / TIMESTAMP constant through: INTERVAL arithmetic and comparisons.
_FOLDED_THROUGH = (exp.Add, exp.Sub, exp.Paren, exp.Predicate)
#: Meta key of a CASE's ELSE held while simplifying (its value: the ELSE as written, or None).
_HELD_ELSE = "gpu_engine.held_else"


def _typed_result(results: list[exp.Expression | None]) -> exp.Expression | None:
    """Return the first of a CASE's results that is not a bare NULL (its type decides the CASE's), or None."""
    for result in results:
        inner = result
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if inner is not None and not isinstance(inner, exp.Null):
            return result
    return None


def _hold_else(node: exp.Expression) -> bool:
    """Give a CASE / IF without a typed ELSE one that keeps its type if every branch folds away; return whether
    it got one."""
    if isinstance(node, exp.Case):
        key, results = "default", [branch.args.get("true") for branch in node.args.get("ifs") or []]
    else:
        key, results = "false", [node.args.get("true")]
    written = node.args.get(key)
    if written is not None and _typed_result([written]) is not None:
        return False
    typed = _typed_result(results)
    if typed is None:
        return False
    held = exp.Case(ifs=[exp.If(this=exp.cast(exp.Null(), exp.DataType.build("BOOLEAN")), true=typed.copy())])
    held.meta[FINAL] = True
    held.meta[_HELD_ELSE] = written.copy() if written is not None else None
    node.set(key, held)
    return True


def _release_else(tree: exp.Expression) -> exp.Expression:
    """Put back the ELSE written in each CASE / IF still standing; keep the held one where the CASE folded away."""
    for node in list(tree.walk()):
        if _HELD_ELSE not in node.meta:
            continue
        written = node.meta.pop(_HELD_ELSE)
        parent = node.parent
        if isinstance(parent, (exp.Case, exp.If)) and node.arg_key in ("default", "false") and (
                parent.args.get("ifs") if isinstance(parent, exp.Case) else True):
            parent.set(node.arg_key, written)
    return tree


def _test_of_a_test(node: exp.Expression) -> bool:
    return isinstance(node, exp.Is) and isinstance(node.this, exp.Is)


def tests_parenthesized(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` with the inner test of each ``x IS NULL IS NULL`` (an ``IS`` whose operand is an unparenthesized
    ``IS``) in parentheses, as the parser grouped it; a walk of the tree (Spark's reading: DuckDB's is in
    :func:`simplify_keeping_arithmetic`'s walk)."""
    for node in list(tree.walk()):
        if _test_of_a_test(node):
            node.set("this", exp.Paren(this=node.this))
    return tree


def _unread_text(node: exp.Expression) -> bool:
    """Return whether ``node`` casts a string constant to a DATE or a TIMESTAMP the engine does not read."""
    if not (isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string):
        return False
    text = node.this.this
    if node.to.is_type(exp.DataType.Type.DATE):
        from gpu_engine.plans.sql_literals import parse_date_text

        try:
            parse_date_text(text)
        except ValueError:
            return True
        return False
    if not node.to.is_type(exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ, exp.DataType.Type.DATETIME):
        return False
    from gpu_engine.columnar import Column
    from gpu_engine.columnar.arrow_numpy import arrow_from_pylist
    from gpu_engine.device import get_device
    from gpu_engine.expressions.text_on_host import parse_timestamps

    device = get_device("cpu")
    column = Column.from_arrow(arrow_from_pylist([text], pa.string()), device)
    return not bool(parse_timestamps(device, column, pa.timestamp("us"))[1][0])


def _hold_unread_text(cast: exp.Expression) -> None:
    """Mark a cast of unread text, and the INTERVAL arithmetic and comparisons holding it, final."""
    node = cast
    while node is not None:
        node.meta[FINAL] = True
        node = node.parent if isinstance(node.parent, _FOLDED_THROUGH) else None


#: The comparisons sqlglot's simplifier evaluates when both sides are constants.
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ, exp.Between)


#: Truncations sqlglot's simplifier folds, over a constant, to a constant of the operand's type.
_TRUNCATIONS = (exp.DateTrunc, exp.TimestampTrunc, exp.DatetimeTrunc)


def _constant_temporal_kind(node: exp.Expression) -> str | None:
    """Return "date" or "timestamp" for a DATE / TIMESTAMP constant (a cast of text or of such a constant, through
    parentheses, INTERVAL arithmetic and truncations, which sqlglot folds to a date or a datetime), else None."""
    while isinstance(node, (exp.Paren, *_TRUNCATIONS)) or (isinstance(node, (exp.Add, exp.Sub))
                                                           and isinstance(node.expression, exp.Interval)):
        node = node.this
    if not isinstance(node, exp.Cast) or not (isinstance(node.this, exp.Literal) and node.this.is_string
                                              or _constant_temporal_kind(node.this) is not None):
        return None
    if node.to.is_type(exp.DataType.Type.DATE):
        return "date"
    if node.to.is_type(exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ, exp.DataType.Type.DATETIME):
        return "timestamp"
    return None


def _compares_date_with_timestamp(node: exp.Expression) -> bool:
    """Return whether ``node`` compares a DATE constant with a TIMESTAMP constant: sqlglot's simplifier evaluates
    that with Python's ``date < datetime``, which raises TypeError (DuckDB compares the date as its midnight, as
    the engine's translator does)."""
    if not isinstance(node, _COMPARISONS):
        return False
    kinds = {_constant_temporal_kind(side) for side in node.iter_expressions()}
    return {"date", "timestamp"} <= kinds


def simplify_keeping_arithmetic(tree: exp.Expression,
                                simplify: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """Return ``simplify(tree)`` with every arithmetic operation left as written, ``date_trunc`` of a DATE
    left a TIMESTAMP (sqlglot reads it as its DateTrunc and folds a constant one to a DATE; DuckDB types it
    TIMESTAMP) and each test of a test's inner one parenthesized (:func:`tests_parenthesized`).

    The walk putting back held ELSEs (:func:`_release_else`) runs only where one was held: most queries have
    none, and each walk of a query's tree is a share of planning a new text (issue 29)."""
    held = False
    for node in list(tree.walk()):
        if isinstance(node, _ARITHMETIC) and not (any(isinstance(side, exp.Interval) for side in node.iter_expressions())
                                                  and compared_interval_arithmetic(node)):
            node.meta[FINAL] = True
            parent = node.parent  # sqlglot folds DATE - INTERVAL 30 HOUR through its parentheses, FINAL or not
            while isinstance(parent, exp.Paren) and any(isinstance(side, exp.Interval)
                                                        for side in node.iter_expressions()):
                parent.meta[FINAL] = True
                parent = parent.parent
        elif isinstance(node, exp.DateTrunc):  # date_trunc of a DATE: a TIMESTAMP, as the translator types it
            truncation = exp.TimestampTrunc(this=node.this, unit=node.args.get("unit"))
            truncation.meta[FINAL] = True
            if node is tree:
                tree = truncation
            else:
                node.replace(truncation)
        elif isinstance(node, exp.Case) or (isinstance(node, exp.If) and not isinstance(node.parent, exp.Case)):
            held = _hold_else(node) or held
        elif _test_of_a_test(node):  # x IS NULL IS NULL: not x IS (NULL IS NULL) to the simplifier
            node.set("this", exp.Paren(this=node.this))
        elif _unread_text(node):  # TIMESTAMP '20200101': refused by the planner, not read leniently here
            _hold_unread_text(node)
        elif _compares_date_with_timestamp(node):  # DATE '2024-01-01' < TIMESTAMP '...': the translator compares
            node.meta[FINAL] = True
    simplified = simplify(tree)
    if held:  # (only _hold_else marks a node _HELD_ELSE; copies of a marked node keep the mark)
        simplified = _release_else(simplified)
    for node in simplified.walk():
        if node.meta_get(FINAL):
            node.meta.pop(FINAL)
    return simplified
