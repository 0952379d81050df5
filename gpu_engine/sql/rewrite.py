"""Parse SQL text and rewrite it with sqlglot's optimizer into the qualified form the planner reads.

What sqlglot does here: parse (DuckDB dialect by default), qualify every
column with its table alias and name every projection (resolving ``*``, USING,
positional and alias references), prune the columns derived tables and CTEs
do not need (``pushdown_projections``) and fold constants (``simplify``:
``DATE '1996-01-01' + INTERVAL '3' MONTH`` becomes ``DATE '1996-04-01'``).
What it does not do, and :mod:`gpu_engine.sql.planner` does: decorrelate
subqueries into the engine's semi, anti and grouped joins (sqlglot's
``unnest_subqueries`` turns EXISTS with a non-equality correlation, TPC-H Q21,
into ARRAY_AGG and lambdas the engine does not have), order joins and pick
build sides.

Errors: syntax errors, unknown tables and unknown columns become
:class:`~gpu_engine.sql.errors.SqlError` with the line and column in the text
and "did you mean …?" candidates.
"""

from __future__ import annotations

import re
from typing import Mapping

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError, TokenError
from sqlglot.optimizer.pushdown_projections import pushdown_projections
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.simplify import simplify
from sqlglot.schema import MappingSchema

from gpu_engine.plans.sql_aggregates import distinct_pairs_parser, normalize_aggregate_calls
from gpu_engine.plans.sql_connectives import balance_connectives
from gpu_engine.sql.ambiguous_columns import ambiguous_column_error, items_holding
from gpu_engine.sql.columns_expressions import with_columns_expanded
from gpu_engine.sql.connectives import simplify_bounded
from gpu_engine.sql.duplicate_output_names import with_derived_names_unique
from gpu_engine.sql.duckdb_names import (
    SPELLED_KINDS, duckdb_column_name, name_derived_projections, note_current_date_names, note_written_names,
)
from gpu_engine.sql.errors import SqlError, did_you_mean, parse_error_text, position_of
from gpu_engine.sql.file_sources import FILE_TABLE_PREFIX, mentions_files, with_file_tables
from gpu_engine.sql.samples import with_samples_as_random_filters
from gpu_engine.sql.semi_anti_joins import with_semi_anti_joins_as_exists
from gpu_engine.sql.named_windows import with_named_windows_inlined
from gpu_engine.sql.nesting import check_text_nesting, check_tree_nesting
from gpu_engine.sql.pruned_projections import aggregate_projections, check_pruned_projections
from gpu_engine.sql.refusals import HAS_COLLATE, check_star_modifiers, refuse_unsupported
from gpu_engine.sql.set_operations import check_set_operation_widths
from gpu_engine.sql.simplification import simplify_keeping_arithmetic, tests_parenthesized
from gpu_engine.sql.spark_functions import spark_semantics
from gpu_engine.sql.row_comparisons import with_row_comparisons_expanded
from gpu_engine.sql.tree_census import TreeCensus, tree_census
from gpu_engine.sql.lateral_joins import HAS_LATERAL, with_lateral_joins_decorrelated
from gpu_engine.sql.series_sources import (with_series_arguments_held, with_series_arguments_released,
                                           with_series_as_sources)
from gpu_engine.sql.lateral_series import with_lateral_series_joined
from gpu_engine.sql.unnest_selects import with_unnested_selects
from gpu_engine.sql.values_lists import finish_constant_sources, values_statement_as_select, with_constant_sources

__all__ = ["parse_and_qualify", "sqlglot_schema"]


def _sql_type(dtype: pa.DataType) -> str:
    if pa.types.is_integer(dtype):
        return "BIGINT"
    if pa.types.is_floating(dtype):
        return "DOUBLE"
    if pa.types.is_decimal(dtype):
        return f"DECIMAL({dtype.precision}, {dtype.scale})"
    if pa.types.is_date(dtype):
        return "DATE"
    if pa.types.is_timestamp(dtype):
        return "TIMESTAMP"
    if pa.types.is_boolean(dtype):
        return "BOOLEAN"
    return "VARCHAR"


def sqlglot_schema(catalog: Mapping[str, pa.Schema]) -> dict[str, dict[str, str]]:
    """Return the catalog as sqlglot's schema mapping: table -> column -> SQL type name."""
    return {table: {f.name: _sql_type(f.type) for f in schema} for table, schema in catalog.items()}


#: (dialect, the catalog's (table, id(schema)) pairs) -> (the catalog's items, kept alive, and its sqlglot schema).
_QUALIFY_SCHEMAS: dict[tuple, tuple[tuple, MappingSchema]] = {}
_MAX_QUALIFY_SCHEMAS = 64


def qualify_schema(catalog: Mapping[str, pa.Schema], dialect: str) -> MappingSchema:
    """Return sqlglot's schema of ``catalog`` for ``qualify``, made once per catalog and dialect.

    Why: given a mapping, ``qualify`` made a ``MappingSchema`` of every table and column of the catalog
    for each query, normalizing each name again: 2.7 ms of the ~50 ms of CPU that planning a TPC-DS text
    takes (24 tables), paid by every first run. The catalog's schemas are frozen Arrow objects, kept by
    the entry, so their identities name them; sqlglot only reads the schema while qualifying.
    """
    items = tuple(catalog.items())
    key = (dialect, tuple((table, id(schema)) for table, schema in items))
    entry = _QUALIFY_SCHEMAS.get(key)
    if entry is not None:
        return entry[1]
    schema = MappingSchema(sqlglot_schema(catalog), dialect=dialect)
    if len(_QUALIFY_SCHEMAS) >= _MAX_QUALIFY_SCHEMAS:  # temporary tables (shared CTEs) make new catalogs
        _QUALIFY_SCHEMAS.clear()
    _QUALIFY_SCHEMAS[key] = (items, schema)
    return schema


#: Meta key of the parsed tree's :class:`TreeCensus` from :func:`_parse` to :func:`parse_and_qualify` (popped there).
_CENSUS = "gpu_engine.tree_census"


def parse_one_statement(text: str, dialect: str) -> exp.Expression:
    """Parse ``text`` as exactly one SQL statement, its nesting checked first; errors as SqlError with positions."""
    tokens = check_text_nesting(text, dialect)
    try:
        parser = distinct_pairs_parser(sqlglot.Dialect.get_or_raise(dialect))  # corr(DISTINCT y, x)
        from gpu_engine.plans.interval_translation import interval_texts_kept  # (INTERVAL '3 days 04:00:00')

        from gpu_engine.plans.window_tokens import groups_frames_kept  # OVER (GROUPS BETWEEN ...)

        statements = [s for s in parser.parse(groups_frames_kept(interval_texts_kept(tokens)), text) if s is not None]
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        raise SqlError(f"cannot parse SQL: {parse_error_text(error)}", line=first.get("line"),
                       col=first.get("col"), name=first.get("highlight")) from None
    except TokenError as error:
        raise SqlError(f"cannot parse SQL: {error}") from None
    if len(statements) != 1:
        line, col = position_of(statements[1] if len(statements) > 1 else None)
        raise SqlError(f"expected one SQL statement, got {len(statements)}", line=line, col=col)
    return statements[0]


def _parse(text: str, dialect: str, catalog: Mapping[str, pa.Schema] | None = None) -> exp.Expression:
    if not isinstance(text, str) or not text.strip():
        raise SqlError("expected the text of a SELECT query")
    tree = balance_connectives(parse_one_statement(text, dialect))  # before any pass recurses into a long AND/OR chain
    if mentions_files(text):  # FROM 'x.parquet' / read_parquet(...): the Session's table of the files
        tree = with_file_tables(tree, catalog)  # (gpu_engine.sql.file_sources)
    tree = values_statement_as_select(tree)  # a bare VALUES … is a query (gpu_engine.sql.values_lists)
    if not isinstance(tree, exp.Query):
        line, col = position_of(tree)
        kind = str(tree.this).split()[0].upper() if isinstance(tree, exp.Command) else tree.key.upper()
        hint = ("; Session.sql runs CREATE VIEW, CREATE TABLE ... AS and DROP VIEW/TABLE"
                if kind in ("CREATE", "DROP") else "; Session.sql runs SET TimeZone = 'UTC' and RESET TimeZone"
                if kind in ("SET", "RESET") else "")
        raise SqlError(f"only SELECT queries are supported, not {kind}{hint}", line=line, col=col)
    check_tree_nesting(tree)
    # The rare constructs the tree holds, in one walk: the passes below and parse_and_qualify's skip theirs where
    # theirs is absent (gpu_engine.sql.tree_census). None: skip nothing.
    census: TreeCensus | None = tree_census(tree)
    if dialect == "duckdb" and census.holds(exp.TableSample):  # USING SAMPLE / TABLESAMPLE as random() filters
        tree = with_samples_as_random_filters(tree)  # (Spark's n ROWS means other rows)
    if "unnest" in text.lower() or "explode" in text.lower():  # (a walk only where one may be written)
        tree = with_unnested_selects(tree, dialect, catalog or {})  # SELECT unnest(list): a FROM item (unnest_selects)
        census = None  # it writes new FROM items (series, split lists): the census no longer says what is there
    if dialect == "duckdb" and (census is None or census.holds(exp.GenerateSeries)):
        tree = with_lateral_series_joined(tree)  # LEFT JOIN LATERAL generate_series(...) ON true (sql/lateral_series.py)
    if census is None or census.holds(exp.GenerateSeries, exp.Split) or (
            dialect == "spark" and census.holds(exp.Anonymous)):  # (the sample rewrite makes none of these)
        tree = with_series_as_sources(tree, dialect)  # range(...) / generate_series(...) in FROM (sql/series_sources.py)
    nodes = refuse_unsupported(tree, dialect)
    with_named_windows_inlined(nodes, text if dialect == "duckdb" else None)  # OVER w ... WINDOW w AS (...) written out
    with_constant_sources(tree, nodes)  # SELECT without FROM, VALUES lists
    if census is None or census.holds(exp.SetOperation):  # no pass above makes a set operation
        check_set_operation_widths(tree)
    tree.meta[_CENSUS] = census
    return tree


def _check_tables(tree: exp.Expression, catalog: Mapping[str, pa.Schema]) -> None:
    """Refuse a table the catalog lacks (a CTE name is fine), naming close table names."""
    cte_names = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    known = {name.lower() for name in list(catalog) + list(cte_names)}
    for table in tree.find_all(exp.Table):
        name = table.name
        if not name or name.lower() in known:  # DuckDB's names are case-insensitive
            continue
        line, col = position_of(table)
        raise SqlError(f"unknown table {name!r}", line=line, col=col, name=name,
                       candidates=did_you_mean(name, [t for t in catalog if not t.startswith(FILE_TABLE_PREFIX)]
                                               + list(cte_names)))  # (not the tables of files named in SQL text)


_UNRESOLVED = re.compile(r"Column '([^']+)' could not be resolved(?: for table: '([^']*)')?")
_UNKNOWN = re.compile(r"Unknown column: (\S+)")
_OUTPUT_POSITION = re.compile(r"Unknown output column: (\d+)")
_USING = re.compile(r"Cannot automatically join: (\S+)")


def _column_error(error: OptimizeError, tree: exp.Expression, catalog: Mapping[str, pa.Schema]) -> SqlError:
    """Turn qualify's complaint about a column into a SqlError with its position and candidates."""
    message = str(error)
    if match := _OUTPUT_POSITION.search(message):
        number = match.group(1)
        node = next((n for n in tree.find_all(exp.Literal) if n.this == number
                     and isinstance(n.parent, (exp.Ordered, exp.Group))), None)
        clause = "GROUP BY" if node is not None and isinstance(node.parent, exp.Group) else "ORDER BY"
        select = node.find_ancestor(exp.Select) if node is not None else None
        count = f" (the SELECT has {len(select.expressions)})" if select is not None else ""
        line, col = position_of(node)
        return SqlError(f"{clause} {number}: there is no output column {number}{count}", line=line, col=col,
                        name=number)
    if match := _USING.search(message):
        name = match.group(1)
        node = next((i for using in tree.find_all(exp.Join) for i in using.args.get("using") or []
                     if i.name == name), None)
        line, col = position_of(node)
        return SqlError(f"JOIN ... USING ({name}): column {name!r} is not in both tables", line=line, col=col,
                        name=name)
    match = _UNRESOLVED.search(message) or _UNKNOWN.search(message)
    if match is None:
        line, col = position_of(tree)
        return SqlError(f"cannot resolve the query: {message}", line=line, col=col)
    name = match.group(1)
    table_alias = match.group(2) if match.re is _UNRESOLVED else None
    node = next((c for c in tree.find_all(exp.Column) if c.name == name
                 and (not table_alias or c.table == table_alias)), None)
    line, col = position_of(node)
    choices = [column for table in tree.find_all(exp.Table) if table.name in catalog
               for column in _visible_columns(table, catalog[table.name])]
    choices += [e.alias for e in tree.find_all(exp.Alias) if e.alias]
    aliases = {t.alias_or_name for t in tree.find_all(exp.Table)} | {s.alias for s in tree.find_all(exp.Subquery)}
    if table_alias and table_alias not in aliases:
        node = next((c for c in tree.find_all(exp.Column) if c.table == table_alias), node)
        line, col = position_of(node)
        return SqlError(f"unknown table or alias {table_alias!r} in {table_alias}.{name}", line=line, col=col,
                        name=table_alias, candidates=did_you_mean(table_alias, aliases))
    if not table_alias and len(holders := items_holding(
            tree.find_all(exp.Table, exp.Subquery, exp.Unnest, exp.Values, exp.Lateral), catalog, name)) > 1:
        # qualify cannot resolve a bare name several FROM items have: "unknown column 'x'; did you mean x?"
        return ambiguous_column_error(name, holders, node)
    where = f" of {table_alias!r}" if table_alias else ""
    return SqlError(f"unknown column {name!r}{where}", line=line, col=col, name=name,
                    candidates=did_you_mean(name, choices))


def _visible_columns(table: exp.Table, schema: pa.Schema) -> list[str]:
    """Return the names a FROM item's columns go by: an alias's column list renames the first ones (``tb AS t(b,
    u)``: ``b``, ``u``, then the stored names past them), so a suggestion never names a hidden stored name
    (``SELECT a FROM tb AS t(b, u)`` said "did you mean a?")."""
    alias = table.args.get("alias")
    renamed = [column.name for column in alias.columns] if alias is not None else []
    return renamed + list(schema.names[len(renamed):])


def _name_projections(tree: exp.Expression, dialect: str, catalog: Mapping[str, pa.Schema]) -> dict[str, str]:
    """Name the outermost SELECT's unnamed expressions as DuckDB does (``sum(l_quantity)``), not ``_col_5``.

    A bare column keeps its name as the table, derived table or CTE spells it (``Id`` for ``SELECT id``), as
    in DuckDB, although sqlglot folds unquoted names to lower case. A set operation is named by its leftmost
    SELECT (``SELECT a + 1, NULL FROM t EXCEPT ...`` gives ``(a + 1)`` and ``NULL``, as in DuckDB).
    """
    select = tree
    while isinstance(select, (exp.SetOperation, exp.Subquery)):  # (SELECT ... EXCEPT ...) UNION ...: the first
        select = select.this
    spelled: dict[str, str] = {}
    if isinstance(select, exp.Select):
        tables = {t.name.lower() for t in tree.find_all(exp.Table)}
        for table, schema in catalog.items():
            if table.lower() in tables:
                for name in schema.names:
                    spelled.setdefault(name.lower(), name)
        # A column of a derived table or CTE is spelled as the alias that made it (DuckDB's `SELECT *` over
        # `(SELECT ... AS B1_LP)` gives B1_LP); the outermost SELECT's own aliases are taken below, as written.
        for alias in tree.find_all(exp.Alias):
            if alias.parent is not select:
                spelled.setdefault(alias.alias.lower(), alias.alias)
        for expression in list(select.expressions):
            inner = expression
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if isinstance(inner, exp.Column) and inner is not expression:  # DuckDB names (((a))) as a
                expression = expression.replace(inner.copy())
            if isinstance(expression, exp.Alias):
                spelled[expression.alias.lower()] = expression.alias
            if isinstance(expression, exp.Column) and not isinstance(expression.this, exp.Star):
                original = spelled.get(expression.name.lower())
                if original is not None and original != expression.name.lower():
                    expression.replace(exp.alias_(expression.copy(), exp.to_identifier(original, quoted=True)))
                continue
            if not isinstance(expression, (exp.Alias, exp.Column, exp.Star)):
                name = duckdb_column_name(expression) if dialect == "duckdb" else expression.sql(
                    dialect=dialect, normalize_functions="lower").replace("count(*)", "count_star()")
                # exp.Alias, not exp.alias_: that names a Subquery by its own table alias, and sqlglot's ORDER BY
                # 2 then failed on it (an AssertionError: "... is not <class 'Alias'>")
                expression.replace(exp.Alias(this=expression.copy(), alias=exp.to_identifier(name, quoted=True)))
                spelled[name.lower()] = name
    return spelled


def _desugar(tree: exp.Expression) -> exp.Expression:
    """Rewrite what the planner has no node for into what it has, once every ``*`` is expanded.

    * ``GROUP BY ALL`` groups by every SELECT expression without an aggregate that reads a column (a constant
      is no key, so over no rows a query with aggregates still gives its one row, as in DuckDB),
    * ``ORDER BY ALL`` sorts by every output column in order (DuckDB's meaning), of a SELECT or of a set
      operation (``… EXCEPT … ORDER BY ALL``), by the outputs' names.

    Why after qualification: ``SELECT * … ORDER BY ALL`` means every column the star stands for.
    """

    for query in tree.find_all(exp.Select, exp.SetOperation):
        group = query.args.get("group") if isinstance(query, exp.Select) else None
        if group is not None and group.args.get("all"):
            keys = [e.this if isinstance(e, exp.Alias) else e for e in query.expressions  # constants: not keys
                    if not any(isinstance(n, exp.AggFunc) for n in e.walk())
                    and any(isinstance(n, exp.Column) for n in e.walk())]
            query.set("group", exp.Group(expressions=[k.copy() for k in keys]) if keys else None)
        order = query.args.get("order")
        if order is not None and len(order.expressions) == 1 and isinstance(order.expressions[0].this, exp.Var) \
                and order.expressions[0].this.name.upper() == "ALL":
            template = order.expressions[0]
            order.set("expressions", [exp.Ordered(this=exp.column(exp.to_identifier(name, quoted=True)),
                                                  desc=template.args.get("desc"),
                                                  nulls_first=template.args.get("nulls_first"))
                                      for name in query.named_selects])
    return tree


def _ordered_string_agg_window(window: exp.Window) -> exp.Window:
    """Write ``string_agg(x, s ORDER BY y) OVER (PARTITION BY p)`` as ``string_agg(x, s) OVER (PARTITION BY p
    ORDER BY y ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)``: over whole partitions the window's
    order is the order the values are joined in (the Window operator's holistic string_agg), and the frame keeps
    the whole partition. A window with its own ORDER BY and a running frame is refused by name.
    """
    call = window.this
    if not isinstance(call, exp.GroupConcat) or not isinstance(call.this, exp.Order):
        return window
    spec = window.args.get("spec")
    whole = spec is not None and spec.args.get("start") == "UNBOUNDED" and spec.args.get("end") == "UNBOUNDED"
    if window.args.get("order") is not None and not whole:
        line, col = position_of(window)
        raise SqlError("string_agg(x, s ORDER BY y) over a window with its own ORDER BY is a running string_agg, "
                       "which is not supported; over whole partitions (OVER (PARTITION BY ...)) the ORDER BY inside "
                       "orders each partition's values", line=line, col=col, name="string_agg")
    order = call.this
    call.set("this", order.this)
    window.set("order", exp.Order(expressions=list(order.expressions)))
    window.set("spec", exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="UNBOUNDED",
                                      end_side="FOLLOWING"))
    return window


#: Collations: what each folds a string to before it is compared (DuckDB's NOCASE is lower(), NOACCENT strip_accents).
_COLLATIONS = {"nocase": ("lower",), "noaccent": ("strip_accents",), "nocase.noaccent": ("strip_accents", "lower"),
               "noaccent.nocase": ("strip_accents", "lower"), "binary": (), "c": (), "posix": ()}
_COLLATED_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ,
                         exp.In, exp.Between, exp.Like)


def _collation(collate: exp.Collate) -> tuple[str, ...]:
    name = collate.expression.sql(dialect="duckdb").strip('"').lower()
    if name not in _COLLATIONS:
        line, col = position_of(collate)
        raise SqlError(f"unsupported SQL: COLLATE {name}; the collations are NOCASE, NOACCENT, NOCASE.NOACCENT and "
                       "BINARY", line=line, col=col, name=name)
    return _COLLATIONS[name]


def _unparenthesized(value: exp.Expression) -> exp.Expression:
    while isinstance(value, exp.Paren):
        value = value.this
    return value


def _folded(value: exp.Expression, steps: tuple[str, ...]) -> exp.Expression:
    value = _unparenthesized(value)
    value = value.this if isinstance(value, exp.Collate) else value
    for step in steps:
        value = exp.Lower(this=value) if step == "lower" else exp.Anonymous(this=step, expressions=[value])
    return value


def _collated(node: exp.Expression) -> exp.Expression:
    """Write DuckDB's ``COLLATE NOCASE`` / ``NOACCENT`` as the folding it means: in a comparison (``=``, ``<``,
    ``IN``, ``BETWEEN``, ``LIKE``; either side collated) both sides are folded (``lower(s) = lower('B')``) and
    an ORDER BY key sorts by its folded value. Elsewhere it is refused by name: in GROUP BY or an aggregate's
    argument the value a group or an aggregate shows is the original text, which folding would lose; a SELECT
    output's collation would travel to the comparisons and orderings over it, which the engine's columns do
    not carry."""
    if isinstance(node, _COLLATED_COMPARISONS):
        operands = [node.this] + ([node.args["low"], node.args["high"]] if isinstance(node, exp.Between) else
                                  list(node.expressions) if isinstance(node, exp.In) else [node.expression])
        collated = next((_unparenthesized(o) for o in operands if isinstance(_unparenthesized(o), exp.Collate)),
                        None)
        if collated is None or (isinstance(node, exp.In) and node.args.get("query") is not None):
            return node
        steps = _collation(collated)
        if isinstance(node, exp.Like):  # the pattern stays a constant: LIKE ... COLLATE NOCASE is ILIKE
            if "strip_accents" in steps:
                line, col = position_of(collated)
                raise SqlError("unsupported SQL: LIKE with COLLATE NOACCENT; compare strip_accents(x) LIKE the "
                               "pattern", line=line, col=col, name="COLLATE")
            others = {key: value for key, value in node.args.items() if key not in ("this", "expression")}
            plain = [_folded(o, ()) for o in (node.this, node.expression)]  # NOT LIKE's negate flag kept
            return (exp.ILike if steps else exp.Like)(this=plain[0], expression=plain[1], **others)
        node.set("this", _folded(node.this, steps))
        if isinstance(node, exp.Between):
            node.set("low", _folded(node.args["low"], steps))
            node.set("high", _folded(node.args["high"], steps))
        elif isinstance(node, exp.In):
            node.set("expressions", [_folded(e, steps) for e in node.expressions])
        else:
            node.set("expression", _folded(node.expression, steps))
        return node
    if isinstance(node, exp.Ordered) and isinstance(_unparenthesized(node.this), exp.Collate):
        node.set("this", _folded(node.this, _collation(_unparenthesized(node.this))))
        return node
    if isinstance(node, exp.Collate):
        _collation(node)
        line, col = position_of(node)
        raise SqlError("unsupported SQL: COLLATE here (a derived table's output, GROUP BY, DISTINCT, an aggregate or "
                       "a function: the collation would travel with the value); COLLATE NOCASE is supported in "
                       "comparisons (=, <, IN, BETWEEN, LIKE), ORDER BY keys and the outer query's outputs; "
                       "lower(x) folds case anywhere", line=line, col=col, name="COLLATE")
    return node


def _with_collated_outputs(tree: exp.Expression) -> exp.Expression:
    """Give the outermost SELECT's collated outputs (``SELECT s COLLATE NOCASE AS z FROM t``) their plain value, in
    place, the ORDER BY keys naming them (``z``, the ordinal, or the column collated) sorted by the collation.

    Why only there: a result column's value is the text itself (DuckDB shows ``'Ab'``, not ``'ab'``); what the
    collation changes is how the value compares, which matters only to the ORDER BY of the same SELECT. Anywhere
    else (a derived table's output, GROUP BY, DISTINCT) the collation would travel with the value into comparisons
    and groups; those stay refused by :func:`_collated`.
    """
    if not isinstance(tree, exp.Select) or tree.args.get("group") or tree.args.get("distinct") \
            or tree.args.get("having") or any(p.find(exp.AggFunc, exp.Window) for p in tree.expressions):
        return tree
    order = tree.args.get("order")
    for position, projection in enumerate(tree.expressions, 1):
        value = projection.this if isinstance(projection, exp.Alias) else projection
        collate = _unparenthesized(value)
        if not isinstance(collate, exp.Collate):
            continue
        _collation(collate)  # an unknown collation is refused by name
        operand = _unparenthesized(collate.this)
        for ordered in order.expressions if order is not None else []:
            key = _unparenthesized(ordered.this)
            named = isinstance(key, exp.Column) and not key.table and key.name == projection.alias_or_name
            numbered = isinstance(key, exp.Literal) and not key.is_string and key.this == str(position)
            if named or numbered or key == operand:
                ordered.set("this", collate.copy())
        if isinstance(projection, exp.Alias):
            projection.set("this", collate.this.copy())
        else:
            projection.replace(exp.alias_(collate.this.copy(), exp.to_identifier(
                collate.sql(dialect="duckdb"), quoted=True)))
    return tree


def _filter_as_case(node: exp.Expression) -> exp.Expression:
    """Write ``agg(x) FILTER (WHERE c)`` as ``agg(CASE WHEN c THEN x END)`` (``count(*)``: ``count(CASE WHEN c
    THEN 1 END)``): aggregates skip NULLs, so the rows failing ``c`` count for nothing, as FILTER says.

    Why after simplification: a constant condition (``FILTER (WHERE FALSE)``, ``1 = 0``) would fold the CASE to a
    bare NULL, and the aggregate's argument would lose its type (DuckDB keeps it: ``median(x) FILTER (WHERE
    FALSE)`` is a NULL of ``median(x)``'s type).
    """
    if isinstance(node, exp.Window):  # in this walk, not one of its own
        return _ordered_string_agg_window(node)
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc):
        aggregate, condition = node.this.copy(), node.expression.this.copy()
        argument = aggregate.this
        if isinstance(argument, exp.Star):
            aggregate.set("this", exp.Case(ifs=[exp.If(this=condition, true=exp.Literal.number(1))]))
        elif isinstance(argument, exp.Distinct):
            argument.set("expressions", [exp.Case(ifs=[exp.If(this=condition, true=e)])
                                         for e in argument.expressions])
        elif argument is not None:
            aggregate.set("this", exp.Case(ifs=[exp.If(this=condition, true=argument)]))
        return aggregate
    return node


def _is_null(value: exp.Expression, negated: bool) -> exp.Expression:
    test = exp.Is(this=value, expression=exp.Null())
    return exp.Not(this=test) if negated else test


def _conditional_as_case(node: exp.Expression) -> exp.Expression:
    """Write COALESCE, NULLIF, ``IS [NOT] DISTINCT FROM``, ``IS [NOT] TRUE | FALSE``, DuckDB's ``if``/``iif`` and
    Spark's NULL-safe division as the CASE the expression IR has (qualify also makes COALESCE for JOIN USING)."""
    if isinstance(node, exp.Coalesce):  # the arguments are lowered first: transform does not visit the CASE built
        values = [value.copy().transform(_conditional_as_case) for value in [node.this] + list(node.expressions)]
        # a bare NULL before the last argument is never the answer: left out, it types no branch (coalesce(i,
        # NULL, '3') was a CASE of i beside a text-typed CASE of NULL and '3', refused; DuckDB answers an INTEGER)
        values = [value for value in values[:-1] if not isinstance(value, exp.Null)] + values[-1:]
        if len(values) == 1:
            return values[0]
        # one CASE, not one per argument: its branches are typed together, left to right, as DuckDB types
        # COALESCE's arguments (coalesce(1, 2, smallint_col) is an INTEGER; nested, the SMALLINT's CASE won)
        return exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null())),
                                    true=value.copy()) for value in values[:-1]], default=values[-1])
    if isinstance(node, exp.Nullif):
        left, right = (side.copy().transform(_conditional_as_case) for side in (node.this, node.expression))
        return exp.Case(ifs=[exp.If(this=exp.EQ(this=left.copy(), expression=right), true=exp.Null())],
                        default=left)
    if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):  # a IS [NOT] DISTINCT FROM b: never NULL
        same = isinstance(node, exp.NullSafeEQ)
        left, right = (side.copy().transform(_conditional_as_case) for side in (node.this, node.expression))
        return exp.Paren(this=exp.Case(ifs=[
            exp.If(this=exp.Is(this=left.copy(), expression=exp.Null()),
                   true=_is_null(right.copy(), negated=not same)),
            exp.If(this=exp.Is(this=right.copy(), expression=exp.Null()), true=exp.Boolean(this=not same))],
            default=(exp.EQ if same else exp.NEQ)(this=left, expression=right)))
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):  # x IS TRUE | FALSE: never NULL
        value = node.this.copy().transform(_conditional_as_case)
        truth = value.copy() if node.expression.this else exp.Not(this=exp.Paren(this=value.copy()))
        return exp.Paren(this=exp.Case(ifs=[exp.If(this=exp.Is(this=value, expression=exp.Null()),
                                                   true=exp.Boolean(this=False))], default=truth))
    if isinstance(node, exp.If) and not isinstance(node.parent, exp.Case):  # DuckDB's if(c, a, b) / iif(c, a, b)
        condition, true = (side.copy().transform(_conditional_as_case) for side in (node.this, node.args["true"]))
        false = node.args.get("false")
        return exp.Paren(this=exp.Case(ifs=[exp.If(this=condition, true=true)],
                                       default=None if false is None else false.copy().transform(_conditional_as_case)))
    if isinstance(node, exp.Div) and node.args.get("safe"):  # Spark's a / b: NULL for a zero divisor
        divisor = node.expression.copy()
        guarded = exp.Case(ifs=[exp.If(this=exp.EQ(this=divisor.copy(), expression=exp.Literal.number(0)),
                                       true=exp.Null())], default=divisor)
        return exp.Div(this=node.this.copy(), expression=guarded)
    return node


def parse_and_qualify(text: str, catalog: Mapping[str, pa.Schema], dialect: str = "duckdb") -> exp.Query:
    """Return the query in ``text`` parsed, qualified against ``catalog``, pruned and simplified.

    Raises
    ------
    SqlError
        For a syntax error, an unknown table or column (with line, column
        and candidates), or a statement other than a query.
    """
    tree = _parse(text, dialect, catalog)
    # What the parsed tree holds (None: not known, skip nothing). The passes of _parse after its census make no
    # string_agg, current_date, uuid, SEMI/ANTI join, COLUMNS(...), * EXCLUDE/REPLACE, set operation or
    # GROUP/ORDER BY ALL; the sample rewrite makes random() calls (so a sample counts as one below).
    census = tree.meta.pop(_CENSUS, None)
    if census is None or census.holds(*SPELLED_KINDS):
        note_written_names(tree, text)  # string_agg / group_concat / listagg (var_samp / variance...): one node to
        # sqlglot, named as written
    if census is None or census.holds(exp.CurrentDate):
        note_current_date_names(tree, text)  # current_date or today(): one node to sqlglot, named as written
    if census is None or census.holds(exp.Rand, exp.Uuid, exp.TableSample):
        for call, node in enumerate(tree.find_all(exp.Rand, exp.Uuid)):  # random(), uuid(): each call its own values
            node.meta["call"] = call
    _check_tables(tree, catalog)
    if census is None or census.semi_anti_joins:  # DuckDB's a SEMI|ANTI JOIN b ON c: [NOT] EXISTS, before * expands
        tree = with_semi_anti_joins_as_exists(tree)
    if census is None or census.holds(exp.Columns):  # DuckDB's COLUMNS('re|gex')
        tree = with_columns_expanded(tree, qualify_schema(catalog, dialect), dialect)
    if dialect == "duckdb":  # SELECT * FROM (SELECT count(*) ...): count_star(), not _col_0
        name_derived_projections(tree)
    tree = with_derived_names_unique(tree, qualify_schema(catalog, dialect), dialect)  # s.a, s.a_1 (DuckDB)
    if census is None or census.star_modifiers:  # (COLUMNS(...) and the renaming passes above make none)
        check_star_modifiers(tree, catalog)
    spelled = _name_projections(tree, dialect, catalog)
    finish_constant_sources(tree)  # SELECT without FROM reads one row (named first: "(SELECT 1)" as written)
    if dialect == "spark":  # Spark's names with Spark's meaning (dayofweek from 1, date_add a DATE...)
        bracket = tree.find(exp.Bracket)
        if bracket is not None:  # DuckDB's s[i] on strings (plans/scalar_translation.py) is no Spark form
            line, col = position_of(bracket)
            raise SqlError("unsupported SQL: [...] indexes arrays and maps in Spark, and the engine's columns hold "
                           "no lists; substring(s, pos, len) takes a string's characters", line=line, col=col)
        tree = spark_semantics(tree)
    # the tree parsed for this query: rewritten in place
    tree = normalize_aggregate_calls(tree, copy=False, dialect=dialect)
    tree = with_series_arguments_held(tree)  # FROM t, generate_series(1, t.n): its columns qualified, kept read
    try:
        tree = qualify(tree, schema=qualify_schema(catalog, dialect), dialect=dialect, quote_identifiers=False,
                       validate_qualify_columns=True, identify=False)
    except OptimizeError as error:
        # The tree as it was before qualify changed it, made again from the text (a copy of every query's
        # tree, kept only for this message, cost a tenth of planning a 2000-term predicate).
        original = _parse(text, dialect, catalog)
        _name_projections(original, dialect, catalog)
        normalized = normalize_aggregate_calls(original, copy=False, dialect=dialect)
        raise _column_error(error, normalized, catalog) from None
    if tree.meta.get(HAS_LATERAL):  # LATERAL (subquery) joins as ordinary joins (gpu_engine/sql/lateral_joins.py)
        tree = with_lateral_joins_decorrelated(tree)
    if census is None or census.holds(exp.Tuple, exp.Anonymous):  # (a, b) = (c, d): per column (row_comparisons)
        tree = with_row_comparisons_expanded(tree)
    if census is None or census.holds(exp.SetOperation) or tree.meta.get(HAS_LATERAL):
        check_set_operation_widths(tree)  # again with every * expanded (qualify makes no set operation)
    if census is None or census.all_keys:  # GROUP BY ALL / ORDER BY ALL, which only the parser makes
        tree = _desugar(tree)
    aggregates = aggregate_projections(tree)
    tree = pushdown_projections(tree)
    tree = with_series_arguments_released(tree)
    check_pruned_projections(aggregates)  # a pruned projection is checked as the planner checks a kept one
    if dialect == "duckdb":  # DuckDB types constant arithmetic as any other; Spark's reading keeps sqlglot's folding
        tree = simplify_keeping_arithmetic(tree, lambda t: simplify_bounded(t, dialect))
    else:
        tree = simplify_bounded(tests_parenthesized(tree), dialect)
    if tree.meta.get(HAS_COLLATE):  # COLLATE NOCASE ...: the folding it means (a walk only where one is written)
        tree = _with_collated_outputs(tree)
        tree = tree.transform(_collated, copy=False)
    tree = tree.transform(_filter_as_case, copy=False)
    tree = tree.transform(_conditional_as_case, copy=False)  # in place: copying a 2000-term WHERE took 0.1 s
    # sqlglot folds every DuckDB identifier to lower case; the planner names the result columns as written.
    tree.meta["output_names"] = spelled
    return tree
