"""A projection's computed columns from one generated kernel per batch (FilterProject with fusion on).

Why: evaluated eagerly, each expression node is a pass over the batch that
writes a temporary column (on a GPU one launch or more per node), after every
column it reads was gathered through the batch's maps. The generated kernel
(:mod:`gpu_engine.codegen.fused_project_kernel`) reads each input once through
the maps, a hash join's pairs included, and writes each output column once.
Only fixed-width results are computed this way; a string result (``substring``)
or an expression without row code stays with the eager evaluator, and plain
column references are handed on as they are.
"""

from __future__ import annotations

from typing import Sequence

from gpu_engine.codegen.compiled_row_kernel import CompiledRowKernel
from gpu_engine.codegen.fused_project_kernel import generate_fused_projection
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.codegen.kernel_bounds import refuse_before_planning, refuse_oversized
from gpu_engine.codegen.row_lowering import Unsupported
from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.types import physical_dtype
from gpu_engine.plans.expressions import Expr

__all__ = ["CompiledProjection"]


class CompiledProjection(CompiledRowKernel):
    """Expressions as one generated kernel: their columns for a batch, from one pass over its input columns."""

    name = "project"
    _generate = staticmethod(generate_fused_projection)

    @classmethod
    def of(cls, device, expressions: Sequence[Expr], schema, compile_mode: str = "inline") -> "CompiledProjection | None":
        """Return ``expressions`` (over ``schema``, name -> type) compiled, or None when one has no row code.

        ``compile_mode``: see :class:`~gpu_engine.exec.query_ctx.EngineConfig`.

        None also when they are too large for one kernel (:mod:`~gpu_engine.codegen.kernel_bounds`).
        """
        try:
            refuse_before_planning(expressions)
            program = plan_fusion_program((), (), [], schema, tuple(expressions))
            refuse_oversized(program)
        except (Unsupported, NotImplementedError):
            return None
        return None if cls._refusal(program) else cls(device, program, compile_mode)

    def columns(self, batch: Batch) -> list[Column] | None:
        """Return one column per expression over ``batch``'s rows (errors: see :meth:`_launch`).

        None when the kernel is not compiled yet: the caller evaluates the expressions eagerly.
        """
        xp, n = self.device.xp, batch.num_rows
        made: dict = {}

        def outputs() -> dict:  # made only when the kernel may run (not while it compiles in the background)
            if not made:
                for j, expr in enumerate(self.program.outputs):
                    made[f"o{j}"] = xp.empty(n, dtype=physical_dtype(expr.dtype))
                    made[f"o{j}_v"] = xp.empty(n, dtype=xp.bool_)
            return made

        if not self._launch(batch, outputs):
            return None
        return [Column(expr.dtype, made[f"o{j}"], made[f"o{j}_v"]) for j, expr in enumerate(self.program.outputs)]
