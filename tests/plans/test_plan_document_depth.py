"""A plan document nested deeper than the reader takes is a PlanError naming its depth (and still the format's
SerializationError), never a RecursionError from Python's JSON reader or the codec's walk (plans/serialization.py
DocumentTooDeep), whether read from text, from decoded JSON or written."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

from gpu_engine.errors import PlanError
from gpu_engine.plans import PlanBuilder
from gpu_engine.planning.plan_depth import deepest_path
from gpu_engine.plans.serialization import MAX_DOCUMENT_DEPTH, SerializationError, plan_from_dict, plan_from_json, \
    plan_to_json

TABLE = pa.table({"a": pa.array([3, None, 1, 2], pa.int64())})
_SCHEMA = {"fields": [{"name": "a", "type": "int64"}]}
_SCAN = {"type": "TableScanNode", "id": "0", "output_schema": _SCHEMA, "sources": [], "table_name": "t",
         "columns": ["a"]}


def _projects_text(depth: int) -> str:
    """A plan document of ``depth`` Projects over a scan, written out as text (no recursion, any depth)."""
    head = "".join(f'{{"type": "ProjectNode", "id": "{depth - i}", "output_schema": {json.dumps(_SCHEMA)}, '
                   '"sources": [' for i in range(depth))
    tail = '], "names": ["a"], "expressions": [{"type": "ColumnRef", "name": "a", "dtype": "int64"}]}' * depth
    return '{"format": 1, "plan": ' + head + json.dumps(_SCAN) + tail + "}"


def _projects_document(depth: int) -> dict:
    """The same document as decoded JSON, built bottom-up (no recursion)."""
    node = dict(_SCAN)
    for i in range(depth):
        node = {"type": "ProjectNode", "id": str(i + 1), "output_schema": _SCHEMA, "sources": [node],
                "names": ["a"], "expressions": [{"type": "ColumnRef", "name": "a", "dtype": "int64"}]}
    return {"format": 1, "plan": node}


def _levels(error: BaseException) -> int:
    return int(re.search(r"nests too deeply to (?:read|serialize) \((\d+) levels, at most 2000", str(error))[1])


@pytest.mark.parametrize("depth", [1_001, 3_000])  # just past the bound; past Python's json recursion limit
def test_a_json_plan_too_deep_to_read_is_a_plan_error_naming_its_depth(depth):
    with pytest.raises(PlanError, match="combine consecutive filters and projections") as caught:
        plan_from_json(_projects_text(depth))
    assert isinstance(caught.value, SerializationError) and _levels(caught.value) == 2 * depth + 5


def test_a_decoded_document_too_deep_to_read_is_a_plan_error_naming_its_depth():
    with pytest.raises(PlanError) as caught:
        plan_from_dict(_projects_document(5_000))
    assert isinstance(caught.value, SerializationError) and _levels(caught.value) > MAX_DOCUMENT_DEPTH


def test_a_plan_too_deep_to_write_is_a_plan_error_naming_its_depth():
    builder = PlanBuilder({"t": TABLE.schema}).table_scan("t")
    for _ in range(MAX_DOCUMENT_DEPTH // 2):
        builder = builder.project(["a"])
    with pytest.raises(PlanError) as caught:
        plan_to_json(builder.plan())
    assert _levels(caught.value) > MAX_DOCUMENT_DEPTH


def test_a_plan_as_deep_as_the_reader_takes_is_read():
    plan = plan_from_json(_projects_text(MAX_DOCUMENT_DEPTH // 2 - 5))
    assert len(deepest_path(plan)) == MAX_DOCUMENT_DEPTH // 2 - 4
