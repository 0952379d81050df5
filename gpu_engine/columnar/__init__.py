"""Device columns in Arrow layout and batches with gather maps."""

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column

__all__ = ["Batch", "Column"]
