"""A string column's distinct values from its Parquet dictionary, read by equality and IN estimates only.

Strings have no range, so ``col = 'x'`` kept 1/10 of any table (TPC-DS q66's ``sm_carrier IN ('DHL',
'BARIAN')``: 4 of ship_mode's 20 rows estimated, 2 real). The first row group's dictionary page header says how
many distinct values the chunk holds (``statistics._dictionary_ndv``: the table's where it is the only row
group, a lower bound otherwise); it is kept apart from ``ndv`` (``ColumnStatistics.dictionary_ndv``) so a join's
divisor or a group count never reads it, and each estimate opts in on its own
(``sql.statistics.STRING_DICTIONARY_COUNTS``, ``cardinality.STRING_DICTIONARY_COUNTS``: both off, as measured
in bench/results/2026-11-28-stringndv-string-equality-cpu-sf1.md).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot

from gpu_engine import Session
from gpu_engine.optimizer import cardinality
from gpu_engine.optimizer.cardinality import estimate
from gpu_engine.optimizer.statistics import RegisteredStatistics
from gpu_engine.plans import PlanBuilder
from gpu_engine.sql import statistics as sql_statistics

#: 20 carriers, 5 rows each; every seventh row NULL in ``maybe`` (NULL is no dictionary value)
CARRIERS = [f"carrier{i % 20}" for i in range(100)]


def _table() -> pa.Table:
    return pa.table({"carrier": pa.array(CARRIERS), "maybe": pa.array([None if i % 7 == 0 else c
                                                                           for i, c in enumerate(CARRIERS)]),
                     "n": pa.array(range(100), pa.int64())})


def _statistics(tmp_path, name="ship", **write):
    table = _table()
    pq.write_table(table, tmp_path / f"{name}.parquet", **write)
    session = Session(device="cpu")
    session.register(name, str(tmp_path / f"{name}.parquet"))
    return table.schema, RegisteredStatistics(session._tables)


def test_a_dictionary_encoded_string_column_counts_its_dictionary_values(tmp_path):
    _, statistics = _statistics(tmp_path)
    columns = statistics["ship"].columns
    assert columns["carrier"].dictionary_ndv == 20
    assert columns["maybe"].dictionary_ndv == 20  # NULLs are no value
    assert columns["carrier"].ndv == 0  # joins and groups do not read it
    _, plain = _statistics(tmp_path, "plain", use_dictionary=False)
    assert plain["plain"].columns["carrier"].dictionary_ndv == 0
    _, grouped = _statistics(tmp_path, "grouped", row_group_size=10)  # a row group's 10 of 20: a lower bound
    assert grouped["grouped"].columns["carrier"].dictionary_ndv == 10


def test_a_typed_in_list_on_a_string_keeps_one_dictionary_value_per_constant_where_switched_on(tmp_path,
                                                                                               monkeypatch):
    """The typed estimates' consumer is on by default since the typed join order alone orders joins (see
    ``cardinality``); off, 1/10 a value."""
    schema, statistics = _statistics(tmp_path)
    builder = PlanBuilder({"ship": schema}).table_scan("ship")
    in_list = builder.filter("carrier IN ('carrier1', 'carrier2')").plan()
    equal = PlanBuilder({"ship": schema}).table_scan("ship").filter("carrier = 'carrier3'").plan()
    monkeypatch.setattr(cardinality, "STRING_DICTIONARY_COUNTS", False)
    assert estimate(in_list, statistics).rows == pytest.approx(20)  # off: 1/10 a value
    monkeypatch.setattr(cardinality, "STRING_DICTIONARY_COUNTS", True)
    assert estimate(in_list, statistics).rows == pytest.approx(10)  # 2 of 20 values
    assert estimate(equal, statistics).rows == pytest.approx(5)


def test_the_sql_estimate_of_a_string_in_list_keeps_one_dictionary_value_per_constant_where_switched_on(
        tmp_path, monkeypatch):
    """The SQL estimates' consumer is off by default too (q18 lost: see ``sql.statistics``); on, it counts."""
    _, statistics = _statistics(tmp_path)
    columns = statistics["ship"].columns

    def share(text):
        return sql_statistics.selectivity(sqlglot.parse_one(text), lambda column: columns.get(column.name))

    assert share("carrier IN ('carrier1', 'carrier2')") == pytest.approx(0.2)  # the default: 1/10 a value
    monkeypatch.setattr(sql_statistics, "STRING_DICTIONARY_COUNTS", True)
    assert share("carrier IN ('carrier1', 'carrier2')") == pytest.approx(0.1)  # 2 of 20 values
    assert share("carrier = 'carrier1'") == pytest.approx(0.05)
    assert share("carrier <> 'carrier1'") == pytest.approx(0.95)
