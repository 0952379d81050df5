"""Refuse SQL the engine does not plan, right after parsing, naming the construct, its position and what to do.

Why a pass of its own: sqlglot parses much more than the planner plans, and a
construct that slipped through failed later with a message about something
else (``GROUP BY ROLLUP (a)`` as "unexpected 'AS'", a table function as
sqlglot's "projection_reachability requires star-free selections"). Each
refusal here is a :class:`~gpu_engine.sql.errors.SqlError` with the line and
column of the construct, and the alternative where there is one. Names are
checked here too: a table qualified by a catalog or schema other than the
session's own (``main``/``memory`` in DuckDB, ``default``/``spark_catalog`` in
Spark) and a zero-length quoted name, which DuckDB refuses.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.aggregate_refusals import refuse_unknown_aggregate
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.lateral_joins import HAS_LATERAL
from gpu_engine.sql.list_refusals import refuse_list_construct
from gpu_engine.sql.untyped_null_arguments import refuse_untyped_null_argument

__all__ = ["refuse_unsupported", "check_star_modifiers", "KNOWN_SCHEMAS", "KNOWN_CATALOGS", "HAS_COLLATE"]

#: Schema and catalog names a table may be qualified with, per dialect: those naming the session's own tables.
KNOWN_SCHEMAS = {"duckdb": ("main",), "spark": ("default",)}
KNOWN_CATALOGS = {"duckdb": ("memory",), "spark": ("spark_catalog",)}

#: The tree's meta key set where the walk met a COLLATE (so other queries skip the rewrite's walk for it).
HAS_COLLATE = "refusals.collate"
_REGISTER_HINT = "register the data with Session.register(name, path_or_table) and query it by name"


def _error(message: str, node: exp.Expression, name: str | None = None) -> SqlError:
    line, col = position_of(node)
    return SqlError(message, line=line, col=col, name=name)


def _sql(node: exp.Expression) -> str:
    text = node.sql(dialect="duckdb")
    return text if len(text) <= 60 else text[:57] + "..."


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this)
    return node.sql(dialect="duckdb").split("(", 1)[0].lower()  # GenerateSeries is range(...) or generate_series


def _check_with(with_: exp.With) -> None:
    """Refuse a WITH naming two CTEs alike (DuckDB's "Duplicate CTE name") and a recursive CTE: under WITH
    RECURSIVE a UNION whose part reads the CTE itself; any other CTE there is a plain one, as in DuckDB (its body
    reading its own name reads the table of that name: :meth:`~gpu_engine.sql.planner.QueryPlanner._with_ctes`)."""
    defined: set[str] = set()
    for cte in with_.expressions:
        name = cte.alias_or_name
        if name.lower() in defined:
            raise _error(f"WITH defines the CTE {name!r} twice (DuckDB: Duplicate CTE name); give each CTE of one "
                         "WITH its own name", cte, name)
        defined.add(name.lower())
        if with_.args.get("recursive") and isinstance(cte.this, exp.Union) and any(
                table.name.lower() == name.lower() and not table.args.get("db") for table in cte.this.find_all(exp.Table)):
            raise _error(f"unsupported SQL: WITH RECURSIVE: the recursive CTE {name!r} (a UNION reading itself); "
                         "write its levels out as a UNION ALL of joins, or compute them outside the query", cte,
                         "WITH RECURSIVE")


def refuse_unsupported(tree: exp.Expression, dialect: str) -> list[exp.Expression]:
    """Raise a :class:`SqlError` for the first construct of ``tree`` the planner does not plan.

    Returns the SELECT, VALUES and subquery nodes met on the way, for
    :func:`~gpu_engine.sql.values_lists.with_constant_sources` (which would otherwise walk the tree again).

    Refused: substring without a start, table functions (``read_csv(…)``, ``unnest(…)``; ``range``/``generate_series``
    are sources by now: :mod:`~gpu_engine.sql.series_sources`), LATERAL but over a subquery (those are noted in the
    tree's meta for :mod:`~gpu_engine.sql.lateral_joins`, as COLLATE for the rewrite's folding), PIVOT/UNPIVOT,
    recursive CTEs,
    TABLESAMPLE, FILTER on ``first``/``last`` with ORDER BY and their ORDER BY over a window, catalogs and schemas
    other than the session's, zero-length quoted names, date functions of an untyped NULL and aggregates inside TRY
    (DuckDB's binder errors).
    """
    met = []
    for node in tree.walk():
        if isinstance(node, (exp.Select, exp.Values, exp.Subquery)):
            met.append(node)
        if isinstance(node, exp.Table):
            _check_table(node, dialect)
        elif isinstance(node, exp.Unnest) and isinstance(node.parent, (exp.From, exp.Join)):
            raise _error(f"unsupported SQL: UNNEST in FROM ({_sql(node)}); {_REGISTER_HINT}", node, "UNNEST")
        elif isinstance(node, exp.Substring) and node.args.get("start") is None:
            raise _error(f"substring(...) needs a start position: substring(string, start[, length]), got "
                         f"{_sql(node)}", node, "substring")
        elif isinstance(node, exp.Lateral) and isinstance(node.this, exp.Subquery) and not node.args.get("view") \
                and dialect == "duckdb" and isinstance(node.parent, exp.Join):
            tree.meta[HAS_LATERAL] = True  # decorrelated once qualified (gpu_engine.sql.lateral_joins)
        elif isinstance(node, exp.Collate):  # folded once qualified (gpu_engine.sql.rewrite._collated)
            tree.meta[HAS_COLLATE] = True
            if isinstance(node.expression, exp.Column):  # COLLATE nocase.noaccent: a name, not a column
                node.set("expression", exp.Var(this=node.expression.sql(dialect="duckdb")))
        elif isinstance(node, exp.Lateral):
            raise _error(f"unsupported SQL: LATERAL ({_sql(node)}); write the subquery as a join or a correlated "
                         "subquery", node, "LATERAL")
        elif isinstance(node, exp.Try) and node.this.find(exp.AggFunc) is not None:  # DuckDB's binder refuses it
            raise _error(f"aggregates are not allowed inside the TRY expression ({_sql(node)}); write TRY inside "
                         "the aggregate: sum(TRY(x))", node, "TRY")
        elif isinstance(node, exp.Pivot):
            what = "UNPIVOT" if node.args.get("unpivot") else "PIVOT"
            raise _error(f"unsupported SQL: {what}; write it with GROUP BY and CASE (or UNION ALL)", node, what)
        elif isinstance(node, exp.With):
            _check_with(node)
        elif isinstance(node, exp.TableSample):
            raise _error("unsupported SQL: TABLESAMPLE with a seed, a method and a size, or n ROWS over a join; "
                         "USING SAMPLE p% (or TABLESAMPLE p%) and n ROWS of one table are supported "
                         "(gpu_engine/sql/samples.py)", node, "TABLESAMPLE")
        elif isinstance(node, exp.Group) and not node.args.get("all") and not any(node.iter_expressions()):
            raise _error("GROUP BY needs at least one expression (or ALL)", node.parent or node, "GROUP BY")
        elif isinstance(node, exp.Window) and isinstance(node.this, (exp.First, exp.Last)) \
                and isinstance(node.this.this, exp.Order):
            name = node.this.sql_name().lower()
            raise _error(f"unsupported SQL: ORDER BY inside {name}(...) over a window; order the window instead "
                         f"({name}_value(x) OVER (... ORDER BY y ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED "
                         "FOLLOWING))", node, name)
        elif isinstance(node, exp.Identifier) and node.quoted and node.this == "":
            raise _error('zero-length quoted name ""; a name needs at least one character', node.parent or node,
                         '""')
        else:
            refuse_list_construct(node, dialect)  # lists, maps and structs (gpu_engine.sql.list_refusals)
            refuse_unknown_aggregate(node)  # fsum, geomean, ... (gpu_engine.sql.aggregate_refusals)
            refuse_untyped_null_argument(node, dialect)  # year(NULL) (gpu_engine.sql.untyped_null_arguments)
    return met


def _check_table(table: exp.Table, dialect: str) -> None:
    """Refuse a table function in FROM, and a catalog or schema that is not the session's own."""
    if isinstance(table.this, exp.Func):
        name = _function_name(table.this)
        raise _error(f"table functions are not supported ({name}(...) in FROM); {_REGISTER_HINT}", table, name)
    catalog, schema = table.catalog, table.db
    if catalog and catalog.lower() not in KNOWN_CATALOGS.get(dialect, ()):
        raise _error(f"unknown catalog {catalog!r} in {_sql(table)}; tables are registered without a catalog "
                     f"(or in {' or '.join(KNOWN_CATALOGS.get(dialect, ()))})", table, catalog)
    known_schemas = KNOWN_SCHEMAS.get(dialect, ()) + (() if catalog else KNOWN_CATALOGS.get(dialect, ()))
    if schema and schema.lower() not in known_schemas:  # DuckDB reads "memory.t" as the catalog's default schema
        raise _error(f"unknown schema {schema!r} in {_sql(table)}; tables are registered without a schema "
                     f"(or in {' or '.join(KNOWN_SCHEMAS.get(dialect, ()))})", table, schema)


def check_star_modifiers(tree: exp.Expression, catalog) -> None:
    """Refuse ``* EXCLUDE (c)`` / ``* REPLACE (e AS c)`` naming a column no table of its FROM has, as DuckDB does.

    Checked where every FROM and JOIN item of the SELECT is a registered table (sqlglot's expansion ignores an
    absent name silently); over derived tables the names are left to the expansion.
    """
    names = {table.lower(): schema.names for table, schema in catalog.items()}
    for star in tree.find_all(exp.Star):
        modifiers = [(c, "EXCLUDE") for c in star.args.get("except_") or []]
        modifiers += [(r, "REPLACE") for r in star.args.get("replace") or []]
        select = star.find_ancestor(exp.Select)
        if not modifiers or select is None:
            continue
        sources = [select.args["from_"].this] if select.args.get("from_") else []
        sources += [join.this for join in select.args.get("joins") or []]
        if not sources or not all(isinstance(s, exp.Table) and s.name.lower() in names for s in sources):
            continue
        available = {n.lower() for s in sources for n in names[s.name.lower()]}
        for modifier, clause in modifiers:
            name = modifier.alias if isinstance(modifier, exp.Alias) else modifier.name
            if name.lower() not in available:
                line, col = position_of(modifier)
                raise SqlError(f"column {name!r} in the {clause} list is not a column of "
                               f"{', '.join(s.name for s in sources)}", line=line, col=col, name=name)
