"""Carry rows between Tasks as Arrow IPC stream bytes (Velox's ``SerializedPage``).

A page is what crosses the wire of a shuffle: self-contained (it holds its own
schema, so a consumer needs nothing else to read it), meant for one destination
(or, for a broadcast, for all), and already on the host. Arrow IPC is the
format because every consumer (another Task, Spark, a client) reads it without
a custom decoder; pyarrow's ``IpcWriteOptions`` compresses buffers with LZ4 or
ZSTD when the query asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pyarrow as pa
import pyarrow.ipc as ipc

__all__ = ["SerializedPage", "serialize_page", "deserialize_page", "COMPRESSIONS"]

COMPRESSIONS = (None, "lz4", "zstd")


@dataclass(frozen=True)
class SerializedPage:
    """One page: IPC stream bytes, the rows they hold and their size on the wire."""

    data: pa.Buffer = field(repr=False)
    num_rows: int

    @property
    def size(self) -> int:
        """Return the bytes this page occupies (what buffers count against their caps)."""
        return self.data.size


def serialize_page(batches: Sequence[pa.RecordBatch], compression: str | None = None) -> SerializedPage:
    """Write record batches of one schema into one IPC stream page.

    Parameters
    ----------
    batches
        At least one batch; all share the first one's schema (dictionaries may
        differ: the IPC stream carries each batch's dictionary).
    compression
        ``None``, ``"lz4"`` or ``"zstd"``.
    """
    if compression not in COMPRESSIONS:
        raise ValueError(f"shuffle compression must be one of {COMPRESSIONS}, got {compression!r}")
    sink = pa.BufferOutputStream()
    options = ipc.IpcWriteOptions(compression=compression)
    with ipc.new_stream(sink, batches[0].schema, options=options) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return SerializedPage(sink.getvalue(), sum(b.num_rows for b in batches))


def deserialize_page(page: SerializedPage) -> pa.Table:
    """Read a page back into an Arrow table (one chunk per batch written)."""
    return ipc.open_stream(page.data).read_all()
