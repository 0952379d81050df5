"""Refuse list (and map and struct) values by name: the engine's columns hold no nested types.

Why a pass of its own: DuckDB and Spark users reach for lists early (``array_agg``/``list``/``collect_list``,
``UNNEST``/``explode``, ``[1, 2]``, ``string_split``), and each failed later with a message about something
else: "unsupported function '[1, 2]'", "column t.v is not available here" for ``histogram(v)``. Each refusal
here names the construct as written, its position (from :func:`~gpu_engine.sql.refusals.refuse_unsupported`'s
walk) and the scalar alternative where there is one (``string_agg``, ``split_part``).
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of

__all__ = ["refuse_list_construct"]

_NO_LISTS = "the engine's columns hold no lists"
#: Anonymous functions (as sqlglot parses them) that return or read lists, maps or structs.
_LIST_NAMES = ("histogram", "regexp_split_to_array", "string_to_array", "list_", "array_", "map_", "struct_",
               "element_at", "cardinality")


def _spelled(node: exp.Expression, dialect: str) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql(dialect=dialect).split("(", 1)[0].lower()


def _error(message: str, node: exp.Expression, name: str) -> SqlError:
    line, col = position_of(node)
    return SqlError(f"unsupported SQL: {message}", line=line, col=col, name=name)


def refuse_list_construct(node: exp.Expression, dialect: str) -> None:
    """Raise a :class:`SqlError` when ``node`` makes, expands or reads a list, map or struct value (named as
    ``dialect`` spells it)."""
    if isinstance(node, exp.Array) and isinstance(node.parent, exp.AggFunc):  # a quantile's fractions: its own
        return
    if isinstance(node, exp.Array) and isinstance(node.parent, exp.Columns):  # COLUMNS(['a', 'b']): names
        return
    if isinstance(node, (exp.ArrayAgg, exp.ArrayUniqueAgg)):
        unique = isinstance(node, exp.ArrayUniqueAgg) or node.find(exp.Distinct) is not None
        name = "collect_set" if isinstance(node, exp.ArrayUniqueAgg) else "array_agg (list, collect_list)"
        alternative = "string_agg(DISTINCT x, ',')" if unique else "string_agg(x, ',' [ORDER BY y])"
        raise _error(f"aggregate function {name} returns a list, which the engine's columns do not hold; "
                     f"{alternative} joins a group's values into one string", node, name.split()[0])
    if isinstance(node, (exp.Explode, exp.Unnest, exp.Inline)):  # (posexplode is an Explode)
        name = _spelled(node, dialect)
        lists = "array(constants) or split(s, ',')" if dialect == "spark" else \
            "generate_series(...), range(...), string_split(s, ',') or [constants]"
        raise _error(f"{name}(...) of this list expands it into rows, and {_NO_LISTS}; {name}({lists}) as a "
                     "SELECT output is planned, or register the data with one value per row", node, name)
    if isinstance(node, (exp.Split, exp.RegexpSplit)):
        name = _spelled(node, dialect)
        raise _error(f"{name}(...) returns a list, and {_NO_LISTS}; split_part(string, separator, n) returns "
                     "the n-th piece", node, name)
    if isinstance(node, exp.RegexpExtractAll):
        raise _error(f"regexp_extract_all(...) returns a list of matches, and {_NO_LISTS}; regexp_extract(string, "
                     "pattern[, group]) returns the first match", node, "regexp_extract_all")
    if isinstance(node, exp.GenerateSeries) and not isinstance(node.parent, exp.Table):
        name = _spelled(node, dialect)
        raise _error(f"{name}(...) as a value returns a list, and {_NO_LISTS}; in FROM ({name}(...) AS g(x)) it "
                     "gives one row per element", node, name)
    if isinstance(node, exp.Array):
        raise _error(f"a list value ({node.sql(dialect=dialect)[:40]}); {_NO_LISTS}", node, "list")
    if isinstance(node, (exp.Map, exp.VarMap, exp.Struct)):
        kind = "a struct" if isinstance(node, exp.Struct) else "a map"
        raise _error(f"{kind} value ({node.sql(dialect=dialect)[:40]}); the engine's columns hold no maps or "
                     "structs", node, kind.split()[1])
    if isinstance(node, exp.Func) and (type(node).__name__.startswith(("Array", "List")) or isinstance(
            node, exp.Anonymous) and str(node.this).lower().startswith(_LIST_NAMES)):
        name = _spelled(node, dialect)
        raise _error(f"function {name} works on lists, and {_NO_LISTS}", node, name)
