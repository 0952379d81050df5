"""Draw a benchmark report as a PNG chart: per query, each runner's median time, side by side.

Why: a report's Markdown table of milliseconds is exact but hard to scan across
22 queries and four runners; a grouped bar chart shows at a glance where the
engine stands against DuckDB and Polars (or Spark SQL). Every harness
(``run_bench``, ``run_gpu_bench``, ``run_cluster_bench``, ``run_spark_bench``)
writes ``<report>.png`` next to its ``.md`` and links it from the Markdown.

matplotlib is needed by the benchmark only (it is in the ``dev`` extra); the
engine never imports this module. Without matplotlib the harness writes its
report without a chart and says so on stderr.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Mapping, Sequence

__all__ = ["write_chart", "medians_ms", "chart_link"]

#: Runner colours, so DuckDB, Polars and Spark SQL look the same in every report; engine runners take the rest.
_PEER_COLOURS = {"duckdb": "#f2b134", "polars": "#7f7f7f", "spark-sql": "#e25a1c"}
_ENGINE_COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#d62728"]
_TITLES = {"duckdb": "DuckDB", "polars": "Polars", "spark-sql": "Spark SQL"}


def medians_ms(results: Sequence[Mapping], labels: Sequence[str]) -> dict[str, list[float | None]]:
    """Return runner label -> median milliseconds per query, from a report's ``results`` list.

    A runner that failed, returned a wrong result or did not run has ``None`` there (no bar).
    """
    series: dict[str, list[float | None]] = {label: [] for label in labels}
    for result in results:
        for label in labels:
            runner = result["runners"].get(label) or {}
            good = runner.get("median_s") is not None and not runner.get("error") and runner.get("correct") is not False
            series[label].append(runner["median_s"] * 1000 if good else None)
    return series


def write_chart(path: Path, title: str, queries: Sequence[str], series: Mapping[str, Sequence[float | None]],
                ylabel: str = "median time (ms)") -> Path | None:
    """Draw one group of bars per query, one bar per runner, and save it as a PNG at ``path``.

    The time axis is logarithmic when the times span more than 30×, so a 5 ms
    query and a 5 s query both stay readable. Returns ``path``, or None when
    matplotlib is not installed (a line on stderr says so).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install matplotlib, or the dev extra)", file=sys.stderr)
        return None
    labels = list(series)
    values = [v for label in labels for v in series[label] if v is not None and v > 0]
    width = 0.8 / max(1, len(labels))
    figure, axes = plt.subplots(figsize=(min(14.0, max(6.0, 1.0 + 0.3 * len(queries) * max(1, len(labels)) ** 0.5)),
                                         4.8))
    engine_colours = iter(_ENGINE_COLOURS * 4)
    for index, label in enumerate(labels):
        colour = _PEER_COLOURS.get(label) or next(engine_colours)
        positions = [q + (index - (len(labels) - 1) / 2) * width for q in range(len(queries))]
        heights = [v if v is not None else 0.0 for v in series[label]]
        axes.bar(positions, heights, width=width, label=_TITLES.get(label, label), color=colour)
        for position, value in zip(positions, series[label]):
            if value is None:  # failed, wrong or not run: say so where the bar would be
                axes.annotate("n/a", (position, 0), xytext=(0, 2), textcoords="offset points", ha="center",
                              va="bottom", fontsize=6, rotation=90)
    if values and max(values) / min(values) > 30:
        axes.set_yscale("log")
        axes.set_ylim(bottom=10 ** math.floor(math.log10(min(values))))
    axes.set_xticks(range(len(queries)))
    axes.set_xticklabels(queries, rotation=45 if len(queries) > 8 else 0)
    axes.set_ylabel(ylabel + (" (log scale)" if axes.get_yscale() == "log" else ""))
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8, ncol=min(4, len(labels)))
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    figure.savefig(temporary, dpi=110, format="png")
    plt.close(figure)
    temporary.replace(path)
    return path


def chart_link(report: Mapping) -> list[str]:
    """Return the Markdown lines that show the report's chart (none when it has no chart)."""
    chart = report.get("chart")
    return [f"![median time per query and runner]({chart})", ""] if chart else []
