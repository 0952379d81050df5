"""HashAggregation's string keys are interned ids, plain or dictionary-encoded, against DuckDB.

Why a file of its own: the unfused HashAggregation (the lowest tier a first run executes) packed a plain string
key's bytes into key words for every row and copied each new group's string per batch; it now interns every
string key (:class:`~gpu_engine.kernels.group_by.StringInterner`) and keeps ids, whose known strings are the output
dictionary. These tables mix what interning must get right: NULLs, empty strings, multi-byte UTF-8, strings
sharing their first 16 bytes, many distinct values over several batches, and batches with different dictionaries.
"""

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_rows
from operator_tables import execute_grouped
from gpu_engine import Session
from gpu_engine.plans import PlanBuilder

_WORDS = ["", "a", "b", "é", "ü", "日本", "日本語", "ß", "emoji 🙂", "x" * 16 + "1", "x" * 16 + "2", "x" * 40, "A"]


def _value(i: int) -> str | None:
    if i % 11 == 0:
        return None
    if i % 3 == 0:
        return _WORDS[i % len(_WORDS)]
    return f"key-{i % 997}-ß{'é' * (i % 5)}"  # ~1,000 distinct, multi-byte, of several lengths


#: Rows per chunk (one split each) and per batch on each device: several batches per split everywhere. The simulator
#: interprets every kernel (8-13 s a case at the cpu shape), so it gets a fifth of the rows in fewer batches (still
#: 740 distinct plain keys, 4 dictionaries, flushes at 8 groups) ...
SHAPES = {"cpu": (1500, 700), "cuda-sim": (300, 150), "cuda": (1500, 700)}
#: ... and one case of each key set, each step kind at least once (the flushing one, with plain and dictionary
#: keys, twice); ``cpu`` and ``cuda`` run every pair.
SIMULATOR_CASES = {("p", "single"), ("d", "partial_final"), ("p+k", "flushing"), ("d+p", "flushing"),
                   ("k+d", "single")}


def _table(chunk_rows: int = 1500) -> pa.Table:
    """A table of 4 chunks: ``p`` plain strings, ``d`` dictionary-encoded with each chunk's own dictionary."""
    chunks = []
    for c in range(4):
        rows = range(c * chunk_rows, (c + 1) * chunk_rows)
        plain = [_value(i * 7 + c) for i in rows]
        small = [None if i % 13 == 0 else _WORDS[(i * (c + 1)) % len(_WORDS)] for i in rows]
        chunks.append(pa.table({
            "p": pa.array(plain, pa.string()),
            "d": pa.array(small, pa.string()).dictionary_encode(),
            "k": pa.array([i % 5 for i in rows], pa.int64()),
            "v": pa.array([None if i % 17 == 0 else i % 101 for i in rows], pa.int64()),
        }))
    return pa.concat_tables(chunks)


AGGREGATES = ["count(*) AS c", "sum(v) AS s", "min(v) AS lo", "max(p) AS hi"]


def _sql(keys):
    return f"SELECT {', '.join(keys + AGGREGATES)} FROM t GROUP BY {', '.join(keys)}"


@pytest.mark.parametrize("keys", [["p"], ["d"], ["p", "k"], ["d", "p"], ["k", "d"]], ids="+".join)
@pytest.mark.parametrize("steps", ["single", "partial_final", "flushing"])
def test_string_keys_interned(device_name, monkeypatch, keys, steps):
    if device_name == "cuda-sim" and ("+".join(keys), steps) not in SIMULATOR_CASES:
        pytest.skip("the simulator runs one case of each key set (it is an interpreter)")
    from duckdb_reference import assert_same_rows

    import gpu_engine.operators.hash_aggregation as module

    packed = []  # the key columns each batch's key words were made from
    original = module.normalize_keys
    monkeypatch.setattr(module, "normalize_keys",
                        lambda device, columns, widths=None, **kw: packed.append([c.dtype for c in columns])
                        or original(device, columns, widths, **kw))
    chunk_rows, batch_rows = SHAPES[device_name]
    table = _table(chunk_rows)
    result = execute_grouped(device_name, table, keys, AGGREGATES, steps, batch_rows, chunk_rows)
    assert_same_rows(result, duckdb_rows(_sql(keys), t=table))
    assert packed and not any(pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
                              for dtypes in packed for dtype in dtypes)


def test_all_null_and_empty_string_keys(device_name):
    """A key whose every row is NULL (no string ever interned) and one of empty strings only, over an empty input too."""
    from duckdb_reference import assert_same_rows

    table = pa.table({"n": pa.array([None] * 300, pa.string()), "e": pa.array([""] * 300, pa.string()),
                      "v": pa.array(range(300), pa.int64())})
    session = Session(device=device_name, drivers=2, batch_rows=64, fuse=False)
    session.register("t", table, split_rows=100)
    for where in ("", " WHERE v > 1000"):
        sql = f"SELECT n, e, count(*) AS c, sum(v) AS s FROM t{where} GROUP BY n, e"
        builder = PlanBuilder(session.catalog).table_scan("t")
        if where:
            builder = builder.filter("v > 1000")
        plan = builder.aggregation(["n", "e"], ["count(*) AS c", "sum(v) AS s"]).plan()
        assert_same_rows(session.execute(plan), duckdb_rows(sql, t=table))
