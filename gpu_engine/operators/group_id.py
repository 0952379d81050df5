"""Repeat each input batch once per grouping set, keys outside the set NULL (Velox's GroupId)."""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.operators.hash_build import null_column
from gpu_engine.plans.nodes import GroupIdNode

__all__ = ["GroupId"]


class GroupId(Operator):
    """Hand on one batch per grouping set that shares the input's columns and gather map.

    Why no copy: a set's batch is the input's own key and aggregation-input
    columns, an all-NULL column in place of each key the set leaves out and a
    constant group-id column, all of the input's base length so the input's
    gather map selects their rows too. The NULL and constant columns depend
    only on that length, so they are made once per length and reused by
    every batch of it (a scan's batches share one length): a set costs no
    kernel and no per-row work after the first batch.
    """

    def __init__(self, ctx: OperatorCtx, node: GroupIdNode):
        super().__init__(ctx, node)
        source = node.source.output_schema
        self._key_types = {name: source.field(column).type for name, column in zip(node.key_names, node.key_inputs)}
        self._names = tuple(node.output_schema.names)
        self._next_set = 0
        self._rows = -1  # the base length the cached columns below have
        self._nulls: dict[str, Column] = {}
        self._group_ids: list[Column] = []

    def add_input(self, batch: Batch) -> None:
        if batch.column_maps is not None:  # columns read through their own maps: give them one length
            batch = batch.materialize()
        self.input = batch
        self._next_set = 0

    def get_output(self) -> Batch | None:
        batch = self.input
        if batch is None:
            return None
        node = self.node
        set_id = self._next_set
        self._next_set += 1
        if self._next_set == len(node.grouping_sets):
            self.input = None
        self._columns_of_length(batch.base_rows)
        kept = node.grouping_sets[set_id]
        columns = [batch.base_column(column) if name in kept else self._nulls[name]
                   for name, column in zip(node.key_names, node.key_inputs)]
        columns += [batch.base_column(name) for name in node.aggregation_inputs]
        columns.append(self._group_ids[set_id])
        return Batch(self._names, tuple(columns), self.device, batch.gather_map, batch.base_rows)

    def _columns_of_length(self, rows: int) -> None:
        """Make the NULL key columns and the group-id columns of ``rows`` rows, unless the last batch had as many."""
        if rows == self._rows:
            return
        xp = self.device.xp
        self._rows = rows
        self._nulls = {name: null_column(self.device, dtype, rows) for name, dtype in self._key_types.items()}
        self._group_ids = [Column(self.node.output_schema.field(self.node.group_id_name).type,
                                  xp.full(rows, set_id, dtype=xp.int64))
                           for set_id in range(len(self.node.grouping_sets))]
