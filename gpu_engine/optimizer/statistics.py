"""The statistics types and estimate rules both planners use: one copy of the numbers.

Why a module of its own: the SQL planner's estimates (:mod:`gpu_engine.sql.statistics`,
:mod:`gpu_engine.sql.join_ordering`, over sqlglot trees) and the typed plan's
(:mod:`gpu_engine.optimizer.cardinality`) must give the same rows for the same
predicate and join while both exist, and the typed side is where they end up
(issue 30 item 0: join ordering as an optimizer pass). The typed side used to
import the SQL side's private helpers (``_equality_selectivity``,
``_range_selectivity``, ...), tying the optimizer to the SQL front end; the
rules here read no expression tree of either kind — a column's
:class:`ColumnStatistics`, a constant's number, a join input's rows — so each
side turns its own tree into these arguments and calls them.

The rules (the SQL side's, unchanged): ``col = const`` keeps ``1 / NDV`` (1/10
without a distinct count), a range against a constant the share of ``[min,
max]`` it keeps (1/3 without a range, at least 0.001), LIKE 1/10, anything
without a rule 1/2; an equi-join's rows are ``rows(a) * rows(b)`` over the
distinct values of its key set (:func:`key_set_divisor`; for eager
aggregation's estimates, on one key at least the key's domain where filters on
other columns or joins cut both sides to a share of it: :func:`shared_key_domain`).

The table statistics (:func:`table_statistics`: Parquet footers' rows and
min/max, an integer or date column's distinct values from its range, at most
the rows, and for a key-like one (a range of half the rows or more) from its
first row group's dictionary page where that says fewer (:func:`_sampled_ndv`;
the typed estimates read that count, the SQL planner not yet), a string column's
from its first row group's dictionary page, read by equality and IN estimates
only (:func:`_dictionary_ndv`);
an in-memory table's min/max, and for a key-like integer or date column the distinct values of a sample of
its rows where they repeat a hundred times or more (:func:`_arrow_sampled_ndv`); :class:`RegisteredStatistics`: a
session's tables, each read when first asked) live here too, so a session, a
``LocalCluster`` or a ``SparkRunner`` hands them to
:func:`~gpu_engine.optimizer.optimize_plan` without the SQL front end.
"""

from __future__ import annotations

import math

import dataclasses
import datetime
import decimal
import weakref
from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ColumnStatistics", "TableStatistics", "JoinInput", "DEFAULT_SELECTIVITY", "RANGE_SELECTIVITY",
           "LIKE_SELECTIVITY", "as_number", "equality_selectivity", "range_selectivity", "key_set_divisor",
           "shared_key_domain", "joined_rows", "key_like", "key_match_divisor", "table_statistics", "RegisteredStatistics", "DEFAULT_TABLE_ROWS"]

#: The share of rows kept by a predicate no rule estimates.
DEFAULT_SELECTIVITY = 0.5
#: The share kept by a range comparison with a constant where the column's range is unknown.
RANGE_SELECTIVITY = 1 / 3
#: The share kept by LIKE (NOT LIKE keeps the rest).
LIKE_SELECTIVITY = 0.1
#: The share kept by ``col = const`` where the column has no distinct count.
UNKNOWN_EQUALITY_SELECTIVITY = 0.1


@dataclass(frozen=True)
class ColumnStatistics:
    """What the planner knows of one column: distinct values and the value range (None when unknown)."""

    ndv: float
    minimum: object = None
    maximum: object = None
    #: The distinct values a Parquet dictionary says where they are fewer than ``ndv`` (0: none): the typed
    #: estimates (:mod:`~gpu_engine.optimizer.cardinality`) read it as the column's count, the SQL planner not
    #: yet (see :func:`_sampled_ndv`).
    sampled_ndv: float = 0.0
    #: The distinct values the column had before a filter on other columns or a join cut its rows below them
    #: (0: not cut, ``ndv`` is all of them): the values it keeps are a share of these, not a chosen set
    #: (:func:`key_set_divisor` reads it). A conjunct on the column itself clears it (:meth:`pinned`).
    domain: float = 0.0
    #: A string column's distinct values as its first row group's Parquet dictionary says (0: none; a lower
    #: bound where the table has more row groups), kept apart from ``ndv``: read only by the equality and IN
    #: selectivity of the estimates that opt in (:func:`equality_selectivity`'s ``dictionary``), never by
    #: joins' divisors or groups' counts (see :func:`_dictionary_ndv`).
    dictionary_ndv: float = 0.0
    #: Its table's rows per distinct value of it (0: unknown, or not a table's column: an aggregation's key, a
    #: union's column): at most :data:`KEY_LIKE_ROWS` marks a key of its table's rows, an order or ticket number
    #: (:func:`key_set_divisor` reads it for keys of several columns). Set by the typed estimates' table scans.
    rows_per_value: float = 0.0
    #: The table and column its values were read from ((): computed, aggregated or a union's), kept through
    #: filters, projections and joins: a join on several columns reads two tables' key columns to measure how
    #: many rows its key pairs match (:meth:`RegisteredStatistics.key_match_divisor`). Set by the typed
    #: estimates' table scans.
    origin: tuple[str, str] = ()

    def capped(self, rows: float) -> "ColumnStatistics":
        """Return these statistics for a relation of ``rows`` rows (no more distinct values than rows)."""
        if not self.ndv or 1.0 <= self.ndv <= rows:  # unchanged: no copy (estimates cap every column per candidate join)
            return self
        return dataclasses.replace(self, ndv=max(1.0, min(self.ndv, rows)), domain=self.domain or self.ndv)

    def pinned(self, ndv: float) -> "ColumnStatistics":
        """Return these statistics with ``ndv`` distinct values a conjunct on this column chose (``d_year =
        2001``, a range): the kept values are the conjunct's, so no share of a domain (:attr:`domain` cleared)."""
        return dataclasses.replace(self, ndv=max(1.0, min(self.ndv, ndv)), domain=0.0)

    def sampled(self) -> "ColumnStatistics":
        """Return these statistics with the dictionary's distinct count as ``ndv`` where there is one."""
        return dataclasses.replace(self, ndv=self.sampled_ndv, sampled_ndv=0.0) if self.sampled_ndv else self


@dataclass(frozen=True)
class TableStatistics:
    """A table's row count and its columns' statistics."""

    rows: float
    columns: Mapping[str, ColumnStatistics]


class JoinInput(Protocol):
    """What a join estimate reads of one input: its rows and its columns' statistics by output name (the SQL
    planner's ``Relation`` and the typed side's estimates both have them)."""

    rows: float
    stats: Mapping[str, ColumnStatistics]


def as_number(value: object) -> float | None:
    """Return a constant or a column bound as a number on one axis (dates as day ordinals, timestamps as days),
    or None for what ranges cannot compare (text, booleans)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, decimal.Decimal)):
        return float(value)
    if isinstance(value, datetime.datetime):
        return value.timestamp() / 86400
    if isinstance(value, datetime.date):
        return float(value.toordinal())
    return None


def equality_selectivity(stats: ColumnStatistics | None, dictionary: bool = False) -> float:
    """Return the share of rows ``col = const`` keeps: one distinct value's, 1/10 without a distinct count.

    With ``dictionary``, a column without ``ndv`` (a string) counts its Parquet dictionary's values
    (:attr:`ColumnStatistics.dictionary_ndv`): ``sm_carrier IN ('DHL', 'BARIAN')`` keeps 2 of ship_mode's 20
    carriers, where the 1/10 guess said 4 (TPC-DS q66's catalog branch was pre-aggregated on it). Each
    consumer opts in on its own (:data:`gpu_engine.optimizer.cardinality.STRING_DICTIONARY_COUNTS`,
    :data:`gpu_engine.sql.statistics.STRING_DICTIONARY_COUNTS`; both off, as measured): a count moves join
    orders and build sides, and two estimates that disagree on it reorder each other's joins.
    """
    if stats is None:
        return UNKNOWN_EQUALITY_SELECTIVITY
    ndv = stats.ndv if stats.ndv >= 1 or not dictionary else stats.dictionary_ndv
    return 1 / ndv if ndv >= 1 else UNKNOWN_EQUALITY_SELECTIVITY


def range_selectivity(stats: ColumnStatistics | None, below: bool, value: object) -> float:
    """Return the share of rows ``col < value`` (``below``) or ``col > value`` keeps: the share of the column's
    ``[min, max]`` on that side of ``value`` (at least 0.001), 1/3 where the value or the range is unknown."""
    low = as_number(stats.minimum) if stats is not None else None
    high = as_number(stats.maximum) if stats is not None else None
    if not isinstance(value, float) or low is None or high is None or high <= low:
        return RANGE_SELECTIVITY
    share = (value - low) / (high - low)
    fraction = share if below else 1 - share
    return min(1.0, max(0.001, fraction))


def key_set_divisor(a: JoinInput, b: JoinInput, pairs: Sequence[tuple[str, str]], shared_domains: bool = False,
                    measured: float | None = None) -> float:
    """Return the distinct values of a join's key set: each side's, the larger of the two (containment).

    A side's key set has at most the product of its key columns' distinct counts and at most its rows (a
    column without a count counts as the side's rows); the larger side's divides ``rows(a) * rows(b)``, as
    textbooks estimate a multi-column equi-join. Why not the single most selective key: a join on two keys
    got no credit for its second (TPC-DS q72's inventory on date and item was estimated from the item key
    alone, ~1,000x too many rows; store_sales x store_returns on ticket and item 12x too many), so the search
    preferred joins on one key over it. Where no key column identifies its table's rows
    (:data:`KEY_LIKE_ROWS`, off by default), the columns count as independent instead: the product of each
    pair's larger distinct count, where that divides more (a customer and an item shared by two fact tables
    are not a key of either). One key: the larger distinct count, at most the larger side; with
    ``shared_domains``, at least the key's domain where both sides' values are a share of it
    (:func:`shared_key_domain`).

    Why ``shared_domains`` is eager aggregation's alone: join ordering took the closer estimate too, and TPC-DS
    q72 ordered catalog_sales x household_demographics before customer_demographics (both cut: 32K estimated
    for 46K real, containment said 192K), so catalog_sales became the build side of that join and its scan lost
    customer_demographics' join-key filter (238K rows decoded for 46K): +15% CPU (bench/results/
    2026-11-28-q66-estimates-cpu-sf1.md). The join search counts no runtime filter at a scan yet; until it
    does, its estimates keep containment.

    ``measured``: for a key of several columns none of which identifies its table's rows, the divisor the two
    tables' key columns gave when read (:meth:`RegisteredStatistics.key_match_divisor`: a table's rows over the
    rows of it a sample of the other's rows finds on average), used instead of independence. Why: per-column
    counts cannot tell a composite foreign key (TPC-H's lineitem pairs (part, supplier) each one of partsupp's:
    6M rows joined, independence estimated 2,400) from two tables sharing values of each column but few pairs
    (TPC-DS q17's catalog_sales x store_returns on customer and item: containment estimated 287,514 for 39);
    the rows say which it is. Why not where a column is a key (containment stays): measured there too, TPC-DS
    q25's store_sales x store_returns on ticket, item and customer read 208K rows for 209K real (containment
    287K), the order then joined store_sales to its date first, and the query ran +91% (loaded A/B): the old
    order's 5-row build filtered store_sales' scan by ticket numbers, skipping row groups, which the order's
    costs do not count (bench/results/2026-11-29-joinest-s52.md).
    """
    if not pairs:
        return 1.0
    product_a = product_b = 1.0
    for x in dict.fromkeys(x for x, _ in pairs):  # a column repeated across pairs counts once
        product_a *= max(1.0, (a.stats[x].ndv if x in a.stats else 0) or a.rows)
    for y in dict.fromkeys(y for _, y in pairs):
        product_b *= max(1.0, (b.stats[y].ndv if y in b.stats else 0) or b.rows)
    if len(pairs) == 1:
        [(x, y)] = pairs
        domain = shared_key_domain(a.stats.get(x), b.stats.get(y)) if shared_domains else 0.0
        return max(1.0, min(max(product_a, product_b), max(a.rows, b.rows)), domain)
    contained = max(1.0, min(product_a, a.rows), min(product_b, b.rows))
    if any(key_like(a.stats.get(x)) or key_like(b.stats.get(y)) for x, y in pairs):
        return contained
    if measured:
        return max(1.0, measured)
    independent, seen = 1.0, set()
    for x, y in pairs:  # each column once: ``x = y1 AND x = y2`` implies ``y1 = y2``
        if x in seen or y in seen:
            continue
        seen |= {x, y}
        independent *= max(1.0, (a.stats[x].ndv if x in a.stats else 0) or a.rows,
                           (b.stats[y].ndv if y in b.stats else 0) or b.rows)
    return max(contained, independent)


#: The most rows per distinct value of a table's column that make it a key of the rows (an order or ticket
#: number: TPC-DS SF1 store_returns' ticket numbers 1.7 rows each, catalog_returns' order numbers 1.5): a join on
#: several columns keeps containment where one is such a key, and otherwise multiplies its columns' divisors
#: (independent columns; :func:`key_set_divisor`). **On** (2) since the typed join order alone orders joins
#: (stop 51): it estimates TPC-DS q17's ``catalog_sales x store_returns`` on customer and item at 271 rows (39
#: real; containment 287,514). Before, with the SQL ordering's plans and without the typed order's input-row
#: cost, TPC-H q9's ``lineitem x partsupp`` on part and supplier (a composite foreign key; 4 rows per part in
#: partsupp, where store_returns has 2.9 per customer: per-column counts cannot tell them apart) was estimated
#: at 2.4M for 6M and ran +810%, and TPC-DS q25 +272% (bench/results/2026-11-28-joinorder3-correlated-keys.md,
#: 2026-11-29-joinorder3-s51.md; ``bench/ab.py correlated-keys``; ``math.inf``: every key set keeps containment).
KEY_LIKE_ROWS = 2.0


def key_like(column: ColumnStatistics | None) -> bool:
    """Return whether ``column`` may identify its rows (or its table's rows per value are not known)."""
    return column is None or not column.rows_per_value or column.rows_per_value <= KEY_LIKE_ROWS


def shared_key_domain(a: ColumnStatistics | None, b: ColumnStatistics | None) -> float:
    """Return the distinct key values two join sides' keys are drawn from where both were cut to a share of
    theirs by filters on other columns or by joins (:attr:`ColumnStatistics.domain`); 0 where either was not.

    Why: each side's distinct count is capped at its rows, and a one-key join divides by the larger count
    (containment: the side with fewer values holds only values of the other). That holds for a fact's key
    against its whole dimension, but not once both are shares of the key's values cut independently: TPC-DS
    q66's sales, cut to 28,620 rows by date and ship-mode joins, against the time_dim rows a filter on
    ``t_time`` keeps (28,800 of 86,400) was estimated 28,620 rows, every sale matching, where a third match
    (5,515 real, with ship_mode's 2 carriers of an estimated 4); the fact's 86,361 values then count as
    the divisor (the smaller domain: its values lie within the other's). A count a conjunct on the column
    itself chose (``d_year = 2001``, a key range) has no domain: the other side's values may be those. Nor
    do two sides of one domain and range: they read as the same column (a self-join, a CTE read twice),
    whose rows the same filters may have kept on both sides.
    """
    if a is None or b is None or not a.domain or not b.domain:
        return 0.0
    if (a.domain, a.minimum, a.maximum) == (b.domain, b.minimum, b.maximum):
        return 0.0
    return min(a.domain, b.domain)


def joined_rows(a: JoinInput, b: JoinInput, pairs: Sequence[tuple[str, str]], shared_domains: bool = False,
                measured: float | None = None) -> float:
    """Return the estimated rows of an inner equi-join of ``a`` and ``b`` on key ``pairs`` (none: the product),
    at least one (``shared_domains``, ``measured``: see :func:`key_set_divisor`)."""
    return max(1.0, a.rows * b.rows / key_set_divisor(a, b, pairs, shared_domains, measured))


#: Rows assumed for a table without statistics (a catalog given as schemas only).
DEFAULT_TABLE_ROWS = 100_000


def _column_statistics(dtype: pa.DataType, rows: float, minimum: object, maximum: object) -> ColumnStatistics:
    ndv = 0.0  # unknown: an equality with a constant then keeps 1/10 of the rows
    low, high = as_number(minimum), as_number(maximum)
    if low is not None and high is not None and (pa.types.is_integer(dtype) or pa.types.is_date(dtype)):
        ndv = max(1.0, min(rows, high - low + 1))
    elif pa.types.is_boolean(dtype):
        ndv = 2.0
    return ColumnStatistics(ndv, minimum, maximum)


#: The largest column chunk :func:`_sampled_ndv` reads to walk its page headers (planning reads it once per table
#: and session; a writer's 128 MB row groups would make that read cost more than the estimate is worth): a larger
#: chunk keeps the range's count.
SAMPLED_CHUNK_MAX_BYTES = 16 << 20


def _sampled_ndv(footers: tuple, name: str, rows: float, low: float, high: float) -> float | None:
    """Return the distinct values of integer column ``name`` (``[low, high]`` over the table's ``rows``) as the
    first non-empty row group's dictionary says: its count where that row group holds every row; where the
    rows are in the column's order (the second row group begins at or after the first one's maximum), the
    first's distinct values per unit of its own ``[min, max]``, times the table's range; for rows in another
    order, its count where that is at most :data:`FEW_VALUES_SHARE` of the row group's rows (a row group that
    repeats each value a hundred times has seen about all of them, as :func:`_arrow_sampled_ndv`'s sample: 100
    int64 keys drawn from [0, 1e9) read from the range as a value a row and lost their partial step, 1.9x the
    CPU, bench/results/2026-11-29-intgroups-s54.md). None (the range's count stands) for rows in another order
    whose row group holds more values (a row group's values then say nothing of the others') or a chunk
    without a dictionary page encoding all of its pages (a writer falls back to PLAIN pages when the
    dictionary grows too big).

    Why: an integer column whose ``[min, max]`` spans about the table's rows (half of them or more) reads as
    a key (one distinct value a row), but a sparse key repeated across rows is not: TPC-H's ``l_orderkey``
    spans 1..6M over 6M rows and holds 1.5M values (four lines an order); counted as 6M, ``GROUP BY
    l_orderkey`` had four times its groups and a join with ``orders`` a quarter of its rows (TPC-H q18's semi
    join built the wrong side). The dictionary page's header declares its values: one header read, no data
    decoded. Why only rows in the column's order: TPC-DS's ``ss_cdemo_sk`` repeats within a ticket's lines,
    so a row group holds a twelfth of its rows' worth of values although the column holds 1.9M.

    Kept beside the range's count (:attr:`ColumnStatistics.sampled_ndv`), read by the typed estimates only:
    the SQL planner's eager aggregation, seeing ``GROUP BY l_orderkey`` keep a quarter of lineitem, groups
    all 6M rows below q18's join with the 57 orders its HAVING keeps (it estimates half of them), where the
    join's runtime filter had dropped nearly every lineitem row at the scan: +75% (bench/results/
    2026-11-28-buildside2-*.md). The SQL side reads it once eager aggregation weighs that filter.
    """
    groups = []  # (footer, leaf, chunk, rows, min, max) of the first two non-empty row groups
    for footer in footers:
        index = [i for i, leaf in enumerate(footer.leaves) if leaf.path == name]
        if len(index) != 1 or footer.leaves[index[0]].max_repetition:
            return None
        for row_group in footer.row_groups:
            if not row_group.num_rows:
                continue
            chunk = row_group.columns[index[0]]
            stats = chunk.statistics
            extremes = (None, None) if stats is None else (as_number(stats.minimum), as_number(stats.maximum))
            if None in extremes:
                return None
            groups.append((footer, chunk, row_group.num_rows, *extremes))
            if len(groups) == 2:
                break
        if len(groups) == 2:
            break
    if not groups:
        return None
    footer, chunk, group_rows, group_low, group_high = groups[0]
    whole = group_rows >= rows
    ordered = whole or (len(groups) >= 2 and groups[1][3] >= group_high)
    values = _dictionary_count(footer, chunk)
    if values is None:
        return None
    if not ordered:  # a row group that repeats its values a hundred times has seen about all of them
        return float(values) if values <= FEW_VALUES_SHARE * group_rows else None
    return float(values) if whole else max(1.0, values * (high - low + 1) / (group_high - group_low + 1))


def _dictionary_count(footer, chunk) -> int | None:
    """Return the values of column ``chunk``'s dictionary page, or None for a chunk without one, larger than
    :data:`SAMPLED_CHUNK_MAX_BYTES`, unreadable, or with PLAIN pages after its dictionary (a writer falls back to
    them when the dictionary grows too big: the count is then not the chunk's)."""
    import numpy as np

    from gpu_engine.kernels.parquet_pages import dictionary_values

    if chunk.dictionary_page_offset is None or int(chunk.total_compressed_size) > SAMPLED_CHUNK_MAX_BYTES:
        return None
    try:  # the chunk's bytes only (its pages' headers are walked: does every data page use the dictionary?)
        with open(footer.path, "rb") as handle:
            handle.seek(int(chunk.start))
            data = np.frombuffer(handle.read(int(chunk.total_compressed_size)), np.uint8)
        values, other = dictionary_values(data, 0, len(data))
    except (OSError, ValueError, IndexError):
        return None
    if values <= 0 or other != 0:  # a malformed header, or PLAIN pages after the dictionary
        return None
    return int(values)


def _dictionary_ndv(footers: tuple, name: str) -> float | None:
    """Return the distinct values of string column ``name`` as its first non-empty row group's dictionary page
    says (the chunk's distinct non-NULL values: exact where that row group holds the table, a lower bound
    otherwise), or None (no dictionary: :func:`_dictionary_count`).

    Why: strings had no distinct count, so ``col = 'x'`` kept 1/10 of any table (ship_mode's 20 carriers,
    customer_address's 51 states alike). Why only equality and IN read it (:attr:`ColumnStatistics.dictionary_ndv`):
    as every column's count it moved join orders and lost (TPC-DS q81 +21%: ``ca_state = 'GA'`` at 1/51 made
    customer_address a build side scanned whole, where as a probe side its runtime filter cut it; bench/results/
    2026-11-28-strndv-string-ndv-cpu-sf1.md), and a lower bound would under-count a join's or a group's keys.
    """
    for footer in footers:
        index = [i for i, leaf in enumerate(footer.leaves) if leaf.path == name]
        if len(index) != 1 or footer.leaves[index[0]].max_repetition:
            return None
        for row_group in footer.row_groups:
            if row_group.num_rows:
                values = _dictionary_count(footer, row_group.columns[index[0]])
                return None if values is None else float(values)
    return None


def _parquet_statistics(footers: tuple, schema: pa.Schema) -> TableStatistics:
    """Combine the files' footer statistics (checked by the engine's footer reader, never pyarrow's).

    Why not pyarrow's: its statistics read aborted the process on a footer
    whose chunk types contradict the schema (a C++ exception it cannot
    raise). Only top-level columns count; a column whose statistics some
    row group lacks has no range.
    """
    rows, lows, highs = 0, {}, {}
    for footer in footers:
        rows += footer.num_rows
        names = [leaf.path if leaf.top_level else None for leaf in footer.leaves]
        for row_group in footer.row_groups:
            for name, chunk in zip(names, row_group.columns):
                if name is None or (name in lows and lows[name] is None):
                    continue
                stats = chunk.statistics
                if stats is None or stats.minimum is None:
                    if row_group.num_rows:  # an empty row group's missing range says nothing
                        lows[name] = highs[name] = None
                    continue
                try:
                    lows[name] = stats.minimum if name not in lows else min(lows[name], stats.minimum)
                    highs[name] = stats.maximum if name not in highs else max(highs[name], stats.maximum)
                except TypeError:
                    lows[name] = highs[name] = None
    columns = {f.name: _column_statistics(f.type, rows, lows.get(f.name), highs.get(f.name)) for f in schema}
    types = {f.name: f.type for f in schema}
    for name, column in columns.items():
        low, high = as_number(column.minimum), as_number(column.maximum)
        if rows > 1 and low is not None and high - low + 1 >= rows / 2:  # key-like by its range: dense or not?
            sampled = _sampled_ndv(footers, name, float(rows), low, high)
            if sampled is not None and sampled < column.ndv:
                columns[name] = dataclasses.replace(column, sampled_ndv=sampled)
        elif rows and _is_string(types[name]):
            counted = _dictionary_ndv(footers, name)
            if counted:
                columns[name] = dataclasses.replace(column, dictionary_ndv=min(counted, float(rows)))
    return TableStatistics(float(rows), columns)


def _is_string(dtype: pa.DataType) -> bool:
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype)


def _arrow_statistics(table: pa.Table) -> TableStatistics:
    rows = table.num_rows
    columns = {}
    for f in table.schema:
        low = high = None
        if rows and (pa.types.is_integer(f.type) or pa.types.is_date(f.type) or pa.types.is_floating(f.type)
                     or pa.types.is_decimal(f.type)):
            try:
                extremes = pc.min_max(table.column(f.name)).as_py()
            except (OverflowError, pa.ArrowNotImplementedError):  # a date before year 1 or past 9999 (Python's
                # range, not DuckDB's), or a float16 (no Arrow min_max; a scan refuses the type by name): no range
                extremes = {"min": None, "max": None}
            low, high = extremes["min"], extremes["max"]
        column = _column_statistics(f.type, rows, low, high)
        low, high = as_number(low), as_number(high)
        if (rows > 1 and column.ndv and low is not None and high - low + 1 >= rows / 2
                and (pa.types.is_integer(f.type) or pa.types.is_date(f.type))):  # key-like by its range: dense or not?
            sampled = _arrow_sampled_ndv(table.column(f.name))
            if sampled is not None and sampled < column.ndv:
                column = dataclasses.replace(column, sampled_ndv=sampled)
        columns[f.name] = column
    return TableStatistics(float(rows), columns)


#: (a Parquet table's version, column) -> :func:`wide_key_count`'s answer.
_WIDE_KEYS: dict[tuple, float | None] = {}


def wide_key_count(table, statistics: TableStatistics, column: str) -> float | None:
    """Return the distinct values of a sample of Parquet table ``table``'s integer or date ``column`` (one row
    group's rows read by :func:`_key_columns`, counted by :func:`_arrow_sampled_ndv`) where its range is wider
    than the table's rows and no dictionary gave a count; None otherwise, or where the sample says nothing.

    Why: where the range is wider than the rows, its count, capped at the rows, says a value a row whatever the
    column holds; in a PLAIN-encoded file nothing else counts it, and 100 int64 keys drawn from [0, 1e9) over
    10M rows lost their partial step: 2.0x the CPU (bench/results/2026-11-29-intgroups-s54.md). Read only when
    a plan's choice hangs on it (:mod:`~gpu_engine.optimizer.partial_steps` about to refuse a partial step):
    reading every such column while the statistics are taken cost 289 ms of CPU over the 121 TPC-H and TPC-DS
    texts' first planning at SF1, for no plan changed. Once per file version and column.
    """
    from gpu_engine.errors import DataSourceError

    stats = statistics.columns.get(column)
    low = None if stats is None else as_number(stats.minimum)
    high = None if stats is None else as_number(stats.maximum)
    if (stats is None or not stats.ndv or stats.sampled_ndv or low is None or high is None
            or high - low + 1 <= statistics.rows or not getattr(table, "files", None)):
        return None
    try:
        key = (_version(table), column)
        if key not in _WIDE_KEYS:
            read = _key_columns(table, (column,), ARROW_SAMPLE_ROWS)
            if len(_WIDE_KEYS) >= _MAX_MATCHES:
                _WIDE_KEYS.clear()
            _WIDE_KEYS[key] = None if read is None else _arrow_sampled_ndv(read[0])
        return _WIDE_KEYS[key]
    except (pa.ArrowException, OSError, ValueError, TypeError, OverflowError, DataSourceError, MemoryError):
        return None  # (a file gone or damaged since its statistics: its scan reports it)


#: The rows :func:`_arrow_sampled_ndv` reads of an in-memory column (evenly spaced; all of a smaller one).
ARROW_SAMPLE_ROWS = 1 << 16

#: The share of its rows as distinct values at or below which a sample is taken to have seen every value that
#: matters (a value a hundred rows or more, on average), and a Parquet dictionary's or a sample's count is
#: believed over the range's where a plan's choice hangs on it (:class:`~gpu_engine.optimizer.partial_steps.
#: RangeCounts`).
FEW_VALUES_SHARE = 0.01


def _arrow_sampled_ndv(column: pa.ChunkedArray) -> float | None:
    """Return the distinct values of :data:`ARROW_SAMPLE_ROWS` evenly spaced rows of an in-memory integer or date
    column whose range reads as a key, where they are at most :data:`FEW_VALUES_SHARE` of those rows; None (the
    range's count stands) otherwise.

    Why: an in-memory table has no dictionary page (:func:`_sampled_ndv`), so a key drawn from a wide range
    (ids, hashes, timestamps as integers) read as a value a row: GROUP BY over 100 such keys of 10M rows lost
    its partial step and repartitioned every row, 2.0x the CPU of the plan with it (issue 31;
    bench/results/2026-11-29-intgroups-s54.md). Only a sample that repeats its values a hundred times on
    average is believed: a sample of a key's rows that sees each value about once says nothing of how many
    there are. Reading the sample costs a take and a count over its rows, beside the whole column's min/max.
    """
    import numpy as np

    rows = len(column)
    if rows > ARROW_SAMPLE_ROWS:
        column = column.take(pa.array(np.linspace(0, rows - 1, ARROW_SAMPLE_ROWS).astype(np.int64)))
    seen = len(column) - column.null_count
    if not seen:
        return None
    values = pc.count_distinct(column, mode="only_valid").as_py()
    return float(values) if values <= FEW_VALUES_SHARE * seen else None


_CACHE: dict[tuple, TableStatistics] = {}


def table_statistics(table) -> TableStatistics:
    """Return the statistics of a registered table (Parquet files or an in-memory Arrow table).

    Parquet statistics are cached per file list, sizes and modification
    times, so a session planning many queries combines each footer once. A
    table's own ``footer(path)`` (a registered table's, which says when a
    file changed since ``register``) reads the footers when it has one.

    Raises
    ------
    DataSourceError
        For a file that is no longer Parquet or whose footer is inconsistent, naming it.
    """
    from gpu_engine.connectors.parquet_footer import read_footer

    files = tuple(getattr(table, "files", ()) or ())
    arrow_table = getattr(table, "table", None)
    if files:
        footers = tuple(map(getattr(table, "footer", read_footer), files))
        key = (tuple((f.path, f.size, f.modified_ns) for f in footers), table.schema)
        if key not in _CACHE:
            _CACHE[key] = _parquet_statistics(footers, table.schema)
        return _CACHE[key]
    if isinstance(arrow_table, pa.Table):
        return _arrow_statistics(arrow_table)
    rows = float(getattr(table, "num_rows", DEFAULT_TABLE_ROWS) or DEFAULT_TABLE_ROWS)
    return TableStatistics(rows, {f.name: _column_statistics(f.type, rows, None, None) for f in table.schema})


#: The most rows of the smaller table whose key columns :func:`key_match_divisor` reads whole; past it, about this
#: many (whole row groups, evenly spaced), as the larger one is sampled: TPC-H SF1's partsupp (800,000 rows) is
#: read whole, SF10's (8M) sampled. Why a sample: the measurement runs while planning; SF10's partsupp read
#: whole took q9's first planning from 0.03 to 1.5 s of CPU (6 s wall at load 19) and the process's peak memory
#: from 268 to 924 MB (bench/results/2026-11-29-review-s52.md); a 100 GB table's would be read the same way.
KEY_MATCH_WHOLE_ROWS = 1_000_000
#: About how many rows of the larger table :func:`key_match_divisor` samples (whole row groups, evenly spaced).
KEY_MATCH_SAMPLE_ROWS = 100_000
#: The most rows read of one table, whatever its row groups (a file of a few row groups of many millions of
#: rows each): past it, the per-column estimate stands. Bounds the measurement's time and memory at any scale.
KEY_MATCH_MAX_READ_ROWS = 2_000_000

#: (each table's version, its key columns) -> (the divisor, weak references to in-memory tables measured: an
#: entry counts only while they live, so an id reused by another table is measured again).
_MATCHES: dict[tuple, tuple] = {}
_MAX_MATCHES = 1024


def key_match_divisor(a, a_columns: Sequence[str], b, b_columns: Sequence[str]) -> float | None:
    """Return the divisor of a join of tables ``a`` and ``b`` (registered tables: Parquet files or an Arrow table)
    on ``a_columns = b_columns`` measured from their rows: the whole table's rows over the mean rows of it that a
    row of the other, sampled, finds on the key (``rows(a) * rows(b) / divisor`` is then the join's rows). None
    where it cannot be measured (a row group past :data:`KEY_MATCH_MAX_READ_ROWS`, a column repeated, keys that
    do not compare, a file that does not read: the scan reports it; memory short: the measurement runs while
    planning and must not fail a query) or no sampled row matched (the per-column estimate stands: it says few
    rows).

    Why: a join on several columns is a composite foreign key (each lineitem's (part, supplier) one of
    partsupp's) or two tables sharing each column's values but few of their pairs (TPC-DS's catalog_sales and
    store_returns on customer and item), and per-column distinct counts read the same for both
    (:func:`key_set_divisor`). The smaller table is read whole (its key columns only) up to
    :data:`KEY_MATCH_WHOLE_ROWS`, sampled past it, the larger sampled by whole row groups spread over it
    (:data:`KEY_MATCH_SAMPLE_ROWS`): a fixed cost at any scale. Each measurement once per process and file
    version, or per in-memory table object while it lives.
    """
    from gpu_engine.errors import DataSourceError

    if len(set(a_columns)) != len(a_columns) or len(set(b_columns)) != len(b_columns):
        return None
    try:
        sides = sorted([(a, tuple(a_columns)), (b, tuple(b_columns))], key=lambda side: _table_rows(side[0]))
        (whole, whole_columns), (sampled, sampled_columns) = sides
        key = (_version(whole), whole_columns, _version(sampled), sampled_columns)
        kept = _MATCHES.get(key)
        if kept is not None and all(ref() is not None for ref in kept[1]):
            return kept[0]
        divisor = _key_match_divisor(whole, whole_columns, sampled, sampled_columns)
        if len(_MATCHES) >= _MAX_MATCHES:
            _MATCHES.clear()
        _MATCHES[key] = (divisor, tuple(weakref.ref(t.table) for t in (whole, sampled)
                                        if isinstance(getattr(t, "table", None), pa.Table)))
        return divisor
    except (pa.ArrowException, OSError, ValueError, TypeError, OverflowError, DataSourceError, MemoryError):
        return None  # (a file gone or damaged since its statistics: its scan reports it)


def _key_match_divisor(whole, whole_columns: tuple, sampled, sampled_columns: tuple) -> float | None:
    import numpy as np

    keys = _key_columns(whole, whole_columns, KEY_MATCH_WHOLE_ROWS)
    sample = _key_columns(sampled, sampled_columns, KEY_MATCH_SAMPLE_ROWS)
    if keys is None or sample is None or not len(keys[0]) or not len(sample[0]):
        return None
    packed = _packed(keys, sample)
    if packed is None:
        return None
    (built, built_valid), (probed, probed_valid) = packed
    values, counts = np.unique(built[built_valid], return_counts=True)
    probed = probed[probed_valid]
    at = np.minimum(np.searchsorted(values, probed), max(0, len(values) - 1))
    matches = int(counts[at][values[at] == probed].sum()) if len(values) else 0
    # Each side's rows read: both sampled alike, the matches scale by both fractions (read whole: its rows).
    return len(keys[0]) * len(sample[0]) / matches if matches else None


def _packed(keys: list, sample: list) -> tuple | None:
    """Return both sides' key columns packed into one int64 per row (each column's offset from the two sides'
    least value, times the ranges of the columns after it) with the rows where none is NULL; None for a column
    that is not integer or date, or ranges whose product passes 2^62."""
    import numpy as np

    sides = [[], []]
    valid = [None, None]
    for k, columns in enumerate((keys, sample)):
        for column in columns:
            found = _integers(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
            if found is None:
                return None
            sides[k].append(found[0])
            valid[k] = found[1] if valid[k] is None else valid[k] & found[1]
    packed = [np.zeros(len(sides[0][0]), np.int64), np.zeros(len(sides[1][0]), np.int64)]
    span = 1
    for a, b in zip(sides[0], sides[1]):
        low = min(int(a.min()) if len(a) else 0, int(b.min()) if len(b) else 0)
        high = max(int(a.max()) if len(a) else 0, int(b.max()) if len(b) else 0)
        width = high - low + 1
        span *= width
        if span > 1 << 62:
            return None
        packed = [packed[0] * width + (a - low), packed[1] * width + (b - low)]
    return (packed[0], valid[0]), (packed[1], valid[1])


def _integers(column: pa.Array) -> tuple | None:
    """Return an integer or date column's values as int64 and where they are not NULL (read from its buffers: a
    NULL's slot holds any value), or None for another type. Why not Arrow's compute functions: ``fill_null``
    imported pandas, 1-2 s of a query's planning here."""
    import numpy as np

    if pa.types.is_date32(column.type):
        width, signed = 32, True
    elif pa.types.is_date64(column.type):
        width, signed = 64, True
    elif pa.types.is_integer(column.type):
        width, signed = column.type.bit_width, pa.types.is_signed_integer(column.type)
    else:
        return None
    buffers = column.buffers()
    n, offset = len(column), column.offset
    values = np.frombuffer(buffers[1], np.dtype(f"{'' if signed else 'u'}int{width}"), count=offset + n)[offset:]
    valid = np.ones(n, bool)
    if column.null_count and buffers[0] is not None:
        valid = np.unpackbits(np.frombuffer(buffers[0], np.uint8), bitorder="little")[offset:offset + n].astype(bool)
    values = values.astype(np.int64)
    if pa.types.is_date64(column.type):
        # The engine reads a date64 as days, its milliseconds past a day's start cut toward zero (as DuckDB:
        # Column.from_arrow): two rows of one day at other milliseconds are one date, one group and one key.
        values = np.where(values >= 0, values // 86_400_000, -((-values) // 86_400_000))
    return values, valid


def _table_rows(table) -> int:
    arrow_table = getattr(table, "table", None)
    if isinstance(arrow_table, pa.Table):
        return arrow_table.num_rows
    files = tuple(getattr(table, "files", ()) or ())
    return sum(table.footer(f).num_rows for f in files) if files else 0


def _version(table) -> tuple:
    """A Parquet table's files as they are now (paths, sizes, times), or an in-memory table's identity (an Arrow
    table does not change; the entry keeps a weak reference to it: :data:`_MATCHES`)."""
    arrow_table = getattr(table, "table", None)
    if isinstance(arrow_table, pa.Table):
        return ("arrow", id(arrow_table))
    files = tuple(getattr(table, "files", ()) or ())
    return tuple((f.path, f.size, f.modified_ns) for f in map(table.footer, files))


def _key_columns(table, columns: tuple, budget: int) -> list | None:
    """Return ``columns`` of ``table`` (arrays): every row, or about ``budget`` rows as whole row groups spread over
    it (evenly spaced rows of an Arrow table); None where the row groups chosen hold more than
    :data:`KEY_MATCH_MAX_READ_ROWS`, or the engine's page decoder does not read one of them (a key the scan
    would hand to pyarrow: not worth pyarrow's reader, whose import alone cost 1-2 s of planning here). A damaged file raises
    DataSourceError (the caller keeps the per-column estimate; the scan reports it)."""
    from gpu_engine.connectors.data_source import parquet_metadata
    from gpu_engine.connectors.parquet_columns import decodable_columns, read_decoded_columns

    arrow_table = getattr(table, "table", None)
    if isinstance(arrow_table, pa.Table):
        chosen = arrow_table.select(list(columns))
        if chosen.num_rows > budget:
            import numpy as np

            chosen = chosen.take(pa.array(np.arange(budget, dtype=np.int64) * chosen.num_rows // budget))
        return list(chosen.columns)
    groups = []  # (path, metadata, row group, rows)
    for path in getattr(table, "files", ()) or ():
        metadata = parquet_metadata(path)
        groups.extend((path, metadata, g, metadata.row_group(g).num_rows) for g in range(metadata.num_row_groups))
    groups = [g for g in groups if g[3]]
    if not groups:
        return None
    if sum(g[3] for g in groups) > budget:
        count = max(1, min(len(groups), round(budget * len(groups) / sum(g[3] for g in groups))))
        groups = [groups[int((i + 0.5) * len(groups) / count)] for i in range(count)]
    if sum(g[3] for g in groups) > KEY_MATCH_MAX_READ_ROWS:
        return None
    pieces = {name: [] for name in columns}
    for path in dict.fromkeys(g[0] for g in groups):
        chosen = [g[2] for g in groups if g[0] == path]
        metadata = next(g[1] for g in groups if g[0] == path)
        decodable = decodable_columns(metadata, list(columns))
        read = read_decoded_columns(path, metadata, chosen, decodable) if len(decodable) == len(columns) else {}
        if len(read) != len(columns):
            return None
        for name in columns:
            pieces[name].append(read[name])
    return [pa.chunked_array(pieces[name]) for name in columns]


#: The most rows of a table :func:`unique_column` reads whole to prove a column unique: past it, nothing is
#: proven (the read runs while planning; TPC-H SF10's customer, 1.5M rows, is read, its orders, 15M, is not).
UNIQUE_PROOF_MAX_ROWS = KEY_MATCH_MAX_READ_ROWS

#: (the table's version, column) -> (proven, weak references to in-memory tables read), as :data:`_MATCHES`.
_UNIQUE: dict[tuple, tuple] = {}


def unique_column(table, column: str, null: bool = True) -> bool:
    """Return True when every row of registered ``table`` (Parquet files or an Arrow table) holds a distinct value
    of integer or date ``column``, at most one of them NULL (unique as a grouping compares rows; ``null=False``:
    none NULL, so an equality join on it finds every row): read from the rows, never estimated.

    Why: a GROUP BY over a join whose keys hold a column unique in its table groups one row per value of it
    where the other side is unique on the join key (:mod:`~gpu_engine.optimizer.unique_groupings`): the
    aggregation, with its string keys' hashing, can go. ``min``/``max`` and a range equal to the rows say only
    "about unique" (:func:`key_like`, for estimates); a wrong proof would be a wrong answer, so the column is
    read whole (:data:`UNIQUE_PROOF_MAX_ROWS` at most) and a Parquet table's files must be as they were at
    ``register`` (a file rewritten since is read anew by its scans, so a proof of its old rows proves nothing;
    a table registered again is another object, and the plan cache then plans again). False where it cannot be
    read or proven. Each answer once per process and file version, or per in-memory table object while it lives.
    """
    import numpy as np

    from gpu_engine.errors import DataSourceError

    try:
        rows = _table_rows(table)
        if not 0 < rows <= UNIQUE_PROOF_MAX_ROWS or not _as_registered(table):
            return False
        key = (_version(table), column)
        kept = _UNIQUE.get(key)
        if (kept is not None and all(ref() is not None for ref in kept[1])
                and kept[2] == column_fingerprint(table, column)):
            return kept[0] == "unique" or (null and kept[0] == "unique with a NULL")
        proven = "no"
        read = _key_columns(table, (column,), UNIQUE_PROOF_MAX_ROWS)
        array = read[0] if read else None
        found = None
        if array is not None and len(array) == rows:  # every row read
            found = _integers(array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array)
        if found is not None:
            values, valid = found
            nulls = len(values) - int(valid.sum())
            if nulls <= 1 and _distinct(values[valid]):
                proven = "unique with a NULL" if nulls else "unique"
        if len(_UNIQUE) >= _MAX_MATCHES:
            _UNIQUE.clear()
        arrow_table = getattr(table, "table", None)
        _UNIQUE[key] = (proven, (weakref.ref(arrow_table),) if isinstance(arrow_table, pa.Table) else (),
                        column_fingerprint(table, column))
        return proven == "unique" or (null and proven == "unique with a NULL")
    except (pa.ArrowException, OSError, ValueError, TypeError, OverflowError, DataSourceError, MemoryError, KeyError):
        return False


def column_fingerprint(table, column: str) -> tuple:
    """Return a CRC-32 per buffer of an in-memory table's ``column`` (a Parquet table's: (), its files' versions
    say whether it changed).

    Why: Arrow tables do not change, but one built from NumPy arrays without a copy (``pa.table({"k": array})``)
    shares their memory, and pyarrow does not mark such buffers: ``array[5] = 6`` after ``register`` changes the
    rows under a proof that ``k`` is unique, and a GROUP BY planned away on it would keep a group too many. The
    proof and every kept plan relying on it are checked against the buffers' checksums before use (a proof reads
    at most :data:`UNIQUE_PROOF_MAX_ROWS` rows, so this is a few milliseconds at most)."""
    import zlib

    arrow_table = getattr(table, "table", None)
    if not isinstance(arrow_table, pa.Table) or column not in arrow_table.column_names:
        return ()
    return tuple(zlib.crc32(buffer) if buffer is not None else None
                 for chunk in arrow_table.column(column).chunks for buffer in chunk.buffers())


def _version_now(table) -> tuple:
    """A Parquet table's files' (path, size, modification time) read now (an in-memory table: ())."""
    import os

    return tuple((path, os.stat(path).st_size, os.stat(path).st_mtime_ns)
                 for path in (getattr(table, "files", ()) or ()))


def _distinct(values) -> bool:
    """Return True when no two of int64 ``values`` are equal: counted per value where their range is at most a
    few times their number (a key column: one pass), else sorted."""
    import numpy as np

    if not len(values):
        return True
    low, high = int(values.min()), int(values.max())
    if high - low < 4 * len(values) + 1024:
        return int(np.bincount(values - low).max()) <= 1
    return len(np.unique(values)) == len(values)


def _as_registered(table) -> bool:
    """Return True for an in-memory table of Arrow's own memory (not a pandas frame's: ``borrowed``), or a Parquet
    table whose every file has the size and modification time it had at ``register`` (a table without registered
    versions: False, nothing says its files are the ones planned over)."""
    if isinstance(getattr(table, "table", None), pa.Table):
        return not getattr(table, "borrowed", False)  # a pandas frame written to in place changes its rows
    files = tuple(getattr(table, "files", ()) or ())
    versions = tuple(getattr(table, "versions", ()) or ())
    if not files or len(versions) != len(files):
        return False
    return all((f.size, f.modified_ns) == tuple(v) for f, v in zip(map(table.footer, files), versions))


class RegisteredStatistics(Mapping):
    """Table name -> statistics of a session's registered tables, each computed when the planner first asks.

    Why lazy: a query reads a few of the registered tables; the others'
    statistics (an in-memory table's min/max pass) are never needed.
    """

    def __init__(self, tables: Mapping[str, object], known: Mapping[str, TableStatistics] | None = None):
        """``known``: statistics already taken (a Session's cached tables, whose files are not read again)."""
        self._tables = tables
        self._computed: dict[str, TableStatistics] = dict(known or {})
        self._matches: dict[tuple, float | None] = {}
        self._unique: dict[tuple, bool] = {}

    def __getitem__(self, name: str) -> TableStatistics:
        if name not in self._computed:
            self._computed[name] = table_statistics(self._tables[name])
        return self._computed[name]

    def key_match_divisor(self, a: str, a_columns: Sequence[str], b: str, b_columns: Sequence[str]) -> float | None:
        """Return :func:`key_match_divisor` of registered tables ``a`` and ``b`` (None for a table not registered)."""
        if a not in self._tables or b not in self._tables:
            return None
        key = (a, tuple(a_columns), b, tuple(b_columns))
        if key not in self._matches:  # (a join search estimates one join many times)
            self._matches[key] = key_match_divisor(self._tables[a], a_columns, self._tables[b], b_columns)
        return self._matches[key]

    def wide_key_count(self, table: str, column: str) -> float | None:
        """Return :func:`wide_key_count` of registered table ``table``'s ``column`` (None for a table not
        registered)."""
        if table not in self._tables or column not in self[table].columns:
            return None
        return wide_key_count(self._tables[table], self[table], column)

    def unique_column(self, table: str, column: str, null: bool = True) -> bool:
        """Return :func:`unique_column` of registered table ``table`` (False for a table not registered); each
        table proven so is remembered (:meth:`relied_on`)."""
        if table not in self._tables:
            return False
        key = (table, column, null)
        if key not in self._unique:
            self._unique[key] = unique_column(self._tables[table], column, null)
        return self._unique[key]

    def relied_on(self) -> tuple:
        """Return what the proofs :meth:`unique_column` gave hold for: per table proven, its name, the table object
        (weakly) and its files' versions. Why: a plan optimized with a proof is kept by identity
        (:class:`~gpu_engine.planning.prepared_plans.PreparedPlans`) and must not run once the table is another
        object or a file of it was rewritten (:meth:`holds`)."""
        proven = dict.fromkeys((name, column) for (name, column, _), unique in self._unique.items() if unique)
        names = dict.fromkeys(name for name, _ in proven)
        return tuple((name, weakref.ref(self._tables[name]), _version_now(self._tables[name]),
                      tuple((column, column_fingerprint(self._tables[name], column))
                            for n, column in proven if n == name))
                     for name in names)

    def holds(self, relied_on: tuple) -> bool:
        """Return True while every table of ``relied_on`` (:meth:`relied_on`) is registered as the same object
        with its files, or its proven columns' buffers (:func:`column_fingerprint`), unchanged."""
        try:
            return all(table() is not None and self._tables.get(name) is table() and _version_now(table()) == versions
                       and all(column_fingerprint(table(), column) == fingerprint for column, fingerprint in proofs)
                       for name, table, versions, proofs in relied_on)
        except OSError:
            return False

    def __iter__(self):
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)
