"""Repeat each input row once per element of its own list (Velox's Unnest, over the lists the engine can name).

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

``string_split`` lists are a host round trip, as the engine's other text transforms
(:mod:`gpu_engine.expressions.string_functions`): the texts and separators are copied to the host, split there
(one Python ``str.split`` per row), and the pieces, with the row each came from, copied back once per input
batch; the output batches then gather from them as from a series. An ``outer`` Unnest (Spark's ``LATERAL VIEW
OUTER``) keeps a row whose text is NULL, with a NULL piece; an ``outer`` series (DuckDB's ``LEFT JOIN LATERAL
generate_series(...) ON true``) keeps a row whose series is empty or has a NULL argument, its element NULL (the
row counted as one element, marked in ``_empty``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.arrow_numpy import arrow_from_pylist
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
        self._next = 0  # the first output row of the held batch not handed on yet
        self._total = 0
        self._ends = self._counts = self._starts = self._steps = None
        self._empty = None  # an outer series: the rows kept with a NULL element
        self._parents = self._pieces = None  # string_split: each piece's input row, and the pieces

    def add_input(self, batch: Batch) -> None:
        if self.node.function == "string_split":
            self._split(batch)
        else:
            self._series(batch)
        if self._total:
            self.input = batch
            self._next = 0

    def _series(self, batch: Batch) -> None:
        xp = self.device.xp
        function = self.node.function
        with np.errstate(all="ignore"):
            start, stop, step = (evaluate(expr, batch) for expr in self.node.arguments)
            valid = xp.ones(batch.num_rows, dtype=xp.bool_)
            for column in (start, stop, step):
                if column.validity is not None:
                    valid = valid & column.validity
            counts = _lengths(xp, start.data, stop.data, step.data, valid, function == "generate_series")
            if self.node.outer:  # an empty or NULL series keeps its row, once, with a NULL element
                self._empty = counts == 0
                counts = xp.where(self._empty, xp.uint64(1), counts)
            ends = xp.cumsum(counts, dtype=xp.uint64)
        zero_steps = xp.any(valid & (step.data == 0))
        too_long = xp.any(counts > _MOST_ROWS) | (counts.astype(xp.float64).sum() > _MOST_ROWS)  # ends may wrap
        total = ends[-1:].sum().astype(xp.int64)
        zero, long, self._total = self.device.read_scalars([zero_steps, too_long, total])
        if zero:
            raise ExecutionError(f"{function}: interval cannot be 0!")
        if long:
            raise ExecutionError(f"{function}: a batch's series have more than 2**62 elements")
        self._ends, self._counts = ends.astype(xp.int64), counts.astype(xp.int64)
        self._starts, self._steps = start.data.astype(xp.int64, copy=False), step.data.astype(xp.int64, copy=False)

    def _split(self, batch: Batch) -> None:
        texts, separators = (evaluate(expr, batch).to_arrow(self.device).to_pylist() for expr in self.node.arguments)
        parents, pieces = [], []
        for row, (text, separator) in enumerate(zip(texts, separators)):
            if text is None:
                if self.node.outer:  # Spark's LATERAL VIEW OUTER: the row kept, its piece NULL
                    parents.append(row)
                    pieces.append(None)
                continue  # DuckDB: a NULL list, no rows
            split = [text] if separator is None else text.split(separator) if separator else list(text)
            parents.extend([row] * len(split))
            pieces.extend(split)
        self._total = len(pieces)
        if self._total:
            self._parents = self.device.asarray(np.asarray(parents, dtype=np.int64))
            self._pieces = Batch(("piece",), (Column.from_arrow(arrow_from_pylist(pieces, pa.string()), self.device),),
                                 self.device)

    def get_output(self) -> Batch | None:
        batch = self.input
        if batch is None:
            return None
        xp = self.device.xp
        first, last = self._next, min(self._next + self._rows, self._total)
        self._next = last
        if self._pieces is not None:
            rows = self._parents[first:last]
            elements = self._pieces.slice(first, last).materialize().columns[0]
        else:
            positions = xp.arange(first, last, dtype=xp.int64)
            rows = xp.searchsorted(self._ends, positions, side="right")
            k = positions - (xp.take(self._ends, rows) - xp.take(self._counts, rows))
            with np.errstate(all="ignore"):  # wraps on the way, exact at the end (each element between the bounds)
                data = xp.take(self._starts, rows) + xp.take(self._steps, rows) * k
            validity = None if self._empty is None else ~xp.take(self._empty, rows)
            elements = Column(self.node.output_schema.field(self.node.output_schema.names[-1]).type, data, validity)
        if last == self._total:
            self.input = None
            self._ends = self._counts = self._starts = self._steps = self._parents = self._pieces = None
            self._empty = None
        repeated = batch.with_gather_map(rows).materialize()
        name = self.node.output_schema.names[-1]
        return Batch(repeated.names + (name,), repeated.columns + (elements,), self.device, None, last - first)


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
