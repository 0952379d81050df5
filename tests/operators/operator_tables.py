"""The operator tests' shared table (``make_table(rows)``, the row counts per device) and grouping runner.

Why a module of its own: ``from conftest import`` binds whichever folder's ``conftest.py`` one pytest call imported
first, so the helpers tests import live in uniquely named modules and the conftest keeps the fixtures.
"""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa

from gpu_engine import Session
from gpu_engine.plans import PlanBuilder

ROWS = {"cpu": 3000, "cuda-sim": 400, "cuda": 3000}


def make_table(rows: int, seed: int = 7) -> pa.Table:
    """Return a table with nulls in every column: int/str/dictionary keys, numeric, decimal and date values."""
    rng = np.random.default_rng(seed)

    def nulls(values, fraction=0.1):
        mask = rng.random(rows) < fraction
        return [None if m else v for v, m in zip(values, mask)]

    words = ["apple", "banana", "", "cherry pie", "durian-long-name-beyond-16", "é-accent", "fig"]
    start = datetime.date(1994, 1, 1)
    return pa.table({
        "k_int": pa.array(nulls(rng.integers(-5, 20, rows).tolist()), pa.int32()),
        "k_str": pa.array(nulls([words[i] for i in rng.integers(0, len(words), rows)])),
        "k_dict": pa.array(nulls([words[i] for i in rng.integers(0, 3, rows)])).dictionary_encode(),
        "v_int": pa.array(nulls(rng.integers(-10**6, 10**6, rows).tolist()), pa.int64()),
        "v_float": pa.array(nulls(rng.normal(0, 100, rows).tolist()), pa.float64()),
        "v_dec": pa.array(nulls([decimal.Decimal(int(x)).scaleb(-2) for x in rng.integers(-10**7, 10**7, rows)]), pa.decimal128(15, 2)),
        "d_date": pa.array(nulls([start + datetime.timedelta(days=int(x)) for x in rng.integers(0, 2000, rows)]), pa.date32()),
    })


def execute_grouped(device_name: str, table: pa.Table, keys: list[str], aggregates: list[str], steps: str,
                    batch_rows: int, split_rows: int) -> pa.Table:
    """Group ``t`` (``table``) by ``keys`` in the unfused HashAggregation on two drivers, as ``steps`` says:
    ``single`` (one step), ``partial_final`` (PARTIAL and FINAL steps) or ``flushing`` (PARTIAL flushes at 8 groups).

    Why: the key-encoding tests (test_narrow_grouping_keys, test_string_grouping_keys) check every encoding through
    each way a grouping runs: in one step, merged across PARTIAL and FINAL steps, and through PARTIAL flushes.
    """
    max_groups = 8 if steps == "flushing" else 100_000
    session = Session(device=device_name, drivers=2, batch_rows=batch_rows, fuse=False,
                      partial_aggregation_max_groups=max_groups)
    session.register("t", table, split_rows=split_rows)
    builder = PlanBuilder(session.catalog).table_scan("t")
    if steps == "single":
        plan = builder.aggregation(keys, aggregates).plan()
    else:
        plan = builder.partial_aggregation(keys, aggregates).local_partition(keys).final_aggregation().plan()
    return session.execute(plan)


#: The fused FINAL-step sizing tests' aggregates over ``keyed_chunks`` and DuckDB's query for them: one set of
#: kernels serves test_fused_deferred_growth and test_fused_abandoned_partial_sizing.
KEYED_AGGREGATES = ["count(*) AS c", "sum(v) AS sv", "min(v) AS mv"]
KEYED_SQL = "SELECT s, g, count(*) AS c, sum(v) AS sv, min(v) AS mv FROM t GROUP BY s, g"


def keyed_chunks(groups: int, copies: int, chunks: int, seed: int, int_divisor: int = 1) -> pa.Table:
    """Return ``copies`` rows of each of ``groups`` keys (a string with NULLs, an int with NULLs) in random order,
    in ``chunks`` chunks whose string column is dictionary-encoded with a dictionary of its own.

    The int key is the key number divided by ``int_divisor``: 1 keeps a key a row distinct (with ``s``, a key a row
    but the rows both NULL), a larger divisor makes ``(s, g)`` the key that tells the groups apart.
    """
    rng = np.random.default_rng(seed)
    key = rng.permutation(np.arange(groups * copies) % groups)
    strings = pa.array([None if k % 17 == 0 else f"k{k % 1009}" for k in key])
    ints = pa.array(key // int_divisor, pa.int64(), mask=(key % 23 == 0))
    values = pa.array(rng.integers(-50, 50, len(key)), pa.int64())
    bounds = np.linspace(0, len(key), chunks + 1).astype(int)
    pieces = [pa.table({"s": strings[a:b].dictionary_encode(), "g": ints[a:b], "v": values[a:b]})
              for a, b in zip(bounds[:-1], bounds[1:])]
    return pa.concat_tables(pieces)


def keyed_answer(table: pa.Table) -> pa.Table:
    """DuckDB's answer to ``KEYED_SQL`` over a ``keyed_chunks`` table (its dictionary strings cast to plain)."""
    import duckdb

    connection = duckdb.connect()
    connection.register("t", table.cast(pa.schema([("s", pa.string()), ("g", pa.int64()), ("v", pa.int64())])))
    return connection.sql(KEYED_SQL).to_arrow_table()
