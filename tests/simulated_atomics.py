"""Make numba's CUDA simulator switch threads inside and after every atomic operation, so kernels' races show.

Why: the simulator runs a block's CUDA threads as Python threads that switch every few milliseconds, so two
threads rarely meet inside one probe; and it guards each kind of atomic (add, cas, exch, max, ...) with a lock
of its own, so two kinds on one word are not atomic with respect to each other: an ``add(w, 0)`` that reads a
word while an ``exch`` on it lands writes the old value back (the fused aggregation's hang of bfdb273). Here
every atomic keeps its kind's lock, as numba's does, but pauses between its read and its write (where another
kind's operation on the word can land) and after it (where the block's other threads run up to their next
atomic operation), so a kernel that mixes kinds on a word loses the update every time two threads meet there,
and threads of one block reach a new key's slot together, as a GPU's do.
"""

from __future__ import annotations

import time

__all__ = ["interleave_atomics"]

#: The atomics the engine's kernels use, with how each one updates a word (numba's simulator's arithmetic).
_UPDATES = {
    "add": lambda old, value: old + value,
    "sub": lambda old, value: old - value,
    "and_": lambda old, value: old & value,
    "or_": lambda old, value: old | value,
    "xor": lambda old, value: old ^ value,
    "max": lambda old, value: max(old, value),
    "min": lambda old, value: min(old, value),
    "exch": lambda old, value: value,
}


def interleave_atomics(monkeypatch, pause: float = 0.0002) -> None:
    """Patch the simulator's atomics (for the test using ``monkeypatch``) to pause inside and after each one."""
    from numba.cuda.simulator import kernelapi

    def update_with(name, update):
        lock = getattr(kernelapi, name.rstrip("_") + "lock")

        def atomic(self, array, index, value):
            with lock:
                old = array[index]
                time.sleep(pause)  # another kind's operation on the word may land here, as in the simulator
                array[index] = update(old, value)
            time.sleep(pause)  # the block's other threads run up to their next atomic operation
            return old
        return atomic

    def compare_and_swap(self, array, index, expected, value):
        with kernelapi.caslock:
            old = array[index]
            time.sleep(pause)
            if old == expected:
                array[index] = value
        time.sleep(pause)
        return old

    for name, update in _UPDATES.items():
        monkeypatch.setattr(kernelapi.FakeCUDAAtomic, name, update_with(name, update))
    monkeypatch.setattr(kernelapi.FakeCUDAAtomic, "cas", compare_and_swap)
