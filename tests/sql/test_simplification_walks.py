"""simplify_keeping_arithmetic walks the simplified tree to put back held ELSEs only where it held one.

Most queries have no CASE without a typed ELSE, and that walk of the whole tree was a share of planning a new
text (issue 29). A query without one simplifies without the walk (replaced by one that raises: fails where it
still runs for every query); one with such a CASE still gets its ELSE back (the types themselves are tested in
test_folded_case_types.py).
"""

from __future__ import annotations

import sqlglot

import gpu_engine.sql.simplification as simplification
from gpu_engine.sql.connectives import simplify_bounded


def _simplified(text: str):
    return simplification.simplify_keeping_arithmetic(sqlglot.parse_one(text, read="duckdb"),
                                                      lambda tree: simplify_bounded(tree, "duckdb"))


def test_no_held_else_no_release_walk(monkeypatch):
    def refuse(tree):
        raise AssertionError("walked a tree without a held ELSE")

    monkeypatch.setattr(simplification, "_release_else", refuse)
    tree = _simplified("SELECT CASE WHEN a > 1 THEN b ELSE 0 END, a + 1 FROM t WHERE a = 1 + 1")
    assert tree.sql(dialect="duckdb") == "SELECT CASE WHEN a > 1 THEN b ELSE 0 END, a + 1 FROM t WHERE a = 1 + 1"


def test_a_held_else_comes_back_as_written():
    tree = _simplified("SELECT CASE WHEN a > 1 THEN b END, CASE WHEN a > 2 THEN c ELSE NULL END FROM t")
    assert tree.sql(dialect="duckdb") == "SELECT CASE WHEN a > 1 THEN b END, CASE WHEN a > 2 THEN c ELSE NULL END FROM t"
    assert not any(simplification._HELD_ELSE in node.meta for node in tree.walk())
