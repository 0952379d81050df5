"""Concatenate columns and batches on their device (barriers gather their input this way)."""

from __future__ import annotations

from typing import Sequence

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.device import Device

__all__ = ["concat_columns", "concat_batches"]


def _decoded(device: Device, column: Column) -> Column:
    """Return a plain string column for a dictionary one (gathering values by codes; a row is NULL by its own
    validity or its NULL dictionary entry: the row's validity alone made the latter an empty string)."""
    from gpu_engine.kernels.gather import decoded_column

    return decoded_column(device, column)


#: Dictionary columns with different dictionaries are concatenated as codes into one merged dictionary
#: while their dictionaries hold at most this many values in all (and at most half as many as the rows) ...
MERGED_DICTIONARY_MAX_VALUES = 1 << 16


def _same_dictionary(columns: Sequence[Column]) -> bool:
    first = columns[0].dictionary
    if all(c.dictionary is first for c in columns):
        return True
    return first.fingerprint is not None and all(c.dictionary.fingerprint == first.fingerprint for c in columns)


def _merged_dictionary_codes(device: Device, columns: Sequence[Column]) -> tuple[Column, list]:
    """Return one dictionary holding every column's dictionary values once, and each column's codes into it.

    Why: each Parquet row group (and so each scan batch) has a dictionary of its own, and a barrier that
    concatenated batches (a join's build side, a sort) decoded them into plain strings: 4-byte codes became
    whole strings to gather, and predicates on the column ran per row instead of once per distinct value
    (TPC-H Q19's join filter on ``p_brand`` and ``p_container``). The dictionaries are small, so they are
    merged on the host (one read each) and the codes remapped on the device, one gather per column.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from gpu_engine.kernels.gather import gather

    values = pa.concat_arrays([c.dictionary.to_arrow(device).cast(pa.large_string()) for c in columns])
    # Each value of the concatenated dictionaries as a code into their distinct values (fingerprinted).
    remapping = Column.from_arrow(pc.dictionary_encode(values), device)
    dictionary, remap = remapping.dictionary, remapping.data
    codes, start = [], 0
    for c in columns:
        codes.append(gather(device, remap, c.data + start) if start else gather(device, remap, c.data))
        start += len(c.dictionary)
    return dictionary, codes


def concat_columns(device: Device, columns: Sequence[Column]) -> Column:
    """Return one column holding ``columns`` one after another.

    Dictionary columns stay encoded: codes are concatenated, into the shared dictionary, or into one merged
    from theirs while those are small (:data:`MERGED_DICTIONARY_MAX_VALUES`); otherwise strings are decoded
    and their offsets rebased, reading every column's first and last offset in one host sync.
    """
    if len(columns) == 1:
        return columns[0]
    xp = device.xp
    first = columns[0]
    validity = None
    if any(c.validity is not None for c in columns):
        validity = xp.concatenate([c.validity if c.validity is not None else xp.ones(len(c), dtype=xp.bool_) for c in columns])
    if all(c.dictionary is not None for c in columns):
        if _same_dictionary(columns):
            return Column(first.dtype, xp.concatenate([c.data for c in columns]), validity, None, first.dictionary)
        sizes = [len(c.dictionary) for c in columns]
        # (an empty dictionary, of an all-NULL column, has no code to remap: such columns are decoded below)
        if all(sizes) and sum(sizes) <= min(MERGED_DICTIONARY_MAX_VALUES, sum(len(c) for c in columns) // 2):
            dictionary, codes = _merged_dictionary_codes(device, columns)
            return Column(first.dtype, xp.concatenate(codes), validity, None, dictionary)
    if first.is_string:
        plain = [_decoded(device, c) for c in columns]
        if any(c.validity is not None for c in plain):  # a decoded row is also NULL by its dictionary entry
            validity = xp.concatenate([c.validity if c.validity is not None else xp.ones(len(c), dtype=xp.bool_)
                                       for c in plain])
        ends = device.read_scalars([end for c in plain for end in (c.offsets[0], c.offsets[-1])])
        chars, offsets, base = [], [xp.zeros(1, dtype=xp.int64)], 0
        for index, c in enumerate(plain):
            start, stop = ends[2 * index], ends[2 * index + 1]
            chars.append(c.data[start:stop])
            offsets.append(c.offsets[1:].astype(xp.int64) - start + base)
            base += stop - start
        return Column(first.dtype, xp.concatenate(chars), validity, xp.concatenate(offsets), None)
    if any(c.data.ndim == 2 for c in columns):  # wide decimals beside narrow ones: all as (low, high) words
        from gpu_engine.expressions.numeric import as_words

        return Column(first.dtype, xp.concatenate([as_words(device, c) for c in columns]), validity)
    return Column(first.dtype, xp.concatenate([c.data for c in columns]), validity)


def concat_batches(batches: Sequence[Batch]) -> Batch:
    """Return one flat batch (no gather map) holding the rows of ``batches`` in order."""
    if not batches:
        raise ValueError("concat_batches needs at least one batch")
    if len(batches) == 1:
        return batches[0].materialize()
    first = batches[0]
    flat = [b.materialize() for b in batches]
    columns = tuple(concat_columns(first.device, [b.columns[i] for b in flat]) for i in range(len(first.names)))
    return Batch(first.names, columns, first.device, None, sum(b.num_rows for b in flat))
