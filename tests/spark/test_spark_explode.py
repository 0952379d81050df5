"""SparkRunner.sql answers ``explode(split(s, ','))``, ``explode(array(...))`` and ``LATERAL VIEW explode`` as
Spark does (the oracle is Spark itself): planned as an Unnest over the FROM items (gpu_engine/sql/unnest_selects.py,
gpu_engine/operators/unnest.py), within the stage that reads them; a NULL text gives no row (with OUTER one, its
piece NULL), an empty one an empty piece, as Spark. (Other cases: tests/sql/test_unnest_selects.py, against DuckDB;
each query here costs seconds.)
"""

from __future__ import annotations

import pytest

from spark_reference import assert_runner_answers_as_spark

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]


@pytest.mark.parametrize("sql", [
    "SELECT p, count(*) AS n, sum(k) AS s FROM (SELECT k, explode(split(s, ',')) AS p FROM t) q GROUP BY p",
    "SELECT k, v, w FROM t LATERAL VIEW explode(split(s, ',')) a AS v LATERAL VIEW explode(array(1, 2)) b AS w",
    # OUTER keeps the row whose text is NULL, with a NULL piece (an empty text has one empty piece anyway)
    "SELECT k, v, w FROM t LATERAL VIEW OUTER explode(split(s, ',')) a AS v LATERAL VIEW OUTER explode(array(1)) b AS w",
    # posexplode of an array reading columns: the 0-based position (INT) and the element, NULL elements kept
    "SELECT k, p, v, w FROM t LATERAL VIEW posexplode(array(k, 2, NULL)) e AS p, v LATERAL VIEW explode(array(k)) f AS w",
])
def test_sparks_explode_answers_as_spark(spark, sql):
    frame = spark.createDataFrame([(1, "a,b"), (3, ""), (None, None), (5, "b,,c")], "k bigint, s string")
    assert_runner_answers_as_spark(spark, sql, frame)
