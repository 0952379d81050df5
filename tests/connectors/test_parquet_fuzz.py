"""Damaged Parquet files, read by the engine: pyarrow's answer or a clean engine error, never a crash (issue 28).

Hypothesis makes files in every layout the engine's page decoder reads
(INT32, INT64, FLOAT, DOUBLE, strings, dates, decimals and int16 stored as
integers, and a boolean left to pyarrow; required and optional; PLAIN and
dictionary pages; data pages v1 and v2; Snappy, uncompressed and zstd, which
pyarrow reads; several row groups, empty ones among them; pages of a few
rows), then damages them: page header and footer integers rewritten, bytes
flipped, bytes cut out, the file truncated. :mod:`bench.parquet_fuzz` reads
each file in a worker process, by pyarrow and then by the engine (the
connector's ``read_split``, a Session's ``SELECT count(*)``, ``SELECT *`` and
``GROUP BY``), so a segfault or a hang is a failing case, not a dead pytest
worker. Fixed seeds (``derandomize``) keep it the same run every time, and
small: about 60 files in a few tens of seconds on ``cpu``.

``bench/parquet_fuzz.py`` runs the same reading over many seeds; a file that
fails there becomes a recipe in :data:`REGRESSIONS`.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bench.parquet_fuzz import FAILURES, KINDS, MUTATIONS, Recipe, run_cases

#: Every column kind, required and optional, in one table: each file exercises every decoder path of its layout.
ALL_COLUMNS = tuple((kind, nullable) for kind in KINDS for nullable in (False, True))

#: The layouts the decoder reads (and zstd, which it leaves to pyarrow), each undamaged: these must read exactly.
LAYOUTS = [Recipe(seed, (50, 0, 130, 7), ALL_COLUMNS, compression, dictionary, version, 16)
           for seed, (compression, dictionary, version) in enumerate(
               (c, d, v) for c in ("none", "snappy") for d in (False, True) for v in ("1.0", "2.0"))] + [
    Recipe(8, (20, 0, 30), ALL_COLUMNS, "zstd", True, "2.0", 16)]

#: Damaged files that once failed (found by the bench or by this test), kept as recipes.
REGRESSIONS: list[Recipe] = [
    # Issue 28.1: the string column's dictionary page declares 0 values (page field 3, rewritten as 0), or 4 (old // 2),
    # while its codes reach 8: pyarrow's dictionary read handed the codes on and the fused GROUP BY segfaulted.
    Recipe(11, (200,), (("string", False), ("int64", True)), "none", True, "1.0", 1024, (("page", 3, 2),)),
    Recipe(11, (200,), (("string", False), ("int64", True)), "none", True, "1.0", 1024, (("page", 3, 7),)),
    # Issue 28.5: its data page declares 201 values in a row group of 200 (page field 8, + 1).
    Recipe(11, (200,), (("string", False), ("int64", True)), "none", True, "1.0", 1024, (("page", 8, 0),)),
    # bench seed 211, case 12: a flipped byte made a string that is not UTF-8; GROUP BY raised UnicodeDecodeError.
    Recipe(812111905, (300,), (("bool", True), ("string", True)), "none", False, "2.0", 1024,
           (("flip", 0.452983715757623, 164),)),
    # bench seed 32, case 4: the dictionary page's type became INDEX_PAGE (skipped) around its dictionary struct; the
    # engine answered where pyarrow refuses. A page header's struct must be its type's.
    Recipe(1090638521, (1,), (("int16", True), ("decimal", False)), "none", True, "1.0", 16, (("page", 364, 7),)),
    # bench seeds 24 and 31: a flipped field header dropped a data page header's required encoding fields.
    Recipe(1946591401, (0, 50, 300), (("date", False), ("int64", False)), "snappy", False, "1.0", 3,
           (("page", 3500, 5), ("flip", 1.0949394754077857, 52), ("flip", 1.2392355909367874, 172))),
    Recipe(1284882524, (50, 7), (("int64", True), ("float", True)), "none", True, "1.0", 3,
           (("flip", 0.9146637788520677, 126), ("flip", 1.6963875498968262, 31))),
    # bench seed 837, case 2 (--extended): a flipped bit made the second page's definition_level_encoding field an
    # i64 (same varint); Thrift's readers skip a field of the wrong type, so pyarrow found the required field
    # missing, and the engine read it as an i32 and answered.
    Recipe(483003781, (130,), (("float", True), ("date", False)), "snappy", False, "1.0", 16,
           (("flip", 0.05349518572740497, 3),)),
]


#: bench seed 825, case 11 (``--extended``): a footer rewrite, then the dictionary damage reads the damaged footer and
#: pyarrow's C++ aborts ("Unencoded byte array data bytes does not support INT96"): the harness's own process died
#: before any engine code ran. The worker writes each file, so this is one ``unwritable`` case and the run goes on.
UNWRITABLE = Recipe(1460797457, (130, 0), (("struct", True), ("list", True), ("int32", True)), "snappy", False, "2.0",
                    64, (("footer", 7881, 7), ("dict", 756, 5, 3)))


def _sorted_mutations(mutations: list[tuple]) -> tuple[tuple, ...]:
    return tuple(sorted(mutations, key=lambda mutation: MUTATIONS.index(mutation[0])))


_fraction = st.floats(0, 0.999, allow_nan=False)
_mutations = st.lists(st.one_of(
    st.tuples(st.just("page"), st.integers(0, 10_000), st.integers(0, 9)),
    st.tuples(st.just("flip"), _fraction, st.integers(1, 255)),
    st.tuples(st.just("footer"), st.integers(0, 10_000), st.integers(0, 9)),
    st.tuples(st.just("cut"), _fraction, st.integers(1, 40)),
    st.tuples(st.just("truncate"), st.floats(0.5, 0.999)),
), min_size=1, max_size=2).map(_sorted_mutations)

recipes = st.builds(
    Recipe,
    seed=st.integers(0, 2**31 - 1),
    row_groups=st.lists(st.sampled_from([0, 1, 7, 50, 130]), min_size=1, max_size=3).map(tuple),
    columns=st.lists(st.sampled_from(ALL_COLUMNS), min_size=1, max_size=4).map(tuple),
    compression=st.sampled_from(["none", "snappy", "snappy", "none", "zstd"]),
    dictionary=st.booleans(),
    version=st.sampled_from(["1.0", "2.0"]),
    page_rows=st.sampled_from([3, 16, 64]),
    mutations=_mutations,
)


def _failures(records: list[dict]) -> str:
    failing = [record for record in records if record["worst"] in FAILURES]
    return json.dumps(failing, indent=1)[:6000]


#: A worker reading past this is a hang. In a cold numba cache on a loaded 2-core machine the first worker compiles
#: the decoder and grouping kernels (~200 s measured; ~15 s warm).
WORKER_TIMEOUT_S = 500


@pytest.mark.timeout(900)
def test_undamaged_files_of_every_layout_read_as_pyarrow_reads_them(tmp_path):
    # (UNWRITABLE last: its worker dies writing it, and no case is left for a new worker to start for)
    records = run_cases(LAYOUTS + REGRESSIONS + [UNWRITABLE], tmp_path, timeout_s=WORKER_TIMEOUT_S)
    layouts = records[:len(LAYOUTS)]
    assert all(record["worst"] == "equal" for record in layouts), json.dumps(layouts, indent=1)[:6000]
    assert all(set(record["stages"]) >= {"connector", "count", "star", "group"} for record in layouts)
    assert not any(record["worst"] in FAILURES for record in records), _failures(records)
    assert all(record["worst"] == "engine_error" for record in records[len(LAYOUTS):-1]), _failures(records)
    assert records[-1]["worst"] == "unwritable", json.dumps(records[-1], indent=1)[:3000]


@pytest.mark.timeout(900)
@settings(max_examples=2, derandomize=True, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(st.lists(recipes, min_size=28, max_size=28))
def test_damaged_files_read_as_pyarrow_reads_them_or_fail_cleanly(tmp_path_factory, batch):
    """One worker process reads a batch of damaged files; no case may crash, hang, leak a raw error or differ."""
    records = run_cases(batch, tmp_path_factory.mktemp("fuzz"), timeout_s=WORKER_TIMEOUT_S)
    assert not any(record["worst"] in FAILURES for record in records), _failures(records)
    # Not vacuous: some damage leaves values pyarrow reads (flipped value bytes), and the engine reads them alike.
    assert sum(record["worst"] == "equal" for record in records) >= 3, json.dumps(
        [(record["worst"], record["recipe"]["mutations"]) for record in records])
