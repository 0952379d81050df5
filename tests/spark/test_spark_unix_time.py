"""SparkRunner.sql answers ``from_unixtime`` and ``unix_timestamp``/``to_unix_timestamp`` as Spark does, session
zone UTC (the oracle is Spark itself; gpu_engine/sql/spark_functions.py): ``from_unixtime(x[, fmt])`` formats the
seconds cast to BIGINT (a fraction truncated), ``unix_timestamp(x[, fmt])`` the whole seconds (truncated) of a
TIMESTAMP or DATE, or of a text read with the format; NULLs stay NULL. A text that does not match the format
raises, as Spark's ANSI mode (its default) does.
"""

from __future__ import annotations

import pytest

from spark_reference import assert_runner_answers_as_spark

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]


def test_from_unixtime_and_unix_timestamp_answer_as_spark(spark):
    import datetime

    frame = spark.createDataFrame([
        (1, 0, 1.7, "2024-01-01 10:00:00", datetime.datetime(1969, 12, 31, 23, 59, 59, 500000),
         datetime.date(2024, 1, 2)),
        (2, 1700000000, -1.5, None, None, None),
        (3, -1, None, "1969-12-31 23:59:59", datetime.datetime(2023, 11, 14, 22, 13, 20, 123456),
         datetime.date(1969, 12, 31)),
        (4, None, 5.0, "2000-02-29 00:00:01", datetime.datetime(1970, 1, 1), datetime.date(1970, 1, 1)),
    ], "k bigint, x bigint, f double, s string, ts timestamp, d date")
    assert_runner_answers_as_spark(
        spark, "SELECT k, from_unixtime(x) AS a, from_unixtime(x, 'yyyy-MM-dd HH:mm') AS b, from_unixtime(f) AS c, "
        "unix_timestamp(s) AS e, unix_timestamp(ts) AS g, unix_timestamp(d) AS h, to_unix_timestamp(s) AS i, "
        "unix_timestamp(substr(s, 1, 10), 'yyyy-MM-dd') AS j FROM t", frame)


def test_unix_timestamp_of_text_that_does_not_match_raises_as_spark(spark):
    from gpu_engine.spark import SparkRunner

    frame = spark.createDataFrame([(1, "garbage")], "k bigint, s string")
    with pytest.raises(Exception, match="CANNOT_PARSE_TIMESTAMP"):
        spark.createDataFrame([(1, "garbage")], "k bigint, s string").selectExpr("unix_timestamp(s)").collect()
    with pytest.raises(Exception, match='Could not parse string "garbage"'):  # raised in Spark's Python worker
        SparkRunner(spark, device="cpu").sql("SELECT unix_timestamp(s) AS a FROM t", {"t": frame}).collect()
