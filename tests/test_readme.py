"""The README's set-up, Python examples and command-line synopsis are true as written.

Why: a newcomer copies them first. The Python blocks run in order in one
namespace, exactly as the README shows them (the Spark ones need a Spark
session and are left to tests/spark); their TPC-H data goes where every test's
does (tests/conftest.py points ``GPU_ENGINE_DATA`` at the test cache).
"""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import pyarrow as pa
import pytest

from gpu_engine import cli

README = Path(__file__).resolve().parent.parent / "README.md"


def _blocks(language: str) -> list[str]:
    """Return the README's fenced blocks tagged ``language`` (``""``: untagged), in order."""
    blocks, current, tag = [], None, None
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current, tag = [], line[3:].strip()
            else:
                if tag == language:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_the_readme_opens_with_exactly_two_set_up_commands():
    first = README.read_text().split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in first.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_the_python_examples_run_as_written():
    blocks = [block for block in _blocks("python") if "spark" not in block.lower()]
    assert len(blocks) >= 5 and "ensure_tpch" in blocks[0]
    namespace: dict = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    assert isinstance(namespace["table"], pa.Table) and namespace["table"].num_rows > 0
    out = printed.getvalue()
    assert "-- Limit" in out and "output" in out  # the first block's explain-analyze
    assert "l_returnflag" in out  # the second block's Q1


def _synopsis() -> dict[str, str]:
    block = next(b for b in _blocks("") if b.lstrip().startswith("gpu-engine demo"))
    lines: dict[str, str] = {}
    command = None
    for line in block.splitlines():
        if line.startswith("gpu-engine "):
            command = line.split()[1]
            lines[command] = line
        elif command:
            lines[command] += " " + line.strip()
    return lines


@pytest.mark.parametrize("command", ["demo", "query", "tpch", "sql"])
def test_the_cli_synopsis_names_every_option_and_its_default(command):
    synopsis = _synopsis()[command]
    parser = cli.build_parser()
    subparser = parser._subparsers._group_actions[0].choices[command]  # noqa: SLF001 - argparse has no public walk
    defaults = parser.parse_args([command])
    for action in subparser._actions:  # noqa: SLF001
        options = [o for o in action.option_strings if o.startswith("--") and o != "--help"]
        if not options or action.help == argparse.SUPPRESS:  # deprecated spellings are not advertised
            continue
        assert options[0] in synopsis, f"{command}: {options[0]} is missing from the README synopsis"
        default = getattr(defaults, action.dest)
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert f"[{options[0]} {default:g}]" in synopsis, f"{command}: {options[0]}'s default is {default:g}"
