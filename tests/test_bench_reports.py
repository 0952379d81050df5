"""Benchmark reports: a PNG chart per report, linked from the Markdown, and ratios in words.

The chart is checked on a tiny fake report (its bars are found by colour in
the image), and once end to end through ``bench.run_bench`` on SF 0.001.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from bench import charts, run_bench  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _runner(name, median_s, error=None, correct=True):
    return {"runner": name, "first_run_s": median_s, "median_s": median_s, "min_s": median_s,
            "samples_s": [median_s] * 5, "rows": 1, "correct": correct, "error": error}


def _fake_report():
    return {
        "date": "2026-11-22 23:00", "command": "python -m bench.run_bench --fake",
        "settings": {"sf": 0.01, "runs": 5, "device": "cpu", "drivers": [1, 2], "threads": 2,
                     "queries": ["q1", "q6"], "polars_via_sql": []},
        "machine": {"cpu_model": "fake"},
        "results": [
            {"query": "q1", "runners": {"duckdb": _runner("duckdb", 0.010, correct=None),
                                        "engine-cpu-1d": _runner("engine-cpu-1d", 0.0367),
                                        "engine-cpu-2d": _runner("engine-cpu-2d", 0.020),
                                        "polars": _runner("polars", 0.021)}},
            {"query": "q6", "runners": {"duckdb": _runner("duckdb", 0.004, correct=None),
                                        "engine-cpu-1d": _runner("engine-cpu-1d", 0.002),
                                        "engine-cpu-2d": _runner("engine-cpu-2d", None, error="boom"),
                                        "polars": _runner("polars", 0.003)}},
        ],
    }


def _pixels_of(image, colour: str) -> int:
    target = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(image[..., :3] - target).max(axis=-1) < 0.02).sum())


def _has_colour(image, colour: str) -> bool:
    return _pixels_of(image, colour) > 0


def test_medians_leave_failed_and_wrong_runners_out():
    series = charts.medians_ms(_fake_report()["results"], run_bench.runner_order(_fake_report()))
    assert list(series) == ["duckdb", "engine-cpu-1d", "engine-cpu-2d", "polars"]
    assert series["engine-cpu-1d"] == pytest.approx([36.7, 2.0])
    assert series["engine-cpu-2d"][1] is None


def test_the_chart_draws_a_bar_per_runner_and_the_markdown_links_it(tmp_path):
    from matplotlib import image

    report = _fake_report()
    path = charts.write_chart(tmp_path / "fake.png", "fake", ["q1", "q6"],
                              charts.medians_ms(report["results"], run_bench.runner_order(report)))
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    pixels = image.imread(path)
    assert pixels.shape[0] > 300 and pixels.shape[1] > 600
    assert _has_colour(pixels, charts._PEER_COLOURS["duckdb"]) and _has_colour(pixels, charts._PEER_COLOURS["polars"])
    assert _has_colour(pixels, charts._ENGINE_COLOURS[0]) and _has_colour(pixels, charts._ENGINE_COLOURS[1])
    # A runner without a good time draws no bar: only its legend patch keeps its colour.
    with_bar = charts.write_chart(tmp_path / "bar.png", "bar", ["q6"], {"duckdb": [4.0], "polars": [3.0]})
    without = charts.write_chart(tmp_path / "none.png", "none", ["q6"], {"duckdb": [4.0], "polars": [None]})
    polars = charts._PEER_COLOURS["polars"]
    assert _pixels_of(image.imread(with_bar), polars) > 10 * _pixels_of(image.imread(without), polars)

    report["chart"] = path.name
    markdown = run_bench.render_markdown(report)
    assert "![median time per query and runner](fake.png)" in markdown
    q1_row = next(line for line in markdown.splitlines() if line.startswith("| q1 |"))
    assert "3.67× slower" in q1_row and "2.00× slower" in q1_row and "2.10× slower" in q1_row
    q6_row = next(line for line in markdown.splitlines() if line.startswith("| q6 |"))
    assert "2.00× faster" in q6_row and "FAILED" in q6_row
    assert "engine-cpu-1d vs DuckDB" in markdown and "/ DuckDB" not in markdown


def test_run_bench_writes_the_chart_next_to_its_report(tmp_path, tpch_data):
    folder = tpch_data(0.001)
    code = run_bench.main(["--sf", "0.001", "--runs", "5", "--drivers", "1", "--queries", "q6", "--no-polars",
                           "--data-dir", str(folder.parent), "--output-dir", str(tmp_path), "--tag", "smoke"])
    assert code == 0
    (report_path,) = tmp_path.glob("*-smoke-sf0.001.json")
    report = json.loads(report_path.read_text())
    chart = tmp_path / report["chart"]
    assert chart.suffix == ".png" and chart.read_bytes()[:8] == PNG_SIGNATURE
    assert f"]({chart.name})" in report_path.with_suffix(".md").read_text()


def test_spark_bench_totals_only_runners_good_on_every_query():
    from bench.run_spark_bench import runner_totals

    good = {"median_s": 1.0, "error": None, "correct": True}
    queries = {"q1": {"spark-sql": {"result": good}, "spark+engine": {"result": {**good, "median_s": 0.25}}},
               "q2": {"spark-sql": {"result": {**good, "median_s": 2.0}},
                      "spark+engine": {"result": {**good, "median_s": 0.5}},
                      "spark+engine-arrow": {"result": {**good, "correct": False}}}}
    assert runner_totals(queries) == {"spark-sql": 3.0, "spark+engine": 0.75}
