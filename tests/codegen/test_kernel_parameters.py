"""Literals are kernel parameters: the same query with new constants generates and compiles no new kernel.

Each case runs a query template with its first constants (which may generate kernels), then with new
ones: ints of other widths, decimals of other scales, dates, doubles, IN lists of other lengths, CASE
values. The later runs must generate no kernel source (the generation caches see no miss) and load no
new module, and every run must give DuckDB's rows, fused and unfused. The unit tests below pin the
normalization rules (which constants share a kernel) and the parameter array.
"""

from __future__ import annotations

import datetime
import decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows

from gpu_engine import Session
from gpu_engine.codegen import compiled_modules
from gpu_engine.codegen.fused_aggregation_kernel import GENERATED_AGGREGATIONS, KernelLayout
from gpu_engine.codegen.fused_filter_kernel import GENERATED_FILTERS, generate_fused_filter
from gpu_engine.codegen.fused_project_kernel import GENERATED_PROJECTIONS
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.codegen.kernel_parameters import KernelParameter, ParameterSet
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.expressions import ColumnRef, InList, Literal
from gpu_engine.plans.nodes import FusedAggregationNode, walk_plan

GENERATORS = (GENERATED_AGGREGATIONS, GENERATED_FILTERS, GENERATED_PROJECTIONS)
ROWS = {"cpu": 2000, "cuda-sim": 150, "cuda": 2000}


@pytest.fixture
def table(device_name) -> pa.Table:
    """Yield ints, floats, decimals and dates with NULLs in every column (smaller on the simulator)."""
    rows = ROWS[device_name]
    rng = np.random.default_rng(3)

    def nulls(values):
        return [None if rng.random() < 0.1 else v for v in values]

    start = datetime.date(1994, 1, 1)
    return pa.table({
        "k_int": pa.array(nulls(rng.integers(-5, 20, rows).tolist()), pa.int32()),
        "v_int": pa.array(nulls(rng.integers(-10**6, 10**6, rows).tolist()), pa.int64()),
        "v_float": pa.array(nulls(rng.normal(0, 100, rows).tolist()), pa.float64()),
        "v_dec": pa.array(nulls([decimal.Decimal(int(x)).scaleb(-2) for x in rng.integers(-10**7, 10**7, rows)]),
                          pa.decimal128(15, 2)),
        "d_date": pa.array(nulls([start + datetime.timedelta(days=int(x)) for x in rng.integers(0, 2000, rows)]),
                           pa.date32()),
    })


@pytest.fixture
def reference(table):
    """Return ``rows(sql)``: DuckDB's answer over ``t``."""
    def rows(sql: str) -> pa.Table:
        connection = duckdb.connect()
        connection.register("t", table)
        return connection.sql(sql).to_arrow_table()

    return rows

#: (template, constants of the first run, constants of the later runs).
CASES = {
    "ints": ("SELECT count(*) AS c, sum(v_int) AS s FROM t WHERE v_int > {0} AND k_int <> {1}",
             [(0, 3)], [(7, -2), (-3000000000, 0), (999999, 19)]),
    "decimals": ("SELECT k_int, sum(v_dec) AS s, count(*) AS c FROM t WHERE v_dec > {0} GROUP BY k_int",
                 [(20,)], [(21,), (20.25,), (-0.5,), (-31234.07,), (20.125,), (-0.001,), (99999.9999,)]),
    "decimal_arithmetic": ("SELECT sum(v_dec * (1 - v_dec)) AS s, sum(v_dec + {0}) AS a FROM t WHERE v_dec < {1}",
                           [(1, 100)], [(2.5, 7.75), (-3, 1000000)]),
    "between_scales": ("SELECT count(*) AS c FROM t WHERE v_dec >= {0} AND v_dec < {1} OR v_dec = {2} OR {3} > v_dec",
                       [(1.125, 5000.5, 0.001, -7000.333)], [(-0.125, 3.3333, 2.0005, -1.0001)]),
    "dates": ("SELECT count(*) AS c FROM t WHERE d_date BETWEEN DATE '{0}' AND DATE '{1}'",
              [("1994-01-01", "1995-06-30")], [("1995-02-03", "1998-12-31"), ("1990-01-01", "1990-01-02")]),
    "doubles": ("SELECT count(*) AS c, sum(v_float) AS s FROM t WHERE v_float < {0} AND v_float >= {1}",
                [(0.5, -50.25)], [(3, -1e300), (1e-3, -7)]),
    "in_lists": ("SELECT k_int, count(*) AS c FROM t WHERE k_int IN ({0}) GROUP BY k_int",
                 [("1, 2",)], [("3",), ("-5, 0, 4, 7, 8, 9, 11, 19",), ("100, 2, 2",)]),
    "float_in_lists": ("SELECT count(*) AS c FROM t WHERE CAST(k_int AS DOUBLE) IN ({0})",
                       [("1, 2.5",)], [("3",), ("-5, 0.5, 4, 7, 8, 9, 11, 19",)]),
    "case_values": ("SELECT sum(CASE WHEN v_int > {0} THEN {1} WHEN k_int = {2} THEN v_int ELSE {3} END) AS s "
                    "FROM t", [(0, 1, 3, 2)], [(10, -7, 4, 0), (-500000, 123456789, -5, 42)]),
    "projection": ("SELECT v_int * {0} + {1} AS a, v_dec - {2} AS b FROM t WHERE k_int IN ({3}) AND v_float > {4}",
                   [(2, 1, 3, "1, 2", 0.0)], [(5, -4, 0.25, "7", -10), (-1, 0, 100, "1, 2, 3, 4", 2.5)]),
}


def _generations() -> int:
    return sum(cache.misses for cache in GENERATORS)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("case", list(CASES))
def test_new_constants_generate_no_kernel(device_name, table, reference, case, fuse):
    template, first, later = CASES[case]
    session = Session(device=device_name, drivers=2, batch_rows=max(64, table.num_rows // 4), fuse=fuse)
    session.register("t", table, split_rows=max(1, table.num_rows // 3))
    for constants in first:
        sql = template.format(*constants)
        assert_same_rows(session.sql(sql), reference(sql))
    generated, modules = _generations(), len(compiled_modules._MODULES)
    compiled = []
    for constants in later:
        sql = template.format(*constants)
        assert_same_rows(session.sql(sql), reference(sql))
        compiled.append(session.last_stats().kernels_compiled)
    assert _generations() == generated, "a new constant generated kernel source"
    assert len(compiled_modules._MODULES) == modules, "a new constant compiled a new module"
    if fuse:  # (unfused, a constant of a new type may compile a static kernel's new specialization once)
        assert compiled == [0] * len(later), "explain-analyze counted compilations"
    if fuse:  # the case ran generated kernels at all
        assert generated > 0 or modules > 0


def _filter_source(predicate: str, schema: pa.Schema) -> str:
    plan = PlanBuilder({"t": schema}).table_scan("t").filter(predicate).plan()
    program = plan_fusion_program((plan.predicate,), (), [], {f.name: f.type for f in schema})
    layout = KernelLayout(False, (True,) * len(program.columns), ("dictionary",) * len(program.lifted))
    return generate_fused_filter(program, layout).source


SCHEMA = pa.schema([("q", pa.decimal128(15, 2)), ("i", pa.int32()), ("f", pa.float32()), ("d", pa.date32()),
                    ("s", pa.string())])


@pytest.mark.parametrize("first, second", [
    ("q > 20", "q > 20.25"),  # an integer and a decimal of the column's scale
    ("q > 20", "q > 1234567.5"),
    ("i > 5", "i > 3000000000"),  # int32 and int64 constants
    ("f < 1", "f < 2.5e0"),  # an integer and a double meeting a float column: float64 both
    ("i IN (1, 2)", "i IN (9, 8, 7, 6, 5, 4, 3)"),
    ("d >= DATE '1994-01-01' AND s = 'x'", "d >= DATE '2001-12-31' AND s = 'longer string'"),
    ("CASE WHEN i > 1 THEN q ELSE 0 END > 3", "CASE WHEN i > 7 THEN q ELSE 250 END > -1.5"),
])
def test_constants_of_one_shape_share_the_kernel_source(first, second):
    source = _filter_source(first, SCHEMA)
    assert source == _filter_source(second, SCHEMA)
    for value in ("1234567", "3000000000", "1994", "2001", "longer"):
        assert value not in source


def test_constants_of_any_scale_share_an_order_comparisons_kernel():
    """Over an exact column, x > c is x > floor(c) and x >= c is x >= ceil(c) at the column's scale."""
    for op in ("<", "<=", ">", ">="):
        source = _filter_source(f"q {op} 20", SCHEMA)
        for constant in ("20.125", "-0.0001", "7.5555555", "20.12"):
            assert _filter_source(f"q {op} {constant}", SCHEMA) == source
            assert _filter_source(f"{constant} {op} q", SCHEMA) == _filter_source(f"20 {op} q", SCHEMA)


def test_equality_with_constants_between_the_columns_values_is_one_more_kernel():
    """x = 20.125 never holds for a decimal(15,2) x: such constants share one kernel, exact ones another."""
    between = _filter_source("q = 20.125", SCHEMA)
    assert between == _filter_source("q = -0.0001", SCHEMA) == _filter_source("q = 7.5555555", SCHEMA)
    assert between != _filter_source("q = 20.12", SCHEMA)


def test_parameter_array_holds_the_values():
    schema = {f.name: f.type for f in SCHEMA}
    plan = PlanBuilder({"t": SCHEMA}).table_scan("t").filter("q > 20.25 AND i IN (7, 3, 3, 8) AND f < 2").plan()
    program = plan_fusion_program((plan.predicate,), (), [], schema)
    assert program.parameter_types[0] == pa.decimal128(18, 2)
    words = program.parameter_words
    assert words[0] == 2025
    sets = [node for node in _walk(program.predicates[0]) if isinstance(node, ParameterSet)]
    assert len(sets) == 1
    start, count = words[sets[0].index], words[sets[0].index + 1]
    assert list(words[start:start + count]) == [3, 7, 8]  # sorted, distinct
    assert any(isinstance(node, KernelParameter) and node.dtype == pa.float64() for node in _walk(program.predicates[0]))


def test_in_list_values_an_integer_never_equals_are_left_out():
    i = ColumnRef("i", pa.int32())
    values = (Literal(7, pa.int32()), Literal(decimal.Decimal("1.5"), pa.decimal128(2, 1)),
              Literal(decimal.Decimal("2.0"), pa.decimal128(2, 1)), Literal(None, pa.int32()))
    program = plan_fusion_program((InList(i, values),), (), [], {"i": pa.int32()})
    (found,) = program.predicates
    assert isinstance(found, ParameterSet) and found.has_null
    words = program.parameter_words
    assert list(words[words[found.index]:][:words[found.index + 1]]) == [2, 7]


def _walk(expr):
    yield expr
    for child in expr.children():
        yield from _walk(child)


def test_equal_subexpressions_keep_sharing_their_computation():
    """TPC-H Q1's ``l_extendedprice * (1 - l_discount)`` in two sums is one parameter and one computation."""
    schema = pa.schema([("p", pa.decimal128(15, 2)), ("d", pa.decimal128(15, 2)), ("x", pa.decimal128(15, 2))])
    plan = (PlanBuilder({"t": schema}).table_scan("t")
            .aggregation([], ["sum(p * (1 - d)) AS a", "sum(p * (1 - d) * (1 + x)) AS b"]).plan())
    node = next(n for n in walk_plan(_fused(plan)) if isinstance(n, FusedAggregationNode))
    from gpu_engine.aggregation import aggregate_functions_of

    program = plan_fusion_program(node.predicates, node.grouping_keys, aggregate_functions_of(node),
                                  {f.name: f.type for f in schema})
    assert len(program.parameter_types) == 2  # the two distinct constants: 1 (shared) and 1 in (1 + x)
    (a,), (b,) = program.arguments
    assert a == b.left


def _fused(plan):
    from gpu_engine.planning import prepare_plan

    return prepare_plan(plan, "cpu", 1).plan


def test_a_long_in_list_is_one_small_kernel(device_name, table, reference):
    """5000 values: a set in the parameter array searched by bisection, not 5000 comparisons in the source."""
    values = ", ".join(str(v) for v in range(-10**6, 10**6, 400))
    sql = f"SELECT k_int, count(*) AS c, sum(v_int) AS s FROM t WHERE v_int IN ({values}) OR k_int IN (3, 4) GROUP BY k_int"
    session = Session(device=device_name, drivers=1, batch_rows=table.num_rows)
    session.register("t", table)
    assert_same_rows(session.sql(sql), reference(sql))
    schema = pa.schema([("v", pa.int64())])
    assert len(_filter_source(f"v IN ({values})", schema)) < 20_000
