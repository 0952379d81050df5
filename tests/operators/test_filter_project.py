"""FilterProject against DuckDB: filters, projections, both fused, on every device and driver count.

Every test runs twice: with the predicate and the computed fixed-width projections compiled into generated
kernels (``fuse=True``, :mod:`gpu_engine.codegen.fused_filter_kernel`,
:mod:`gpu_engine.codegen.fused_project_kernel`) and evaluated eagerly node by node (``fuse=False``).
"""

import re

import pytest

from gpu_engine import ExecutionError, Session
from gpu_engine.plans import PlanBuilder


@pytest.fixture(params=[True, False], ids=["compiled", "eager"])
def session(request, device_name, drivers, batch_rows, table) -> Session:
    """Yield a Session over ``t`` (several splits) with compiled or eager predicates."""
    s = Session(device=device_name, drivers=drivers, batch_rows=batch_rows, fuse=request.param)
    s.register("t", table, split_rows=max(1, table.num_rows // 5))
    return s


def _filter_stats(session: Session) -> list:
    by_node = session.last_stats().operator_stats_by_node()
    return [s for stats in by_node.values() for s in stats if s.operator_type == "FilterProject"]

FILTERS = [
    "v_int > 0",
    "k_int IS NULL OR v_float < 0",
    "k_str = 'apple' AND v_dec >= 0",
    "k_dict IN ('apple', 'banana')",
    "d_date BETWEEN DATE '1995-01-01' AND DATE '1996-06-30'",
    "k_str LIKE '%an%'",
    "NOT (k_int < 5)",
    "v_int > 10000000",  # selects nothing
]

PROJECTIONS = [
    ["k_int", "v_int"],
    ["v_int + k_int AS s", "v_dec * 2 AS d2", "v_float / 3 AS f"],
    ["CASE WHEN v_int > 0 THEN 'pos' WHEN v_int < 0 THEN 'neg' END AS sign", "EXTRACT(year FROM d_date) AS y"],
    ["SUBSTRING(k_str, 2, 3) AS sub", "v_dec - 1 AS dm", "k_dict AS kd"],
    ["CASE WHEN k_str = 'fig' THEN v_int ELSE -v_int END AS c", "k_int > 3 AND v_float < 0 AS b",
     "d_date < DATE '1995-01-01' AS early", "v_dec + v_dec AS twice", "k_dict IN ('apple', 'fig') AS fruit"],
]
#: Per projection: whether any column is computed in the generated kernel (a computed fixed-width value).
COMPILED_PROJECTIONS = [False, True, True, True, True]


def _sql_projection(items):
    return ", ".join(items).replace("EXTRACT(year FROM d_date)", "CAST(EXTRACT(year FROM d_date) AS BIGINT)")


@pytest.mark.parametrize("predicate", FILTERS)
def test_filter(session, assert_query, predicate):
    plan = PlanBuilder(session.catalog).table_scan("t").filter(predicate).plan()
    assert_query(plan, f"SELECT * FROM t WHERE {predicate}")
    compiled = sum(s.runtime.get("compiled_predicate_batches", 0) for s in _filter_stats(session))
    assert (compiled > 0) == session.config.fuse  # every predicate here has a generated kernel


@pytest.mark.parametrize("step,argument", [
    ("filter", "v_int * 4611686018427387904 > 0"),
    ("filter", "k_str = 'apple' AND v_int + 9223372036854775000 > 0"),
    ("project", ["k_int", "v_int * 4611686018427387904 AS x"]),
    ("project", ["SUBSTRING(k_str, 1, 1) AS s", "v_int + 9223372036854775000 AS y"]),
], ids=["filter-mul", "filter-add", "project-mul", "project-add-beside-a-string"])
def test_an_overflow_raises_the_eager_error(device_name, table, step, argument):
    """A compiled predicate or projection that overflows raises what the eager evaluator raises."""
    errors = []
    for fuse in (True, False):
        session = Session(device=device_name, drivers=1, fuse=fuse)
        session.register("t", table)
        builder = PlanBuilder(session.catalog).table_scan("t")
        with pytest.raises(ExecutionError) as raised:
            session.execute((builder.filter(argument) if step == "filter" else builder.project(argument)).plan())
        errors.append(re.sub(r" \(first at row \d+\)", "", str(raised.value)))
    assert errors[0] == errors[1] and "Overflow" in errors[0]


@pytest.mark.parametrize("projection,compiled", list(zip(PROJECTIONS, COMPILED_PROJECTIONS)), ids=lambda p: str(p)[:12])
def test_project(session, assert_query, projection, compiled):
    """Computed fixed-width columns come from one generated kernel with fusion on; strings stay eager beside them."""
    plan = PlanBuilder(session.catalog).table_scan("t").project(projection).plan()
    assert_query(plan, f"SELECT {_sql_projection(projection)} FROM t")
    batches = sum(s.runtime.get("compiled_projection_batches", 0) for s in _filter_stats(session))
    assert (batches > 0) == (compiled and session.config.fuse)


@pytest.mark.parametrize("predicate,projection", [(FILTERS[0], PROJECTIONS[1]), (FILTERS[2], PROJECTIONS[2]), (FILTERS[3], PROJECTIONS[0])])
def test_filter_then_project(session, assert_query, predicate, projection):
    plan = PlanBuilder(session.catalog).table_scan("t").filter(predicate).project(projection).plan()
    assert_query(plan, f"SELECT {_sql_projection(projection)} FROM t WHERE {predicate}")


def test_drivers_and_runs_of_a_kept_plan_plan_its_kernels_once(monkeypatch):
    """The programs of a FilterProject's kernels (planned, and tried on the generator) and its eager expressions
    are made once per node object: not by each driver, one after another in Task.start, nor again on every run of
    a plan the Session kept (each driver did: two drivers, two runs, four of each). Nothing compiles (the lowest
    tier runs the batches); the rows are the filter's and projection's."""
    import pyarrow as pa

    from gpu_engine.codegen.compiled_predicate import CompiledPredicate
    from gpu_engine.codegen.compiled_projection import CompiledProjection

    planned = []
    for kind in (CompiledPredicate, CompiledProjection):
        original = kind.of
        monkeypatch.setattr(kind, "of", classmethod(
            lambda cls, *args, original=original, **kwargs: planned.append(cls.__name__) or original(*args, **kwargs)))
    session = Session(device="cpu", drivers=2, compile_mode="lowest")
    session.register("t", pa.table({"k": pa.array(range(40), pa.int64()), "v": pa.array(range(40, 0, -1), pa.int64())}),
                     split_rows=10)
    plan = PlanBuilder(session.catalog).table_scan("t").filter("v > 3").project(["k", "v * 2 AS w"]).plan()
    for _ in range(2):
        rows = sorted(session.execute(plan).to_pylist(), key=lambda row: row["k"])
        assert rows == [{"k": k, "w": 2 * (40 - k)} for k in range(37)]
    assert sorted(planned) == ["CompiledPredicate", "CompiledProjection"]


# Shared subexpressions are evaluated once a batch on every row; these sit only in CASE branches (coalesce is a
# CASE) and fail on rows the branches never take (overflow where b >= 10, a cast of 'x'), where DuckDB answers.
BRANCH_SHARING = [
    "SELECT CASE WHEN b < 10 THEN a * b END AS x, CASE WHEN b < 10 THEN a * b + 1 END AS y FROM t",
    "SELECT coalesce(CASE WHEN b < 10 THEN a * b END, 0) + coalesce(CASE WHEN b < 10 THEN a * b END, 1) AS s "
    "FROM t WHERE coalesce(CASE WHEN b < 10 THEN a * b END, 0) < 100",
    "SELECT CASE WHEN s < 'x' THEN CAST(s AS INTEGER) END AS p, CASE WHEN s < 'x' THEN CAST(s AS INTEGER) + 1 END AS q "
    "FROM t",  # a text that does not parse
]


@pytest.mark.parametrize("fuse,mode", [(False, "inline"), (True, "lowest")], ids=["eager", "lowest-tier"])
def test_a_subexpression_shared_by_case_branches_fails_no_row_they_skip(device_name, fuse, mode):
    import pyarrow as pa
    from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables

    t = pa.table({"a": pa.array([3, 2**40, 5, 2**40], pa.int64()), "b": pa.array([2, 2**30, 4, 2**31], pa.int64()),
                  "s": pa.array(["1", "x", "2", "y"])})
    session = Session(device=device_name, drivers=1, fuse=fuse, compile_mode=mode)
    session.register("t", t)
    with duckdb_with_tables({"t": t}) as duckdb:
        for sql in BRANCH_SHARING:
            assert_same_rows(session.sql(sql), duckdb_table(duckdb, sql))
    # Shared where it is computed on every row: the overflow is the query's (and DuckDB's) error.
    with pytest.raises(ExecutionError, match="Overflow"):
        session.sql("SELECT a * b AS x, CASE WHEN b < 10 THEN a * b END AS y FROM t")

