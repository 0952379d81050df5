"""Tests for gpu_engine.kernels.hash_join: every matching pair, NULL keys never matching, key layouts across types."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.group_by import GroupByHashTable, normalize_keys
from gpu_engine.kernels.hash_join import JoinHashTable, align_key_words, null_key_rows


def columns_of(device, arrays):
    return [Column.from_arrow(a, device) for a in arrays]


def build_table(device, arrays):
    keys, widths = normalize_keys(device, columns_of(device, arrays))
    return JoinHashTable(device, keys, widths)


def matched_pairs(device, table, arrays):
    keys, widths = normalize_keys(device, columns_of(device, arrays), table.widths)
    probe_rows, build_rows = table.match(keys, widths)
    probe_rows, build_rows = device.to_host(probe_rows), device.to_host(build_rows)
    assert probe_rows.dtype == np.int32 and build_rows.dtype == np.int32
    return Counter(zip(probe_rows.tolist(), build_rows.tolist()))


def reference_pairs(build, probe):
    """Return the pairs SQL's equi-join gives: equal keys, no NULL in any key column."""
    build_rows = list(zip(*(a.to_pylist() for a in build)))
    probe_rows = list(zip(*(a.to_pylist() for a in probe)))
    return Counter((i, j) for i, p in enumerate(probe_rows) if None not in p
                   for j, b in enumerate(build_rows) if b == p)


def random_keys(rng, rows, null_fraction=0.15):
    words = ["", "a", "bb", "ccc-longer-than-eight", "d", "é"]
    ints = [None if rng.random() < null_fraction else int(x) for x in rng.integers(-3, 6, rows)]
    strings = [None if rng.random() < null_fraction else words[i] for i in rng.integers(0, len(words), rows)]
    return ints, strings


@pytest.mark.parametrize("seed", [1, 2])
def test_every_matching_pair_with_duplicates_and_nulls(device, seed):
    rng = np.random.default_rng(seed)
    build_ints, build_strings = random_keys(rng, 40)
    probe_ints, probe_strings = random_keys(rng, 50)
    build = [pa.array(build_ints, pa.int64()), pa.array(build_strings)]
    probe = [pa.array(probe_ints, pa.int32()), pa.array(probe_strings).dictionary_encode()]
    table = build_table(device, build)
    assert table.has_null_key == any(v is None for v in build_ints + build_strings)
    assert matched_pairs(device, table, probe) == reference_pairs(build, probe)


def test_probe_strings_longer_than_any_build_string(device):
    build = [pa.array(["ab", "abcdefgh", None])]
    probe = [pa.array(["abcdefgh" + "x" * 20, "ab", "abcdefgh", "abcdefghi", None])]
    assert matched_pairs(device, build_table(device, build), probe) == Counter({(1, 0): 1, (2, 1): 1})


def test_equal_values_give_equal_words_across_integer_widths(device):
    """An int32 probe key joins an int64 build key only because both normalize to the same words."""
    values = [-128, -1, 0, 7, 127, None]
    words = [device.to_host(normalize_keys(device, columns_of(device, [pa.array(values, dtype)]))[0])
             for dtype in (pa.int8(), pa.int16(), pa.int32(), pa.int64())]
    for other in words[1:]:
        np.testing.assert_array_equal(words[0], other)


def test_empty_build_side_matches_nothing(device):
    table = build_table(device, [pa.array([], pa.int64())])
    assert table.num_rows == 0 and table.num_keys == 0 and not table.has_null_key
    assert matched_pairs(device, table, [pa.array([1, None], pa.int64())]) == Counter()


def test_only_null_keys_build_an_empty_key_table(device):
    table = build_table(device, [pa.array([None, None], pa.int64())])
    assert table.num_rows == 2 and table.num_keys == 0 and table.has_null_key
    assert matched_pairs(device, table, [pa.array([1, None], pa.int64())]) == Counter()


def test_null_key_rows_flags_a_null_in_any_column(device):
    keys, widths = normalize_keys(device, columns_of(device, [pa.array([1, None, 3, 4]), pa.array(["a", "b", None, "d"])]))
    np.testing.assert_array_equal(device.to_host(null_key_rows(device, keys, widths)), [False, True, True, False])


def test_align_key_words_cuts_string_blocks_to_the_table_layout(device):
    keys, widths = normalize_keys(device, columns_of(device, [pa.array(["a" * 30]), pa.array([5])]))
    aligned = device.to_host(align_key_words(device, keys, widths, (3, 2)))
    full = device.to_host(keys)
    assert aligned.shape == (1, 5)
    np.testing.assert_array_equal(aligned[:, :3], full[:, :3])
    np.testing.assert_array_equal(aligned[:, 3:], full[:, widths[0]:])


def test_group_table_lookup_inserts_nothing(device):
    keys, widths = normalize_keys(device, columns_of(device, [pa.array([4, 5, 6, 4], pa.int64())]))
    table = GroupByHashTable(device, widths)
    table.insert(keys)
    probe, _ = normalize_keys(device, columns_of(device, [pa.array([6, 7, None, 4], pa.int64())]), widths)
    np.testing.assert_array_equal(device.to_host(table.lookup(probe)), [2, -1, -1, 0])
    assert table.num_groups == 3


@pytest.mark.parametrize("unique", [True, False])
def test_bloom_filter_rules_out_misses_without_losing_matches(device, unique):
    """A selective probe (most keys absent) turns the Bloom filter on; a probe where most keys match turns it off;
    both give exactly the reference pairs, false positives included (600 keys in a 150-word filter)."""
    rng = np.random.default_rng(7)
    build_keys = rng.choice(100_000, 600, replace=False).astype(np.int64)
    if not unique:
        build_keys = np.concatenate([build_keys, build_keys[:50]])
    build = [pa.array(build_keys)]
    table = build_table(device, build)
    assert table.unique_keys is unique and table.use_bloom
    misses = [pa.array(np.concatenate([rng.integers(0, 100_000, 900), build_keys[:30]]))]
    assert matched_pairs(device, table, misses) == reference_pairs(build, misses)
    assert table.use_bloom  # 30 of 930 probes matched
    hits = [pa.array(np.concatenate([build_keys[:400], [-1, -2]]))]
    assert matched_pairs(device, table, hits) == reference_pairs(build, hits)
    assert not table.use_bloom
    assert matched_pairs(device, table, misses) == reference_pairs(build, misses)
    assert table.use_bloom


def test_cpu_build_table_grows_while_inserting(monkeypatch):
    """The CPU build starts small when told to and doubles as keys arrive; ids, pairs and the filter stay right."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import hash_join

    device = get_device("cpu")
    monkeypatch.setattr(hash_join, "PACKED_ROWS_BEFORE_GROWTH", 8)
    rng = np.random.default_rng(3)
    build = [pa.array(rng.integers(0, 500, 2000)), pa.array(rng.integers(0, 3, 2000), pa.int32())]
    table = build_table(device, build)
    assert table.num_keys == len(set(zip(*(a.to_pylist() for a in build))))
    probe = [pa.array(rng.integers(-10, 510, 300)), pa.array(rng.integers(0, 4, 300), pa.int32())]
    assert matched_pairs(device, table, probe) == reference_pairs(build, probe)


@pytest.mark.parametrize("shape", ["distinct", "distinct_with_nulls", "two_rows_a_key", "few_keys"])
def test_cpu_build_of_many_rows_is_sized_for_its_sampled_keys(monkeypatch, shape):
    """A build of more keys than the table starts with grows once, to its keys estimated from a sample of the keys
    (not doubling again and again), a build of a few keys of many rows keeps its small table, and a table of
    distinct keys lists its rows without the counting kernel; the pairs stay right (radixjoin, stop 51)."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import hash_join

    device = get_device("cpu")
    monkeypatch.setattr(hash_join, "PACKED_ROWS_BEFORE_GROWTH", 64)
    monkeypatch.setattr(hash_join, "KEY_SAMPLE_BITS", 2)  # 1 key in 4 sampled: close estimates of a few thousand
    calls = Counter()
    for name in ("_repack_cpu", "_row_lists_cpu"):
        kernel = getattr(hash_join, name)
        monkeypatch.setattr(hash_join, name, lambda *a, _k=kernel, _n=name: (calls.update([_n]), _k(*a))[1])
    rng = np.random.default_rng(11)
    rows = 6000
    if shape == "few_keys":  # three keys, far apart (hashed)
        values = rng.integers(0, 1 << 60, 3)[rng.integers(0, 3, rows)]
    elif shape == "two_rows_a_key":
        values = np.repeat(rng.permutation(rows // 2) * 1_000_003, 2)[rng.permutation(rows)]
    else:  # distinct keys spread too wide for a direct table or a range bitmap: hashed behind the Bloom filter
        values = rng.permutation(np.unique(rng.integers(0, 1 << 60, rows + 100)))[:rows]
    build = pa.array(values.tolist(), pa.int64(), mask=(rng.random(rows) < 0.1) if shape.endswith("nulls") else None)
    table = build_table(device, [build])
    assert table._packed is not None and not table.is_direct and not table.has_range_bitmap
    keys = len(set(build.to_pylist()) - {None})
    assert table.num_keys == keys
    if shape == "few_keys":
        assert calls["_repack_cpu"] == 0 and table._packed.shape[0] == 128
    else:  # grown once, at its first growth, to its keys' estimate (at most 4 slots a key)
        assert calls["_repack_cpu"] == 1 and 2 * keys <= table._packed.shape[0] <= 4 * keys
    assert calls["_row_lists_cpu"] == (0 if shape.startswith("distinct") else 1)
    probe = [pa.array(np.concatenate([values[rng.integers(0, rows, 400)], rng.integers(0, 1 << 60, 100)]).tolist()
                      + [None], pa.int64())]
    assert matched_pairs(device, table, probe) == reference_pairs([build], probe)


@pytest.mark.parametrize("probe_type", [pa.int64(), pa.int32(), pa.float64()], ids=["int64", "int32", "float64"])
@pytest.mark.parametrize("mapped", [False, True], ids=["plain", "gather_map"])
def test_one_fixed_width_key_matches_without_normalizing(device, probe_type, mapped):
    """``match_fixed_width`` (values hashed in the kernel, read through a gather map) gives ``match``'s pairs."""
    rng = np.random.default_rng(7)
    if pa.types.is_floating(probe_type):
        pool = [0.0, -0.0, 1.5, float("nan"), -2.25, 1e300, None]
        build = pa.array([pool[i] for i in rng.integers(0, len(pool), 60)], pa.float64())
        probe = pa.array([pool[i] for i in rng.integers(0, len(pool), 300)], probe_type)
    else:
        build = pa.array([None if x == 0 else int(x) for x in rng.integers(-20, 40, 60)], pa.int64())
        probe = pa.array([None if x == 0 else int(x) for x in rng.integers(-30, 50, 300)], probe_type)
    table = build_table(device, [build])
    expected = matched_pairs(device, table, [probe])
    column = Column.from_arrow(probe, device)
    gather_map = None
    if mapped:  # a probe batch behind a filter: rows 3, 1, 4, 1, 5, ... of the column
        picks = rng.integers(0, len(probe), 200).astype(np.int32)
        gather_map = device.asarray(picks)
        expected = matched_pairs(device, table, [probe.take(pa.array(picks))])
    probe_rows, build_rows = table.match_fixed_width(column, gather_map)
    got = Counter(zip(device.to_host(probe_rows).tolist(), device.to_host(build_rows).tolist()))
    assert got == expected and expected


@pytest.fixture(params=["direct", "range_bitmap", "bloom"])
def join_layout(request, monkeypatch):
    """Run a test with one-integer-key builds in a direct table (the default for dense keys) or forced to hash,
    behind a range bitmap (the default for sparser keys in a narrow range) or behind the Bloom filter."""
    from gpu_engine.kernels import hash_join

    if request.param != "direct":
        monkeypatch.setattr(hash_join, "DIRECT_SPAN_PER_KEY", 0)
        monkeypatch.setattr(hash_join, "DIRECT_SPAN_FLOOR", 0)
    if request.param == "bloom":
        monkeypatch.setattr(hash_join, "RANGE_BITMAP_SPAN_PER_KEY", 0)
        monkeypatch.setattr(hash_join, "RANGE_BITMAP_SPAN_FLOOR", 0)
    return request.param


@pytest.mark.parametrize("build_type", [pa.int64(), pa.int32(), pa.date32()], ids=["int64", "int32", "date32"])
@pytest.mark.parametrize("mapped", [False, True], ids=["plain", "gather_map"])
def test_one_integer_key_direct_and_hashed_tables_give_the_same_pairs(device, join_layout, build_type, mapped):
    """Dense integer keys (negative ones, duplicates, NULLs) go direct; probes below, inside and above the build's
    range, NULL probes and extreme int64 values (whose distance from the range's low end wraps) find exactly
    the reference pairs, through ``match`` (normalized words) and ``match_fixed_width`` alike."""
    rng = np.random.default_rng(11)
    raw = [None if x % 17 == 0 else int(x) for x in rng.integers(-40, 60, 120)]
    build = pa.array(raw, pa.int64()).cast(pa.int32()).cast(build_type)
    extremes = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, -(2 ** 62), 2 ** 62]
    probe_values = [None if x == 0 else int(x) for x in rng.integers(-100, 120, 400)]
    probe = pa.array(probe_values + extremes, pa.int64())
    if build_type != pa.int64():
        probe = pa.array(probe_values, pa.int64()).cast(pa.int32()).cast(build_type)
    table = build_table(device, [build])
    assert table.is_direct == (join_layout == "direct")
    assert table.has_range_bitmap == (join_layout == "range_bitmap")
    assert table.unique_keys is False and table.has_null_key
    assert table.num_keys == len({v for v in raw if v is not None})
    assert matched_pairs(device, table, [probe]) == reference_pairs([build], [probe])
    gather_map = None
    expected_probe = probe
    if mapped:
        picks = rng.integers(0, len(probe), 300).astype(np.int32)
        gather_map = device.asarray(picks)
        expected_probe = probe.take(pa.array(picks))
    probe_rows, build_rows = table.match_fixed_width(Column.from_arrow(probe, device), gather_map)
    got = Counter(zip(device.to_host(probe_rows).tolist(), device.to_host(build_rows).tolist()))
    assert got == reference_pairs([build], [expected_probe])


@pytest.mark.parametrize("null_at", [None, 0, 5], ids=["no_null", "null_first", "null_inside"])
def test_distinct_keys_pair_each_probe_with_its_build_row(device, join_layout, null_at):
    """A build of distinct keys pairs a match with its key's one build row: on the CPU twin a key id is that row's
    number while no NULL key row was dropped before it, and is mapped through the kept rows once one was."""
    rng = np.random.default_rng(3)
    raw = [int(x) for x in rng.permutation(np.arange(-30, 50))]
    if null_at is not None:
        raw[null_at] = None
    build = pa.array(raw, pa.int64())
    probe = pa.array([None if x == 99 else int(x) for x in rng.integers(-40, 60, 500)] + [99], pa.int64())
    table = build_table(device, [build])
    assert table.unique_keys and table.has_null_key == (null_at is not None)
    expected = reference_pairs([build], [probe])
    assert matched_pairs(device, table, [probe]) == expected
    probe_rows, build_rows = table.match_fixed_width(Column.from_arrow(probe, device), None)
    assert Counter(zip(device.to_host(probe_rows).tolist(), device.to_host(build_rows).tolist())) == expected


def test_direct_table_bitmap_rules_out_misses_in_a_large_range(device):
    """A direct table too large for the caches reads its bitmap first while probes mostly miss; pairs stay exact."""
    rng = np.random.default_rng(5)
    keys = np.unique(rng.integers(0, 20_000, 2_000)).astype(np.int64)
    build = [pa.array(keys)]
    table = build_table(device, build)
    assert table.is_direct and table.unique_keys
    table._bits_pay = True  # as for a table past PREFETCH_MIN_BYTES
    misses = [pa.array(np.concatenate([rng.integers(-5, 20_005, 900), keys[:30]]))]
    assert matched_pairs(device, table, misses) == reference_pairs(build, misses)
    assert table.use_bloom
    hits = [pa.array(keys[:500])]
    assert matched_pairs(device, table, hits) == reference_pairs(build, hits)
    assert not table.use_bloom


def test_range_bitmap_rules_out_misses_of_a_sparse_build(device):
    """Keys too sparse for a direct table but in a narrow range hash behind an exact bitmap of that range:
    misses never reach the packed table, hits find every pair, and the bitmap is skipped while most probes hit."""
    rng = np.random.default_rng(9)
    keys = np.unique(rng.integers(-50_000, 4_000_000, 1_500)).astype(np.int64)
    build = [pa.array(np.concatenate([keys, keys[:100]]))]  # duplicates: several build rows per key
    table = build_table(device, build)
    assert not table.is_direct and table.has_range_bitmap
    assert (table._bloom is None) == (device.kernel_flavor == "cpu")  # the CUDA path's pack kernel fills both
    misses = [pa.array(np.concatenate([rng.integers(-60_000, 4_100_000, 900), keys[:40], [None]]))]
    assert matched_pairs(device, table, misses) == reference_pairs(build, misses)
    assert table.use_bloom
    hits = [pa.array(keys[:500])]
    assert matched_pairs(device, table, hits) == reference_pairs(build, hits)
    assert not table.use_bloom
    assert matched_pairs(device, table, misses) == reference_pairs(build, misses)  # without the bitmap


def test_wide_or_sparse_integer_keys_hash(device):
    """A build whose values spread too thin (or past the limit) keeps the hashed table."""
    table = build_table(device, [pa.array([0, 10**12], pa.int64())])
    assert not table.is_direct and not table.has_range_bitmap
    probe = [pa.array([0, 10**12, 5, None], pa.int64())]
    assert matched_pairs(device, table, probe) == reference_pairs([pa.array([0, 10**12], pa.int64())], probe)


@pytest.mark.parametrize("keys", ["direct", "hashed"])
def test_released_table_memory_is_reused_by_the_next_build(device, keys):
    """A released table's large arrays go to the buffer recycler; the next build of that size reuses them, refilled."""
    from gpu_engine.exec import buffer_recycler

    if device.name == "cuda-sim":
        pytest.skip("the recycler keeps arrays of 4 MB and more: builds that size take minutes in the simulator")
    rng = np.random.default_rng(7)
    if keys == "direct":  # dense integer keys: ids by value in a direct table of 2M int32 slots (8 MB)
        values = rng.permutation(np.arange(2_000_000, dtype=np.int64))[:600_000]
    else:  # two key columns: the packed, hashed table (262144 slots x 4 words: 8 MB)
        values = rng.permutation(np.arange(10**12, 10**12 + 120_000, dtype=np.int64))
    build = [pa.array(values)] if keys == "direct" else [pa.array(values), pa.array(values % 7)]
    first = build_table(device, build)
    assert first.is_direct == (keys == "direct")
    large = first._slots if first.is_direct else first._packed
    kept = buffer_recycler.kept_bytes()
    first.release()
    assert first.num_keys == 0 and first._slots is None and first._packed is None
    host = isinstance(large, np.ndarray)
    assert (buffer_recycler.kept_bytes() > kept) == host  # device memory is CuPy's pool's to reuse
    probe = [pa.array(values[:1000].tolist() + [-5, 3_000_000])]
    if keys == "hashed":
        probe.append(pa.array((values[:1000] % 7).tolist() + [0, 1]))
    second = build_table(device, [a.slice(0) for a in build])
    reused = second._slots if second.is_direct else second._packed
    assert np.shares_memory(large, reused) == host
    assert matched_pairs(device, second, probe) == Counter((i, i) for i in range(1000))
    assert matched_pairs(device, first, probe) == Counter()  # released: an empty table, not stale memory


@pytest.mark.parametrize("layout", ["direct", "range", "hashed"])
def test_a_fixed_width_probe_has_one_lookup_signature_whether_its_values_are_read_only_or_not(monkeypatch, layout):
    """numba types a read-only array (a Parquet column's Arrow buffer) apart from a writable one (a computed or
    widened key): the lookup twins took the values as they came, so a new process compiled the writable int64
    signature on a driver where set-up had compiled the read-only one (``_find_fixed_width_keys_in_range_cpu``).
    The values go in read-only always (kernels/launch.read_only): one signature a kernel."""
    import numba

    from gpu_engine.device import get_device
    from gpu_engine.kernels import hash_join

    names = ("_find_direct_keys_cpu", "_find_fixed_width_keys_in_range_cpu", "_find_fixed_width_keys_cpu")
    for name in names:  # new dispatchers: nothing loaded in this process yet (numba's disk cache still serves)
        old = getattr(hash_join, name)
        options = {k: v for k, v in old.targetoptions.items() if k != "nopython"}
        monkeypatch.setattr(hash_join, name, numba.njit(cache=True, **options)(old.py_func))
    device = get_device("cpu")
    build = {"direct": [1, 2, 5, 9], "range": [0, 5_000, 100_000], "hashed": [0, 10**12]}[layout]
    table = build_table(device, [pa.array(build, pa.int64())])
    assert (table.is_direct, table.has_range_bitmap) == {"direct": (True, False), "range": (False, True),
                                                         "hashed": (False, False)}[layout]
    values = np.array([5, 100_000, 7, 3, 0], np.int64)
    validity = np.array([True, True, True, False, True])
    frozen = values.copy()
    frozen.flags.writeable = False  # as a Parquet column's Arrow buffer
    read_only = Column(pa.int64(), frozen, validity)
    writable = Column(pa.int64(), values, validity)  # as a computed key
    widened = Column(pa.int32(), values.astype(np.int32), validity)  # widened to int64 words: a new array
    answers = [device.to_host(table.lookup_fixed_width(column, None)).tolist()
               for column in (read_only, writable, widened)]
    assert answers[0] == answers[1] == answers[2]
    used = {name: len(getattr(hash_join, name).overloads) for name in names}
    assert sorted(used.values()) == [0, 0, 1], used


def _counting(monkeypatch, module, names):
    """Return a Counter of calls to the kernels ``names`` of ``module``, which keep running (patched to count)."""
    calls = Counter()
    for name in names:
        kernel = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _k=kernel, _n=name: (calls.update([_n]), _k(*a))[1])
    return calls


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("shape", ["distinct", "distinct_nulls", "three_rows_a_key", "two_columns", "sampled"])
def test_cpu_build_fills_one_table_from_every_thread(monkeypatch, threads, shape):
    """A CPU build told to use several threads fills one table from them all (each its share of the slots, then
    the rows whose probe crossed a share's end), numbering keys in first-row order as the one-thread build does:
    the same ids, row lists and pairs (parbuild, stop 52; the thresholds lowered to the test's rows)."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import hash_join

    device = get_device("cpu")
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_MIN_ROWS", 64)
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_MIN_KEYS", 16)
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_MIN_KEY_SHARE", 0.2)  # three rows a key too
    monkeypatch.setattr(hash_join, "KEY_SAMPLE_BITS", 2)  # the table is sized from a sample of its keys first
    if shape == "sampled":  # more rows than the one-thread table starts for
        monkeypatch.setattr(hash_join, "PACKED_ROWS_BEFORE_GROWTH", 64)
    calls = _counting(monkeypatch, hash_join, ["_insert_slot_range_cpu", "_insert_deferred_cpu", "_number_keys_cpu",
                                               "_number_slot_range_cpu", "_insert_packed_cpu", "_sampled_rows_cpu"])
    rng = np.random.default_rng(threads)
    rows = 3000
    wide = rng.permutation(np.unique(rng.integers(0, 1 << 60, rows + 100)))[:rows]  # hashed: no direct table
    if shape == "three_rows_a_key":
        build = [pa.array(wide[rng.integers(0, rows // 3, rows)])]
    elif shape == "two_columns":
        build = [pa.array(wide[rng.integers(0, rows // 2, rows)]),
                 pa.array([None if x == 0 else f"s{x}" for x in rng.integers(0, 4, rows)])]
    else:
        build = [pa.array(wide.tolist(), pa.int64(), mask=(rng.random(rows) < 0.1) if shape.endswith("nulls") else None)]
    keys, widths = normalize_keys(device, columns_of(device, build))
    serial = JoinHashTable(device, keys, widths)
    assert calls["_insert_slot_range_cpu"] == 0
    calls.clear()
    table = JoinHashTable(device, keys, widths, threads=threads)
    assert calls["_insert_slot_range_cpu"] == threads and calls["_insert_deferred_cpu"] == 1
    # the small tables of the first rows' keys and of the sample
    assert calls["_sampled_rows_cpu"] == threads and calls["_insert_packed_cpu"] == 2
    assert calls["_number_keys_cpu"] == (0 if table.unique_keys else 1)
    assert calls["_number_slot_range_cpu"] == (0 if table.unique_keys else threads)
    assert table.num_keys == serial.num_keys and table.unique_keys == serial.unique_keys
    np.testing.assert_array_equal(table._offsets, serial._offsets)
    np.testing.assert_array_equal(table._rows, serial._rows)
    probe = [a.take(pa.array(rng.integers(0, rows, 500))) for a in build]
    probe = [pa.concat_arrays([p, a.slice(0, 50)]) for p, a in zip(probe, [pa.array(rng.integers(0, 1 << 60, 50))]
                                                                     + [pa.array(["s9"] * 50)] * (len(build) - 1))]
    assert matched_pairs(device, table, probe) == reference_pairs(build, probe)
    np.testing.assert_array_equal(table.lookup(*normalize_keys(device, columns_of(device, probe), widths)),
                                  serial.lookup(*normalize_keys(device, columns_of(device, probe), widths)))


def test_cpu_build_whose_thread_shares_fill_up_builds_on_one_thread(monkeypatch):
    """A share of the slots that takes more keys than its load allows (more keys than estimated) gives the parallel
    build up: the one-thread build makes the table, with the same answers."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import hash_join

    device = get_device("cpu")
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_MIN_ROWS", 64)
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_MIN_KEYS", 16)
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_MAX_LOAD", 0.05)
    monkeypatch.setattr(hash_join, "KEY_SAMPLE_BITS", 2)
    calls = _counting(monkeypatch, hash_join, ["_insert_slot_range_cpu", "_insert_packed_cpu"])
    rng = np.random.default_rng(3)
    build = [pa.array(rng.permutation(np.unique(rng.integers(0, 1 << 60, 2100)))[:2000])]
    table = JoinHashTable(device, *normalize_keys(device, columns_of(device, build)), threads=2)
    # the small tables of the first rows' keys and of the sample, then the one-thread build
    assert calls["_insert_slot_range_cpu"] == 2 and calls["_insert_packed_cpu"] == 3 and table.num_keys == 2000
    probe = [pa.concat_arrays([build[0].slice(0, 300), pa.array(rng.integers(0, 1 << 60, 50))])]
    assert matched_pairs(device, table, probe) == reference_pairs(build, probe)


@pytest.mark.parametrize("how", ["pairs", "key_ids"])
def test_cpu_bloom_filter_is_made_when_a_probe_batch_shows_it_pays(monkeypatch, how):
    """A hashed CPU table makes no Bloom filter at build: probes that mostly match never make it (a foreign key's
    join); the first batch of which fewer than half the rows match makes it once, and later misses are ruled out
    by it; pairs stay exact throughout (parbuild, stop 52)."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import hash_join

    device = get_device("cpu")
    calls = _counting(monkeypatch, hash_join, ["_bloom_of_packed_cpu"])
    rng = np.random.default_rng(13)
    build_keys = rng.permutation(np.unique(rng.integers(0, 1 << 60, 2100)))[:2000]
    build = [pa.array(build_keys)]
    table = build_table(device, build)
    assert not table.is_direct and not table.has_range_bitmap and table._bloom is None
    reserved = table.nbytes  # the filter's bytes counted before it is made: the join reserves once, at publication

    def probe(arrays):
        if how == "pairs":
            return matched_pairs(device, table, arrays)
        keys, widths = normalize_keys(device, columns_of(device, arrays), table.widths)
        ids = device.to_host(table.lookup(keys, widths))
        return Counter((i, j) for i, g in enumerate(ids.tolist()) if g >= 0
                       for j in table._rows[table._offsets[g]:table._offsets[g + 1]].tolist())

    hits = [pa.array(np.concatenate([build_keys[:900], rng.integers(0, 1 << 60, 100)]))]
    for _ in range(3):
        assert probe(hits) == reference_pairs(build, hits)
    assert calls["_bloom_of_packed_cpu"] == 0 and table._bloom is None
    misses = [pa.array(np.concatenate([rng.integers(0, 1 << 60, 900), build_keys[:30]]))]
    for _ in range(3):
        assert probe(misses) == reference_pairs(build, misses)
    assert calls["_bloom_of_packed_cpu"] == 1 and table._bloom is not None and table.use_bloom
    assert table.nbytes == reserved
    assert probe(hits) == reference_pairs(build, hits)


def test_cpu_build_of_a_few_keys_stays_on_one_thread(monkeypatch):
    """A build of many rows but few keys is built by one thread (its first rows show it), without a sample of its
    keys, and a build of many keys but fewer than half its rows (the sample shows it) by one thread too, in a
    table sized for its keys: the threads' passes over every row would cost more than they save."""
    from gpu_engine.device import get_device
    from gpu_engine.kernels import hash_join

    device = get_device("cpu")
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_MIN_ROWS", 64)
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_MIN_KEYS", 16)
    monkeypatch.setattr(hash_join, "KEY_SAMPLE_BITS", 2)
    calls = _counting(monkeypatch, hash_join, ["_insert_slot_range_cpu", "_sampled_rows_cpu"])
    rng = np.random.default_rng(4)
    build = [pa.array(rng.integers(0, 1 << 60, 40)[rng.integers(0, 40, 4000)])]
    table = JoinHashTable(device, *normalize_keys(device, columns_of(device, build)), threads=2)
    # its first rows repeat their keys: no sample either
    assert calls["_sampled_rows_cpu"] == 0 and calls["_insert_slot_range_cpu"] == 0 and table.num_keys == 40
    probe = [pa.concat_arrays([build[0].slice(0, 300), pa.array(rng.integers(0, 1 << 60, 50))])]
    assert matched_pairs(device, table, probe) == reference_pairs(build, probe)
    monkeypatch.setattr(hash_join, "PARALLEL_BUILD_PREFIX_ROWS", 16)  # the first 16 rows: mostly distinct keys
    table = JoinHashTable(device, *normalize_keys(device, columns_of(device, build)), threads=2)
    assert calls["_sampled_rows_cpu"] == 2 and calls["_insert_slot_range_cpu"] == 0 and table.num_keys == 40
    assert table._packed.shape[0] <= 256  # sized for ~40 keys, not 4,000 rows
    assert matched_pairs(device, table, probe) == reference_pairs(build, probe)
