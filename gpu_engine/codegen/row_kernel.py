"""Generate a row kernel: one pass over a batch's rows, as a CPU twin (njit) and a CUDA twin (cuda.jit).

Why one generator: a filter's kernel (a mask) and a projection's kernel (output
columns) differ only in what they write per row; the loop, the rows read
through the batch's maps (``r``, ``r2``), the row code of
:class:`~gpu_engine.codegen.row_lowering.RowLowering` and the error protocol
are the same, so both come from :func:`generate_row_kernel`
(:mod:`~gpu_engine.codegen.fused_filter_kernel`,
:mod:`~gpu_engine.codegen.fused_project_kernel`).
"""

from __future__ import annotations

from gpu_engine.codegen.fused_aggregation_kernel import (
    STATUS_GROUPS, GeneratedKernel, KernelLayout, RowInputs, input_parameters, module_header, write_row_indices,
)
from gpu_engine.codegen.fusion_program import FusionProgram
from gpu_engine.codegen.kernel_parameters import PARAMETERS, parameter_preamble
from gpu_engine.codegen.row_lowering import RowLowering, error_word
from gpu_engine.codegen.source_writer import SourceWriter

__all__ = ["generate_row_kernel", "ROW_KERNEL_STATUS_ERROR"]

#: The status word a row kernel's first error goes to (``row * 256 + code``, the smallest row winning).
ROW_KERNEL_STATUS_ERROR = STATUS_GROUPS


def generate_row_kernel(name: str, program: FusionProgram, layout: KernelLayout, outputs: list[str], write_row,
                        cuda_error_lines: tuple[str, ...] = ()) -> GeneratedKernel:
    """Return a module with ``{name}_cpu`` (njit) and ``{name}_cuda`` (cuda.jit): one pass over ``n`` rows.

    Both twins take ``(n, rows, <inputs of layout>, parameters, *outputs, status)`` (``parameters``: the
    program's constants, see :mod:`~gpu_engine.codegen.kernel_parameters`); per row ``i`` they set ``r``
    (and ``r2``) and call ``write_row(writer, lowering)`` to write the row's work. An error is recorded
    in ``status[0]`` as :func:`~gpu_engine.codegen.row_lowering.error_word`, the least winning (the first
    expression in evaluation order that fails, at its first row, as DuckDB and the eager evaluator report):
    a row that fails runs ``cuda_error_lines`` and each twin goes on to its next row.
    """
    parameters = ["n", "rows", *input_parameters(layout), PARAMETERS, *outputs, "status"]
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
                on_error = lambda code: [f"cuda.atomic.min(status, {ROW_KERNEL_STATUS_ERROR}, {error_word(code)})",
                                         *cuda_error_lines, "continue"]
            else:
                loop = "for i in range(n):"
                on_error = lambda code: [f"status[{ROW_KERNEL_STATUS_ERROR}] = min(status[{ROW_KERNEL_STATUS_ERROR}], "
                                         f"{error_word(code)})", *cuda_error_lines, "continue"]
            writer.extend(parameter_preamble(program.parameter_types))
            with writer.block(loop):
                write_row_indices(writer, layout)
                write_row(writer, RowLowering(writer, RowInputs(program, layout, writer), on_error, twin_messages))
        if flavor == "cpu":
            messages = twin_messages
        elif twin_messages != messages:  # both twins hand out codes in the same order
            raise AssertionError("the CPU and CUDA twins disagree on error codes")
    return GeneratedKernel(writer.text(), tuple(parameters), tuple(messages))
