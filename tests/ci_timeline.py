"""Where the wall time of a ``make test`` run (``-n 2 --dist loadgroup``) goes: a summary at the end of the log.

Why: the clean-clone CI is the figure the project keeps under 20 minutes, and ``time`` and ``--durations`` do not say
where its wall goes: ``time`` counted ~25% of the two workers' time idle at 082c811, which could be a tail where one
worker runs alone, the workers' start (import, collection, assertion rewriting: 11,000 cases), waits on the other
worker's compiles (tests/compile_once_per_run.py), or Spark's JVMs (not children pytest waits for, so their CPU is
not in ``time``'s user figure at all). Each xdist worker records its start, the end of its collection, every test's
start and end and its compile-lock waits, and hands them to the controller in ``workeroutput``; the controller
prints, per worker, when it collected, how long it was busy, and when it finished, the tail where one worker ran
alone (with the tests it ran there), the Spark group's span and the files that took the most worker time. Nothing
here changes what runs; without pytest-xdist it prints nothing.
"""

from __future__ import annotations

import os
import resource
import time
from collections import defaultdict

import pytest

#: Wall time when this module was imported: in an xdist worker, close to the process's start (tests/conftest.py
#: imports it at configure time, before collection).
_IMPORTED_AT = time.time()
#: How many files the summary lists, largest worker time first.
TOP_FILES = 15
#: How many of the tail's tests the summary names.
TAIL_TESTS = 8
#: A unit of work (tests/conftest.py ``scheduling_unit``) of this many seconds or more that started in the last
#: :data:`LATE_SHARE` of the run is named in the summary: one that long, handed out late, can leave the other
#: worker idle at the end (a candidate for conftest's ``LONG_UNITS``).
LONG_UNIT_S = 8.0
LATE_SHARE = 0.25


class WorkerRecorder:
    """In an xdist worker: collection end, each test's wall span, compile-lock waits; sent in ``workeroutput``."""

    def __init__(self, config, unit_of):
        self.config = config
        self.unit_of = unit_of
        self.units: dict[str, list[float]] = {}
        self.collected_at: float | None = None
        self.files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        self.spans: list[tuple[float, float, str]] = []

    def pytest_collection_finish(self, session):
        self.collected_at = time.time()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        start, cpu, children = time.time(), time.process_time(), _children_cpu()
        yield
        end = time.time()
        totals = self.files[item.nodeid.split("::", 1)[0]]
        totals[0] += end - start
        totals[1] += time.process_time() - cpu
        totals[2] += _children_cpu() - children
        unit = self.units.setdefault(self.unit_of(item.nodeid), [start, 0.0])
        unit[1] += end - start
        self.spans.append((start, end, item.nodeid))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        waits = []
        try:
            from compile_once_per_run import waits as lock_waits

            waits = lock_waits()
        except ImportError:
            pass
        own = resource.getrusage(resource.RUSAGE_SELF)
        spark = [span for span in self.spans if span[2].startswith("tests/spark/")]
        self.config.workeroutput["ci_timeline"] = {
            "started": _IMPORTED_AT,
            "collected": self.collected_at,
            "first": self.spans[0][0] if self.spans else None,
            "last": self.spans[-1][1] if self.spans else None,
            "busy": sum(end - start for start, end, _ in self.spans),
            "tests": len(self.spans),
            "waits": [len(waits), sum(waits)],
            "cpu": own.ru_utime + own.ru_stime,
            "children_cpu": _children_cpu(),
            "spark": [spark[0][0], spark[-1][1], sum(end - start for start, end, _ in spark), len(spark)]
            if spark else None,
            "files": dict(self.files),
            # the tests that ended in the run's last minutes: enough to name the tail, small to send
            "units": self.units,
            "late": [span for span in self.spans if span[1] > self.spans[-1][1] - 300] if self.spans else [],
        }


def _children_cpu() -> float:
    """Return the CPU seconds of this process's children it has waited for (subprocesses a test ran to its end)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


class ControllerSummary:
    """In the xdist controller: gather the workers' records and print the summary (module docstring)."""

    def __init__(self):
        self.started = time.time()
        self.workers: dict[str, dict] = {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        record = getattr(node, "workeroutput", {}).get("ci_timeline")
        if record:
            self.workers[node.gateway.id] = record

    def pytest_terminal_summary(self, terminalreporter):
        if not self.workers:
            return
        for line in summary_lines(self.started, time.time(), self.workers):
            terminalreporter.write_line(line)


def summary_lines(started: float, ended: float, workers: dict[str, dict]) -> list[str]:
    """Return the summary's lines: ``started``/``ended`` the controller's wall clock, ``workers`` id -> record."""
    run = ended - started
    lines = [f"==== worker timeline (tests/ci_timeline.py): run {run:.1f} s, times from the controller's start ===="]
    for name, record in sorted(workers.items()):
        count, waited = record["waits"]
        first, last = record["first"] or started, record["last"] or started
        lines.append(
            f"{name}: started +{record['started'] - started:.1f} s, collected +{(record['collected'] or started) - started:.1f}"
            f" s, tests +{first - started:.1f} .. +{last - started:.1f} s ({record['tests']} tests), busy in tests"
            f" {record['busy']:.1f} s ({record['busy'] / run:.0%} of the run), between tests"
            f" {last - first - record['busy']:.1f} s, compile-lock waits {waited:.1f} s ({count}), CPU {record['cpu']:.1f}"
            f" s own + {record['children_cpu']:.1f} s reaped children")
        if record["spark"]:
            spark_first, spark_last, spark_busy, spark_tests = record["spark"]
            lines.append(f"{name}: Spark group +{spark_first - started:.1f} .. +{spark_last - started:.1f} s,"
                         f" {spark_busy:.1f} s in {spark_tests} tests")
    ends = sorted((record["last"] or started, name) for name, record in workers.items())
    if len(ends) > 1:
        other_end, (last_end, last_name) = ends[-2][0], ends[-1]
        tail = [span for span in workers[last_name]["late"] if span[1] > other_end]
        named = ", ".join(f"{nodeid} {end - max(start, other_end):.1f} s" for start, end, nodeid in
                          sorted(tail, key=lambda span: span[0] - span[1])[:TAIL_TESTS])
        lines.append(f"tail: {last_name} ran alone for {last_end - other_end:.1f} s at the end: {named}")
    late = sorted(((seconds, unit, first) for record in workers.values()
                   for unit, (first, seconds) in record.get("units", {}).items()
                   if seconds >= LONG_UNIT_S and first >= ended - LATE_SHARE * run), reverse=True)
    lines.append(f"units of {LONG_UNIT_S:.0f} s or more started in the run's last {LATE_SHARE:.0%}: "
                 + (", ".join(f"{unit} {seconds:.1f} s at +{first - started:.0f} s" for seconds, unit, first in late)
                    or "none"))
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for record in workers.values():
        for path, totals in record["files"].items():
            files[path] = [mine + theirs for mine, theirs in zip(files[path], totals)]
    busy = sum(totals[0] for totals in files.values()) or 1.0
    lines.append(f"files with the most worker time (of {busy:.0f} s in tests, {len(files)} files; wall, share, the"
                 f" worker's CPU, its reaped children's CPU; a JVM's is in neither):")
    for path, (seconds, cpu, children) in sorted(files.items(), key=lambda item: -item[1][0])[:TOP_FILES]:
        lines.append(f"  {seconds:7.1f} s {seconds / busy:5.1%}  cpu {cpu:6.1f} s + {children:5.1f} s  {path}")
    return lines


def register(config, unit_of) -> None:
    """Register the worker's recorder in an xdist worker, the summary in an xdist controller; nothing otherwise.
    ``unit_of``: node id -> the scheduler's unit of work (tests/conftest.py ``scheduling_unit``)."""
    if os.environ.get("PYTEST_XDIST_WORKER") and hasattr(config, "workeroutput"):
        config.pluginmanager.register(WorkerRecorder(config, unit_of), "ci_timeline_worker")
    elif getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(ControllerSummary(), "ci_timeline_controller")
