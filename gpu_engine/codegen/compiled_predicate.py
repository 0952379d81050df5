"""A filter predicate compiled to one generated kernel: a mask per batch from one pass over its input columns.

Why: evaluated eagerly, a predicate runs one pass (and, on a GPU, one or more
launches) per expression node, each writing a column, plus Python work per
node and literal: TPC-H Q19's join filter, an OR of three ANDs over strings
and numbers, cost ~1.5 ms of host time per probe batch that way. The
generated kernel (:mod:`gpu_engine.codegen.fused_filter_kernel`) reads each
input column once, through the batch's gather map, and evaluates the whole
predicate per row. FilterProject uses it for its filter and HashProbe for a
join's extra filter over the matched pairs.
"""

from __future__ import annotations

from typing import Any

from gpu_engine.codegen.compiled_row_kernel import CompiledRowKernel
from gpu_engine.codegen.fused_filter_kernel import generate_fused_filter
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.codegen.kernel_bounds import refuse_before_planning, refuse_oversized
from gpu_engine.codegen.row_lowering import Unsupported
from gpu_engine.columnar.batch import Batch

__all__ = ["CompiledPredicate"]


class CompiledPredicate(CompiledRowKernel):
    """A filter predicate as a generated kernel: a mask per batch, from one pass over its input columns."""

    name = "filter"
    _generate = staticmethod(generate_fused_filter)

    @classmethod
    def of(cls, device, predicate, schema, compile_mode: str = "inline") -> "CompiledPredicate | None":
        """Return the compiled form of ``predicate`` over ``schema`` (name -> type), or None when it has none.

        ``compile_mode``: see :class:`~gpu_engine.exec.query_ctx.EngineConfig`.

        None also when it is too large for one kernel (:mod:`~gpu_engine.codegen.kernel_bounds`).
        """
        try:
            refuse_before_planning((predicate,))
            program = plan_fusion_program((predicate,), (), [], schema)
            refuse_oversized(program)
        except (Unsupported, NotImplementedError):
            return None
        return None if cls._refusal(program) else cls(device, program, compile_mode)

    def mask(self, batch: Batch) -> Any:
        """Return a bool per row of ``batch``: True where the predicate is TRUE (errors: see :meth:`_launch`).

        None when the kernel is not compiled yet: the caller evaluates the predicate eagerly.
        """
        made = {}

        def outputs() -> dict:
            made.setdefault("mask", self.device.xp.empty(batch.num_rows, dtype=self.device.xp.bool_))
            return made

        return made["mask"] if self._launch(batch, outputs) else None
