"""Translate SQL snippets (DuckDB dialect, parsed by sqlglot) into the typed expression IR.

PlanBuilder takes SQL text as Velox's does (``.filter("l_quantity > 10")``); this
module turns that text into :mod:`gpu_engine.plans.expressions` trees whose
every node carries its resolved Arrow type, so that unknown columns, type
mismatches and unsupported functions fail at plan-build time with a
:class:`PlanError` naming the plan node, never half-way through execution.

Types follow DuckDB (see :mod:`gpu_engine.plans.type_coercion`). The
translator makes implicit conversions explicit only where a node holds several
values of one type: CASE branch values and IN-list values always have the
node's ``dtype`` (constants are converted exactly, other values get a
:class:`Cast`; an IN operand is cast when a constant does not fit its type).
Arithmetic and comparison operands keep their own types; the evaluator
promotes them (their result ``dtype`` says to what).

Naming: ``"a + b AS c"`` is ``c``; a bare column keeps its name; any other
unnamed projection is ``expr_<position>`` and an unnamed aggregate
``agg_<position>``, position being its index in the builder's list.
"""

from __future__ import annotations

import pyarrow as pa
import sqlglot
from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.plans.aggregates import result_type
from gpu_engine.plans.expressions import AggregateCall, Expr
from gpu_engine.plans.nodes import SortKey
from gpu_engine.plans.scalar_translation import ScalarTranslator, is_untyped_null

__all__ = [
    "parse_expression",
    "parse_projection",
    "parse_aggregate",
    "parse_sort_key",
    "parse_column_name",
]

_AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}


def _parse(text: str, node: str, into: type[exp.Expression] | None = None) -> exp.Expression:
    """Parse one snippet with the DuckDB dialect, turning syntax errors into PlanError."""
    if not isinstance(text, str) or not text.strip():
        raise PlanError("expected a non-empty SQL snippet", node=node, column=repr(text))
    try:
        if into is not None:
            return exp.maybe_parse(text, into=into, dialect="duckdb")
        return sqlglot.parse_one(text, dialect="duckdb")
    except sqlglot.errors.ParseError as error:
        detail = error.errors[0]["description"] if error.errors else str(error)
        raise PlanError(f"cannot parse SQL: {detail}", node=node, column=text) from None


def _unwrap(tree: exp.Expression) -> exp.Expression:
    while isinstance(tree, exp.Paren):
        tree = tree.this
    return tree


def _typed(expr: Expr, text: str, node: str) -> Expr:
    """Refuse an expression whose type is still unknown (a bare NULL)."""
    if is_untyped_null(expr):
        raise PlanError("cannot infer the type of NULL; write CAST(NULL AS <type>)", node=node, column=text)
    return expr


def parse_expression(text: str, schema: pa.Schema, node: str) -> Expr:
    """Translate a scalar SQL expression over ``schema`` into a typed expression.

    Parameters
    ----------
    text
        The snippet, e.g. ``"l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY"``.
    schema
        The input columns (names are case-sensitive).
    node
        The label of the plan node being built (``"Filter[2]"``), named by errors.

    Returns
    -------
    Expr
        A bare ``NULL`` comes back as ``Literal(None, pa.null())`` for the caller to type.

    Raises
    ------
    PlanError
        For syntax errors, unknown columns, type mismatches and unsupported SQL.
    """
    tree = _parse(text, node)
    if isinstance(tree, exp.Alias):
        raise PlanError("an alias (AS) is not allowed here", node=node, column=text)
    return ScalarTranslator(schema, node).translate(tree)


def parse_projection(text: str, schema: pa.Schema, node: str, *, position: int = 0) -> tuple[str, Expr]:
    """Translate ``"expr [AS name]"`` into its output name and typed expression.

    A bare column keeps its name; another unnamed expression is named
    ``expr_<position>``.
    """
    tree = _parse(text, node)
    if isinstance(tree, exp.Alias):
        name, tree = tree.alias, tree.this
    else:
        name = _unwrap(tree).name if isinstance(_unwrap(tree), exp.Column) else f"expr_{position}"
    return name, _typed(ScalarTranslator(schema, node).translate(tree), text, node)


def parse_aggregate(text: str, schema: pa.Schema, node: str, *, position: int = 0) -> tuple[str, AggregateCall]:
    """Translate ``"function(arg) [AS name]"`` into its output name and aggregate call.

    Functions: ``count(*)``, ``count``, ``sum``, ``min``, ``max``, ``avg``; the
    argument may be any scalar expression, optionally ``DISTINCT`` (the call is
    then marked ``distinct``; PlanBuilder rewrites it into two aggregations). An unnamed aggregate is named
    ``agg_<position>``.

    Raises
    ------
    PlanError
        For other functions, an
        aggregate inside an expression, or an argument type the function rejects.
    """
    tree = _parse(text, node)
    name = f"agg_{position}"
    if isinstance(tree, exp.Alias):
        name, tree = tree.alias, tree.this
    call = _unwrap(tree)
    function = _AGGREGATES.get(type(call))
    if function is None:
        if isinstance(call, exp.Window):
            raise PlanError("window functions are not supported", node=node, column=text)
        nested = any(isinstance(inner, exp.AggFunc) for inner in call.walk() if inner is not call)
        if isinstance(call, exp.Func) and not nested:
            fname = call.name if isinstance(call, exp.Anonymous) else call.sql_name().lower()
            raise PlanError(f"unsupported aggregate function {fname!r}", node=node, column=text)
        if nested:
            raise PlanError(
                "an aggregate inside an expression is not supported yet; aggregate, then project",
                node=node, column=text)
        raise PlanError("expected an aggregate call such as 'sum(x) AS name'", node=node, column=text)
    argument = call.this
    distinct = isinstance(argument, exp.Distinct) or bool(call.args.get("distinct"))
    if isinstance(argument, exp.Distinct):
        if len(argument.expressions) != 1:
            raise PlanError(f"{function}(DISTINCT ...) takes exactly one argument", node=node, column=text)
        argument = argument.expressions[0]
    if isinstance(argument, exp.Star):
        if function != "count" or distinct:
            raise PlanError(f"{function}(*) is not valid", node=node, column=text)
        return name, AggregateCall("count_star", None, pa.int64())
    if argument is None or call.expressions:
        raise PlanError(f"{function} takes exactly one argument", node=node, column=text)
    arg = _typed(ScalarTranslator(schema, node).translate(argument), text, node)
    try:
        dtype = result_type(function, arg.dtype)
    except TypeError:
        raise PlanError(f"type mismatch: {function} is not defined for {arg.dtype}", node=node, column=text) from None
    return name, AggregateCall(function, arg, dtype, distinct)


def parse_column_name(text: str, schema: pa.Schema, node: str, *, role: str = "key") -> str:
    """Return the input column a key names (``l_partkey`` or ``"MixedCase"``).

    Raises
    ------
    PlanError
        When the column is unknown or ``text`` is an expression rather than a
        column; ``role`` ("grouping key", "sort key", …) words the message.
    """
    if isinstance(text, str) and text in schema.names:
        return text
    tree = _unwrap(_parse(text, node))
    if not isinstance(tree, exp.Column) or tree.table:
        raise PlanError(f"a {role} must be an input column name; project the expression first",
                        node=node, column=text)
    ScalarTranslator(schema, node).translate(tree)  # raises PlanError for an unknown column
    return tree.name


def parse_sort_key(text: str, schema: pa.Schema, node: str) -> SortKey:
    """Translate ``"name [ASC|DESC] [NULLS FIRST|LAST]"`` into a SortKey.

    The default is DuckDB's: ascending with NULLS LAST (also NULLS LAST for DESC).
    """
    ordered = _parse(text, node, into=exp.Ordered)
    if not isinstance(ordered, exp.Ordered):
        ordered = exp.Ordered(this=ordered, nulls_first=False)
    column = ordered.this
    name = parse_column_name(column.sql(dialect="duckdb"), schema, node, role="sort key")
    return SortKey(name, ascending=not ordered.args.get("desc"), nulls_first=bool(ordered.args.get("nulls_first")))

