"""leftovers6 (stop 52): the probes behind each fix, every query run by DuckDB and by a Session and compared
(bench/duckdb_probes.duckdb_probe_problem; output names by equality).

Usage: python -m bench.leftovers6_probes [family ...]  (families: setops empty_positions ctes cte_shadowing names
scalar_names date_parts date_part_forms round_even time_beside unit_casts ns_casts; default all).
Results: bench/results/2026-11-29-leftovers6-s52.md.
"""
# flake8: noqa  (each family is the probe script as it was run, kept whole)
import sys

SCALARS = ['abs(x)', 'ceil(x)', 'ceiling(x)', 'floor(x)', 'round(x)', 'round(x, 1)', 'round_even(x, 1)', 'trunc(x)', 'sqrt(x)', 'cbrt(x)', 'exp(x)', 'ln(x)', 'log(x)', 'log10(x)', 'log2(x)', 'pow(x, 2)', 'power(x, 2)', 'sign(x)', 'mod(i, 2)', 'i % 2', 'i // 2', 'pi()', 'degrees(x)', 'radians(x)', 'sin(x)', 'cos(x)', 'tan(x)', 'asin(y / 10)', 'acos(y / 10)', 'atan(x)', 'atan2(x, y)', 'greatest(x, y)', 'least(x, y)', 'isnan(x)', 'isinf(x)', 'isfinite(x)', 'gcd(i, 2)', 'lcm(i, 2)', 'factorial(i)', 'even(x)', 'gamma(x)', 'lgamma(x)', 'bit_count(i)', 'xor(i, 3)', 'upper(s)', 'lower(s)', 'ucase(s)', 'lcase(s)', 'length(s)', 'len(s)', 'char_length(s)', 'character_length(s)', 'strlen(s)', 'octet_length(s)', 'substr(s, 1, 2)', 'substring(s, 1, 2)', 'substring(s FROM 1 FOR 2)', 'left(s, 1)', 'right(s, 1)', "concat(s, 'x')", "s || 'x'", "concat_ws('-', s, s)", "replace(s, 'a', 'b')", 'reverse(s)', 'repeat(s, 2)', "lpad(s, 3, '*')", "rpad(s, 3, '*')", 'trim(s)', 'ltrim(s)', 'rtrim(s)', "trim(s, 'a')", "strpos(s, 'b')", "instr(s, 'b')", "position('b' IN s)", "contains(s, 'b')", "starts_with(s, 'b')", "starts_with(s, 'b')", "ends_with(s, 'b')", "suffix(s, 'b')", "prefix(s, 'b')", "split_part(s, 'b', 1)", 'ascii(s)', 'chr(65)', 'md5(s)', 'hash(s)', "regexp_matches(s, 'b')", "regexp_replace(s, 'b', 'c')", "regexp_extract(s, 'b')", "regexp_full_match(s, 'b')", "s LIKE 'b%'", "s ILIKE 'B%'", "s NOT LIKE 'b%'", "s SIMILAR TO 'b.*'", "s GLOB 'b*'", 'initcap(s)', "format('{}', s)", "printf('%s', s)", 'bit_length(s)', "nullif(s, 'a')", "coalesce(s, 'z')", "ifnull(s, 'z')", 'if(b, 1, 2)', 'CASE WHEN b THEN 1 ELSE 2 END', 'typeof(x)', 'CAST(x AS INTEGER)', 'x::INTEGER', 'TRY_CAST(s AS INTEGER)', 'year(d)', 'month(d)', 'day(d)', 'dayofmonth(d)', 'dayofweek(d)', 'dayofyear(d)', 'week(d)', 'weekofyear(d)', 'quarter(d)', 'isodow(d)', 'isoyear(d)', 'yearweek(d)', 'dayname(d)', 'monthname(d)', 'last_day(d)', 'epoch(ts)', 'epoch_ms(ts)', 'epoch_us(ts)', 'epoch_ns(ts)', 'hour(ts)', 'minute(ts)', 'second(ts)', 'millisecond(ts)', 'microsecond(ts)', "date_part('year', d)", "datepart('year', d)", 'extract(year FROM d)', "date_trunc('month', d)", "datetrunc('month', d)", "date_diff('day', d, d)", "datediff('day', d, d)", "date_sub('day', d, d)", "datesub('day', d, d)", 'date_add(d, INTERVAL 1 DAY)', 'd + INTERVAL 1 DAY', 'd - 1', "strftime(d, '%Y')", "strptime('2020-01-01', '%Y-%m-%d')", 'make_date(2020, 1, 2)', 'make_timestamp(2020, 1, 2, 3, 4, 5)', 'to_timestamp(1)', 'current_date', 'today()', 'age(ts, ts)', 'century(d)', 'decade(d)', 'millennium(d)', 'era(d)', 'julian(d)', 'to_days(1)', 'to_hours(1)', 'to_minutes(1)', 'to_seconds(1)', 'to_years(1)', 'to_months(1)', 'to_weeks(1)', 'to_microseconds(1)', 'to_milliseconds(1)', "date_trunc('hour', ts)", 'time_bucket(INTERVAL 1 DAY, ts)', 'greatest(d, d)', 'x BETWEEN 1 AND 2', 'i IN (1, 2)', 'i NOT IN (1, 2)', 's IS NULL', 's IS NOT NULL', 'NOT b', '-x', '~i', 'i << 1', 'i >> 1', 'i & 1', 'i | 1', 'i ^ 1', 'x = y', 'x <> y', 'x IS DISTINCT FROM y', 'x IS NOT DISTINCT FROM y', 'b AND true', 'b OR false', 'CASE WHEN b THEN 1 END', 'CASE i WHEN 1 THEN 2 ELSE 3 END', 'CASE WHEN b THEN x + 1 WHEN i > 1 THEN 3 ELSE y * 2 END', "CASE WHEN i = 1 THEN 'a' WHEN i IS NULL THEN NULL END", 'sum(CASE WHEN b THEN x ELSE 0 END)', "CASE i WHEN 1 THEN 'a' END", 'count(CASE WHEN b THEN 1 END)']


def setops():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa
    t = pa.table({'d': pa.array([1, 2, 2], pa.date32()), 'i': pa.array([1, 2, 2]), 'f': pa.array([1.5, 2.5, 2.5])})
    s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})
    qs = []
    for op in ["EXCEPT", "INTERSECT", "EXCEPT ALL", "INTERSECT ALL", "UNION", "UNION ALL"]:
        for wl, wr in [("", " WHERE false"), (" WHERE false", ""), (" WHERE false", " WHERE false"), ("", " WHERE 1 = 0"), ("", " LIMIT 0"), ("", "")]:
            for l, r in [("i", "i"), ("d", "i"), ("i", "d"), ("i", "f")]:
                qs.append(f"SELECT {l} AS x FROM t{wl} {op} SELECT {r} FROM t{wr}")
    bad = 0
    for q in qs:
        p = duckdb_probe_problem(c, s, q)
        if p:
            bad += 1; print(q, "->", p[:200])
    print(len(qs), bad)


def empty_positions():
    import sys, itertools
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa
    t = pa.table({'d': pa.array([1, 2, 2, None], pa.date32()), 'i': pa.array([1, 2, 2, None]), 'f': pa.array([1.5, 2.5, 2.5, None]), 's': ['a', 'b', 'b', None]})
    u = pa.table({'k': pa.array([1, 2, 3]), 'v': ['x', 'y', 'z']})
    s = session_with_tables({'t': t, 'u': u}); c = duckdb_with_tables({'t': t, 'u': u})
    F = ["false", "1 = 0", "NULL", "1 > 2 AND i = 1", "i = 1 AND false"]
    qs = []
    for f in F:
        qs += [
          f"SELECT t.i, u.v FROM t JOIN u ON t.i = u.k WHERE {f}",
          f"SELECT t.i, u.v FROM t LEFT JOIN u ON t.i = u.k WHERE {f}",
          f"SELECT t.i, u.v FROM t LEFT JOIN (SELECT * FROM u WHERE {f}) u ON t.i = u.k",
          f"SELECT t.i, u.v FROM (SELECT * FROM t WHERE {f}) t RIGHT JOIN u ON t.i = u.k",
          f"SELECT t.i, u.v FROM (SELECT * FROM t WHERE {f}) t FULL JOIN u ON t.i = u.k",
          f"SELECT t.i, u.v FROM t FULL JOIN (SELECT * FROM u WHERE {f}) u ON t.i = u.k",
          f"SELECT t.i, u.v FROM t, (SELECT * FROM u WHERE {f}) u",
          f"SELECT i FROM t WHERE i IN (SELECT k FROM u WHERE {f})",
          f"SELECT i FROM t WHERE i NOT IN (SELECT k FROM u WHERE {f})",
          f"SELECT i FROM t WHERE EXISTS (SELECT k FROM u WHERE {f})",
          f"SELECT i FROM t WHERE NOT EXISTS (SELECT k FROM u WHERE {f} AND k = i)",
          f"SELECT i, (SELECT max(k) FROM u WHERE {f}) FROM t",
          f"SELECT i, (SELECT v FROM u WHERE {f} AND k = i) FROM t",
          f"SELECT count(*), sum(i) FROM t WHERE {f}",
          f"SELECT i, count(*) FROM t WHERE {f} GROUP BY i",
          f"SELECT i, count(*) FROM t GROUP BY i HAVING {f.replace('i = 1', 'i = 1')}",
          f"SELECT count(*) FROM t HAVING {f.replace('i = 1', 'count(*) = 1')}",
          f"SELECT i, sum(i) OVER () FROM t WHERE {f}",
          f"SELECT i FROM t WHERE {f} ORDER BY i LIMIT 2",
          f"SELECT i FROM t WHERE {f} UNION SELECT k FROM u",
          f"SELECT d FROM t WHERE {f} UNION ALL SELECT d FROM t",
          f"SELECT d FROM t WHERE {f} EXCEPT SELECT k FROM u",
          f"SELECT k FROM u EXCEPT SELECT d FROM t WHERE {f}",
          f"SELECT k FROM u INTERSECT SELECT d FROM t WHERE {f}",
          f"SELECT d FROM t WHERE {f} INTERSECT ALL SELECT k FROM u",
          f"SELECT i FROM t EXCEPT ALL SELECT k FROM u WHERE {f}",
          f"SELECT i FROM t EXCEPT SELECT k FROM u WHERE {f}",
          f"SELECT i FROM t INTERSECT SELECT k FROM u WHERE {f}",
          f"(SELECT i FROM t EXCEPT SELECT k FROM u WHERE {f}) EXCEPT SELECT d FROM t WHERE {f}",
          f"SELECT d FROM t WHERE {f} EXCEPT (SELECT k FROM u UNION SELECT 2)",
          f"SELECT * FROM (SELECT d FROM t WHERE {f} EXCEPT SELECT k FROM u) x JOIN u ON true",
          f"WITH e AS (SELECT d FROM t WHERE {f}) SELECT * FROM e INTERSECT SELECT k FROM u",
          f"SELECT i FROM t WHERE i IN (SELECT d FROM t WHERE {f} EXCEPT SELECT k FROM u)",
          f"SELECT (SELECT count(*) FROM (SELECT d FROM t WHERE {f} INTERSECT SELECT k FROM u)) FROM u",
          f"SELECT DATE '2020-01-01' WHERE {f.replace('i = 1', 'true')} EXCEPT SELECT 1",
          f"SELECT 1 INTERSECT SELECT DATE '2020-01-01' WHERE {f.replace('i = 1', 'true')}",
          f"SELECT 1 EXCEPT SELECT DATE '2020-01-01' WHERE {f.replace('i = 1', 'true')}",
          f"SELECT i FROM t WHERE {f} EXCEPT SELECT i FROM t",
          f"SELECT s FROM t EXCEPT SELECT v FROM u WHERE {f}",
          f"SELECT s, count(*) FROM (SELECT s FROM t EXCEPT ALL SELECT v FROM u WHERE {f}) GROUP BY s",
        ]
    for lim in ["LIMIT 0"]:
        qs += [f"SELECT d FROM t {lim} EXCEPT SELECT k FROM u", f"(SELECT d FROM t {lim}) INTERSECT SELECT k FROM u",
               f"SELECT k FROM u INTERSECT (SELECT d FROM t {lim})", f"SELECT i FROM t EXCEPT ALL (SELECT d FROM t {lim})",
               f"SELECT * FROM t JOIN (SELECT * FROM u {lim}) u ON true", f"SELECT count(*) FROM (SELECT * FROM u {lim})",
               f"SELECT i FROM t WHERE i IN (SELECT k FROM u {lim})", f"SELECT i, (SELECT k FROM u {lim}) FROM t"]
    bad = 0
    for q in qs:
        p = duckdb_probe_problem(c, s, q)
        if p:
            bad += 1; print(q, "->", p[:250])
    print(len(qs), bad)


def ctes():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa
    o = pa.table({'a': pa.array([1, 2, 3, None]), 'b': ['x', 'y', 'z', 'w']})
    u = pa.table({'k': pa.array([1, 2, 3]), 'v': ['x', 'y', 'z']})
    s = session_with_tables({'o': o, 'u': u}); c = duckdb_with_tables({'o': o, 'u': u})
    qs = [
     "WITH o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM o",
     "WITH o AS (SELECT a + 1 AS a FROM o) SELECT sum(a) FROM o",
     "WITH u AS (SELECT * FROM o), o AS (SELECT * FROM u WHERE a > 1) SELECT * FROM o",
     "WITH x AS (SELECT * FROM o), x2 AS (SELECT * FROM x), o AS (SELECT a FROM x2 WHERE a < 3) SELECT * FROM o",
     "WITH o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM o JOIN u ON o.a = u.k",
     "WITH o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM o, (SELECT count(*) FROM o) c",
     "WITH o AS (SELECT * FROM o WHERE a > 1) SELECT (SELECT count(*) FROM o) FROM u",
     "WITH o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM u WHERE k IN (SELECT a FROM o)",
     "WITH o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM o UNION ALL SELECT * FROM o",
     "WITH a AS (SELECT 1 AS x), a AS (SELECT 2 AS x) SELECT * FROM a",
     "WITH a AS (SELECT 1 AS x), b AS (SELECT x + 1 AS x FROM a), a AS (SELECT x * 10 AS x FROM b) SELECT * FROM a",
     "WITH a AS (SELECT 1 AS x) SELECT * FROM (WITH a AS (SELECT x + 1 AS x FROM a) SELECT * FROM a)",
     "WITH a AS (SELECT 1 AS x) SELECT * FROM (WITH b AS (SELECT x + 1 AS x FROM a) SELECT * FROM b)",
     "WITH u AS (SELECT * FROM o) SELECT * FROM u",
     "WITH u AS (SELECT k + 10 AS k FROM u) SELECT * FROM u WHERE k IN (SELECT k FROM u)",
     "WITH o AS (WITH o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM o WHERE a < 3) SELECT * FROM o",
     "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
     "WITH RECURSIVE r AS (SELECT 1 AS n) SELECT * FROM r",
     "WITH RECURSIVE o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM o",
     "WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
     "WITH x AS (SELECT * FROM x) SELECT * FROM x",
     "WITH o AS MATERIALIZED (SELECT * FROM o WHERE a > 1) SELECT * FROM o",
     "WITH o(c) AS (SELECT a FROM o WHERE a > 1) SELECT c FROM o",
     "WITH a AS (SELECT 1 AS x), b AS (SELECT * FROM c), c AS (SELECT 2 AS x) SELECT * FROM b",
    ]
    bad = 0
    for q in qs:
        p = duckdb_probe_problem(c, s, q)
        if p:
            bad += 1; print(q, "->", p[:250])
    print(len(qs), bad)


def cte_shadowing():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa
    o = pa.table({'a': pa.array([1, 2, 3, None]), 'b': ['x', 'y', 'z', 'w']})
    u = pa.table({'k': pa.array([1, 2, 3]), 'v': ['x', 'y', 'z']})
    s = session_with_tables({'o': o, 'u': u}); c = duckdb_with_tables({'o': o, 'u': u})

    qs = [
     "WITH x(c) AS (SELECT a FROM o) SELECT x.c, y.c FROM x, x AS y",
     "WITH x(c, d) AS (SELECT a, b FROM o WHERE a > 1) SELECT x.c, y.d FROM x JOIN x AS y ON x.c = y.c",
     "WITH a AS (SELECT k AS x FROM u) SELECT * FROM a, (WITH a AS (SELECT x + 1 AS x FROM a) SELECT * FROM a) b",
     "WITH a AS (SELECT k AS x FROM u) SELECT (SELECT count(*) FROM a), * FROM (WITH a AS (SELECT 7 AS x) SELECT * FROM a) b",
     "WITH u AS (SELECT * FROM o), o AS (SELECT a + 100 AS a FROM u) SELECT * FROM o, (SELECT count(*) FROM o) c",
     "WITH u AS (SELECT * FROM o), o AS (SELECT a + 100 AS a FROM u) SELECT * FROM o UNION ALL SELECT a FROM u",
     "WITH o AS (SELECT a + 10 AS a FROM o) SELECT * FROM o, (SELECT count(*) FROM o) c",
     "WITH o AS (SELECT a + 10 AS a FROM o), p AS (SELECT * FROM o) SELECT * FROM p JOIN o ON p.a = o.a",
     "WITH o AS (SELECT a + 10 AS a FROM o), o2 AS (SELECT a FROM o WHERE a > 11) SELECT * FROM o2 UNION ALL SELECT * FROM o2",
     "WITH RECURSIVE o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM o, (SELECT count(*) FROM o) c",
     "WITH RECURSIVE x AS (SELECT 1 AS n), y AS (SELECT n + 1 AS n FROM x) SELECT * FROM y",
     "WITH a AS (SELECT 1 AS x), A AS (SELECT 2 AS x) SELECT * FROM a",
     "SELECT * FROM (WITH o AS (SELECT a * 2 AS a FROM o) SELECT * FROM o) q JOIN o ON q.a = o.a",
    ]
    bad = 0
    for q in qs:
        p = duckdb_probe_problem(c, s, q)
        if p:
            bad += 1; print(q, "->", p[:250])
    print(len(qs), bad)


def names():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    import pyarrow as pa
    t = pa.table({'x': pa.array([1.5, 2.5, 4.0]), 'y': pa.array([1.0, 3.0, 2.0]), 'i': pa.array([1, 2, 3]), 'b': [True, False, True],
                  's': ['a', 'bb', 'c'], 'd': pa.array([1, 2, 3], pa.date32()), 'ts': pa.array([1, 2, 3000000000], pa.timestamp('us'))})
    s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})
    aggs = ["count(*)", "count(x)", "count(DISTINCT i)", "sum(x)", "sum(DISTINCT i)", "avg(x)", "mean(x)", "min(x)", "max(x)", "stddev(x)", "stddev_samp(x)", "stddev_pop(x)", "variance(x)", "var_samp(x)", "var_pop(x)",
     "covar_samp(x, y)", "covar_pop(x, y)", "corr(x, y)", "regr_slope(y, x)", "regr_intercept(y, x)", "regr_r2(y, x)", "regr_count(y, x)", "regr_avgx(y, x)", "regr_avgy(y, x)", "regr_sxx(y, x)", "regr_syy(y, x)", "regr_sxy(y, x)",
     "bool_and(b)", "bool_or(b)", "every(b)", "bit_and(i)", "bit_or(i)", "bit_xor(i)", "string_agg(s, ',')", "group_concat(s, ',')", "listagg(s, ',')", "string_agg(s)",
     "arg_min(s, x)", "arg_max(s, x)", "argmin(s, x)", "argmax(s, x)", "min_by(s, x)", "max_by(s, x)", "any_value(s)", "first(s)", "last(s)", "arbitrary(s)", "mode(i)", "median(x)",
     "quantile_cont(x, 0.5)", "quantile_disc(x, 0.5)", "quantile(x, 0.5)", "approx_count_distinct(i)", "count_if(b)", "countif(b)", "product(x)", "kurtosis(x)", "kurtosis_pop(x)", "skewness(x)", "entropy(i)",
     "fsum(x)", "sumkahan(x)", "kahan_sum(x)", "favg(x)", "geomean(x)", "geometric_mean(x)", "approx_quantile(x, 0.5)", "bool_and(i > 1)", "sum(x) FILTER (WHERE i > 1)", "count(*) FILTER (i > 1)", "std(x)", "var(x)" , "stddev(DISTINCT x)", "avg(DISTINCT x)", "min(DISTINCT x)", "string_agg(DISTINCT s, ',')", "first_value(s)", "sem(x)", "mad(x)", "bitstring_agg(i)", "histogram(i)", "list(i)", "array_agg(i)", "max(x, 2)", "min(x, 2)", "reservoir_quantile(x, 0.5)", "percentile_cont(0.5) WITHIN GROUP (ORDER BY x)", "percentile_disc(0.5) WITHIN GROUP (ORDER BY x)", "mode() WITHIN GROUP (ORDER BY i)", "last_value(s)"]
    scal = SCALARS if False else []
    bad = n = 0
    for e in (aggs if not scal else [x for x in scal if x.strip()]):
        q = f"SELECT {e} FROM t"
        try:
            de = c.sql(q).columns
        except Exception as err:
            continue
        n += 1
        try:
            ge = s.sql(q).column_names
        except Exception as err:
            print("ENGINE-ERR", e, str(err)[:120]); continue
        if list(de) != list(ge):
            bad += 1; print("NAME", e, "duck", de, "ours", ge)
    print(n, bad)


def scalar_names():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    import pyarrow as pa
    t = pa.table({'x': pa.array([1.5, 2.5, 4.0]), 'y': pa.array([1.0, 3.0, 2.0]), 'i': pa.array([1, 2, 3]), 'b': [True, False, True],
                  's': ['a', 'bb', 'c'], 'd': pa.array([1, 2, 3], pa.date32()), 'ts': pa.array([1, 2, 3000000000], pa.timestamp('us'))})
    s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})
    aggs = ["count(*)", "count(x)", "count(DISTINCT i)", "sum(x)", "sum(DISTINCT i)", "avg(x)", "mean(x)", "min(x)", "max(x)", "stddev(x)", "stddev_samp(x)", "stddev_pop(x)", "variance(x)", "var_samp(x)", "var_pop(x)",
     "covar_samp(x, y)", "covar_pop(x, y)", "corr(x, y)", "regr_slope(y, x)", "regr_intercept(y, x)", "regr_r2(y, x)", "regr_count(y, x)", "regr_avgx(y, x)", "regr_avgy(y, x)", "regr_sxx(y, x)", "regr_syy(y, x)", "regr_sxy(y, x)",
     "bool_and(b)", "bool_or(b)", "every(b)", "bit_and(i)", "bit_or(i)", "bit_xor(i)", "string_agg(s, ',')", "group_concat(s, ',')", "listagg(s, ',')", "string_agg(s)",
     "arg_min(s, x)", "arg_max(s, x)", "argmin(s, x)", "argmax(s, x)", "min_by(s, x)", "max_by(s, x)", "any_value(s)", "first(s)", "last(s)", "arbitrary(s)", "mode(i)", "median(x)",
     "quantile_cont(x, 0.5)", "quantile_disc(x, 0.5)", "quantile(x, 0.5)", "approx_count_distinct(i)", "count_if(b)", "countif(b)", "product(x)", "kurtosis(x)", "kurtosis_pop(x)", "skewness(x)", "entropy(i)",
     "fsum(x)", "sumkahan(x)", "kahan_sum(x)", "favg(x)", "geomean(x)", "geometric_mean(x)", "approx_quantile(x, 0.5)", "bool_and(i > 1)", "sum(x) FILTER (WHERE i > 1)", "count(*) FILTER (i > 1)", "std(x)", "var(x)" , "stddev(DISTINCT x)", "avg(DISTINCT x)", "min(DISTINCT x)", "string_agg(DISTINCT s, ',')", "first_value(s)", "sem(x)", "mad(x)", "bitstring_agg(i)", "histogram(i)", "list(i)", "array_agg(i)", "max(x, 2)", "min(x, 2)", "reservoir_quantile(x, 0.5)", "percentile_cont(0.5) WITHIN GROUP (ORDER BY x)", "percentile_disc(0.5) WITHIN GROUP (ORDER BY x)", "mode() WITHIN GROUP (ORDER BY i)", "last_value(s)"]
    scal = SCALARS if True else []
    bad = n = 0
    for e in (aggs if not scal else [x for x in scal if x.strip()]):
        q = f"SELECT {e} FROM t"
        try:
            de = c.sql(q).columns
        except Exception as err:
            continue
        n += 1
        try:
            ge = s.sql(q).column_names
        except Exception as err:
            print("ENGINE-ERR", e, str(err)[:120]); continue
        if list(de) != list(ge):
            bad += 1; print("NAME", e, "duck", de, "ours", ge)
    print(n, bad)


def date_parts():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa, datetime as dt
    ts = [dt.datetime(2021,1,3,10,11,12,345678), dt.datetime(2019,12,29,9,0,0,500000), dt.datetime(1970,1,1,23,59,59), dt.datetime(2020,12,28), dt.datetime(1969,12,31,23,59,59,999999), dt.datetime(2024,2,29,12), None, dt.datetime(1001,1,8), dt.datetime(9999,12,31,23,59,59)]
    t = pa.table({'ts': pa.array(ts, pa.timestamp('us')), 'd': pa.array([x.date() if x else None for x in ts], pa.date32()),
                  'ts2': pa.array(ts[::-1], pa.timestamp('us'))})
    s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})
    parts = ['doy','dow','isodow','isoyear','dayofyear','dayofweek','yearweek','julian','era','epoch','microsecond','us','week','year','month','day','second','millisecond','quarter','decade','century','millennium','hour','minute']
    bad = n = 0
    for p in parts:
        for q in [f"SELECT date_part('{p}', ts), date_part('{p}', d) FROM t", f"SELECT date_trunc('{p}', ts), date_trunc('{p}', d) FROM t",
                  f"SELECT date_diff('{p}', ts, ts2), date_diff('{p}', d, CAST(ts2 AS DATE)) FROM t", f"SELECT date_sub('{p}', ts, ts2), date_sub('{p}', d, CAST(ts2 AS DATE)) FROM t",
                  f"SELECT date_diff('{p}', ts2, ts), date_sub('{p}', ts2, ts) FROM t"]:
            n += 1
            r = duckdb_probe_problem(c, s, q)
            if r:
                bad += 1; print(q, "->", r[:300])
    print(n, bad)


def date_part_forms():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa, datetime as dt
    ts = [dt.datetime(2021,1,3,10,11,12,345678), dt.datetime(2019,12,29,9,0,0,500000), dt.datetime(1970,1,1,23,59,59), dt.datetime(2020,12,28), dt.datetime(1969,12,31,23,59,59,999999), dt.datetime(2024,2,29,12), None, dt.datetime(1001,1,8), dt.datetime(9999,12,31,23,59,59)]
    t = pa.table({'ts': pa.array(ts, pa.timestamp('us')), 'd': pa.array([x.date() if x else None for x in ts], pa.date32()),
                  'ts2': pa.array(ts[::-1], pa.timestamp('us'))})
    s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})

    qs = ["SELECT date_part('era', d - INTERVAL 2100 YEAR), date_part('julian', d - INTERVAL 2100 YEAR) FROM t",
          "SELECT date_part('julian', CAST(ts AS TIMESTAMPTZ)), date_trunc('isoyear', CAST(ts AS TIMESTAMPTZ)) FROM t",
          "SELECT date_part('julian', CAST(ts AS TIME)) FROM t", "SELECT date_part('era', CAST(ts AS TIME)) FROM t",
          "SELECT date_trunc('era', ts) FROM t", "SELECT date_diff('era', ts, ts2) FROM t",
          "SELECT extract(julian FROM d), extract(era FROM ts), extract(isoyear FROM d) FROM t",
          "SELECT julian(d), era(d) FROM t", "SELECT date_trunc('microsecond', CAST(ts AS TIMESTAMPTZ)) FROM t",
          "SELECT datediff('isoyear', d, ts2), datesub('isoyear', ts, ts2) FROM t",
          "SELECT date_part(['julian'], d) FROM t"]
    bad = 0
    for q in qs:
        r = duckdb_probe_problem(c, s, q)
        if r:
            bad += 1; print(q, "->", r[:300])
    print(len(qs), bad)


def round_even():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa, decimal as D
    t = pa.table({'f': pa.array([2.5, 3.5, -2.5, 0.125, 2.675, 1e300, 15.0, None, float('inf'), float('nan'), -0.5, 1234567.5]),
                  'i': pa.array([12345, 25, -25, 15, -15, 0, 2**62, None, 5, -5, 35, 45]),
                  'n': pa.array([D.Decimal(x) for x in ['2.500', '3.500', '-2.500', '0.125', '2.675', '1.005', '15.000', '0.000', '-0.125', '99.995', '-99.995', '0.500']], pa.decimal128(10, 3)),
                  'g': pa.array([1.5, 2.5, 0.5, -1.5, 2.25, 2.35, 0.0, None, 1.0, 2.0, 3.0, 4.0], pa.float32())})
    s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})
    bad = n = 0
    for col in ['f', 'i', 'n', 'g']:
        for d in [0, 1, 2, -1, -2, 400, -400, -20, 5]:
            q = f"SELECT round_even({col}, {d}) FROM t"
            n += 1
            r = duckdb_probe_problem(c, s, q)
            if r:
                bad += 1; print(q, "->", r[:300])
    for q in ["SELECT roundbankers(f, 1), round_even(2.5, 0), round_even(NULL, 1), round_even(f, NULL) FROM t", "SELECT round_even(f) FROM t", "SELECT round_even(s, 1) FROM (SELECT 'a' s)"]:
        n += 1
        r = duckdb_probe_problem(c, s, q)
        if r:
            bad += 1; print(q, "->", r[:300])
    print(n, bad)


def time_beside():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa
    t2=pa.table({'d': pa.array([1, None], pa.date32()), 'tm': pa.array([1_000_000, None], pa.time64('us')), 'ts': pa.array([1_000_000, None], pa.timestamp('us'))})
    s = session_with_tables({'t2': t2}); c = duckdb_with_tables({'t2': t2})
    bad = n = 0
    for a,b in [('d','tm'),('ts','tm'),('CAST(ts AS TIMESTAMPTZ)','tm'), ('tm', 'INTERVAL 1 DAY'), ('d', 'INTERVAL 1 DAY'), ('ts', 'INTERVAL 1 DAY'), ("TIME '10:00:00'", "DATE '2020-01-01'")]:
      for x, y in [(a, b), (b, a)]:
        for op in ["UNION ALL", "UNION", "EXCEPT", "INTERSECT"]:
          for w1, w2 in [('', ' WHERE false'), (' WHERE false', ''), ('', '')]:
            q=f'SELECT {x} AS x FROM t2{w1} {op} SELECT {y} FROM t2{w2}'
            n += 1
            r = duckdb_probe_problem(c, s, q)
            if r:
                bad += 1; print(q, "->", r[:200].replace("\n", " | "))
    print(n, bad)


def unit_casts():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa
    t = pa.table({'ts': pa.array([1_600_000_000_123_456, 1_500_000, 1_499_999, -1_500_000, -1_499_999, 500, -500, None], pa.timestamp('us')),
                  'd': pa.array([1, 2, -3, None, 0, 5, 6, 7], pa.date32()), 's': ['2020-01-01 10:11:12.123456789', '2020-01-01', '1970-01-01 00:00:00.5', None, '2020-01-01 10:11:12', 'x', '2020-01-01 10:11:12.999', '2020-01-01 10:11:12.9995'],
                  'n': pa.array([1_600_000_000_123_456_789, 1500, 1499, -1500, -1499, 500, -500, None], pa.timestamp('ns'))})
    s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})
    qs = []
    for ty in ["TIMESTAMP_S", "TIMESTAMP_MS"]:
        qs += [f"SELECT CAST(ts AS {ty}) FROM t", f"SELECT CAST(d AS {ty}) FROM t", f"SELECT CAST(n AS {ty}) FROM t", f"SELECT TRY_CAST(s AS {ty}) FROM t",
               f"SELECT CAST(CAST(ts AS {ty}) AS VARCHAR) FROM t", f"SELECT CAST(ts AS {ty}) = ts, CAST(ts AS {ty}) < ts FROM t", f"SELECT CAST(CAST(ts AS {ty}) AS DATE), CAST(CAST(ts AS {ty}) AS TIME) FROM t",
               f"SELECT date_trunc('second', CAST(ts AS {ty})), date_part('second', CAST(ts AS {ty})), date_part('ms', CAST(ts AS {ty})) FROM t", f"SELECT CAST(s AS {ty}) FROM t WHERE s LIKE '2%'", f"SELECT CAST('2020-01-01 10:11:12.5' AS {ty})",
               f"SELECT CAST(CAST(ts AS {ty}) AS TIMESTAMPTZ) FROM t"]
    bad = 0
    for q in qs:
        r = duckdb_probe_problem(c, s, q)
        if r:
            bad += 1; print(q, "->", r[:220].replace("\n", " | "))
    print(len(qs), bad)


def ns_casts():
    import sys
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from duckdb_reference import session_with_tables, duckdb_with_tables
    from bench.duckdb_probes import duckdb_probe_problem
    import pyarrow as pa
    v = [1_600_000_000_123_456_789, 1500, 1499, 2500, -1500, -1499, -1501, 999, -999, 500, -500, None, -86_400_000_000_500]
    t = pa.table({'n': pa.array(v, pa.timestamp('ns'))})
    s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})
    qs = ["SELECT CAST(n AS TIMESTAMP) FROM t", "SELECT CAST(n AS TIMESTAMPTZ) FROM t", "SELECT CAST(n AS TIME) FROM t", "SELECT CAST(n AS DATE) FROM t", "SELECT epoch_us(n), epoch_ms(n), epoch(n) FROM t", "SELECT CAST(n AS VARCHAR) FROM t"]
    bad = 0
    for q in qs:
        r = duckdb_probe_problem(c, s, q)
        if r:
            bad += 1; print(q, "->", r[:250].replace("\n", " | "))
    print(len(qs), bad)



if __name__ == "__main__":
    for family in sys.argv[1:] or ["setops", "empty_positions", "ctes", "cte_shadowing", "names", "scalar_names",
                                   "date_parts", "date_part_forms", "round_even", "time_beside", "unit_casts",
                                   "ns_casts"]:
        print("==", family)
        globals()[family]()
