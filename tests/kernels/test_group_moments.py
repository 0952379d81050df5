"""Tests for kernels.aggregate.group_moments over raw rows: per-group count, mean, sums of squared deviations and
of co-deviations equal NumPy's, on every device.

The CPU folds raw rows in one pass (Welford's update relative to each group's first value); other devices reduce
a batch in three passes and join it by Chan's formula. Both must hold a group's moments across batches, skip
rows whose validity is False, and stay exact for values with a large offset (1e9 plus units).
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_engine.exec.device_counters import counts_now
from gpu_engine.kernels.aggregate import MOMENT_BATCH_STATE, MOMENT_STATE, group_moments

ROWS = {"cpu": 5_000, "cuda-sim": 64, "cuda": 5_000}


def test_raw_rows_fold_into_each_groups_moments_across_batches(device, device_name):
    rng = np.random.default_rng(3)
    rows, groups = ROWS[device_name], 6
    group_ids = rng.integers(0, groups - 1, rows).astype(np.int32)  # the last group gets no row
    x = 1e9 + rng.integers(0, 7, rows).astype(np.float64)
    y = -3.5 * x + rng.normal(0, 2, rows)
    valid = rng.random(rows) > 0.2
    xp = device.xp
    state = {name: xp.zeros(groups, dtype=xp.int64 if name in ("count", "batch_n") else xp.float64)
             for name in MOMENT_STATE + MOMENT_BATCH_STATE}
    before = counts_now()
    for start in range(0, rows, rows // 3 + 1):  # three batches
        part = slice(start, start + rows // 3 + 1)
        group_moments(device, xp.asarray(group_ids[part]), xp.asarray(valid[part]), xp.asarray(x[part]),
                      xp.asarray(y[part]), None, state)
    if device_name == "cpu":  # one pass a batch, not three
        assert counts_now().kernel_launches - before.kernel_launches == 3
        from gpu_engine.kernels import aggregate

        frozen = x.copy()
        frozen.flags.writeable = False  # as an Arrow buffer read from Parquet: no second signature
        group_moments(device, group_ids, None, frozen, frozen, None,
                      {name: array.copy() for name, array in state.items()})
        assert len(aggregate._moment_rows_cpu.signatures) == 1
    host = {name: device.to_host(array) for name, array in state.items()}
    for g in range(groups):
        mine = valid & (group_ids == g)
        assert host["count"][g] == mine.sum()
        if not mine.any():
            continue
        gx, gy = x[mine], y[mine]
        assert host["shift_x"][g] + host["mean_x"][g] == pytest.approx(gx.mean(), rel=1e-15)
        assert host["m2_x"][g] == pytest.approx(((gx - gx.mean()) ** 2).sum(), rel=1e-9, abs=1e-9)
        assert host["m2_y"][g] == pytest.approx(((gy - gy.mean()) ** 2).sum(), rel=1e-9)
        assert host["c"][g] == pytest.approx(((gx - gx.mean()) * (gy - gy.mean())).sum(), rel=1e-9)
    assert not any(host[name].any() for name in MOMENT_BATCH_STATE)  # zero between batches


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # cuda-sim: NumPy scalars warn
@pytest.mark.parametrize("partial", [False, True], ids=["rows", "partial-states"])
def test_co_deviations_whose_products_pass_the_largest_double_to_both_signs_sum_to_the_finite_co_moment(
        device, device_name, partial):
    """Five rows whose co-moment is 0.9e308 but whose products from the mean are -1.98e308 and +2.52e308: the
    three passes summed them as -inf + inf, NaN (the covar_pop of stop 52's cuda-sim probe; DuckDB's Welford
    gives -inf, +inf or 1.8e307 by the rows' order). Partial states of one row each take the same passes on
    every device (a merging step), raw rows on all but the CPU, which takes Welford's order (-inf here)."""
    if device_name == "cpu" and not partial:
        pytest.skip("the CPU folds raw rows by Welford's update, in order (DuckDB's -inf for this order)")
    x = np.array([1.5e308, 1.5e308, 1.5e308, 7.0, 2.0])
    y = np.array([3.0, 3.0, 3.0, 5.0, 1e-300])
    xp = device.xp
    state = {name: xp.zeros(1, dtype=xp.int64 if name in ("count", "batch_n") else xp.float64)
             for name in MOMENT_STATE + MOMENT_BATCH_STATE}
    rows = None
    if partial:
        rows = {name: xp.zeros(5, dtype=xp.int64 if name == "count" else xp.float64)
                for name in ("count", "mean_x", "mean_y", "m2_x", "m2_y", "c")}
        rows["count"] = xp.ones(5, dtype=xp.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        group_moments(device, xp.zeros(5, dtype=xp.int32), None, xp.asarray(x), xp.asarray(y), rows, state)
    host = {name: device.to_host(array) for name, array in state.items()}
    from fractions import Fraction

    fx, fy = [Fraction(v) for v in x], [Fraction(v) for v in y]
    mx, my = sum(fx) / 5, sum(fy) / 5
    exact = float(sum((a - mx) * (b - my) for a, b in zip(fx, fy)))
    assert host["count"][0] == 5
    assert host["c"][0] == pytest.approx(exact, rel=1e-12)  # was NaN
    assert not any(host[name].any() for name in MOMENT_BATCH_STATE)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_partial_states_merged_batch_by_batch_keep_a_finite_mean_near_the_largest_double(device):
    """A merging step's batches (one driver's partial states each) join by Chan's formula: a batch of two states of
    1.7e308 beside one of 0 moved the mean by ``d * nb / n``, whose product 3.4e308 was inf, so the next batch's
    deviation from that mean was -inf and the co-moment with a constant 0 * -inf: NaN (or 0, by which driver's state
    came first: covar_pop / regr_slope over drivers 2-3 and 1-row splits, where DuckDB says 0)."""
    xp = device.xp
    state = {name: xp.zeros(1, dtype=xp.int64 if name in ("count", "batch_n") else xp.float64)
             for name in MOMENT_STATE + MOMENT_BATCH_STATE}
    for shifts in ([0.0], [1.7e308, 1.7e308], [0.0]):
        k = len(shifts)
        rows = {name: xp.zeros(k, dtype=xp.float64) for name in ("mean_x", "mean_y", "m2_x", "m2_y", "c")}
        rows["count"] = xp.ones(k, dtype=xp.int64)
        group_moments(device, xp.zeros(k, dtype=xp.int32), None, xp.full(k, 2.0), xp.asarray(np.array(shifts)),
                      rows, state)
    host = {name: device.to_host(array) for name, array in state.items()}
    assert host["count"][0] == 4
    assert host["c"][0] == 0.0  # was NaN
    assert host["m2_x"][0] == 0.0
    assert host["shift_y"][0] + host["mean_y"][0] == pytest.approx(0.85e308, rel=1e-12)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_partial_states_joined_one_by_one_never_make_a_nan_co_moment(device, device_name):
    """One-row partial states of (1.5e308, 3) x3, (7, 5), (2, 1e-300) joined one batch each (a merging step's
    drivers): Chan's cross term passed the largest double (+inf) and a later one -inf, NaN in 14 of the 20 orders.
    The cross term now joins in units of 2**-64 and an infinite co-moment stays (as DuckDB's fused multiply-add):
    every order gives one of DuckDB's one-thread answers (-inf, +inf or 0.9e308)."""
    import itertools

    rows = [(1.5e308, 3.0)] * 3 + [(7.0, 5.0), (2.0, 1e-300)]
    orders = sorted(set(itertools.permutations(rows)))
    xp = device.xp
    for order in orders if device_name == "cpu" else orders[:3]:
        state = {name: xp.zeros(1, dtype=xp.int64 if name in ("count", "batch_n") else xp.float64)
                 for name in MOMENT_STATE + MOMENT_BATCH_STATE}
        for x, y in order:
            part = {name: xp.zeros(1, dtype=xp.float64) for name in ("mean_x", "mean_y", "m2_x", "m2_y", "c")}
            part["count"] = xp.ones(1, dtype=xp.int64)
            group_moments(device, xp.zeros(1, dtype=xp.int32), None, xp.asarray(np.array([x])),
                          xp.asarray(np.array([y])), part, state)
        c = float(device.to_host(state["c"])[0])
        assert abs(c) == np.inf or c == pytest.approx(0.9e308, rel=1e-12), (order, c)
