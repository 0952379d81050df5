"""Hexadecimal and binary text cast to integers (issue 30), as DuckDB reads it: ``CAST('0x1F' AS INTEGER)`` is 31.

DuckDB's rule, checked against it on cpu and cuda-sim (the parse kernel's twins): ``0x``/``0X``/``0b``/``0B``
after optional leading blanks, ``_`` between two digits, no sign, nothing after the digits (a trailing blank
too), the value within the target type (``0xFFFFFFFF`` is no INTEGER, ``0xFFFFFFFFFFFFFFFF`` is a UBIGINT);
decimals and floats do not read it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError

TEXTS = ["0x1F", "0X1f", "0b101", "0x1_F", " 0x10", "0x7FFFFFFF", "0xZZ", "-0x1F", "0x1F ", "0x", "0x_1", "0b2",
         "00x1F", "0xFFFFFFFF", "1_000", None, "0xFFFFFFFFFFFFFFFF", "18446744073709551615", "18446744073709551616",
         "9223372036854775808", "-1", " 2.5 ",
         "9" * 300, "1e50", "0x" + "F" * 40]  # far past every type: NULL, never an error of the parse (was for UBIGINT)
TABLES = {"t": pa.table({"id": pa.array(range(len(TEXTS)), pa.int64()), "s": pa.array(TEXTS)})}

QUERIES = [
    "SELECT id, TRY_CAST(s AS INTEGER) AS i, TRY_CAST(s AS BIGINT) AS b, TRY_CAST(s AS TINYINT) AS t, "
    "TRY_CAST(s AS DECIMAL(10, 0)) AS d, TRY_CAST(s AS DOUBLE) AS f, TRY_CAST(s AS UBIGINT) AS u FROM t",
    "SELECT CAST('0x1F' AS INTEGER) AS a, CAST('0b101' AS SMALLINT) AS b, CAST('0x7FFFFFFFFFFFFFFF' AS BIGINT) AS c, "
    "CAST('0xabcdef' AS BIGINT) AS d",
    # UBIGINT's upper half (was out of range: the parse holds 63 bits), from text and from a literal
    "SELECT CAST('0xFFFFFFFFFFFFFFFF' AS UBIGINT) AS a, CAST(18446744073709551615 AS UBIGINT) AS b, "
    "CAST('9223372036854775808' AS UBIGINT) AS c, CAST(' 1_0 ' AS UBIGINT) AS d",
]


def test_prefixed_integer_texts_cast_as_duckdb_casts_them(device_name, reference):
    session = session_with_tables(TABLES, split_rows=8, device=device_name, drivers=1, batch_rows=16,
                                  fuse=False)  # no generated kernels to compile (CI time): SQL, not fusion
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


@pytest.mark.parametrize("sql", ["SELECT CAST('0xFFFFFFFF' AS INTEGER) AS a", "SELECT CAST(' 0x1F ' AS INTEGER) AS a",
                                 "SELECT CAST('0x1F' AS DECIMAL(10, 0)) AS a", "SELECT CAST('-1' AS UBIGINT) AS a",
                                 "SELECT CAST('18446744073709551616' AS UBIGINT) AS a"])
def test_prefixed_texts_duckdb_refuses_fail_the_query(sql):
    with pytest.raises(ExecutionError):
        session_with_tables(TABLES, device="cpu").sql(sql)
