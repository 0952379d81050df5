"""Run the breadth SQL fuzz (tests/sql/breadth_queries.py: issue 30's constructs) over many seeds against DuckDB.

    python bench/sql_fuzz_breadth.py --seeds 0:3000 --device cpu [--shapes window_frame,casts] [--out run.json]
    python bench/sql_fuzz_breadth.py --generator edge --seeds 0:900   # tests/sql/edge_queries.py: value edges
    python bench/sql_fuzz_breadth.py --generator compose --seeds 0:900   # tests/sql/compose_queries.py: nesting

Each seed's query runs on the engine and in DuckDB over the same in-memory tables; the session's driver count,
batch size and fusion vary with the seed. Prints every case that is ``wrong``, a ``crash`` (a raw Python
exception), ``engine_raised`` or ``answered_where_duckdb_raised``, then counts per shape and status and the
most common refusals; ``--out`` writes the same as JSON so a failure can become a regression test. Exits 1
when any case was wrong or crashed.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests", REPO_ROOT / "tests" / "sql"):  # the tests import these bare
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.sql_fuzz import head_commit, print_counts  # noqa: E402 (after the path it needs)

_REPORTED = ("wrong", "crash", "engine_raised", "answered_where_duckdb_raised")


def _reason(detail: str) -> str:
    """Return a refusal's message without positions and quoted specifics, to count alike refusals together."""
    text = re.sub(r"\(line \d+, column \d+\).*", "", detail.splitlines()[0] if detail else "")
    return re.sub(r"'[^']*'", "'…'", text)[:150]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:1000", help="start:stop (a range of seeds)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--fuse", choices=["vary", "yes", "no"], default="vary")
    parser.add_argument("--shapes", default="", help="comma-separated shapes to keep (default: all)")
    parser.add_argument("--out", type=Path, help="write counts and the reported cases as JSON")
    parser.add_argument("--generator", choices=["breadth", "edge", "compose"], default="breadth",
                        help="breadth: tests/sql/breadth_queries.py; edge: tests/sql/edge_queries.py (value edges); "
                             "compose: tests/sql/compose_queries.py (operators nested in derived tables)")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))
    shapes = set(filter(None, args.shapes.split(",")))

    from breadth_queries import breadth_session, reference_connection

    if args.generator == "edge":
        from edge_queries import generate_case, run_case, tables
    elif args.generator == "compose":
        from compose_queries import generate_case, run_case, tables
    else:
        from breadth_queries import generate_case, run_case, tables

    data = tables()
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    reported, refusals, examples = [], collections.Counter(), {}
    sessions = {}
    fused = {"vary": None, "yes": True, "no": False}[args.fuse]
    began, cpu_began = time.perf_counter(), time.process_time()
    connection = reference_connection(data)
    for seed in range(start, stop):
        case = generate_case(seed)
        if shapes and case.shape not in shapes:
            continue
        key = (seed % 9, (seed // 9) % 4 == 0 if fused is None else fused)
        if key not in sessions:
            sessions[key] = breadth_session(seed, args.device, data, key[1])
        outcome = run_case(case, sessions[key], connection)
        counts[case.shape][outcome.status] += 1
        if outcome.status in _REPORTED:
            reported.append({"seed": seed, "shape": case.shape, "status": outcome.status, "sql": case.sql,
                             "setup": list(case.setup), "why": outcome.detail[:2000], **outcome.extra})
            print(f"{outcome.status.upper()} seed {seed} ({case.shape}): {case.sql}\n  {outcome.detail[:1500]}\n"
                  + outcome.extra.get("traceback", ""), flush=True)
        elif outcome.status == "refused":
            refusals[_reason(outcome.detail)] += 1
            examples.setdefault(_reason(outcome.detail), {"seed": seed, "sql": case.sql, "why": outcome.detail[:500]})
    connection.close()
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    cases = sum(sum(counter.values()) for counter in counts.values())
    total = print_counts(counts, 20, f"  ({cases} cases, seeds {start}:{stop} on {args.device}; {elapsed:.0f} s wall, "
                                     f"{cpu:.0f} s CPU)")
    for why, n in refusals.most_common(25):
        print(f"  refused {n}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"commit": head_commit(), "seeds": [start, stop], "device": args.device,
                                        "fuse": args.fuse, "seconds": round(elapsed, 1), "cpu_seconds": round(cpu, 1),
                                        "counts": {s: dict(c) for s, c in counts.items()},
                                        "refusals": [{"count": n, **examples[why]} for why, n in refusals.most_common()],
                                        "reported": reported},
                                       indent=1, ensure_ascii=False))
    return 1 if total["wrong"] or total["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
