"""Fixtures shared by the tests that run ``bulkhead run`` (root)."""

import faulthandler
import fcntl
import os

import pytest


@pytest.fixture
def scratch(tmp_path):
    """A directory every partition's user may write, while this test holds the lock of
    the rt tests (their CPUs are exclusive: one run at a time, Rust tests included)."""
    lock = open("/run/bulkhead-rt-tests.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.chmod(tmp_path, 0o1777)
    yield tmp_path
    lock.close()


# Longest a single test may take before the run is ended with every thread's stack:
# a hung test then fails the suite in minutes, with its cause, instead of holding CI
# until its time limit. faulthandler's watchdog is a C thread that needs no GIL, so it
# fires even when the hung thread holds it.
TEST_LIMIT_S = 600


@pytest.fixture(autouse=True)
def _hang_watchdog():
    faulthandler.dump_traceback_later(TEST_LIMIT_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
