"""Exception types that tell a user where a plan or a query went wrong."""

from __future__ import annotations

__all__ = [
    "GpuEngineError", "PlanError", "DeviceError", "DataSourceError", "ExecutionError", "MemoryCapExceeded", "TaskCancelled",
    "SessionClosed",
]


class GpuEngineError(Exception):
    """Base class, so callers can catch every engine error at once."""


class PlanError(GpuEngineError):
    """Raise at plan-build time for an invalid plan, naming the node and the column.

    Parameters
    ----------
    message
        What is wrong.
    node
        The plan node kind (and id when known), e.g. ``"Filter[2]"``.
    column
        The offending column or expression text, when there is one.
    tree
        The offending sub-tree of a snippet PlanBuilder was handed parsed (a sqlglot node, positioned in the
        query's text), when there is one: the SQL planner places the error there
        (:mod:`gpu_engine.plans.snippet_sources`).
    """

    def __init__(self, message: str, *, node: str | None = None, column: str | None = None, tree=None):
        self.node = node
        self.column = column
        self.tree = tree
        parts = []
        if node:
            parts.append(f"in {node}")
        if column:
            parts.append(f"at {column!r}")
        where = (" (" + ", ".join(parts) + ")") if parts else ""
        super().__init__(f"{message}{where}")


class DeviceError(GpuEngineError):
    """Raise when a device cannot be used (no GPU, simulator chosen too late, out of memory)."""


class DataSourceError(GpuEngineError, ValueError):
    """Raise when a table's source cannot be registered or read, naming the table and the file.

    Why a type of its own: a file that is not Parquet, a directory whose files
    disagree on a column's type, or a file rewritten after ``register`` are
    the user's data to fix, not engine faults; the message says which file.
    """


class ExecutionError(GpuEngineError):
    """Carry the first error of a failed Task with the operator and plan node it came from."""

    def __init__(self, message: str, *, operator: str | None = None, plan_node_id: str | None = None):
        self.operator = operator
        self.plan_node_id = plan_node_id
        where = f" [operator {operator}, plan node {plan_node_id}]" if operator else ""
        super().__init__(f"{message}{where}")


class MemoryCapExceeded(ExecutionError):
    """Raise when an operator's reservation would take its query past the memory cap (Velox's MEM_CAP_EXCEEDED).

    Also raised, naming the operator, when the device itself runs out of
    memory inside an operator. The message says what was asked, what the
    query held, the cap and the setting that raises it.

    Attributes
    ----------
    requested_bytes, used_bytes, cap_bytes
        The reservation that failed, what the query held then, and its cap
        (``None`` for a device out-of-memory, which has no engine cap).
    """

    def __init__(self, message: str, *, operator: str | None = None, plan_node_id: str | None = None,
                 requested_bytes: int = 0, used_bytes: int = 0, cap_bytes: int | None = None):
        self.requested_bytes = requested_bytes
        self.used_bytes = used_bytes
        self.cap_bytes = cap_bytes
        super().__init__(message, operator=operator, plan_node_id=plan_node_id)


class TaskCancelled(GpuEngineError):
    """Raise from a Task that was cancelled before it finished."""


class SessionClosed(GpuEngineError):
    """Raise when a closed :class:`~gpu_engine.session.Session` is asked to register, plan or run anything."""
