"""Describe typed scalar and aggregate expressions as immutable trees.

The IR is separate from execution, as in cudf_polars: nodes are frozen
dataclasses (hashing, equality and rebuilding come free) and every node carries
its resolved Arrow ``dtype``, computed by the SQL translator at plan-build time,
so that type errors surface before anything runs. The evaluator in
``gpu_engine.expressions`` walks these trees on device columns.

Operator names (``BinaryOp.op``) are fixed strings:

* arithmetic: ``add sub mul div mod``
* comparison: ``eq ne lt le gt ge``
* boolean: ``and or`` (Kleene three-valued logic, as SQL)

``UnaryOp.op``: ``not negate is_null is_not_null``.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import sys
import threading
from dataclasses import dataclass, field, fields
from typing import Any, Iterator

import pyarrow as pa

__all__ = [
    "Expr",
    "ColumnRef",
    "Literal",
    "BinaryOp",
    "UnaryOp",
    "Case",
    "InList",
    "Like",
    "Cast",
    "Extract",
    "Substring",
    "SUBSTRING_LOWER",
    "SUBSTRING_UPPER",
    "Function",
    "AggregateCall",
    "ARITHMETIC_OPS",
    "COMPARISON_OPS",
    "BOOLEAN_OPS",
    "AGGREGATE_FUNCTIONS",
    "walk",
    "referenced_columns",
    "MAX_EXPRESSION_DEPTH",
    "expression_depth",
    "allow_recursion_depth",
]

#: The deepest expression tree a plan may hold (levels from the root to the deepest leaf; a column is 1).
#: Why a limit: every pass over an expression (translation, fusion, evaluation,
#: explain, JSON) recurses once per level, so a tree must stay shallow enough
#: for Python's stack; deeper ones are refused with a PlanError naming the depth.
MAX_EXPRESSION_DEPTH = 500
#: Python frames one expression level may take in the deepest pass (SQL
#: parsing takes about 25 per nested parenthesis; the other passes fewer).
_FRAMES_PER_LEVEL = 32

ARITHMETIC_OPS = ("add", "sub", "mul", "div", "mod")
COMPARISON_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
BOOLEAN_OPS = ("and", "or")
AGGREGATE_FUNCTIONS = ("count_star", "count", "sum", "min", "max", "avg",
                       # the library beyond the five (rules: gpu_engine.plans.aggregates)
                       "var_samp", "var_pop", "stddev_samp", "stddev_pop", "covar_samp", "covar_pop", "corr",
                       "regr_slope", "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy",
                       "regr_intercept", "regr_r2", "regr_count",
                       "bool_and", "bool_or", "count_if", "any_value", "bit_and", "bit_or", "bit_xor",
                       "arg_min", "arg_max", "product",
                       # holistic and approximate ones (gpu_engine.aggregation.holistic)
                       "median", "quantile_cont", "quantile_disc", "mode", "string_agg", "approx_quantile",
                       "approx_count_distinct",
                       # first/last in the order of a key (gpu_engine.aggregation.ordered_pick)
                       "first", "last")

_SQL_OP = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%",
    "eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
    "and": "AND", "or": "OR",
}


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[str, ...]:
    """Return a dataclass's field names, once per class (``dataclasses.fields`` filters them anew on each call:
    half the time of :meth:`Expr.children`, which every walk over an expression calls per node)."""
    return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class Expr:
    """Base of all expressions; ``dtype`` is the resolved Arrow result type."""

    def children(self) -> tuple["Expr", ...]:
        """Return the sub-expressions, in evaluation order."""
        out = []
        for name in _field_names(type(self)):
            value = getattr(self, name)
            if isinstance(value, Expr):
                out.append(value)
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, Expr):
                        out.append(item)
                    elif isinstance(item, tuple):
                        out.extend(x for x in item if isinstance(x, Expr))
        return tuple(out)

    def sql(self) -> str:  # pragma: no cover - overridden everywhere
        """Return SQL-like text for explain output."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.sql()


@dataclass(frozen=True)
class ColumnRef(Expr):
    """Read an input column by name.

    ``hugeint`` (set by :meth:`of_field`): the plan field read is marked DuckDB's HUGEINT
    (:func:`gpu_engine.plans.null_type.is_hugeint_field`), which the translator reads where types meet; a
    translation-time note, so neither equality nor the plan's JSON form carries it.
    """

    name: str
    dtype: pa.DataType
    hugeint: bool = field(default=False, init=False, compare=False, repr=False)

    @classmethod
    def of_field(cls, field_: pa.Field, hugeint: bool) -> "ColumnRef":
        """Return a reference to the plan column ``field_``, noting whether it is DuckDB's HUGEINT."""
        ref = cls(field_.name, field_.type)
        if hugeint:
            object.__setattr__(ref, "hugeint", True)  # frozen: set once, here
        return ref

    def sql(self) -> str:
        return self.name


@dataclass(frozen=True)
class Literal(Expr):
    """A constant; ``value`` is None (SQL NULL), int, float, bool, str, ``datetime.date`` or ``decimal.Decimal``."""

    value: Any
    dtype: pa.DataType

    def sql(self) -> str:
        if self.value is None:
            return "NULL"
        if isinstance(self.value, str):
            return "'" + self.value.replace("'", "''") + "'"
        if isinstance(self.value, datetime.date):
            return f"DATE '{self.value.isoformat()}'"
        if isinstance(self.value, bool):
            return "TRUE" if self.value else "FALSE"
        if isinstance(self.value, decimal.Decimal):
            return str(self.value)
        if callable(getattr(self.value, "sql", None)):  # a value class that spells itself (IntervalValue)
            return self.value.sql()
        return repr(self.value)


@dataclass(frozen=True)
class BinaryOp(Expr):
    """Arithmetic, comparison or boolean operator on two operands (see module docstring)."""

    op: str
    left: Expr
    right: Expr
    dtype: pa.DataType

    def sql(self) -> str:
        return f"({self.left.sql()} {_SQL_OP[self.op]} {self.right.sql()})"


@dataclass(frozen=True)
class UnaryOp(Expr):
    """``not``, ``negate``, ``is_null`` or ``is_not_null``."""

    op: str
    operand: Expr
    dtype: pa.DataType

    def sql(self) -> str:
        if self.op == "not":
            return f"(NOT {self.operand.sql()})"
        if self.op == "negate":
            return f"(-{self.operand.sql()})"
        if self.op == "is_null":
            return f"({self.operand.sql()} IS NULL)"
        return f"({self.operand.sql()} IS NOT NULL)"


@dataclass(frozen=True)
class Case(Expr):
    """``CASE WHEN c1 THEN v1 … ELSE d END``; ``default`` None means ELSE NULL."""

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None
    dtype: pa.DataType

    def sql(self) -> str:
        parts = " ".join(f"WHEN {c.sql()} THEN {v.sql()}" for c, v in self.whens)
        tail = f" ELSE {self.default.sql()}" if self.default is not None else ""
        return f"CASE {parts}{tail} END"


@dataclass(frozen=True)
class InList(Expr):
    """``operand [NOT] IN (literals…)`` with SQL null semantics."""

    operand: Expr
    values: tuple[Literal, ...]
    negated: bool = False
    dtype: pa.DataType = field(default_factory=pa.bool_)

    def children(self) -> tuple["Expr", ...]:
        """Return the operand only: the values are constants, read as data where they matter.

        Why: passes that walk expressions for columns, aggregates or sizes visited each value, and a
        100,000-value list cost each of them a Python step per value.
        """
        return (self.operand,)

    def __repr__(self) -> str:
        """Return the dataclass's repr, the values written once per list (caches key expressions by repr)."""
        return (f"InList(operand={self.operand!r}, values={self._values_repr}, negated={self.negated!r}, "
                f"dtype={self.dtype!r})")

    @functools.cached_property
    def _values_repr(self) -> str:
        # Each value's type and Python repr (repr tells 0.0 from -0.0 and 1 from True); one dtype written once.
        dtypes = {v.dtype for v in self.values}
        if len(dtypes) == 1:
            return f"{next(iter(dtypes))}:{[v.value for v in self.values]!r}"
        return repr(self.values)

    def sql(self) -> str:
        values = ", ".join(v.sql() for v in self.values)
        return f"({self.operand.sql()} {'NOT ' if self.negated else ''}IN ({values}))"


@dataclass(frozen=True)
class Like(Expr):
    """``operand [NOT] LIKE pattern`` with ``%`` and ``_`` wildcards."""

    operand: Expr
    pattern: str
    negated: bool = False
    dtype: pa.DataType = field(default_factory=pa.bool_)

    def sql(self) -> str:
        return f"({self.operand.sql()} {'NOT ' if self.negated else ''}LIKE '{self.pattern}')"


@dataclass(frozen=True)
class Cast(Expr):
    """Convert ``operand`` to ``dtype`` (SQL CAST)."""

    operand: Expr
    dtype: pa.DataType

    def sql(self) -> str:
        return f"CAST({self.operand.sql()} AS {self.dtype})"


@dataclass(frozen=True)
class Extract(Expr):
    """``EXTRACT(field FROM operand)``; fields: ``year`` (``month``, ``day`` too)."""

    field: str
    operand: Expr
    dtype: pa.DataType = field(default_factory=pa.int64)

    def sql(self) -> str:
        return f"EXTRACT({self.field.upper()} FROM {self.operand.sql()})"


#: DuckDB's bounds on a substring's offset and length (``AssertInSupportedRange``): beyond them it raises for
#: each non-NULL string they reach.
SUBSTRING_LOWER, SUBSTRING_UPPER = -4294967296, 4294967295


@dataclass(frozen=True)
class Substring(Expr):
    """``SUBSTRING(operand FROM start [FOR length])``, 1-based, counted in characters; a start and length within
    DuckDB's supported range (a bound beyond it is the per-row ``substring`` function, which raises as DuckDB)."""

    operand: Expr
    start: int
    length: int | None
    dtype: pa.DataType = field(default_factory=pa.string)

    def sql(self) -> str:
        tail = f" FOR {self.length}" if self.length is not None else ""
        return f"SUBSTRING({self.operand.sql()} FROM {self.start}{tail})"


@dataclass(frozen=True)
class Function(Expr):
    """A scalar function call ``name(args…)``: names, signatures and result types in :mod:`gpu_engine.plans.functions`.

    One node for the whole function library (strings, math, dates) rather than a class per function, so adding a
    function touches its signature and its evaluation only; arguments a function needs as constants (``round``'s
    digits, ``lpad``'s width, ``date_trunc``'s part) are :class:`Literal` arguments.
    """

    name: str
    args: tuple[Expr, ...]
    dtype: pa.DataType

    def sql(self) -> str:
        if self.name in ("||", "//") and len(self.args) == 2:  # operators, written as SQL writes them
            return f"({self.args[0].sql()} {self.name} {self.args[1].sql()})"
        if self.name == "try_cast" and len(self.args) == 2:  # its target travels as a typed NULL
            return f"TRY_CAST({self.args[0].sql()} AS {self.dtype})"
        return f"{self.name}({', '.join(arg.sql() for arg in self.args)})"


@dataclass(frozen=True)
class AggregateCall(Expr):
    """One aggregate: ``function`` in :data:`AGGREGATE_FUNCTIONS`, ``arg`` None for ``count_star``.

    ``dtype`` is the final result type (DuckDB's: count -> int64, sum(int) ->
    int64, sum(decimal(p,s)) -> decimal(38,s), avg -> float64, min/max -> input).
    """

    function: str
    arg: Expr | None
    dtype: pa.DataType
    distinct: bool = False
    #: The second argument of a two-argument aggregate (``covar_samp(x, y)``, ``arg_min(x, y)``), or the
    #: ORDER BY key of ``string_agg(x, sep ORDER BY y)`` and ``first(x ORDER BY y)``, else None.
    second: Expr | None = None
    #: A constant argument: a quantile's fraction (negative: counted from the greatest value, as DuckDB)
    #: or ``string_agg``'s separator; None for the others.
    parameter: Any = None
    #: The direction of the ORDER BY key (:attr:`second`) of ``string_agg`` and ``first``/``last``: descending,
    #: NULLs first.
    descending: bool = False
    nulls_first: bool = False
    #: The ORDER BY keys after the first (:attr:`second`) of ``string_agg``/``first``/``last`` (``first(x ORDER BY
    #: a, b DESC)``): each ``(expression, descending, nulls_first)``; rows tied on the keys before compare on these.
    then_by: tuple[tuple[Expr, bool, bool], ...] = ()
    #: The result is of SQL's NULL type (:mod:`gpu_engine.plans.null_type`; :attr:`dtype` is its INTEGER storage):
    #: a function that returns its argument's type (``max``, ``min``, ``any_value``, ``first``/``last``,
    #: ``arg_min``/``arg_max``'s value, ``mode``, ``quantile_disc``) over an argument of that type, as DuckDB
    #: types ``max(q.x)`` of ``SELECT NULL AS x`` (so ``max(q.x) = t.s`` compares text, not integers).
    null_typed: bool = False

    def inputs(self) -> tuple[Expr, ...]:
        """Return the expressions a raw step evaluates for this call, in the order its function takes them:
        the argument, the second argument or first ORDER BY key, then the further ORDER BY keys."""
        return tuple(e for e in (self.arg, self.second) if e is not None) + tuple(key for key, _, _ in self.then_by)

    def order_keys(self) -> tuple[tuple[Expr, bool, bool], ...]:
        """Return every ORDER BY key as ``(expression, descending, nulls_first)``, the first one first."""
        return ((self.second, self.descending, self.nulls_first),) + self.then_by if self.second is not None else ()

    def _order_sql(self) -> str:
        return ", ".join(f"{key.sql()}{' DESC' if descending else ''}{' NULLS FIRST' if nulls_first else ' NULLS LAST'}"
                         for key, descending, nulls_first in self.order_keys())

    def sql(self) -> str:
        if self.function == "count_star":
            return "count(*)"
        if self.function == "string_agg":
            order = "" if self.second is None else f" ORDER BY {self._order_sql()}"
            separator = "NULL" if self.parameter is None else "'" + str(self.parameter).replace("'", "''") + "'"
            return f"string_agg({'DISTINCT ' if self.distinct else ''}{self.arg.sql()}, {separator}{order})"
        if self.function in ("first", "last"):
            return f"{self.function}({self.arg.sql()} ORDER BY {self._order_sql()})"
        tail = "" if self.second is None else f", {self.second.sql()}"
        if self.parameter is not None:
            tail += f", {self.parameter!r}"
        return f"{self.function}({'DISTINCT ' if self.distinct else ''}{self.arg.sql()}{tail})"


def walk(expr: Expr) -> Iterator[Expr]:
    """Yield ``expr`` and all its descendants, parents first."""
    yield expr
    for child in expr.children():
        yield from walk(child)


def referenced_columns(expr: Expr) -> tuple[str, ...]:
    """Return the distinct input column names an expression reads, in first-use order."""
    seen: dict[str, None] = {}
    for node in walk(expr):
        if isinstance(node, ColumnRef):
            seen.setdefault(node.name)
    return tuple(seen)


def expression_depth(expr: Expr) -> int:
    """Return the levels of ``expr``'s tree (a leaf is 1), counted without recursion, so any depth can be measured."""
    deepest = 0
    stack = [(expr, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children())
    return deepest


_recursion_lock = threading.Lock()


def allow_recursion_depth(levels: int) -> None:
    """Make sure Python's recursion limit leaves room for passes over an expression ``levels`` deep.

    Why: Python's default limit (1000 frames) ends at about 50 nested
    parentheses in the SQL parser and a few hundred levels in the other
    passes. The limit is process-wide, so it is only ever raised (lowering it
    could break another thread that is deep in a pass right now), only when a
    plan needs it, and at most for :data:`MAX_EXPRESSION_DEPTH` levels; Python
    3.11+ keeps Python-to-Python calls off the C stack, so the raised limit
    does not risk the thread stacks.
    """
    levels = min(max(0, levels), MAX_EXPRESSION_DEPTH)
    needed = 1000 + levels * _FRAMES_PER_LEVEL
    with _recursion_lock:
        if sys.getrecursionlimit() < needed:
            sys.setrecursionlimit(needed)
