"""Remember the prepared form of the plans a session ran, so a plan run again is not prepared again.

Why: :func:`~gpu_engine.planning.prepare.prepare_plan` (local exchanges,
fusion, placement) took about a millisecond per TPC-H query at SF 0.01, a
tenth of a small query's time once its plan came from
:mod:`gpu_engine.sql.plan_cache` (the same plan object for the same text),
and it depends only on the plan, the device, the driver count and the config,
none of which a run changes: plans and configs are frozen.

Entries are keyed by the plan object's identity (a weak reference checks that
the object is still the one keyed: an id can be reused once an object is
freed) with the device, driver count and config; the ``entries`` most
recently used are kept: as many as the plans :mod:`gpu_engine.sql.plan_cache`
keeps (fewer, and texts run in turn needing more would never hit).

One more dependency: a plan whose optimization read a table's column and found it unique
(:mod:`gpu_engine.optimizer.unique_groupings`) holds only for those rows; its entry keeps the tables and file
versions it read (:meth:`~gpu_engine.optimizer.statistics.RegisteredStatistics.relied_on`) and is prepared again
once one of them was registered again or rewritten.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

from gpu_engine.device import Device
from gpu_engine.planning.prepare import PreparedPlan, prepare_plan
from gpu_engine.plans.nodes import PlanNode

__all__ = ["PreparedPlans"]


class PreparedPlans:
    """Map (plan object, device, drivers, config) to its :class:`PreparedPlan`; thread-safe."""

    def __init__(self, entries: int = 512):  # as many as sql.plan_cache.DEFAULT_PLAN_CACHE_ENTRIES
        self.entries = entries
        self._lock = threading.Lock()
        self._prepared: OrderedDict[tuple, tuple[weakref.ref, PreparedPlan]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._prepared)

    def prepare(self, plan: PlanNode, device: Device, drivers: int, config, statistics=None) -> PreparedPlan:
        """Return ``prepare_plan(plan, device, drivers, config, statistics=statistics)``, from the last call with
        this plan object if any (``statistics`` are a session's tables', which a plan object kept by
        :mod:`gpu_engine.sql.plan_cache` was planned over)."""
        key = (id(plan), device.name, drivers, config)
        with self._lock:
            entry = self._prepared.get(key)
        # A plan optimized with columns proven unique from a table's rows runs only over those rows
        # (optimizer.unique_groupings): not once the table was registered again or a file of it rewritten.
        if entry is not None and entry[0]() is plan and (
                not entry[2] or (hasattr(statistics, "holds") and statistics.holds(entry[2]))):
            with self._lock:
                if key in self._prepared:
                    self._prepared.move_to_end(key)
            return entry[1]
        # raises for what cannot run: nothing kept then
        prepared = prepare_plan(plan, device, drivers, config, statistics=statistics)
        relied_on = statistics.relied_on() if hasattr(statistics, "relied_on") else ()
        if self.entries:
            with self._lock:
                self._prepared[key] = (weakref.ref(plan), prepared, relied_on)
                self._prepared.move_to_end(key)
                while len(self._prepared) > self.entries:
                    self._prepared.popitem(last=False)
        return prepared
