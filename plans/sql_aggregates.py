"""Name the aggregate functions SQL spells: which sqlglot nodes are aggregates, and which engine function each is.

Why one table: the SQL planner finds the aggregate calls of a query (to plan
them and refuse the rest), the PlanBuilder translates each call's text, and
both must agree on every spelling (``stddev`` is ``stddev_samp``, ``min_by``
is ``arg_min``, ``first`` and ``arbitrary`` are ``any_value``). sqlglot parses
some names into no aggregate node at all (``arbitrary``, ``product``: anonymous
functions): :func:`normalize_aggregate_calls` gives them one (``arbitrary`` is
DuckDB's ``first``, ``product`` an anonymous aggregate), so every later pass
sees an aggregate. The rules for types and intermediate
columns are in :mod:`gpu_engine.plans.aggregates`.
"""

from __future__ import annotations

import threading

from sqlglot import exp

from gpu_engine.plans.aggregates import HOLISTIC_FUNCTIONS, TWO_ARGUMENT_FUNCTIONS

__all__ = ["SQL_AGGREGATES", "aggregate_function_name", "takes_two_arguments", "allowed_argument", "aggregate_arguments",
           "normalize_aggregate_calls", "unsupported_aggregate_text", "SUPPORTED_AGGREGATES", "takes_order",
           "aggregate_parameter", "aggregate_parameter_key", "distinct_pairs_parser"]


#: sqlglot node -> the engine's function (see :data:`gpu_engine.plans.expressions.AGGREGATE_FUNCTIONS`).
_BY_NODE: dict[type, str] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp", exp.VariancePop: "var_pop",
    exp.CovarSamp: "covar_samp", exp.CovarPop: "covar_pop", exp.Corr: "corr",
    exp.RegrSlope: "regr_slope", exp.RegrAvgx: "regr_avgx", exp.RegrAvgy: "regr_avgy",
    exp.RegrSxx: "regr_sxx", exp.RegrSyy: "regr_syy", exp.RegrSxy: "regr_sxy",
    exp.RegrIntercept: "regr_intercept", exp.RegrR2: "regr_r2", exp.RegrCount: "regr_count",
    exp.LogicalAnd: "bool_and", exp.LogicalOr: "bool_or", exp.CountIf: "count_if",
    exp.AnyValue: "any_value", exp.First: "any_value",
    exp.BitwiseAndAgg: "bit_and", exp.BitwiseOrAgg: "bit_or", exp.BitwiseXorAgg: "bit_xor",
    exp.ArgMin: "arg_min", exp.ArgMax: "arg_max", exp.AnonymousAggFunc: "",
    exp.Last: "any_value",  # first/last without ORDER BY: any value of the group (DuckDB's depend on row order)
    exp.Median: "median", exp.PercentileCont: "quantile_cont", exp.PercentileDisc: "quantile_disc",
    exp.Quantile: "quantile_disc", exp.Mode: "mode", exp.GroupConcat: "string_agg",
    exp.ApproxQuantile: "approx_quantile", exp.ApproxDistinct: "approx_count_distinct",
}
#: Parser names of the two-argument aggregates -> their nodes (``f(DISTINCT x, y)``: :func:`distinct_pairs_parser`).
_BY_NODE_NAMES: dict[str, type] = {
    node.sql_names()[0].upper() if hasattr(node, "sql_names") else node.__name__.upper(): node
    for node, function in _BY_NODE.items()
    if function in ("covar_samp", "covar_pop", "corr", "regr_slope", "regr_avgx", "regr_avgy", "regr_sxx",
                    "regr_syy", "regr_sxy", "regr_intercept", "regr_r2", "regr_count")}
#: The node argument holding a holistic aggregate's constant (a quantile's fraction, string_agg's separator).
_PARAMETER_ARGUMENT = {exp.PercentileCont: "expression", exp.PercentileDisc: "expression", exp.Quantile: "quantile",
                       exp.ApproxQuantile: "quantile", exp.GroupConcat: "separator"}
#: Anonymous functions (as sqlglot parses them) that are aggregates: the node of the same function.
_ANONYMOUS: dict[str, type] = {"arbitrary": exp.First, "product": exp.AnonymousAggFunc,
                               "every": exp.LogicalAnd, "some": exp.LogicalOr,  # (Spark's bool_and/bool_or)
                               "mean": exp.Avg}  # (DuckDB's alias of avg)
#: Anonymous aggregates (:class:`sqlglot.exp.AnonymousAggFunc`) by name -> the engine's function.
_ANONYMOUS_AGGREGATES = {"product": "product"}

#: The sqlglot nodes the planner plans as aggregates.
SQL_AGGREGATES: tuple[type, ...] = tuple(_BY_NODE)
#: The SQL names of the aggregates, for messages.
SUPPORTED_AGGREGATES = ("count, sum, avg, min, max, stddev, stddev_samp, stddev_pop, variance, var_samp, var_pop, "
                        "covar_samp, covar_pop, corr, regr_slope, regr_avgx, regr_avgy, regr_sxx, regr_syy, regr_sxy, "
                        "regr_intercept, regr_r2, regr_count, "
                        "bool_and, bool_or, count_if, any_value, first, arbitrary, bit_and, bit_or, bit_xor, "
                        "arg_min, arg_max, min_by, max_by, product, median, quantile_cont, quantile_disc, quantile, "
                        "percentile_cont, percentile_disc (WITHIN GROUP), mode, string_agg, listagg, group_concat, "
                        "approx_count_distinct, approx_quantile, last, mean, sem")


def aggregate_function_name(call: exp.Expression) -> str | None:
    """Return the engine's function for an aggregate node (None when it is no aggregate the engine computes).

    ``first(x ORDER BY y)``/``last(x ORDER BY y)`` are ``first``/``last``; without ORDER BY either is any value.
    """
    if isinstance(call, (exp.First, exp.Last)) and isinstance(call.this, exp.Order):
        return "first" if isinstance(call, exp.First) else "last"
    if isinstance(call, (exp.Anonymous, exp.AnonymousAggFunc)):
        return _ANONYMOUS_AGGREGATES.get(str(call.this).lower()) or (
            _BY_NODE.get(_ANONYMOUS.get(str(call.this).lower())) if isinstance(call, exp.Anonymous) else None)
    return _BY_NODE.get(type(call))


def aggregate_arguments(call: exp.Expression) -> list[exp.Expression]:
    """Return an aggregate call's arguments, in order (``this``, then ``expression`` or ``expressions``)."""
    named = isinstance(call, (exp.Anonymous, exp.AnonymousAggFunc))  # ``this`` is the name
    arguments = [] if named or call.this is None else [call.this]
    if call.args.get("expression") is not None and _PARAMETER_ARGUMENT.get(type(call)) != "expression":
        arguments.append(call.args["expression"])
    arguments.extend(call.args.get("expressions") or [])
    return arguments


def unsupported_aggregate_text(call: exp.Expression, quoted: bool = False) -> str:
    """Return the message refusing an aggregate the engine does not compute, naming it (``quoted``: as a literal)."""
    if isinstance(call, exp.Anonymous):
        spelled = str(call.this)
    else:  # DuckDB's spelling, and sqlglot's name of the function where it differs (a user wrote one of them:
        # percentile_cont is rendered quantile_cont, string_agg listagg)
        spelled = call.sql(dialect="duckdb").split("(", 1)[0].lower()
        canonical = call.sql_name().lower() if isinstance(call, exp.Func) else spelled
        if canonical != spelled:
            spelled = f"{spelled} ({canonical})"
    named = repr(spelled) if quoted else spelled
    if spelled.lower() in HOLISTIC_FUNCTIONS or call.sql_name().lower() in HOLISTIC_FUNCTIONS:
        return (f"aggregate function {named} (it returns a list, which the engine's columns do not hold; "
                f"supported: {SUPPORTED_AGGREGATES})")
    return f"aggregate function {named} (supported: {SUPPORTED_AGGREGATES})"


def _distinct_pair(node_type: type, plain):
    """Return a parser builder for ``node_type`` that also reads ``f(DISTINCT x, y)`` (sqlglot sees one argument)."""

    def build(args, *rest, **options):
        if len(args) == 1 and isinstance(args[0], exp.Distinct) and len(args[0].expressions) == 2:
            first, second = args[0].expressions
            return node_type(this=exp.Distinct(expressions=[first]), expression=second)
        return plain(args, *rest, **options)

    build.reads_distinct_pairs = True
    return build


def distinct_pairs_parser(dialect):
    """Return a new parser of ``dialect`` (a sqlglot Dialect) whose two-argument aggregates also read
    ``f(DISTINCT x, y)``.

    Why: sqlglot parses ``corr(DISTINCT y, x)`` as ``corr`` of one argument, ``DISTINCT (y, x)``, and refuses
    it ("needs a right-hand operand") or keeps the pair in one argument; the form ``arg_min(DISTINCT x, y)``
    parses into, DISTINCT on the first argument and the second beside it, is what the planner reads for
    every two-argument aggregate (DuckDB's meaning: over the distinct pairs).

    Why the builders go into the parser class's own table, once (not onto the parser object, nor into a
    subclass): sqlglot's compiled build (``sqlglotc``, a third less CPU to plan a new text, issue 29) allows
    neither an attribute set on a parser object nor a Python subclass of its parser. Each new builder calls
    sqlglot's for every other argument list, so a text without that form parses as before.
    """
    parser_class = dialect.parser_class
    functions = parser_class.FUNCTIONS
    with _INSTALLING:
        for name, node_type in _BY_NODE_NAMES.items():
            plain = functions.get(name)
            if plain is not None and not getattr(plain, "reads_distinct_pairs", False):
                functions[name] = _distinct_pair(node_type, plain)
    return dialect.parser()


#: Held while builders go into a parser class's table (Sessions plan on several threads).
_INSTALLING = threading.Lock()


def takes_two_arguments(call: exp.Expression) -> bool:
    """Return True for an aggregate node whose function takes two arguments (``corr(x, y)``)."""
    return aggregate_function_name(call) in TWO_ARGUMENT_FUNCTIONS


def allowed_argument(call: exp.Expression, key: str) -> bool:
    """Return True when the node argument ``key`` of an aggregate call is one of its arguments, not an
    ignored clause: ``this``, the second argument of a two-argument function, an anonymous aggregate's list."""
    if key == "this":
        return True
    if key == "expression" and takes_two_arguments(call):
        return True
    if key == _PARAMETER_ARGUMENT.get(type(call)):
        return True
    return key == "expressions" and isinstance(call, exp.AnonymousAggFunc) and aggregate_function_name(call) is not None


def takes_order(call: exp.Expression) -> bool:
    """Return True for an aggregate node that takes ORDER BY inside its call (``string_agg(x, ',' ORDER BY y)``,
    ``first(x ORDER BY y)``)."""
    return isinstance(call, (exp.GroupConcat, exp.First, exp.Last))


def aggregate_parameter_key(call: exp.Expression) -> str | None:
    """Return the node argument holding a holistic aggregate's constant, None for the others."""
    return _PARAMETER_ARGUMENT.get(type(call))


def aggregate_parameter(call: exp.Expression) -> exp.Expression | None:
    """Return a holistic aggregate's constant argument node (fraction or separator), None when it has none."""
    key = _PARAMETER_ARGUMENT.get(type(call))
    return None if key is None else call.args.get(key)


def _within_group(node: exp.WithinGroup) -> exp.Expression:
    """Return ``percentile_cont(f) WITHIN GROUP (ORDER BY x [DESC])`` as ``quantile_cont(x, f)`` (``-f``: DESC,
    DuckDB's quantile counted from the greatest value), ``mode() WITHIN GROUP (ORDER BY x)`` as ``mode(x)``;
    other forms stay (the planner refuses them by name)."""
    function, order = node.this, node.expression
    keys = order.expressions if isinstance(order, exp.Order) else []
    if len(keys) != 1 or not isinstance(function, (exp.PercentileCont, exp.PercentileDisc, exp.Mode)):
        return node
    key = keys[0]
    if isinstance(function, exp.Mode):
        return exp.Mode(this=key.this.copy()) if function.this is None else node
    if function.this is None or function.args.get("expression") is not None:
        return node
    fraction = function.this.copy()
    if key.args.get("desc"):
        fraction = exp.Neg(this=fraction)
    return type(function)(this=key.this.copy(), expression=fraction)


def _filtered_ordered_pick(node: exp.Filter) -> exp.Expression:
    """Return ``first(x ORDER BY y, ...) FILTER (WHERE c)`` as the first row among those passing ``c``.

    Why not the FILTER rewrite every other aggregate takes (``x`` made NULL where ``c`` fails): ``first``
    returns a NULL ``x`` of its first row, so a failing row would still be picked. Instead ``c`` becomes the
    leading ORDER BY key, passing rows first (``last``: last), and ``x`` is NULL where it fails: a group's pick
    is its first passing row in ``y``'s order, and a group without one picks a failing row, whose ``x`` is
    NULL, as DuckDB gives it. ``first(DISTINCT x ORDER BY x)`` is ``first(x ORDER BY x)`` (see the translator).
    """
    aggregate = node.this.copy()
    order = aggregate.this
    condition = node.expression.this
    argument = order.this
    if isinstance(argument, exp.Distinct) and len(argument.expressions) == 1 and all(
            key.this == argument.expressions[0] for key in order.expressions):
        argument = argument.expressions[0]
    elif isinstance(argument, exp.Distinct):
        return aggregate  # keys other than the argument: the translator refuses it with DuckDB's binder rule
    passing, failing = (1, 0) if isinstance(aggregate, exp.Last) else (0, 1)
    rank = exp.Case(ifs=[exp.If(this=condition.copy(), true=exp.Literal.number(passing))],
                    default=exp.Literal.number(failing))
    order.set("this", exp.Case(ifs=[exp.If(this=condition.copy(), true=argument.copy())]))
    order.set("expressions", [exp.Ordered(this=rank, nulls_first=False)] + list(order.expressions))
    return aggregate


def _regression_average(node: exp.Expression) -> exp.Expression:
    """Return ``regr_avgx(y, x)`` as ``avg(CAST(CASE WHEN y IS NOT NULL THEN x END AS DOUBLE))`` (``regr_avgy``: y's
    with x): DuckDB sums the doubles and divides, so a sum past 1.8e308 or an infinite value gives +-inf, where the
    moments' mean (:class:`gpu_engine.aggregation.functions.Moments`) stayed finite or became NaN (fuzz round 9)."""
    y, x = node.this, node.expression
    averaged, other = (x, y) if isinstance(node, exp.RegrAvgx) else (y, x)
    kept = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=other.copy(), expression=exp.Null())),
                                true=averaged.copy())])
    return exp.Avg(this=exp.Cast(this=kept, to=exp.DataType.build("DOUBLE")))


def _is_standard_error(node: exp.Expression) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == "sem" and len(node.expressions) == 1


def _standard_error(argument: exp.Expression, call: exp.Expression | None = None) -> exp.Expression:
    """Return DuckDB's ``sem(x)``, the standard error of the mean, as ``stddev_pop(x) / sqrt(count(x))`` (DOUBLE; 0
    for one value, NULL for none); ``call``: the FILTER or window around ``sem``, put around both aggregates."""
    def wrapped(aggregate: exp.Expression) -> exp.Expression:
        if call is None:
            return aggregate
        around = call.copy()
        around.set("this", aggregate)
        return around

    return exp.Paren(this=exp.Div(this=wrapped(exp.StddevPop(this=argument.copy())),
                                  expression=exp.Sqrt(this=wrapped(exp.Count(this=argument.copy())))))


def _in_window(node: exp.Expression, root: exp.Expression) -> bool:
    """Return whether ``node`` sits in a window call of the tree ``root`` (its ancestors up to ``root``, or up to the
    root of the copy ``node`` is in: the same ancestors whether the tree was copied first or not)."""
    while node is not root and node.parent is not None:
        node = node.parent
        if isinstance(node, exp.Window):
            return True
    return False


def normalize_aggregate_calls(tree: exp.Expression, *, copy: bool = True, dialect: str = "duckdb") -> exp.Expression:
    """Give every aggregate spelling one aggregate node: ``arbitrary(x)`` ``first``'s,
    ``any_value(x)`` and Spark's ``first(x, true)``/``last(x, true)`` (sqlglot wraps them in IGNORE NULLS)
    their bare node, since they skip NULLs anyway, and ``percentile_cont(f) WITHIN GROUP (ORDER BY x)``
    the quantile's. In the Spark dialect ``percentile(x, f)`` (sqlglot's QUANTILE, DuckDB's discrete
    quantile) is Spark's continuous one. ``copy=False`` rewrites ``tree`` in place (a query's own parsed
    tree: copying a 2000-term WHERE clause cost 0.05 s). ``copy=True`` leaves ``tree`` as it is and returns it
    itself when no call needs a rewrite (the usual case): PlanBuilder translates every aggregate call of a plan
    through here, and the copy it made of each was a third of the deep copies planning TPC-DS made."""

    def rewrite(node: exp.Expression) -> exp.Expression:
        if dialect == "spark" and type(node) is exp.Quantile:  # (ApproxQuantile subclasses it)
            return exp.PercentileCont(this=node.this.copy(), expression=node.args["quantile"].copy())
        if isinstance(node, exp.WithinGroup):
            return _within_group(node)
        if isinstance(node, exp.Filter) and isinstance(node.this, exp.GroupConcat) \
                and isinstance(node.this.this, exp.Order):
            # ``string_agg(x, s ORDER BY y) FILTER (WHERE c)`` is ``string_agg(CASE WHEN c THEN x END, s ORDER BY y)``
            # (the FILTER rewrite of gpu_engine.sql.rewrite wraps a call's ``this``, here its ORDER BY)
            aggregate = node.this.copy()
            order = aggregate.this
            if isinstance(order.this, exp.Distinct):  # string_agg(DISTINCT x, s ORDER BY x): x filtered, in both
                condition = node.expression.this
                filtered = {value.sql(): exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())])
                            for value in order.this.expressions}
                order.this.set("expressions", [filtered[value.sql()].copy() for value in order.this.expressions])
                for ordered in order.expressions:  # the kept (non-NULL) values order alike
                    if ordered.this.sql() in filtered:
                        ordered.set("this", filtered[ordered.this.sql()].copy())
            else:
                order.set("this", exp.Case(ifs=[exp.If(this=node.expression.this.copy(), true=order.this)]))
            return aggregate
        if isinstance(node, exp.Filter) and isinstance(node.this, (exp.First, exp.Last)) \
                and isinstance(node.this.this, exp.Order):
            return _filtered_ordered_pick(node)
        if isinstance(node, (exp.RegrAvgx, exp.RegrAvgy)) and not isinstance(node.this, exp.Distinct):
            return _regression_average(node)
        if isinstance(node, exp.Filter) and isinstance(node.this, (exp.Anonymous, exp.AnonymousAggFunc)) \
                and str(node.this.this).lower() in _ANONYMOUS_AGGREGATES and len(node.this.expressions) == 1:
            # ``product(x) FILTER (WHERE c)`` is ``product(CASE WHEN c THEN x END)`` (the FILTER rewrite of
            # gpu_engine.sql.rewrite reads a node's ``this``, which is an anonymous aggregate's name)
            argument = exp.Case(ifs=[exp.If(this=node.expression.this.copy(), true=node.this.expressions[0].copy())])
            return exp.AnonymousAggFunc(this=str(node.this.this).lower(), expressions=[argument])
        if isinstance(node, (exp.Filter, exp.Window)) and _is_standard_error(node.this):
            return _standard_error(node.this.expressions[0], node)
        if _is_standard_error(node) and not isinstance(node.parent, (exp.Filter, exp.Window)):
            return _standard_error(node.expressions[0])
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in _ANONYMOUS:
            arguments = list(node.expressions)
            if len(arguments) != 1:
                return node  # the translator refuses it naming the function and its argument count
            kind = _ANONYMOUS[str(node.this).lower()]
            if kind is exp.AnonymousAggFunc:
                return kind(this=str(node.this).lower(), expressions=[arguments[0].copy()])
            return kind(this=arguments[0].copy())
        value = node.this if isinstance(node, exp.IgnoreNulls) else node
        if dialect == "spark" and isinstance(value, (exp.FirstValue, exp.LastValue)) \
                and not _in_window(node, tree):  # Spark's aggregate first_value/last_value: first/last
            return (exp.First if isinstance(value, exp.FirstValue) else exp.Last)(this=value.this.copy())
        if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, (exp.AnyValue, exp.First, exp.Last)) \
                and not isinstance(node.this.this, exp.Order):  # (first(x ORDER BY y) counts NULL x: refused)
            return node.this.copy()
        return node

    # (rewrite builds each new node from copies and changes nothing it is given: asking it is a dry run)
    if copy and all(rewrite(node) is node for node in tree.walk()):
        return tree
    return tree.transform(rewrite, copy=copy)
