"""The differential SQL fuzz (tests/sql/fuzz_queries.py) on fixed seeds: DuckDB's answers and ternary partitions.

Each seed's generated query (over NaN, -0.0, NULL keys, empty tables and row groups) must equal DuckDB's
multiset of rows, and its TRUE/FALSE/NULL parts under a random predicate must add up to the whole (TLP).
On ``cpu`` 180 seeds run unfused (the eager operators: no generated kernel to compile per query), over
the driver counts and batch sizes the seed picks, in chunks so pytest-xdist can share them; a few seeds run
fused, and a few tiny ones on the second device (the CUDA simulator, or a real GPU). A query the engine
refuses as unsupported is skipped and counted; a chunk may skip at most a fifth of its seeds, so the fuzz
keeps testing something. bench/sql_fuzz.py runs many more seeds.
"""

from __future__ import annotations

import os

import pyarrow.compute as pc
import pytest

from fuzz_queries import SHAPES, FuzzCase, fuzz_session, generate_case, reference_connection, run_case, write_tables

CHUNK = 30
CPU_SEEDS = range(120)  # bench/sql_fuzz.py runs thousands; CI keeps the suite under 20 minutes
FUSED_SEEDS = (2, 20, 13)  # group by, join + aggregate, three-way join: fused filters, probes and aggregations
SECOND_DEVICE_SEEDS = (1, 7, 16, 8)  # aggregate, semi join, group by, order by + limit


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    """Return ``run(seeds, device, fuse)``: the outcomes of the seeds' cases, sessions shared per setting."""
    paths = write_tables(tmp_path_factory.mktemp("sql_fuzz"))
    connection = reference_connection(paths)
    sessions = {}

    def run(seeds, device: str, fuse: bool | None):
        outcomes = []
        for seed in seeds:
            key = (seed % 18, device, fuse)
            if key not in sessions:
                sessions[key] = fuzz_session(seed, device, paths, fuse)
            outcomes.append(run_case(generate_case(seed), sessions[key], connection))
        return outcomes

    yield run
    connection.close()


def _assert_passed(outcomes, most_skipped: float = 0.2) -> None:
    failed = [o for o in outcomes if o.status == "failed"]
    assert not failed, f"{len(failed)} of {len(outcomes)} seeds failed:\n" + "\n".join(
        f"seed {o.case.seed} ({o.case.shape}): {o.case.sql}\n  {o.detail}" for o in failed)
    skipped = [o for o in outcomes if o.status == "skipped"]
    assert len(skipped) <= most_skipped * len(outcomes), "the engine refused too many generated queries:\n" + "\n".join(
        f"seed {o.case.seed}: {o.detail}" for o in skipped)


@pytest.mark.parametrize("start", range(CPU_SEEDS.start, CPU_SEEDS.stop, CHUNK))
def test_generated_queries_match_duckdb_and_their_ternary_partitions(fuzz, start):
    outcomes = fuzz(range(start, start + CHUNK), "cpu", False)
    _assert_passed(outcomes)
    assert sum("tlp" in o.checks for o in outcomes) >= CHUNK // 3  # most shapes partition


def test_generated_queries_fused(fuzz):
    _assert_passed(fuzz(FUSED_SEEDS, "cpu", True), most_skipped=0.0)


def _second_device():
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    return pytest.param("cuda-sim" if simulated else "cuda", marks=[] if simulated else [pytest.mark.gpu])


@pytest.mark.parametrize("device_name", [_second_device()])
def test_generated_queries_on_the_second_device(fuzz, device_name):
    _assert_passed(fuzz(SECOND_DEVICE_SEEDS, device_name, None), most_skipped=0.0)


def test_the_generator_covers_every_shape_and_is_reproducible():
    cases = [generate_case(seed) for seed in CPU_SEEDS]
    assert {case.shape for case in cases} == set(SHAPES)
    assert generate_case(7) == generate_case(7)
    assert len({case.sql for case in cases}) > 0.95 * len(cases)
    text = " ".join(case.sql + " " + (case.tlp_predicate or "") for case in cases)
    for construct in ("NaN", "-0.0", "IS NULL", "NOT IN", "EXISTS", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "LIKE",
                      "BETWEEN", "CASE WHEN", "1 = 0", "NULL", "HAVING", "DISTINCT", "LIMIT", "FROM e ", "FROM r "):
        assert construct in text, construct


# ------------------------------------------------------------------------------ the checker can fail
class _DroppingSession:
    """Answer as ``session`` does, but lose the rows of every ``... IS NULL`` part (a broken NULL partition)."""

    def __init__(self, session):
        self.session = session

    def sql(self, text):
        result = self.session.sql(text)
        return result.slice(0, 0) if text.endswith(") IS NULL)") else result


def test_a_lost_null_partition_fails_the_ternary_check(tmp_path):
    paths = write_tables(tmp_path)
    connection = reference_connection(paths)
    case = FuzzCase(seed=0, shape="project", sql="SELECT t.i AS c0 FROM a t WHERE TRUE",
                    tlp="SELECT t.i AS c0 FROM a t WHERE {where}", tlp_predicate="t.i > 3")
    session = fuzz_session(0, "cpu", paths, False)
    assert run_case(case, session, connection).status == "ok"
    outcome = run_case(case, _DroppingSession(session), connection)
    assert outcome.status == "failed" and "do not add up" in outcome.detail


def test_aggregate_parts_recombine_per_group(tmp_path):
    paths = write_tables(tmp_path)
    connection = reference_connection(paths)
    case = FuzzCase(seed=0, shape="group_by", sql="SELECT t.fk AS g0, count(*) AS n, sum(t.i) AS a0, min(t.f) AS a1, "
                                                  "max(t.s) AS a2 FROM a t WHERE TRUE GROUP BY t.fk",
                    tlp="SELECT t.fk AS g0, count(*) AS n, sum(t.i) AS a0, min(t.f) AS a1, max(t.s) AS a2 FROM a t "
                        "WHERE {where} GROUP BY t.fk", tlp_predicate="t.k < 3",
                    tlp_aggregates=("key", "count", "sum", "min", "max"))
    outcome = run_case(case, fuzz_session(0, "cpu", paths, False), connection)
    assert outcome.status == "ok" and outcome.checks == ["duckdb", "tlp"], outcome.detail

    class Miscounting:
        def __init__(self, session):
            self.session = session

        def sql(self, text):
            result = self.session.sql(text)
            if "NOT (t.k < 3)" in text:  # count one row too many in the FALSE part
                counts = pc.add(result.column("n"), 1)
                result = result.set_column(1, "n", counts)
            return result

    outcome = run_case(case, Miscounting(fuzz_session(0, "cpu", paths, False)), connection)
    assert outcome.status == "failed" and "do not add up" in outcome.detail
