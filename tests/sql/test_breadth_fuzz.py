"""The breadth SQL fuzz (tests/sql/breadth_queries.py: windows, set operations, grouping sets, the aggregate and
scalar function libraries, casts, QUALIFY, GROUP BY ALL, subqueries in expressions, VALUES, views) on fixed
seeds against DuckDB.

Every shape runs a few seeds on ``cpu`` unfused (no generated kernel to compile per query) and a few tiny ones
on the second device. A seed must not be wrong, crash with a raw Python exception, or raise while DuckDB
answers; a refusal (the engine's own error at plan time) is allowed for at most a fifth of the seeds, so the
fuzz keeps testing something. bench/sql_fuzz_breadth.py runs thousands of seeds.
"""

from __future__ import annotations

import os

import pytest

from breadth_queries import SHAPES, breadth_session, generate_case, reference_connection, run_case, tables

CPU_SEEDS = range(0, 3 * len(SHAPES))  # three of each shape
SECOND_DEVICE_SEEDS = (0, 4, 18, 41)  # ranks, set operations, grouping sets, ROWS frames


@pytest.fixture(scope="module")
def breadth():
    """Return ``run(seeds, device)``: the outcomes of the seeds' cases, a session per driver/batch setting."""
    data = tables()
    connection = reference_connection(data)
    sessions = {}

    def run(seeds, device):
        outcomes = []
        for seed in seeds:
            key = (seed % 9, device)
            if key not in sessions:
                sessions[key] = breadth_session(seed, device, data, fuse=False)
            outcomes.append(run_case(generate_case(seed), sessions[key], connection))
        return outcomes

    yield run
    connection.close()


def _assert_passed(outcomes, most_refused: float = 0.2) -> None:
    bad = [o for o in outcomes if o.status not in ("ok", "refused", "both_raised")]
    assert not bad, f"{len(bad)} of {len(outcomes)} seeds failed:\n" + "\n".join(
        f"seed {o.case.seed} ({o.case.shape}, {o.status}): {o.case.sql}\n  {o.detail}" for o in bad)
    refused = [o for o in outcomes if o.status == "refused"]
    assert len(refused) <= most_refused * len(outcomes), "the engine refused too many generated queries:\n" + "\n".join(
        f"seed {o.case.seed}: {o.case.sql}\n  {o.detail}" for o in refused)


def test_generated_breadth_queries_match_duckdb(breadth):
    _assert_passed(breadth(CPU_SEEDS, "cpu"))


def _second_device():
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    return pytest.param("cuda-sim" if simulated else "cuda", marks=[] if simulated else [pytest.mark.gpu])


@pytest.mark.parametrize("device_name", [_second_device()])
def test_generated_breadth_queries_on_the_second_device(breadth, device_name):
    _assert_passed(breadth(SECOND_DEVICE_SEEDS, device_name), most_refused=0.0)


def test_the_breadth_generator_covers_issue_30_and_is_reproducible():
    cases = [generate_case(seed) for seed in range(600)]
    assert {case.shape for case in cases} == set(SHAPES)
    assert generate_case(11) == generate_case(11)
    text = " ".join(case.sql for case in cases)
    for construct in ("ROWS BETWEEN", "RANGE BETWEEN", "GROUPS BETWEEN", "IGNORE NULLS", "NULLS FIRST", "ntile(",
                      "lag(", "nth_value(", "percent_rank()", "INTERSECT ALL", "EXCEPT ALL", "UNION ALL", "ROLLUP",
                      "CUBE", "GROUPING SETS", "grouping(", "stddev_samp(", "corr(", "regr_slope(", "median(",
                      "quantile_disc(", "WITHIN GROUP", "approx_count_distinct(", "string_agg(", "bool_and(",
                      "bit_xor(", "arg_min(", "count_if(", "mode(", "product(", "FILTER (WHERE", "DISTINCT",
                      "TRY_CAST(", "QUALIFY", "GROUP BY ALL", "ANY (", "ALL (", "EXISTS", "VALUES", "日本", "é",
                      "DECIMAL", "DATE '", "FROM e", "FROM one"):
        assert construct in text, construct
    assert any(case.setup for case in cases)
    assert any("SELECT" in case.sql and " FROM " not in case.sql for case in cases)
