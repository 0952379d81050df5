"""Run the SET / RESET statements a Session accepts: the session time zone, which is UTC (issue 30 item 6).

A DuckDB user's script often starts ``SET TimeZone = 'UTC'`` so TIMESTAMPTZ values read the same on every
machine; the engine reads TIMESTAMPTZ in UTC always (:mod:`gpu_engine.expressions.date_functions`), so that
statement (``SET [SESSION|GLOBAL|LOCAL] TimeZone = 'UTC'`` / ``TO 'UTC'``, the zone name case-insensitive as
DuckDB's) and ``RESET TimeZone`` change nothing and return DuckDB's result for a SET: no rows, one BOOLEAN
column ``Success``. Why not every zone: the zone would have to reach each TIMESTAMPTZ read (casts to TIMESTAMP,
DATE and VARCHAR, ``extract``, ``date_trunc``, ``strftime``, literals without an offset) and the plan cache's key;
a SET to another zone, or of another setting, is refused by name while planning (:class:`SqlError` with the
statement's position and what runs instead) rather than answered in the wrong zone.
"""

from __future__ import annotations

import re

import pyarrow as pa
from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of

__all__ = ["is_setting_statement", "run_setting_statement"]

#: A text whose first word (after blanks and comments) is SET or RESET: a statement, not a query.
_STATEMENT = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*(set|reset)\b", re.IGNORECASE | re.DOTALL)
#: RESET <name> (sqlglot parses RESET as a Command holding the rest of the text).
_RESET = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9.]*)\s*;?\s*$")
#: The one zone the engine reads TIMESTAMPTZ in.
SESSION_ZONE = "UTC"


def is_setting_statement(text: str) -> bool:
    """Return True when ``text`` starts with SET or RESET (checked without parsing, so queries pay nothing)."""
    return isinstance(text, str) and _STATEMENT.match(text) is not None


def _error(message: str, node: exp.Expression | None, name: str | None) -> SqlError:
    line, col = position_of(node)
    return SqlError(message, line=line, col=col, name=name)


def _success() -> pa.Table:
    return pa.table({"Success": pa.array([], pa.bool_())})


def _refuse_setting(name: str, node: exp.Expression | None) -> SqlError:
    return _error(f"unsupported setting: SET {name}; the engine accepts SET TimeZone = '{SESSION_ZONE}' (its "
                  "session zone) and RESET TimeZone; Session and device options are arguments of Session(...)",
                  node, name)


def run_setting_statement(text: str, dialect: str) -> pa.Table:
    """Run the SET or RESET statement ``text`` and return DuckDB's result for it (an empty ``Success`` column)."""
    from gpu_engine.sql.rewrite import parse_one_statement

    tree = parse_one_statement(text, dialect)
    if isinstance(tree, exp.Command):  # RESET name
        kind = str(tree.this).upper()
        rest = tree.expression.name if isinstance(tree.expression, exp.Literal) else str(tree.expression or "")
        match = _RESET.match(rest)
        if kind == "RESET" and match and match.group(1).lower() == "timezone":
            return _success()
        if kind == "RESET":
            raise _error(f"unsupported statement: RESET {rest.strip()}; the engine resets TimeZone only",
                         tree, rest.strip() or "RESET")
        raise _error(f"unsupported statement: {kind}", tree, kind)
    if not isinstance(tree, exp.Set) or tree.args.get("unset") or not tree.expressions:
        raise _error("unsupported SET statement; the engine accepts SET TimeZone = 'UTC'", tree, "SET")
    for item in tree.expressions:
        assignment = item.this if isinstance(item, exp.SetItem) else None
        if not isinstance(assignment, exp.EQ) or not isinstance(assignment.this, exp.Column):
            raise _error(f"unsupported SET statement: {item.sql(dialect=dialect)}; the engine accepts "
                         f"SET TimeZone = '{SESSION_ZONE}'", item, "SET")
        name = assignment.this.sql(dialect=dialect)
        if name.lower() != "timezone":
            raise _refuse_setting(name, item)
        value = assignment.expression
        zone = value.name if isinstance(value, (exp.Literal, exp.Var, exp.Identifier)) else None
        if zone is None or zone.upper() != SESSION_ZONE:
            shown = value.sql(dialect=dialect)
            raise _error(f"unsupported time zone: SET TimeZone = {shown}; the engine reads TIMESTAMP WITH TIME "
                         f"ZONE in {SESSION_ZONE} only (SET TimeZone = '{SESSION_ZONE}' is accepted); for another "
                         "zone's wall time add its offset as an INTERVAL to the TIMESTAMPTZ cast to TIMESTAMP",
                         value, zone or shown)
    return _success()
