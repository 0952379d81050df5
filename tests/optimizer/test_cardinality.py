"""Row and distinct-value estimates over typed plans (gpu_engine.optimizer.cardinality).

The typed estimate of a scan and its filter must equal the one the SQL planner gave the same relation (join
ordering moves to the typed plan on these numbers: a disagreement would change plans), and each node's estimate
must follow from the Parquet footer's statistics by the documented rules, NULLs and empty tables included.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine import Session
from gpu_engine.optimizer.cardinality import estimate
from gpu_engine.plans import PlanBuilder, tpch
from gpu_engine.plans.nodes import FilterNode
from gpu_engine.sql import RegisteredStatistics

#: k: 0..99 (100 distinct), v: 0..9 with every tenth value NULL, d: 100 days from 2020-01-01, s: strings.
SMALL = pa.table({
    "k": pa.array(range(100), pa.int64()),
    "v": pa.array([None if i % 10 == 0 else i % 10 for i in range(100)], pa.int32()),
    "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(100)], pa.date32()),
    "s": pa.array([f"s{i % 7}" for i in range(100)]),
})


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cardinality")
    session = Session(device="cpu")
    pq.write_table(SMALL, folder / "small.parquet")
    pq.write_table(SMALL.slice(0, 0), folder / "empty.parquet")
    session.register("small", str(folder / "small.parquet"))
    session.register("empty", str(folder / "empty.parquet"))
    return {"small": SMALL.schema, "empty": SMALL.schema}, RegisteredStatistics(session._tables)


def _rows(tables, build) -> float:
    catalog, statistics = tables
    return estimate(build(PlanBuilder(catalog)).plan(), statistics).rows


def test_a_scan_takes_its_rows_and_distinct_counts_from_the_parquet_footer(tables):
    catalog, statistics = tables
    scan = estimate(PlanBuilder(catalog).table_scan("small", ["k", "v", "d", "s"]).plan(), statistics)
    assert scan.rows == 100
    assert scan.columns["k"].ndv == 100 and scan.columns["d"].ndv == 100
    assert scan.columns["v"].ndv == 9 and (scan.columns["v"].minimum, scan.columns["v"].maximum) == (1, 9)  # NULLs
    assert scan.columns["s"].ndv == 0  # unknown: no dictionary counts (STRING_DISTINCT_VALUES off)
    empty = estimate(PlanBuilder(catalog).table_scan("empty").plan(), statistics)
    assert empty.rows == 0


@pytest.mark.parametrize("predicate, rows", [
    ("k = 5", 1.0),                     # 1 / NDV of 100 rows
    ("5 = k", 1.0),
    ("v = 3", 100 / 9),
    ("k <> 5", 99.0),
    ("k < 25", 100 * 25 / 99),          # the share of [0, 99] below 25
    ("k >= 25 AND k < 75", 100 * (74 / 99 + 75 / 99 - 1)),  # two bounds of one column: the range between
    ("k IN (1, 2, 3)", 3.0),
    ("k = 1 OR k = 2", 100 * (0.01 + 0.01 - 0.0001)),
    ("NOT (k = 1)", 99.0),
    ("s = 's1'", 10.0),                 # unknown NDV: 1/10
    ("s LIKE 's%'", 10.0),
    ("s NOT LIKE 's%'", 90.0),
    ("v IS NULL", 10.0),
    ("v IS NOT NULL", 90.0),
    ("d >= DATE '2020-02-20'", 100 * (1 - 50 / 99)),
    ("k < 1000", 100.0),                # capped at every row
    ("k + 1 = v", 10.0),                # a column equal to no constant: 1/10
    ("k + 1 > v * 2", 50.0),            # nothing known: 1/2
])
def test_a_filter_keeps_the_share_its_conjuncts_estimate(tables, predicate, rows):
    assert _rows(tables, lambda b: b.table_scan("small").filter(predicate)) == pytest.approx(rows)


def test_a_filter_over_an_empty_table_keeps_no_rows_and_caps_distinct_counts(tables):
    assert _rows(tables, lambda b: b.table_scan("empty").filter("k = 5")) == 0
    catalog, statistics = tables
    filtered = estimate(PlanBuilder(catalog).table_scan("small").filter("k < 10").plan(), statistics)
    assert filtered.columns["k"].ndv == pytest.approx(filtered.rows)  # 100 distinct values capped at ~10 rows
    assert filtered.columns["v"].ndv == 9


def test_projects_rename_columns_and_limits_cap_rows(tables):
    catalog, statistics = tables
    plan = (PlanBuilder(catalog).table_scan("small").project(["k AS key", "k + 1 AS next"]).filter("key = 7")
            .limit(5).plan())
    assert estimate(plan, statistics).rows == 1.0  # key keeps k's 100 distinct values: 1/100 of 100 rows
    top = estimate(PlanBuilder(catalog).table_scan("small").limit(5, offset=97).plan(), statistics)
    assert top.rows == 3.0 and top.columns["k"].ndv == 3.0
    assert estimate(PlanBuilder(catalog).values(SMALL).plan(), statistics).rows == 100


def test_a_node_not_estimated_yet_is_unknown(tables):
    catalog, statistics = tables
    assert estimate(PlanBuilder(catalog).table_scan("small").aggregation(["v"], ["count(*) AS c"]).plan(),
                    statistics) is None
    assert estimate(PlanBuilder({"other": SMALL.schema}).table_scan("other").plan(), statistics) is None


@pytest.fixture(scope="module")
def tpch_session(tpch_data):
    from gpu_engine.connectors.tpch_data import register_tpch

    session = Session(device="cpu")
    register_tpch(session, tpch_data(0.01))
    return session


def test_tpch_scans_and_filters_are_estimated_as_the_sql_planner_estimated_them(tpch_session, monkeypatch):
    """Every filter the SQL planner puts over a relation the typed estimate reads (a scan, a filtered scan, a
    projection of one): the typed estimate of that Filter node equals the rows the planner gave it."""
    from gpu_engine.sql import predicates

    planned: list[tuple[FilterNode, float]] = []
    original = predicates.filtered

    def recording(planner, relation, conjuncts):
        result = original(planner, relation, conjuncts)
        if result is not relation:
            planned.append((result.node, result.rows))
        return result

    monkeypatch.setattr(predicates, "filtered", recording)
    import sys
    for module in [m for name, m in sys.modules.items() if name.startswith("gpu_engine.sql.")]:
        if getattr(module, "filtered", None) is original:
            monkeypatch.setattr(module, "filtered", recording)
    statistics = RegisteredStatistics(tpch_session._tables)
    compared, differing = 0, []
    for number in range(1, 23):
        planned.clear()
        tpch_session.sql_plan(tpch.sql(number, 0.01))
        for node, rows in planned:
            typed = estimate(node, statistics)
            if typed is None:
                continue  # a filter over a join or an aggregation: not estimated yet
            compared += 1
            if typed.rows != pytest.approx(rows, rel=1e-9):
                differing.append((number, node.predicate.sql(), rows, typed.rows))
    assert not differing
    assert compared >= 22  # every query filters at least one scan
