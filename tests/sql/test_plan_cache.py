"""Session.sql keeps the plans of recent texts (gpu_engine.sql.plan_cache) while the registered tables are unchanged."""

from __future__ import annotations

import gc
import threading

import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.sql import SqlError
from gpu_engine.sql.plan_cache import PlanCache

QUERY = "SELECT k, sum(v) AS s FROM t WHERE v > 1 GROUP BY k ORDER BY k"


def _session(**config) -> Session:
    session = Session(device="cpu", **config)
    session.register("t", pa.table({"k": [1, 1, 2, 3], "v": [1, 2, 3, 4]}))
    return session


def test_a_text_run_again_uses_its_plan_and_answers_the_same():
    session = _session()
    first = session.sql(QUERY)
    plan = session.sql_plan(QUERY)
    assert session.sql_plan(QUERY) is plan and session.plan_cache.hits == 2 and session.plan_cache.misses == 1
    assert session.sql(QUERY).equals(first) and first.to_pydict() == {"k": [1, 2, 3], "s": [2, 3, 4]}
    assert session.sql_plan(QUERY, dialect="spark") is not plan  # the dialect is part of the key


def test_registering_any_table_again_plans_the_text_again():
    session = _session()
    plan = session.sql_plan("SELECT * FROM t")
    session.register("t", pa.table({"k": [5], "v": [6], "w": ["x"]}))  # a new column: SELECT * must see it
    assert session.sql("SELECT * FROM t").to_pydict() == {"k": [5], "v": [6], "w": ["x"]}
    assert session.sql_plan("SELECT * FROM t") is not plan
    again = session.sql_plan("SELECT * FROM t")
    session.register("other", pa.table({"x": [1]}))  # a table the text does not name: planned again all the same
    assert session.sql_plan("SELECT * FROM t") is not again


def test_same_schema_new_data_is_planned_again_and_answers_from_the_new_data():
    session = _session()
    session.sql(QUERY)
    session.register("t", pa.table({"k": [7, 7], "v": [5, 6]}))
    assert session.sql(QUERY).to_pydict() == {"k": [7], "s": [11]}


def test_errors_are_not_kept():
    session = _session()
    for _ in range(2):
        with pytest.raises(SqlError, match="nope"):
            session.sql("SELECT nope FROM t")
    assert len(session.plan_cache) == 0
    session.register("t", pa.table({"nope": [1]}))
    assert session.sql("SELECT nope FROM t").to_pydict() == {"nope": [1]}


def test_a_shared_cte_s_plans_are_kept_and_a_new_catalog_plans_them_again():
    """Q15's shape: a text run again reads temporary tables of the same names, so nothing is planned again."""
    session = _session()
    text = ("WITH a AS (SELECT k, sum(v) AS s FROM t GROUP BY k), c AS (SELECT k, s FROM a WHERE s > 0) "
            "SELECT a.k FROM a, a AS b, c, c AS d WHERE a.s = b.s AND c.k = a.k AND d.k = c.k ORDER BY 1")
    for _ in range(3):
        assert session.sql(text).to_pydict() == {"k": [1, 1, 2, 2, 3]}  # k 1 and 2 both sum to 3
    # the whole text (planned first for its errors), the two CTEs' texts and the query over their tables
    assert len(session.plan_cache) == 4 and session.plan_cache.misses == 4
    assert not [t for t in session.catalog if t.startswith("__cte_")]
    session.register("t", pa.table({"k": [1, 2], "v": [5, 5]}))  # new data: every text is planned again
    assert session.sql(text).to_pydict() == {"k": [1, 1, 2, 2]}  # both sum to 5
    assert session.plan_cache.misses == 8


def test_calls_of_one_shared_cte_text_at_once_read_tables_of_their_own():
    session = _session()
    text = "WITH a AS (SELECT k, sum(v) AS s FROM t GROUP BY k) SELECT a.k FROM a, a AS b WHERE a.s = b.s ORDER BY 1"
    calls = session._cte_calls
    with calls.slot(text, "duckdb") as first, calls.slot(text, "duckdb") as second:
        assert first != second  # a call running now holds slot 0: the next one gets slot 1
        assert session.sql(text).to_pydict() == {"k": [1, 1, 2, 2, 3]}  # slot 2, while 0 and 1 are held
    with calls.slot(text, "duckdb") as again, calls.slot("SELECT 1", "duckdb") as other:
        assert again == first and other.split("s")[0] != first.split("s")[0]


def test_the_cache_is_bounded_and_can_keep_nothing():
    session = _session()
    session.plan_cache = PlanCache(entries=2)
    texts = [f"SELECT k + {i} AS x FROM t" for i in range(4)]
    for text in texts:
        session.sql_plan(text)
    assert len(session.plan_cache) == 2
    assert session.sql_plan(texts[0]) is not session.sql_plan(texts[0]) or session.plan_cache.hits == 1
    session.plan_cache = PlanCache(entries=0)
    assert session.sql_plan(texts[1]) is not session.sql_plan(texts[1]) and len(session.plan_cache) == 0
    long_text = "SELECT k FROM t WHERE " + " OR ".join(f"v = {i}" for i in range(20))
    small = PlanCache(entries=4, max_text_chars=50)
    session.plan_cache = small
    assert session.sql_plan(long_text) is not session.sql_plan(long_text) and len(small) == 0
    with pytest.raises(ValueError, match="non-negative"):
        PlanCache(entries=-1)


def test_a_freed_table_object_never_matches():
    cache = PlanCache()

    class Table:  # stands for a registered table object
        pass

    tables = {"t": Table()}
    plans = iter(["first", "second", "third"])
    assert cache.plan("q", "duckdb", tables, lambda: next(plans)) == "first"
    assert cache.plan("q", "duckdb", tables, lambda: next(plans)) == "first"
    tables["t"] = Table()  # the old object is freed; a new one (perhaps at the same address) must miss
    gc.collect()
    assert cache.plan("q", "duckdb", tables, lambda: next(plans)) == "second"
    del tables["t"]
    assert cache.plan("q", "duckdb", tables, lambda: next(plans)) == "third"


def test_threads_share_the_cache():
    session = _session(drivers=2)
    expected = session.sql(QUERY)
    results, errors = [], []

    def run():
        try:
            for _ in range(5):
                results.append(session.sql(QUERY))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 20 and all(r.equals(expected) for r in results)
    assert session.plan_cache.misses == 1


def test_a_shared_cte_s_temporary_table_does_not_make_other_texts_miss(monkeypatch):
    """While one call's temporary table is registered (another thread's Q15), a kept text still hits."""
    from gpu_engine.plans.nodes import TableScanNode, walk_plan

    session = _session()
    kept = session.sql_plan(QUERY)
    seen = []
    execute = Session.execute

    def recording(self, plan, *args, **kwargs):
        if any(isinstance(n, TableScanNode) and n.table_name.startswith("__cte_") for n in walk_plan(plan)):
            seen.append(session.sql_plan(QUERY))  # planned while the temporary table is registered
        return execute(self, plan, *args, **kwargs)

    monkeypatch.setattr(Session, "execute", recording)
    text = "WITH a AS (SELECT k, sum(v) AS s FROM t GROUP BY k) SELECT a.k FROM a, a AS b WHERE a.s = b.s ORDER BY 1"
    assert session.sql(text).to_pydict() == {"k": [1, 1, 2, 2, 3]}
    assert seen == [kept] and seen[0] is kept
    assert session.sql_plan(QUERY) is kept  # and still after the temporary table is gone



def test_a_round_of_more_texts_than_128_run_again_plans_and_prepares_nothing(monkeypatch):
    """TPC-DS's 99 texts take 142 entries (a shared CTE keeps its own plans): with 128 kept, texts run in turn
    never hit, each evicted just before it was asked for again, and every warm run parsed, planned and prepared."""
    import gpu_engine.planning.prepared_plans as prepared_plans

    session = _session()
    texts = [f"SELECT k, sum(v) + {i} AS s FROM t GROUP BY k" for i in range(135)]

    def plan_and_prepare(text):  # what Session.sql does before it runs a text (running 300 would take seconds)
        plan = session.sql_plan(text)
        session._prepared.prepare(plan, session.device, session.drivers, session.config)

    for text in texts:
        plan_and_prepare(text)
    misses = session.plan_cache.misses
    prepared = []
    real_prepare = prepared_plans.prepare_plan
    monkeypatch.setattr(prepared_plans, "prepare_plan",
                        lambda *args, **options: prepared.append(1) or real_prepare(*args, **options))
    for text in texts:
        plan_and_prepare(text)
    assert session.plan_cache.misses == misses and session.plan_cache.hits == 135 and not prepared
    for i in (0, 134):
        assert sorted(session.sql(texts[i]).to_pylist(), key=lambda row: row["k"]) == [
            {"k": 1, "s": 3 + i}, {"k": 2, "s": 3 + i}, {"k": 3, "s": 4 + i}]
    assert not prepared
