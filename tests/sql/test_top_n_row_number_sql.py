"""A filter bounding row_number()/rank()/dense_rank() plans as a TopNRowNumber (issue 30 item 1), against DuckDB.

Checked: QUALIFY and a derived table's (a CTE's) WHERE; ``<=``, ``<``, ``= 1``, the constant on either side, a
decimal bound, other conjuncts kept beside it; the number projected or not (the node then produces no
number column); ties (rank keeps them), NULL keys, limits past every partition, empty input; at 1 and 3
drivers with batches of 2 rows; the plan holds a TopNRowNumber and no Window; 30 random such filters (fixed
seed). Filters the rewrite must leave alone (a lower bound, an OR, a window with another function beside the
number) still plan a Window and still answer as DuckDB does.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import rows_mismatch, session_with_tables

from gpu_engine import Session
from gpu_engine.plans import walk_plan
from gpu_engine.plans.nodes import TopNRowNumberNode, WindowNode

TABLES = {
    "t": pa.table({
        "k": pa.array([1, 1, 2, None, 2, 1, None, 3, 2, 1, 4, 2, 1, 2], pa.int32()),
        "o": pa.array([3, 1, 2, 2, None, 1, 5, 7, 2, None, 1, 9, 3, 2], pa.int64()),
        "s": pa.array(["a", "b", "a", "b", "a", "b", "a", "c", None, "a", "c", "b", "a", "c"]),
        "id": pa.array(range(14), pa.int64()),
    }),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

# (query, columns whose values are defined whatever row_number picks among ties; None: whole rows)
PUSHED = [
    ("SELECT k, o, id FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY o DESC, id) <= 2", None),
    ("SELECT k, o FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY o) = 1", None),
    ("SELECT * FROM (SELECT k, s, o, row_number() OVER (PARTITION BY k, s ORDER BY o NULLS FIRST) AS rn FROM t) x "
     "WHERE rn < 3", ("k", "s", "o", "rn")),
    ("SELECT k, o FROM (SELECT k, o, rank() OVER (PARTITION BY k ORDER BY o DESC) AS r FROM t) x WHERE 2 >= r", None),
    ("SELECT k, o, r FROM (SELECT k, o, dense_rank() OVER (PARTITION BY k ORDER BY o) AS r FROM t) x "
     "WHERE r <= 2 AND o > 1", None),
    ("WITH ranked AS (SELECT s, id, row_number() OVER (PARTITION BY s ORDER BY id DESC) AS rn FROM t) "
     "SELECT s, id, rn * 10 AS tens FROM ranked WHERE rn <= 2.5", None),
    ("SELECT k, id FROM (SELECT k, id, row_number() OVER (PARTITION BY k ORDER BY id) AS rn FROM t) x "
     "WHERE rn <= 100", None),
    ("SELECT s, o, id FROM t QUALIFY row_number() OVER (ORDER BY o DESC NULLS LAST, id) <= 3", None),
    ("SELECT k, count(*) AS n FROM (SELECT k, row_number() OVER (PARTITION BY k ORDER BY o) AS rn FROM t) x "
     "WHERE rn = 2 GROUP BY k", None),
    ("SELECT k, o FROM e QUALIFY row_number() OVER (PARTITION BY k ORDER BY o) <= 2", None),
    # No column of the top rows read above (an empty projection), a lower bound kept beside the limit, a TopN.
    ("SELECT count(*) AS c FROM (SELECT row_number() OVER (PARTITION BY k ORDER BY o) AS rn FROM t) x "
     "WHERE rn <= 2", None),
    ("SELECT k, o FROM t QUALIFY rank() OVER (PARTITION BY k ORDER BY o DESC) BETWEEN 2 AND 3", None),
    ("SELECT k, rn FROM (SELECT k, row_number() OVER (PARTITION BY k ORDER BY o, id) AS rn FROM t) x "
     "WHERE rn <= 1 ORDER BY k NULLS FIRST LIMIT 3", None),
]
KEPT_AS_WINDOWS = [
    "SELECT k, o FROM (SELECT k, o, row_number() OVER (PARTITION BY k ORDER BY o, id) AS rn FROM t) x WHERE rn >= 2",
    "SELECT k, o FROM (SELECT k, o, id, row_number() OVER (PARTITION BY k ORDER BY o, id) AS rn FROM t) x "
    "WHERE rn <= 1 OR id = 3",
    "SELECT k, o, n FROM (SELECT k, o, row_number() OVER (PARTITION BY k ORDER BY o, id) AS rn, "
    "count(*) OVER (PARTITION BY k ORDER BY o, id) AS n FROM t) x WHERE rn <= 2",
]


def _session(device_name, drivers, batch_rows) -> Session:
    # Generated kernels compile in the background (the product's default): the answers come from the lowest
    # tier, the plans (what this file is about) are the same, and CI does not wait for numba.
    return session_with_tables(TABLES, split_rows=4, device=device_name, drivers=drivers, batch_rows=batch_rows,
                               compile_mode="background")


def _check(session, sql, columns, reference) -> str | None:
    actual, expected = session.sql(sql), reference.sql(sql).to_arrow_table()
    if list(actual.schema.names) != list(expected.schema.names):
        return f"{sql}: names {actual.schema.names} != DuckDB's {expected.schema.names}"
    if columns is not None:
        actual, expected = actual.select(list(columns)), expected.select(list(columns))
    problem = rows_mismatch(actual, expected)
    return None if problem is None else f"{sql}\n  {problem}"


@pytest.mark.parametrize("drivers, batch_rows", [(1, 1 << 16), (3, 2)], ids=["drivers1", "drivers3-batches2"])
def test_bounded_ranks_plan_a_top_n_row_number_and_match_duckdb(drivers, batch_rows, reference):
    session = _session("cpu", drivers, batch_rows)
    problems = []
    for sql, columns in PUSHED:
        kinds = {type(node) for node in walk_plan(session.sql_plan(sql))}
        if TopNRowNumberNode not in kinds or WindowNode in kinds:
            problems.append(f"{sql}: planned {sorted(kind.__name__ for kind in kinds)}")
        problems.append(_check(session, sql, columns, reference))
    problems = [problem for problem in problems if problem]
    assert not problems, "\n".join(problems)


def test_the_number_column_is_produced_only_when_read(reference):
    session = _session("cpu", 1, 16)
    (dropped,) = [n for n in walk_plan(session.sql_plan(PUSHED[0][0])) if isinstance(n, TopNRowNumberNode)]
    (kept,) = [n for n in walk_plan(session.sql_plan(PUSHED[2][0])) if isinstance(n, TopNRowNumberNode)]
    (decimal,) = [n for n in walk_plan(session.sql_plan(PUSHED[5][0])) if isinstance(n, TopNRowNumberNode)]
    assert (dropped.row_number_name, dropped.limit, dropped.function) == (None, 2, "row_number")
    assert kept.row_number_name is not None and kept.limit == 2
    assert decimal.row_number_name is not None and decimal.limit == 2


def test_filters_that_do_not_bound_the_number_keep_the_window(reference):
    session = _session("cpu", 2, 3)
    problems = []
    for sql in KEPT_AS_WINDOWS:
        kinds = {type(node) for node in walk_plan(session.sql_plan(sql))}
        if TopNRowNumberNode in kinds or WindowNode not in kinds:
            problems.append(f"{sql}: planned {sorted(kind.__name__ for kind in kinds)}")
        problems.append(_check(session, sql, None, reference))
    problems = [problem for problem in problems if problem]
    assert not problems, "\n".join(problems)


def test_bounded_ranks_match_duckdb_on_each_device(device_name, reference):
    session = _session(device_name, 2, 3)
    problems = [_check(session, sql, columns, reference) for sql, columns in (PUSHED[0], PUSHED[3])]
    problems = [problem for problem in problems if problem]
    assert not problems, "\n".join(problems)


def test_random_bounded_ranks_match_duckdb(reference):
    # Random filters on a ranking column (fixed seed): functions, keys, directions, comparisons on either
    # side, bounds from below 1 to past every partition, the number read or not; each checked against DuckDB.
    import random

    rng = random.Random(30)
    session = _session("cpu", 2, 3)
    problems = []
    for _ in range(30):
        function = rng.choice(["row_number", "rank", "dense_rank"])
        partition = rng.sample(["k", "s"], rng.randint(0, 2))
        order = [f"{key} {rng.choice(['ASC', 'DESC'])} NULLS {rng.choice(['FIRST', 'LAST'])}"
                 for key in rng.sample(["o", "s", "id"], rng.randint(1, 2))]
        if function == "row_number":
            order.append("id")  # a total order: row_number's rows are then defined
        over = (f"PARTITION BY {', '.join(partition)} " if partition else "") + f"ORDER BY {', '.join(order)}"
        bound = rng.choice([0, 1, 2, 3, 5, 40])
        condition = rng.choice([f"n <= {bound}", f"n < {bound}", f"n = {bound}", f"{bound} >= n", f"{bound} > n",
                                f"n <= {bound} AND o > 1", f"n <= {bound}.5"])
        columns = rng.choice(["k, s, o, id", "k, o, id, n", "id, n * 2 AS twice"])
        sql = (f"SELECT {columns} FROM (SELECT k, s, o, id, {function}() OVER ({over}) AS n FROM t) x "
               f"WHERE {condition}")
        kinds = {type(node) for node in walk_plan(session.sql_plan(sql))}
        if TopNRowNumberNode not in kinds:
            problems.append(f"{sql}: planned {sorted(kind.__name__ for kind in kinds)}")
        problems.append(_check(session, sql, None, reference))
    problems = [problem for problem in problems if problem]
    assert not problems, "\n".join(problems)
