"""Check the printed plan as golden text, as Velox's PlanNode::toString tests do."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator, format_plan
from gpu_engine.plans.explain import LINE_WIDTH

CATALOG = {
    "lineitem": pa.schema([("l_partkey", pa.int64()), ("l_quantity", pa.decimal128(15, 2)),
                           ("l_shipdate", pa.date32()), ("l_comment", pa.string())]),
}


def small_plan():
    return (PlanBuilder(CATALOG)
            .table_scan("lineitem", ["l_partkey", "l_quantity", "l_shipdate"])
            .filter("l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY AND l_quantity BETWEEN 1 AND 24")
            .project(["l_partkey", "l_quantity * 2 AS q2"])
            .partial_aggregation(["l_partkey"], ["count(*) AS cnt", "avg(q2) AS a"])
            .local_partition(["l_partkey"])
            .final_aggregation()
            .top_n(["cnt DESC", "l_partkey"], 5)
            .plan())


GOLDEN = """\
-- TopN[6][5 cnt DESC NULLS LAST, l_partkey ASC NULLS LAST] -> l_partkey:int64, cnt:int64, a:double
  -- Aggregation[5][FINAL [l_partkey] cnt := count(*), a := avg(a)] -> l_partkey:int64, cnt:int64, a:double
    -- LocalPartition[4][REPARTITION [l_partkey]] -> l_partkey:int64, cnt:int64, a:decimal128(38, 2), a$high:int64, \
a$count:int64
      -- Aggregation[3][PARTIAL [l_partkey] cnt := count(*), a := avg(q2)] -> l_partkey:int64, cnt:int64, \
a:decimal128(38, 2), a$high:int64, a$count:int64
        -- Project[2][expressions: (l_partkey:l_partkey), (q2:(l_quantity * 2))] -> l_partkey:int64, \
q2:decimal128(18, 2)
          -- Filter[1][expression: ((l_shipdate <= DATE '1998-09-02') AND ((l_quantity >= 1) AND (l_quantity <= 24)))] -> l_partkey:int64, l_quantity:decimal128(15, 2), l_shipdate:date32[day]
            -- TableScan[0][table: lineitem, columns: l_partkey, l_quantity, l_shipdate] -> l_partkey:int64, \
l_quantity:decimal128(15, 2), l_shipdate:date32[day]"""


#: The same plan by default: lines over LINE_WIDTH lose their column types, then long details move below.
COMPACT = """\
-- TopN[6][5 cnt DESC NULLS LAST, l_partkey ASC NULLS LAST] -> l_partkey:int64, cnt:int64, a:double
  -- Aggregation[5][FINAL [l_partkey] cnt := count(*), a := avg(a)] -> l_partkey:int64, cnt:int64, a:double
    -- LocalPartition[4][REPARTITION [l_partkey]] -> l_partkey, cnt, a, a$high, a$count
      -- Aggregation[3][PARTIAL [l_partkey] cnt := count(*), a := avg(q2)] -> l_partkey, cnt, a, a$high, a$count
        -- Project[2][expressions: (l_partkey:l_partkey), (q2:(l_quantity * 2))] -> l_partkey:int64, \
q2:decimal128(18, 2)
          -- Filter[1][…] -> l_partkey, l_quantity, l_shipdate
             [expression: ((l_shipdate <= DATE '1998-09-02') AND ((l_quantity >= 1) AND (l_quantity <= 24)))]
            -- TableScan[0][table: lineitem, columns: l_partkey, l_quantity, l_shipdate] -> l_partkey, l_quantity, \
l_shipdate"""


def test_golden_plan_text():
    assert format_plan(small_plan(), full=True) == GOLDEN


def test_golden_plan_text_shortened_by_default():
    assert format_plan(small_plan()) == COMPACT


def _wide_plan():
    """A scan of 30 columns with a long filter: 700-character lines in full, as TPC-H plans have."""
    names = [f"column_number_{i:02d}" for i in range(30)]
    catalog = {"wide": pa.schema([(name, pa.decimal128(15, 2)) for name in names])}
    condition = " OR ".join(f"{name} > {i}" for i, name in enumerate(names[:12]))
    return PlanBuilder(catalog).table_scan("wide", names).filter(condition).plan(), names


def test_long_lines_fit_the_width_by_default_and_print_whole_with_full():
    plan, names = _wide_plan()
    full = format_plan(plan, full=True, placements={"1": "cpu"})
    assert max(len(line) for line in full.splitlines()) > 600
    short = format_plan(plan, placements={"1": "cpu"}).splitlines()
    indent = {line: len(line) - len(line.lstrip()) for line in short}
    assert all(len(line) - indent[line] <= LINE_WIDTH for line in short), short
    node_lines = [line for line in short if line.lstrip().startswith("-- ")]
    assert node_lines[0] == f"-- Filter[1][…] -> {names[0]}, {names[1]}, … (30 columns) @ cpu"
    assert node_lines[1].startswith("  -- TableScan[0][…] -> ")
    # Nothing is lost: the wrapped details hold every word of the full ones.
    details = " ".join(line.strip() for line in short if not line.lstrip().startswith("-- "))
    assert details.split() == " ".join(f"[{node.describe()}]" for node in (plan, plan.sources[0])).split()


@pytest.mark.parametrize("node_stats, expected_lines", [
    pytest.param(None, GOLDEN.splitlines()[:2], id="no stats"),
    pytest.param({"5": "Output: 3 rows\nWall: 1.0ms", "99": "ignored"},
                 [GOLDEN.splitlines()[0], GOLDEN.splitlines()[1], "     Output: 3 rows", "     Wall: 1.0ms"],
                 id="stats under their node"),
    pytest.param({"6": "Output: 5 rows"}, [GOLDEN.splitlines()[0], "   Output: 5 rows"], id="stats under the root"),
])
def test_node_stats_are_indented_under_their_node(node_stats, expected_lines):
    lines = format_plan(small_plan(), node_stats, full=True).splitlines()
    assert lines[:len(expected_lines)] == expected_lines


def test_every_source_is_printed_one_level_deeper():
    ids = PlanNodeIdGenerator()
    left = PlanBuilder(id_generator=ids).values(pa.table({"x": pa.array([1, 2], pa.int64())})).plan()
    right = PlanBuilder(id_generator=ids).exchange(pa.schema([("x", pa.int64())])).plan()
    gather = PlanBuilder(id_generator=ids).values(pa.table({"x": pa.array([3], pa.int64())})).local_gather().plan()
    union = dataclasses.replace(gather, sources=(left, right))
    assert format_plan(union) == "\n".join([
        "-- LocalPartition[3][GATHER] -> x:int64",
        "  -- Values[0][2 rows] -> x:int64",
        "  -- Exchange[1][] -> x:int64",
    ])


def test_placements_end_their_node_line():
    placements = {"6": "cuda", "1": "cuda (host fallback: CAST(x AS string))"}
    lines = format_plan(small_plan(), {"6": "Output: 5 rows"}, placements, full=True).splitlines()
    assert lines[0] == GOLDEN.splitlines()[0] + " @ cuda"
    assert lines[1] == "   Output: 5 rows"
    assert lines[2] == GOLDEN.splitlines()[1]  # no placement given: the line is unchanged
    filter_line = next(line for line in lines if "Filter[1]" in line)
    assert filter_line.endswith("l_shipdate:date32[day] @ cuda (host fallback: CAST(x AS string))")


def test_long_stats_lines_wrap_at_their_items_within_the_width_and_print_whole_with_full():
    # An explain-analyze stats line of a TableScan ran to 240 characters (269 deeper in a TPC-H plan).
    stats = ("TableScan (pipeline 1, 2 driver(s)): input 0 rows/0 batches, output 60175 rows/1 batches/2.65 MB, "
             "cpu 32.1 ms, blocked 12.4 ms (2x), launches 0, syncs 0, arrow_to_batch_seconds=0.3 ms, "
             "decode_seconds=31.6 ms, splits=1, a_counter_with_a_long_name=123456789, another_one=0.5 ms")
    plan = small_plan()
    node_ids = [plan.id, *(node.id for node in plan.sources)]
    lines = format_plan(plan, {node_id: stats for node_id in node_ids}).splitlines()
    stats_lines = [line for line in lines if not line.lstrip().startswith("-- ")]
    assert len(stats_lines) > len(node_ids) and all(len(line) <= LINE_WIDTH for line in stats_lines), stats_lines
    # Nothing is lost: the wrapped lines under each node hold the whole stats text.
    under_root = [line.strip() for line in lines[1:lines.index(next(l for l in lines[1:] if "-- " in l))]]
    assert " ".join(under_root) == stats
    whole = format_plan(plan, {node_id: stats for node_id in node_ids}, full=True).splitlines()
    assert max(len(line) for line in whole) > len(stats)


def test_explain_analyze_reports_each_operator_s_thread_cpu_beside_its_wall_time():
    # The per-operator "cpu" figure was the calls' wall time (perf_counter): on a loaded machine or while a thread
    # waits it overstated the operator's work. Now it is the driver thread's CPU time, never above its wall time.
    from gpu_engine import Session

    session = Session(device="cpu")
    session.register("t", pa.table({"a": list(range(2000)), "b": [i % 7 for i in range(2000)]}))
    text = session.explain(session.sql_plan("SELECT b, sum(a) FROM t GROUP BY b"), analyze=True, full=True)
    stats_lines = [line for line in text.splitlines() if "driver(s)): input" in line]
    assert stats_lines and all(", wall " in line and ", cpu " in line for line in stats_lines), text
    operators = [s for per_node in session.last_stats().operator_stats_by_node().values() for s in per_node]
    assert operators and all(s.cpu_seconds <= s.wall_seconds + 0.005 for s in operators)
