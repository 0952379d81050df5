"""A date function of a bare NULL is refused as DuckDB's binder refuses it; typed NULLs still answer NULL.

``extract(year FROM NULL)`` answered NULL where DuckDB raises "Could not choose a best candidate function"
(the breadth fuzz's one answer where DuckDB raised, gpu_engine/sql/untyped_null_arguments.py).
"""

from __future__ import annotations

import datetime

import duckdb
import pyarrow as pa
import pytest
from duckdb_reference import rows_mismatch

from gpu_engine import Session
from gpu_engine.sql.errors import SqlError


@pytest.mark.parametrize("sql, name", [
    ("SELECT extract(year FROM NULL) AS y", "extract"),
    ("SELECT date_part('year', NULL) AS y", "date_part"),
    ("SELECT datepart('dow', (NULL)) AS y", "datepart"),
    ("SELECT 1 AS a, year(NULL) AS y", "year"),
    ("SELECT quarter(CASE WHEN true THEN NULL END) AS y", "quarter"),
    ("SELECT extract(epoch FROM coalesce(NULL, NULL)) IS NULL AS y", "extract"),
    ("SELECT date_trunc('month', NULL) AS y", "date_trunc"),
    ("SELECT date_diff('day', NULL, NULL) AS y", "date_diff"),
    ("SELECT NULL + INTERVAL 1 DAY AS y", "+"),
    ("SELECT date_add(NULL, INTERVAL 1 DAY) AS y", "date_add"),
])
def test_a_date_function_of_an_untyped_null_is_refused_as_duckdb_refuses_it(sql, name):
    with pytest.raises(duckdb.BinderException, match="Could not choose a best candidate function"):
        duckdb.sql(sql)
    with pytest.raises(SqlError, match="could not choose a best candidate function for .*: a NULL argument has no "
                                       r"type .*add an explicit type cast such as CAST\(NULL AS DATE\)") as raised:
        Session(device="cpu").sql(sql)
    assert raised.value.name == name and raised.value.line == 1 and raised.value.column_number is not None


def test_typed_nulls_a_null_beside_a_date_and_a_correlated_empty_group_answer_null(device_name):
    """A correlated subquery's empty group is planned as ``year(NULL)`` (gpu_engine/sql/decorrelation.py): it
    stays NULL, as do typed NULLs and ``date_diff`` with one typed argument. Spark casts a NULL to a date."""
    outer = pa.table({"k": pa.array([1, 2], pa.int64())})
    inner = pa.table({"k": pa.array([1, 1], pa.int64()), "d": [datetime.date(2020, 1, 5), datetime.date(2021, 3, 1)]})
    sql = ("SELECT k, (SELECT year(max(d)) FROM inner_t WHERE inner_t.k = outer_t.k) AS y, "
           "extract(year FROM CAST(NULL AS DATE)) AS a, date_trunc('month', NULL::TIMESTAMP) AS b, "
           "date_diff('day', NULL, DATE '2020-01-01') AS c, date_part('month', TRY_CAST(NULL AS DATE)) AS e "
           "FROM outer_t")
    session = Session(device=device_name)
    reference = duckdb.connect()
    for name, table in (("outer_t", outer), ("inner_t", inner)):
        session.register(name, table)
        reference.register(name, table)
    problem = rows_mismatch(session.sql(sql), reference.sql(sql).to_arrow_table())
    assert problem is None, problem
    assert Session(device="cpu").sql("SELECT year(NULL) AS y", dialect="spark").column("y").to_pylist() == [None]
