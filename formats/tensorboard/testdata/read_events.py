"""Read a TensorBoard event file with classes protoc made from the protos.

Usage: read_events.py DIR_WITH_event_pb2 EVENT_FILE
Prints one JSON object: the file version and every scalar. The framing and
both CRC-32C of every record are checked here too (a table-driven CRC, as
RFC 3720 defines it).
"""
import json
import struct
import sys

sys.path.insert(0, sys.argv[1])
import event_pb2  # noqa: E402

POLY = 0x82F63B78
TABLE = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def main():
    with open(sys.argv[2], "rb") as f:
        data = f.read()
    off, version, scalars = 0, None, []
    while off < len(data):
        head = data[off:off + 8]
        (n,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", data[off + 8:off + 12])
        if hcrc != masked(head):
            sys.exit("offset %d: bad length CRC" % off)
        body = data[off + 12:off + 12 + n]
        (dcrc,) = struct.unpack("<I", data[off + 12 + n:off + 16 + n])
        if len(body) != n or dcrc != masked(body):
            sys.exit("offset %d: bad data CRC" % off)
        off += 16 + n
        ev = event_pb2.Event()
        ev.ParseFromString(body)
        if ev.WhichOneof("what") == "file_version":
            version = ev.file_version
            continue
        for v in ev.summary.value:
            scalars.append({"tag": v.tag, "step": ev.step, "wall_time": ev.wall_time, "value": v.simple_value})
    json.dump({"file_version": version, "scalars": scalars}, sys.stdout)


main()
