"""Huge expressions answer: long AND/OR chains and long IN lists are planned linearly and never become giant kernels.

Issue 28 item 11 / issue 29 item 3: a 2000-term AND/OR chain or a 100k-value
IN list never answered (sqlglot's simplification compared every pair of a
chain's terms, every pass recursed once per term of a left-deep chain, and the
fused kernel of such a predicate compiled for minutes). Now chains are
balanced after parsing (:mod:`gpu_engine.plans.sql_connectives`), simplified
term by term (:mod:`gpu_engine.sql.connectives`), a generated kernel holds at
most :data:`~gpu_engine.codegen.kernel_bounds.MAX_KERNEL_NODES` expression
nodes (larger expressions run on the eager evaluator) and a long IN list is a
sorted-set lookup. The bounds are tested as counts (nodes per generated
kernel, kernels per query, kernels compiled), not seconds.
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables

T = pa.table({
    "a": pa.array([1, 2, 3, None, 5, 7, 11, 2000, -4, 0], pa.int64()),
    "q": pa.array([x if x is None else decimal.Decimal(x) for x in ("1.00", "2.50", "3.00", "17.00", None, "7.00", "0.10", "5.00",
                                                "2000.00", "-1.00")], pa.decimal128(15, 2)),
    "f": pa.array([1.0, float("nan"), 3.5, None, -0.0, 7.0, 11.0, 2.5, 1e300, 4.0], pa.float64()),
    "d": pa.array([0, 1, 2, 3, None, 5, 6, 7, 8, 9], pa.int32()).cast(pa.date32()),
    "g": pa.array(["x", "y", "x", "y", "x", "y", "x", "y", "x", None]),
})

TERMS = 1200  # more than MAX_EXPRESSION_DEPTH (500) levels if left deep, and far more nodes than a kernel holds


def _and_chain(terms: int) -> str:
    return " AND ".join(f"a <> {i * 7 + 3}" for i in range(terms))


def _or_chain(terms: int) -> str:
    return " OR ".join(f"q = {i}" for i in range(2, terms + 2))


QUERIES = {
    "and_chain": f"SELECT count(*) AS n, sum(a) AS s FROM t WHERE {_and_chain(TERMS)}",
    "or_chain": f"SELECT g, count(*) AS n FROM t WHERE {_or_chain(TERMS)} GROUP BY g",
    "mixed_chain": f"SELECT a FROM t WHERE ({_and_chain(TERMS // 2)}) OR ({_or_chain(TERMS // 2)}) OR a IS NULL",
    "chain_in_projection": f"SELECT a, ({_or_chain(TERMS)}) AS hit FROM t",
    "in_list_ints": "SELECT a FROM t WHERE a IN (" + ", ".join(str(i * 3 + 2) for i in range(5000)) + ")",
    "in_list_decimal_scale": "SELECT q FROM t WHERE q IN (" + ", ".join(f"{i / 10:.1f}" for i in range(3000)) + ")",
    "in_list_floats": "SELECT f FROM t WHERE f IN (" + ", ".join(f"{i / 2}" for i in range(3000)) + ", 1e300)",
    "not_in_list_with_null": "SELECT a FROM t WHERE a NOT IN (" + ", ".join(str(i) for i in range(10, 3000)) + ", NULL)",
    "in_list_of_decimals_against_ints": "SELECT a FROM t WHERE a IN (" + ", ".join(f"{i}.5" for i in range(3000)) + ", 7.0)",
    "string_or_chain": "SELECT g, count(*) AS n FROM t WHERE " + " OR ".join(f"g = 'x{i}'" for i in range(200))
                       + " OR g = 'y' GROUP BY g",
    "in_list_dates": "SELECT d FROM t WHERE d IN (" + ", ".join(f"DATE '1970-01-{i * 2 + 1:02d}'" for i in range(15)) + ")",
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


@pytest.fixture
def kernel_programs(monkeypatch):
    """Record every fusion program that passes the size bound: each is generated into a kernel."""
    from gpu_engine.codegen import compiled_predicate, compiled_projection, kernel_bounds
    from gpu_engine.planning import fusion

    generated: list[tuple] = []
    original = kernel_bounds.refuse_oversized

    def recording(program, aggregates=None):
        original(program, aggregates)  # raises for a program over the bound: it is never generated
        generated.append(((*program.predicates, *program.keys, *(e for group in program.arguments for e in group),
                           *program.outputs), kernel_bounds.kernel_node_counts(program, aggregates)))

    for module in (compiled_predicate, compiled_projection, fusion):
        monkeypatch.setattr(module, "refuse_oversized", recording)
    return generated


@pytest.mark.parametrize("name", list(QUERIES))
def test_huge_expressions_match_duckdb_with_bounded_kernels(name, device_name, reference, kernel_programs):
    from gpu_engine.codegen.kernel_bounds import MAX_KERNEL_NODES
    from gpu_engine.plans.nodes import walk_plan

    session = session_with_tables({"t": T}, device=device_name, drivers=2)
    sql = QUERIES[name]
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
    nodes = [n for _, counts in kernel_programs for n in counts]  # each kernel's (a split aggregation's several)
    assert all(n <= MAX_KERNEL_NODES for n in nodes), nodes
    # kernels per query: at most one program per plan node, however large the expressions
    assert len({repr(expressions) for expressions, _ in kernel_programs}) <= len(list(walk_plan(session.last_plan)))


def test_a_growing_chain_compiles_nothing_more(device_name):
    """The first chain pays for what the eager path needs; a chain four times as long compiles no kernel."""
    session = session_with_tables({"t": T}, device=device_name, drivers=2)
    session.sql(f"SELECT count(*) AS n FROM t WHERE {_and_chain(300)}")
    session.sql(f"SELECT count(*) AS n FROM t WHERE {_and_chain(TERMS)}")
    assert session.last_stats().kernels_compiled == 0


def test_expression_nodes_counts_each_node_and_stops_at_the_limit():
    from gpu_engine.codegen.kernel_bounds import expression_nodes
    from gpu_engine.plans.expressions import BinaryOp, ColumnRef, InList, Literal

    a = ColumnRef("a", pa.int64())
    comparison = BinaryOp("eq", a, Literal(1, pa.int64()), pa.bool_())
    assert expression_nodes([comparison]) == 3
    assert expression_nodes([BinaryOp("and", comparison, comparison, pa.bool_())]) == 7
    in_list = InList(a, tuple(Literal(i, pa.int64()) for i in range(100_000)))
    assert expression_nodes([in_list]) == 100_002
    assert expression_nodes([in_list], limit=10) == 11


def test_kernel_nodes_counts_a_repeat_once_per_block_of_the_row_code():
    """The row code computes a repeated subexpression once per block: a CASE's results are blocks of their own."""
    from gpu_engine.codegen.kernel_bounds import expression_nodes, kernel_nodes
    from gpu_engine.plans.expressions import BinaryOp, Case, ColumnRef, Literal

    a = ColumnRef("a", pa.int64())
    comparison = BinaryOp("eq", a, Literal(1, pa.int64()), pa.bool_())
    twice = BinaryOp("and", comparison, BinaryOp("eq", a, Literal(1, pa.int64()), pa.bool_()), pa.bool_())
    assert expression_nodes([twice]) == 7
    assert kernel_nodes([twice], limit=5) == 4  # an equal copy, not the same object, is still one computation
    assert kernel_nodes([twice], limit=10) == 7  # within the limit the plain count is taken
    sum_of = BinaryOp("add", a, Literal(2, pa.int64()), pa.int64())
    other = BinaryOp("eq", a, Literal(3, pa.int64()), pa.bool_())
    # the condition is computed before the branches (once); the result repeated in two branches, twice
    in_branches = Case(((comparison, sum_of), (other, sum_of)), None, pa.int64())
    assert expression_nodes([in_branches, comparison]) == 16
    # CASE, the condition (3), each branch's add and 2 (`a` read outside once), the second condition's = and 3
    assert kernel_nodes([in_branches, comparison], limit=15) == 1 + 3 + 2 + 2 + 2
    # computed before the CASE, the result is read from the enclosing block in both branches
    assert kernel_nodes([sum_of, in_branches], limit=15) == 3 + 1 + 2 + 2
    assert kernel_nodes([twice] * 100, limit=3) == 4  # past the limit: limit + 1


def test_conditional_aggregates_repeating_their_conditions_are_fused():
    """Aggregates over CASE WHEN c ... (TPC-DS q28's merged subqueries) compile each condition once: one kernel."""
    from gpu_engine.codegen.kernel_bounds import MAX_KERNEL_NODES, expression_nodes
    from gpu_engine.plans.nodes import FusedAggregationNode, walk_plan
    from gpu_engine.planning.fusion import fuse_pipelines

    conditions = [f"(a BETWEEN {i} AND {i + 5} OR q BETWEEN {i} AND {i + 9} OR f BETWEEN {i} AND {i + 3}) "
                  f"AND a BETWEEN {i * 2} AND {i * 2 + 40}" for i in range(6)]
    items = ", ".join(f"sum(CASE WHEN {c} THEN q END) AS s{i}, count(CASE WHEN {c} THEN q END) AS n{i}, "
                      f"avg(CASE WHEN {c} THEN a END) AS m{i}" for i, c in enumerate(conditions))
    session = session_with_tables({"t": T}, device="cpu")
    plan = fuse_pipelines(session.sql_plan(f"SELECT g, {items} FROM t GROUP BY g"))
    fused = [node for node in walk_plan(plan) if isinstance(node, FusedAggregationNode) and node.step.input_is_raw]
    assert len(fused) == 1
    assert expression_nodes(call.arg for call in fused[0].aggregates) > MAX_KERNEL_NODES  # counted with repeats


def test_an_oversized_predicate_is_not_fused_and_a_small_one_is():
    from gpu_engine.codegen.compiled_predicate import CompiledPredicate
    from gpu_engine.codegen.kernel_bounds import MAX_KERNEL_NODES
    from gpu_engine.device import get_device
    from gpu_engine.plans.nodes import FusedAggregationNode, walk_plan
    from gpu_engine.planning.fusion import fuse_pipelines

    session = session_with_tables({"t": T}, device="cpu")
    small, large = _and_chain(10), _and_chain(MAX_KERNEL_NODES // 3 + 1)  # 3 nodes and an AND per term
    for chain, fused in ((small, True), (large, False)):
        plan = fuse_pipelines(session.sql_plan(f"SELECT count(*) AS n FROM t WHERE {chain}"))
        assert any(isinstance(node, FusedAggregationNode) for node in walk_plan(plan)) is fused
        predicate = session.sql_plan(f"SELECT a FROM t WHERE {chain}")
        filters = [node.predicate for node in walk_plan(predicate) if hasattr(node, "predicate")]
        compiled = CompiledPredicate.of(get_device("cpu"), filters[0], {f.name: f.type for f in T.schema})
        assert (compiled is not None) is fused


def test_planning_a_long_chain_is_linear_not_pairwise():
    """sqlglot's simplification compares a chain's terms pairwise; long chains are simplified term by term."""
    import sqlglot

    from gpu_engine.sql.connectives import SIMPLIFIED_WHOLE, simplify_bounded

    tree = sqlglot.parse_one(f"SELECT a FROM t WHERE {_and_chain(SIMPLIFIED_WHOLE * 4)} AND (1 = 1 AND b = 2)")
    result = simplify_bounded(tree, "duckdb")
    assert "1 = 1" not in result.sql() and "b = 2" in result.sql()  # each term is still simplified
    assert result.sql().count("<>") == SIMPLIFIED_WHOLE * 4


def test_chains_are_balanced_after_parsing():
    import sqlglot
    from sqlglot import exp

    from gpu_engine.plans.sql_connectives import balance_connectives

    tree = balance_connectives(sqlglot.parse_one(f"SELECT 1 WHERE {_and_chain(2000)} OR a = 1 AND b = 2"))
    depth, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        depth = max(depth, level)
        stack.extend((child, level + 1) for child in node.iter_expressions())
    assert depth < 30
    where = tree.args["where"].this
    assert isinstance(where, exp.Or)  # AND binds tighter: the OR chain holds the AND chain as one term
    assert [t.sql() for t in where.find_all(exp.NEQ, bfs=False)][:3] == ["a <> 3", "a <> 10", "a <> 17"]


def test_a_chain_far_over_the_bound_is_refused_before_its_program_is_planned(monkeypatch):
    """Planning a program visits every node (seconds for 2000 terms): a chain that cannot fit is not planned."""
    from gpu_engine.codegen.kernel_bounds import MAX_PLANNED_NODES, expression_nodes
    from gpu_engine.plans.nodes import FusedAggregationNode, walk_plan
    from gpu_engine.planning import fusion

    planned = []
    original = fusion.plan_fusion_program

    def recording(predicates, keys, functions, schema, outputs=()):
        planned.append(expression_nodes((*predicates, *keys, *outputs), in_list_values=False))
        return original(predicates, keys, functions, schema, outputs)

    monkeypatch.setattr(fusion, "plan_fusion_program", recording)
    session = session_with_tables({"t": T}, device="cpu")
    fusion.fuse_pipelines(session.sql_plan(f"SELECT count(*) AS n FROM t WHERE {_and_chain(TERMS)}"))
    assert all(n <= MAX_PLANNED_NODES for n in planned), planned
    # a long OR over one string column is one lifted node: planned, and fused
    strings = " OR ".join(f"g = 'x{i}'" for i in range(200))
    plan = fusion.fuse_pipelines(session.sql_plan(f"SELECT count(*) AS n FROM t WHERE {strings}"))
    assert any(isinstance(node, FusedAggregationNode) for node in walk_plan(plan))


LIFTED = {  # lists over the lift threshold: each reaches sqlglot as one call and is typed as DuckDB types it
    "lifted_mixed_numbers": "SELECT a, q FROM t WHERE q IN (" + ", ".join(
        (str(i), f"{i}.25", f"-{i}")[i % 3] for i in range(300)) + ", 17, 2000.00)",
    "lifted_ints_with_null": "SELECT a FROM t WHERE a IN (" + ", ".join(str(i * 2 + 1) for i in range(200)) + ", NULL)",
    "lifted_not_in_with_null": "SELECT a FROM t WHERE a NOT IN (" + ", ".join(str(i) for i in range(100, 400))
                               + ", NULL)",
    "lifted_not_in_negatives": "SELECT a FROM t WHERE a NOT IN (" + ", ".join(f"-{i}" for i in range(200)) + ")",
    "lifted_strings": "SELECT g, count(*) AS n FROM t WHERE g IN (" + ", ".join(f"'x{i}'" for i in range(200))
                      + ", 'it''s', 'y') GROUP BY g",
    "lifted_in_projection": "SELECT a, a IN (" + ", ".join(str(i) for i in range(0, 400, 3)) + ") AS hit FROM t",
}


@pytest.mark.parametrize("name", list(LIFTED))
def test_lifted_in_lists_match_duckdb(name, device_name, reference):
    session = session_with_tables({"t": T}, device=device_name, drivers=1)
    assert_same_rows(session.sql(LIFTED[name]), duckdb_table(reference, LIFTED[name]))


def test_a_long_in_list_reaches_sqlglot_as_one_node(monkeypatch):
    """The parsed tree of a 20,000-value IN query has a few nodes, not one per value (work as a count)."""
    from gpu_engine.sql import rewrite

    trees = []
    original = rewrite.parse_and_qualify

    def recording(text, catalog, dialect):
        tree = original(text, catalog, dialect)
        trees.append(sum(1 for _ in tree.walk()))
        return tree

    monkeypatch.setattr("gpu_engine.sql.parse_and_qualify", recording)
    session = session_with_tables({"t": T}, device="cpu", drivers=1)
    sql = "SELECT a FROM t WHERE a IN (" + ", ".join(str(i * 3 + 2) for i in range(20000)) + ")"
    assert sorted(session.sql(sql).column("a").to_pylist()) == [2, 5, 11, 2000]
    assert trees and max(trees) < 50, trees


def test_lifting_keeps_every_later_offset_and_line():
    from gpu_engine.plans.sql_literal_lists import lift_literal_lists

    text = "SELECT a FROM t WHERE a IN (" + ",\n".join(str(i) for i in range(100)) + ") AND b = 'it''s'\n  AND zz"
    lifted, lists = lift_literal_lists(text)
    assert len(lists) == 1 and len(lists[0]) == 100
    assert len(lifted) == len(text) and lifted.index("zz") == text.index("zz") and lifted.count("\n") == text.count("\n")
    short = "SELECT a FROM t WHERE a IN (1, 2, 3)"
    assert lift_literal_lists(short) == (short, ())


def test_an_error_after_a_lifted_list_names_its_position():
    from gpu_engine.sql.errors import SqlError

    session = session_with_tables({"t": T}, device="cpu", drivers=1)
    sql = "SELECT a FROM t WHERE a IN (" + ",\n".join(str(i) for i in range(100)) + ")\n AND nosuch = 1"
    with pytest.raises(SqlError) as raised:
        session.sql(sql)
    assert "nosuch" in str(raised.value)
    assert "line 101" in str(raised.value) or "101" in str(raised.value), str(raised.value)


def test_a_shared_cte_with_a_long_in_list_matches_duckdb(reference):
    session = session_with_tables({"t": T}, device="cpu", drivers=1)
    values = ", ".join(str(i) for i in range(-3, 200, 2))
    sql = (f"WITH c AS (SELECT a FROM t WHERE a IN ({values})) "
           f"SELECT x.a FROM c x JOIN c y ON x.a = y.a WHERE x.a NOT IN ({values}, 2000)")
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
    sql = f"WITH c AS (SELECT a FROM t WHERE a IN ({values})) SELECT x.a FROM c x JOIN c y ON x.a = y.a"
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_a_lifted_list_keeps_its_selectivity():
    """Join ordering estimates a lifted list by its values, as it estimates the list written out."""
    import sqlglot

    from gpu_engine.plans.sql_literal_lists import lift_literal_lists, lifted_lists
    from gpu_engine.sql.statistics import ColumnStatistics, selectivity

    text = "SELECT a FROM t WHERE a IN (" + ", ".join(str(i) for i in range(100)) + ")"
    stats = ColumnStatistics(ndv=1000)
    written = selectivity(sqlglot.parse_one(text).args["where"].this, lambda column: stats)
    lifted, lists = lift_literal_lists(text)
    with lifted_lists(lists):
        assert selectivity(sqlglot.parse_one(lifted).args["where"].this, lambda column: stats) == written == 0.1


def test_the_lifted_call_written_by_hand_is_an_unknown_function():
    from gpu_engine.sql.errors import SqlError

    session = session_with_tables({"t": T}, device="cpu", drivers=1)
    with pytest.raises(SqlError, match="unknown function"):
        session.sql("SELECT a FROM t WHERE a IN (__gpe_in_list(0))")


@pytest.mark.parametrize("text", [
    "SELECT a FROM t WHERE a IN ({values}) AND b IN ({strings})",
    "SELECT a FROM t WHERE a NOT IN ({values}) -- IN ({values})\n AND c = 'x IN ({values})'",
    "SELECT 'in ({values})' AS s, \"in ({values})\" FROM t WHERE a IN ({values}) /* in ({values}) */",
    "SELECT a FROM t WHERE a IN ({values}, 1e5)",
    "SELECT a FROM t WHERE a In(\n{values}\n) OR b in ( {strings} )",
], ids=["two lists", "in comment and string", "in quoted name and block comment", "exponent", "spacing"])
def test_lists_found_by_patterns_are_the_ones_the_tokenizer_finds(text):
    """The regular-expression path lifts exactly what sqlglot's tokenizer path lifts, as the same literals."""
    from gpu_engine.plans.sql_literal_lists import _lift_plain_lists, _lift_with_tokenizer, lift_literal_lists

    values = ", ".join(["-3", "0", "12.50", "NULL", "-0.25"] + [str(i * 7) for i in range(70)])
    strings = ", ".join(["'it''s'", "''", "'MAIL'", "null"] + [f"'v{i}'" for i in range(70)])
    text = text.format(values=values, strings=strings)
    expected = _lift_with_tokenizer(text, "duckdb")
    found = _lift_plain_lists(text)
    if found is None:  # nothing plain (a value such as 1e5): the tokenizer's answer is the one used
        assert "1e5" in text and lift_literal_lists(text) == expected
        return
    assert found[0] == expected[0]
    assert [[v.sql() for v in values] for values in found[1]] == [[v.sql() for v in values] for values in expected[1]]
    assert all(type(a) is type(b) and a == b for x, y in zip(found[1], expected[1]) for a, b in zip(x, y))
