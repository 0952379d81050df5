"""The install asks for sqlglot's compiled build, and the planner's hooks into sqlglot suit it.

Why (issue 29): planning a new SQL text is most of what a first run pays beyond a warm one, and about half of
planning is sqlglot (parsing, qualifying, simplifying, its tree walks and copies). Its compiled build
(``sqlglotc``, mypyc) planned TPC-DS's 99 texts in ~30% less CPU with identical plans
(``bench/results/2026-11-28-planspeed3-compiled-sqlglot.md``). It refuses what the pure-Python build allowed:
an attribute set on a parser object and a Python subclass of its parser or simplifier. So the two-argument
aggregates' ``f(DISTINCT x, y)`` builders go into the dialect's parser class's own table, once
(:func:`gpu_engine.plans.sql_aggregates.distinct_pairs_parser`), and ``NOT NOT x`` folds over a boolean
``x`` typed by a walk before the simplifier runs (:mod:`gpu_engine.sql.connectives`); with the compiled
build installed, ``test_distinct_pair_aggregates.py`` and ``test_untyped_simplification.py`` run those paths
(each fails there with the hooks as they were).
"""

from __future__ import annotations

import re
from pathlib import Path

import sqlglot

from gpu_engine.plans.sql_aggregates import distinct_pairs_parser

ROOT = Path(__file__).resolve().parents[2]


def test_the_install_asks_for_sqlglots_compiled_build_at_sqlglots_version():
    dependencies = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^\s*"sqlglot\[c\][^"]*",', dependencies, re.MULTILINE), "pyproject.toml: sqlglot[c]"
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert pins.get("sqlglotc") == pins["sqlglot"], "constraints.txt pins sqlglotc at sqlglot's version"


def _layers(builder) -> int:
    """Return how many distinct-pair builders wrap sqlglot's own builder in ``builder``."""
    layers = 0
    while getattr(builder, "reads_distinct_pairs", False):
        layers += 1
        builder = builder.__closure__[builder.__code__.co_freevars.index("plain")].cell_contents
    return layers


def test_the_distinct_pair_builders_go_into_a_parser_table_once():
    dialect = sqlglot.Dialect.get_or_raise("duckdb")
    for _ in range(3):  # every parse asks again: the table must not grow a wrapper each time
        parser = distinct_pairs_parser(dialect)
    functions = dialect.parser_class.FUNCTIONS
    assert _layers(functions["CORR"]) == 1 and _layers(functions["COVAR_SAMP"]) == 1
    tree = parser.parse(dialect.tokenize("SELECT corr(DISTINCT y, x), corr(y, x) FROM t"), "")[0]
    pair, plain = tree.expressions
    assert isinstance(pair.this, sqlglot.exp.Distinct) and pair.expression.name == "x"
    assert plain.this.name == "y" and plain.expression.name == "x"
