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


def _decimal_literals():
    import decimal

    texts = ("0", "1.25", "-1.25", "12.345", "-0.005", "999.99", "1000.00", "99999999999999.9999", "0.5", "-0")
    types = (pa.decimal128(5, 2), pa.decimal128(7, 2), pa.decimal128(18, 4), pa.decimal128(3, 0), pa.decimal128(38, 2))
    return [Literal(decimal.Decimal(text), dtype) for dtype in types for text in texts] + \
        [Literal(2.5, pa.decimal128(5, 2)), Literal(7, pa.decimal128(4, 1))]


def _date_literals():
    import datetime

    return [Literal(value, pa.date32()) for value in (datetime.date(1970, 1, 1), datetime.date(1, 1, 1),
                                                      datetime.date(9999, 12, 31), datetime.date(1969, 12, 31),
                                                      "1998-09-02", datetime.datetime(2020, 5, 6, 7, 8))]


@pytest.mark.parametrize("literal", _decimal_literals() + _date_literals()
                         + [Literal(v, t) for t in (pa.int8(), pa.int32(), pa.uint64()) for v in INTEGERS]
                         + [Literal(v, pa.float64()) for v in FLOATS[:6]], ids=repr)
def test_a_literal_column_holds_what_arrow_converts(literal):
    """``literal_values_column`` builds dates, decimals and numbers without ``pa.array`` (which imports pandas);
    it holds exactly Arrow's values, and a value Arrow refuses is refused as Arrow refuses it."""
    from gpu_engine.expressions.literals import _arrow_value, literal_values_column

    try:
        expected = Column.from_arrow(pa.array([_arrow_value(literal)], type=literal.dtype), get_device("cpu"))
    except Exception as error:  # noqa: BLE001 - the same refusal either way
        with pytest.raises(type(error)):
            literal_values_column([literal], literal.dtype)
        return
    actual = literal_values_column([literal], literal.dtype)
    assert actual.dtype == expected.dtype and actual.data.dtype == expected.data.dtype
    np.testing.assert_array_equal(actual.data, expected.data)
    assert actual.validity is None and expected.validity is None


def test_string_columns_from_python_are_what_arrow_makes():
    for values in ([], [""], ["a", "", "héllo", "日本語"], ["x"] * 3):
        expected = Column.from_arrow(pa.array(values, type=pa.string()), get_device("cpu"))
        actual = Column.from_strings(values, get_device("cpu"))
        assert actual.dtype == expected.dtype and actual.validity is None and actual.dictionary is None
        np.testing.assert_array_equal(actual.offsets, expected.offsets)
        np.testing.assert_array_equal(actual.data, expected.data)
        assert actual.to_arrow(get_device("cpu")).to_pylist() == values
