"""GroupId (Velox's GroupIdNode) under an aggregation against DuckDB's GROUPING SETS, ROLLUP and CUBE.

Each plan repeats the rows once per grouping set and aggregates by the keys and the group id; the group id is
turned into DuckDB's ``grouping()`` bit mask by a projection, so every row is compared with its set. Checked:
NULL keys in the data kept apart from a set's NULLs, plain and dictionary string keys, a set written twice
(its rows twice), CUBE of three keys, a key also aggregated, empty input (one row per set without keys), the
explicit partial/final form, at one and two drivers with small batches, on every device.
"""

from __future__ import annotations

import pytest

from duckdb_reference import assert_same_rows, duckdb_rows
from operator_tables import make_table

from gpu_engine import Session
from gpu_engine.errors import PlanError
from gpu_engine.plans import PlanBuilder, format_node, walk_plan

AGGREGATES = ["count(*) AS c", "sum(v_int) AS s", "min(v_dec) AS m", "avg(v_float) AS a"]
DUCKDB_AGGREGATES = "count(*) AS c, sum(v_int) AS s, min(v_dec) AS m, avg(v_float) AS a"


def _grouping_mask(keys: list[str], sets: list[list[str]]) -> str:
    """Return a projection turning the group id into DuckDB's grouping(keys): bit set = key not grouped."""
    width = len(keys)
    masks = [sum(1 << (width - 1 - i) for i, key in enumerate(keys) if key not in kept) for kept in sets]
    return "CASE " + " ".join(f"WHEN group_id = {i} THEN {mask}" for i, mask in enumerate(masks)) + " END AS g"


def _sets_sql(sets: list[list[str]]) -> str:
    return ", ".join("(" + ", ".join(kept) + ")" for kept in sets)


@pytest.fixture(params=[(1, 16), (2, 7)], ids=["drivers1", "drivers2-batches7"])
def session(request, device_name):
    drivers, batch_rows = request.param
    if device_name == "cuda-sim" and drivers == 1:
        pytest.skip("the simulator interprets every kernel: it runs the two-driver, small-batch case only")
    rows = 40 if device_name == "cuda-sim" else 600
    table = make_table(rows, seed=11)
    session = Session(device=device_name, drivers=drivers, batch_rows=batch_rows)
    session.register("t", table, split_rows=max(1, rows // 4))
    session.test_table = table
    return session


CASES = {
    "rollup": (["k_int", "k_str"], [["k_int", "k_str"], ["k_int"], []]),
    "cube3": (["k_int", "k_dict", "d_date"], [[a, b, c] for a in ("k_int", None) for b in ("k_dict", None)
                                               for c in ("d_date", None)]),
    "duplicate_sets": (["k_str", "k_int"], [["k_str"], ["k_str"], [], [], ["k_int"]]),
    "one_set": (["k_dict"], [["k_dict"]]),
}


@pytest.mark.parametrize("case", CASES)
def test_grouping_sets_match_duckdb(session, case):
    keys, sets = CASES[case]
    sets = [[key for key in kept if key is not None] for kept in sets]
    plan = (PlanBuilder(session.catalog).table_scan("t").group_id(sets, ["v_int", "v_dec", "v_float"])
            .aggregation(keys + ["group_id"], AGGREGATES)
            .project(keys + [_grouping_mask(keys, sets)] + ["c", "s", "m", "a"]).plan())
    expected = duckdb_rows(f"SELECT {', '.join(keys)}, grouping({', '.join(keys)}) AS g, {DUCKDB_AGGREGATES} "
                           f"FROM t GROUP BY GROUPING SETS ({_sets_sql(sets)})", t=session.test_table)
    assert_same_rows(session.execute(plan), expected)


def test_a_key_that_is_also_aggregated_is_summed_whole(session):
    plan = (PlanBuilder(session.catalog).table_scan("t")
            .group_id([["k"], []], ["k_int"], grouping_keys=[("k", "k_int")])
            .aggregation(["k", "group_id"], ["sum(k_int) AS s", "count(k_int) AS n"])
            .project(["k", "s", "n"]).plan())
    expected = duckdb_rows("SELECT k_int AS k, sum(k_int) AS s, count(k_int) AS n FROM t GROUP BY ROLLUP (k_int)",
                           t=session.test_table)
    assert_same_rows(session.execute(plan), expected)


def test_empty_input_gives_one_row_per_set_without_keys(session):
    sets = [["k_int"], [], ["k_str"], []]
    plan = (PlanBuilder(session.catalog).table_scan("t").filter("v_int > 100000000")
            .group_id(sets, ["v_int", "v_dec", "v_float"])
            .aggregation(["k_int", "k_str", "group_id"], AGGREGATES).project(["k_int", "k_str", "c", "s", "m", "a"])
            .plan())
    expected = duckdb_rows(f"SELECT k_int, k_str, {DUCKDB_AGGREGATES} FROM t WHERE v_int > 100000000 "
                           f"GROUP BY GROUPING SETS ({_sets_sql(sets)})", t=session.test_table)
    assert expected.num_rows == 2
    assert_same_rows(session.execute(plan), expected)


def test_explicit_partial_and_final_steps(session):
    keys, sets = CASES["rollup"]
    plan = (PlanBuilder(session.catalog).table_scan("t").filter("k_int < 3")
            .group_id(sets, ["v_int", "v_dec", "v_float"])
            .partial_aggregation(keys + ["group_id"], AGGREGATES).local_partition(keys + ["group_id"])
            .final_aggregation().project(keys + [_grouping_mask(keys, sets)] + ["c", "s", "m", "a"]).plan())
    expected = duckdb_rows(f"SELECT {', '.join(keys)}, grouping({', '.join(keys)}) AS g, {DUCKDB_AGGREGATES} "
                           f"FROM t WHERE k_int < 3 GROUP BY ROLLUP ({', '.join(keys)})", t=session.test_table)
    assert_same_rows(session.execute(plan), expected)


def test_explain_shows_keys_sets_inputs_and_global_sets():
    catalog = {"t": make_table(1).schema}
    plan = (PlanBuilder(catalog).table_scan("t", ["k_int", "k_str", "v_int"])
            .group_id([["k", "k_str"], ["k"], []], ["v_int", "k_int"], grouping_keys=[("k", "k_int"), "k_str"])
            .aggregation(["k", "k_str", "group_id"], ["sum(v_int) AS s"]).plan())
    assert [format_node(node) for node in walk_plan(plan)] == [
        "-- Aggregation[2][SINGLE [k, k_str, group_id] s := sum(v_int); global sets: group_id in (2)] -> "
        "k:int32, k_str:string, group_id:int64, s:decimal128(38, 0)",
        "-- GroupId[1][[k := k_int, k_str] sets: (k, k_str), (k), (); inputs: [v_int, k_int]; id: group_id] -> "
        "k:int32, k_str:string, v_int:int64, k_int:int32, group_id:int64",
        "-- TableScan[0][table: t, columns: k_int, k_str, v_int] -> k_int:int32, k_str:string, v_int:int64",
    ]


@pytest.mark.parametrize("sets, inputs, options, message", [
    ([["k_int"], ["nope"]], [], {}, "unknown column 'nope'"),
    ([], [], {}, "grouping_sets must be a non-empty list"),
    ([["k_int"]], ["k_int"], {}, "duplicate output column name 'k_int'"),
    ([["k_int"]], ["v_int"], {"group_id_name": "v_int"}, "duplicate output column name 'v_int'"),
    ([["k_int", "k_int"]], [], {}, "duplicate output column name 'k_int'"),
])
def test_malformed_group_ids_are_refused_with_the_node_named(sets, inputs, options, message):
    catalog = {"t": make_table(1).schema}
    with pytest.raises(PlanError) as info:
        PlanBuilder(catalog).table_scan("t").group_id(sets, inputs, **options)
    assert message in str(info.value) and "GroupId[1]" in str(info.value)


def test_a_grouping_set_aggregation_past_the_memory_cap_fails_and_the_session_keeps_working():
    from gpu_engine import MemoryCapExceeded

    table = make_table(20_000, seed=3)
    session = Session(device="cpu", drivers=1, batch_rows=1024, query_memory_limit_bytes=200_000, fuse=False)
    session.register("t", table, split_rows=4000)
    plan = (PlanBuilder(session.catalog).table_scan("t", ["v_int", "v_float"])
            .group_id([["v_int", "v_float"], ["v_int"], []], [])
            .aggregation(["v_int", "v_float", "group_id"], ["count(*) AS c"]).plan())
    with pytest.raises(MemoryCapExceeded) as raised:
        session.execute(plan)
    assert raised.value.operator == "HashAggregation"
    small = PlanBuilder(session.catalog).table_scan("t", ["k_int"]).group_id([["k_int"], []], []) \
        .aggregation(["k_int", "group_id"], ["count(*) AS c"]).plan()
    assert session.execute(small).num_rows > 1


def test_placement_puts_the_group_id_on_the_session_device_with_no_host_fallback():
    from gpu_engine.planning.placement import plan_placement

    catalog = {"t": make_table(1).schema}
    plan = (PlanBuilder(catalog).table_scan("t").group_id([["k_str"], []], ["v_float"])
            .aggregation(["k_str", "group_id"], ["max(v_float) AS m"]).plan())
    placements = plan_placement(plan, "cuda-sim")
    assert str(placements[plan.source.id]) == "cuda-sim" and plan.source.kind == "GroupId"
