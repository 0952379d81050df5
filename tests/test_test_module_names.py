"""Every test module's file name is unique under ``tests/``.

Why: the test folders are not packages (no ``__init__.py``), so pytest imports each test file as a top-level
module named after its file; two files of one name in two folders fail collection ("import file mismatch") in
whichever worker meets the second — only a whole-suite run shows it (stop 47: ``tests/optimizer/`` and
``tests/sql/`` both had ``test_eager_aggregation.py``). This check reads file names only.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_modules_share_a_file_name():
    folders: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if ".pytest_cache" in path.parts or "__pycache__" in path.parts:
            continue
        folders[path.name].append(str(path.parent.relative_to(TESTS)))
    shared = {name: sorted(places) for name, places in folders.items() if len(places) > 1}
    assert shared == {}, f"rename one of each: {shared}"
