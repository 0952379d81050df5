"""Refuse DuckDB aggregates the engine does not compute by name, with the nearest one it does.

Why: sqlglot knows none of these names, so it parses them as plain function calls; in a grouped query the
planner then met their column argument first and refused it as "column t.v is not available here (in an
aggregate query, columns must be grouped or aggregated)", which points at the column, not the function.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of

__all__ = ["refuse_unknown_aggregate"]

#: DuckDB aggregates sqlglot parses as anonymous calls -> what the engine offers instead.
_ALTERNATIVES = {
    "fsum": "sum (without Kahan compensation)", "sumkahan": "sum (without Kahan compensation)",
    "kahan_sum": "sum (without Kahan compensation)", "favg": "avg (without Kahan compensation)",
    "geomean": "exp(avg(ln(x)))", "geometric_mean": "exp(avg(ln(x)))", "entropy": "count per value, then sums",
    "kurtosis_pop": "the moments of stddev_pop", "mad": "median(abs(x - median))",
    "reservoir_quantile": "quantile_disc or approx_quantile", "arg_min_null": "arg_min (rows with NULLs skipped)",
    "arg_max_null": "arg_max (rows with NULLs skipped)", "weighted_avg": "sum(x * w) / sum(w)",
    "bitstring_agg": "bit_or",
}


def refuse_unknown_aggregate(node: exp.Expression) -> None:
    """Raise a :class:`SqlError` when ``node`` calls a DuckDB aggregate the engine does not compute."""
    if not isinstance(node, exp.Anonymous):
        return
    name = str(node.this).lower()
    alternative = _ALTERNATIVES.get(name)
    if alternative is not None:
        line, col = position_of(node)
        raise SqlError(f"unsupported SQL: aggregate function {name} is not supported; use {alternative}",
                       line=line, col=col, name=name)
