"""The output side every aggregation operator shares: when to emit groups, and when it is finished.

Why one base: the eager HashAggregation and the FusedAggregation keep their
groups differently, but must agree on Velox's aggregation contract, or fused
and unfused plans would differ on empty inputs: an operator emits at the end
of its input (a PARTIAL step also whenever it flushes); with grouping keys and
no groups it emits nothing; without keys a FINAL or SINGLE step always emits
its one row (``count`` 0, ``sum`` NULL), while a PARTIAL step that saw no
batch emits nothing, so the final step alone supplies that row.
"""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.operator import Operator, OperatorCtx

__all__ = ["AggregationOperator"]


class AggregationOperator(Operator):
    """Blocking operator: consumes all input, then hands on its groups (subclasses keep and emit them).

    Subclasses set :attr:`grouped` and :attr:`_num_groups`, set
    :attr:`_seen_input` in ``add_input``, and implement :meth:`_emit` and
    :meth:`_state_bytes`; flushes of a PARTIAL step append to :attr:`_output`.
    """

    def __init__(self, ctx: OperatorCtx, node):
        super().__init__(ctx, node)
        self.step = node.step
        self.grouped = bool(node.grouping_keys)
        self._output: list[Batch] = []
        self._seen_input = False
        self._num_groups = 0
        self._rows_grouped = 0  # raw rows a PARTIAL step has grouped (see _grouping_pays)
        self._abandon_rows = ctx.config.partial_aggregation_abandon_rows
        self._abandon_percent = ctx.config.partial_aggregation_abandon_percent

    def _grouping_pays(self, rows: int, groups: int) -> bool:
        """Count ``rows`` more raw rows grouped; return False once a PARTIAL step should stop grouping.

        Why (Velox's abandoned partial aggregation): a partial step that keeps nearly a group per row
        (db-benchmark's group-by of six keys, a million groups in a million rows) sends the final step
        as many rows as it read, after a hash insert per row and a table of them; handing each row on as
        a group of its own costs neither. Decided once :attr:`_abandon_rows` rows were grouped, when the
        groups held (counted since the last flush) pass :attr:`_abandon_percent` % of them.
        """
        if self.step is not self.step.PARTIAL or not self.grouped:
            return True
        self._rows_grouped += rows
        return self._rows_grouped < self._abandon_rows or groups * 100 <= self._rows_grouped * self._abandon_percent

    def _record_abandoned(self) -> None:
        """Tell the Task's FINAL step what this PARTIAL step saw before it gave up grouping: the rows grouped
        and the groups held (:mod:`gpu_engine.exec.abandoned_partials`; the final step sizes its table by them).

        Not from a fused step's lowest tier: its rows are those its filter stages kept, not the scan's, so the
        scan's rows times its share of groups would overcount the keys by the filters' selectivity."""
        task = getattr(self.ctx, "task", None)
        if task is not None and self._rows_grouped and not getattr(self.ctx, "lowest_tier", False):
            task.abandoned_partials.record(self.node.id, self._rows_grouped, self._num_groups)

    def _emit(self) -> Batch:
        """Return the groups held so far as one batch."""
        raise NotImplementedError

    def _state_bytes(self) -> int:
        """Return the bytes of state held, output not yet taken included."""
        raise NotImplementedError

    def no_more_input(self) -> None:
        super().no_more_input()
        if self.grouped and self._num_groups == 0:
            return
        if not self.grouped and not self._seen_input and self.step is self.step.PARTIAL:
            return
        self._output.append(self._emit())
        self.set_memory_reservation(self._state_bytes())

    def get_output(self) -> Batch | None:
        if self._output and (self.no_more_input_received or self.step is self.step.PARTIAL):
            batch = self._output.pop(0)
            self.set_memory_reservation(self._state_bytes())
            return batch
        return None

    def needs_input(self) -> bool:
        return not self.no_more_input_received

    def is_finished(self) -> bool:
        return self.no_more_input_received and not self._output
