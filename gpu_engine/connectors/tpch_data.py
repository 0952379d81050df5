"""Generate TPC-H Parquet files with ``tpchgen-cli`` once, and register them with a Session.

The files are cached per scale factor, one ``<table>.parquet`` per table, so the
engine, DuckDB and Polars all read the very same bytes. ``tpchgen-cli`` writes
``decimal128(15, 2)`` for money and quantities, ``date32`` for dates, ``int64``
keys and ``string_view`` text (the Parquet connector normalizes it to utf8).

A table is generated into a temporary directory next to the cache and renamed
into place only when ``tpchgen-cli`` succeeded, so a file named
``<table>.parquet`` in the cache is always complete; an interrupted run leaves
at most a ``.tpchgen-*`` temporary directory, which the next run ignores.

Where the files go: ``<root>/sf<scale factor>/``, where ``root`` is the
``cache_dir`` argument, else ``$GPU_ENGINE_DATA/tpch``, else
``~/.cache/gpu_engine/tpch``.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Iterable, Protocol

__all__ = [
    "TPCH_TABLES",
    "TpchDataError",
    "default_tpch_root",
    "tpch_directory",
    "find_tpchgen_cli",
    "ensure_tpch",
    "register_tpch",
]

TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")

_EXECUTABLE_NAME = "tpchgen-cli"
_TEMP_PREFIX = ".tpchgen-"
_PROGRESS_INTERVAL_S = 1.0


class TpchDataError(RuntimeError):
    """Raise when TPC-H data cannot be generated (no ``tpchgen-cli``, bad arguments, generator failure)."""


class _Registry(Protocol):
    def register(self, name: str, source: object) -> object: ...


def default_tpch_root() -> Path:
    """Return the folder holding one ``sf<N>`` folder per scale factor.

    ``$GPU_ENGINE_DATA/tpch`` when that variable is set (point it at a big disk),
    else ``~/.cache/gpu_engine/tpch``.
    """
    data = os.environ.get("GPU_ENGINE_DATA")
    if data:
        return Path(data).expanduser() / "tpch"
    return Path.home() / ".cache" / "gpu_engine" / "tpch"


def _format_scale_factor(scale_factor: float) -> str:
    if isinstance(scale_factor, bool) or not isinstance(scale_factor, (int, float)):
        raise TpchDataError(f"scale factor must be a number, got {scale_factor!r}")
    if not (scale_factor > 0 and math.isfinite(scale_factor)):
        raise TpchDataError(f"scale factor must be a positive number, got {scale_factor!r}")
    return f"{float(scale_factor):g}"


def tpch_directory(scale_factor: float, cache_dir: str | Path | None = None) -> Path:
    """Return where the files of ``scale_factor`` live (``<root>/sf<scale factor>``); create nothing."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_tpch_root()
    return root / f"sf{_format_scale_factor(scale_factor)}"


def find_tpchgen_cli() -> Path:
    """Return the ``tpchgen-cli`` executable: next to ``sys.executable`` (a venv), else on ``PATH``."""
    candidates = [Path(sys.executable).parent / _EXECUTABLE_NAME]
    if os.name == "nt":  # pragma: no cover - the project targets Linux, but keep the name right
        candidates.insert(0, Path(sys.executable).parent / f"{_EXECUTABLE_NAME}.exe")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(_EXECUTABLE_NAME)
    if found:
        return Path(found)
    raise TpchDataError(
        f"cannot generate TPC-H data: the '{_EXECUTABLE_NAME}' executable was found neither next to "
        f"{sys.executable} nor on PATH; install it with `pip install tpchgen-cli` "
        "(it is in this project's [dev] extra)"
    )


def _normalize_tables(tables: Iterable[str] | str | None) -> tuple[str, ...]:
    if tables is None:
        return TPCH_TABLES
    if isinstance(tables, str):
        tables = [tables]
    chosen = []
    for table in tables:
        name = str(table).strip().lower()
        if name not in TPCH_TABLES:
            raise TpchDataError(f"unknown TPC-H table {table!r}; the tables are {', '.join(TPCH_TABLES)}")
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise TpchDataError("no TPC-H table was asked for")
    return tuple(chosen)


def _human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


class _ProgressReporter:
    """Print one line per finished table (and, on a terminal, a live size) while tpchgen-cli runs.

    tpchgen-cli writes ``<table>.parquet.inprogress`` and renames it to
    ``<table>.parquet`` when the table is complete, one table after another, so
    watching the output folder tells which table is being written and which are done.
    """

    def __init__(self, folder: Path, tables: tuple[str, ...], label: str, stream: IO[str]):
        self._folder = folder
        self._tables = tables
        self._label = label
        self._stream = stream
        self._live = stream.isatty()
        self._reported: set[str] = set()
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tpchgen-progress", daemon=True)

    def __enter__(self) -> "_ProgressReporter":
        self._write(f"{self._label}: generating {', '.join(self._tables)} with tpchgen-cli\n")
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        if exc_info[0] is None:
            self._report_finished()
            elapsed = time.perf_counter() - self._started
            self._write(f"{self._label}: done in {elapsed:.1f} s\n")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()

    def _watch(self) -> None:
        while not self._stop.wait(_PROGRESS_INTERVAL_S):
            self._report_finished()
            if self._live:
                for table in self._tables:
                    partial = self._folder / f"{table}.parquet.inprogress"
                    if table not in self._reported and partial.exists():
                        size = _size_or_zero(partial)
                        self._write(f"\r  {table:<9} {_human_bytes(size):>10} ...\x1b[K")
                        break

    def _report_finished(self) -> None:
        done = []
        for table in self._tables:
            path = self._folder / f"{table}.parquet"
            if table not in self._reported and path.exists():
                done.append((_mtime_or_zero(path), table, _size_or_zero(path)))
        clear = "\r\x1b[K" if self._live else ""
        for _, table, size in sorted(done):
            self._reported.add(table)
            elapsed = time.perf_counter() - self._started
            self._write(f"{clear}  {table:<9} {_human_bytes(size):>10}  done at {elapsed:.1f} s\n")


def _mtime_or_zero(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size_or_zero(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def ensure_tpch(
    scale_factor: float,
    cache_dir: str | Path | None = None,
    tables: Iterable[str] | str | None = None,
    progress: bool = True,
    *,
    executable: str | Path | None = None,
) -> Path:
    """Generate the missing TPC-H Parquet files of ``scale_factor`` and return their folder.

    Parameters
    ----------
    scale_factor
        TPC-H scale factor (1 is about 6M lineitem rows); fractions such as 0.01 work.
    cache_dir
        Root folder; files go to ``<cache_dir>/sf<scale_factor>/<table>.parquet``.
        Defaults to :func:`default_tpch_root`.
    tables
        Table names to make sure of (default: all eight).
    progress
        Print one line per generated table to stderr.
    executable
        The ``tpchgen-cli`` to run (default: :func:`find_tpchgen_cli`).

    Returns
    -------
    Path
        The folder holding ``<table>.parquet`` for every table asked for.

    Raises
    ------
    TpchDataError
        When ``tpchgen-cli`` is missing or fails; no partial file is left behind.
    """
    wanted = _normalize_tables(tables)
    folder = tpch_directory(scale_factor, cache_dir)
    missing = tuple(t for t in wanted if not (folder / f"{t}.parquet").is_file())
    if not missing:
        return folder
    program = Path(executable) if executable is not None else find_tpchgen_cli()
    folder.mkdir(parents=True, exist_ok=True)
    sf_text = _format_scale_factor(scale_factor)
    # The temporary folder sits inside the destination, so the final rename is
    # atomic (same file system); a crash leaves only the hidden folder.
    staging = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=folder))
    try:
        command = [
            str(program),
            "parquet",
            "--scale-factor",
            sf_text,
            "--output-dir",
            str(staging),
            "--tables",
            ",".join(missing),
            "--no-progress",
        ]
        label = f"TPC-H sf{sf_text} -> {folder}"
        if progress:
            with _ProgressReporter(staging, missing, label, sys.stderr):
                completed = _run_generator(command)
        else:
            completed = _run_generator(command)
        if completed.returncode != 0:
            detail = (completed.stderr or completed.stdout or "").strip()
            raise TpchDataError(
                f"tpchgen-cli failed (exit code {completed.returncode}) generating {', '.join(missing)} "
                f"at scale factor {sf_text}: {detail or 'no message'}\ncommand: {' '.join(command)}"
            )
        for table in missing:
            produced = staging / f"{table}.parquet"
            if not produced.is_file():
                raise TpchDataError(
                    f"tpchgen-cli exited successfully but wrote no {produced.name} (command: {' '.join(command)})"
                )
        for table in missing:
            os.replace(staging / f"{table}.parquet", folder / f"{table}.parquet")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _run_generator(command: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise TpchDataError(f"cannot run {command[0]}: {error}") from error


def register_tpch(session: _Registry, path: str | Path) -> list[str]:
    """Register every ``<table>.parquet`` of a TPC-H folder with ``session``; return the table names.

    Only the eight TPC-H table names are registered, in a fixed order; the
    folder must hold at least one of them.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise TpchDataError(f"TPC-H data folder {folder} does not exist")
    registered = []
    for table in TPCH_TABLES:
        file = folder / f"{table}.parquet"
        if file.is_file():
            session.register(table, str(file))
            registered.append(table)
    if not registered:
        raise TpchDataError(f"{folder} holds no TPC-H table file (<table>.parquet); run ensure_tpch first")
    return registered
