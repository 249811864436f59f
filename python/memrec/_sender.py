"""The probe's queue and the background thread that sends it.

The training thread only appends to a bounded queue (a full queue drops and
counts, and the count is sent later). One daemon thread wakes every
send_interval, formats what queued up and writes it to the recorder's
socket in one send; waking it per message would hand the GIL back and forth
at every step. The recorder gone, the probe becomes a no-op.
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time
from typing import Any, List, Optional, Tuple

from ._lines import mark_line, stats_line, step_line

MAX_QUEUE = 10000
SEND_INTERVAL = 0.25  # how often the background thread formats and sends
WAKE_AT = 2048  # a queue this long wakes the background thread early

# Message kinds on the queue.
_MARK, _TORCH, _DROPPED, _STEP, _LINE = 0, 1, 2, 3, 4


class Sender:
    """The queue and its thread; the Probe derives from it. A subclass's
    _timer_sample runs at the sender's wakes, its _budget_fields formats a
    sample's budget, and its on_stop runs when sending stops."""

    timer_interval = 0.0

    def __init__(self, path: Optional[str], send_interval: Optional[float]) -> None:
        self.path = path if path is not None else os.environ.get("MEMREC_SOCKET", "")
        self.enabled = bool(self.path)
        self.pid = os.getpid()
        self.queue = collections.deque()
        self.max_queue = MAX_QUEUE
        self.dropped = 0  # messages dropped since the last report
        self.dropped_total = 0
        self.sent = 0
        self.lock = threading.Lock()  # held by the sender while it drains the queue
        self.wake = threading.Event()
        self.busy = False  # the sender holds messages it took from the queue
        self.sock = None
        self.sender = None
        self.send_interval = SEND_INTERVAL if send_interval is None else send_interval
        self.stopped = False

    def _timer_sample(self) -> None:
        pass

    def _budget_fields(self, fig: Any) -> str:
        return ""

    def on_stop(self) -> None:
        pass

    def _start_threads(self) -> None:
        self.sender = threading.Thread(target=self._send_loop, name="memrec-sender", daemon=True)
        self.sender.start()

    def _put(self, item: Tuple[Any, ...]) -> None:
        q = self.queue
        if len(q) >= self.max_queue:
            self.dropped += 1
            self.dropped_total += 1
            return
        q.append(item)
        if len(q) == WAKE_AT:
            self.wake.set()

    def put_line(self, line: str) -> None:
        """Queues a line formatted already (a site summary)."""
        self._put((_LINE, line))

    def _connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(5.0)
            s.connect(self.path)
        except OSError:
            s.close()
            raise
        return s

    def _format(self, item: Tuple[Any, ...], out: List[str]) -> None:
        """Appends the lines of one queued item to out."""
        kind = item[0]
        if kind == _STEP:
            _, t, step, rank, samples = item
            out.append(step_line(t, step, rank, self.pid))
            for gpu, stats, fig, largest in samples:
                out.append(stats_line(t, gpu, self.pid, rank, stats, extra=self._budget_fields(fig),
                                      largest_segment=largest))
        elif kind == _TORCH:
            _, t, dev, rank, stats, peak = item[:6]
            fig = item[6] if len(item) > 6 else None
            largest = item[7] if len(item) > 7 else 0
            out.append(stats_line(t, dev, self.pid, rank, stats, peak, extra=self._budget_fields(fig),
                                  largest_segment=largest))
        elif kind == _MARK:
            out.append(mark_line(item[1], item[2], item[3]))
        elif kind == _LINE:
            out.append(item[1])
        else:
            out.append(mark_line(item[1], "probe_dropped", {"code": item[2], "text": "memrec probe dropped %d messages" % item[2]}))

    def _send_loop(self) -> None:
        next_sample = time.monotonic() + self.timer_interval
        while not self.stopped:
            self.wake.wait(self.send_interval)
            self.wake.clear()
            if self.timer_interval and self.timer_interval > 0 and time.monotonic() >= next_sample:
                next_sample = time.monotonic() + self.timer_interval
                self._timer_sample()
            self._drain()

    def _drain(self) -> None:
        """Formats and sends everything queued, in one send."""
        with self.lock:
            q = self.queue
            if not q and not self.dropped:
                return
            self.busy = True
            try:
                lines = []
                while q:
                    item = q.popleft()
                    try:
                        self._format(item, lines)
                    except Exception:  # a value that does not format
                        self.dropped += 1
                        self.dropped_total += 1
                if self.dropped:
                    n, self.dropped = self.dropped, 0
                    self._format((_DROPPED, time.time_ns(), n), lines)
                data = "".join(lines).encode("utf-8")
                try:
                    if self.sock is None:
                        self.sock = self._connect()
                    self.sock.sendall(data)
                    self.sent += len(lines)
                except OSError:
                    # The recorder is gone: become a no-op.
                    if self.sock is not None:
                        self.sock.close()
                        self.sock = None
                    self.enabled = False
                    self.stopped = True
                    q.clear()
                    self.on_stop()
            except Exception:
                pass
            finally:
                self.busy = False

    def flush(self, timeout: float = 2.0) -> None:
        """Waits until the queue is sent (or timeout)."""
        if not self.enabled:
            return
        self.wake.set()
        end = time.monotonic() + timeout
        while (self.queue or self.busy) and time.monotonic() < end and not self.stopped:
            time.sleep(0.001)
            self.wake.set()

    def close(self) -> None:
        self.flush()
        self.stopped = True
        self.on_stop()
        self.wake.set()
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
