"""OrderBy, TopN and Limit against DuckDB, order checked, on every device and driver count."""

import pytest

from gpu_engine.plans import PlanBuilder

SORTS = [
    ["v_int"],
    ["v_float DESC"],
    ["k_str", "v_int DESC"],
    ["k_int DESC NULLS FIRST", "k_dict", "v_dec"],
    ["d_date", "v_int"],
]


def _unique_order(keys):
    # Append a unique key so the expected order is fully determined (ties would make it ambiguous).
    return keys + ["v_int", "v_float"]


@pytest.mark.parametrize("keys", SORTS, ids=lambda k: ",".join(k))
def test_order_by(session, assert_query, keys):
    keys = _unique_order(keys)
    plan = PlanBuilder(session.catalog).table_scan("t").filter("v_int IS NOT NULL AND v_float IS NOT NULL").order_by(keys).plan()
    assert_query(plan, f"SELECT * FROM t WHERE v_int IS NOT NULL AND v_float IS NOT NULL ORDER BY {', '.join(keys)}", ordered=True)


@pytest.mark.parametrize("keys", SORTS, ids=lambda k: ",".join(k))
@pytest.mark.parametrize("count", [0, 1, 7, 100000])
@pytest.mark.simulator_values(count=(7, 100000))  # 0 and 1: the same kernels as 7 (CI time)
def test_top_n(session, assert_query, keys, count, device_name):
    if device_name == "cuda-sim" and count != (7, 100000)[SORTS.index(keys) % 2]:
        pytest.skip("the simulator runs each sort once, the counts alternating (it is an interpreter)")
    keys = _unique_order(keys)
    plan = PlanBuilder(session.catalog).table_scan("t").filter("v_int IS NOT NULL AND v_float IS NOT NULL").top_n(keys, count).plan()
    assert_query(plan, f"SELECT * FROM t WHERE v_int IS NOT NULL AND v_float IS NOT NULL ORDER BY {', '.join(keys)} LIMIT {count}", ordered=True)


@pytest.mark.parametrize("count,offset", [(0, 0), (5, 0), (10, 3), (100000, 0), (50, 100000)])
def test_limit(session, table, count, offset):
    plan = PlanBuilder(session.catalog).table_scan("t").limit(count, offset).plan()
    result = session.execute(plan)
    assert result.num_rows == max(0, min(count, table.num_rows - offset))
    if session.drivers == 1:  # one driver reads splits in order, so the rows are exactly these
        assert result.equals(table.slice(offset, count).cast(result.schema)) or result.to_pylist() == table.slice(offset, count).to_pylist()


def test_limit_after_order_by(session, assert_query):
    keys = _unique_order(["k_str"])
    plan = (PlanBuilder(session.catalog).table_scan("t").filter("v_int IS NOT NULL AND v_float IS NOT NULL")
            .order_by(keys).limit(10, 5).plan())
    assert_query(plan, f"SELECT * FROM t WHERE v_int IS NOT NULL AND v_float IS NOT NULL ORDER BY {', '.join(keys)} LIMIT 10 OFFSET 5", ordered=True)


TIED_SORTS = [
    ["k_int DESC NULLS FIRST"],
    ["k_str", "k_dict NULLS FIRST"],
    ["d_date DESC"],
    ["k_int", "v_dec"],
]


@pytest.mark.parametrize("keys", TIED_SORTS, ids=lambda k: ",".join(k))
@pytest.mark.parametrize("count", [1, 7, 100000])
def test_top_n_with_ties_keeps_every_row_ranked_within_count(session, assert_query, keys, count, device_name):
    if device_name == "cuda-sim" and count != (1, 7, 100000)[TIED_SORTS.index(keys) % 3]:
        pytest.skip("the simulator runs each sort once, the counts in turn (it is an interpreter)")
    # Keys repeat (and hold NULLs, which tie with each other): WITH TIES keeps the rows whose rank is at
    # most ``count``, exactly DuckDB's rank() <= count; the order among tied rows is free, so rows compare as a set.
    plan = PlanBuilder(session.catalog).table_scan("t").top_n(keys, count, with_ties=True).plan()
    assert_query(plan, f"SELECT * FROM t QUALIFY rank() OVER (ORDER BY {', '.join(keys)}) <= {count}")
