"""A TableScan's host batches cut from one Parquet row group share its dictionary Column.

Why: work kept per dictionary (a grouping key's interned ids, a lifted expression's values) is cached by the
dictionary's fingerprint, or, for a dictionary over 1 MiB, by the object; each slice converted on its own got
an object of its own, so a GROUP BY over 100K dictionary-coded strings re-interned the row group's values
once a slice (bench/string_keys_ab.py; 0.90x CPU with the slices sharing it). Answers as DuckDB's, with NULL,
empty and non-ASCII keys (a GPU's scan copies Arrow slices later: unchanged).
"""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

KEYS = [None, "", "ünï-ß", "日本"] + [f"key-{i % 97:02d}" for i in range(896)]


def _file(tmp_path) -> str:
    path = str(tmp_path / "coded.parquet")
    table = pa.table({"k": pa.array(KEYS, pa.string()), "v": pa.array(range(len(KEYS)), pa.int64())})
    pq.write_table(table, path, row_group_size=len(KEYS))  # one row group, dictionary-encoded
    return path


def test_slices_of_a_record_batch_share_one_dictionary_column(tmp_path):
    """Fails before: each slice's dictionary was a Column of its own."""
    from gpu_engine.device import get_device
    from gpu_engine.operators.table_scan import _host_slices

    record_batch = pq.read_table(_file(tmp_path), read_dictionary=["k"]).to_batches()[0]
    slices = _host_slices(record_batch, 300, get_device("cpu"))
    assert [s.num_rows for s in slices] == [300, 300, 300]
    assert len({id(s.columns[0].dictionary) for s in slices}) == 1
    assert [v for s in slices for v in s.to_arrow().column(0).to_pylist()] == KEYS


def test_grouping_on_a_dictionary_key_across_slices_matches_duckdb(tmp_path):
    """On cpu (cuda-sim scans alike and passed once: ~10 s of the simulator, too much for CI)."""
    from gpu_engine import Session

    path = _file(tmp_path)
    session = Session(device="cpu", drivers=2, batch_rows=200, compile_mode="lowest")
    session.register("t", path)
    sql = "SELECT k, count(*) AS c, sum(v) AS s, min(length(k)) AS n FROM t GROUP BY k"
    got = sorted(tuple(r.values()) for r in session.sql(sql).to_pylist() if r["k"] is not None)
    expected = duckdb.sql(sql.replace("FROM t", f"FROM read_parquet('{path}')")).fetchall()
    assert got == sorted(r for r in expected if r[0] is not None)
    assert [r for r in session.sql(sql).to_pylist() if r["k"] is None] == [
        dict(zip(("k", "c", "s", "n"), r)) for r in expected if r[0] is None]
