"""Choose broadcast or shuffle for each join from the estimated size of its build side.

Why: a broadcast build side is collected on the driver and held whole by
every Task, which is cheap for a dimension table and impossible for
``orders`` or ``lineitem`` at scale; a shuffle moves both sides once but
never holds more than a partition. Spark decides with
``spark.sql.autoBroadcastJoinThreshold`` (10 MB by default, -1 never
broadcasts) against its size estimate; the runner does the same with its own
estimate, made before anything runs:

* a table that is a Parquet file scan (``DataFrame.inputFiles()`` all
  Parquet) is sized from the files' metadata: the uncompressed bytes of the
  column chunks of the columns the plan reads, as they will be held in memory;
* any other table from Spark's own estimate of the DataFrame
  (``sizeInBytes`` of its optimized plan), scaled by the share of its
  columns the plan reads;
* a build side is the sum of the tables it scans. Filters and aggregations
  are not credited (as Spark does without CBO): the estimate is an upper
  bound, so a build side broadcast by it really is small;
* unless the build side's rows are bounded by its plan: a TopN or Limit
  keeps at most ``count`` rows, an aggregation without grouping keys and
  EnforceSingleRow one. Then it is at most that many rows of its width
  (:func:`max_rows`): TPC-H Q10 joins its top 20 customers' revenues, read
  from all of lineitem, and Q15 its one maximum revenue.

A join type that cannot be broadcast (right, full, right semi, right anti)
is always shuffled. ``overrides`` (join id -> ``broadcast`` / ``shuffle``)
take precedence over ``default`` (one of them for every other join that
can have it), which takes precedence over the size.
"""

from __future__ import annotations

from typing import Mapping

from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import (
    AggregationNode,
    EnforceSingleRowNode,
    ExchangeNode,
    FilterNode,
    HashJoinNode,
    LimitNode,
    NestedLoopJoinNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanNode,
    ProjectNode,
    TableScanNode,
    TopNNode,
    ValuesNode,
    walk_plan,
)
from gpu_engine.spark.broadcast_joins import BROADCAST_JOIN_TYPES, JOIN_STRATEGIES, SWAPPED_JOIN_TYPES, swapped_join

__all__ = ["table_scan_bytes", "plan_scan_bytes", "max_rows", "row_bytes", "SizeJoinStrategy"]


def table_scan_bytes(frame, columns) -> int | None:
    """Return the estimated in-memory bytes of ``columns`` of a Spark DataFrame, None when Spark cannot say."""
    columns = list(columns)
    files = _parquet_files(frame)
    if files is not None:
        size = _parquet_column_bytes(files, columns)
        if size is not None:
            return size
    try:
        size = int(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes().toString())
    except Exception:  # Spark Connect (no _jdf)
        return None
    width = max(1, len(frame.columns))
    return size * max(1, len(columns)) // width


def _parquet_files(frame) -> list[str] | None:
    from urllib.parse import unquote, urlparse

    try:
        uris = list(frame.inputFiles())
    except Exception:
        return None
    paths = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme not in ("", "file") or not parsed.path.endswith(".parquet"):
            return None
        paths.append(unquote(parsed.path))
    return paths or None


def _parquet_column_bytes(files: list[str], columns: list[str]) -> int | None:
    """Return the uncompressed bytes of ``columns`` in ``files``, from footers the engine's reader checked."""
    from gpu_engine.connectors.parquet_footer import read_footer
    from gpu_engine.errors import DataSourceError

    total = 0
    for path in files:
        try:
            footer = read_footer(path)
        except (OSError, DataSourceError):  # Spark's estimate then; Spark's reader reports the file
            return None
        wanted = [i for i, leaf in enumerate(footer.leaves) if leaf.path.split(".")[0] in columns]
        for row_group in footer.row_groups:
            total += sum(row_group.columns[i].total_uncompressed_size for i in wanted)
    return total


#: Bytes a variable-width value (a string, a list) is guessed to take in a row-bound estimate.
VARIABLE_WIDTH_BYTES = 64


def max_rows(node: PlanNode) -> int | None:
    """Return the most rows ``node`` can produce when its plan bounds them (TopN, Limit, a global aggregation), else None."""
    if isinstance(node, (TopNNode, LimitNode)) and not getattr(node, "with_ties", False):
        bound = node.count + getattr(node, "offset", 0)
        below = max_rows(node.source)
        return bound if below is None else min(bound, below)
    if isinstance(node, EnforceSingleRowNode):
        return 1
    if isinstance(node, AggregationNode) and not node.grouping_keys and node.step.output_is_final:
        return 1
    if isinstance(node, ValuesNode):
        return node.data.num_rows
    if isinstance(node, (FilterNode, ProjectNode, OrderByNode, PartitionedOutputNode, ExchangeNode)) and node.sources:
        return max_rows(node.sources[0])
    return None


def row_bytes(schema) -> int:
    """Return a row's estimated bytes: fixed widths as they are, variable widths at :data:`VARIABLE_WIDTH_BYTES`."""
    total = 0
    for field in schema:
        try:
            total += max(1, field.type.bit_width // 8)
        except ValueError:  # no fixed width
            total += VARIABLE_WIDTH_BYTES
    return total


def plan_scan_bytes(node: PlanNode, table_bytes: Mapping[tuple[str, tuple[str, ...]], int | None]) -> int | None:
    """Return the summed bytes of every table scan under ``node`` (None when one is unknown)."""
    total = 0
    for scan in walk_plan(node):
        if isinstance(scan, TableScanNode):
            size = table_bytes.get((scan.table_name, tuple(scan.columns)))
            if size is None:
                return None
            total += size
    return total


class SizeJoinStrategy:
    """Pick ``broadcast`` for a join whose build side is at most ``threshold`` bytes, else ``shuffle``.

    Parameters
    ----------
    tables
        Table name -> Spark DataFrame (None: sizes unknown, every join that
        can be broadcast is).
    threshold
        Bytes; negative never broadcasts (Spark's -1).
    overrides
        Join id -> strategy. A join named here that cannot have its
        strategy raises PlanError when planned.
    default
        The strategy of every join not in ``overrides`` that can have it
        (a join that cannot be broadcast is still shuffled).
    """

    def __init__(self, tables: Mapping | None, threshold: int, overrides: Mapping[str, str] | None = None,
                 default: str | None = None):
        self.tables = tables
        self.threshold = int(threshold)
        if default is not None:
            _check_strategy(default, "every join")
        for join_id, strategy in (overrides or {}).items():
            _check_strategy(strategy, f"join {join_id}")
        self.overrides = dict(overrides or {})
        self.default = default
        self._sizes: dict[tuple[str, tuple[str, ...]], int | None] = {}
        #: Join id -> (strategy, estimated build bytes or None), filled as joins are planned.
        self.chosen: dict[str, tuple[str, int | None]] = {}

    def build_bytes(self, join: PlanNode) -> int | None:
        """Return the estimated bytes of ``join``'s build side: its scans, or its bounded rows where fewer."""
        scanned = self.scan_bytes(join.build)
        rows = max_rows(join.build)
        if rows is None:
            return scanned
        bounded = rows * row_bytes(join.build.output_schema)
        return bounded if scanned is None else min(scanned, bounded)

    def scan_bytes(self, node: PlanNode) -> int | None:
        """Return the estimated bytes of the tables ``node`` scans (None when one is unknown)."""
        if self.tables is None:
            return None
        for scan in walk_plan(node):
            if isinstance(scan, TableScanNode):
                key = (scan.table_name, tuple(scan.columns))
                if key not in self._sizes:
                    frame = self.tables.get(scan.table_name)
                    self._sizes[key] = None if frame is None else table_scan_bytes(frame, scan.columns)
        return plan_scan_bytes(node, self._sizes)

    def swaps(self, join: PlanNode) -> bool:
        """Return True when ``join`` should swap sides to broadcast its probe side instead.

        Only a hash join whose strategy the size decides (not overridden, no
        default), whose build side is over the threshold and whose probe side
        is within it, and whose type has a broadcastable swap (inner, right,
        right semi, right anti).
        """
        if (not isinstance(join, HashJoinNode) or join.join_type not in SWAPPED_JOIN_TYPES
                or join.id in self.overrides or self.default is not None or self.threshold < 0):
            return False
        build = self.build_bytes(join)
        if build is None or build <= self.threshold and join.join_type in BROADCAST_JOIN_TYPES:
            return False
        probe = self.build_bytes(swapped_join(join))
        return probe is not None and 0 <= probe <= self.threshold

    def __call__(self, join: PlanNode) -> str:
        if not isinstance(join, (HashJoinNode, NestedLoopJoinNode)):
            raise PlanError("a join strategy is asked about a join only", node=join.label)
        size = self.build_bytes(join)
        if join.id in self.overrides:
            strategy = self.overrides[join.id]
        elif join.join_type not in BROADCAST_JOIN_TYPES:
            strategy = "shuffle"
        elif self.default is not None:
            strategy = self.default
        elif isinstance(join, NestedLoopJoinNode):
            strategy = "broadcast"  # no keys to shuffle by: the alternative is one partition for both sides
        elif size is None:
            strategy = "broadcast"
        else:
            strategy = "broadcast" if 0 <= size <= self.threshold else "shuffle"
        self.chosen[join.id] = (strategy, size)
        return strategy


def _check_strategy(strategy: str, what: str) -> None:
    if strategy not in JOIN_STRATEGIES:
        raise PlanError(f"join strategy {strategy!r} for {what} is not one of {', '.join(JOIN_STRATEGIES)}")
