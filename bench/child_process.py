"""Measure in a new process: a bench script that runs itself as a child and reads back the child's JSON.

Why shared: bench/session_start.py and bench/first_process_costs.py measure what a new process pays (imports,
compiles, first queries), so each starts itself again with ``--child-output PATH``; the child measures and writes
its figures there, the parent reads them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def answered_as_child(args, run_child) -> bool:
    """Where ``args.child_output`` is set, write ``run_child(args)``'s figures there as JSON and return True."""
    if not args.child_output:
        return False
    Path(args.child_output).write_text(json.dumps(run_child(args), default=str))
    return True


def run_as_child(module: str, argv: list[str], output: Path, environment: dict, root: Path | str = REPO_ROOT) -> dict:
    """Run ``python -m module *argv --child-output output`` from ``root`` (the checkout's, or another source tree's:
    ``-m`` puts it first on the path); return what it wrote."""
    subprocess.run([sys.executable, "-m", module, *argv, "--child-output", str(output)],
                   check=True, cwd=root, env=environment)
    return json.loads(output.read_text())
