"""Give each distinct string a stable dense id, batch after batch, hashing and comparing its bytes in place.

Why: a fused aggregation keys its slot table on fixed-width words, so a
string grouping key becomes one id word a row. Interning through Arrow's hash
kernels rebuilt a hash set of every known string for each batch and copied
the batch through three casts and a host round trip; normalizing into packed
words (:func:`gpu_engine.kernels.group_by.normalize_keys`) first writes a
matrix of ``2 + length / 8`` words a row. This table reads each row's bytes
straight from the column's offsets and chars, keeps the known strings as one
offsets/chars pair of its own (which is also the output column of the
groups' keys), and persists across batches, so a batch costs one hash pass
and one probe pass whatever the number of distinct strings (on the CPU, while the
table fits the caches, one pass: the probe loop hashes each row from the words it
loads; a hash pass of its own lets a larger table's probes prefetch rows ahead).

Both twins assign ids in order of each new string's first row, so they give
identical ids: the CPU twin by a sequential loop that stops when the table
must grow (the host grows it and resumes), probing slots that hold each known
string's first 16 bytes, length and id inline (see :data:`SLOT_WIDTH`); the CUDA twin by claiming slots
with compare-and-swap within counted room (a batch whose rows found no room
is claimed again after the table grows), electing the smallest row per new
string with an atomic max on the slot's marker, then numbering elected rows
with a stream compaction sized by the claim count (one host sync a batch).
NULL rows get id 0 and add nothing (the consumer masks them by validity).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from llvmlite import ir
from numba import cuda, njit, types
from numba.extending import intrinsic

from gpu_engine.columnar.column import Column
from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_host_sync, count_kernel_launch
from gpu_engine.kernels.filter import _scatter_kept_cuda
from gpu_engine.kernels.gather import dictionary_row_validity, gather, gather_column, rows_or_dictionary
from gpu_engine.kernels.group_by import EMPTY, _first_slot, _rehash_cuda
from gpu_engine.kernels.launch import launch_cuda, launch_twin, read_only
from gpu_engine.kernels.prefetch import PREFETCH_DISTANCE, PREFETCH_MIN_BYTES, prefetch_row, worth_prefetching

__all__ = ["StringKeyTable", "SERIAL_ROWS", "finish_together", "precompile_calls"]

#: Inputs of at most this many rows are interned by one CUDA thread (one launch, no read back): a
#: dictionary's values, or the keys of a tiny batch. Longer ones claim slots in parallel.
SERIAL_ROWS = 1024

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FMIX_1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
_U33 = np.uint64(33)

#: The CPU twins' ``rows`` when the rows are the column's own, in order (one signature with a gather map's).
_NO_ROWS = read_only(np, np.zeros(1, dtype=np.int32))


# --------------------------------------------------------- shared scalar math
#: Columns of the table's ``_words`` (one row per known string): its first 16 bytes as two little-endian
#: words (zero padded), its length and its hash. A probe compares a row's first words and length with one
#: 32-byte entry; only strings longer than 16 bytes read their tails from the known bytes.
WORD0, WORD1, LENGTH, HASH = 0, 1, 2, 3
WORDS_WIDTH = 4

#: Entries of the table's ``_state`` (int64, on the device): the strings with ids and, for the CUDA twins'
#: room checks, the strings and bytes claimed so far (the known ones plus a parallel batch's claims), and the
#: rows and bytes a parallel batch's claim kernel refused for want of room (the host grows and reruns it).
KNOWN, CLAIMED, CLAIMED_BYTES, REFUSED, REFUSED_BYTES = 0, 1, 2, 3, 4
STATE_WIDTH = 5

#: Columns of the CPU twin's slots (uint64, one 32-byte row a slot, two a cache line): the known string's first
#: 16 bytes as two words, its length, and its id + 1 (0: an empty slot). A probe of a string of at most 16 bytes
#: reads one slot row and nothing else. Why inline: with the slot holding only the id, each row read the slot, then
#: the entry it names in ``_words``: two dependent misses once the table leaves the caches (100k distinct
#: db-benchmark ``id3`` values: ~47 ns a row, about half; see bench/results/2026-11-28-dbbench-inline-string-slots.md).
#: It costs 32 bytes a slot against 4 (at most half the slots hold strings). The CUDA twins keep int32 slots:
#: their claims compare-and-swap one word.
SLOT_WORD0, SLOT_WORD1, SLOT_LENGTH, SLOT_ID = 0, 1, 2, 3
SLOT_WIDTH = 4


@intrinsic
def _load_word(typingctx, array, position):
    """Return the 8 bytes of a uint8 array from ``position`` as one little-endian word (one unaligned load; CPU only)."""
    if not isinstance(array, types.Array) or array.dtype != types.uint8 or not isinstance(position, types.Integer):
        return None
    signature = types.uint64(array, position)

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0])
        index = context.cast(builder, args[1], sig.args[1], types.intp)
        pointer = builder.bitcast(builder.gep(data.data, [index]), ir.PointerType(ir.IntType(64)))
        return builder.load(pointer, align=1)

    return signature, codegen


@njit(nogil=True, cache=True, inline="always")
def _word_cpu(chars, start, stop):
    """Return the bytes ``[start, min(start + 8, stop))`` as a zero-padded little-endian word (0 when empty).

    One unaligned 8-byte load where the buffer has 8 bytes from ``start``, masked to the string's bytes;
    byte by byte at the buffer's end.
    """
    count = stop - start
    if count <= 0:
        return np.uint64(0)
    if start + 8 <= chars.shape[0]:
        word = _load_word(chars, start)
        if count < 8:
            word &= (np.uint64(1) << np.uint64(8 * count)) - np.uint64(1)
        return word
    word = np.uint64(0)
    for k in range(min(count, 8)):
        word |= np.uint64(chars[start + k]) << np.uint64(8 * k)
    return word


@njit(nogil=True, cache=True, inline="always")
def _mix_word(h, word):
    """Fold one 8-byte word into a running string hash (a multiply and a shift: one word, not eight bytes, a step)."""
    h = (h ^ word) * _FMIX_1
    return h ^ (h >> _U33)


@njit(nogil=True, cache=True, inline="always")
def _finish_hash(h):
    """Finish a string hash with murmur3's mix (full avalanche for the slot bits)."""
    h ^= h >> _U33
    h *= _FMIX_2
    return h ^ (h >> _U33)


@njit(nogil=True, cache=True, inline="always")
def _head_words_cpu(chars, start, length):
    """Return a string's first 16 bytes as two zero-padded little-endian words (what :func:`_word_cpu` gives for
    ``start`` and ``start + 8``), for the hash pass.

    Why: two unconditional unaligned loads, then a mask for the word the string ends in, where the buffer has 16
    bytes from ``start`` (all but its last few strings); :func:`_word_cpu`'s own checks on each word cost the hash
    pass over 12-byte db-benchmark ``id3`` values 6.2 ns a row against 3.5 (bench/results/2026-11-29-intern.md).
    The probe loop keeps :func:`_word_cpu`: this helper measured slower there.
    """
    if start + 16 > chars.shape[0]:
        return _word_cpu(chars, start, start + length), _word_cpu(chars, start + 8, start + length)
    word0 = _load_word(chars, start)
    word1 = _load_word(chars, start + 8)
    if length < 16:
        if length > 8:
            word1 &= (np.uint64(1) << np.uint64(8 * (length - 8))) - np.uint64(1)
        else:
            word1 = np.uint64(0)
            if length < 8:
                word0 &= (np.uint64(1) << np.uint64(8 * length)) - np.uint64(1)
    return word0, word1


@njit(nogil=True, cache=True, inline="always")
def _words_hash(chars, start, length, word0, word1):
    """Hash a string's length, then its bytes 8 at a time (zero-padded last word), given its first two words
    (:func:`_head_words_cpu`): the same hash as the CUDA twins'."""
    h = _FNV_OFFSET ^ np.uint64(length)
    if length > 0:
        h = _mix_word(h, word0)
    if length > 8:
        h = _mix_word(h, word1)
    for position in range(start + 16, start + length, 8):
        h = _mix_word(h, _word_cpu(chars, position, start + length))
    return _finish_hash(h)


@njit(nogil=True, cache=True, inline="always")
def _string_hash(offsets, chars, i):
    """Hash row ``i``'s length, then its bytes 8 at a time (zero-padded last word).

    Inlined by Numba (``inline="always"``): called across compiled functions, it cost twice as much a row.
    """
    start = offsets[i]
    length = offsets[i + 1] - start
    word0, word1 = _head_words_cpu(chars, start, length)
    return _words_hash(chars, start, length, word0, word1)


@njit(nogil=True, cache=True, inline="always")
def _same_tail(known_offsets, known_chars, g, chars, start, length):
    """Return True when known string ``g``'s bytes from the 17th on equal the row's (its first 16 and length matched)."""
    at = known_offsets[g]
    for k in range(16, length, 8):
        if _word_cpu(known_chars, at + k, at + length) != _word_cpu(chars, start + k, start + length):
            return False
    return True


# ------------------------------------------------------------------- CPU twins
@njit(nogil=True, cache=True)
def _hash_strings_cpu(offsets, chars, rows, has_rows, hashes):
    """Hash each row's string: row ``rows[i]`` of the column where ``has_rows`` (a gather map read in place)."""
    for i in range(hashes.shape[0]):
        hashes[i] = _string_hash(offsets, chars, np.int64(rows[i]) if has_rows else i)


@njit(nogil=True, cache=True)
def _intern_rows_cpu(offsets, chars, validity, has_validity, rows, has_rows, hashes, hashed, start, slots,
                     known_words, known_offsets, known_chars, state, ids):
    """Intern rows from ``start`` on (``state`` holds the known count); return the row reached: early when
    the table must grow (the host grows it and calls again). ``slots`` rows are laid out as :data:`SLOT_WIDTH`
    says; a new string is written to its slot and to ``known_words`` / ``known_offsets`` / ``known_chars``.
    Where ``has_rows``, input ``i`` is the column's row ``rows[i]`` (its bytes and validity read there).

    ``hashed``: ``hashes`` holds every row's hash (:func:`_hash_strings_cpu`'s pass) and a table out of the
    caches prefetches row ``i + PREFETCH_DISTANCE``'s slot; else each row's hash is computed here from the
    words the probe loads anyway (no pass of its own, no prefetch: see :meth:`StringKeyTable._intern_plain`)."""
    capacity = slots.shape[0]
    mask = np.uint64(capacity - 1)
    max_known = min(known_words.shape[0], capacity // 2)
    num_known = state[0]
    n = ids.shape[0]
    prefetch = hashed and worth_prefetching(slots)
    for i in range(start, n):
        row = np.int64(rows[i]) if has_rows else i
        if has_validity and not validity[row]:
            ids[i] = 0
            continue
        if prefetch and i + PREFETCH_DISTANCE < n:  # row i + D's slot row: its words, length and id in one line
            prefetch_row(slots, np.int64(hashes[i + PREFETCH_DISTANCE] & mask))
        first = offsets[row]
        length = offsets[row + 1] - first
        word0 = _word_cpu(chars, first, first + length)  # not _head_words_cpu: slower in this loop (100 strings:
        word1 = _word_cpu(chars, first + 8, first + length)  # 7.9 -> 9.3 ns a row; 2026-11-29-intern.md)
        if hashed:
            h = hashes[i]
        else:  # _string_hash over the words already loaded (the same hash: the table's slots do not depend on it)
            h = _words_hash(chars, first, length, word0, word1)
        slot = np.int64(h & mask)  # _first_slot, inlined
        while True:
            entry = slots[slot, SLOT_ID]
            if entry == 0:
                at = known_offsets[num_known]
                if num_known >= max_known or at + length > known_chars.shape[0]:
                    state[0] = num_known
                    return i
                g = num_known
                for k in range(length):
                    known_chars[at + k] = chars[first + k]
                known_offsets[g + 1] = at + length
                known_words[g, WORD0] = word0
                known_words[g, WORD1] = word1
                known_words[g, LENGTH] = np.uint64(length)
                known_words[g, HASH] = h
                slots[slot, SLOT_WORD0] = word0
                slots[slot, SLOT_WORD1] = word1
                slots[slot, SLOT_LENGTH] = np.uint64(length)
                slots[slot, SLOT_ID] = np.uint64(g + 1)
                num_known += 1
                break
            g = np.int64(entry) - 1
            # The first 16 bytes and the length in the slot's row; the hash is not compared (a slot of another
            # string, rare at half load, costs a word compare instead).
            if (slots[slot, SLOT_WORD0] == word0 and slots[slot, SLOT_WORD1] == word1
                    and slots[slot, SLOT_LENGTH] == np.uint64(length)
                    and (length <= 16 or _same_tail(known_offsets, known_chars, g, chars, first, length))):
                break
            slot = (slot + 1) & (capacity - 1)
        ids[i] = g
    state[0] = num_known
    return ids.shape[0]


@njit(nogil=True, cache=True)
def _rehash_inline_cpu(known_words, known, slots):
    """Fill empty CPU twin ``slots`` with the ``known`` strings of ``known_words`` (their hash picks the slot)."""
    capacity = slots.shape[0]
    for g in range(known):
        slot = np.int64(known_words[g, HASH] & np.uint64(capacity - 1))
        while slots[slot, SLOT_ID] != 0:
            slot = (slot + 1) & (capacity - 1)
        slots[slot, SLOT_WORD0] = known_words[g, WORD0]
        slots[slot, SLOT_WORD1] = known_words[g, WORD1]
        slots[slot, SLOT_LENGTH] = known_words[g, LENGTH]
        slots[slot, SLOT_ID] = np.uint64(g + 1)


# ------------------------------------------------------------------ CUDA twins
# The CUDA twins read a word byte by byte (a GPU faults on unaligned loads) but hash the same words the
# same way, so both twins give a string the same hash.
@cuda.jit
def _hash_strings_cuda(offsets, chars, hashes):
    for i in range(cuda.grid(1), hashes.shape[0], cuda.gridsize(1)):
        start = offsets[i]
        stop = offsets[i + 1]
        h = _FNV_OFFSET ^ np.uint64(stop - start)
        for position in range(start, stop, 8):
            word = np.uint64(0)
            for k in range(8):  # (no builtin min in a kernel: real numba.cuda rejects it)
                if position + k < stop:
                    word |= np.uint64(chars[position + k]) << np.uint64(8 * k)
            h = np.uint64(_mix_word(h, word))
        hashes[i] = np.uint64(_finish_hash(h))


@cuda.jit
def _claim_string_slots_cuda(offsets, chars, validity, has_validity, hashes, slots, known_words, known_offsets,
                             known_chars, state, row_slots):
    """Find or claim each row's slot; a claimed slot holds ``-(row + 2)`` of the string's smallest row.

    A claim first reserves an entry and the string's bytes in ``state`` (CLAIMED, CLAIMED_BYTES); a row
    that finds no room refuses (``row_slots`` -1, counted in REFUSED and REFUSED_BYTES) and the host grows
    the table and claims the batch again. So the table needs room for the strings a batch adds, not for all
    its rows, and its slots never fill past half (no probe can loop forever).
    """
    capacity = slots.shape[0]
    max_known = known_words.shape[0]
    if capacity // 2 < max_known:
        max_known = capacity // 2
    max_bytes = known_chars.shape[0]
    for i in range(cuda.grid(1), hashes.shape[0], cuda.gridsize(1)):
        if has_validity and not validity[i]:
            row_slots[i] = -1
            continue
        h = hashes[i]
        marker = -(i + 2)
        slot = _first_slot(h, capacity)
        start = offsets[i]
        length = offsets[i + 1] - start
        refused = False
        while True:
            current = slots[slot]
            if current == EMPTY:
                claimed = cuda.atomic.add(state, CLAIMED, 1)
                claimed_bytes = cuda.atomic.add(state, CLAIMED_BYTES, length)
                room = claimed < max_known and claimed_bytes + length <= max_bytes
                if room:
                    current = cuda.atomic.cas(slots, slot, EMPTY, marker)
                    if current == EMPTY:
                        break
                cuda.atomic.add(state, CLAIMED, -1)  # another row took the slot, or no room: give it back
                cuda.atomic.add(state, CLAIMED_BYTES, -length)
                if not room:
                    # Rows of one new string race for its slot: read it again before refusing (a refusal
                    # only costs a rerun, but one per batch would size the table for every row).
                    current = slots[slot]
                    if current == EMPTY:
                        cuda.atomic.add(state, REFUSED, 1)
                        cuda.atomic.add(state, REFUSED_BYTES, length)
                        refused = True
                        break
            # The bytes of a known string (its hash in its entry) or of an earlier row.
            if current >= 0:
                same = known_words[current, HASH] == h
                other_start = known_offsets[current]
                other_length = known_offsets[current + 1] - other_start
            else:
                other = -current - 2
                same = hashes[other] == h
                other_start = offsets[other]
                other_length = offsets[other + 1] - other_start
            same = same and other_length == length
            k = 0
            while same and k < other_length:
                byte = known_chars[other_start + k] if current >= 0 else chars[other_start + k]
                same = byte == chars[start + k]
                k += 1
            if same:
                if current < 0:
                    cuda.atomic.max(slots, slot, marker)
                break
            slot = (slot + 1) & (capacity - 1)
        row_slots[i] = -1 if refused else slot


@cuda.jit
def _flag_first_string_rows_cuda(slots, row_slots, is_first):
    """Flag (1) each row that claimed its string's slot, for the host's compaction of the new strings' rows."""
    for i in range(cuda.grid(1), row_slots.shape[0], cuda.gridsize(1)):
        is_first[i] = 1 if row_slots[i] >= 0 and slots[row_slots[i]] == -(i + 2) else 0


@cuda.jit
def _intern_rows_serial_cuda(offsets, chars, validity, has_validity, hashes, start, slots, known_words,
                             known_offsets, known_chars, state, ids):
    """The CPU twins' hash and loop on one thread, for short inputs (a dictionary's values): one launch, no
    read back. The host reserved room for every row first, so it never stops early."""
    if cuda.grid(1) != 0:
        return
    capacity = slots.shape[0]
    num_known = state[0]
    for i in range(start, ids.shape[0]):
        if has_validity and not validity[i]:
            ids[i] = 0
            continue
        first = offsets[i]
        length = offsets[i + 1] - first
        h = _FNV_OFFSET ^ np.uint64(length)  # _hash_strings_cuda's loop; the first two words kept
        word0 = np.uint64(0)
        word1 = np.uint64(0)
        for position in range(first, first + length, 8):
            word = np.uint64(0)
            for k in range(8):
                if position + k < first + length:
                    word |= np.uint64(chars[position + k]) << np.uint64(8 * k)
            if position == first:
                word0 = word
            elif position == first + 8:
                word1 = word
            h = np.uint64(_mix_word(h, word))
        hashes[i] = np.uint64(_finish_hash(h))
        h = hashes[i]  # as the array's uint64 (the simulator's arithmetic may leave a Python int)
        slot = _first_slot(h, capacity)
        while True:
            g = slots[slot]
            if g == EMPTY:
                g = num_known
                at = known_offsets[g]
                for k in range(length):
                    known_chars[at + k] = chars[first + k]
                known_offsets[g + 1] = at + length
                known_words[g, WORD0] = word0
                known_words[g, WORD1] = word1
                known_words[g, LENGTH] = np.uint64(length)
                known_words[g, HASH] = h
                slots[slot] = g
                num_known += 1
                break
            same = (known_words[g, HASH] == h and known_words[g, WORD0] == word0 and known_words[g, WORD1] == word1
                    and known_words[g, LENGTH] == np.uint64(length))
            k = 16
            while same and k < length:
                same = known_chars[known_offsets[g] + k] == chars[first + k]
                k += 1
            if same:
                break
            slot = (slot + 1) & (capacity - 1)
        ids[i] = g
    state[KNOWN] = num_known
    state[CLAIMED] = num_known  # what the parallel twin's room checks count from
    state[CLAIMED_BYTES] = known_offsets[num_known]


@cuda.jit
def _append_new_strings_cuda(new_rows, ends, offsets, chars, hashes, row_slots, slots, known_words,
                             known_offsets, known_chars, state):
    """Give elected rows the ids after ``state[0]`` and copy their bytes (``ends``: inclusive sums of their lengths)."""
    first_id = state[0]
    base = known_offsets[first_id]
    for j in range(cuda.grid(1), new_rows.shape[0], cuda.gridsize(1)):
        row = new_rows[j]
        g = first_id + j
        slots[row_slots[row]] = g
        source = offsets[row]
        length = offsets[row + 1] - source
        target = base + ends[j] - length
        known_offsets[g + 1] = base + ends[j]
        word0 = np.uint64(0)
        word1 = np.uint64(0)
        for k in range(length):
            byte = chars[source + k]
            known_chars[target + k] = byte
            if k < 8:
                word0 |= np.uint64(byte) << np.uint64(8 * k)
            elif k < 16:
                word1 |= np.uint64(byte) << np.uint64(8 * (k - 8))
        known_words[g, WORD0] = word0
        known_words[g, WORD1] = word1
        known_words[g, LENGTH] = np.uint64(length)
        known_words[g, HASH] = hashes[row]


@cuda.jit
def _read_string_ids_cuda(slots, row_slots, ids):
    for i in range(cuda.grid(1), row_slots.shape[0], cuda.gridsize(1)):
        ids[i] = slots[row_slots[i]] if row_slots[i] >= 0 else 0


# ------------------------------------------------------------------- the table
def _next_power_of_two(value: int) -> int:
    return 1 << max(4, (int(value) - 1).bit_length())


class StringKeyTable:
    """Intern strings into dense ``int64`` ids that stay the same across batches; state lives on the device.

    The count of known strings lives in a device array too (``_state``): on cuda the host keeps upper
    bounds of the strings and bytes (each batch adds at most its rows and bytes) and reads the exact
    count back only when a bound passes the arrays' room, so an input of at most
    :data:`SERIAL_ROWS` rows (a dictionary's values) costs one launch and no sync. A longer one costs
    one read of the claim counts: its rows claim slots within the room made for the strings the last
    batch added (none once the key set stops growing), and only when rows were refused does the table
    grow and claim again. So the arrays follow the distinct strings, not the rows: room for every row of
    a 16M-row GPU batch was ~1 GB per string key.

    Parameters
    ----------
    device
        Where the table's arrays live; selects the twin.
    initial_capacity
        Slots to start with (rounded up to a power of two); the table grows to
        keep at most half of its slots full.
    serial_rows
        Inputs of at most this many rows take the one-thread CUDA twin (see :data:`SERIAL_ROWS`).
    """

    def __init__(self, device: Device, initial_capacity: int = 1024, serial_rows: int = SERIAL_ROWS):
        self.device = device
        self.serial_rows = serial_rows
        xp = device.xp
        capacity = _next_power_of_two(initial_capacity)
        self._slots = self._new_slots(capacity, 0)
        self._words = xp.zeros((capacity // 2, WORDS_WIDTH), dtype=xp.uint64)  # see WORD0 .. HASH
        self._offsets = xp.zeros(capacity // 2 + 1, dtype=xp.int64)
        self._chars = xp.zeros(8 * capacity, dtype=xp.uint8)
        self._state = xp.zeros(STATE_WIDTH, dtype=xp.int64)  # see KNOWN .. REFUSED_BYTES
        #: Upper bounds of the known strings and their bytes (exact on cpu, and after each read on cuda).
        self._known_bound = 0
        self._chars_bound = 0
        self._bounds_exact = True
        #: The strings and bytes the next parallel batch makes room for before it claims: the first table's
        #: room, then what the last parallel batch added (none once the key set stops growing).
        self._expected_new = capacity // 2
        self._expected_bytes = 8 * capacity
        #: Slot tables made past the first (each a fresh zeroed table and a rehash of every known string).
        self.growths = 0

    @property
    def nbytes(self) -> int:
        """Return the bytes the table's arrays hold (what its owner reserves in its memory pool)."""
        return sum(int(a.nbytes) for a in (self._slots, self._words, self._offsets, self._chars))

    @property
    def capacity(self) -> int:
        """Return the number of slots."""
        return int(self._slots.shape[0])

    def expect(self, strings: int, rows: int) -> bool:
        """Make room at once for ``strings`` known strings in all, where the ``rows`` rows of the key seen so far (the
        caller's count: a dictionary's values are interned once for all of its rows) were nearly all new strings;
        return whether it did.

        Why: an aggregation that knows how many keys it will receive (a FINAL step whose PARTIAL step gave up
        grouping) sized its slot table once, but each string key's table still doubled batch by batch (each
        growth a fresh zeroed slot table, ~32 bytes a string, and a rehash of every string). Only a key whose
        rows so far were nearly all new (at least 7 in 8) takes the estimate: a key of few values (a country
        among millions of orders) keeps its small table. The bytes follow the mean length so far. Host ints
        only, but for one read of the known count on cuda where its bound passes the rows' 7 in 8 (asked once a
        driver: see ``FusedAggregation._size_for_abandoned_partials``).
        """
        if not rows or 8 * self._known_bound < 7 * rows or strings <= self._known_bound:
            return False  # the bound says no without a read (it is an upper bound on cuda)
        known = self._exact_known()
        if 8 * known < 7 * rows:
            return False
        more = strings - known
        self._reserve(more, -(-more * self._chars_bound // max(known, 1)))
        return True

    def intern(self, column: Column, together: list | None = None, rows: Any = None) -> Any:
        """Return the ``int64`` id of each row of a string column (0 for NULL rows), adding unseen strings.

        A dictionary-encoded column interns its dictionary and gathers the ids by code, unless the dictionary
        holds more values than the column has rows (:func:`~gpu_engine.kernels.gather.rows_or_dictionary`:
        then its rows are interned, and the table keeps only the strings they use). With ``together``
        (a list shared by the string keys of one batch), a plain column whose rows claim slots in parallel
        leaves its claims there and its ids are written by :func:`finish_together`, which reads every
        key's claim counts back in one sync instead of one a key.

        With ``rows`` (an ``int32`` gather map: a batch's rows of ``column``), the ids are those of
        ``column``'s rows ``rows`` in order. Why: a FINAL step's batches arrive from a repartition as the
        sender's columns with one map per partition; gathering a string key's bytes through the map only to
        hash and compare them once was about 40% of its interning (db-benchmark q10's three string keys). The
        CPU twins read the bytes through the map in place; the CUDA twins gather them first (their parallel
        claims compare an earlier row's bytes at that row's position).
        """
        xp = self.device.xp
        if rows is not None and (column.is_dictionary or self.device.kernel_flavor != "cpu"
                                 or rows.dtype != np.int32 or not isinstance(rows, np.ndarray)):
            column, rows = gather_column(self.device, column, rows), None
        column = rows_or_dictionary(self.device, column)  # a dictionary larger than the rows: intern the rows
        if column.is_dictionary:
            dictionary = column.dictionary
            if not len(dictionary) or not len(column):
                return xp.zeros(len(column), dtype=xp.int64)
            ids = gather(self.device, self._intern_plain(dictionary, all_new=True), column.data)
            validity = dictionary_row_validity(self.device, column)
            return ids if validity is None else xp.where(validity, ids, 0)
        if together is not None and any(table is self for table, _ in together):
            finish_together(self.device, together)  # one table's claims count together: finish the first
        return self._intern_plain(column, all_new=False, together=together, rows=rows)

    def _intern_plain(self, column: Column, all_new: bool, together: list | None = None, rows: Any = None) -> Any:
        """Intern a plain string column's rows (its rows ``rows``, on cpu only); ``all_new``: expect every row to
        be a new string (a dictionary)."""
        xp = self.device.xp
        n = len(column) if rows is None else int(rows.shape[0])
        ids = xp.empty(n, dtype=xp.int64)
        if n == 0:
            return ids
        offsets = xp.ascontiguousarray(column.offsets.astype(xp.int64, copy=False))
        chars = column.data if column.data.shape[0] else xp.zeros(1, dtype=xp.uint8)
        has_validity = column.validity is not None
        validity = xp.ascontiguousarray(column.validity) if has_validity else xp.zeros(1, dtype=xp.bool_)
        hashes = xp.empty(n, dtype=xp.uint64)
        batch_chars = int(column.data.shape[0])  # the bytes the rows may add, known without a read
        arguments = (offsets, chars, validity, has_validity, hashes)
        if self.device.kernel_flavor == "cpu":
            mapped = (read_only(xp, rows), True) if rows is not None else (_NO_ROWS, False)
            count_kernel_launch()  # the CUDA path's hash launch
            if all_new:  # a dictionary: room for every value first, one pass (as the CUDA claims make room)
                self._reserve(n, batch_chars)
            # A table out of the caches: hash every row first, so the probe loop prefetches rows ahead. One in
            # them: hash in the probe loop, from the words it loads anyway (no pass writing and reading hashes).
            hashed = bool(self._slots.nbytes > PREFETCH_MIN_BYTES)
            if hashed:
                _hash_strings_cpu(offsets, chars, *mapped, hashes)
            self._intern_cpu((offsets, chars, validity, has_validity, *mapped, hashes, hashed), ids)
        elif n <= self.serial_rows:
            self._reserve(n, batch_chars)
            launch_cuda(self.device, _intern_rows_serial_cuda, 1, *arguments, 0, self._slots, self._words,
                        self._offsets, self._chars, self._state, ids)
            self._known_bound += n
            self._chars_bound += batch_chars
            self._bounds_exact = False
        else:
            launch_cuda(self.device, _hash_strings_cuda, n, offsets, chars, hashes)
            claims = self._claim(arguments, ids, batch_chars, all_new)
            if together is None:
                self._finish(claims, self._claim_counts())
            else:
                together.append((self, claims))
        return ids

    def cpu_twins(self) -> list[tuple[Any, tuple]]:
        """Return the CPU twins :meth:`intern` launches, with arguments of the types it gives them (placeholders).

        Why: a fused aggregation binds a batch by interning its string keys; in the background compile mode
        (:mod:`gpu_engine.codegen.background_compiles`) these static kernels are compiled off the drivers
        before any batch is bound, so that no driver compiles them on a machine that never ran them.
        """
        offsets = np.zeros(1, dtype=np.int64)
        chars = np.zeros(1, dtype=np.uint8)
        hashes = np.zeros(1, dtype=np.uint64)
        arguments = (offsets, chars, np.zeros(1, dtype=np.bool_), False, _NO_ROWS, False, hashes, False)
        slots = np.zeros((16, SLOT_WIDTH), dtype=np.uint64)
        words = np.zeros((8, WORDS_WIDTH), dtype=np.uint64)
        return [(_hash_strings_cpu, (offsets, chars, _NO_ROWS, False, hashes)),
                (_intern_rows_cpu, (*arguments, 0, slots, words, np.zeros(9, dtype=np.int64),
                                    np.zeros(8, dtype=np.uint8), np.zeros(STATE_WIDTH, dtype=np.int64),
                                    np.zeros(1, dtype=np.int64))),
                (_rehash_inline_cpu, (words, 0, slots))]

    def values(self) -> Column:
        """Return every known string as a column, at the position of its id (one host read on cuda)."""
        xp = self.device.xp
        known = self._exact_known()
        offsets = xp.ascontiguousarray(self._offsets[: known + 1]).copy()
        return Column(pa.string(), self._chars[: self._chars_bound].copy(), None, offsets)

    @property
    def ids_below(self) -> int:
        """Return a bound every id given out so far is below, without a device read (exact on cpu)."""
        return self._known_bound

    @property
    def num_known(self) -> int:
        """Return how many distinct strings the table holds (a host read on cuda)."""
        return self._exact_known()

    # ----------------------------------------------------------------- internals
    def _exact_known(self) -> int:
        """Make the bounds exact (one read on cuda where they are not yet, none on cpu) and return the known strings."""
        if self.device.kernel_flavor == "cpu":
            return self._known_bound
        if self._bounds_exact:
            return self._known_bound
        known = self._state[0:1]
        self._known_bound, self._chars_bound = self.device.read_scalars([known, self._offsets[known]])
        self._bounds_exact = True
        return self._known_bound

    def _intern_cpu(self, arguments, ids) -> None:
        """Intern the rows, growing the table where it runs out by what the rows seen so far predict.

        Why: growing by doubling from the first table (1,024 slots, 8 KB) stopped, reallocated and rehashed
        ~20 times for a batch of all-new strings (a join's customer names: each its own group), twice the
        interning itself. The new strings and bytes met so far, scaled by the rows and bytes still to come,
        size the rest of the batch in one step where keys spread evenly, and cost nothing where the keys
        repeat (few new strings met); doubling stays the floor, so skewed keys still grow geometrically, and 64
        times the room that ran out the ceiling, so early rows that are all new cannot size the table for rows
        that turn out to repeat beyond a bounded multiple of the distinct strings.
        """
        n = ids.shape[0]
        offsets, mapped, has_rows = arguments[0], arguments[4], arguments[5]
        if has_rows:  # the bytes before each input (as a column's own offsets say), made only if the table grows
            def ends(i: int) -> int:
                picked = mapped[:i].astype(np.int64)
                return int((offsets[picked + 1] - offsets[picked]).sum())
        else:
            def ends(i: int) -> int:
                return int(offsets[i] - offsets[0])
        row = 0
        known_before, bytes_before = self._known_bound, self._chars_bound
        count_host_sync()  # the CPU twin returns the new-string count that the CUDA path reads back
        while row < n:
            if row and not arguments[-1] and self._slots.nbytes > PREFETCH_MIN_BYTES:
                arguments = self._hashed_from(arguments, row)
            count_kernel_launch()  # each CPU twin call stands for the CUDA path's launches
            row = _intern_rows_cpu(*arguments, row, self._slots, self._words, self._offsets, self._chars,
                                   self._state, ids)
            self._known_bound = int(self._state[0])
            self._chars_bound = int(self._offsets[self._known_bound])
            if row < n:  # grow what ran out (room for the stopping row) by the estimate, bounded by what is to come
                at = int(mapped[row]) if has_rows else row
                length = int(offsets[at + 1] - offsets[at])
                full = self._known_bound >= min(int(self._words.shape[0]), self.capacity // 2)
                short = self._chars_bound + length > int(self._chars.shape[0])
                seen_bytes = ends(row)
                rest_bytes = ends(n) - seen_bytes
                seen_bytes = max(seen_bytes, 1)
                new_rows = -(-(self._known_bound - known_before) * (n - row) // max(row, 1))
                new_bytes = -(-(self._chars_bound - bytes_before) * rest_bytes // seen_bytes)
                rows = max(self._known_bound, 1024)
                # (the bytes the floor's strings take at the mean length so far: the bytes' ceiling follows the rows')
                size = max(self._chars_bound, 8192, -(-rows * self._chars_bound // max(self._known_bound, 1)))
                # Both by their estimates, whichever ran out (the other's floor only where it ran out): growing only
                # the strings' room stopped again for bytes right after (50k new 12-byte strings: 3 stops, not 1).
                new_rows = min(n - row, min(new_rows, 64 * rows))
                new_bytes = min(rest_bytes, min(new_bytes, 64 * size))
                self._reserve(max(new_rows, min(n - row, rows)) if full else new_rows,
                              max(new_bytes, min(rest_bytes, max(size, length))) if short else new_bytes)

    @staticmethod
    def _hashed_from(arguments: tuple, row: int) -> tuple:
        """Return the probe loop's ``arguments`` with the hashes of inputs ``row`` on computed (a hash pass over
        them) and the loop told to read them and prefetch.

        Why: a batch that started on a table within the caches (probes hashing in the loop, no prefetch) but
        grew it past them mid-batch probed the rest of its rows one cache miss at a time: a FINAL step's first
        batch of partial results (every row a new string, db-benchmark's ``GROUP BY id3``: 50k strings a
        driver) and a PARTIAL step's first batch. Inputs before ``row`` are interned already; their hashes are
        not needed.
        """
        offsets, chars, validity, has_validity, rows, has_rows, hashes, _ = arguments
        if has_rows:
            _hash_strings_cpu(offsets, chars, rows[row:], True, hashes[row:])
        else:
            _hash_strings_cpu(offsets[row:], chars, rows, False, hashes[row:])
        return offsets, chars, validity, has_validity, rows, has_rows, hashes, True

    def _claim(self, arguments, ids, batch_chars: int, all_new: bool) -> tuple:
        """Make room for the strings expected (the last batch's new ones; every row for a dictionary) and launch
        the rows' parallel claims; :meth:`_finish` reads their counts."""
        n = ids.shape[0]
        if all_new:
            self._reserve(n, batch_chars)
        else:
            self._reserve(min(n, self._expected_new), min(batch_chars, self._expected_bytes))
        row_slots = self.device.xp.empty(n, dtype=self.device.xp.int64)
        claims = (arguments, ids, batch_chars, row_slots)
        self._launch_claims(claims)
        return claims

    def _launch_claims(self, claims: tuple) -> None:
        (offsets, chars, validity, has_validity, hashes), _, _, row_slots = claims
        launch_cuda(self.device, _claim_string_slots_cuda, hashes.shape[0], offsets, chars, validity, has_validity,
                    hashes, self._slots, self._words, self._offsets, self._chars, self._state, row_slots)

    def _claim_counts(self) -> list[Any]:
        """Return the device scalars :meth:`_finish` needs (one read for them, or with other tables')."""
        return [self._state[k:k + 1] for k in range(STATE_WIDTH)]

    def _finish(self, claims: tuple, counts: list) -> None:
        """Given the claim counts (device scalars, or ints already read), grow and claim again while rows were
        refused, then number the new strings, append them and write the rows' ids."""
        xp = self.device.xp
        device = self.device
        (offsets, chars, _, _, hashes), ids, batch_chars, row_slots = claims
        n = ids.shape[0]
        if not isinstance(counts[0], int):
            counts = device.read_scalars(counts)
        known, claimed, claimed_bytes, refused, refused_bytes = counts
        while refused:
            self._grow_after_refusal(n, batch_chars, claimed - known, refused, claimed_bytes, refused_bytes)
            self._launch_claims(claims)
            known, claimed, claimed_bytes, refused, refused_bytes = device.read_scalars(self._claim_counts())
        num_new = claimed - known
        self._known_bound, self._chars_bound = claimed, claimed_bytes  # exact: every claim makes an entry
        self._bounds_exact = True
        self._expected_new = num_new
        self._expected_bytes = num_new * -(-claimed_bytes // max(claimed, 1))
        if num_new:
            is_first = xp.empty(n, dtype=xp.int32)
            launch_cuda(device, _flag_first_string_rows_cuda, n, self._slots, row_slots, is_first)
            new_rows = xp.empty(num_new, dtype=xp.int32)
            launch_cuda(device, _scatter_kept_cuda, n, is_first, xp.cumsum(is_first, dtype=xp.int32), new_rows)
            ends = xp.cumsum(offsets[new_rows.astype(xp.int64) + 1] - offsets[new_rows])
            launch_cuda(device, _append_new_strings_cuda, num_new, new_rows, ends, offsets, chars, hashes, row_slots,
                        self._slots, self._words, self._offsets, self._chars, self._state)
            self._state[KNOWN] = claimed
        launch_cuda(device, _read_string_ids_cuda, n, self._slots, row_slots, ids)

    def _grow_after_refusal(self, n: int, batch_chars: int, claimed_rows: int, refused: int, claimed_bytes: int,
                            refused_bytes: int) -> None:
        """Forget a refused batch's claims and grow the room to what the batch seems to need.

        The estimate scales the strings (bytes) claimed by the share of the rows (bytes) their rows covered:
        exact for evenly spread keys, low for skewed ones (another round grows again). It never passes what
        the batch could add (its claimed and refused rows: a string refused in many rows counts in each) nor
        16 times the room that ran out, which at least doubles, so the arrays stay within a multiple of the
        distinct strings whatever the row order.
        """
        xp = self.device.xp
        self._slots = xp.where(self._slots < EMPTY, EMPTY, self._slots).astype(xp.int32, copy=False)
        self._bounds_exact = False  # one more read, on growth only: the known bytes
        known = self._exact_known()
        known_bytes = self._chars_bound
        self._state[CLAIMED] = known
        self._state[CLAIMED_BYTES] = known_bytes
        self._state[REFUSED] = 0
        self._state[REFUSED_BYTES] = 0
        row_room = min(int(self._words.shape[0]), self.capacity // 2) - known
        byte_room = int(self._chars.shape[0]) - known_bytes
        new_bytes = claimed_bytes - known_bytes
        rows_out = claimed_rows >= row_room
        bytes_out = new_bytes + refused_bytes > byte_room and not rows_out
        spurious = not rows_out and not bytes_out  # rows raced for one string's slot: grow both to progress
        rows = min(n, claimed_rows + refused, 16 * max(row_room, 1), -(-claimed_rows * n // max(n - refused, 1)))
        if rows_out or spurious:
            rows = min(n, max(rows, 2 * row_room, 16))
        incoming = min(batch_chars, new_bytes + refused_bytes, 16 * max(byte_room, 1),
                       -(-new_bytes * batch_chars // max(batch_chars - refused_bytes, 1)))
        if bytes_out or spurious:
            incoming = min(batch_chars, max(incoming, 2 * byte_room, 64))
        self._reserve(max(rows, 0), max(incoming, 0))

    def _reserve(self, rows: int, incoming: int) -> None:
        """Make room for ``rows`` more strings of ``incoming`` more bytes, with at least twice as many slots.

        On cpu the grown arrays are not zeroed: the twin writes an entry, its offset and its bytes before any
        slot names it, and only the known prefix is copied (zeroing a grown table's bytes was a third of a
        fused aggregation's interning over all-new strings). The CUDA twins keep zeroed arrays.
        """
        xp = self.device.xp
        allocate = xp.empty if self.device.kernel_flavor == "cpu" else xp.zeros
        fits = (self._words.shape[0] >= self._known_bound + rows and self.capacity >= 2 * (self._known_bound + rows)
                and self._chars.shape[0] >= self._chars_bound + incoming)
        if fits:
            return
        known = self._exact_known()
        total = known + rows
        if self._words.shape[0] < total:
            size = max(total, 2 * self._words.shape[0])
            words = allocate((size, WORDS_WIDTH), dtype=xp.uint64)
            words[: known] = self._words[: known]
            offsets = allocate(size + 1, dtype=xp.int64)
            offsets[: known + 1] = self._offsets[: known + 1]
            self._words, self._offsets = words, offsets
        chars = self._chars_bound + incoming
        if self._chars.shape[0] < chars:
            grown = allocate(max(chars, 2 * self._chars.shape[0]), dtype=xp.uint8)
            grown[: self._chars_bound] = self._chars[: self._chars_bound]
            self._chars = grown
        if self.capacity < 2 * total:
            self._slots = self._new_slots(_next_power_of_two(2 * total), known)
            self.growths += 1

    def _new_slots(self, capacity: int, known: int) -> Any:
        """Return ``capacity`` slots holding the first ``known`` strings of ``_words``: rows of
        :data:`SLOT_WIDTH` words for the CPU twin, an int32 id a slot (:data:`EMPTY` when empty) for the CUDA ones."""
        xp = self.device.xp
        if self.device.kernel_flavor == "cpu":
            slots = np.zeros((capacity, SLOT_WIDTH), dtype=np.uint64)
            if known:
                count_kernel_launch()  # the CPU twin call stands for the CUDA rehash launch
                _rehash_inline_cpu(self._words, known, slots)
            return slots
        slots = xp.full(capacity, EMPTY, dtype=xp.int32)
        if known:
            hashes = xp.ascontiguousarray(self._words[:known, HASH])
            launch_cuda(self.device, _rehash_cuda, known, hashes, known, slots)
        return slots


def finish_together(device: Device, together: list) -> None:
    """Write the ids of the columns :meth:`StringKeyTable.intern` left in ``together``, reading all their
    claim counts back in one sync (a batch with several plain string keys read once a key before)."""
    if not together:
        return
    values = device.read_scalars([value for table, _ in together for value in table._claim_counts()])
    for k, (table, claims) in enumerate(together):
        table._finish(claims, values[k * STATE_WIDTH:(k + 1) * STATE_WIDTH])
    together.clear()


def precompile_calls(device: Device) -> list[tuple[Any, tuple]]:
    """Return the CPU twins a fused aggregation's string interning runs, with arguments of their types (``cpu``
    only; none elsewhere).

    Why: ``gpu-engine precompile`` compiles them at set-up (:mod:`gpu_engine.codegen.static_kernels`), so a
    fused aggregation over string keys never waits for them, on a driver or in the compile process.
    """
    if device.kernel_flavor != "cpu":
        return []
    return StringKeyTable(device, initial_capacity=2).cpu_twins()
