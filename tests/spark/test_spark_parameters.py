"""SparkRunner: bound and prepared queries answer as Spark does over the same DataFrames."""

from __future__ import annotations

import datetime

from gpu_engine.spark import SparkRunner

TEXT = ("SELECT o_orderpriority, count(*) AS n FROM orders WHERE o_orderdate < ? AND o_totalprice > ? "
        "GROUP BY o_orderpriority ORDER BY n DESC, o_orderpriority")


def test_prepared_spark_query_runs_with_new_values(spark, spark_tpch_tables):
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=2)
    tables = spark_tpch_tables()
    tables["orders"].createOrReplaceTempView("orders")
    prepared = runner.prepare(TEXT)
    for date, price in [(datetime.date(1993, 1, 1), 1000), (datetime.date(1995, 6, 17), 150000.5)]:
        literal = TEXT.replace("?", f"DATE '{date.isoformat()}'", 1).replace("?", str(price), 1)
        expected = [tuple(row) for row in spark.sql(literal).collect()]
        assert [tuple(row) for row in prepared.execute([date, price], tables=tables).collect()] == expected
        assert [tuple(row) for row in runner.sql(TEXT, tables, params=[date, price]).collect()] == expected
