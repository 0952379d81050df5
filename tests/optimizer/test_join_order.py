"""Regions of inner joins ordered by the typed estimates (gpu_engine.optimizer.join_order).

A star written in a bad order — the fact table joined first to the dimensions that cut nothing, the selective
one last — comes out joined first to the selective dimension and answers as DuckDB (NULL keys, keys without a
match); outer and semi joins stay whole, with the inner joins on each side of them ordered apart; a region
already in its best order, one of two relations, or one without statistics comes back as the same object.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer.join_order import order_joins
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import HashJoinNode, NestedLoopJoinNode, PlanNode, TableScanNode, walk_plan
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator


def _keys(n: int, modulo: int, nulls_every: int) -> pa.Array:
    return pa.array([None if i % nulls_every == 0 else i % modulo for i in range(n)], pa.int64())


TABLES = {
    "fact": pa.table({"k1": _keys(300, 11, 37), "k2": _keys(300, 10, 41), "k3": _keys(300, 10, 43),
                      "m": pa.array(range(300), pa.int64())}),
    "d1": pa.table({"d1k": pa.array(range(10), pa.int64()), "v": pa.array(range(10), pa.int64())}),
    "d2": pa.table({"d2k": pa.array(range(10), pa.int64()), "s": pa.array(list("abcdefghij"))}),
    "d3": pa.table({"d3k": pa.array([*range(9), None], pa.int64()), "t": pa.array(range(10, 20), pa.int64())}),
}
CATALOG = {name: table.schema for name, table in TABLES.items()}
SQL = ("SELECT m, s, t, v FROM fact JOIN d2 ON k2 = d2k JOIN d3 ON k3 = d3k JOIN d1 ON k1 = d1k WHERE v = 3")


def _scan(ids, table):
    return PlanBuilder(CATALOG, id_generator=ids).table_scan(table)


def _bad_order(ids=None):
    """fact x d2 x d3 (each keeps every fact row), then the dimension that keeps a tenth of them."""
    ids = ids or PlanNodeIdGenerator()
    return (_scan(ids, "fact").hash_join(["k2"], ["d2k"], _scan(ids, "d2").plan(), ["k1", "k3", "m", "s"])
            .hash_join(["k3"], ["d3k"], _scan(ids, "d3").plan(), ["k1", "m", "s", "t"])
            .hash_join(["k1"], ["d1k"], _scan(ids, "d1").filter("v = 3").plan(), ["m", "s", "t", "v"]))


def _tables(node) -> set[str]:
    return {n.table_name for n in walk_plan(node) if isinstance(n, TableScanNode)}


def _lowest_join(plan) -> HashJoinNode:
    joins = [n for n in walk_plan(plan) if isinstance(n, HashJoinNode)]
    return min(joins, key=lambda j: len(_tables(j)))


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_a_star_written_in_a_bad_order_joins_the_selective_dimension_first(device):
    session = session_with_tables(TABLES, split_rows=64, device=device, drivers=2)
    plan = _bad_order().plan()
    ordered = order_joins(plan, session.statistics())
    assert _tables(_lowest_join(plan)) == {"fact", "d2"}
    assert _tables(_lowest_join(ordered)) == {"fact", "d1"}
    assert ordered.output_schema == plan.output_schema
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, SQL)
    assert expected.num_rows > 0
    assert_same_rows(session.execute(ordered), expected)


def test_an_order_already_best_two_relations_or_no_statistics_keep_the_plan():
    session = session_with_tables(TABLES, device="cpu")
    ids = PlanNodeIdGenerator()
    selective = _scan(ids, "d1").filter("v = 3").plan()
    best = (_scan(ids, "fact").hash_join(["k1"], ["d1k"], selective, ["k2", "k3", "m", "v"])
            .hash_join(["k2"], ["d2k"], _scan(ids, "d2").plan(), ["k3", "m", "s", "v"])
            .hash_join(["k3"], ["d3k"], _scan(ids, "d3").plan(), ["m", "s", "t", "v"]).plan())
    # the same joins (the search's canonical order may write a join's sides the other way round: which side
    # builds is build_sides' choice, after this rule)
    assert _join_shape(order_joins(best, session.statistics())) == _join_shape(best)
    pair = _scan(ids, "fact").hash_join(["k2"], ["d2k"], _scan(ids, "d2").plan(), ["m", "s"]).plan()
    assert order_joins(pair, session.statistics()) is pair
    bad = _bad_order().plan()
    assert order_joins(bad, {}) is bad


def test_outer_and_semi_joins_are_not_reordered_across():
    """A LEFT join over the bad star, and a semi join and inner joins above it: the star below is ordered on its
    own, the LEFT join keeps its preserved side (the whole star) and its build side, the semi join its two sides."""
    session = session_with_tables(TABLES, device="cpu")
    ids = PlanNodeIdGenerator()
    star = _bad_order(ids)
    left = star.hash_join(["v"], ["x3k"], _scan(ids, "d3").project(["d3k AS x3k", "t AS t2"]).plan(),
                          ["m", "s", "t", "v", "t2"], "left")
    semi = left.hash_join(["m"], ["k1"], _scan(ids, "fact").project(["k1"]).plan(), ["m", "s", "t", "v", "t2"],
                          "left_semi")
    plan = semi.plan()
    ordered = order_joins(plan, session.statistics())
    assert ordered.kind == "HashJoin" and ordered.join_type == "left_semi"
    assert ordered.build is plan.build
    outer = ordered.probe
    assert outer.join_type == "left" and outer.build is plan.probe.build
    assert _tables(outer.probe) == {"fact", "d1", "d2", "d3"}
    assert _tables(_lowest_join(outer.probe)) == {"fact", "d1"}
    sql = (f"SELECT m, s, t, v, t2 FROM ({SQL}) star LEFT JOIN (SELECT d3k AS x3k, t AS t2 FROM d3) x ON v = x3k "
           "WHERE m IN (SELECT k1 FROM fact)")
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, sql)
    assert_same_rows(session.execute(ordered), expected)


CLASS_TABLES = {
    "x": pa.table({"xk": pa.array([*range(9), None], pa.int64()), "xv": pa.array(range(10), pa.int64())}),
    "y": pa.table({"yk": _keys(400, 10, 29), "ym": pa.array(range(400), pa.int64())}),
    "z": pa.table({"zk": pa.array([0, 1, 1, 2, 3, 5, 8, None, 9, 4], pa.int64()),
                   "zs": pa.array(list("abcdefghij"))}),
}


def test_equal_columns_link_relations_no_written_key_links():
    """``x.xk = y.yk AND y.yk = z.zk``: the one row of ``x`` meets ``z`` first, on ``x.xk = z.zk`` (derived,
    as TPC-H q5's customer meets its nation), and the written ``y.yk = z.zk`` is left out as implied."""
    catalog = {name: table.schema for name, table in CLASS_TABLES.items()}
    ids = PlanNodeIdGenerator()
    scan = lambda table: PlanBuilder(catalog, id_generator=ids).table_scan(table)  # noqa: E731
    plan = (scan("x").filter("xv = 3").hash_join(["xk"], ["yk"], scan("y").plan(), ["xk", "yk", "ym"])
            .hash_join(["yk"], ["zk"], scan("z").plan(), ["ym", "zs"]).plan())
    session = session_with_tables(CLASS_TABLES, split_rows=64, device="cpu", drivers=2)
    ordered = order_joins(plan, session.statistics())
    lowest = _lowest_join(ordered)
    assert _tables(lowest) == {"x", "z"} and {lowest.left_keys + lowest.right_keys} <= {("xk", "zk"), ("zk", "xk")}
    top = ordered if isinstance(ordered, HashJoinNode) else None
    assert top is not None and len(top.left_keys) == 1 and top.filter is None
    with duckdb_with_tables(CLASS_TABLES) as connection:
        expected = duckdb_table(connection, "SELECT ym, zs FROM x JOIN y ON xk = yk JOIN z ON yk = zk WHERE xv = 3")
    assert expected.num_rows > 0
    assert_same_rows(session.execute(ordered), expected)


def _nested_loop_joins(plan) -> list[NestedLoopJoinNode]:
    return [n for n in walk_plan(plan) if isinstance(n, NestedLoopJoinNode)]


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_a_written_cross_product_of_two_dimensions_is_replaced_by_keyed_joins(device):
    """``fact JOIN (d1 x d2) ON k1 = d1k AND k2 = d2k`` (TPC-DS q67 joined as written): its estimate (100 paired
    rows, then ~270) is below every keyed tree's (~270 a join), but a cross product is never kept where keys link
    every relation: each dimension joins the fact table on its key."""
    session = session_with_tables(TABLES, split_rows=64, device=device, drivers=2)
    ids = PlanNodeIdGenerator()
    pairs = _scan(ids, "d1").cross_join(_scan(ids, "d2").plan(), ["d1k", "v", "d2k", "s"]).plan()
    plan = _scan(ids, "fact").hash_join(["k1", "k2"], ["d1k", "d2k"], pairs, ["m", "s", "v"]).plan()
    ordered = order_joins(plan, session.statistics())
    assert _nested_loop_joins(plan) and not _nested_loop_joins(ordered)
    assert ordered.output_schema == plan.output_schema
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, "SELECT m, s, v FROM fact JOIN d1 ON k1 = d1k JOIN d2 ON k2 = d2k")
    assert expected.num_rows > 0
    assert_same_rows(session.execute(ordered), expected)


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_a_one_row_subquery_s_condition_filters_its_relation_before_the_joins(device):
    """``v >= (SELECT max(t) FROM d3) - 15`` written above the joins (TPC-DS q54's month range between two scalar
    subqueries): no key links the one-row relation, so the region was left as written; it is joined to ``d1``
    first (the condition is ``d1``'s filter), and the filtered ``d1`` meets the fact table before ``d2``."""
    session = session_with_tables(TABLES, split_rows=64, device=device, drivers=2)
    ids = PlanNodeIdGenerator()
    top = _scan(ids, "d3").aggregation([], ["max(t) AS top"]).enforce_single_row().plan()
    plan = (_scan(ids, "fact").hash_join(["k2"], ["d2k"], _scan(ids, "d2").plan(), ["k1", "m", "s"])
            .hash_join(["k1"], ["d1k"], _scan(ids, "d1").plan(), ["m", "s", "v"])
            .nested_loop_join(top, ["m", "s", "v"], filter="v >= top - 15").plan())
    ordered = order_joins(plan, session.statistics())
    [pairing] = _nested_loop_joins(ordered)
    assert _tables(pairing) == {"d1", "d3"} and pairing.filter is not None
    assert _tables(_lowest_join(ordered)) == {"fact", "d1", "d3"}
    assert ordered.output_schema == plan.output_schema
    sql = "SELECT m, s, v FROM fact JOIN d2 ON k2 = d2k JOIN d1 ON k1 = d1k WHERE v >= (SELECT max(t) FROM d3) - 15"
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, sql)
    assert 0 < expected.num_rows < 300
    assert_same_rows(session.execute(ordered), expected)


STAR = {
    "sales": pa.table({"k1": _keys(400, 40, 37), "k2": _keys(400, 40, 41), "k3": _keys(400, 20, 43),
                       "m": pa.array(range(400), pa.int64())}),
    "days": pa.table({"dk": pa.array(range(40), pa.int64()), "q": pa.array([i % 4 for i in range(40)], pa.int64()),
                      "y": pa.array([i % 2 for i in range(40)], pa.int64())}),
    "shops": pa.table({"sk": pa.array(range(20), pa.int64()), "n": pa.array(range(20), pa.int64())}),
}
STAR_CATALOG = {name: table.schema for name, table in STAR.items()}


def _star_read(ids, renamed: str | None, conjuncts: str):
    read = PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("days").filter(conjuncts)
    return read.project([f'dk AS "{renamed}"']).plan() if renamed else read.plan()


def _star_written(first: str) -> PlanNode:
    """sales joined to two reads of ``days`` (one filter, keyed by k1 and k2) and to shops, as the SQL planner
    writes a text whose FROM list names the k1 read (``first`` = "k1") or the k2 read first: the first read keeps
    ``dk`` and its filter's conjuncts in the text's order, the other is renamed (``d2.dk``, ``d1.dk``)."""
    ids = PlanNodeIdGenerator()
    sales = PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("sales")
    shops = PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("shops").plan()
    if first == "k1":
        one, two = _star_read(ids, None, "q = 1 AND y = 1"), _star_read(ids, "d2.dk", "y = 1 AND q = 1")
        return (sales.hash_join(["k1"], ["dk"], one, ["k2", "k3", "m"])
                .hash_join(["k2"], ["d2.dk"], two, ["k3", "m"])
                .hash_join(["k3"], ["sk"], shops, ["m", "n"]).plan())
    two, one = _star_read(ids, None, "y = 1 AND q = 1"), _star_read(ids, "d1.dk", "q = 1 AND y = 1")
    return (sales.hash_join(["k3"], ["sk"], shops, ["k1", "k2", "m", "n"])
            .hash_join(["k2"], ["dk"], two, ["k1", "m", "n"])
            .hash_join(["k1"], ["d1.dk"], one, ["m", "n"]).plan())


def _joined_shape(node: PlanNode):
    """The tree of joins down to the relations, each relation its table and the sales key it joins by."""
    if isinstance(node, HashJoinNode):
        keys = tuple(sorted(k for k in (*node.left_keys, *node.right_keys) if k in ("k1", "k2", "k3")))
        return (keys, tuple(sorted(map(repr, map(_joined_shape, node.sources)))))
    return tuple(sorted(_tables(node)))


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_canonical_order_does_not_depend_on_which_read_of_a_table_is_written_first(device, monkeypatch):
    """Two reads of one table under one filter (TPC-DS q17's date_dim reads) tie on every estimate: the search
    breaks the tie by the relations' canonical order, which must come from what each read is and joins (its
    key), not from which read the text lists first (bare, its filter's conjuncts as written) or renamed."""
    import gpu_engine.optimizer.join_order as join_order
    monkeypatch.setattr(join_order, "CANONICAL", True)
    monkeypatch.setattr(join_order, "WRITTEN_ORDER_FREE", True)
    session = session_with_tables(STAR, split_rows=64, device=device, drivers=2)
    plans = [order_joins(_star_written(first), session.statistics()) for first in ("k1", "k2")]
    assert _joined_shape(plans[0]) == _joined_shape(plans[1])
    sql = ("SELECT m, n FROM sales JOIN days a ON k1 = a.dk JOIN days b ON k2 = b.dk JOIN shops ON k3 = sk "
           "WHERE a.q = 1 AND a.y = 1 AND b.q = 1 AND b.y = 1")
    with duckdb_with_tables(STAR) as connection:
        expected = duckdb_table(connection, sql)
    assert expected.num_rows > 0
    for plan in plans:
        assert_same_rows(session.execute(plan), expected)


def _distinct_over(first: str) -> PlanNode:
    """DISTINCT n over sales joined to days (k1, filtered) and to shops (k3), the one read last joined at the top:
    only shops' column is read above, so the top join may be a semi join."""
    ids = PlanNodeIdGenerator()
    sales = PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("sales")
    shops = PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("shops").plan()
    days = _star_read(ids, None, "q = 1")
    if first == "days":
        joined = sales.hash_join(["k1"], ["dk"], days, ["k3"]).hash_join(["k3"], ["sk"], shops, ["n"])
    else:
        joined = sales.hash_join(["k3"], ["sk"], shops, ["k1", "n"]).hash_join(["k1"], ["dk"], days, ["n"])
    return joined.aggregation(["n"], []).plan()


def _join_shape(node: PlanNode):
    """Each join's type and its sides' shapes (sorted), each relation its tables."""
    if isinstance(node, HashJoinNode | NestedLoopJoinNode):
        return (node.join_type, tuple(sorted(map(repr, map(_join_shape, node.sources)))))
    joins = [n for n in walk_plan(node) if isinstance(n, HashJoinNode | NestedLoopJoinNode)]
    if joins:
        return _join_shape(joins[0])
    return tuple(sorted(_tables(node)))


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_a_semi_join_under_a_distinct_is_made_after_the_joins_are_ordered(device, monkeypatch):
    """A DISTINCT reading one relation's columns makes the region's top join a semi join; made before the join
    order, the written order chose which relation that was (the one written last) and the region's search lost
    it: the two orders of one query planned two shapes (TPC-DS q37 and q82 with the FROM list shuffled)."""
    import gpu_engine.optimizer.join_order as join_order
    from gpu_engine.optimizer import optimize_plan
    monkeypatch.setattr(join_order, "CANONICAL", True)
    monkeypatch.setattr(join_order, "WRITTEN_ORDER_FREE", True)
    session = session_with_tables(STAR, split_rows=64, device=device, drivers=2)
    plans = [optimize_plan(_distinct_over(first), session.statistics()) for first in ("days", "shops")]
    assert _join_shape(plans[0]) == _join_shape(plans[1])
    with duckdb_with_tables(STAR) as connection:
        expected = duckdb_table(connection, "SELECT DISTINCT n FROM sales JOIN days ON k1 = dk "
                                            "JOIN shops ON k3 = sk WHERE q = 1")
    assert expected.num_rows > 0
    for plan in plans:
        assert_same_rows(session.execute(plan), expected)


#: An OR over sales, days and shops (TPC-DS q13's over store_sales and two demographics tables): kept above the
#: join where all three meet, it implies a filter over the two relations the written tree joined below it.
_THREE_WAY_OR = ("(m < 100 AND q = 1 AND n < 5) OR (m >= 300 AND q = 2 AND n >= 15) "
                 "OR (m >= 100 AND m < 200 AND q = 3 AND n < 10)")


def _or_over_three(first: str) -> PlanNode:
    """count(*) of sales joined to days (k1), shops (k3) and a filtered second read of days (k2) under
    :data:`_THREE_WAY_OR`, with days (``first`` = "days") or shops joined to sales first."""
    ids = PlanNodeIdGenerator()
    sales = PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("sales")
    shops = PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("shops").plan()
    days = PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("days").plan()
    other = (PlanBuilder(STAR_CATALOG, id_generator=ids).table_scan("days")
             .project(['dk AS "d2"', 'y AS "y2"']).filter("y2 = 1").plan())
    if first == "days":
        joined = (sales.hash_join(["k1"], ["dk"], days, ["k2", "k3", "m", "q"])
                  .hash_join(["k3"], ["sk"], shops, ["k2", "m", "q", "n"]))
    else:
        joined = (sales.hash_join(["k3"], ["sk"], shops, ["k1", "k2", "m", "n"])
                  .hash_join(["k1"], ["dk"], days, ["k2", "m", "q", "n"]))
    return (joined.hash_join(["k2"], ["d2"], other, ["m", "q", "n"]).filter(_THREE_WAY_OR)
            .aggregation([], ["count(*) AS c"]).plan())


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_the_filters_an_or_implies_do_not_follow_the_written_tree(device, monkeypatch):
    """The pushdown derives from an OR over three relations a filter over the two the written tree joined below
    it ((sales, days) or (sales, shops)); searched with it, the region held other conditions for each text and
    planned another tree (TPC-DS q13 with its FROM list shuffled). The join order leaves out the filters another
    condition implies and derives them again for the tree it chose."""
    import gpu_engine.optimizer.join_order as join_order
    from gpu_engine.optimizer import optimize_plan
    monkeypatch.setattr(join_order, "CANONICAL", True)
    monkeypatch.setattr(join_order, "WRITTEN_ORDER_FREE", True)
    session = session_with_tables(STAR, split_rows=64, device=device, drivers=2)
    plans = [optimize_plan(_or_over_three(first), session.statistics()) for first in ("days", "shops")]
    assert _join_shape(plans[0]) == _join_shape(plans[1])
    implied = [join for join in walk_plan(plans[0]) if isinstance(join, HashJoinNode) and join.filter is not None]
    assert len(implied) == 2  # the OR, and below it the filter it implies over the two relations joined there
    with duckdb_with_tables(STAR) as connection:
        expected = duckdb_table(connection, "SELECT count(*) AS c FROM sales JOIN days ON k1 = dk JOIN shops ON "
                                            "k3 = sk JOIN (SELECT dk AS d2, y AS y2 FROM days) ON k2 = d2 "
                                            f"WHERE y2 = 1 AND ({_THREE_WAY_OR})")
    assert expected.column("c")[0].as_py() > 0
    for plan in plans:
        assert_same_rows(session.execute(plan), expected)
