"""Run the ``gpu-engine`` command line as ``python -m gpu_engine``."""

import sys

from gpu_engine.cli import main

if __name__ == "__main__":
    sys.exit(main())
