"""Fixtures shared by the kernel tests."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.columnar.column import Column


@pytest.fixture
def string_column_slice(device):
    """Return a factory of plain string columns whose offsets start past 0 (a zero-copy slice).

    ``Column.from_arrow`` rebases offsets to 0, so kernels would otherwise never
    see the absolute, non-zero-based offsets a slice of a column has.
    """

    def make(values: list, start: int) -> Column:
        whole = Column.from_arrow(pa.array(values, pa.string()), device)
        assert int(device.to_host(whole.offsets)[start]) > 0, "pick a start after a non-empty string"
        validity = None if whole.validity is None else whole.validity[start:]
        return Column(pa.string(), whole.data, validity, whole.offsets[start:], None)

    return make
