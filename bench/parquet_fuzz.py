"""Fuzz the engine's Parquet reading: damaged files must give pyarrow's answer or a clean engine error, never a crash.

Why: a crafted file once killed the process (codes outside a dictionary
reached a kernel) or shifted one column's rows against the others. The
engine's page decoder checks what it reads, and what pyarrow reads for it is
checked too; this harness looks for the cases those checks miss.

A case is a :class:`Recipe`: a table pyarrow writes in one of the layouts the
engine's decoder reads (INT32, INT64, FLOAT, DOUBLE, strings, dates and
decimals stored as integers, a boolean left to pyarrow; PLAIN or dictionary
pages; data pages v1 or v2; Snappy, uncompressed, or a codec left to
pyarrow; required or optional; several row groups, empty ones among them;
pages of a few rows), then damage: page header or footer integers rewritten
(counts, sizes, offsets, types), bytes flipped, a range of bytes cut out,
the file truncated. Each damaged file is read in a worker process (so a
segfault is a result, not the end of the run) by pyarrow, then by the engine
through the connector (:func:`~gpu_engine.connectors.data_source.read_split`)
and a Session (``SELECT count(*)``, ``SELECT *``, a ``GROUP BY``). An outcome
is one of:

* ``equal``: the engine's answer is pyarrow's;
* ``engine_error``: a clean engine error (a ``GpuEngineError``, and for an
  ``ExecutionError`` a cause that is one too);
* ``mismatch``: the engine answered otherwise than pyarrow (a failure);
* ``unclean_error``: another exception escaped (a failure);
* ``crash``: the worker died or hung (a failure; the file is kept);
* ``unwritable``: pyarrow died writing or damaging the case's file (the
  generator's failure, not the engine's: no engine code ran; the worker writes
  each file so the run goes on; reported with its recipe, not a failure);
* ``answered_where_pyarrow_failed``: pyarrow refused what the engine read and
  the engine answered (a failure: there is no answer to compare with, and the
  engine's checks should have refused it too). The GROUP BY is compared with
  pyarrow's read of its key column alone.

Run from the repository root::

    python -m bench.parquet_fuzz --seeds 0:200                      # 200 seeds, 20 cases each
    python -m bench.parquet_fuzz --seeds 7 --cases 50 --crash-dir /tmp/crashes

The report (``bench/results/<date>-parquet-fuzz.json`` unless ``--output``)
lists the seeds, the counts of each outcome, and every failure with its
recipe; a crashing file is copied to ``--crash-dir`` with its recipe beside it,
to become a regression case (``tests/connectors/test_parquet_fuzz.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: Column kinds a recipe draws from, as (Arrow type name, how values are made).
KINDS = ("int32", "int64", "float", "double", "string", "date", "decimal", "int16", "bool")
#: ``--extended`` also draws nested columns (the engine reads the flat columns beside them, and refuses the nested
#: ones by name) and damage aimed at dictionary pages (``dict``).
NESTED_KINDS = ("list", "struct")
COMPRESSIONS = ("none", "snappy", "zstd")
#: ``--wide`` also draws timestamps (microseconds with a zone, nanoseconds) and int8 columns, the codecs left to
#: pyarrow (gzip, lz4, brotli), and the non-dictionary encodings pyarrow writes (:data:`ENCODINGS`), which the engine
#: leaves to pyarrow: damage there must still end in pyarrow's answer or a clean error, never a crash.
WIDE_KINDS = ("timestamp", "timestamp_ns", "int8")
WIDE_COMPRESSIONS = ("gzip", "lz4", "brotli")
#: An encoding and the column kinds pyarrow writes it for (their dictionaries off).
ENCODINGS = {
    "DELTA_BINARY_PACKED": ("int32", "int64", "int16", "int8", "date", "decimal", "timestamp", "timestamp_ns"),
    "BYTE_STREAM_SPLIT": ("float", "double"),
    "DELTA_BYTE_ARRAY": ("string",),
    "DELTA_LENGTH_BYTE_ARRAY": ("string",),
}
MUTATIONS = ("page", "footer", "flip", "cut", "truncate", "dict")
QUERIES = ("count", "star", "group")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How to make one damaged file: the table, the layout pyarrow writes it in, and the damage, in order."""

    seed: int
    row_groups: tuple[int, ...]  # rows per row group; 0 is an empty row group
    columns: tuple[tuple[str, bool], ...]  # (kind, nullable)
    compression: str = "snappy"
    dictionary: bool = True
    version: str = "1.0"
    page_rows: int = 64  # rows per data page (write_batch_size with a tiny data_page_size)
    #: Damage, in order: ("page"|"footer", k, how) rewrites the k-th integer of the page headers or footer (see
    #: :func:`_new_int`); ("flip", where, xor) a byte of the pages, at ``where`` in [0, 1) of them (in [1, 2): of the
    #: whole file); ("cut", where, size) removes bytes; ("truncate", keep) keeps a fraction of the file;
    #: ("dict", k, how, xor) damages a dictionary page: an integer of its header (``how`` < 5, see :func:`_new_int`)
    #: or a byte of its body (xor'ed).
    mutations: tuple[tuple, ...] = ()
    #: A key of :data:`ENCODINGS` written for the columns it applies to ("" for pyarrow's default).
    encoding: str = ""

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, value: dict) -> "Recipe":
        return cls(value["seed"], tuple(value["row_groups"]), tuple((k, bool(n)) for k, n in value["columns"]),
                   value["compression"], bool(value["dictionary"]), value["version"], int(value["page_rows"]),
                   tuple(tuple(m) for m in value["mutations"]), value.get("encoding", ""))


# ----------------------------------------------------------------- making files
def _values(kind: str, rows: int, rng: np.random.Generator, nullable: bool):
    import pyarrow as pa

    mask = rng.random(rows) < 0.2 if nullable else None
    distinct = int(rng.integers(1, 12))  # few values: dictionary pages with runs
    picks = rng.integers(0, distinct, rows)
    if kind == "int32":
        return pa.array((picks * 1_000_003 - 7).astype(np.int32), mask=mask)
    if kind == "int8":
        return pa.array((picks * 11 - 60).astype(np.int8), mask=mask)
    if kind in ("timestamp", "timestamp_ns"):
        unit = pa.timestamp("us", tz="UTC") if kind == "timestamp" else pa.timestamp("ns")
        return pa.array(picks.astype(np.int64) * 86_400_000_123 + 1_600_000_000_000_000, mask=mask).cast(unit)
    if kind == "int16":
        return pa.array((picks * 1_001 - 5000).astype(np.int16), mask=mask)
    if kind == "int64":
        return pa.array(picks.astype(np.int64) * 10_000_000_019 - 3, mask=mask)
    if kind == "float":
        return pa.array((picks * 0.25 - 1).astype(np.float32), mask=mask)
    if kind == "double":
        return pa.array(picks * 1.5 - 2.25, mask=mask)
    if kind == "string":
        return pa.array([f"v{p}-" + "x" * int(p % 5) for p in picks], pa.string(), mask=mask)
    if kind == "date":
        return pa.array((picks * 37 + 9000).astype(np.int32), mask=mask).cast(pa.date32())
    if kind == "decimal":
        import decimal

        return pa.array([decimal.Decimal(int(p) * 12345 - 999).scaleb(-2) for p in picks], pa.decimal128(12, 2),
                        mask=mask)
    if kind == "bool":
        return pa.array(picks % 2 == 0, mask=mask)
    if kind == "list":  # NULL lists, empty lists and NULL items
        return pa.array([None if mask is not None and mask[n] else
                         [None if (p + i) % 7 == 3 else int(p * 31 + i) for i in range(int(p % 4))]
                         for n, p in enumerate(picks)], pa.list_(pa.int32()))
    if kind == "struct":
        return pa.array([None if mask is not None and mask[n] else {"x": None if p % 5 == 1 else int(p), "y": f"s{p}"}
                         for n, p in enumerate(picks)], pa.struct([("x", pa.int32()), ("y", pa.string())]))
    raise ValueError(kind)


def write_file(recipe: Recipe, path: Path) -> None:
    """Write the recipe's table as pyarrow does, then apply its damage in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(recipe.seed)
    fields = [pa.field(f"c{i}_{kind}", _values(kind, 0, rng, nullable).type, nullable=nullable)
              for i, (kind, nullable) in enumerate(recipe.columns)]
    schema = pa.schema(fields)
    encoded = [f.name for f, (kind, _) in zip(fields, recipe.columns) if kind in ENCODINGS.get(recipe.encoding, ())]
    extra = {"column_encoding": {name: recipe.encoding for name in encoded}} if encoded else {}
    dictionary = [f.name for f in fields if f.name not in encoded] if encoded and recipe.dictionary else (
        recipe.dictionary and not encoded)
    with pq.ParquetWriter(path, schema, compression=recipe.compression, use_dictionary=dictionary, **extra,
                          data_page_version=recipe.version, data_page_size=1, write_batch_size=recipe.page_rows,
                          store_decimal_as_integer=True) as writer:
        for rows in recipe.row_groups:
            arrays = [_values(kind, rows, rng, nullable) for kind, nullable in recipe.columns]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=max(rows, 1))
    data = bytearray(path.read_bytes())
    for mutation in recipe.mutations:
        data = _mutate(data, mutation, path)
    path.write_bytes(bytes(data))


def _new_int(old: int, how: int) -> int:
    return [old + 1, old - 1, 0, -1, old * 2 + 7, (1 << 31) - 1, 1 << 40, old // 2, -(1 << 31), old + 64][how % 10]


def _mutate(data: bytearray, mutation: tuple, path: Path) -> bytearray:
    from bench import parquet_surgery

    kind = mutation[0]
    if kind in ("page", "footer"):
        _, k, how = mutation
        try:
            fields = list(_page_int_fields(data, path) if kind == "page" else
                          parquet_surgery.int_fields(parquet_surgery.footer(data)))
            if fields:
                item = fields[k % len(fields)]
                parquet_surgery.write_int(data, item, _new_int(parquet_surgery.read_int(data, item), how))
        except Exception:  # (earlier damage hid the structure pyarrow or the parser needs, or the value does not fit)
            pass  # the mutation does nothing: the recipe still names one file
        return data
    if kind == "flip":  # a byte of the pages (between the magic and the footer), or with ``where`` > 1 anywhere
        _, where, xor = mutation
        footer_at = len(data) - 8 - int.from_bytes(data[-8:-4], "little") if len(data) >= 12 else len(data)
        end = footer_at if 4 < footer_at <= len(data) and where <= 1 else len(data)
        start = 4 if end > 4 and where <= 1 else 0
        if end > start:
            data[start + min(int((where % 1) * (end - start)), end - start - 1)] ^= xor or 1
        return data
    if kind == "cut":  # remove bytes before the footer: every offset after them is off by ``size``
        _, where, size = mutation
        at = 4 + int(where * max(len(data) - 200, 0))
        return data[:at] + data[at + size:]
    if kind == "truncate":
        return data[:int(mutation[1] * len(data))]
    if kind == "dict":
        _, k, how, xor = mutation
        try:
            found = list(_dictionary_pages(data, path))
            if found:
                page = found[k % len(found)]
                fields = list(parquet_surgery.int_fields(page.header))
                if how < 5 and fields:
                    item = fields[(k // len(found)) % len(fields)]
                    parquet_surgery.write_int(data, item, _new_int(parquet_surgery.read_int(data, item), how * 2 + k))
                elif page.end > page.body:
                    data[page.body + (k // len(found)) % (page.end - page.body)] ^= xor or 1
        except Exception:  # (as for "page": earlier damage hid the structure)
            pass
        return data
    raise ValueError(kind)


def _dictionary_pages(data: bytearray, path: Path):
    """Yield the dictionary pages of every chunk (as the undamaged footer places them)."""
    import pyarrow.parquet as pq

    from bench import parquet_surgery

    path.write_bytes(bytes(data))
    metadata = pq.read_metadata(path)
    for group in range(metadata.num_row_groups):
        for column in range(metadata.num_columns):
            for page in parquet_surgery.pages(data, str(path), group, column):
                if parquet_surgery.page_kind(data, page) == 2:
                    yield page


def _page_int_fields(data: bytearray, path: Path):
    """Yield the integer fields of every page header of every chunk (as the undamaged footer places them)."""
    import pyarrow.parquet as pq

    from bench import parquet_surgery

    path.write_bytes(bytes(data))
    metadata = pq.read_metadata(path)
    for group in range(metadata.num_row_groups):
        for column in range(metadata.num_columns):
            for page in parquet_surgery.pages(data, str(path), group, column):
                yield from parquet_surgery.int_fields(page.header)


def random_recipe(rng: np.random.Generator, extended: bool = False, wide: bool = False) -> Recipe:
    """Draw a recipe (the bench's counterpart of the test's hypothesis strategy); ``extended``: nested columns and
    dictionary-page damage too (other draws than the default's for the same seed); ``wide``: :data:`WIDE_KINDS`,
    :data:`WIDE_COMPRESSIONS` and :data:`ENCODINGS` too (drawn after the rest, so a seed's other draws stay)."""
    groups = tuple(int(rng.choice([0, 1, 7, 50, 130, 300])) for _ in range(int(rng.integers(1, 4))))
    kinds = (KINDS + NESTED_KINDS if extended else KINDS) + (WIDE_KINDS if wide else ())
    columns = tuple((str(rng.choice(kinds)), bool(rng.random() < 0.6)) for _ in range(int(rng.integers(1, 5))))
    if all(kind in NESTED_KINDS for kind, _ in columns):  # a flat column for the queries to read
        columns += (("int32", True),)
    mutations = []
    for _ in range(int(rng.choice([0, 1, 1, 1, 2, 3]))):
        kind = str(rng.choice(MUTATIONS, p=[0.3, 0.1, 0.3, 0.05, 0.05, 0.2] if extended else
                              [0.4, 0.1, 0.4, 0.05, 0.05, 0.0]))
        if kind in ("page", "footer"):
            mutations.append((kind, int(rng.integers(0, 10_000)), int(rng.integers(0, 10))))
        elif kind == "flip":  # one in ten anywhere in the file (the footer included)
            mutations.append((kind, float(rng.random()) + (1.0 if rng.random() < 0.1 else 0.0),
                              int(rng.integers(1, 256))))
        elif kind == "cut":
            mutations.append((kind, float(rng.random()), int(rng.integers(1, 40))))
        elif kind == "dict":
            mutations.append((kind, int(rng.integers(0, 10_000)), int(rng.integers(0, 10)), int(rng.integers(1, 256))))
        else:
            mutations.append((kind, float(rng.random())))
    recipe = Recipe(int(rng.integers(0, 2**31)), groups, columns,
                    str(rng.choice(COMPRESSIONS, p=[0.45, 0.45, 0.1])), bool(rng.random() < 0.6),
                    str(rng.choice(["1.0", "2.0"])), int(rng.choice([3, 16, 64, 1024])),
                    tuple(sorted(mutations, key=lambda m: MUTATIONS.index(m[0]))))
    if not wide:
        return recipe
    compression = str(rng.choice(COMPRESSIONS + WIDE_COMPRESSIONS)) if rng.random() < 0.5 else recipe.compression
    encoding = str(rng.choice([""] + list(ENCODINGS)))
    return dataclasses.replace(recipe, compression=compression, encoding=encoding)


# ----------------------------------------------------------------- reading, in a worker process
def _canonical_rows(table) -> list:
    """Return a table's rows as comparable tuples: dictionaries decoded, strings as bytes, NaN as a marker, sorted."""
    import pyarrow as pa

    columns = []
    for column in table.columns:
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or \
                pa.types.is_string_view(column.type):
            column = column.cast(pa.large_binary())
        elif pa.types.is_date32(column.type):  # damaged days may lie past Python's dates
            column = column.view(pa.int32())
        values = column.to_pylist()
        columns.append(["NaN" if isinstance(v, float) and math.isnan(v) else v for v in values])
    return sorted(zip(*columns), key=repr) if columns else []


def _clean(error: BaseException) -> bool:
    from gpu_engine.errors import ExecutionError, GpuEngineError

    if isinstance(error, ExecutionError):
        return error.__cause__ is None or _clean(error.__cause__)
    return isinstance(error, GpuEngineError)


def _describe(error: BaseException) -> str:
    cause = f" (cause {type(error.__cause__).__name__}: {error.__cause__})" if error.__cause__ else ""
    return f"{type(error).__name__}: {str(error)[:300]}{cause[:300]}"


def _check(engine, expected, pyarrow_error: str | None) -> dict:
    """Compare the engine's answer (a callable) with pyarrow's (a value, or None with ``pyarrow_error``)."""
    try:
        got = engine()
    except Exception as error:  # the point: every exception is classified, none escapes the worker
        return {"outcome": "engine_error" if _clean(error) else "unclean_error", "error": _describe(error)}
    if pyarrow_error is not None:
        return {"outcome": "answered_where_pyarrow_failed", "pyarrow": pyarrow_error}
    if got != expected:
        return {"outcome": "mismatch", "got": repr(got)[:400], "expected": repr(expected)[:400]}
    return {"outcome": "equal"}


def _read_case(path: str, session, emit) -> None:
    """Read one file every way; call ``emit(stage, result)`` before and after each stage (a crash names its stage)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_engine.connectors.data_source import read_split
    from gpu_engine.exec.split import ParquetSplit

    emit("pyarrow", None)
    expected = pyarrow_error = metadata_rows = None
    try:
        metadata_rows = pq.read_metadata(path).num_rows
        every = pq.read_schema(path).names
        flat = _flat(every)  # the engine refuses nested columns by name: the queries read the others
        expected = pq.read_table(path, columns=flat if len(flat) < len(every) else None)
    except Exception as error:
        pyarrow_error = _describe(error)
    names = expected.column_names if expected is not None else []
    if expected is not None:
        try:  # a damaged file may hold strings that are not UTF-8: keep what pyarrow gives as bytes
            expected_rows = _canonical_rows(expected)
        except Exception as error:
            pyarrow_error, expected = _describe(error), None
    emit("pyarrow", {"outcome": "error" if pyarrow_error else "read", "error": pyarrow_error})

    def connector():
        batches = list(read_split(ParquetSplit(path), names or _flat(_engine_columns(path)), 1 << 20))
        if not batches:
            return []
        return _canonical_rows(pa.Table.from_batches(batches))

    emit("connector", None)
    emit("connector", _check(connector, expected_rows if expected is not None else None, pyarrow_error))

    def register():
        session.register("t", path)
        return True

    emit("register", None)
    registered = _check(register, True, None)
    emit("register", registered)
    if registered["outcome"] != "equal":
        return
    emit("count", None)
    emit("count", _check(lambda: session.sql("SELECT count(*) FROM t").column(0).to_pylist(), [metadata_rows],
                         None if metadata_rows is not None else pyarrow_error or "no metadata"))
    emit("star", None)
    listed = ", ".join(f'"{n}"' for n in names) if names and len(_flat(names)) < len(_engine_names(path)) else "*"
    emit("star", _check(lambda: _canonical_rows(session.sql(f"SELECT {listed} FROM t")),
                        expected_rows if expected is not None else None, pyarrow_error))
    try:
        schema_names = names or _engine_columns(path)
    except Exception:  # (registering succeeded, so this is rare: the engine's error was counted by the connector)
        schema_names = []
    # A string key, else an integer one: few key types, so few grouping kernels to compile in a cold cache.
    key = next((n for kind in ("_string", "_int64", "_int32") for n in schema_names if n.endswith(kind)), None)
    if key is not None:  # pyarrow's answer reads the key column alone, as the query does
        query = f'SELECT "{key}", count(*) AS n FROM t GROUP BY "{key}"'
        reference = key_error = None
        try:
            column = pq.read_table(path, columns=[key])
            groups = column.group_by(key).aggregate([([], "count_all")])
            reference = _canonical_rows(pa.table({key: groups[key], "n": groups["count_all"]}))
        except Exception as error:
            key_error = _describe(error)
        emit("group", None)
        emit("group", _check(lambda: _canonical_rows(session.sql(query)), reference, key_error))


def _flat(names: list[str]) -> list[str]:
    return [n for n in names if not n.endswith(tuple(f"_{kind}" for kind in NESTED_KINDS))]


def _engine_names(path: str) -> list[str]:
    try:
        return _engine_columns(path)
    except Exception:  # (a footer the engine cannot read: the star query's own error is the outcome)
        return []


def _engine_columns(path: str) -> list[str]:
    from gpu_engine.connectors.data_source import parquet_metadata

    return parquet_metadata(path).schema.to_arrow_schema().names


def _worker(cases_file: str, results_file: str, device: str = "cpu") -> None:
    """Read every case of ``cases_file`` (JSON list of ``{"case", "path"}``), appending results to ``results_file``;
    on ``cuda-sim`` the Session decodes through the device decoder (``parquet_reader="device"``)."""
    from gpu_engine import Session

    session = Session(device="cpu", drivers=1) if device == "cpu" else Session(
        device=device, drivers=1, parquet_reader="device")
    cases = json.loads(Path(cases_file).read_text())
    with open(results_file, "a", buffering=1) as out:
        for case in cases:
            def emit(stage, result, case=case):
                out.write(json.dumps({"case": case["case"], "stage": stage, "result": result}) + "\n")
                out.flush()
                if result is None:
                    os.fsync(out.fileno())  # the last stage begun survives a segfault

            if "recipe" in case:  # written here, so pyarrow dying on a damaged file kills the worker, not the run
                emit("write", None)
                write_file(Recipe.from_json(case["recipe"]), Path(case["path"]))
                emit("write", {"outcome": "written"})
            _read_case(case["path"], session, emit)
            emit("done", {"outcome": "done"})


# ----------------------------------------------------------------- running cases
FAILURES = ("mismatch", "unclean_error", "crash", "answered_where_pyarrow_failed")


def run_cases(recipes: list[Recipe], folder: Path, timeout_s: float = 300.0, keep_going: bool = True,
              device: str = "cpu") -> list[dict]:
    """Write each recipe's file under ``folder`` and read them in worker processes; return one record per case.

    A record holds the recipe, the file, and per stage its result; ``worst`` is the case's worst
    outcome. A worker that dies (or runs past ``timeout_s``) marks its current case ``crash``; with
    ``keep_going`` a new worker takes the cases after it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for index, recipe in enumerate(recipes):
        path = folder / f"case{index}.parquet"
        records.append({"case": index, "recipe": recipe.to_json(), "path": str(path), "stages": {}})
    pending = list(range(len(records)))
    while pending:
        cases_file = folder / "cases.json"
        results_file = folder / "results.jsonl"
        cases_file.write_text(json.dumps([{"case": i, "path": records[i]["path"], "recipe": records[i]["recipe"]}
                                          for i in pending]))
        results_file.write_text("")
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        if device == "cuda-sim":
            env["NUMBA_ENABLE_CUDASIM"] = "1"
        try:
            finished = subprocess.run([sys.executable, "-m", "bench.parquet_fuzz", "--worker", str(cases_file),
                                       str(results_file), device], cwd=Path(__file__).resolve().parent.parent, env=env,
                                      capture_output=True, text=True, timeout=timeout_s)
            returncode, stderr = finished.returncode, finished.stderr
        except subprocess.TimeoutExpired as expired:
            returncode, stderr = "timeout", (expired.stderr or b"").decode(errors="replace") if isinstance(
                expired.stderr, bytes) else (expired.stderr or "")
        done = set()
        current = None
        for line in results_file.read_text().splitlines():
            entry = json.loads(line)
            record = records[entry["case"]]
            current = entry["case"]
            if entry["stage"] == "done":
                done.add(entry["case"])
            elif entry["stage"] == "write":  # the worker writes each file (write_file's pyarrow can abort)
                if entry["result"] is None:
                    record["stages"]["write"] = {"outcome": "unwritable", "returncode": returncode,
                                                 "stderr": stderr[-2000:]}
                else:
                    record["stages"].pop("write", None)
            elif entry["result"] is not None:
                record["stages"][entry["stage"]] = entry["result"]
            else:
                record["stages"][entry["stage"]] = {"outcome": "crash", "returncode": returncode,
                                                    "stderr": stderr[-2000:]}
        if returncode == 0 and done == set(pending):
            break
        if current is None or current in done:  # died before the first case began, or between cases
            current = next(i for i in pending if i not in done)
            records[current]["stages"]["start"] = {"outcome": "crash", "returncode": returncode,
                                                   "stderr": stderr[-2000:]}
        done.add(current)
        pending = [i for i in pending if i not in done]
        if not keep_going:
            break
    for record in records:
        outcomes = [stage["outcome"] for stage in record["stages"].values()]
        record["worst"] = "unwritable" if "unwritable" in outcomes else next(
            (o for o in FAILURES if o in outcomes), None) or ("engine_error" if "engine_error" in outcomes else "equal")
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", nargs="+", metavar="CASES RESULTS [DEVICE]", help=argparse.SUPPRESS)
    parser.add_argument("--seeds", default="0:20", help="a seed, or START:STOP (default 0:20)")
    parser.add_argument("--cases", type=int, default=20, help="cases per seed (default 20)")
    parser.add_argument("--output", type=Path, help="report path (default bench/results/<date>-parquet-fuzz.json)")
    parser.add_argument("--crash-dir", type=Path, default=Path("bench/results/parquet-fuzz-crashes"),
                        help="where files that fail are copied, with their recipes")
    parser.add_argument("--work-dir", type=Path, help="where files are written (default: a temporary folder)")
    parser.add_argument("--extended", action="store_true",
                        help="also nested columns (lists, structs) and damage aimed at dictionary pages")
    parser.add_argument("--wide", action="store_true",
                        help="also timestamps, int8, gzip/lz4/brotli and the DELTA / BYTE_STREAM_SPLIT encodings")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda-sim"),
                        help="the Session's device (cuda-sim reads through the device decoder)")
    args = parser.parse_args(argv)
    if args.worker:
        _worker(*args.worker)
        return 0
    start, _, stop = args.seeds.partition(":")
    seeds = range(int(start), int(stop)) if stop else [int(start)]
    started = time.perf_counter()
    counts: dict[str, int] = {}
    stage_counts: dict[str, dict[str, int]] = {}
    failures, unwritable = [], []
    with tempfile.TemporaryDirectory(prefix="parquet-fuzz-") as scratch:
        work = args.work_dir or Path(scratch)
        for seed in seeds:
            rng = np.random.default_rng(seed)
            records = run_cases([random_recipe(rng, args.extended, args.wide) for _ in range(args.cases)],
                                work / f"seed{seed}", device=args.device)
            for record in records:
                counts[record["worst"]] = counts.get(record["worst"], 0) + 1
                for stage, result in record["stages"].items():
                    per = stage_counts.setdefault(stage, {})
                    per[result["outcome"]] = per.get(result["outcome"], 0) + 1
                if record["worst"] == "unwritable":
                    unwritable.append({"seed": seed, "case": record["case"], "recipe": record["recipe"],
                                       "stderr": record["stages"]["write"]["stderr"]})
                if record["worst"] in FAILURES:
                    record["seed"] = seed
                    failures.append(record)
                    args.crash_dir.mkdir(parents=True, exist_ok=True)
                    name = f"seed{seed}-case{record['case']}"
                    shutil.copy(record["path"], args.crash_dir / f"{name}.parquet")
                    (args.crash_dir / f"{name}.json").write_text(json.dumps(record, indent=1))
            print(f"seed {seed}: {dict(sorted(counts.items()))}", flush=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                            text=True).stdout.strip()
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
        "command": " ".join(["python -m bench.parquet_fuzz"] + (argv if argv is not None else sys.argv[1:])),
        "seeds": list(seeds), "cases_per_seed": args.cases, "cases": sum(counts.values()),
        "seconds": round(time.perf_counter() - started, 1), "outcomes": counts, "stages": stage_counts,
        "failures": failures, "unwritable": unwritable,
    }
    output = args.output or Path("bench/results") / f"{datetime.date.today().isoformat()}-parquet-fuzz.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1))
    print(f"{report['cases']} cases in {report['seconds']} s: {counts}; report {output}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
