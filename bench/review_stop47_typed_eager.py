"""Review probe (stop 47): fuzz round 6's join and eager-aggregation families with the typed eager aggregation
rule (optimizer/eager_aggregation.py, 1363535; on by default since the SQL rule and its pushdown were deleted,
bench/results/2026-11-28-eagermove.md) and, per seed, the correlated composite-key / input-rows join-order estimates (6b9a744, off by
default) drawn on or off, against DuckDB.

    .venv/bin/python -m bench.review_stop47_typed_eager --seeds 0:100 [--device cuda-sim]
"""
import random
import sys

import bench.fuzz_round6 as fuzz

_draw = fuzz.set_knobs


def set_knobs(r: random.Random) -> str:
    import gpu_engine.optimizer.join_order as join_order
    import gpu_engine.optimizer.statistics as statistics

    knobs = _draw(r)
    correlated = r.random() < 0.5
    if hasattr(statistics, "KEY_LIKE_ROWS") and hasattr(join_order, "COUNT_INPUT_ROWS"):
        statistics.KEY_LIKE_ROWS = 2.0 if correlated else float("inf")
        join_order.COUNT_INPUT_ROWS = correlated
    return knobs + f" typed_eager=on correlated_keys={correlated}"


fuzz.set_knobs = set_knobs
REWRITTEN = [0, 0]  # aggregations the typed rule looked at, and rewrote (pre-aggregations placed)


def _counted():
    import gpu_engine.optimizer.eager_aggregation as eager

    original = eager._Rewriter.rewritten

    def rewritten(self, agg):
        out = original(self, agg)
        REWRITTEN[0] += 1
        REWRITTEN[1] += out is not None
        return out

    eager._Rewriter.rewritten = rewritten


if __name__ == "__main__":
    _counted()
    code = fuzz.main(sys.argv[1:] or ["--families", "eager,joins"])
    print(f"typed eager aggregation: {REWRITTEN[1]} of {REWRITTEN[0]} aggregations rewritten")
    sys.exit(code)
