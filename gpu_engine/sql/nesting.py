"""Bound how deeply a SQL query nests before sqlglot and the planner recurse into it.

Why: sqlglot's parser, its optimizer and the planner recurse once (25-35
Python frames) per nested parenthesis, subquery, CASE or prefix NOT, so
Python's default limit of 1000 frames ends at about 40 levels, far below what
DuckDB answers (its ``max_expression_depth`` is 1000). Before parsing, the
query's nesting is measured on its tokens and, after parsing, on its tree
(a long ``a AND b AND …`` chain is parsed in a loop but is as deep as it is
long); both are held to :data:`~gpu_engine.plans.expressions.MAX_EXPRESSION_DEPTH`
levels and the recursion limit is raised as far as the query needs
(:func:`~gpu_engine.plans.expressions.allow_recursion_depth`, as PlanBuilder does
for its snippets). Deeper queries are refused with a :class:`SqlError` naming
the construct and where the limit is passed, never a ``RecursionError``.
"""

from __future__ import annotations

import sqlglot
import sqlglot.tokens
from sqlglot import exp
from sqlglot.errors import TokenError

from gpu_engine.plans.expressions import MAX_EXPRESSION_DEPTH, allow_recursion_depth
from gpu_engine.sql.errors import SqlError, position_of, unclosed_quote_position

__all__ = ["check_text_nesting", "check_tree_nesting", "too_deep"]

_TOKEN = sqlglot.tokens.TokenType
_PREFIX_TOKENS = {_TOKEN.NOT, _TOKEN.DASH, _TOKEN.PLUS, _TOKEN.TILDE}
#: Wrappers that add no level of their own: a derived table is one level (its SELECT), not four.
_NOT_LEVELS = (exp.Paren, exp.Subquery, exp.From, exp.Where, exp.Having, exp.Alias)
_CONSTRUCTS = "parentheses, subqueries, CASE expressions and prefix operators such as NOT"
_SPELLING = {"and": "AND terms", "or": "OR terms", "add": "+ terms", "sub": "- terms", "mul": "* terms",
             "div": "/ terms", "dpipe": "|| terms", "case": "CASE expressions", "if": "CASE expressions",
             "not": "NOT", "eq": "= comparisons", "neg": "prefix -", "select": "subqueries", "union": "UNION terms"}


def too_deep(construct: str = _CONSTRUCTS, line: int | None = None, col: int | None = None) -> SqlError:
    """Return the error for a query nested deeper than the engine plans, naming the ``construct`` that nests."""
    return SqlError(f"the query nests too deeply: more than {MAX_EXPRESSION_DEPTH} levels of {construct} "
                    "(move inner parts into CTEs or split the query)", line=line, col=col, name=construct)


def _construct_of(node: exp.Expression) -> str:
    """Name what nests at ``node``: the kind most of its ancestors are, as SQL spells it (a subquery or CASE
    nests through two levels per level, so those count twice)."""
    kinds: dict[str, int] = {}
    while node is not None:
        if not isinstance(node, _NOT_LEVELS):
            kinds[node.key] = kinds.get(node.key, 0) + 1
        node = node.parent
    kind = max(kinds, key=lambda k: kinds[k] * (2 if k in ("select", "case") else 1)) if kinds else ""
    return _SPELLING.get(kind, f"{kind.upper()} expressions")


def check_text_nesting(text: str, dialect: str) -> list:
    """Refuse ``text`` when its tokens nest deeper than the limit; else make room for parsing it.

    Levels: each open parenthesis (a subquery's included) and each CASE until
    its END, plus a run of prefix operators (``NOT NOT x``). Returns the
    tokens, for the parser (a long text is tokenized once: sqlglot's tokenizer
    takes one Python step per character).

    Raises
    ------
    SqlError
        Naming the depth and the line and column where the limit is passed,
        or a string or name that is not closed.
    """
    try:
        tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(text)
    except TokenError as error:
        line, col = unclosed_quote_position(text)
        what = "a quoted string or name is not closed" if line else "a character is not SQL"
        raise SqlError(f"cannot parse SQL: {what}", line=line or 1, col=col or 1) from None
    deepest = depth = run = 0
    for token in tokens:
        kind = token.token_type
        if kind in (_TOKEN.L_PAREN, _TOKEN.CASE):
            depth += 1
        elif kind in (_TOKEN.R_PAREN, _TOKEN.END):
            depth = max(0, depth - 1)
        run = run + 1 if kind in _PREFIX_TOKENS else 0
        if depth + run > MAX_EXPRESSION_DEPTH:
            raise too_deep(_CONSTRUCTS, token.line, max(1, token.col - (token.end - token.start)))
        deepest = max(deepest, depth + run)
    allow_recursion_depth(deepest + 2)
    return tokens


def check_tree_nesting(tree: exp.Expression) -> None:
    """Refuse a parsed query whose tree is deeper than the limit (counted without recursion); else make room."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_EXPRESSION_DEPTH:
            raise too_deep(_construct_of(node), *position_of(node))
        deepest = max(deepest, depth)
        step = 0 if isinstance(node, _NOT_LEVELS) else 1
        stack.extend((child, depth + step) for child in node.iter_expressions()
                     if not isinstance(child, (exp.Identifier, exp.DataType)))
    allow_recursion_depth(deepest)
