"""bulkhead.chan: real channels (sealed memfds) between threads and processes."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from bulkhead import chan
from bulkhead.errors import (BufferSizeError, ChannelBusyError, ChannelClosedError,
                             ChannelError, ChannelTimeoutError, NotAChannelError,
                             PeerDiedError)


def test_fifo_round_trip_in_order():
    c = chan.Channel.create("rt", message_size=8, depth=4)
    w, r = c.writer(), c.reader()
    for i in range(4):
        w.write(i.to_bytes(8, "little"))
    assert not w.try_write(bytes(8)), "a full fifo refuses a try_write"
    assert [int.from_bytes(r.read(1.0), "little") for _ in range(4)] == [0, 1, 2, 3]
    assert r.try_read() is None


def test_round_trip_with_a_child_process_given_the_descriptor():
    ping = chan.Channel.create("ping", message_size=32, depth=2)
    pong = chan.Channel.create("pong", message_size=32, depth=2)
    child = textwrap.dedent("""
        import sys
        from bulkhead import chan
        rx = chan.Channel.from_fd(int(sys.argv[1])).reader()
        tx = chan.Channel.from_fd(int(sys.argv[2])).writer()
        for _ in range(100):
            tx.write(rx.read(5.0)[::-1])
    """)
    proc = subprocess.Popen([sys.executable, "-c", child, str(ping.fileno()), str(pong.fileno())],
                            pass_fds=(ping.fileno(), pong.fileno()))
    try:
        w, r = ping.writer(), pong.reader()
        for i in range(100):
            msg = bytes([i]) * 16 + bytes(16)
            w.write(msg, timeout=5.0)
            assert r.read(timeout=5.0) == msg[::-1]
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_read_into_a_numpy_array_writes_its_memory():
    c = chan.Channel.create("np", message_size=32, depth=2)
    w, r = c.writer(), c.reader()
    sent = np.arange(4, dtype=np.float64) * 1.5
    w.write(sent)  # a numpy array is a buffer: no bytes() needed
    out = np.full(4, -1.0)
    address = out.__array_interface__["data"][0]
    r.read_into(out, timeout=1.0)
    assert out.__array_interface__["data"][0] == address
    assert (out == sent).all()
    w.write(b"\x01" * 32)
    assert r.read_latest_into(out.view(np.uint8))
    assert out.view(np.uint8).tolist() == [1] * 32
    assert not r.read_latest_into(out), "nothing left to read"


def test_wrong_size_buffers_raise_buffer_size_error():
    c = chan.Channel.create("size", message_size=16, depth=2)
    w, r = c.writer(), c.reader()
    with pytest.raises(BufferSizeError) as e:
        w.write(b"short")
    assert (e.value.expected, e.value.got) == (16, 5)
    assert "5 bytes" in str(e.value) and "16 bytes" in str(e.value)
    with pytest.raises(BufferSizeError):
        r.read_into(np.zeros(3, dtype=np.float64))
    with pytest.raises(BufferSizeError):
        r.read_into(bytearray(17))
    with pytest.raises(TypeError, match="writable"):
        r.read_into(bytes(16))
    with pytest.raises(TypeError, match="C-contiguous"):
        r.read_into(np.zeros(4, dtype=np.float64)[::2])  # 16 bytes, but strided
    with pytest.raises(TypeError):
        w.write("sixteen chars!!!")  # text is not bytes
    with pytest.raises(TypeError):
        r.read_into(16)
    w.write(bytearray(16))
    assert r.read(1.0) == bytes(16)


def test_closed_channel_raises_channel_closed_error():
    c = chan.Channel.create("closed", message_size=4, depth=2)
    w, r = c.writer(), c.reader()
    w.write(b"last")
    w.close()
    assert w.closed
    assert r.read(1.0) == b"last", "a fifo is drained before it reports closed"
    with pytest.raises(ChannelClosedError, match="closed"):
        r.read(1.0)
    with pytest.raises(ChannelClosedError, match="endpoint is closed"):
        w.write(b"more")
    r.close()
    r.close()  # closing twice is fine
    with pytest.raises(ChannelClosedError):
        r.try_read()


def test_writer_sees_a_closed_reader():
    c = chan.Channel.create("gone", message_size=4, depth=1)
    w, r = c.writer(), c.reader()
    r.close()
    w.write(b"abcd", timeout=1.0)  # the ring has room: nobody needs to read it yet
    with pytest.raises(ChannelClosedError):
        w.write(b"abcd", timeout=1.0)  # full, and its reader is gone


def test_non_channel_descriptors_raise_not_a_channel_error(tmp_path):
    rd, wr = os.pipe()
    try:
        with pytest.raises(NotAChannelError, match=f"descriptor {rd} is not a bulkhead channel"):
            chan.Channel.from_fd(rd)
    finally:
        os.close(rd)
        os.close(wr)
    with open(tmp_path / "file", "wb+") as f:
        f.write(bytes(8192))
        f.flush()
        with pytest.raises(NotAChannelError):
            chan.Channel.from_fd(f.fileno())
    with pytest.raises(NotAChannelError, match="Bad file descriptor"):
        chan.Channel.from_fd(1_000_000)
    with pytest.raises(NotAChannelError):
        chan.Channel.from_fd(-1)


def test_opening_outside_bulkhead_run_names_the_variable():
    with pytest.raises(ChannelError, match="BULKHEAD_CHAN_CAN2IVI"):
        chan.Channel.open("can2ivi")


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ChannelError, match="kind"):
        chan.Channel.create("x", 8, 1, kind="lifo")
    with pytest.raises(ChannelError):
        chan.Channel.create("x", 0, 1)
    c = chan.Channel.create("x", 8, 1)
    r = c.reader()
    with pytest.raises(ValueError, match="timeout"):
        r.read(timeout=-1)
    with pytest.raises(ChannelBusyError, match="held by live process"):
        c.reader()  # this process already holds the reading end


def test_timeout_and_gil_released_while_blocked():
    c = chan.Channel.create("slow", message_size=8, depth=1)
    w, r = c.writer(), c.reader()
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        start = time.monotonic()
        with pytest.raises(ChannelTimeoutError, match="0.3"):
            r.read(timeout=0.3)
        assert time.monotonic() - start >= 0.3
    finally:
        stop.set()
        t.join()
    assert len(ticks) > 20, "another thread ran while the read blocked"


def test_a_second_thread_gets_busy_not_a_deadlock():
    c = chan.Channel.create("busy", message_size=8, depth=1)
    w, r = c.writer(), c.reader()
    got = []
    t = threading.Thread(target=lambda: got.append(r.read(timeout=5.0)))
    t.start()
    time.sleep(0.2)
    with pytest.raises(ChannelBusyError, match="another thread"):
        r.try_read()
    with pytest.raises(ChannelBusyError, match="cannot close"):
        r.close()
    w.write(b"12345678")
    t.join(5.0)
    assert got == [b"12345678"]


def test_latest_returns_the_newest_message():
    c = chan.Channel.create("speed", message_size=4, kind="latest")
    assert (c.kind, c.depth) == ("latest", 1)
    w, r = c.writer(), c.reader()
    assert r.read_latest() is None
    with pytest.raises(ChannelTimeoutError):
        r.read(timeout=0.05)
    for v in range(10):
        w.write(v.to_bytes(4, "little"))
    assert r.read_latest() == (9).to_bytes(4, "little")
    assert r.read(0.1) == (9).to_bytes(4, "little")
    assert r.published() == 10


def test_read_latest_drains_a_fifo():
    c = chan.Channel.create("drain", message_size=1, depth=8)
    w, r = c.writer(), c.reader()
    for v in b"abc":
        w.write(bytes([v]))
    assert r.read_latest() == b"c"
    assert r.try_read() is None


def test_ctrl_c_interrupts_a_blocked_read():
    import signal
    # A shell without job control starts background commands with SIGINT ignored, and
    # Python then installs no handler: the signal would be dropped and the read below
    # would never end. Install Python's own handler for this test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    c = chan.Channel.create("sigint", message_size=8, depth=1)
    w, r = c.writer(), c.reader()
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            r.read()  # no timeout: only the signal ends it
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 5
    w.write(bytes(8))
    assert r.read(1.0) == bytes(8), "the channel still works after the interruption"


def test_a_writer_killed_while_the_reader_waits_raises_peer_died():
    c = chan.Channel.create("crash", message_size=8, depth=2)
    child = textwrap.dedent("""
        import sys, time
        from bulkhead import chan
        w = chan.Channel.from_fd(int(sys.argv[1])).writer()
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child, str(c.fileno())],
                            pass_fds=(c.fileno(),), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        r = c.reader()
        threading.Timer(0.3, proc.kill).start()
        start = time.monotonic()
        with pytest.raises(PeerDiedError, match=f"peer process {proc.pid} died"):
            r.read(timeout=20)
        assert time.monotonic() - start < 10
    finally:
        proc.kill()
        proc.wait()
