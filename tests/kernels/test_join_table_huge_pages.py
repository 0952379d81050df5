"""A join's key table large enough to miss the TLB is advised huge pages (gpu_engine.host_allocator.advise_huge_pages).

Why: probes read the packed key table at random; on 4 KiB pages nearly every probe of a table beyond the TLB's reach
also missed the TLB (3M build keys, 6M probes: 0.93 -> 0.63 s CPU with the advice,
bench/results/2026-11-28-dbbench3-huge-page-tables.md). The advice never changes a match.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.group_by import normalize_keys


def test_a_large_packed_key_table_is_advised_huge_pages_and_matches_the_same(monkeypatch, device_name):
    if device_name != "cpu":
        pytest.skip("host memory advice: the packed table is a host array on cpu only")
    import gpu_engine.host_allocator as host_allocator
    import gpu_engine.kernels.hash_join as hash_join
    from gpu_engine.device import get_device

    threshold = 4 << 20  # lowered from 32 MiB: ~200K keys make a packed table of 512K slots x 2 words (8 MB)
    monkeypatch.setattr(host_allocator, "HUGE_PAGE_MIN_BYTES", threshold)
    advised: list[tuple[int, bool]] = []
    advise = hash_join.advise_huge_pages

    def recording(array):
        done = advise(array)
        advised.append((int(array.nbytes), done))
        return done

    monkeypatch.setattr(hash_join, "advise_huge_pages", recording)
    device = get_device("cpu")
    rng = np.random.default_rng(5)
    build = rng.permutation(800_000)[:200_000].astype(np.int64) * 3 + 1
    probe = np.concatenate([build[rng.integers(0, len(build), 50_000)], np.arange(2, 30_002, 3, dtype=np.int64)])
    keys, widths = normalize_keys(device, [Column.from_arrow(pa.array(build), device)])
    table = hash_join.JoinHashTable(device, keys, widths)
    assert any(nbytes >= threshold for nbytes, _ in advised), advised
    if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):  # a Linux kernel with huge pages
        assert all(done for nbytes, done in advised if nbytes >= threshold), advised
    probe_keys, probe_widths = normalize_keys(device, [Column.from_arrow(pa.array(probe), device)], table.widths)
    probe_rows, build_rows = (device.to_host(a) for a in table.match(probe_keys, probe_widths))
    position = {int(k): i for i, k in enumerate(build)}
    expected = sorted((i, position[int(k)]) for i, k in enumerate(probe) if int(k) in position)
    assert sorted(zip(probe_rows.tolist(), build_rows.tolist())) == expected
    assert len(expected) == 50_000  # every key of the second part is 2 mod 3: none is a build key
