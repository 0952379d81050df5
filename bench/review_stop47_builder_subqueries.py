"""Review probe (stop 47): hand-built (PlanBuilder) and JSON plans holding typed subquery predicates
(plans/subqueries.py, optimizer/decorrelation.py), against DuckDB: subquery plans built by a builder of their own
(node ids that repeat the outer plan's), subquery columns named as outer columns, a subquery predicate beside
others, pickling (Spark's cloudpickle ships plans and functions) and JSON round trips.

    .venv/bin/python -m bench.review_stop47_builder_subqueries [cpu|cuda-sim]
"""
import pickle
import sys

import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import duckdb_table, duckdb_with_tables, rows_mismatch, session_with_tables  # noqa: E402
from gpu_engine.plans import PlanBuilder  # noqa: E402
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal  # noqa: E402
from gpu_engine.plans.serialization import plan_from_json, plan_to_json  # noqa: E402
from gpu_engine.plans.subqueries import Exists, InSubquery, OuterColumn  # noqa: E402

I64, BOOL = pa.int64(), pa.bool_()
TABLES = {
    "t": pa.table({"k": pa.array([1, 1, 2, None, 3, 5, 6], I64), "v": pa.array([10, 20, 30, 40, None, 60, 70], I64)}),
    "u": pa.table({"k": pa.array([1, 3, 3, 4, None, 6], I64), "v": pa.array([15, 5, 50, 1, 2, None], I64)}),
}


def col(name):
    return ColumnRef(name, I64)


def outer(name):
    return OuterColumn(name, I64)


def eq(a, b):
    return BinaryOp("eq", a, b, BOOL)


def cases(catalog):
    def sub(filter_=None):
        b = PlanBuilder(catalog).table_scan("u")  # a builder of its own: its node ids repeat the outer plan's
        return (b.filter(filter_) if filter_ is not None else b).plan()

    def over_t(predicate, project=False):
        b = PlanBuilder(catalog).table_scan("t").filter(predicate)
        return (b.project(["k"]) if project else b).plan()

    lt = BinaryOp("lt", col("v"), outer("v"), BOOL)
    gt15 = BinaryOp("gt", col("v"), Literal(2, I64), BOOL)
    yield (over_t(Exists(sub(), BinaryOp("and", eq(col("k"), outer("k")), lt, BOOL))),
           "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.v < t.v)")
    yield (over_t(Exists(sub(gt15), eq(col("k"), outer("k")), negated=True)),
           "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.v > 2 AND u.k = t.k)")
    yield (over_t(InSubquery(col("k"), sub(gt15), "k", negated=True)),
           "SELECT * FROM t WHERE k NOT IN (SELECT k FROM u WHERE v > 2)")
    yield (over_t(InSubquery(col("v"), sub(), "v")), "SELECT * FROM t WHERE v IN (SELECT v FROM u)")
    yield (over_t(InSubquery(col("k"), sub(), "k", correlation=BinaryOp("gt", col("v"), outer("v"), BOOL))),
           "SELECT * FROM t WHERE k IN (SELECT k FROM u WHERE u.v > t.v)")
    yield (over_t(BinaryOp("and", InSubquery(col("k"), sub(), "k"),
                           Exists(sub(), eq(col("v"), outer("v")), negated=True), BOOL), project=True),
           "SELECT k FROM t WHERE k IN (SELECT k FROM u) AND NOT EXISTS (SELECT 1 FROM u WHERE u.v = t.v)")
    yield (over_t(Exists(sub(), eq(col("k"), outer("k")), negated=True), project=True),
           "SELECT k FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k)")


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    probes = bad = 0
    with duckdb_with_tables(TABLES) as reference:
        for drivers, batch in ([(1, 4096), (2, 1), (4, 3)] if dev == "cpu" else [(2, 3)]):
            session = session_with_tables(TABLES, split_rows=2, device=dev, drivers=drivers, batch_rows=batch)
            for plan, sql in cases(session.catalog):
                expected = duckdb_table(reference, sql)
                for how in ("built", "json", "pickle"):
                    probes += 1
                    try:
                        p = (plan if how == "built" else plan_from_json(plan_to_json(plan)) if how == "json"
                             else pickle.loads(pickle.dumps(plan)))
                        problem = rows_mismatch(session.execute(p), expected)
                    except Exception as ex:  # noqa: BLE001
                        problem = f"EXC {type(ex).__name__}: {ex}"
                    if problem:
                        bad += 1
                        print("BAD", dev, drivers, batch, how, sql, str(problem)[:400], flush=True)
    print("probes", probes, "bad", bad)


if __name__ == "__main__":
    main()
