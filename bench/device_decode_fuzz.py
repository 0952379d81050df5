"""Damaged Parquet files read by the device decoder and by the host decoder: the same values or the same error.

Why (issue 32 item 1): the device decoder must keep the hardening issue's
contract (every count, index and offset checked; a bad page named exactly as
the host decoder names it; never a crash). Each case is a recipe of
:mod:`bench.parquet_fuzz` (a table in one of the decoded layouts, then page
header integers rewritten or page bytes flipped); every fixed-width column of
the file is read by :func:`~gpu_engine.connectors.parquet_columns.read_decoded_columns`
(host) and :func:`~gpu_engine.connectors.parquet_device_columns.read_device_columns`
(device), and the outcomes are compared: both values (equal), or both a
``DataSourceError`` (the same message). Anything else is a failure: values that
differ, messages that differ, another exception (on ``cuda-sim`` an index out
of bounds in a kernel is an ``IndexError``: on a GPU it would read or write
outside a buffer).

    python -m bench.device_decode_fuzz --device cuda-sim --seed 7 --cases 400
    python -m bench.device_decode_fuzz --device cuda --seed 0 --cases 5000

``tests/connectors/test_parquet_device.py`` runs a few fixed recipes of it (found by this sweep)
in CI. Reads run in this process (a kernel fault on a GPU ends the run: rerun from the printed case).
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["decoder_outcomes", "random_damage", "main"]

#: The columns of every case: an optional int64, a required int32, an optional double.
COLUMNS = (("int64", True), ("int32", False), ("double", True))


def decoder_outcomes(path: Path, device) -> list[tuple[str, object, object]]:
    """Return ``(column, host outcome, device outcome)`` for every column: a dict of Arrow arrays, or an error message.

    Both are brought to the engine's layout (as :meth:`Column.from_arrow` would make them) so they compare with
    ``equals``; a footer refused by the engine raises DataSourceError (neither decoder is reached).
    """
    import pyarrow as pa

    from gpu_engine.columnar.column import Column
    from gpu_engine.connectors.data_source import parquet_metadata
    from gpu_engine.connectors.parquet_columns import decodable_columns, read_decoded_columns
    from gpu_engine.connectors.parquet_device_columns import read_device_columns
    from gpu_engine.errors import DataSourceError

    metadata = parquet_metadata(str(path))
    groups = list(range(metadata.num_row_groups))
    outcomes = []
    for name in metadata.schema.to_arrow_schema().names:
        columns = decodable_columns(metadata, [name])
        try:
            host = read_decoded_columns(str(path), metadata, groups, columns)
            host = {key: (value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value)
                    for key, value in host.items()}
            host = {key: Column.from_arrow(value, device).to_arrow(device) for key, value in host.items()}
        except DataSourceError as error:
            host = str(error)
        try:
            ours = {key: value.to_arrow(device)
                    for key, value in read_device_columns(str(path), metadata, groups, columns, device).items()}
        except DataSourceError as error:
            ours = str(error)
        outcomes.append((name, host, ours))
    return outcomes


def same_outcome(host: object, ours: object) -> bool:
    """Return True when the device read what the host read (columns it left to the host aside), or failed alike."""
    if isinstance(host, str) or isinstance(ours, str):
        return host == ours
    return set(ours) <= set(host) and all(ours[key].equals(host[key]) for key in ours)


def random_damage(rng, case: int):
    """Return the recipe of one damaged file: layouts in turn, a flipped page byte or a rewritten header integer."""
    from bench.parquet_fuzz import Recipe

    compression = ("none", "snappy")[case % 2]
    dictionary = bool(case // 2 % 2)
    version = ("1.0", "2.0")[case // 4 % 2]
    if case % 3 == 2:
        mutation = ("page", int(rng.integers(0, 60)), int(rng.integers(0, 10)))
    else:
        mutation = ("flip", float(rng.random()), int(rng.integers(1, 256)))
    return Recipe(int(rng.integers(0, 2**31)), (60, 45), COLUMNS, compression, dictionary, version, 16, (mutation,))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda-sim", help="cuda or cuda-sim")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=200)
    args = parser.parse_args(argv)
    if args.device == "cuda-sim":
        sys.setswitchinterval(1e-4)  # the simulator's barriers poll its threads
    import numpy as np

    from bench.parquet_fuzz import write_file
    from gpu_engine.device import get_device
    from gpu_engine.errors import DataSourceError

    device = get_device(args.device)
    rng = np.random.default_rng(args.seed)
    counts: collections.Counter = collections.Counter()
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "damaged.parquet"
        for case in range(args.cases):
            recipe = random_damage(rng, case)
            write_file(recipe, path)
            try:
                outcomes = decoder_outcomes(path, device)
            except DataSourceError:
                counts["footer refused"] += 1
                continue
            except Exception as error:  # noqa: BLE001 - any other exception is what this sweep looks for
                failures.append((case, recipe, repr(error)[:300]))
                continue
            for name, host, ours in outcomes:
                if not same_outcome(host, ours):
                    failures.append((case, recipe, name))
                elif isinstance(ours, str):
                    counts[ours.split("): ", 1)[-1]] += 1
                else:
                    counts["equal" if ours else "left to the host"] += 1
    for outcome, count in counts.most_common():
        print(f"{count:6d}  {outcome}")
    for failure in failures:
        print("FAILURE", failure)
    print(f"{args.device}: {args.cases} damaged files, seed {args.seed}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
