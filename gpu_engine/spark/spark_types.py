"""Map engine (Arrow) types to Spark SQL types and back, and cast batches to what Spark expects.

Why: ``mapInArrow`` declares its output as a Spark schema, and the JVM reads the
Arrow batches the Python function yields as exactly the Arrow types that
schema maps to. The engine's own types are looser (strings may come back as
dictionaries, a sum may be ``decimal128(38, 2)`` where Spark declared the
same, timestamps carry whatever zone the plan had), so every batch is cast
once at the edge, in :func:`conform_to_wire`. The mapping:

==========================  ===========================  =========================================
engine (Arrow)              Spark                        on the wire (Spark -> Python -> Spark)
==========================  ===========================  =========================================
int8/16/32/64               Byte/Short/Integer/Long      the same
uint8/16/32                 Short/Integer/Long           the next wider signed integer
uint64                      Decimal(20, 0)               decimal128(20, 0)
float32/64                  Float/Double                 the same
bool                        Boolean                      bool
date32                      Date                         date32
timestamp[unit, tz]         Timestamp                    timestamp[us, tz=<session time zone>]
timestamp[unit]             TimestampNTZ                 timestamp[us]
decimal128(p, s)            Decimal(p, s)                decimal128(p, s)
string/large_string/view    String                       string (large_string when Spark's
                                                         ``spark.sql.execution.arrow.useLargeVarTypes``)
binary                      Binary                       binary (large_binary, likewise)
null                        Null                         null
==========================  ===========================  =========================================

Anything else (nested types, intervals) has no engine counterpart and fails at
plan time with a :class:`~gpu_engine.errors.PlanError` naming the column.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from gpu_engine.errors import PlanError

__all__ = [
    "spark_type_for",
    "spark_schema_for",
    "arrow_type_for",
    "arrow_schema_for",
    "wire_schema_for",
    "conform_to_wire",
    "reads_same_values",
]

_SIGNED = {8: T.ByteType(), 16: T.ShortType(), 32: T.IntegerType(), 64: T.LongType()}
_UNSIGNED = {8: T.ShortType(), 16: T.IntegerType(), 32: T.LongType(), 64: T.DecimalType(20, 0)}


def spark_type_for(dtype: pa.DataType, column: str = "") -> T.DataType:
    """Return the Spark type that holds every value of an engine column of type ``dtype``."""
    if pa.types.is_dictionary(dtype):
        return spark_type_for(dtype.value_type, column)
    if pa.types.is_signed_integer(dtype):
        return _SIGNED[dtype.bit_width]
    if pa.types.is_unsigned_integer(dtype):
        return _UNSIGNED[dtype.bit_width]
    if pa.types.is_float16(dtype) or pa.types.is_float32(dtype):
        return T.FloatType()
    if pa.types.is_float64(dtype):
        return T.DoubleType()
    if pa.types.is_boolean(dtype):
        return T.BooleanType()
    if pa.types.is_date(dtype):
        return T.DateType()
    if pa.types.is_timestamp(dtype):
        return T.TimestampType() if dtype.tz else T.TimestampNTZType()
    if pa.types.is_decimal128(dtype) and dtype.precision <= 38:
        return T.DecimalType(dtype.precision, dtype.scale)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return T.StringType()
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return T.BinaryType()
    if pa.types.is_null(dtype):
        return T.NullType()
    if pa.types.is_interval(dtype):
        raise PlanError("an INTERVAL column cannot go to Spark: Spark's CalendarInterval does not cross Arrow; return "
                        "its parts (date_part('day', x), ...) or CAST it AS VARCHAR", column=column or None)
    raise PlanError(f"no Spark type holds the engine type {dtype}", column=column or None)


def spark_schema_for(schema: pa.Schema) -> T.StructType:
    """Return the Spark schema a fragment with output ``schema`` declares to ``mapInArrow``."""
    return T.StructType([T.StructField(f.name, spark_type_for(f.type, f.name), True) for f in schema])


def arrow_type_for(dtype: T.DataType, time_zone: str, column: str = "", large_var_types: bool = False) -> pa.DataType:
    """Return the Arrow type Spark uses for a column of Spark type ``dtype`` (its wire type)."""
    simple = {
        T.ByteType: pa.int8(), T.ShortType: pa.int16(), T.IntegerType: pa.int32(), T.LongType: pa.int64(),
        T.FloatType: pa.float32(), T.DoubleType: pa.float64(), T.BooleanType: pa.bool_(),
        T.DateType: pa.date32(), T.NullType: pa.null(), T.TimestampNTZType: pa.timestamp("us"),
    }
    for spark_class, arrow_type in simple.items():
        if isinstance(dtype, spark_class):
            return arrow_type
    if isinstance(dtype, T.TimestampType):
        return pa.timestamp("us", tz=time_zone)
    if isinstance(dtype, T.DecimalType):
        return pa.decimal128(dtype.precision, dtype.scale)
    if isinstance(dtype, (T.StringType, T.CharType, T.VarcharType)):
        return pa.large_string() if large_var_types else pa.string()
    if isinstance(dtype, T.BinaryType):
        return pa.large_binary() if large_var_types else pa.binary()
    raise PlanError(f"the engine has no type for the Spark type {dtype.simpleString()}", column=column or None)


def arrow_schema_for(schema: T.StructType, time_zone: str) -> pa.Schema:
    """Return the Arrow schema of a Spark DataFrame's columns, what ``PlanBuilder`` resolves a table with."""
    return pa.schema([pa.field(f.name, arrow_type_for(f.dataType, time_zone, f.name)) for f in schema.fields])


def wire_schema_for(schema: T.StructType, time_zone: str, large_var_types: bool) -> pa.Schema:
    """Return the exact Arrow schema of the batches a ``mapInArrow`` declared with ``schema`` must yield."""
    return pa.schema([pa.field(f.name, arrow_type_for(f.dataType, time_zone, f.name, large_var_types))
                      for f in schema.fields])


def conform_to_wire(record_batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast an engine output batch column by column to ``schema`` (Spark's wire types), exactly.

    Casts are safe (an overflow or a lost decimal digit raises) except that
    timestamps finer than Spark's microseconds are truncated, which Spark
    could not hold anyway.
    """
    if record_batch.schema.equals(schema):
        return record_batch
    arrays = []
    for position, target in enumerate(schema):
        array = record_batch.column(position)
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if not array.type.equals(target.type):
            truncates = pa.types.is_timestamp(array.type) and pa.types.is_timestamp(target.type)
            array = pc.cast(array, target.type, safe=not truncates)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def reads_same_values(have: pa.DataType, want: pa.DataType) -> bool:
    """Return True when a column of engine type ``have`` can feed a plan that reads ``want``.

    Timestamps match in any unit (the engine reads any) as long as both have
    a zone or neither does: a zone only says how the same instants print.
    """
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want):
        return (have.tz is None) == (want.tz is None)
    return have.equals(want)
