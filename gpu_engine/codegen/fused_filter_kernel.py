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

from gpu_engine.codegen.fused_aggregation_kernel import (
    STATUS_GROUPS, GeneratedKernel, KernelLayout, RowInputs, input_parameters, module_header, write_row_indices,
)
from gpu_engine.codegen.generation_cache import GenerationCache
from gpu_engine.codegen.fusion_program import FusionProgram
from gpu_engine.codegen.row_lowering import ERROR_CODE_BASE, RowLowering
from gpu_engine.codegen.source_writer import SourceWriter

__all__ = ["generate_fused_filter", "generate_row_kernel", "FILTER_STATUS_ERROR"]

#: The status word the first error goes to.
FILTER_STATUS_ERROR = STATUS_GROUPS


def generate_fused_filter(program: FusionProgram, layout: KernelLayout) -> GeneratedKernel:
    """Return the module source defining ``filter_cpu`` (njit) and ``filter_cuda`` (cuda.jit) for ``layout``.

    ``program`` holds the predicates (no keys, no aggregates).

    Generated once per process for each distinct request (:data:`GENERATED_FILTERS`).

    Raises
    ------
    Unsupported
        When a predicate cannot be generated.
    """
    return GENERATED_FILTERS.get((repr(program), repr(layout)), lambda: _generate_fused_filter(program, layout))


#: Filter kernels generated so far, by the repr of what they were generated from.
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


def generate_row_kernel(name: str, program: FusionProgram, layout: KernelLayout, outputs: list[str], write_row,
                        cuda_error_lines: tuple[str, ...] = ()) -> GeneratedKernel:
    """Return a module with ``{name}_cpu`` (njit) and ``{name}_cuda`` (cuda.jit): one pass over ``n`` rows.

    Both twins take ``(n, rows, <inputs of layout>, *outputs, status)``; per row ``i`` they set ``r``
    (and ``r2``) and call ``write_row(writer, lowering)`` to write the row's work. An error is recorded
    in ``status[0]`` as ``row * 256 + code``, the smallest row winning: the CPU twin stops there, a CUDA
    thread runs ``cuda_error_lines`` and goes on to its next row.
    """
    parameters = ["n", "rows", *input_parameters(layout), *outputs, "status"]
    signature = ", ".join(parameters)
    writer = SourceWriter()
    writer.extend(module_header().splitlines())
    messages: list[str] = []
    for flavor in ("cpu", "cuda"):
        twin_messages: list[str] = []
        writer.line("")
        writer.line("")
        writer.line('@njit(nogil=True, cache=True, error_model="numpy")' if flavor == "cpu" else "@cuda.jit")
        with writer.block(f"def {name}_{flavor}({signature}):"):
            if flavor == "cuda":
                loop = "for i in range(cuda.grid(1), n, cuda.gridsize(1)):"
                error = f"cuda.atomic.min(status, {FILTER_STATUS_ERROR}, np.int64(i) * {ERROR_CODE_BASE} + {{code}})"
                on_error = lambda code: [error.format(code=code), *cuda_error_lines, "continue"]
            else:
                loop = "for i in range(n):"
                on_error = lambda code: [f"status[{FILTER_STATUS_ERROR}] = np.int64(i) * {ERROR_CODE_BASE} + {code}",
                                         "return"]
            with writer.block(loop):
                write_row_indices(writer, layout)
                write_row(writer, RowLowering(writer, RowInputs(program, layout, writer), on_error, twin_messages))
        if flavor == "cpu":
            messages = twin_messages
        elif twin_messages != messages:  # both twins hand out codes in the same order
            raise AssertionError("the CPU and CUDA twins disagree on error codes")
    return GeneratedKernel(writer.text(), tuple(parameters), tuple(messages))
