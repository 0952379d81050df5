"""Deferred row checks: one host sync per evaluation, and the same error as checking at once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar import Batch
from gpu_engine.errors import ExecutionError
from gpu_engine.exec.device_counters import counts_now
from gpu_engine.expressions import evaluate
from gpu_engine.expressions.deferred_checks import checks_read_together, defer_row_check, first_true_row
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal


def _rows(device, *flags: bool):
    return device.asarray(np.array(flags, dtype=np.bool_))


def _failing_at(row: int) -> ExecutionError:
    return ExecutionError(f"bad row {row}")


@pytest.mark.parametrize("flags, expected", [((False, True, True), 1), ((False, False), -1), ((), -1)])
def test_first_true_row(device, flags, expected):
    assert device.read_scalar(first_true_row(device, _rows(device, *flags)).reshape(-1), 0) == expected


def test_checks_in_a_block_are_read_in_one_sync_and_the_first_failure_wins(device):
    before = counts_now().host_syncs
    with pytest.raises(ExecutionError, match="first check: bad row 2"):
        with checks_read_together(device):
            defer_row_check(device, first_true_row(device, _rows(device, False, False)), -1, _failing_at)
            defer_row_check(device, first_true_row(device, _rows(device, False, False, True)), -1,
                            lambda row: ExecutionError(f"first check: bad row {row}"))
            defer_row_check(device, first_true_row(device, _rows(device, True)), -1, _failing_at)
    assert counts_now().host_syncs - before == 1


def test_a_check_outside_a_block_is_read_at_once(device):
    before = counts_now().host_syncs
    defer_row_check(device, first_true_row(device, _rows(device, False)), -1, _failing_at)
    with pytest.raises(ExecutionError, match="bad row 0"):
        defer_row_check(device, first_true_row(device, _rows(device, True)), -1, _failing_at)
    assert counts_now().host_syncs - before == 2


def test_an_inner_block_joins_the_outer_one_unless_it_has_its_own_scope(device):
    failing = first_true_row(device, _rows(device, True))
    with pytest.raises(ExecutionError):
        with checks_read_together(device):
            with checks_read_together(device):
                defer_row_check(device, failing, -1, _failing_at)
            reached_after_the_inner_block = True  # the joined inner block did not read its check
    assert reached_after_the_inner_block
    with checks_read_together(device):
        with pytest.raises(ExecutionError):
            with checks_read_together(device, own_scope=True):
                defer_row_check(device, failing, -1, _failing_at)


def test_a_pending_failure_wins_over_an_error_it_caused(device):
    with pytest.raises(ExecutionError, match="bad row 0") as raised:
        with checks_read_together(device):
            defer_row_check(device, first_true_row(device, _rows(device, True)), -1, _failing_at)
            raise ValueError("what the meaningless values led to")
    assert isinstance(raised.value.__cause__, ValueError)


def _price_batch(device, extended_price: list[int]) -> Batch:
    table = pa.table({"p": pa.array(extended_price, pa.int64()), "q": pa.array([1, 2, 3], pa.int64())})
    return Batch.from_arrow(table, device)


def _three_checked_operations() -> BinaryOp:
    """Return ``(p * q + 7) - q``: three checked int64 operations."""
    p, q = ColumnRef("p", pa.int64()), ColumnRef("q", pa.int64())
    product = BinaryOp("mul", p, q, pa.int64())
    return BinaryOp("sub", BinaryOp("add", product, Literal(7, pa.int64()), pa.int64()), q, pa.int64())


def test_an_evaluation_reads_all_its_checks_in_one_sync(device):
    batch = _price_batch(device, [10, 20, 30])
    before = counts_now()
    result = evaluate(_three_checked_operations(), batch)
    spent = counts_now() - before
    assert device.to_host(result.data).tolist() == [16, 45, 94]
    assert spent.host_syncs == 1 and spent.kernel_launches == 3


def test_a_deferred_overflow_names_its_first_row(device):
    batch = _price_batch(device, [10, 2**62, 2**62])
    with pytest.raises(ExecutionError, match=r"Overflow in multiplication.*first at row 1"):
        evaluate(_three_checked_operations(), batch)
