"""Ask the CPU to start loading a row of a table a few iterations before a loop reads it (CPU twins only).

Why: a hash table larger than the caches costs a memory round trip per probe,
and a loop that probes one row at a time waits for each in turn (on this
project's 2-core VM, 6M rows grouped into 1.5M groups spent ~85 ns a row
waiting). Computing the slot of row ``i + distance`` and prefetching it while
row ``i`` is probed keeps several loads in flight: the same loop ran 2-3x faster
(TPC-H lineitem grouped by l_orderkey: 500 -> 150 ms; by l_partkey: 590 -> 290 ms).
A GPU hides the same latency with thousands of threads in flight, so the CUDA
twins do not prefetch; :func:`prefetch_row` compiles only for numba's CPU target.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

__all__ = ["prefetch_row", "prefetch_row_end", "PREFETCH_DISTANCE", "PREFETCH_MIN_BYTES", "worth_prefetching"]

#: How many rows ahead the CPU twins prefetch: enough loads in flight to cover a memory round trip
#: (16 and 32 measured best for aggregation and join probes at TPC-H SF1; farther evicts lines before use).
PREFETCH_DISTANCE = 16
#: Tables smaller than this stay in the CPU's caches: prefetching them only adds the look-ahead's hashing
#: (a 204-key join probe ran 1.8x slower with it).
PREFETCH_MIN_BYTES = 1 << 20


@register_jitable
def worth_prefetching(array):
    """Return True when ``array`` is large enough for prefetching its rows to pay (see :data:`PREFETCH_MIN_BYTES`)."""
    return array.size * array.itemsize > PREFETCH_MIN_BYTES


def _prefetch_codegen(row_end: bool):
    """Return the codegen of a prefetch of ``array[row, 0, ...]``, or with ``row_end`` of the row's last element."""

    def codegen(context, builder, sig, args):
        array_type = sig.args[0]
        data = context.make_array(array_type)(context, builder, args[0])
        index = context.cast(builder, args[1], sig.args[1], types.intp)
        shape = cgutils.unpack_tuple(builder, data.shape)
        if row_end:
            one = context.get_constant(types.intp, 1)
            indices = [index] + [builder.sub(extent, one) for extent in shape[1:]]
        else:
            indices = [index] + [context.get_constant(types.intp, 0)] * (array_type.ndim - 1)
        pointer = cgutils.get_item_pointer2(context, builder, data=data.data, shape=shape,
                                            strides=cgutils.unpack_tuple(builder, data.strides),
                                            layout=array_type.layout, inds=indices, wraparound=False)
        byte_pointer = ir.PointerType(ir.IntType(8))
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0")
        # (address, rw = 1 write, locality = 3 keep in all levels, cache type = 1 data)
        builder.call(function, [builder.bitcast(pointer, byte_pointer), ir.Constant(i32, 1), ir.Constant(i32, 3),
                                ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return codegen


@intrinsic
def prefetch_row(typingctx, array, row):
    """Prefetch (for writing, into all cache levels) the first element of ``array[row]``; no effect on results."""
    if not isinstance(array, types.Array) or not isinstance(row, types.Integer):
        return None
    return types.void(array, row), _prefetch_codegen(row_end=False)


@intrinsic
def prefetch_row_end(typingctx, array, row):
    """Prefetch the last element of ``array[row]`` (as :func:`prefetch_row` the first): a row that does not start
    on a cache line may end in the next one (a join table's 24-byte rows: 1 in 4 holds its last word there)."""
    if not isinstance(array, types.Array) or not isinstance(row, types.Integer):
        return None
    return types.void(array, row), _prefetch_codegen(row_end=True)
