"""pytest plugin: log each test in which an estimate rule changed a plan (default: drop_unique_groupings).

Why: a rule that rewrites a common shape can quietly take away the plan a test was written for while its answer
still matches DuckDB (stop 53: GROUP BYs over small tables with a unique integer key became projections, and ~60
decorrelation, partial-step and exchange tests stopped running an aggregation). Run a folder under it and read
which tests the rule fired in::

    RULE_PROBE_LOG=/tmp/fired.log .venv/bin/python -m pytest -p bench.rule_firing_probe tests/sql -k cpu -n 0
    cut -f1 /tmp/fired.log | sort | uniq -c | sort -rn

Each line is the test's id, then (tab-separated) the aggregations the rule took away or changed, as EXPLAIN
describes them: which GROUP BY of the test's queries it was.

``RULE_PROBE_RULE`` names another rule of :data:`gpu_engine.optimizer.ESTIMATE_RULES`. The wrapper keeps the
rule's name and ``__wrapped__`` (``functools.wraps``), so fixtures that leave the rule out
(tests/optimizer/conftest.py's ``without_unique_groupings``) still find it.
"""

from __future__ import annotations

import functools
import os
from collections import Counter


def pytest_configure(config):
    from gpu_engine import optimizer

    name = os.environ.get("RULE_PROBE_RULE", "drop_unique_groupings")
    log = os.environ.get("RULE_PROBE_LOG", "/tmp/rule_firing_probe.log")

    def wrapped(rule):
        @functools.wraps(rule)
        def logged(plan, statistics):
            out = rule(plan, statistics)
            if out is not plan:
                test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" (")[0]
                gone = _aggregations(plan) - _aggregations(out)
                with open(log, "a") as f:
                    f.write("\t".join([test, *sorted(gone)]) + "\n")
            return out
        return logged

    rules = optimizer.ESTIMATE_RULES
    if not any(rule.__name__ == name for rule in rules):
        raise ValueError(f"no estimate rule named {name!r}: {[rule.__name__ for rule in rules]}")
    optimizer.ESTIMATE_RULES = tuple(wrapped(rule) if rule.__name__ == name else rule for rule in rules)


def _aggregations(plan) -> Counter:
    from gpu_engine.plans.nodes import AggregationNode, walk_plan

    return Counter(node.describe() for node in walk_plan(plan) if isinstance(node, AggregationNode))
