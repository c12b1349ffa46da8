"""Outside ``bulkhead run``, the task and client APIs say so with NotAttachedError."""

import pytest

from bulkhead import client, task
from bulkhead.errors import ClientError, NotAttachedError


def test_task_outside_bulkhead_run(monkeypatch):
    monkeypatch.delenv("BULKHEAD_TASK", raising=False)
    with pytest.raises(NotAttachedError, match="BULKHEAD_TASK is not set"):
        task.Task()
    monkeypatch.setenv("BULKHEAD_TASK", "900,901")
    with pytest.raises(NotAttachedError, match="descriptor 900 is not open"):
        task.Task()


def test_client_outside_bulkhead_run(monkeypatch):
    monkeypatch.delenv("DEMOS_PARAMETERS", raising=False)
    with pytest.raises(NotAttachedError, match="DEMOS_PARAMETERS is not set"):
        client.completed()


def test_heartbeat_does_nothing_where_no_watchdog_listens(monkeypatch):
    monkeypatch.delenv("BULKHEAD_HEARTBEAT", raising=False)
    monkeypatch.delenv("DEMOS_PARAMETERS", raising=False)
    client.heartbeat()
    monkeypatch.setenv("BULKHEAD_HEARTBEAT", "1")
    with pytest.raises(NotAttachedError, match="DEMOS_PARAMETERS is not set"):
        client.heartbeat()


def test_requests_from_inside_fail_where_no_supervisor_reads_them(monkeypatch):
    monkeypatch.delenv("BULKHEAD_HEARTBEAT", raising=False)
    with pytest.raises(ClientError, match="not connected"):
        client.request_mode("highway")
    with pytest.raises(ClientError, match="not connected"):
        client.request_suspend()
