"""ORDER BY keys read from SQL, and ordered result checks that let rows tying on every key come in any order."""

from __future__ import annotations

import pyarrow as pa
from duckdb_reference import rows_mismatch

from gpu_engine.cli import compare_with_duckdb
from gpu_engine.plans import tpch
from gpu_engine.sql.ordering import order_key_columns


def test_order_keys_are_output_columns_or_row_for_row():
    assert order_key_columns(tpch.sql(11, 1)) == ("value",)
    assert order_key_columns(tpch.sql(1, 1)) == ("l_returnflag", "l_linestatus")
    assert order_key_columns(tpch.sql(6, 1)) is False
    assert order_key_columns("SELECT a, b FROM t ORDER BY a + b") is True  # not an output column: row for row
    assert order_key_columns("SELECT a AS x FROM t ORDER BY x DESC") == ("x",)
    assert order_key_columns("SELECT FROM WHERE ORDER BY") is True  # does not parse: as strict as before


def _table(keys, values):
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.int64())})


def test_ties_may_come_in_any_order_but_keys_may_not():
    duck = _table([1, 2, 3], [9, 5, 5])
    swapped_tie = _table([1, 3, 2], [9, 5, 5])
    for check in (rows_mismatch, compare_with_duckdb):
        assert check(swapped_tie, duck, ("v",)) is None
        assert check(swapped_tie, duck, True) is not None  # row for row: the swap is a difference
        assert check(_table([2, 1, 3], [5, 9, 5]), duck, ("v",)) is not None  # out of ORDER BY order
        assert check(_table([1, 2, 3], [9, 5, 6]), duck, ("v",)) is not None  # different rows
