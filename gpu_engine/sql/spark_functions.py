"""Give Spark's function names Spark's meaning: rewrite the calls sqlglot reads in the Spark dialect.

Why: sqlglot parses a Spark call into a node whose meaning is DuckDB's, or
into a node the translator does not know (``dayofweek`` counts Sunday as 0 in
DuckDB and as 1 in Spark; ``date_add`` becomes a DATE + INTERVAL, a TIMESTAMP
where Spark returns a DATE; ``datediff`` has no unit; ``nvl2``, ``if``,
``isnull`` and ``pmod`` have no DuckDB node at all). :func:`spark_semantics`
rewrites such calls, before the query is qualified, into the nodes the
expression translator already types and evaluates, keeping Spark's argument
order, result types and NULL rules (Spark's non-ANSI reading, as sqlglot's:
a zero divisor of ``pmod`` is NULL, as for ``/``). Calls Spark has and the
engine cannot compute yet are refused here by the name the user wrote.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from gpu_engine.plans.function_translation import SPARK_UNIX_TIMESTAMP
from gpu_engine.sql.errors import SqlError, position_of

__all__ = ["spark_semantics"]

#: Spark's ``trunc(date, fmt)`` formats -> the date part ``date_trunc`` takes.
_TRUNC_UNITS = {"year": "YEAR", "yyyy": "YEAR", "yy": "YEAR", "quarter": "QUARTER",
                "month": "MONTH", "mm": "MONTH", "mon": "MONTH", "week": "WEEK"}

#: Spark's ``date_trunc`` formats that are not DuckDB's part names -> the part.
_DATE_TRUNC_ALIASES = {"YYYY": "YEAR", "YY": "YEAR", "MM": "MONTH", "MON": "MONTH", "DD": "DAY"}

#: The pattern sqlglot writes for Spark's default date format ``yyyy-MM-dd`` (``to_date(s, 'yyyy-MM-dd')``).
_DEFAULT_DATE_FORMAT = "%Y-%m-%d"


#: The calls Spark returns as an INT (DuckDB: BIGINT), each a sqlglot node of the Spark function: date and time
#: parts, ``length``/``char_length``, ``instr``/``locate``.
_INT_PARTS = (exp.Year, exp.Quarter, exp.Month, exp.Day, exp.DayOfYear, exp.WeekOfYear, exp.Hour, exp.Minute,
              exp.Second, exp.Length, exp.StrPosition)


def _int(tree: exp.Expression) -> exp.Expression:
    return exp.Cast(this=tree, to=exp.DataType.build("INT"))


def _error(message: str, tree: exp.Expression) -> SqlError:
    line, col = position_of(tree)
    return SqlError(message, line=line, col=col, name=tree.sql(dialect="spark")[:80])


def _as_date(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` read as a DATE as Spark's date functions read their argument (NULL for a bad string)."""
    return exp.TryCast(this=tree, to=exp.DataType.build("DATE"))


def _date(tree: exp.Expression) -> exp.Expression:
    return exp.Cast(this=tree, to=exp.DataType.build("DATE"))


def _case(condition: exp.Expression, true: exp.Expression, false: exp.Expression | None) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=condition, true=true)], default=false)


def _is_null(tree: exp.Expression) -> exp.Expression:
    return exp.Is(this=tree, expression=exp.Null())


def _format(tree: exp.Expression, what: str) -> str:
    """Return the strftime pattern sqlglot made of a Spark pattern (``yyyy-MM-dd``), which must be a constant."""
    fmt = tree.args.get("format")
    if not isinstance(fmt, exp.Literal) or not fmt.is_string:
        raise _error(f"the format of {what} must be a string constant", tree)
    pattern = fmt.this.replace("strict", "")  # sqlglot marks Spark's fixed-width letters (MM, dd) as %mstrict
    unread = sorted(set(re.findall(r"[A-Za-z]", re.sub(r"%-?[A-Za-z]", "", pattern))))
    if unread:  # a letter sqlglot has no strftime code for (SSS, Q, u, k): printed as written otherwise
        raise _error(f"{what} pattern letter(s) {', '.join(repr(c) for c in unread)} not supported (supported: "
                     "y, M, MMM, MMMM, d, D, H, h, m, s, SSSSSS, a, E, EEEE, z, Z)", tree)
    return pattern


def _pmod(call: exp.Anonymous) -> exp.Expression:
    """Return Spark's ``pmod(a, n)``: ``a % n``, plus ``n`` once more when negative; NULL for ``n = 0``."""
    if len(call.expressions) != 2:
        raise _error(f"pmod takes 2 arguments, got {len(call.expressions)}", call)
    dividend, divisor = call.expressions
    remainder = exp.Mod(this=exp.Paren(this=dividend.copy()),
                        expression=exp.Nullif(this=divisor.copy(), expression=exp.Literal.number(0)))
    wrapped = exp.Mod(this=exp.Paren(this=exp.Add(this=remainder.copy(), expression=exp.Paren(this=divisor.copy()))),
                      expression=exp.Paren(this=divisor.copy()))
    return _case(exp.LT(this=remainder.copy(), expression=exp.Literal.number(0)), wrapped, remainder)


def _anonymous(call: exp.Anonymous) -> exp.Expression:
    name = call.name.lower()
    arguments = call.expressions
    if name in ("isnull", "isnotnull"):
        if len(arguments) != 1:
            raise _error(f"{name} takes 1 argument, got {len(arguments)}", call)
        test = exp.Paren(this=_is_null(arguments[0].copy()))
        return test if name == "isnull" else exp.Not(this=test)
    if name == "pmod":
        return _pmod(call)
    if name == "make_date":
        if len(arguments) != 3:
            raise _error(f"make_date takes 3 arguments, got {len(arguments)}", call)
        year, month, day = (a.copy() for a in arguments)
        return exp.DateFromParts(year=year, month=month, day=day)
    if name == "weekday":  # Spark: 0 = Monday ... 6 = Sunday; DuckDB's dayofweek: 0 = Sunday
        if len(arguments) != 1:
            raise _error(f"weekday takes 1 argument, got {len(arguments)}", call)
        day = exp.DayOfWeek(this=_as_date(arguments[0].copy()))
        return _int(exp.Mod(this=exp.Paren(this=exp.Add(this=day, expression=exp.Literal.number(6))),
                            expression=exp.Literal.number(7)))
    return call


# Spark's months_between (DateTimeUtils.monthsBetween) over timestamps t1, t2: whole months where the days of month
# are equal or both the last; otherwise the month difference plus the difference in whole seconds over 31 days,
# rounded half up to 8 digits unless roundOff is false.
_MONTHS = "(year(t1) * 12 + month(t1)) - (year(t2) * 12 + month(t2))"
_SECONDS = ("(day(t1) - day(t2)) * 86400 + (hour(t1) * 3600 + minute(t1) * 60 + second(t1)) "
            "- (hour(t2) * 3600 + minute(t2) * 60 + second(t2))")
_MONTHS_BETWEEN = (f"CASE WHEN day(t1) = day(t2) OR (day(t1) = day(last_day(t1)) AND day(t2) = day(last_day(t2))) "
                   f"THEN CAST({_MONTHS} AS DOUBLE) ELSE {{fraction}} END")
_ROUNDED = f"floor(({_MONTHS} + ({_SECONDS}) / 2678400.0) * 100000000.0 + 0.5) / 100000000.0"
_UNROUNDED = f"{_MONTHS} + ({_SECONDS}) / 2678400.0"


def _months_between(call: exp.MonthsBetween) -> exp.Expression:
    """Return Spark's ``months_between(end, start[, roundOff])`` (a DOUBLE) over its arguments read as timestamps."""
    roundoff = call.args.get("roundoff")
    if roundoff is not None and not isinstance(roundoff, exp.Boolean):
        raise _error("the roundOff argument of months_between must be true or false", call)
    fraction = _UNROUNDED if isinstance(roundoff, exp.Boolean) and not roundoff.this else _ROUNDED
    template = sqlglot.parse_one(_MONTHS_BETWEEN.format(fraction=fraction), read="duckdb")
    moments = {"t1": call.this, "t2": call.expression}

    def timestamp(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name in moments:
            return exp.TryCast(this=moments[node.name].copy(), to=exp.DataType.build("TIMESTAMP"))
        return node
    return exp.Paren(this=template.transform(timestamp))


def _trunc(call: exp.DateTrunc) -> exp.Expression:
    """Return Spark's ``trunc(date, fmt)``: a DATE at the start of its year, quarter, month or week."""
    unit = call.args.get("unit")
    if not isinstance(unit, exp.Literal) or not unit.is_string:
        raise _error("the format of trunc must be a string constant such as 'MM' or 'year'", call)
    part = _TRUNC_UNITS.get(unit.this.lower())
    if part is None:
        raise _error(f"trunc format {unit.this!r} is not supported (supported: "
                     f"{', '.join(repr(k) for k in _TRUNC_UNITS)})", call)
    return _date(exp.TimestampTrunc(this=_as_date(call.this.copy()), unit=exp.Var(this=part)))


def _rewrite(node: exp.Expression) -> exp.Expression:
    """Return ``node`` (its children already rewritten) with Spark's meaning in nodes the translator knows."""
    if isinstance(node, exp.TsOrDsToDate):  # to_date(x[, fmt]) and the argument of year(x), dayofweek(x)...
        if node.args.get("format") is not None and _format(node, "to_date") != _DEFAULT_DATE_FORMAT:
            raise _error("to_date with a format other than 'yyyy-MM-dd' is not supported", node)
        return _as_date(node.this.copy())
    if isinstance(node, exp.BitwiseCount):  # bit_count(x): the set bits of x in its width, as DuckDB's; an INT
        return _int(exp.Anonymous(this="bit_count", expressions=[node.this.copy()]))
    if isinstance(node, (exp.BitwiseLeftShift, exp.BitwiseRightShift)):  # the engine's shifts are DuckDB's
        raise _error("shiftleft / shiftright (Java's shifts: the count taken modulo the width, overflow wrapping) "
                     "are not supported; multiply or divide by a power of 2 (x * 4, x DIV 8)", node)
    if isinstance(node, exp.DayOfWeek):  # Spark: 1 = Sunday ... 7 = Saturday
        return _int(exp.Add(this=exp.DayOfWeek(this=node.this.copy()), expression=exp.Literal.number(1)))
    if isinstance(node, exp.DayOfMonth):
        return _int(exp.Day(this=node.this.copy()))
    if type(node) in _INT_PARTS:  # year(d), month(d)...: an INT
        return _int(node.copy())
    if isinstance(node, exp.Substring) and any(node.args.get(bound) is not None and node.args[bound].find(exp.Column)
                                               for bound in ("start", "length")):
        raise _error("substr / substring with a start or length read from a column is not supported in Spark SQL "
                     "(Spark reads position 0 as 1 and a negative length as none, DuckDB's substring does not); "
                     "write constant bounds", node)
    if isinstance(node, exp.Substring) and isinstance(node.args.get("start"), exp.Literal) \
            and node.args["start"].is_int and int(node.args["start"].this) == 0:
        node.set("start", exp.Literal.number(1))  # Spark: substr(s, 0, n) starts at the first character
        return node
    if isinstance(node, exp.TsOrDsAdd):  # date_add / date_sub: a DATE, the days an integer
        unit = node.args.get("unit")
        if unit is not None and unit.name.upper() != "DAY":
            raise _error(f"date_add by {unit.name} is not supported", node)
        return exp.Add(this=_as_date(node.this.copy()), expression=exp.Paren(this=node.expression.copy()))
    if isinstance(node, exp.AddMonths):  # a DATE; the last day of a shorter month where the day does not exist
        interval = exp.Interval(this=node.expression.copy(), unit=exp.Var(this="MONTH"))
        return _date(exp.Add(this=_as_date(node.this.copy()), expression=interval))
    if isinstance(node, exp.DateDiff) and node.args.get("unit") is None:  # datediff(end, start): days, an INT
        days = exp.Sub(this=_as_date(node.this.copy()), expression=_as_date(node.expression.copy()))
        return exp.Cast(this=days, to=exp.DataType.build("INT"))
    if isinstance(node, exp.UnixToStr):  # from_unixtime(seconds[, fmt]): the seconds cast to BIGINT (truncated)
        seconds = exp.Trunc(this=exp.Paren(this=node.this.copy()))
        return exp.TimeToStr(this=exp.Cast(this=exp.UnixToTime(this=seconds), to=exp.DataType.build("TIMESTAMP")),
                             format=exp.Literal.string(_format(node, "from_unixtime")))
    if isinstance(node, exp.StrToUnix):  # unix_timestamp / to_unix_timestamp: typed by the translator
        fmt = node.args.get("format")
        fmt = exp.Literal.string(_format(node, "unix_timestamp")) if fmt is not None else exp.Literal.string(
            "%Y-%m-%d %H:%M:%S")
        return exp.Anonymous(this=SPARK_UNIX_TIMESTAMP, expressions=[node.this.copy(), fmt])
    if isinstance(node, exp.TimeToStr):  # date_format(x, 'yyyy-MM-dd')
        value = node.this.this if isinstance(node.this, exp.TimeStrToTime) else node.this
        timestamp = exp.TryCast(this=value.copy(), to=exp.DataType.build("TIMESTAMP"))
        return exp.TimeToStr(this=timestamp, format=exp.Literal.string(_format(node, "date_format")))
    if isinstance(node, exp.TimestampTrunc) and isinstance(node.args.get("unit"), exp.Var) \
            and node.args["unit"].name.upper() in _DATE_TRUNC_ALIASES:  # date_trunc('MM', ts)
        node.set("unit", exp.Var(this=_DATE_TRUNC_ALIASES[node.args["unit"].name.upper()]))
        return node
    if isinstance(node, exp.Chr) and len(node.expressions) == 1:  # Spark's chr: the character of n % 256, '' if n < 0
        code = node.expressions[0]
        byte = exp.Cast(this=exp.Mod(this=exp.Paren(this=code.copy()), expression=exp.Literal.number(256)),
                        to=exp.DataType.build("INT"))
        negative = exp.LT(this=code.copy(), expression=exp.Literal.number(0))
        return exp.Case(ifs=[exp.If(this=negative, true=exp.Literal.string(""))], default=exp.Chr(expressions=[byte]))
    if isinstance(node, exp.Anonymous) and node.name.lower() == "octet_length":  # a string's bytes, an INT
        return exp.Cast(this=exp.Anonymous(this="strlen", expressions=[e.copy() for e in node.expressions]),
                        to=exp.DataType.build("INT"))
    if isinstance(node, exp.BitLength):  # an INT in Spark
        return exp.Cast(this=exp.BitLength(this=node.this.copy()), to=exp.DataType.build("INT"))
    if isinstance(node, exp.Initcap):  # sqlglot writes it with lists and lambdas, which the engine has not
        raise _error("initcap is not supported", node)
    if isinstance(node, exp.Format):  # format_string/printf: Java's Formatter (its %g and rounding are not C's)
        raise _error("format_string is not supported (Java's Formatter); build the text with CAST, round and ||",
                     node)
    if isinstance(node, exp.DateTrunc):  # only trunc(date, fmt) reads as DateTrunc; date_trunc is TimestampTrunc
        return _trunc(node)
    if isinstance(node, exp.Nanvl):  # nanvl(a, b): b where a is NaN; NaN orders above +Infinity (DuckDB's order)
        infinity = exp.Cast(this=exp.Literal.string("Infinity"), to=exp.DataType.build("DOUBLE"))
        return _case(exp.GT(this=node.this.copy(), expression=infinity), node.expression.copy(), node.this.copy())
    if isinstance(node, exp.MonthsBetween):
        return _months_between(node)
    if isinstance(node, exp.Nvl2):
        return _case(exp.Not(this=exp.Paren(this=_is_null(node.this.copy()))), node.args["true"].copy(),
                     node.args["false"].copy() if node.args.get("false") is not None else None)
    if isinstance(node, exp.If) and not isinstance(node.parent, exp.Case):  # if(cond, a, b)
        return _case(node.this.copy(), node.args["true"].copy(),
                     node.args["false"].copy() if node.args.get("false") is not None else None)
    if isinstance(node, exp.DataType) and node.this in (exp.DataType.Type.TIMESTAMPTZ,
                                                        exp.DataType.Type.TIMESTAMPLTZ,
                                                        exp.DataType.Type.TIMESTAMPNTZ):
        # Spark's TIMESTAMP is an instant shown in the session time zone: the engine's session zone is UTC,
        # where it reads as a TIMESTAMP without zone.
        return exp.DataType.build("TIMESTAMP")
    if isinstance(node, exp.ApproxQuantile) and node.args.get("accuracy") is not None:
        # percentile_approx(x, q, accuracy): the engine's answer is exact (a value of x at q's rank), within
        # every accuracy bound, so the accuracy is read and met, not dropped unmet.
        node.set("accuracy", None)
        return node
    if isinstance(node, (exp.ArrayAgg, exp.ArrayUniqueAgg)):
        name = "collect_set" if isinstance(node, exp.ArrayUniqueAgg) else "collect_list / array_agg"
        raise _error(f"aggregate function {name} is not supported: it returns a list (ARRAY), which the "
                     "engine's columns do not hold", node)
    if isinstance(node, (exp.Add, exp.Sub)) and (isinstance(node.this, exp.Interval)
                                                 or isinstance(node.expression, exp.Interval)):
        node.meta["date_interval_is_date"] = True  # the translator, which knows the types, keeps a DATE a DATE
        return node
    if isinstance(node, (exp.First, exp.Last)) and _over(node):  # Spark's first/last over a window
        value = exp.FirstValue if isinstance(node, exp.First) else exp.LastValue
        return value(this=node.this.copy())
    if isinstance(node, exp.Anonymous):
        return _anonymous(node)
    return node


def _over(node: exp.Expression) -> bool:
    """Return True when ``node`` is the function of a window (``first(x, true) OVER (...)``)."""
    parent = node.parent
    if isinstance(parent, exp.IgnoreNulls):
        parent = parent.parent
    return isinstance(parent, exp.Window) and (parent.this is node or parent.this.this is node)


def spark_semantics(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` (read in the Spark dialect) with Spark's functions rewritten in place, innermost first.

    Raises
    ------
    SqlError
        For a Spark function (or a form of one) the engine does not compute, named as written.
    """
    for node in reversed(list(tree.walk(bfs=False))):  # children before their parents
        replaced = _rewrite(node)
        if replaced is not node:
            if node is tree:
                tree = replaced
            else:
                node.replace(replaced)
    return tree
