"""Read ``OVER (GROUPS BETWEEN …)`` as a frame: sqlglot takes a leading ``GROUPS`` for a window's name.

sqlglot's parser reads the first identifier in ``OVER (`` as the name of a window the spec refines, so
``OVER (GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW)`` (no PARTITION BY / ORDER BY before the frame, which
DuckDB accepts) fails to parse. The token of such a ``GROUPS`` gets the type of ``ROWS``, which the parser
never takes for a name and matches as a frame kind, keeping the text ``GROUPS`` the frame's kind is read from.
"""

from __future__ import annotations

from sqlglot.tokens import TokenType

__all__ = ["groups_frames_kept"]

#: What follows the GROUPS of a frame: BETWEEN, UNBOUNDED, CURRENT ROW, or an offset.
_FRAME_STARTS = {"BETWEEN", "UNBOUNDED", "CURRENT"}


def groups_frames_kept(tokens: list) -> list:
    """Return ``tokens`` with each ``GROUPS`` that opens a window spec marked as a frame kind (in place)."""
    for previous, token, following in zip(tokens, tokens[1:], tokens[2:]):
        if previous.token_type == TokenType.L_PAREN and token.text.upper() == "GROUPS" and (
                following.text.upper() in _FRAME_STARTS or following.token_type == TokenType.NUMBER):
            token.token_type = TokenType.ROWS
    return tokens
