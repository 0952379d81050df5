"""The pinned versions (constraints.txt) cover what the tests install, and environment.yml follows them.

``make test`` installs ``pip install -c constraints.txt -e '.[dev]'``: a
dependency added to pyproject.toml without ``make lock`` would be installed
unpinned on a fresh clone, and a conda pin that drifts from constraints.txt
tests something other than CI does.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# numpy: the GPU stack (numba-cuda 0.30) needs numpy < 2.4, so environment.yml keeps its own range.
GPU_OWN_PINS = {"numpy"}


def _name(requirement: str) -> str:
    """Return the normalized distribution name of a requirement (``pyspark[sql]>=4.1`` -> ``pyspark``)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.\-]+", requirement.strip()).group()).lower()


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not NAME==VERSION"
            pins[_name(name)] = version
    return pins


def test_every_dependency_of_the_dev_install_is_pinned():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = project["dependencies"] + project["optional-dependencies"]["dev"]
    missing = sorted({_name(r) for r in required} - set(_constraints()))
    assert not missing, f"not in constraints.txt (run make lock): {missing}"


def test_environment_yml_pins_the_constraints_versions():
    pins = _constraints()
    conda = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        match = re.match(r"\s*-\s+([A-Za-z0-9_.\-]+)\s*(==|=|>=|<|$)\s*([^\s#]*)", line)
        if match and _name(match.group(1)) in pins:
            conda[_name(match.group(1))] = (match.group(2), match.group(3))
    assert {"duckdb", "numba", "pyarrow", "sqlglot", "pyspark"} <= set(conda)
    drifted = {name: (spec, pins[name]) for name, spec in conda.items()
               if name not in GPU_OWN_PINS and spec != ("==", pins[name])}
    assert not drifted, f"environment.yml differs from constraints.txt: {drifted}"
