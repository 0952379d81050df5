"""A generated row kernel (a filter's or a projection's) compiled per batch layout and launched per batch.

Why one class: :class:`~gpu_engine.codegen.compiled_predicate.CompiledPredicate`
and :class:`~gpu_engine.codegen.compiled_projection.CompiledProjection` bind a
batch's buffers the same way (:class:`~gpu_engine.codegen.kernel_inputs.KernelInputs`,
the batch's maps included), keep one compiled module per layout, launch one
twin and read the kernel's error word with the caller's other checks; only
what they allocate for the kernel to write differs.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from gpu_engine.codegen.background_compiles import TierSwitch, TwinRef, shape_once
from gpu_engine.codegen.compiled_modules import generated_file
from gpu_engine.codegen.fused_aggregation_kernel import LIFTED_DICTIONARY, GeneratedKernel, KernelLayout
from gpu_engine.codegen.fusion_program import FusionProgram
from gpu_engine.codegen.kernel_inputs import KernelInputs, kernel_parameter_array
from gpu_engine.codegen.row_kernel import ROW_KERNEL_STATUS_ERROR
from gpu_engine.codegen.row_lowering import Unsupported, error_parts
from gpu_engine.columnar.batch import Batch
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions.deferred_checks import defer_row_check
from gpu_engine.kernels.launch import launch_twin

__all__ = ["CompiledRowKernel"]

#: ``status[0]`` before a row kernel runs: no error yet (errors: row_lowering.error_word, the least wins).
_NO_ERROR = np.iinfo(np.int64).max


class CompiledRowKernel:
    """A program's generated row kernel (a filter's or a projection's), compiled per batch layout.

    Subclasses name the kernel (:attr:`name`: the module stem and the twins' prefix) and say how to
    generate it (:meth:`_generate`); :meth:`_launch` binds a batch, launches the twin that fits its
    layout and defers the check of the kernel's error word.
    """

    name = ""

    def __init__(self, device, program: FusionProgram, compile_mode: str = "inline"):
        self.device = device
        self.program = program
        #: Whether a batch runs the kernel or the caller's eager evaluation (:mod:`~gpu_engine.codegen.background_compiles`).
        self.tiers = TierSwitch(device, compile_mode, shape=lambda: shape_once(
            program, lambda: (self.name, program.shape_key()), self.name))
        self._inputs = KernelInputs(device, program)
        #: The program's constants (see kernel_parameters), uploaded once for every batch's launch.
        self._parameters = kernel_parameter_array(device, program)
        self._kernels: dict[KernelLayout, tuple[Any, tuple[str, ...], tuple[str, ...]]] = {}

    @classmethod
    def _generate(cls, program: FusionProgram, layout: KernelLayout) -> GeneratedKernel:
        raise NotImplementedError

    @classmethod
    def _refusal(cls, program: FusionProgram) -> bool:
        """Return True when the generator refuses ``program`` (tried at operator creation, on a plain layout)."""
        try:
            cls._generate(program, KernelLayout(False, (True,) * len(program.columns),
                                                (LIFTED_DICTIONARY,) * len(program.lifted)))
        except (Unsupported, NotImplementedError):
            return True
        return False

    def _launch(self, batch: Batch, outputs: Callable[[], dict[str, Any]]) -> bool:
        """Run the kernel over ``batch`` into ``outputs()`` (arrays by parameter name, made only when the kernel
        may run); return False when it did not run.

        It does not run while it is not compiled yet and compiles in the background (see
        :class:`~gpu_engine.codegen.background_compiles.TierSwitch`): the caller evaluates the batch eagerly.

        An error (an overflow) is a deferred check
        (:func:`~gpu_engine.expressions.deferred_checks.defer_row_check`): raised when the caller's
        :func:`~gpu_engine.expressions.deferred_checks.checks_read_together` block ends, else at once;
        until then the outputs may be partial.
        """
        n = batch.num_rows
        bound = []  # bound only when asked: a batch that waits for the compiler is evaluated eagerly, unbound

        def bind() -> tuple:
            layout, arrays = self._inputs.bind(batch)
            file, parameters, messages = self._kernel(layout)
            status = self.device.asarray(np.array([_NO_ERROR], dtype=np.int64))
            values = dict(arrays, **outputs(), n=n, status=status, parameters=self._parameters)
            bound.append((file, [values[p] for p in parameters], messages, status))
            return bound[0]

        def launches() -> list:
            file, arguments, _, _ = bind()
            return [(TwinRef(file, f"{self.name}_cpu"), arguments)]

        if not self.tiers.use_generated(launches):
            return False
        file, arguments, messages, status = bound[0] if bound else bind()
        module = file.module  # imported once the kernel runs
        launch_twin(self.device, n, getattr(module, f"{self.name}_cpu"), getattr(module, f"{self.name}_cuda"),
                    *arguments)

        def failure(error: int) -> ExecutionError:
            row, code = error_parts(error)
            return ExecutionError(f"{messages[code]} (first at row {row})")

        # Read with the enclosing block's other checks (one host sync).
        defer_row_check(self.device, status[ROW_KERNEL_STATUS_ERROR:ROW_KERNEL_STATUS_ERROR + 1], _NO_ERROR, failure)
        return True

    def _kernel(self, layout: KernelLayout):
        compiled = self._kernels.get(layout)
        if compiled is None:
            generated = self._generate(self.program, layout)
            # Imported when a batch first runs it; the compile process keeps the cache's size bound (no scan here).
            file = generated_file(generated.source, stem=self.name, evict=not self.tiers.compiles_in_background)
            compiled = self._kernels[layout] = (file, generated.parameters, generated.messages)
        return compiled
