"""Compare engine results with DuckDB's, as Velox's ``assertQuery`` does.

``assert_same_rows(engine_table, duckdb_table, ordered=False)`` checks column
names, row count and values: rows as a multiset (or in order, for queries with
ORDER BY); floats within a relative tolerance; integers, decimals, strings,
dates and booleans exactly. A decimal compared with a float is compared as
floats, so an engine may return ``double`` where DuckDB returns a decimal
(``avg``) or the reverse; any other kind mismatch (a string against a number)
fails.

``duckdb_connection(tables)`` opens an in-memory DuckDB with one view per
Parquet file, so DuckDB reads the very files the engine reads;
``duckdb_with_tables(tables)`` and ``session_with_tables(tables, ...)`` register
the same in-memory tables in DuckDB and in an engine ``Session``, and
``assert_queries_match_duckdb`` runs a list of queries on both.
"""

from __future__ import annotations

import decimal
import math
from pathlib import Path
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.types as pat

__all__ = [
    "FLOAT_RELATIVE_TOLERANCE",
    "assert_same_rows",
    "rows_mismatch",
    "duckdb_connection",
    "duckdb_table",
    "duckdb_table_over",
    "duckdb_with_tables",
    "session_with_tables",
    "optimized_sql_plan",
    "queries_differing_from_duckdb",
    "assert_queries_match_duckdb",
    "schemas_differ",
]

FLOAT_RELATIVE_TOLERANCE = 1e-9
# Sums of floats that cancel to (almost) zero have no meaningful relative error.
FLOAT_ABSOLUTE_TOLERANCE = 1e-12
_SHOWN_ROWS = 5


def _kind(dtype: pa.DataType) -> str:
    if pat.is_dictionary(dtype):
        return _kind(dtype.value_type)
    if pat.is_floating(dtype):
        return "float"
    if pat.is_decimal(dtype) or pat.is_integer(dtype):
        return "exact-number"
    if pat.is_string(dtype) or pat.is_large_string(dtype) or getattr(pat, "is_string_view", lambda t: False)(dtype):
        return "string"
    if pat.is_boolean(dtype):
        return "bool"
    if pat.is_date(dtype):
        return "date"
    if pat.is_timestamp(dtype):
        return "timestamp"
    if pat.is_null(dtype):
        return "null"
    return str(dtype)


def _column_kinds(actual: pa.Schema, expected: pa.Schema) -> list[str]:
    """Return how to compare each column, or raise when the two types cannot hold the same values."""
    kinds = []
    for actual_field, expected_field in zip(actual, expected):
        a, e = _kind(actual_field.type), _kind(expected_field.type)
        if "null" in (a, e):
            kinds.append(e if a == "null" else a)
        elif a == e:
            kinds.append(a)
        elif {a, e} == {"float", "exact-number"}:
            kinds.append("float")
        else:
            raise AssertionError(
                f"column {expected_field.name!r}: engine type {actual_field.type} cannot match "
                f"DuckDB type {expected_field.type}"
            )
    return kinds


def _as_float(value: Any) -> float:
    return float(value)


def _sort_key(row: tuple, kinds: list[str]) -> tuple:
    # Exact columns first, so that rows equal in every exact column are the only
    # ones whose relative order can depend on float rounding.
    order = [i for i, k in enumerate(kinds) if k != "float"] + [i for i, k in enumerate(kinds) if k == "float"]
    key = []
    for i in order:
        value = row[i]
        if value is None:
            key.append((0, 0))
        elif kinds[i] == "float":
            number = _as_float(value)
            key.append((2, 0.0) if math.isnan(number) else (1, number))
        else:
            key.append((1, value))
    return tuple(key)


def _values_equal(actual: Any, expected: Any, kind: str, rel_tol: float) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    if kind == "float":
        a, e = _as_float(actual), _as_float(expected)
        if math.isnan(a) or math.isnan(e):
            return math.isnan(a) and math.isnan(e)
        return math.isclose(a, e, rel_tol=rel_tol, abs_tol=FLOAT_ABSOLUTE_TOLERANCE)
    if kind == "exact-number":
        return decimal.Decimal(actual) == decimal.Decimal(expected)
    return actual == expected


def _rows(table: pa.Table) -> list[tuple]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*columns)) if columns else [() for _ in range(table.num_rows)]


def rows_mismatch(
    engine_table: pa.Table,
    duckdb_table: pa.Table,
    ordered: bool | tuple[str, ...] = False,
    rel_tol: float = FLOAT_RELATIVE_TOLERANCE,
) -> str | None:
    """Return why two tables differ (names, row count, first differing rows), or None when they match.

    ``ordered``: False compares multisets of rows, True row for row; a tuple of
    ORDER BY columns (:func:`gpu_engine.sql.ordering.order_key_columns`)
    compares multisets and then those columns row for row, so rows that tie on
    every key may come in any order, as SQL allows.
    """
    if isinstance(ordered, tuple):
        from gpu_engine.sql.ordering import mismatch_in_key_order

        return mismatch_in_key_order(lambda a, b, in_order: rows_mismatch(a, b, in_order, rel_tol),
                                     engine_table, duckdb_table, ordered)
    actual_names, expected_names = engine_table.column_names, duckdb_table.column_names
    if actual_names != expected_names:
        return f"column names differ: engine {actual_names}, DuckDB {expected_names}"
    if engine_table.num_rows != duckdb_table.num_rows:
        return f"row counts differ: engine {engine_table.num_rows}, DuckDB {duckdb_table.num_rows}"
    try:
        kinds = _column_kinds(engine_table.schema, duckdb_table.schema)
    except AssertionError as error:
        return str(error)
    actual_rows, expected_rows = _rows(engine_table), _rows(duckdb_table)
    if not ordered:
        actual_rows.sort(key=lambda row: _sort_key(row, kinds))
        expected_rows.sort(key=lambda row: _sort_key(row, kinds))
    differing = []
    for index, (actual, expected) in enumerate(zip(actual_rows, expected_rows)):
        if not all(_values_equal(a, e, k, rel_tol) for a, e, k in zip(actual, expected, kinds)):
            differing.append((index, actual, expected))
    if not differing:
        return None
    how = "in order" if ordered else "after sorting both sides"
    lines = [f"{len(differing)} of {len(expected_rows)} rows differ ({how}); columns {expected_names}"]
    for index, actual, expected in differing[:_SHOWN_ROWS]:
        lines.append(f"  row {index}: engine {actual}")
        lines.append(f"  row {index}: DuckDB {expected}")
    return "\n".join(lines)


def assert_same_rows(
    engine_table: pa.Table,
    duckdb_table: pa.Table,
    ordered: bool = False,
    rel_tol: float = FLOAT_RELATIVE_TOLERANCE,
) -> None:
    """Assert the engine's result holds DuckDB's rows (in the same order when ``ordered``)."""
    problem = rows_mismatch(engine_table, duckdb_table, ordered=ordered, rel_tol=rel_tol)
    if problem is not None:
        raise AssertionError(problem)


#: DuckDB's zone for every reference connection: the engine's session zone is UTC (``Session.sql`` runs only
#: ``SET TimeZone = 'UTC'``), while DuckDB takes the machine's (``Etc/UTC`` here, whose name ``%Z`` prints; another
#: zone elsewhere, which would shift every TIMESTAMPTZ's fields).
REFERENCE_TIME_ZONE = "UTC"


def _connect():
    """Return a new in-memory DuckDB connection in :data:`REFERENCE_TIME_ZONE`."""
    import duckdb

    connection = duckdb.connect()
    connection.execute(f"SET TimeZone = '{REFERENCE_TIME_ZONE}'")
    return connection


def duckdb_connection(tables: Mapping[str, str | Path] | str | Path, threads: int | None = None):
    """Open an in-memory DuckDB with a ``read_parquet`` view per table.

    Parameters
    ----------
    tables
        Table name -> Parquet file (or folder of files), or a folder whose
        ``<name>.parquet`` files each become a view ``<name>``.
    threads
        DuckDB's thread count; its default (all cores) when None.
    """
    if isinstance(tables, (str, Path)):
        folder = Path(tables)
        tables = {path.stem: path for path in sorted(folder.glob("*.parquet"))}
        if not tables:
            raise FileNotFoundError(f"no .parquet file in {folder}")
    connection = _connect()
    if threads is not None:
        connection.execute(f"SET threads = {int(threads)}")
    for name, path in tables.items():
        location = Path(path)
        pattern = str(location / "*.parquet") if location.is_dir() else str(location)
        escaped = pattern.replace("'", "''")
        connection.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{escaped}')")
    return connection


def duckdb_table(connection, sql: str) -> pa.Table:
    """Run ``sql`` on ``connection`` and return its result as a ``pyarrow.Table`` (DuckDB 1.x and 2.x)."""
    relation = connection.sql(sql)
    for method in ("to_arrow_table", "fetch_arrow_table"):
        if hasattr(relation, method):
            return getattr(relation, method)()
    result = relation.arrow()
    return result.read_all() if isinstance(result, pa.RecordBatchReader) else result


#: This process's one DuckDB connection for :func:`duckdb_table_over` (made at first use).
_SHARED_CONNECTION: list = []


def duckdb_table_over(tables: Mapping[str, Any], sql: str) -> pa.Table:
    """Run ``sql`` over in-memory ``tables`` (registered under their names for this query only) and return its result.

    Why: ``duckdb.connect()`` costs ~16 ms of CPU, more than a small reference query; tests that check each case
    with a query of its own (the operator suite's) share one connection per process instead.
    """
    if not _SHARED_CONNECTION:
        _SHARED_CONNECTION.append(_connect())
    connection = _SHARED_CONNECTION[0]
    for name, table in tables.items():
        connection.register(name, table)
    try:
        return duckdb_table(connection, sql)
    finally:
        for name in tables:
            connection.unregister(name)


def duckdb_rows(sql: str, **tables) -> pa.Table:
    """Run reference SQL in DuckDB over the given Arrow tables, named by keyword (``duckdb_rows(sql, t=table)``).

    Why here and not in a conftest: every test folder has a ``conftest.py``, and ``from conftest import`` binds
    whichever of them one pytest call imported first, so a test importing a helper from one broke when another
    folder ran in the same call.
    """
    return duckdb_table_over(tables, sql)


def duckdb_with_tables(tables: Mapping[str, Any]):
    """Open an in-memory DuckDB with each in-memory table (``pyarrow.Table`` …) registered under its name.

    Why: a test registers the same tables here and in an engine session (:func:`session_with_tables`), so both
    answer over the very same rows. The connection is a context manager: ``with duckdb_with_tables(T) as c``.
    """
    connection = _connect()
    for name, table in tables.items():
        connection.register(name, table)
    return connection


def session_with_tables(tables: Mapping[str, Any], split_rows: int | None = None, splits: int | None = None,
                        **options):
    """Open an engine ``Session(**options)`` with each table registered under its name.

    ``split_rows`` cuts each in-memory table into splits of that many rows, ``splits`` into about that many
    splits (at least a row each): several splits feed several drivers.
    """
    from gpu_engine import Session

    session = Session(**options)
    for name, table in tables.items():
        rows = split_rows if splits is None else max(1, table.num_rows // splits)
        session.register(name, table, split_rows=rows)
    return session


def optimized_sql_plan(session, text: str):
    """Return the plan ``session`` runs for the SQL ``text``: the SQL planner's, through the optimizer's rules with
    the session's statistics. Why tests of join order read this one: the SQL planner joins FROM items as written
    and the optimizer's join order (:mod:`gpu_engine.optimizer.join_order`) orders them."""
    from gpu_engine.optimizer import optimize_plan

    return optimize_plan(session.sql_plan(text), session.statistics())


def schemas_differ(sql: str, actual: pa.Table, expected: pa.Table) -> str | None:
    """Say how the engine's schema (names, types, nullability) differs from DuckDB's, or return None."""
    if list(actual.schema) != list(expected.schema):
        return f"schema {actual.schema} != DuckDB's {expected.schema}"
    return None


def queries_differing_from_duckdb(session, connection, queries, ordered=lambda sql: False,
                                  exact_types: bool = False,
                                  check: Callable[[str, pa.Table, pa.Table], str | None] | None = None) -> list[str]:
    """Run each query on the engine ``session`` and on DuckDB's ``connection``; return how each differs.

    Why one report for all: a test over a list of queries shows every query that differs, not the first.
    ``ordered(sql)`` says whether to compare a query's rows in order; ``exact_types`` also compares column
    types exactly (DuckDB's ``"NULL"`` type, a column of bare NULLs, counting as the engine's INTEGER);
    ``check(sql, actual, expected)``, run once the rows match, returns a further difference or None
    (:func:`schemas_differ`; rows already compare column names).
    """
    problems = []
    for sql in queries:
        expected = duckdb_table(connection, sql)
        try:
            actual = session.sql(sql)
        except Exception as error:  # every query's failure is reported, not just the first
            problems.append(f"{sql}\n  raised {type(error).__name__}: {error}")
            continue
        problem = rows_mismatch(actual, expected, ordered=ordered(sql))
        if problem is None and exact_types:
            for got, want in zip(actual.schema, expected.schema):
                wanted = pa.int32() if pat.is_null(want.type) else want.type
                if got.type != wanted:
                    problem = f"column {got.name} is {got.type}, DuckDB's {want.type}"
        if problem is None and check is not None:
            problem = check(sql, actual, expected)
        if problem is not None:
            problems.append(f"{sql}\n  {problem}")
    return problems


def assert_queries_match_duckdb(session, connection, queries, **options) -> None:
    """Fail naming every query of ``queries`` whose answer on ``session`` differs from DuckDB's on ``connection``.

    ``options`` are :func:`queries_differing_from_duckdb`'s (``ordered``, ``exact_types``, ``check``).
    """
    problems = queries_differing_from_duckdb(session, connection, queries, **options)
    assert not problems, f"{len(problems)} of {len(queries)} queries differ from DuckDB:\n" + "\n".join(problems)


def assert_built_plans_match_duckdb(session, tables: Mapping[str, Any], plans: Mapping[str, tuple], names,
                                    json_round_trip: bool) -> None:
    """Assert each named ``(plan, sql)`` of ``plans`` answers on ``session`` as DuckDB answers ``sql`` over
    ``tables``; with ``json_round_trip`` the plan read back from its JSON form too (a hand-built plan's JSON must
    carry all it holds, subqueries included)."""
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json

    with duckdb_with_tables(tables) as reference:
        for name in names:
            plan, sql = plans[name]
            expected = duckdb_table(reference, sql)
            assert_same_rows(session.execute(plan), expected)
            if json_round_trip:
                assert_same_rows(session.execute(plan_from_json(plan_to_json(plan))), expected)
