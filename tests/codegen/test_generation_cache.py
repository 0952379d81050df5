"""Generated kernels and fusion programs are made once per process and request, refusals included."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.codegen.fused_aggregation_kernel import GENERATED_AGGREGATIONS
from gpu_engine.codegen.fused_filter_kernel import GENERATED_FILTERS
from gpu_engine.codegen.fusion_program import PROGRAMS, plan_fusion_program
from gpu_engine.codegen.generation_cache import GenerationCache
from gpu_engine.codegen.row_lowering import Unsupported
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal

CACHES = (GENERATED_AGGREGATIONS, GENERATED_FILTERS, PROGRAMS)


def test_a_refusal_is_remembered_and_raised_afresh():
    cache = GenerationCache()
    calls = []

    def refuse():
        calls.append(1)
        raise Unsupported("no kernel for this")

    raised = []
    for _ in range(3):
        with pytest.raises(Unsupported, match="no kernel for this") as info:
            cache.get("key", refuse)
        raised.append(info.value)
    assert len(calls) == 1 and cache.misses == 1 and cache.hits == 2
    assert len({id(error) for error in raised}) == 3  # a fresh exception each time: tracebacks never pile up


def test_other_errors_pass_through_uncached():
    cache = GenerationCache()
    calls = []

    def broken():
        calls.append(1)
        raise KeyError("a bug")

    for _ in range(2):
        with pytest.raises(KeyError):
            cache.get("key", broken)
    assert len(calls) == 2


def test_the_cache_is_bounded_least_recently_used_first():
    cache = GenerationCache(max_entries=2)
    cache.get("a", lambda: 1)
    cache.get("b", lambda: 2)
    cache.get("a", lambda: 3)  # a hit: "b" is now the oldest
    cache.get("c", lambda: 4)
    assert cache.get("a", lambda: 5) == 1
    assert cache.get("b", lambda: 6) == 6  # evicted, generated again


def test_literals_that_compare_equal_get_their_own_programs():
    """0.0 == -0.0 and 1 == True in Python: keyed by the objects they would share one program's parameters."""
    schema = {"x": pa.float64()}
    x = ColumnRef("x", pa.float64())
    positive = plan_fusion_program((BinaryOp("lt", x, Literal(0.0, pa.float64()), pa.bool_()),), (), [], schema)
    negative = plan_fusion_program((BinaryOp("lt", x, Literal(-0.0, pa.float64()), pa.bool_()),), (), [], schema)
    assert positive.parameter_words != negative.parameter_words
    assert positive.shape() == negative.shape()  # one kernel, two parameter arrays


def test_repeated_queries_generate_nothing_new():
    """The fusion pass, every driver's operators and every later run reuse the first run's kernels."""
    table = pa.table({"k": pa.array([1, 2, 3, 1, 2] * 40, pa.int64()), "v": pa.array(range(200), pa.int64())})
    session = Session(device="cpu", drivers=3, batch_rows=16)
    session.register("t", table)
    plan = (PlanBuilder(session.catalog).table_scan("t").filter("v % 7 <> 3")
            .aggregation(["k"], ["sum(v) AS s", "count(*) AS c"]).plan())
    filter_plan = PlanBuilder(session.catalog).table_scan("t").filter("v % 5 = 1").project(["v"]).plan()
    first = session.execute(plan), session.execute(filter_plan)
    misses = [cache.misses for cache in CACHES]
    hits = [cache.hits for cache in CACHES]
    second = session.execute(plan), session.execute(filter_plan)
    assert [cache.misses for cache in CACHES] == misses  # nothing generated anew
    # A later run asks at most again (an operator's setup is kept per plan node since 2857ca9: it may not ask).
    assert all(after >= before for after, before in zip((cache.hits for cache in CACHES), hits))
    assert [t.sort_by("k" if "k" in t.column_names else "v") for t in first] == \
        [t.sort_by("k" if "k" in t.column_names else "v") for t in second]


def test_a_program_makes_its_shape_and_hash_once_and_pickles_without_them(monkeypatch):
    """Every operator of a plan node looks its program's shape up in per-process tables: made and hashed once.

    The kept hash must not travel in a pickle (a string's hash differs between processes), and a program
    equal to another still hashes and compares equal to it.
    """
    import pickle

    schema = {"x": pa.float64()}
    x = ColumnRef("x", pa.float64())
    program = plan_fusion_program((BinaryOp("lt", x, Literal(1.5, pa.float64()), pa.bool_()),), (), [], schema)
    twin = plan_fusion_program((BinaryOp("lt", x, Literal(1.5, pa.float64()), pa.bool_()),), (), [], schema)
    shape = program.shape()
    assert program.shape() is shape and shape.shape() is shape
    calls = []
    original = BinaryOp.__hash__
    monkeypatch.setattr(BinaryOp, "__hash__", lambda self: calls.append(1) or original(self))
    first = hash(program)
    assert hash(program) == first and len(calls) == 1  # the expressions are walked once
    assert program == twin and hash(twin) == first
    restored = pickle.loads(pickle.dumps(program))
    assert "_hash" not in restored.__dict__ and "_shape" not in restored.__dict__
    assert restored == program and hash(restored) == first and restored.shape() == shape


def test_a_repeated_query_writes_no_program_shape_key_again(monkeypatch):
    """The kernel caches' key (the repr of a program's shape, a walk of every expression) is made once per
    shape: a repeated query's fusion pass, operators (per driver, per layout) and tier switches make none.

    Before, each caller made it again: ~370 reprs over 40 TPC-DS queries at SF 0.01 on every run, ~660 on a
    first run (bench/results/2026-11-29-firstruns2.md).
    """
    import pickle

    from gpu_engine.codegen.fusion_program import FusionProgram

    table = pa.table({"k": pa.array([1, 2, 3, 1, 2] * 40, pa.int64()), "v": pa.array(range(200), pa.int64())})
    session = Session(device="cpu", drivers=2, batch_rows=16, compile_mode="alternate")  # both tiers ask
    session.register("t", table)
    plan = (PlanBuilder(session.catalog).table_scan("t").filter("v % 7 <> 3")
            .aggregation(["k"], ["sum(v) AS s", "count(*) AS c"]).plan())
    filter_plan = PlanBuilder(session.catalog).table_scan("t").filter("v % 5 = 1").project(["v * 3 AS w"]).plan()
    first = session.execute(plan), session.execute(filter_plan)
    calls = []
    original = FusionProgram.__repr__
    monkeypatch.setattr(FusionProgram, "__repr__", lambda self: calls.append(1) or original(self))
    second = session.execute(plan), session.execute(filter_plan)
    assert calls == []
    assert [t.sort_by("k" if "k" in t.column_names else "w") for t in first] == \
        [t.sort_by("k" if "k" in t.column_names else "w") for t in second]
    schema = {"x": pa.float64()}
    x = ColumnRef("x", pa.float64())
    program = plan_fusion_program((BinaryOp("lt", x, Literal(2.5, pa.float64()), pa.bool_()),), (), [], schema)
    key = program.shape_key()
    assert len(calls) == 1 and program.shape_key() is key and key == original(program.shape())
    assert "_key" not in pickle.loads(pickle.dumps(program.shape())).__dict__  # made again in another process
