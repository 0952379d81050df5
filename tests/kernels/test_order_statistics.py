"""Tests for gpu_engine.kernels.order_statistics: each group's ranked rows equal a sort's, on every device.

The CPU twin buckets by group and selects (quickselect, insertion sort on short buckets); cuda sorts. Both
must return rows whose words are the group's values at the asked ranks: long groups, groups of one, empty
groups, many ties, ranks at both ends and neighbouring ranks in either order (a descending quantile).
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_engine.exec.device_counters import counts_now
from gpu_engine.kernels.order_statistics import group_rank_rows

ROWS = {"cpu": 20_000, "cuda-sim": 300, "cuda": 20_000}


def _case(rows: int, groups: int, distinct: int, seed: int):
    rng = np.random.default_rng(seed)
    group_ids = rng.integers(0, groups, rows).astype(np.int64)
    group_ids[group_ids == groups - 1] = 0  # the last group keeps no row
    sizes = rng.random(groups)
    group_ids = np.where(sizes[group_ids] < 0.3, group_ids % 3, group_ids)  # a few groups far larger
    words = rng.integers(0, distinct, rows).astype(np.uint64)[None, :]
    counts = np.bincount(group_ids, minlength=groups).astype(np.int64)
    starts = np.cumsum(counts) - counts
    n = np.maximum(counts, 1)
    first = rng.integers(0, n)
    step = rng.integers(-1, 2, groups)  # the neighbouring rank below, the same, or above
    second = np.clip(first + step, 0, n - 1)
    return group_ids, words, counts, starts, first, second


@pytest.mark.parametrize("distinct", [3, 1 << 40], ids=["ties", "distinct"])
def test_ranked_rows_hold_each_groups_sorted_values_at_the_ranks(device, device_name, distinct):
    rows = ROWS[device_name]
    groups = max(rows // 50, 4)
    group_ids, words, counts, starts, first, second = _case(rows, groups, distinct, seed=7)
    xp = device.xp
    first_rows, second_rows = group_rank_rows(device, xp.asarray(group_ids), groups, xp.asarray(words),
                                              xp.asarray(counts), xp.asarray(starts), xp.asarray(first),
                                              xp.asarray(second))
    first_rows, second_rows = device.to_host(first_rows), device.to_host(second_rows)
    for g in range(groups):
        if counts[g] == 0:
            continue
        mine = np.flatnonzero(group_ids == g)
        ordered = np.sort(words[0, mine])
        assert group_ids[first_rows[g]] == g and group_ids[second_rows[g]] == g
        assert words[0, first_rows[g]] == ordered[first[g]], g
        assert words[0, second_rows[g]] == ordered[second[g]], g
    assert counts[groups - 1] == 0 and first_rows[groups - 1] == 0


def test_the_cpu_twin_buckets_and_selects_in_two_launches_without_sorting_whole_columns(device_name, device,
                                                                                      monkeypatch):
    if device_name != "cpu":
        pytest.skip("the CPU twin's path")
    group_ids, words, counts, starts, first, second = _case(5_000, 100, 1 << 40, seed=3)

    def no_sort(*args, **kwargs):
        raise AssertionError("the CPU twin sorted a whole column")

    monkeypatch.setattr(np, "argsort", no_sort)
    monkeypatch.setattr(np, "lexsort", no_sort)
    before = counts_now()
    group_rank_rows(device, group_ids, 100, words, counts, starts, first, second)
    assert counts_now().kernel_launches - before.kernel_launches == 2


@pytest.mark.parametrize("dtype", ["float64", "int32", "int64"])
def test_value_rank_rows_pick_each_groups_values_at_the_ranks_in_duckdbs_order(device, device_name, dtype,
                                                                             monkeypatch):
    """Values, not words: doubles with NaN (greatest), -0.0 equal to 0.0 and infinities; negative integers. On
    the CPU the words are made inside the bucketing pass (two launches, the sort words never built)."""
    import pyarrow as pa

    import gpu_engine.kernels.order_statistics as module
    from gpu_engine.columnar.column import Column

    rows = 60 if device_name == "cuda-sim" else 6_000
    if device_name == "cuda-sim" and dtype != "float64":
        pytest.skip("the simulator sorts through the sort words: one case")
    groups = 7
    group_ids, _, counts, starts, first, second = _case(rows, groups, 3, seed=9)
    rng = np.random.default_rng(4)
    if dtype == "float64":
        pool = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, -1.5, 2.25, 1e300, -1e-300])
        values = pool[rng.integers(0, len(pool), rows)]
        arrow_type = pa.float64()
    else:
        values = rng.integers(-50, 50, rows).astype(dtype)
        arrow_type = pa.int32() if dtype == "int32" else pa.int64()
    if device_name == "cpu":
        monkeypatch.setattr(module, "sort_key_words", lambda *a, **k: pytest.fail("the sort words were built"))
    xp = device.xp
    column = Column(arrow_type, xp.asarray(values), None)
    before = counts_now()
    first_rows, second_rows = module.value_rank_rows(device, xp.asarray(group_ids), groups, column,
                                                     xp.asarray(counts), xp.asarray(starts), xp.asarray(first),
                                                     xp.asarray(second))
    if device_name == "cpu":
        assert counts_now().kernel_launches - before.kernel_launches == 2
        read_only = values.copy()
        read_only.flags.writeable = False  # as an Arrow buffer read from Parquet: no second signature
        module.value_rank_rows(device, group_ids, groups, Column(arrow_type, read_only, None), counts, starts, first,
                               second)
        assert len(module._bucket_values_by_group_cpu.signatures) == 1
    first_rows, second_rows = device.to_host(first_rows), device.to_host(second_rows)
    key = (lambda v: (True, 0.0) if np.isnan(v) else (False, float(v) + 0.0)) if dtype == "float64" else int
    for g in range(groups):
        if counts[g] == 0:
            continue
        ordered = sorted(values[group_ids == g].tolist(), key=key)
        assert group_ids[first_rows[g]] == g and group_ids[second_rows[g]] == g
        assert key(values[first_rows[g]]) == key(ordered[first[g]]), g
        assert key(values[second_rows[g]]) == key(ordered[second[g]]), g


@pytest.mark.parametrize("shape", ["sorted", "reversed", "organ pipe", "saw teeth"])
def test_ordered_values_select_each_groups_ranks(device_name, device, shape):
    """Ordered input, which led fixed-place median-of-three pivots astray (quadratic on organ pipes and saw
    teeth): the ranks still hold the sorted values (CPU twin: the device path sorts)."""
    if device_name != "cpu":
        pytest.skip("the CPU twin's selection")
    rows, groups = 4_000, 2
    base = {"sorted": np.arange(rows), "reversed": np.arange(rows)[::-1],
            "organ pipe": np.r_[np.arange(rows // 2), np.arange(rows // 2)[::-1]],
            "saw teeth": np.arange(rows) % 37}[shape]
    group_ids = (np.arange(rows) % groups).astype(np.int64)
    words = base.astype(np.uint64)[None, :]
    counts = np.bincount(group_ids, minlength=groups).astype(np.int64)
    starts = np.cumsum(counts) - counts
    for first, second in [((counts - 1) // 2, counts // 2), (np.zeros(groups, np.int64), counts - 1),
                          (counts - 1, counts - 2)]:
        first_rows, second_rows = group_rank_rows(device, group_ids, groups, words, counts, starts, first, second)
        for g in range(groups):
            ordered = np.sort(words[0, group_ids == g])
            assert words[0, first_rows[g]] == ordered[first[g]] and words[0, second_rows[g]] == ordered[second[g]]


@pytest.mark.parametrize("distinct", [3, 1 << 40], ids=["ties", "distinct"])
def test_a_selection_past_its_partition_budget_merge_sorts_the_rest(monkeypatch, distinct):
    """The fallback that bounds a selection led astray: one partition, then the rest sorted, rows alongside
    (run as Python with the budget lowered; the compiled selection reads the constant once)."""
    import gpu_engine.kernels.order_statistics as module

    rng = np.random.default_rng(5)
    words = rng.integers(0, distinct, 200).astype(np.uint64)
    monkeypatch.setattr(module, "_PARTITION_BUDGET", -13)  # 200 rows: 7 halvings (+14), so one partition
    for k in (0, 57, 100, 199):
        mine, rows = words.copy(), np.arange(200, dtype=np.int64)
        module._select.py_func(mine, rows, 0, 200, k)
        assert mine[k] == np.sort(words)[k]
        assert (mine[:k] <= mine[k]).all() and (mine[k + 1:] >= mine[k]).all()
        assert (words[rows] == mine).all()  # rows moved with their words
