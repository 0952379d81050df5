"""Remember generated kernel sources (and refusals) by what determines them, once per process.

Why: the same kernels were generated again for every query and every driver.
The fusion pass generates each stretch's kernel to learn whether it can
(:func:`~gpu_engine.planning.fusion.fusion_refusal`), then each driver's
operator generates it again for its first batch layout, and a filter does the
same at operator creation. Generating walks the expression trees through the
row lowering in Python, before the first driver runs: the fusion pass alone
took 36 ms over the 23 TPC-H bench queries (15 ms with this cache), and the
operators' generation as much again; a GPU waits through that host time too.
The compiled modules were already cached by source
(:mod:`gpu_engine.codegen.compiled_modules`); this caches the step before.

Keys are ``repr`` strings of the frozen expressions, types and layouts, not
the objects: equality of the objects would conflate literals that compare
equal but generate different code (``0.0`` and ``-0.0``, ``1`` and ``True``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable, Iterable, TypeVar

from gpu_engine.codegen.row_lowering import Unsupported

__all__ = ["GenerationCache", "aggregate_key", "aggregate_shape"]

T = TypeVar("T")


class GenerationCache:
    """A bounded, thread-safe map from a generation key to its result or to the refusal it raised.

    A refusal (:class:`~gpu_engine.codegen.row_lowering.Unsupported` or
    ``NotImplementedError``) is remembered too and raised again as a fresh
    exception of the same type and message, so asking twice costs nothing
    either way. Other exceptions are bugs and pass through uncached.
    """

    def __init__(self, max_entries: int = 4096):
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[object, BaseException | None]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, generate: Callable[[], T]) -> T:
        """Return ``generate()``'s result for ``key``, generating it on the first request only."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
        if entry is None:
            try:
                entry = (generate(), None)
            except (Unsupported, NotImplementedError) as refusal:
                entry = (None, refusal)
            with self._lock:
                self.misses += 1
                self._entries[key] = entry
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
        result, refusal = entry
        if refusal is not None:
            raise type(refusal)(*refusal.args)
        return result  # type: ignore[return-value]

    def clear(self) -> None:
        """Forget every entry (tests that count generations start from here)."""
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


def aggregate_key(functions: Iterable) -> tuple:
    """Return what of each aggregate object a generated kernel depends on, as a hashable key."""
    return tuple((type(f).__name__, repr(f.call), f.name, f.raw_input, repr(f.output_type), f.final_output)
                 for f in functions)


def aggregate_shape(functions: Iterable) -> tuple:
    """Return what of each aggregate object a generated kernel's text depends on: no names, no constants.

    The kernel reads an aggregate's argument as the program's row code (constants as parameters), and
    its state and updates follow from the function, the folded type and the step: ``sum(x * 2) AS a``
    and ``sum(x * 3) AS b`` share a kernel.
    """
    return tuple((type(f).__name__, f.call.function, f.call.distinct, repr(f.call.dtype), repr(f.value_type),
                  f.raw_input, repr(f.output_type), f.final_output) for f in functions)
