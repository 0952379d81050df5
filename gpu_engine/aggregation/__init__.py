"""Aggregate functions as objects shared by the eager and the fused aggregation operators."""

from gpu_engine.aggregation.functions import (
    AggregateFunction, AggregateState, StateArray, StateEmitter, aggregate_function, aggregate_functions_of,
    unsupported_aggregate,
)

__all__ = ["AggregateFunction", "AggregateState", "StateArray", "StateEmitter", "aggregate_function",
           "aggregate_functions_of", "unsupported_aggregate"]
