"""Round trip of a 32-byte message between two Python processes pinned to CPUs 0 and 1
through iceoryx2's Python binding (publish-subscribe, the subscriber busy-polling
`receive`), the same measurement as chan_rtt.py. Prints one JSON object.

Usage: iceoryx2_rtt.py [ROUND_TRIPS [ROUNDS]]   (run by bench/python-chan in .venv-iceoryx2)
"""

import ctypes
import json
import os
import sys
import time

import iceoryx2 as iox2

from chan_rtt import SIZE, best, pair, summary


#: Names this run's services (the parent's pid: the forked child inherits it).
RUN = os.getpid()


class Msg(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint8 * SIZE)]


def ports(node, send, recv):
    def service(name):
        path = f"bulkhead/bench/{RUN}/{name}"
        builder = node.service_builder(iox2.ServiceName.new(path))
        return builder.publish_subscribe(Msg).open_or_create()
    out, back = service(send), service(recv)
    pub, sub = out.publisher_builder().create(), back.subscriber_builder().create()
    # A sample reaches only the subscribers connected when it is sent: wait for the peer.
    deadline = time.monotonic() + 10
    while out.dynamic_config.number_of_subscribers < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    pub.update_connections()
    return pub, sub


def echo_loop(node, send, recv, n, msg):
    pub, sub = ports(node, send, recv)
    clock = time.perf_counter_ns
    out = []
    for _ in range(n):
        t0 = clock()
        if msg is not None:
            pub.send_copy(msg)
        sample = sub.receive()
        while sample is None:
            sample = sub.receive()
        got = Msg.from_buffer_copy(sample.payload().contents)
        sample.delete()
        if msg is None:
            pub.send_copy(got)
        out.append(clock() - t0)
    return out


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    iox2.set_log_level(iox2.LogLevel.Error)
    def child(count):
        node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
        echo_loop(node, "pong", "ping", count, None)

    def parent(count):
        node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
        msg = Msg()
        ctypes.memmove(msg.data, bytes(range(SIZE)), SIZE)
        return echo_loop(node, "ping", "pong", count, msg)

    results = {}
    for _ in range(rounds):
        best(results, "iceoryx2_busy_poll", summary(pair(parent, child, n)))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
