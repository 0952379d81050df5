"""Filter rows and compute projections in one operator (Velox's FilterProject).

A filter alone hands on its input with a gather map of the surviving rows, so
nothing is copied until someone reads a column. With fusion on (the default)
the predicate runs as one generated kernel per batch layout
(:mod:`gpu_engine.codegen.fused_filter_kernel`) that reads each input column
once, instead of one eager pass per expression node; a predicate the
generator cannot express is evaluated eagerly. A projection of plain column
references keeps that map too; a projection that computes anything gathers the
columns it reads once and evaluates on flat buffers.
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
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.expressions import evaluate, evaluate_predicate
from gpu_engine.expressions.common_subexpressions import hoist_common_subexpressions
from gpu_engine.expressions.deferred_checks import checks_read_together, defer_row_check
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.kernels.launch import launch_twin
from gpu_engine.plans.expressions import ColumnRef, referenced_columns
from gpu_engine.plans.nodes import FilterNode, ProjectNode

__all__ = ["FilterProject", "CompiledPredicate"]

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


class FilterProject(Operator):
    """Apply an optional filter, then an optional projection, batch by batch."""

    def __init__(self, ctx: OperatorCtx, filter_node: FilterNode | None, project_node: ProjectNode | None):
        super().__init__(ctx, project_node or filter_node)
        self.predicate = filter_node.predicate if filter_node is not None else None
        self.project = project_node
        self._compiled = None
        if self.predicate is not None and ctx.config.fuse:
            schema = {f.name: f.type for f in filter_node.source.output_schema}
            self._compiled = CompiledPredicate.of(self.device, self.predicate, schema)
        if project_node is not None:
            self._pass_through = all(isinstance(e, ColumnRef) for e in project_node.expressions)
            needed: dict[str, None] = {}
            for expression in project_node.expressions:
                needed.update(dict.fromkeys(referenced_columns(expression)))
            self._needed = tuple(needed)
            self._shared, self._expressions = hoist_common_subexpressions(tuple(project_node.expressions))

    def add_input(self, batch: Batch) -> None:
        with checks_read_together(self.device):  # the predicate's and the projection's checks, in one host sync
            self._filter_and_project(batch)

    def _filter_and_project(self, batch: Batch) -> None:
        if self.predicate is not None:
            if self._compiled is not None:  # reads the columns through the batch's gather map
                mask = self._compiled.mask(batch)
                self.add_runtime_stat("compiled_predicate_batches", 1)
            else:
                mask = evaluate_predicate(self.predicate, batch.materialize(referenced_columns(self.predicate)))
            selected = selection_from_mask(self.device, mask)
            kept = int(selected.shape[0])
            self.add_runtime_stat("filtered_rows", batch.num_rows - kept)
            if kept == 0:
                return
            if kept < batch.num_rows:
                batch = batch.with_gather_map(selected)
        if self.project is not None:
            batch = self._project(batch)
        self.input = batch

    def _project(self, batch: Batch) -> Batch:
        node = self.project
        if self._pass_through:
            return batch.select([e.name for e in node.expressions], node.names)
        flat = batch.materialize(self._needed) if self._needed else Batch((), (), batch.device, None, batch.num_rows)
        with checks_read_together(self.device):  # every expression's overflow checks, read back in one host sync
            for name, expression in self._shared:
                flat = Batch(flat.names + (name,), flat.columns + (evaluate(expression, flat),), flat.device, None,
                             flat.num_rows)
            columns = tuple(evaluate(e, flat) for e in self._expressions)
        return Batch(node.names, columns, batch.device, None, batch.num_rows)

    def get_output(self) -> Batch | None:
        batch, self.input = self.input, None
        return batch
