"""PlanBuilder takes filters, join filters and projections already typed (the IR), checked as a plan's.

A front-end that builds :mod:`gpu_engine.plans.expressions` itself hands them over without writing SQL
text; the builder checks them over its input schema with the rules a deserialized plan meets, so a wrong
type or an unknown column is a PlanError at build time, and the node equals the one the text builds.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator

CATALOG = {"t": pa.schema([("a", pa.int64()), ("b", pa.string())]), "u": pa.schema([("k", pa.int64())])}


def _scan() -> PlanBuilder:
    return PlanBuilder(CATALOG).table_scan("t")


def test_a_typed_filter_and_projection_build_the_nodes_their_text_builds():
    from_text = _scan().filter("a > 1 AND b <> 'x'").project(["a + 1 AS c", "b"]).plan()
    predicate = from_text.sources[0].predicate
    expressions = from_text.expressions
    typed = _scan().filter(predicate).project([("c", expressions[0]), expressions[1]]).plan()
    assert typed.names == from_text.names == ("c", "b")
    assert typed.expressions == expressions
    assert typed.sources[0].predicate == predicate


def test_a_typed_join_filter_is_checked_over_both_sides():
    keep = BinaryOp("gt", ColumnRef("a", pa.int64()), ColumnRef("k", pa.int64()), pa.bool_())
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("u")
    node = PlanBuilder(CATALOG, id_generator=ids).table_scan("t").hash_join(["a"], ["k"], build, ["a", "k"],
                                                                            filter=keep).plan()
    assert node.filter == keep


@pytest.mark.parametrize("expr, message", [
    (ColumnRef("a", pa.string()), "column 'a' is int64, but the expression types it string"),
    (ColumnRef("nope", pa.int64()), "unknown column 'nope'"),
    (BinaryOp("add", ColumnRef("a", pa.int64()), Literal(1, pa.int64()), pa.int64()), "must be boolean, got int64"),
])
def test_a_typed_filter_that_does_not_fit_the_schema_is_refused(expr, message):
    with pytest.raises(PlanError, match=message):
        _scan().filter(expr).plan()


def test_a_typed_projection_needs_a_name():
    with pytest.raises(PlanError, match="a projection's name must be a non-empty string"):
        _scan().project([("", ColumnRef("a", pa.int64()))]).plan()
