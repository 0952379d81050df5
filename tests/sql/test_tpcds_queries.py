"""TPC-DS queries the engine answers, at SF 0.01 on ``cpu``, against DuckDB on the same Parquet files.

The whole 99 run in the bench (``python -m bench.run_tpcds``, issue 30); CI runs
:data:`CI_QUERIES`, a few quick ones that equal DuckDB, chosen to cover
different operators (see the comment on each), so that a regression of a
query that works shows here. The data comes from ``tpcgen-cli tpcds parquet``
(in the ``[dev]`` extra, so ``make test`` installs it), generated once under
``$GPU_ENGINE_DATA/tpcds``; without the generator the data tests skip, naming it.

The check (:func:`bench.tpcds.result_mismatch`) is tested here too, on small
tables: rows tied on the ORDER BY keys at a LIMIT may differ, nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from bench.run_tpcds import construct_of, parse_query_numbers
from bench.tpcds import QUERY_NUMBERS, query_text, result_mismatch
from duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

SCALE_FACTOR = 0.01

# query -> what it covers (each takes a few seconds on cpu, most of it numba's first compilation).
CI_QUERIES = {
    1: "a CTE read twice, a correlated scalar subquery (avg per store) decorrelated into a join",
    2: "UNION ALL of two fact tables in a CTE, CASE pivots in sums, round of a ratio, a self join a year apart",
    3: "a three-table star join, GROUP BY, ORDER BY ... LIMIT",
    5: "ROLLUP over a UNION ALL of three channels, each a UNION ALL of sales and returns",
    12: "a window sum over a partition (revenue ratio per class)",
    15: "OR of string IN lists, substring and a decimal comparison across a join",
    17: "stddev_samp and avg over three fact tables joined",
    21: "CASE WHEN inside sum, a ratio filter on two aggregates, date arithmetic bounds",
    33: "three CTEs each with an IN subquery, UNION ALL of them, then GROUP BY",
    34: "an IN list holding arithmetic (1999 + 1), CASE in a filter, a derived table joined back",
    35: "correlated EXISTS beside EXISTS OR EXISTS (mark joins), min/max/avg/sum per group",
    36: "UNION of per-level aggregates (the ROLLUP written out) and rank() OVER partitions of the levels",
    86: "ROLLUP with grouping() and rank() OVER partitions of the rollup levels",
    51: "cumulative window sums (ROWS UNBOUNDED PRECEDING) over a FULL OUTER JOIN, max over a window",
    71: "UNION ALL of three fact tables inside a join, time ranges ORed",
    93: "a LEFT JOIN with a CASE over its NULL-extended side",
}


@pytest.fixture(scope="session")
def tpcds_folder() -> Path:
    """Return the folder of TPC-DS SF 0.01 Parquet files, generated once (skip without ``tpcgen-cli``)."""
    from gpu_engine.connectors.tpcds_data import TpcdsDataError, ensure_tpcds, find_tpcgen_cli

    try:
        find_tpcgen_cli()
    except TpcdsDataError as error:
        pytest.skip(f"TPC-DS data needs tpcgen-cli: {error}")
    return ensure_tpcds(SCALE_FACTOR, Path(os.environ["GPU_ENGINE_DATA"]) / "tpcds")


@pytest.mark.parametrize("number", sorted(CI_QUERIES), ids=lambda n: f"q{n}")
def test_query_equals_duckdb(number, tpcds_folder):
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import register_tpcds

    sql = query_text(number)
    with duckdb_connection(tpcds_folder) as connection:
        expected = duckdb_table(connection, sql)
    assert expected.num_rows > 0, "a query with no rows covers nothing"
    # Generated kernels compile in the background (the default outside tests): each query's first batches run on
    # the lowest tier, so CI does not wait for ~16 queries' worth of fused kernels (TPC-H's tests cover those).
    session = Session(device="cpu", compile_mode="background")
    register_tpcds(session, tpcds_folder)
    problem = result_mismatch(session.sql(sql), expected, sql, rows_mismatch)
    assert problem is None, problem


def test_the_99_texts_are_there_and_parse():
    import sqlglot

    assert QUERY_NUMBERS == tuple(range(1, 100))
    for number in QUERY_NUMBERS:
        text = query_text(number)
        assert ";" not in text, f"q{number} holds more than one statement"
        sqlglot.parse_one(text, read="duckdb")
    assert "c_last_review_date_sk" in query_text(30)


SQL = "SELECT k, v FROM t ORDER BY k LIMIT 3"


def _table(keys, values):
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.string())})


def test_rows_tied_at_the_limit_may_differ():
    duck = _table([1, 2, 2], ["a", "b", "c"])
    assert result_mismatch(_table([1, 2, 2], ["a", "c", "d"]), duck, SQL, rows_mismatch) is None


def test_rows_before_the_tie_must_match():
    duck = _table([1, 2, 2], ["a", "b", "c"])
    assert "differ" in result_mismatch(_table([1, 2, 2], ["x", "b", "c"]), duck, SQL, rows_mismatch)


def test_keys_of_the_tied_rows_must_match():
    duck = _table([1, 2, 2], ["a", "b", "c"])
    assert "tied on ORDER BY" in result_mismatch(_table([1, 2, 3], ["a", "b", "c"]), duck, SQL, rows_mismatch)


def test_a_result_shorter_than_the_limit_is_compared_whole():
    duck = _table([1, 2], ["a", "b"])
    assert result_mismatch(_table([1, 2], ["a", "x"]), duck, SQL, rows_mismatch) is not None
    assert result_mismatch(_table([1, 2], ["a", "b"]), duck, SQL, rows_mismatch) is None


def test_order_is_checked_on_the_keys():
    duck = _table([1, 2, 3], ["a", "b", "c"])
    assert "not in ORDER BY" in result_mismatch(_table([2, 1, 3], ["b", "a", "c"]), duck, SQL, rows_mismatch)


def test_query_lists_and_refusal_constructs():
    assert parse_query_numbers("1-3,q7,7") == [1, 2, 3, 7]
    assert len(parse_query_numbers("all")) == 99
    with pytest.raises(ValueError, match="1 to 99"):
        parse_query_numbers("100")
    assert construct_of("SqlError: unsupported SQL: GROUP BY ROLLUP (ROLLUP (a, b)); group by each set "
                        "in its own query") == "SqlError: unsupported SQL: GROUP BY ROLLUP"
    assert construct_of("SqlError: unsupported function 'round' (in Project[3], at 'ROUND(x, 2)')") == \
        "SqlError: unsupported function 'round'"
