"""A/B a correlated ORDER BY ... LIMIT 1 subquery typed (a ScalarSubquery the decorrelation rule joins) against the
sqlglot-tree LEFT JOIN it replaced, in one process: answers checked against DuckDB, then interleaved runs, medians of
process CPU (user+sys) and wall.

    python -m bench.limit_one_subquery_ab 0.1 11    # TPC-H SF, runs
"""
import resource, statistics, sys, time
import duckdb
import gpu_engine.sql.correlated_scalar_rows as rows_module
import gpu_engine.sql.subquery_values as values_module
from gpu_engine import Session
from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

SF = float(sys.argv[1]) if len(sys.argv) > 1 else 0.1
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
SQL = ("SELECT count(*) AS n, sum(q) AS s FROM (SELECT o_orderkey, (SELECT l_quantity FROM lineitem "
       "WHERE l_orderkey = o_orderkey ORDER BY l_linenumber DESC LIMIT 1) AS q FROM orders) x")
folder = ensure_tpch(SF, progress=False)
real = rows_module.is_correlated_scalar_rows
def switch(on):
    f = real if on else (lambda *a, **k: False)
    rows_module.is_correlated_scalar_rows = f
    values_module.is_correlated_scalar_rows = f
sessions = {}
for side in (True, False):
    s = Session(device="cpu", drivers=2); register_tpch(s, folder); sessions[side] = s
con = duckdb.connect()
for t in ("orders", "lineitem"):
    con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{folder}/{t}*.parquet')")
expected = con.execute(SQL).fetchall()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
times = {True: [], False: []}
for side in (True, False):
    switch(side)
    got = sessions[side].sql(SQL).to_pylist()
    print(side, got, expected)
    sessions[side].sql(SQL)
for run in range(RUNS):
    for side in ((True, False) if run % 2 == 0 else (False, True)):
        switch(side)
        c, w = cpu(), time.perf_counter()
        sessions[side].sql(SQL)
        times[side].append((cpu() - c, time.perf_counter() - w))
for side in (True, False):
    print("typed" if side else "tree ", "CPU median %.3f s, wall median %.3f s" % (
        statistics.median(t[0] for t in times[side]), statistics.median(t[1] for t in times[side])))
