"""MadeOnce: one value per key per process; pools of threads are made again in a forked child."""

from __future__ import annotations

import os

import pytest

from gpu_engine.connectors.decode_pool import decode_pool
from gpu_engine.exec.made_once import MadeOnce


def test_a_value_is_made_once_per_key():
    made = MadeOnce()
    calls = []
    assert made.get("k", lambda: calls.append(1) or "v") == "v"
    assert made.get("k", lambda: calls.append(1) or "w") == "v" and calls == [1]


def _in_forked_child(check) -> int:
    pid = os.fork()
    if pid == 0:  # the child: exit 0 when the check passes within its timeout
        code = 1
        try:
            code = 0 if check() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_the_decode_pool_is_made_again_in_a_forked_child():
    # The parent's decode threads do not exist in a child (a Spark worker forked from a daemon that had scanned):
    # a child handed the parent's pool queued its column chunks where no thread reads them and waited for ever.
    pool = decode_pool(2)
    assert pool.submit(lambda: 41).result(timeout=10) == 41
    assert _in_forked_child(lambda: decode_pool(2) is not pool
                            and decode_pool(2).submit(lambda: 42).result(timeout=10) == 42) == 0
    assert decode_pool(2) is pool  # the parent keeps its own


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_values_made_before_a_fork_are_kept_unless_asked_to_be_forgotten():
    kept, forgotten = MadeOnce(), MadeOnce(forget_in_forked_child=True)
    kept.get("k", lambda: "parent")
    forgotten.get("k", lambda: "parent")
    assert _in_forked_child(lambda: kept.get("k", lambda: "child") == "parent"
                            and forgotten.get("k", lambda: "child") == "child") == 0
