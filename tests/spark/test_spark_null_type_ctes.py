"""SparkRunner.sql keeps SQL's NULL type on a shared CTE's column, as Session.sql does (the oracle is Spark itself).

A CTE read twice runs once into a checkpointed DataFrame, which the query reads as a table: a column of bare NULLs
came back as INTEGER (the Spark type the plan's storage maps to), and ``coalesce(w.x, FALSE)`` or ``w.x = t.s`` was
refused ("CASE branches have types int32, bool"). The plan's NULL type is now marked on the table's schema
(gpu_engine/plans/null_type.py). Spark itself reads such a column as its NULL (void) type.
"""

from __future__ import annotations

import pytest

from spark_reference import assert_runner_answers_as_spark

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

#: One query (each costs seconds of Spark): the NULL column typed by a boolean and compared with text.
QUERIES = [
    "WITH w AS (SELECT k, NULL AS x FROM t) SELECT a.k, coalesce(a.x, b.k > 2) AS c FROM w a JOIN w b ON a.k = b.k "
    "WHERE a.x = 'z' OR a.k = 1 OR b.k = 5",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_a_shared_ctes_null_column_keeps_its_null_type_as_spark(spark, sql):
    frame = spark.createDataFrame([(1,), (3,), (None,), (5,)], "k bigint").coalesce(1)
    assert_runner_answers_as_spark(spark, sql, frame)
