"""Fixtures shared by the optimizer's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def without_unique_groupings(monkeypatch):
    """The estimate rules without :func:`~gpu_engine.optimizer.unique_groupings.drop_unique_groupings`: for the
    tests of a rule that chooses how an aggregation runs (partial steps, exchange keys), whose GROUP BYs over
    rows unique on their keys would otherwise be projections with nothing to choose."""
    from gpu_engine import optimizer
    from gpu_engine.optimizer.unique_groupings import drop_unique_groupings

    monkeypatch.setattr(optimizer, "ESTIMATE_RULES",
                        tuple(rule for rule in optimizer.ESTIMATE_RULES if rule is not drop_unique_groupings))
