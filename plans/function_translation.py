"""Translate sqlglot's scalar function calls (strings, math, dates) into typed :class:`Function` nodes.

:mod:`gpu_engine.plans.scalar_translation` looks a node's class up in its
handler table; this module adds one handler per function family to that table
(:data:`FUNCTION_HANDLERS`). Each handler translates the arguments, gives an
untyped NULL the type the function expects, converts arguments to the type
the function computes in (``concat``'s and ``||``'s to VARCHAR, ``greatest``'s
to their common type) and asks :func:`gpu_engine.plans.functions.function_type`
for the result type; a TypeError from there becomes the translator's PlanError
naming the call. Constructs DuckDB writes with other IR nodes are built as
those: ``ILIKE`` is LIKE on ``lower`` of both sides (DuckDB's definition),
``nullif`` and ``coalesce`` are CASE, ``date_part`` of year, month or day is
an :class:`Extract` (which fused kernels evaluate).
"""

from __future__ import annotations

import datetime
import functools
import math
from typing import Any, Callable

import pyarrow as pa
import sqlglot
from sqlglot import exp

from gpu_engine.columnar.types import is_decimal, is_floating, is_integer, is_interval, is_string, is_temporal, is_time
from gpu_engine.plans.expressions import BinaryOp, Case, Cast, Expr, Extract, Function, Like, Literal, UnaryOp
from gpu_engine.plans.functions import SCALAR_SUBQUERY_VALUE, constant_value, function_type, part_name
from gpu_engine.plans.sql_dialects import planned_dialect
from gpu_engine.plans.sql_literals import coerce_literal
from gpu_engine.plans.type_coercion import HUGEINT, common_type, is_castable, is_hugeint

__all__ = ["FUNCTION_HANDLERS", "REFUSED_FUNCTIONS", "TIME_UNITS", "interval_function", "date_part_expression",
           "date_arithmetic"]


def _untyped(expr: Expr) -> bool:
    return isinstance(expr, Literal) and pa.types.is_null(expr.dtype)


def _typed_null(expr: Expr, dtype: pa.DataType) -> Expr:
    return Literal(None, dtype) if _untyped(expr) else expr


def _as_type(translator: Any, expr: Expr, dtype: pa.DataType, tree: exp.Expression) -> Expr:
    """Return ``expr`` converted to ``dtype`` (a constant exactly, anything else with a Cast)."""
    if _untyped(expr) or (isinstance(expr, Literal) and expr.value is None):
        return Literal(None, dtype)
    if expr.dtype == dtype:
        return expr
    if isinstance(expr, Literal):
        converted = coerce_literal(expr, dtype)
        if converted is not None:
            return converted
    if not is_castable(expr.dtype, dtype):
        raise translator.error(f"type mismatch: cannot convert {expr.dtype} to {dtype}", tree)
    return Cast(expr, dtype)


def build_function(translator: Any, name: str, args: list[Expr], tree: exp.Expression) -> Function:
    """Return ``name(args)`` typed, or raise the translator's PlanError naming the call."""
    try:
        dtype = function_type(name, args)
    except TypeError as error:
        raise translator.error(str(error), tree) from None
    return Function(name, tuple(args), dtype)


def _translate(translator: Any, trees: list[exp.Expression | None]) -> list[Expr]:
    return [translator.translate(tree) for tree in trees if tree is not None]


def _try_cast(translator: Any, tree: exp.TryCast) -> Expr:
    """TRY_CAST(x AS type): ``try_cast(x, NULL::type)``, the target carried by a typed NULL (NULL on failure)."""
    from gpu_engine.plans.scalar_translation import sql_type

    try:
        target = sql_type(tree.to)
    except TypeError as error:
        raise translator.error(str(error), tree) from None
    operand = translator.translate(tree.this)
    if isinstance(operand, Literal) and operand.value is None:
        return Literal(None, target)
    if operand.dtype == target:
        return operand
    return build_function(translator, "try_cast", [operand, Literal(None, target)], tree)


#: Functions DuckDB's TRY refuses beside it ("TRY can not be used in combination with a volatile function").
_VOLATILE = frozenset({"random", "uuid"})


def _try(translator: Any, tree: exp.Try) -> Expr:
    """DuckDB's ``TRY(expr)``: ``expr``, NULL on each row where it raises (``try(expr)``; the evaluator computes
    it on all rows and, where that raises, on the rows apart: gpu_engine.expressions.evaluate). Volatile
    functions inside it are refused, as DuckDB's binder refuses them (aggregates too: gpu_engine.sql.refusals)."""
    from gpu_engine.plans.expressions import walk

    operand = translator.translate(tree.this)
    if any(isinstance(node, Function) and node.name in _VOLATILE for node in walk(operand)):
        raise translator.error("TRY can not be used in combination with a volatile function (random(), uuid())",
                               tree)
    if isinstance(operand, Literal):  # a constant raises nothing per row
        return operand
    return build_function(translator, "try", [operand], tree)


# -- strings ---------------------------------------------------------------------------------------
def _string_args(translator: Any, trees: list[exp.Expression | None]) -> list[Expr]:
    """Translate arguments, typing untyped NULLs as VARCHAR."""
    return [_typed_null(arg, pa.string()) for arg in _translate(translator, trees)]


def _unary_string(name: str) -> Callable:
    def handler(translator: Any, tree: exp.Expression) -> Expr:
        return build_function(translator, name, _string_args(translator, [tree.this]), tree)
    return handler


def _concat(translator: Any, tree: exp.Expression) -> Expr:
    if isinstance(tree, exp.DPipe):
        name, trees = "||", [tree.this, tree.expression]
    elif isinstance(tree, exp.ConcatWs):  # concat_ws(separator, parts...): NULL parts skipped, as DuckDB
        name, trees = "concat_ws", list(tree.expressions)
    else:  # DuckDB's concat skips NULLs (sqlglot's coalesce flag); Spark's is NULL-propagating, as || is
        name, trees = ("concat" if tree.args.get("coalesce") else "||"), list(tree.expressions)
    args = [_as_type(translator, arg, pa.string(), tree) for arg in _translate(translator, trees)]
    if name == "||" and len(args) == 1:
        args.append(Literal("", pa.string()))
    if name == "||" and len(args) > 2:  # a chain, as || nests
        return functools.reduce(lambda a, b: build_function(translator, "||", [a, b], tree), args)
    return build_function(translator, name, args, tree)


def _trim(translator: Any, tree: exp.Trim) -> Expr:
    position = (tree.args.get("position") or "BOTH").upper()
    name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
    if tree.args.get("collation") is not None:
        raise translator.error("TRIM ... COLLATE is not supported", tree)
    return build_function(translator, name, _string_args(translator, [tree.this, tree.expression]), tree)


def _replace(translator: Any, tree: exp.Replace) -> Expr:
    args = _string_args(translator, [tree.this, tree.expression, tree.args.get("replacement")])
    return build_function(translator, "replace", args, tree)


def _strpos(translator: Any, tree: exp.StrPosition) -> Expr:
    for extra in ("position", "occurrence"):
        if tree.args.get(extra) is not None:
            raise translator.error(f"strpos with a {extra} argument is not supported", tree)
    return build_function(translator, "strpos", _string_args(translator, [tree.this, tree.args.get("substr")]), tree)


def _regex(translator: Any, tree: exp.Expression) -> Expr:
    if isinstance(tree, exp.RegexpReplace):
        name = "regexp_replace"
        trees = [tree.this, tree.expression, tree.args.get("replacement"), tree.args.get("modifiers")]
        for extra in ("position", "occurrence"):
            if tree.args.get(extra) is not None:
                raise translator.error(f"regexp_replace with a {extra} argument is not supported", tree)
    else:
        name = "regexp_full_match" if isinstance(tree, exp.RegexpFullMatch) else "regexp_matches"
        trees = [tree.this, tree.expression, tree.args.get("flag") or tree.args.get("options")]
    return build_function(translator, name, _string_args(translator, trees), tree)


def _repeat(translator: Any, tree: exp.Repeat) -> Expr:
    args = _string_args(translator, [tree.this]) + _translate(translator, [tree.args.get("times")])
    return build_function(translator, "repeat", args, tree)


def _split_part(translator: Any, tree: exp.SplitPart) -> Expr:
    args = (_string_args(translator, [tree.this, tree.args.get("delimiter")])
            + _translate(translator, [tree.args.get("part_index")]))
    return build_function(translator, "split_part", args, tree)


def _left_right(translator: Any, tree: exp.Expression) -> Expr:
    name = "left" if isinstance(tree, exp.Left) else "right"
    args = _string_args(translator, [tree.this]) + _translate(translator, [tree.expression])
    return build_function(translator, name, args, tree)


def _pad(translator: Any, tree: exp.Pad) -> Expr:
    name = "lpad" if tree.args.get("is_left") else "rpad"
    if tree.args.get("fill_pattern") is None:
        raise translator.error(f"{name}() takes 3 arguments (string, length, fill)", tree)
    args = (_string_args(translator, [tree.this]) + _translate(translator, [tree.expression])
            + _string_args(translator, [tree.args["fill_pattern"]]))
    return build_function(translator, name, args, tree)


def _string_test(translator: Any, tree: exp.Expression) -> Expr:
    name = {exp.StartsWith: "starts_with", exp.EndsWith: "ends_with", exp.Contains: "contains"}[type(tree)]
    return build_function(translator, name, _string_args(translator, [tree.this, tree.expression]), tree)


def duckdb_lower(text: str) -> str:
    """Return ``text`` in lower case as DuckDB's ``lower`` (and the engine's, Arrow's utf8proc) maps it: code point
    by code point (``'İ'`` to ``'i'``, a final ``'Σ'`` to ``'σ'``), where Python's ``str.lower`` maps ``'İ'`` to
    two code points and a final sigma to ``'ς'`` (``s ILIKE '%ΑΣ'`` missed ``'ΑΣ'``: the pattern lowered by Python,
    the string by Arrow)."""
    import pyarrow.compute as pc

    return pc.utf8_lower(pa.scalar(text, pa.string())).as_py()


def _ilike(translator: Any, tree: exp.ILike, negated: bool | None = None) -> Expr:
    """``s ILIKE p`` is ``lower(s) LIKE lower(p)``, as DuckDB defines it."""
    negated = bool(tree.args.get("negate")) if negated is None else negated
    operand = _typed_null(translator.translate(tree.this), pa.string())
    pattern = translator.translate(tree.expression)
    if not isinstance(pattern, Literal):  # a column or expression: matched row by row (like_escape's path)
        return translator._like_rows("ilike_escape", operand, pattern, Literal("", pa.string()), negated, tree)
    null_pattern = isinstance(pattern, Literal) and pattern.value is None and (
        pa.types.is_null(pattern.dtype) or is_string(pattern.dtype))
    if not (isinstance(pattern, Literal) and (isinstance(pattern.value, str) or null_pattern)):
        raise translator.error("the ILIKE pattern must be a string constant", tree)
    if not is_string(operand.dtype):
        raise translator.error(f"type mismatch: ILIKE needs a string, got {operand.dtype}", tree)
    if null_pattern:  # a NULL pattern (a NULL parameter): NULL on every row, as DuckDB
        return Literal(None, pa.bool_())
    lowered = build_function(translator, "lower", [operand], tree)
    return Like(lowered, duckdb_lower(pattern.value), negated=negated)


def _like_call(translator: Any, name: str, tree: exp.Anonymous) -> Expr:
    """DuckDB's ``[not_]like_escape(s, p, e)`` / ``[not_]ilike_escape`` called by name: the ``s [NOT] [I]LIKE p
    ESCAPE e`` they are, translated as written so (the LIKE kernels for a constant pattern, the row matcher for
    a column one)."""
    if len(tree.expressions) != 3:
        raise translator.error(f"{name}() takes 3 arguments (string, pattern, escape character)", tree)
    string, pattern, escape = (argument.copy() for argument in tree.expressions)
    like = (exp.ILike if "ilike" in name else exp.Like)(this=string, expression=pattern)
    written = exp.Escape(this=like, expression=escape)
    return translator.translate(exp.Not(this=written) if name.startswith("not_") else written)


def _regexp_extract(translator: Any, tree: exp.RegexpExtract) -> Expr:
    trees = [tree.this, tree.expression, tree.args.get("group"), tree.args.get("parameters")]
    if trees[2] is None and trees[3] is not None:
        trees[2] = exp.Literal.number(0)
    args = _string_args(translator, trees[:2]) + _translate(translator, trees[2:3]) + _string_args(translator,
                                                                                                     trees[3:])
    return build_function(translator, "regexp_extract", args, tree)


def _similar_to(translator: Any, tree: exp.SimilarTo) -> Expr:
    """``s SIMILAR TO p``: DuckDB reads ``p`` as a regular expression the whole string must match."""
    args = _string_args(translator, [tree.this, tree.expression])
    return build_function(translator, "regexp_full_match", args, tree)


def _printf(translator: Any, tree: exp.Expression) -> Expr:
    """``printf(fmt, ...)`` / ``format(fmt, ...)``: each argument converted to what its specifier formats, as
    DuckDB hands it to fmt: ``%s`` takes text, booleans, dates and timestamps (as their VARCHAR); ``%f``, ``%e``
    and ``%g`` floats and decimals (as DOUBLE); ``%d`` integers; ``{}`` any of these, a float or decimal printed as
    its DOUBLE. A number under ``%s`` or a float under ``%d`` is refused, as DuckDB refuses it."""
    from gpu_engine.expressions.text_formatting import format_tokens, printf_tokens, specifier_argument

    name = "format" if isinstance(tree, exp.Format) else "printf"
    trees = [tree.this, *tree.expressions] if isinstance(tree, exp.Format) else list(tree.expressions)
    if not trees:
        raise translator.error(f"{name}() takes a format and its arguments", tree)
    fmt, *values = _translate(translator, trees)
    fmt = _typed_null(fmt, pa.string())
    specs = []
    if isinstance(fmt, Literal) and isinstance(fmt.value, str):
        try:
            tokens = printf_tokens(fmt.value) if name == "printf" else format_tokens(fmt.value)
        except TypeError as error:
            raise translator.error(str(error), tree) from None
        specs = [text for kind, text in tokens if kind == "spec"]
    converted = []
    for position, value in enumerate(values):
        if position >= len(specs):  # an argument no specifier reads: ignored, as DuckDB
            converted.append(_typed_null(value, pa.string()))
            continue
        if specs[position] == "{}" and (is_floating(value.dtype) or is_decimal(value.dtype)):
            value = _as_type(translator, value, pa.float64(), tree)  # fmt prints a float or decimal as a DOUBLE
        try:
            dtype = specifier_argument(name, specs[position], value.dtype)
        except TypeError as error:
            raise translator.error(f"{error} (argument {position + 2})", tree) from None
        converted.append(_as_type(translator, value, dtype, tree))
    return build_function(translator, name, [fmt, *converted], tree)


def _translate_characters(translator: Any, tree: exp.Translate) -> Expr:
    args = _string_args(translator, [tree.this, tree.args.get("from_"), tree.args.get("to")])
    return build_function(translator, "translate", args, tree)


def _chr(translator: Any, tree: exp.Chr) -> Expr:
    if len(tree.expressions) != 1:
        raise translator.error(f"chr() takes 1 argument (a code point), got {len(tree.expressions)}", tree)
    operand = _typed_null(translator.translate(tree.expressions[0]), pa.int32())
    return build_function(translator, "chr", [operand], tree)


def _md5(translator: Any, tree: exp.MD5) -> Expr:
    return build_function(translator, "md5", _string_args(translator, [tree.this]), tree)


# -- numbers ---------------------------------------------------------------------------------------
def _numeric_args(translator: Any, trees: list[exp.Expression | None]) -> list[Expr]:
    return [_typed_null(arg, pa.float64()) for arg in _translate(translator, trees)]


def _unary_number(name: str) -> Callable:
    def handler(translator: Any, tree: exp.Expression) -> Expr:
        extra = [key for key, value in tree.args.items() if key != "this" and value not in (None, False)]
        if extra:
            raise translator.error(f"{name}() takes one argument", tree)
        operand = translator.translate(tree.this)
        if _untyped(operand):
            operand = Literal(None, pa.int32() if name in ("abs", "sign") else pa.float64())
        return build_function(translator, name, [operand], tree)
    return handler


#: Arrow types -> the names DuckDB's typeof() gives them (decimals, timestamps and NULL apart).
_DUCKDB_TYPE_NAMES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER", pa.uint64(): "UBIGINT",
    pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.string(): "VARCHAR", pa.large_string(): "VARCHAR",
    pa.bool_(): "BOOLEAN", pa.date32(): "DATE",
}


def duckdb_type_name(dtype: pa.DataType) -> str | None:
    """Return DuckDB's name of ``dtype`` as ``typeof`` prints it (``DECIMAL(9,2)``), or None for a type it lacks."""
    from gpu_engine.columnar.types import INTERVAL

    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_null(dtype):
        return '"NULL"'
    if pa.types.is_decimal(dtype) and (dtype.precision, dtype.scale) == (38, 0):
        return "HUGEINT"  # the engine's HUGEINT (sum of integers; an explicit DECIMAL(38,0) reads the same)
    if pa.types.is_decimal(dtype):
        return f"DECIMAL({dtype.precision},{dtype.scale})"
    if pa.types.is_timestamp(dtype):  # DuckDB reads a zoned second / millisecond column as microseconds
        if dtype.tz:
            return "TIMESTAMPTZ_NS" if dtype.unit == "ns" else "TIMESTAMP WITH TIME ZONE"
        return {"s": "TIMESTAMP_S", "ms": "TIMESTAMP_MS", "ns": "TIMESTAMP_NS"}.get(dtype.unit, "TIMESTAMP")
    if dtype == INTERVAL:
        return "INTERVAL"
    if is_time(dtype):
        return "TIME"
    return _DUCKDB_TYPE_NAMES.get(dtype)


def _typeof(translator: Any, tree: exp.Typeof) -> Expr:
    """``typeof(x)``: the name of ``x``'s type (the engine types as DuckDB binds), a constant of the plan."""
    operand = translator.translate(tree.this)
    name = duckdb_type_name(operand.dtype)
    if name is None:
        raise translator.error(f"typeof: the type {operand.dtype} has no DuckDB name here", tree)
    return Literal(name, pa.string())


def _pi(translator: Any, tree: exp.Pi) -> Expr:
    return Literal(math.pi, pa.float64())


def _float_test(translator: Any, tree: exp.Expression) -> Expr:
    name = "isnan" if isinstance(tree, exp.IsNan) else "isinf"
    return build_function(translator, name, _numeric_args(translator, [tree.this]), tree)


def _round(translator: Any, tree: exp.Round) -> Expr:
    if tree.args.get("truncate") is not None:
        raise translator.error("round() with a truncate argument is not supported", tree)
    args = _numeric_args(translator, [tree.this, tree.args.get("decimals")])
    return build_function(translator, "round", args, tree)


def _power(translator: Any, tree: exp.Pow) -> Expr:
    return build_function(translator, "power", _numeric_args(translator, [tree.this, tree.expression]), tree)


def _factorial(translator: Any, tree: exp.Factorial) -> Expr:
    return build_function(translator, "factorial", [_typed_null(translator.translate(tree.this), pa.int32())], tree)


def _uuid(translator: Any, tree: exp.Uuid) -> Expr:
    """``uuid()`` / ``gen_random_uuid()``: a random UUID per row, each call its own (its ordinal, as random()'s)."""
    return build_function(translator, "uuid", [Literal(int(tree.meta.get("call", 0)), pa.int64())], tree)


def _atan2(translator: Any, tree: exp.Atan2) -> Expr:
    return build_function(translator, "atan2", _numeric_args(translator, [tree.this, tree.expression]), tree)


def _random(translator: Any, tree: exp.Rand) -> Expr:
    """``random()``: a DOUBLE drawn per row from [0, 1). The call's ordinal in the query (set when the text is
    parsed) is its argument, so two calls are two expressions (``random() - random()`` is not 0 and is not
    computed once for both) while one call read twice (an output sorted on) stays one."""
    return build_function(translator, "random", [Literal(int(tree.meta.get("call", 0)), pa.int64())], tree)


def _log(translator: Any, tree: exp.Log) -> Expr:
    # sqlglot reads log(x) as Log(this=x) and log(b, x) / log10(x) / log2(x) as Log(this=b, expression=x).
    return build_function(translator, "log", _numeric_args(translator, [tree.this, tree.expression]), tree)


def _greatest(translator: Any, tree: exp.Expression) -> Expr:
    name = "greatest" if isinstance(tree, exp.Greatest) else "least"
    trees = [tree.this, *tree.expressions]
    args = _translate(translator, trees)
    typed = [arg.dtype for arg in args if not _untyped(arg)]
    if not typed:
        return Literal(None, pa.null())
    try:
        dtype = max_type(args, integer_literals(trees, args))
    except TypeError:
        raise translator.error(f"{name}() arguments have no common type: " + ", ".join(map(str, typed)),
                               tree) from None
    args = [_as_type(translator, arg, dtype, tree) for arg in args]
    if is_string(dtype):
        return _greatest_string(name, args, dtype)
    return build_function(translator, name, args, tree)


def _greatest_string(name: str, args: list[Expr], dtype: pa.DataType) -> Expr:
    """Return ``greatest``/``least`` of strings as a CASE: the first argument that is not NULL and not below
    (above) any other that is not NULL; NULL where all are (DuckDB's: NULLs are skipped, bytes compare)."""
    order = "ge" if name == "greatest" else "le"
    whens = []
    for i, arg in enumerate(args):
        condition: Expr = UnaryOp("is_not_null", arg, pa.bool_())
        for j, other in enumerate(args):
            if j != i:
                beats = BinaryOp("or", UnaryOp("is_null", other, pa.bool_()), BinaryOp(order, arg, other, pa.bool_()),
                                 pa.bool_())
                condition = BinaryOp("and", condition, beats, pa.bool_())
        whens.append((condition, arg))
    return Case(tuple(whens), None, dtype)


def _integer_division(translator: Any, tree: exp.IntDiv) -> Expr:
    # Typed as '+' types its operands (tinyint_col // 3 is TINYINT); imported here, scalar_translation imports us.
    from gpu_engine.plans.scalar_translation import _integer_literal_as

    left, right = _translate(translator, [tree.this, tree.expression])
    left, right = _typed_null(left, right.dtype), _typed_null(right, left.dtype)
    if _untyped(left):
        return left
    left, right = (_integer_literal_as(tree.this, left, tree.expression, right),
                   _integer_literal_as(tree.expression, right, tree.this, left))
    return build_function(translator, "//", [left, right], tree)


def _nullif(translator: Any, tree: exp.Nullif) -> Expr:
    value, other = translator.translate(tree.this), translator.translate(tree.expression)
    if _untyped(value):
        return value
    condition = translator._comparison(exp.EQ(this=tree.this, expression=tree.expression))
    return Case(((condition, Literal(None, value.dtype)),), value, value.dtype)


def integer_literals(trees: list[exp.Expression | None], values: list[Expr]) -> list[bool]:
    """Return, per value, whether it is an integer written as digits (``5``, ``-(5)``): DuckDB's INTEGER_LITERAL,
    which takes another value's integer type where it fits (:func:`max_type`). ``trees``: the values' syntax,
    ``None`` ones skipped as :func:`_translate` skips them."""
    from gpu_engine.plans.scalar_translation import _is_integer_constant  # (it imports this module)

    return [_is_integer_constant(tree) and isinstance(value, Literal) and isinstance(value.value, int)
            and not isinstance(value.value, bool)
            for tree, value in zip([t for t in trees if t is not None], values)]


def _fits_integer(value: int, dtype: pa.DataType) -> bool:
    if not pa.types.is_integer(dtype):
        return False
    bits = dtype.bit_width
    if pa.types.is_signed_integer(dtype):
        return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    return 0 <= value < 2**bits


def max_type(values: list[Expr], literals: list[bool] | None = None) -> pa.DataType:
    """Return the type ``values`` share as DuckDB's binder folds them, left to right (TypeError where none).

    An integer literal (``literals[i]``) takes the type folded so far, or that of the next value, where the
    literal fits that integer type, as DuckDB's INTEGER_LITERAL does: ``coalesce(smallint_col, 1)`` and
    ``CASE ... THEN ubigint_col ELSE 300 END`` keep SMALLINT / UBIGINT, ``coalesce(tinyint_col, 300)`` is
    INTEGER, ``coalesce(1, 2, tinyint_col)`` INTEGER (two literals meet as INTEGERs). Untyped NULLs take any type.
    """
    literals = literals or [False] * len(values)
    dtype, pending = pa.null(), None  # pending: the value of a literal that alone gave ``dtype`` so far
    integral = True  # every value folded so far is an integer or a HUGEINT: a HUGEINT ``dtype`` is one
    for value, literal in zip(values, literals):
        if pa.types.is_null(value.dtype):
            continue
        huge = is_hugeint(value)
        if pa.types.is_null(dtype):
            dtype, pending = value.dtype, value.value if literal else None
        elif literal and pending is None and _fits_integer(value.value, dtype):
            continue
        elif pending is not None and not literal and _fits_integer(pending, value.dtype):
            dtype, pending = value.dtype, None
        else:
            dtype, pending = common_type(dtype, value.dtype, (integral and dtype == HUGEINT, huge)), None
        integral = integral and (huge or is_integer(value.dtype))
    return dtype


def branch_type(values: list[Expr], literals: list[bool] | None = None) -> pa.DataType:
    """Return the type CASE branches or COALESCE arguments share (TypeError where none): a string constant takes
    the other values' type, as DuckDB's string literal casts implicitly (``coalesce(d, '2000-01-01')`` is a DATE,
    ``coalesce(i, '7')`` an INTEGER); text where every value is; integer literals (``literals``, from
    :func:`integer_literals`) as :func:`max_type` folds them. One rule for the SQL path's CASE (COALESCE arrives
    there as one) and the expression path's ``coalesce``."""
    literals = literals or [False] * len(values)
    typed = [i for i, v in enumerate(values) if not (isinstance(v, Literal) and isinstance(v.value, str))]
    dtype = max_type([values[i] for i in typed], [literals[i] for i in typed])
    return functools.reduce(common_type, [v.dtype for v in values]) if pa.types.is_null(dtype) else dtype


def _coalesce(translator: Any, tree: exp.Coalesce) -> Expr:
    trees = [tree.this, *tree.expressions]
    args = _translate(translator, trees)
    typed = [arg.dtype for arg in args if not _untyped(arg)]
    if not typed:
        return Literal(None, pa.null())
    try:
        dtype = branch_type(args, integer_literals(trees, args))
    except TypeError:
        raise translator.error("coalesce() arguments have no common type: " + ", ".join(map(str, typed)),
                               tree) from None
    args = [_as_type(translator, arg, dtype, tree) for arg in args]
    whens = tuple((UnaryOp("is_not_null", arg, pa.bool_()), arg) for arg in args[:-1])
    return Case(whens, args[-1], dtype) if whens else args[-1]


# -- dates -----------------------------------------------------------------------------------------
def _part_literal(translator: Any, tree: exp.Expression | None, call: exp.Expression) -> Literal:
    """Return a date part (written as a name ``MONTH`` or a string ``'month'``) as a string constant."""
    if isinstance(tree, exp.Var):
        return Literal(tree.name.lower(), pa.string())
    value = translator.translate(tree) if tree is not None else None
    if not (isinstance(value, Literal) and isinstance(value.value, str)):
        raise translator.error("the date part must be a constant such as 'month'", call)
    return Literal(value.value.lower(), pa.string())


def date_part_expression(translator: Any, part: Literal, operand: Expr, tree: exp.Expression) -> Expr:
    """Return ``date_part(part, operand)``: an Extract for year, month and day, else a ``date_part`` call."""
    operand = _typed_null(operand, pa.date32())
    name = part_name(part.value)
    if is_interval(operand.dtype):  # an INTERVAL's fields (gpu_engine.expressions.intervals)
        return build_function(translator, "interval_part", [Literal(name or part.value, pa.string()), operand], tree)
    if name in ("year", "month", "day") and is_temporal(operand.dtype):
        return Extract(name, operand)
    return build_function(translator, "date_part", [Literal(name or part.value, pa.string()), operand], tree)


def _date_part(translator: Any, tree: exp.Expression) -> Expr:
    if isinstance(tree, exp.Anonymous):  # date_part('dow', d)
        if len(tree.expressions) != 2:
            raise translator.error(f"{tree.name.lower()}() takes 2 arguments (part, date)", tree)
        part_tree, operand_tree = tree.expressions
    else:  # quarter(d), dayofweek(d), ...
        part_tree, operand_tree = exp.Literal.string(_NAMED_PARTS[type(tree)]), tree.this
    return date_part_expression(translator, _part_literal(translator, part_tree, tree),
                                translator.date_operand(operand_tree, tree), tree)


def _date_trunc(translator: Any, tree: exp.TimestampTrunc) -> Expr:
    part = _part_literal(translator, tree.args.get("unit"), tree)
    part = Literal(part_name(part.value) or part.value, pa.string())
    operand = _typed_null(translator.date_operand(tree.this, tree), pa.date32())
    return build_function(translator, "date_trunc", [part, operand], tree)


def _date_diff(translator: Any, tree: exp.DateDiff) -> Expr:
    part = _part_literal(translator, tree.args.get("unit"), tree)
    part = Literal(part_name(part.value) or part.value, pa.string())
    # sqlglot keeps date_diff(part, start, end) as DateDiff(this=end, expression=start).
    start, end = _translate(translator, [tree.expression, tree.this])
    if _untyped(start) and _untyped(end):  # no overload to choose (DuckDB): NULL-typed columns
        start, end = (translator.date_operand(argument, tree) for argument in (tree.expression, tree.this))
    start, end = _typed_null(start, pa.date32()), _typed_null(end, pa.date32())
    return build_function(translator, "date_diff", [part, start, end], tree)


def _strftime(translator: Any, tree: exp.TimeToStr) -> Expr:
    if tree.args.get("zone") is not None or tree.args.get("culture") is not None:
        raise translator.error("strftime() with a time zone or culture is not supported", tree)
    operand = _typed_null(translator.translate(tree.this), pa.date32())
    fmt = tree.args.get("format")
    if fmt is None:
        raise translator.error("strftime() takes 2 arguments (date, format)", tree)
    return build_function(translator, "strftime", [operand, _typed_null(translator.translate(fmt), pa.string())],
                          tree)


def _time_bucket(translator: Any, tree: exp.DateBin) -> Expr:
    """DuckDB's ``time_bucket(width, t[, offset | origin])`` (sqlglot's DateBin: width, t, then ``unit``)."""
    if isinstance(tree.args.get("unit"), exp.Var):  # sqlglot reads a bare name there as a unit, not a column
        raise translator.error("time_bucket(width, t, origin): an origin column must be written with its table "
                               f"(v.{tree.args['unit'].name.lower()}) or CAST", tree)
    args = _translate(translator, [tree.this, tree.expression, tree.args.get("unit")])
    if args:
        args[0] = _typed_null(args[0], pa.month_day_nano_interval())
    return build_function(translator, "time_bucket", args, tree)


def _strptime(translator: Any, tree: exp.StrToTime) -> Expr:
    args = _string_args(translator, [tree.this, tree.args.get("format")])
    return build_function(translator, "strptime", args, tree)


def _epoch(translator: Any, tree: exp.TimeToUnix) -> Expr:
    """``epoch(t)``: the seconds since 1970, DuckDB's ``date_part('epoch', t)`` (DOUBLE)."""
    return date_part_expression(translator, Literal("epoch", pa.string()), translator.date_operand(tree.this, tree),
                                tree)


def _from_epoch(translator: Any, tree: exp.UnixToTime) -> Expr:
    """``to_timestamp(seconds)`` (no scale) and ``epoch_ms(x)`` (milliseconds), as sqlglot reads both."""
    scale = tree.args.get("scale")
    operand = translator.translate(tree.this)
    if scale is None:
        return build_function(translator, "to_timestamp", [_typed_null(operand, pa.float64())], tree)
    if scale == exp.UnixToTime.MICROS:  # make_timestamp(microseconds)
        return build_function(translator, "make_timestamp", [_typed_null(operand, pa.int64())], tree)
    if scale == exp.UnixToTime.MILLIS:
        return build_function(translator, "epoch_ms", [_typed_null(operand, pa.int64())], tree)
    raise translator.error(f"an epoch of scale {scale.sql()} is not supported (epoch_ms and to_timestamp are)", tree)


def _last_day(translator: Any, tree: exp.LastDay) -> Expr:
    operand = _typed_null(translator.translate(tree.this), pa.date32())
    return build_function(translator, "last_day", [operand], tree)


def _current_date(translator: Any, tree: exp.CurrentDate) -> Expr:
    """``current_date`` / ``today()``: read when the query runs (a plan kept for its text stays right tomorrow)."""
    return build_function(translator, "current_date", [], tree)


def _current_timestamp(translator: Any, tree: exp.Expression) -> Expr:
    """``now()`` / ``current_timestamp`` / ``get_current_timestamp()`` / ``transaction_timestamp()``: one instant
    per query run (read when it runs, never at planning)."""
    if tree.expressions if isinstance(tree, exp.Anonymous) else tree.args.get("this") is not None:
        raise translator.error(f"{_sql_of(tree)} takes no arguments", tree)
    return build_function(translator, "current_timestamp", [], tree)


def _calendar_name(translator: Any, tree: exp.Expression) -> Expr:
    operand = _typed_null(translator.translate(tree.this), pa.date32())
    return build_function(translator, "dayname" if isinstance(tree, exp.Dayname) else "monthname", [operand], tree)


def _make_date(translator: Any, tree: exp.DateFromParts) -> Expr:
    args = [_typed_null(arg, pa.int64()) for arg in _translate(
        translator, [tree.args.get("year"), tree.args.get("month"), tree.args.get("day")])]
    return build_function(translator, "make_date", args, tree)


def _make_timestamp(translator: Any, tree: exp.TimestampFromParts) -> Expr:
    parts = [tree.args.get(key) for key in ("year", "month", "day", "hour", "min", "sec")]
    if any(part is None for part in parts):
        raise translator.error("make_timestamp() takes 6 arguments (year, month, day, hour, minute, seconds) or "
                               "1 (microseconds since 1970)", tree)
    args = _translate(translator, parts)
    args = [_typed_null(arg, pa.int64()) for arg in args[:5]] + [_typed_null(args[5], pa.float64())]
    return build_function(translator, "make_timestamp", args, tree)


def _make_time(translator: Any, tree: exp.TimeFromParts) -> Expr:
    parts = [tree.args.get(key) for key in ("hour", "min", "sec")]
    if any(part is None for part in parts):
        raise translator.error("make_time() takes 3 arguments (hour, minute, seconds)", tree)
    args = _translate(translator, parts)
    args = [_typed_null(arg, pa.int64()) for arg in args[:2]] + [_typed_null(args[2], pa.float64())]
    return build_function(translator, "make_time", args, tree)


def _date_add(translator: Any, tree: exp.DateAdd) -> Expr:
    interval = tree.expression
    if not isinstance(interval, exp.Interval):
        raise translator.error("date_add() takes a date and an INTERVAL", tree)
    amount, unit = translator._interval(interval)
    return interval_function(translator, translator.date_operand(tree.this, tree), amount, unit, tree)


#: INTERVAL units of the time of day, in microseconds (DATE + INTERVAL 3 HOUR is a TIMESTAMP, never folded).
_TIME_UNIT_MICROS = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000}
TIME_UNITS = tuple(_TIME_UNIT_MICROS)


def interval_function(translator: Any, operand: Expr, amount: int, unit: str, tree: exp.Expression) -> Expr:
    """Return ``operand + INTERVAL amount unit`` for a date or timestamp (a TIMESTAMP, as DuckDB; a DATE for a
    date and whole days where the Spark dialect marked the call, see :mod:`gpu_engine.sql.spark_functions`)."""
    months = amount * {"month": 1, "year": 12}.get(unit, 0)
    days = amount * {"day": 1, "week": 7}.get(unit, 0)
    micros = amount * _TIME_UNIT_MICROS.get(unit, 0)
    operand = _typed_null(operand, pa.date32())
    constants = [Literal(months, pa.int64()), Literal(days, pa.int64()), Literal(micros, pa.int64())]
    result = build_function(translator, "add_interval", [operand, *constants], tree)
    if tree.meta.get("date_interval_is_date") and pa.types.is_date32(operand.dtype) and micros == 0:
        return Cast(result, pa.date32())  # Spark: DATE + INTERVAL of days, months or years is a DATE
    return result


def date_arithmetic(translator: Any, op: str, left: Expr, right: Expr, tree: exp.Expression) -> Expr:
    """Return DuckDB's ``DATE + INTEGER`` / ``INTEGER + DATE`` / ``DATE - INTEGER`` (a DATE) or ``DATE - DATE``
    (the days between, BIGINT); other arithmetic on a date is refused naming the operand types."""
    left_date, right_date = pa.types.is_date32(left.dtype), pa.types.is_date32(right.dtype)
    if op == "add" and (left_date and is_time(right.dtype) or right_date and is_time(left.dtype)):
        date, time = (left, right) if left_date else (right, left)  # DuckDB's DATE + TIME: a TIMESTAMP
        return build_function(translator, "date_add_time", [date, time], tree)
    if op == "sub" and left_date and right_date:
        return build_function(translator, "date_sub", [left, right], tree)
    if op == "add" and right_date and not left_date:
        left, right = right, left
    elif not (left_date and not right_date and op in ("add", "sub")):
        symbol = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}[op]
        raise translator.error(f"type mismatch: cannot apply '{symbol}' to {left.dtype} and {right.dtype}", tree)
    return build_function(translator, "date_add_days" if op == "add" else "date_sub_days", [left, right], tree)


#: DuckDB functions refused by name, with why and what to write instead.
REFUSED_FUNCTIONS = {
    "octet_length": "octet_length() takes a BLOB (DuckDB refuses a VARCHAR there; the engine has no BLOB type): "
                    "strlen(s) is a string's bytes, length(s) its characters",
    "hash": "hash() returns DuckDB's own hash values, which the engine does not reproduce; group or join on the "
            "values themselves, or take md5(CAST(x AS VARCHAR)) for a stable digest",
}


#: The call :mod:`gpu_engine.sql.spark_functions` writes for Spark's ``unix_timestamp(x[, fmt])`` (planned in the
#: Spark dialect only): its meaning depends on ``x``'s type, which the rewrite does not know.
SPARK_UNIX_TIMESTAMP = "spark_unix_timestamp"


def _spark_unix_timestamp(translator: Any, tree: exp.Anonymous) -> Expr:
    """Return Spark's ``unix_timestamp(x, fmt)``: the whole seconds since 1970 (truncated toward zero, as Spark's
    microseconds / 1000000; BIGINT) of a TIMESTAMP or DATE ``x``, or of the text ``x`` read with ``fmt``
    (``strptime``: a text that does not match raises, as Spark's ANSI mode's CANNOT_PARSE_TIMESTAMP), in the
    session zone, UTC."""
    value, fmt = tree.expressions
    operand = translator.translate(value)
    if is_string(operand.dtype) or pa.types.is_null(operand.dtype):
        operand = build_function(translator, "strptime", _string_args(translator, [value, fmt]), tree)
    elif not is_temporal(operand.dtype):
        raise translator.error(f"unix_timestamp() takes a string, date or timestamp, got {operand.dtype}", tree)
    epoch = Literal(datetime.datetime(1970, 1, 1), pa.timestamp("us"))
    micros = build_function(translator, "date_diff", [Literal("microsecond", pa.string()), epoch, operand], tree)
    return build_function(translator, "//", [micros, Literal(1_000_000, pa.int64())], tree)


def _unknown_call(translator: Any, tree: exp.Anonymous) -> Expr:
    name = tree.name.lower()
    if name in REFUSED_FUNCTIONS:
        raise translator.error(REFUSED_FUNCTIONS[name], tree)
    if name == SPARK_UNIX_TIMESTAMP and planned_dialect() == "spark" and len(tree.expressions) == 2:
        return _spark_unix_timestamp(translator, tree)
    from gpu_engine.plans.interval_translation import INTERVAL_CALLS  # (it builds on this module)

    if name in INTERVAL_CALLS:
        return INTERVAL_CALLS[name](translator, tree)
    if name in ("date_sub", "datesub"):
        if len(tree.expressions) != 3:
            raise translator.error(f"{name}() takes 3 arguments (part, start, end)", tree)
        part = _part_literal(translator, tree.expressions[0], tree)
        start, end = _translate(translator, tree.expressions[1:])
        if _untyped(start) and _untyped(end):  # as date_diff (NULL-typed columns refused)
            start, end = (translator.date_operand(argument, tree) for argument in tree.expressions[1:])
        start, end = _typed_null(start, pa.date32()), _typed_null(end, pa.date32())
        return build_function(translator, "date_sub", [Literal(part_name(part.value) or part.value, pa.string()),
                                                      start, end], tree)
    if name in ("like_escape", "not_like_escape", "ilike_escape", "not_ilike_escape"):
        return _like_call(translator, name, tree)
    if name == "printf":
        return _printf(translator, tree)
    if name == SCALAR_SUBQUERY_VALUE:  # written by the planner (gpu_engine.sql.subquery_values)
        return build_function(translator, name, _translate(translator, list(tree.expressions)), tree)
    if name == "isfinite":
        return build_function(translator, "isfinite", _numeric_args(translator, list(tree.expressions)), tree)
    if name in ("date_part", "datepart"):
        return _date_part(translator, tree)
    if name in ("gcd", "lcm", "greatest_common_divisor", "least_common_multiple"):
        args = [_typed_null(arg, pa.int64()) for arg in _translate(translator, list(tree.expressions))]
        return build_function(translator, "gcd" if name in ("gcd", "greatest_common_divisor") else "lcm", args, tree)
    if name in ("even", "gamma", "lgamma"):
        return build_function(translator, name, _numeric_args(translator, list(tree.expressions)), tree)
    if name == "setseed":
        raise translator.error("setseed(x) is not supported: random() draws per batch on each driver, so no seed "
                               "makes a query's values repeat; compute the random values outside the query and "
                               "register them", tree)
    if name == "bit_count":
        return bitwise_call(translator, name, _translate(translator, list(tree.expressions)), tree)
    if name in ("now", "get_current_timestamp", "transaction_timestamp"):
        return _current_timestamp(translator, tree)
    if name in _NAMED_PART_CALLS:  # weekday(d), millisecond(ts), ...: date_part of their field
        if len(tree.expressions) != 1:
            raise translator.error(f"{name}() takes 1 argument (a date or timestamp)", tree)
        part = _part_literal(translator, exp.Literal.string(_NAMED_PART_CALLS[name]), tree)
        return date_part_expression(translator, part, translator.translate(tree.expressions[0]), tree)
    if name in ("epoch_us", "epoch_ns"):  # microseconds (nanoseconds) since 1970 of a date or timestamp: BIGINT
        if len(tree.expressions) != 1:
            raise translator.error(f"{name}() takes 1 argument (a date or timestamp)", tree)
        operand = translator.translate(tree.expressions[0])
        if pa.types.is_timestamp(operand.dtype) and operand.dtype.unit == "ns":  # its own ticks (floored for us),
            return build_function(translator, f"{name}_of_ns", [operand], tree)  # not date_diff's rounded ones
        micros = sqlglot.parse_one("date_diff('microsecond', TIMESTAMP '1970-01-01', x)", read="duckdb")
        micros.find(exp.Column).replace(tree.expressions[0].copy())
        return translator.translate(micros if name == "epoch_us" else exp.Mul(
            this=micros, expression=exp.cast(exp.Literal.number(1000), "BIGINT")))
    if name in ("prefix", "suffix"):
        args = _string_args(translator, list(tree.expressions))
        return build_function(translator, "starts_with" if name == "prefix" else "ends_with", args, tree)
    if name in ("strlen", "strip_accents", "ord"):  # ord: DuckDB's other name of unicode
        return build_function(translator, "unicode" if name == "ord" else name,
                              _string_args(translator, list(tree.expressions)), tree)
    if name == "try_strptime":  # strptime's parse, NULL where a text does not match
        return build_function(translator, name, _string_args(translator, list(tree.expressions)), tree)
    if name in ("round_even", "roundbankers"):  # round(x, n) with halves to even
        if len(tree.expressions) != 2:
            raise translator.error(f"{name}() takes 2 arguments (a number and its decimal places), as DuckDB", tree)
        return build_function(translator, "round_even", _numeric_args(translator, list(tree.expressions)), tree)
    if name in ("log10", "log2"):
        args = _numeric_args(translator, list(tree.expressions))
        return build_function(translator, "log", [Literal(10.0 if name == "log10" else 2.0, pa.float64()), *args],
                              tree)
    raise translator.error(f"unknown function {tree.name!r}", tree)


_NAMED_PARTS = {exp.Quarter: "quarter", exp.DayOfWeek: "dayofweek", exp.DayOfYear: "dayofyear",
                exp.Week: "week", exp.WeekOfYear: "week", exp.Hour: "hour", exp.Minute: "minute",
                exp.Second: "second", exp.DayOfMonth: "day", exp.DayOfWeekIso: "isodow"}
#: DuckDB's part functions sqlglot reads as plain calls: name -> the date_part field it returns.
_NAMED_PART_CALLS = {"weekday": "dow", "yearweek": "yearweek", "isoyear": "isoyear", "millisecond": "millisecond",
                     "microsecond": "microsecond", "decade": "decade", "century": "century",
                     "millennium": "millennium", "julian": "julian", "era": "era"}

#: The arguments each handler reads, by sqlglot node class: any other argument the parser filled in is refused by
#: name (an argument the engine does not apply must never be dropped silently).
_READ = {
    exp.DPipe: {"this", "expression"}, exp.Concat: {"expressions"}, exp.ConcatWs: {"expressions"}, exp.Replace: {"this", "expression", "replacement"},
    exp.StrPosition: {"this", "substr"}, exp.Pad: {"this", "expression", "fill_pattern"},
    exp.RegexpLike: {"this", "expression", "flag"}, exp.RegexpFullMatch: {"this", "expression", "options"},
    exp.RegexpReplace: {"this", "expression", "replacement", "modifiers"}, exp.Round: {"this", "decimals"},
    exp.Greatest: {"this", "expressions"}, exp.Least: {"this", "expressions"}, exp.Coalesce: {"this", "expressions"},
    exp.TimestampTrunc: {"this", "unit"}, exp.DateDiff: {"this", "expression", "unit"},
    exp.DateFromParts: {"year", "month", "day"}, exp.TimestampFromParts: {"year", "month", "day", "hour", "min", "sec"},
    exp.TimeFromParts: {"hour", "min", "sec"}, exp.DateAdd: {"this", "expression"},
    exp.TimeToStr: {"this", "format"}, exp.Anonymous: {"this", "expressions"}, exp.TryCast: {"this", "to"},
    exp.Repeat: {"this", "times"}, exp.SplitPart: {"this", "delimiter", "part_index"},
    exp.RegexpExtract: {"this", "expression", "group", "parameters"}, exp.StrToTime: {"this", "format"},
    exp.UnixToTime: {"this", "scale"}, exp.Pi: set(), exp.Rand: set(), exp.CurrentDate: set(), exp.CurrentTimestamp: {"this"}, exp.Format: {"this", "expressions"},
    exp.Chr: {"expressions"}, exp.Translate: {"this", "from_", "to"}, exp.DateBin: {"this", "expression", "unit"},
}
_READ_ONE = {"this"}  # upper(s), abs(x), quarter(d), ...
_READ_TWO = {"this", "expression"}  # s ILIKE p, left(s, n), power(x, y), ...


def _reads_every_argument(handler: Callable[[Any, Any], Expr], two: bool = False) -> Callable[[Any, Any], Expr]:
    """Wrap ``handler`` to refuse a call with an argument it would not read (``floor(x, 2)``, a third argument)."""

    def checked(translator: Any, tree: exp.Expression, *rest: Any, **named: Any) -> Expr:
        read = _READ.get(type(tree), _READ_TWO if two else _READ_ONE)
        for key, value in tree.args.items():
            written = isinstance(value, exp.Expression) or (isinstance(value, list) and value)
            if written and key not in read:
                name = tree.name.lower() if isinstance(tree, exp.Anonymous) else tree.sql_name().lower()
                raise translator.error(f"{name}: the argument {key!r} ({_sql_of(value)}) is not supported", tree)
        return handler(translator, tree, *rest, **named)

    return checked


def _sql_of(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(item.sql(dialect="duckdb") for item in value)
    return value.sql(dialect="duckdb")


#: Handlers the scalar translator adds to its table, by sqlglot node class.
_HANDLERS: dict[type, Callable[[Any, Any], Expr]] = {
    exp.Upper: _unary_string("upper"), exp.Lower: _unary_string("lower"), exp.Length: _unary_string("length"),
    exp.DPipe: _concat, exp.Concat: _concat, exp.ConcatWs: _concat, exp.LastDay: _last_day,
    exp.Dayname: _calendar_name, exp.Monthname: _calendar_name, exp.CurrentDate: _current_date,
    exp.CurrentTimestamp: _current_timestamp,
    exp.Trim: _trim, exp.Replace: _replace, exp.StrPosition: _strpos,
    exp.Reverse: _unary_string("reverse"), exp.Repeat: _repeat, exp.SplitPart: _split_part,
    exp.Left: _left_right, exp.Right: _left_right, exp.Pad: _pad,
    exp.StartsWith: _string_test, exp.EndsWith: _string_test, exp.Contains: _string_test,
    exp.ILike: _ilike,
    exp.RegexpLike: _regex, exp.RegexpFullMatch: _regex, exp.RegexpReplace: _regex,
    exp.Abs: _unary_number("abs"), exp.Sqrt: _unary_number("sqrt"), exp.Cbrt: _unary_number("cbrt"),
    exp.Ln: _unary_number("ln"), exp.Exp: _unary_number("exp"), exp.Sign: _unary_number("sign"),
    exp.Floor: _unary_number("floor"), exp.Ceil: _unary_number("ceil"), exp.Trunc: _unary_number("trunc"),
    exp.Round: _round, exp.Pow: _power, exp.Log: _log, exp.Atan2: _atan2, exp.Rand: _random, exp.Uuid: _uuid, exp.Factorial: _factorial,
    **{kind: _unary_number(kind.__name__.lower()) for kind in (exp.Sin, exp.Cos, exp.Tan, exp.Cot, exp.Asin,
                                                               exp.Acos, exp.Atan, exp.Degrees, exp.Radians)},
    exp.Greatest: _greatest, exp.Least: _greatest,
    exp.IntDiv: _integer_division,
    exp.Nullif: _nullif, exp.Coalesce: _coalesce,
    exp.TimestampTrunc: _date_trunc, exp.DateDiff: _date_diff, exp.DateFromParts: _make_date, exp.TimestampFromParts: _make_timestamp,
    exp.TimeFromParts: _make_time,
    exp.DateAdd: _date_add, exp.TimeToStr: _strftime,
    **{kind: _date_part for kind in _NAMED_PARTS},
    exp.Anonymous: _unknown_call,
    exp.TryCast: _try_cast, exp.Try: _try,
    exp.Pi: _pi, exp.Typeof: _typeof, exp.IsNan: _float_test, exp.IsInf: _float_test,
    exp.RegexpExtract: _regexp_extract, exp.SimilarTo: _similar_to, exp.MD5: _md5,
    exp.Ascii: _unary_string("ascii"), exp.Unicode: _unary_string("unicode"),
    exp.BitLength: _unary_string("bit_length"), exp.Chr: _chr, exp.Translate: _translate_characters,
    exp.StrToTime: _strptime, exp.DateBin: _time_bucket,
    exp.TimeToUnix: _epoch, exp.UnixToTime: _from_epoch, exp.Format: _printf,
}

_TWO_ARGUMENTS = (exp.Trim, exp.Left, exp.Right, exp.StartsWith, exp.EndsWith, exp.Contains, exp.ILike, exp.Pow, exp.Log,
                  exp.Atan2,
                  exp.IntDiv, exp.Nullif, exp.SimilarTo)
FUNCTION_HANDLERS: dict[type, Callable[[Any, Any], Expr]] = {
    kind: _reads_every_argument(handler, two=kind in _TWO_ARGUMENTS) for kind, handler in _HANDLERS.items()}


def bitwise_call(translator: Any, name: str, args: list[Expr], tree: exp.Expression) -> Function:
    """Return a bit operation (``&``, ``|``, ``xor``, ``~``, ``<<``, ``>>``, ``bit_count``) over ``args``,
    typed as DuckDB types it: the operands cast to their common integer type, a bare NULL taking the other's."""
    if name in ("~", "bit_count"):
        return build_function(translator, name, [_typed_null(args[0], pa.int32())], tree)
    call = build_function(translator, name, [_typed_null(a, b.dtype if not _untyped(b) else pa.int32())
                                             for a, b in (args, args[::-1])], tree)
    return Function(name, tuple(a if a.dtype == call.dtype else _as_type(translator, a, call.dtype, tree)
                                for a in call.args), call.dtype)
