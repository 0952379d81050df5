"""Queries whose result has two columns of one name (``SELECT * FROM t JOIN u ...`` where both have ``a``).

Why: DuckDB keeps both columns under the same name (``SELECT t.a, u.a``; ``SELECT DISTINCT *`` over a join,
TPC-DS-style queries), while a plan's columns are named uniquely (operators find columns by name). The plan
names a repeated output as DuckDB names it inside a derived table (``a``, ``a_1``, ``a_2``, skipping names the
query already uses), and :meth:`~gpu_engine.session.Session.sql` shows the result under the names as written.
The shown names are kept beside the plan object (plans are frozen; the plan cache hands back the same object
for the same text), dropped with it. A plan run by ``Session.execute`` shows its unique names.
"""

from __future__ import annotations

import threading
import weakref

import pyarrow as pa

__all__ = ["unique_output_names", "remember_shown_names", "shown_names", "with_shown_names"]

_SHOWN: dict[int, tuple[str, ...]] = {}  # id(plan) -> the names its result is shown under
_LOCK = threading.Lock()


def unique_output_names(names: list[str]) -> list[str]:
    """Return ``names`` with each repeat renamed ``<name>_<n>`` (the first free n from 1), as DuckDB's binder does."""
    taken = set(names)
    seen: set[str] = set()
    out = []
    for name in names:
        if name not in seen:
            seen.add(name)
            out.append(name)
            continue
        n = 1
        while f"{name}_{n}" in taken:
            n += 1
        renamed = f"{name}_{n}"
        taken.add(renamed)
        seen.add(renamed)
        out.append(renamed)
    return out


def remember_shown_names(plan: object, names: list[str]) -> None:
    """Keep ``names`` as the names ``plan``'s result is shown under, as long as ``plan`` lives."""
    key = id(plan)
    with _LOCK:
        _SHOWN[key] = tuple(names)
    weakref.finalize(plan, _forget, key)


def _forget(key: int) -> None:
    with _LOCK:
        _SHOWN.pop(key, None)


def shown_names(plan: object) -> tuple[str, ...] | None:
    """Return the names ``plan``'s result is shown under where they repeat a name, else None."""
    with _LOCK:
        return _SHOWN.get(id(plan))


def with_shown_names(plan: object, table: pa.Table) -> pa.Table:
    """Return ``table`` (``plan``'s result) with its columns named as the query wrote them."""
    names = shown_names(plan)
    if names is None or len(names) != table.num_columns:
        return table
    return table.rename_columns(list(names))
