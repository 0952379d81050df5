"""The plan loader refuses what PlanBuilder would refuse, naming the node (issue 13).

Each tampered document below used to load: some then failed inside
execution (a literal 10**30 typed int32, an unknown operator), some ran as
something else (``join_type "evil"`` ran as an inner join, ``LIMIT -5``).
Valid plans still load and run: the TPC-H plans of tests/plans/test_serialization.py
round-trip through the same checks, and one loaded plan is compared with DuckDB here.
"""

from __future__ import annotations

import copy
import json
import re
import sys

import duckdb
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.errors import PlanError
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.expressions import MAX_EXPRESSION_DEPTH, ColumnRef, UnaryOp
from gpu_engine.plans.nodes import ExchangeNode, FilterNode
from gpu_engine.plans.plan_validation import validate_plan
from gpu_engine.plans.serialization import SerializationError, plan_from_dict, plan_from_json, plan_to_dict, plan_to_json

ORDERS = pa.table({"o_key": pa.array([1, 2, 3, 4], pa.int64()), "o_cust": pa.array([10, 20, 10, 30], pa.int32()),
                   "o_price": pa.array([1.5, 2.5, 3.5, None])})
CUSTOMERS = pa.table({"c_cust": pa.array([10, 20], pa.int32()), "c_name": ["ann", "bob"]})
CATALOG = {"orders": ORDERS.schema, "customers": CUSTOMERS.schema}

# Paths in the base document: Limit <- OrderBy <- Aggregation <- Project <- HashJoin(probe Filter <- scan, build scan)
L = "$.plan"
O = L + ".sources[0]"
A = O + ".sources[0]"
P = A + ".sources[0]"
J = P + ".sources[0]"
F = J + ".sources[0]"
B = J + ".sources[1]"


def base_plan():
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("customers").plan()
    return (PlanBuilder(CATALOG, id_generator=ids).table_scan("orders").filter("o_key > 1")
            .hash_join(["o_cust"], ["c_cust"], build, ["o_key", "o_price", "c_name"], join_type="left")
            .project(["c_name", "o_price * 2 AS p", "o_key"])
            .aggregation(["c_name"], ["sum(p) AS s", "count(*) AS n"])
            .order_by(["c_name"]).limit(2, offset=1).plan())


BASE_SQL = """SELECT c_name, sum(o_price * 2) AS s, count(*) AS n
              FROM orders LEFT JOIN customers ON o_cust = c_cust WHERE o_key > 1
              GROUP BY c_name ORDER BY c_name NULLS LAST LIMIT 2 OFFSET 1"""


def _steps(path: str) -> list:
    return [int(index) if index else key for key, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path)]


def _tampered(path: str, value) -> dict:
    document = copy.deepcopy(plan_to_dict(base_plan()))
    *parents, last = _steps(path)
    target = document
    for step in parents:
        target = target[step]
    target[last] = value
    return document


def test_the_base_document_loads_and_runs_like_duckdb(device_name):
    plan = plan_from_json(plan_to_json(base_plan()))
    session = Session(device=device_name)
    session.register("orders", ORDERS)
    session.register("customers", CUSTOMERS)
    connection = duckdb.connect()
    connection.register("orders", ORDERS)
    connection.register("customers", CUSTOMERS)
    assert_same_rows(session.execute(plan), duckdb_table(connection, BASE_SQL), ordered=True)


TAMPERED = [
    # (changed path, new value, path named by the error, message)
    (L + ".count", -5, L, "count must be a non-negative integer, got -5 (in Limit[7])"),
    (L + ".offset", -1, L, "offset must be a non-negative integer, got -1"),
    (J + ".join_type", "evil", J, "join_type must be one of inner, left, right, full"),
    (J + ".left_keys", ["o_price"], J, "join keys o_price:double and c_cust:int32 have incompatible types"),
    (J + ".left_keys", ["nope"], J, "unknown left key 'nope'"),
    (J + ".output_columns", ["o_key", "o_price", "c_cust"], J, "the output schema names o_key, o_price, c_name, but "
                                                               "the output columns gives o_key, o_price, c_cust"),
    (A + ".output_schema.fields[1].type", "int64", A, "types s as int64, but the grouping keys and aggregates "
                                                      "gives double"),
    (A + ".aggregates[0].function", "histogram", A, "an aggregate function must be one of count_star, count, sum"),
    (A + ".aggregates[0].dtype", "int64", A, "sum over double is double, not int64"),
    (A + ".grouping_keys", ["o_cust"], A, "unknown grouping key 'o_cust'; input columns: c_name, p, o_key"),
    (P + ".expressions[1].op", "pow", P, "a binary operator must be one of add, sub, mul"),
    (P + ".expressions[1].right.dtype", "bool", P, "literal 2 does not fit its type bool"),
    (P + ".expressions[1].right", {"type": "Literal", "value": 10**30, "dtype": "int32"}, P,
     "literal 1000000000000000000000000000000 does not fit its type int32"),
    (P + ".expressions[1].right", {"type": "Literal", "value": 7, "dtype": "string"}, P,
     "literal 7 does not fit its type string"),
    (P + ".expressions[1].dtype", "int64", P, "BinaryOp is typed int64, but its operands give double"),
    (P + ".expressions[0].dtype", "int64", P, "column 'c_name' is string, but the expression types it int64"),
    (P + ".output_schema.fields[0].name", "renamed", P, "the output schema names renamed, p, o_key, but the "
                                                         "expressions gives c_name, p, o_key"),
    (F + ".predicate.op", "gt_or_so", F, "a binary operator must be one of"),
    (F + ".predicate", {"type": "ColumnRef", "name": "o_key", "dtype": "int64"}, F,
     "a filter predicate must be boolean, got int64"),
    (F + ".output_schema.fields", [{"name": "o_key", "type": "int64"}], F, "the output schema names o_key, but the "
                                                                            "input gives o_key, o_cust, o_price"),
    (B + ".id", "5", L, "duplicate plan node id '5'"),
    (O + ".keys[0].name", "zzz", O, "unknown sort key 'zzz'"),
    (O + ".sources", [], O, "a OrderBy node takes 1 input(s), got 0"),
]


@pytest.mark.parametrize(("path", "value", "named_path", "message"), TAMPERED,
                         ids=[f"{p.removeprefix('$.plan')}={str(v)[:20]}" for p, v, _, _ in TAMPERED])
def test_tampered_documents_are_refused_at_load_naming_the_node(path, value, named_path, message):
    document = _tampered(path, value)
    with pytest.raises(SerializationError, match=re.escape(message)) as info:
        plan_from_dict(document)
    assert str(info.value).startswith("invalid plan: ")
    if path.endswith(".id"):
        return  # the duplicate is found at whichever of the two nodes is reached second
    assert info.value.path == named_path


def test_format_must_be_the_integer_one():
    document = plan_to_dict(base_plan())
    document["format"] = 1.0
    with pytest.raises(SerializationError, match=r"unsupported format number 1.0"):
        plan_from_dict(document)


def _partition_document(kind_path: str, value) -> dict:
    ids = PlanNodeIdGenerator()
    plan = (PlanBuilder(CATALOG, id_generator=ids).table_scan("orders").local_partition(["o_key"])
            .partitioned_output(["o_cust"], 3).plan())
    document = plan_to_dict(plan)
    *parents, last = _steps(kind_path)
    target = document
    for step in parents:
        target = target[step]
    target[last] = value
    return document


@pytest.mark.parametrize(("path", "value", "message"), [
    (L + ".partition_kind", "bogus", "partition_kind must be one of partitioned, broadcast, arbitrary, got 'bogus'"),
    (L + ".num_partitions", 0, "num_partitions must be a positive integer, got 0"),
    (L + ".sources[0].partition_kind", "bogus", "partition_kind must be one of repartition, gather"),
    (L + ".sources[0].partition_kind", "gather", "a repartition needs keys and a gather takes none"),
])
def test_partition_kinds_and_counts_are_checked(path, value, message):
    with pytest.raises(SerializationError, match=re.escape(message)):
        plan_from_dict(_partition_document(path, value))


def test_values_data_must_match_the_declared_schema():
    plan = PlanBuilder().values(pa.table({"a": pa.array([1, 2], pa.int64())})).limit(1).plan()
    document = plan_to_dict(plan)
    other = plan_to_dict(PlanBuilder().values(pa.table({"a": ["x", "y"]})).plan())
    document["plan"]["sources"][0]["data"] = other["plan"]["data"]
    with pytest.raises(SerializationError, match=re.escape("types a as int64, but the Values data gives string")):
        plan_from_dict(document)


def _deep_filter(levels: int) -> FilterNode:
    schema = pa.schema([("c", pa.bool_())])
    predicate = ColumnRef("c", pa.bool_())
    for _ in range(levels - 1):
        predicate = UnaryOp("not", predicate, pa.bool_())
    return FilterNode(id="0", output_schema=schema, sources=(ExchangeNode(id="1", output_schema=schema),),
                      predicate=predicate)


def test_deep_plans_load_in_a_fresh_process_and_too_deep_ones_are_refused():
    text = plan_to_json(_deep_filter(MAX_EXPRESSION_DEPTH))
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # as a fresh Spark executor starts
    try:
        assert plan_from_json(text) == _deep_filter(MAX_EXPRESSION_DEPTH)
    finally:
        sys.setrecursionlimit(max(previous, sys.getrecursionlimit()))
    with pytest.raises(PlanError, match=f"nests too deeply: {MAX_EXPRESSION_DEPTH + 1} levels"):
        validate_plan(_deep_filter(MAX_EXPRESSION_DEPTH + 1))
    with pytest.raises(SerializationError, match="nests too deeply"):
        plan_from_json(plan_to_json(_deep_filter(MAX_EXPRESSION_DEPTH + 1)))


def test_a_loaded_plan_is_the_built_one():
    assert json.loads(plan_to_json(plan_from_json(plan_to_json(base_plan())))) == plan_to_dict(base_plan())
