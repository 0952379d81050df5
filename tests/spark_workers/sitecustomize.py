"""Make the Spark tests' Python workers compile each disk-cached numba function once across processes.

Why: the Spark tests' ``local[2]`` session runs two Python workers (forked by
``pyspark.daemon``) that import the engine and, on a fresh kernel cache (a
clean clone's CI), compile the same static kernels at the same time, ~40 s of
CPU each for the README example, which neither ``time`` nor pytest's durations
count. tests/spark/conftest.py puts this folder on the workers' ``PYTHONPATH``
(``spark.executorEnv.PYTHONPATH``), so Python imports this module as the
daemon starts and the workers it forks inherit the lock of
tests/compile_once_per_run.py, which the xdist workers use too.
"""

import os
import sys

if os.environ.get("GPU_ENGINE_TESTS_COMPILE_ONCE"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        from compile_once_per_run import install
    except ImportError:  # a worker without numba fails later with the engine's own message
        pass
    else:
        install()
