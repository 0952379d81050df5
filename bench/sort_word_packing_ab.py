"""A/B of packing sort words into one word (kernels.sort.packed_key_words) on TPC-DS queries that sort or window.

One process, one Session, alternating sides per run (A: packing off, B: on), process CPU (user+sys) and wall
medians, DuckDB in the same process; each side's answer checked against DuckDB first. Packing off replaces
``packed_key_words`` with the identity and ``stable_order`` with ``xp.lexsort`` (as before the change) where
kernels.sort and the window operator call them.

    python -m bench.sort_word_packing_ab --sf 1 --queries 12,20,36,47,51,57,67,70,86,89,98 --runs 7
"""
import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.tpcds_cpu import measure  # noqa: E402


def set_packing(on: bool) -> None:
    """Switch packing on (the code as it is) or off (lexsort over the unpacked words)."""
    import gpu_engine.kernels.sort as sort
    import gpu_engine.operators.window as window
    if not hasattr(sort, "_ab_originals"):
        sort._ab_originals = (sort.packed_key_words, sort.stable_order)
    packed, stable = sort._ab_originals
    if not on:
        packed = lambda device, words: words  # noqa: E731
        stable = lambda device, words, pack=True: device.xp.lexsort(words)  # noqa: E731
    for module in (sort, window):
        module.packed_key_words, module.stable_order = packed, stable


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--queries", default="12,20,36,47,51,57,67,70,86,89,98")
    p.add_argument("--runs", type=int, default=7)
    a = p.parse_args()
    from bench.run_bench import settle_compiled_tier
    from bench.tpcds import query_text, result_mismatch
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    folder = ensure_tpcds(a.sf, None)
    session = Session(device="cpu", drivers=2)
    register_tpcds(session, folder)
    duck = duckdb_connection(folder, threads=2)
    m = statistics.median
    totals = {"off": 0.0, "on": 0.0, "duck": 0.0}
    print(f"sf {a.sf}, runs {a.runs}, load {os.getloadavg()[0]:.1f}")
    for n in [int(q) for q in a.queries.split(",")]:
        sql = query_text(n)
        expected = duckdb_table(duck, sql)
        problems = []
        for on in (False, True):
            set_packing(on)
            problem = result_mismatch(session.sql(sql, timeout=300), expected, sql, rows_mismatch)
            problems.append("equal" if problem is None else "MISMATCH " + problem.splitlines()[0][:80])
        settle_compiled_tier(lambda: session.sql(sql, timeout=300), limit_s=30)
        cpu = {"off": [], "on": [], "duck": []}
        wall = {"off": [], "on": [], "duck": []}
        for i in range(a.runs):
            _, w, c = measure(lambda: duckdb_table(duck, sql)); cpu["duck"].append(c); wall["duck"].append(w)
            for on in ((False, True) if i % 2 == 0 else (True, False)):
                set_packing(on)
                _, w, c = measure(lambda: session.sql(sql, timeout=300))
                key = "on" if on else "off"
                cpu[key].append(c); wall[key].append(w)
        set_packing(True)
        for k in totals:
            totals[k] += m(cpu[k])
        print(f"q{n:<3} cpu off {m(cpu['off'])*1000:7.1f} on {m(cpu['on'])*1000:7.1f} "
              f"({(m(cpu['on'])/m(cpu['off'])-1)*100:+5.1f}%) duck {m(cpu['duck'])*1000:6.1f} | wall off "
              f"{m(wall['off'])*1000:7.1f} on {m(wall['on'])*1000:7.1f} | answers off/on: {problems[0]}/{problems[1]}"
              f" | load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"TOTAL cpu off {totals['off']*1000:.0f} on {totals['on']*1000:.0f} "
          f"({(totals['on']/totals['off']-1)*100:+.1f}%) duck {totals['duck']*1000:.0f}")


if __name__ == "__main__":
    main()
