"""A filter's single-column conjuncts tested in the Parquet scan (gpu_engine.connectors.scan_predicates).

The file holds 8 row groups of 64 rows: ``k`` increases (row group g holds ``64 g .. 64 g + 63``, so its statistics
let a range skip row groups), the other columns repeat within every row group (no statistics can skip one), each
with NULLs: ``i`` int32, ``d`` dates, ``m`` decimal(9, 2), ``s`` a repeating string (dictionary pages), ``t`` a
distinct string per row (plain pages), ``f`` a double.
"""

from __future__ import annotations

import datetime
import decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.connectors.scan_predicates import scan_predicates
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, InList, Literal

GROUPS, GROUP_ROWS = 8, 64
ROWS = GROUPS * GROUP_ROWS

#: (WHERE clause, rows the scan's predicates must drop or skip at least, row groups skipped at least).
QUERIES = [
    ("i BETWEEN 3 AND 5 AND s IN ('b', 'c')", ROWS // 2, 0),  # ints and dictionary strings, each by its own
    ("d >= DATE '2024-01-20' AND d < DATE '2024-01-25'", ROWS // 2, 0),
    ("m <= 0.07 + 0.01 AND m >= 0.065", ROWS // 2, 0),  # arithmetic constants; a bound finer than the column
    ("m = 0.065", ROWS, 0),  # no value of decimal(9, 2) equals it: empty
    ("k >= 130 AND k < 160 AND t <> 'x7'", ROWS - 30, 7),  # row groups 0, 1 and 3-7 skipped by statistics
    ("k IN (5, 300, 301, 900) AND f > 0", ROWS - 3, 6),  # a float column is left to the filter
    ("t IN ('x3', 'x70', 'nope')", ROWS - 2, 0),  # plain pages
    ("(i BETWEEN 1 AND 2 OR i BETWEEN 3 AND 4) AND i <> 2", ROWS // 2, 0),  # an OR on one column: its hull
    ("(i = 1 AND s = 'a') OR (i = 9 AND s = 'c')", ROWS // 2, 0),  # each column's part of every branch
    ("i > 100", ROWS, 0),  # nothing kept
    ("k >= 0 AND i IS NOT NULL", 0, 0),  # everything kept
    ("s >= 'b' AND s <= 'c' AND i < 8.5", ROWS // 4, 0),  # a decimal bound on an integer column
    ("i IN (2, NULL)", ROWS // 2, 0),
]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    rows = range(ROWS)
    table = pa.table({
        "k": pa.array(list(rows), pa.int64()),
        "i": pa.array([None if r % 13 == 0 else r % 10 for r in rows], pa.int32()),
        "d": pa.array([None if r % 17 == 0 else datetime.date(2024, 1, 1) + datetime.timedelta(days=r % 40)
                       for r in rows], pa.date32()),
        "m": pa.array([None if r % 19 == 0 else decimal.Decimal(r % 23) / 100 for r in rows], pa.decimal128(9, 2)),
        "s": pa.array([None if r % 11 == 0 else "abcd"[r % 4] for r in rows]),
        "t": pa.array([None if r % 29 == 0 else f"x{r}" for r in rows]),
        "f": pa.array([None if r % 7 == 0 else r / 7 - 30 for r in rows], pa.float64()),
    })
    file = tmp_path_factory.mktemp("scan_predicates") / "fact.parquet"
    pq.write_table(table, file, row_group_size=GROUP_ROWS)
    return str(file)


def _scan_counts(session: Session) -> tuple[int, int]:
    scans = [s for p in session.last_stats().pipelines for s in p.operators if s.operator_type == "TableScan"]
    return (sum(s.runtime.get("dynamic_filter_rows_dropped", 0) for s in scans),
            sum(s.runtime.get("dynamic_filter_row_groups_skipped", 0) for s in scans))


@pytest.mark.parametrize("reader", ["auto", "pyarrow"])
def test_filters_tested_in_the_scan_answer_as_duckdb(device_name, path, reader):
    """Each WHERE clause over the file (2 row groups a piece; every other one under a grouping, whose fused
    aggregation holds the filter) equals DuckDB; where the scan decodes on the host, its predicates drop at least
    the rows and skip at least the row groups each clause says. A device-decoded piece (cuda-sim's own reader, four
    clauses) leaves its rows to the filter: only row groups are skipped."""
    if device_name == "cpu" and reader == "auto":
        pytest.skip("cpu reads as pyarrow")
    session = Session(device=device_name, batch_rows=2 * GROUP_ROWS, parquet_reader=reader, compile_mode="lowest")
    session.register("fact", path)
    reference = duckdb.connect()
    reference.execute(f"CREATE VIEW fact AS SELECT * FROM read_parquet('{path}')")
    on_host = reader == "pyarrow"
    for number, (where, dropped, skipped) in enumerate(QUERIES if on_host else QUERIES[2:6]):
        sql = (f"SELECT k, i, d, m, s, t, f FROM fact WHERE {where}" if number % 2 == 0 else
               f"SELECT s, count(*) AS n, sum(m) AS total, min(t) AS low FROM fact WHERE {where} GROUP BY s")
        assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
        rows, groups = _scan_counts(session)
        assert groups >= skipped, (sql, groups)
        if on_host:
            assert rows + groups * GROUP_ROWS >= dropped, (sql, rows, groups)


def test_conjuncts_become_one_predicate_a_column():
    """What a conjunction keeps per column: ranges intersected, IN lists, ORs on one column as their hull, decimal
    bounds on the column's scale; ``<>``, floats and other columns' tests left to the filter."""
    types = {"i": pa.int32(), "m": pa.decimal128(15, 2), "s": pa.string(), "f": pa.float64()}
    columns = {name: (name, dtype) for name, dtype in types.items()}

    def column(name):
        return ColumnRef(name, types[name])

    def compare(op, name, value, dtype):
        return BinaryOp(op, column(name), Literal(value, dtype), pa.bool_())

    def both(*parts):
        out = parts[0]
        for part in parts[1:]:
            out = BinaryOp("and", out, part, pa.bool_())
        return out

    cents = pa.decimal128(4, 3)
    predicate = both(compare("ge", "i", 3, pa.int32()), compare("lt", "i", 10, pa.int64()),
                     compare("ne", "i", 5, pa.int32()), compare("gt", "m", decimal.Decimal("0.065"), cents),
                     compare("le", "m", decimal.Decimal("0.5"), cents), compare("lt", "f", 2.0, pa.float64()),
                     InList(column("s"), (Literal("b", pa.string()), Literal("a", pa.string()),
                                          Literal(None, pa.string()))))
    assert sorted(p.describe() for p in scan_predicates([predicate], columns)) == [
        "scan i in [3, 9]", "scan m in [7, 50]", "scan s in [a, b], 2 values"]
    hull = BinaryOp("or", both(compare("ge", "i", 1, pa.int32()), compare("le", "i", 11, pa.int32())),
                    both(compare("ge", "i", 20, pa.int32()), compare("eq", "s", "x", pa.string())), pa.bool_())
    assert [p.describe() for p in scan_predicates([hull], columns)] == ["scan i in [1, 9223372036854775807]"]
    empty = both(compare("gt", "i", 5, pa.int32()), compare("lt", "i", 3, pa.int32()))
    assert [p.describe() for p in scan_predicates([empty], columns)] == ["scan i: nothing"]
    assert scan_predicates([compare("lt", "s", "m", pa.string())], columns) == []  # one-sided string range
    # A float constant compares as a float (an int64 past 2^53 rounds into the bound): left to the filter.
    assert scan_predicates([compare("le", "i", 2 ** 53, pa.float64()),
                            InList(column("i"), (Literal(1.0, pa.float64()),))], columns) == []


def test_a_predicate_keeping_most_rows_only_skips_row_groups(path):
    """``k >= 100`` keeps 412 of the 512 rows by the row groups' statistics: the scan skips row group 0 and leaves
    the rows to the filter; ``k < 100`` (100 rows) is tested; a share seen in earlier pieces overrides the estimate."""
    from gpu_engine.exec.split import ParquetSplit

    columns = {"k": ("k", pa.int64())}
    split = ParquetSplit(path)
    many, few = (scan_predicates([BinaryOp(op, ColumnRef("k", pa.int64()), Literal(100, pa.int64()), pa.bool_())],
                                 columns)[0] for op in ("ge", "lt"))
    assert many.estimated_share(split) == pytest.approx(412 / ROWS)
    assert few.estimated_share(split) == pytest.approx(100 / ROWS)
    assert not many.worth_testing_rows(split, {}) and few.worth_testing_rows(split, {})
    assert many.worth_testing_rows(split, {"k": 0.1}) and not few.worth_testing_rows(split, {"k": 0.9})
