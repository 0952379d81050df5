"""Grow the slot table of a fused aggregation: move every slot's row to its place in a larger table.

Why: a fused kernel finds or claims a key's slot itself (see
:mod:`gpu_engine.codegen.fused_aggregation_kernel`) and refuses new keys once
the table is half full. The operator then grows the table with this kernel,
which hashes each stored key exactly as the generated code does, so keys keep
being found after the move, and copies the slot's whole row (occupancy, key
words and aggregation state) with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.fused_rows import KEY_HASH_SEED, finish_key_hash, key_word_bits, mix_key_word
from gpu_engine.kernels.launch import launch_twin

__all__ = ["grow_slot_table", "ready_slots"]

_TAG_READY = 2  # a slot's tag (column 0): 0 empty, 1 being written, 2 | null_bits << 2 holding a key


@njit(nogil=True, cache=True)
def _move_cpu(old, occupied, first_key, key_words, new):
    slot_mask = np.int64(new.shape[0] - 1)
    for t in range(occupied.shape[0]):
        row = occupied[t]
        h = np.uint64(KEY_HASH_SEED)
        for w in range(key_words):
            h = np.uint64(mix_key_word(h, np.uint64(key_word_bits(old[row, first_key + w]))))
        h = np.uint64(mix_key_word(h, np.uint64(key_word_bits(old[row, 0]))))
        h = np.uint64(finish_key_hash(h, np.uint64(key_words + 1)))
        slot = np.int64(h & np.uint64(slot_mask))
        while new[slot, 0] != 0:
            slot = (slot + 1) & slot_mask
        for c in range(old.shape[1]):
            new[slot, c] = old[row, c]


@cuda.jit
def _move_cuda(old, occupied, first_key, key_words, new):
    slot_mask = np.int64(new.shape[0] - 1)
    for t in range(cuda.grid(1), occupied.shape[0], cuda.gridsize(1)):
        row = occupied[t]
        h = np.uint64(KEY_HASH_SEED)  # the generated kernels' key hash (see the module docstring)
        for w in range(key_words):
            h = np.uint64(mix_key_word(h, np.uint64(key_word_bits(old[row, first_key + w]))))
        h = np.uint64(mix_key_word(h, np.uint64(key_word_bits(old[row, 0]))))
        h = np.uint64(finish_key_hash(h, np.uint64(key_words + 1)))
        slot = np.int64(h & np.uint64(slot_mask))
        while cuda.atomic.cas(new, (slot, 0), np.int64(0), old[row, 0]) != 0:
            slot = (slot + 1) & slot_mask
        for c in range(1, old.shape[1]):
            new[slot, c] = old[row, c]


def ready_slots(device: Device, table: Any) -> Any:
    """Return the int64 indices of the slots holding a key."""
    xp = device.xp
    return xp.nonzero(table[:, 0] >= _TAG_READY)[0].astype(xp.int64)


def grow_slot_table(device: Device, table: Any, empty_row: Any, capacity: int, first_key: int, key_words: int) -> Any:
    """Return a table of ``capacity`` rows holding every ready row of ``table`` at its new slot.

    ``empty_row`` is the row of a fresh slot (tag 0, each state's starting
    value); ``first_key`` and ``key_words`` say which columns hold the key
    words the hash reads (then the tag). ``capacity`` is a power of two, more
    than twice the keys held.
    """
    xp = device.xp
    occupied = ready_slots(device, table)
    grown = xp.empty((capacity, table.shape[1]), dtype=xp.int64)
    grown[:] = empty_row
    launch_twin(device, occupied.shape[0], _move_cpu, _move_cuda, table, occupied, first_key, key_words, grown)
    return grown
