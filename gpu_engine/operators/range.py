"""Produce a series of BIGINTs or TIMESTAMPs (DuckDB's ``range`` / ``generate_series`` table functions).

The bounds and step are constant expressions, evaluated once per operator on a one-row batch (three values
read back to the host), so a kept plan answers with the values of the moment it runs. The series' length is
then known exactly in Python integers (no overflow: ``range(-2**63, 2**63 - 1, 2**63 - 1)`` has 3 rows), and
each batch is array code on the device: ``start + step * k`` for the batch's ``k``, computed in wrapping
int64, exact because every element lies between the bounds. Batch ``b`` goes to driver ``b mod drivers``, so
the drivers of the pipeline share the series without a split source and no driver holds it whole.

A step in months (``INTERVAL 1 MONTH``) adds calendar months as DuckDB does, one step after the other: the
day is clamped to each month's end and stays clamped (``2024-01-31`` then ``02-29``, ``03-29``), which is
``min(first day, the shortest month met so far)``; the shortest month met by step ``k`` is found once on the
host (the months repeat every 4,800), so a batch stays array code. A step mixing months with days or time is
refused at run time by name (DuckDB adds such steps one after another; not built).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.batch import Batch
from gpu_engine.errors import ExecutionError
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.expressions.date_functions import days_from_civil
from gpu_engine.expressions.evaluate import evaluate
from gpu_engine.expressions.temporal import civil_from_days
from gpu_engine.plans.intervals import MICROS_PER_DAY
from gpu_engine.plans.nodes import RangeNode

__all__ = ["Range"]

#: Months after which the lengths of months met by a fixed month step repeat (400 Gregorian years).
_MONTH_CYCLE = 4800


def _month_lengths(months: np.ndarray) -> np.ndarray:
    """Return the days of each month, ``months`` counted from year 0's January."""
    year, month = months // 12, months % 12 + 1
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    lengths = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)
    return lengths[month - 1] + ((month == 2) & leap)


class _MonthSteps:
    """The series ``start, start + n months, ...`` as DuckDB adds the step again and again."""

    def __init__(self, start: int, months: int):
        day = start // MICROS_PER_DAY
        self.time_of_day = start - day * MICROS_PER_DAY
        year, month, day_of_month = (int(v[0]) for v in civil_from_days(np, np.array([day], dtype=np.int64)))
        self.first_month = year * 12 + month - 1
        self.first_day = day_of_month
        self.months = months
        lengths = _month_lengths(self.first_month + months * np.arange(_MONTH_CYCLE, dtype=np.int64))
        # first step meeting a month of at most 30, 29, 28 days (never: past the end)
        self.first_short = [int(np.argmax(lengths <= days)) if (lengths <= days).any() else 1 << 62
                            for days in (30, 29, 28)]

    def values(self, xp, k):
        """Return the microseconds of steps ``k`` (an int64 array of ``xp``)."""
        short_30, short_29, short_28 = self.first_short
        shortest = xp.where(k >= short_28, 28, xp.where(k >= short_29, 29, xp.where(k >= short_30, 30, 31)))
        total = self.first_month + self.months * k
        year, month = xp.floor_divide(total, 12), xp.remainder(total, 12) + 1
        day = days_from_civil(xp, year, month, xp.minimum(shortest, self.first_day))
        return day * MICROS_PER_DAY + self.time_of_day

    def count(self, stop: int, inclusive: bool) -> int:
        """Return how many steps lie before ``stop`` (through it when ``inclusive``), by bisection."""
        def before(k: int) -> bool:  # step k still in the series
            value = int(self.values(np, np.array([k], dtype=np.int64))[0])
            if self.months > 0:
                return value <= stop if inclusive else value < stop
            return value >= stop if inclusive else value > stop

        year, month, _day = civil_from_days(np, np.array([stop // MICROS_PER_DAY], dtype=np.int64))
        stop_month = int(year[0]) * 12 + int(month[0]) - 1
        low, high = 0, max(0, (stop_month - self.first_month) // self.months + 2)
        while low < high:  # the steps are monotone: the first one past the end
            middle = (low + high) // 2
            if before(middle):
                low = middle + 1
            else:
                high = middle
        return low


class Range(Operator):
    """Source operator: the node's series, batch ``b`` on driver ``b mod drivers``."""

    def __init__(self, ctx: OperatorCtx, node: RangeNode):
        super().__init__(ctx, node)
        self._rows = ctx.config.scan_batch_rows(ctx.device)
        self._next_batch = ctx.driver_id
        self._stride = max(1, ctx.num_drivers)
        self._count: int | None = None  # rows in the whole series, once its arguments are evaluated
        self._start = self._step = 0
        self._months: _MonthSteps | None = None

    def needs_input(self) -> bool:
        return False

    def _evaluate_arguments(self) -> None:
        node = self.node
        one_row = Batch((), (), self.device, base_rows=1)
        with np.errstate(all="ignore"):
            scalars = [evaluate(expr, one_row).to_arrow(self.device)[0] for expr in (node.start, node.stop, node.step)]
        if not all(scalar.is_valid for scalar in scalars):
            self._count = 0  # DuckDB: a NULL bound or step gives no rows
            return
        start, stop, step = (scalar.value if pa.types.is_timestamp(scalar.type) else scalar.as_py()
                             for scalar in scalars)
        if pa.types.is_timestamp(node.output_schema[0].type):
            months, days, nanos = step.months, step.days, step.nanoseconds
            if months and (days or nanos):
                raise ExecutionError(f"{self._function}: a step of months and days or time ({_interval(step)}) "
                                     "is not supported; step by months alone, or by days and time")
            if months:
                self._months = _MonthSteps(start, months)
                self._count = self._months.count(stop, node.inclusive)
                return
            step = days * MICROS_PER_DAY + nanos // 1000
        if step == 0:
            raise ExecutionError(f"{self._function}: interval cannot be 0!")
        span = stop - start
        self._count = max(0, span // step + 1) if node.inclusive else max(0, -(-span // step))
        self._start, self._step = start, step

    @property
    def _function(self) -> str:
        return "generate_series" if self.node.inclusive else "range"

    def get_output(self) -> Batch | None:
        if self._count is None:
            self._evaluate_arguments()
        first = self._next_batch * self._rows
        if first >= self._count:
            return None
        self._next_batch += self._stride
        xp = self.device.xp
        k = xp.arange(first, min(first + self._rows, self._count), dtype=xp.int64)
        if self._months is not None:
            data = self._months.values(xp, k)
        else:  # wraps in int64 on the way, exact at the end: every element lies between the bounds
            with np.errstate(all="ignore"):
                data = k * np.int64(_wrapped(self._step)) + np.int64(_wrapped(self._start))
        dtype = self.node.output_schema[0].type
        return Batch((self.node.output_schema[0].name,), (Column(dtype, data.astype(xp.int64, copy=False)),),
                     self.device)

    def is_finished(self) -> bool:
        return self._count is not None and self._next_batch * self._rows >= self._count


def _wrapped(value: int) -> int:
    """Return ``value`` as the int64 it wraps to (a step of 2**63 - 1 times 2 passes through it)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _interval(step) -> str:
    return f"{step.months} months {step.days} days {step.nanoseconds // 1000} microseconds"
