"""Tests for gpu_engine.kernels.string_keys: ids in order of first appearance, batch after batch, on every twin."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.string_keys import StringKeyTable


@pytest.mark.parametrize("serial_rows", [0, 1 << 20], ids=["parallel", "serial"])
def test_ids_follow_first_appearance_across_batches_growth_nulls_and_dictionaries(device, serial_rows):
    """Whichever CUDA twin runs (rows claiming slots in parallel, or one thread), a tiny table (16 slots, 128 bytes) must grow its slots, ids and bytes mid-batch; strings that differ only
    past their first 8 bytes, by length, or by a trailing zero byte stay apart; NULL rows get 0 and add nothing;
    a dictionary-encoded batch and a sliced batch (offsets not starting at 0) map to the same ids."""
    table = StringKeyTable(device, initial_capacity=16, serial_rows=serial_rows)
    known: dict[str, int] = {}

    def check(array: pa.Array) -> None:
        expected = []
        for value in array.to_pylist():
            if value is not None and value not in known:
                known[value] = len(known)
            expected.append(0 if value is None else known[value])
        ids = device.to_host(table.intern(Column.from_arrow(array, device)))
        assert [int(i) for i in ids] == expected
        assert table.num_known == len(known)

    check(pa.array(["b", None, "a", "b", "é", "", "abcdefgh1", "abcdefgh2", "abcdefgh", "a\x00"]))
    check(pa.array([f"key-{i % 40:03d}-{'x' * (i % 11)}" for i in range(90)] + [None, "a"]))
    check(pa.array(["new", "b", None, "key-001-x", "z" * 300]).dictionary_encode())
    check(pa.array(["q", "key-002-xx", "b", "tail"]).slice(1, 3))
    check(pa.array([], pa.string()))
    # Probes compare the first 16 bytes and the length as words, then the rest 8 bytes at a time: strings
    # that differ only in their 17th or last byte, or by trailing zero bytes past 8 and 16, stay apart.
    base = "0123456789abcdef"
    check(pa.array([base + "a", base + "b", base, base + "\x00", base[:8] + "\x00", base[:8], base * 3 + "z",
                    base * 3 + "y", base + "a", base * 3 + "z", base[:15] + "x" + "a"]))
    values = table.values().to_arrow(device).to_pylist()
    assert values == sorted(known, key=known.get)


def test_rows_at_the_end_of_an_exact_size_buffer_read_their_last_bytes_one_by_one(device):
    """A chars buffer with no padding after its last string (a sliced or hand-built column): the last rows'
    words are read without going past the buffer, and equal strings elsewhere in the buffer get the same id."""
    values = ["abcdefghij", "xy", "abcdefghijklmnopqrst", "xy", "abcdefghij", "abcdefghijklmnopqrst"]
    raw = "".join(values).encode()
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int64)
    column = Column(pa.string(), device.asarray(np.frombuffer(raw, dtype=np.uint8).copy()), None,
                    device.asarray(offsets))
    table = StringKeyTable(device)
    assert [int(i) for i in device.to_host(table.intern(column))] == [0, 1, 2, 1, 0, 2]
    assert table.values().to_arrow(device).to_pylist() == values[:3]
