"""TPC-H query plans built with PlanBuilder."""
