"""Let the engine read a table's Parquet files itself when the Spark DataFrame is nothing but a Parquet scan.

Why: feeding a scan through Arrow makes Spark read the file into columnar
batches, turn them into rows, and write the rows one by one into Arrow
vectors for Python (decimals one ``BigDecimal`` at a time). On TPC-H Q1 at
SF 1 that conversion alone takes longer than Spark SQL's whole query. When a
DataFrame is exactly ``spark.read.parquet(path)`` (no filter, projection or
partition columns), the engine can read the same files with its own scan
instead, as native engines inside Spark do: Spark still schedules the
Tasks, one per group of splits, and still runs every shuffle; only the bytes
of the table no longer pass through Spark's row conversion.

The splits are the engine's own (:meth:`RegisteredTable.splits`: a file and
a run of its row groups, merged into one run per file and Task), written as split JSON
(:mod:`gpu_engine.exec.split_serialization`) into the stage's callable; each
Spark partition of a ``spark.range`` over the split numbers tells its Task
which of them to read. Any other DataFrame (filtered, projected, from
memory, on Spark Connect, on a non-local file system) is fed through Arrow.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence
from urllib.parse import unquote, urlparse

import pyarrow as pa

from gpu_engine.columnar.types import normalize_type
from gpu_engine.connectors.data_source import parquet_metadata
from gpu_engine.connectors.registered_table import DEFAULT_SPLIT_ROWS, RegisteredTable
from gpu_engine.exec.split_serialization import split_to_json
from gpu_engine.spark.spark_types import reads_same_values

__all__ = ["parquet_scan_files", "parquet_split_documents"]


def parquet_scan_files(frame) -> list[str] | None:
    """Return the local Parquet files ``frame`` scans when it is a bare Parquet scan, else None."""
    try:
        analyzed = frame._jdf.queryExecution().analyzed()
        if analyzed.getClass().getSimpleName() != "LogicalRelation":
            return None
        relation = analyzed.relation()
        if relation.getClass().getSimpleName() != "HadoopFsRelation":
            return None
        if relation.fileFormat().shortName() != "parquet" or not relation.partitionSchema().isEmpty():
            return None
        files = list(frame.inputFiles())
    except Exception:  # Spark Connect (no _jdf) or a plan shape this Spark version names differently
        return None
    paths = []
    for uri in files:
        parsed = urlparse(uri)
        if parsed.scheme not in ("", "file"):
            return None  # HDFS, S3...: Spark's reader knows how to reach it, the engine's may not
        paths.append(unquote(parsed.path))
    return sorted(paths) or None


def parquet_split_documents(files: Sequence[str], schema: pa.Schema, groups: int | None = None,
                            split_rows: int = DEFAULT_SPLIT_ROWS) -> tuple[str, ...] | None:
    """Return split JSON documents covering ``files``, or None when the files do not hold ``schema`` as is.

    ``schema`` is what the plan's scan reads (engine types). A file lacking a
    column, or holding one the engine would read as another type than Spark
    does (an INT96 timestamp, say), is left to Spark's reader. The engine's
    splits (a file and a run of row groups) are merged, in order, into at most
    ``groups`` splits (default: no merging; ``split_rows`` sizes the engine's
    splits before), runs of the same file joining
    into one: a Task reading several splits then opens each file once, and
    its batches may span row groups.
    """
    for path in files:
        file_schema = parquet_metadata(path).schema.to_arrow_schema()  # footer checked by the engine's reader
        for wanted in schema:
            if wanted.name not in file_schema.names:
                return None  # Spark resolved a name case-insensitively or merged schemas: let Spark read it
            if not reads_same_values(normalize_type(file_schema.field(wanted.name).type), wanted.type):
                return None
    splits = RegisteredTable("parquet scan", schema, tuple(files), split_rows=split_rows).splits()
    if groups is not None and 0 < groups < len(splits):
        merged = []
        for number in range(groups):
            chunk = splits[number * len(splits) // groups:(number + 1) * len(splits) // groups]
            for split in chunk:
                if merged and merged[-1][0] == number and merged[-1][1].path == split.path:
                    previous = merged[-1][1]
                    merged[-1] = (number, replace(previous, row_groups=previous.row_groups + split.row_groups))
                else:
                    merged.append((number, split))
        splits = [split for _, split in merged]
    return tuple(split_to_json(split) for split in splits)

