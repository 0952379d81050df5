"""``uuid()`` / ``gen_random_uuid()``: a random version-4 UUID per row, each call its own draw, each value read the
same everywhere (issue 30 items 5-6).

Why properties, not DuckDB's values: no two engines draw the same UUIDs. What DuckDB defines is checked: the text
form (RFC 4122, lower-case hex, version 4, variant 10: DuckDB's ``uuid()::VARCHAR`` matches the same pattern),
one value per row (2,000 distinct of 2,000), two calls differ, a filter on a derived table's UUID column keeps
the rows it shows. Known difference: the engine has no UUID type, so the value is a VARCHAR (DuckDB's UUID type
prints the same text).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_table, duckdb_with_tables, session_with_tables

ROWS = 2000
T = pa.table({"k": pa.array([i % 7 if i % 11 else None for i in range(ROWS)], pa.int32())})
EMPTY = T.slice(0, 0)
PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"

#: query -> what its one row must hold (each a fact of uuid(), never a value).
PROPERTIES = {
    f"SELECT count(*) AS n, count(DISTINCT u) AS d, count(*) FILTER (WHERE regexp_matches(u, '{PATTERN}')) AS f "
    "FROM (SELECT uuid()::VARCHAR AS u FROM t) x": (ROWS, ROWS, ROWS),
    "SELECT count(*) FROM (SELECT uuid() AS a, gen_random_uuid() AS b FROM t) x WHERE a = b": (0,),
    "SELECT count(*) FROM (SELECT u FROM (SELECT uuid()::VARCHAR AS u FROM t) x WHERE u < '8') y WHERE u >= '8'": (0,),
    "SELECT count(*) FROM (SELECT uuid() AS u FROM e) x": (0,),
    f"SELECT count(*) FROM (SELECT uuid()::VARCHAR AS u FROM t) x WHERE NOT regexp_matches(u, '{PATTERN}')": (0,),
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "e": EMPTY}) as connection:
        yield connection


def _session(device_name):
    return session_with_tables({"t": T, "e": EMPTY}, device=device_name, drivers=2, batch_rows=300)


def test_duckdbs_own_uuids_hold_the_properties(reference):
    """The properties are DuckDB's: its own draws hold each of them."""
    for sql, expected in PROPERTIES.items():
        assert tuple(duckdb_table(reference, sql).to_pylist()[0].values()) == expected, sql


@pytest.mark.parametrize("sql", list(PROPERTIES))
def test_uuid_properties_on_cpu(sql):
    rows = [tuple(row.values()) for row in _session("cpu").sql(sql).to_pylist()]
    assert rows == [PROPERTIES[sql]]


def test_uuid_properties_on_each_device(device_name):
    session = _session(device_name)
    for sql in list(PROPERTIES)[1:2] + list(PROPERTIES)[-1:]:
        assert [tuple(row.values()) for row in session.sql(sql).to_pylist()] == [PROPERTIES[sql]], sql


def test_uuid_is_text_of_36_characters():
    table = _session("cpu").sql("SELECT uuid() AS u, gen_random_uuid() AS g FROM t LIMIT 3")
    assert table.schema.field("u").type == pa.string()
    assert all(len(value) == 36 for value in table.column("u").to_pylist() + table.column("g").to_pylist())
