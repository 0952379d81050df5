"""A process's values made once per key: read without a lock, made under one."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Callable, Generic, Hashable, TypeVar

__all__ = ["MadeOnce", "MadePerNode"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class MadeOnce(Generic[K, V]):
    """Hold one value per key, made by the first caller that asks for it.

    Why: per-process resources that many threads ask for on hot paths (a decode thread pool per size,
    numba's wrapper of a CUDA stream) must be made once, never twice by two threads at once, yet be
    read without taking a lock every time: a dict read first, then a second look under the lock.
    """

    def __init__(self, forget_in_forked_child: bool = False) -> None:
        """``forget_in_forked_child``: a forked child starts empty (for values that hold threads, e.g. thread pools:
        their threads stay in the parent, so a child using them would wait for ever on queues nobody reads)."""
        self._values: dict[K, V] = {}
        self._lock = threading.Lock()
        if forget_in_forked_child:
            _FORGOTTEN_IN_CHILD.add(self)

    def _forget(self) -> None:
        self._values = {}
        self._lock = threading.Lock()  # another thread may have held it at the fork: it never lets go in the child

    def get(self, key: K, make: Callable[[], V]) -> V:
        """Return the value of ``key``, calling ``make()`` (once, under the lock) when there is none yet."""
        value = self._values.get(key)
        if value is None:
            with self._lock:
                value = self._values.get(key)
                if value is None:
                    value = self._values[key] = make()
        return value


_FORGOTTEN_IN_CHILD: "weakref.WeakSet[MadeOnce]" = weakref.WeakSet()


def _forget_in_forked_child() -> None:
    for made in list(_FORGOTTEN_IN_CHILD):
        made._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_forked_child)


class MadePerNode(Generic[V]):
    """Hold one value per plan node object, made by the first operator built for that node; dropped with the node.

    Why: every driver's operator of a node derived the same structures from the node alone (a fused
    aggregation's program, slot table layout and empty row: ~1 ms a driver for TPC-DS q66's 24 sums), one
    after another in ``Task.start`` before any driver ran, and again on every run of a plan the Session kept.
    Keyed by the node's identity, not by equality (hashing a plan node walks all its expressions), as
    :class:`~gpu_engine.planning.prepared_plans.PreparedPlans` keys plans. ``make`` must return a value no
    operator changes: drivers on other threads share it.
    """

    def __init__(self) -> None:
        self._values: dict[tuple[int, Hashable], tuple[weakref.ref, V]] = {}
        self._lock = threading.Lock()

    def get(self, node: object, make: Callable[[], V], variant: Hashable = None) -> V:
        """Return the value made for ``node`` (this very object) and ``variant`` (what else it was made from, e.g. a
        config switch: plans prepared otherwise may share unchanged nodes), calling ``make()`` when there is none."""
        key = (id(node), variant)
        entry = self._values.get(key)
        if entry is not None and entry[0]() is node:
            return entry[1]
        value = make()  # outside the lock: two drivers may both make it, the first one kept is used
        with self._lock:
            entry = self._values.get(key)
            if entry is not None and entry[0]() is node:
                return entry[1]
            self._values[key] = (weakref.ref(node, lambda ref, key=key: self._forget(key, ref)), value)
        return value

    def _forget(self, key: tuple[int, Hashable], ref: weakref.ref) -> None:
        """Drop a collected node's value (no lock: the collector may run inside :meth:`get` on this thread)."""
        entry = self._values.get(key)
        if entry is not None and entry[0] is ref:
            self._values.pop(key, None)
