"""Decide, before anything runs, where each operator of a plan runs and what of it falls back to the host.

The policy (the README's "Where operators run" says the same):

* **Every operator runs on the Session's device.** Operators are written once
  against ``device.xp`` and the kernel entry points, so there is no separate
  CPU operator to move a node to, and batches never leave the device between
  operators.
* **Host fallbacks are reported, not hidden.** A few expressions have no device
  implementation and copy their input column to the host, convert it there and
  copy the result back: ``CAST(float AS VARCHAR)`` (the shortest round-trip
  text, formatted by Python) and ``CAST(VARCHAR AS float)`` (correctly rounded
  parsing, by pyarrow). The node still runs on the device; its placement says
  which of its expressions go through the host, e.g. ``cuda (host fallback:
  CAST(v AS string): float -> text is formatted by Python on the host)``. On
  ``cpu`` the buffers are host memory anyway, so no reason is given there;
  ``cuda-sim`` reports what ``cuda`` would.
* **What cannot run at all fails at plan time** with a
  :class:`~gpu_engine.errors.PlanError` naming the node and the expression: a
  cast with no implementation (``CAST(timestamp AS VARCHAR)``), an aggregate
  over a type HashAggregation does not support. Such a node could not run on
  the CPU either (it is the same code), so failing before any driver starts
  beats failing halfway through the query.

:func:`plan_placement` is a free pass over the plan, like the other passes;
the Session runs it before every query and prints its result in
``explain`` (``-- Filter[1][...] -> a:int64 @ cuda``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import Iterator, Mapping

import pyarrow as pa

from gpu_engine.columnar.types import is_floating, is_string
from gpu_engine.device import Device, get_device
from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import AggregateCall, Cast, Expr, Function, walk
from gpu_engine.plans.nodes import PlanNode, walk_plan

__all__ = ["Placement", "plan_placement", "placement_text", "node_expressions", "host_fallback"]


@dataclass(frozen=True)
class Placement:
    """Where one plan node runs, and why part of it does not run there (None: all of it does)."""

    device: str
    reason: str | None = None

    def __str__(self) -> str:
        return self.device if self.reason is None else f"{self.device} ({self.reason})"


def plan_placement(plan: PlanNode, device: Device | str) -> dict[str, Placement]:
    """Return every node's placement by node id; raise :class:`PlanError` for a node that cannot run.

    Parameters
    ----------
    plan
        The plan as it will run (after :func:`~gpu_engine.planning.local_exchanges.add_local_exchanges`).
    device
        The device (or its name) the plan's Task runs on.
    """
    device = get_device(device)
    reports_fallbacks = device.kernel_flavor == "cuda"
    placements: dict[str, Placement] = {}
    for node in walk_plan(plan):
        fallbacks: list[str] = []
        for expression in node_expressions(node):
            for sub_expression in walk(expression):
                reason = host_fallback(sub_expression, node.label)
                if reason is not None:
                    fallbacks.append(reason)
        reason = "host fallback: " + "; ".join(dict.fromkeys(fallbacks)) if fallbacks and reports_fallbacks else None
        placements[node.id] = Placement(device.name, reason)
    return placements


def placement_text(placements: Mapping[str, Placement]) -> dict[str, str]:
    """Return the placements as explain prints them, by node id."""
    return {node_id: str(placement) for node_id, placement in placements.items()}


def node_expressions(node: PlanNode) -> Iterator[Expr]:
    """Yield the expressions a node evaluates: every field holding an Expr or a tuple of them.

    Reading the fields rather than listing node kinds keeps the pass right for
    node kinds added later (a join's filter, a new node's expressions).
    """
    for node_field in fields(node):
        if node_field.name == "sources":
            continue
        value = getattr(node, node_field.name)
        if isinstance(value, Expr):
            yield value
        elif isinstance(value, tuple):
            yield from (item for item in value if isinstance(item, Expr))


@functools.singledispatch
def host_fallback(expression: Expr, node_label: str) -> str | None:
    """Return why ``expression`` (not its children) runs on the host, None when it runs on the device.

    Raises
    ------
    PlanError
        When the expression cannot run at all.
    """
    return None


@host_fallback.register
def _(expression: Cast, node_label: str) -> str | None:
    from gpu_engine.expressions.cast import can_cast
    from gpu_engine.plans.type_coercion import unimplemented_cast

    source, target = expression.operand.dtype, expression.dtype
    if pa.types.is_null(source):
        return None
    if not can_cast(source, target) and not unimplemented_cast(source, target):
        raise PlanError(f"casting {source} to {target} has no implementation on any device", node=node_label,
                        column=expression.sql())
    if is_floating(source) and is_string(target):
        return f"{expression.sql()}: float -> text is formatted by Python on the host"
    if is_string(source) and is_floating(target):
        return f"{expression.sql()}: text -> float is parsed by pyarrow on the host"
    if is_string(source) and (pa.types.is_boolean(target) or pa.types.is_timestamp(target)):
        return f"{expression.sql()}: text -> {target} is parsed by pyarrow on the host"
    if pa.types.is_timestamp(source) and is_string(target):
        return f"{expression.sql()}: timestamp -> text is formatted on the host"
    return None


@host_fallback.register
def _(expression: Function, node_label: str) -> str | None:
    if expression.name != "try_cast":
        return None
    from gpu_engine.expressions.cast import can_cast

    if not can_cast(expression.args[0].dtype, expression.dtype):
        return None  # no conversion: all NULL, on any device (gpu_engine.expressions.try_cast)
    return host_fallback(Cast(expression.args[0], expression.dtype), node_label)  # TRY_CAST converts as CAST does


@host_fallback.register
def _(expression: AggregateCall, node_label: str) -> str | None:
    from gpu_engine.aggregation import unsupported_aggregate

    reason = unsupported_aggregate(expression)
    if reason is not None:
        raise PlanError(reason, node=node_label, column=expression.sql())
    return None
