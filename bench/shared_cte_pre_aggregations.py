"""The pre-aggregations planned in each shared CTE of the 99 TPC-DS texts, as ``Session.sql`` runs them.

Why: ``Session.sql`` computes a CTE read twice or more once, first, as its own text with its readers' filters
OR-ed into it (:mod:`gpu_engine.sql.shared_ctes`, :mod:`gpu_engine.sql.cte_reader_filters`), and the query
then reads its result as a table. ``bench/plan_snapshots.py`` and ``Session.sql_plan`` plan the text whole,
the CTE inlined at each reader with that reader's filter: a rule's decisions there are not the ones run. The
typed eager aggregation rule planned q4/q11/q74's inlined readers as the SQL rule did but not their shared
``year_total`` CTE until an OR of one column's constants pinned its values
(bench/results/2026-11-28-eager2-typed-eager-cause.md). This prints, per shared CTE, the grouping keys of
the aggregations below a join (:mod:`gpu_engine.optimizer.eager_aggregation`'s pre-aggregations) with the
rule and without it (``bench/ab.py eager-aggregation``); ``--expect FILE`` compares them with a saved
output's (this script's or the older one's ``sql [...]`` column, the SQL planner's rule before 2026-11-28's
move: bench/results/2026-11-28-eagermove.md).
::

    python -m bench.shared_cte_pre_aggregations --sf 1 [--expect old-output.txt]
"""
import argparse
import ast
import re


def pre_aggregations(sf: float, eager: bool) -> dict[str, list[tuple[str, ...]]]:
    """Return ``"q<n>.<cte index>" -> sorted grouping keys of the aggregations below joins`` (or an error's text)."""
    import gpu_engine.optimizer as optimizer
    from bench.tpcds import query_text
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from gpu_engine.optimizer.eager_aggregation import eager_aggregate
    from gpu_engine.plans.nodes import AggregationNode, HashJoinNode, walk_plan
    from gpu_engine.sql.plan_cache import PlanCache
    from gpu_engine.sql.shared_ctes import split_shared_ctes

    rules = optimizer.ESTIMATE_RULES
    optimizer.ESTIMATE_RULES = rules if eager else tuple(r for r in rules if r is not eager_aggregate)
    try:
        session = Session(device="cpu", drivers=2)
        register_tpcds(session, ensure_tpcds(sf))
        session.plan_cache = PlanCache(entries=0)
        out: dict[str, list] = {}
        for number in range(1, 100):
            shared, _ = split_shared_ctes(query_text(number))
            for index, cte in enumerate(shared):
                try:
                    plan = optimizer.optimize_plan(session.sql_plan(cte.sql), session.statistics())
                except Exception as error:  # noqa: BLE001 - reported beside the others
                    out[f"q{number}.{index}"] = [(f"{type(error).__name__}: {error}",)]
                    continue
                out[f"q{number}.{index}"] = sorted({
                    tuple(sorted(node.grouping_keys)) for join in walk_plan(plan) if isinstance(join, HashJoinNode)
                    for node in walk_plan(join) if isinstance(node, AggregationNode)})
        return out
    finally:
        optimizer.ESTIMATE_RULES = rules


def _expected(path: str) -> dict[str, list]:
    """Read ``key  with [...]`` (this script) or ``key sql [...]`` (the script before the move) lines."""
    out = {}
    for line in open(path):
        found = re.match(r"(q\d+\.\d+)\s+(?:with|sql) (\[.*?\])  ", line)
        if found:
            out[found.group(1)] = ast.literal_eval(found.group(2))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1)
    parser.add_argument("--expect", help="a saved output to compare the 'with' column with")
    args = parser.parse_args()
    with_rule, without = pre_aggregations(args.sf, True), pre_aggregations(args.sf, False)
    expected = _expected(args.expect) if args.expect else None
    for key in with_rule:
        mark = "" if expected is None or [tuple(k) for k in expected.get(key, [])] == with_rule[key] else \
            f"   <- differs from {expected.get(key)}"
        print(f"{key:7s} with {with_rule[key]}  without {without[key]}{mark}")
    print(f"{sum(with_rule[k] != without[k] for k in with_rule)} of {len(with_rule)} shared CTEs pre-aggregated")
    if expected is not None:
        print(f"{sum([tuple(x) for x in expected.get(k, [])] != with_rule[k] for k in with_rule)} of "
              f"{len(with_rule)} differ from {args.expect}")


if __name__ == "__main__":
    main()
