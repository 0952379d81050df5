"""Measure what planning a new SQL text costs: TPC-H's 22 and TPC-DS's 99 texts with the plan cache off.

Issue 29 item 4 / issue 31 item 4: every ad-hoc query, every first run and
every new process (a Spark executor) plans its text from scratch. This bench
plans each text once to load what planning imports, then ``--rounds`` times
more in the same process with ``Session.plan_cache`` keeping nothing, and
reports per workload:

- process CPU (user + system) of planning all texts, median over the rounds;
- where the time goes, by stage (exclusive wall time of the functions of
  :class:`bench.fixed_cost.PhaseTimer`): sqlglot's parse (with the text's
  checks), ``qualify``, ``pushdown_projections``, ``simplify``, the
  rewriter's own passes, the planner's rules, PlanBuilder's nodes and its
  snippet translation;
- how many snippets PlanBuilder tokenized and parsed (text the planner wrote
  that sqlglot read again), and the slowest texts.

Wall times on a loaded machine are long; read the CPU and the shares. Run from
the repository root::

    python -m bench.planning_costs --rounds 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main"]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _install_stage_timers(timer) -> None:
    """Wrap the functions each stage is made of (exclusive: an inner stage's time is not its caller's)."""
    import gpu_engine.plans.plan_builder as plan_builder
    import gpu_engine.sql as sql
    import gpu_engine.sql.join_ordering as join_ordering
    import gpu_engine.sql.planner as planner
    import gpu_engine.sql.rewrite as rewrite

    timer.wrap(sql, "plan_sql", "other (literal lists, window filters)")
    timer.wrap(sql, "parse_and_qualify", "rewrite: own passes")
    timer.wrap(rewrite, "_parse", "rewrite: parse and its checks")
    timer.wrap(rewrite, "qualify", "rewrite: sqlglot qualify")
    timer.wrap(rewrite, "pushdown_projections", "rewrite: sqlglot pushdown_projections")
    timer.wrap(rewrite, "simplify_keeping_arithmetic", "rewrite: sqlglot simplify")
    timer.wrap(planner.QueryPlanner, "plan", "planner: rules")
    for owner in (join_ordering, planner):  # the planner calls its own imported name
        timer.wrap(owner, "join_written", "planner: joins as written")
    for name in ("parse_expression", "parse_projection", "parse_aggregate", "parse_sort_key", "parse_column_name"):
        timer.wrap(plan_builder, name, "PlanBuilder: snippets")
    timer.wrap(plan_builder.PlanBuilder, "_add", "PlanBuilder: nodes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default="tpch,tpcds")
    args = parser.parse_args(argv)

    import gpu_engine.plans.sql_translator as translator
    from bench.first_process_costs import _workload
    from bench.fixed_cost import PhaseTimer
    from gpu_engine import Session
    from gpu_engine.sql.plan_cache import PlanCache

    work = []
    for name in args.workloads.split(","):
        texts, register = _workload(name, args.sf)
        session = Session(device="cpu", drivers=2)
        register(session)
        session.plan_cache = PlanCache(entries=0)
        for text in texts.values():  # what planning imports and builds once per process
            session.sql_plan(text)
        work.append((name, session, texts))

    tokenized = []
    tokenize = translator._DUCKDB.tokenize
    translator._DUCKDB.tokenize = lambda text: tokenized.append(text) or tokenize(text)
    timer = PhaseTimer()
    _install_stage_timers(timer)
    load = os.getloadavg()
    print(f"# Planning new texts (plan cache off), sf{args.sf:g}, {args.rounds} rounds; load average {load[0]:.1f}")
    try:
        for name, session, texts in work:
            cpu, stages, per_text = [], {}, {key: [] for key in texts}
            for _ in range(args.rounds):
                timer.reset()
                tokenized.clear()
                started = _cpu_seconds()
                for key, text in texts.items():
                    mark = _cpu_seconds()
                    session.sql_plan(text)
                    per_text[key].append(_cpu_seconds() - mark)
                cpu.append(_cpu_seconds() - started)
                for stage, seconds in timer.seconds.items():
                    stages.setdefault(stage, []).append(seconds)
            wall = sum(statistics.median(v) for v in stages.values())
            print(f"\n## {name}: {len(texts)} texts, {statistics.median(cpu) * 1000:.0f} ms CPU (median of "
                  f"{[round(c * 1000) for c in cpu]}), snippets tokenized by PlanBuilder: {len(tokenized)}\n")
            print("| stage | ms (wall, exclusive) | share |\n|---|---|---|")
            for stage, values in sorted(stages.items(), key=lambda kv: -statistics.median(kv[1])):
                print(f"| {stage} | {statistics.median(values) * 1000:.1f} | {statistics.median(values) / wall:.1%} |")
            slowest = sorted(per_text.items(), key=lambda kv: -statistics.median(kv[1]))[:8]
            print("\nslowest (ms CPU): " + ", ".join(f"{k} {statistics.median(v) * 1000:.0f}" for k, v in slowest))
    finally:
        timer.restore()
        translator._DUCKDB.tokenize = tokenize
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
