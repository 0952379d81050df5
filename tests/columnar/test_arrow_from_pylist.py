"""arrow_from_pylist(values, dtype) equals pa.array(values, dtype) (written into buffers where it can, else by
pyarrow with its own errors): gpu_engine/columnar/arrow_numpy.py."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from gpu_engine.columnar.arrow_numpy import arrow_from_pylist

D = decimal.Decimal
CASES = [
    ([True, None, False], pa.bool_()),
    ([1, None, -3, 2**63 - 1, -(2**63)], pa.int64()),
    ([0, 255, None], pa.uint8()),
    ([2**64 - 1, None], pa.uint64()),
    ([1, -2, None], pa.int32()),
    ([1.5, None, -0.0, 3, 1e308], pa.float64()),
    ([float("nan"), float("inf"), None], pa.float64()),
    ([1.5, 0.1, None], pa.float32()),  # 0.1 is no float32: pyarrow converts it
    ([datetime.date(2020, 2, 29), None, datetime.date(1, 1, 1), datetime.date(9999, 12, 31)], pa.date32()),
    ([datetime.datetime(2020, 1, 2, 3, 4, 5, 678901), None, datetime.datetime(1900, 1, 1)], pa.timestamp("us")),
    ([datetime.datetime(2020, 1, 2, 3, 4, 5, 678901), None], pa.timestamp("ns")),
    ([datetime.datetime(2020, 1, 2, 3, 4, 5), None], pa.timestamp("s")),
    ([datetime.datetime(2020, 1, 2, 3, 4, 5, 1000)], pa.timestamp("ms")),
    ([datetime.datetime(2020, 1, 2, tzinfo=datetime.timezone.utc)], pa.timestamp("us", tz="UTC")),
    ([datetime.time(0, 0), datetime.time(23, 59, 59, 999999), None], pa.time64("us")),
    ([datetime.time(12, 30, 1, 5), None], pa.time64("ns")),
    ([datetime.time(12, 30, 1), None], pa.time32("s")),
    ([datetime.time(12, 30, 1, 250000)], pa.time32("ms")),
    ([D("1.50"), None, D("-0.01"), D("12345678.9"), D("0"), D("1E+2")], pa.decimal128(12, 2)),
    ([D("9" * 35 + ".999"), D("-1.000"), D("-" + "9" * 35 + ".999")], pa.decimal128(38, 3)),
    (["a", None, "", "ünïcode", "x" * 300], pa.string()),
    (["a", None, ""], pa.large_string()),
    ([None, None], pa.null()),
    ([None, None], pa.int64()),
    ([], pa.string()),
    ([], pa.int64()),
    ([b"ab", None], pa.binary()),  # not written here: pyarrow's
]


@pytest.mark.parametrize("values, dtype", CASES, ids=[f"{i}-{dtype}" for i, (_, dtype) in enumerate(CASES)])
def test_it_equals_pyarrows_conversion(values, dtype):
    made = arrow_from_pylist(values, dtype)
    expected = pa.array(values, dtype)
    made.validate(full=True)
    assert made.type == expected.type and str(made.to_pylist()) == str(expected.to_pylist()), (made, expected)
    assert made.equals(expected) or any(v != v for v in values if isinstance(v, float))  # NaN is no NaN


@pytest.mark.parametrize("values, dtype", [
    ([256], pa.uint8()), ([-1], pa.uint64()), ([2**63], pa.int64()), ([D("1.234")], pa.decimal128(5, 2)),
    ([D("123456")], pa.decimal128(5, 2)), ([datetime.datetime(2020, 1, 1, 0, 0, 0, 1)], pa.timestamp("s")),
    (["a", 1], pa.string()), ([1, "a"], pa.int64()), ([2**53 + 1], pa.float64()),
    ([D("9" * 36 + ".999")], pa.decimal128(38, 3)),
    ([D("-170141183460469231731687303715884105.727")], pa.decimal128(38, 3)),
])
def test_what_pyarrow_refuses_it_refuses_the_same_way(values, dtype):
    try:
        pa.array(values, dtype)
    except Exception as error:  # noqa: BLE001 - pyarrow's error is what the caller must see
        with pytest.raises(type(error)):
            arrow_from_pylist(values, dtype)
    else:
        assert arrow_from_pylist(values, dtype).equals(pa.array(values, dtype))
