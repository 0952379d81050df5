"""Check EXTRACT(year|month|day) against DuckDB and the calendar conversion against Python's."""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pytest

from duckdb_check import check, col, small_table
from gpu_engine.expressions.temporal import civil_from_days
from gpu_engine.plans.expressions import Extract


@pytest.mark.parametrize("field", ["year", "month", "day"])
@pytest.mark.parametrize("name", ["d", "ts"])
def test_extract(device, name, field):
    check(device, Extract(field, col(name)), f"extract({field} from {name})")


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_extract_from_timestamp_units(device, unit):
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    seconds = [0, -1, 86399, 86400, -86401, 951782400, 4102444799, None]
    table = small_table(t=pa.array([None if s is None else s * per_second for s in seconds], pa.timestamp(unit)))
    for field in ["year", "month", "day"]:
        check(device, Extract(field, col("t", table)), f"extract({field} from t)", table)


def test_civil_from_days_matches_python_calendar(device):
    xp = device.xp
    days = np.arange(-719162, 2932897, 997, dtype=np.int64)  # 0001-01-01 .. 9999-12-31
    year, month, day = (device.to_host(a) for a in civil_from_days(xp, device.asarray(days)))
    epoch = datetime.date(1970, 1, 1)
    expected = [epoch + datetime.timedelta(days=int(d)) for d in days]
    assert year.tolist() == [e.year for e in expected]
    assert month.tolist() == [e.month for e in expected]
    assert day.tolist() == [e.day for e in expected]


def test_extract_before_year_one(device):
    table = small_table(d=pa.array([-800000, -719163, -719528, None], pa.date32()))
    for field in ["year", "month", "day"]:
        check(device, Extract(field, col("d", table)), f"extract({field} from d)", table)
