"""Check SparkRunner.sql against Spark itself over one small DataFrame (the oracle where DuckDB's dialect differs)."""

from __future__ import annotations


def assert_runner_answers_as_spark(spark, sql: str, frame) -> None:
    """Register ``frame`` as ``t``; ``SparkRunner.sql(sql)`` on cpu must give Spark's rows (as a multiset)."""
    from gpu_engine.spark import SparkRunner

    frame.createOrReplaceTempView("t")
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=2)
    got = sorted((tuple(row) for row in runner.sql(sql, {"t": frame}).collect()), key=repr)
    expected = sorted((tuple(row) for row in spark.sql(sql).collect()), key=repr)
    assert got == expected
