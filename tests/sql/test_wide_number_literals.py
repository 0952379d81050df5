"""Number literals of 29-38 digits, as DuckDB reads them: negated exactly; integers past int64 refused by name.

Fuzz round 13 (``bench/fuzz_round13.py``, family ``pqdec``) found ``m BETWEEN -x AND -x`` over a DECIMAL(38,2)
column keep no row where DuckDB keeps one: the negated literal was Python's ``-Decimal``, which rounds to the
default context's 28 digits (``-193243778596403163449408442782237830.67`` compared as
``-193243778596403163449408442800000000.00``). Integer literals past int64 stay refused: read as the engine's
HUGEINT (DECIMAL(38,0)) they met fractional decimals by the decimal rule, where DuckDB's HUGEINT keeps their
fraction digits (``coalesce(2.5, 99999999999999999999)`` was 3, DuckDB 2.5: bench/results/2026-11-29-review-s54.md).
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import GpuEngineError

WIDE = "193243778596403163449408442782237830.67"
T = pa.table({"id": pa.array([0, 1, 2], pa.int64()),
              "m": pa.array([decimal.Decimal("-" + WIDE), decimal.Decimal("5.00"), None], pa.decimal128(38, 2)),
              "h": pa.array([decimal.Decimal(2**63), decimal.Decimal(-(2**63) - 1), decimal.Decimal(7)],
                            pa.decimal128(38, 0))})

QUERIES = [
    f"SELECT id FROM t WHERE m BETWEEN -{WIDE} AND -{WIDE}",
    f"SELECT id, m = -{WIDE} AS e, m < -{WIDE} + 0.01 AS l, -{WIDE} AS x, -(-{WIDE}) AS y, -{WIDE} + m AS z FROM t",
]


def test_wide_literals_match_duckdb(device_name):
    session = session_with_tables({"t": T}, split_rows=1, device=device_name, compile_mode="lowest")
    with duckdb_with_tables({"t": T}) as reference:
        assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


@pytest.mark.parametrize("sql", ["SELECT coalesce(2.5, 99999999999999999999) AS x FROM t",
                                 "SELECT 2.5 AS x UNION ALL SELECT 99999999999999999999"])
def test_an_integer_literal_past_int64_is_refused_by_name(sql):
    session = session_with_tables({"t": T}, device="cpu", compile_mode="lowest")
    with pytest.raises(GpuEngineError, match="beyond int64"):
        session.sql(sql)
