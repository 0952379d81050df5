"""Review probe (stop 48): substring / substr with column start and length (d3e4958) against DuckDB: starts
0, negative, past the end, NULL; lengths 0, negative, NULL, huge; non-ASCII text; NULL and empty text; int32,
int64 and constant arguments mixed; 1-2 drivers, 3-row batches.

    .venv/bin/python -m bench.review_stop48_substring
"""
import itertools
import sys

import duckdb
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from bench.duckdb_probes import duckdb_probe_problem  # noqa: E402
from gpu_engine import Session  # noqa: E402


def main():
    texts = ["hello", "", None, "héllo wörld", "a", "日本語テキスト", "abcdefghij"]
    starts = [1, 0, -1, -3, 3, 100, None, -100, 2]
    lengths = [2, 0, -1, None, 100, 1, 3, 2**31 + 5]
    rows = list(itertools.product(texts, starts, lengths))
    t = pa.table({"s": pa.array([r[0] for r in rows], pa.string()),
                  "p": pa.array([r[1] for r in rows], pa.int64()),
                  "n": pa.array([r[2] for r in rows], pa.int64()),
                  "p32": pa.array([r[1] for r in rows], pa.int32())})
    con = duckdb.connect()
    con.register("t", t)
    probes = bad = 0
    for drivers in (1, 2):
        ses = Session(device="cpu", drivers=drivers, batch_rows=3 if drivers == 2 else 4096)
        ses.register("t", t, split_rows=50)
        for q in ["SELECT s, p, n, substring(s, p, n) AS v FROM t", "SELECT s, p, substr(s, p) AS v FROM t",
                  "SELECT s, p32, substring(s, p32, 2) AS v FROM t", "SELECT s, n, substring(s, 2, n) AS v FROM t",
                  "SELECT s, p, n, substring('constant', p, n) AS v FROM t",
                  "SELECT count(*) FROM t WHERE substring(s, p, n) = 'l'",
                  "SELECT s, p, n, length(substring(s, p, n)) AS v FROM t"]:
            probes += 1
            pr = duckdb_probe_problem(con, ses, q)
            if pr:
                bad += 1
                print("BAD", drivers, q, str(pr)[:400], flush=True)
    print("probes", probes, "rows each", t.num_rows, "bad", bad)


if __name__ == "__main__":
    main()
