"""Tests for gpu_engine.kernels.aggregate: per-group accumulators against Python references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu_engine.kernels.aggregate import (
    combine_split_sum,
    group_count,
    group_max,
    group_min,
    group_sum_float,
    group_sum_int,
    identity_for_max,
    identity_for_min,
    limb_sum_words,
    split_sum_words,
    sum_results,
)

NUM_GROUPS = 13


def random_rows(rows, seed=0, null_fraction=0.2):
    rng = np.random.default_rng(seed)
    group_ids = rng.integers(0, NUM_GROUPS - 1, rows).astype(np.int32)  # the last group never appears
    validity = rng.random(rows) >= null_fraction
    return group_ids, validity


def valid_values_by_group(group_ids, values, validity):
    groups = {g: [] for g in range(NUM_GROUPS)}
    for g, v, ok in zip(group_ids, values, validity if validity is not None else [True] * len(values)):
        if ok:
            groups[int(g)].append(v)
    return groups


@pytest.mark.parametrize("with_validity", [True, False])
def test_count(device, with_validity):
    group_ids, validity = random_rows(600)
    validity = validity if with_validity else None
    counts = device.asarray(np.full(NUM_GROUPS, 5, np.int64))
    group_count(device, device.asarray(group_ids), None if validity is None else device.asarray(validity), counts)
    expected = 5 + np.bincount(group_ids[validity] if validity is not None else group_ids, minlength=NUM_GROUPS)
    np.testing.assert_array_equal(device.to_host(counts), expected)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint32, np.bool_])
def test_sum_int_is_exact(device, dtype):
    group_ids, validity = random_rows(500, seed=1)
    rng = np.random.default_rng(2)
    if dtype == np.bool_:
        values = rng.random(500) < 0.5
    else:
        info = np.iinfo(dtype)
        low_bound, high_bound = max(info.min, -(2**57)), min(info.max, 2**57)  # sums of 500 still fit int64
        values = rng.integers(low_bound, high_bound, 500, endpoint=True, dtype=dtype)
    high = device.asarray(np.zeros(NUM_GROUPS, np.int64))
    low = device.asarray(np.zeros(NUM_GROUPS, np.int64))
    has_value = device.asarray(np.zeros(NUM_GROUPS, np.bool_))
    for half in (slice(0, 250), slice(250, 500)):  # two batches into the same accumulators
        group_sum_int(device, device.asarray(group_ids[half]), device.asarray(values[half]),
                      device.asarray(validity[half]), high, low, has_value)
    sums = device.to_host(combine_split_sum(device, high, low))
    groups = valid_values_by_group(group_ids, values, validity)
    for g, members in groups.items():
        assert bool(device.to_host(has_value)[g]) == bool(members)
        assert int(sums[g]) == sum(int(v) for v in members)


def test_sum_int_near_the_int64_limits(device):
    big = 2**62
    group_ids = np.array([0, 0, 0, 1, 1, 2, 2], np.int32)
    values = np.array([big, big - 1, -(big - 1), -big, -big, 2**63 - 1, -(2**63)], np.int64)
    high = device.asarray(np.zeros(3, np.int64))
    low = device.asarray(np.zeros(3, np.int64))
    has_value = device.asarray(np.zeros(3, np.bool_))
    group_sum_int(device, device.asarray(group_ids), device.asarray(values), None, high, low, has_value)
    np.testing.assert_array_equal(device.to_host(combine_split_sum(device, high, low)), [big, -(2**63), -1])


@pytest.mark.parametrize("values", [[2**62, 2**62], [-(2**62), -(2**62), -1], [2**63 - 1, 1]])
def test_sum_int_overflow_raises(device, values):
    high = device.asarray(np.zeros(2, np.int64))
    low = device.asarray(np.zeros(2, np.int64))
    has_value = device.asarray(np.zeros(2, np.bool_))
    group_ids = device.asarray(np.ones(len(values), np.int32))
    group_sum_int(device, group_ids, device.asarray(np.array(values, np.int64)), None, high, low, has_value)
    with pytest.raises(OverflowError, match="sum exceeds 64 bits"):
        combine_split_sum(device, high, low)


def test_combine_split_sum_of_nothing(device):
    empty = device.asarray(np.zeros(0, np.int64))
    assert combine_split_sum(device, empty, empty).shape == (0,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_float(device, dtype):
    group_ids, validity = random_rows(400, seed=3)
    values = np.random.default_rng(4).normal(0, 1000, 400).astype(dtype)
    sums = device.asarray(np.zeros(NUM_GROUPS, np.float64))
    has_value = device.asarray(np.zeros(NUM_GROUPS, np.bool_))
    group_sum_float(device, device.asarray(group_ids), device.asarray(values), device.asarray(validity), sums, has_value)
    groups = valid_values_by_group(group_ids, values, validity)
    for g, members in groups.items():
        assert device.to_host(sums)[g] == pytest.approx(math.fsum(float(v) for v in members), rel=1e-9, abs=1e-6)
        assert bool(device.to_host(has_value)[g]) == bool(members)


def run_extreme(device, kernel, identity, group_ids, values, validity):
    out = device.asarray(np.full(NUM_GROUPS, identity(values.dtype), dtype=values.dtype))
    has_value = device.asarray(np.zeros(NUM_GROUPS, np.bool_))
    for half in (slice(0, len(values) // 2), slice(len(values) // 2, len(values))):
        kernel(device, device.asarray(group_ids[half]), device.asarray(values[half]),
               None if validity is None else device.asarray(validity[half]), out, has_value)
    return device.to_host(out), device.to_host(has_value)


def float_order(value):
    """Return DuckDB's order of a float: NaN greatest, -0.0 equal to 0.0."""
    return (1, 0.0) if math.isnan(value) else (0, value + 0.0)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint64, np.float32, np.float64])
@pytest.mark.parametrize("kernel, identity, pick", [(group_min, identity_for_min, min), (group_max, identity_for_max, max)],
                         ids=["min", "max"])
def test_min_max(device, dtype, kernel, identity, pick):
    group_ids, validity = random_rows(400, seed=5)
    rng = np.random.default_rng(6)
    if np.dtype(dtype).kind == "f":
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], dtype)
        values = np.where(rng.random(400) < 0.15, rng.choice(specials, 400), rng.normal(0, 100, 400)).astype(dtype)
        values[group_ids == 3] = np.nan  # a group of only NaNs
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, 400, endpoint=True, dtype=dtype)
    out, has_value = run_extreme(device, kernel, identity, group_ids, values, validity)
    for g, members in valid_values_by_group(group_ids, values, validity).items():
        assert bool(has_value[g]) == bool(members)
        if not members:
            continue
        if values.dtype.kind == "f":
            expected = pick(members, key=float_order)
            assert float_order(out[g]) == float_order(expected), (g, out[g], expected)
        else:
            assert out[g] == pick(members)


def test_min_max_float_without_validity(device):
    group_ids = np.array([0, 0, 1, 1, 2, 2, 3, 3], np.int32)
    values = np.array([1.0, np.nan, -0.0, 0.0, np.inf, -np.inf, np.nan, np.nan])
    out, has_value = run_extreme(device, group_max, identity_for_max, group_ids, values, None)
    assert math.isnan(out[0]) and out[1] == 0.0 and out[2] == np.inf and math.isnan(out[3])
    out, _ = run_extreme(device, group_min, identity_for_min, group_ids, values, None)
    assert out[0] == 1.0 and out[1] == 0.0 and out[2] == -np.inf and math.isnan(out[3])
    assert has_value[:4].all() and not has_value[4:].any()


def test_min_max_reject_mismatched_output(device):
    with pytest.raises(TypeError):
        group_min(device, device.asarray(np.zeros(1, np.int32)), device.asarray(np.zeros(1, np.int32)), None,
                  device.asarray(np.zeros(1, np.int64)), device.asarray(np.zeros(1, np.bool_)))


def test_identities():
    assert identity_for_min(np.int32) == 2**31 - 1 and identity_for_max(np.int32) == -(2**31)
    assert identity_for_min(np.uint64) == 2**64 - 1 and identity_for_max(np.uint64) == 0
    assert math.isnan(identity_for_min(np.float64)) and identity_for_max(np.float32) == -np.inf
    assert identity_for_min(np.float32).dtype == np.float32


def test_empty_batches_change_nothing(device):
    empty_ids = device.asarray(np.zeros(0, np.int32))
    counts = device.asarray(np.zeros(2, np.int64))
    group_count(device, empty_ids, None, counts)
    out = device.asarray(np.full(2, identity_for_min(np.int64), np.int64))
    has_value = device.asarray(np.zeros(2, np.bool_))
    group_min(device, empty_ids, device.asarray(np.zeros(0, np.int64)), None, out, has_value)
    assert not device.to_host(counts).any() and not device.to_host(has_value).any()


def test_limb_sum_words_carries_exactly_and_flags_sums_past_128_bits(device):
    # Limbs as group_sum_words leaves them (fewer than 2**31 values a group): three unsigned 32-bit
    # digits summed, and a signed top; the words are the exact 128-bit total, fits says whether it is one.
    rng = np.random.default_rng(7)
    groups = 500
    limbs = [rng.integers(0, 1 << 62, groups, dtype=np.int64) for _ in range(3)]
    limbs.append(rng.integers(-(1 << 33), 1 << 33, groups, dtype=np.int64))
    limbs[3][:4] = [(1 << 31) - 1, -(1 << 31), 1 << 40, -(1 << 40)]
    limbs[0][:4] = limbs[1][:4] = limbs[2][:4] = 0
    words, fits = limb_sum_words(device, tuple(device.asarray(limb) for limb in limbs))
    words, fits = device.to_host(words), device.to_host(fits)
    for g in range(groups):
        total = sum(int(limbs[k][g]) << (32 * k) for k in range(4))
        assert bool(fits[g]) == (-(1 << 127) <= total < (1 << 127)), g
        if fits[g]:
            low, high = int(words[g, 0]) & ((1 << 64) - 1), int(words[g, 1])
            assert (high << 64) + low == total, g


def test_split_sum_words_are_the_exact_128_bit_sum(device):
    # group_sum_int's state: ``high`` sums the signed upper halves, ``low`` the unsigned lower halves.
    rng = np.random.default_rng(11)
    high = rng.integers(-(1 << 62), 1 << 62, 400, dtype=np.int64)
    low = rng.integers(0, 1 << 62, 400, dtype=np.int64)
    high[:2], low[:2] = [-1, 0], [0, (1 << 32) - 1]
    words = device.to_host(split_sum_words(device, device.asarray(high), device.asarray(low)))
    for g in range(400):
        total = (int(high[g]) << 32) + int(low[g])
        assert (int(words[g, 1]) << 64) + (int(words[g, 0]) & ((1 << 64) - 1)) == total, g


def _limbs_of(total: int) -> list[int]:
    """Return four limbs whose carried sum is ``total``: three unsigned 32-bit digits and a signed top."""
    return [(total >> (32 * k)) & 0xFFFFFFFF for k in range(3)] + [total >> 96]


def test_sum_results_flag_sums_past_int64_38_digits_and_128_bits(device):
    """One pass gives each exact sum's words, and flags the first sum past 128 bits, the first of 10**38 or
    more in magnitude (decimal(38)'s bound, on both sides), and whether any needs more than 64 bits."""
    fitting = [0, 7, -7, 2**63 - 1, -2**63]
    wide = [2**63, -2**63 - 1, 10**38 - 1, -(10**38 - 1)]
    beyond = [10**38, -10**38, 10**38 + 5]
    for totals, expected in [
        (fitting, (len(fitting), len(fitting), 0)),
        (fitting + wide, (9, 9, 1)),
        (fitting + wide + beyond[1:2], (10, 9, 1)),
        (fitting + beyond[:1] + wide, (10, 5, 1)),
        (fitting + [2**127] + beyond[2:], (5, 6, 0)),
    ]:
        limbs = np.array([_limbs_of(total) for total in totals], dtype=np.int64).T
        values, highs, status = sum_results(device, tuple(device.asarray(np.ascontiguousarray(limb)) for limb in limbs))
        assert tuple(int(word) for word in device.to_host(status)) == expected, totals
        values, highs = device.to_host(values), device.to_host(highs)
        for g, total in enumerate(totals):
            if -(2**127) <= total < 2**127:
                assert (int(highs[g]) << 64) + (int(values[g]) & (2**64 - 1)) == total, (g, total)
    # group_sum_int's split state (never beyond 38 digits): high sums the signed upper halves.
    high = np.array([0, -1, 1 << 40, -(1 << 40)], dtype=np.int64)
    low = np.array([5, 0, 3, (1 << 32) - 1], dtype=np.int64)
    values, highs, status = sum_results(device, (device.asarray(high), device.asarray(low)))
    assert tuple(int(word) for word in device.to_host(status)) == (4, 4, 1)
    values, highs = device.to_host(values), device.to_host(highs)
    for g in range(4):
        assert (int(highs[g]) << 64) + (int(values[g]) & (2**64 - 1)) == (int(high[g]) << 32) + int(low[g])


@pytest.mark.parametrize("nulls", ["none", "mixed", "all"])
@pytest.mark.parametrize("rows", [0, 1, 700])
def test_one_slot_accumulators_fold_as_the_scatter(device, nulls, rows):
    """An aggregation without keys keeps one slot (every group id 0): the CPU twins fold it in registers, branch
    free over the validity. Its counts and sums (signed, unsigned, wide words, floats with NaN, inf and -0.0) must
    be the scatter's over the same rows into a slot of a longer accumulator."""
    from gpu_engine.kernels.aggregate import group_sum_words

    rng = np.random.default_rng(rows)
    group_ids = device.asarray(np.zeros(rows, np.int32))
    validity = {"none": None, "mixed": rng.random(rows) < 0.4, "all": np.zeros(rows, bool)}[nulls]
    valid = None if validity is None else device.asarray(validity)
    signed = rng.integers(-(2**62), 2**62, rows)
    unsigned = rng.integers(0, 2**63, rows).astype(np.uint64) * np.uint64(2)
    words = np.stack([rng.integers(-(2**63), 2**63 - 1, rows), rng.integers(-(2**40), 2**40, rows)], axis=1)
    floats = rng.standard_normal(rows) * 1e6
    floats[::5] = -0.0
    if rows > 100:
        floats[[17, 40]] = np.nan, np.inf

    def folded(slots):
        out = []
        counts = device.asarray(np.full(slots, 3, np.int64))
        group_count(device, group_ids, valid, counts)
        out.append(counts)
        for values in (signed, unsigned):
            high, low = device.asarray(np.zeros(slots, np.int64)), device.asarray(np.zeros(slots, np.int64))
            has = device.asarray(np.zeros(slots, bool))
            group_sum_int(device, group_ids, device.asarray(values), valid, high, low, has)
            out += [high, low, has]
        limbs = tuple(device.asarray(np.zeros(slots, np.int64)) for _ in range(4))
        has = device.asarray(np.zeros(slots, bool))
        group_sum_words(device, group_ids, device.asarray(words), valid, limbs, has)
        out += [*limbs, has]
        sums, has = device.asarray(np.zeros(slots)), device.asarray(np.zeros(slots, bool))
        group_sum_float(device, group_ids, device.asarray(floats), valid, sums, has)
        out += [sums, has]
        return [device.to_host(array)[0] for array in out]

    one, scattered = folded(1), folded(4)
    for a, b in zip(one, scattered):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and np.signbit(a) == np.signbit(b)), (one, scattered)
