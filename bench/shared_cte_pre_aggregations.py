"""The pre-aggregations planned in each shared CTE of the 99 TPC-DS texts, as ``Session.sql`` runs them.

Why: ``Session.sql`` computes a CTE read twice or more once, first, as its own text with its readers' filters
OR-ed into it (:mod:`gpu_engine.sql.shared_ctes`, :mod:`gpu_engine.sql.cte_reader_filters`), and the query
then reads its result as a table. ``bench/plan_snapshots.py`` and ``Session.sql_plan`` plan the text whole,
the CTE inlined at each reader with that reader's filter: a rule's decisions there are not the ones run. The
typed eager aggregation rule planned q4/q11/q74's inlined readers as the SQL rule did but not their shared
``year_total`` CTE (bench/results/2026-11-28-eager2-typed-eager-cause.md). This prints, per shared CTE, the
grouping keys of the aggregations below a join with the SQL rule (as committed) and with
``bench/ab.py typed-eager-aggregation``, and the CTEs where they differ.
::

    python -m bench.shared_cte_pre_aggregations --sf 1
"""
import argparse

from bench.ab import _set_typed_eager_aggregation


def pre_aggregations(sf: float, typed: bool) -> dict[str, list[tuple[str, ...]]]:
    """Return ``"q<n>.<cte index>" -> sorted grouping keys of the aggregations below joins`` (or an error's text)."""
    from bench.tpcds import query_text
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from gpu_engine.optimizer import optimize_plan
    from gpu_engine.plans.nodes import AggregationNode, HashJoinNode, walk_plan
    from gpu_engine.sql.plan_cache import PlanCache
    from gpu_engine.sql.shared_ctes import split_shared_ctes

    _set_typed_eager_aggregation(typed)
    try:
        session = Session(device="cpu", drivers=2)
        register_tpcds(session, ensure_tpcds(sf))
        session.plan_cache = PlanCache(entries=0)
        out: dict[str, list] = {}
        for number in range(1, 100):
            shared, _ = split_shared_ctes(query_text(number))
            for index, cte in enumerate(shared):
                try:
                    plan = optimize_plan(session.sql_plan(cte.sql), session.statistics())
                except Exception as error:  # noqa: BLE001 - reported beside the others
                    out[f"q{number}.{index}"] = [(f"{type(error).__name__}: {error}",)]
                    continue
                out[f"q{number}.{index}"] = sorted({
                    tuple(sorted(node.grouping_keys)) for join in walk_plan(plan) if isinstance(join, HashJoinNode)
                    for node in walk_plan(join) if isinstance(node, AggregationNode)})
        return out
    finally:
        _set_typed_eager_aggregation(False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1)
    args = parser.parse_args()
    sql, typed = pre_aggregations(args.sf, False), pre_aggregations(args.sf, True)
    for key in sql:
        mark = "" if sql[key] == typed.get(key) else "   <- differs"
        print(f"{key:7s} sql {sql[key]}  typed {typed.get(key)}{mark}")
    print(f"{sum(sql[k] != typed.get(k) for k in sql)} of {len(sql)} shared CTEs differ")


if __name__ == "__main__":
    main()
