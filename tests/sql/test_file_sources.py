"""``FROM 'x.parquet'``, ``FROM 'dir/*.parquet'`` and ``read_parquet(...)`` / ``parquet_scan(...)`` in SQL text read
the files, as DuckDB does (gpu_engine.sql.file_sources); they were refused "unknown table" (fuzz round 11). The same
text runs on DuckDB over the same tiny files (relative paths: both read them from tmp_path)."""

from __future__ import annotations

import os

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_queries_match_duckdb

from gpu_engine import Session
from gpu_engine.sql import SqlError, plan_sql


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    pq.write_table(pa.table({"a": pa.array([1, 2, 3, None], pa.int32()), "s": ["x", "y", None, "w"]}), "d/x.parquet")
    pq.write_table(pa.table({"a": pa.array([4, 5], pa.int32()), "s": ["p", "q"]}), "d/y.parquet")
    pq.write_table(pa.table({"a": pa.array([1, 4, 9], pa.int32()), "b": [10.5, 20.5, None]}), "k.parquet")
    return tmp_path


QUERIES = [
    "SELECT a, s FROM 'd/x.parquet'",
    "SELECT x.a, x.s FROM 'd/x.parquet' WHERE a > 1",  # DuckDB's alias: the file's stem
    "SELECT t.a, t.u FROM 'd/x.parquet' AS t(a, u)",  # an alias with column names
    "SELECT r.a, k.b FROM read_parquet('d/x.parquet') AS r JOIN 'k.parquet' AS k ON r.a = k.a",
    "SELECT read_parquet.s FROM read_parquet('d/y.parquet')",
    "SELECT count(*) AS n, min(a) AS lo, max(s) AS hi FROM 'd/*.parquet'",
    "SELECT a, s FROM read_parquet(['d/x.parquet', 'd/y.parquet']) WHERE s <> 'y'",
    "SELECT count(a) AS n FROM parquet_scan('d/*.parquet')",
    "SELECT a FROM 'd/x.parquet' UNION ALL SELECT a FROM 'k.parquet'",
    "WITH w AS (SELECT a FROM 'd/*.parquet') SELECT w.a, k.b FROM w LEFT JOIN 'k.parquet' AS k USING (a)",
]


def test_files_named_in_sql_match_duckdb(files, device_name):
    session = Session(device=device_name, compile_mode="lowest")
    connection = duckdb.connect()
    assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[3:6])


def test_an_alias_renames_a_registered_tables_columns(files):
    """``FROM t AS a(x, y)`` over a registered table too (the planner read the stored names: "column t.u is not
    available here"); more names than columns are refused."""
    session = Session(device="cpu", compile_mode="lowest")
    connection = duckdb.connect()
    for name in ("k", "x"):
        session.register(name, f"{name}.parquet" if name == "k" else "d/x.parquet")
        connection.execute(f"CREATE VIEW {name} AS SELECT * FROM '{name}.parquet'" if name == "k" else
                           "CREATE VIEW x AS SELECT * FROM 'd/x.parquet'")
    assert_queries_match_duckdb(session, connection, [
        "SELECT t.u, t.b FROM k AS t(u) WHERE u > 1",
        "SELECT * FROM k AS t(u, v)",
        "SELECT p.u, q.s FROM k AS p(u) JOIN x AS q(v) ON p.u = q.v",
    ])
    with pytest.raises(SqlError, match="table 'k' has 2 columns but the alias 't' names 3"):
        session.sql("SELECT * FROM k AS t(a, b, c)")


def test_views_and_tables_over_files(files):
    session = Session(device="cpu", compile_mode="lowest")
    session.sql("CREATE VIEW v AS SELECT a FROM 'k.parquet' WHERE a > 1")
    assert session.sql("SELECT sum(a) AS t FROM v").column("t").to_pylist() == [13]
    session.sql("CREATE TABLE c AS SELECT a FROM 'd/*.parquet' WHERE a IS NOT NULL")
    assert session.sql("SELECT count(*) AS n FROM c").column("n").to_pylist() == [5]


def test_a_directory_reads_its_parquet_files(files):
    session = Session(device="cpu", compile_mode="lowest")
    assert session.sql("SELECT count(*) AS n FROM 'd/'").column("n").to_pylist() == [6]
    assert session.sql("SELECT count(*) AS n FROM read_parquet('d')").column("n").to_pylist() == [6]


def test_a_rewritten_file_is_read_again(files):
    """A text planned over a file is planned again (plan_cache) after the file is rewritten or a glob matches more."""
    session = Session(device="cpu", compile_mode="lowest")
    text = "SELECT sum(a) AS t FROM 'k.parquet'"
    assert session.sql(text).column("t").to_pylist() == [14]
    assert session.sql(text).column("t").to_pylist() == [14]  # the table kept: the plan is kept
    hits = session.plan_cache.hits
    assert hits >= 1
    pq.write_table(pa.table({"a": pa.array([100, 200], pa.int32()), "b": [1.0, 2.0]}), "k.parquet")
    os.utime("k.parquet", ns=(1, 1))  # another version even where the clock's step is coarse
    assert session.sql(text).column("t").to_pylist() == [300]
    glob_text = "SELECT count(*) AS n FROM 'd/*.parquet'"
    assert session.sql(glob_text).column("n").to_pylist() == [6]
    pq.write_table(pa.table({"a": pa.array([7], pa.int32()), "s": ["z"]}), "d/z.parquet")
    assert session.sql(glob_text).column("n").to_pylist() == [7]


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM 'missing.parquet'", r"cannot read file source 'missing.parquet': .*missing.parquet"),
    ("SELECT * FROM 'none/*.parquet'", r"no file matches the glob 'none/\*.parquet'"),
    ("SELECT * FROM read_parquet('d/*.parquet', hive_partitioning = true)", r"option 'hive_partitioning'"),
    ("SELECT * FROM read_parquet(['d/x.parquet'], union_by_name = true)", r"option 'union_by_name'"),
    ("SELECT * FROM read_csv('k.csv')", r"read_csv\(\.\.\.\) in FROM: only Parquet .*read_parquet"),
    ("SELECT * FROM 'not_parquet.parquet'", r"cannot read file source 'not_parquet.parquet': .*Parquet"),
    ("SELECT * FROM read_parquet(1)", r"the path must be a string literal"),
])
def test_bad_file_sources_are_refused_with_the_path_and_position(files, sql, message):
    (files / "not_parquet.parquet").write_text("a,b\n1,2\n")
    session = Session(device="cpu")
    with pytest.raises(SqlError, match=message) as error:
        session.sql("\n" + sql)
    assert error.value.line == 2 and error.value.column_number == 15


def test_plan_sql_without_a_session_says_so(files):
    with pytest.raises(SqlError, match="Session.sql"):
        plan_sql("SELECT a FROM 'k.parquet'", {})


def test_the_hidden_tables_stay_out_of_what_users_list_and_explain_shows_the_path(files):
    """The table a file source registers is the engine's: ``Session.catalog`` and an unknown table's message list
    only what the user registered, and EXPLAIN (plan and analyze) prints the path as written, as DuckDB prints the
    file it scans, not the hidden name."""
    session = Session(device="cpu", compile_mode="lowest")
    session.register("k", "k.parquet")
    plan = session.sql_plan("SELECT a FROM 'd/*.parquet' JOIN read_parquet(['k.parquet']) AS r USING (a)")
    assert list(session.catalog) == ["k"]
    for text in (session.explain(plan), session.explain(plan, analyze=True)):
        assert "__file_" not in text
        assert "table: 'd/*.parquet'" in text and "table: 'k.parquet'" in text
    with pytest.raises(Exception, match=r"registered: k$"):
        session.table("nope")


def test_a_new_file_set_leaves_other_kept_plans_kept(files):
    """plan_cache keeps a plan while the tables it was planned over are the same objects; the hidden table of a new
    file set is not one of them for a text that does not name it (each new file set made every kept plan miss)."""
    session = Session(device="cpu", compile_mode="lowest")
    session.register("k", "k.parquet")
    texts = ["SELECT sum(a) AS t FROM k", "SELECT count(*) AS n FROM 'd/x.parquet'"]
    for text in texts:
        session.sql_plan(text)
    misses = session.plan_cache.misses
    session.sql_plan("SELECT count(*) AS n FROM 'd/y.parquet'")  # a new file set: one miss, its own
    for text in texts:
        session.sql_plan(text)
    assert session.plan_cache.misses == misses + 1
    pq.write_table(pa.table({"a": pa.array([8], pa.int32()), "s": ["r"]}), "d/y.parquet")
    os.utime("d/y.parquet", ns=(1, 1))
    connection = duckdb.connect()
    connection.execute("CREATE VIEW k AS SELECT * FROM 'k.parquet'")
    assert_queries_match_duckdb(session, connection, texts + ["SELECT count(*) AS n FROM 'd/y.parquet'"])
    assert session.plan_cache.misses == misses + 2  # only the text over the rewritten file planned again


def test_a_deleted_file_is_refused_naming_it(files):
    """A file deleted between two runs of a text: its kept plan is not run over a stale table (DuckDB fails too)."""
    session = Session(device="cpu", compile_mode="lowest")
    text = "SELECT count(*) AS n FROM 'k.parquet'"
    assert session.sql(text).column("n").to_pylist() == [3]
    os.remove("k.parquet")
    with pytest.raises(duckdb.IOException):
        duckdb.connect().execute(text)
    for _ in range(2):
        with pytest.raises(SqlError, match=r"cannot read file source 'k.parquet': .*k.parquet"):
            session.sql(text)
    pq.write_table(pa.table({"a": pa.array([1], pa.int32())}), "k.parquet")
    assert session.sql(text).column("n").to_pylist() == [1]


def test_many_file_sets_keep_a_bounded_number_of_tables(files, monkeypatch):
    """Each distinct file set registers a table; a session running ever new ones (a loop over a day's files) kept
    them all. The least recently used beyond FILE_TABLES are dropped, and read again when named again."""
    from gpu_engine.sql import file_sources

    monkeypatch.setattr(file_sources, "FILE_TABLES", 3)
    session = Session(device="cpu", compile_mode="lowest")
    for n in range(6):
        pq.write_table(pa.table({"a": pa.array([n] * (n + 1), pa.int32())}), f"f{n}.parquet")
        assert session.sql(f"SELECT sum(a) AS t FROM 'f{n}.parquet'").column("t").to_pylist() == [n * (n + 1)]
    assert len(session._tables) == 3
    text = "SELECT count(*) AS n FROM 'f0.parquet' JOIN 'f1.parquet' USING (a) JOIN 'f2.parquet' USING (a) " \
           "JOIN 'f3.parquet' USING (a)"  # more file sets than the bound in one text: none of them dropped
    assert session.sql(text).column("n").to_pylist() == [0]
    assert session.sql("SELECT sum(a) AS t FROM 'f0.parquet'").column("t").to_pylist() == [0]
