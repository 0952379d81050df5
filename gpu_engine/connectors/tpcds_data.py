"""Generate TPC-DS Parquet files with ``tpcgen-cli tpcds parquet`` once, and register them with a Session.

Why: the 99 TPC-DS queries (``bench/tpcds/queries``) are the breadth yardstick
of the SQL front end; the engine and DuckDB must read the very same bytes.
``tpcgen-cli`` (the TPC-H generator's TPC-DS sibling, same authors) writes
``decimal128(7, 2)`` money, ``date32`` dates, ``int32`` surrogate keys and
``string_view`` text (the Parquet connector normalizes it to utf8). Any
positive scale factor works; SF 0.01 takes about a second on two cores
(30 MB, 120k store_sales rows), SF 1 under a minute (its dimension tables,
e.g. customer_demographics' 1.9M rows, are the same size at every scale).

All 25 tables of a scale factor are generated together into a hidden staging
folder inside ``<root>/sf<scale factor>/`` and renamed into place only when
the generator succeeded, so a ``<table>.parquet`` in the cache is complete.

Where the files go: ``<root>/sf<scale factor>/``, where ``root`` is the
``cache_dir`` argument, else ``$GPU_ENGINE_DATA/tpcds``, else
``~/.cache/gpu_engine/tpcds``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Protocol

from gpu_engine.connectors.tpch_data import _format_scale_factor

__all__ = [
    "TPCDS_TABLES",
    "TpcdsDataError",
    "default_tpcds_root",
    "tpcds_directory",
    "find_tpcgen_cli",
    "ensure_tpcds",
    "register_tpcds",
]

# The 24 tables the queries read (the generator's 25th, dbgen_version, is not registered).
TPCDS_TABLES = (
    "call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
    "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
    "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
    "web_page", "web_returns", "web_sales", "web_site",
)

_EXECUTABLE_NAME = "tpcgen-cli"
_TEMP_PREFIX = ".tpcgen-"


class TpcdsDataError(RuntimeError):
    """Raise when TPC-DS data cannot be generated (no ``tpcgen-cli``, bad scale factor, generator failure)."""


class _Registry(Protocol):
    def register(self, name: str, source: object) -> object: ...


def default_tpcds_root() -> Path:
    """Return the folder holding one ``sf<N>`` folder per scale factor (``$GPU_ENGINE_DATA/tpcds`` when set)."""
    data = os.environ.get("GPU_ENGINE_DATA")
    if data:
        return Path(data).expanduser() / "tpcds"
    return Path.home() / ".cache" / "gpu_engine" / "tpcds"


def _scale_text(scale_factor: float) -> str:
    try:
        return _format_scale_factor(scale_factor)
    except RuntimeError as error:
        raise TpcdsDataError(str(error)) from None


def tpcds_directory(scale_factor: float, cache_dir: str | Path | None = None) -> Path:
    """Return where the files of ``scale_factor`` live (``<root>/sf<scale factor>``); create nothing."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_tpcds_root()
    return root / f"sf{_scale_text(scale_factor)}"


def find_tpcgen_cli() -> Path:
    """Return the ``tpcgen-cli`` executable: next to ``sys.executable`` (a venv), else on ``PATH``."""
    candidate = Path(sys.executable).parent / _EXECUTABLE_NAME
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(_EXECUTABLE_NAME)
    if found:
        return Path(found)
    raise TpcdsDataError(
        f"cannot generate TPC-DS data: the '{_EXECUTABLE_NAME}' executable was found neither next to "
        f"{sys.executable} nor on PATH; install it with `pip install tpcgen-cli` "
        "(it is in this project's [dev] extra)"
    )


def ensure_tpcds(scale_factor: float, cache_dir: str | Path | None = None, *,
                 executable: str | Path | None = None) -> Path:
    """Generate the TPC-DS Parquet files of ``scale_factor`` unless all are there; return their folder.

    Raises
    ------
    TpcdsDataError
        When ``tpcgen-cli`` is missing or fails; no partial file is left behind.
    """
    folder = tpcds_directory(scale_factor, cache_dir)
    if all((folder / f"{table}.parquet").is_file() for table in TPCDS_TABLES):
        return folder
    program = Path(executable) if executable is not None else find_tpcgen_cli()
    folder.mkdir(parents=True, exist_ok=True)
    sf_text = _scale_text(scale_factor)
    staging = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=folder))
    try:
        command = [str(program), "tpcds", "parquet", "--scale-factor", sf_text, "--output-dir", str(staging)]
        try:
            completed = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as error:
            raise TpcdsDataError(f"cannot run {command[0]}: {error}") from error
        if completed.returncode != 0:
            detail = (completed.stderr or completed.stdout or "").strip()
            raise TpcdsDataError(
                f"tpcgen-cli failed (exit code {completed.returncode}) at scale factor {sf_text}: "
                f"{detail or 'no message'}\ncommand: {' '.join(command)}"
            )
        absent = [table for table in TPCDS_TABLES if not (staging / f"{table}.parquet").is_file()]
        if absent:
            raise TpcdsDataError(
                f"tpcgen-cli exited successfully but wrote no {', '.join(absent)} (command: {' '.join(command)})"
            )
        for table in TPCDS_TABLES:
            os.replace(staging / f"{table}.parquet", folder / f"{table}.parquet")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def register_tpcds(session: _Registry, path: str | Path) -> list[str]:
    """Register every TPC-DS ``<table>.parquet`` of a folder with ``session``; return the table names."""
    folder = Path(path)
    if not folder.is_dir():
        raise TpcdsDataError(f"TPC-DS data folder {folder} does not exist")
    registered = []
    for table in TPCDS_TABLES:
        file = folder / f"{table}.parquet"
        if file.is_file():
            session.register(table, str(file))
            registered.append(table)
    if not registered:
        raise TpcdsDataError(f"{folder} holds no TPC-DS table file (<table>.parquet); run ensure_tpcds first")
    return registered
