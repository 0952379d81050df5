"""Number literals of 29-38 digits, as DuckDB reads them: negated exactly, and integers past int64 as HUGEINT.

Fuzz round 13 (``bench/fuzz_round13.py``, family ``pqdec``) found ``m BETWEEN -x AND -x`` over a DECIMAL(38,2)
column keep no row where DuckDB keeps one: the negated literal was Python's ``-Decimal``, which rounds to the
default context's 28 digits (``-193243778596403163449408442782237830.67`` compared as
``-193243778596403163449408442800000000.00``). Integer literals past int64 were refused; DuckDB types them
HUGEINT, which it hands to Arrow as decimal128(38, 0), the engine's HUGEINT.
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
    "SELECT id, 9223372036854775808 AS a, -9223372036854775809 AS b, h = 9223372036854775808 AS c, "
    "h IN (-9223372036854775809, 7) AS d, 99999999999999999999999999999999999999 - abs(h) AS e, "
    "typeof(18446744073709551616) AS f FROM t",
    "SELECT id FROM t WHERE h < 9223372036854775808 UNION ALL SELECT 9223372036854775808",
    # a HUGEINT literal beside one with fraction digits in an IN list (DuckDB's DECIMAL(38, 1); was refused)
    "SELECT id, id IN (2.5, 9223372036854775808) AS a, id NOT IN (1, 2.5, 99999999999999999999) AS b FROM t "
    "WHERE id IN (0.5, 1, 2, 99999999999999999999)",
]


def test_wide_literals_match_duckdb(device_name):
    session = session_with_tables({"t": T}, split_rows=1, device=device_name, compile_mode="lowest")
    with duckdb_with_tables({"t": T}) as reference:
        assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


def test_an_integer_literal_past_38_digits_is_refused_by_name():
    session = session_with_tables({"t": T}, device="cpu", compile_mode="lowest")
    with pytest.raises(GpuEngineError, match="more than 38 digits"):
        session.sql("SELECT 1234567890123456789012345678901234567890 AS x FROM t")
