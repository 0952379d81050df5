"""A GROUP BY over rows proven unique on its keys is a projection (:mod:`gpu_engine.optimizer.unique_groupings`),
and a column is proven unique only by reading it (:func:`gpu_engine.optimizer.statistics.unique_column`).

TPC-H q10's shape: customers (their key unique, one NULL) joined to their nation and to lines summed per customer,
grouped by the key and the customer's strings. Against it: the same tables where the key holds a value twice (a
row repeated whole: SQL sums it twice; a key with two names: two groups) or two NULLs, whose statistics still say
"unique" (the range is as long as the rows): the aggregation must stay. Every aggregate the rule turns into a
value of one row, over NULLs; an input filtered to nothing. A Parquet table proven unique, then rewritten with a
duplicate under the same registration, and a table registered again: a kept plan must not run on the new rows
with the old proof. Answers are DuckDB's.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from duckdb_reference import (assert_queries_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables,
                              session_with_tables)
from gpu_engine.optimizer import optimize_plan
from gpu_engine.optimizer.statistics import unique_column
from gpu_engine.plans.nodes import AggregationNode, walk_plan
from gpu_engine.sql.ordering import order_key_columns

_RNG = np.random.default_rng(53)
_N = 240


def _customers(keys: list) -> pa.Table:
    n = len(keys)
    return pa.table({
        "c_key": pa.array(keys, pa.int64()),
        "c_name": pa.array([None if k % 71 == 3 else f"Customer#{k % 90:09d}-a-long-enough-name" for k in range(n)]),
        "c_nation": pa.array([k % 5 for k in range(n)], pa.int32()),
        "c_balance": pa.array([decimal.Decimal(int(v)) / 100 for v in _RNG.integers(-9999, 99999, n)],
                              pa.decimal128(12, 2)),
        "c_score": pa.array([None if k % 17 == 4 else float(v) / 4 for k, v in enumerate(_RNG.integers(0, 999, n))],
                            pa.float64()),
    })


UNIQUE_KEYS = [None if k == 11 else k for k in range(_N)]
CUST = _customers(UNIQUE_KEYS)
# The key holds 7 twice (the row repeated whole) and 8 twice (another name); one key of 5000 keeps the range as
# long as the rows, so the estimate says "unique".
_BASE = _customers([5000 if k == _N - 3 else (None if k == 11 else k) for k in range(_N - 2)])
DUPES = pa.concat_tables([_BASE, _BASE.slice(7, 1),
                          _BASE.slice(8, 1).set_column(1, "c_name", pa.array(["another name"]))])
TWO_NULLS = _customers([None if k in (11, 12) else k for k in range(_N)])
NATION = pa.table({"n_key": pa.array(range(5), pa.int32()), "n_name": [f"NATION {k}" for k in range(5)]})
LINES = pa.table({
    "l_cust": pa.array([None if k % 13 == 5 else int(v) for k, v in enumerate(_RNG.integers(0, _N, 900))],
                       pa.int64()),
    "l_price": pa.array([decimal.Decimal(int(v)) / 100 for v in _RNG.integers(-500, 90000, 900)],
                        pa.decimal128(15, 2)),
})
TABLES = {"cust": CUST, "dupes": DUPES, "two_nulls": TWO_NULLS, "nation": NATION, "lines": LINES}

_Q10 = ("SELECT c_key, c_name, n_name, c_balance, sum(p) AS revenue, sum(n) AS n "
        "FROM (SELECT l_cust, sum(l_price) AS p, count(*) AS n FROM lines GROUP BY l_cust) AS per_customer, "
        "{t}, nation WHERE l_cust = c_key AND c_nation = n_key GROUP BY c_key, c_name, n_name, c_balance")
_ONE_ROW = ("SELECT c_key, c_name, count(*) AS n, count(c_score) AS scored, sum(c_balance) AS b, "
            "sum(c_nation) AS sn, min(c_name) AS first_name, max(c_score) AS top, avg(c_score) AS a, "
            "any_value(c_nation) AS nation FROM {t} GROUP BY c_key, c_name")
QUERIES = {
    "q10_shape": _Q10,
    "q10_shape_top": _Q10 + " ORDER BY revenue DESC, c_key LIMIT 7",
    "one_row_aggregates": _ONE_ROW,
    "empty_input": "SELECT c_key, c_name, count(*) AS n, sum(c_balance) AS b FROM {t} WHERE c_balance > 100000 "
                   "GROUP BY c_key, c_name",
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _keyed_aggregations(session, sql: str) -> list[AggregationNode]:
    plan = optimize_plan(session.sql_plan(sql), session.statistics())
    return [n for n in walk_plan(plan) if isinstance(n, AggregationNode) and "c_key" in n.grouping_keys]


@pytest.mark.parametrize("name", list(QUERIES))
def test_a_grouping_over_rows_unique_on_a_read_key_is_a_projection(name):
    session = session_with_tables(TABLES, device="cpu")
    assert _keyed_aggregations(session, QUERIES[name].format(t="cust")) == [], name


@pytest.mark.parametrize("table", ["dupes", "two_nulls"])
@pytest.mark.parametrize("name", list(QUERIES))
def test_a_key_held_twice_keeps_its_aggregation(name, table):
    session = session_with_tables(TABLES, device="cpu")
    stats = session.statistics()[table]
    assert stats.columns["c_key"].ndv >= stats.rows  # the estimate says unique; the rows do not
    assert len(_keyed_aggregations(session, QUERIES[name].format(t=table))) == 1, (name, table)


def test_answers_match_duckdb(device_name, reference):
    queries = [sql.format(t=t) for sql in QUERIES.values() for t in ("cust", "dupes", "two_nulls")]
    small = {"split_rows": 64, "drivers": 3, "batch_rows": 64}  # a customer's rows on several drivers
    if device_name == "cuda-sim":  # the simulator runs the q10 shape and the one-row aggregates once each
        queries = [QUERIES["q10_shape"].format(t="cust"), _ONE_ROW.format(t="cust"), _ONE_ROW.format(t="dupes")]
        small = {"splits": 2, "drivers": 2}
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest", **small)
    assert_queries_match_duckdb(session, reference, queries, ordered=order_key_columns, exact_types=True)


def test_unique_column_reads_the_rows():
    from gpu_engine import Session

    session = Session(device="cpu")
    for name, table in TABLES.items():
        session.register(name, table)
    proven = {name: unique_column(session.table(name), "c_key") for name in ("cust", "dupes", "two_nulls")}
    assert proven == {"cust": True, "dupes": False, "two_nulls": False}
    assert unique_column(session.table("nation"), "n_key")
    assert not unique_column(session.table("nation"), "n_name")  # strings: not read
    assert not unique_column(session.table("lines"), "l_cust")


def test_a_rewritten_or_registered_again_table_is_proven_again(tmp_path):
    """The same SQL text (a kept plan) after its Parquet file is rewritten with a duplicate key, and after the name
    is registered again as another table: each run answers over the rows it reads."""
    from gpu_engine import Session

    path = tmp_path / "cust.parquet"
    pq.write_table(CUST, path)
    session = Session(device="cpu", drivers=2, compile_mode="lowest")
    session.register("cust", str(path))
    for name in ("nation", "lines"):
        session.register(name, TABLES[name])
    sql = QUERIES["q10_shape"].format(t="cust")
    with duckdb_with_tables({"cust": CUST, "nation": NATION, "lines": LINES}) as before:
        assert_same_rows(session.sql(sql), duckdb_table(before, sql))
    assert _keyed_aggregations(session, sql) == []
    rewritten = DUPES.cast(CUST.schema)
    pq.write_table(rewritten, path)  # same columns and types: the scan reads the new rows
    with duckdb_with_tables({"cust": rewritten, "nation": NATION, "lines": LINES}) as after:
        assert_same_rows(session.sql(sql), duckdb_table(after, sql))
    session.register("cust", TWO_NULLS)
    with duckdb_with_tables({"cust": TWO_NULLS, "nation": NATION, "lines": LINES}) as again:
        assert_same_rows(session.sql(sql), duckdb_table(again, sql))


def test_a_grouping_not_unique_even_by_the_estimates_reads_no_column(monkeypatch):
    """Lines grouped by their customer and its name: lines hold each customer several times, so no key of cust,
    unique or not, makes the grouping one row per group: nothing is read while planning."""
    from gpu_engine.optimizer import statistics

    read = []
    monkeypatch.setattr(statistics, "unique_column", lambda table, column, null=True: read.append(column) or False)
    session = session_with_tables(TABLES, device="cpu")
    sql = "SELECT l_cust, c_name, sum(l_price) AS p FROM lines JOIN cust ON l_cust = c_key GROUP BY l_cust, c_name"
    assert len(_keyed_aggregations(session, sql.replace("l_cust, c_name", "c_key, c_name"))) == 1
    assert read == []
    assert _keyed_aggregations(session, QUERIES["q10_shape"].format(t="cust")) != [] and "c_key" in read


@pytest.mark.parametrize("source", ["pandas", "numpy dict", "arrow over numpy"])
def test_a_frame_written_to_in_place_is_grouped_over_its_rows_now(source):
    """A pandas frame, a dict of numpy arrays or an Arrow table built from numpy arrays without a copy is
    registered without a copy: Arrow wraps their arrays, so the scans read what the caller writes to them later. A
    key proven unique before the write must not be kept: after ``k[3] = 4`` the same text groups 99 rows (the
    engine answered 100, the proof of the old rows kept; an Arrow table's proof is checked against its buffers'
    checksums, in the kept plan and in another Session registering the same table)."""
    import pandas as pd

    from gpu_engine import Session

    columns = {"k": np.arange(100, dtype=np.int64), "v": np.arange(100, dtype=np.int64)}
    frame = {"pandas": pd.DataFrame, "numpy dict": dict, "arrow over numpy": pa.table}[source](columns)
    session = Session(device="cpu", compile_mode="lowest")
    session.register("t", frame)
    sql = "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k"
    assert session.sql(sql).num_rows == 100
    if source == "arrow over numpy":
        assert _keyed_aggregations(session, sql) == []  # proven: Arrow's own table
    if source == "pandas":
        frame.loc[3, "k"] = 4
    else:
        columns["k"][3] = 4
    assert session.sql("SELECT count(*) AS n FROM t WHERE k = 4").column(0).to_pylist() == [2]  # read in place
    written = frame if source == "pandas" else columns
    now = pa.table({"k": np.asarray(written["k"]), "v": np.asarray(written["v"])})
    other = Session(device="cpu", compile_mode="lowest")
    other.register("t", frame)
    with duckdb_with_tables({"t": now}) as reference:
        assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
        assert_same_rows(other.sql(sql), duckdb_table(reference, sql))
