"""Read a Parquet piece's join-key columns first, and its other columns only where the filters keep rows.

Why: a TPC-DS fact scan (``store_sales`` under q7's four join-key filters)
decoded and converted every row of all its columns, then dropped 99.7% of
them. Read here, the columns the filters test are decoded and tested first
(:func:`~gpu_engine.connectors.runtime_filters.select_rows`), one after
another, the one that kept the fewest rows in the scan's earlier pieces
first, each later one read (as below) for the rows the earlier ones kept; then

* no row kept: the other columns are not read at all;
* few rows kept (at most ``cut_share`` of the piece): the other columns are
  decoded only in the row groups that hold a kept row, and there only the
  kept rows (:meth:`~gpu_engine.connectors.data_source.SplitPiece.read` with
  ``kept``: fixed-width pages without a kept row are skipped, the kept values
  unpacked by position, :func:`~gpu_engine.kernels.parquet_pages.decode_chunk` with ``wanted``;
  strings and what pyarrow reads are decoded whole and cut); the piece comes
  back as record batches of the kept rows only;
* many rows kept: the other columns are read whole and each batch keeps its
  selection, as a piece read in one go would.

``late_materialized_rows_skipped`` (rows of the other columns never
converted) and ``late_materialized_row_groups_skipped`` (row groups whose
other columns were never decoded) count it in a scan's runtime stats.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.connectors.data_source import SplitPiece, parquet_metadata
from gpu_engine.connectors.parquet_columns import take_rows
from gpu_engine.connectors.runtime_filters import select_rows
from gpu_engine.exec.dynamic_filters import JoinKeyFilter
from gpu_engine.exec.split import ParquetSplit

__all__ = ["FilteredPiece", "FEW_KEPT_SHARE", "LATE_CUT_SHARE", "read_filtered_piece"]

#: Once a piece's filters tested so far keep at most this share of its rows, a filter's own conjuncts tested in the
#: scan (:mod:`~gpu_engine.connectors.scan_predicates`) are not tested there: their columns are read with the other
#: columns for the rows kept, and the Filter above tests those. Why: each column tested is one more read of the piece
#: (a string column decoded whole, then cut) and one more cut of the columns read before it; TPC-H q19's lineitem,
#: whose join-key filter keeps 0.25%, cost +13% CPU testing its two string conjuncts after it (loaded A/B; since
#: b2072bf a scan with a join-key filter tests none of them, and this bounds a run of a filter's own conjuncts).
FEW_KEPT_SHARE = 1 / 32

#: A host scan reads a piece's other columns for the kept rows only while its filters keep at most this share of
#: the piece (its ``cut_share``). Why not ``CUT_BELOW_SHARE`` (1/8, measured for cutting converted Arrow batches): a
#: month-of-a-year date filter keeps ~1/5 of a fact table, and decoding the kept values by position beat decoding
#: and converting every row there (TPC-DS SF1 process CPU q70 470 -> 371 ms, q62 127 -> 107, q99 94 -> 82).
LATE_CUT_SHARE = 0.5


@dataclass
class FilteredPiece:
    """A piece read under join-key filters: its record batches and what the filters did."""

    batches: list[pa.RecordBatch]
    selections: list[np.ndarray | None]  # per batch, the rows to keep (None: all, or cut already)
    cut: bool  # the batches hold only the rows kept
    dropped: int  # rows the filters dropped
    filter_seconds: float  # spent testing rows (and cutting the tested columns)
    rows_skipped: int = 0  # rows of the other columns never converted
    row_groups_skipped: int = 0  # row groups whose other columns were never decoded


def read_filtered_piece(piece: SplitPiece, filters: Sequence[JoinKeyFilter], cut_share: float,
                        use_threads: bool = False, decode_threads: int | None = None,
                        shares: dict[str, float] | None = None) -> FilteredPiece | None:
    """Read ``piece`` testing its ``filters`` before its other columns are read (see the module's docstring).

    ``cut_share``: the largest share of the piece's rows kept for which the later columns are read for
    the kept rows only. The filters' columns are read one after another, each for the rows the earlier
    ones kept; ``shares`` (a scan's, updated here) orders them by the share of rows each kept in earlier
    pieces, so the most selective is read whole and tested first. None when there is nothing to read
    late: not a Parquet piece, no column the filters test, or no other column.

    """
    tested_names = {key_filter.column for key_filter in filters}
    tested = tuple(name for name in piece.columns if name in tested_names)
    others = tuple(name for name in piece.columns if name not in tested_names)
    if not isinstance(piece.split, ParquetSplit) or not tested or not others or not piece.rows:
        return None
    shares = {} if shares is None else shares
    kept: np.ndarray | None = None  # the rows every filter tested so far keeps (None: all)
    read: dict[str, tuple[np.ndarray | None, pa.ChunkedArray]] = {}  # a column's values, of these rows (None: all)
    seconds = 0.0
    for name in sorted(tested, key=lambda column: shares.get(column, 1.0)):
        own = [key_filter for key_filter in filters if key_filter.column == name]
        before = piece.rows if kept is None else len(kept)
        if not before:
            break
        if before <= FEW_KEPT_SHARE * piece.rows and all(key_filter.static for key_filter in own):
            continue  # read with the other columns, for the rows kept; the Filter above tests them
        if kept is None or len(kept) > cut_share * piece.rows:
            batches = [b for b in dataclasses.replace(piece, columns=(name,)).read(use_threads, decode_threads)
                       if b.num_rows]
            began = time.perf_counter()
            rows = _kept_rows(batches, own)
            if rows is not None:
                kept = rows if kept is None else _both_keep(kept, rows, piece.rows)
            read[name] = (None, pa.Table.from_batches(batches).column(0))
        else:
            batches, _ = _read_kept(piece, (name,), kept, use_threads, decode_threads)
            began = time.perf_counter()
            rows = _kept_rows(batches, own)
            read[name] = (kept, pa.Table.from_batches(batches).column(0))
            if rows is not None:
                kept = kept[rows]
        shares[name] = (piece.rows if kept is None else len(kept)) / before
        seconds += time.perf_counter() - began
    others = tuple(name for name in piece.columns if name not in read)
    dropped = 0 if kept is None else piece.rows - len(kept)
    if kept is None or len(kept) > cut_share * piece.rows:  # many kept: every column whole
        rest = dataclasses.replace(piece, columns=others).read(use_threads, decode_threads)
        columns = {name: column for name, (_, column) in read.items()}
        batches = _joined(piece.columns, pa.table(columns).to_batches(), rest)
        if kept is None:
            return FilteredPiece(batches, [None] * len(batches), False, 0, seconds)
        return FilteredPiece(batches, _per_batch(kept, batches), False, dropped, seconds)
    if not len(kept):
        return FilteredPiece([], [], True, dropped, seconds, dropped, len(piece.row_groups))
    began = time.perf_counter()
    columns = {name: _kept_of(column, rows, kept, piece.rows) for name, (rows, column) in read.items()}
    seconds += time.perf_counter() - began
    rest, holding = _read_kept(piece, others, kept, use_threads, decode_threads)
    batches = _joined(piece.columns, pa.table(columns).to_batches(), rest)
    return FilteredPiece(batches, [None] * len(batches), True, dropped, seconds, dropped,
                         len(piece.row_groups) - holding)


def _kept_rows(batches: list[pa.RecordBatch], filters: Sequence[JoinKeyFilter]) -> np.ndarray | None:
    """Return the increasing ``int32`` rows of the batches (counted across them) the filters keep; None: all."""
    selections = [select_rows(b, filters) for b in batches]
    if all(rows is None for rows in selections):
        return None
    starts = np.cumsum([0] + [b.num_rows for b in batches]).tolist()
    return np.concatenate([np.arange(start, start + b.num_rows, dtype=np.int32) if rows is None else
                           rows + np.int32(start) for b, rows, start in zip(batches, selections, starts)]
                          ).astype(np.int32, copy=False)


def _kept_of(column: pa.ChunkedArray, rows: np.ndarray | None, kept: np.ndarray, count: int) -> pa.ChunkedArray:
    """Return ``column``'s values at the piece's ``kept`` rows, ``column`` holding the values of its increasing
    ``rows`` (None: every row of the piece of ``count``) and ``kept`` a subset of them.

    Why not ``np.searchsorted(rows, kept)``: a binary search per kept row cost ~10 ms for 180k rows of 180k (a
    column read late for rows a later filter kept all of); the same rows need no take at all, and otherwise a
    flag per row of the piece read at ``rows`` gives the positions in one linear pass.
    """
    if rows is None:
        return take_rows(column, kept)
    if len(rows) == len(kept):  # kept is a subset of rows of the same length: the same rows
        return column
    return take_rows(column, _positions(rows, kept, count))


def _positions(rows: np.ndarray, kept: np.ndarray, count: int) -> np.ndarray:
    """Return the ``int32`` positions in the increasing ``rows`` (of a piece of ``count``) of their subset ``kept``."""
    flags = np.zeros(count, dtype=np.bool_)
    flags[kept] = True
    return np.flatnonzero(flags[rows]).astype(np.int32)


def _both_keep(kept: np.ndarray, rows: np.ndarray, count: int) -> np.ndarray:
    """Return the increasing rows in both increasing ``int32`` row lists of a piece of ``count`` rows.

    Why a flag per row, not ``np.intersect1d``: that sorts the two lists joined (q21's inventory piece: 400k and
    120k rows, ~35 ms, more than decoding the piece's columns); marking one list's rows and reading the flags at the
    other's is linear.
    """
    flags = np.zeros(count, dtype=np.bool_)
    flags[rows] = True
    return kept[flags[kept]]


def _read_kept(piece: SplitPiece, columns: tuple[str, ...], kept: np.ndarray, use_threads: bool,
               decode_threads: int | None) -> tuple[list[pa.RecordBatch], int]:
    """Return the record batches of ``columns`` at the piece's ``kept`` rows (non-empty), read only in the row groups
    holding one, and how many row groups those are."""
    metadata = parquet_metadata(piece.split.path)
    group_rows = np.array([metadata.row_group(group).num_rows for group in piece.row_groups], np.int64)
    group_starts = np.concatenate([[0], np.cumsum(group_rows)])
    holding, counts = _groups_holding(kept, group_starts)
    # The kept rows counted from the first row of the first row group holding one, those row groups back to back.
    shift = np.concatenate([[0], np.cumsum(group_rows[holding])])[:len(holding)] - group_starts[holding]
    local = (kept + np.repeat(shift, counts)).astype(np.int32)
    reduced = dataclasses.replace(piece, columns=columns, rows=int(group_rows[holding].sum()),
                                  row_groups=tuple(piece.row_groups[g] for g in holding.tolist()))
    return [b for b in reduced.read(use_threads, decode_threads, kept=local) if b.num_rows], len(holding)


def _groups_holding(kept: np.ndarray, group_starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the row groups (positions in ``group_starts``, each group's first row, then the rows' end) holding
    one of the increasing ``kept`` rows, and how many each holds.

    Why from where the kept rows cross the groups' starts (a search per row group): ``np.unique`` over a search
    per kept row cost ~10 ms for a 180k-row month of inventory (TPC-DS q39 reads two).
    """
    counts = np.diff(np.searchsorted(kept, group_starts))
    holding = np.flatnonzero(counts)
    return holding, counts[holding]


def _joined(names: tuple[str, ...], first: list[pa.RecordBatch], rest: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """Return the record batches of two row-aligned column sets, columns in ``names`` order."""
    columns = {}
    for batches in (first, rest):
        if batches:
            table = pa.Table.from_batches(batches)
            columns.update(zip(table.column_names, table.columns))
    table = pa.Table.from_arrays([columns[name] for name in names], names=list(names))
    return [b for b in table.to_batches() if b.num_rows]


def _per_batch(kept: np.ndarray, batches: list[pa.RecordBatch]) -> list[np.ndarray | None]:
    """Split the piece's kept rows into each batch's own (None: every row of it)."""
    selections: list[np.ndarray | None] = []
    first = 0
    for batch in batches:
        low, high = np.searchsorted(kept, [first, first + batch.num_rows])
        rows = kept[low:high] - np.int32(first)
        selections.append(None if len(rows) == batch.num_rows else rows.astype(np.int32, copy=False))
        first += batch.num_rows
    return selections
