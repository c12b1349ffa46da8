"""An independent Zenoh client receives a bridged channel (issue 40, docs/zenoh.md).

A 100 Hz ``bulkhead-periodic --write speed`` task writes one 16-byte message per job (its
index and release time, little-endian u64) into channel ``speed``, whose publishing bridge
puts each message on a Zenoh key. The subscriber is the ``eclipse-zenoh`` Python package,
in this test's process, outside the run: it must receive every message, indexes from 0
without a gap, in order, each release one period after the one before.
"""

import os
import socket
import struct
import subprocess
import textwrap
import threading
from pathlib import Path

import pytest
import zenoh

REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / "target" / "release"
PERIOD_NS = 10_000_000

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: bulkhead run uses cgroups "
                       "and SCHED_DEADLINE (run the suite as CI does, as root)"),
    pytest.mark.skipif(not (RELEASE / "bulkhead-bridge").exists(),
                       reason=f"{RELEASE}/bulkhead-bridge is not built "
                       "(cargo build --release)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Received:
    """The samples a Zenoh subscriber got on a key, as (index, release) pairs."""

    def __init__(self):
        self.lock = threading.Lock()
        self.messages = []
        self.sizes = set()

    def __call__(self, sample):
        payload = sample.payload.to_bytes()
        with self.lock:
            self.sizes.add(len(payload))
            if len(payload) == 16:
                self.messages.append(struct.unpack("<QQ", payload))


def _description(key: str, port: int) -> str:
    periodic = RELEASE / "bulkhead-periodic"
    return textwrap.dedent(f"""\
        system: {{}}
        partitions:
          - name: app
            kind: rt
            cpus: 0
            scheduler: edf
            tasks:
              - {{name: w, cmd: "{periodic} --exec-us 100 --write speed", budget: 1ms, period: 10ms}}
          - {{name: bridge, kind: rt, cpus: 1, scheduler: edf, tasks: []}}
        channels:
          - name: speed
            kind: fifo
            message_size: 16
            depth: 1024
            writer: app/w
            bridge: {{period: 5ms, budget: 2ms, zenoh: {{key: {key}, connect: ["tcp/127.0.0.1:{port}"]}}}}
        """)


def test_a_python_zenoh_subscriber_receives_every_message_of_a_100hz_writer(scratch):
    key = f"bh-test/{os.getpid()}/python"
    port = _free_port()
    # The subscriber listens and the bridge connects to it: the subscriber exists before
    # the run starts, and the bridge reads the channel only once it is matched, so the
    # first message is index 0 (the depth holds the whole run).
    config = zenoh.Config()
    config.insert_json5("mode", '"peer"')
    config.insert_json5("listen/endpoints", f'["tcp/127.0.0.1:{port}"]')
    config.insert_json5("scouting/multicast/enabled", "false")
    received = Received()
    with zenoh.open(config) as session:
        session.declare_subscriber(key, received)
        (scratch / "system.yaml").write_text(_description(key, port))
        run = subprocess.run([str(RELEASE / "bulkhead"), "run", str(scratch / "system.yaml"),
                              "--timeout", "5s"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert f"{key}: peer present" in run.stderr, run.stderr

    with received.lock:
        messages = list(received.messages)
        sizes = set(received.sizes)
    assert sizes == {16}, f"payload sizes {sizes}"
    indexes = [i for i, _ in messages]
    # 5 s of a 10 ms period, less the start: at least 100 jobs' messages.
    assert len(messages) >= 100, f"{len(messages)} messages\n{run.stderr}"
    assert indexes == list(range(len(messages))), f"not 0..{len(messages) - 1}: {indexes}"
    for (i, rel), (j, rel2) in zip(messages, messages[1:]):
        assert rel2 - rel == (j - i) * PERIOD_NS, f"releases {rel}, {rel2} of jobs {i}, {j}"
