"""The small tables the scalar-subquery tests (WHERE and SELECT forms) share, and their column types.

``t`` has duplicate and NULL keys; ``u`` has keys ``t`` lacks, a NULL key and a key (1) of several rows; ``e`` is
empty; ``s`` has keys of another integer width (int32 against ``t``'s int64).
"""

from __future__ import annotations

import pyarrow as pa

BOOL, I64, I32 = pa.bool_(), pa.int64(), pa.int32()
TABLES = {
    "t": pa.table({"k": pa.array([1, 1, 2, None, 3, 5, 6], I64), "v": pa.array([10, 20, 30, 40, None, 60, 70], I64)}),
    "u": pa.table({"k": pa.array([1, 3, 3, 4, None, 6, 1], I64), "w": pa.array([15, 5, 50, 1, 2, None, 3], I64)}),
    "e": pa.table({"k": pa.array([], I64), "w": pa.array([], I64)}),
    "s": pa.table({"k": pa.array([1, 3, 2, None], I32), "w": pa.array([1, 2, 3, 4], I32)}),
}
