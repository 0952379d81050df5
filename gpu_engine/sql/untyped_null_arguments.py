"""Refuse a date function called on a bare NULL, as DuckDB's binder does, instead of answering NULL.

Why: ``extract(year FROM NULL)``, ``year(NULL)``, ``date_trunc('month', NULL)`` and ``NULL + INTERVAL 1 DAY``
(``date_add(NULL, INTERVAL 1 DAY)``) have a date and a timestamp (and an interval) overload, and DuckDB refuses
to choose one ("Could not choose a best candidate function ... please add explicit type casts"); the engine
typed the NULL as a DATE and answered NULL, for a query DuckDB does not run (the breadth fuzz's one answer
where DuckDB raised). A typed NULL (``CAST(NULL AS DATE)``, ``NULL::TIMESTAMP``) is an argument like any
other, and so is a NULL beside a typed argument (``date_diff('day', NULL, d)``: DuckDB answers NULL).

Checked on the query as written (:func:`~gpu_engine.sql.refusals.refuse_unsupported`), DuckDB's dialect only
(Spark casts a NULL to the function's type): the planner's own rewrites write such calls for a correlated
subquery's empty group (``year(max(d))`` over no rows is ``year(NULL)``), which must stay NULL.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of

__all__ = ["refuse_untyped_null_argument"]

#: One-argument date functions (their argument is ``this``) with a DATE and a TIMESTAMP overload in DuckDB.
_ONE_ARGUMENT = tuple(getattr(exp, name) for name in (
    "Year", "Month", "Day", "DayOfMonth", "Quarter", "DayOfWeek", "DayOfWeekIso", "DayOfYear", "Week", "WeekOfYear",
    "YearOfWeek", "Hour", "Minute", "Second", "TimeToUnix", "TimestampTrunc", "DateTrunc") if hasattr(exp, name))

#: Calls sqlglot leaves by name: the arguments that are dates, all of which NULL makes the call ambiguous.
_NAMED = {"date_part": (1,), "datepart": (1,), "date_sub": (1, 2), "datesub": (1, 2)}


def _untyped_null(node: exp.Expression | None) -> bool:
    """Return True for a NULL whose type nothing decides: ``NULL``, ``(NULL)``, a CASE or COALESCE of only such."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Null):
        return True
    if isinstance(node, exp.Case):
        results = [branch.args.get("true") for branch in node.args.get("ifs") or []] + [node.args.get("default")]
        return all(result is None or _untyped_null(result) for result in results)
    if isinstance(node, exp.Coalesce):
        return all(_untyped_null(argument) for argument in [node.this, *node.expressions])
    return False


def _ambiguous_arguments(node: exp.Expression) -> list[exp.Expression] | None:
    """Return the date arguments of a date function call when all are untyped NULLs, else None."""
    if isinstance(node, exp.Extract):
        dates = [node.expression]
    elif isinstance(node, _ONE_ARGUMENT):
        dates = [node.this]
    elif isinstance(node, exp.DateDiff):
        dates = [node.this, node.expression]
    elif isinstance(node, exp.Anonymous) and str(node.this).lower() in _NAMED:
        positions = _NAMED[str(node.this).lower()]
        if len(node.expressions) <= max(positions):
            return None  # the translation names the arity
        dates = [node.expressions[p] for p in positions]
    elif isinstance(node, (exp.Add, exp.Sub, exp.DateAdd)) and any(isinstance(side, exp.Interval)
                                                                  for side in (node.this, node.expression)):
        dates = [side for side in (node.this, node.expression) if not isinstance(side, exp.Interval)]
    else:
        return None
    return dates if dates and all(_untyped_null(date) for date in dates) else None


def refuse_untyped_null_argument(node: exp.Expression, dialect: str) -> None:
    """Raise a :class:`SqlError` when ``node`` calls a date function on untyped NULLs only (DuckDB's dialect)."""
    if dialect != "duckdb" or _ambiguous_arguments(node) is None:
        return
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
    elif isinstance(node, (exp.Add, exp.Sub)):
        name = "+" if isinstance(node, exp.Add) else "-"
    elif isinstance(node, exp.DateAdd):
        name = "date_add"
    else:
        name = node.sql(dialect="duckdb").split("(", 1)[0].lower()
    text = node.sql(dialect="duckdb")
    text = text if len(text) <= 60 else text[:57] + "..."
    line, col = position_of(node)
    raise SqlError(f"could not choose a best candidate function for {text}: a NULL argument has no type (a date, "
                   f"a timestamp?); add an explicit type cast such as CAST(NULL AS DATE)", line=line, col=col,
                   name=name)
