"""Fixtures shared by the optimizer's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def without_unique_groupings(monkeypatch):
    """The estimate rules without :func:`~gpu_engine.optimizer.unique_groupings.drop_unique_groupings`: for the
    tests of a rule that chooses how an aggregation runs (partial steps, exchange keys), whose GROUP BYs over
    rows unique on their keys would otherwise be projections with nothing to choose.

    The rule is found by its name, not its identity: a plugin that wraps it (bench/rule_firing_probe.py, which
    logs where it fires) replaces the object in :data:`~gpu_engine.optimizer.ESTIMATE_RULES`."""
    from gpu_engine import optimizer

    rules = optimizer.ESTIMATE_RULES
    kept = tuple(rule for rule in rules if getattr(rule, "__name__", None) != "drop_unique_groupings")
    assert len(kept) == len(rules) - 1, "drop_unique_groupings is not among the estimate rules"
    monkeypatch.setattr(optimizer, "ESTIMATE_RULES", kept)
