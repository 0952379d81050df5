"""Stand-ins for planner passes, for tests that check which passes a query's planning reaches.

Why: tests that skip a pass where the query lacks its construct (tests/sql/test_subquery_rewrite_skips.py,
tests/sql/test_tree_census.py) replace each pass with one that raises (planning fails where the pass still runs)
or one that notes its call and runs the pass (each construct must still reach it).
"""

from __future__ import annotations


def refuse_calls(monkeypatch, module, names, why: str) -> None:
    """Replace each pass ``module.<name>`` with one that raises ``AssertionError("<name> <why>")``."""
    for name in names:
        def refuse(*args, _name=name, **kwargs):
            raise AssertionError(f"{_name} {why}")

        monkeypatch.setattr(module, name, refuse)


def record_calls(monkeypatch, module, names) -> list[str]:
    """Wrap each pass ``module.<name>`` so its calls are noted; return the list the names of called passes go to."""
    called: list[str] = []
    for name in names:
        original = getattr(module, name)

        def recording(*args, _original=original, _name=name, **kwargs):
            called.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, recording)
    return called
