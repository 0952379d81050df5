"""Session.register refuses bad sources naming the table and file, and accepts dicts, pandas and Polars frames.

Each case here was a wrong result or an internal traceback before (issue 13):
a directory whose files disagree on a column's type was read with the first
file's schema (``sum(a)`` 6 instead of 6.75), a non-Parquet file or one
rewritten after ``register`` surfaced raw pyarrow errors, duplicate column
names a ``KeyError``, a dict a pathlib ``TypeError``, and an unsupported
column type anywhere in a file blocked the whole table.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.errors import DataSourceError, PlanError
from gpu_engine.plans import PlanBuilder


def _sum_of_a(session: Session, table: str = "t") -> pa.Table:
    plan = PlanBuilder(session.catalog).table_scan(table, ["a"]).aggregation([], ["sum(a) AS s", "count(*) AS n"])
    return session.execute(plan.plan())


def test_directory_with_files_of_other_column_types_is_refused_naming_the_file(tmp_path):
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int64())}), tmp_path / "part-0.parquet")
    pq.write_table(pa.table({"a": pa.array([1.25, 2.5], pa.float64())}), tmp_path / "part-1.parquet")
    with pytest.raises(DataSourceError, match=r"table 't'.*part-1\.parquet.*column 'a' is double, expected int64"):
        Session(device="cpu").register("t", tmp_path)


def test_directory_with_files_of_other_columns_is_refused(tmp_path):
    pq.write_table(pa.table({"a": [1], "b": [2]}), tmp_path / "part-0.parquet")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "part-1.parquet")
    with pytest.raises(DataSourceError, match=r"part-1\.parquet.*columns are a, expected a, b"):
        Session(device="cpu").register("t", tmp_path)


def test_directory_of_agreeing_files_reads_every_file(device_name, tmp_path):
    pq.write_table(pa.table({"a": pa.array([1.0, 2.0])}), tmp_path / "part-0.parquet")
    pq.write_table(pa.table({"a": pa.array([1.25, 2.5])}), tmp_path / "part-1.parquet")
    session = Session(device=device_name)
    session.register("t", tmp_path)
    expected = duckdb_table(duckdb.connect(), f"SELECT sum(a) AS s, count(*) AS n FROM '{tmp_path}/*.parquet'")
    assert_same_rows(_sum_of_a(session), expected)


@pytest.mark.parametrize("content", [b"not parquet at all", b"PAR1" + b"\0" * 64], ids=["text", "corrupt"])
def test_non_parquet_file_is_refused_naming_table_and_file(tmp_path, content):
    path = tmp_path / "bad.parquet"
    path.write_bytes(content)
    with pytest.raises(DataSourceError, match=r"table 't': cannot read .*bad\.parquet as Parquet"):
        Session(device="cpu").register("t", path)


def test_corrupt_file_inside_a_directory_is_refused_naming_it(tmp_path):
    pq.write_table(pa.table({"a": [1]}), tmp_path / "part-0.parquet")
    (tmp_path / "part-1.parquet").write_bytes(b"garbage")
    with pytest.raises(DataSourceError, match=r"table 't': cannot read .*part-1\.parquet as Parquet"):
        Session(device="cpu").register("t", tmp_path)


def test_file_rewritten_with_other_types_after_register_fails_the_query_naming_it(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int64())}), path)
    session = Session(device="cpu")
    session.register("t", path)
    pq.write_table(pa.table({"a": pa.array(["x", "y"])}), path)
    with pytest.raises(DataSourceError, match=r"t\.parquet changed since the table was registered: column 'a' is "
                                              r"string, was int64; register the table again"):
        _sum_of_a(session)
    path.unlink()
    with pytest.raises(FileNotFoundError, match=r"table 't': file .*t\.parquet no longer exists"):
        _sum_of_a(session)


def test_file_rewritten_with_the_same_types_reads_the_new_rows(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int64())}), path)
    session = Session(device="cpu")
    session.register("t", path)
    pq.write_table(pa.table({"a": pa.array([5, 6, 7], pa.int64())}), path)
    assert _sum_of_a(session).to_pylist() == [{"s": 18, "n": 3}]


def test_duplicate_column_names_are_refused(tmp_path):
    table = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(DataSourceError, match=r"table 't': the table has two columns named 'a'"):
        Session(device="cpu").register("t", table)
    pq.write_table(table, tmp_path / "dup.parquet")
    with pytest.raises(DataSourceError, match=r"dup\.parquet has two columns named 'a'"):
        Session(device="cpu").register("t", tmp_path / "dup.parquet")


def test_a_file_without_columns_is_refused_naming_it(tmp_path):
    """A Parquet file of no columns registered, then every query over it failed while planning with a request to
    report a bug (found by the file fuzz); DuckDB refuses the file ("Need at least one non-root column")."""
    pq.write_table(pa.table({}), tmp_path / "none.parquet")
    with pytest.raises(duckdb.Error):
        duckdb.sql(f"SELECT * FROM '{tmp_path / 'none.parquet'}'").fetchall()
    with pytest.raises(DataSourceError, match=r"table 't': .*none\.parquet has no columns"):
        Session(device="cpu").register("t", tmp_path / "none.parquet")


@pytest.mark.parametrize("name", ["", "   ", None])
def test_empty_table_name_is_refused(name):
    with pytest.raises(ValueError, match="a table name must be a non-empty string"):
        Session(device="cpu").register(name, pa.table({"a": [1]}))


def test_unknown_source_kind_says_what_is_accepted():
    with pytest.raises(TypeError, match=r"cannot register a builtins.int as table 't'; accepted: a Parquet file"):
        Session(device="cpu").register("t", 42)


def _frames() -> dict[str, object]:
    columns = {"a": [1, 2, None, 4], "b": ["x", "y", "x", None]}
    pandas = pytest.importorskip("pandas")
    polars = pytest.importorskip("polars")
    return {"dict": columns, "pandas": pandas.DataFrame(columns), "polars": polars.DataFrame(columns),
            "record_batch": pa.record_batch(columns)}


@pytest.mark.parametrize("kind", ["dict", "pandas", "polars", "record_batch"])
def test_in_memory_frames_register_through_arrow(device_name, kind):
    session = Session(device=device_name)
    session.register("t", _frames()[kind])
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation(["b"], ["sum(a) AS s", "count(*) AS n"]).plan()
    reference = pa.table({"a": pa.array([1, 2, None, 4], pa.int64()), "b": ["x", "y", "x", None]})
    connection = duckdb.connect()
    connection.register("reference", reference)
    expected = duckdb_table(connection, "SELECT b, sum(a) AS s, count(*) AS n FROM reference GROUP BY b")
    assert_same_rows(session.execute(plan), expected)


def test_dict_of_unequal_columns_is_refused_naming_the_table():
    with pytest.raises(DataSourceError, match=r"table 't': cannot make Arrow columns of the dict"):
        Session(device="cpu").register("t", {"a": [1, 2], "b": [1]})


def _table_with_unsupported_columns() -> pa.Table:
    return pa.table({
        "a": pa.array([1, 2, 3], pa.int64()),
        "l": pa.array([[1], [], [2, 3]], pa.list_(pa.int64())),
        "s": pa.array([{"x": 1}, {"x": 2}, None], pa.struct([("x", pa.int64())])),
        "d": pa.array([1, 2, 3], pa.duration("s")),
        "bin": pa.array([b"a", b"b", None], pa.binary()),
    })


@pytest.mark.parametrize("from_file", [False, True], ids=["arrow", "parquet"])
def test_unsupported_column_types_register_and_fail_only_when_read(device_name, tmp_path, from_file):
    table = _table_with_unsupported_columns()
    source = table
    if from_file:
        source = tmp_path / "t.parquet"
        pq.write_table(table, source)
    session = Session(device=device_name)
    session.register("t", source)
    connection = duckdb.connect()
    connection.register("source", table)
    expected = duckdb_table(connection, "SELECT sum(a) AS s, count(*) AS n FROM source")
    assert_same_rows(_sum_of_a(session), expected)
    session.cache("t")  # caching skips the columns no plan can read
    assert_same_rows(_sum_of_a(session), expected)
    for column in ("l", "s", "d", "bin"):
        with pytest.raises(PlanError, match=rf"unsupported column type .*\(in TableScan\[0\], at '{column}'\)"):
            PlanBuilder(session.catalog).table_scan("t", ["a", column])
