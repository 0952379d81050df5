"""A dictionary-encoded string column whose dictionary is empty (every row NULL) in comparisons and string_agg.

Why: such a column's codes index nothing, and two paths read its dictionary through them: the string comparison
kernel (``b < y``, ``b <> y``: ``gpu_engine/expressions/strings.compare_signs``) and the holistic aggregates'
decoding (``string_agg(b, ',')``: ``gpu_engine/aggregation/holistic._plain``). Both read one offset past the
dictionary's only one: out of bounds on a GPU (cuda-sim raised IndexError), unchecked on cpu. Found by fuzz round 4
(``bench/recent_construct_fuzz.py --device cuda-sim``, seeds 5004, 5006): ``NOT EXISTS (SELECT 1 FROM u WHERE
u.y <> t.b AND u.x < t.c)`` where every ``t.b`` is NULL — the distinct outer keys made such a column.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

ALL_NULL = pa.DictionaryArray.from_arrays(pa.array([None, None, None], pa.int32()), pa.array([], pa.string()))
T = pa.table({"b": ALL_NULL, "y": pa.array(["a", None, "zz"]), "i": pa.array([1, 2, 3], pa.int64())})

QUERIES = [
    "SELECT i, b < y AS lt, b = y AS eq, y >= b AS ge, b IS DISTINCT FROM y AS d FROM t",
    "SELECT string_agg(b, ',') AS s, count(b) AS n FROM t",
]

# the shape the fuzz found: the distinct outer rows (b all NULL) meet u in a nested loop join on <>; two equal rows,
# or the DISTINCT over one row, unique on c, is a projection (optimizer/unique_groupings.py) and makes no such column
OUTER = pa.table({"b": pa.array([None, None], pa.string()), "c": pa.array([0, 0], pa.int32())})
INNER = pa.table({"x": pa.array([None, 4, 1, None], pa.int64()), "y": pa.array(["b", "a", None, "x"])})
FOUND = "SELECT count(*) AS n FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.y <> t.b AND u.x < t.c)"


def test_an_all_null_dictionary_column_compares_and_aggregates_as_duckdb(device_name):
    with duckdb_with_tables({"t": T}) as connection:
        assert_queries_match_duckdb(session_with_tables({"t": T}, device=device_name), connection, QUERIES)


def test_a_semi_join_on_not_equal_with_every_outer_key_null(device_name):
    tables = {"t": OUTER, "u": INNER}
    with duckdb_with_tables(tables) as connection:
        assert_queries_match_duckdb(session_with_tables(tables, device=device_name, fuse=False), connection,
                                    [FOUND])


if __name__ == "__main__":
    pytest.main([__file__])
