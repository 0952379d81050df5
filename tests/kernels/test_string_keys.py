"""Tests for gpu_engine.kernels.string_keys: ids in order of first appearance, batch after batch, on every twin."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.string_keys import StringKeyTable


@pytest.mark.parametrize("serial_rows", [0, 1 << 20], ids=["parallel", "serial"])
def test_ids_follow_first_appearance_across_batches_growth_nulls_and_dictionaries(device, serial_rows):
    """Whichever CUDA twin runs (rows claiming slots in parallel, or one thread), a tiny table (16 slots, 128 bytes) must grow its slots, ids and bytes mid-batch; strings that differ only
    past their first 8 bytes, by length, or by a trailing zero byte stay apart; NULL rows get 0 and add nothing;
    a dictionary-encoded batch and a sliced batch (offsets not starting at 0) map to the same ids."""
    table = StringKeyTable(device, initial_capacity=16, serial_rows=serial_rows)
    known: dict[str, int] = {}

    def check(array: pa.Array) -> None:
        expected = []
        for value in array.to_pylist():
            if value is not None and value not in known:
                known[value] = len(known)
            expected.append(0 if value is None else known[value])
        ids = device.to_host(table.intern(Column.from_arrow(array, device)))
        assert [int(i) for i in ids] == expected
        assert table.num_known == len(known)

    check(pa.array(["b", None, "a", "b", "é", "", "abcdefgh1", "abcdefgh2", "abcdefgh", "a\x00"]))
    check(pa.array([f"key-{i % 40:03d}-{'x' * (i % 11)}" for i in range(90)] + [None, "a"]))
    check(pa.array(["new", "b", None, "key-001-x", "z" * 300]).dictionary_encode())
    check(pa.array(["q", "key-002-xx", "b", "tail"]).slice(1, 3))
    check(pa.array([], pa.string()))
    # Probes compare the first 16 bytes and the length as words, then the rest 8 bytes at a time: strings
    # that differ only in their 17th or last byte, or by trailing zero bytes past 8 and 16, stay apart.
    base = "0123456789abcdef"
    check(pa.array([base + "a", base + "b", base, base + "\x00", base[:8] + "\x00", base[:8], base * 3 + "z",
                    base * 3 + "y", base + "a", base * 3 + "z", base[:15] + "x" + "a"]))
    values = table.values().to_arrow(device).to_pylist()
    assert values == sorted(known, key=known.get)


def test_rows_at_the_end_of_an_exact_size_buffer_read_their_last_bytes_one_by_one(device):
    """A chars buffer with no padding after its last string (a sliced or hand-built column): the last rows'
    words are read without going past the buffer, and equal strings elsewhere in the buffer get the same id."""
    values = ["abcdefghij", "xy", "abcdefghijklmnopqrst", "xy", "abcdefghij", "abcdefghijklmnopqrst"]
    raw = "".join(values).encode()
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int64)
    column = Column(pa.string(), device.asarray(np.frombuffer(raw, dtype=np.uint8).copy()), None,
                    device.asarray(offsets))
    table = StringKeyTable(device)
    assert [int(i) for i in device.to_host(table.intern(column))] == [0, 1, 2, 1, 0, 2]
    assert table.values().to_arrow(device).to_pylist() == values[:3]


def _padded_keys(rows: int, distinct: int) -> pa.Array:
    return pa.array([f"{i * 7919 % distinct:05d}" + "-" * 35 for i in range(rows)])


def test_room_follows_the_distinct_strings_not_the_rows(device):
    """60 distinct 40-byte strings over 1,200 rows: the table keeps the room it started with (slots, entries,
    bytes: 32 KB), not room for every row of the batch being new (~112 KB here; sizing for the rows gave a
    16M-row GPU batch ~1 GB per string key). The parallel CUDA path claims within the room it has and grows
    only when its claim kernel reports refused rows (the growth itself: the first test); ids still follow first
    appearance."""
    table = StringKeyTable(device, serial_rows=64)
    keys = _padded_keys(1200, 60)
    ids = device.to_host(table.intern(Column.from_arrow(keys, device)))
    first_seen = {value: i for i, value in reversed(list(enumerate(keys.to_pylist())))}
    order = {value: k for k, value in enumerate(sorted(first_seen, key=first_seen.get))}
    assert [int(i) for i in ids] == [order[value] for value in keys.to_pylist()]
    assert table.nbytes <= 64 * 1024, table.nbytes


def test_a_second_batch_of_known_strings_grows_nothing_and_reads_back_at_most_once(device):
    """Once the key set stops growing a batch neither grows nor rebuilds the table and reads back at most its
    one status (the CUDA path's claim counts; the cpu twin counts the same read): the second batch used to
    reserve room for all its rows as new strings on top of the first batch's, so it always read the exact count
    back and rebuilt the slots."""
    from gpu_engine.exec.device_counters import counts_now

    table = StringKeyTable(device, serial_rows=8)
    keys = _padded_keys(120, 30)
    table.intern(Column.from_arrow(keys, device))
    capacity, nbytes = table.capacity, table.nbytes
    before = counts_now()
    ids = table.intern(Column.from_arrow(keys.take(pa.array(range(119, -1, -1))), device))
    counts = counts_now() - before
    assert (table.capacity, table.nbytes) == (capacity, nbytes)
    assert counts.host_syncs <= 1, counts
    assert table.num_known == 30 and sorted(set(int(i) for i in device.to_host(ids))) == list(range(30))


def test_string_keys_of_one_batch_read_their_claim_counts_back_together(device):
    """Two plain string keys of one batch (each in its own table, rows claiming in parallel) are read back in
    one sync on the CUDA path, not one a key; a key interned twice into one table finishes the first claims
    before its second. Ids equal interning each column alone. (cpu: each twin call counts its own read.)"""
    from gpu_engine.exec.device_counters import counts_now
    from gpu_engine.kernels.string_keys import finish_together

    first, second = _padded_keys(16, 7), pa.array([f"s{i % 5}" for i in range(16)])
    alone = [device.to_host(StringKeyTable(device, serial_rows=8).intern(Column.from_arrow(keys, device)))
             for keys in (first, second, first)]
    tables = [StringKeyTable(device, serial_rows=8) for _ in range(2)]
    together: list = []
    before = counts_now()
    ids = [table.intern(Column.from_arrow(keys, device), together)
           for table, keys in ((tables[0], first), (tables[1], second))]
    finish_together(device, together)
    counts = counts_now() - before
    assert counts.host_syncs == (1 if device.kernel_flavor == "cuda" else 2), counts
    again = tables[0].intern(Column.from_arrow(first, device), together)
    repeated = tables[0].intern(Column.from_arrow(first.slice(3), device), together)
    finish_together(device, together)
    assert not together
    for got, expected in zip([*ids, again], alone):
        assert [int(i) for i in device.to_host(got)] == [int(i) for i in expected]
    assert [int(i) for i in device.to_host(repeated)] == [int(i) for i in alone[0][3:]]


def test_a_fused_batch_binds_its_plain_string_keys_with_one_read_back(device):
    """KernelInputs binds a batch's two plain string grouping keys through their interners with one read of
    their claim counts on the CUDA path (two before: one a key), and the ids equal interning each key alone."""
    from gpu_engine.codegen.fusion_program import plan_fusion_program
    from gpu_engine.codegen.kernel_inputs import KernelInputs
    from gpu_engine.columnar.batch import Batch
    from gpu_engine.exec.device_counters import counts_now
    from gpu_engine.plans.sql_translator import parse_expression

    schema = pa.schema([("s", pa.string()), ("t", pa.string())])
    keys = tuple(parse_expression(name, schema, "Aggregation[0]") for name in ("s", "t"))
    program = plan_fusion_program((), keys, (), {f.name: f.type for f in schema})
    interned = [m for m, lift in enumerate(program.lifted) if lift.interned]
    assert len(interned) == 2

    class Interner:
        def __init__(self):
            self.table = StringKeyTable(device, serial_rows=8)

        def ids(self, column, together=None):
            return self.table.intern(column, together)

    data = pa.table({"s": _padded_keys(16, 7), "t": pa.array([f"t{i % 5}" for i in range(16)])})
    inputs = KernelInputs(device, program, {m: Interner() for m in interned})
    before = counts_now()
    _, arrays = inputs.bind(Batch.from_arrow(data, device))
    counts = counts_now() - before
    if device.kernel_flavor == "cuda":
        assert counts.host_syncs == 1, counts
    for m, lift in zip(interned, (program.lifted[m] for m in interned)):
        alone = StringKeyTable(device, serial_rows=8).intern(Column.from_arrow(data.column(lift.column)
                                                                                .combine_chunks(), device))
        assert [int(i) for i in device.to_host(arrays[f"l{m}_values"])] == [int(i) for i in device.to_host(alone)]


def test_a_batch_of_new_strings_grows_the_table_by_its_share_seen_not_by_doubling():
    """A fresh table (1,024 slots) interning 20,000 rows that are all new strings (a join's customer names and
    comments, each its own group) grows to the batch's estimate, within 64 times the room that ran out: the new
    strings and bytes met so far scaled by the rows and bytes still to come. Doubling from 1,024 slots and 8 KB
    stopped, reallocated and rehashed 5 times for the slots and 9 for the bytes here (19 twin launches), twice
    the interning itself (TPC-H q10's fused aggregation over four plain string keys used more CPU than the
    unfused one). cpu twin only: the CUDA twins size their claims by the last batch's new strings."""
    from gpu_engine.device import get_device
    from gpu_engine.exec.device_counters import counts_now

    device = get_device("cpu")
    keys = pa.array([f"Customer#{i:09d} comment {'x' * (i % 50)}" for i in range(20_000)])
    table = StringKeyTable(device)
    before = counts_now()
    ids = table.intern(Column.from_arrow(keys, device))
    launches = (counts_now() - before).kernel_launches
    assert [int(i) for i in ids[:3]] == [0, 1, 2] and int(ids[-1]) == 19_999 and table.num_known == 20_000
    assert launches <= 6, launches  # the hash pass, at most 4 interning calls (3 stops to grow), one rehash
    assert table.values().to_arrow(device).to_pylist()[-1] == keys[-1].as_py()


def test_a_dictionary_is_interned_in_one_pass_sized_for_all_its_values():
    """A dictionary's values are all distinct: the cpu twin makes room for every one before its pass (as the
    CUDA twins claim room for them), one interning call, not a stop to grow each time room runs out (a fused
    FINAL step interns each partial result's dictionary of all its groups' strings)."""
    from gpu_engine.device import get_device
    from gpu_engine.exec.device_counters import counts_now

    device = get_device("cpu")
    values = [f"Customer#{i:09d} {'y' * (i % 40)}" for i in range(20_000)]
    codes = pa.array(np.arange(20_000)[::-1] % 20_000, pa.int32())
    column = Column.from_arrow(pa.DictionaryArray.from_arrays(codes, pa.array(values)), device)
    table = StringKeyTable(device)
    before = counts_now()
    ids = table.intern(column)
    launches = (counts_now() - before).kernel_launches
    assert [int(i) for i in ids[:2]] == [19_999, 19_998] and table.num_known == 20_000
    assert launches <= 3, launches  # the hash pass, one interning call, the gather of ids by code


def test_cpu_slots_hold_each_strings_first_words_and_length_through_growth_and_many_dictionaries(device):
    """The CPU twin's slots hold each known string's first 16 bytes, length and id inline (a probe reads one slot
    row, not the slot and then the entry it names): after several growths (each rebuilding the slots from the
    known entries), over plain batches and dictionary batches of different values, strings sharing 16-byte
    prefixes, differing by a trailing zero byte or only past byte 16, empty strings and NULL rows keep ids in
    order of first appearance, and every known string sits in exactly one slot with its own words. The CUDA
    twins keep int32 id slots (ids checked on every device)."""
    from gpu_engine.kernels import string_keys as keys

    table = StringKeyTable(device, initial_capacity=16, serial_rows=1 << 20)
    known: dict[str, int] = {}
    prefix = "0123456789abcdef"
    values = ["", "a", "a\x00", prefix, prefix + "\x00", prefix[:8], prefix[:8] + "\x00"]
    values += [f"{prefix}{i:03d}{'z' * (i % 7)}" for i in range(60)] + [f"k{i}" for i in range(60)]
    batches = [pa.array(values[:20] + [None, ""]),
               pa.array(values[40:90]).dictionary_encode(),
               pa.array(list(reversed(values)) + [None] * 3),
               pa.DictionaryArray.from_arrays(pa.array([2, None, 0, 1, 2], pa.int32()),
                                              pa.array([values[5], "fresh" + prefix, values[100]])),
               pa.array([], pa.string()).dictionary_encode(),
               pa.array(values[::3]).slice(5, 30)]
    for array in batches:
        expected = []
        for value in array.to_pylist():
            if value is not None and value not in known:
                known[value] = len(known)
            expected.append(0 if value is None else known[value])
        assert [int(i) for i in device.to_host(table.intern(Column.from_arrow(array, device)))] == expected
    assert table.num_known == len(known) and table.capacity > 16
    assert table.values().to_arrow(device).to_pylist() == sorted(known, key=known.get)
    if device.kernel_flavor != "cpu":
        return
    slots = table._slots
    occupied = slots[slots[:, keys.SLOT_ID] != 0]
    assert sorted(int(i) - 1 for i in occupied[:, keys.SLOT_ID]) == list(range(len(known)))
    for word0, word1, length, entry in occupied:
        value = sorted(known, key=known.get)[int(entry) - 1].encode()
        head = value[:16].ljust(16, b"\x00")
        assert (int(word0), int(word1), int(length)) == (int.from_bytes(head[:8], "little"),
                                                          int.from_bytes(head[8:], "little"), len(value))


def test_rows_of_a_gather_map_get_the_ids_of_the_gathered_rows(device):
    """``intern(column, rows=map)`` gives the ids of the column's rows ``map`` in order (a repartition's batch):
    rows repeated, reversed and skipped, NULL rows (0), long strings apart only past 16 bytes, a sliced column, and
    a tiny table that grows mid-batch (its estimate reads the mapped rows' bytes); the same ids as interning the
    gathered rows, and the known strings in the same order. The cpu twins read the bytes through the map in place,
    the CUDA twins gather them first."""
    from gpu_engine.kernels.gather import gather_column

    base = "0123456789abcdef"
    values = [None if i % 9 == 4 else f"{base}{i % 13}" if i % 2 else f"k{i % 11}" for i in range(60)]
    column = Column.from_arrow(pa.array(["drop"] + values).slice(1), device)
    rows = np.concatenate([np.arange(59, -1, -3), np.arange(0, 60, 2), [7, 7, 7]]).astype(np.int32)
    mapped, gathered = StringKeyTable(device, initial_capacity=16), StringKeyTable(device, initial_capacity=16)
    for part in (rows[:40], rows[40:]):
        ids = mapped.intern(column, rows=device.asarray(part))
        expected = gathered.intern(gather_column(device, column, device.asarray(part)))
        assert [int(i) for i in device.to_host(ids)] == [int(i) for i in device.to_host(expected)]
    assert mapped.values().to_arrow(device).to_pylist() == gathered.values().to_arrow(device).to_pylist()


def test_a_mapped_batch_binds_its_plain_string_keys_without_gathering_their_bytes(monkeypatch):
    """A FINAL step's batch from a repartition is the sender's columns under a gather map: KernelInputs interns
    its plain string keys where the base columns hold them (no string gathered; two, one a key, before) and
    gathers only their validity, with the ids and validity of binding the materialized batch."""
    import gpu_engine.kernels.gather as gather_module
    from gpu_engine.codegen.fusion_program import plan_fusion_program
    from gpu_engine.codegen.kernel_inputs import KernelInputs
    from gpu_engine.columnar.batch import Batch
    from gpu_engine.device import get_device
    from gpu_engine.operators.fused_aggregation import _KeyInterner
    from gpu_engine.plans.sql_translator import parse_expression

    device = get_device("cpu")
    schema = pa.schema([("s", pa.string()), ("t", pa.string())])
    keys = tuple(parse_expression(name, schema, "Aggregation[0]") for name in ("s", "t"))
    program = plan_fusion_program((), keys, (), {f.name: f.type for f in schema})
    interned = [m for m, lift in enumerate(program.lifted) if lift.interned]
    data = pa.table({"s": _padded_keys(300, 41), "t": pa.array([None if i % 7 == 2 else f"t{i % 5}" for i in range(300)])})
    batch = Batch.from_arrow(data, device).with_gather_map(np.arange(299, 0, -2, dtype=np.int32))
    string_gathers = []
    original = gather_module._gather_strings
    monkeypatch.setattr(gather_module, "_gather_strings", lambda *a: string_gathers.append(1) or original(*a))
    _, arrays = KernelInputs(device, program, {m: _KeyInterner(device) for m in interned}).bind(batch)
    assert not string_gathers
    monkeypatch.undo()
    _, expected = KernelInputs(device, program, {m: _KeyInterner(device) for m in interned}).bind(batch.materialize())
    for m in interned:
        for part in ("values", "valid"):
            assert arrays[f"l{m}_{part}"].tolist() == expected[f"l{m}_{part}"].tolist()


def test_a_table_in_the_caches_hashes_in_its_probe_loop_as_the_hash_pass_would(monkeypatch):
    """cpu: while the slots fit the caches the probe loop hashes each row from the words it loads (no hash pass);
    a table out of them hashes first and prefetches. Both give every string the hash the pass gives it, so one
    table fed both ways (and grown between: the slots rebuilt from the stored hashes) keeps one id per string."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import string_keys

    device = get_device("cpu")
    passes = []
    hash_pass = string_keys._hash_strings_cpu
    monkeypatch.setattr(string_keys, "_hash_strings_cpu", lambda *a: passes.append(1) or hash_pass(*a))
    # lengths 0 to 40: one word, two, and tails past 16 bytes; a trailing zero byte; a NULL; repeats
    strings = [("k" * (i % 41))[:-1] + chr(48 + i % 7) if i % 41 else "" for i in range(400)] + ["ab\x00", None]
    known: dict[str, int] = {}
    table = StringKeyTable(device, initial_capacity=16)
    for cache_bytes, batch in ((string_keys.PREFETCH_MIN_BYTES, strings[:150]), (-1, strings[100:300]),
                               (string_keys.PREFETCH_MIN_BYTES, strings[::-1])):
        monkeypatch.setattr(string_keys, "PREFETCH_MIN_BYTES", cache_bytes)
        before = len(passes)
        ids = table.intern(Column.from_arrow(pa.array(batch, pa.string()), device))
        assert len(passes) - before == (cache_bytes < 0)
        expected = [0 if s is None else known.setdefault(s, len(known)) for s in batch]
        assert [int(i) for i in ids] == expected
    values = table.values()
    hashes = np.empty(len(values), dtype=np.uint64)
    hash_pass(values.offsets.astype(np.int64), values.data, string_keys._NO_ROWS, False, hashes)
    assert np.array_equal(table._words[: len(known), string_keys.HASH], hashes)


def _reference_hash(value: bytes) -> int:
    """The string hash spelled out in Python: the length, then each 8 bytes as a zero-padded little-endian word."""
    mask = (1 << 64) - 1
    h = 0xCBF29CE484222325 ^ len(value)
    for k in range(0, len(value), 8):
        h = ((h ^ int.from_bytes(value[k:k + 8].ljust(8, b"\x00"), "little")) * 0xFF51AFD7ED558CCD) & mask
        h ^= h >> 33
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & mask
    return h ^ (h >> 33)


@pytest.mark.parametrize("hash_pass", [True, False], ids=["hash-pass", "in-loop"])
def test_cpu_hashes_and_first_words_read_only_each_strings_own_bytes(monkeypatch, hash_pass):
    """cpu: the hash pass and the probe loop load a string's first 16 bytes as two words and mask off the bytes
    past its end (the next strings' here), by the buffer's last 16 bytes word by word: every length from 0 to 40,
    anywhere in the buffer, gets the hash and slot words its own bytes give (checked against the hash spelled
    out in Python), whichever path hashed it."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import string_keys

    device = get_device("cpu")
    monkeypatch.setattr(string_keys, "PREFETCH_MIN_BYTES", -1 if hash_pass else 1 << 40)
    rng = np.random.default_rng(7)
    values = [bytes(rng.integers(1, 256, length, dtype=np.uint8)) for length in list(range(41)) * 3]
    rng.shuffle(values)
    values += [b"", b"tail\x00", bytes(range(1, 18))]  # the buffer ends within these rows' 16-byte loads
    raw = b"".join(values)
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int64)
    column = Column(pa.binary(), np.frombuffer(raw, dtype=np.uint8).copy(), None, offsets)
    table = StringKeyTable(device, initial_capacity=16)
    ids = [int(i) for i in table.intern(column)]
    first: dict[bytes, int] = {}
    assert ids == [first.setdefault(v, len(first)) for v in values]
    distinct = sorted(first, key=first.get)
    assert [int(h) for h in table._words[: len(distinct), string_keys.HASH]] == [_reference_hash(v) for v in distinct]
    for g, value in enumerate(distinct):
        head = value[:16].ljust(16, b"\x00")
        assert (int(table._words[g, string_keys.WORD0]), int(table._words[g, string_keys.WORD1])) == (
            int.from_bytes(head[:8], "little"), int.from_bytes(head[8:], "little"))


@pytest.mark.parametrize("mapped", [False, True], ids=["rows", "gather-map"])
def test_a_batch_that_grows_the_table_out_of_the_caches_hashes_the_rest_first_and_stops_once(monkeypatch, mapped):
    """cpu: a fresh table (in the caches: probes hash in the loop) interning a batch of all-new strings (a FINAL
    step's first batch of partial results, db-benchmark's 12-byte ``id3``) stops once to grow for the rest of the
    batch (the strings' room and their bytes together: growing only the strings' room stopped again for bytes,
    3 stops here), and once the slots left the caches hashes the rows still to come in a pass, so their probes
    prefetch (they probed one miss at a time). Same ids as first appearance, directly or through a gather map."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import string_keys

    device = get_device("cpu")
    calls, passes = [], []
    probe_loop, hash_pass = string_keys._intern_rows_cpu, string_keys._hash_strings_cpu
    monkeypatch.setattr(string_keys, "_intern_rows_cpu",
                        lambda *a: calls.append(a[7]) or probe_loop(*a))  # a[7]: hashed
    monkeypatch.setattr(string_keys, "_hash_strings_cpu", lambda *a: passes.append(a[4].shape[0]) or hash_pass(*a))
    n = 50_000
    order = np.random.default_rng(5).permutation(n)
    values = pa.array([f"id{i:010d}" for i in order], pa.string())
    rows = np.arange(n - 1, -1, -1, dtype=np.int32)
    table = StringKeyTable(device)
    column = Column.from_arrow(values, device)
    ids = table.intern(column, rows=rows) if mapped else table.intern(column)
    assert [int(i) for i in ids] == list(range(n))
    assert len(calls) == 2 and calls == [False, True], calls
    assert len(passes) == 1 and 0 < passes[0] < n
    expected = values.to_pylist()[::-1] if mapped else values.to_pylist()
    assert table.values().to_arrow(device).to_pylist() == expected
    again = table.intern(column, rows=rows[::-1].copy()) if mapped else table.intern(column)  # all known: no growth
    assert [int(i) for i in again] == (list(range(n))[::-1] if mapped else list(range(n)))
