"""Plan ``LEFT JOIN [LATERAL] generate_series(...) g ON true`` (or ``unnest(string_split(t.s, ','))``) over earlier
FROM items as an outer Unnest (issue 30).

DuckDB's way to keep every row of ``t`` beside its own series, ``FROM t LEFT JOIN LATERAL generate_series(1, t.n)
g(x) ON true``, gives a row whose series is empty or has a NULL argument once, with ``x`` NULL. The inner forms
(``FROM t, generate_series(1, t.n)``, ``JOIN ... ON true``) are planned by :mod:`gpu_engine.sql.series_sources` as
an Unnest over the items the series reads; the LEFT form is that Unnest with ``outer`` set (the row kept with a NULL
element; a split list's NULL text likewise gives one NULL piece), so here the join becomes the comma join with
the series marked (``SPLIT_OUTER``), and ``[LEFT|INNER]
JOIN LATERAL <series>`` / ``, LATERAL <series>`` lose their LATERAL keyword (a table function reads the items
before it anyway). Refused by name: a LEFT join of a series on another condition (which keeps the rows meeting none
of its elements: not an outer Unnest), RIGHT/FULL joins of a correlated series.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.series_sources import SPLIT_LIST, SPLIT_OUTER

__all__ = ["with_lateral_series_joined"]


def _series(item: exp.Expression) -> exp.Expression | None:
    """Return the series ``item`` (a Table or a LATERAL over ``generate_series``/``range``, or the split list
    :mod:`~gpu_engine.sql.unnest_selects` made of ``unnest(string_split(...))``) reads, if any."""
    if isinstance(item, (exp.Table, exp.Lateral)) and isinstance(item.this, exp.GenerateSeries):
        return item.this
    if isinstance(item, exp.Table) and isinstance(item.this, exp.Split) and item.meta.get(SPLIT_LIST):
        return item.this
    return None


def _error(message: str, node: exp.Expression) -> SqlError:
    line, col = position_of(node)
    return SqlError(f"unsupported SQL: {message}; write the series beside its table (FROM t, generate_series(1, t.n) "
                    "g(x)) and the condition in WHERE, or LEFT JOIN LATERAL generate_series(...) g(x) ON true",
                    line=line, col=col, name="LATERAL")


def with_lateral_series_joined(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` with each joined series that reads earlier FROM items' columns a comma join (LEFT ... ON
    true: marked outer), and ``LATERAL <series>`` a plain table function, in place."""
    for join in list(tree.find_all(exp.Join)):
        call = _series(join.this)
        if call is None:
            continue
        correlated = call.find(exp.Column) is not None
        side = (join.args.get("side") or "").upper()
        on = join.args.get("on")
        if isinstance(join.this, exp.Lateral):
            join.set("this", exp.Table(this=call.copy(), alias=join.this.args.get("alias")))
            call = join.this.this
        if not correlated or not side:
            continue
        if side != "LEFT":
            raise _error(f"{side} JOIN of a table function reading another FROM item's columns", join.this)
        if on is not None and not (isinstance(on, exp.Boolean) and on.this):
            raise _error("LEFT JOIN of a table function reading another FROM item's columns ON a condition other "
                         "than true", on)
        if join.args.get("using"):
            raise _error("LEFT JOIN ... USING of a table function reading another FROM item's columns", join.this)
        call.meta[SPLIT_OUTER] = True
        join.set("side", None)
        join.set("on", None)
        join.set("kind", None)
    return tree
