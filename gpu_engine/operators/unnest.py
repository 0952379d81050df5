"""Repeat each input row once per element of its own integer series (Velox's Unnest, over series as the lists).

DuckDB's ``FROM t, generate_series(1, t.n) g(x)`` evaluates the table function per row of ``t``: the row is
repeated once per element, the element beside it. The series' bounds and step are evaluated over the input batch
(one column each); each row's length is then computed in array code, and the output rows are found by position:
output row ``p`` belongs to the input row whose running end first passes ``p`` (a binary search over the running
ends, ``searchsorted``), and is that row's element ``k = p - row start``, ``start + step * k``. So the lists are
never built, the same array code runs on every device (no generated kernel: nothing is compiled per query), and a
row of a billion elements is handed on in batches of the scan's batch size, never held whole.

Lengths are exact for every int64 argument: the span ``stop - start`` is taken in unsigned 64-bit arithmetic (it
is never negative where the series has elements), and elements are computed in wrapping int64, exact at the end
because each lies between the bounds. One host read per input batch (the total rows and a zero-step flag
together). A NULL argument gives the row no elements; a zero step on a row with other arguments raises as
DuckDB's ``interval cannot be 0!``.
"""

from __future__ import annotations

import numpy as np

from gpu_engine.columnar import Column
from gpu_engine.columnar.batch import Batch
from gpu_engine.errors import ExecutionError
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.expressions.evaluate import evaluate
from gpu_engine.plans.nodes import UnnestNode

__all__ = ["Unnest"]

#: The most elements one input batch may expand to (a guard against a length that wraps an int64).
_MOST_ROWS = 1 << 62


class Unnest(Operator):
    """Hand on each held batch's rows repeated once per element, at most the scan's batch size at a time."""

    def __init__(self, ctx: OperatorCtx, node: UnnestNode):
        super().__init__(ctx, node)
        self._rows = ctx.config.scan_batch_rows(ctx.device)
        self._function = "generate_series" if node.inclusive else "range"
        self._next = 0  # the first output row of the held batch not handed on yet
        self._total = 0
        self._ends = self._counts = self._starts = self._steps = None

    def add_input(self, batch: Batch) -> None:
        xp = self.device.xp
        node = self.node
        with np.errstate(all="ignore"):
            start, stop, step = (evaluate(expr, batch) for expr in (node.start, node.stop, node.step))
            valid = xp.ones(batch.num_rows, dtype=xp.bool_)
            for column in (start, stop, step):
                if column.validity is not None:
                    valid = valid & column.validity
            counts = _lengths(xp, start.data, stop.data, step.data, valid, node.inclusive)
            ends = xp.cumsum(counts, dtype=xp.uint64)
        zero_steps = xp.any(valid & (step.data == 0))
        too_long = xp.any(counts > _MOST_ROWS) | (counts.astype(xp.float64).sum() > _MOST_ROWS)  # ends may wrap
        total = ends[-1:].sum().astype(xp.int64)
        zero, long, self._total = self.device.read_scalars([zero_steps, too_long, total])
        if zero:
            raise ExecutionError(f"{self._function}: interval cannot be 0!")
        if long:
            raise ExecutionError(f"{self._function}: a batch's series have more than 2**62 elements")
        if self._total == 0:
            return  # no row has an element: nothing to hand on
        self.input = batch
        self._next = 0
        self._ends, self._counts = ends.astype(xp.int64), counts.astype(xp.int64)
        self._starts, self._steps = start.data.astype(xp.int64, copy=False), step.data.astype(xp.int64, copy=False)

    def get_output(self) -> Batch | None:
        batch = self.input
        if batch is None:
            return None
        xp = self.device.xp
        first, last = self._next, min(self._next + self._rows, self._total)
        self._next = last
        positions = xp.arange(first, last, dtype=xp.int64)
        rows = xp.searchsorted(self._ends, positions, side="right")
        k = positions - (xp.take(self._ends, rows) - xp.take(self._counts, rows))
        with np.errstate(all="ignore"):  # wraps on the way, exact at the end (each element lies between the bounds)
            elements = xp.take(self._starts, rows) + xp.take(self._steps, rows) * k
        if last == self._total:
            self.input = None
            self._ends = self._counts = self._starts = self._steps = None
        repeated = batch.with_gather_map(rows).materialize()
        name = self.node.output_schema.names[-1]
        return Batch(repeated.names + (name,), repeated.columns + (Column(self.node.output_schema.field(name).type,
                                                                          elements),),
                     self.device, None, last - first)


def _lengths(xp, start, stop, step, valid, inclusive: bool):
    """Return each row's element count (uint64): 0 where an argument is NULL or the series is empty."""
    unsigned = xp.uint64
    up = step > 0
    down = step < 0
    # the distance from start to stop in the step's direction, exact in uint64 where it is not negative
    span = xp.where(up, stop.view(unsigned) - start.view(unsigned), start.view(unsigned) - stop.view(unsigned))
    stride = xp.where(up, step.view(unsigned), (-step).view(unsigned))  # -(-2**63) wraps to 2**63 unsigned: right
    stride = xp.where(stride == 0, unsigned(1), stride)
    reaches = xp.where(up, stop >= start, stop <= start)
    whole, part = span // stride, span % stride
    count = whole + unsigned(1) if inclusive else whole + (part != 0).astype(unsigned)
    return xp.where(valid & (up | down) & reaches, count, unsigned(0))
