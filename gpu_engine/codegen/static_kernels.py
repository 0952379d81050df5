"""Compile the static kernels once, at set-up, so that no first query waits for them.

Why: the engine has two kinds of kernels. Generated ones depend on a query's
expressions; they compile in the background while the query runs on the
lowest tier (:mod:`gpu_engine.codegen.background_compiles`). The lowest tier
itself is the eager evaluator and the *static* kernels (``gpu_engine.kernels``:
hashing, joins, grouping, sorting, gathers, Parquet decoding), which do not
depend on a query, only on column types. numba compiles each of them at first
use and caches it per machine, so without this step a fresh install's first
query waited ~30-60 s for them. ``make demo`` runs this step (``gpu-engine
precompile``) as part of set-up, before any data is generated.

What it runs: the 22 TPC-H queries, the primer query and a tour of what they
leave out (:data:`TOUR_SQL`: windows, variance, sums of doubles, grouping
sets, set operations, outer joins, semi joins on ``<>``) as SQL, unfused (so every operator runs its
static kernels and no generated kernel is made) with one and with two drivers
(the local exchange's partitioning kernels), and as fused plans on their
lowest tier (``compile_mode="lowest"``: nothing generated), over TPC-H at
scale factor 0.001 (generated in a temporary folder, under a second) on the
given device. That covers the column types and operators of TPC-H and TPC-DS,
which are the common ones; a kernel another type needs still compiles at its
first use, once per machine.

Then the static kernels those runs do not reach, or not with every argument
type their callers give: each module in :data:`PLACEHOLDER_MODULES` says which
(``precompile_calls(device)``: kernels paired with placeholder arguments of the
types its callers pass), and each signature is compiled without running the
kernel: the join-key filters' row tests (one signature per key width), the
fused aggregation's host twins (string interning, slot compaction; they would
otherwise compile in the compile process before a fused aggregation could
switch tiers) and, where the device decoder runs, its host page planning. ``bench/first_process_costs.py`` lists
the static kernels a new process still compiles after this step.
"""

from __future__ import annotations

import importlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PLACEHOLDER_MODULES", "PRECOMPILE_SCALE_FACTOR", "TOUR_SQL", "PrecompileSummary", "compile_placeholder_kernels",
           "placeholder_signatures", "precompile_static_kernels"]

PRECOMPILE_SCALE_FACTOR = 0.001

#: SQL over the TPC-H tables for the operators and types the 22 queries leave out (windows, variance and
#: correlation, sums of doubles, grouping sets, set operations, outer joins, per-group top-N, medians and
#: quantiles: kernels/order_statistics.py, left and right semi joins on ``<>``, joins on strings, DOUBLE keys), run with the
#: TPC-H texts. A new process after set-up listed what TPC-DS still compiled (``bench/first_process_costs.py``):
#: window scans, moment aggregates, float sums and gathers of other types; these reach them by feature.
TOUR_SQL = (
    "SELECT o_custkey, o_orderdate, row_number() OVER (PARTITION BY o_custkey ORDER BY o_orderdate) AS rn, "
    "rank() OVER (PARTITION BY o_orderpriority ORDER BY o_totalprice DESC) AS rk, "
    "dense_rank() OVER (ORDER BY o_orderstatus) AS dr, sum(o_totalprice) OVER (PARTITION BY o_custkey) AS total, "
    "avg(o_totalprice) OVER (PARTITION BY o_custkey ORDER BY o_orderdate ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) "
    "AS moving, sum(o_totalprice) OVER (PARTITION BY o_custkey ORDER BY o_orderdate) AS running, "
    "min(o_totalprice) OVER (PARTITION BY o_custkey) AS low, max(o_orderdate) OVER (PARTITION BY o_orderpriority) "
    "AS latest, count(*) OVER (PARTITION BY o_orderstatus) AS n, "
    "lag(o_totalprice) OVER (PARTITION BY o_custkey ORDER BY o_orderdate) AS previous, "
    "lead(o_orderdate, 1) OVER (ORDER BY o_orderkey) AS next_date FROM orders",
    "SELECT l_suppkey, CAST(l_quantity AS DOUBLE) AS q, avg(CAST(l_quantity AS DOUBLE)) OVER (PARTITION BY l_suppkey) "
    "AS mean, stddev_samp(CAST(l_quantity AS DOUBLE)) OVER (PARTITION BY l_suppkey) AS deviation, "
    "sum(CAST(l_extendedprice AS DOUBLE)) OVER (PARTITION BY l_suppkey ORDER BY l_orderkey, l_linenumber) AS running "
    "FROM lineitem",
    "SELECT l_returnflag, stddev_samp(l_quantity) AS s, var_pop(l_extendedprice) AS v, "
    "stddev_samp(CAST(l_discount AS DOUBLE)) AS sd, avg(CAST(l_tax AS DOUBLE)) AS t, "
    "sum(CAST(l_quantity AS DOUBLE)) AS q, corr(CAST(l_quantity AS DOUBLE), CAST(l_extendedprice AS DOUBLE)) AS c, "
    "count(DISTINCT l_suppkey) AS suppliers FROM lineitem GROUP BY l_returnflag",
    "SELECT stddev_samp(CAST(o_totalprice AS DOUBLE)) AS s, var_samp(o_totalprice) AS v, "
    "sum(CAST(o_totalprice AS DOUBLE)) AS t FROM orders",
    "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS q, count(*) AS n, grouping(l_returnflag) AS g "
    "FROM lineitem GROUP BY ROLLUP (l_returnflag, l_linestatus)",
    "SELECT n_nationkey FROM nation INTERSECT SELECT s_nationkey FROM supplier",
    "SELECT c_nationkey FROM customer EXCEPT SELECT s_nationkey FROM supplier",
    "SELECT n_name FROM nation UNION SELECT r_name FROM region",
    "SELECT n_nationkey, s_suppkey FROM nation FULL OUTER JOIN supplier ON n_nationkey = s_nationkey",
    "SELECT * FROM (SELECT l_orderkey, l_extendedprice, row_number() OVER (PARTITION BY l_suppkey "
    "ORDER BY l_extendedprice DESC) AS rn FROM lineitem) AS ranked WHERE rn <= 3",
    "SELECT l_returnflag, median(l_quantity) AS m, quantile_cont(CAST(l_extendedprice AS DOUBLE), 0.9) AS p90 "
    "FROM lineitem GROUP BY l_returnflag",
    # Semi joins whose extra condition is `probe.c <> build.c` decide by each key's bounds of c
    # (kernels/hash_join.py value_bounds, add_value_bounds): the first a left_semi (the build side's bounds),
    # the second a right_semi (the probe side's bounds merged); TPC-DS q16/q94/q95's EXISTS shape.
    "SELECT count(*) AS n FROM lineitem l1 WHERE EXISTS (SELECT 1 FROM lineitem l2 "
    "WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey)",
    "SELECT count(*) AS n FROM orders o WHERE EXISTS (SELECT 1 FROM lineitem l "
    "WHERE l.l_orderkey = o.o_orderkey AND l.l_partkey <> o.o_custkey)",
    # A join on string keys (kernels/group_by.py packs them into key words; TPC-DS q4's customer ids).
    "SELECT count(*) AS n FROM customer c JOIN supplier s ON c.c_phone = s.s_phone",
    # DOUBLE grouping keys (kernels/hash.py's key words of doubles; TPC-DS q12, q36): TPC-H groups by none.
    "SELECT CAST(l_discount AS DOUBLE) AS d, count(*) AS n FROM lineitem GROUP BY CAST(l_discount AS DOUBLE)",
)

#: Modules whose ``precompile_calls(device)`` pair static kernels with arguments of the types their callers
#: pass, for kernels the TPC-H runs miss (a module adds itself here when it has such kernels).
PLACEHOLDER_MODULES = (
    "gpu_engine.exec.dynamic_filters",
    "gpu_engine.kernels.string_keys",
    "gpu_engine.kernels.slot_compaction",
    "gpu_engine.kernels.parquet_device",
)


@dataclass(frozen=True)
class PrecompileSummary:
    """What a precompile run did: queries run, kernels numba compiled (not loaded from its cache) and seconds."""

    queries: int
    kernels_compiled: int
    compile_seconds: float
    seconds: float


def precompile_static_kernels(device: str = "cpu", data_dir: str | Path | None = None, progress=None,
                              queries=None, tour=TOUR_SQL, placeholders: bool = True) -> PrecompileSummary:
    """Run TPC-H unfused at a tiny scale on ``device`` so numba compiles (and caches) the static kernels.

    ``data_dir`` is where the TPC-H files are generated (default: a temporary folder, removed after);
    ``progress`` is called with a line per step when given; ``queries`` (TPC-H numbers) defaults to all 22;
    ``tour`` the SQL texts run beside them (default :data:`TOUR_SQL`); ``placeholders=False`` leaves out
    :func:`compile_placeholder_kernels`.
    """
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.plans.tpch import PRIMER_SQL, TPCH_QUERY_NUMBERS, spec_sql

    started = time.perf_counter()
    compiled, compile_seconds = compile_placeholder_kernels(device) if placeholders else (0, 0.0)
    runs = 0
    if progress is not None:
        progress(f"precompile: kernels no TPC-H run reaches: {compiled} compiled ({compile_seconds:.1f} s)")
    with tempfile.TemporaryDirectory(prefix="gpu-engine-precompile-") as temporary:
        folder = ensure_tpch(PRECOMPILE_SCALE_FACTOR, Path(data_dir or temporary) / "tpch", progress=False)
        numbers = TPCH_QUERY_NUMBERS if queries is None else queries
        texts = [PRIMER_SQL] + [spec_sql(n, PRECOMPILE_SCALE_FACTOR) for n in numbers] + list(tour)
        # Unfused plans, and the fused plans' lowest tier (which probes and filters on its own layouts); never
        # a generated kernel.
        for drivers, config in ((1, {"fuse": False}), (2, {"fuse": False}), (2, {"compile_mode": "lowest"})):
            session = Session(device=device, drivers=drivers, **config)
            register_tpch(session, folder)
            for text in texts:
                session.sql(text)
                stats = session.last_stats()
                compiled += stats.kernels_compiled
                compile_seconds += stats.compile_seconds
                runs += 1
            if progress is not None:
                plans = "unfused" if config.get("fuse") is False else "fused, lowest tier"
                progress(f"precompile: {drivers} driver(s), {plans}: {compiled} kernels compiled so far "
                         f"({compile_seconds:.1f} s)")
    return PrecompileSummary(runs, compiled, compile_seconds, time.perf_counter() - started)


def placeholder_signatures(device) -> list[tuple[Any, tuple]]:
    """Return ``(dispatcher, signature)`` for each kernel the :data:`PLACEHOLDER_MODULES` name for ``device`` (a
    :class:`~gpu_engine.device.Device` or its name)."""
    if isinstance(device, str):
        from gpu_engine.device import get_device

        device = get_device(device)
    pairs = []
    for name in PLACEHOLDER_MODULES:
        for dispatcher, arguments in importlib.import_module(name).precompile_calls(device):
            pairs.append((dispatcher, tuple(dispatcher.typeof_pyval(argument) for argument in arguments)))
    return pairs


def compile_placeholder_kernels(device) -> tuple[int, float]:
    """Compile (or load from numba's cache) every :func:`placeholder_signatures` kernel; return how many numba
    compiled on this thread and their seconds. Nothing runs: each signature is compiled as it is."""
    from gpu_engine.exec.device_counters import compiles_now, watch_compilations

    watch_compilations()
    before = compiles_now()
    for dispatcher, signature in placeholder_signatures(device):
        dispatcher.compile(signature)
    done = compiles_now() - before
    return done.kernels_compiled, done.compile_seconds
