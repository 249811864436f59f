"""Baseline: a Python loop reading NVML (memory v2 and processes) every 1 ms.

    python3 bench/perf/nvml_loop.py [SECONDS [INTERVAL_MS [mem]]]

With "mem" it reads memory only, not processes.

Reports ticks started within one interval of their deadline and CPU use, the
figures memrec's sampler is compared with. Uses ctypes (no pynvml needed).
"""
import ctypes
import resource
import sys
import time


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def main(seconds, interval_ms, procs_too):
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    assert nv.nvmlInit_v2() == 0
    dev = ctypes.c_void_p()
    assert nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0
    mem = MemoryV2(version=ctypes.sizeof(MemoryV2) | (2 << 24))
    procs = (ProcessInfo * 64)()
    count = ctypes.c_uint()
    interval = interval_ms / 1000
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    k, ontime, missed = 0, 0, 0
    while time.monotonic() - t0 < seconds:
        deadline = t0 + k * interval
        d = deadline - time.monotonic()
        if d > 0:
            time.sleep(d)
        late = time.monotonic() - deadline
        if late > interval:
            skip = int(late / interval)
            missed += skip
            k += skip
            continue
        nv.nvmlDeviceGetMemoryInfo_v2(dev, ctypes.byref(mem))
        if procs_too:
            count.value = 64
            nv.nvmlDeviceGetComputeRunningProcesses_v3(dev, ctypes.byref(count), procs)
        ontime += 1
        k += 1
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    what = "memory and processes" if procs_too else "memory"
    print(f"python NVML loop ({what}) at {interval_ms:g} ms: {ontime} ticks, {missed} missed ({100 * ontime / (ontime + missed):.3f}% on time), "
          f"{ontime / wall:.1f} Hz, {100 * cpu / wall:.2f}% of one core")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(float(args[0]) if args else 20, float(args[1]) if len(args) > 1 else 1, "mem" not in args[2:])
