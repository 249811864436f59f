"""Writes hostile PyTorch-snapshot pickles into a folder, for
bench/perf/pickle_bombs.sh. Each is built opcode by opcode (protocol 4).

    python3 bench/perf/pickle_bombs.py DIR
"""
import gzip
import pickle
import struct
import sys

BINGET = lambda k: b"j" + struct.pack("<I", k)  # LONG_BINGET
MEMO = b"\x94"


def s(text):  # SHORT_BINUNICODE or BINUNICODE
    b = text.encode()
    return (b"\x8c" + bytes([len(b)]) if len(b) < 256 else b"X" + struct.pack("<I", len(b))) + b


def tuple_key():
    """{t40: 1, "segments": []}, t_k = (t_{k-1}, t_{k-1}): 2^40 leaves."""
    p = b"\x80\x04}(NN\x86" + MEMO
    for k in range(40):
        p += BINGET(k) + BINGET(k) + b"\x86" + MEMO
    return p + b"K\x01" + s("segments") + b"]u."


def shared_block(refs, frames):
    """One block dict (with a stack of `frames` frames) referenced `refs`
    times from one segment's blocks list."""
    p = b"\x80\x04}" + MEMO + s("segments") + b"](}(" + s("device") + b"K\x00" + s("blocks") + b"]" + MEMO
    p += b"}" + MEMO + b"(" + s("size") + b"K@" + s("state") + s("active_allocated") + s("frames") + b"]("
    for i in range(frames):
        p += b"}(" + s("filename") + s("/w/train.py") + s("line") + b"M" + struct.pack("<H", i) + s("name") + s("f") + b"u"
    p += b"eua"
    for _ in range(refs // 1000):
        p += b"(" + BINGET(2) * 1000 + b"e"
    return p + b"ues."


def empty_lists(n):
    return b"\x80\x04" + b"]" * n + b"."


def trace_time(us):
    snap = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 512, "time_us": us, "frames": []}]]}
    return pickle.dumps(snap, protocol=4)


def main(out):
    bombs = {
        "tuple-key.pickle": tuple_key(),
        "block-x1M.pickle": shared_block(1_000_000, 100),
        "stack-x99k.pickle": shared_block(99_000, 1000),
        "time-2^63.pickle": trace_time(2**63 - 1),
    }
    for name, data in bombs.items():
        with open(f"{out}/{name}", "wb") as f:
            f.write(data)
    # 100 M empty-list opcodes and three 1 GiB strings, gzipped.
    with gzip.open(f"{out}/lists-100M.pickle.gz", "wb", compresslevel=9) as f:
        f.write(b"\x80\x04")
        chunk = b"]" * (1 << 20)
        for _ in range(100):
            f.write(chunk)
        f.write(b".")
    with gzip.open(f"{out}/strings-3GiB.pickle.gz", "wb", compresslevel=9) as f:
        f.write(b"\x80\x04](")
        chunk = b"x" * (1 << 24)
        for _ in range(3):
            f.write(b"\x8d" + struct.pack("<Q", 1 << 30))
            for _ in range(64):
                f.write(chunk)
        f.write(b"e.")


if __name__ == "__main__":
    main(sys.argv[1])
