"""Prepare a plan fragment to run: the one planning pipeline every front end goes through.

Session, LocalCluster and SparkRunner all call :func:`prepare_plan` on each
fragment they run, so a new pass lands in one place (:mod:`.prepare`).
"""

from gpu_engine.planning.local_exchanges import add_local_exchanges
from gpu_engine.planning.placement import Placement, placement_text, plan_placement
from gpu_engine.planning.prepare import PreparedPlan, prepare_plan

__all__ = ["prepare_plan", "PreparedPlan", "add_local_exchanges", "plan_placement", "placement_text", "Placement"]
