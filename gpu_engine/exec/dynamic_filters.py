"""Runtime join-key filters: a finished build side filters its probe side's TableScan (Velox's dynamic filters).

Why: a hash join's build side is often small and selective (TPC-H Q21's
suppliers of one nation, the orders left by a filter), while its probe side
is a large scan that decodes, converts and probes every row only for most of
them to find no match. Once the build side is complete, its keys say which
probe keys could match; rows whose key is outside them can be dropped at the
scan, before anything else reads them, and Parquet row groups whose
statistics lie outside them need not be decoded at all. Velox's HashProbe
pushes such filters into the TableScan of its driver
(``HashProbe::pushdownDynamicFilters``, ``TableScan::addDynamicFilter``);
DuckDB calls it join filter pushdown.

Three parts, all Task state or data (no operator branches on the device):

* :func:`plan_key_filters` runs when the local planner prepares a Task: for
  each hash join whose probe pipeline starts at a TableScan, it follows each
  probe key back through the pipeline to a scan column, and records a
  :class:`KeyFilterTarget` where that is exact-safe (below);
* the join's build side, once complete, makes one :class:`JoinKeyFilter` per
  target from its key column (one copy of the keys to the host, once per
  join: :meth:`~gpu_engine.exec.join_bridge.HashJoinBridge.push_key_filters`)
  and adds it to the Task's :class:`DynamicFilters` before it publishes the
  table;
* the TableScan reads the filters of its node when it starts a split, skips
  the row groups whose statistics miss them and drops the rows they reject
  on the host, before the rows are converted or copied to the device
  (:mod:`gpu_engine.connectors.runtime_filters`).

When the filter is there: the probe's driver asks every operator whether it
is blocked before it asks its source for a batch, and a HashProbe is blocked
until its table is published. So a scan in a probe pipeline reads no split
before every join it feeds in that pipeline has its build side complete,
and the filters are in place before its first split. No wait is added, and
nothing can deadlock: build and probe sides run as different pipelines with
drivers of their own (:func:`~gpu_engine.exec.local_planner.plan_pipelines`),
and a blocked driver leaves its thread.

Through a local exchange: a probe pipeline that starts at a LocalExchange
(a UNION ALL's branches, a repartition) passes its rows on unchanged, so a
probe key also names a column of each scan that feeds the exchange through
renames, filters and further exchanges (TPC-DS q5's sales and returns of a
channel joined with two weeks of ``date_dim``). Such a scan runs in a
pipeline of its own, which no HashProbe blocks: its target ``waits``, and
the scan waits for those joins' tables before its first split
(:meth:`DynamicFilters.expect`), as a probe would. A branch no filter can
reach still streams at once. Still no cycle: a join's build side is a
different subtree from its probe side, so it never waits for the scans it
filters.

Exact-safety: a filter may drop a probe row only when that row cannot
contribute to the join's output. So

* the join type discards unmatched probe rows: inner, right (it emits
  *build* rows nobody matched), left semi, right semi and right anti (a probe
  row without a match marks no build row); never left, full, anti or NOT IN,
  whose unmatched probe rows are output;
* the probe key is a scan column unchanged: renamed by projections, passed
  through filters and through earlier probes in the same pipeline whose
  output rows each come from one input row with its probe columns unchanged
  (inner, left, left semi, anti, NOT IN); not a computed or cast key, not
  after a join that makes probe columns NULL (right, full) or outputs build
  rows;
* key values compare exactly: integers (any width but unsigned 64-bit),
  dates and strings of both sides (floats, decimals and other types get no
  filter);
* a NULL key never equals anything in an equi-join: NULL probe keys are
  dropped, NULL build keys are not in the filter.
"""

from __future__ import annotations

import bisect
import datetime
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from gpu_engine.columnar.arrow_numpy import arrow_strings, numpy_validity, numpy_values

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.columnar.column import Column
    from gpu_engine.device import Device

__all__ = ["KeyFilterTarget", "JoinKeyFilter", "DynamicFilters", "plan_key_filters", "precompile_calls",
           "FILTERING_JOINS", "EXACT_SET_MAX_ROWS", "STRING_SET_MAX_VALUES"]

#: Join types whose unmatched probe rows give no output: a key filter may drop them at the probe's scan.
FILTERING_JOINS = ("inner", "right", "left_semi", "right_semi", "right_anti")

#: Earlier probes a filter passes through: each output row is one input row's, its probe columns unchanged.
_PASSING_JOINS = ("inner", "left", "left_semi", "anti", "null_aware_anti")

#: A build side of at most this many rows gives its exact key set, else only its key range.
EXACT_SET_MAX_ROWS = 1 << 20

#: A string key set of more distinct values than this is tested by its range only (a set is Python strings).
STRING_SET_MAX_VALUES = 1 << 16

#: Integer key sets spanning at most this many values are an exact table of bits, one a value (8 MB at most).
_TABLE_MAX_SPAN = 1 << 26

#: Sparser integer keys set bits in a Bloom-style table (one multiplicative hash, 16 bits a key) of at most
#: this many bits: a false positive only lets a row through to the probe.
_BLOOM_MAX_BITS = 1 << 24
_BLOOM_MIN_BITS = 1 << 10
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)

_EPOCH = datetime.date(1970, 1, 1)


@dataclass(frozen=True)
class KeyFilterTarget:
    """Where one key of a join filters: the join's ``key_index``-th key is ``column`` of TableScan ``scan_id``."""

    join_id: str
    key_index: int
    scan_id: str
    column: str
    kind: str  # "int" or "string": how the values compare
    waits: bool = False  # the scan feeds the probe through a local exchange: it waits for the join's table


def _key_kind(probe: pa.DataType, build: pa.DataType) -> str | None:
    """Return how a probe and a build key type compare exactly ("int", "string"), or None for no filter."""
    if pa.types.is_dictionary(probe):
        probe = probe.value_type
    if pa.types.is_dictionary(build):
        build = build.value_type
    ints = (pa.types.is_integer(probe) and pa.types.is_integer(build)
            and not pa.types.is_uint64(probe) and not pa.types.is_uint64(build))
    if ints or (pa.types.is_date32(probe) and pa.types.is_date32(build)):
        return "int"
    strings = (pa.types.is_string(probe) or pa.types.is_large_string(probe)) and \
        (pa.types.is_string(build) or pa.types.is_large_string(build))
    return "string" if strings else None


def plan_key_filters(items: list) -> list[KeyFilterTarget]:
    """Return the key filters a pipeline's joins can push to its TableScan (``items`` source first), or through a
    LocalExchange source to the scans feeding it (targets that ``wait``).

    See the module docstring for when a key qualifies; the walk stops at the
    first item that could change a scan column's values or make rows that
    do not come from one scan row.
    """
    from gpu_engine.exec.local_planner import LocalExchangeSource
    from gpu_engine.plans.nodes import TableScanNode

    if not items:
        return []
    if isinstance(items[0], TableScanNode):
        scan = items[0]
        return _pipeline_targets(items[1:], scan, {name: name for name in scan.output_schema.names
                                                   if name in scan.columns}, waits=False)
    if isinstance(items[0], LocalExchangeSource):
        return [target for scan, origin in _scans_feeding(items[0].node)
                for target in _pipeline_targets(items[1:], scan, origin, waits=True)]
    return []


def _scans_feeding(node) -> list[tuple[Any, dict[str, str]]]:
    """Return each TableScan whose rows reach ``node``'s output unchanged, with its output name -> scan column map.

    Why these nodes only: a Filter keeps a subset of rows, a Project's column
    references rename, a LocalPartition passes rows on (by position, as a
    UNION ALL's branches line up): a row dropped at such a scan reaches the
    join with the same key, which no build key matches. Anything else (an
    aggregation, a join, a computed column) ends the walk.
    """
    from gpu_engine.plans.expressions import ColumnRef
    from gpu_engine.plans.nodes import FilterNode, LocalPartitionNode, ProjectNode, TableScanNode

    if isinstance(node, TableScanNode):
        return [(node, {name: name for name in node.output_schema.names if name in node.columns})]
    if isinstance(node, FilterNode):
        return _scans_feeding(node.sources[0])
    if isinstance(node, ProjectNode):
        return [(scan, renamed) for scan, origin in _scans_feeding(node.sources[0])
                if (renamed := {name: origin[expr.name] for name, expr in zip(node.names, node.expressions)
                                if isinstance(expr, ColumnRef) and expr.name in origin})]
    if isinstance(node, LocalPartitionNode):
        names = node.output_schema.names
        found = []
        for source in node.sources:
            by_position = dict(zip(source.output_schema.names, names))
            found += [(scan, renamed) for scan, origin in _scans_feeding(source)
                      if (renamed := {by_position[name]: column for name, column in origin.items()
                                      if name in by_position})]
        return found
    return []


def _pipeline_targets(items: list, scan, origin: dict[str, str], waits: bool) -> list[KeyFilterTarget]:
    """Return the key filters the joins among ``items`` (after the pipeline's source) push to ``scan``'s columns,
    ``origin`` naming the scan column of each source column that is one unchanged."""
    from gpu_engine.exec.local_planner import FusedFilterProject
    from gpu_engine.plans.expressions import ColumnRef
    from gpu_engine.plans.nodes import HashJoinNode

    schema = scan.output_schema
    targets: list[KeyFilterTarget] = []
    for item in items:
        if not origin:
            break
        if isinstance(item, FusedFilterProject):
            if item.project is not None:  # a filter keeps a subset of rows, values unchanged
                project = item.project
                origin = {name: origin[expr.name] for name, expr in zip(project.names, project.expressions)
                          if isinstance(expr, ColumnRef) and expr.name in origin}
        elif isinstance(item, HashJoinNode):
            if item.join_type in FILTERING_JOINS:
                build_schema = item.build.output_schema
                for index, (left, right) in enumerate(zip(item.left_keys, item.right_keys)):
                    if left not in origin or right not in build_schema.names:
                        continue
                    kind = _key_kind(schema.field(origin[left]).type, build_schema.field(right).type)
                    if kind is not None:
                        targets.append(KeyFilterTarget(item.id, index, scan.id, origin[left], kind, waits))
            if item.join_type not in _PASSING_JOINS:
                break
            probe_names = set(item.probe.output_schema.names)
            origin = {name: column for name, column in origin.items()
                      if name in item.output_columns and name in probe_names}
        else:
            break
    return targets


class JoinKeyFilter:
    """The probe keys that can match a finished build side: its key range and, where affordable, its key set.

    Made once per join on the host from the build side's key column
    (:meth:`of_build_keys`). ``low``/``high`` bound the non-NULL build keys
    (None for an empty build side: nothing matches). The set: integer keys
    spanning at most :data:`_TABLE_MAX_SPAN` values (dense keys, whatever the
    build's size: every TPC-H and TPC-DS key) are an exact table of bits, one
    a value (a bit, not a byte: a probe reads it at random, and a table that
    stays in cache was 2.4x faster than a byte a value over 6M values);
    sparser integer keys set bits in a Bloom-style table (false positives
    reach the probe, which drops them), and up to :data:`EXACT_SET_MAX_ROWS`
    build rows keep their sorted distinct ``values`` to test row groups;
    strings keep their sorted distinct ``values`` (up to
    :data:`STRING_SET_MAX_VALUES`), which probe rows test through a hash
    table of them made once per filter (:meth:`_prepared_strings`); else only
    the range is tested.
    """

    #: A join's filter (False) or a filter's own conjuncts tested in the scan
    #: (:class:`~gpu_engine.connectors.scan_predicates.ScanPredicate`: Parquet pieces only).
    static = False

    def __init__(self, column: str, kind: str, low: Any, high: Any, values: Any, join_id: str = "",
                 bits: np.ndarray | None = None, span: int | None = None, bloom_shift: int | None = None):
        self.column = column
        self.kind = kind
        self.low = low
        self.high = high
        self.values = values  # np.int64 array ("int") or a sorted Python list of str ("string"), or None
        self.join_id = join_id
        self._bits = bits  # packed little-endian: bit (key - low), with one clear bit at ``span`` for keys outside,
        self._span = span  # or, with ``bloom_shift``, bit (key * golden >> bloom_shift)
        self._bloom_shift = bloom_shift
        self._block_flags: np.ndarray | None = None
        self._value_set = None
        self._string_table: tuple | None = None
        if bits is None and values is not None and kind == "int" and len(values):
            self._bits, self._span, self._bloom_shift = _int_tables(np.asarray(values, dtype=np.int64), low, high)
        if values is not None and kind == "string":
            self._value_set = arrow_strings(values)

    @property
    def is_empty(self) -> bool:
        """Return True when no probe key can match (the build side has no non-NULL key)."""
        return self.low is None

    @property
    def is_exact(self) -> bool:
        """Return True when rows are tested against the build's key set (exactly or by Bloom), not only its range."""
        return self._bits is not None or self._value_set is not None

    def describe(self) -> str:
        """Return the filter in words, for logs and tests."""
        if self.is_empty:
            return f"{self.column}: nothing"
        values = self._sorted_values()
        count = "" if values is None else f", {len(values)} values"
        return f"{self.column} in [{self.low}, {self.high}]{count}"

    def _blocks(self) -> np.ndarray:
        """Return, per block of :data:`_BLOCK_BYTES` bytes of the exact table, whether any bit is set (made once)."""
        if self._block_flags is None:
            whole = len(self._bits) // _BLOCK_BYTES * _BLOCK_BYTES
            self._block_flags = self._bits[:whole].reshape(-1, _BLOCK_BYTES).any(axis=1)
        return self._block_flags

    def _prepared_strings(self) -> tuple:
        """Return the build strings' open-addressing hash table (slots, their hashes), Bloom-style bit table
        (bits, shift) and bytes (offsets, data), made on the first probe batch and kept.

        Why: ``pc.is_in`` rebuilt Arrow's hash set of the whole build side and re-cast it on every probe batch
        (~31 ms a run of TPC-DS q74 at SF1, profiled; 1.6K-38K strings a filter). Two scan threads racing here
        may both build it; either table is complete, and the last one is kept.
        """
        if self._string_table is None:
            offsets, data = _raw_string_buffers(self._value_set)[:2]
            size = 1 << max(4, (2 * len(self._value_set)).bit_length())  # at most half full
            slots = np.full(size, -1, dtype=np.int32)
            hashes = np.zeros(size, dtype=np.uint64)
            bloom_bits = max(_BLOOM_MIN_BITS, 8 * size)  # 16-32 bits a string
            shift = 64 - (bloom_bits.bit_length() - 1)
            bloom = np.zeros(bloom_bits // 8, dtype=np.uint8)
            _string_table_insert(offsets, data, slots, hashes, bloom, shift)
            self._string_table = (_read_only(slots), _read_only(hashes), _read_only(bloom), shift, offsets, data)
        return self._string_table

    def _sorted_values(self):
        """Return the sorted distinct keys (from an exact table, once), or None when only the range is known."""
        if self.values is None and self._span is not None:
            flags = np.unpackbits(self._bits, bitorder="little")[: self._span]
            self.values = np.flatnonzero(flags).astype(np.int64) + self.low
        return self.values

    @classmethod
    def of_build_keys(cls, device: "Device", key: "Column", column: str, kind: str, join_id: str = "") -> "JoinKeyFilter":
        """Return the filter of a build side's key column (copied to the host once)."""
        array = key.to_arrow(device)
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        array = array.drop_null()
        if len(array) == 0:
            return cls(column, kind, None, None, None, join_id)
        exact = len(array) <= EXACT_SET_MAX_ROWS
        if kind == "int":
            numbers = _int64_values(array)[0]
            low, high = int(numbers.min()), int(numbers.max())
            bits, span, shift = _int_tables(numbers, low, high)
            values = None
            if span is None and exact:  # sorted distinct keys for row groups (a sort: numpy's hash unique was slower)
                values = np.sort(numbers)
                values = values[np.concatenate(([True], values[1:] != values[:-1]))]
            return cls(column, kind, low, high, values, join_id, bits, span, shift)
        distinct = pc.unique(array) if exact else None
        if distinct is not None and len(distinct) <= STRING_SET_MAX_VALUES:
            values = sorted(distinct.to_pylist())
            return cls(column, kind, values[0], values[-1], values, join_id)
        bounds = pc.min_max(array)
        return cls(column, kind, bounds["min"].as_py(), bounds["max"].as_py(), None, join_id)

    # ------------------------------------------------------------ row groups
    def may_match(self, minimum: Any, maximum: Any) -> bool:
        """Return False only when no value in ``[minimum, maximum]`` (a row group's statistics) can match."""
        if self.is_empty:
            return False
        if minimum is None or maximum is None:
            return True
        if self.kind == "int":
            minimum, maximum = _as_int(minimum), _as_int(maximum)
            if minimum is None or maximum is None:
                return True
        elif not (isinstance(minimum, str) and isinstance(maximum, str)):
            return True
        if maximum < self.low or minimum > self.high:
            return False
        if self._span is not None:  # read the table itself: no list of keys is made
            return _any_bit(self._bits, self._blocks(), max(minimum, self.low) - self.low,
                            min(maximum, self.high) - self.low)
        values = self.values
        if values is None:
            return True
        if self.kind == "int":
            at = int(np.searchsorted(values, minimum, side="left"))
        else:
            at = bisect.bisect_left(values, minimum)
        return at < len(values) and values[at] <= maximum

    # ------------------------------------------------------------------ rows
    def mask(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Return, per row of a probe column, whether its key can match (False for NULL)."""
        array = _probe_array(array)
        if self.is_empty:
            return np.zeros(len(array), dtype=np.bool_)
        if pa.types.is_dictionary(array.type):  # test each distinct value once, then look the codes up
            on_values = self.mask(array.dictionary)
            codes = array.indices
            valid = None
            if codes.null_count:
                valid = numpy_validity(codes)
            codes = numpy_values(codes) if valid is None else np.where(valid, numpy_values(codes), 0)
            keep = on_values[codes] if len(on_values) else \
                np.zeros(len(array), dtype=np.bool_)
            return keep if valid is None else keep & valid
        if self.kind == "int":
            return self._int_mask(array)
        return self._string_mask(array)

    def keep_into(self, array: pa.Array | pa.ChunkedArray, keep: np.ndarray, first: bool) -> int:
        """Clear ``keep`` where a row of a probe column cannot match; return how many rows this filter dropped.

        ``first``: ``keep`` holds nothing yet (every row is tested and written); else only rows ``keep`` still
        holds are tested, so a scan's later filters cost little once an earlier one dropped most rows. Integer
        and date keys are tested in one compiled pass over Arrow's own buffers (values of any width, the
        validity bitmap), with no conversion: a probe column with NULLs (TPC-DS's fact keys) took five NumPy
        passes (validity, fill, widen, test, combine) before the test itself.
        """
        array = _probe_array(array)
        buffers = _raw_int_buffers(array) if self.kind == "int" and not self.is_empty else None
        if buffers is None:
            matched = self.mask(array)
            if first:
                keep[:] = matched
                return int(len(matched) - np.count_nonzero(matched))
            dropped = int(np.count_nonzero(keep & ~matched))
            keep &= matched
            return dropped
        values, validity, offset = buffers
        if self._bits is None:
            return int(_range_keep(values, validity, offset, self.low, self.high, keep, first))
        if self._span is not None:
            return int(_table_keep(values, validity, offset, self.low, self.high, self._bits, keep, first))
        return int(_bloom_keep(values, validity, offset, self.low, self.high, self._bits, self._bloom_shift, keep,
                               first))

    def _int_mask(self, array: pa.Array) -> np.ndarray:
        numbers, valid = _int64_values(array)
        keep = np.empty(len(numbers), dtype=np.bool_)
        if self._bits is None:
            _range_mask(numbers, self.low, self.high, keep)
        elif self._span is not None:
            _table_mask(numbers, self.low, self.high, self._bits, keep)
        else:
            _bloom_mask(numbers, self.low, self.high, self._bits, self._bloom_shift, keep)
        return keep if valid is None else keep & valid

    def _string_mask(self, array: pa.Array) -> np.ndarray:
        if self._value_set is not None:
            buffers = _raw_string_buffers(array)
            if buffers is not None:  # the build side's hash table, made once per filter, probed in one pass
                keep = np.empty(len(array), dtype=np.bool_)
                _string_keep(*buffers, *self._prepared_strings(), keep)
                return keep
            matched = pc.is_in(array, value_set=self._value_set.cast(array.type))
        else:
            matched = pc.and_(pc.greater_equal(array, pa.scalar(self.low, array.type)),
                              pc.less_equal(array, pa.scalar(self.high, array.type)))
        return numpy_values(matched) & numpy_validity(matched)  # NULL: False


def _int_tables(numbers: np.ndarray, low: int, high: int) -> tuple[np.ndarray, int | None, int | None]:
    """Return integer keys' bit table: exact over ``[low, high]`` (bits, span, None) when the span allows, else a
    Bloom-style one (bits, None, shift)."""
    if high - low < _TABLE_MAX_SPAN:
        span = high - low + 1
        bits = np.zeros((span + 8) // 8, dtype=np.uint8)  # the last bit, clear, is where keys outside the range look
        _set_offset_bits(numbers, np.int64(low), bits)
        return bits, span, None
    size = min(_BLOOM_MAX_BITS, max(_BLOOM_MIN_BITS, 1 << int(16 * len(numbers) - 1).bit_length()))
    shift = 64 - (size.bit_length() - 1)
    bits = np.zeros(size // 8, dtype=np.uint8)
    _set_hashed_bits(numbers, shift, bits)
    return bits, None, shift


# The bit tables are set in one numba pass, bit by bit, in np.packbits' little bit order. Why: a bool a value
# (up to 64 MiB for the exact table, 16 MiB for the hashed one) written at random and then packed cost a join of
# 10M sparse build keys 114 ms of its last build driver's serial time (joinbuild-s54 results).
@njit(nogil=True, cache=True)
def _set_offset_bits(numbers, low, bits):  # pragma: no cover - compiled
    for i in range(numbers.shape[0]):
        at = numbers[i] - low  # no overflow: high - low < _TABLE_MAX_SPAN
        bits[at >> 3] |= np.uint8(1 << (at & 7))


@njit(nogil=True, cache=True)
def _set_hashed_bits(numbers, shift, bits):  # pragma: no cover - compiled
    for i in range(numbers.shape[0]):
        position = (np.uint64(numbers[i]) * _GOLDEN) >> np.uint64(shift)
        bits[position >> np.uint64(3)] |= np.uint8(1 << (position & np.uint64(7)))


# One pass a probe column on the host (numba, without the GIL, so prefetch threads test rows in parallel): the
# same tests as NumPy expressions took ~14 ns a row in 7 passes, as much as the probe work a dropped row saves.
@njit(nogil=True, cache=True)
def _range_mask(numbers, low, high, keep):  # pragma: no cover - compiled
    for i in range(numbers.shape[0]):
        keep[i] = low <= numbers[i] <= high


@njit(nogil=True, cache=True)
def _table_mask(numbers, low, high, bits, keep):  # pragma: no cover - compiled
    for i in range(numbers.shape[0]):
        value = numbers[i]
        if value < low or value > high:
            keep[i] = False
        else:
            offset = value - low  # no overflow: high - low < _TABLE_MAX_SPAN
            keep[i] = (bits[offset >> 3] >> (offset & 7)) & 1 == 1


@njit(nogil=True, cache=True)
def _bloom_mask(numbers, low, high, bits, shift, keep):  # pragma: no cover - compiled
    golden = np.uint64(0x9E3779B97F4A7C15)
    for i in range(numbers.shape[0]):
        value = numbers[i]
        if value < low or value > high:
            keep[i] = False
        else:
            position = (np.uint64(value) * golden) >> np.uint64(shift)
            keep[i] = (bits[position >> np.uint64(3)] >> (position & np.uint64(7))) & 1 == 1


# The same tests over Arrow's buffers (any integer width; the validity bitmap read in place), AND-ed into ``keep``
# (``first``: written), rows already dropped skipped; each returns the rows it dropped.
@njit(nogil=True, cache=True)
def _valid_at(validity, offset, i):  # pragma: no cover - compiled
    if validity.shape[0] == 0:
        return True
    j = i + offset
    return (validity[j >> 3] >> (j & 7)) & 1 == 1


@njit(nogil=True, cache=True)
def _range_keep(values, validity, offset, low, high, keep, first):  # pragma: no cover - compiled
    dropped = 0
    for i in range(values.shape[0]):
        if first or keep[i]:
            value = np.int64(values[i])
            passes = _valid_at(validity, offset, i) and low <= value <= high
            keep[i] = passes
            dropped += not passes
    return dropped


@njit(nogil=True, cache=True)
def _table_keep(values, validity, offset, low, high, bits, keep, first):  # pragma: no cover - compiled
    dropped = 0
    for i in range(values.shape[0]):
        if first or keep[i]:
            value = np.int64(values[i])
            passes = False
            if low <= value <= high and _valid_at(validity, offset, i):
                at = value - low  # no overflow: high - low < _TABLE_MAX_SPAN
                passes = (bits[at >> 3] >> (at & 7)) & 1 == 1
            keep[i] = passes
            dropped += not passes
    return dropped


@njit(nogil=True, cache=True)
def _bloom_keep(values, validity, offset, low, high, bits, shift, keep, first):  # pragma: no cover - compiled
    golden = np.uint64(0x9E3779B97F4A7C15)
    dropped = 0
    for i in range(values.shape[0]):
        if first or keep[i]:
            value = np.int64(values[i])
            passes = False
            if low <= value <= high and _valid_at(validity, offset, i):
                position = (np.uint64(value) * golden) >> np.uint64(shift)
                passes = (bits[position >> np.uint64(3)] >> (position & np.uint64(7))) & 1 == 1
            keep[i] = passes
            dropped += not passes
    return dropped


def _read_only(array: np.ndarray) -> np.ndarray:
    """Return ``array`` marked read-only (a view's flag, O(1)).

    Why: numba compiles a kernel once per argument type, and a read-only array is a type of its own; a buffer
    Arrow allocated is read-only, one over the engine's own NumPy array is not. Marked alike, the row tests
    have one signature per integer width, which ``gpu-engine precompile`` compiles (:func:`precompile_calls`).
    """
    array.flags.writeable = False
    return array


_NO_VALIDITY = _read_only(np.zeros(0, dtype=np.uint8))
#: The integer widths :func:`_raw_int_buffers` hands the row tests (dates as int32; uint64 keys get none).
_RAW_WIDTHS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32)


def _probe_array(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A scan's Arrow column as one array of the type its rows have in the scan's schema: a date64 (a user's
    registered table) as the days it is read as (as :meth:`gpu_engine.columnar.column.Column.from_arrow` casts
    it); its milliseconds tested against a filter of days dropped every row of a join on it but 1970-01-01's."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pa.types.is_date64(array.type):
        array = array.cast(pa.date32(), safe=False)
    return array


def _raw_int_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Return an integer or date column's values and validity bitmap as NumPy views of its buffers (no copy; an
    empty bitmap: no NULLs) and the bitmap's bit offset, or None for another layout (a dictionary)."""
    dtype = array.type
    if pa.types.is_date32(dtype):
        numpy_type = np.int32
    elif pa.types.is_integer(dtype) and not pa.types.is_uint64(dtype):
        numpy_type = dtype.to_pandas_dtype()
    else:
        return None
    validity_buffer, data = array.buffers()[:2]
    if data is None:
        return None
    values = _read_only(np.frombuffer(data, dtype=numpy_type, count=array.offset + len(array))[array.offset:])
    if array.null_count == 0 or validity_buffer is None:
        return values, _NO_VALIDITY, 0
    return values, _read_only(np.frombuffer(validity_buffer, dtype=np.uint8)), array.offset


_EMPTY_BYTES = _read_only(np.zeros(0, dtype=np.uint8))


def _raw_string_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Return a string column's offsets (int32 or int64, from its first row), bytes and validity bitmap (empty: no
    NULLs) as NumPy views of its buffers and the bitmap's bit offset, or None for another layout (string views)."""
    dtype = array.type
    if pa.types.is_string(dtype) or pa.types.is_binary(dtype):
        offset_type = np.int32
    elif pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype):
        offset_type = np.int64
    else:
        return None
    validity_buffer, offsets_buffer, data_buffer = array.buffers()[:3]
    if offsets_buffer is None or offsets_buffer.size < (array.offset + len(array) + 1) * np.dtype(offset_type).itemsize:
        return None  # an empty column may have no offsets
    offsets = _read_only(np.frombuffer(offsets_buffer, dtype=offset_type,
                                       count=array.offset + len(array) + 1)[array.offset:])
    data = _EMPTY_BYTES if data_buffer is None or data_buffer.size == 0 else \
        _read_only(np.frombuffer(data_buffer, dtype=np.uint8))
    if array.null_count == 0 or validity_buffer is None:
        return offsets, data, _NO_VALIDITY, 0
    return offsets, data, _read_only(np.frombuffer(validity_buffer, dtype=np.uint8)), array.offset


# An exact string set without Arrow's per-call hash set: the build side's distinct strings hashed once (64 bits,
# eight bytes a step) into an open-addressing table of their indexes, and a Bloom-style bit table of the same
# hashes (16 bits a string: it stays in cache, and most probe rows of a selective join stop at its clear bit); a
# probe string whose hash matches a slot's is compared byte by byte with that build string, so the test is exact.
@njit(nogil=True, cache=True)
def _string_hash(offsets, data, i):  # pragma: no cover - compiled
    start, stop = offsets[i], offsets[i + 1]
    value = np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(stop - start)
    while start < stop:
        word = np.uint64(0)
        if stop - start >= 8:  # a whole word, unrolled
            word = (np.uint64(data[start]) | np.uint64(data[start + 1]) << np.uint64(8)
                    | np.uint64(data[start + 2]) << np.uint64(16) | np.uint64(data[start + 3]) << np.uint64(24)
                    | np.uint64(data[start + 4]) << np.uint64(32) | np.uint64(data[start + 5]) << np.uint64(40)
                    | np.uint64(data[start + 6]) << np.uint64(48) | np.uint64(data[start + 7]) << np.uint64(56))
        else:
            for k in range(stop - start):
                word |= np.uint64(data[start + k]) << np.uint64(8 * k)
        value = (value ^ word) * np.uint64(0xFF51AFD7ED558CCD)
        value ^= value >> np.uint64(32)
        start += 8
    value = (value ^ (value >> np.uint64(29))) * np.uint64(0xC4CEB9FE1A85EC53)
    return value ^ (value >> np.uint64(32))


@njit(nogil=True, cache=True)
def _string_table_insert(offsets, data, slots, hashes, bloom, shift):  # pragma: no cover - compiled
    mask = np.uint64(slots.shape[0] - 1)
    for i in range(offsets.shape[0] - 1):  # distinct strings: no duplicate to look for
        value = _string_hash(offsets, data, i)
        position = value >> np.uint64(shift)
        bloom[position >> np.uint64(3)] |= np.uint8(1) << np.uint8(position & np.uint64(7))
        at = value & mask
        while slots[at] >= 0:
            at = (at + np.uint64(1)) & mask
        slots[at] = i
        hashes[at] = value


@njit(nogil=True, cache=True)
def _string_keep(offsets, data, validity, offset, slots, hashes, bloom, shift, ends, chars, keep):  # pragma: no cover
    mask = np.uint64(slots.shape[0] - 1)
    for i in range(offsets.shape[0] - 1):
        found = False
        if _valid_at(validity, offset, i):
            value = _string_hash(offsets, data, i)
            position = value >> np.uint64(shift)
            if (bloom[position >> np.uint64(3)] >> (position & np.uint64(7))) & 1 == 1:
                start, length = offsets[i], offsets[i + 1] - offsets[i]
                at = value & mask
                while slots[at] >= 0 and not found:
                    if hashes[at] == value:
                        k = slots[at]
                        other = ends[k]  # the build strings' offsets and bytes
                        if ends[k + 1] - other == length:
                            found = True
                            for j in range(length):
                                if data[start + j] != chars[other + j]:
                                    found = False
                                    break
                    at = (at + np.uint64(1)) & mask
        keep[i] = found


def precompile_calls(device: "Device") -> list[tuple[Any, tuple]]:
    """Return the row tests with arguments of every type :meth:`JoinKeyFilter.keep_into` and
    :meth:`JoinKeyFilter.mask` give them (placeholders; ``gpu-engine precompile`` compiles each signature at
    set-up, :mod:`gpu_engine.codegen.static_kernels`, so a fresh install's first join compiles none on a driver).
    """
    keep, bits = np.zeros(1, dtype=np.bool_), np.zeros(1, dtype=np.uint8)
    calls = []
    for width in _RAW_WIDTHS:
        values = _read_only(np.zeros(1, dtype=width))
        calls += [(_range_keep, (values, _NO_VALIDITY, 0, 0, 0, keep, True)),
                  (_table_keep, (values, _NO_VALIDITY, 0, 0, 0, bits, keep, True)),
                  (_bloom_keep, (values, _NO_VALIDITY, 0, 0, 0, bits, 0, keep, True))]
    for writable in (True, False):  # mask() of a dictionary's values: int64 viewed (read-only) or converted
        numbers = np.zeros(1, dtype=np.int64)
        numbers.flags.writeable = writable
        calls += [(_range_mask, (numbers, 0, 0, keep)), (_table_mask, (numbers, 0, 0, bits, keep)),
                  (_bloom_mask, (numbers, 0, 0, bits, 0, keep))]
    slots, hashes = _read_only(np.zeros(1, dtype=np.int32)), _read_only(np.zeros(1, dtype=np.uint64))
    build_offsets = _read_only(np.zeros(1, dtype=np.int64))
    calls.append((_string_table_insert, (build_offsets, _EMPTY_BYTES, np.zeros(1, dtype=np.int32),
                                         np.zeros(1, dtype=np.uint64), np.zeros(1, dtype=np.uint8), 0)))
    bloom = _read_only(np.zeros(1, dtype=np.uint8))
    for width in (np.int32, np.int64):  # string and large_string probe columns
        offsets = _read_only(np.zeros(1, dtype=width))
        calls.append((_string_keep, (offsets, _EMPTY_BYTES, _NO_VALIDITY, 0, slots, hashes, bloom, 0, build_offsets,
                                     _EMPTY_BYTES, keep)))
    return calls


#: Bytes of an exact bit table summarized by one flag, so that a row group's range is tested in O(range / 4096).
_BLOCK_BYTES = 512


def _any_bit(bits: np.ndarray, blocks: np.ndarray, first: int, last: int) -> bool:
    """Return True when any bit ``first..last`` (inclusive) of a little-endian packed table is set."""
    first_byte, last_byte = first >> 3, last >> 3
    if first_byte == last_byte:
        return bool(int(bits[first_byte]) & (((1 << (last - first + 1)) - 1) << (first & 7)))
    if int(bits[first_byte]) >> (first & 7) or int(bits[last_byte]) & ((1 << ((last & 7) + 1)) - 1):
        return True
    start, stop = first_byte + 1, last_byte  # whole bytes between: blocks where whole, bytes at the edges
    block_start, block_stop = -(-start // _BLOCK_BYTES), min(stop // _BLOCK_BYTES, len(blocks))
    if block_start >= block_stop:
        return bool(bits[start:stop].any())
    return bool(bits[start:block_start * _BLOCK_BYTES].any() or blocks[block_start:block_stop].any()
                or bits[block_stop * _BLOCK_BYTES:stop].any())


def _as_int(value: Any) -> int | None:
    """Return a statistics value as the integer the filter compares (dates as days), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return (value - _EPOCH).days
    return None


def _int64_values(array: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """Return an integer or date column's values as int64 (NULLs as 0) and its validity (None: no NULLs)."""
    if pa.types.is_date32(array.type):
        array = array.view(pa.int32())
    valid = None
    if array.null_count:
        valid = numpy_validity(array)
    values = numpy_values(array)  # read-only, as to_numpy gave them: numba types writable arrays apart
    if valid is not None:
        values = np.where(valid, values, np.zeros(1, dtype=values.dtype))
        values.flags.writeable = False
    return np.asarray(values, dtype=np.int64), valid


class DynamicFilters:
    """The Task's key filters by TableScan node: the build sides add them, the scans read them.

    Thread-safe: build drivers add while other pipelines' scans read.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._by_scan: dict[str, tuple[JoinKeyFilter, ...]] = {}
        self._expected: dict[str, tuple[Future, ...]] = {}  # scan -> publications of the joins it waits for

    def add(self, scan_id: str, key_filter: JoinKeyFilter) -> None:
        """Add one filter on a scan's column (filters on one scan all apply: their conjunction)."""
        with self._lock:
            self._by_scan[scan_id] = self._by_scan.get(scan_id, ()) + (key_filter,)

    def for_scan(self, scan_id: str) -> tuple[JoinKeyFilter, ...]:
        """Return the filters on ``scan_id`` added so far."""
        return self._by_scan.get(scan_id, ())

    def expect(self, scan_id: str, published: Future) -> None:
        """Make ``scan_id`` wait for ``published`` (a join's table, its filters added first) before its first split.

        Why: a scan feeding a probe through a local exchange runs in a pipeline no HashProbe blocks; unasked, it
        would read before the build side is done and its filters come too late to drop anything.
        """
        with self._lock:
            self._expected[scan_id] = self._expected.get(scan_id, ()) + (published,)

    def pending(self, scan_id: str) -> Future | None:
        """Return a publication ``scan_id`` still waits for, or None once all are done (or none expected)."""
        return next((future for future in self._expected.get(scan_id, ()) if not future.done()), None)
