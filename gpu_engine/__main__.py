"""Run the ``gpu-engine`` command line as ``python -m gpu_engine``."""

import sys

if __name__ == "__main__":
    try:  # a Ctrl-C while the CLI's modules load ends the command as one during a query does
        from gpu_engine.cli import run
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    run()
