"""A catalog becomes sqlglot's schema once, not once per planned query (issue 29: planning is a first run's cost).

``qualify`` made a ``MappingSchema`` of the whole catalog for every query it was given a mapping for:
2.7 ms of the ~50 ms of CPU planning a TPC-DS text takes (24 tables). The schema is now made once per
catalog (by its schemas' identities) and dialect; answers and errors are unchanged.
"""

from __future__ import annotations

import pyarrow as pa
import pytest


def test_a_catalog_is_made_a_sqlglot_schema_once_and_a_new_catalog_again(monkeypatch):
    from gpu_engine.sql import rewrite
    from gpu_engine.sql.errors import SqlError

    from sqlglot.schema import MappingSchema

    made = []
    init = MappingSchema.__init__

    def counted(self, schema=None, *args, **kwargs):
        if schema:  # the catalog's (sqlglot's simplifier makes empty ones)
            made.append(1)
        init(self, schema, *args, **kwargs)

    monkeypatch.setattr(MappingSchema, "__init__", counted)  # every sqlglot schema of tables made while planning
    monkeypatch.setattr(rewrite, "_QUALIFY_SCHEMAS", {}, raising=False)
    catalog = {"t": pa.schema([("a", pa.int64()), ("b", pa.string())]), "u": pa.schema([("a", pa.int64())])}
    texts = ["SELECT a FROM t", "SELECT t.b, u.a AS x FROM t JOIN u ON t.a = u.a", "SELECT A, count(*) FROM T GROUP BY A"]
    trees = [rewrite.parse_and_qualify(text, catalog).sql(dialect="duckdb") for text in texts]
    assert len(made) == 1
    assert trees[1] == 'SELECT t.b AS b, u.a AS x FROM t AS t JOIN u AS u ON t.a = u.a'
    with pytest.raises(SqlError, match="zz"):  # unknown columns are still named
        rewrite.parse_and_qualify("SELECT zz FROM t", catalog)
    assert len(made) == 1
    wider = dict(catalog, v=pa.schema([("c", pa.int64())]))  # another catalog: a schema of its own
    assert rewrite.parse_and_qualify("SELECT c FROM v", wider).sql(dialect="duckdb") == "SELECT v.c AS c FROM v AS v"
    with pytest.raises(SqlError, match="v"):
        rewrite.parse_and_qualify("SELECT c FROM v", catalog)
    assert len(made) == 2
