"""String columns' distinct counts from their Parquet dictionary page headers
(:func:`gpu_engine.sql.statistics.string_distinct_values`).

A string column had none, so ``d_name = 'n7'`` kept a tenth of the rows whatever the column held (TPC-DS
q17's ``d_quarter_name = '2001Q1'``: 7,305 date_dim rows for 91). The largest dictionary page of a file's
first row groups counts at least that many distinct strings; a chunk without a dictionary (or one the
writer outgrew) leaves the count unknown. The planner reads them only where
``statistics.STRING_DISTINCT_VALUES`` is on (off by default: see its comment);
the plan test turns it on.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables
from gpu_engine import Session
from gpu_engine.plans.nodes import HashJoinNode, TableScanNode, walk_plan
from gpu_engine.sql import statistics
from gpu_engine.sql.statistics import string_distinct_values

_RNG = np.random.default_rng(31)
NAMES = [f"n{k}" for k in range(100)]
DIM = pa.table({"d_key": pa.array(np.arange(1000), pa.int32()),
                "d_name": pa.array([NAMES[k % 100] if k % 97 else None for k in range(1000)])})
FACT = pa.table({"f_d": pa.array(_RNG.integers(0, 1000, 5000), pa.int32()),
                 "f_t": pa.array(_RNG.integers(0, 100, 5000), pa.int32()),
                 "f_amount": pa.array(_RNG.integers(0, 1000, 5000), pa.int64())})
SMALL = pa.table({"t_key": pa.array(np.arange(100), pa.int32()),
                  "t_group": pa.array(np.arange(100) % 7, pa.int32())})
QUERY = ("SELECT t_group, f_amount, d_key FROM fact, dim, small "
         "WHERE f_d = d_key AND f_t = t_key AND d_name = 'n7'")


def _written(tmp_path, name: str, table: pa.Table, **options) -> str:
    path = str(tmp_path / f"{name}.parquet")
    pq.write_table(table, path, **options)
    return path


def test_the_dictionary_pages_count_a_string_columns_values(tmp_path):
    path = _written(tmp_path, "dim", DIM, row_group_size=400)
    assert string_distinct_values((path,), "d_name") == 100  # NULLs are not values; every group holds all 100
    plain = _written(tmp_path, "plain", DIM, use_dictionary=False)
    assert string_distinct_values((plain,), "d_name") == 0  # no dictionary page: unknown
    # several files: the largest count (a lower bound of the union's)
    few = _written(tmp_path, "few", pa.table({"d_name": pa.array(["a", "b", "a"])}))
    assert string_distinct_values((few, path), "d_name") == 100
    # a file whose writer outgrew its dictionary page fell back to plain pages: unknown
    many = _written(tmp_path, "many", pa.table({"d_name": pa.array([f"value-{k:08d}" for k in range(60_000)])}),
                    dictionary_pagesize_limit=1024)
    assert string_distinct_values((many,), "d_name") == 0
    empty = _written(tmp_path, "empty", DIM.slice(0, 0))
    assert string_distinct_values((empty,), "d_name") == 0


def _top_join_build_tables(plan) -> set[str]:
    top = next(node for node in walk_plan(plan) if isinstance(node, HashJoinNode))
    return {scan.table_name for scan in walk_plan(top.sources[1]) if isinstance(scan, TableScanNode)}


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_a_fact_filtered_through_one_named_row_is_built_and_probed_by_a_small_table(tmp_path, device, monkeypatch):
    monkeypatch.setattr(statistics, "STRING_DISTINCT_VALUES", True)
    session = Session(device=device, fuse=False)
    tables = {"fact": FACT, "dim": DIM, "small": SMALL}
    for name, table in tables.items():
        session.register(name, _written(tmp_path, name, table))
    # d_name = 'n7' keeps ~10 of dim's rows and ~50 sales: fewer than small's 100, so the sales are built
    assert _top_join_build_tables(session.sql_plan(QUERY)) == {"fact", "dim"}
    with duckdb_with_tables(tables) as reference:
        assert_same_rows(session.sql(QUERY), duckdb_table(reference, QUERY))
