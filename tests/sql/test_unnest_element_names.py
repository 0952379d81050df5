"""The element of ``FROM t, unnest([t.a, t.b]) u(x)`` by its names, against DuckDB (fuzz round 6's leftovers).

A list reading columns is planned by position (gpu_engine/sql/unnest_selects.py): each reference to the element is
replaced by the CASE picking it before qualify runs. So the rewrite itself refuses a bare ``x`` another FROM item
also has, as DuckDB does (it used to answer with the element), answers an ``x`` inside a subquery of that SELECT
(it was unknown; one the subquery's own FROM item has stays the subquery's), and DuckDB's name of an element without
a column alias, ``u.unnest`` / ``unnest`` (unknown before, here and for lists of constants and split lists). A bare
``ORDER BY x`` is the output ``x`` where the SELECT has one, as DuckDB resolves it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import PlanError

#: Each table's last row repeats its first: with ``t.n`` and ``d.a`` unique, the correlated subqueries' domains
#: and distinct sets over them were projections (optimizer/unique_groupings.py).
TABLES = {"t": pa.table({"n": pa.array([3, None, 0, 2, -1, 3], pa.int64()),
                         "s": pa.array(["a,b", "b", None, "", "c,,é,", "a,b"])}),
          "d": pa.table({"a": pa.array([3, 13, None, 12, 1, 3], pa.int64()),
                         "x": pa.array([1, 2, 3, None, 5, 1], pa.int64())})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    # DuckDB's name of an element without a column alias: u.unnest, unnest (and u as before)
    "SELECT n, u.unnest FROM t, unnest([t.n, 1, NULL]) u",
    "SELECT n, unnest, u FROM t, unnest([n * 2, n]) u WHERE unnest > 0",
    "SELECT u.unnest FROM unnest([1, 2]) u",
    "SELECT n, u.unnest FROM t, unnest(string_split(t.s, ',')) u ORDER BY n, u.unnest",
    "SELECT e.n, u.unnest FROM e, unnest([e.n, 2]) u",
    # the element inside a subquery of the SELECT (an outer reference), bare or qualified
    "SELECT n, x FROM t, unnest([n + 10, 3]) u(x) WHERE EXISTS (SELECT 1 FROM t d WHERE d.n + 10 = x)",
    "SELECT n, x FROM t, unnest([n + 10, n]) u(x) WHERE u.x IN (SELECT a FROM d WHERE a <> u.x + 100)",
    "SELECT n, x, (SELECT max(a) FROM d WHERE a > x) AS m FROM t, unnest([t.n + 10, 3]) u(x)",
    "SELECT n, unnest FROM t, unnest([n, 12]) u WHERE NOT EXISTS (SELECT 1 FROM d WHERE d.a = unnest)",
    # a bare x the subquery's own FROM item has is its own column, not the element
    "SELECT n, x FROM t, unnest([n, 2]) u(x) WHERE EXISTS (SELECT 1 FROM d WHERE d.a = x + 10)",
    # ORDER BY x names the output x (d.x here), as DuckDB resolves it, not the element
    "SELECT d.x, a FROM d, unnest([a, 1]) u(x) ORDER BY x DESC, a",
]


def test_unnest_elements_by_name_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", batch_rows=2)
    assert_queries_match_duckdb(session, reference, QUERIES, ordered=lambda sql: "ORDER BY" in sql, exact_types=True)


def test_unnest_elements_by_name_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name)
    assert_queries_match_duckdb(session, reference, [QUERIES[5]], exact_types=True)


@pytest.mark.parametrize("sql, holders", [
    ("SELECT n, x FROM t, unnest([n + 10]) u(x), (VALUES (1)) v(x)", ["u", "v"]),
    ("SELECT n, x FROM t, d, unnest([n + 10, a]) u(x) WHERE n > 0", ["u", "d"]),
    ("SELECT n FROM d, t, unnest([n, 1]) u(x) ORDER BY x", ["u", "d"]),
])
def test_a_bare_element_name_another_from_item_has_is_ambiguous(sql, holders, reference):
    with pytest.raises(Exception, match="(?i)ambiguous"):
        reference.sql(sql).fetchall()  # DuckDB refuses it too
    with pytest.raises(PlanError) as info:
        session_with_tables(TABLES, device="cpu").sql(sql)
    message = str(info.value)
    assert "column 'x' is ambiguous" in message and all(f"{h}.x" in message for h in holders), message
