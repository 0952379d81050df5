"""Hold the state that one query's planning rules share, and the planned relations they pass between them.

Why a module of its own: the SQL planner's rules (:mod:`~gpu_engine.sql.predicates`,
:mod:`~gpu_engine.sql.decorrelation`, :mod:`~gpu_engine.sql.join_ordering`,
:mod:`~gpu_engine.sql.aggregate_planning`, and the windows, grouping-set,
set-operation and VALUES modules) are free functions over one
:class:`PlanningContext`: the catalog, the statistics, the plan-node id
generator, the internal column names used so far and the SELECTs being
planned. They pass :class:`Relation` values between them. The pipeline that
calls the rules in order, :class:`~gpu_engine.sql.planner.QueryPlanner`, is
such a context itself, so a rule that plans a nested query (a subquery, a
derived table) calls back into it with ``planner._plan_query``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Mapping

import pyarrow as pa
from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.snippet_sources import line_and_column, stand_for, written_sql
from gpu_engine.sql.errors import SqlError, position_of, unsupported
from gpu_engine.sql.renaming import renamed_copy
from gpu_engine.sql.statistics import ColumnStatistics, TableStatistics

__all__ = ["PlanningContext", "Relation", "quoted"]


class _Builder(PlanBuilder):
    """A PlanBuilder that continues from a node planned earlier (a relation of the SQL planner)."""

    @classmethod
    def on(cls, node: PlanNode, catalog, ids: PlanNodeIdGenerator) -> "_Builder":
        builder = cls(catalog, id_generator=ids)
        builder._node = node
        return builder


@dataclass
class Relation:
    """A planned relation: its plan, the SQL names it answers to, and its estimated size.

    ``columns`` maps ``(table alias, column)`` of the SQL text to the plan's
    internal column name; ``stats`` holds estimates per internal name.
    """

    node: PlanNode
    columns: dict[tuple[str, str], str]
    aliases: frozenset[str]
    rows: float
    stats: dict[str, ColumnStatistics] = field(default_factory=dict)


@functools.lru_cache(maxsize=4096)
def quoted(name: str) -> str:
    """Return ``name`` as a quoted identifier in DuckDB's SQL (an internal column name in a snippet).

    Kept per name: sqlglot's generator costs ~50 us a call and planning a TPC-DS text quotes ~50 names,
    most of them seen before (a table's columns, the planner's internal names).
    """
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


class PlanningContext:
    """The state of planning one query: catalog, statistics, node ids, internal names, the enclosing SELECTs.

    Parameters
    ----------
    catalog
        Table name -> Arrow schema.
    statistics
        Table name -> :class:`TableStatistics`; tables without any are assumed
        to hold :data:`~gpu_engine.sql.statistics.DEFAULT_TABLE_ROWS` rows.
    """

    def __init__(self, catalog: Mapping[str, pa.Schema], statistics: Mapping[str, TableStatistics] | None = None):
        self.catalog = dict(catalog)
        self.statistics = statistics if statistics is not None else {}  # read lazily: only the tables planned
        self.ids = PlanNodeIdGenerator()
        self._used_names: set[str] = set()
        self._synthetic = itertools.count(1)
        # (FROM items, WHERE conjuncts, NULL-extended aliases) of the SELECTs being planned, innermost last
        self._scopes: list[tuple[list, list[exp.Expression], set[str]]] = []

    def _fresh(self, name: str, alias: str | None = None) -> str:
        """Return an internal column name: ``name`` when unused in this plan, else ``alias.name`` (or numbered)."""
        candidates = [name] + ([f"{alias}.{name}"] if alias and alias != name else [])
        for candidate in candidates:
            if candidate not in self._used_names:
                self._used_names.add(candidate)
                return candidate
        for n in itertools.count(2):
            candidate = f"{candidates[-1]}#{n}"
            if candidate not in self._used_names:
                self._used_names.add(candidate)
                return candidate
        raise AssertionError("unreachable")

    def _synthetic_alias(self) -> str:
        """Return a new alias for a relation the SQL text does not name (a planned subquery)."""
        return f"$subquery{next(self._synthetic)}"

    def _builder(self, node: PlanNode) -> _Builder:
        """Return a PlanBuilder that continues from ``node`` with this plan's node ids."""
        return _Builder.on(node, self.catalog, self.ids)

    def _renamed(self, tree: exp.Expression, columns: Mapping[tuple[str, str], str],
                 replacements: Mapping[str, str] | None = None) -> exp.Expression:
        """Return a copy of ``tree`` over internal column names for PlanBuilder (:mod:`gpu_engine.sql.renaming`)."""
        replacements = replacements or {}

        def rename(node: exp.Expression) -> exp.Expression:
            # a constant is never replaced: its text is not generated (each node's text copies it first)
            if replacements and not isinstance(node, (exp.Literal, exp.Boolean, exp.Null)):
                key = node.sql()
                if key in replacements:
                    return stand_for(exp.column(exp.to_identifier(replacements[key], quoted=True)), node)
            if isinstance(node, exp.Column):
                internal = columns.get((node.table, node.name))
                if internal is None:
                    line, col = position_of(node)
                    if not node.table:
                        message = f"column {node.name!r} is not available here"
                    else:
                        message = f"column {node.table}.{node.name} is not available here"
                    if replacements:
                        message += " (in an aggregate query, columns must be grouped or aggregated)"
                    raise SqlError(message, line=line, col=col, name=node.sql())
                return stand_for(exp.column(exp.to_identifier(internal, quoted=True)), node)
            if isinstance(node, (exp.Subquery, exp.Exists)):
                raise unsupported("a subquery in this position", node)
            return node

        return renamed_copy(tree, rename)  # the query's tree stays as it is

    def _plan_error(self, error: PlanError, tree: exp.Expression | None) -> SqlError:
        """Return PlanBuilder's ``error`` as a SqlError at ``tree``'s position in the text."""
        if isinstance(error, SqlError):  # raised inside with its own (closer) position: keep it as it is
            return error
        placed = line_and_column(error.tree) if error.tree is not None else None
        if placed is not None:  # at the sub-tree it is about, named as written
            return SqlError(str(error), line=placed[0], col=placed[1], name=written_sql(error.tree)[:80])
        line, col = position_of(tree)
        return SqlError(str(error), line=line, col=col, name=tree.sql(dialect="duckdb")[:80] if tree else None)

    def _null_supplying(self, alias: str) -> bool:
        """Return whether ``alias`` is on the NULL-extended side of an outer join of the SELECT being planned."""
        return bool(self._scopes) and alias in self._scopes[-1][2]
