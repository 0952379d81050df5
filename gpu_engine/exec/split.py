"""Name the pieces of data a Task's source operators read (Velox's ``exec::Split``).

A split is addressed to one plan node: a TableScan reads ConnectorSplits, an
Exchange reads RemoteSplits, each naming one producer Task. Splits
may be added after the Task started; a source operator asks the Task for the
next one and gets either a split, a future that completes when one arrives, or
"no more splits".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

__all__ = ["ConnectorSplit", "ParquetSplit", "ArrowSplit", "RemoteSplit"]


@dataclass(frozen=True)
class ConnectorSplit:
    """Base of the splits a connector's DataSource reads."""

    def describe(self) -> str:
        """Return a short text for logs and errors."""
        return type(self).__name__

    def num_rows(self) -> int | None:
        """Return the rows the split holds when known without reading it (None otherwise)."""
        return None


@dataclass(frozen=True)
class ParquetSplit(ConnectorSplit):
    """A Parquet file and a range of its row groups (``row_groups`` empty = the whole file)."""

    path: str
    row_groups: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"{self.path} row groups {list(self.row_groups) or 'all'}"

    def num_rows(self) -> int | None:
        """Return the row groups' rows from the file's footer (cached: the scan reads the same one)."""
        from gpu_engine.connectors.parquet_footer import read_footer
        from gpu_engine.errors import GpuEngineError

        try:
            footer = read_footer(self.path)
        except (OSError, GpuEngineError):  # the scan reports a bad file; an estimate only goes without
            return None
        if not self.row_groups:
            return footer.num_rows
        return sum(footer.row_groups[g].num_rows for g in self.row_groups if 0 <= g < len(footer.row_groups))


@dataclass(frozen=True)
class ArrowSplit(ConnectorSplit):
    """Record batches already in memory (a registered ``pyarrow.Table`` slice, a Spark partition)."""

    table: pa.Table = field(compare=False, repr=False)

    def describe(self) -> str:
        return f"arrow {self.table.num_rows} rows"

    def num_rows(self) -> int | None:
        return self.table.num_rows


@dataclass(frozen=True)
class RemoteSplit(ConnectorSplit):
    """A producer Task whose output buffer ``destination`` an Exchange reads (Velox's RemoteConnectorSplit).

    ``destination`` is the consumer Task's number within its stage: the
    partition of the producer's PartitionedOutput meant for it.
    """

    task_id: str
    destination: int = 0

    def describe(self) -> str:
        return f"remote {self.task_id} destination {self.destination}"
