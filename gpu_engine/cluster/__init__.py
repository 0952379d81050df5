"""Run plans as stages of Tasks in one process, connected by shuffles (Prestissimo's coordinator, in miniature).

``LocalCluster(session, stage_widths=(4, 4, 1)).execute(plan)`` cuts a plan into
fragments at its PartitionedOutput/Exchange boundaries (adding them to a plan
that has none), runs each fragment on a stage of Tasks, feeds them splits and
returns the gathered output; see :mod:`gpu_engine.cluster.local_cluster`.
"""

from gpu_engine.cluster.fragments import Fragment, chain_fragments, has_remote_exchanges, plan_fragments
from gpu_engine.cluster.local_cluster import CancelToken, LocalCluster, QueryHandle, Stage
from gpu_engine.cluster.query_stats import QueryStats, StageStats, format_query_stats
from gpu_engine.cluster.remote_exchanges import add_remote_exchanges

__all__ = [
    "LocalCluster",
    "Stage",
    "CancelToken",
    "QueryHandle",
    "Fragment",
    "plan_fragments",
    "chain_fragments",
    "has_remote_exchanges",
    "add_remote_exchanges",
    "QueryStats",
    "StageStats",
    "format_query_stats",
]
