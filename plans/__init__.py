"""Plan nodes, the typed expression IR and the PlanBuilder (installed as ``gpu_engine.plans``).

``PlanBuilder`` builds plan trees from SQL snippets; ``format_plan`` prints
them; the ``parse_*`` functions translate single snippets into typed
expressions for code that builds nodes by hand.
"""

from gpu_engine.plans.explain import format_node, format_plan
from gpu_engine.plans.nodes import (
    AggregationNode,
    AggregationStep,
    EnforceSingleRowNode,
    ExchangeNode,
    FilterNode,
    GroupIdNode,
    HashJoinNode,
    LimitNode,
    LocalPartitionNode,
    NestedLoopJoinNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanNode,
    ProjectNode,
    SortKey,
    TableScanNode,
    TopNNode,
    ValuesNode,
    RangeNode,
    UnnestNode,
    find_node,
    walk_plan,
)
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.sql_translator import (
    parse_aggregate,
    parse_column_name,
    parse_expression,
    parse_projection,
    parse_sort_key,
)

__all__ = [
    "PlanBuilder",
    "PlanNodeIdGenerator",
    "format_plan",
    "format_node",
    "parse_expression",
    "parse_projection",
    "parse_aggregate",
    "parse_sort_key",
    "parse_column_name",
    "PlanNode",
    "ValuesNode",
    "RangeNode",
    "UnnestNode",
    "TableScanNode",
    "FilterNode",
    "ProjectNode",
    "GroupIdNode",
    "AggregationStep",
    "AggregationNode",
    "HashJoinNode",
    "NestedLoopJoinNode",
    "EnforceSingleRowNode",
    "LocalPartitionNode",
    "SortKey",
    "OrderByNode",
    "TopNNode",
    "LimitNode",
    "PartitionedOutputNode",
    "ExchangeNode",
    "walk_plan",
    "find_node",
]
