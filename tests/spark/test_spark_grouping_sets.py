"""SparkRunner.sql: ROLLUP and CUBE aggregate partially in every map Task before the shuffle, as Spark's own plan
does, and answer as Spark does over the same DataFrame (the group id is one more shuffle key).

One difference is the engine's by choice: over an empty input a set without keys gives its row (DuckDB and the
SQL standard) where Spark gives none; that case is checked against DuckDB in tests/sql/test_grouping_sets.py.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

ROWS = [(1, "x", 1), (None, "y", 2), (1, None, 3), (2, "x", 4), (None, None, 5), (2, "z", 6), (3, "y", 8)]


@pytest.mark.parametrize("sql", [
    "SELECT a, b, sum(c) AS s, count(*) AS n, grouping(a) AS ga, grouping(b) AS gb FROM t GROUP BY ROLLUP (a, b)",
    "SELECT a, b, count(*) AS n, grouping_id() AS gi FROM t GROUP BY CUBE (a, b) HAVING count(*) > 1",
])
def test_grouping_sets_on_spark_match_spark(spark, sql):
    from gpu_engine.spark import SparkRunner

    frame = spark.createDataFrame(ROWS, "a int, b string, c bigint").repartition(3)
    frame.createOrReplaceTempView("t")
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=2)
    got = sorted((tuple(row) for row in runner.sql(sql, {"t": frame}).collect()), key=repr)
    assert got == sorted((tuple(row) for row in spark.sql(sql).collect()), key=repr)
