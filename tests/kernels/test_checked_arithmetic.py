"""checked_arithmetic: exact int64 results and the first overflowing valid row, on both twins."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_engine.kernels.checked_arithmetic import ADD, MULTIPLY, SUBTRACT, checked_arithmetic

INT64 = st.integers(-(2**63), 2**63 - 1)
PYTHON_OP = {ADD: lambda a, b: a + b, SUBTRACT: lambda a, b: a - b, MULTIPLY: lambda a, b: a * b}


def _expected(op, left, right, validity):
    results, first_bad = [], -1
    for i, (a, b) in enumerate(zip(left, right)):
        exact = PYTHON_OP[op](int(a), int(b))
        if not -(2**63) <= exact < 2**63 and first_bad < 0 and (validity is None or validity[i]):
            first_bad = i
        results.append(exact)
    return results, first_bad


@pytest.mark.parametrize("op", [ADD, SUBTRACT, MULTIPLY], ids=["add", "sub", "mul"])
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pairs=st.lists(st.tuples(INT64, INT64, st.booleans()), min_size=1, max_size=40))
def test_matches_python_integers(device, op, pairs):
    left = np.array([p[0] for p in pairs], dtype=np.int64)
    right = np.array([p[1] for p in pairs], dtype=np.int64)
    validity = np.array([p[2] for p in pairs])
    values, first_bad = checked_arithmetic(device, op, device.asarray(left), device.asarray(right), device.asarray(validity))
    expected, expected_bad = _expected(op, left, right, validity)
    assert first_bad == expected_bad
    host = device.to_host(values)
    for i, exact in enumerate(expected):
        if -(2**63) <= exact < 2**63:
            assert int(host[i]) == exact


@pytest.mark.parametrize("op,left,right,bad", [
    (MULTIPLY, [3, 2**62], 2, 1),
    (MULTIPLY, [-1, -(2**63)], -1, 1),
    (ADD, [2**63 - 1, 5], 1, 0),
    (SUBTRACT, [-(2**63), 0], 1, 0),
    (MULTIPLY, [2**32, 2**31], 2**31, 0),
])
def test_scalar_operand_and_edges(device, op, left, right, bad):
    _, first_bad = checked_arithmetic(device, op, device.asarray(np.array(left, dtype=np.int64)), right, None)
    assert first_bad == bad


def test_null_rows_may_overflow(device):
    values = device.asarray(np.array([2**62, 1], dtype=np.int64))
    validity = device.asarray(np.array([False, True]))
    result, first_bad = checked_arithmetic(device, MULTIPLY, values, 4, validity)
    assert first_bad == -1 and int(device.to_host(result)[1]) == 4
