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


#: Date functions of a column of SQL's NULL type (``SELECT NULL AS x``, a set operation or VALUES list of NULLs,
#: a CTE read twice, a scalar subquery of NULL): DuckDB's binder refuses them as it refuses ``year(NULL)``; the
#: engine answered NULL (the compose fuzz, seeds 92236 and 92239; gpu_engine/plans/scalar_translation.py's
#: ``date_operand``).
_NULL_COLUMN = "(SELECT id, NULL AS x FROM t) q"
NULL_TYPED_COLUMN_CALLS = [
    f"SELECT year(q.x) AS y FROM {_NULL_COLUMN}",
    f"SELECT q.id FROM {_NULL_COLUMN} ORDER BY date_trunc('week', q.x), q.id",
    f"SELECT extract(month FROM q.x) AS y FROM {_NULL_COLUMN}",
    f"SELECT dayofweek(q.x) AS y, date_part('dow', q.x) AS z FROM {_NULL_COLUMN}",
    f"SELECT q.x + INTERVAL 1 DAY AS y FROM {_NULL_COLUMN}",
    f"SELECT date_add(q.x, INTERVAL 1 DAY) AS y FROM {_NULL_COLUMN}",
    f"SELECT date_diff('day', q.x, q.x) AS y FROM {_NULL_COLUMN}",
    f"SELECT epoch(q.x) AS y FROM {_NULL_COLUMN}",
    f"SELECT year(coalesce(q.x, NULL)) AS y FROM {_NULL_COLUMN}",
    "SELECT year(q.x) AS y FROM (SELECT NULL AS x FROM t UNION ALL SELECT NULL FROM t) q",
    "SELECT year(v.x) AS y FROM (VALUES (NULL), (NULL)) v(x)",
    "WITH w AS (SELECT NULL AS x FROM t) SELECT year(a.x) AS y FROM w a, w b",
    "SELECT year((SELECT NULL)) AS y FROM t",
]

#: ... and where DuckDB answers: a cast NULL-typed column, one beside a date, a format.
NULL_TYPED_COLUMN_ANSWERS = [
    f"SELECT year(CAST(q.x AS DATE)) AS a, date_trunc('month', q.x::TIMESTAMP) AS b, "
    f"date_diff('day', q.x, DATE '2020-01-01') AS c, strftime(q.x, '%Y') AS e FROM {_NULL_COLUMN}",
]


def _null_column_tables():
    return {"t": pa.table({"id": pa.array([1, 2, 3], pa.int64())})}


@pytest.mark.parametrize("sql", NULL_TYPED_COLUMN_CALLS)
def test_a_date_function_of_a_null_typed_column_is_refused_as_duckdb_refuses_it(sql):
    reference = duckdb.connect()
    session = Session(device="cpu")
    for name, table in _null_column_tables().items():
        session.register(name, table)
        reference.register(name, table)
    with pytest.raises(duckdb.BinderException, match="Could not choose a best candidate function"):
        reference.sql(sql)
    with pytest.raises(SqlError, match=r"could not choose a best candidate function for .*: column .* is of SQL's "
                                       r"NULL type .*add an explicit type cast such as CAST\(.* AS DATE\)") as raised:
        session.sql(sql)
    assert raised.value.line == 1 and raised.value.column_number is not None


def test_a_null_typed_column_cast_or_beside_a_date_answers_null_and_spark_casts_it(device_name):
    reference = duckdb.connect()
    session = Session(device=device_name)
    for name, table in _null_column_tables().items():
        session.register(name, table)
        reference.register(name, table)
    for sql in NULL_TYPED_COLUMN_ANSWERS:
        problem = rows_mismatch(session.sql(sql), reference.sql(sql).to_arrow_table())
        assert problem is None, problem
    # Spark casts a NULL-typed argument to the function's type (a date): NULL
    spark = session.sql(f"SELECT year(q.x) AS a, hour(q.x) AS b, datediff(q.x, q.x) AS c FROM {_NULL_COLUMN}",
                        dialect="spark")
    assert spark.to_pylist() == [{"a": None, "b": None, "c": None}] * 3
