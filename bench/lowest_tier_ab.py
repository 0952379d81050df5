"""A/B the lowest tier (``compile_mode="lowest"``) of TPC-DS or TPC-H queries with one change switched off and on.

Why: issue 29's first runs run mostly on the lowest tier (the eager expression
evaluator and the static kernels), so a change to the evaluator is judged by
what a first run pays there, not by warm runs (which :mod:`bench.ab` times).
Each switch (:data:`SWITCHES`) names what it replaces while off. One Session
per side runs every query with ``compile_mode="lowest"`` (nothing generated or
compiled); each answer is checked against DuckDB's first, then ``--runs``
rounds run every query on both sides, interleaved (the side going first
alternates), and each query's process CPU (user + sys, every thread) and wall
medians are printed with the totals and the load average.

    python bench/lowest_tier_ab.py fixed-width-case tpcds 9,28,59 --sf 1 --runs 5
    python bench/lowest_tier_ab.py constant-comparisons tpcds 28 --sf 1 --runs 5
    python bench/lowest_tier_ab.py shared-arguments tpcds 9,66 --sf 1 --runs 5
"""
import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.ab import _workload  # noqa: E402  (a query's folder, text, registration and result check)
from bench.tpcds_cpu import measure  # noqa: E402  (process CPU beside wall)


def _choice_case(device, conditions, values, default, dtype, rows):
    """The fixed-width CASE as before f8516d5: a branch number per row, then a ``where`` per branch."""
    from gpu_engine.columnar import Column
    from gpu_engine.columnar.types import physical_dtype
    from gpu_engine.expressions.logical import _words, true_rows

    xp = device.xp
    branches = list(values) + ([default] if default is not None else [])
    choice = xp.full(rows, len(values) if default is not None else -1, dtype=xp.int32)
    undecided = xp.ones(rows, dtype=xp.bool_)
    for k, condition in enumerate(conditions):
        hit = undecided & true_rows(condition)
        choice = xp.where(hit, k, choice)
        undecided &= ~hit
    validity = xp.zeros(rows, dtype=xp.bool_)
    for k, branch in enumerate(branches):
        validity = xp.where(choice == k, True if branch.validity is None else branch.validity, validity)
    if any(branch.data.ndim == 2 for branch in branches):
        from gpu_engine.expressions.numeric import as_words

        data = xp.zeros((rows, _words(branches)), dtype=xp.int64)
        for k, branch in enumerate(branches):
            data = xp.where((choice == k)[:, None], as_words(device, branch), data)
        return Column(dtype, data, validity)
    data = xp.zeros(rows, dtype=physical_dtype(dtype))
    for k, branch in enumerate(branches):
        data = xp.where(choice == k, branch.data, data)
    return Column(dtype, data, validity)


def _fixed_width_case():
    """A fixed-width CASE picked through a branch number per row (``logical._case_fixed_width`` off)."""
    import gpu_engine.expressions.logical as module
    return module, "_case_fixed_width", _choice_case


def _constant_comparisons():
    """Comparisons with a constant evaluated as two columns (``evaluate._host_constant`` off)."""
    import importlib

    module = importlib.import_module("gpu_engine.expressions.evaluate")  # (the package exports a function of its name)
    return module, "_host_constant", lambda expr: None


def _shared_arguments():
    """Every aggregate argument evaluated whole (``HashAggregation``'s shared subexpressions off)."""
    import gpu_engine.operators.hash_aggregation as module
    return module, "hoist_common_subexpressions", lambda expressions: ([], tuple(expressions))


#: Switch name -> a function returning (module, attribute, its stand-in while the change is off).
SWITCHES = {
    "fixed-width-case": _fixed_width_case,
    "constant-comparisons": _constant_comparisons,
    "shared-arguments": _shared_arguments,
}


def main():
    """Run the A/B and print each query's and the totals' medians."""
    p = argparse.ArgumentParser()
    p.add_argument("switch", choices=sorted(SWITCHES))
    p.add_argument("workload", choices=("tpch", "tpcds"))
    p.add_argument("queries", help="comma-separated query numbers")
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--drivers", type=int, default=2)
    a = p.parse_args()
    from duckdb_reference import duckdb_connection, duckdb_table
    from gpu_engine import Session

    module, attribute, stand_in = SWITCHES[a.switch]()
    sides = {"without": stand_in, "with": getattr(module, attribute)}
    queries = [int(q) for q in a.queries.split(",")]
    work = {q: _workload(a.workload, q, a.sf) for q in queries}
    folder, _, register, _ = work[queries[0]]
    sessions = {}
    for side in sides:
        sessions[side] = Session(device="cpu", drivers=a.drivers, compile_mode="lowest")
        register(sessions[side], folder)
    duck = duckdb_connection(folder, threads=2)
    for q, (_, sql, _, check) in work.items():
        expected = duckdb_table(duck, sql)
        for side, session in sessions.items():
            setattr(module, attribute, sides[side])
            problem = check(session.sql(sql), expected)
            if problem is not None:
                raise SystemExit(f"q{q} {side}: MISMATCH {problem[:300]}")
    samples = {(q, side): ([], []) for q in queries for side in sides}
    for run in range(a.runs):
        order = list(sides) if run % 2 == 0 else list(reversed(sides))
        for q, (_, sql, _, _) in work.items():
            for side in order:
                setattr(module, attribute, sides[side])
                _, wall, cpu = measure(lambda: sessions[side].sql(sql))
                samples[q, side][0].append(wall)
                samples[q, side][1].append(cpu)
    setattr(module, attribute, sides["with"])
    m = statistics.median
    print(f"{a.switch}: {a.workload} sf{a.sf:g}, lowest tier, drivers {a.drivers}, {a.runs} interleaved runs, "
          f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    totals = {side: [0.0, 0.0] for side in sides}
    for q in queries:
        line = []
        for side in sides:
            wall, cpu = samples[q, side]
            totals[side][0] += m(wall)
            totals[side][1] += m(cpu)
            line.append(f"{side} cpu {m(cpu) * 1000:7.1f} wall {m(wall) * 1000:7.1f}")
        ratio = m(samples[q, "with"][1]) / max(m(samples[q, "without"][1]), 1e-9)
        print(f"  q{q:<3d} " + " | ".join(line) + f" | cpu with/without {ratio:.2f}")
    print("  total " + " | ".join(f"{side} cpu {cpu * 1000:7.1f} wall {wall * 1000:7.1f}"
                                  for side, (wall, cpu) in totals.items()))


if __name__ == "__main__":
    main()
