"""The concurrency bench runs, checks every concurrent answer and reports throughput for both sides."""

from __future__ import annotations

import json


def test_concurrent_queries_bench_reports_both_sides(tpch_data, tmp_path):
    from bench import concurrent_queries

    folder = tpch_data(0.01)
    status = concurrent_queries.main(["--sf", "0.01", "--threads", "2", "--rounds", "1", "--queries", "6,13",
                                      "--data-dir", str(folder.parent), "--output-dir", str(tmp_path)])
    assert status == 0
    (report_file,) = tmp_path.glob("*-concurrent-tpch-cpu-sf0.01.json")
    report = json.loads(report_file.read_text())
    for side in ("engine", "duckdb"):
        assert report["runs"][side]["2"]["queries"] == 4
        assert report["runs"][side]["2"]["problems"] == []
        assert set(report["runs"][side]["2"]["median_latency_ms"]) == {"q6", "q13"}
    assert "queries/s" in next(tmp_path.glob("*.md")).read_text()
