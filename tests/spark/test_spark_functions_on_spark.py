"""SparkRunner.sql answers Spark's function names as Spark does over the same DataFrame: values and column types.

Issue 30, item 6 (gpu_engine/sql/spark_functions.py): the oracle here is Spark
itself; tests/sql/test_spark_functions.py checks the same rewrites against
DuckDB expressions of Spark's answers on every device without starting Spark.
The data has no zero divisor and no bad string, where Spark 4's ANSI mode
raises and the engine reads Spark as sqlglot does (NULL).
"""

from __future__ import annotations

import datetime
import math

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

_DAY = datetime.date
ROWS = [(1, _DAY(2024, 1, 31), _DAY(2024, 3, 1), 1.5, "2024-02-29"), (2, _DAY(2024, 3, 3), None, float("nan"), None),
        (3, _DAY(2023, 12, 30), _DAY(2020, 1, 1), None, "1999-12-31"), (4, None, _DAY(2024, 1, 1), -2.0, "2021-01-01"),
        (5, _DAY(2024, 2, 29), _DAY(2024, 2, 29), 0.0, "2024-12-31")]

SELECTED = ("dayofweek(d)", "weekday(d)", "year(d)", "dayofmonth(d)", "weekofyear(d)", "date_add(d, 3)",
            "date_sub(d, k)", "add_months(d, 1)", "d + INTERVAL 1 DAY", "datediff(d2, d)", "to_date(s)",
            "date_format(d, 'yyyy/MM/dd EEE')", "trunc(d, 'MM')", "date_trunc('MM', d)", "months_between(d2, d)",
            "nvl2(f, k, 0)", "if(k > 2, 'p', 'n')", "isnull(d)", "pmod(k - 3, 2)", "pmod(3 - k, -2)",
            "nanvl(f, 9.0)", "make_date(2024, k, 1)", "length(s)", "instr(s, '-')", "substr(s, 0, 4)")


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    return a == b


def test_spark_function_names_answer_as_spark(spark):
    from pyspark.sql.types import TimestampNTZType, TimestampType

    from gpu_engine.spark import SparkRunner

    columns = ", ".join(f"{text} AS c{n}" for n, text in enumerate(SELECTED))
    sql = f"SELECT k, {columns} FROM t"
    frame = spark.createDataFrame(ROWS, "k int, d date, d2 date, f double, s string").coalesce(1)
    frame.createOrReplaceTempView("t")
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=1)
    result = runner.sql(sql, {"t": frame})
    want = spark.sql(sql)
    for n, text in enumerate(SELECTED):
        got_type, want_type = result.schema[f"c{n}"].dataType, want.schema[f"c{n}"].dataType
        if want_type == TimestampType():  # the engine's TIMESTAMP has no zone: it comes back as TIMESTAMP_NTZ
            want_type = TimestampNTZType()
        assert got_type == want_type, f"{text}: {got_type} where Spark gives {want_type}"
    got = sorted(tuple(row) for row in result.collect())
    expected = sorted(tuple(row) for row in want.collect())
    for a, b in zip(got, expected, strict=True):
        for n, (x, y) in enumerate(zip(a[1:], b[1:])):
            assert _same(x, y), f"{SELECTED[n]} (k = {a[0]}): {x!r} where Spark gives {y!r}"
