"""DuckDB's ``USING SAMPLE p%``, ``TABLESAMPLE p%`` and ``USING SAMPLE n ROWS`` (were refused by name).

Properties, not DuckDB's rows (each engine draws its own): ``n ROWS`` gives n distinct rows of the table (all
of them when it has fewer), 0% none, 100% all, a percentage of 4,000 rows a count far inside its binomial
bounds (50%: within 2,000 +- 400, over 12 standard deviations, so the test does not fail by chance), a
sample's rows are rows of the table, WHERE applies after USING SAMPLE, an empty table gives none. A seed, a
method with a size and ``n ROWS`` over a join stay refused naming TABLESAMPLE and the position.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import session_with_tables
from gpu_engine.errors import PlanError

ROWS = 4000
T = pa.table({"k": pa.array(list(range(ROWS)), pa.int32()), "s": pa.array(["é" * (i % 3) for i in range(ROWS)])})
U = pa.table({"k": pa.array(list(range(10)), pa.int32())})
TABLES = {"t": T, "u": U, "e": T.slice(0, 0)}

CHECKS = {
    "SELECT count(*), count(DISTINCT k), min(k) >= 0, max(k) < 4000 FROM t USING SAMPLE 10 ROWS":
        lambda r: r == (10, 10, True, True),
    "SELECT count(*) FROM u USING SAMPLE 50 ROWS": lambda r: r == (10,),
    "SELECT count(*) FROM t USING SAMPLE 0%": lambda r: r == (0,),
    "SELECT count(*) FROM t TABLESAMPLE 100%": lambda r: r == (ROWS,),
    "SELECT count(*) FROM t USING SAMPLE 50%": lambda r: 1600 <= r[0] <= 2400,
    "SELECT count(*), max(x.k) < 1000 FROM t AS x USING SAMPLE 50% WHERE x.k < 1000": lambda r: 300 <= r[0] <= 700
        and r[1],
    "SELECT count(*) FROM t TABLESAMPLE 50% JOIN u ON t.k = u.k": lambda r: 0 <= r[0] <= 10,
    "SELECT count(*) FROM (SELECT * FROM t USING SAMPLE 5 ROWS) x JOIN t ON x.k = t.k": lambda r: r == (5,),
    "SELECT count(*) FROM e USING SAMPLE 10%": lambda r: r == (0,),
    "SELECT count(*) FROM e USING SAMPLE 3 ROWS": lambda r: r == (0,),
}


@pytest.mark.parametrize("sql", list(CHECKS))
def test_sample_properties_on_cpu(sql):
    row = tuple(session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=500).sql(sql).to_pylist()[0].values())
    assert CHECKS[sql](row), (sql, row)


def test_sample_properties_on_each_device(device_name):
    session = session_with_tables(TABLES, device=device_name, drivers=2, batch_rows=500)
    for sql in list(CHECKS)[:3]:
        assert CHECKS[sql](tuple(session.sql(sql).to_pylist()[0].values())), sql


@pytest.mark.parametrize("sql", ["SELECT count(*) FROM t USING SAMPLE 10% (bernoulli, 42)",
                                 "SELECT count(*) FROM t JOIN u ON t.k = u.k USING SAMPLE 5 ROWS"])
def test_unsupported_samples_are_refused(sql):
    with pytest.raises(PlanError, match=r"(?s)TABLESAMPLE.*USING SAMPLE p%.*line 1, column"):
        session_with_tables(TABLES, device="cpu").sql(sql)
