"""TPC-H query plans built with PlanBuilder, and the official SQL of each for DuckDB comparisons.

``query(number, catalog)`` returns the engine's plan of TPC-H query ``number``;
``sql(number)`` returns the reference SQL text (the TPC-H specification's query
with its standard substitution parameters, in DuckDB's dialect) that DuckDB runs
on the same Parquet files. Each query is one module, ``qNN.py``, holding ``SQL``
and ``plan(catalog)``; adding a query means adding its module and one line to
``_QUERY_MODULES``.

The primer query, ``SELECT l_partkey, count(*) AS count FROM lineitem GROUP BY
l_partkey ORDER BY l_partkey``, is a one-aggregation warm-up: :func:`primer_query` and
:data:`PRIMER_SQL`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Mapping

import pyarrow as pa

from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.tpch import (
    primer, q01, q02, q03, q04, q05, q06, q07, q08, q09, q10, q11,
    q12, q13, q14, q15, q16, q17, q18, q19, q20, q21, q22,
)

__all__ = ["query", "sql", "spec_sql", "SPEC_TEXT_DIFFERENCES", "available_queries", "primer_query", "PRIMER_SQL",
           "TPCH_QUERY_NUMBERS"]

TPCH_QUERY_NUMBERS = range(1, 23)

PRIMER_SQL = primer.SQL

_QUERY_MODULES: dict[int, ModuleType] = {
    1: q01,
    2: q02,
    3: q03,
    4: q04,
    5: q05,
    6: q06,
    7: q07,
    8: q08,
    9: q09,
    10: q10,
    11: q11,
    12: q12,
    13: q13,
    14: q14,
    15: q15,
    16: q16,
    17: q17,
    18: q18,
    19: q19,
    20: q20,
    21: q21,
    22: q22,
}


def available_queries() -> tuple[int, ...]:
    """Return the TPC-H query numbers that have an engine plan, ascending."""
    return tuple(sorted(_QUERY_MODULES))


def _module(number: int) -> ModuleType:
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"a TPC-H query number is an int from 1 to 22, got {number!r}")
    if number not in TPCH_QUERY_NUMBERS:
        raise ValueError(f"TPC-H has queries 1 to 22; there is no query {number}")
    return _QUERY_MODULES[number]


def query(number: int, catalog: Mapping[str, pa.Schema], sf: float = 1) -> PlanNode:
    """Return the plan of TPC-H query ``number`` over the tables in ``catalog`` at scale factor ``sf``.

    ``sf`` matters where the specification's substitution parameters depend
    on it (Q11's FRACTION = 0.0001 / SF); other queries ignore it.

    Raises
    ------
    ValueError
        For a number outside 1..22.
    """
    module = _module(number)
    if getattr(module, "DEPENDS_ON_SCALE_FACTOR", False):
        return module.plan(catalog, sf=sf)
    return module.plan(catalog)


def sql(number: int, sf: float = 1) -> str:
    """Return the official SQL of TPC-H query ``number`` (DuckDB dialect, standard parameters at scale factor ``sf``)."""
    module = _module(number)
    if getattr(module, "DEPENDS_ON_SCALE_FACTOR", False):
        return module.sql(sf)
    return module.SQL


#: Where the DuckDB text of :func:`sql` differs from the specification's: (query, DuckDB's text, the specification's).
SPEC_TEXT_DIFFERENCES = (
    (7, "BETWEEN CAST('1995-01-01' AS date)\n        AND CAST('1996-12-31' AS date)",
     "BETWEEN DATE '1995-01-01'\n        AND DATE '1996-12-31'"),
    (8, "BETWEEN CAST('1995-01-01' AS date)\n        AND CAST('1996-12-31' AS date)",
     "BETWEEN DATE '1995-01-01'\n        AND DATE '1996-12-31'"),
    (20, "l_shipdate >= CAST('1994-01-01' AS date)", "l_shipdate >= DATE '1994-01-01'"),
    (20, "l_shipdate < CAST('1995-01-01' AS date)", "l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR"),
)


def spec_sql(number: int, sf: float = 1) -> str:
    """Return TPC-H query ``number`` as the specification writes it (validation parameters, DATE and INTERVAL
    literals where DuckDB's text has CASTs and folded dates; Q15's view as a CTE), at scale factor ``sf``."""
    text = sql(number, sf)
    for query_number, duckdb_text, spec_text in SPEC_TEXT_DIFFERENCES:
        if query_number == number:
            if duckdb_text not in text:
                raise AssertionError(f"Q{number}'s text changed; update SPEC_TEXT_DIFFERENCES")
            text = text.replace(duckdb_text, spec_text)
    return text


def primer_query(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return the plan of ``SELECT l_partkey, count(*) AS count FROM lineitem GROUP BY l_partkey ORDER BY l_partkey``."""
    return primer.plan(catalog)
