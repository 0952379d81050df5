"""Type window function calls and read them from SQL snippets (``"rank() AS r"``, ``"sum(x) OVER (ROWS …) AS s"``).

One table of rules, shared by :meth:`PlanBuilder.window <gpu_engine.plans.plan_builder.PlanBuilder.window>`
(which parses snippets), plan validation (which checks a plan read from JSON) and the Window operator, so
they never disagree. Arguments are input columns and constants, as Velox's WindowNode takes them: the SQL
planner projects any other expression first. Types follow DuckDB: ranks and ``ntile`` are BIGINT,
``percent_rank``/``cume_dist`` DOUBLE, value functions keep their argument's type and aggregates type as
:func:`gpu_engine.plans.aggregates.result_type` says.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
from sqlglot import exp

from gpu_engine.columnar.types import is_decimal, is_floating, is_integer, is_interval
from gpu_engine.errors import PlanError
from gpu_engine.plans.aggregates import COVARIANCE_FUNCTIONS, VARIANCE_FUNCTIONS, result_type
from gpu_engine.plans.expressions import Cast, ColumnRef, Expr, Literal, UnaryOp
from gpu_engine.plans.intervals import IntervalValue, parse_interval
from gpu_engine.plans.nodes import FRAME_BOUNDS, SortKey, WindowFrame, WindowFunctionCall
from gpu_engine.plans.null_type import NULL_STORAGE, is_null_typed
from gpu_engine.plans.scalar_translation import ScalarTranslator
from gpu_engine.plans.sql_literals import negate_literal
from gpu_engine.plans.sql_translator import Snippet, _parse, errors_placed, snippet_text

__all__ = ["RANKING_FUNCTIONS", "VALUE_FUNCTIONS", "AGGREGATE_FUNCTIONS", "HOLISTIC_WINDOW_FUNCTIONS", "WINDOW_FUNCTIONS",
           "window_result_type", "check_window_call", "check_frame_order", "parse_window_function", "frame_from_spec",
           "covers_whole_partition", "keeps_null_type"]

#: Functions of a row's position in its partition; they take no frame.
RANKING_FUNCTIONS = ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile")
#: Functions returning another row's value: lag/lead take no frame, the others read it.
VALUE_FUNCTIONS = ("lag", "lead", "first_value", "last_value", "nth_value")
#: Aggregates over the frame.
AGGREGATE_FUNCTIONS = ("count_star", "count", "sum", "avg", "min", "max") + VARIANCE_FUNCTIONS + COVARIANCE_FUNCTIONS
#: Aggregates that need every value of the frame (the grouped aggregation's holistic ones): over whole partitions only.
#: (``mode`` stays GROUP BY only: DuckDB's window mode breaks ties otherwise than its grouped one, which the engine's is.)
HOLISTIC_WINDOW_FUNCTIONS = ("median", "quantile_cont", "quantile_disc", "string_agg", "mode")
WINDOW_FUNCTIONS = RANKING_FUNCTIONS + VALUE_FUNCTIONS + AGGREGATE_FUNCTIONS + HOLISTIC_WINDOW_FUNCTIONS

_SQLGLOT_FUNCTIONS = {
    exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank", exp.PercentRank: "percent_rank",
    exp.CumeDist: "cume_dist", exp.Ntile: "ntile", exp.Lag: "lag", exp.Lead: "lead", exp.FirstValue: "first_value",
    exp.LastValue: "last_value", exp.NthValue: "nth_value", exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg",
    exp.Min: "min", exp.Max: "max", exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop", exp.Variance: "var_samp", exp.VariancePop: "var_pop",
    exp.CovarSamp: "covar_samp", exp.CovarPop: "covar_pop", exp.Corr: "corr", exp.RegrSlope: "regr_slope",
    exp.RegrAvgx: "regr_avgx", exp.RegrAvgy: "regr_avgy", exp.RegrSxx: "regr_sxx", exp.RegrSyy: "regr_syy",
    exp.RegrSxy: "regr_sxy", exp.RegrIntercept: "regr_intercept", exp.RegrR2: "regr_r2", exp.RegrCount: "regr_count",
    exp.Median: "median", exp.PercentileCont: "quantile_cont", exp.PercentileDisc: "quantile_disc",
    exp.Quantile: "quantile_disc", exp.GroupConcat: "string_agg", exp.Mode: "mode",
    exp.LogicalOr: "max", exp.LogicalAnd: "min",  # bool_or / bool_and of BOOLEAN: max / min (true > false)
}
#: Argument counts: (fewest, most).
_ARITY = {"row_number": (0, 0), "rank": (0, 0), "dense_rank": (0, 0), "percent_rank": (0, 0), "cume_dist": (0, 0),
          "ntile": (1, 1), "lag": (1, 3), "lead": (1, 3), "first_value": (1, 1), "last_value": (1, 1),
          "nth_value": (2, 2), "count_star": (0, 0), "count": (1, 1), "sum": (1, 1), "avg": (1, 1), "min": (1, 1),
          "max": (1, 1), **{name: (1, 1) for name in VARIANCE_FUNCTIONS},
          **{name: (2, 2) for name in COVARIANCE_FUNCTIONS}, "median": (1, 1), "quantile_cont": (2, 2),
          "quantile_disc": (2, 2), "string_agg": (2, 2), "mode": (1, 1)}


def window_result_type(function: str, args: tuple[Expr, ...]) -> pa.DataType:
    """Return the result type of ``function`` over ``args`` (raises TypeError when it is not defined)."""
    if function in ("row_number", "rank", "dense_rank", "ntile", "count_star"):
        return pa.int64()
    if function in ("percent_rank", "cume_dist"):
        return pa.float64()
    if function in VALUE_FUNCTIONS or (function in ("min", "max") and is_interval(args[0].dtype)):
        return args[0].dtype  # min/max of an INTERVAL: of its ranks in DuckDB's order (the Window operator)
    if function in HOLISTIC_WINDOW_FUNCTIONS:
        return result_type(function, args[0].dtype)
    return result_type(function, args[0].dtype, args[1].dtype if function in COVARIANCE_FUNCTIONS else None)


def _positive_constant(arg: Expr, what: str, label: str, text: str, low: int) -> None:
    if not (isinstance(arg, Literal) and isinstance(arg.value, int) and not isinstance(arg.value, bool)
            and arg.value >= low):
        bound = "a non-negative" if low == 0 else "a positive"
        raise PlanError(f"{what} must be {bound} integer constant", node=label, column=text)


def check_window_call(call: WindowFunctionCall, schema: pa.Schema, label: str) -> None:
    """Raise PlanError unless ``call`` is a window function the Window operator computes over ``schema``."""
    text = call.sql()
    if call.function not in WINDOW_FUNCTIONS:
        raise PlanError(f"unknown window function {call.function!r}; supported: {', '.join(WINDOW_FUNCTIONS)}",
                        node=label, column=text)
    fewest, most = _ARITY[call.function]
    if not fewest <= len(call.args) <= most:
        raise PlanError(f"{call.function} takes {fewest if fewest == most else f'{fewest} to {most}'} argument(s), "
                        f"got {len(call.args)}", node=label, column=text)
    for position, arg in enumerate(call.args):
        if isinstance(arg, ColumnRef):
            if arg.name not in schema.names or schema.field(arg.name).type != arg.dtype:
                raise PlanError(f"argument {arg.sql()} is not an input column of that type; input columns: "
                                + ", ".join(schema.names), node=label, column=text)
        elif not isinstance(arg, Literal) or (position == 0 and call.function != "ntile") \
                or (position == 1 and call.function in COVARIANCE_FUNCTIONS):
            raise PlanError("a window function's value argument must be an input column (project expressions "
                            "first); the others constants", node=label, column=text)
    if call.function == "ntile":
        _positive_constant(call.args[0], "ntile's bucket count", label, text, 1)
    if call.function in ("lag", "lead") and len(call.args) > 1:
        _positive_constant(call.args[1], f"{call.function}'s offset", label, text, 0)
    if call.function in ("lag", "lead") and len(call.args) > 2 and call.args[2].value is not None \
            and call.args[2].dtype != call.args[0].dtype:
        raise PlanError(f"{call.function}'s default must have its value's type {call.args[0].dtype}, got "
                        f"{call.args[2].dtype}", node=label, column=text)
    if call.function == "nth_value":
        _positive_constant(call.args[1], "nth_value's position", label, text, 1)
    if call.function in ("quantile_cont", "quantile_disc") and not (
            isinstance(call.args[1].value, (int, float, decimal.Decimal)) and not isinstance(call.args[1].value, bool)
            and -1 <= call.args[1].value <= 1):
        raise PlanError(f"{call.function}'s fraction must be a constant between -1 and 1", node=label, column=text)
    if call.function == "string_agg" and not (call.args[1].value is None or isinstance(call.args[1].value, str)):
        raise PlanError("string_agg's separator must be a string constant", node=label, column=text)
    try:
        expected = window_result_type(call.function, call.args)
    except TypeError as error:
        raise PlanError(f"type mismatch: {error}", node=label, column=text) from None
    if call.dtype != expected:
        raise PlanError(f"{call.function} is typed {call.dtype}, but its arguments give {expected}", node=label,
                        column=text)
    if call.ignore_nulls and call.function not in VALUE_FUNCTIONS:
        raise PlanError(f"IGNORE NULLS applies to {', '.join(VALUE_FUNCTIONS)}, not {call.function}", node=label,
                        column=text)
    _check_frame(call.frame, label, text)
    if call.frame.exclude and call.function not in EXCLUDING_FUNCTIONS + RANKING_FUNCTIONS + ("lag", "lead"):
        raise PlanError(f"EXCLUDE {call.frame.exclude} over {call.function} is not supported (it is over "
                        f"{', '.join(EXCLUDING_FUNCTIONS)})", node=label, column=text)


def check_frame_order(call: WindowFunctionCall, sort_keys: tuple[SortKey, ...], schema: pa.Schema,
                      label: str) -> None:
    """Refuse a RANGE frame with an offset unless the window orders by one numeric key (the offset's unit).

    ``n PRECEDING`` in RANGE means "keys within n of this row's": one key, a number (a decimal's offset in
    its own units, ``1`` being 1.00). Functions that take no frame (ranks, lag/lead) are not checked.
    """
    frame = call.frame
    if call.function in HOLISTIC_WINDOW_FUNCTIONS and (frame.exclude or not covers_whole_partition(frame, sort_keys)):
        raise PlanError(f"{call.function} over a window is computed over whole partitions only (no ORDER BY, or a "
                        "frame from UNBOUNDED PRECEDING to UNBOUNDED FOLLOWING, no EXCLUDE); a running or sliding "
                        f"{call.function} is not supported", node=label, column=call.sql())
    if frame.kind != "RANGE" or not {frame.start, frame.end} & {"PRECEDING", "FOLLOWING"} \
            or call.function in RANKING_FUNCTIONS + ("lag", "lead"):
        return
    bounds = f"{frame.start_offset if frame.start in ('PRECEDING', 'FOLLOWING') else ''} {frame.start}".strip()
    if len(sort_keys) != 1:
        raise PlanError(f"a RANGE frame with an offset ({bounds}) needs exactly one ORDER BY key, got "
                        f"{len(sort_keys)}", node=label, column=call.sql())
    dtype = schema.field(sort_keys[0].name).type
    offsets = [offset for bound, offset in ((frame.start, frame.start_offset), (frame.end, frame.end_offset))
               if bound in ("PRECEDING", "FOLLOWING")]
    intervals = [offset for offset in offsets if isinstance(offset, IntervalValue)]
    numeric_key = is_integer(dtype) or is_floating(dtype) or is_decimal(dtype)
    if numeric_key and intervals:
        raise PlanError(f"a RANGE frame over the number {sort_keys[0].name} ({dtype}) takes numeric offsets, not "
                        f"{intervals[0].sql()}", node=label, column=call.sql())
    if pa.types.is_timestamp(dtype) and len(intervals) != len(offsets):
        raise PlanError(f"a RANGE frame over the timestamp {sort_keys[0].name} takes INTERVAL offsets "
                        "(INTERVAL 3 DAY PRECEDING)", node=label, column=call.sql())
    if pa.types.is_date32(dtype) and any(not isinstance(o, (int, IntervalValue)) for o in offsets):
        raise PlanError(f"a RANGE frame over the date {sort_keys[0].name} takes INTERVAL offsets or whole days",
                        node=label, column=call.sql())
    if not (numeric_key or pa.types.is_timestamp(dtype) or pa.types.is_date32(dtype)):
        raise PlanError(f"a RANGE frame with an offset needs a numeric, DATE or TIMESTAMP ORDER BY key; "
                        f"{sort_keys[0].name} is {dtype}", node=label, column=call.sql())


def covers_whole_partition(frame: WindowFrame, sort_keys: tuple[SortKey, ...]) -> bool:
    """Return True when every row's frame is its whole partition (a RANGE frame without ORDER BY: all peers)."""
    if frame.start == "UNBOUNDED PRECEDING" and frame.end == "UNBOUNDED FOLLOWING":
        return True
    return not sort_keys and frame.kind == "RANGE" and {frame.start, frame.end} <= {
        "UNBOUNDED PRECEDING", "CURRENT ROW", "UNBOUNDED FOLLOWING"}


def _check_frame(frame: WindowFrame, label: str, text: str) -> None:
    if not isinstance(frame, WindowFrame) or frame.kind not in ("ROWS", "RANGE", "GROUPS") \
            or frame.start not in FRAME_BOUNDS or frame.end not in FRAME_BOUNDS:
        raise PlanError(f"a frame is ROWS, RANGE or GROUPS between two of {', '.join(FRAME_BOUNDS)}", node=label,
                        column=text)
    if frame.exclude not in ("", "CURRENT ROW", "GROUP", "TIES"):
        raise PlanError(f"EXCLUDE {frame.exclude!r}: a frame excludes CURRENT ROW, GROUP, TIES or nothing", node=label,
                        column=text)
    if frame.start == "UNBOUNDED FOLLOWING" or frame.end == "UNBOUNDED PRECEDING":
        raise PlanError("a frame cannot start at UNBOUNDED FOLLOWING nor end at UNBOUNDED PRECEDING", node=label,
                        column=text)
    offsets = [(frame.start, frame.start_offset), (frame.end, frame.end_offset)]
    for bound, offset in offsets:
        if bound not in ("PRECEDING", "FOLLOWING"):
            continue
        if frame.kind == "RANGE" and _valid_range_offset(offset):
            continue
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            what = "a non-negative number or INTERVAL constant" if frame.kind == "RANGE" else \
                "a non-negative integer constant"
            raise PlanError(f"a {frame.kind} frame offset must be {what}, got {_spelled_offset(offset)}", node=label,
                            column=text)
    # DuckDB (as the SQL standard) refuses a frame starting after the current row that ends at or before it, and
    # one starting at the current row that ends before it, whatever the offsets (0 FOLLOWING too).
    if (frame.start == "FOLLOWING" and frame.end in ("PRECEDING", "CURRENT ROW")) or \
            (frame.start == "CURRENT ROW" and frame.end == "PRECEDING"):
        def spelled(bound: str, offset: int) -> str:
            return f"{_spelled_offset(offset)} {bound}" if bound in ("PRECEDING", "FOLLOWING") else bound

        raise PlanError(f"a frame starting at {spelled(frame.start, frame.start_offset)} cannot end at "
                        f"{spelled(frame.end, frame.end_offset)}", node=label, column=text)


#: The EXCLUDE clauses of a frame, as SQL spells them.
EXCLUSIONS = ("", "NO OTHERS", "CURRENT ROW", "GROUP", "TIES")
#: The window functions whose frames may exclude rows (the others are refused by name).
EXCLUDING_FUNCTIONS = ("count_star", "count", "sum", "avg", "min", "max", "first_value", "last_value", "nth_value",
                       "var_samp", "var_pop", "stddev_samp", "stddev_pop")


def _valid_range_offset(offset) -> bool:
    """Return True for a RANGE offset the Window operator reads: a non-negative int, DECIMAL or finite DOUBLE
    constant (in the ORDER BY key's units), or an INTERVAL of no negative field (over a DATE or TIMESTAMP)."""
    if isinstance(offset, IntervalValue):
        return min(offset.months, offset.days, offset.micros) >= 0
    if isinstance(offset, bool) or not isinstance(offset, (int, float, decimal.Decimal)):
        return False
    return offset >= 0 and (not isinstance(offset, float) or offset != float("inf"))


def _spelled_offset(offset) -> str:
    return offset.sql() if isinstance(offset, IntervalValue) else str(offset)


def _bound(spec: exp.WindowSpec, side: str, label: str, text: str) -> tuple[str, object]:
    """Return a frame bound and its offset: an int, a DECIMAL (``0.50``) or DOUBLE (``1e0``) constant, an INTERVAL."""
    value = spec.args.get(side)
    direction = str(spec.args.get(f"{side}_side") or "").upper()
    if isinstance(value, str):
        word = value.upper()
        return ("CURRENT ROW", 0) if word == "CURRENT ROW" else (f"{word} {direction}", 0)
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return direction, int(value.this)
    if isinstance(value, exp.Literal) and not value.is_string:
        number = value.this
        try:
            return direction, float(number) if "e" in number.lower() else decimal.Decimal(number)
        except (ValueError, decimal.InvalidOperation):
            pass
    if isinstance(value, exp.Interval) and isinstance(value.this, exp.Literal):
        unit = value.args.get("unit")
        try:
            return direction, parse_interval(f"{value.this.name} {unit.name}" if unit is not None else value.this.name)
        except ValueError as error:
            raise PlanError(f"a frame offset {value.sql()}: {error}", node=label, column=text) from None
    raise PlanError(f"a frame offset must be a non-negative integer constant, got {value.sql() if value else value!r}",
                    node=label, column=text)


def frame_from_spec(spec: exp.WindowSpec | None, label: str, text: str) -> WindowFrame:
    """Return the frame a sqlglot ``WindowSpec`` spells (SQL's default frame when there is none)."""
    if spec is None:
        return WindowFrame()
    exclude = spec.args.get("exclude")
    exclude = " ".join(exclude.name.upper().split()) if exclude is not None else ""
    if exclude not in EXCLUSIONS:
        raise PlanError(f"EXCLUDE {exclude} in a window frame is not supported (CURRENT ROW, GROUP, TIES, NO OTHERS)",
                        node=label, column=text)
    exclude = "" if exclude == "NO OTHERS" else exclude
    kind = str(spec.args.get("kind") or "").upper()
    if kind not in ("ROWS", "RANGE", "GROUPS"):
        raise PlanError(f"{kind or 'this'} window frame is not supported (ROWS, RANGE or GROUPS)", node=label,
                        column=text)
    start, start_offset = _bound(spec, "start", label, text)
    if spec.args.get("end") is None:  # ROWS n PRECEDING: up to the current row
        end, end_offset = "CURRENT ROW", 0
    else:
        end, end_offset = _bound(spec, "end", label, text)
    frame = WindowFrame(kind, start, end, start_offset, end_offset, exclude)
    _check_frame(frame, label, text)
    return frame


def _window_argument(translator: ScalarTranslator, tree: exp.Expression, schema: pa.Schema) -> Expr:
    """Translate a window function's argument; a column of SQL's NULL type stays the column it is.

    Why: the translator reads such a column as an untyped NULL (:mod:`gpu_engine.plans.null_type`), but a
    window's value argument must be an input column: ``lag(q.x)`` reads the column's INTEGER storage.
    """
    if isinstance(tree, exp.Column) and not tree.table and tree.name in schema.names \
            and is_null_typed(schema.field(tree.name)):
        return ColumnRef(tree.name, NULL_STORAGE)
    return translator.translate(tree)


#: Window functions whose result is their value argument's type, so of SQL's NULL type over a column of it (DuckDB:
#: ``typeof(max(x) OVER ())`` and ``typeof(lag(x) OVER (...))`` are "NULL" over ``SELECT NULL AS x``).
_NULL_TYPE_KEEPING = ("min", "max", "lag", "lead", "first_value", "last_value", "nth_value", "mode", "quantile_disc")


def keeps_null_type(call: WindowFunctionCall, schema: pa.Schema) -> bool:
    """Return True when ``call``'s result is of SQL's NULL type (:mod:`gpu_engine.plans.null_type`): a function
    that returns its value argument's type over a NULL-typed column of ``schema`` (``lag``/``lead`` without a
    default other than NULL), so ``coalesce(max(q.x) OVER (), t.s)`` is text, as in DuckDB."""
    if call.function not in _NULL_TYPE_KEEPING or not call.args or not isinstance(call.args[0], ColumnRef):
        return False
    name = call.args[0].name
    if name not in schema.names or not is_null_typed(schema.field(name)):
        return False
    return not (call.function in ("lag", "lead") and len(call.args) > 2 and not (
        isinstance(call.args[2], Literal) and call.args[2].value is None))


@errors_placed
def parse_window_function(text: Snippet, schema: pa.Schema, label: str, *, position: int = 0
                          ) -> tuple[str, WindowFunctionCall]:
    """Translate ``"function(args) [OVER (frame)] [AS name]"`` into its output name and typed call.

    The partition and sort keys belong to the node, so an ``OVER`` here may hold a frame only. An unnamed
    function is named ``window_<position>``.
    """
    tree = _parse(text, label)
    text = snippet_text(text)  # messages name the call as its user wrote it
    name = f"window_{position}"
    if isinstance(tree, exp.Alias):
        name, tree = tree.alias, tree.this
    frame = WindowFrame()
    if isinstance(tree, exp.Window):
        for clause, words in (("partition_by", "PARTITION BY"), ("order", "ORDER BY")):
            if tree.args.get(clause):
                raise PlanError(f"{words} inside a window function's OVER: give partition and sort keys to "
                                "window(...) itself", node=label, column=text)
        if tree.alias:
            raise PlanError("a named window (OVER name) is not supported", node=label, column=text)
        frame = frame_from_spec(tree.args.get("spec"), label, text)
        tree = tree.this
    ignore_nulls = False
    while isinstance(tree, (exp.IgnoreNulls, exp.RespectNulls)):  # RESPECT NULLS is the default
        ignore_nulls = ignore_nulls or isinstance(tree, exp.IgnoreNulls)
        tree = tree.this
    function = _SQLGLOT_FUNCTIONS.get(type(tree))
    if function is None:
        spelled = tree.name if isinstance(tree, exp.Anonymous) else tree.sql_name().lower() \
            if isinstance(tree, exp.Func) else tree.sql()
        raise PlanError(f"unsupported window function {spelled!r}; supported: "
                        + ", ".join(f for f in WINDOW_FUNCTIONS if f != "count_star"), node=label, column=text)
    argument_trees = [value for key, value in tree.args.items() if value not in (None, []) and key != "big_int"]
    if any(isinstance(a, exp.Distinct) for a in argument_trees) or tree.args.get("distinct"):
        raise PlanError(f"{function}(DISTINCT ...) over a window is not supported", node=label, column=text)
    if function == "count" and isinstance(tree.this, exp.Star):
        function, argument_trees = "count_star", []
    if function == "string_agg":  # string_agg(x[, sep]): sqlglot leaves the default separator out
        if isinstance(tree.this, exp.Order):
            raise PlanError("string_agg(... ORDER BY ...) over a window is not supported (the window's ORDER BY "
                            "orders the values)", node=label, column=text)
        argument_trees = [tree.this, tree.args.get("separator") or exp.Literal.string(",")]
    if any(isinstance(a, list) for a in argument_trees):
        raise PlanError(f"{function} takes at most {_ARITY[function][1]} argument(s)", node=label, column=text)
    translator = ScalarTranslator(schema, label)
    args = tuple(_window_argument(translator, a, schema) for a in argument_trees)
    if isinstance(tree, (exp.LogicalOr, exp.LogicalAnd)) and args and not (
            pa.types.is_boolean(args[0].dtype) or pa.types.is_null(args[0].dtype)):
        spelled = "bool_or" if isinstance(tree, exp.LogicalOr) else "bool_and"
        raise PlanError(f"{spelled}() takes a BOOLEAN, got {args[0].dtype} (as DuckDB: cast it or compare it)",
                        node=label, column=text)
    if function in ("lag", "lead") and len(args) > 1 and isinstance(args[1], Literal) \
            and isinstance(args[1].value, int) and not isinstance(args[1].value, bool) and args[1].value < 0:
        # lag(x, -n) is lead(x, n) and lead(x, -n) lag(x, n), as DuckDB reads a negative offset
        function = "lead" if function == "lag" else "lag"
        args = (args[0], Literal(-args[1].value, args[1].dtype), *args[2:])
    if function in ("lag", "lead") and len(args) == 3:  # lag(x, 1, -2.5::DOUBLE): the constant, cast first
        default = _constant_default(args[2], label, text)
        if default is not None:
            args = args[:2] + (_default_of(default, args[0].dtype, label, text),)
    call = WindowFunctionCall(function, args, pa.null(), frame)
    try:
        dtype = window_result_type(function, args) if len(args) >= _ARITY[function][0] else pa.null()
    except TypeError as error:
        raise PlanError(f"type mismatch: {error}", node=label, column=text) from None
    call = WindowFunctionCall(function, args, dtype, frame, ignore_nulls)
    check_window_call(call, schema, label)
    return name, call


def _constant_default(default: Expr, label: str, text: str) -> Literal | None:
    """Return lag/lead's default as one constant where it is a literal cast or negated (``-2.5::DOUBLE`` is
    ``-(2.5::DOUBLE)``), else None (DuckDB folds such a constant; the Window operator takes a constant)."""
    if isinstance(default, Literal):
        return default
    if isinstance(default, Cast):
        operand = _constant_default(default.operand, label, text)
        return None if operand is None else _default_of(operand, default.dtype, label, text)
    if isinstance(default, UnaryOp) and default.op == "negate":
        operand = _constant_default(default.operand, label, text)
        return None if operand is None or operand.value is None else negate_literal(operand)
    return None


def _default_of(default: Literal, dtype: pa.DataType, label: str, text: str) -> Literal:
    """Return lag/lead's constant default as a value of the argument's type (DuckDB casts it)."""
    if default.value is None:
        return Literal(None, dtype)
    numeric = is_integer(default.dtype) or is_floating(default.dtype) or is_decimal(default.dtype)
    temporal = pa.types.is_temporal(dtype)
    if numeric and temporal or pa.types.is_temporal(default.dtype) and (is_integer(dtype) or is_floating(dtype)
                                                                       or is_decimal(dtype)):
        # DuckDB has no cast between numbers and dates (Arrow's would read 3 as 3 days after the epoch)
        raise PlanError(f"the default {default.sql()} does not convert to the value's type {dtype}", node=label,
                        column=text)
    try:
        if numeric and (is_integer(dtype) or is_floating(dtype) or is_decimal(dtype)):
            value = _number_as(default, dtype)
        elif is_floating(default.dtype) and (pa.types.is_string(dtype) or pa.types.is_large_string(dtype)):
            value = _float_text(default)  # Arrow writes 0.0 as '0'; DuckDB as '0.0'
        else:
            value = pa.scalar(default.value, type=default.dtype).cast(dtype).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError, ValueError, ArithmeticError):
        raise PlanError(f"the default {default.sql()} does not convert to the value's type {dtype}", node=label,
                        column=text) from None
    return Literal(value, dtype)


def _float_text(default: Literal) -> str:
    """Return a floating constant's text as DuckDB's CAST(... AS VARCHAR) writes it: the shortest round-trip digits
    of its own width, laid out as ``CAST(column AS VARCHAR)`` does (gpu_engine.expressions.text)."""
    value = float(default.value)
    if default.dtype == pa.float32():
        value = float(str(np.float32(value)))
    return repr(value)


def _number_as(default: Literal, dtype: pa.DataType):
    """Return a numeric constant as DuckDB casts it to another numeric type: a double rounds half to even, an
    integer or decimal half away from zero; a value out of the type's range raises ValueError (Arrow's cast
    refuses any rounding, and an INTEGER into DECIMAL(9, 2) for its 10 digits)."""
    if is_floating(dtype):
        return float(default.value)
    exact = decimal.Decimal(default.value)
    if not exact.is_finite():
        raise ValueError(f"{default.value} is not a finite number")
    rounding = decimal.ROUND_HALF_EVEN if is_floating(default.dtype) else decimal.ROUND_HALF_UP
    if is_integer(dtype):
        value = int(exact.to_integral_value(rounding))
        bits = dtype.bit_width
        low, high = (0, 2 ** bits) if pa.types.is_unsigned_integer(dtype) else (-2 ** (bits - 1), 2 ** (bits - 1))
        if not low <= value < high:
            raise ValueError(f"{value} is out of {dtype}'s range")
        return value
    value = exact.quantize(decimal.Decimal(1).scaleb(-dtype.scale), rounding)
    if abs(value) >= decimal.Decimal(10) ** (dtype.precision - dtype.scale):
        raise ValueError(f"{value} does not fit {dtype}")
    return value
