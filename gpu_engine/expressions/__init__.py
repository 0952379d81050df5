"""Evaluate the typed expression IR on device columns, with DuckDB's semantics.

``evaluate(expr, batch)`` returns a :class:`~gpu_engine.columnar.Column` of
``expr.dtype`` on the batch's device; ``evaluate_predicate(expr, batch)``
returns the device bool mask a filter keeps. ``can_cast`` tells plan-time
checks which casts are supported.
"""

from gpu_engine.expressions.cast import can_cast
from gpu_engine.expressions.evaluate import evaluate, evaluate_predicate

__all__ = ["evaluate", "evaluate_predicate", "can_cast"]
