"""Fixtures shared by the tests that run ``bulkhead run`` (root)."""

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
