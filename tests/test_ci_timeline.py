"""The CI log's worker timeline (tests/ci_timeline.py) names the tail where one worker ran alone and the files with
the most worker time, from the records the xdist workers send."""

from __future__ import annotations

from ci_timeline import summary_lines


def _record(first, last, busy, files, late, spark=None):
    return {"started": 1.0, "collected": 5.0, "first": first, "last": last, "busy": busy, "tests": len(late),
            "waits": [1, 0.5], "cpu": busy, "children_cpu": 0.0, "spark": spark, "files": files, "late": late}


def test_the_tail_is_the_later_workers_tests_after_the_other_finished_longest_first():
    workers = {
        "gw0": _record(5.0, 100.0, 90.0, {"tests/a.py": [60.0, 50.0, 0.0], "tests/b.py": [30.0, 30.0, 0.0]},
                       [(90.0, 100.0, "tests/a.py::x")], spark=[5.0, 50.0, 44.0, 3]),
        "gw1": _record(5.0, 130.0, 120.0, {"tests/b.py": [20.0, 19.0, 0.0], "tests/c.py": [100.0, 10.0, 80.0]},
                       [(95.0, 110.0, "tests/c.py::early"), (110.0, 112.0, "tests/c.py::short"),
                        (112.0, 130.0, "tests/c.py::long")]),
    }
    lines = summary_lines(0.0, 140.0, workers)
    tail = next(line for line in lines if line.startswith("tail:"))
    # gw0 ended at 100 s: gw1 alone for 30 s, its tests counted from there (the first one's 10 s of 15)
    assert tail == ("tail: gw1 ran alone for 30.0 s at the end: tests/c.py::long 18.0 s, tests/c.py::early 10.0 s, "
                    "tests/c.py::short 2.0 s")
    files = lines[lines.index(next(line for line in lines if line.startswith("files with"))) + 1:]
    assert [line.split()[-1] for line in files] == ["tests/c.py", "tests/a.py", "tests/b.py"]
    assert "50.0 s 23.8%  cpu   49.0 s +   0.0 s  tests/b.py" in files[2]  # both workers' time in one line
    assert any(line.startswith("gw0: Spark group +5.0 .. +50.0 s, 44.0 s in 3 tests") for line in lines)
    assert "units of 8 s or more started in the run's last 25%: none" in lines


def test_long_units_started_late_are_named_longest_first():
    units = {"tests/c.py::early": [20.0, 90.0], "tests/c.py::late_short": [120.0, 5.0],
             "tests/c.py::late": [106.0, 9.0], "tests/c.py::later": [112.0, 18.0]}
    workers = {"gw0": dict(_record(5.0, 130.0, 120.0, {}, []), units=units)}
    assert ("units of 8 s or more started in the run's last 25%: tests/c.py::later 18.0 s at +112 s, "
            "tests/c.py::late 9.0 s at +106 s") in summary_lines(0.0, 140.0, workers)
