"""Grow the slot table of a fused aggregation: move every key to its slot in a larger table.

Why: a fused kernel finds or claims a key's slot itself (see
:mod:`gpu_engine.codegen.fused_aggregation_kernel`) and refuses new keys once
the table is half full. The operator then grows the table with this kernel,
which hashes each stored key exactly as the generated code does, so keys keep
being found after the move, and moves the aggregation state arrays with the
returned slot mapping.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.fused_rows import KEY_HASH_SEED, finish_key_hash, key_word_bits, mix_key_word
from gpu_engine.kernels.launch import launch_twin

__all__ = ["SLOT_EMPTY", "SLOT_READY", "grow_slot_table"]

SLOT_EMPTY = 0
SLOT_READY = 2


@njit(nogil=True, cache=True)
def _move_cpu(old_keys, occupied, new_state, new_keys, new_slots):
    slot_mask = np.int64(new_state.shape[0] - 1)
    for t in range(occupied.shape[0]):
        old = occupied[t]
        h = np.uint64(KEY_HASH_SEED)
        for w in range(old_keys.shape[1]):
            h = np.uint64(mix_key_word(h, np.uint64(key_word_bits(old_keys[old, w]))))
        h = np.uint64(finish_key_hash(h, np.uint64(old_keys.shape[1])))
        slot = np.int64(h & np.uint64(slot_mask))
        while new_state[slot] != 0:
            slot = (slot + 1) & slot_mask
        new_state[slot] = 2
        for w in range(old_keys.shape[1]):
            new_keys[slot, w] = old_keys[old, w]
        new_slots[t] = slot


@cuda.jit
def _move_cuda(old_keys, occupied, new_state, new_keys, new_slots):
    slot_mask = np.int64(new_state.shape[0] - 1)
    for t in range(cuda.grid(1), occupied.shape[0], cuda.gridsize(1)):
        old = occupied[t]
        h = np.uint64(KEY_HASH_SEED)  # the generated kernels' key hash (see the module docstring)
        for w in range(old_keys.shape[1]):
            h = np.uint64(mix_key_word(h, np.uint64(key_word_bits(old_keys[old, w]))))
        h = np.uint64(finish_key_hash(h, np.uint64(old_keys.shape[1])))
        slot = np.int64(h & np.uint64(slot_mask))
        while cuda.atomic.cas(new_state, slot, np.int32(0), np.int32(2)) != 0:
            slot = (slot + 1) & slot_mask
        for w in range(old_keys.shape[1]):
            new_keys[slot, w] = old_keys[old, w]
        new_slots[t] = slot


def grow_slot_table(device: Device, slot_state: Any, slot_keys: Any, capacity: int) -> tuple[Any, Any, Any, Any]:
    """Return ``(new_state, new_keys, occupied, new_slots)`` of a table of ``capacity`` slots.

    ``occupied`` are the old table's ready slots and ``new_slots[t]`` where the
    key of ``occupied[t]`` now lives: state arrays move as
    ``new[new_slots] = old[occupied]``. ``capacity`` is a power of two larger
    than twice the keys held.
    """
    xp = device.xp
    occupied = xp.nonzero(slot_state == SLOT_READY)[0].astype(xp.int64)
    new_state = xp.zeros(capacity, dtype=xp.int32)
    new_keys = xp.zeros((capacity, slot_keys.shape[1]), dtype=xp.int64)
    new_slots = xp.empty(occupied.shape[0], dtype=xp.int64)
    launch_twin(device, occupied.shape[0], _move_cpu, _move_cuda, slot_keys, occupied, new_state, new_keys, new_slots)
    return new_state, new_keys, occupied, new_slots
