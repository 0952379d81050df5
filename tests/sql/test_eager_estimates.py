"""The estimates eager aggregation weighs (issue 31, TPC-DS q66): a join of two cut shares of a key's values, a
build side's dictionary-kept strings as grouping keys, and a set-up that grows with the partial aggregates.

q66 pre-aggregated 24 decimal sums a branch below a 5-row warehouse join, +19..23% CPU
(bench/results/2026-11-28-q66-eager-aggregation-cause.md): its sales, cut by date and ship-mode joins, joined
to the third of time_dim a ``t_time`` filter keeps were estimated to match every row; the warehouse's strings
were costed as strings although the join hands them on as dictionary codes; and the set-up counted the same
for 24 partials as for one. The key costs and the set-up are the typed rule's
(tests/optimizer/test_typed_eager_aggregation.py); the join and filter estimates here are the ones both the
typed estimates and the SQL planner's join ordering read.
"""

from __future__ import annotations

import pytest
import sqlglot

from gpu_engine.optimizer.statistics import ColumnStatistics, joined_rows, key_set_divisor, shared_key_domain
from gpu_engine.sql.filtered_statistics import pinned_statistics
from gpu_engine.sql.planning_context import Relation


class _Side:
    """A join input: rows and its columns' statistics (:class:`~gpu_engine.optimizer.statistics.JoinInput`)."""

    def __init__(self, rows: float, **stats: ColumnStatistics):
        self.rows, self.stats = rows, stats


# q66's web branch at SF1: ws_sold_time_sk spans 86,361 values, the sales cut to 28,620 rows by the date and
# ship-mode joins; t_time_sk's 86,400 values cut to 28,800 rows by ``t_time BETWEEN 30838 AND 59638``.
_SALES_KEY = ColumnStatistics(86_361.0, 7, 86_367)
_TIME_KEY = ColumnStatistics(86_400.0, 0, 86_399)


def test_a_join_of_two_cut_shares_of_a_key_divides_by_the_keys_domain():
    sales = _Side(28_620, k=_SALES_KEY.capped(28_620))
    times = _Side(28_800, t=_TIME_KEY.capped(28_800))
    assert sales.stats["k"].domain == 86_361 and times.stats["t"].domain == 86_400
    # a third of the sales match (containment said all 28,620: the capped counts divided)
    assert joined_rows(sales, times, [("k", "t")], shared_domains=True) == pytest.approx(28_620 * 28_800 / 86_361)
    assert joined_rows(times, sales, [("t", "k")], shared_domains=True) == pytest.approx(28_620 * 28_800 / 86_361)
    # join ordering's estimates keep containment (its search counts no join-key filter at a scan: TPC-DS q72)
    assert joined_rows(sales, times, [("k", "t")]) == pytest.approx(28_620)


def test_a_whole_side_or_a_chosen_key_keeps_containment():
    whole_sales = _Side(719_384, k=_SALES_KEY)  # not cut: the fact's values, the filter's share of them match
    times = _Side(28_800, t=_TIME_KEY.capped(28_800))
    assert shared_key_domain(whole_sales.stats["k"], times.stats["t"]) == 0.0
    assert joined_rows(whole_sales, times, [("k", "t")], shared_domains=True) == \
        pytest.approx(719_384 * 28_800 / 86_361)
    # the dimension whole: every cut sale matches one row
    assert joined_rows(_Side(28_620, k=_SALES_KEY.capped(28_620)), _Side(86_400, t=_TIME_KEY),
                       [("k", "t")], shared_domains=True) == pytest.approx(28_620)
    # a conjunct on the key itself chose its values (a range of keys): the sales' values may be those
    chosen = _Side(28_800, t=_TIME_KEY.pinned(28_800))
    assert chosen.stats["t"].domain == 0.0
    assert joined_rows(_Side(28_620, k=_SALES_KEY.capped(28_620)), chosen, [("k", "t")], shared_domains=True) == \
        pytest.approx(28_620)
    # one column on both sides (a self-join: one domain and range): the same filters may keep the same rows
    dates = ColumnStatistics(400.0, 0, 399)
    assert joined_rows(_Side(22, k=dates.capped(22)), _Side(22, k2=dates.capped(22)), [("k", "k2")],
                       shared_domains=True) == \
        pytest.approx(22)
    # several keys: the key-set rule as before
    two = key_set_divisor(_Side(28_620, k=_SALES_KEY.capped(28_620), j=ColumnStatistics(5.0)),
                          _Side(28_800, t=_TIME_KEY.capped(28_800), w=ColumnStatistics(5.0)), [("k", "t"), ("j", "w")],
                          shared_domains=True)
    assert two == pytest.approx(28_800)


def _dates() -> Relation:
    return Relation(node=None, columns={("d", "d_year"): "y", ("d", "d_key"): "k"}, aliases=frozenset({"d"}),
                    rows=400.0, stats={"y": ColumnStatistics(40.0, 1990, 2029), "k": ColumnStatistics(400.0, 0, 399)})


@pytest.mark.parametrize("condition, rows, domain", [
    ("d.d_year = 2001", 10, 400.0),           # another column filtered: the keys kept are a share of 400
    ("d.d_key BETWEEN 0 AND 99", 100, 0.0),   # the key's own range: chosen values, no share
    ("d.d_key IN (1, 2, 3)", 3, 0.0),
])
def test_a_filter_keeps_the_domain_of_the_columns_it_cuts_and_clears_those_it_pins(condition, rows, domain):
    stats = pinned_statistics(_dates(), [sqlglot.parse_one(condition, read="duckdb")], rows)
    assert stats["k"].domain == domain
