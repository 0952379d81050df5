"""Keep the launch micro-benchmark runnable: it runs tiny on host devices and reports every path the device has."""

from __future__ import annotations

import json

from bench import launch_microbench


def test_launch_microbench_runs_tiny_and_reports_each_path(device_name, tmp_path, capsys):
    out = tmp_path / "launch.json"
    launches = 3 if device_name == "cuda-sim" else 50
    assert launch_microbench.main(["--device", device_name, "--rows", "40", "--launches", str(launches),
                                   "--repeats", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    figures = report["figures"]
    gpu = device_name == "cuda"
    assert set(figures) == ({"launch_twin", "driver", "numba_dispatcher"} if gpu else {"launch_twin"})
    for figure in figures.values():
        assert figure["host_us"] > 0 and figure["total_us"] >= figure["host_us"] * 0.99
        assert len(figure["samples_host_us"]) == 2 and figure["first_ms"] > 0
    if gpu:  # the driver path computes what numba's dispatcher does, and compiled (or loaded) without falling back
        assert report["same_result"] is True and report["target_met"] is not None
        assert report["compile_records"] and {r["outcome"] for r in report["compile_records"]} <= {"compiled", "disk"}
    else:
        assert report["same_result"] is None and report["target_met"] is None
    assert "| launch_twin |" in capsys.readouterr().out
