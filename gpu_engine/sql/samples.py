"""DuckDB's samples: ``USING SAMPLE p%`` / ``TABLESAMPLE p%`` and ``USING SAMPLE n ROWS`` as random() filters.

Why: exploring a large table, a DuckDB user samples it; the engine refused the clause by name. A percentage keeps
each row with probability p/100 (``random() < p / 100``, a Bernoulli sample; DuckDB's default SYSTEM method keeps
whole vectors, a sample of the same expected size), ``n ROWS`` keeps n rows drawn uniformly (``ORDER BY random()
LIMIT n``, DuckDB's reservoir). DuckDB applies ``USING SAMPLE`` to the FROM clause's rows before WHERE: a
percentage becomes a WHERE conjunct (a coin per row commutes with the other filters); ``n ROWS`` applies to a
single FROM table only (with joins it stays refused). A seed or a method given with a size (``BERNOULLI(20)``)
stays refused: the engine draws no repeatable sample. Rewritten on the parsed tree before the refusals run.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["with_samples_as_random_filters"]


def _drawn_rows(sample: exp.TableSample) -> tuple[str, float] | None:
    """Return ("percent", p) or ("rows", n) for a sample the rewrite supports, else None (left to be refused)."""
    method = str(sample.args.get("method") or "").upper()
    if sample.args.get("seed") is not None or any(sample.args.get(k) is not None for k in (
            "bucket_numerator", "bucket_denominator", "bucket_field", "expressions")):
        return None
    percent, size = sample.args.get("percent"), sample.args.get("size")
    if isinstance(percent, exp.Literal) and not percent.is_string and method in ("", "SYSTEM", "BERNOULLI"):
        return "percent", float(percent.this)
    if isinstance(size, exp.Literal) and not size.is_string and method in ("", "RESERVOIR") and size.this.isdigit():
        return "rows", int(size.this)
    return None


def _sampled_table(table: exp.Table, kind: str, amount: float) -> exp.Subquery:
    bare = table.copy()
    bare.set("sample", None)
    alias = table.alias_or_name
    bare.set("alias", None)
    inner = exp.select("*").from_(bare)
    if kind == "percent":
        inner = inner.where(exp.LT(this=exp.Rand(), expression=exp.Literal.number(amount / 100)))
    else:
        inner = inner.order_by(exp.Ordered(this=exp.Rand())).limit(int(amount))
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def with_samples_as_random_filters(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` (parsed, in place) with each supported sample written as a random() filter or top-n."""
    for table in list(tree.find_all(exp.Table)):
        sample = table.args.get("sample")
        drawn = _drawn_rows(sample) if isinstance(sample, exp.TableSample) else None
        if drawn is not None:
            table.replace(_sampled_table(table, *drawn))
    for select in list(tree.find_all(exp.Select)):
        sample = select.args.get("sample")
        drawn = _drawn_rows(sample) if isinstance(sample, exp.TableSample) else None
        if drawn is None:
            continue
        kind, amount = drawn
        source = select.args.get("from_") or select.args.get("from")
        if kind == "percent":
            select.set("sample", None)
            select.where(exp.LT(this=exp.Rand(), expression=exp.Literal.number(amount / 100)), copy=False)
        elif not select.args.get("joins") and source is not None and isinstance(source.this, exp.Table):
            select.set("sample", None)
            source.this.replace(_sampled_table(source.this, kind, amount))
    return tree
