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

import numpy as np

from gpu_engine.codegen.compiled_modules import generated_module
from gpu_engine.codegen.fused_aggregation_kernel import KernelLayout
from gpu_engine.codegen.fused_filter_kernel import FILTER_STATUS_ERROR, generate_fused_filter
from gpu_engine.codegen.fusion_program import FusionProgram, plan_fusion_program
from gpu_engine.codegen.kernel_inputs import KernelInputs
from gpu_engine.codegen.row_lowering import ERROR_CODE_BASE, Unsupported
from gpu_engine.columnar.batch import Batch
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions.deferred_checks import defer_row_check
from gpu_engine.kernels.launch import launch_twin

__all__ = ["CompiledPredicate"]

#: ``status[0]`` before a filter kernel runs: no error yet (errors are ``row * 256 + code``, the smallest wins).
_NO_ERROR = np.iinfo(np.int64).max


class CompiledPredicate:
    """A filter predicate as a generated kernel: a mask per batch, from one pass over its input columns."""

    def __init__(self, device, program: FusionProgram):
        self.device = device
        self.program = program
        self._inputs = KernelInputs(device, program)
        self._kernels: dict[KernelLayout, tuple[Any, tuple[str, ...], tuple[str, ...]]] = {}

    @classmethod
    def of(cls, device, predicate, schema) -> "CompiledPredicate | None":
        """Return the compiled form of ``predicate`` over ``schema`` (name -> type), or None when it has none."""
        try:
            program = plan_fusion_program((predicate,), (), [], schema)
            compiled = cls(device, program)
            layout = KernelLayout(False, (True,) * len(program.columns), ("dictionary",) * len(program.lifted))
            generate_fused_filter(program, layout)  # refuses here, at operator creation, what it cannot generate
        except (Unsupported, NotImplementedError):
            return None
        return compiled

    def mask(self, batch: Batch) -> Any:
        """Return a bool per row of ``batch``: True where the predicate is TRUE.

        An error (an overflow in the predicate) is a deferred check
        (:func:`~gpu_engine.expressions.deferred_checks.defer_row_check`): raised when the caller's
        :func:`~gpu_engine.expressions.deferred_checks.checks_read_together` block ends, else at once.
        """
        layout, arrays = self._inputs.bind(batch)
        module, parameters, messages = self._kernel(layout)
        xp = self.device.xp
        n = batch.num_rows
        status = self.device.asarray(np.array([_NO_ERROR], dtype=np.int64))
        values = dict(arrays, n=n, mask=xp.empty(n, dtype=xp.bool_), status=status)
        launch_twin(self.device, n, module.filter_cpu, module.filter_cuda, *(values[p] for p in parameters))

        def failure(error: int) -> ExecutionError:
            row, code = divmod(error, ERROR_CODE_BASE)
            return ExecutionError(f"{messages[code]} (first at row {row})")

        # Read with the enclosing block's other checks (one host sync); until then the mask may be partial.
        defer_row_check(self.device, status[FILTER_STATUS_ERROR:FILTER_STATUS_ERROR + 1], _NO_ERROR, failure)
        return values["mask"]

    def _kernel(self, layout: KernelLayout):
        compiled = self._kernels.get(layout)
        if compiled is None:
            generated = generate_fused_filter(self.program, layout)
            module = generated_module(generated.source, stem="filter")
            compiled = self._kernels[layout] = (module, generated.parameters, generated.messages)
        return compiled
