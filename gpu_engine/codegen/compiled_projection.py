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

from typing import Any, Sequence

import numpy as np

from gpu_engine.codegen.compiled_modules import generated_module
from gpu_engine.codegen.fused_aggregation_kernel import LIFTED_DICTIONARY, KernelLayout
from gpu_engine.codegen.fused_project_kernel import PROJECT_STATUS_ERROR, generate_fused_projection
from gpu_engine.codegen.fusion_program import FusionProgram, plan_fusion_program
from gpu_engine.codegen.kernel_inputs import KernelInputs
from gpu_engine.codegen.row_lowering import ERROR_CODE_BASE, Unsupported
from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.types import physical_dtype
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions.deferred_checks import defer_row_check
from gpu_engine.kernels.launch import launch_twin
from gpu_engine.plans.expressions import Expr

__all__ = ["CompiledProjection"]

#: ``status[0]`` before a projection kernel runs: no error yet (errors are ``row * 256 + code``, the smallest wins).
_NO_ERROR = np.iinfo(np.int64).max


class CompiledProjection:
    """Expressions as one generated kernel: their columns for a batch, from one pass over its input columns."""

    def __init__(self, device, program: FusionProgram):
        self.device = device
        self.program = program
        self._inputs = KernelInputs(device, program)
        self._kernels: dict[KernelLayout, tuple[Any, tuple[str, ...], tuple[str, ...]]] = {}

    @classmethod
    def of(cls, device, expressions: Sequence[Expr], schema) -> "CompiledProjection | None":
        """Return ``expressions`` (over ``schema``, name -> type) compiled, or None when one has no row code."""
        try:
            program = plan_fusion_program((), (), [], schema, tuple(expressions))
            layout = KernelLayout(False, (True,) * len(program.columns), (LIFTED_DICTIONARY,) * len(program.lifted))
            generate_fused_projection(program, layout)  # refuses here, at operator creation, what it cannot generate
        except (Unsupported, NotImplementedError):
            return None
        return cls(device, program)

    def columns(self, batch: Batch) -> list[Column]:
        """Return one column per expression over ``batch``'s rows.

        An error (an overflow) is a deferred check
        (:func:`~gpu_engine.expressions.deferred_checks.defer_row_check`): raised when the caller's
        :func:`~gpu_engine.expressions.deferred_checks.checks_read_together` block ends, else at once.
        """
        layout, arrays = self._inputs.bind(batch)
        module, parameters, messages = self._kernel(layout)
        xp = self.device.xp
        n = batch.num_rows
        outputs = []
        for j, expr in enumerate(self.program.outputs):
            arrays[f"o{j}"] = xp.empty(n, dtype=physical_dtype(expr.dtype))
            arrays[f"o{j}_v"] = xp.empty(n, dtype=xp.bool_)
            outputs.append(Column(expr.dtype, arrays[f"o{j}"], arrays[f"o{j}_v"]))
        status = self.device.asarray(np.array([_NO_ERROR], dtype=np.int64))
        values = dict(arrays, n=n, status=status)
        launch_twin(self.device, n, module.project_cpu, module.project_cuda, *(values[p] for p in parameters))

        def failure(error: int) -> ExecutionError:
            row, code = divmod(error, ERROR_CODE_BASE)
            return ExecutionError(f"{messages[code]} (first at row {row})")

        # Read with the enclosing block's other checks (one host sync); until then the columns may be partial.
        defer_row_check(self.device, status[PROJECT_STATUS_ERROR:PROJECT_STATUS_ERROR + 1], _NO_ERROR, failure)
        return outputs

    def _kernel(self, layout: KernelLayout):
        compiled = self._kernels.get(layout)
        if compiled is None:
            generated = generate_fused_projection(self.program, layout)
            module = generated_module(generated.source, stem="project")
            compiled = self._kernels[layout] = (module, generated.parameters, generated.messages)
        return compiled
