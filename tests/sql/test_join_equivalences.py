"""Equalities chaining three relations' columns join any two of them, once each (TPC-H Q5's shape).

``c_nation = s_nation AND s_nation = n_key`` makes ``c_nation = n_key`` true as
well: the typed join order keeps the three columns in one class
(:func:`gpu_engine.optimizer.join_order._closed`) so the one-nation filter can cut the
customers before they meet the orders, and each join uses one equality of the
class (a second would filter again what the first kept). Results are checked
against DuckDB, with classes over columns of different types (never merged),
outer joins (their ON conditions form no class) and permuted FROM lists (one plan).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, session_with_tables, optimized_sql_plan
from gpu_engine.plans.nodes import HashJoinNode, NestedLoopJoinNode, TableScanNode, walk_plan

NATIONS = 5
TABLES = {
    "n": pa.table({"n_key": pa.array(range(NATIONS), pa.int64()), "n_name": [f"n{i}" for i in range(NATIONS)]}),
    "c": pa.table({"c_key": pa.array(range(20), pa.int64()),
                   "c_nation": pa.array([i % NATIONS for i in range(20)], pa.int64()),
                   "c_nation32": pa.array([i % NATIONS for i in range(20)], pa.int32())}),
    "o": pa.table({"o_key": pa.array(range(200), pa.int64()),
                   "o_cust": pa.array([i % 20 for i in range(200)], pa.int64()),
                   "o_supp": pa.array([(i * 7) % 20 for i in range(200)], pa.int64())}),
    "s": pa.table({"s_key": pa.array(range(20), pa.int64()),
                   "s_nation": pa.array([(i * 3) % NATIONS for i in range(20)], pa.int64())}),
}
WHERE = "c_key = o_cust AND o_supp = s_key AND c_nation = s_nation AND s_nation = n_key AND n_name = 'n3'"
QUERIES = {
    "chain": f"SELECT count(*) AS k FROM c, o, s, n WHERE {WHERE}",
    "range": "SELECT count(*) AS k FROM c, o, s, n WHERE c_key = o_cust AND o_supp = s_key "
             "AND c_nation = s_nation AND s_nation = n_key AND n_key < 3",
    "types_differ": "SELECT count(*) AS k FROM c, o, s, n WHERE c_key = o_cust AND o_supp = s_key "
                    "AND c_nation32 = s_nation AND s_nation = n_key AND n_name = 'n3'",
    "outer_join": "SELECT count(*) AS k, count(s_key) AS matched FROM c JOIN o ON c_key = o_cust "
                  "LEFT JOIN s ON o_supp = s_key AND c_nation = s_nation JOIN n ON c_nation = n_key "
                  "WHERE n_name IN ('n1', 'n3')",
}


def _join_keys(plan) -> list[tuple[frozenset, bool]]:
    """Return each join's key pairs (as unordered pairs of columns) and whether it also filters."""
    return [(frozenset(frozenset(pair) for pair in zip(node.left_keys, node.right_keys)), node.filter is not None)
            if isinstance(node, HashJoinNode) else (frozenset(), True)
            for node in walk_plan(plan) if isinstance(node, (HashJoinNode, NestedLoopJoinNode))]


def _tables_under(node) -> set[str]:
    return {each.table_name for each in walk_plan(node) if isinstance(each, TableScanNode)}


def test_the_class_joins_customers_to_the_one_nation_before_the_orders():
    """Whichever order the estimates pick, the customers meet the one-nation filter (through the suppliers' nation
    or the derived ``c_nation = n_key``) before the orders, each join using one equality of the class."""
    plan = optimized_sql_plan(session_with_tables(TABLES, device="cpu"), QUERIES["chain"])
    joins = _join_keys(plan)
    pairs = [pair for keys, _ in joins for pair in keys]
    nation_pairs = [p for p in pairs if p & {"c_nation", "s_nation", "n_key"}]
    assert len(nation_pairs) == 2, joins  # three columns made equal by two equalities, none applied twice
    assert not any(filters for _, filters in joins), joins
    orders_join = next(node for node in walk_plan(plan) if isinstance(node, HashJoinNode)
                       and "o_cust" in node.left_keys + node.right_keys)
    other_side = next(source for source in orders_join.sources if "o" not in _tables_under(source))
    assert {"c", "n"} <= _tables_under(other_side), joins


def test_the_derived_equality_joins_customers_to_the_nation_when_suppliers_are_many():
    """``c_nation = n_key`` is written nowhere: with ten times the suppliers, the customers meet the nation first,
    through the equality derived from the chain, and the suppliers join on one equality of the class."""
    suppliers = 200
    tables = dict(TABLES, s=pa.table({"s_key": pa.array(range(suppliers), pa.int64()),
                                      "s_nation": pa.array([(i * 3) % NATIONS for i in range(suppliers)], pa.int64())}))
    joins = _join_keys(optimized_sql_plan(session_with_tables(tables, device="cpu"), QUERIES["chain"]))
    pairs = [pair for keys, _ in joins for pair in keys]
    assert frozenset({"c_nation", "n_key"}) in pairs, joins
    assert len([p for p in pairs if p & {"c_nation", "s_nation", "n_key"}]) == 2, joins


def test_columns_of_different_types_form_no_class():
    plan = optimized_sql_plan(session_with_tables(TABLES, device="cpu"), QUERIES["types_differ"])
    pairs = [pair for keys, _ in _join_keys(plan) for pair in keys]
    assert frozenset({"c_nation32", "n_key"}) not in pairs


@pytest.mark.parametrize("name", list(QUERIES))
def test_classes_of_equal_columns_match_duckdb(name, device_name, reference):
    if device_name == "cuda-sim" and name != "chain":
        pytest.skip("the simulator runs the chain only (the plans are the same on every device)")
    sql = QUERIES[name]
    assert_same_rows(session_with_tables(TABLES, device=device_name, drivers=2).sql(sql), duckdb_table(reference, sql))


def test_permuted_from_lists_give_one_plan():
    session = session_with_tables(TABLES, device="cpu")
    plans = {tuple(_join_keys(optimized_sql_plan(session, f"SELECT count(*) AS k FROM {order} WHERE {WHERE}")))
             for order in ("c, o, s, n", "n, s, o, c", "s, c, n, o", "o, n, c, s")}
    assert len(plans) == 1, plans
