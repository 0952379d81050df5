"""Name the benchmark's queries: each has the engine's plan, DuckDB's SQL and a Polars twin.

A query named ``qN`` takes its plan and SQL from :mod:`gpu_engine.plans.tpch`
(so a TPC-H query gets into the benchmark as soon as it has a plan there); its
Polars version is a hand-written LazyFrame function in :data:`POLARS_QUERIES`
where one exists, else Polars' own SQL front end (``polars.SQLContext``) runs
the same SQL text DuckDB runs — Polars plans and optimizes it itself, so it is
a fair peer, and every Polars result is checked against DuckDB's like the
engine's. ``primer`` is the one-aggregation
warm-up query.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Callable, Mapping

__all__ = ["BenchQuery", "POLARS_QUERIES", "bench_query", "available_bench_queries"]

PolarsQuery = Callable[[Mapping[str, object]], object]  # tables name -> LazyFrame  ->  LazyFrame


@dataclass(frozen=True)
class BenchQuery:
    """One benchmark query: engine plan builder, DuckDB SQL, optional Polars builder, row-order flag."""

    name: str
    build_plan: Callable[[Mapping], object]
    sql: str
    polars: PolarsQuery | None
    ordered: bool | tuple[str, ...]  # ORDER BY columns when known (ties may come in any order), True: row for row
    polars_from_sql: bool = False


def _polars_primer(tables):
    import polars as pl

    return tables["lineitem"].group_by("l_partkey").agg(pl.len().cast(pl.Int64).alias("count")).sort("l_partkey")


def _polars_q1(tables):
    import polars as pl

    # Polars keeps the larger input scale when multiplying decimals; widen the
    # scale first so products are exact, as in SQL.
    price = pl.col("l_extendedprice")
    disc_price = price.cast(pl.Decimal(38, 4)) * (1 - pl.col("l_discount"))
    charge = price.cast(pl.Decimal(38, 6)) * (1 - pl.col("l_discount")) * (1 + pl.col("l_tax"))
    return (
        tables["lineitem"]
        .filter(pl.col("l_shipdate") <= datetime.date(1998, 9, 2))
        .group_by("l_returnflag", "l_linestatus")
        .agg(
            pl.col("l_quantity").sum().alias("sum_qty"),
            price.sum().alias("sum_base_price"),
            disc_price.sum().alias("sum_disc_price"),
            charge.sum().alias("sum_charge"),
            pl.col("l_quantity").cast(pl.Float64).mean().alias("avg_qty"),
            price.cast(pl.Float64).mean().alias("avg_price"),
            pl.col("l_discount").cast(pl.Float64).mean().alias("avg_disc"),
            pl.len().cast(pl.Int64).alias("count_order"),
        )
        .sort("l_returnflag", "l_linestatus")
    )


def _polars_q6(tables):
    import polars as pl

    money = pl.Decimal(15, 2)
    return (
        tables["lineitem"]
        .filter(
            (pl.col("l_shipdate") >= datetime.date(1994, 1, 1))
            & (pl.col("l_shipdate") < datetime.date(1995, 1, 1))
            & pl.col("l_discount").is_between(pl.lit("0.05").cast(money), pl.lit("0.07").cast(money))
            & (pl.col("l_quantity") < 24)
        )
        .select((pl.col("l_extendedprice").cast(pl.Decimal(38, 4)) * pl.col("l_discount")).sum().alias("revenue"))
    )


def _polars_sql(sql: str) -> PolarsQuery:
    """Return a Polars builder that runs ``sql`` through Polars' SQL front end over the scanned tables."""

    def build(tables):
        import polars as pl

        return pl.SQLContext(dict(tables)).execute(sql)

    return build


POLARS_QUERIES: dict[str, PolarsQuery] = {
    "primer": _polars_primer,
    "q1": _polars_q1,
    "q6": _polars_q6,
}


def available_bench_queries() -> list[str]:
    """Return every query name the benchmark can run: ``primer`` and ``qN`` for each planned TPC-H query."""
    from gpu_engine.plans import tpch

    return ["primer"] + [f"q{n}" for n in tpch.available_queries()]


def bench_query(name: str, sf: float = 1) -> BenchQuery:
    """Return the benchmark query called ``name`` (``primer``, ``q1``, ``6``...) at scale factor ``sf``.

    ``sf`` sets the substitution parameters that depend on it (Q11's FRACTION).
    Raises ValueError if the name is unknown.
    """
    from gpu_engine.plans import tpch
    from gpu_engine.sql.ordering import order_key_columns

    key = name.strip().lower()
    if key == "primer":
        return BenchQuery("primer", tpch.primer_query, tpch.PRIMER_SQL, POLARS_QUERIES.get("primer"), ordered=True)
    digits = key.removeprefix("q")
    if not digits.isdigit():
        raise ValueError(f"unknown query {name!r}; available: {', '.join(available_bench_queries())}")
    number = int(digits)
    try:
        sql = tpch.sql(number, sf)
    except ValueError as error:
        raise ValueError(f"{error}; available: {', '.join(available_bench_queries())}") from None
    polars = POLARS_QUERIES.get(f"q{number}")
    return BenchQuery(
        f"q{number}",
        lambda catalog: tpch.query(number, catalog, sf=sf),
        sql,
        polars or _polars_sql(sql),
        ordered=order_key_columns(sql),
        polars_from_sql=polars is None,
    )
