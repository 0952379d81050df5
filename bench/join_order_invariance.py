"""Count the optimized plans whose shape changes when their FROM lists and WHERE conjuncts are shuffled.

Why: issue 31 asks that plans not depend on how a query is written, and the
SQL planner joins FROM items as written (:func:`gpu_engine.sql.join_ordering.
join_written`) for the typed rule (:mod:`gpu_engine.optimizer.join_order`) to
order. ``tests/sql/test_plan_invariance.py`` checks a few texts; this plans
every TPC-H and TPC-DS text (SF 0.01) as written and shuffled (the test's
``shuffled``, seeds ``0..seeds-1``), runs the optimizer rules
(:func:`gpu_engine.optimizer.optimize_plan`, which every executed plan goes
through) and names each text whose optimized shape (the test's ``shape``:
node kinds, tables, join types, probe and build sides) changes, with the typed
rule's switches :data:`~gpu_engine.optimizer.join_order.WRITTEN_ORDER_FREE`
and :data:`~gpu_engine.optimizer.join_order.CANONICAL` (both on by default)::

    python -m bench.join_order_invariance
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for path in (REPO_ROOT, REPO_ROOT / "tests" / "sql"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

__all__ = ["main"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--free", choices=("on", "off"), default="on", help="join_order.WRITTEN_ORDER_FREE")
    p.add_argument("--canonical", choices=("on", "off"), default="on", help="join_order.CANONICAL")
    p.add_argument("--seeds", type=int, default=2)
    args = p.parse_args()

    import gpu_engine.optimizer.join_order as join_order
    from bench.tpcds import query_text
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.optimizer import optimize_plan
    from gpu_engine.plans import tpch
    from test_plan_invariance import shape, shuffled

    join_order.WRITTEN_ORDER_FREE, join_order.CANONICAL = args.free == "on", args.canonical == "on"
    tpch_session = Session(device="cpu")
    register_tpch(tpch_session, ensure_tpch(0.01))
    tpcds_session = Session(device="cpu")
    register_tpcds(tpcds_session, ensure_tpcds(0.01))
    texts = [(tpch_session, f"tpch/q{n}", tpch.sql(n, 0.01)) for n in range(1, 23)]
    texts += [(tpcds_session, f"tpcds/q{n}", query_text(n)) for n in range(1, 100)]

    def planned(session: Session, text: str) -> tuple:
        return shape(optimize_plan(session.sql_plan(text), session.statistics()))

    differ = []
    for session, name, text in texts:
        try:
            expected = planned(session, text)
            if any(planned(session, shuffled(text, random.Random(seed))) != expected for seed in range(args.seeds)):
                differ.append(name)
        except Exception as error:  # a text the configuration cannot plan counts apart
            print(f"{name}: {type(error).__name__}: {error}")
    print(f"free {args.free}, canonical {args.canonical}, seeds {args.seeds}: "
          f"{len(differ)} of {len(texts)} optimized plans change shape: {' '.join(differ)}")


if __name__ == "__main__":
    main()
