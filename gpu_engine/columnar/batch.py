"""Hold a batch of rows (Velox's RowVector) with an optional gather map.

The gather map is this engine's DictionaryVector-as-selection: an ``int32``
row-index array on the columns' device that selects, reorders or slices the base
columns without copying them. LocalPartition hands each destination the same
base columns with its own gather map; a filter that keeps few rows hands on a
map instead of compacting every column. Consumers that need flat buffers call
:meth:`Batch.materialize` (or :meth:`Batch.column`), which gathers only what
they read.

A column may also carry a map of its own (:attr:`Batch.column_maps`, Velox's
RowVector whose children are DictionaryVectors with different indices): a hash
join hands its pairs to a fused aggregation as the probe batch's columns
through the pairs' probe rows and the build table's columns through their
build rows, and the aggregation's kernel reads both through the maps, so no
column of the join's output is ever gathered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pyarrow as pa

from gpu_engine.columnar.arrow_numpy import empty_table
from gpu_engine.columnar.column import Column
from gpu_engine.device import Device

__all__ = ["Batch", "BatchSlices"]


@dataclass(eq=False)
class Batch:
    """Named columns of equal length on one device, plus an optional gather map.

    Attributes
    ----------
    names, columns
        The base columns, all of ``base_rows`` rows.
    device
        Where the buffers live; every column and the gather map share it.
    gather_map
        ``int32`` indices into the base rows, or ``None`` for "all rows in order".
    base_rows
        Rows in the base columns (kept explicitly so zero-column batches, as fed
        to ``count(*)``, still know their size).
    column_maps
        ``None``, or one entry per column: ``None`` for a column read through
        :attr:`gather_map` like the others, or the column's own ``int32``
        indices (one per presented row) into a base column of any length. Only
        :meth:`column`, :meth:`materialize` and :meth:`own_map` see these: code
        that reads :attr:`columns` with :attr:`gather_map` directly must not be
        handed such a batch (a hash join emits them only to a fused aggregation
        or a computing projection, see :class:`~gpu_engine.plans.nodes.HashJoinNode`).
    """

    names: tuple[str, ...]
    columns: tuple[Column, ...]
    device: Device
    gather_map: Any = None
    base_rows: int = -1
    column_maps: tuple | None = None

    def __post_init__(self) -> None:
        self.names = tuple(self.names)
        self.columns = tuple(self.columns)
        if self.column_maps is not None:
            self.column_maps = tuple(self.column_maps)
            if len(self.column_maps) != len(self.columns):
                raise ValueError(f"{len(self.column_maps)} column maps for {len(self.columns)} columns")
            if all(m is None for m in self.column_maps):
                self.column_maps = None
        if self.base_rows < 0:
            if not self.columns:
                raise ValueError("a batch without columns needs base_rows")
            self.base_rows = len(self.columns[0])

    # ------------------------------------------------------------------ shape
    @property
    def num_rows(self) -> int:
        """Return the rows this batch presents (after its gather map)."""
        return self.base_rows if self.gather_map is None else int(self.gather_map.shape[0])

    def __len__(self) -> int:
        return self.num_rows

    @property
    def schema(self) -> pa.Schema:
        """Return the logical schema of the batch."""
        return pa.schema([pa.field(n, c.dtype) for n, c in zip(self.names, self.columns)])

    @property
    def nbytes(self) -> int:
        """Return the bytes this batch presents: base bytes scaled by selectivity, plus the map."""
        own = self.column_maps or (None,) * len(self.columns)
        base = sum(c.nbytes for c, m in zip(self.columns, own) if m is None)
        if self.gather_map is not None and self.base_rows:
            base = int(base * self.num_rows / self.base_rows) + int(self.gather_map.nbytes)
        maps = {id(m): m for m in own if m is not None}
        mapped = sum(int(c.nbytes * self.num_rows / max(len(c), 1)) for c, m in zip(self.columns, own) if m is not None)
        return base + mapped + sum(int(m.nbytes) for m in maps.values())

    # ---------------------------------------------------------------- access
    def index(self, name: str) -> int:
        """Return the position of a column by name."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no column {name!r} in batch with columns {list(self.names)}") from None

    def base_column(self, name: str) -> Column:
        """Return a base column, ignoring the gather map (and the column's own map)."""
        return self.columns[self.index(name)]

    def own_map(self, name: str) -> Any:
        """Return the column's own map (see :attr:`column_maps`), or None when the batch's gather map applies."""
        return None if self.column_maps is None else self.column_maps[self.index(name)]

    def column(self, name: str) -> Column:
        """Return a column with its map applied (a gather, or the base column when unmapped)."""
        position = self.index(name)
        base = self.columns[position]
        rows = self.gather_map if self.column_maps is None or self.column_maps[position] is None \
            else self.column_maps[position]
        if rows is None:
            return base
        from gpu_engine.kernels.gather import gather_column

        return gather_column(self.device, base, rows)

    def materialize(self, names: Iterable[str] | None = None) -> "Batch":
        """Return a batch without maps holding ``names`` (default: all columns)."""
        names = self.names if names is None else tuple(names)
        if self.gather_map is None and self.column_maps is None and names == self.names:
            return self
        return Batch(names, tuple(self.column(n) for n in names), self.device, None, self.num_rows)

    # ------------------------------------------------------------- selection
    def with_gather_map(self, indices: Any) -> "Batch":
        """Return a batch selecting ``indices`` (relative to this batch's rows), composing maps."""
        xp = self.device.xp
        indices = indices.astype(xp.int32, copy=False)
        own = None if self.column_maps is None else tuple(
            None if m is None else xp.take(m, indices) for m in self.column_maps)
        if self.gather_map is not None:
            indices = xp.take(self.gather_map, indices)
        return Batch(self.names, self.columns, self.device, indices, self.base_rows, own)

    def slice(self, start: int, stop: int) -> "Batch":
        """Return rows ``[start, stop)`` without copying the base columns."""
        start = max(0, min(start, self.num_rows))
        stop = max(start, min(stop, self.num_rows))
        if start == 0 and stop == self.num_rows:
            return self
        xp = self.device.xp
        own = None if self.column_maps is None else tuple(
            None if m is None else m[start:stop] for m in self.column_maps)
        rows = self.gather_map[start:stop] if self.gather_map is not None else xp.arange(start, stop, dtype=xp.int32)
        return Batch(self.names, self.columns, self.device, rows, self.base_rows, own)

    def select(self, names: Sequence[str], rename: Sequence[str] | None = None) -> "Batch":
        """Return a batch with only ``names`` (optionally renamed), keeping the gather map."""
        columns = tuple(self.base_column(n) for n in names)
        own = None if self.column_maps is None else tuple(self.own_map(n) for n in names)
        return Batch(tuple(rename or names), columns, self.device, self.gather_map, self.base_rows, own)

    # ----------------------------------------------------------------- Arrow
    @classmethod
    def from_arrow(cls, data: pa.Table | pa.RecordBatch, device: Device) -> "Batch":
        """Copy an Arrow table or record batch onto ``device``."""
        columns = tuple(Column.from_arrow(data.column(i), device) for i in range(data.num_columns))
        return cls(tuple(data.schema.names), columns, device, None, data.num_rows)

    def to_arrow(self) -> pa.RecordBatch:
        """Copy the rows this batch presents back to the host as an Arrow record batch."""
        flat = self.materialize()
        arrays = [c.to_arrow(self.device) for c in flat.columns]
        if not arrays:
            return pa.RecordBatch.from_pydict({}).slice(0, 0) if flat.num_rows == 0 else pa.RecordBatch.from_arrays([pa.nulls(flat.num_rows)], ["$rows"]).select([])
        return pa.RecordBatch.from_arrays(arrays, names=list(flat.names))

    @classmethod
    def empty(cls, schema: pa.Schema, device: Device) -> "Batch":
        """Return a zero-row batch of ``schema``."""
        return cls.from_arrow(empty_table(schema), device)


class BatchSlices:
    """Hand out one held batch in slices of at most ``rows`` rows, first to last.

    Why: an operator that holds its whole result (a sort, a window, a top-N per partition) still feeds its
    consumer scan-sized batches; each slice shares the held columns (:meth:`Batch.slice` copies none).
    """

    def __init__(self, batch: Batch, rows: int) -> None:
        self.batch = batch
        self._rows = rows
        self._position = 0

    @property
    def exhausted(self) -> bool:
        """Say whether every row has been handed out."""
        return self._position >= self.batch.num_rows

    def next(self) -> Batch | None:
        """Return the next slice, or None once every row has been handed out."""
        if self.exhausted:
            return None
        start = self._position
        self._position = min(self.batch.num_rows, start + self._rows)
        return self.batch.slice(start, self._position)
