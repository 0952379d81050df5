"""Run the ``gpu-engine`` command line as ``python -m gpu_engine``."""

import os
import sys

if __name__ == "__main__":
    try:  # a Ctrl-C while the CLI's modules load ends the command as one during a query does
        from gpu_engine.cli import EXIT_INTERRUPTED, main
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    code = main()
    if code == EXIT_INTERRUPTED:
        # The query was cancelled and "interrupted" printed; the interpreter's teardown would take 1-3 s more
        # (numba's, after a compile), so a Ctrl-C ends the process now. Nothing is left half-written: kernel
        # and cache files are written aside and renamed, and the compile worker ends when its stdin closes.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
