"""A CPU GroupByHashTable's first batch of narrow keys decides its direct index from the keys' value ranges read in
place (``GroupByHashTable._takes_dense``: int32 halves, stopping at the first key that cannot fit): the decision
and the index are the ones the masked copy of each key computed before, and grouping through either gives the
same ids. Speed-only change (TPC-DS q39's refused 360K-row first batch 6.1 -> ~1.7 ms); the reference below is
the former computation."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar.column import Column
from gpu_engine.device import get_device
from gpu_engine.kernels.group_by import DENSE_CELLS_LIMIT, GroupByHashTable, normalize_keys


def former_decision(words: np.ndarray):
    """Return ``(lows, spans, cells)`` as the masked copies computed them, or None when refused."""
    lows, spans = [], []
    for k in range(words.shape[1]):
        column = words[:, k]
        values = column[column != 0]
        if not values.shape[0]:
            lows.append(0)
            spans.append(1)
            continue
        signed = (values & np.uint64(0xFFFFFFFF)).astype(np.int64)
        signed[signed >= 1 << 31] -= 1 << 32
        low, high = int(signed.min()), int(signed.max())
        lows.append(low)
        spans.append(2 * (high - low + 1))
    cells = math.prod(span + 1 for span in spans)
    return None if cells > DENSE_CELLS_LIMIT else (lows, spans, cells)


def _columns(rng, keys: int, rows: int) -> list[pa.Array]:
    kinds = [
        lambda: pa.array(rng.integers(-50, 50, rows), pa.int32()),
        lambda: pa.array(rng.integers(0, 2**32 - 1, rows, dtype=np.uint64).astype(np.uint32) % 7 + np.uint32(2**32 - 9),
                         pa.uint32()),
        lambda: pa.array(rng.integers(0, 3, rows).astype(np.int8), pa.int8()),
        lambda: pa.array(rng.random(rows) < 0.5, pa.bool_()),
        lambda: pa.array(rng.integers(-(2**31), 2**31 - 1, rows), pa.int32()),
        lambda: pa.array(rng.integers(18000, 18010, rows).astype(np.int32), pa.date32()),
        lambda: pa.nulls(rows, pa.int16()),
    ]
    out = []
    for _ in range(keys):
        array = kinds[int(rng.integers(0, len(kinds)))]()
        if rng.random() < 0.5:  # NULLs in some keys
            mask = pa.array(rng.random(rows) < 0.2)
            array = pa.compute.if_else(mask, pa.scalar(None, array.type), array)
        out.append(array)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_first_batch_decides_as_the_masked_copies_did(seed):
    device = get_device("cpu")
    rng = np.random.default_rng(seed)
    keys, rows = int(rng.integers(1, 5)), int(rng.integers(1, 3000))
    columns = [Column.from_arrow(a, device) for a in _columns(rng, keys, rows)]
    words, widths = normalize_keys(device, columns, narrow=True)
    words = np.ascontiguousarray(words).view(np.uint64)
    table = GroupByHashTable(device, widths)
    taken = table._takes_dense(words)
    expected = former_decision(words)
    assert taken == (expected is not None)
    if taken:
        lows, spans, strides, cells = table._dense
        assert lows.tolist() == expected[0] and spans.tolist() == expected[1] and cells.shape[0] == expected[2]
    # grouping through the decision gives the ids a hash table gives (first-seen order)
    ids, _ = GroupByHashTable(device, widths).insert(words)
    hashed = GroupByHashTable(device, widths)
    hashed._dense_refused = True
    assert ids.tolist() == hashed.insert(words)[0].tolist()
