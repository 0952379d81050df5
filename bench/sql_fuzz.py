"""Run the differential SQL fuzz (tests/sql/fuzz_queries.py) over many seeds; record seeds, counts and failures.

    python bench/sql_fuzz.py --seeds 0:2000 --device cpu [--out bench/results/sql_fuzz.json]

Each seed's query runs on the engine and in DuckDB (same Parquet files) and is partitioned by ternary logic;
the session's driver count, batch size and fusion vary with the seed, as the operator tests vary them. The
run prints every failing seed with its query and why, then the counts per shape and status; ``--out``
writes the same as JSON (seeds included), so a failure found here can become a fixed seed in
tests/sql/test_differential_fuzz.py. Exits 1 when any seed failed.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def print_counts(counts: dict, width: int, tail: str) -> collections.Counter:
    """Print each shape's (family's) outcome counts and their total, the total's line ending in ``tail``; return it.

    Why shared: the fuzz scripts (this one, sql_fuzz_breadth, recent_construct_fuzz) report the same table.
    """
    total = collections.Counter()
    for shape, counter in sorted(counts.items()):
        total.update(counter)
        print(f"{shape:{width}} " + "  ".join(f"{status} {n}" for status, n in sorted(counter.items())))
    print(f"{'total':{width}} " + "  ".join(f"{status} {n}" for status, n in sorted(total.items())) + tail)
    return total


def head_commit() -> str:
    """The checkout's short HEAD commit, for a fuzz run's result file."""
    import subprocess

    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                          text=True).stdout.strip()
REPORTED_STATUSES = ("wrong", "crash", "engine_raised", "answered_where_duckdb_raised", "harness")


def record_family_outcome(result: dict, case: dict, status: str, detail: str, verbose: bool,
                          reported_statuses=REPORTED_STATUSES) -> None:
    """Count one fuzz case's outcome in ``result`` (counts, refusals, reported) and print it when it is reported.

    Why shared: the family fuzz rounds (9, 10) count, group refusals by message and report cases alike; ``case``
    holds seed, family, sql, how and the session's settings, written as they are into the reported record.
    """
    family = case["family"]
    result["counts"][family][status] += 1
    if status in ("refused", "engine_raised"):
        result["refusals"][family][re.sub(r"'[^']*'", "'…'", detail.splitlines()[0])[:140]] += 1
    if status in reported_statuses or (verbose and status not in ("ok", "both_raised")):
        result["reported"].append({**case, "status": status, "why": detail[:2000]})
        settings = ", ".join(f"{k} {v}" for k, v in case.items() if k not in ("seed", "family", "sql", "how"))
        print(f"{status.upper()} seed {case['seed']} ({family}/{case['how']}, {settings}): {case['sql']}\n"
              f"  {detail[:1500]}", flush=True)


def run_family_cases(seeds: range, device: str, families, verbose: bool, draw, open_session, open_duckdb,
                     compare, reported_statuses=REPORTED_STATUSES) -> dict:
    """Draw, run and count one case per seed and family: the per-case loop of the family fuzz rounds.

    ``draw(family, r, folder)`` returns ``(tables, sql, how, settings)`` from ``r`` (a ``random.Random`` seeded by
    seed and family, so a family's cases do not move when another family is added) and may write files under
    ``folder`` (one temporary folder for the run); ``open_session(tables, device, settings)`` and
    ``open_duckdb(tables)`` open the engine's session and DuckDB's connection over those tables (both closed after
    the case); ``compare(session, connection, sql, how)`` returns ``(status, detail)``. A failure of the harness
    itself (drawing, opening, comparing) is counted as ``harness``, shown, and the run goes on. Why shared: rounds
    11 and 13 ran this same loop; the result is :func:`family_fuzz_main`'s.
    """
    import random
    import traceback

    result = {"counts": collections.defaultdict(collections.Counter), "reported": [],
              "refusals": collections.defaultdict(collections.Counter)}
    with tempfile.TemporaryDirectory(prefix="family-fuzz-") as folder:
        for seed in seeds:
            for family in families:
                r = random.Random(f"{seed}-{family}")
                try:
                    data, sql, how, settings = draw(family, r, Path(folder))
                except Exception as error:  # noqa: BLE001 - the harness's own failure
                    status, detail, sql, how, settings = "harness", f"{type(error).__name__}: {error}", "", "", {}
                else:
                    connection = session = None
                    try:
                        connection = open_duckdb(data)
                        session = open_session(data, device, settings)
                        status, detail = compare(session, connection, sql, how)
                    except Exception as error:  # noqa: BLE001 - the harness's own failure: shown, counted
                        status, detail = "harness", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-4)}"
                    finally:
                        for opened in (connection, session):
                            if opened is not None:
                                opened.close()
                case = {"seed": seed, "family": family, "sql": sql, "how": how, **settings}
                record_family_outcome(result, case, status, detail, verbose, reported_statuses)
    return {"counts": {f: dict(c) for f, c in result["counts"].items()}, "reported": result["reported"],
            "refusals": {f: dict(c.most_common()) for f, c in result["refusals"].items()}}


def family_fuzz_main(argv, description: str, families, run, refusals_shown: int = 10) -> int:
    """The command line of a fuzz round whose ``run(seeds, device, families, verbose)`` counts outcomes per family.

    Why shared: rounds 9 and 10 (and later ones) take the same options and print and write the same report. The
    commit is read before the run, so a result file names the code that ran even when HEAD moves meanwhile.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seeds", default="0:100", help="start:stop")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--families", default=",".join(families))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--verbose", action="store_true", help="print refusals too")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))
    commit = head_commit()
    began, cpu_began = time.perf_counter(), time.process_time()
    result = run(range(start, stop), args.device, args.families.split(","), args.verbose)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    total = print_counts(result["counts"], 10,
                         f"  (seeds {start}:{stop} on {args.device}; {elapsed:.0f} s wall, {cpu:.0f} s CPU)")
    for family, whys in result["refusals"].items():
        for why, n in list(whys.items())[:refusals_shown]:
            print(f"  {family} refused {n}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"commit": commit, "seeds": [start, stop], "device": args.device,
                                        "seconds": round(elapsed, 1), "cpu_seconds": round(cpu, 1), **result},
                                       indent=1, ensure_ascii=False, default=str))
    return 1 if total["wrong"] or total["crash"] else 0


for folder in (REPO_ROOT, REPO_ROOT / "tests", REPO_ROOT / "tests" / "sql"):  # the tests import these bare
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:500", help="start:stop (a range of seeds)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--fuse", choices=["vary", "yes", "no"], default="vary",
                        help="fuse pipelines (generated kernels, compiled per query: slow) by seed, always or never")
    parser.add_argument("--no-tlp", action="store_true", help="compare with DuckDB only")
    parser.add_argument("--out", type=Path, help="write seeds, counts and failures as JSON")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))

    from fuzz_queries import fuzz_session, generate_case, reference_connection, run_case, write_tables

    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures, skipped = [], []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sql-fuzz-") as folder:
        paths = write_tables(Path(folder))
        sessions = {}
        with reference_connection(paths) as connection:
            for seed in range(start, stop):
                case = generate_case(seed)
                fused = {"vary": None, "yes": True, "no": False}[args.fuse]
                key = (seed % 18, fused)
                if key not in sessions:
                    sessions[key] = fuzz_session(seed, args.device, paths, fused)
                outcome = run_case(case, sessions[key], connection, tlp=not args.no_tlp)
                counts[case.shape][outcome.status] += 1
                if "tlp" in outcome.checks:
                    counts[case.shape]["tlp_checked"] += 1
                if "tlp_union" in outcome.checks:
                    counts[case.shape]["tlp_union_checked"] += 1
                if outcome.status == "failed":
                    failures.append({"seed": seed, "shape": case.shape, "sql": case.sql, "why": outcome.detail})
                    print(f"FAILED seed {seed} ({case.shape}): {case.sql}\n  {outcome.detail}\n", flush=True)
                elif outcome.status == "skipped":
                    skipped.append({"seed": seed, "why": outcome.detail[:200]})
    elapsed = time.perf_counter() - began
    print_counts(counts, 16, f"  ({stop - start} seeds {start}:{stop} on {args.device} in {elapsed:.0f} s)")
    reasons = collections.Counter(s["why"].split(" (line")[0] for s in skipped)
    for why, n in reasons.most_common(8):
        print(f"  skipped {n}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"commit": head_commit(), "seeds": [start, stop], "device": args.device,
                                        "fuse": args.fuse, "seconds": round(elapsed, 1),
                                        "counts": {s: dict(c) for s, c in counts.items()},
                                        "failures": failures, "skipped": skipped}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
