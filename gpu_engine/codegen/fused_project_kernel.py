"""Generate a projection's kernel: one pass that writes every computed column of a batch, as CPU and CUDA twins.

Why: evaluated eagerly, ``l_extendedprice * (1 - l_discount)`` or a CASE over
a join's output runs one pass per expression node, each writing a temporary
column (and, on a GPU, one or more launches per node), after gathering every
column it reads through the batch's maps. The kernel reads each input column
once, through the batch's gather maps (a join's pairs included, see
:class:`~gpu_engine.codegen.fused_aggregation_kernel.KernelLayout`), keeps the
intermediate values in registers and writes each output column once, with the
row code of the fused aggregation
(:class:`~gpu_engine.codegen.row_lowering.RowLowering`): the same NULL logic,
DuckDB's typing, checked arithmetic and lazily evaluated CASE.

``project_cpu`` / ``project_cuda(n, rows, <inputs>, o0, o0_v, o1, o1_v, ..., status)``
set ``o{j}[i]`` and ``o{j}_v[i]`` (valid) for each of ``n`` rows; a NULL row
gets 0 as its value. An error (overflow, a value out of range) is recorded in
``status[0]`` as ``row * 256 + code``, the smallest row winning.
"""

from __future__ import annotations

from gpu_engine.codegen.fused_aggregation_kernel import GeneratedKernel, KernelLayout
from gpu_engine.codegen.generation_cache import GenerationCache
from gpu_engine.codegen.fusion_program import FusionProgram
from gpu_engine.codegen.row_kernel import generate_row_kernel
from gpu_engine.codegen.row_lowering import RowLowering
from gpu_engine.codegen.source_writer import SourceWriter

__all__ = ["generate_fused_projection", "output_parameters"]

def generate_fused_projection(program: FusionProgram, layout: KernelLayout) -> GeneratedKernel:
    """Return the module source defining ``project_cpu`` (njit) and ``project_cuda`` (cuda.jit) for ``layout``.

    ``program`` holds the output expressions (no predicates, keys or aggregates).
    Generated once per process for each distinct shape (:data:`GENERATED_PROJECTIONS`): the kernel
    holds no constants (:meth:`~gpu_engine.codegen.fusion_program.FusionProgram.shape`).

    Raises
    ------
    Unsupported
        When an expression cannot be generated.
    """
    shape = program.shape()
    return GENERATED_PROJECTIONS.get((program.shape_key(), repr(layout)), lambda: _generate(shape, layout))


#: Projection kernels generated so far, by the repr of the program shape and layout they were generated from.
GENERATED_PROJECTIONS = GenerationCache()


def output_parameters(program: FusionProgram) -> list[str]:
    """Return the parameter names of the output columns: a value and a validity array per expression."""
    return [name for j in range(len(program.outputs)) for name in (f"o{j}", f"o{j}_v")]


def _generate(program: FusionProgram, layout: KernelLayout) -> GeneratedKernel:
    if program.predicates or program.keys or program.arguments or not program.outputs:
        raise ValueError("a projection kernel evaluates output expressions only")

    def write_row(writer: SourceWriter, lowering: RowLowering) -> None:
        for j, output in enumerate(program.outputs):
            value = lowering.lower(output)
            writer.line(f"o{j}_v[i] = {value.valid}")
            with writer.block(f"if {value.valid}:"):
                writer.line(f"o{j}[i] = {value.value}")
            with writer.block("else:"):
                writer.line(f"o{j}[i] = 0")

    return generate_row_kernel("project", program, layout, output_parameters(program), write_row)
