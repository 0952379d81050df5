"""A process's values made once per key: read without a lock, made under one."""

from __future__ import annotations

import threading
from typing import Callable, Generic, Hashable, TypeVar

__all__ = ["MadeOnce"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class MadeOnce(Generic[K, V]):
    """Hold one value per key, made by the first caller that asks for it.

    Why: per-process resources that many threads ask for on hot paths (a decode thread pool per size,
    numba's wrapper of a CUDA stream) must be made once, never twice by two threads at once, yet be
    read without taking a lock every time: a dict read first, then a second look under the lock.
    """

    def __init__(self) -> None:
        self._values: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        """Return the value of ``key``, calling ``make()`` (once, under the lock) when there is none yet."""
        value = self._values.get(key)
        if value is None:
            with self._lock:
                value = self._values.get(key)
                if value is None:
                    value = self._values[key] = make()
        return value
