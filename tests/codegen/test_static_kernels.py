"""``gpu-engine precompile`` (run by ``make demo``): the static kernels compile at set-up, not in a first query."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def tiny_tpch(tmp_path_factory):
    """TPC-H at set-up's scale, generated once for the tests below that run tour texts (a generator run each)."""
    from gpu_engine.codegen.static_kernels import PRECOMPILE_SCALE_FACTOR
    from gpu_engine.connectors.tpch_data import ensure_tpch

    return ensure_tpch(PRECOMPILE_SCALE_FACTOR, tmp_path_factory.mktemp("tpch"), progress=False)


def test_precompile_leaves_nothing_for_the_same_queries_to_compile(tmp_path):
    from gpu_engine import Session
    from gpu_engine.codegen.static_kernels import PRECOMPILE_SCALE_FACTOR, precompile_static_kernels
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.plans.tpch import spec_sql

    lines = []
    summary = precompile_static_kernels("cpu", data_dir=tmp_path, progress=lines.append, queries=(1, 3), tour=(),
                                        placeholders=False)  # (their signatures: the test below)
    assert summary.queries == 3 * 3 and len(lines) == 4  # kernels no run reaches; primer, q1, q3 in three sessions
    session = Session(device="cpu", drivers=2, fuse=False)
    register_tpch(session, ensure_tpch(PRECOMPILE_SCALE_FACTOR, tmp_path / "tpch", progress=False))
    for number in (1, 3):
        session.sql(spec_sql(number, PRECOMPILE_SCALE_FACTOR))
        assert session.last_stats().kernels_compiled == 0


def test_the_precompile_command_is_listed_and_refuses_an_unknown_device():
    done = subprocess.run([sys.executable, "-m", "gpu_engine", "precompile", "--device", "nosuch"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid choice" in done.stderr
    listed = subprocess.run([sys.executable, "-m", "gpu_engine", "--help"], capture_output=True, text=True, timeout=120)
    assert "precompile" in listed.stdout


def _fresh_dispatcher(dispatcher):
    """Return a new numba dispatcher of ``dispatcher``'s function and options: nothing loaded in this process yet."""
    import numba

    options = {k: v for k, v in dispatcher.targetoptions.items() if k != "nopython"}
    return numba.njit(cache=True, **options)(dispatcher.py_func)


def test_every_signature_the_callers_of_precompiled_kernels_run_is_one_precompile_compiles(tmp_path, monkeypatch):
    """Set-up compiles the kernels no TPC-H run reaches from placeholder arguments (``precompile_calls``); their
    callers, given every kind of input they take, must run only those signatures, or a first query compiles
    one on a driver (numba types a read-only array, such as a memory-mapped file or an Arrow buffer, apart from
    a writable one).
    """
    import types

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_engine.codegen.static_kernels import placeholder_signatures
    from gpu_engine.columnar.column import Column
    from gpu_engine.connectors import parquet_device_columns
    from gpu_engine.connectors.parquet_columns import decodable_columns
    from gpu_engine.device import get_device
    from gpu_engine.exec import dynamic_filters
    from gpu_engine.exec.dynamic_filters import JoinKeyFilter
    from gpu_engine.kernels import parquet_device, slot_compaction, string_keys

    kernels = [(dynamic_filters, f"_{kind}_{test}") for kind in ("range", "table", "bloom") for test in ("keep", "mask")]
    kernels += [(string_keys, "_hash_strings_cpu"), (string_keys, "_intern_rows_cpu"),
               (slot_compaction, "_occupied_columns_cpu"), (parquet_device, "plan_chunk")]
    for module, name in kernels:
        monkeypatch.setattr(module, name, _fresh_dispatcher(getattr(module, name)))
    monkeypatch.setattr(parquet_device_columns, "plan_chunk", parquet_device.plan_chunk)
    cpu = get_device("cpu")

    # join-key filters (range only, an exact bit table, a Bloom table) over int64, int32 and date keys (the other
    # widths differ only in the placeholder's dtype; each would compile here), with and without NULLs, sliced, in
    # buffers read-only (over bytes) or writable (Arrow's own, or over NumPy arrays), and dictionaries
    keys = [pa.array([1, 5, None, 9], pa.int64()), pa.array([1, 5, 7], pa.int32()), pa.array([1, None], pa.date32()),
            pa.array([3, 1 << 40, 5]), pa.array([1, 5, 5]).dictionary_encode(), pa.array(range(10)).slice(3, 4),
            pa.array(np.arange(6, dtype=np.int32)), pa.array(np.arange(6, dtype=np.int64)).slice(1),
            pa.array([4, 5], pa.int32()).dictionary_encode(),
            pa.Array.from_buffers(pa.int32(), 3, [None, pa.py_buffer(np.arange(3, dtype=np.int32).tobytes())])]
    for key_filter in (JoinKeyFilter("k", "int", 1, 9, None), JoinKeyFilter("k", "int", 1, 9, np.array([1, 5, 9])),
                       JoinKeyFilter("k", "int", 0, 1 << 40, np.array([0, 1 << 40]))):
        for key in keys:
            key_filter.mask(key)
            for first in (True, False):
                key_filter.keep_into(key, np.ones(len(key), dtype=np.bool_), first)
    # a fused aggregation's host twins: interning plain, dictionary and sliced strings (into a table in the caches,
    # hashing in the probe loop, and one taken as out of them, hashing in a pass first); compacting the slots
    plain = pa.array(["a", "bb", None, "a", "ccc"] * 50)
    for cache_bytes in (string_keys.PREFETCH_MIN_BYTES, -1):
        monkeypatch.setattr(string_keys, "PREFETCH_MIN_BYTES", cache_bytes)
        table = string_keys.StringKeyTable(cpu)
        for column in (plain, plain.dictionary_encode(), plain.slice(7, 90), pa.array(["x"], pa.large_string())):
            table.intern(Column.from_arrow(column, cpu))
    slots = np.zeros((16, 3), dtype=np.int64)
    slots[[3, 9], 0] = 2
    slot_compaction.occupied_slot_columns(cpu, slots, 2, 2)
    # the device decoder's host page planning (no device needed): required and optional columns, Snappy and not
    path = tmp_path / "t.parquet"
    for compression in ("snappy", "none"):
        pq.write_table(pa.table({"a": pa.array(range(50), pa.int64()), "b": pa.array([1.5, None] * 25),
                                 "d": pa.array(range(50), pa.int32()).cast(pa.date32())}), path,
                       compression=compression, row_group_size=20)
        metadata = pq.read_metadata(path)
        parquet_device_columns.plan_device_columns(str(path), metadata, [0, 2],
                                                   decodable_columns(metadata, ["a", "b", "d"]))

    precompiled = {}
    for device in (cpu, types.SimpleNamespace(name="cuda", kernel_flavor="cuda", is_gpu=True)):
        for dispatcher, signature in placeholder_signatures(device):
            precompiled.setdefault(id(dispatcher), set()).add(signature)
    for module, name in kernels:
        dispatcher = getattr(module, name)
        ran = set(dispatcher.overloads)
        assert ran, f"{name} never ran: the test no longer reaches it"
        assert ran <= precompiled.get(id(dispatcher), set()), f"{name}: {ran - precompiled.get(id(dispatcher), set())}"


def test_the_tour_runs_the_semi_join_value_bounds_kernels_with_every_signature_their_callers_pass(tiny_tpch,
                                                                                                    monkeypatch):
    """A semi join on ``probe.c <> build.c`` decides by each key's bounds of ``c`` (TPC-DS q16/q94/q95's EXISTS):
    set-up's tour must run those kernels, left_semi (the build side's bounds) and right_semi (the probe side's),
    with the signatures a query over NULLs, dates or narrower integers passes, or a fresh install's first such
    query compiles them on a driver."""
    import pyarrow as pa

    from gpu_engine import Session
    from gpu_engine.codegen.static_kernels import TOUR_SQL
    from gpu_engine.connectors.tpch_data import register_tpch
    from gpu_engine.kernels import hash_join
    from gpu_engine.operators.hash_build import distinct_value_filter
    from gpu_engine.planning import prepare_plan
    from gpu_engine.plans.nodes import HashJoinNode, walk_plan

    kernels = ("_value_bounds_cpu", "_add_value_bounds_cpu")
    for name in kernels:
        monkeypatch.setattr(hash_join, name, _fresh_dispatcher(getattr(hash_join, name)))
    session = Session(device="cpu", drivers=2, fuse=False)
    register_tpch(session, tiny_tpch)
    reached = set()
    for text in (t for t in TOUR_SQL if "EXISTS" in t):  # (planning every tour text would cost seconds)
        plan = prepare_plan(session.sql_plan(text), session.device, session.drivers, session.config,
                            statistics=session.statistics()).plan
        joins = {n.join_type for n in walk_plan(plan) if isinstance(n, HashJoinNode) and distinct_value_filter(n)}
        if joins:
            reached |= joins
            session.sql(text)
    assert {"left_semi", "right_semi"} <= reached
    toured = {name: set(getattr(hash_join, name).overloads) for name in kernels}
    assert all(toured.values())

    # The same kernels under other inputs: NULLs on both sides, int32 / date columns (their values are cast to
    # int64 before the kernels), both join directions.
    probe = pa.table({"k": pa.array([1, 2, 2, None, 3] * 40, pa.int32()),
                      "c": pa.array([1, None, 2, 3, 3] * 40, pa.int32()),
                      "d": pa.array([1, 2, None, 4, 5] * 40, pa.int32()).cast(pa.date32())})
    build = pa.table({"uk": pa.array([1, 2, 3, 3, None], pa.int64()), "uc": pa.array([1, 2, None, 4, 5], pa.int64()),
                      "ud": pa.array([1, None, 3, 4, 5], pa.int32()).cast(pa.date32())})
    other = Session(device="cpu", drivers=2, fuse=False)
    other.register("t", probe)
    other.register("u", build)
    for text in ("SELECT count(*) AS n FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.uk = t.k AND u.uc <> t.c)",
                 "SELECT count(*) AS n FROM u WHERE EXISTS (SELECT 1 FROM t WHERE u.uk = t.k AND u.ud <> t.d)",
                 "SELECT count(*) AS n FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.uk = t.k AND u.ud <> t.d)"):
        other.sql(text)
    for name in kernels:
        assert set(getattr(hash_join, name).overloads) <= toured[name], name


def test_kernels_given_a_column_s_values_have_one_signature_whether_it_was_read_from_parquet_or_computed(
        tmp_path, tiny_tpch, monkeypatch):
    """A column read from Parquet is a read-only buffer, one computed a writable array, and numba types them
    apart: gathering and hashing a Parquet DOUBLE column (TPC-DS q4, q36) compiled a signature on a driver that
    set-up's TPC-H runs (whose DOUBLEs are all computed) never made. The values go in read-only always; and
    set-up's tour joins on strings, whose key packing TPC-H never ran (TPC-DS q4)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_engine import Session
    from gpu_engine.codegen.static_kernels import TOUR_SQL
    from gpu_engine.connectors.tpch_data import register_tpch
    from gpu_engine.kernels import gather, group_by
    from gpu_engine.kernels import hash as hash_kernels

    kernels = ((gather, "_gather_cpu"), (hash_kernels, "_double_key_words_cpu"), (group_by, "_pack_strings_cpu"))
    for module, name in kernels:
        monkeypatch.setattr(module, name, _fresh_dispatcher(getattr(module, name)))
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"k": pa.array(np.arange(300) % 7, pa.int64()), "x": pa.array(np.arange(300) / 4.0),
                             "y": pa.array(np.arange(300) % 5 / 2.0)}), path)
    session = Session(device="cpu", drivers=1, fuse=False)
    session.register("d", str(path))
    for text in ("SELECT x, y FROM d ORDER BY x DESC LIMIT 5",  # doubles read from the file, gathered
                 "SELECT x * 2 AS w, y + 1 AS v FROM d ORDER BY x DESC LIMIT 5",  # computed doubles, gathered
                 "SELECT y, count(*) AS n FROM d GROUP BY y",  # a file's doubles as keys
                 "SELECT y + 1 AS z, count(*) AS n FROM d GROUP BY y + 1"):  # computed doubles as keys
        session.sql(text)
    for module, name in kernels[:2]:
        signatures = list(getattr(module, name).overloads)
        float_values = [s for s in signatures if str(s[0].dtype) in ("float64", "uint64")]
        assert len(float_values) == 1, (name, float_values)
    float_keys = list(hash_kernels._double_key_words_cpu.overloads)

    # set-up's tour runs them: a join on strings, a DOUBLE grouping key (TPC-H has neither)
    for module, name in kernels[1:]:
        monkeypatch.setattr(module, name, _fresh_dispatcher(getattr(module, name)))
    tpch = Session(device="cpu", drivers=1, fuse=False)
    register_tpch(tpch, tiny_tpch)
    for text in TOUR_SQL:
        if "phone" in text or "AS DOUBLE) AS d" in text:
            tpch.sql(text)
    assert group_by._pack_strings_cpu.overloads
    assert list(hash_kernels._double_key_words_cpu.overloads) == float_keys


def test_precompile_writes_no_generated_kernel(tmp_path, monkeypatch):
    """Issue 29: set-up compiles only the query-independent static kernels: its fused plans run their lowest tier,
    so no generated module (one query's expressions) is written to the generated-kernel cache, nor compiled.

    (Checked by hand to fail with the fused pass in ``compile_mode="inline"``: its fused modules are written.)
    """
    from gpu_engine.codegen import compiled_modules
    from gpu_engine.codegen.static_kernels import precompile_static_kernels

    monkeypatch.setenv("GPU_ENGINE_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setattr(compiled_modules, "_MODULES", {})
    precompile_static_kernels("cpu", data_dir=tmp_path / "data", progress=lambda line: None, queries=(1, 6),
                              tour=(), placeholders=False)
    assert not list((tmp_path / "kernels").rglob("*.py")), "set-up wrote a generated kernel"
