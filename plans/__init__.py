"""Plan nodes, the typed expression IR and the PlanBuilder (installed as ``gpu_engine.plans``)."""
