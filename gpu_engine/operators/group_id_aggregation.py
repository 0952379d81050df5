"""Merge pre-aggregated groups into every grouping set, each set from its nearest finer set (GroupId + INTERMEDIATE).

Why: :mod:`gpu_engine.sql.grouping_sets` plans ``GROUP BY ROLLUP / CUBE /
GROUPING SETS`` of decomposable aggregates as a PARTIAL step by every key, a
GroupId repeating its groups once per set and an INTERMEDIATE step merging
them by the keys and the group id. That step hashed every group once per set
with every key block in its rows (the NULLed ones too): TPC-DS q67's ROLLUP
of eight keys, five of them strings, merged 4.66M repeated rows at SF1 for
0.5M groups, most of the query's time. The result is the same when the groups
are first merged by every key, and each set is then merged from the smallest
set already merged that holds all its keys (``ROLLUP (a, b, c)``: ``(a, b)``
from ``(a, b, c)``, ``(a)`` from ``(a, b)``): a set reads the groups of a finer
set, not every input row, and hashes only its own keys. Merging is exact for
every INTERMEDIATE aggregate (states merge associatively), so the local
planner runs a GroupId under an INTERMEDIATE step as this one operator
(:func:`merges_grouping_sets`); the output is that step's: the keys (NULL
outside the row's set), the group id, the merged states. A set without keys
gets its row even over no input, as the INTERMEDIATE step gave it.
"""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_batches
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.operators.hash_aggregation import HashAggregation
from gpu_engine.operators.hash_build import null_column
from gpu_engine.plans.aggregates import aggregation_output_schema
from gpu_engine.plans.nodes import AggregationNode, AggregationStep, GroupIdNode

__all__ = ["GroupIdAggregation", "merges_grouping_sets"]


def merges_grouping_sets(group_id: GroupIdNode, aggregation: AggregationNode) -> bool:
    """Return True when ``aggregation`` is an INTERMEDIATE step over ``group_id``'s keys and id alone, reading
    only the columns GroupId passes through: what :class:`GroupIdAggregation` computes set by set."""
    if aggregation.step is not AggregationStep.INTERMEDIATE or aggregation.source is not group_id:
        return False
    if set(aggregation.grouping_keys) != {*group_id.key_names, group_id.group_id_name}:
        return False
    if len(aggregation.grouping_keys) != len(group_id.key_names) + 1:
        return False
    passed = set(group_id.aggregation_inputs)
    return all(name in passed for call in aggregation.aggregates for name in _columns_read(call))


def _columns_read(call) -> set[str]:
    from gpu_engine.plans.expressions import referenced_columns

    return {name for argument in call.inputs() for name in referenced_columns(argument)}


class GroupIdAggregation(Operator):
    """Merge all input groups by every key, then each grouping set from its nearest merged finer set.

    Each merge is a :class:`HashAggregation` INTERMEDIATE step keyed on the
    set's input columns, made here from the plan's nodes (its memory pool a
    child of this Task's, like any operator's). Stats show under the
    aggregation's node; ``grouping_set_rows`` counts the rows the sets' merges
    read (GroupId with an INTERMEDIATE step read input rows times sets).
    """

    def __init__(self, ctx: OperatorCtx, group_id: GroupIdNode, aggregation: AggregationNode):
        super().__init__(ctx, aggregation, "GroupIdAggregation")
        self._group_id = group_id
        self._inputs = dict(zip(group_id.key_names, group_id.key_inputs))  # key name -> input column
        self._whole = self._merge_by(tuple(dict.fromkeys(group_id.key_inputs)), "whole")
        self._output: list[Batch] = []

    def _merge_by(self, inputs: tuple[str, ...], label: str) -> HashAggregation:
        """Return an INTERMEDIATE HashAggregation keyed on the input columns ``inputs`` (the states kept)."""
        node = self.node
        source = self._group_id.source
        schema = aggregation_output_schema(AggregationStep.INTERMEDIATE, [source.output_schema.field(c) for c in inputs],
                                           node.aggregate_names, node.aggregates)
        step = AggregationNode(id=f"{node.id}.{label}", output_schema=schema, sources=(source,),
                               step=AggregationStep.INTERMEDIATE, grouping_keys=inputs,
                               aggregate_names=node.aggregate_names, aggregates=node.aggregates)
        return HashAggregation(self.ctx, step)

    def needs_input(self) -> bool:
        return not self.no_more_input_received

    def add_input(self, batch: Batch) -> None:
        self._whole.add_input(batch)

    def no_more_input(self) -> None:
        super().no_more_input()
        merged: dict[frozenset, Batch | None] = {frozenset(self._whole.keys): _merged(self._whole)}
        sets = sorted(enumerate(self._group_id.grouping_sets), key=lambda item: -len(set(item[1])))
        for set_id, keys in sets:
            inputs = tuple(dict.fromkeys(self._inputs[k] for k in keys))
            if frozenset(inputs) not in merged:
                finer = [(b.num_rows if b is not None else 0, i) for i, b in merged.items() if i >= set(inputs)]
                parent = merged[min(finer, key=lambda item: item[0])[1]]
                step = self._merge_by(inputs, f"set{set_id}")
                if parent is not None:
                    step.add_input(parent)
                    self.add_runtime_stat("grouping_set_rows", parent.num_rows)
                merged[frozenset(inputs)] = _merged(step)
            result = merged[frozenset(inputs)]
            if result is not None and result.num_rows:
                self._output.append(self._set_rows(set_id, set(keys), result))
        self._whole = None
        self.set_memory_reservation(sum(batch.nbytes for batch in self._output))

    def _set_rows(self, set_id: int, keys: set[str], result: Batch) -> Batch:
        """Return one set's merged groups as the INTERMEDIATE step's rows: every key (NULL outside the set), the id."""
        xp = self.device.xp
        schema = self.node.output_schema
        rows = result.num_rows
        columns = []
        for name in schema.names:
            if name == self._group_id.group_id_name:
                columns.append(Column(schema.field(name).type, xp.full(rows, set_id, dtype=xp.int64)))
            elif name in self._inputs:
                columns.append(result.column(self._inputs[name]) if name in keys
                               else null_column(self.device, schema.field(name).type, rows))
            else:
                columns.append(result.column(name))
        return Batch(tuple(schema.names), tuple(columns), self.device, None, rows)

    def get_output(self) -> Batch | None:
        if self._output and self.no_more_input_received:
            batch = self._output.pop(0)
            self.set_memory_reservation(sum(b.nbytes for b in self._output))
            return batch
        return None

    def is_finished(self) -> bool:
        return self.no_more_input_received and not self._output

    def close(self) -> None:
        if self._whole is not None:
            self._whole.close()
        super().close()


def _merged(step: HashAggregation) -> Batch | None:
    """Return everything ``step`` merged, as one batch (None when it holds no group), and release its state."""
    step.no_more_input()
    batches = []
    while (batch := step.get_output()) is not None:
        batches.append(batch)
    step.close()
    return concat_batches(batches) if batches else None
