"""Fuse filter/project/aggregation stretches of a plan into nodes run by one generated kernel."""

from __future__ import annotations

from gpu_engine.plans.nodes import PlanNode

__all__ = ["fuse_pipelines"]


def fuse_pipelines(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with fusable stretches replaced by fused nodes."""
    return plan
