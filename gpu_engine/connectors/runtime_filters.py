"""Apply a Task's runtime join-key filters to a scan's splits: skip row groups, drop rows (on the host).

The filters (:class:`~gpu_engine.exec.dynamic_filters.JoinKeyFilter`) come
from finished hash-join build sides (:mod:`gpu_engine.exec.dynamic_filters`).
A Parquet split loses the row groups whose statistics (from the engine's
checked footer reader, :func:`~gpu_engine.connectors.parquet_footer.read_footer`)
show that no key in them can match, before any of their pages is read; the
rows of what is decoded that no key can match are found on the host
(:func:`select_rows`): a host batch keeps the others as its gather map (no
copy), and a batch bound for a GPU is cut to them before it is copied
(:func:`filter_record_batches`), so the copy shrinks too and no device work
or sync is added per batch.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.connectors.parquet_footer import read_footer
from gpu_engine.exec.dynamic_filters import JoinKeyFilter
from gpu_engine.exec.split import ConnectorSplit, ParquetSplit

__all__ = ["prune_row_groups", "select_rows", "filter_record_batches"]


def prune_row_groups(split: ConnectorSplit, filters: Sequence[JoinKeyFilter]) -> tuple[ConnectorSplit | None, int]:
    """Return the split without the row groups no filter's key can be in (None: none left), and how many went.

    Row groups the split names that the file does not have are left in place, for the reader to report.
    """
    if not filters or not isinstance(split, ParquetSplit):
        return split, 0
    footer = read_footer(split.path)
    leaf_of = {leaf.path: index for index, leaf in enumerate(footer.leaves) if leaf.top_level}
    checks = [(f, leaf_of[f.column]) for f in filters if f.column in leaf_of]
    if not checks:
        return split, 0
    groups = list(split.row_groups) or list(range(len(footer.row_groups)))
    kept = []
    for group in groups:
        if 0 <= group < len(footer.row_groups) and not _may_match(footer.row_groups[group], checks):
            continue
        kept.append(group)
    skipped = len(groups) - len(kept)
    if not skipped:
        return split, 0
    return (dataclasses.replace(split, row_groups=tuple(kept)) if kept else None), skipped


def _may_match(group, checks) -> bool:
    """Return False when some filter rules out every row of a row group by its statistics."""
    if group.num_rows == 0:
        return True
    for key_filter, leaf in checks:
        statistics = group.columns[leaf].statistics
        if statistics is None:
            if key_filter.is_empty:
                return False
            continue
        if statistics.null_count == group.num_rows or key_filter.is_empty:
            return False  # only NULLs (which match nothing), or nothing can match
        if statistics.minimum is None:
            continue
        try:
            if not key_filter.may_match(statistics.minimum, statistics.maximum):
                return False
        except TypeError:  # statistics of a type the filter does not compare: no conclusion
            continue
    return True


def select_rows(batch: pa.RecordBatch, filters: Sequence[JoinKeyFilter]) -> np.ndarray | None:
    """Return the increasing ``int32`` rows of ``batch`` every filter keeps, or None when they keep every row."""
    names = batch.schema.names
    mask = None
    for key_filter in filters:
        if key_filter.column in names:
            keep = key_filter.mask(batch.column(names.index(key_filter.column)))
            mask = keep if mask is None else mask & keep
    if mask is None:
        return None
    rows = np.flatnonzero(mask)
    return None if len(rows) == batch.num_rows else rows.astype(np.int32, copy=False)


def filter_record_batches(batches: list[pa.RecordBatch], selections: Sequence[np.ndarray | None]) -> list[pa.RecordBatch]:
    """Return each batch cut to its selected rows (None: all of them), empty ones left out."""
    kept = []
    for batch, rows in zip(batches, selections):
        if rows is None or len(rows) == batch.num_rows:
            kept.append(batch)
        elif len(rows):
            kept.append(batch.take(pa.array(rows)))
    return kept
