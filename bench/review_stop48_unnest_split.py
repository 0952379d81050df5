"""Review probe (stop 48): FROM-list unnest of string_split over a constant (6656456, eb495ed) against DuckDB:
empty strings and separators, separators at the ends, multi-character and regex-looking separators, non-ASCII,
NULL text or separator, element names in other cases, SELECT * beside the list, a CTE's columns.

    .venv/bin/python -m bench.review_stop48_unnest_split
"""
import sys

import duckdb
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session  # noqa: E402

SPLITS = ["'a,b,,c', ','", "',a,', ','", "'', ','", "'abc', ''", "'a.b.c', '.'", "'a||b|c', '||'", "'x', 'x'",
          "'héllo wörld', 'ö'", "NULL, ','", "'a,b', NULL", "'a b  c', ' '", "'a[b]c', '['", "'aaa', 'aa'",
          "'a%b_c', '%'", "CAST(NULL AS VARCHAR), ','"]
FORMS = ["SELECT x FROM unnest(string_split({a})) u(x)",
         "SELECT t.k, u.x FROM t, unnest(string_split({a})) u(x)",
         "SELECT * FROM t, unnest(string_split({a})) u(x)",
         "SELECT X FROM t, unnest(string_split({a})) u(x) WHERE k = 1",
         "WITH c AS (SELECT k AS kk FROM t) SELECT kk, x FROM c, unnest(string_split({a})) u(x)",
         "SELECT x, count(*) FROM t, unnest(string_split({a})) u(x) GROUP BY x"]


def main():
    t = pa.table({"k": pa.array([1, 2, None], pa.int64())})
    con = duckdb.connect()
    con.register("t", t)
    ses = Session(device="cpu", drivers=2, batch_rows=2)
    ses.register("t", t)
    probes = bad = refused = 0
    for form in FORMS:
        for a in SPLITS:
            sql = form.format(a=a)
            probes += 1
            try:
                e = con.sql(sql).to_arrow_table()
            except Exception as ex:  # noqa: BLE001
                e = ex
            try:
                g = ses.sql(sql)
                pr = (f"duckdb raised {str(e)[:100]}" if isinstance(e, Exception)
                      else rows_mismatch(g.rename_columns(e.column_names), e))
            except Exception as ex:  # noqa: BLE001
                if not isinstance(e, Exception) and "unsupported" in str(ex):
                    refused += 1
                    print("REFUSED", repr(sql), str(ex)[:150])
                    continue
                pr = None if isinstance(e, Exception) else f"EXC {type(ex).__name__}: {str(ex)[:150]}"
            if pr:
                bad += 1
                print("BAD", repr(sql), str(pr)[:300], flush=True)
    print("probes", probes, "bad", bad, "refused", refused)


if __name__ == "__main__":
    main()
