"""A plain integer or float literal converts without Arrow, to exactly what Arrow's conversion gives.

Why a fast path: through Arrow each literal cost an array and a column (~1 ms on
a loaded machine), half of a 2000-term predicate's eager evaluation.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar import Column
from gpu_engine.device import get_device
from gpu_engine.expressions.literals import _plain_scalar, literal_scalar
from gpu_engine.plans.expressions import Literal

INTEGER_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64())
INTEGERS = (0, 1, -1, 127, -128, 128, 255, 256, 2**15, 2**31 - 1, -2**31, 2**32, 2**63 - 1, -2**63, 2**63, 2**64 - 1)
FLOATS = (0.0, -0.0, 1.1, 1e300, -1e-300, 5e-324, float("nan"), float("inf"), -float("inf"), 3.4e38, 1e39,
          16777217.0, 0.1)


def _through_arrow(literal: Literal):
    return Column.from_arrow(pa.array([literal.value], type=literal.dtype), get_device("cpu")).data[0]


@pytest.mark.parametrize("literal", [Literal(v, t) for t in INTEGER_TYPES for v in INTEGERS]
                         + [Literal(v, t) for t in (pa.float32(), pa.float64()) for v in FLOATS], ids=repr)
def test_a_plain_literal_converts_as_arrow_converts_it(literal):
    try:
        expected = _through_arrow(literal)
    except (pa.ArrowException, OverflowError):
        assert _plain_scalar(literal) is None  # out of range: Arrow's error (a PlanError) is kept
        return
    actual = literal_scalar(literal)
    assert type(actual) is type(expected)
    if isinstance(expected, np.floating):
        assert (math.isnan(actual) and math.isnan(expected)) or (actual == expected
                                                                 and np.signbit(actual) == np.signbit(expected))
    else:
        assert actual == expected


def test_other_literals_still_go_through_arrow():
    import datetime
    import decimal

    assert _plain_scalar(Literal(True, pa.bool_())) is None
    assert _plain_scalar(Literal(decimal.Decimal("1.25"), pa.decimal128(5, 2))) is None
    assert _plain_scalar(Literal(datetime.date(2020, 1, 2), pa.date32())) is None
    assert _plain_scalar(Literal(3, pa.float64())) is None  # an int of a float type: Arrow decides
    assert literal_scalar(Literal(decimal.Decimal("1.25"), pa.decimal128(5, 2))) == 125
