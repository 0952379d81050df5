"""Match one string against one LIKE pattern on the host, in time linear in the string.

The row-by-row LIKE (``like_escape`` / ``ilike_escape``: ``s LIKE p`` where ``p`` is a column) matches each row's
own pattern. It used to compile each pattern to a Python regular expression (``%`` as ``.*``), which backtracks
polynomially: ``%a%a%a%a%a%b`` over a string of 100,000 ``a`` tries every placement of the five ``a``\\ s (an
unbounded stall of one query from one crafted pattern). This is the classic greedy segment matcher instead: the
pattern split on its ``%`` into segments of fixed width (literal characters and ``_``), the first segment matched at
the start, the last at the end, each middle one at its leftmost place after the one before (``str.find`` for its
longest literal run, the other runs checked in place). Leftmost is always right: a later place only leaves less
room to the segments after it. The cost is at most the string's length times the pattern's for a pathological
segment, one pass for an ordinary one; never a search tree.

Characters are code points, as DuckDB's ``_`` is (``'é' LIKE '_'``). The device kernels
(:func:`gpu_engine.kernels.strings.like`) take the constant patterns and run the same way (segments, or one
remembered ``%`` to restart from), also without a search tree.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = ["LikePattern", "like_pattern"]


@dataclass(frozen=True)
class _Segment:
    """A run of the pattern between two ``%``: ``width`` characters, of which the ``runs`` (offset, text) are
    literal and the rest ``_`` (any one character)."""

    width: int
    runs: tuple[tuple[int, str], ...]

    def at(self, text: str, position: int) -> bool:
        """Whether the segment matches ``text`` at ``position`` (its width fitting in the text)."""
        return 0 <= position <= len(text) - self.width and all(
            text.startswith(run, position + offset) for offset, run in self.runs)

    def find(self, text: str, start: int, end: int) -> int:
        """Return the leftmost position in ``[start, end - width]`` where the segment matches, or -1."""
        limit = end - self.width
        if not self.runs:
            return start if start <= limit else -1
        anchor_offset, anchor = max(self.runs, key=lambda run: len(run[1]))
        position = start
        while position <= limit:
            found = text.find(anchor, position + anchor_offset, limit + anchor_offset + len(anchor))
            if found < 0:
                return -1
            position = found - anchor_offset
            if all(text.startswith(run, position + offset) for offset, run in self.runs):
                return position
            position += 1
        return -1


def _segment(items: list[str | None]) -> _Segment:
    """Return the segment of ``items`` (a character, or None for ``_``)."""
    runs: list[tuple[int, str]] = []
    start = None
    for offset, item in enumerate(items + [None]):
        if item is not None and start is None:
            start = offset
        elif item is None and start is not None:
            runs.append((start, "".join(items[start:offset])))
            start = None
    return _Segment(len(items), tuple(runs))


@dataclass(frozen=True)
class LikePattern:
    """A LIKE pattern as its ``%``-separated segments (one segment when it has no ``%``). ``dangling`` marks a
    pattern that ended with its escape character, the segments then being those of the pattern before it."""

    segments: tuple[_Segment, ...]
    dangling: bool = False

    def matches(self, text: str) -> bool:
        """Whether ``text`` matches the pattern (for a dangling pattern: whether the pattern before the escape
        matches a prefix of ``text``)."""
        segments = self.segments
        first, last = segments[0], segments[-1]
        if len(segments) == 1:
            return len(text) == first.width and first.at(text, 0)
        end = len(text) - last.width
        if end < first.width or not first.at(text, 0) or not last.at(text, end):
            return False
        position = first.width
        for segment in segments[1:-1]:
            found = segment.find(text, position, end)
            if found < 0:
                return False
            position = found + segment.width
        return True


@functools.lru_cache(maxsize=1024)
def like_pattern(pattern: str, escape: str) -> LikePattern:
    """Return ``pattern`` compiled, ``escape`` ('' for none) making the character after it literal.

    A pattern ending with the escape character is DuckDB's error "Like pattern must not end with escape
    character!", but DuckDB raises it only where its matcher reaches the end of the pattern: where the pattern
    before the escape matches a prefix of the string (``'abc' LIKE 'x\\'`` is false, ``'abc' LIKE 'a%\\'`` raises).
    Such a pattern compiles to that prefix test (``dangling``), the caller raising where it holds.
    """
    segments: list[_Segment] = []
    items: list[str | None] = []
    characters = iter(pattern)
    dangling = False
    for character in characters:
        if escape and character == escape:
            following = next(characters, None)
            if following is None:
                dangling = True
                break
            items.append(following)
        elif character == "%":
            segments.append(_segment(items))
            items = []
        else:
            items.append(None if character == "_" else character)
    segments.append(_segment(items))
    if dangling:
        segments.append(_segment([]))
    return LikePattern(tuple(segments), dangling)
