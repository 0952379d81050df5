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

__all__ = ["PlanningContext", "Relation", "TreeKey", "conjunct_key", "quoted", "same_tree", "tree_hashes"]


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


class TreeKey:
    """The identity of a sqlglot tree as a dict key: equal for trees that differ only in how they are written.

    Why not the tree's SQL text (``.sql()``), the key this replaced: generating text deep-copies the subtree at
    every call (planning a TPC-DS text looked up every node of every SELECT-list tree that way), and text is a
    poor identity — ``"A" + 1`` and ``a + 1``, ``(a + 1)`` and ``a + 1`` are one expression to DuckDB (and to
    this planner's column lookup), not to their texts. Two trees are one key when they have the same node types
    and arguments, identifiers compared without case or quotes, names and keywords without case, literals
    exactly, parentheses, positions and comments ignored (:func:`same_tree`); the hash (:func:`tree_hashes`)
    follows the same rules, and keys of one hash are compared in full, so a hash collision never joins two
    different expressions. ``a + 1`` and ``1 + a`` stay two keys, as DuckDB's binder keeps them.

    The tree is held, not copied: a key is taken from a tree that no longer changes. ``hashes``: the hashes of a
    tree's nodes computed once (:func:`tree_hashes`), for a caller that keys many nodes of one tree.
    """

    __slots__ = ("tree", "_hash")

    def __init__(self, tree: exp.Expression, hashes: Mapping[int, int] | None = None):
        self.tree = tree
        self._hash = (hashes if hashes is not None else tree_hashes(tree))[id(tree)]

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TreeKey) and self._hash == other._hash and same_tree(self.tree, other.tree)

    def __repr__(self) -> str:
        return f"TreeKey({self.tree.sql(dialect='duckdb')})"


def conjunct_key(conjunct: exp.Expression) -> TreeKey | tuple:
    """Return the identity of a WHERE / ON conjunct, to find one conjunct written in two places: its
    :class:`TreeKey`, the two sides of ``=`` and ``<>`` in either order.

    Why either order: a conjunct keeps no side order of its own (``a = b`` is ``b = a``), and sqlglot's simplify
    orders the sides by their text, so a name quoted on one side turns one of two equal conjuncts round
    (``t."a" = u.c`` beside ``"u".c = t.a``).
    """
    while type(conjunct) is exp.Paren:
        conjunct = conjunct.this
    if isinstance(conjunct, (exp.EQ, exp.NEQ)):
        return conjunct.key, frozenset((TreeKey(conjunct.this), TreeKey(conjunct.expression)))
    return TreeKey(conjunct)


def tree_hashes(tree: exp.Expression) -> dict[int, int]:
    """Return the hash of every node of ``tree`` by the rules of :class:`TreeKey`, by the node's ``id``.

    One pass, children before parents: each node's hash combines its children's, so keying every node of a
    tree costs one visit per node (sqlglot's own cached hash tells quoted identifiers and parentheses apart).
    """
    hashes: dict[int, int] = {}
    stack: list = [(tree, False)]
    while stack:
        node, children_done = stack.pop()
        if not children_done:
            stack.append((node, True))
            for value in node.args.values():
                if isinstance(value, exp.Expression):
                    stack.append((value, False))
                elif type(value) is list:
                    stack.extend((x, False) for x in value if isinstance(x, exp.Expression))
            continue
        kind = type(node)
        if kind is exp.Paren:
            hashes[id(node)] = hashes[id(node.this)]
            continue
        if kind is exp.Identifier:
            hashes[id(node)] = hash(("identifier", node.name.lower()))
            continue
        raw = node._hash_raw_args
        parts: list = [node.key]
        for key in sorted(node.args):
            value = node.args[key]
            if value is None or value is False or (type(value) is list and not value):
                continue
            if isinstance(value, exp.Expression):
                parts.append((key, hashes[id(value)]))
            elif type(value) is list:
                parts.append((key, tuple(hashes[id(x)] if isinstance(x, exp.Expression) else _atom(x, raw)
                                         for x in value)))
            else:
                parts.append((key, _atom(value, raw)))
        hashes[id(node)] = hash(tuple(parts))
    return hashes


def _atom(value, raw: bool):
    """Return a non-node argument as :class:`TreeKey` compares it: a name or keyword without case, unless raw."""
    return value.lower() if type(value) is str and not raw else value


def same_tree(left: exp.Expression, right: exp.Expression) -> bool:
    """Return whether two sqlglot trees are one :class:`TreeKey`, compared node by node."""
    stack = [(left, right, False)]
    while stack:
        a, b, raw = stack.pop()
        while type(a) is exp.Paren:
            a = a.this
        while type(b) is exp.Paren:
            b = b.this
        if a is b:
            continue
        if type(a) is not type(b):
            return False
        if type(a) is exp.Identifier:
            if a.name.lower() != b.name.lower():
                return False
        elif isinstance(a, exp.Expression):
            present = _present_args(a)
            if present != _present_args(b):
                return False
            stack.extend((a.args[k], b.args[k], a._hash_raw_args) for k in present)
        elif type(a) is list:
            if len(a) != len(b):
                return False
            stack.extend((x, y, raw) for x, y in zip(a, b))
        elif _atom(a, raw) != _atom(b, raw):
            return False
    return True


def _present_args(node: exp.Expression) -> set[str]:
    """Return the argument names of ``node`` that a key reads (not None, False or empty)."""
    return {k for k, v in node.args.items() if v is not None and v is not False and v != []}


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
                 replacements: Mapping[TreeKey, str] | None = None) -> exp.Expression:
        """Return a copy of ``tree`` over internal column names for PlanBuilder (:mod:`gpu_engine.sql.renaming`).

        ``replacements``: the part of the tree an aggregation computed already (a grouping key, an aggregate call,
        by :class:`TreeKey`) -> the column holding it.
        """
        replacements = replacements or {}
        hashes = tree_hashes(tree) if replacements else None  # every node's key from one pass over the tree

        def rename(node: exp.Expression) -> exp.Expression:
            # a constant is never replaced (`GROUP BY 1` names a position; a literal key reads its own value)
            if replacements and not isinstance(node, (exp.Literal, exp.Boolean, exp.Null)):
                name = replacements.get(TreeKey(node, hashes))
                if name is not None:
                    return stand_for(exp.column(exp.to_identifier(name, quoted=True)), node)
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
