"""Tests for gpu_engine.kernels.group_by: exact key words, and group ids matching a dict of first appearances."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.group_by import GroupByHashTable, normalize_keys


def columns_of(device, *arrays):
    return [Column.from_arrow(a, device) for a in arrays]


def key_of(value):
    """Return a dict key with SQL grouping semantics: -0.0 groups with 0.0, NaN with NaN, None apart."""
    if isinstance(value, float):
        if math.isnan(value):
            return ("nan",)
        return (value + 0.0,)
    return (type(value).__name__, value)


class ReferenceGroups:
    """Assign group ids in order of first appearance, like the table must."""

    def __init__(self):
        self.ids = {}

    def insert(self, rows):
        group_ids, new_rows = [], []
        for i, row in enumerate(rows):
            key = tuple(key_of(v) for v in row)
            if key not in self.ids:
                self.ids[key] = len(self.ids)
                new_rows.append(i)
            group_ids.append(self.ids[key])
        return group_ids, new_rows


def insert_batch(device, table, reference, arrays):
    columns = columns_of(device, *arrays)
    keys, widths = normalize_keys(device, columns, table.widths)
    if widths != table.widths:
        table.widen(widths)
    before = table.num_groups
    group_ids, new_rows = table.insert(keys)
    group_ids, new_rows = device.to_host(group_ids), device.to_host(new_rows)
    assert group_ids.dtype == np.int32 and new_rows.dtype == np.int32
    rows = list(zip(*(a.to_pylist() for a in arrays)))
    expected_ids, expected_new = reference.insert(rows)
    np.testing.assert_array_equal(group_ids, expected_ids)
    np.testing.assert_array_equal(new_rows, expected_new)
    assert table.num_groups == before + len(expected_new) == len(reference.ids)
    return group_ids, new_rows


# ------------------------------------------------------------------ normalize_keys
def test_fixed_width_layout(device):
    keys, widths = normalize_keys(device, columns_of(
        device, pa.array([5, None, -1], pa.int32()), pa.array([-0.0, float("nan"), None]), pa.array([True, False, None])))
    assert widths == (2, 2, 2)
    keys = device.to_host(keys)
    assert keys.dtype == np.int64 and keys.shape == (3, 6) and keys.flags.c_contiguous
    nan_bits = np.array([np.nan]).view(np.int64)[0]
    np.testing.assert_array_equal(keys, [
        [1, 5, 1, 0, 1, 1],
        [0, 0, 1, nan_bits, 1, 0],
        [1, -1, 0, 0, 0, 0],
    ])


def test_string_layout(device):
    keys, widths = normalize_keys(device, columns_of(device, pa.array(["ab", None, "", "123456789"])))
    assert widths == (4,)
    second_word = int.from_bytes(b"9".ljust(8, b"\0"), "little")
    np.testing.assert_array_equal(device.to_host(keys), [
        [1, 2, int.from_bytes(b"ab".ljust(8, b"\0"), "little"), 0],
        [0, 0, 0, 0],
        [1, 0, 0, 0],
        [1, 9, int.from_bytes(b"12345678", "little"), second_word],
    ])


def test_given_widths_are_kept_when_wider(device):
    columns = columns_of(device, pa.array(["ab", "c"]), pa.array([1, 2], pa.int64()))
    keys, widths = normalize_keys(device, columns, (5, 3))
    assert widths == (5, 3) and keys.shape == (2, 8)
    narrow, narrow_widths = normalize_keys(device, columns)
    assert narrow_widths == (3, 2)
    host = device.to_host(keys)
    np.testing.assert_array_equal(host[:, :3], device.to_host(narrow)[:, :3])
    np.testing.assert_array_equal(host[:, 5:7], device.to_host(narrow)[:, 3:5])
    assert not host[:, 3:5].any() and not host[:, 7].any()
    _, grown = normalize_keys(device, columns_of(device, pa.array(["a string of twenty b"]), pa.array([1])), (3, 2))
    assert grown == (5, 2)


def test_sliced_strings_encode_like_unsliced(device, string_column_slice):
    values = ["skip", "me", "", None, "a much longer string spanning words", "x"]
    sliced, sliced_widths = normalize_keys(device, [string_column_slice(values, 2)])
    plain, plain_widths = normalize_keys(device, columns_of(device, pa.array(values[2:])))
    assert sliced_widths == plain_widths
    np.testing.assert_array_equal(device.to_host(sliced), device.to_host(plain))


def test_dictionary_keys_encode_like_plain_strings(device):
    values = ["x", None, "a much longer string spanning words", "x", ""]
    plain, plain_widths = normalize_keys(device, columns_of(device, pa.array(values)))
    encoded, encoded_widths = normalize_keys(device, columns_of(device, pa.array(values).dictionary_encode()))
    assert encoded_widths == plain_widths
    np.testing.assert_array_equal(device.to_host(encoded), device.to_host(plain))


def test_integer_widths_and_dates_encode_their_value(device):
    narrow, _ = normalize_keys(device, columns_of(device, pa.array([-7, 3], pa.int8())))
    wide, _ = normalize_keys(device, columns_of(device, pa.array([-7, 3], pa.int64())))
    np.testing.assert_array_equal(device.to_host(narrow), device.to_host(wide))


def test_narrow_layout(device):
    """``narrow=True``: a key of at most 32 bits is one word, bit 32 its flag over the value's low 32 bits, 0 for NULL."""
    keys, widths = normalize_keys(device, columns_of(
        device, pa.array([5, None, -1], pa.int32()), pa.array([2**32 - 1, 0, None], pa.uint32()),
        pa.array([-2, 3, None], pa.int8()), pa.array([5, None, -1], pa.int64()), pa.array([True, False, None])),
        narrow=True)
    assert widths == (1, 1, 1, 2, 1)
    flag = 1 << 32
    np.testing.assert_array_equal(device.to_host(keys), [
        [flag | 5, flag | 0xFFFFFFFF, flag | 0xFFFFFFFE, 1, 5, flag | 1],
        [0, flag, flag | 3, 0, 0, flag],
        [flag | 0xFFFFFFFF, 0, 0, 1, -1, 0],
    ])


def test_narrow_keys_group_like_a_dict(device):
    """NULL, 0, -1 and the 32-bit extremes stay apart under the one-word block, across batches and growth."""
    rng = np.random.default_rng(11)
    first = None
    reference = ReferenceGroups()
    for _ in range(3):
        ints = [None if v == 99 else int(v) for v in rng.choice([0, -1, 1, 2**31 - 1, -(2**31), 99], 300)]
        dates = [None if v < 0 else int(v) for v in rng.integers(-3, 4, 300)]
        arrays = [pa.array(ints, pa.int32()), pa.array(dates, pa.date32())]
        keys, widths = normalize_keys(device, columns_of(device, *arrays), narrow=True)
        assert widths == (1, 1)
        table = first if first is not None else GroupByHashTable(device, widths, initial_capacity=16)
        first = table
        group_ids, new_rows = table.insert(keys)
        expected_ids, expected_new = reference.insert(list(zip(*(a.to_pylist() for a in arrays))))
        np.testing.assert_array_equal(device.to_host(group_ids), expected_ids)
        np.testing.assert_array_equal(device.to_host(new_rows), expected_new)
    assert first.num_groups == len(reference.ids) == 6 * 5


def test_no_rows(device):
    keys, widths = normalize_keys(device, columns_of(device, pa.array([], pa.string()), pa.array([], pa.int64())))
    assert keys.shape == (0, 4) and widths == (2, 2)


# --------------------------------------------------------------------- the table
def test_groups_match_a_dict_across_batches_and_growth(device):
    rng = np.random.default_rng(5)
    words = ["", "a", "bb", "exactly8", "a much longer string spanning words", None]
    table = GroupByHashTable(device, (2, 2), initial_capacity=16)
    reference = ReferenceGroups()
    for batch in range(4):
        ints = [None if v == 99 else int(v) for v in rng.choice([*range(-40, 40), 99], 250)]
        strings = [words[i] for i in rng.integers(0, len(words), 250)]
        insert_batch(device, table, reference, [pa.array(ints, pa.int64()), pa.array(strings)])
    assert table.capacity >= 2 * table.num_groups


def test_floats_group_zeros_and_nans_together(device):
    table = GroupByHashTable(device, (2,))
    reference = ReferenceGroups()
    nan_bits = np.array([0x7FF8000000000000, 0xFFF8000000000001], np.uint64).view(np.float64)
    values = [0.0, -0.0, nan_bits[0], nan_bits[1], None, 1.0, float("inf"), -float("inf"), None]
    group_ids, _ = insert_batch(device, table, reference, [pa.array(values, pa.float64())])
    assert group_ids[0] == group_ids[1] and group_ids[2] == group_ids[3] and group_ids[4] == group_ids[8]
    assert table.num_groups == 6


def test_nulls_empty_strings_and_zero_are_distinct(device):
    table = GroupByHashTable(device, (2, 2))
    reference = ReferenceGroups()
    insert_batch(device, table, reference, [pa.array(["", None, "", None]), pa.array([0, 0, None, None], pa.int32())])
    assert table.num_groups == 4


def test_dictionary_and_plain_keys_share_groups(device):
    table = GroupByHashTable(device, (3,))
    reference = ReferenceGroups()
    values = ["pear", "apple", None, "pear", "fig"]
    insert_batch(device, table, reference, [pa.array(values)])
    insert_batch(device, table, reference, [pa.array(values[::-1] + ["kiwi"]).dictionary_encode()])
    assert table.num_groups == 5


def test_widen_keeps_existing_groups(device):
    table = GroupByHashTable(device, (2, 2), initial_capacity=16)
    reference = ReferenceGroups()
    insert_batch(device, table, reference, [pa.array(["a", "bb", "a"]), pa.array([1, 2, 1], pa.int64())])
    assert table.widths == (3, 2)
    insert_batch(device, table, reference, [
        pa.array(["a", "a string that is long enough to need four words", "bb", "a"]),
        pa.array([1, 1, 2, 3], pa.int64())])
    assert table.widths == (8, 2)
    insert_batch(device, table, reference, [pa.array(["bb", "a"]), pa.array([2, 3], pa.int64())])
    assert table.num_groups == 4


def test_widen_rejects_narrower_widths(device):
    table = GroupByHashTable(device, (3, 2))
    with pytest.raises(ValueError):
        table.widen((2, 2))
    with pytest.raises(ValueError):
        table.widen((3,))


def test_insert_rejects_keys_of_another_layout(device):
    table = GroupByHashTable(device, (2, 2))
    keys, _ = normalize_keys(device, columns_of(device, pa.array([1], pa.int64())))
    with pytest.raises(ValueError):
        table.insert(keys)


def test_reset_forgets_groups(device):
    table = GroupByHashTable(device, (2,))
    reference = ReferenceGroups()
    insert_batch(device, table, reference, [pa.array([3, 4, 3], pa.int64())])
    table.reset()
    assert table.num_groups == 0
    insert_batch(device, table, ReferenceGroups(), [pa.array([4, 5, 4], pa.int64())])
    assert table.num_groups == 2


def test_empty_batch(device):
    table = GroupByHashTable(device, (2,))
    keys, _ = normalize_keys(device, columns_of(device, pa.array([], pa.int64())))
    group_ids, new_rows = table.insert(keys)
    assert group_ids.shape == (0,) and new_rows.shape == (0,) and table.num_groups == 0


def test_many_distinct_keys_force_rehashing(device):
    table = GroupByHashTable(device, (2,), initial_capacity=16)
    reference = ReferenceGroups()
    for start in (0, 300, 150):
        insert_batch(device, table, reference, [pa.array(np.arange(start, start + 300) * 7919, pa.int64())])
    assert table.num_groups == 600


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=st.lists(st.lists(st.tuples(
    st.one_of(st.none(), st.integers(-2, 2)),
    st.one_of(st.none(), st.sampled_from(["", "q", "qq", "sixteen-byte-key", "seventeen-byte-ke"]))),
    max_size=25), min_size=1, max_size=3))
def test_random_batches_match_a_dict(device, batches):
    table = GroupByHashTable(device, (2, 2), initial_capacity=16)
    reference = ReferenceGroups()
    for rows in batches:
        insert_batch(device, table, reference, [pa.array([r[0] for r in rows], pa.int32()),
                                                pa.array([r[1] for r in rows], pa.string())])


def test_a_batch_of_many_groups_makes_room_once_on_cpu(monkeypatch):
    """The cpu table sizes the rest of a batch by its rate of new groups so far: 20k rows of 5k keys stop once to
    grow past the first 1,024 groups (doubling stopped three times); a batch whose new keys come late still gets
    every group. Same groups as a dict."""
    from gpu_engine.device import get_device

    device = get_device("cpu")
    stops = []
    grow = GroupByHashTable._reserve_groups
    monkeypatch.setattr(GroupByHashTable, "_reserve_groups", lambda table, total: (stops.append(total),
                                                                                   grow(table, total)))
    keys = np.random.default_rng(7).integers(0, 5000, 20_000)
    table, reference = GroupByHashTable(device, (2,)), ReferenceGroups()
    insert_batch(device, table, reference, [pa.array(keys, pa.int64())])
    assert table.num_groups == len(np.unique(keys)) and len(stops) == 1
    late = np.concatenate([np.zeros(2000, np.int64), np.arange(1, 18_001)])  # one key, then every key new
    table, reference = GroupByHashTable(device, (2,)), ReferenceGroups()
    insert_batch(device, table, reference, [pa.array(late, pa.int64())])
    assert table.num_groups == 18_001



def test_a_batch_of_thousands_of_repeated_keys_sizes_its_table_for_them_not_for_its_rows_on_cpu():
    """The first stop (~512 rows, nearly all new keys) sizes the rest of the batch by the distinct keys those rows
    suggest: 131,072 rows over 10K keys (db-benchmark q9's batches) leave a table of at most 32,768 slots (the
    rate of new groups so far sized it for 131K groups: 262,144 slots, ~4 MB, out of cache). Same groups as a dict;
    a batch of all-new keys still gets every group."""
    from gpu_engine.device import get_device

    device = get_device("cpu")
    keys = np.random.default_rng(0).integers(0, 10_000, 131_072)
    table, reference = GroupByHashTable(device, (1,)), ReferenceGroups()
    insert_batch(device, table, reference, [pa.array(keys, pa.int64())])
    assert table.num_groups == len(np.unique(keys)) and table.capacity <= 32_768
    table, reference = GroupByHashTable(device, (1,)), ReferenceGroups()
    insert_batch(device, table, reference, [pa.array(np.arange(20_000), pa.int64())])
    assert table.num_groups == 20_000


def test_a_table_growing_past_the_prefetch_size_mid_batch_groups_like_a_dict_on_cpu():
    """The CPU twins decide once a call whether the table is large enough to prefetch (``_prefetching``), the
    prefetch written out in their loops: a batch whose table grows past ``PREFETCH_MIN_BYTES`` between two calls
    (small, then prefetched) still gets every row's group, inserting and looking up."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels.group_by import _prefetching

    device = get_device("cpu")
    keys = np.random.default_rng(3).integers(0, 120_000, 150_000)  # ~86K groups of 8-byte keys: past 1 MB
    table = GroupByHashTable(device, (1,))
    assert not _prefetching(table._slots, table._group_keys)
    insert_batch(device, table, ReferenceGroups(), [pa.array(keys, pa.int64())])
    assert table.num_groups == len(np.unique(keys)) and _prefetching(table._slots, table._group_keys)
    words, _ = normalize_keys(device, columns_of(device, pa.array(keys[::-1], pa.int64())), table.widths)
    np.testing.assert_array_equal(table.lookup(words), table.insert(words)[0])


def test_narrow_keys_of_few_combinations_group_like_a_dict_through_a_direct_index_then_hashed(device, monkeypatch):
    """cpu: narrow keys whose first batch spans few combinations (an int32 with NULLs, dates before and after
    1970) find their groups without hashing while later rows stay within room for each range to double (the key
    storage growing mid-batch); the first row outside moves the groups into the hash table mid-batch, ids kept,
    and lookups, a reset and later batches go on as with hashing from the start. cuda-sim hashes throughout."""
    from gpu_engine.kernels import group_by

    hashed = []
    hash_rows = group_by._hash_rows_cpu
    monkeypatch.setattr(group_by, "_hash_rows_cpu", lambda *a: hashed.append(1) or hash_rows(*a))
    rng = np.random.default_rng(5)

    def batch(low, high, rows):
        ints = [None if v == low else int(v) for v in rng.integers(low, high, rows)]
        return [pa.array(ints, pa.int32()), pa.array(rng.integers(-3, 4, rows).tolist(), pa.int32()).cast(pa.date32())]

    def insert(table, reference, arrays):
        keys, widths = normalize_keys(device, columns_of(device, *arrays), narrow=True)
        assert widths == table.widths == (1, 1)
        group_ids, new_rows = table.insert(keys)
        expected_ids, expected_new = reference.insert(list(zip(*(a.to_pylist() for a in arrays))))
        np.testing.assert_array_equal(device.to_host(group_ids), expected_ids)
        np.testing.assert_array_equal(device.to_host(new_rows), expected_new)
        assert table.num_groups == len(reference.ids)

    table = GroupByHashTable(device, (1, 1), initial_capacity=16)
    reference = ReferenceGroups()
    for arrays in (batch(10, 20, 200), batch(12, 29, 200)):  # ints 11-19 (10 a NULL), then within 10 more
        insert(table, reference, arrays)
    assert len(reference.ids) > 8  # past the first key storage
    assert not hashed or device.kernel_flavor != "cpu"
    insert(table, reference, batch(25, 45, 300))  # past the room: hashed from the first row outside on
    assert hashed or device.kernel_flavor != "cpu"
    probe = [pa.array([15, None, 44, 1000], pa.int32()), pa.array([0, -3, 2, 0], pa.int32()).cast(pa.date32())]
    keys, _ = normalize_keys(device, columns_of(device, *probe), narrow=True)
    expected = [reference.ids.get(tuple(key_of(v) for v in row), -1) for row in zip(*(a.to_pylist() for a in probe))]
    np.testing.assert_array_equal(device.to_host(table.lookup(keys)), expected)
    table.reset()
    insert(table, ReferenceGroups(), batch(0, 5, 50))
