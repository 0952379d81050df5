"""Child processes that a test interrupts with SIGINT start with SIGINT's default action, as a shell's command does.

Why: a process started with SIGINT ignored passes that on across ``exec`` (POSIX), and Python then installs no
KeyboardInterrupt handler at all, so the Ctrl-C a test sends is lost and the child exits 0. Test processes can
run with SIGINT ignored: bash ignores it for commands it starts in the background (``make test &``, a CI
runner's detached job), and whether a pytest-xdist worker still ignored it when these tests ran depended on
whether a Spark test had installed PySpark's handler in that worker first (a clean-clone run, stop 43: both
Ctrl-C tests exited 0 instead of 130).
"""

from __future__ import annotations

import signal

import pytest

__all__ = ["sigint_ignored_by_the_test_process", "with_default_sigint"]


def with_default_sigint() -> None:
    """``preexec_fn`` for :mod:`subprocess`: the child starts with SIGINT's default action."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def sigint_ignored_by_the_test_process():
    """Run the test with SIGINT ignored in the test process, the worst case above, on every machine.

    Without it these tests would pass or fail depending on how the suite was started and on which tests ran
    before them in the same worker.
    """
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
