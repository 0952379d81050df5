"""Check PlanBuilder: node shapes and schemas, aggregation step pairing, ids, and PlanErrors naming node and column."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from gpu_engine.errors import PlanError
from gpu_engine.plans import (
    AggregationNode,
    AggregationStep,
    ExchangeNode,
    FilterNode,
    LimitNode,
    LocalPartitionNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanBuilder,
    PlanNodeIdGenerator,
    ProjectNode,
    SortKey,
    TableScanNode,
    TopNNode,
    ValuesNode,
    walk_plan,
)
from gpu_engine.plans.expressions import AggregateCall, ColumnRef

DEC = pa.decimal128(15, 2)
CATALOG = {
    "lineitem": pa.schema([
        ("l_orderkey", pa.int64()), ("l_partkey", pa.int64()), ("l_quantity", DEC), ("l_extendedprice", DEC),
        ("l_discount", DEC), ("l_shipdate", pa.date32()), ("l_comment", pa.large_string()),
    ]),
}


def scan(*columns: str, **kwargs) -> PlanBuilder:
    return PlanBuilder(CATALOG, **kwargs).table_scan("lineitem", list(columns) or None)


def schema_of(builder: PlanBuilder) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in builder.plan().output_schema]


def test_spec_example_builds_expected_tree():
    root = (scan("l_partkey", "l_quantity")
            .filter("l_quantity > 10")
            .aggregation(["l_partkey"], ["count(*) AS cnt", "sum(l_quantity) AS q"])
            .order_by(["cnt DESC", "l_partkey"])
            .limit(10)
            .plan())
    nodes = list(walk_plan(root))
    assert [type(n) for n in nodes] == [LimitNode, OrderByNode, AggregationNode, FilterNode, TableScanNode]
    assert [n.id for n in nodes] == ["4", "3", "2", "1", "0"]
    limit, order_by, aggregation, _, table_scan = nodes
    assert (limit.count, limit.offset) == (10, 0)
    assert order_by.keys == (SortKey("cnt", ascending=False), SortKey("l_partkey"))
    assert aggregation.step is AggregationStep.SINGLE
    assert aggregation.output_schema == pa.schema([("l_partkey", pa.int64()), ("cnt", pa.int64()),
                                                   ("q", pa.decimal128(38, 2))])
    assert table_scan.columns == ("l_partkey", "l_quantity")


def test_table_scan_defaults_to_all_columns_with_engine_types():
    node = scan().plan()
    assert node.columns == tuple(CATALOG["lineitem"].names)
    assert node.output_schema.field("l_comment").type == pa.string()


def test_values_normalizes_schema_and_keeps_data():
    table = pa.table({"k": pa.array(["a", "b"], pa.large_string()), "v": pa.array([1, 2], pa.int32())})
    node = PlanBuilder().values(table).plan()
    assert isinstance(node, ValuesNode) and node.data is table
    assert node.output_schema == pa.schema([("k", pa.string()), ("v", pa.int32())])


def test_project_names_and_types():
    builder = scan("l_partkey", "l_extendedprice", "l_discount").project(
        ["l_partkey", "l_extendedprice * (1 - l_discount) AS disc_price", "l_partkey + 1"])
    node = builder.plan()
    assert isinstance(node, ProjectNode)
    assert schema_of(builder) == [("l_partkey", pa.int64()), ("disc_price", pa.decimal128(18, 4)),
                                  ("expr_2", pa.int64())]


def test_partial_aggregation_emits_intermediate_columns():
    builder = scan().partial_aggregation(
        ["l_partkey"], ["avg(l_quantity) AS a", "sum(l_extendedprice * (1 - l_discount)) AS revenue", "count(*) c"])
    assert builder.plan().step is AggregationStep.PARTIAL
    # An exact sum's high 64 bits travel beside it (name$high), so partial totals past 64 bits stay exact.
    assert schema_of(builder) == [("l_partkey", pa.int64()), ("a", pa.decimal128(38, 2)), ("a$high", pa.int64()),
                                  ("a$count", pa.int64()), ("revenue", pa.decimal128(38, 4)),
                                  ("revenue$high", pa.int64()), ("c", pa.int64())]


@pytest.mark.parametrize("middle", [
    pytest.param(lambda b: b, id="directly"),
    pytest.param(lambda b: b.local_partition(["l_partkey"]), id="across local_partition"),
    pytest.param(lambda b: b.local_partition(["l_partkey"]).local_gather(), id="across two local_partitions"),
    pytest.param(lambda b: b.local_partition(["l_partkey"]).intermediate_aggregation().local_gather(),
                 id="after an intermediate step"),
])
def test_final_aggregation_pairs_with_partial(middle):
    partial = scan().partial_aggregation(["l_partkey"], ["avg(l_quantity) AS a", "count(*) AS c", "max(l_shipdate) m"])
    root = middle(partial).final_aggregation().plan()
    assert root.step is AggregationStep.FINAL
    assert root.grouping_keys == ("l_partkey",)
    assert root.aggregate_names == ("a", "c", "m")
    assert root.aggregates == (
        AggregateCall("avg", ColumnRef("a", pa.decimal128(38, 2)), pa.float64()),
        AggregateCall("count_star", ColumnRef("c", pa.int64()), pa.int64()),
        AggregateCall("max", ColumnRef("m", pa.date32()), pa.date32()),
    )
    assert root.output_schema == pa.schema([("l_partkey", pa.int64()), ("a", pa.float64()), ("c", pa.int64()),
                                            ("m", pa.date32())])


def test_intermediate_aggregation_keeps_intermediate_schema():
    builder = scan().partial_aggregation([], ["avg(l_quantity) AS a"]).local_gather().intermediate_aggregation()
    node = builder.plan()
    assert node.step is AggregationStep.INTERMEDIATE
    assert node.aggregates == (AggregateCall("avg", ColumnRef("a", pa.decimal128(38, 2)), pa.float64()),)
    assert schema_of(builder) == [("a", pa.decimal128(38, 2)), ("a$high", pa.int64()), ("a$count", pa.int64())]


def test_final_aggregation_after_exchange_takes_partial_from_other_fragment():
    ids = PlanNodeIdGenerator()
    leaf = (scan(id_generator=ids).partial_aggregation(["l_partkey"], ["sum(l_quantity) AS q"])
            .partitioned_output(["l_partkey"], 3).plan())
    partial = leaf.source
    final = PlanBuilder(id_generator=ids).exchange(leaf.output_schema).final_aggregation(partial=partial).plan()
    assert isinstance(leaf, PartitionedOutputNode)
    assert (leaf.partition_kind, leaf.keys, leaf.num_partitions) == ("partitioned", ("l_partkey",), 3)
    assert isinstance(final.source, ExchangeNode)
    assert final.aggregates == (AggregateCall("sum", ColumnRef("q", pa.decimal128(38, 2)), pa.decimal128(38, 2)),)
    assert [n.id for n in walk_plan(final)] == ["4", "3"]


def test_shared_id_generator_keeps_ids_unique():
    ids = PlanNodeIdGenerator()
    first = scan("l_partkey", id_generator=ids).limit(5).plan()
    second = scan("l_partkey", id_generator=ids).filter("l_partkey > 1").plan()
    all_ids = [n.id for root in (first, second) for n in walk_plan(root)]
    assert sorted(all_ids, key=int) == ["0", "1", "2", "3"]


@pytest.mark.parametrize("keys, kind", [(["l_partkey"], "repartition"), ([], "gather")])
def test_local_partition_kinds(keys, kind):
    node = scan().local_partition(keys).plan()
    assert isinstance(node, LocalPartitionNode) and node.output_schema == node.source.output_schema
    assert (node.partition_kind, node.keys) == (kind, tuple(keys))


def test_top_n_limit_and_partial_flags():
    builder = scan("l_partkey").top_n(["l_partkey DESC"], 3, is_partial=True).limit(2, offset=1)
    limit = builder.plan()
    assert (limit.count, limit.offset) == (2, 1)
    top_n = limit.source
    assert isinstance(top_n, TopNNode) and (top_n.count, top_n.is_partial) == (3, True)


def test_partitioned_output_broadcast():
    node = scan("l_partkey").partitioned_output([], 4, kind="broadcast").plan()
    assert (node.partition_kind, node.num_partitions, node.output_schema.names) == ("broadcast", 4, ["l_partkey"])


@pytest.mark.parametrize("build, node, column, message", [
    (lambda: PlanBuilder(CATALOG).table_scan("orders"), "TableScan[0]", "orders",
     "unknown table 'orders'; available tables: lineitem"),
    (lambda: PlanBuilder(None).table_scan("orders"), "TableScan[0]", "orders", "unknown table"),
    (lambda: scan("l_nope"), "TableScan[0]", "l_nope", "unknown column 'l_nope' in table 'lineitem'"),
    (lambda: scan("l_partkey", "l_partkey"), "TableScan[0]", "l_partkey", "duplicate output column"),
    (lambda: scan().filter("l_nope > 1"), "Filter[1]", "l_nope", "unknown column 'l_nope'"),
    (lambda: scan().filter("l_quantity + 1"), "Filter[1]", "l_quantity + 1", "must be boolean, got decimal128(16, 2)"),
    (lambda: scan().filter("l_comment > 1"), "Filter[1]", "l_comment > 1", "type mismatch"),
    (lambda: scan().filter("foo(l_partkey)"), "Filter[1]", "FOO(l_partkey)", "unknown function 'foo'"),
    (lambda: scan("l_partkey").project(["l_quantity * 2 AS x"]), "Project[1]", "l_quantity", "unknown column"),
    (lambda: scan().project(["l_partkey", "l_orderkey AS l_partkey"]), "Project[1]", "l_partkey",
     "duplicate output column name 'l_partkey'"),
    (lambda: scan().aggregation(["l_nope"], ["count(*) AS c"]), "Aggregation[1]", "l_nope", "unknown column"),
    (lambda: scan().aggregation(["l_partkey + 1"], []), "Aggregation[1]", "l_partkey + 1",
     "a grouping key must be an input column name"),
    (lambda: scan().aggregation([], ["sum(l_nope) AS s"]), "Aggregation[1]", "l_nope", "unknown column"),
    (lambda: scan().aggregation(["l_partkey"], ["count(*) AS l_partkey"]), "Aggregation[1]", "l_partkey",
     "duplicate output column"),
    (lambda: scan().aggregation([], ["count(DISTINCT l_partkey) AS c", "count(*) AS n"]), "Aggregation[1]",
     "count(*) AS n", "every aggregate is DISTINCT over the same argument"),
    (lambda: scan().aggregation([], ["count(DISTINCT l_partkey) AS c", "sum(DISTINCT l_quantity) AS s"]),
     "Aggregation[1]", "sum(DISTINCT l_quantity) AS s", "every aggregate is DISTINCT over the same argument"),
    (lambda: scan().partial_aggregation([], ["count(DISTINCT l_partkey) AS c"]), "Aggregation[1]", None,
     "DISTINCT aggregates need a single-step aggregation"),
    (lambda: scan().aggregation([], []), "Aggregation[1]", None, "needs grouping keys or aggregates"),
    (lambda: scan().partial_aggregation([], ["avg(l_quantity) AS a", "count(*) AS a$count"]), "Aggregation[1]",
     "a$count", "duplicate output column"),
    (lambda: scan().final_aggregation(), "Aggregation[1]", None, "no partial or intermediate aggregation below"),
    (lambda: scan().aggregation([], ["count(*) AS c"]).final_aggregation(), "Aggregation[2]", None,
     "no partial or intermediate aggregation below"),
    (lambda: scan().partial_aggregation([], ["sum(l_quantity) AS q"]).project(["q AS r"]).final_aggregation(),
     "Aggregation[3]", None, "no partial"),
    (lambda: scan().partial_aggregation(["l_partkey"], ["sum(l_quantity) AS q"]).final_aggregation(
        partial=scan().plan()), "Aggregation[2]", None, "partial= must be a PARTIAL or INTERMEDIATE aggregation"),
    (lambda: PlanBuilder().exchange(pa.schema([("l_partkey", pa.int64())])).final_aggregation(
        partial=scan().partial_aggregation(["l_partkey"], ["sum(l_quantity) AS q"]).plan()),
     "Aggregation[1]", "q", "intermediate column q:decimal128(38, 2) of Aggregation[1] is missing"),
    (lambda: scan().order_by(["l_nope DESC"]), "OrderBy[1]", "l_nope", "unknown column"),
    (lambda: scan().order_by(["l_partkey + 1"]), "OrderBy[1]", "l_partkey + 1", "a sort key must be"),
    (lambda: scan().order_by([]), "OrderBy[1]", "[]", "non-empty"),
    (lambda: scan().top_n(["l_partkey"], -1), "TopN[1]", None, "count must be a non-negative integer"),
    (lambda: scan().limit(5, offset=-2), "Limit[1]", None, "offset must be a non-negative integer"),
    (lambda: scan().local_partition(["l_nope"]), "LocalPartition[1]", "l_nope", "unknown column"),
    (lambda: scan().partitioned_output(["l_partkey"], 0), "PartitionedOutput[1]", None, "num_partitions"),
    (lambda: scan().partitioned_output([], 2, kind="hash"), "PartitionedOutput[1]", "hash", "kind must be one of"),
    (lambda: PlanBuilder().filter("x > 1"), "Filter[0]", None, "no input"),
    (lambda: scan().table_scan("lineitem"), "TableScan[1]", None, "must start a plan"),
    (lambda: PlanBuilder().values(pa.table({"a": [1], "b": [[1]]})), "Values[0]", "b", "unsupported column type"),
    (lambda: PlanBuilder().plan(), None, None, "the plan is empty"),
])
def test_plan_errors_name_node_and_column(build, node, column, message):
    with pytest.raises(PlanError, match=re.escape(message)) as info:
        build()
    assert (info.value.node, info.value.column) == (node, column)
