"""A dictionary column with more dictionary values than rows is worked on row by row (issue 31, dictregress).

Why: a hash build side of up to 65,536 rows keeps its strings as one dictionary, so a few probe rows joined
to a dimension carry all its values; interning, hashing, ranking or packing every value per batch cost more
than the rows (TPC-DS q22's rollup and q65's TopN at SF1). These tests pin that the per-value work of those
kernels is bounded by the rows, that the interner keeps only the strings rows use (what an aggregation emits
as its keys' dictionary), and that answers match DuckDB with NULL rows, NULL dictionary entries and no rows.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows, duckdb_table, session_with_tables

from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_columns
from gpu_engine.kernels import hash as hashing
from gpu_engine.kernels import sort
from gpu_engine.kernels.gather import decoded_column, rows_or_dictionary
from gpu_engine.kernels.group_by import StringInterner, normalize_keys
from gpu_engine.kernels.string_keys import StringKeyTable


def _dictionary_column(device, values: list, codes: list, row_valid: list | None = None) -> Column:
    """A dictionary column of ``codes`` into ``values`` (None values: NULL entries), rows NULL where not valid."""
    mask = None if row_valid is None else pa.array([not v for v in row_valid])
    indices = pa.array(codes, pa.int32(), mask=mask)
    return Column.from_arrow(pa.DictionaryArray.from_arrays(indices, pa.array(values, pa.string())), device)


def _expected(values: list, codes: list, row_valid: list | None) -> list:
    return [None if (row_valid is not None and not row_valid[i]) else values[c] for i, c in enumerate(codes)]


VALUES = [f"value-{i:04d}-{'x' * (i % 13)}" for i in range(300)] + [None]
CODES = [7, 300, 299, 7, 0, 150, 42]
VALID = [True, True, False, True, True, True, True]


def test_a_dictionary_larger_than_its_rows_is_decoded_with_both_kinds_of_null(device):
    """Rows NULL by their own validity or by a NULL dictionary entry are NULL decoded; a dictionary no larger
    than the rows stays as it is; an empty dictionary (all NULL rows) decodes to NULLs."""
    column = _dictionary_column(device, VALUES, CODES, VALID)
    decoded = rows_or_dictionary(device, column)
    assert not decoded.is_dictionary
    assert decoded.to_arrow(device).to_pylist() == _expected(VALUES, CODES, VALID)
    small = _dictionary_column(device, ["a", "b"], [1, 0, 1])
    assert rows_or_dictionary(device, small) is small
    empty = Column.from_arrow(pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()),
                                                             pa.array([], pa.string())), device)
    assert decoded_column(device, empty).to_arrow(device).to_pylist() == [None, None]


def test_concatenated_dictionaries_decoded_keep_rows_of_a_null_entry_null(device):
    """Two columns with large different dictionaries are concatenated as decoded strings: a row whose code
    points at a NULL dictionary entry stays NULL also where the column has a validity of its own (it became
    an empty string before)."""
    first = _dictionary_column(device, VALUES, CODES, VALID)
    second = _dictionary_column(device, ["other", None], [1, 0], [True, False])
    joined = concat_columns(device, [first, second])
    assert not joined.is_dictionary
    assert joined.to_arrow(device).to_pylist() == _expected(VALUES, CODES, VALID) + [None, None]


def test_interning_a_few_rows_of_a_large_dictionary_keeps_only_their_strings(device):
    """Before: the interner took all 300 dictionary values for 7 rows, and an aggregation emitted them all as
    its keys' dictionary, so every later step interned 300 values again. The ids still equate equal strings
    across a later batch that brings the same strings plain."""
    interner = StringInterner(device)
    ids = interner.intern(_dictionary_column(device, VALUES, CODES, VALID))
    kept = interner.values().to_arrow(device).to_pylist()
    distinct = {v for v in _expected(VALUES, CODES, VALID) if v is not None}
    assert len(kept) == len(distinct) and set(kept) == distinct
    ids = ids.to_arrow(device).to_pylist()
    assert ids[1] is None and ids[2] is None and ids[0] == ids[3]
    again = interner.intern(Column.from_arrow(pa.array([VALUES[0], VALUES[7], "new"]), device))
    assert again.to_arrow(device).to_pylist()[:2] == [ids[4], ids[0]]


def test_sorting_and_hashing_a_few_rows_of_a_large_dictionary_work_on_the_rows(device, monkeypatch):
    """Before: a TopN over 7 rows ranked all 300 dictionary values per compaction (q65: 18,000 a call), and a
    repartition hashed them all. The order and hashes equal those of the same rows as plain strings."""
    seen = []
    ranks, hashes = sort.dense_ranks, hashing._string_hashes
    monkeypatch.setattr(sort, "dense_ranks",
                        lambda d, columns, *a: seen.append(len(columns[0])) or ranks(d, columns, *a))
    monkeypatch.setattr(hashing, "_string_hashes", lambda d, column: seen.append(len(column)) or hashes(d, column))
    column = _dictionary_column(device, VALUES, CODES, VALID)
    plain = Column.from_arrow(pa.array(_expected(VALUES, CODES, VALID)), device)
    order = device.to_host(sort.top_n_indices(device, [column], [False], [False], 4))
    assert max(seen, default=0) <= len(CODES)
    assert list(order) == list(device.to_host(sort.top_n_indices(device, [plain], [False], [False], 4)))
    words = device.to_host(hashing.hash_columns(device, [column]))
    assert max(seen) <= len(CODES)
    assert list(words) == list(device.to_host(hashing.hash_columns(device, [plain])))
    packed, _ = normalize_keys(device, [column])
    assert np.array_equal(device.to_host(packed), device.to_host(normalize_keys(device, [plain])[0]))


@pytest.mark.parametrize("probe_rows", [0, 40])
def test_a_few_probe_rows_through_a_dimension_group_roll_up_and_sort_as_duckdb(device_name, probe_rows):
    """A pre-aggregated probe joined to a 300-row dimension (its strings one dictionary, NULLs among them),
    rolled up by two of its strings and sorted by them with a LIMIT: the shape of TPC-DS q22 and q65."""
    if device_name == "cuda-sim":
        pytest.skip("CI time (9 s interpreted): the kernel tests above run the CUDA twins; the plan is the cpu one")
    rng = np.random.default_rng(31)
    dimension = pa.table({"d_key": pa.array(np.arange(300), pa.int64()),
                          "d_name": pa.array([None if i % 37 == 5 else f"name-{i:03d}-{'y' * (i % 19)}"
                                              for i in range(300)]),
                          "d_group": pa.array([None if i % 41 == 3 else f"group-{i % 23}" for i in range(300)])})
    facts = pa.table({"f_key": pa.array(rng.integers(0, 320, probe_rows * 3), pa.int64()),
                      "f_value": pa.array(rng.integers(-50, 50, probe_rows * 3), pa.int64())})
    tables = {"f": facts, "d": dimension}
    session = session_with_tables(tables, splits=2, device=device_name, drivers=2, batch_rows=16)
    connection = duckdb.connect()
    for name, table in tables.items():
        connection.register(name, table)
    sql = ("SELECT d_group, d_name, sum(total) AS s, count(*) AS c FROM "
           "(SELECT f_key, sum(f_value) AS total FROM f GROUP BY f_key) AS a JOIN d ON a.f_key = d.d_key "
           "GROUP BY ROLLUP (d_group, d_name) ORDER BY d_name DESC NULLS LAST, d_group, s LIMIT 25")
    assert_same_rows(session.sql(sql), duckdb_table(connection, sql), ordered=True)
