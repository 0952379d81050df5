"""Columns and batches round-trip Arrow data of every supported type, with nulls, slices and gather maps."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar import Batch, Column
from gpu_engine.columnar.concat import concat_batches

ARRAYS = {
    "int8": pa.array([1, None, -128, 127], pa.int8()),
    "int16": pa.array([1, None, -3, 30000], pa.int16()),
    "int32": pa.array([None, 2, -3, 2**31 - 1], pa.int32()),
    "int64": pa.array([2**63 - 1, None, -(2**63), 0], pa.int64()),
    "float32": pa.array([1.5, None, float("nan"), -0.0], pa.float32()),
    "float64": pa.array([float("inf"), None, 1e300, -2.5]),
    "bool": pa.array([True, None, False, True]),
    "date32": pa.array([datetime.date(1970, 1, 1), None, datetime.date(1900, 2, 28), datetime.date(9999, 12, 31)]),
    "timestamp": pa.array([0, None, -1, 10**15], pa.timestamp("us")),
    "timestamp_tz": pa.array([0, None, 1, 2], pa.timestamp("ms", tz="UTC")),
    "decimal": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-9999999999999.99"), decimal.Decimal(0)], pa.decimal128(15, 2)),
    "decimal18": pa.array([decimal.Decimal("999999999999999999"), None, decimal.Decimal(-1), None], pa.decimal128(18, 0)),
    "string": pa.array(["a", None, "", "héllo wörld, longer than sixteen bytes"]),
    "large_string": pa.array(["x", "yy", None, ""], pa.large_string()),
    "string_view": pa.array(["short", None, "a string longer than twelve bytes", ""], pa.string_view()),
    "dictionary": pa.array(["b", "a", None, "b"]).dictionary_encode(),
}


def _expected(array: pa.Array) -> list:
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array.to_pylist()


def _same(left: list, right: list) -> bool:
    return all((a == b) or (isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b))
               for a, b in zip(left, right, strict=True))


@pytest.mark.parametrize("name", ARRAYS)
def test_round_trip(device, name):
    array = ARRAYS[name]
    column = Column.from_arrow(array, device)
    assert len(column) == len(array)
    assert _same(column.to_arrow(device).to_pylist(), _expected(array))


@pytest.mark.parametrize("name", ARRAYS)
def test_sliced_arrays_and_chunked_arrays(device, name):
    array = ARRAYS[name]
    sliced = array.slice(1, 3)
    assert _same(Column.from_arrow(sliced, device).to_arrow(device).to_pylist(), _expected(sliced))
    chunked = pa.chunked_array([array.slice(0, 2), array.slice(2)])
    assert _same(Column.from_arrow(chunked, device).to_arrow(device).to_pylist(), _expected(array))


def test_sliced_string_keeps_only_its_chars(device):
    big = pa.array(["x" * 1000] * 100 + ["abc"])
    column = Column.from_arrow(big.slice(100, 1), device)
    assert column.nbytes < 100
    assert column.to_arrow(device).to_pylist() == ["abc"]


def test_string_view_and_large_string_become_string(device):
    for name in ("large_string", "string_view", "dictionary"):
        assert Column.from_arrow(ARRAYS[name], device).dtype == pa.string()


def test_decimal128_round_trips_wide_only_where_values_need_it(device):
    """decimal(38, s) values beyond int64 keep Arrow's two words; columns whose values fit stay int64."""
    D = decimal.Decimal
    wide = pa.array([D(10) ** 32 * 9 + 1, None, -D("123456789012345678901234567890.12345"), D("-1.5")], pa.decimal128(38, 5))
    column = Column.from_arrow(wide, device)
    assert column.data.shape == (4, 2)
    assert column.to_arrow(device).equals(wide)
    narrow = pa.array([D("12345678901234.5"), None, D(-1)], pa.decimal128(38, 1))
    column = Column.from_arrow(narrow, device)
    assert column.data.ndim == 1 and column.to_arrow(device).equals(narrow)


def test_batch_gather_map_selects_without_copying(device):
    table = pa.table({name: ARRAYS[name] for name in ("int64", "string", "dictionary", "decimal")})
    batch = Batch.from_arrow(table, device)
    indices = device.asarray(np.array([3, 0, 0, 2], dtype=np.int32))
    selected = batch.with_gather_map(indices)
    assert selected.columns is batch.columns and selected.num_rows == 4
    expected = table.take(pa.array([3, 0, 0, 2])).to_pylist()
    assert selected.to_arrow().to_pylist() == expected
    twice = selected.with_gather_map(device.asarray(np.array([1, 3], dtype=np.int32)))
    assert twice.to_arrow().to_pylist() == [expected[1], expected[3]]
    assert selected.slice(1, 3).to_arrow().to_pylist() == expected[1:3]


def test_columns_with_maps_of_their_own_present_another_base(device):
    """A join's output as maps: probe columns through the batch's map, build columns (another length) through
    their own; selecting, slicing and re-mapping keep both, and materializing gathers each through its map."""
    probe = pa.table({"int64": ARRAYS["int64"], "string": ARRAYS["string"]})
    build = pa.table({"dictionary": pa.array(["x", None, "y"]).dictionary_encode(), "decimal": ARRAYS["decimal"][:3]})
    probe_rows, build_rows = np.array([3, 0, 0, 2, 1], dtype=np.int32), np.array([2, 2, 0, 1, 0], dtype=np.int32)
    base = Batch.from_arrow(probe, device).with_gather_map(device.asarray(probe_rows))
    build_batch = Batch.from_arrow(build, device)
    batch = Batch(("int64", "dictionary", "string", "decimal"),
                  (base.base_column("int64"), build_batch.base_column("dictionary"), base.base_column("string"),
                   build_batch.base_column("decimal")), device, base.gather_map, base.base_rows,
                  (None, device.asarray(build_rows), None, device.asarray(build_rows)))
    probe_side, build_side = probe.take(pa.array(probe_rows)), build.take(pa.array(build_rows))
    expected = [dict(int64=p["int64"], dictionary=b["dictionary"], string=p["string"], decimal=b["decimal"])
                for p, b in zip(probe_side.to_pylist(), build_side.to_pylist())]
    assert batch.num_rows == 5 and batch.own_map("int64") is None and batch.own_map("decimal") is not None
    assert batch.to_arrow().to_pylist() == expected
    assert batch.materialize(["decimal"]).to_arrow().to_pylist() == [{"decimal": e["decimal"]} for e in expected]
    again = batch.with_gather_map(device.asarray(np.array([4, 1], dtype=np.int32)))
    assert again.to_arrow().to_pylist() == [expected[4], expected[1]]
    assert batch.slice(1, 4).to_arrow().to_pylist() == expected[1:4]
    chosen = batch.select(["decimal", "int64"], rename=["d", "i"])
    assert chosen.to_arrow().to_pylist() == [{"d": e["decimal"], "i": e["int64"]} for e in expected]
    assert Batch(batch.names, batch.columns, device, None, 4, (None,) * 4).column_maps is None
    with pytest.raises(ValueError, match="3 column maps for 4 columns"):
        Batch(batch.names, batch.columns, device, None, 4, (None,) * 3)


def test_zero_column_batch_keeps_its_row_count(device):
    batch = Batch((), (), device, None, 7)
    assert batch.num_rows == 7 and batch.slice(2, 5).num_rows == 3


def test_concat_batches_mixes_dictionaries_and_plain_strings(device):
    first = Batch.from_arrow(pa.table({"s": pa.array(["a", None]).dictionary_encode(), "v": [1, 2]}), device)
    second = Batch.from_arrow(pa.table({"s": pa.array(["zz", "a"]), "v": [3, None]}), device)
    third = Batch.from_arrow(pa.table({"s": pa.array(["q"]).dictionary_encode(), "v": [4]}), device)
    merged = concat_batches([first, second.with_gather_map(device.asarray(np.array([1, 0], dtype=np.int32))), third])
    assert merged.to_arrow().to_pylist() == [
        {"s": "a", "v": 1}, {"s": None, "v": 2}, {"s": "a", "v": None}, {"s": "zz", "v": 3}, {"s": "q", "v": 4}]


def test_empty_batch(device):
    schema = pa.schema([("a", pa.int32()), ("s", pa.string()), ("d", pa.decimal128(15, 2))])
    batch = Batch.empty(schema, device)
    assert batch.num_rows == 0 and batch.to_arrow().schema.equals(schema)


def test_concat_keeps_dictionary_columns_encoded_under_one_merged_dictionary(device):
    """Batches with dictionaries of their own (one per Parquet row group) concatenate to codes into one dictionary
    of their distinct values, NULLs and gather maps kept; equal dictionaries are shared as they are."""
    def batch(values):
        return Batch.from_arrow(pa.table({"s": pa.array(values).dictionary_encode()}), device)

    first, second = batch(["b", "a", None, "b"] * 4), batch(["c", "a", "c"] * 4)
    mapped = second.with_gather_map(device.asarray(np.array([2, 1, 0, 1, 5, 4], dtype=np.int32)))
    merged = concat_batches([first, mapped]).column("s")
    assert merged.is_dictionary
    assert sorted(merged.dictionary.to_arrow(device).to_pylist()) == ["a", "b", "c"]
    assert merged.dictionary.fingerprint is not None  # per-dictionary work is cached by it
    expected = ["b", "a", None, "b"] * 4 + ["c", "a", "c", "a", "c", "a"]
    assert merged.to_arrow(device).to_pylist() == expected

    again = concat_batches([batch(["x", "y"] * 3), batch(["x", "y"] * 2)]).column("s")  # equal dictionaries
    assert again.is_dictionary and again.dictionary.to_arrow(device).to_pylist() == ["x", "y"]


def test_concat_decodes_dictionaries_nearly_as_large_as_their_rows(device):
    """Mostly distinct values gain nothing from a merged dictionary: they are concatenated as plain strings."""
    first = Batch.from_arrow(pa.table({"s": pa.array(["a", "b", "c"]).dictionary_encode()}), device)
    second = Batch.from_arrow(pa.table({"s": pa.array(["d", "e"]).dictionary_encode()}), device)
    merged = concat_batches([first, second]).column("s")
    assert not merged.is_dictionary and merged.to_arrow(device).to_pylist() == ["a", "b", "c", "d", "e"]


def test_concat_with_an_all_null_dictionary_column(device):
    """An all-NULL dictionary column (an empty dictionary) among others concatenates to the right values."""
    values = ["a", "b", "a", "b"] * 4
    full = Batch.from_arrow(pa.table({"s": pa.array(values).dictionary_encode()}), device)
    nulls = Batch.from_arrow(pa.table({"s": pa.array([None] * 8, pa.string()).dictionary_encode()}), device)
    merged = concat_batches([full, nulls]).column("s")
    assert merged.to_arrow(device).to_pylist() == values + [None] * 8
