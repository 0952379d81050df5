"""SparkRunner.sql answers Spark's ``range(...)`` table function as Spark does (the oracle is Spark itself).

The series is a single-stage source (gpu_engine/operators/range.py): one Task generates it, so a shuffle after
it (a grouping) sees each row once; and an empty one. (Joins of a series: tests/sql/test_series_sources.py,
against DuckDB; each SparkRunner query here costs seconds of Spark.)
"""

from __future__ import annotations

import pytest

from spark_reference import assert_runner_answers_as_spark

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

QUERIES = [
    "SELECT id % 3 AS k, count(*) AS n, sum(id) AS s FROM range(0, 1000, 7) GROUP BY id % 3",
    "SELECT count(*) AS n FROM range(10, 0)",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_sparks_range_answers_as_spark(spark, sql):
    frame = spark.createDataFrame([(1,), (3,), (None,), (5,)], "k bigint").coalesce(1)
    assert_runner_answers_as_spark(spark, sql, frame)
