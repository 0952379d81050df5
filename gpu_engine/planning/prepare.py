"""Run the passes that turn a single-node plan fragment into the plan a Task executes.

Why one function: the passes (local exchanges for several drivers, placement
checks, pipeline fusion) must run in the same order wherever a plan is
executed, whether by a Session, by each stage of a LocalCluster or by each
``mapInArrow`` stage on Spark. Cutting a distributed plan into fragments stays
with the coordinator that owns the fragments (:mod:`gpu_engine.cluster.fragments`,
:mod:`gpu_engine.spark.broadcast_joins`); everything after that is here.

The order matters:

0. :func:`~gpu_engine.optimizer.optimize_plan` (unless the config says
   ``optimize=False``, or the caller optimized the whole plan before cutting
   it into fragments: ``optimize=False``) applies the logical rules —
   constant folding, predicate pushdown, empty relations, projection
   pruning — to the typed plan;
1. :func:`~gpu_engine.planning.local_exchanges.add_local_exchanges` makes the
   plan correct for ``drivers`` drivers (partial/final aggregations, gathers);
2. :func:`~gpu_engine.planning.fusion.fuse_pipelines` (unless the config says
   ``fuse=False``) replaces filter/project/aggregation stretches by fused
   nodes whose operator runs one generated kernel per batch. It runs after
   step 1 so it sees the partial aggregations made there;
3. :func:`~gpu_engine.planning.placement.plan_placement` fails what cannot run
   on the device at all, before any driver starts (fused nodes expose the
   expressions they evaluate, so the check sees through them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from gpu_engine.device import Device, get_device
from gpu_engine.planning.local_exchanges import add_local_exchanges
from gpu_engine.planning.placement import Placement, plan_placement
from gpu_engine.plans.nodes import PlanNode

__all__ = ["PreparedPlan", "prepare_plan"]


@dataclass(frozen=True)
class PreparedPlan:
    """A plan as a Task runs it, and where each of its nodes runs."""

    plan: PlanNode
    placements: Mapping[str, Placement]


def prepare_plan(plan: PlanNode, device: Device | str, drivers: int, config=None, *,
                 optimize: bool = True, statistics: Mapping | None = None) -> PreparedPlan:
    """Return ``plan`` prepared to run on ``device`` with ``drivers`` drivers per pipeline.

    Parameters
    ----------
    plan
        A single-node plan or one fragment of a distributed plan (its Exchanges
        and PartitionedOutput already in place).
    device
        The device (or its name) the Task runs on; placement is checked for it.
    drivers
        Drivers per pipeline.
    config
        The query's :class:`~gpu_engine.exec.query_ctx.EngineConfig` (its
        ``fuse`` and ``optimize`` switches); None uses the defaults.
    optimize
        False where the caller ran :func:`~gpu_engine.optimizer.optimize_plan` on the whole plan before cutting
        it into fragments (a fragment's scans and exchanges are what its stage was cut for: none may go).
    statistics
        Table name -> :class:`~gpu_engine.optimizer.statistics.TableStatistics` of the scanned tables, for the
        optimizer's choices from estimates (None: those rules do not run).

    Raises
    ------
    PlanError
        For a node that cannot run on ``device``; for a plan nested deeper than the passes can walk
        (:func:`~gpu_engine.planning.plan_depth.too_deep_plan`).
    """
    from gpu_engine.exec.query_ctx import EngineConfig
    from gpu_engine.planning.fusion import fuse_pipelines
    from gpu_engine.planning.plan_depth import too_deep_plan

    config = config or EngineConfig()
    device = get_device(device)
    try:
        if optimize and config.optimize:
            from gpu_engine.optimizer import optimize_plan

            plan = optimize_plan(plan, statistics)
        elif optimize:  # optimizer off: the subquery predicates still become joins (no operator evaluates them)
            from gpu_engine.optimizer import required_rewrites

            plan = required_rewrites(plan)
        executed = add_local_exchanges(plan, drivers)
        if config.fuse:
            executed = fuse_pipelines(executed)
        return PreparedPlan(executed, plan_placement(executed, device))
    except RecursionError:  # a plan nested some hundreds of nodes deep: name it (planning/plan_depth.py)
        raise too_deep_plan(plan) from None
