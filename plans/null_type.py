"""SQL's NULL type for plan columns: a column of bare NULLs that takes the type of whatever it meets.

Why: DuckDB types ``SELECT NULL AS x`` as its ``NULL`` type, which casts implicitly to the type it meets later:
``t.s = q.x`` compares text, ``q.x UNION ALL SELECT d`` is a DATE, ``coalesce(q.x, t.s)`` a VARCHAR. The
engine stored such a column as INTEGER, and every later meeting with text, dates or booleans was refused
("cannot compare int32 with string"), at every site that met it (derived tables, CTEs, set operations, VALUES
lists, CASE / COALESCE of only NULLs).

The column keeps INTEGER storage (DuckDB's result type for a NULL column, and a type every operator moves),
and its plan field carries the NULL type in its metadata (:func:`null_typed_field`). The translator reads such
a column as an untyped NULL literal (:func:`gpu_engine.plans.scalar_translation.ScalarTranslator`): every
expression rule already types an untyped NULL by its context, so the NULL type is resolved where it meets a
type, by the rules that resolve a written ``NULL``. A projection whose value is an untyped NULL makes such a
column again, so the type survives derived tables, CTEs and set operations (whose branches unify with
:func:`sql_type`). Grouping keys keep the mark, and so do the aggregates and window functions that return their
argument's type (``max``, ``any_value``, ``arg_min``, ``lag``, ``first_value``...: DuckDB's ``typeof(max(x))`` is
"NULL"; ``AggregateCall.null_typed``, :func:`gpu_engine.plans.window_functions.keeps_null_type`).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["NULL_STORAGE", "null_typed_field", "is_null_typed", "sql_type",
           "with_null_types_of", "schema_with_null_types_of", "null_type_metadata", "plan_field", "is_hugeint_field"]

#: The storage of a NULL-typed column (DuckDB's result type for a column of the NULL type).
NULL_STORAGE = pa.int32()
_KEY = b"gpu_engine.sql_type"

_NULL = b"NULL"
#: DuckDB's HUGEINT, held as DECIMAL(38, 0) as DuckDB hands it to Arrow: the mark tells it apart from a real
#: DECIMAL(38, 0) where types meet (HUGEINT beside DECIMAL(10, 2) is DECIMAL(38, 2), a DECIMAL(38, 0) beside it
#: DECIMAL(38, 0): :func:`gpu_engine.plans.type_coercion.common_type`).
_HUGEINT = b"HUGEINT"


def null_typed_field(name: str, nullable: bool = True) -> pa.Field:
    """Return a field of SQL's NULL type: INTEGER storage, the NULL type in its metadata."""
    return pa.field(name, NULL_STORAGE, nullable, metadata={_KEY: _NULL})


def is_null_typed(field: pa.Field) -> bool:
    """Return True when ``field`` is a column of SQL's NULL type (every value NULL, no type of its own)."""
    metadata = field.metadata
    return bool(metadata) and metadata.get(_KEY) == _NULL


def sql_type(field: pa.Field) -> pa.DataType:
    """Return the type SQL rules see for ``field``: ``pa.null()`` for a NULL-typed column, else its type."""
    return pa.null() if is_null_typed(field) else field.type


def with_null_types_of(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Return ``table`` (a plan's result) with the NULL type marked on the columns ``schema`` (the plan's output,
    position by position) marks, so a table registered from it (a CTE computed once) keeps the type."""
    if not any(is_null_typed(field) for field in schema) or len(schema) != table.num_columns:
        return table
    fields = [null_typed_field(field.name, field.nullable) if is_null_typed(marked) and field.type == NULL_STORAGE
              else field for field, marked in zip(table.schema, schema)]
    return table.cast(pa.schema(fields))


def schema_with_null_types_of(schema: pa.Schema, marked: pa.Schema) -> pa.Schema:
    """Return ``schema`` (a table's, read back from elsewhere: a Spark DataFrame) with the NULL type marked on the
    columns ``marked`` (the plan that computed it, position by position) marks, where the storage agrees."""
    if not any(is_null_typed(field) for field in marked) or len(schema) != len(marked):
        return schema
    return pa.schema([null_typed_field(field.name, field.nullable)
                      if is_null_typed(mark) and field.type == NULL_STORAGE else field
                      for field, mark in zip(schema, marked)])


def null_type_metadata(field: pa.Field) -> dict | None:
    """Return the metadata a field rebuilt from ``field`` keeps: the NULL type's or HUGEINT's mark, nothing else."""
    if is_null_typed(field):
        return {_KEY: _NULL}
    return {_KEY: _HUGEINT} if is_hugeint_field(field) else None


def plan_field(name: str, dtype: pa.DataType, nullable: bool = True, *, hugeint: bool = False) -> pa.Field:
    """Return a plan column of ``dtype``: of SQL's NULL type for ``pa.null()``, marked HUGEINT for ``hugeint``."""
    if pa.types.is_null(dtype):
        return null_typed_field(name, nullable)
    return pa.field(name, dtype, nullable, metadata={_KEY: _HUGEINT} if hugeint else None)


def is_hugeint_field(field: pa.Field) -> bool:
    """Return True when ``field`` holds DuckDB's HUGEINT (an integer sum, UBIGINT with a signed integer), not a
    real DECIMAL(38, 0)."""
    metadata = field.metadata
    return bool(metadata) and metadata.get(_KEY) == _HUGEINT
