"""A top-n over many rows sorts only the rows whose primary sort word can place them among the first n
(gpu_engine.kernels.sort._top_n_candidates) and still returns exactly the stable sort's first n rows (and ties)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import gpu_engine.kernels.sort as sort
from gpu_engine.columnar.column import Column
from tests.kernels.test_sort import comparable, reference_order

ROWS = 6000


def _arrays(seed: int) -> dict[str, pa.Array]:
    """Columns of ROWS rows with few distinct values (many ties across the n-th row), NULLs, NaN and -0.0."""
    rng = np.random.default_rng(seed)
    nulls = rng.random(ROWS) < 0.1
    ints = rng.integers(-40, 40, ROWS)
    floats = rng.choice([-0.0, 0.0, 1.5, -2.25, np.nan, np.inf, -np.inf, 7.0], ROWS)
    words = rng.choice(["", "a", "ab", "b", "exactly8!", "zz", "é"], ROWS)
    return {
        "int64": pa.array(ints, pa.int64(), mask=nulls),
        "float64": pa.array(floats, pa.float64(), mask=nulls),
        "string": pa.array(words.tolist(), pa.string(), mask=nulls),
        "dictionary": pa.array(words.tolist(), pa.string(), mask=nulls).dictionary_encode(),
        "decimal": pa.array([None if null else int(v) * 7 for v, null in zip(ints, nulls)], pa.decimal128(30, 2)),
        "tiebreak": pa.array(rng.integers(0, 5, ROWS), pa.int32()),
    }


@pytest.mark.parametrize("first", ["int64", "float64", "string", "dictionary", "decimal"])
@pytest.mark.parametrize("ascending, nulls_first", [(True, False), (False, True)])
@pytest.mark.parametrize("with_ties", [False, True])
def test_top_n_over_many_rows_equals_the_sort_prefix(device, monkeypatch, first, ascending, nulls_first, with_ties):
    arrays = _arrays(len(first))
    keys = [arrays[first], arrays["tiebreak"]]
    sorted_rows: list[int] = []
    whole_sort = sort._sorted

    def counted(device_, columns, *rest):
        sorted_rows.append(len(columns[0]))
        return whole_sort(device_, columns, *rest)

    monkeypatch.setattr(sort, "_sorted", counted)
    columns = [Column.from_arrow(a, device) for a in keys]
    directions, placements = [ascending, True], [nulls_first, False]
    expected_order = reference_order(keys, directions, placements)
    for n in (1, 10, 100):
        sorted_rows.clear()
        top = device.to_host(sort.top_n_indices(device, columns, directions, placements, n, with_ties=with_ties))
        expected = expected_order[:n]
        if with_ties:  # the rows whose two keys equal the n-th row's follow it
            def key(row):
                return tuple(None if a[row].as_py() is None else comparable(a[row].as_py()) for a in keys)
            expected = expected_order[:n] + [r for r in expected_order[n:] if key(r) == key(expected_order[n - 1])]
        assert top.tolist() == expected, (first, n)
        if device.kernel_flavor == "cpu":  # only the rows that can place are sorted (all of them before)
            assert sorted_rows and max(sorted_rows) <= ROWS // 2, (first, n, sorted_rows)


def test_a_primary_key_that_does_not_narrow_sorts_every_row(device, monkeypatch):
    # One value in the first key: every row ties with the n-th on it, so all are sorted (by the second key).
    keys = [pa.array([5] * ROWS, pa.int64()), pa.array(np.arange(ROWS)[::-1].copy(), pa.int64())]
    columns = [Column.from_arrow(a, device) for a in keys]
    top = device.to_host(sort.top_n_indices(device, columns, [True, True], [False, False], 3))
    assert top.tolist() == [ROWS - 1, ROWS - 2, ROWS - 3]
