"""Write the plans of TPC-H's 22 and TPC-DS's 99 texts to one JSON file, or check them against such a file.

Why: a change to how the SQL planner hands expressions to PlanBuilder (text
snippets, parsed trees, typed expressions) must not change any plan. This
plans every text (plan cache off) at SF 0.01 and keeps each plan's JSON form
(:func:`gpu_engine.plans.serialization.plan_to_dict`); ``--check`` plans them
again and names every text whose plan differs from the file's. Run from the
repository root, before and after the change::

    python -m bench.plan_snapshots --write /tmp/plans-before.json
    python -m bench.plan_snapshots --check /tmp/plans-before.json

``--optimized`` snapshots each plan after the optimizer rules
(:func:`gpu_engine.optimizer.optimize_plan`, which every executed plan goes
through): ``--write`` without it and ``--check --optimized`` against that file
names the plans a rule changes (``--show`` prints each one's explain, before
and after).

``--check`` compares plans with their node ids and the ``#n`` suffixes of internal column names left out (both are
counters: a plan built in another order, or after another text in the process, numbers them apart though it is the
same plan); ``--raw`` compares the JSON as written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main", "plans"]


def plans(workloads: list[str], sf: float, optimized: bool = False, explained: dict | None = None
          ) -> dict[str, object]:
    """Return ``"workload/query" -> the plan's JSON document`` (or the error's text for a text that fails).

    ``optimized``: each plan after :func:`gpu_engine.optimizer.optimize_plan`. ``explained``, when given, gets
    ``"workload/query" -> (explain before the rules, explain after)``.
    """
    from gpu_engine.optimizer import optimize_plan
    from gpu_engine.plans.explain import format_plan
    from bench.first_process_costs import _workload
    from gpu_engine import Session
    from gpu_engine.plans.serialization import plan_to_dict
    from gpu_engine.sql.plan_cache import PlanCache

    out: dict[str, object] = {}
    for name in workloads:
        texts, register = _workload(name, sf)
        session = Session(device="cpu", drivers=2)
        register(session)
        session.plan_cache = PlanCache(entries=0)
        for key, text in texts.items():
            try:
                plan = session.sql_plan(text)
                after = optimize_plan(plan, session.statistics()) if optimized else plan
                out[f"{name}/{key}"] = plan_to_dict(after)
                if explained is not None:
                    explained[f"{name}/{key}"] = (format_plan(plan, full=True), format_plan(after, full=True))
            except Exception as error:  # noqa: BLE001 - a failing text is part of the snapshot
                out[f"{name}/{key}"] = f"{type(error).__name__}: {error}"
    return out


_NUMBERED_NAME = re.compile(r"#\d+")


def _normalized(document):
    """Return a plan's JSON document without node ids and with internal names' ``#n`` counters dropped."""
    if isinstance(document, dict):
        return {key: _normalized(value) for key, value in document.items() if key != "id"}
    if isinstance(document, list):
        return [_normalized(value) for value in document]
    if isinstance(document, str):
        return _NUMBERED_NAME.sub("#", document)
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--workloads", default="tpch,tpcds")
    parser.add_argument("--optimized", action="store_true", help="snapshot the plans after the optimizer rules")
    parser.add_argument("--show", action="store_true", help="with --check: print each differing plan's explain")
    parser.add_argument("--raw", action="store_true", help="with --check: compare node ids and #n counters too")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="write the plans to this file")
    group.add_argument("--check", type=Path, help="compare the plans with this file; exit 1 on a difference")
    args = parser.parse_args(argv)
    explained: dict = {}
    current = plans(args.workloads.split(","), args.sf, args.optimized, explained if args.show else None)
    if args.write:
        args.write.write_text(json.dumps(current, sort_keys=True, indent=1))
        print(f"wrote {len(current)} plans to {args.write}")
        return 0
    before = json.loads(args.check.read_text())
    same = (lambda a, b: a == b) if args.raw else (lambda a, b: _normalized(a) == _normalized(b))
    differing = sorted(key for key in set(before) | set(current) if not same(before.get(key), current.get(key)))
    print(f"{len(current)} plans, {len(differing)} differ" + (": " + ", ".join(differing) if differing else ""))
    for key in differing if args.show else ():
        before_text, after_text = explained.get(key, ("", ""))
        print(f"\n== {key}\n-- as planned:\n{before_text}\n-- optimized:\n{after_text}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
