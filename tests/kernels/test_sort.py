"""Tests for gpu_engine.kernels.sort: orders equal a stable Python sort with DuckDB's null and NaN rules."""

from __future__ import annotations

import datetime
import decimal
import functools
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.sort import dense_ranks, sort_indices, top_n_indices


def comparable(value):
    if isinstance(value, float):
        return (1, 0.0) if math.isnan(value) else (0, value + 0.0)
    if isinstance(value, str):
        return value.encode()
    return value


def reference_order(arrays, ascending, nulls_first):
    """Return the stable order of rows under per-key direction and null placement."""
    columns = [a.to_pylist() for a in arrays]

    def compare(left, right):
        for values, up, first in zip(columns, ascending, nulls_first):
            a, b = values[left], values[right]
            if a is None or b is None:
                if a is None and b is None:
                    continue
                return (-1 if a is None else 1) * (1 if first else -1)
            a, b = comparable(a), comparable(b)
            if a != b:
                return (-1 if a < b else 1) * (1 if up else -1)
        return 0

    return sorted(range(len(columns[0])), key=functools.cmp_to_key(compare))


def check_sort(device, arrays, ascending, nulls_first):
    columns = [Column.from_arrow(a, device) for a in arrays]
    order = device.to_host(sort_indices(device, columns, ascending, nulls_first))
    assert order.dtype == np.int32
    np.testing.assert_array_equal(order, reference_order(arrays, ascending, nulls_first))
    return order


WORDS = ["", "a", "a\x00", "ab", "abc", "b", "exactly8", "exactly8!", "exactly8 and more words", "é", "z", "日本"]
ARRAYS = {
    "int32": pa.array([3, -1, None, 0, -(2**31), 2**31 - 1, 3, None, -1], pa.int32()),
    "int64": pa.array([2**62, -(2**63), None, 0, -5, 5, 2**63 - 1, -5], pa.int64()),
    "uint64": pa.array([2**64 - 1, 0, None, 2**63, 1], pa.uint64()),
    "float64": pa.array([1.5, -0.0, 0.0, float("nan"), None, float("inf"), float("-inf"), -2.5, float("nan"), 0.0]),
    "float32": pa.array([1.5, -0.0, float("nan"), None, -3.25, 0.0], pa.float32()),
    "bool": pa.array([True, None, False, True, False]),
    "date32": pa.array([datetime.date(2020, 2, 29), None, datetime.date(1969, 7, 20), datetime.date(1970, 1, 1)]),
    "timestamp": pa.array([5, -5, None, 0, 10**15], pa.timestamp("us")),
    "decimal": pa.array([decimal.Decimal("1.05"), decimal.Decimal("-1.05"), None, decimal.Decimal("0.00"),
                         decimal.Decimal("123456.78")], pa.decimal128(12, 2)),
    "string": pa.array(WORDS + [None] + WORDS[::3]),
    "dictionary": pa.array(WORDS[::-1] + [None] + WORDS[::2]).dictionary_encode(),
}
DIRECTIONS = [(True, True), (True, False), (False, True), (False, False)]


@pytest.mark.parametrize("ascending, nulls_first", DIRECTIONS, ids=["asc-nf", "asc-nl", "desc-nf", "desc-nl"])
@pytest.mark.parametrize("name", list(ARRAYS))
def test_single_key(device, name, ascending, nulls_first):
    check_sort(device, [ARRAYS[name]], [ascending], [nulls_first])


def test_multi_key_is_stable(device):
    rng = np.random.default_rng(0)
    rows = 300
    ints = pa.array([None if v == 5 else int(v) for v in rng.integers(0, 6, rows)], pa.int64())
    strings = pa.array([WORDS[i] for i in rng.integers(0, 4, rows)])
    floats = pa.array(rng.choice([0.5, -0.0, 0.0, np.nan, -1.0], rows))
    for ascending in ([True, False, True], [False, True, False]):
        check_sort(device, [ints, strings, floats], ascending, [True, False, False])


def test_agrees_with_pyarrow_sort_indices(device):
    rng = np.random.default_rng(1)
    table = pa.table({
        "k": pa.array(rng.integers(-50, 50, 500), pa.int32()),
        "s": pa.array([WORDS[i] for i in rng.integers(0, len(WORDS), 500)]),
    })
    columns = [Column.from_arrow(table[name], device) for name in ("k", "s")]
    order = device.to_host(sort_indices(device, columns, [False, True], [False, False]))
    expected = pc.sort_indices(table, sort_keys=[("k", "descending"), ("s", "ascending")]).to_numpy()
    np.testing.assert_array_equal(order, expected)


def test_dictionary_with_duplicate_and_unused_values_sorts_by_value(device):
    dictionary = pa.DictionaryArray.from_arrays(
        pa.array([0, 3, 1, None, 2, 3, 0], pa.int32()), pa.array(["b", "a", "b", "c", "unused"]))
    order = check_sort(device, [dictionary, pa.array(range(7), pa.int64())], [True, False], [False, True])
    np.testing.assert_array_equal(order, [2, 6, 4, 0, 5, 1, 3])


def test_sliced_strings(device, string_column_slice):
    values = WORDS * 2 + [None]
    order = device.to_host(sort_indices(device, [string_column_slice(values, 5)], [False], [True]))
    np.testing.assert_array_equal(order, reference_order([pa.array(values[5:])], [False], [True]))


@pytest.mark.parametrize("nulls_first", [True, False])
def test_dense_ranks_number_distinct_keys_in_sort_order(device, nulls_first):
    values = ["b", None, "a", "b", "", None, "c", "a"]
    ranks, order, dense = (device.to_host(a) for a in dense_ranks(
        device, [Column.from_arrow(pa.array(values), device)], [True], [nulls_first]))
    distinct = sorted({v for v in values if v is not None})
    distinct = [None] + distinct if nulls_first else distinct + [None]
    np.testing.assert_array_equal(ranks, [distinct.index(v) for v in values])
    np.testing.assert_array_equal(order, reference_order([pa.array(values)], [True], [nulls_first]))
    np.testing.assert_array_equal(dense, ranks[order])
    assert ranks.dtype == np.int64


def test_empty_input(device):
    columns = [Column.from_arrow(pa.array([], pa.string()), device), Column.from_arrow(pa.array([], pa.int64()), device)]
    assert sort_indices(device, columns, [True, True], [True, True]).shape == (0,)
    assert top_n_indices(device, columns, [True, True], [True, True], 5).shape == (0,)
    assert top_n_indices(device, columns, [True, True], [True, True], 5, with_ties=True).shape == (0,)


def test_argument_checks(device):
    column = Column.from_arrow(pa.array([1, 2], pa.int64()), device)
    with pytest.raises(ValueError):
        sort_indices(device, [], [], [])
    with pytest.raises(ValueError):
        sort_indices(device, [column], [True, False], [True])
    with pytest.raises(ValueError):
        top_n_indices(device, [column], [True], [True], -1)


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_top_n_is_a_prefix_of_the_sort(device, n):
    array = ARRAYS["float64"]
    columns = [Column.from_arrow(array, device)]
    top = device.to_host(top_n_indices(device, columns, [False], [False], n))
    assert top.dtype == np.int32
    np.testing.assert_array_equal(top, reference_order([array], [False], [False])[:n])


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.one_of(st.none(), st.integers(-3, 3)),
                               st.one_of(st.none(), st.text(alphabet="ab\x00é", max_size=10)),
                               st.one_of(st.none(), st.floats(allow_nan=True, width=64))), max_size=40),
       directions=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=3, max_size=3))
def test_random_rows(device, rows, directions):
    arrays = [pa.array([r[0] for r in rows], pa.int16()), pa.array([r[1] for r in rows], pa.string()),
              pa.array([r[2] for r in rows], pa.float64())]
    check_sort(device, arrays, [d[0] for d in directions], [d[1] for d in directions])


@pytest.mark.parametrize("n, expected", [(0, []), (1, [3]), (2, [3, 1, 4, 6]), (4, [3, 1, 4, 6]), (5, [3, 1, 4, 6, 2]),
                                         (6, [3, 1, 4, 6, 2, 0, 5]), (9, [3, 1, 4, 6, 2, 0, 5])])
def test_top_n_with_ties_extends_past_n_to_the_last_tied_row(device, n, expected):
    # Sorted (k DESC NULLS LAST, s): 3 | 1 4 6 (k=7, s=1: tied) | 2 | 0 5 (NULL k, s=2: NULLs tie)
    columns = [Column.from_arrow(pa.array([None, 7, 5, 9, 7, None, 7], pa.int64()), device),
               Column.from_arrow(pa.array(["b", "a", "c", "a", "a", "b", "a"]), device)]
    top = device.to_host(top_n_indices(device, columns, [False, True], [False, False], n, with_ties=True))
    assert top.tolist() == expected
