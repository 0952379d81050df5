"""Planning a text runs with the cyclic collector's youngest threshold raised, and puts the process's back.

Why (gpu_engine/sql/planning_gc.py): sqlglot trees are cyclic (every node links to its parent), so at the
default threshold of 700 planning TPC-DS's 99 texts ran ~700 young and 3-4 full collections. Deterministic:
no timing, only the thresholds seen while a text is planned and after.
"""

from __future__ import annotations

import gc
import threading

import pyarrow as pa
import pytest

import gpu_engine.sql.planning_gc as planning_gc
from gpu_engine.sql import plan_sql

CATALOG = {"t": pa.schema([("a", pa.int64()), ("b", pa.string())])}
TEXT = "SELECT b, sum(a) AS s FROM t WHERE a > 1 AND NOT (b IS NULL) GROUP BY b ORDER BY b"


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def _seen_while_planning(monkeypatch) -> list:
    import gpu_engine.sql as sql

    seen = []
    parse = sql.parse_and_qualify
    monkeypatch.setattr(sql, "parse_and_qualify", lambda *a, **k: seen.append(gc.get_threshold()) or parse(*a, **k))
    plan_sql(TEXT, CATALOG)
    return seen


def test_planning_raises_the_youngest_threshold_and_puts_it_back(monkeypatch, thresholds):
    gc.set_threshold(700, 10, 10)
    assert _seen_while_planning(monkeypatch) == [(planning_gc.PLANNING_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("own", [(0, 10, 10), (50_000, 5, 5)])
def test_a_process_with_collection_off_or_a_higher_threshold_keeps_its_own(monkeypatch, thresholds, own):
    gc.set_threshold(*own)
    assert _seen_while_planning(monkeypatch) == [own]
    assert gc.get_threshold() == own


def test_a_failing_text_puts_the_threshold_back(thresholds):
    gc.set_threshold(700, 10, 10)
    with pytest.raises(Exception):
        plan_sql("SELECT nope FROM t", CATALOG)
    assert gc.get_threshold() == (700, 10, 10)


def test_the_last_of_several_planning_threads_puts_it_back(thresholds):
    gc.set_threshold(700, 10, 10)
    inside, release = threading.Barrier(3), threading.Event()
    seen = []

    def plan():
        with planning_gc.fewer_collections():
            inside.wait()
            release.wait()
            seen.append(gc.get_threshold()[0])

    threads = [threading.Thread(target=plan) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()  # both inside
    assert gc.get_threshold()[0] == planning_gc.PLANNING_THRESHOLD
    release.set()
    for thread in threads:
        thread.join()
    assert seen == [planning_gc.PLANNING_THRESHOLD] * 2
    assert gc.get_threshold() == (700, 10, 10)
