"""HashAggregation keys of at most 32 bits take one key word each (``normalize_keys(..., narrow=True)``), against DuckDB.

Why a file of its own: the table hashed and compared two words a key (a flag word and a value word); an integer,
date or bool key of at most 32 bits, and an interned string key's id, now takes one word holding both (TPC-DS q39
groups by four such keys: eight words a row, four now). These tables mix what the narrow word must keep apart:
NULL against 0 and -1, the int32 and uint32 extremes, negative int8/int16 values, dates before 1970, bools, and
string keys (their ids are narrow too), with the variance family's partial states (``stddev_samp`` NULL for a
group of one row) merged across partial steps and flushes.
"""

import datetime

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_rows
from operator_tables import execute_grouped

#: Rows per chunk (one split each) and per batch: several batches per split; the simulator interprets every kernel.
SHAPES = {"cpu": (600, 250), "cuda-sim": (80, 80), "cuda": (600, 250)}
#: The simulator runs one case (string ids and dates narrow, merged moments); ``cpu`` and ``cuda`` run every pair.
SIMULATOR_CASES = {("s+i32+dt", "partial_final")}

_I32 = [None, 0, -1, 2**31 - 1, -(2**31), 7, 123456]
_U32 = [None, 0, 2**32 - 1, 2**31, 1]
_DATES = [None, datetime.date(1969, 12, 31), datetime.date(1970, 1, 1), datetime.date(2001, 1, 1)]
_STRINGS = [None, "", "a", "warehouse one", "é"]


def _table(chunk_rows: int) -> pa.Table:
    """Four chunks; the keys cycle with coprime periods, so groups hold many rows, a few rows or one row."""
    chunks = []
    for c in range(4):
        rows = range(c * chunk_rows, (c + 1) * chunk_rows)
        chunks.append(pa.table({
            "i8": pa.array([None if i % 9 == 0 else (i % 7) - 3 for i in rows], pa.int8()),
            "i16": pa.array([None if i % 10 == 0 else -(i % 5) * 1000 for i in rows], pa.int16()),
            "i32": pa.array([_I32[i % len(_I32)] if i % 50 else 10_000 + i for i in rows], pa.int32()),
            "u32": pa.array([_U32[i % len(_U32)] for i in rows], pa.uint32()),
            "dt": pa.array([_DATES[(i // 3) % len(_DATES)] for i in rows], pa.date32()),
            "b": pa.array([None if i % 6 == 0 else i % 4 == 0 for i in rows], pa.bool_()),
            "s": pa.array([_STRINGS[(i // 2) % len(_STRINGS)] for i in rows], pa.string()),
            "v": pa.array([None if i % 8 == 0 else (i * 37) % 101 - 50 for i in rows], pa.int32()),
        }))
    return pa.concat_tables(chunks)


AGGREGATES = ["count(*) AS c", "stddev_samp(v) AS sd", "var_pop(v) AS vp", "avg(v) AS a", "sum(v) AS total"]
#: The simulator's aggregates: the moments' partial states and a count (each kernel it interprets costs seconds).
SIMULATOR_AGGREGATES = ["count(*) AS c", "stddev_samp(v) AS sd"]


def _sql(keys, aggregates=AGGREGATES):
    return f"SELECT {', '.join(keys + aggregates)} FROM t GROUP BY {', '.join(keys)}"


def _run(device_name, monkeypatch, table, keys, steps, batch_rows, split_rows):
    """Run the aggregation of ``keys`` as ``steps``; return its rows and the key widths of every table it made."""
    import gpu_engine.operators.hash_aggregation as module

    widths = []

    class Recording(module.GroupByHashTable):
        def __init__(self, device, table_widths, *args, **kwargs):
            widths.append(tuple(table_widths))
            super().__init__(device, table_widths, *args, **kwargs)

    monkeypatch.setattr(module, "GroupByHashTable", Recording)
    aggregates = SIMULATOR_AGGREGATES if device_name == "cuda-sim" else AGGREGATES
    result = execute_grouped(device_name, table, keys, aggregates, steps, batch_rows, split_rows)
    return result, widths, _sql(keys, aggregates)


@pytest.mark.parametrize("keys", [["i32"], ["i8", "u32"], ["s", "i32", "dt"], ["b", "i16", "i8"]], ids="+".join)
@pytest.mark.parametrize("steps", ["single", "partial_final", "flushing"])
def test_narrow_keys_take_one_word_and_group_as_duckdb(device_name, monkeypatch, keys, steps):
    if device_name == "cuda-sim" and ("+".join(keys), steps) not in SIMULATOR_CASES:
        pytest.skip("the simulator runs one case (it is an interpreter)")
    from duckdb_reference import assert_same_rows

    chunk_rows, batch_rows = SHAPES[device_name]
    table = _table(chunk_rows)
    result, widths, sql = _run(device_name, monkeypatch, table, keys, steps, batch_rows, chunk_rows)
    assert_same_rows(result, duckdb_rows(sql, t=table))
    assert widths and all(w == (1,) * len(keys) for w in widths), widths


def test_wide_keys_keep_two_words_beside_narrow_ones(device_name, monkeypatch):
    """An int64 or double key keeps its flag and value words; a narrow key beside it takes one."""
    if device_name == "cuda-sim":
        pytest.skip("the cpu case covers the layout; the simulator runs the narrow case above")
    from duckdb_reference import assert_same_rows

    base = _table(200)
    table = base.append_column("w", pa.array([None if i % 7 == 0 else (i % 4) - 2**40 for i in range(len(base))],
                                             pa.int64()))
    table = table.append_column("f", pa.array([(i % 3) * 0.5 - 0.0 for i in range(len(base))], pa.float64()))
    keys = ["w", "i32", "f"]
    result, widths, sql = _run(device_name, monkeypatch, table, keys, "partial_final", 100, 200)
    assert_same_rows(result, duckdb_rows(sql, t=table))
    assert widths and all(w == (2, 1, 2) for w in widths), widths


def test_narrow_keys_over_an_empty_input(device_name, monkeypatch):
    """No rows: no groups, whatever the steps."""
    from duckdb_reference import assert_same_rows

    table = _table(10).slice(0, 0)
    keys = ["s", "i32"]
    result, _, sql = _run(device_name, monkeypatch, table, keys, "partial_final", 100, 100)
    assert_same_rows(result, duckdb_rows(sql, t=table))
