"""Translate SQL snippets (DuckDB dialect, parsed by sqlglot) into the typed expression IR.

PlanBuilder takes SQL text as Velox's does (``.filter("l_quantity > 10")``); this
module turns that text into :mod:`gpu_engine.plans.expressions` trees whose
every node carries its resolved Arrow type, so that unknown columns, type
mismatches and unsupported functions fail at plan-build time with a
:class:`PlanError` naming the plan node, never half-way through execution.

A snippet may also be a sqlglot tree already parsed in the DuckDB dialect (a
:data:`Snippet`): the SQL planner hands over the trees of the query it parsed,
with columns renamed to the plan's names, instead of writing them out as text
to be parsed again (a 2000-term WHERE clause was parsed twice). Such a tree
becomes the translator's (connectives are regrouped in place) and is checked
for depth as parsed text is; errors name it as its user wrote it and carry the
offending sub-tree, which the SQL planner places in the query's text
(:mod:`gpu_engine.plans.snippet_sources`).

A filter, join filter or projection may also be an expression already typed (an
:class:`~gpu_engine.plans.expressions.Expr`; a named projection ``(name, Expr)``):
a front-end that builds the IR itself (a DataFrame API) hands it over as it is,
checked against the input schema by the same rules as a deserialized plan
(:func:`~gpu_engine.plans.plan_validation.validate_expression`), so a wrong type
or an unknown column is still a PlanError at build time. Aggregates, keys and
window functions are text or trees only.

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

import functools
import re

import pyarrow as pa
import sqlglot
import sqlglot.tokens
from sqlglot import exp

from gpu_engine.columnar.types import is_interval, is_string
from gpu_engine.errors import PlanError
from gpu_engine.plans.aggregates import (
    ORDERED_PICK_FUNCTIONS, TWO_ARGUMENT_FUNCTIONS, VALUE_LIST_FUNCTIONS, result_type,
)
from gpu_engine.plans.expressions import (MAX_EXPRESSION_DEPTH, AggregateCall, ColumnRef, Expr, Literal,
                                          allow_recursion_depth)
from gpu_engine.plans.interval_translation import interval_texts_kept
from gpu_engine.plans.nodes import SortKey
from gpu_engine.plans.null_type import NULL_STORAGE
from gpu_engine.plans.scalar_translation import ScalarTranslator, is_untyped_null
from gpu_engine.plans.snippet_sources import written_sql
from gpu_engine.plans.sql_aggregates import (
    aggregate_arguments, aggregate_function_name, aggregate_parameter, aggregate_parameter_key,
    normalize_aggregate_calls, unsupported_aggregate_text, distinct_pairs_parser,
)
from gpu_engine.plans.sql_connectives import balance_connectives
from gpu_engine.plans.window_tokens import groups_frames_kept

__all__ = [
    "Snippet",
    "snippet_text",
    "errors_placed",
    "parse_expression",
    "parse_projection",
    "parse_aggregate",
    "parse_sort_key",
    "parse_column_name",
]



#: A snippet: SQL text in the DuckDB dialect, a sqlglot tree parsed from such text, or (a filter or a projection)
#: an expression already typed, a projection's named as ``(name, Expr)`` (see the module docstring).
Snippet = str | exp.Expression | Expr | tuple


def _typed_snippet(expr: Expr, schema: pa.Schema, node: str) -> Expr:
    """Return an expression handed over typed, after checking it over ``schema`` as a deserialized plan's."""
    from gpu_engine.plans.plan_validation import validate_expression  # (it imports the IR this module builds)

    if isinstance(expr, AggregateCall):
        raise PlanError("an aggregate call is not a scalar expression", node=node, column=expr.sql())
    validate_expression(expr, schema, node)
    return expr


def snippet_text(snippet: Snippet) -> str:
    """Return a snippet as SQL text, for messages (a tree is written out only when an error names it, as its
    user wrote it: :func:`~gpu_engine.plans.snippet_sources.written_sql`)."""
    if isinstance(snippet, exp.Expression):
        return written_sql(snippet)
    if isinstance(snippet, Expr):
        return snippet.sql()
    if isinstance(snippet, tuple) and len(snippet) == 2 and isinstance(snippet[1], Expr):
        return f"{snippet[1].sql()} AS {snippet[0]}"
    return snippet if isinstance(snippet, str) else repr(snippet)


def errors_placed(function):
    """Wrap a translation of ``function(snippet, ...)`` so that its PlanError carries a sub-tree only when the
    snippet was handed parsed (:attr:`PlanError.tree`).

    A tree handed over is positioned in the caller's text (the SQL planner's query), so an error without a
    sub-tree of its own is placed at the snippet; a text snippet's positions are the snippet's, which mean
    nothing to the caller, so its errors carry none.
    """
    @functools.wraps(function)
    def translated(snippet: Snippet, *args, **kwargs):
        try:
            return function(snippet, *args, **kwargs)
        except PlanError as error:
            if not isinstance(snippet, exp.Expression):
                error.tree = None
            elif error.tree is None:
                error.tree = snippet
            raise
    return translated


def _parse(text: Snippet, node: str, into: type[exp.Expression] | None = None) -> exp.Expression:
    """Parse one snippet with the DuckDB dialect, turning syntax errors and too deep nesting into PlanError.

    The nesting is estimated from the tokens before parsing (the parser
    recurses about 25 Python frames per parenthesis or NOT) and measured on the
    parsed tree (a long ``a + b + …`` chain is parsed in a loop but is as deep
    as it is long); both are held to :data:`MAX_EXPRESSION_DEPTH`, and the
    recursion limit is raised as far as the snippet needs. A tree (already
    parsed) is only measured; ``into`` wraps it when it is of another kind
    (a sort key's column becomes an ascending ORDER BY item).
    """
    if isinstance(text, exp.Expression):
        return _measured(text if into is None or isinstance(text, into) else into(this=text), node, text)
    if not isinstance(text, str) or not text.strip():
        raise PlanError("expected a non-empty SQL snippet", node=node, column=repr(text))
    simple = _simple_snippet(text, into)
    if simple is not None:
        return simple
    try:
        tokens = _DUCKDB.tokenize(text)
    except sqlglot.errors.TokenError:
        raise PlanError("cannot parse SQL: a quoted string or name is not closed (or a character is not SQL)",
                        node=node, column=text) from None
    _check_depth(_nesting_estimate(tokens), " of parentheses and prefix operators", node, text)
    allow_recursion_depth(_nesting_estimate(tokens) + 2)
    try:
        if into is not None:
            tree = exp.maybe_parse(text, into=into, dialect="duckdb")
        else:  # (corr(DISTINCT y, x) needs the parser's two-argument builders: distinct_pairs_parser)
            parser = distinct_pairs_parser(_DUCKDB)
            # (INTERVAL '3 days 04:00:00'; OVER (GROUPS BETWEEN ...))
            statements = parser.parse(groups_frames_kept(interval_texts_kept(tokens)), text)
            if not statements or statements[0] is None:
                raise sqlglot.errors.ParseError(f"No expression was parsed from '{text}'")
            tree = exp.Block(expressions=statements) if len(statements) > 1 else statements[0]  # as parse_one
    except sqlglot.errors.ParseError as error:
        raise PlanError(f"cannot parse SQL: {_parse_error_text(error)}", node=node, column=text) from None
    except RecursionError:
        raise PlanError(f"cannot parse SQL: the expression nests too deeply (at most {MAX_EXPRESSION_DEPTH} levels "
                        "are supported)", node=node, column=_shortened(text)) from None
    return _measured(tree, node, text)


def _measured(tree: exp.Expression, node: str, text: Snippet) -> exp.Expression:
    """Return ``tree`` with its AND/OR chains balanced, refused when too deep, the recursion limit raised for it.

    A tree handed over parsed is allowed its parentheses as levels too: the passes recurse through them,
    and no token count before parsing raised the limit for them. One walk measures both depths and finds
    whether there is a chain to balance (a tree without AND/OR, most snippets, is walked once).
    """
    depth, with_parentheses, connectives = _tree_depths(tree)
    if connectives:
        tree = balance_connectives(tree)  # a long AND/OR chain is as deep as it is long, balanced it is not
        depth, with_parentheses, _ = _tree_depths(tree)
    _check_depth(depth, "", node, text)
    allow_recursion_depth(with_parentheses if isinstance(text, exp.Expression) else depth)
    return tree


#: A double-quoted name as DuckDB writes one (a quote inside doubled); the SQL planner's snippets name its columns so.
_QUOTED_NAME = r'"((?:[^"]|"")+)"'
_QUOTED_COLUMN = re.compile(_QUOTED_NAME)
_QUOTED_PROJECTION = re.compile(rf"{_QUOTED_NAME} AS {_QUOTED_NAME}")
_QUOTED_SORT_KEY = re.compile(rf"{_QUOTED_NAME} (ASC|DESC)(?: NULLS (FIRST|LAST))?")


def _quoted_column(name: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=name.replace('""', '"'), quoted=True))


def _simple_snippet(text: str, into: type[exp.Expression] | None) -> exp.Expression | None:
    """Return the tree the parser makes of a quoted column name, ``"a" AS "b"`` or ``"a" DESC NULLS FIRST``, else None.

    Why: PlanBuilder's callers (the SQL planner above all) pass most columns as such snippets: planning the 99
    TPC-DS texts tokenized and parsed ~3,700 of them (a tenth of planning). These three forms are built
    directly, as the same nodes the parser makes (DuckDB's default NULLS LAST for a sort key without
    NULLS); any other text, other spacing or lower-case keywords included, is parsed.
    """
    if into is exp.Ordered:
        match = _QUOTED_SORT_KEY.fullmatch(text)
        if match is None:
            return None
        return exp.Ordered(this=_quoted_column(match.group(1)), desc=match.group(2) == "DESC",
                           nulls_first=match.group(3) == "FIRST")
    if into is not None:
        return None
    match = _QUOTED_COLUMN.fullmatch(text)
    if match is not None:
        return _quoted_column(match.group(1))
    match = _QUOTED_PROJECTION.fullmatch(text)
    if match is not None:
        return exp.Alias(this=_quoted_column(match.group(1)),
                         alias=exp.Identifier(this=match.group(2).replace('""', '"'), quoted=True))
    return None


_DUCKDB = sqlglot.Dialect.get_or_raise("duckdb")
_TOKEN = sqlglot.tokens.TokenType
_PREFIX_TOKENS = {_TOKEN.NOT, _TOKEN.DASH, _TOKEN.PLUS, _TOKEN.TILDE}


def _nesting_estimate(tokens) -> int:
    """Return how deep the parser will recurse, in levels: open parentheses plus a run of prefix operators."""
    deepest = depth = run = 0
    for token in tokens:
        if token.token_type is _TOKEN.L_PAREN:
            depth += 1
        elif token.token_type is _TOKEN.R_PAREN:
            depth = max(0, depth - 1)
        run = run + 1 if token.token_type in _PREFIX_TOKENS else 0
        deepest = max(deepest, depth + run)
    return deepest


def _tree_depths(tree: exp.Expression) -> tuple[int, int, bool]:
    """Return the levels of a parsed tree (a column is 1) without and with parentheses as levels, and whether
    it holds an AND/OR; counted without recursion (the passes still recurse through parentheses)."""
    deepest = deepest_with_parentheses = 0
    connectives = False
    stack = [(tree, 1, 1)]
    while stack:
        node, depth, with_parentheses = stack.pop()
        if depth > deepest:
            deepest = depth
        if with_parentheses > deepest_with_parentheses:
            deepest_with_parentheses = with_parentheses
        if isinstance(node, exp.Connector):
            connectives = True
        step = 0 if isinstance(node, exp.Paren) else 1
        stack.extend((child, depth + step, with_parentheses + 1) for child in node.iter_expressions()
                     if not isinstance(child, (exp.Identifier, exp.DataType)))  # names and types are not levels
    return deepest, deepest_with_parentheses, connectives


def _shortened(text: Snippet) -> str:
    text = snippet_text(text)
    return text if len(text) <= 80 else f"{text[:60]} … ({len(text)} characters)"


def _check_depth(depth: int, verb: str, node: str, text: Snippet) -> None:
    if depth > MAX_EXPRESSION_DEPTH:
        raise PlanError(f"the expression nests too deeply: {depth} levels{verb}, at most {MAX_EXPRESSION_DEPTH} are "
                        "supported (split it into several projections)", node=node, column=_shortened(text))


_REQUIRED_KEYWORD = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")
_SQL_SPELLING = {
    "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "EQ": "=", "NEQ": "<>", "NullSafeEQ": "<=>",
    "Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "IntDiv": "//", "Mod": "%", "Pow": "**", "DPipe": "||",
    "And": "AND", "Or": "OR", "Xor": "XOR", "Not": "NOT", "Neg": "-", "Is": "IS", "In": "IN",
    "Like": "LIKE", "ILike": "ILIKE", "Between": "BETWEEN", "Case": "CASE", "If": "CASE WHEN",
    "BitwiseRightShift": ">>", "BitwiseLeftShift": "<<", "BitwiseAnd": "&", "BitwiseOr": "|",
    "BitwiseXor": "^", "BitwiseNot": "~", "Cast": "CAST", "TryCast": "TRY_CAST", "Extract": "EXTRACT",
    "Interval": "INTERVAL", "Alias": "AS", "Ordered": "ORDER",
}
_MISSING_PART = {
    "expression": "a right-hand operand", "this": "an operand", "high": "an upper bound (BETWEEN low AND high)",
    "low": "a lower bound", "true": "a value after THEN", "to": "a type", "alias": "a name",
}


def _parse_error_text(error: sqlglot.errors.ParseError) -> str:
    """Return what the parser expected and where, in SQL words rather than sqlglot's class names."""
    if not error.errors:
        return str(error).splitlines()[0]
    first = error.errors[0]
    description = first.get("description") or ""
    highlight = first.get("highlight") or ""
    where = f"column {first.get('col')}" + (f" of line {first['line']}" if first.get("line", 1) > 1 else "")
    after = (first.get("start_context") or "") + highlight
    if match := _REQUIRED_KEYWORD.search(description):
        keyword, name = match.groups()
        spelled = _SQL_SPELLING.get(name)
        subject = f"{spelled!r}" if spelled else f"{name.lower()}(...)"
        return f"{subject} needs {_MISSING_PART.get(keyword, keyword)} at {where}, after {after!r}"
    if description.startswith("Expecting "):
        return f"expected {description.removeprefix('Expecting ')!r} at {where}, after {after!r}"
    if "Unexpected token" in description or "Invalid expression" in description:
        return f"unexpected {highlight!r} at {where}, after {(first.get('start_context') or '')!r}"
    return f"{description} at {where}, after {after!r}"


def _unwrap(tree: exp.Expression) -> exp.Expression:
    while isinstance(tree, exp.Paren):
        tree = tree.this
    return tree


def _typed(expr: Expr, text: Snippet, node: str) -> Expr:
    """Refuse an expression whose type is still unknown (a bare NULL)."""
    if is_untyped_null(expr):
        raise PlanError("cannot infer the type of NULL; write CAST(NULL AS <type>)", node=node,
                         column=snippet_text(text))
    return expr


#: Aggregates whose argument is a boolean: an untyped NULL argument is a NULL BOOLEAN for them.
_BOOLEAN_ARGUMENTS = ("bool_and", "bool_or", "count_if")


def _stored_null(expr: Expr, function: str = "") -> Expr:
    """Return an aggregate's argument, an untyped NULL as a NULL of SQL's NULL type's storage (INTEGER), or a
    NULL BOOLEAN for an aggregate of booleans.

    Why: DuckDB aggregates a NULL of its NULL type (``max(NULL)`` is NULL, ``count(NULL)`` 0, ``sum(NULL)`` a
    NULL HUGEINT, ``bool_and(NULL)`` a NULL BOOLEAN), and a column of that type
    (:mod:`gpu_engine.plans.null_type`) reads as an untyped NULL.
    """
    if not is_untyped_null(expr):
        return expr
    return Literal(None, pa.bool_() if function in _BOOLEAN_ARGUMENTS else NULL_STORAGE)


#: Aggregates whose result is their (first) argument's type, so of SQL's NULL type over an argument of it (DuckDB:
#: ``typeof(max(x))`` is "NULL" over ``SELECT NULL AS x``; ``sum`` is HUGEINT, ``median`` DOUBLE, ``count`` BIGINT).
_NULL_TYPE_KEEPING = ("min", "max", "any_value", "first", "last", "arg_min", "arg_max", "mode", "quantile_disc")


def _keeps_null_type(function: str, argument: Expr) -> bool:
    """Return True when ``function``'s result is of SQL's NULL type: it returns its argument's type, and its
    argument (as translated, before :func:`_stored_null`) is an untyped NULL (a bare NULL or a NULL-typed column)."""
    return function in _NULL_TYPE_KEEPING and is_untyped_null(argument)


@errors_placed
def parse_expression(text: Snippet, schema: pa.Schema, node: str) -> Expr:
    """Translate a scalar SQL expression over ``schema`` into a typed expression.

    Parameters
    ----------
    text
        The snippet, e.g. ``"l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY"``, or its parsed tree.
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
    if isinstance(text, Expr):
        return _typed_snippet(text, schema, node)
    tree = _parse(text, node)
    if isinstance(tree, exp.Alias):
        raise PlanError("an alias (AS) is not allowed here", node=node, column=snippet_text(text))
    return ScalarTranslator(schema, node).translate(tree)


@errors_placed
def parse_projection(text: Snippet, schema: pa.Schema, node: str, *, position: int = 0) -> tuple[str, Expr]:
    """Translate ``"expr [AS name]"`` into its output name and typed expression.

    A bare column keeps its name; another unnamed expression is named
    ``expr_<position>``. A typed expression is named so too; ``(name, Expr)`` is named ``name``.
    A bare NULL stays an untyped NULL literal: the projection makes it a column of SQL's NULL type
    (:mod:`gpu_engine.plans.null_type`), which takes the type of what it meets later.
    """
    if isinstance(text, tuple) and len(text) == 2 and isinstance(text[1], Expr):
        name, expr = text
        if not isinstance(name, str) or not name:
            raise PlanError(f"a projection's name must be a non-empty string, got {name!r}", node=node)
        return name, _typed_snippet(expr, schema, node)
    if isinstance(text, Expr):
        name = text.name if isinstance(text, ColumnRef) else f"expr_{position}"
        return name, _typed_snippet(text, schema, node)
    tree = _parse(text, node)
    if isinstance(tree, exp.Alias):
        name, tree = tree.alias, tree.this
    else:
        name = _unwrap(tree).name if isinstance(_unwrap(tree), exp.Column) else f"expr_{position}"
    return name, ScalarTranslator(schema, node).translate(tree)


@errors_placed
def parse_aggregate(text: Snippet, schema: pa.Schema, node: str, *, position: int = 0) -> tuple[str, AggregateCall]:
    """Translate ``"function(arg) [AS name]"`` into its output name and aggregate call.

    Functions: ``count(*)``, ``count``, ``sum``, ``min``, ``max``, ``avg`` and
    the library of :mod:`gpu_engine.plans.sql_aggregates` (``stddev``,
    ``corr(x, y)``, ``arg_min(x, y)``, …); an
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
    call = normalize_aggregate_calls(_unwrap(tree))
    function = aggregate_function_name(call)
    if function is None:
        if isinstance(call, exp.Window):
            raise PlanError("window functions are not supported", node=node, column=snippet_text(text))
        nested = any(isinstance(inner, exp.AggFunc) for inner in call.walk() if inner is not call)
        if isinstance(call, exp.Func) and not nested:
            raise PlanError(f"unsupported {unsupported_aggregate_text(call, quoted=True)}", node=node,
                            column=snippet_text(text))
        if nested:
            raise PlanError(
                "an aggregate inside an expression is not supported yet; aggregate, then project",
                node=node, column=snippet_text(text))
        raise PlanError("expected an aggregate call such as 'sum(x) AS name'", node=node,
                        column=snippet_text(text))
    if function in VALUE_LIST_FUNCTIONS or function in ORDERED_PICK_FUNCTIONS:
        return name, _holistic_call(call, function, schema, node, text)
    arguments = aggregate_arguments(call)
    argument = arguments[0] if arguments else None
    distinct = isinstance(argument, exp.Distinct) or bool(call.args.get("distinct"))
    if isinstance(argument, exp.Distinct):  # two-argument aggregates: DISTINCT over the pairs (corr(DISTINCT y, x))
        if len(argument.expressions) != 1 or len(arguments) != (2 if function in TWO_ARGUMENT_FUNCTIONS else 1):
            raise PlanError(f"{function}(DISTINCT ...) takes exactly one argument", node=node,
                            column=snippet_text(text))
        argument = argument.expressions[0]
    if isinstance(argument, exp.Star):
        if function != "count" or distinct:
            raise PlanError(f"{function}(*) is not valid", node=node, column=snippet_text(text))
        return name, AggregateCall("count_star", None, pa.int64())
    wanted = 2 if function in TWO_ARGUMENT_FUNCTIONS else 1
    if argument is None or len(arguments) != wanted:
        raise PlanError(f"{function} takes exactly {'two arguments' if wanted == 2 else 'one argument'}",
                        node=node, column=snippet_text(text))
    translator = ScalarTranslator(schema, node)
    translated = translator.translate(argument)
    arg = _stored_null(translated, function)
    second = _stored_null(translator.translate(arguments[1])) if wanted == 2 else None
    if function in ("min", "max") and is_interval(arg.dtype):
        # The least/greatest INTERVAL by DuckDB's order (30-day months) is the first row in that order, NULLs
        # last: the ordered pick keeps the value's own months, days and microseconds (its state is rows).
        return name, AggregateCall("first", arg, arg.dtype, distinct, arg, descending=function == "max")
    try:
        dtype = result_type(function, arg.dtype, None if second is None else second.dtype)
    except TypeError as error:
        raise PlanError(f"type mismatch: {error}", node=node, column=snippet_text(text)) from None
    return name, AggregateCall(function, arg, dtype, distinct, second,
                               null_typed=_keeps_null_type(function, translated))


def _constant_fraction(tree: exp.Expression | None, function: str, node: str, text: str) -> float:
    """Return a quantile's fraction, a number in [-1, 1] written as a constant (negative: from the greatest value)."""
    if tree is None:
        raise PlanError(f"{function} takes a fraction: {function}(x, 0.5)", node=node, column=text)
    sign = 1.0
    while isinstance(tree, (exp.Neg, exp.Paren)):
        sign = -sign if isinstance(tree, exp.Neg) else sign
        tree = tree.this
    if isinstance(tree, exp.Array):
        raise PlanError(f"{function} over a list of fractions returns a list, which the engine's columns do not "
                        f"hold; call {function} once per fraction", node=node, column=text)
    if not (isinstance(tree, exp.Literal) and not tree.is_string):
        raise PlanError(f"{function}'s fraction must be a constant number", node=node, column=text)
    fraction = sign * float(tree.this)
    if not -1.0 <= fraction <= 1.0:
        raise PlanError(f"{function}'s fraction must be between -1 and 1, not {fraction}", node=node, column=text)
    return fraction


def _holistic_call(call: exp.Expression, function: str, schema: pa.Schema, node: str, text: str) -> AggregateCall:
    """Translate a holistic aggregate (or ``approx_count_distinct``): its argument, constant and ORDER BY key.

    ``median(x)``, ``quantile_cont(x, f)``/``quantile_disc(x, f)`` (``f`` a
    constant fraction; ``percentile_cont(f) WITHIN GROUP (ORDER BY x)`` was
    rewritten into it), ``mode(x)``, ``approx_quantile(x, f)``,
    ``approx_count_distinct(x)``, ``string_agg(x[, sep][ ORDER BY y])``
    (``sep`` a constant string, ``','`` when left out; ``x`` cast to VARCHAR)
    and ``first(x ORDER BY y)``/``last(x ORDER BY y)``; ORDER BY takes several keys (``ORDER BY a, b DESC``:
    the first in :attr:`AggregateCall.second`, the others in :attr:`AggregateCall.then_by`).
    """
    text = snippet_text(text)  # messages name the call as SQL
    argument, order = call.this, None
    if isinstance(argument, exp.Order):
        order, argument = argument.expressions, argument.this
    distinct = isinstance(argument, exp.Distinct)
    if distinct:
        if function in ORDERED_PICK_FUNCTIONS and (len(argument.expressions) != 1 or any(
                key.this != argument.expressions[0] for key in order or [])):
            raise PlanError(f"In a DISTINCT aggregate, ORDER BY expressions must appear in the argument list (as "
                            f"DuckDB binds it): write {function}(DISTINCT x ORDER BY x), or {function}(x ORDER BY y)",
                            node=node, column=text)
        # first/last(DISTINCT x ORDER BY x): the first (last) distinct value in x's order is the first (last) row's
        # x, so DISTINCT changes nothing and the call is planned as first/last(x ORDER BY x).
        if len(argument.expressions) != 1:
            raise PlanError(f"{function}(DISTINCT ...) takes exactly one argument", node=node, column=text)
        argument = argument.expressions[0]
    extra = [key for key, value in call.args.items()
             if value and key not in ("this", aggregate_parameter_key(call))]
    if argument is None or isinstance(argument, exp.Star) or extra:
        raise PlanError(f"{function} takes exactly one argument" + (" and a constant" if function not in (
            "median", "mode", "approx_count_distinct", "first", "last") else ""), node=node, column=text)
    translator = ScalarTranslator(schema, node)
    translated = translator.translate(argument)
    arg = _stored_null(translated)
    if function == "string_agg" and not is_string(arg.dtype):
        arg = _typed(translator.translate(exp.Cast(this=argument.copy(), to=exp.DataType.build("VARCHAR"))), text,
                     node)
    parameter, second, descending, nulls_first = None, None, False, False
    constant = aggregate_parameter(call)
    if function == "string_agg":
        parameter = ","
        if constant is not None:
            if isinstance(constant, exp.Null):
                parameter = None
            elif isinstance(constant, exp.Literal) and constant.is_string:
                parameter = constant.this
            else:
                raise PlanError("string_agg's separator must be a constant string", node=node, column=text)
    then_by = ()
    if function in ("string_agg",) + ORDERED_PICK_FUNCTIONS and order:
        keys = [(_typed(translator.translate(key.this), text, node), bool(key.args.get("desc")),
                 bool(key.args.get("nulls_first"))) for key in order]
        (second, descending, nulls_first), then_by = keys[0], tuple(keys[1:])
        if distinct and (second != arg or then_by):  # DuckDB's rule; PlanBuilder orders the distinct values
            raise PlanError("string_agg(DISTINCT x ... ORDER BY y) orders by the argument only (ORDER BY x)"
                            + ("" if is_string(second.dtype) else ", a string (cast x to VARCHAR first)"),
                            node=node, column=text)
    if function in ("quantile_cont", "quantile_disc", "approx_quantile"):
        parameter = _constant_fraction(constant, function, node, text)
    try:
        dtype = result_type(function, arg.dtype, None if second is None else second.dtype)
        for key, _, _ in then_by:
            result_type(function, arg.dtype, key.dtype)
    except TypeError as error:
        raise PlanError(f"type mismatch: {error}", node=node, column=text) from None
    return AggregateCall(function, arg, dtype, distinct, second, parameter, descending, nulls_first, then_by,
                         null_typed=_keeps_null_type(function, translated))


@errors_placed
def parse_column_name(text: Snippet, schema: pa.Schema, node: str, *, role: str = "key") -> str:
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
                        node=node, column=snippet_text(text))
    if tree.name not in schema.names:
        ScalarTranslator(schema, node).translate(tree)  # raises PlanError for an unknown column
    return tree.name


@errors_placed
def parse_sort_key(text: Snippet, schema: pa.Schema, node: str) -> SortKey:
    """Translate ``"name [ASC|DESC] [NULLS FIRST|LAST]"`` into a SortKey.

    The default is DuckDB's: ascending with NULLS LAST (also NULLS LAST for DESC).
    """
    ordered = _parse(text, node, into=exp.Ordered)
    if not isinstance(ordered, exp.Ordered):
        ordered = exp.Ordered(this=ordered, nulls_first=False)
    name = parse_column_name(ordered.this, schema, node, role="sort key")  # the tree: not written out and parsed again
    return SortKey(name, ascending=not ordered.args.get("desc"), nulls_first=bool(ordered.args.get("nulls_first")))

