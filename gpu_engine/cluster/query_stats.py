"""Add up the stats of a distributed query's Tasks per stage and print them as one explain text.

Why: a query on a LocalCluster runs many Tasks of the same fragment; a reader
wants one plan per stage with each operator's counters summed over the stage's
Tasks and drivers, the Tasks listed under their stage, and what crossed each
shuffle (pages, bytes, the peak an output buffer held).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_engine.exec.operator import OperatorStats
from gpu_engine.exec.output_buffer_manager import OutputBufferStats
from gpu_engine.exec.task import PipelineStats, TaskStats
from gpu_engine.plans.explain import format_plan
from gpu_engine.plans.nodes import PlanNode

__all__ = ["StageStats", "QueryStats", "merge_task_stats", "format_query_stats"]


@dataclass
class StageStats:
    """One stage: its fragment as executed, its Tasks' stats and their output buffers' stats."""

    stage_id: int
    plan: PlanNode
    drivers: int
    tasks: list[TaskStats] = field(default_factory=list)
    output_buffers: list[OutputBufferStats] = field(default_factory=list)

    @property
    def shuffle_pages(self) -> int:
        """Return the pages this stage's Tasks sent."""
        return sum(b.pages for b in self.output_buffers)

    @property
    def shuffle_bytes(self) -> int:
        """Return the serialized bytes this stage's Tasks sent."""
        return sum(b.bytes for b in self.output_buffers)

    def merged(self) -> TaskStats:
        """Return one TaskStats with each operator summed over the stage's Tasks."""
        return merge_task_stats(f"stage {self.stage_id}", self.tasks)


@dataclass
class QueryStats:
    """A distributed query: its state, wall time, device and stages."""

    query_id: str
    state: str
    wall_seconds: float
    device: str
    stages: list[StageStats] = field(default_factory=list)

    @property
    def shuffle_pages(self) -> int:
        """Return the pages that crossed every shuffle of the query."""
        return sum(s.shuffle_pages for s in self.stages)

    @property
    def shuffle_bytes(self) -> int:
        """Return the serialized bytes that crossed every shuffle of the query."""
        return sum(s.shuffle_bytes for s in self.stages)


def merge_task_stats(task_id: str, tasks: list[TaskStats]) -> TaskStats:
    """Return the sum of Tasks of one fragment: operators matched by pipeline and operator id."""
    pipelines: dict[int, PipelineStats] = {}
    for task in tasks:
        for pipeline in task.pipelines:
            merged = pipelines.get(pipeline.pipeline_id)
            if merged is None:
                pipelines[pipeline.pipeline_id] = PipelineStats(pipeline.pipeline_id, pipeline.num_drivers,
                                                                list(pipeline.operators))
                continue
            merged.num_drivers += pipeline.num_drivers
            by_id: dict[int, OperatorStats] = {s.operator_id: s for s in merged.operators}
            for stats in pipeline.operators:
                by_id[stats.operator_id] = by_id[stats.operator_id].merge(stats) if stats.operator_id in by_id else stats
            merged.operators = [by_id[k] for k in sorted(by_id)]
    wall = max((t.wall_seconds for t in tasks), default=0.0)
    states = {t.state for t in tasks}
    state = states.pop() if len(states) == 1 else "/".join(sorted(states))
    return TaskStats(task_id, state, wall, sum(t.splits for t in tasks),
                     [pipelines[k] for k in sorted(pipelines)], sum(t.kernels_compiled for t in tasks),
                     sum(t.compile_seconds for t in tasks))


def format_query_stats(stats: QueryStats) -> str:
    """Return explain-analyze text: the query line, then per stage its Tasks and its plan with summed stats."""
    from gpu_engine.planning.placement import placement_text, plan_placement
    from gpu_engine.session import node_stats_text

    tasks = sum(len(s.tasks) for s in stats.stages)
    lines = [f"Query {stats.query_id}: {stats.state}, {stats.wall_seconds * 1000:.1f} ms wall, device {stats.device}, "
             f"{len(stats.stages)} stage(s), {tasks} task(s), shuffled {stats.shuffle_pages} page(s), "
             f"{stats.shuffle_bytes / 1e6:.2f} MB"]
    for stage in stats.stages:
        header = f"Stage {stage.stage_id}: {len(stage.tasks)} task(s) x {stage.drivers} driver(s)"
        if stage.output_buffers:
            peak = max(b.peak_bytes for b in stage.output_buffers)
            header += (f", output {stage.shuffle_pages} page(s), {stage.shuffle_bytes / 1e6:.2f} MB, "
                       f"{sum(b.rows for b in stage.output_buffers)} rows, peak buffered {peak / 1e6:.2f} MB "
                       f"of {stage.output_buffers[0].max_bytes / 1e6:.2f} MB")
        lines.append(header)
        for task in stage.tasks:
            pipelines = ", ".join(f"pipeline {p.pipeline_id} x {p.num_drivers}" for p in task.pipelines)
            lines.append(f"  Task {task.task_id}: {task.state}, {task.wall_seconds * 1000:.1f} ms, "
                         f"{task.splits} split(s), {pipelines}")
        placements = placement_text(plan_placement(stage.plan, stats.device))
        plan_text = format_plan(stage.plan, node_stats_text(stage.merged()), placements)
        lines.extend("  " + line for line in plan_text.splitlines())
    return "\n".join(lines)
