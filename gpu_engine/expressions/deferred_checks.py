"""Collect the per-row error checks of an evaluation and read them back in one host sync.

Why: overflow, range and parse checks each need to know whether some row
failed, which on a GPU is a device-to-host read that stalls the host. An
expression such as ``l_extendedprice * (1 - l_discount) * (1 + l_tax)`` runs
half a dozen of them per batch. Instead, each check leaves its first failing
row on the device (:func:`defer_row_check`), and the enclosing
:func:`checks_read_together` block reads them all with one
:meth:`~gpu_engine.device.Device.read_scalars` when it ends, raising the error
of the first check (in evaluation order) that failed: the same error as
checking at once would have raised. Work between a failing check and the end
of the block still runs on meaningless values, which is harmless: expressions
have no side effects, and a failure there is reported only if no earlier check
failed.

Checks made outside any block are read at once, so callers that evaluate one
thing need nothing.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from gpu_engine.device import Device

__all__ = ["defer_row_check", "first_true_row", "checks_read_together"]


@dataclass
class _PendingCheck:
    first_row: Any  # a 0-d or 1-element device integer array
    none_value: int  # the value first_row holds when no row failed
    fail: Callable[[int], BaseException]  # builds the error for a failing row (may read more from the device)


@dataclass
class _CheckScope:
    device: Device
    checks: list[_PendingCheck] = field(default_factory=list)

    def raise_first_failure(self, cause: BaseException | None = None) -> None:
        """Read every pending check in one host sync and raise the first failure's error."""
        checks, self.checks = self.checks, []
        if not checks:
            return
        rows = self.device.read_scalars([check.first_row for check in checks])
        for check, row in zip(checks, rows):
            if row != check.none_value:
                error = check.fail(row)
                error.failing_row = int(row)  # the row it names (TRY evaluates around it: expressions.evaluate)
                if cause is None:
                    raise error
                raise error from cause


_scopes = threading.local()


def _open_scopes() -> list[_CheckScope]:
    stack = getattr(_scopes, "stack", None)
    if stack is None:
        stack = _scopes.stack = []
    return stack


def first_true_row(device: Device, bad: Any) -> Any:
    """Return a 0-d device array: the first row where the bool array ``bad`` is true, or -1 (no host read)."""
    xp = device.xp
    if bad.shape[0] == 0:
        return xp.full(1, -1, dtype=xp.int64)
    first = xp.argmax(bad.astype(xp.int8))
    return xp.where(xp.take(bad, first), first, -1)


def defer_row_check(device: Device, first_row: Any, none_value: int, fail: Callable[[int], BaseException]) -> None:
    """Check that ``first_row`` (a device scalar) holds ``none_value``, else raise ``fail(row)``.

    Inside a :func:`checks_read_together` block the check is read when the
    block ends, together with the others; outside one it is read now.
    """
    stack = _open_scopes()
    if stack:
        stack[-1].checks.append(_PendingCheck(first_row, none_value, fail))
        return
    row = device.read_scalar(first_row)
    if row != none_value:
        raise fail(int(row))


@contextmanager
def checks_read_together(device: Device, own_scope: bool = False) -> Iterator[None]:
    """Defer the checks made inside the block and read them in one host sync at its end.

    A block inside another joins it (its checks are read when the outermost
    block ends), unless ``own_scope``: then its checks are read at its own end,
    for a caller that must learn of a failure before it goes on (a CASE
    evaluated on all rows falls back to branch-by-branch evaluation on an
    error). When the block raises, pending checks are read first, so an
    earlier check's error still wins over what its meaningless values caused.
    """
    stack = _open_scopes()
    if stack and not own_scope:
        yield
        return
    scope = _CheckScope(device)
    stack.append(scope)
    try:
        yield
    except BaseException as error:
        stack.pop()
        scope.raise_first_failure(cause=error)
        raise
    stack.pop()
    scope.raise_first_failure()
