"""Generate the h2oai db-benchmark groupby table (G1) and hold the ten groupby questions as SQL.

Why a port: the benchmark's data comes from an R script (``_data/groupby-datagen.R`` in h2oai/db-benchmark,
also kept as ``py-polars/tests/db-benchmark/groupby-datagen.R`` in pola-rs/polars); this module draws the
same columns from the same distributions with NumPy, so the project needs no R:

=======  ==========================================  ==================================================
column   R                                           here
=======  ==========================================  ==================================================
id1      ``sample(sprintf("id%03d", 1:K), N, TRUE)``  ``"id%03d"`` of a uniform integer in 1..K (string)
id2      the same, drawn again                       the same, drawn again
id3      ``sample(sprintf("id%010d", 1:(N/K)), …)``  ``"id%010d"`` of a uniform integer in 1..N/K
id4, id5 ``sample(K, N, TRUE)``                      uniform integers in 1..K (int32)
id6      ``sample(N/K, N, TRUE)``                    uniform integers in 1..N/K (int32)
v1       ``sample(5, N, TRUE)``                      uniform integers in 1..5 (int32)
v2       ``sample(15, N, TRUE)``                     uniform integers in 1..15 (int32)
v3       ``round(runif(N, max=100), 6)``             uniform in [0, 100), rounded to 6 decimals (double)
=======  ==========================================  ==================================================

What differs: the random generator (NumPy's PCG64 seeded with 108, where R's Mersenne Twister is seeded
with 108), so the values are not R's, only their distributions; the file is Parquet (R writes CSV, which
every solution then loads into memory with these types). The NA and sort options follow the R script: with
``nas`` percent, that share of each id column's distinct values becomes NA in every row holding it, and
that share of each value column's rows becomes NA; ``sort`` orders the rows by id1..id6.

The questions are the benchmark's groupby task as DuckDB's solution writes them, q6's median and q8 in
the window form (``row_number() OVER (PARTITION BY id6 ORDER BY v3 DESC) <= 2``; the list-valued
``max(v3, 2)`` form is not asked), q9 with ``corr`` squared.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["QUESTIONS", "SEED", "generate_groupby", "data_name", "data_dir", "ensure_groupby"]

#: R's ``set.seed(108)``: the same seed, another generator.
SEED = 108

#: The ten groupby questions (h2oai db-benchmark, DuckDB's SQL), over the table ``x``.
QUESTIONS = {
    "q1": "SELECT id1, sum(v1) AS v1 FROM x GROUP BY id1",
    "q2": "SELECT id1, id2, sum(v1) AS v1 FROM x GROUP BY id1, id2",
    "q3": "SELECT id3, sum(v1) AS v1, avg(v3) AS v3 FROM x GROUP BY id3",
    "q4": "SELECT id4, avg(v1) AS v1, avg(v2) AS v2, avg(v3) AS v3 FROM x GROUP BY id4",
    "q5": "SELECT id6, sum(v1) AS v1, sum(v2) AS v2, sum(v3) AS v3 FROM x GROUP BY id6",
    "q6": "SELECT id4, id5, median(v3) AS median_v3, stddev(v3) AS sd_v3 FROM x GROUP BY id4, id5",
    "q7": "SELECT id3, max(v1) - min(v2) AS range_v1_v2 FROM x GROUP BY id3",
    "q8": "SELECT id6, v3 AS largest2_v3 FROM (SELECT id6, v3, row_number() OVER (PARTITION BY id6 ORDER BY v3 DESC) "
          "AS order_v3 FROM x WHERE v3 IS NOT NULL) sub_query WHERE order_v3 <= 2",
    "q9": "SELECT id2, id4, power(corr(v1, v2), 2) AS r2 FROM x GROUP BY id2, id4",
    "q10": "SELECT id1, id2, id3, id4, id5, id6, sum(v3) AS v3, count(*) AS count FROM x "
           "GROUP BY id1, id2, id3, id4, id5, id6",
}


def _labels(form: str, count: int) -> pa.Array:
    return pa.array([form % i for i in range(1, count + 1)], pa.string())


def generate_groupby(rows: int, groups: int, nas: int = 0, sort: bool = False, seed: int = SEED) -> pa.Table:
    """Return the G1 table of ``rows`` rows and ``groups`` (K) groups, ``nas`` percent NA (see the module docstring)."""
    if rows < 1 or groups < 1:
        raise ValueError(f"rows and groups must be positive, got {rows} and {groups}")
    if not 0 <= nas <= 100:
        raise ValueError(f"nas is a percentage, 0..100, got {nas}")
    rng = np.random.default_rng(seed)
    small = max(1, rows // groups)  # N/K: R's 1:(N/K) truncates the same way

    def draw(high: int) -> np.ndarray:
        return rng.integers(1, high + 1, rows, dtype=np.int32)

    id1 = _labels("id%03d", groups).take(pa.array(draw(groups) - 1))
    id2 = _labels("id%03d", groups).take(pa.array(draw(groups) - 1))
    id3 = _labels("id%010d", small).take(pa.array(draw(small) - 1))
    columns = {"id1": id1, "id2": id2, "id3": id3, "id4": pa.array(draw(groups)), "id5": pa.array(draw(groups)),
               "id6": pa.array(draw(small)), "v1": pa.array(draw(5)), "v2": pa.array(draw(15)),
               "v3": pa.array(np.round(rng.uniform(0.0, 100.0, rows), 6))}
    if nas:
        for name in ("id1", "id2", "id3", "id4", "id5", "id6"):
            values = columns[name]
            distinct = values.unique()
            chosen = distinct.take(pa.array(rng.choice(len(distinct), int(len(distinct) * nas / 100), replace=False)))
            if len(chosen):
                hit = pc.is_in(values, value_set=chosen)
                columns[name] = pc.if_else(hit, pa.scalar(None, values.type), values)
        count = int(rows * nas / 100)
        for name in ("v1", "v2", "v3"):
            if count:
                mask = np.zeros(rows, dtype=bool)
                mask[rng.choice(rows, count, replace=False)] = True
                columns[name] = pc.if_else(pa.array(mask), pa.scalar(None, columns[name].type), columns[name])
    table = pa.table(columns)
    if sort:
        table = table.sort_by([(f"id{i}", "ascending") for i in range(1, 7)])
    return table


def _pretty(number: int) -> str:
    """Return R's ``pretty_sci``: ``1e6`` for 1000000, ``1e2`` for 100, ``5e6`` for 5000000."""
    text = f"{number:d}"
    stripped = text.rstrip("0")
    return f"{stripped}e{len(text) - len(stripped)}" if len(stripped) == 1 else text


def data_name(rows: int, groups: int, nas: int = 0, sort: bool = False) -> str:
    """Return the benchmark's name of a data set: ``G1_1e7_1e2_0_0``."""
    return f"G1_{_pretty(rows)}_{_pretty(groups)}_{nas}_{int(sort)}"


def data_dir(cache_dir: str | Path | None = None) -> Path:
    """Return the folder of the generated files: ``cache_dir``, else ``$GPU_ENGINE_DATA/dbbench``, else the cache."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    data = os.environ.get("GPU_ENGINE_DATA")
    if data:
        return Path(data).expanduser() / "dbbench"
    return Path.home() / ".cache" / "gpu_engine" / "dbbench"


def ensure_groupby(rows: int, groups: int, nas: int = 0, sort: bool = False, cache_dir: str | Path | None = None,
                   row_group_rows: int = 1 << 18) -> Path:
    """Write the G1 table's Parquet file unless it is there; return its path (written whole or not at all)."""
    path = data_dir(cache_dir) / f"{data_name(rows, groups, nas, sort)}.parquet"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(generate_groupby(rows, groups, nas, sort), temporary, row_group_size=row_group_rows)
    os.replace(temporary, path)
    return path
