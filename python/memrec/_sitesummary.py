"""Allocation sites' summaries: a snapshot as one JSON line.

A snapshot is summarised per allocation site: the innermost frame in the
user's code (outside torch, the standard library and installed packages,
falling back to the innermost frame outside torch and the standard library),
with its callers kept for display; live bytes and blocks, and what the
window's trace allocated and freed there. Blocks without frames (allocated
while the history was off, or by autograd's backward threads, which run no
Python) form one "untracked" entry. A summary is one JSON line of at most
MAX_MESSAGE bytes: sites that do not fit are added up as "other".

Nothing here raises into the training code.
"""

from __future__ import annotations

import json
import os
import sysconfig
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

MAX_MESSAGE = 64 << 10  # the recorder's longest line
MAX_STACK = 4  # callers kept per site, for display
LIVE = ("active_allocated", "active_pending_free", "active_awaiting_free")
UNTRACKED = "untracked"


class Frames:
    """Tells the user's frames from those of torch, the standard library
    and installed packages."""

    def __init__(self, torch_dir: Optional[str] = None) -> None:
        paths = sysconfig.get_paths()
        self.stdlib = tuple(p for p in {paths.get("stdlib"), paths.get("platstdlib")} if p)
        self.packages = tuple(p for p in {paths.get("purelib"), paths.get("platlib")} if p)
        self.torch = torch_dir
        self.own = os.path.dirname(os.path.abspath(__file__))
        self.memo = {}

    def kind(self, filename: str) -> int:
        """0: the user's code; 1: an installed package other than torch;
        2: torch, the standard library, the probe, or not Python."""
        k = self.memo.get(filename)
        if k is None:
            k = self.memo[filename] = self._kind(filename)
        return k

    def _kind(self, f: str) -> int:
        if not f or f.startswith("<") or not f.endswith(".py"):
            return 2
        if f.startswith(self.own):
            return 2
        if self.torch and f.startswith(self.torch + os.sep):
            return 2
        return frame_kind(f, self.stdlib, self.packages)


def frame_kind(f: str, stdlib: Tuple[str, ...] = (), packages: Tuple[str, ...] = ()) -> int:
    """The rule of Frames.kind on a path alone (the same one memrec's
    snapshot reader applies to files from other machines)."""
    if not f or f.startswith("<") or not f.endswith(".py"):
        return 2
    parts = f.replace("\\", "/").split("/")
    for i, p in enumerate(parts[:-1]):
        if p in ("site-packages", "dist-packages"):
            return 2 if parts[i + 1] == "torch" else 1
    if any(f.startswith(p + os.sep) for p in packages):
        return 1
    if any(f.startswith(p + os.sep) for p in stdlib):
        return 2
    for i, p in enumerate(parts[:-1]):
        if p.startswith("python3") and i > 0 and parts[i - 1] in ("lib", "lib64"):
            return 2
    return 0


def site_of(frames: Sequence[Dict[str, Any]], kinds: Frames) -> int:
    """The index of the site's frame among a block's frames (innermost
    first): the innermost user frame, else the innermost frame outside torch
    and the standard library, else the innermost frame; -1 without frames."""
    fallback = -1
    for i, fr in enumerate(frames):
        k = kinds.kind(fr.get("filename", ""))
        if k == 0:
            return i
        if k == 1 and fallback < 0:
            fallback = i
    if fallback < 0 and frames:
        return 0
    return fallback


def _label(fr: Dict[str, Any]) -> str:
    return "%s:%d" % (os.path.basename(fr.get("filename", "?")), int(fr.get("line", 0) or 0))


class _Site:
    __slots__ = ("file", "line", "func", "stack", "live_bytes", "live_blocks", "alloc_bytes", "allocs",
                 "freed_bytes", "frees")

    def __init__(self, frames: Sequence[Dict[str, Any]], i: int, kinds: Frames) -> None:
        fr = frames[i]
        self.file = str(fr.get("filename", ""))
        self.line = int(fr.get("line", 0) or 0)
        self.func = str(fr.get("name", ""))
        stack = []
        for up in frames[i + 1:]:
            if len(stack) >= MAX_STACK:
                break
            if kinds.kind(up.get("filename", "")) < 2:
                stack.append("%s %s" % (_label(up), up.get("name", "")))
        self.stack = stack
        self.live_bytes = self.live_blocks = self.alloc_bytes = self.allocs = self.freed_bytes = self.frees = 0

    def json(self) -> Dict[str, Any]:
        d = {"site": "%s:%d" % (os.path.basename(self.file), self.line), "file": self.file, "line": self.line,
             "func": self.func, "live_bytes": self.live_bytes, "live_blocks": self.live_blocks}
        if self.stack:
            d["stack"] = self.stack
        if self.allocs or self.frees:
            d.update(alloc_bytes=self.alloc_bytes, allocs=self.allocs, freed_bytes=self.freed_bytes, frees=self.frees)
        return d


# With memrec.watch, a live block that holds a watched tensor's storage is
# summed under its category instead of the line that allocated it: the
# site tables then say "<optimizer state> AdamW exp_avg" where they would
# say "adamw.py:..." or the model's __init__.
CATEGORY_FILES = ("<parameters>", "<gradients>", "<optimizer state>", "<buffers>")


class Summary:
    """The per-site figures of one device in one snapshot. watched is
    memrec.watch's storages, (address, bytes, category, label) sorted by
    address, or None."""

    def __init__(self, watched: Optional[Sequence[Tuple[int, int, int, str]]] = None) -> None:
        self.watched = list(watched or ())
        self.watched_at = [w[0] for w in self.watched]
        self.sites = {}  # (file, line) -> _Site
        self.untracked = [0, 0, 0, 0]  # live bytes, live blocks, alloc bytes, freed bytes
        self.bad = 0  # entries of the snapshot that made no sense
        self.traced = False

    def _site(self, frames: Sequence[Dict[str, Any]], kinds: Frames) -> Optional[_Site]:
        """The block's site, or None for a block without frames."""
        i = site_of(frames, kinds) if frames else -1
        if i < 0:
            return None
        fr = frames[i]
        k = (fr.get("filename", ""), int(fr.get("line", 0) or 0))
        s = self.sites.get(k)
        if s is None:
            s = self.sites[k] = _Site(frames, i, kinds)
        return s

    def _category(self, addr: int, size: int, kinds: Frames) -> Optional[_Site]:
        """The category site of a block holding a watched storage, or None."""
        import bisect

        i = bisect.bisect_left(self.watched_at, addr)
        if i >= len(self.watched_at) or self.watched_at[i] >= addr + size:
            return None
        _, _, cat, label = self.watched[i]
        key = (CATEGORY_FILES[cat], 0)
        s = self.sites.get(key)
        if s is None:
            s = self.sites[key] = _Site([{"filename": key[0], "line": 0, "name": label}], 0, kinds)
        elif label and label not in s.func.split(", "):
            s.func = s.func + ", " + label if s.func else label
        return s

    def add(self, snapshot: Dict[str, Any], device: int, kinds: Frames, since_us: int = 0) -> None:
        """Adds the live blocks of device and its trace entries after since_us."""
        for seg in snapshot.get("segments") or ():
            try:
                if int(seg.get("device", 0)) != device:
                    continue
                blocks = seg.get("blocks") or ()
            except (TypeError, ValueError, AttributeError):
                self.bad += 1
                continue
            for b in blocks:
                try:
                    if b.get("state") not in LIVE:
                        continue
                    size = int(b["size"])
                    if size < 0:
                        raise ValueError(size)
                    s = None
                    if self.watched:
                        s = self._category(int(b.get("address", -1)), size, kinds)
                    if s is None:
                        s = self._site(b.get("frames") or (), kinds)
                except (KeyError, TypeError, ValueError, AttributeError):
                    self.bad += 1
                    continue
                if s is None:
                    self.untracked[0] += size
                    self.untracked[1] += 1
                else:
                    s.live_bytes += size
                    s.live_blocks += 1
        traces = snapshot.get("device_traces") or ()
        if device < len(traces):
            self.traced = True
            # A free's frames are where it was freed (often autograd's threads,
            # with none): it counts at the site that allocated the address.
            owner = {}
            for e in traces[device] or ():
                try:
                    action = e.get("action")
                    if action not in ("alloc", "free_completed"):
                        continue
                    if int(e.get("time_us", 0) or 0) < since_us:
                        continue
                    size = int(e["size"])
                    addr = e.get("addr")
                    if action == "alloc":
                        s = self._site(e.get("frames") or (), kinds)
                        owner[addr] = s
                    else:
                        s = owner.pop(addr, None)
                except (KeyError, TypeError, ValueError, AttributeError):
                    self.bad += 1
                    continue
                if action == "alloc":
                    if s is None:
                        self.untracked[2] += size
                    else:
                        s.alloc_bytes += size
                        s.allocs += 1
                elif s is None:
                    self.untracked[3] += size
                else:
                    s.freed_bytes += size
                    s.frees += 1

    def message(self, head: Mapping[str, Any], limit: int = MAX_MESSAGE) -> str:
        """One JSON line: head's fields, then the sites by live bytes (then
        bytes allocated) until the line would pass limit; the rest as other."""
        order = sorted(self.sites.values(), key=lambda s: (-s.live_bytes, -s.alloc_bytes, s.file, s.line))
        d = dict(head)
        d["untracked"] = {"live_bytes": self.untracked[0], "live_blocks": self.untracked[1]}
        if self.untracked[2] or self.untracked[3]:
            d["untracked"].update(alloc_bytes=self.untracked[2], freed_bytes=self.untracked[3])
        d["traced"] = self.traced
        if self.bad:
            d["bad"] = self.bad
        base = json.dumps(d, separators=(",", ":"))
        room = limit - len(base) - 200  # "sites", "other" and the newline
        parts, other = [], [0, 0, 0]
        for s in order:
            j = json.dumps(s.json(), separators=(",", ":"))
            if len(j) + 1 <= room:
                parts.append(j)
                room -= len(j) + 1
            else:
                other[0] += 1
                other[1] += s.live_bytes
                other[2] += s.live_blocks
        tail = ',"sites":[' + ",".join(parts) + "]"
        if other[0]:
            tail += ',"other":{"sites":%d,"live_bytes":%d,"live_blocks":%d}' % tuple(other)
        return base[:-1] + tail + "}\n"
