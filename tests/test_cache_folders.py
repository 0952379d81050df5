"""The test suite writes its caches into a test folder, never into the user's ``~/.cache``.

Why: running ``make test`` must not fill (or depend on) the folders a user's
own runs of the engine keep; tests/conftest.py points every cache variable at
the test cache root unless the user configured the variable. These tests run
a real fused query and check where its generated kernel module went.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from gpu_engine import Session
from gpu_engine.codegen.compiled_modules import generated_folder
from gpu_engine.connectors.tpch_data import default_tpch_root
from gpu_engine.kernels.ptx_cache import ptx_cache_directory
from gpu_engine.plans import PlanBuilder

USER_CACHE = (Path.home() / ".cache").resolve()
#: What tests/conftest.py sets (its TEST_CACHE_VARIABLES): where the engine and matplotlib write caches.
CACHE_VARIABLES = ("GPU_ENGINE_CACHE_DIR", "GPU_ENGINE_PTX_CACHE", "GPU_ENGINE_DATA", "MPLCONFIGDIR")


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder)


def test_every_cache_variable_is_set_and_none_points_into_the_user_cache():
    for variable in CACHE_VARIABLES:
        assert os.environ.get(variable), f"{variable} is not set during the tests"
    for folder in (generated_folder(), ptx_cache_directory(), default_tpch_root()):
        assert not _inside(folder, USER_CACHE), f"{folder} is in the user's ~/.cache"


def test_a_fused_query_writes_its_generated_kernel_under_the_test_cache(monkeypatch):
    """Generated kernels carry no literal values (they are launch parameters), so the module a query loads is
    recorded at its load: the process-wide caches are emptied for the test, so the query loads (or writes) its
    modules again, and each one's file must lie in the test cache folder."""
    from gpu_engine.codegen import (compiled_modules, fused_aggregation_kernel, fused_filter_kernel,
                                    fused_project_kernel, fusion_program)
    from gpu_engine.codegen.generation_cache import GenerationCache

    for module, name in ((fused_aggregation_kernel, "GENERATED_AGGREGATIONS"), (fused_filter_kernel, "GENERATED_FILTERS"),
                         (fused_project_kernel, "GENERATED_PROJECTIONS"), (fusion_program, "PROGRAMS")):
        monkeypatch.setattr(module, name, GenerationCache())
    monkeypatch.setattr(compiled_modules, "_MODULES", {})
    loaded: list[Path] = []
    load = compiled_modules._load

    def recording_load(path, source, name):
        loaded.append(Path(path))
        return load(path, source, name)

    monkeypatch.setattr(compiled_modules, "_load", recording_load)
    session = Session(device="cpu", drivers=1)
    session.register("t", pa.table({"k": [1, 2, 1], "v": [10, 20, 30]}))
    plan = (PlanBuilder(session.catalog).table_scan("t", ["k", "v"]).filter("v > -987654")
            .aggregation(["k"], ["sum(v) AS s"]).plan())
    result = session.execute(plan)
    assert sorted(zip(result.column("k").to_pylist(), result.column("s").to_pylist())) == [(1, 40), (2, 20)]
    assert loaded, f"the fused query loaded no generated module (folder {generated_folder()})"
    for path in loaded:
        assert path.exists() and _inside(path, generated_folder().resolve()), path
        assert not _inside(path, USER_CACHE), path
