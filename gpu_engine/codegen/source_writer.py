"""Accumulate the lines of a generated function with indentation, fresh names and scoped memos."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Iterator

__all__ = ["SourceWriter", "MAX_BLOCK_DEPTH"]

#: The deepest indentation a generated function may reach (Python's compiler refuses more than 100 levels).
MAX_BLOCK_DEPTH = 80


class SourceWriter:
    """Collect indented source lines, hand out unique local names and remember values per block.

    Why the memo is scoped: a value computed inside one branch of a CASE does
    not exist in the other branches or after the CASE, so a lookup sees the
    memos of the enclosing blocks and a block's own entries vanish with it.
    """

    def __init__(self, indent: int = 0):
        self.lines: list[str] = []
        self._indent = indent
        self._counter = itertools.count()
        self._memos: list[dict[Any, Any]] = [{}]

    def line(self, text: str) -> None:
        """Append one line at the current indentation."""
        self.lines.append("    " * self._indent + text)

    def extend(self, lines: list[str]) -> None:
        """Append several lines (which may carry their own relative indentation)."""
        for text in lines:
            self.line(text)

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        """Write ``header`` (ending in ``:``) and indent what is written inside, with a fresh memo scope.

        Raises NotImplementedError past :data:`MAX_BLOCK_DEPTH` levels (Python compiles at most 100), so a
        deeply nested CASE stays unfused instead of failing to compile.
        """
        if self._indent >= MAX_BLOCK_DEPTH:
            raise NotImplementedError(f"generated code would nest deeper than {MAX_BLOCK_DEPTH} blocks")
        self.line(header)
        self._indent += 1
        self._memos.append({})
        try:
            yield
        finally:
            self._memos.pop()
            self._indent -= 1

    def fresh(self, prefix: str) -> str:
        """Return a new local name starting with ``prefix``."""
        return f"{prefix}_{next(self._counter)}"

    def remembered(self, key: Any) -> Any:
        """Return the value remembered for ``key`` in this block or an enclosing one, or None."""
        for memo in reversed(self._memos):
            if key in memo:
                return memo[key]
        return None

    def remember(self, key: Any, value: Any) -> None:
        """Remember ``value`` for ``key`` in the current block."""
        self._memos[-1][key] = value

    def text(self) -> str:
        """Return the source written so far."""
        return "\n".join(self.lines) + "\n"
