"""The Python side of crates/cli/tests/socketcand.rs: python-can and cantools, unchanged,
talking to a bulkhead bus through its socketcand server and reading or writing candump
logs. Each subcommand prints one JSON object on its last line (and `ready` first when
the Rust side must wait for it); a failed check raises, which exits non-zero.

    send PORT BUS N             send N frames 123#<seq u32 LE><4 bytes> as fast as it can
    receive PORT BUS N LOG      receive N frames, check the sequence, log them (can.Logger)
    readlog LOG N               read a bulkhead candump log with can.LogReader, check it
    decode PORT BUS DBC LOG OUT receive frames until 3 s of quiet, log them (can.Logger) and
                                write cantools' decoding of each as JSON lines to OUT
"""

import json
import struct
import sys
import time

import can
import cantools


def connect(port, channel):
    return can.Bus(interface="socketcand", host="127.0.0.1", port=int(port), channel=channel)


def seq_of(msg):
    assert msg.arbitration_id == 0x123 and not msg.is_extended_id, msg
    assert len(msg.data) == 8, msg
    return struct.unpack_from("<I", msg.data)[0]


def send(port, channel, n):
    bus = connect(port, channel)
    start = time.monotonic()
    for seq in range(int(n)):
        data = struct.pack("<I", seq) + b"\xca\xfe\xba\xbe"
        bus.send(can.Message(arbitration_id=0x123, data=data, is_extended_id=False))
    elapsed = time.monotonic() - start
    bus.shutdown()
    print(json.dumps({"sent": int(n), "seconds": elapsed}))


def receive(port, channel, n, log):
    n = int(n)
    bus = connect(port, channel)
    print("ready", flush=True)
    logger = can.Logger(log)
    got = []
    deadline = time.monotonic() + 120
    while len(got) < n and time.monotonic() < deadline:
        msg = bus.recv(timeout=5)
        if msg is None:
            continue
        assert seq_of(msg) == len(got), f"frame {len(got)} has seq {seq_of(msg)}"
        got.append(msg)
        logger.on_message_received(msg)
    logger.stop()
    bus.shutdown()
    assert len(got) == n, f"received {len(got)} of {n}"
    first, last = got[0].timestamp, got[-1].timestamp
    print(json.dumps({"received": len(got), "first": first, "last": last}))


def readlog(log, n):
    n = int(n)
    frames = [m for m in can.LogReader(log) if m.arbitration_id == 0x123]
    assert len(frames) == n, f"{len(frames)} frames of id 0x123 in {log}"
    stamps = [m.timestamp for m in frames]
    assert all(a < b for a, b in zip(stamps, stamps[1:])), "timestamps increase"
    assert [seq_of(m) for m in frames] == list(range(n)), "in order, none missing"
    assert all(bytes(m.data[4:]) == b"\xca\xfe\xba\xbe" for m in frames)
    print(json.dumps({"read": len(frames)}))


def decode(port, channel, dbc, log, out):
    db = cantools.database.load_file(dbc, strict=False)
    bus = connect(port, channel)
    print("ready", flush=True)
    logger = can.Logger(log)
    decoded = 0
    received = 0
    with open(out, "w") as lines:
        while True:
            msg = bus.recv(timeout=3)
            if msg is None:
                break
            received += 1
            logger.on_message_received(msg)
            try:
                message = db.get_message_by_frame_id(msg.arbitration_id)
                signals = message.decode(msg.data, decode_choices=False)
            except Exception:
                continue  # not in the DBC, or cantools cannot unpack it (PCS_HUD)
            decoded += 1
            lines.write(json.dumps({"t": msg.timestamp, "id": msg.arbitration_id,
                                    "message": message.name, "signals": signals}) + "\n")
    logger.stop()
    bus.shutdown()
    print(json.dumps({"received": received, "decoded": decoded}))


if __name__ == "__main__":
    {"send": send, "receive": receive, "readlog": readlog, "decode": decode}[sys.argv[1]](
        *sys.argv[2:]
    )
