"""Generate a filter's kernel: one pass that evaluates a predicate per row into a mask, as CPU and CUDA twins.

Why: the eager evaluator runs a predicate one expression node at a time, each
a pass over the batch that writes a temporary column (TPC-H Q14's
``l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'`` widened
the dates to int64 twice, compared twice and combined: ~50 ms of CPU for 6M
rows, and on a GPU one launch per node). The kernel reads each input once
and keeps every intermediate value in registers, with the row code of the
fused aggregation (:class:`~gpu_engine.codegen.row_lowering.RowLowering`):
the same NULL logic, DuckDB's typing and checked arithmetic, and string
predicates evaluated once per dictionary entry
(:mod:`~gpu_engine.codegen.fusion_program`).

``filter_cpu`` / ``filter_cuda(n, rows, <inputs>, mask, status)`` set
``mask[i]`` for each of ``n`` rows (read at ``rows[i]`` when the batch has a
gather map) to whether every predicate is TRUE; an error (overflow, a value
out of range) is recorded in ``status[0]`` as ``row * 256 + code``, the
smallest row winning.
"""

from __future__ import annotations

from gpu_engine.codegen.fused_aggregation_kernel import GeneratedKernel, KernelLayout
from gpu_engine.codegen.generation_cache import GenerationCache
from gpu_engine.codegen.fusion_program import FusionProgram
from gpu_engine.codegen.row_kernel import generate_row_kernel
from gpu_engine.codegen.row_lowering import RowLowering
from gpu_engine.codegen.source_writer import SourceWriter

__all__ = ["generate_fused_filter"]


def generate_fused_filter(program: FusionProgram, layout: KernelLayout) -> GeneratedKernel:
    """Return the module source defining ``filter_cpu`` (njit) and ``filter_cuda`` (cuda.jit) for ``layout``.

    ``program`` holds the predicates (no keys, no aggregates).

    Generated once per process for each distinct shape (:data:`GENERATED_FILTERS`): the kernel
    holds no constants (:meth:`~gpu_engine.codegen.fusion_program.FusionProgram.shape`).

    Raises
    ------
    Unsupported
        When a predicate cannot be generated.
    """
    shape = program.shape()
    return GENERATED_FILTERS.get((program.shape_key(), repr(layout)), lambda: _generate_fused_filter(shape, layout))


#: Filter kernels generated so far, by the repr of the program shape and layout they were generated from.
GENERATED_FILTERS = GenerationCache()


def _generate_fused_filter(program: FusionProgram, layout: KernelLayout) -> GeneratedKernel:
    if program.keys or program.arguments:
        raise ValueError("a filter kernel evaluates predicates only")

    def write_row(writer: SourceWriter, lowering: RowLowering) -> None:
        *leading, last = program.predicates
        for predicate in leading:  # a row failing one is not evaluated further
            test = lowering.lower(predicate)
            with writer.block(f"if not ({test.valid} and {test.value}):"):
                writer.line("mask[i] = False")
                writer.line("continue")
        # The last one is stored without a branch: a filter passing a fraction of the rows in no order
        # mispredicted its branch on most rows (TPC-H Q4's l_commitdate < l_receiptdate: 2.7 -> 0.8 ns a row).
        test = lowering.lower(last)
        writer.line(f"mask[i] = np.bool_({test.valid}) & np.bool_({test.value})")

    return generate_row_kernel("filter", program, layout, ["mask"], write_row, cuda_error_lines=("mask[i] = False",))
