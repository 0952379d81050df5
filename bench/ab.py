"""A/B one SQL text with one engine change switched off and on, and DuckDB, by process CPU beside wall.

Why: on a loaded shared machine wall times swing; the process CPU (user+sys) of each run is steadier, and
runs of the two sides interleaved in one process see the same load. Each change is a named switch
(:data:`SWITCHES`: what it replaces while off); two Sessions plan and run the text, one per side, with the
switch set before each of its runs, so plans cached by a Session are the side's own. Both answers are checked
against DuckDB first, both wait for their compiled tier, then ``--runs`` interleaved runs (DuckDB, then the
two sides, their order alternating by run) give medians, and the scans' counts of the last "with" run are
printed where a scan dropped rows.
TPC-H texts are the specification's (``tpch.spec_sql``), TPC-DS texts ``bench.tpcds``'s.

    python bench/ab.py late-materialization tpcds 7 --sf 1 --runs 5
    python bench/ab.py scan-predicates tpch 12 --sf 1 --runs 7
    python bench/ab.py eager-aggregation tpch 10 --sf 1 --runs 5
    python bench/ab.py one-row-extremes tpcds 23 --sf 1 --runs 7
    python bench/ab.py distinct-branches tpcds 38 --sf 1 --runs 9
    python bench/ab.py union-flattening tpcds 5 --sf 1 --runs 7
    python bench/ab.py union-pruning tpcds 11 --sf 1 --runs 7
    python bench/ab.py radix-aggregation tpch 18 --sf 1 --runs 7
    python bench/ab.py build-dictionaries tpcds 23 --sf 1 --runs 7
    python bench/ab.py outgrown-dictionaries tpcds 65 --sf 1 --runs 9
    python bench/ab.py shared-subexpressions tpcds 28 --sf 1 --runs 5
    python bench/ab.py window-subqueries tpch 2 --sf 1 --runs 7
    python bench/ab.py partial-steps tpch 10 --sf 1 --runs 7
    python bench/ab.py distinct-partitioning tpch 16 --sf 1 --runs 7
    python bench/ab.py exchange-keys tpch 10 --sf 1 --runs 9
    python bench/ab.py unique-groupings tpch 10 --sf 1 --runs 9
    python bench/ab.py deferred-columns tpch 10 --sf 1 --runs 9
    python bench/ab.py wide-sum-fusion tpcds 11 --sf 0.1 --runs 7
    python bench/ab.py key-set-estimates tpcds 72 --sf 1 --runs 7
    python bench/ab.py pre-aggregation-setup tpcds 21 --sf 1 --runs 7
    python bench/ab.py eager-estimates tpcds 66 --sf 1 --runs 9 --compile-mode lowest
    python bench/ab.py intersected-estimates tpcds 74 --sf 1 --runs 7
    python bench/ab.py constant-arithmetic-estimates tpcds 11 --sf 1 --runs 7
    python bench/ab.py distinct-semi-joins tpcds 95 --sf 1 --runs 7
    python bench/ab.py value-bounds tpcds 16 --sf 1 --runs 7
    python bench/ab.py union-key-filters tpcds 5 --sf 1 --runs 7
    python bench/ab.py node-setups tpcds 66 --sf 1 --runs 9
    python bench/ab.py file-versions tpcds 25 --sf 1 --runs 9
    python bench/ab.py string-key-growth tpch 10 --sf 1 --runs 7
    python bench/ab.py string-key-fusion tpch 10 --sf 1 --runs 9
    python bench/ab.py string-key-growth dbbench 10 --sf 1 --runs 7  (db-benchmark groupby from memory; --sf: millions of rows)
    python bench/ab.py abandoned-partial-sizing dbbench 10 --sf 10 --runs 9 --one-session
    python bench/ab.py string-table-sizing dbbench 10 --sf 10 --runs 5 --one-session
    python bench/ab.py partition-slots dbbench 8 --sf 10 --runs 9
    python bench/ab.py id-slots dbbench 3 --sf 10 --runs 9
    python bench/ab.py intern-through-map dbbench 10 --sf 5 --runs 9 --one-session
    python bench/ab.py value-words dbbench 6 --sf 10 --runs 9
    python bench/ab.py moment-rows dbbench 9 --sf 10 --runs 9
    python bench/ab.py new-group-rate dbbench 9 --sf 5 --runs 9 --one-session
    python bench/ab.py kept-positions tpcds 72 --sf 1 --runs 7
    python bench/ab.py kept-row-groups tpcds 39 --sf 1 --runs 7
    python bench/ab.py top-n-narrowing tpcds 57 --sf 1 --runs 9
    python bench/ab.py dense-decision tpcds 39 --sf 1 --runs 9
    python bench/ab.py string-key-tables tpcds 74 --sf 1 --runs 9
    python bench/ab.py group-growth tpcds 39 --sf 1 --runs 7
    python bench/ab.py narrow-keys tpcds 39 --sf 1 --runs 9
    python bench/ab.py hashed-probes dbbench 2 --sf 10 --runs 9
    python bench/ab.py dense-keys dbbench 9 --sf 10 --runs 9
    python bench/ab.py head-words dbbench 7 --sf 10 --runs 9
    python bench/ab.py validity-code-prefetch tpcds 39 --sf 1 --runs 9
    python bench/ab.py joint-key-partial-steps tpcds 39 --sf 1 --runs 9
    python bench/ab.py growth-stops dbbench 7 --sf 10 --runs 9
    python bench/ab.py final-rows dbbench 7 --sf 10 --runs 9
    python bench/ab.py canonical-dictionaries tpch 12 --sf 1 --runs 9
    python bench/ab.py fixed-width-case tpcds 9 --sf 1 --runs 5 --compile-mode lowest  (the lowest tier alone)
    python bench/ab.py one-slot-states tpcds 9 --sf 1 --runs 7 --compile-mode lowest
    python bench/ab.py plain-string-keys tpcds 4 --sf 1 --runs 5 --compile-mode lowest
    python bench/ab.py two-valued-filters tpcds 28 --sf 1 --runs 7 --compile-mode lowest
    python bench/ab.py one-branch-case tpcds 2 --sf 1 --runs 7 --compile-mode lowest
    python bench/ab.py fused-moments tpcds 39 --sf 1 --runs 7  (moments in the fused kernel)
    python bench/ab.py file-page-release tpch 1 --sf 1 --runs 7
    python bench/ab.py file-page-pool tpch 1 --sf 1 --runs 7
    python bench/ab.py idle-release tpch 18 --sf 1 --runs 7
    python bench/ab.py optimizer-rules tpcds 11 --sf 1 --runs 5
    python bench/ab.py eager-aggregation tpcds 22 --sf 1 --runs 7  (optimizer.eager_aggregation off)
    python bench/ab.py build-sides tpch 18 --sf 1 --runs 7  (also build-sides-2x)
    python bench/ab.py typed-build-sides tpch 18 --sf 1 --runs 7
    python bench/ab.py correlated-keys tpcds 17 --sf 1 --runs 7
    python bench/ab.py typed-join-order tpcds 72 --sf 1 --runs 7
    python bench/ab.py aggregate-slices tpcds 66 --sf 1 --runs 7  (without: every aggregation one kernel)
"""
import argparse
import os
import statistics
import sys

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.tpcds_cpu import measure  # noqa: E402  (process CPU beside wall, one definition for the benches)

COUNTS = ("decode_seconds", "dynamic_filter_rows_dropped", "late_materialized_rows_skipped",
          "late_materialized_row_groups_skipped")


def _late_materialization():
    """Join-filtered scans read whole, then filtered (``gpu_engine.connectors.late_materialization`` off)."""
    import gpu_engine.operators.table_scan as module
    return module, "read_filtered_piece", lambda *args, **kwargs: None


def _scan_predicates():
    """A Filter's single-column conjuncts tested by the Filter only, after the scan decoded every row
    (``gpu_engine.connectors.scan_predicates`` off)."""
    import gpu_engine.connectors.scan_predicates as module
    return module, "plan_scan_predicates", lambda items: []


def _eager_aggregation():
    """The optimizer without eager aggregation below joins (``gpu_engine.optimizer.eager_aggregation`` left out
    of ``ESTIMATE_RULES``)."""
    import gpu_engine.optimizer as module
    from gpu_engine.optimizer.eager_aggregation import eager_aggregate
    return module, "ESTIMATE_RULES", tuple(rule for rule in module.ESTIMATE_RULES if rule is not eager_aggregate)


def _one_row_extremes():
    """A grouped query's one-row FROM item read through max/min per input row (``sql.one_row_extremes`` off)."""
    import gpu_engine.sql.planner as module
    return module, "with_one_row_extremes_lifted", lambda select, ctes: select


def _distinct_branches():
    """A distinct set operation's branches keep their own SELECT DISTINCT, a UNION chain its inner grouping
    (``optimizer.distinct_branches`` out of ``gpu_engine.optimizer.RULES``)."""
    import gpu_engine.optimizer as module
    return module, "RULES", tuple(r for r in module.RULES if r.__name__ != "drop_redundant_distincts")


def _union_flattening():
    """A UNION ALL chain runs as nested LocalPartitions of two branches each (``optimizer.union_flattening`` out
    of ``gpu_engine.optimizer.RULES``)."""
    import gpu_engine.optimizer as module
    return module, "RULES", tuple(r for r in module.RULES if r.__name__ != "flatten_unions")


def _radix_aggregation():
    """Every aggregation in one slot table a driver (``FusedAggregation._radix_hold`` never holds: no radix
    partitions, neither decided before the first batch nor switched to at run time)."""
    from gpu_engine.operators.fused_aggregation import FusedAggregation
    return FusedAggregation, "_radix_hold", lambda self, batch: False


def _union_pruning():
    """Every column of a LocalPartition stays (``projection_pruning._pruned_union`` off): a UNION ALL branch, or a
    CTE's union with its other branches emptied, carries the columns its select list named to the exchange."""
    import gpu_engine.optimizer.projection_pruning as module
    return module, "_pruned_union", lambda node, required: module._with_sources(
        node, tuple(module._pruned(source, None) for source in node.sources))


def _shared_subexpressions():
    """The kernel size bound counting every repeat of a subexpression (``kernel_bounds.kernel_nodes`` off)."""
    import gpu_engine.codegen.kernel_bounds as module
    return module, "kernel_nodes", lambda expressions, limit, in_list_values=True: module.expression_nodes(
        expressions, limit, in_list_values)


def _linear_keep():
    """Later join-key filters' kept rows merged by sorting (``np.intersect1d``), as before ``_both_keep``."""
    import numpy as np

    import gpu_engine.connectors.late_materialization as module
    return module, "_both_keep", lambda kept, rows, count: np.intersect1d(kept, rows, assume_unique=True).astype(
        np.int32)


def _pinned_statistics():
    """A Filter's estimate capping every column's distinct count at its rows only (``filtered_statistics`` off)."""
    import gpu_engine.sql.predicates as module
    return module, "pinned_statistics", lambda relation, conjuncts, rows: {
        name: stats.capped(rows) for name, stats in relation.stats.items()}


def _late_cut_share():
    """Host scans reading late up to 1/8 of a piece kept (``CUT_BELOW_SHARE``), as before ``LATE_CUT_SHARE``."""
    import gpu_engine.operators.table_scan as module
    from gpu_engine.connectors.runtime_filters import CUT_BELOW_SHARE
    return module, "LATE_CUT_SHARE", CUT_BELOW_SHARE


def _window_subqueries():
    """Correlated MIN/MAX/AVG subqueries over the outer join decorrelated, not windows (``window_subqueries`` off)."""
    import gpu_engine.sql.planner as module
    return module, "with_subqueries_as_windows", lambda select: select


def _set_partial_steps(on: bool) -> None:
    import gpu_engine.optimizer as module
    from gpu_engine.optimizer.partial_steps import choose_partial_steps
    rules = tuple(r for r in module.ESTIMATE_RULES if r is not choose_partial_steps)
    module.ESTIMATE_RULES = rules + (choose_partial_steps,) if on else rules


def _partial_steps():
    """Every GROUP BY split into partial and final steps, as before ``gpu_engine.optimizer.partial_steps`` (its rule
    out of ``gpu_engine.optimizer.ESTIMATE_RULES``)."""
    return _Setting(_set_partial_steps), "value", "off"


def _unique_groupings():
    """Every GROUP BY kept where its input is proven unique on its keys (``optimizer.unique_groupings`` out of
    ``gpu_engine.optimizer.ESTIMATE_RULES``)."""
    import gpu_engine.optimizer as module
    from gpu_engine.optimizer.unique_groupings import drop_unique_groupings
    return module, "ESTIMATE_RULES", tuple(rule for rule in module.ESTIMATE_RULES if rule is not drop_unique_groupings)


def _deferred_columns():
    """A top N's carried strings decoded and gathered for every row below it (``optimizer.deferred_columns`` out of
    ``gpu_engine.optimizer.ESTIMATE_RULES``)."""
    import gpu_engine.optimizer as module
    from gpu_engine.optimizer.deferred_columns import defer_carried_columns
    return module, "ESTIMATE_RULES", tuple(rule for rule in module.ESTIMATE_RULES if rule is not defer_carried_columns)


def _exchange_keys():
    """Every final aggregation's exchange hashing all its keys, strings too (``optimizer.exchange_keys`` out of
    ``gpu_engine.optimizer.ESTIMATE_RULES``)."""
    import gpu_engine.optimizer as module
    from gpu_engine.optimizer.exchange_keys import choose_exchange_keys
    return module, "ESTIMATE_RULES", tuple(rule for rule in module.ESTIMATE_RULES if rule is not choose_exchange_keys)


def _distinct_partitioning():
    """A DISTINCT under a GROUP BY repartitioned by all its keys, as before ``local_exchanges.distinct_partition_keys``
    (the GROUP BY above then has a partial step, an exchange and a final step of its own)."""
    import gpu_engine.planning.local_exchanges as module
    return module, "distinct_partition_keys", lambda node: ()


def _wide_sum_fusion():
    """Raw sum/avg/count of a decimal(p > 18) column left unfused (``fusion_program.HighWord`` off): the
    re-aggregation above eager aggregation ran on the eager operators."""
    import gpu_engine.planning.fusion as module
    from gpu_engine.codegen.fusion_program import may_be_wide
    from gpu_engine.plans.expressions import ColumnRef
    original = module.fusion_refusal

    def refusal(node):
        if node.step.input_is_raw and any(isinstance(call.arg, ColumnRef) and may_be_wide(call.arg.dtype)
                                          for call in node.aggregates):
            return "a wide decimal column"
        return original(node)
    return module, "fusion_refusal", refusal


def _canonical_dictionaries():
    """Each row group's string dictionary kept in the writer's order, not recoded onto the file column's canonical
    one (``parquet_columns.CanonicalDictionary``; a measurement switch: stop 53 measured the recode costing more
    than it saved on TPC-H q1/q12 and TPC-DS q7, until 6212363 kept each row-group dictionary's mapping: since
    then off/on is ~1.00x on cpu, and on cuda the recode saves launches)."""
    import gpu_engine.connectors.parquet_columns as module
    return module, "CANONICAL_DICTIONARY_MAX_VALUES", 0


def _string_key_fusion():
    """Every aggregation with a string grouping key left unfused (its HashAggregation normalizes the keys' bytes
    into words), against the fused kernel's interned ids: the fused side must not cost more."""
    import gpu_engine.planning.fusion as module
    from gpu_engine.columnar.types import is_string
    original = module.fusion_refusal

    def refusal(node):
        if any(is_string(key.dtype) for key in node.grouping_keys):
            return "a string grouping key"
        return original(node)
    return module, "fusion_refusal", refusal


def _single_key_estimates():
    """A join on several keys estimated from its most selective key alone (``join_ordering.key_set_divisor``
    as before the key set's distinct values: the largest of the keys' own)."""
    import gpu_engine.sql.join_ordering as module

    def most_selective_key(a, b, pairs):
        divisor = 1.0
        for x, y in pairs:
            ndv_x = (a.stats[x].ndv if x in a.stats else 0) or a.rows
            ndv_y = (b.stats[y].ndv if y in b.stats else 0) or b.rows
            divisor = max(divisor, min(max(ndv_x, ndv_y), max(a.rows, b.rows)))
        return divisor
    return module, "key_set_divisor", most_selective_key


def _union_key_filters():
    """Join-key filters stop at a probe pipeline's local exchange: UNION ALL branch scans read whole
    (``dynamic_filters._scans_feeding`` finding no scan)."""
    import gpu_engine.exec.dynamic_filters as module
    return module, "_scans_feeding", lambda node: []


def _node_setups():
    """Every driver's FusedAggregation/FilterProject derives its program, layout and kernel programs anew on
    every run (``MadePerNode.get`` always making)."""
    from gpu_engine.exec.made_once import MadePerNode
    return MadePerNode, "get", lambda self, node, make, variant=None: make()


def _file_versions():
    """Every lookup of a per-file-version cache asks ``os.stat`` (``file_versions.current_task`` None: no Task's
    versions kept), as before a file's version was read once per file and Task."""
    import gpu_engine.connectors.file_versions as module
    return module, "current_task", lambda: None


def _string_key_growth():
    """The cpu StringKeyTable growing a batch's table by doubling from 1,024 slots and 8 KB and zeroing what it
    grows (``StringKeyTable._intern_cpu`` before it sized the rest of a batch by what its rows so far predict)."""
    import numpy as np

    from gpu_engine.exec.device_counters import count_host_sync, count_kernel_launch
    from gpu_engine.kernels import string_keys as keys

    def reserve_zeroed(table, rows, incoming):
        if (table._words.shape[0] >= table._known_bound + rows and table.capacity >= 2 * (table._known_bound + rows)
                and table._chars.shape[0] >= table._chars_bound + incoming):
            return
        known = table._known_bound
        total = known + rows
        if table._words.shape[0] < total:
            size = max(total, 2 * table._words.shape[0])
            words = np.zeros((size, keys.WORDS_WIDTH), dtype=np.uint64)
            words[:known] = table._words[:known]
            offsets = np.zeros(size + 1, dtype=np.int64)
            offsets[:known + 1] = table._offsets[:known + 1]
            table._words, table._offsets = words, offsets
        chars = table._chars_bound + incoming
        if table._chars.shape[0] < chars:
            grown = np.zeros(max(chars, 2 * table._chars.shape[0]), dtype=np.uint8)
            grown[:table._chars_bound] = table._chars[:table._chars_bound]
            table._chars = grown
        if table.capacity < 2 * total:
            table._slots = table._new_slots(keys._next_power_of_two(2 * total), known)

    def doubling(table, arguments, ids):
        n, offsets, row = ids.shape[0], arguments[0], 0
        count_host_sync()
        while row < n:
            count_kernel_launch()
            row = keys._intern_rows_cpu(*arguments, row, table._slots, table._words, table._offsets, table._chars,
                                        table._state, ids)
            table._known_bound = int(table._state[0])
            table._chars_bound = int(table._offsets[table._known_bound])
            if row < n:
                length = int(offsets[row + 1] - offsets[row])
                full = table._known_bound >= min(int(table._words.shape[0]), table.capacity // 2)
                short = table._chars_bound + length > int(table._chars.shape[0])
                rest = int(offsets[n] - offsets[row])
                reserve_zeroed(table, min(n - row, max(table._known_bound, 1024)) if full else 0,
                               min(rest, max(table._chars_bound, 8192, length)) if short else 0)
    return keys.StringKeyTable, "_intern_cpu", doubling


def _id_slots():
    """A lone interned string key hashed to its slot like any key, as before ``fused_aggregation_kernel.id_slotted_key``
    (the operator's choice goes into the kernel's layout, so each side runs its own kernel)."""
    import gpu_engine.operators.fused_aggregation as module
    return module, "id_slotted_key", lambda program, layout: None


def _abandoned_partial_sizing():
    """A FINAL fused aggregation whose PARTIAL step gave up grouping grows its table as before (by doubling, with
    held batches), not sized once from the scan's rows and what the PARTIAL step saw
    (``FusedAggregation._size_for_abandoned_partials`` off)."""
    from gpu_engine.operators.fused_aggregation import FusedAggregation
    return FusedAggregation, "_size_for_abandoned_partials", lambda self: None


def _string_table_sizing():
    """A FINAL fused aggregation sized for its abandoned PARTIAL step's keys leaves its string keys' tables to
    grow batch by batch, as before (``StringKeyTable.expect`` off: a key of nearly a string a row is not sized)."""
    from gpu_engine.kernels.string_keys import StringKeyTable
    return StringKeyTable, "expect", lambda self, strings, rows: False


def _intern_through_map():
    """A fused aggregation's plain string key under a gather map (a FINAL step's batches from a repartition)
    gathered, then interned, as before (``KernelInputs._interned_in_place`` off)."""
    from gpu_engine.codegen.kernel_inputs import KernelInputs
    return KernelInputs, "_interned_in_place", lambda self, lift, batch: False


def _emit_words():
    """A fused aggregation's emit keeps its slot words when a count or float sum views them (not recycled), as
    before (``fused_aggregation._recycle_words`` off: words given back only when no output views them)."""
    import numpy as np

    import gpu_engine.operators.fused_aggregation as module

    def keep_viewed(xp, words, columns):
        if xp is np and not any(np.may_share_memory(words, buffer) for column in columns
                                for buffer in (column.data, column.validity, column.offsets) if buffer is not None):
            module.give_array(xp, words)
        return columns
    return module, "_recycle_words", keep_viewed


def _kept_bytes():
    """The buffer recycler keeps at most 1 GiB, as before (``MAX_KEPT_BYTES`` a quarter of memory). The recycler is
    process-wide: buffers the other side kept are still taken, so this under-reads the change."""
    from gpu_engine.exec import buffer_recycler as module
    return module, "MAX_KEPT_BYTES", 1 << 30


def _partition_slots():
    """TopNRowNumber's cut sorting its buffer for row_number too (``kernels.partition_top`` off)."""
    import gpu_engine.operators.top_n_row_number as module
    return module, "partition_first_rows", lambda device, partition_ids, words, limit, partitions: None


def _value_words():
    """A quantile's values turned into sort words by ``sort_key_words`` before bucketing (``value_rank_rows`` off)."""
    import gpu_engine.aggregation.holistic as module
    from gpu_engine.kernels.order_statistics import group_rank_rows
    from gpu_engine.kernels.sort import sort_key_words
    return module, "value_rank_rows", lambda device, group_ids, groups, values, *rest: group_rank_rows(
        device, group_ids, groups, sort_key_words(device, [values], [True], [False]), *rest)


def _moment_rows():
    """Variance-family moments of raw rows in three passes a batch on the CPU too (``_fold_rows_in_order`` off)."""
    import gpu_engine.kernels.aggregate as module
    return module, "_fold_rows_in_order", lambda *args: False


def _new_group_rate():
    """The cpu GroupByHashTable sizing the rest of a batch by its rate of new groups so far, its insert calling a
    prefetch helper a row (``GroupByHashTable._insert_cpu`` before issue 31's dbq9 estimated the distinct keys those
    rows suggest and wrote the prefetch out in the loop): ~512 rows nearly all new sized a 131,072-row batch of 10K
    groups for 131K groups."""
    import numpy as np
    from numba import njit

    from gpu_engine.kernels import group_by
    from gpu_engine.kernels.prefetch import PREFETCH_DISTANCE, prefetch_row, worth_prefetching

    first_slot, rows_equal, empty = group_by._first_slot, group_by._rows_equal, group_by.EMPTY

    @njit(nogil=True)
    def prefetch_ahead(hashes, i, slots, group_keys, group_hashes):
        n = hashes.shape[0]
        capacity = slots.shape[0]
        if not (worth_prefetching(slots) or worth_prefetching(group_keys)):
            return
        if i + PREFETCH_DISTANCE < n:
            prefetch_row(slots, first_slot(hashes[i + PREFETCH_DISTANCE], capacity))
        if i + PREFETCH_DISTANCE // 2 < n:
            g = slots[first_slot(hashes[i + PREFETCH_DISTANCE // 2], capacity)]
            if g != empty:
                prefetch_row(group_hashes, g)
                prefetch_row(group_keys, g)

    @njit(nogil=True)
    def insert_rows(words, hashes, start, slots, group_keys, group_hashes, num_groups, group_ids, new_rows, num_new):
        capacity = slots.shape[0]
        max_groups = min(group_keys.shape[0], capacity // 2)
        for i in range(start, words.shape[0]):
            prefetch_ahead(hashes, i, slots, group_keys, group_hashes)
            h = hashes[i]
            slot = first_slot(h, capacity)
            while True:
                g = slots[slot]
                if g == empty:
                    if num_groups >= max_groups:
                        return i, num_groups, num_new
                    g = num_groups
                    num_groups += 1
                    group_keys[g, :] = words[i, :]
                    group_hashes[g] = h
                    slots[slot] = g
                    new_rows[num_new] = i
                    num_new += 1
                    break
                if group_hashes[g] == h and rows_equal(group_keys, g, words, i):
                    break
                slot = (slot + 1) & (capacity - 1)
            group_ids[i] = g
        return words.shape[0], num_groups, num_new

    def insert_cpu(table, words, hashes):
        n = words.shape[0]
        group_ids = np.empty(n, dtype=np.int32)
        new_rows = np.empty(n, dtype=np.int32)
        row, num_new = 0, 0
        while row < n:
            row, table._num_groups, num_new = insert_rows(
                words, hashes, row, table._slots, table._group_keys, table._group_hashes,
                table._num_groups, group_ids, new_rows, num_new)
            if row < n:
                rest = n - row
                predicted = -(-num_new * rest // row) if row else rest
                table._reserve_groups(table._num_groups + min(rest, max(table._num_groups, 1024,
                                                                        predicted + predicted // 8)))
        return group_ids, new_rows[:num_new].copy()

    return group_by.GroupByHashTable, "_insert_cpu", insert_cpu


def _kept_positions():
    """A column read late for some rows finds the positions of the rows kept by a binary search per kept row
    (``late_materialization._positions`` and its same-rows shortcut in ``_kept_of`` before they replaced it)."""
    import numpy as np

    import gpu_engine.connectors.late_materialization as module
    return module, "_kept_of", lambda column, rows, kept, count: module.take_rows(
        column, kept if rows is None else np.searchsorted(rows, kept).astype(np.int32))


def _string_key_tables():
    """A string join key filter tested by ``pc.is_in`` on every probe batch (Arrow builds its hash set of the build
    side's strings and re-casts them each call), as before its table made once per filter."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from gpu_engine.exec.dynamic_filters import JoinKeyFilter

    def per_batch_set(self, array):
        if self._value_set is not None:
            matched = pc.is_in(array, value_set=self._value_set.cast(array.type))
        else:
            matched = pc.and_(pc.greater_equal(array, pa.scalar(self.low, array.type)),
                              pc.less_equal(array, pa.scalar(self.high, array.type)))
        return np.asarray(matched.fill_null(False), dtype=np.bool_)
    return JoinKeyFilter, "_string_mask", per_batch_set


def _top_n_narrowing():
    """A TopN sorting every buffered row by every key, not first only the rows whose first key can place them among
    the first n (``kernels.sort._top_n_candidates`` returning None: its default before stop 51)."""
    import gpu_engine.kernels.sort as module
    return module, "_top_n_candidates", lambda *args: None


def _dense_decision():
    """A CPU group table's first batch deciding its direct index from a masked copy of each narrow key and three
    passes over it, every key (``GroupByHashTable._takes_dense`` before stop 51), not from its int32 halves read in
    place, stopping at the first key that cannot fit."""
    import math

    import numpy as np

    from gpu_engine.kernels.group_by import DENSE_CELLS_LIMIT, DENSE_MAX_KEYS, EMPTY, NARROW_BLOCK, GroupByHashTable

    def masked_copies(self, words):
        if self._dense is not None:
            return True
        if self._dense_refused or self._num_groups:
            return False
        self._dense_refused = True
        if not 0 < len(self._widths) <= DENSE_MAX_KEYS or any(w != NARROW_BLOCK for w in self._widths):
            return False
        lows, spans = [], []
        for k in range(words.shape[1]):
            values = words[:, k][words[:, k] != 0]
            signed = (values & np.uint64(0xFFFFFFFF)).astype(np.int64)
            signed[signed >= 1 << 31] -= 1 << 32
            lows.append(int(signed.min()) if values.shape[0] else 0)
            spans.append(2 * (int(signed.max()) - lows[-1] + 1) if values.shape[0] else 1)
        cells = math.prod(span + 1 for span in spans)
        if cells > DENSE_CELLS_LIMIT:
            return False
        strides = [math.prod(span + 1 for span in spans[k + 1:]) for k in range(len(spans))]
        self._dense = (np.asarray(lows, dtype=np.int64), np.asarray(spans, dtype=np.int64),
                       np.asarray(strides, dtype=np.int64), np.full(cells, EMPTY, dtype=np.int32))
        return True
    return GroupByHashTable, "_takes_dense", masked_copies


def _kept_row_groups():
    """The row groups holding a kept row found by np.unique over a search per kept row, and their counts by a
    second search per kept row (``late_materialization._groups_holding`` before)."""
    import numpy as np

    import gpu_engine.connectors.late_materialization as module

    def per_kept_row(kept, group_starts):
        holding = np.unique(np.searchsorted(group_starts, kept, side="right") - 1)
        return holding, np.bincount(np.searchsorted(group_starts[holding], kept, side="right") - 1,
                                    minlength=len(holding))
    return module, "_groups_holding", per_kept_row


def _group_growth():
    """The cpu GroupByHashTable growing a batch's room by doubling from 1,024 groups
    (``GroupByHashTable._groups_to_come`` before it predicted the rest from the batch's rate of new groups)."""
    from gpu_engine.kernels.group_by import GroupByHashTable
    return GroupByHashTable, "_groups_to_come", lambda table, row, n, num_new: min(
        n - row, max(table._num_groups, 1024))


def _ready_kinds():
    """Every batch types its twins' arguments with numba's typeof, as before TierSwitch remembered READY kinds."""
    import gpu_engine.codegen.background_compiles as module
    return module, "_argument_kinds", lambda arguments: None


def _choice_case(device, conditions, values, default, dtype, rows):
    """The fixed-width CASE as before f8516d5: a branch number per row, then a ``where`` per branch."""
    from gpu_engine.columnar import Column
    from gpu_engine.columnar.types import physical_dtype
    from gpu_engine.expressions.logical import _words, true_rows

    xp = device.xp
    branches = list(values) + ([default] if default is not None else [])
    choice = xp.full(rows, len(values) if default is not None else -1, dtype=xp.int32)
    undecided = xp.ones(rows, dtype=xp.bool_)
    for k, condition in enumerate(conditions):
        hit = undecided & true_rows(condition)
        choice = xp.where(hit, k, choice)
        undecided &= ~hit
    validity = xp.zeros(rows, dtype=xp.bool_)
    for k, branch in enumerate(branches):
        validity = xp.where(choice == k, True if branch.validity is None else branch.validity, validity)
    if any(branch.data.ndim == 2 for branch in branches):
        from gpu_engine.expressions.numeric import as_words

        data = xp.zeros((rows, _words(branches)), dtype=xp.int64)
        for k, branch in enumerate(branches):
            data = xp.where((choice == k)[:, None], as_words(device, branch), data)
        return Column(dtype, data, validity)
    data = xp.zeros(rows, dtype=physical_dtype(dtype))
    for k, branch in enumerate(branches):
        data = xp.where(choice == k, branch.data, data)
    return Column(dtype, data, validity)


def _fixed_width_case():
    """A fixed-width CASE picked through a branch number per row (``logical._case_fixed_width`` off)."""
    import gpu_engine.expressions.logical as module
    return module, "_case_fixed_width", _choice_case


def _constant_comparisons():
    """Comparisons with a constant evaluated as two columns (``evaluate._host_constant`` off)."""
    import importlib

    module = importlib.import_module("gpu_engine.expressions.evaluate")  # (the package exports a function of its name)
    return module, "_host_constant", lambda expr: None


def _shared_arguments():
    """Every aggregate argument evaluated whole (``HashAggregation``'s shared subexpressions off)."""
    import gpu_engine.operators.hash_aggregation as module
    return module, "hoist_common_subexpressions", lambda expressions: ([], tuple(expressions))


def _one_slot_states():
    """An aggregation without keys grows its states to 16 slots, so the CPU kernels scatter through memory a
    row at a time (``hash_aggregation.state_capacity`` off: the kernels' one-slot register folds go unused)."""
    import gpu_engine.operators.hash_aggregation as module
    return module, "state_capacity", lambda keyed, groups, size: max(groups, 2 * size, 16)


def _file_page_release():
    """A Parquet file's pages stay mapped into the process once read (``file_pages.read_chunks`` off: no bound)."""
    import gpu_engine.connectors.file_pages as module
    return module, "read_chunks", lambda mapped, ranges: None


def _file_page_pool():
    """Every chunk's pages are dropped as soon as it was read (``file_pages.KEPT_FILE_PAGE_BYTES`` = 0: no pool)."""
    import gpu_engine.connectors.file_pages as module
    return module, "KEPT_FILE_PAGE_BYTES", 0


def _idle_release():
    """The recycler's buffers and glibc's free heap stay kept after the last Task ends (``idle_memory`` off).

    Process-wide state: a "with" run that follows a "without" one still finds the buffers the other kept, so this
    A/B understates the cost of releasing; ``bench/memory_per_query.py`` in two processes measures it whole."""
    import gpu_engine.exec.idle_memory as module
    return module, "release_idle_memory", lambda: None


class _Setting:
    """A switch whose two sides are set by name ("on", "off"): for a change whose default is off, or one
    that moves several attributes (``ab.py`` and ``ab_all.py`` set ``value`` on it before every call)."""

    def __init__(self, apply):
        object.__setattr__(self, "apply", apply)

    value = "on"

    def __setattr__(self, name, value):
        self.apply(value == "on")


def _set_pre_aggregation_setup(on: bool) -> None:
    import gpu_engine.optimizer.eager_aggregation as module
    if not hasattr(module, "_original_setup"):
        module._original_setup = module.PRE_AGGREGATION_SETUP
    module.PRE_AGGREGATION_SETUP = module._original_setup if on else 0.0


def _set_build_dictionaries(on: bool) -> None:
    import gpu_engine.operators.hash_build as build
    import gpu_engine.optimizer.eager_aggregation as eager
    if not hasattr(build, "_original_dictionary_rows"):
        build._original_dictionary_rows = build.DICTIONARY_BUILD_MAX_ROWS
    build.DICTIONARY_BUILD_MAX_ROWS = eager.DICTIONARY_BUILD_MAX_ROWS = build._original_dictionary_rows if on else 4096


def _build_dictionaries():
    """A build side keeps its strings as a dictionary up to 4,096 rows, in the join and in eager aggregation's
    key costs (``hash_build.DICTIONARY_BUILD_MAX_ROWS`` before issue 31's dsexcess: 65,536)."""
    return _Setting(_set_build_dictionaries), "value", "off"


def _set_outgrown_dictionaries(on: bool) -> None:
    import gpu_engine.kernels.gather as gather
    import gpu_engine.kernels.group_by as group_by
    import gpu_engine.kernels.hash as hashing
    import gpu_engine.kernels.sort as sort
    import gpu_engine.kernels.string_keys as string_keys
    for module in (group_by, hashing, sort, string_keys):
        module.rows_or_dictionary = gather.rows_or_dictionary if on else (lambda device, column: column)


def _outgrown_dictionaries():
    """Interning, hashing, ranking and key packing work on a dictionary's values also where it holds more
    values than the batch has rows (``gather.rows_or_dictionary`` before issue 31's dictregress)."""
    return _Setting(_set_outgrown_dictionaries), "value", "off"


def _pre_aggregation_setup():
    """Eager aggregation counts no fixed cost for the operators a pre-aggregation adds (the "with" side, the
    default, counts ``optimizer.eager_aggregation.PRE_AGGREGATION_SETUP``)."""
    return _Setting(_set_pre_aggregation_setup), "value", "off"


def _set_eager_estimates(on: bool) -> None:
    import gpu_engine.optimizer.eager_aggregation as module
    import gpu_engine.optimizer.statistics as statistics
    if not hasattr(module, "_original_eager_estimates"):
        module._original_eager_estimates = (statistics.shared_key_domain, module._dictionary_key_cost,
                                            module.PARTIAL_SETUP_SHARE)
    domain, dictionary, share = module._original_eager_estimates
    statistics.shared_key_domain = domain if on else (lambda a, b: 0.0)
    module._dictionary_key_cost = dictionary if on else (lambda: module.STRING_KEY_COST)
    module.PARTIAL_SETUP_SHARE = share if on else 0.0


def _eager_estimates():
    """The estimates before q66's fix (issue 31): a one-key join's divisor without the key's shared domain
    (``statistics.shared_key_domain``), a build side's dictionary-kept strings costed as strings, and a
    pre-aggregation's set-up without its per-partial part (``optimizer.eager_aggregation.PARTIAL_SETUP_SHARE``)."""
    return _Setting(_set_eager_estimates), "value", "off"


def _set_intersected_estimates(on: bool) -> None:
    import gpu_engine.sql.statistics as module
    if not hasattr(module, "_original_estimates"):
        module._original_estimates = (module.intersected_value_sets, module._folded)
    module.intersected_value_sets, module._folded = module._original_estimates if on else (
        lambda conjuncts, column_stats: (1.0, list(conjuncts)), lambda tree: None)


def _intersected_estimates():
    """Conjuncts on one column multiplied and constant comparisons estimated 1/2 (``statistics.
    intersected_value_sets`` and ``statistics._folded`` off: the estimates before issue 31's fix)."""
    return _Setting(_set_intersected_estimates), "value", "off"


def _set_string_equality_sql(on: bool) -> None:
    import gpu_engine.sql.statistics as module
    module.STRING_DICTIONARY_COUNTS = on


def _string_equality_sql():
    """``col = 'x'`` / ``col IN (...)`` on a string column at 1/10 a value in the SQL planner's estimates (the
    default) against one Parquet dictionary value's share ("with": ``sql.statistics.STRING_DICTIONARY_COUNTS``
    on; bench/results/2026-11-28-stringndv-string-equality-cpu-sf1.md)."""
    return _Setting(_set_string_equality_sql), "value", "off"


def _set_string_equality_typed(on: bool) -> None:
    import gpu_engine.optimizer.cardinality as module
    module.STRING_DICTIONARY_COUNTS = on


def _string_equality_typed():
    """The same in the typed plan's estimates ("with": ``optimizer.cardinality.STRING_DICTIONARY_COUNTS`` on)."""
    return _Setting(_set_string_equality_typed), "value", "off"


def _set_constant_arithmetic_estimates(on: bool) -> None:
    import gpu_engine.sql.filtered_statistics as pinned
    import gpu_engine.sql.statistics as module
    if not hasattr(module, "_original_arithmetic"):
        module._original_arithmetic = (module.constant_arithmetic, pinned._or_pinned_columns)
    module.constant_arithmetic, pinned._or_pinned_columns = module._original_arithmetic if on else (
        lambda tree: None, lambda conjunct: None)


def _constant_arithmetic_estimates():
    """Constant arithmetic (``d_year = 2001 + 1``) estimated as an unknown value and an OR of one column's values
    pinning no distinct count (``statistics.constant_arithmetic`` and ``filtered_statistics._or_pinned_columns``
    off: the estimates before the dsslow fix)."""
    return _Setting(_set_constant_arithmetic_estimates), "value", "off"


def _distinct_semi_joins():
    """No semi join for an inner join under a one-sided DISTINCT (``optimizer.distinct_semi_joins`` out of
    ``gpu_engine.optimizer.RULES``): the join pairs every match and the DISTINCT removes the repeats."""
    import gpu_engine.optimizer as module
    return module, "RULES", tuple(r for r in module.RULES if r.__name__ != "semi_joins_under_distinct")


def _value_bounds():
    """Semi and anti joins on ``probe.c <> build.c`` forming every pair of equal keys and filtering them
    (``hash_build.distinct_value_filter`` off: no per-key bounds of ``c``)."""
    import gpu_engine.operators.hash_build as module
    return module, "distinct_value_filter", lambda node: None


def _two_valued_filters():
    """A filter's ANDs and ORs evaluated three-valued, then its TRUE rows taken (``evaluate._truth`` off)."""
    import importlib

    module = importlib.import_module("gpu_engine.expressions.evaluate")  # (the package exports a function of its name)

    def three_valued(expr, batch):
        column = module._evaluate(expr, batch)
        return column.data, () if column.validity is None else (column.validity,)
    return module, "_truth", three_valued


def _optimizer_rules():
    """No optimizer rule over the typed plan (``gpu_engine.optimizer.RULES`` empty): plans run as the SQL planner
    made them, a filter above a renaming projection (two operators) and constant-false UNION branches computed."""
    import gpu_engine.optimizer as module
    return module, "RULES", ()


def _set_build_sides(on: bool, ratio: float | None = None) -> None:
    import gpu_engine.optimizer as module
    import gpu_engine.optimizer.build_sides as build_sides
    from gpu_engine.optimizer.build_sides import build_smaller_sides
    if ratio is not None:
        build_sides.SWAP_RATIO = ratio
    rules = tuple(r for r in module.ESTIMATE_RULES if r is not build_smaller_sides)
    module.ESTIMATE_RULES = rules + (build_smaller_sides,) if on else rules


def _build_sides():
    """``optimizer.build_sides.build_smaller_sides`` in ``gpu_engine.optimizer.ESTIMATE_RULES`` (on) or not (off):
    each hash join built on the side the typed estimates say is smaller, after the pushdown."""
    return _Setting(_set_build_sides), "value", "off"


def _build_sides_2x():
    """``build-sides`` swapping only a build side estimated over twice its probe side (``build_sides.SWAP_RATIO``
    2)."""
    return _Setting(lambda on: _set_build_sides(on, ratio=2.0)), "value", "off"


def _set_typed_build_sides(on: bool) -> None:
    import gpu_engine.optimizer as module
    import gpu_engine.optimizer.cardinality as cardinality
    import gpu_engine.optimizer.statistics as statistics
    from gpu_engine.optimizer.build_sides import build_smaller_sides
    if not hasattr(statistics, "_original_sampled_ndv"):
        statistics._original_sampled_ndv = statistics._sampled_ndv
        cardinality._original_given = cardinality._given
    statistics._sampled_ndv = statistics._original_sampled_ndv if on else (lambda *args: None)
    cardinality._given = cardinality._original_given if on else (lambda part, keeps, applied: keeps)
    statistics._CACHE.clear()  # the sampled distinct counts are cached with the footers: each side its own
    rules = tuple(r for r in module.ESTIMATE_RULES if r is not build_smaller_sides)
    module.ESTIMATE_RULES = rules + (build_smaller_sides,) if on else rules


def _typed_build_sides():
    """The typed build-side pass with its two estimate fixes (on, the default) against neither: no build-side
    pass, a key-like integer column's distinct values from its range only (``statistics._sampled_ndv`` off), an
    OR counted again above the filters it implied (``cardinality._given`` off)."""
    return _Setting(_set_typed_build_sides), "value", "off"


def _set_typed_join_order(on: bool) -> None:
    import gpu_engine.optimizer as module
    from gpu_engine.optimizer.join_order import order_joins
    rules = tuple(r for r in module.ESTIMATE_RULES if r is not order_joins)
    module.ESTIMATE_RULES = (order_joins,) + rules if on else rules


def _typed_join_order():
    """``optimizer.join_order.order_joins`` in ``gpu_engine.optimizer.ESTIMATE_RULES`` (on) or not (off): each
    region of inner joins ordered again by the typed estimates after the pushdown, before the build sides."""
    return _Setting(_set_typed_join_order), "value", "off"


def _set_correlated_keys(on: bool) -> None:
    import math
    import gpu_engine.optimizer.join_order as order
    import gpu_engine.optimizer.statistics as module
    module.KEY_LIKE_ROWS = 2.0 if on else math.inf
    order.COUNT_INPUT_ROWS = on


def _correlated_keys():
    """Every join on several key columns estimated by containment (the side with more distinct key sets
    divides) and the typed join order costing output rows alone (``optimizer.statistics.KEY_LIKE_ROWS``
    infinite, ``optimizer.join_order.COUNT_INPUT_ROWS`` off: the engine's default); on, both."""
    return _Setting(_set_correlated_keys), "value", "off"


def _measured_key_matches():
    """Every join on several key columns estimated from per-column distinct counts alone, as before stop 52
    (``optimizer.cardinality.MEASURED_KEY_MATCHES`` off); on, from the key pairs its tables' rows match."""
    import gpu_engine.optimizer.cardinality as module
    return module, "MEASURED_KEY_MATCHES", False


def _fused_moments():
    """Variance / stddev / covariance / corr / regr_* refused by the fused aggregation kernel, as before stop 52
    (their aggregations planned on the eager HashAggregation); on, folded in the generated kernel."""
    from gpu_engine.aggregation.functions import Moments
    return Moments, "fusable", property(lambda self: f"{self.call.function} keeps moments merged per batch")


def _one_branch_case():
    """A CASE of one fixed-width branch and no ELSE placed into a zeroed array (``logical._one_branch`` off)."""
    import gpu_engine.expressions.logical as module
    return module, "_one_branch", lambda taken, branches, dtype: None


def _plain_string_keys():
    """A HashAggregation's plain (not dictionary-encoded) string keys packed into key words a row and each new
    group's string copied per batch (``hash_aggregation.interns_key`` off for them: only dictionary keys interned)."""
    import gpu_engine.operators.hash_aggregation as module
    return module, "interns_key", lambda column: column.is_dictionary


def _aggregate_slices():
    """Every fused aggregation as one kernel (the slice budget past any program), against aggregates split
    across a key kernel and slice kernels (``kernel_bounds.aggregate_slices``). The generated kernels are
    cached by the budget, so each side runs its own (both compiled while the sides warm up)."""
    from gpu_engine.codegen import kernel_bounds
    return kernel_bounds, "MAX_AGGREGATION_SLICE_NODES", 10 ** 9


def _narrow_keys():
    """A HashAggregation's keys of at most 32 bits (interned string ids among them) as a flag word and a value word
    each (``normalize_keys`` without ``narrow``), as before the narrow one-word block."""
    import gpu_engine.operators.hash_aggregation as module
    from gpu_engine.kernels.group_by import normalize_keys
    return module, "normalize_keys", lambda device, columns, widths=None, narrow=False: normalize_keys(
        device, columns, widths)


def _hashed_probes():
    """The cpu StringKeyTable hashing every batch's rows in a pass of their own before its probe loop also where
    its table stays in the caches (``string_keys.PREFETCH_MIN_BYTES`` -1), as before the probe loop hashed them."""
    import gpu_engine.kernels.string_keys as module
    return module, "PREFETCH_MIN_BYTES", -1


def _dense_keys():
    """The cpu GroupByHashTable hashing narrow keys of few combinations too (``group_by.DENSE_CELLS_LIMIT`` 0: no
    direct index), as before the direct index."""
    import gpu_engine.kernels.group_by as module
    return module, "DENSE_CELLS_LIMIT", 0


def _head_words():
    """The cpu StringKeyTable's hash pass loading each word of a string through ``string_keys._word_cpu`` (its
    checks a word), as before ``_head_words_cpu`` loaded the first two at once (same hashes)."""
    import numpy as np
    from numba import njit

    import gpu_engine.kernels.string_keys as module
    word, mix, finish, offset = module._word_cpu, module._mix_word, module._finish_hash, module._FNV_OFFSET

    @njit(nogil=True)
    def hash_pass(offsets, chars, rows, has_rows, hashes):
        for i in range(hashes.shape[0]):
            row = np.int64(rows[i]) if has_rows else i
            start, stop = offsets[row], offsets[row + 1]
            h = offset ^ np.uint64(stop - start)
            for position in range(start, stop, 8):
                h = mix(h, word(chars, position, stop))
            hashes[i] = finish(h)

    # Compiled here for the argument types interning gives it (read-only or not): the background compiler cannot
    # import a kernel defined in this function, and finds these ready instead of sending the batch to the lowest tier.
    for read_only_offsets in (False, True):
        for read_only_chars in (False, True):
            offsets, chars = np.zeros(2, dtype=np.int64), np.zeros(1, dtype=np.uint8)
            offsets.setflags(write=not read_only_offsets)
            chars.setflags(write=not read_only_chars)
            hash_pass(offsets, chars, module._NO_ROWS, False, np.empty(1, dtype=np.uint64))
    return module, "_hash_strings_cpu", hash_pass


def _growth_stops():
    """The cpu StringKeyTable growing only what ran out mid-batch (the strings' room or their bytes) and probing the
    rest of a batch that grew its slots out of the caches without a hash pass (no prefetch), as before the batch
    after a stop was hashed first (``StringKeyTable._hashed_from``) and both rooms grew together."""
    import numpy as np

    import gpu_engine.kernels.string_keys as module

    def intern_cpu(self, arguments, ids):
        n = ids.shape[0]
        offsets, mapped, has_rows = arguments[0], arguments[4], arguments[5]
        if has_rows:
            def ends(i):
                picked = mapped[:i].astype(np.int64)
                return int((offsets[picked + 1] - offsets[picked]).sum())
        else:
            def ends(i):
                return int(offsets[i] - offsets[0])
        row = 0
        known_before, bytes_before = self._known_bound, self._chars_bound
        while row < n:
            row = module._intern_rows_cpu(*arguments, row, self._slots, self._words, self._offsets, self._chars,
                                          self._state, ids)
            self._known_bound = int(self._state[0])
            self._chars_bound = int(self._offsets[self._known_bound])
            if row < n:
                at = int(mapped[row]) if has_rows else row
                length = int(offsets[at + 1] - offsets[at])
                full = self._known_bound >= min(int(self._words.shape[0]), self.capacity // 2)
                short = self._chars_bound + length > int(self._chars.shape[0])
                seen_bytes = ends(row)
                rest_bytes = ends(n) - seen_bytes
                seen_bytes = max(seen_bytes, 1)
                new_rows = -(-(self._known_bound - known_before) * (n - row) // max(row, 1))
                new_bytes = -(-(self._chars_bound - bytes_before) * rest_bytes // seen_bytes)
                rows = max(self._known_bound, 1024)
                size = max(self._chars_bound, 8192)
                self._reserve(min(n - row, max(rows, min(new_rows, 64 * rows))) if full else 0,
                              min(rest_bytes, max(size, length, min(new_bytes, 64 * size))) if short else 0)
    return module.StringKeyTable, "_intern_cpu", intern_cpu


def _final_rows():
    """A mapped batch's dictionary-coded string key always interned through its dictionary whole (the lookup
    table by code), as before ``KernelInputs._interned_in_place`` took the mapped rows of a dictionary larger than
    them: a FINAL step interned each PARTIAL driver's every group and hashed its slots."""
    from gpu_engine.codegen.kernel_inputs import KernelInputs
    from gpu_engine.plans.expressions import ColumnRef

    def in_place(self, lift, batch):
        return (lift.interned and isinstance(lift.expr, ColumnRef) and lift.expr.name == lift.column
                and batch.gather_map is not None and batch.own_map(lift.column) is None
                and not batch.base_column(lift.column).is_dictionary)
    return KernelInputs, "_interned_in_place", in_place


def _validity_code_prefetch():
    """The fused kernels' look-ahead left out where a dictionary-coded string key's codes have a validity
    (``_prefetchable_key_reads`` before q39 s54: TPC-DS q39's warehouse name beside its integer keys probed a
    75 MB slot table a row at a time). Generated under a cache key of its own, as ``ab_interned_key_prefetch``."""
    import gpu_engine.codegen.fused_aggregation_kernel as kernel
    import gpu_engine.operators.fused_aggregation as module
    from gpu_engine.codegen.generation_cache import aggregate_shape

    original, generated = kernel._prefetchable_key_reads, {}

    def without_validity_codes(program, layout):
        reads = original(program, layout)
        if reads is None or any(kind == "codes" and layout.lifted_modes[m].endswith("validity") for kind, m in reads):
            return None
        return reads

    def generate(program, aggregates, layout):
        key = (repr(program.shape()), aggregate_shape(aggregates), repr(layout))
        if key not in generated:
            kernel._prefetchable_key_reads = without_validity_codes
            try:
                generated[key] = kernel._generate_fused_aggregation(program.shape(), aggregates, layout)
            finally:
                kernel._prefetchable_key_reads = original
        return generated[key]
    return module, "generate_fused_aggregation", generate


def _joint_key_partial_steps():
    """Partial steps kept where two or more keys' estimated counts multiply to 40% of the rows or more
    (``partial_steps.JOINT_GROUPS_PER_ROW`` out of reach, as before q39 s54): only one key's count reaching 80% of
    the rows refuses them."""
    import gpu_engine.optimizer.partial_steps as module
    return module, "JOINT_GROUPS_PER_ROW", 2.0


#: Switch name -> a function returning (module, attribute, its stand-in while the change is off).
SWITCHES = {
    "late-materialization": _late_materialization,
    "scan-predicates": _scan_predicates,
    "eager-aggregation": _eager_aggregation,
    "shared-subexpressions": _shared_subexpressions,
    "linear-keep": _linear_keep,
    "pinned-statistics": _pinned_statistics,
    "late-cut-share": _late_cut_share,
    "window-subqueries": _window_subqueries,
    "partial-steps": _partial_steps,
    "distinct-partitioning": _distinct_partitioning,
    "exchange-keys": _exchange_keys,
    "unique-groupings": _unique_groupings,
    "deferred-columns": _deferred_columns,
    "wide-sum-fusion": _wide_sum_fusion,
    "key-set-estimates": _single_key_estimates,
    "pre-aggregation-setup": _pre_aggregation_setup,
    "eager-estimates": _eager_estimates,
    "one-row-extremes": _one_row_extremes,
    "distinct-branches": _distinct_branches,
    "union-flattening": _union_flattening,
    "radix-aggregation": _radix_aggregation,
    "union-pruning": _union_pruning,
    "build-dictionaries": _build_dictionaries,
    "outgrown-dictionaries": _outgrown_dictionaries,
    "intersected-estimates": _intersected_estimates,
    "constant-arithmetic-estimates": _constant_arithmetic_estimates,
    "string-equality-sql": _string_equality_sql,
    "string-equality-typed": _string_equality_typed,
    "union-key-filters": _union_key_filters,
    "node-setups": _node_setups,
    "file-versions": _file_versions,
    "string-key-growth": _string_key_growth,
    "abandoned-partial-sizing": _abandoned_partial_sizing,
    "string-table-sizing": _string_table_sizing,
    "id-slots": _id_slots,
    "intern-through-map": _intern_through_map,
    "emit-words": _emit_words,
    "kept-bytes": _kept_bytes,
    "partition-slots": _partition_slots,
    "value-words": _value_words,
    "moment-rows": _moment_rows,
    "new-group-rate": _new_group_rate,
    "ready-kinds": _ready_kinds,
    "kept-positions": _kept_positions,
    "kept-row-groups": _kept_row_groups,
    "top-n-narrowing": _top_n_narrowing,
    "dense-decision": _dense_decision,
    "string-key-tables": _string_key_tables,
    "group-growth": _group_growth,
    "string-key-fusion": _string_key_fusion,
    "canonical-dictionaries": _canonical_dictionaries,
    # The lowest tier's evaluator (issue 29's first runs): A/B these with ``--compile-mode lowest``.
    "fixed-width-case": _fixed_width_case,
    "constant-comparisons": _constant_comparisons,
    "shared-arguments": _shared_arguments,
    "one-slot-states": _one_slot_states,
    "two-valued-filters": _two_valued_filters,
    "one-branch-case": _one_branch_case,
    "plain-string-keys": _plain_string_keys,
    "narrow-keys": _narrow_keys,
    "hashed-probes": _hashed_probes,
    "dense-keys": _dense_keys,
    "head-words": _head_words,
    "growth-stops": _growth_stops,
    "final-rows": _final_rows,
    "aggregate-slices": _aggregate_slices,
    "validity-code-prefetch": _validity_code_prefetch,
    "joint-key-partial-steps": _joint_key_partial_steps,
    # Issue 30 item 0: the rules over the typed plan.
    "optimizer-rules": _optimizer_rules,
    "distinct-semi-joins": _distinct_semi_joins,
    "value-bounds": _value_bounds,
    "build-sides": _build_sides,
    "build-sides-2x": _build_sides_2x,
    "typed-build-sides": _typed_build_sides,
    "typed-join-order": _typed_join_order,
    "correlated-keys": _correlated_keys,
    "fused-moments": _fused_moments,
    "measured-key-matches": _measured_key_matches,
    # Memory given back (issue 31's peak and kept memory).
    "file-page-release": _file_page_release,
    "file-page-pool": _file_page_pool,
    "idle-release": _idle_release,
}


def _large_rows_mismatch(actual, expected) -> str | None:
    """Compare two large answers as multisets inside DuckDB (floats within 1e-9 relative, the rest exact).

    Why: :func:`duckdb_reference.rows_mismatch` sorts Python tuples; for db-benchmark's q10 at 10M rows (10M
    groups) that took more than 16 GB. Rows are numbered within their values of the exact columns, ordered by
    the float columns, and joined on both: any row left unmatched, or a float apart, is a difference.
    """
    import duckdb
    import pyarrow as pa
    from duckdb_reference import FLOAT_RELATIVE_TOLERANCE

    if actual.column_names != expected.column_names:
        return f"column names differ: engine {actual.column_names}, DuckDB {expected.column_names}"
    if actual.num_rows != expected.num_rows:
        return f"row counts differ: engine {actual.num_rows}, DuckDB {expected.num_rows}"
    names = [f"c{k}" for k in range(actual.num_columns)]
    floats = [n for n, f in zip(names, expected.schema) if pa.types.is_floating(f.type)]
    exact = [n for n in names if n not in floats]
    connection = duckdb.connect()
    connection.register("engine_rows", actual.rename_columns(names))
    connection.register("duckdb_rows", expected.rename_columns(names))
    numbered = ("SELECT *, row_number() OVER (PARTITION BY {} ORDER BY {}) AS rn FROM {}"
                .format(", ".join(exact) or "1", ", ".join(floats) or "1", "{}"))
    on = " AND ".join([f"a.{n} IS NOT DISTINCT FROM b.{n}" for n in exact] + ["a.rn = b.rn"])
    close = " AND ".join(f"(a.{n} IS NOT DISTINCT FROM b.{n} OR abs(a.{n} - b.{n}) <= "
                         f"{FLOAT_RELATIVE_TOLERANCE} * greatest(abs(a.{n}), abs(b.{n})))" for n in floats) or "true"
    ((differing,),) = connection.execute(
        f"SELECT count(*) FROM ({numbered.format('engine_rows')}) a FULL JOIN ({numbered.format('duckdb_rows')}) b "
        f"ON {on} WHERE a.rn IS NULL OR b.rn IS NULL OR NOT ({close})").fetchall()
    return None if differing == 0 else f"{differing} rows differ (compared in DuckDB)"


def _workload(name: str, query: int, sf: float):
    """Return the folder, text, registration and result check of one query of ``name`` (tpch, tpcds, dbbench)."""
    from duckdb_reference import rows_mismatch
    if name == "tpch":
        from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
        from gpu_engine.plans import tpch
        from gpu_engine.sql.ordering import order_key_columns
        sql = tpch.spec_sql(query)
        return (ensure_tpch(sf, None, progress=False), sql, register_tpch,
                lambda actual, expected: rows_mismatch(actual, expected, ordered=order_key_columns(sql)))
    if name == "dbbench":  # db-benchmark's groupby question ``query`` over G1 of ``sf`` million rows, 100 groups
        from bench.dbbench import QUESTIONS, ensure_groupby
        import pyarrow.parquet as pq
        tables = {"x": ensure_groupby(int(sf * 1_000_000), 100)}
        in_memory = pq.read_table(tables["x"])  # both Sessions answer from memory, as bench/run_dbbench.py's
        return (tables, QUESTIONS[f"q{query}"], lambda session, folder: session.register("x", in_memory),
                lambda actual, expected: (rows_mismatch if expected.num_rows < 100_000 else _large_rows_mismatch)(
                    actual, expected))
    from bench.tpcds import query_text, result_mismatch
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    sql = query_text(query)
    return (ensure_tpcds(sf, None), sql, register_tpcds,
            lambda actual, expected: result_mismatch(actual, expected, sql, rows_mismatch))


def main():
    """Run the A/B and print each side's medians."""
    p = argparse.ArgumentParser()
    p.add_argument("switch", choices=sorted(SWITCHES))
    p.add_argument("workload", choices=("tpch", "tpcds", "dbbench"))
    p.add_argument("query", type=int)
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--drivers", type=int, default=2)
    p.add_argument("--compile-mode", choices=("background", "lowest"), default="background",
                   help="lowest: both sides run on the lowest tier, nothing generated (what a first run pays)")
    p.add_argument("--one-session", action="store_true",
                   help="both sides run in one Session (for a switch no plan depends on: a Session's buffers and "
                        "cached tables held once; db-benchmark's q10 at 10M rows passed 12 GB with two)")
    a = p.parse_args()
    from duckdb_reference import duckdb_connection, duckdb_table
    from gpu_engine import Session
    from gpu_engine.codegen.background_compiles import background_compiler
    module, attribute, stand_in = SWITCHES[a.switch]()
    sides = {"without": stand_in, "with": getattr(module, attribute)}
    folder, sql, register, check = _workload(a.workload, a.query, a.sf)
    sessions = {}
    for side in sides:
        if a.one_session and sessions:
            sessions[side] = next(iter(sessions.values()))
            continue
        sessions[side] = Session(device="cpu", drivers=a.drivers, compile_mode=a.compile_mode)
        register(sessions[side], folder)
    duck = duckdb_connection(folder, threads=2)
    if a.workload == "dbbench":  # DuckDB answers from its own table in memory too (the benchmark's solutions do)
        duck.execute("CREATE TABLE x_in_memory AS SELECT * FROM x; DROP VIEW x; ALTER TABLE x_in_memory RENAME TO x")
    expected = duckdb_table(duck, sql)
    compiler = background_compiler()
    for side, session in sessions.items():
        setattr(module, attribute, sides[side])
        problem = check(session.sql(sql), expected)
        print(f"{side}: first run {'equal' if problem is None else 'MISMATCH ' + problem[:200]}", flush=True)
        if problem is not None:  # a side answering wrongly has no speed to compare (and `| tail` hides the line)
            raise SystemExit(f"{a.switch} {side}: {a.workload} q{a.query} differs from DuckDB: {problem[:200]}")
        compiler.wait_idle(timeout=300)
        session.sql(sql)
        compiler.wait_idle(timeout=300)
    samples = {k: ([], []) for k in ("duckdb", *sides)}
    for run in range(a.runs):
        _, w, c = measure(lambda: duckdb_table(duck, sql))
        samples["duckdb"][0].append(w)
        samples["duckdb"][1].append(c)
        # Each side runs first every other round: the run right after DuckDB's (its threads' cache and allocator
        # traffic) cost the first side more (TPC-H q10 string-key-fusion read 434 / 399 ms in fixed order).
        for side, session in (list(sessions.items()) if run % 2 == 0 else list(sessions.items())[::-1]):
            setattr(module, attribute, sides[side])
            _, w, c = measure(lambda: session.sql(sql))
            samples[side][0].append(w)
            samples[side][1].append(c)
    setattr(module, attribute, sides["with"])
    m = statistics.median
    duck_cpu = m(samples["duckdb"][1])
    print(f"{a.switch}: {a.workload} q{a.query} sf{a.sf:g} drivers {a.drivers}, {a.compile_mode} compiles, "
          f"{a.runs} interleaved runs, "
          f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for k, (w, c) in samples.items():
        print(f"  {k:8s} cpu median {m(c)*1000:8.1f} ms (x{m(c)/duck_cpu:5.2f} DuckDB)  wall median {m(w)*1000:8.1f} ms"
              f"  cpu {' '.join(f'{x*1000:.0f}' for x in c)}")
    for pipeline in sessions["with"].last_stats().pipelines:
        for stats in pipeline.operators:
            if stats.operator_type == "TableScan" and stats.runtime.get("dynamic_filter_rows_dropped"):
                print("  scan " + ", ".join(f"{name}={stats.runtime.get(name, 0):.4g}" for name in COUNTS))


if __name__ == "__main__":
    main()
