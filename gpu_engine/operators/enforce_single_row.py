"""Pass exactly one row, as a SQL scalar subquery must produce (Velox's EnforceSingleRow)."""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.errors import ExecutionError
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.operators.hash_build import null_column
from gpu_engine.plans.nodes import EnforceSingleRowNode

__all__ = ["EnforceSingleRow"]


class EnforceSingleRow(Operator):
    """Pass the one input row through; no input gives one all-NULL row, a second row fails the Task.

    It must see all of the Task's input to count rows, so it runs in one driver
    (the planner's driver limit, and a gather the local-exchange pass puts
    under it). It fails as soon as a second row arrives rather than at the end:
    the query's answer is an error either way.
    """

    def __init__(self, ctx: OperatorCtx, node: EnforceSingleRowNode):
        super().__init__(ctx, node)
        self._rows = 0

    def add_input(self, batch: Batch) -> None:
        self._rows += batch.num_rows
        if self._rows > 1:
            raise ExecutionError(f"scalar subquery returned more than one row ({self.node.label} received "
                                 f"at least {self._rows})", operator=self.operator_type, plan_node_id=self.node.id)
        self.input = batch

    def get_output(self) -> Batch | None:
        batch, self.input = self.input, None
        return batch

    def no_more_input(self) -> None:
        super().no_more_input()
        if self._rows == 0:  # an empty scalar subquery is NULL
            fields = list(self.node.output_schema)
            columns = tuple(null_column(self.device, field.type, 1) for field in fields)
            self.input = Batch(tuple(f.name for f in fields), columns, self.device, None, 1)
            self._rows = 1
