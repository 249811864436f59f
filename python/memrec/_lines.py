"""The probe's JSON lines, one per allocator sample or mark, formatted
without a dict: storage/wire's tables name the fields
(TestProbeLinesFollowWireTables in python/wire_test.go holds them together).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

# The allocator's event counters the probe sends: (the line's field,
# torch.cuda.memory_stats()'s key). The rows of storage/wire's TorchFields
# with a Stat, in their order (TestProbeLinesFollowWireTables); a new one
# is a row there and an entry here.
COUNTERS = (
    ("alloc_retries", "num_alloc_retries"),
    ("ooms", "num_ooms"),
    ("device_allocs", "num_device_alloc"),
    ("device_frees", "num_device_free"),
)


def stats_line(t_ns: int, device: int, pid: int, rank: Optional[int], stats: Dict[str, Any],
               peak: Optional[int] = None, extra: str = "", largest_segment: int = 0) -> str:
    """Formats one allocator sample from torch's nested memory stats dict;
    extra is more fields (the budget's), each starting with a comma;
    largest_segment the largest segment the allocator was seen to hold
    (0: not looked at yet, left out)."""
    def cur(key: str) -> int:
        try:
            return int(stats[key]["all"]["current"])
        except (KeyError, TypeError):
            return 0

    if peak is None:
        try:
            peak = int(stats["allocated_bytes"]["all"]["peak"])
        except (KeyError, TypeError):
            peak = 0
    rank_part = ',"rank":%d' % rank if rank is not None and rank >= 0 else ""
    return (
        '{"type":"torch","t_ns":%d,"gpu":%d,"pid":%d%s,"allocated_bytes":%d,"reserved_bytes":%d,'
        '"active_bytes":%d,"inactive_split_bytes":%d,"peak_allocated_bytes":%d,"segments":%d%s%s%s}\n'
        % (t_ns, device, pid, rank_part, cur("allocated_bytes"), cur("reserved_bytes"), cur("active_bytes"),
           cur("inactive_split_bytes"), peak, cur("segment"),
           "".join(',"%s":%d' % (name, int(stats.get(key, 0) or 0)) for name, key in COUNTERS),
           ',"largest_segment_bytes":%d' % largest_segment if largest_segment > 0 else "", extra)
    )


def step_line(t_ns: int, step: Optional[int], rank: Optional[int], pid: Optional[int] = None) -> str:
    """The mark of one step, formatted without a dict. pid names the
    process, so its steps and its allocator samples are one rank's even
    where no rank is known."""
    tail = ""
    if step is not None:
        tail = ',"step":%d' % step
    if rank is not None:
        tail += ',"rank":%d' % rank
    if pid is not None:
        tail += ',"pid":%d' % pid
    return '{"type":"mark","t_ns":%d,"kind":"step"%s}\n' % (t_ns, tail)


def mark_line(t_ns: int, kind: str, fields: Dict[str, Any]) -> str:
    parts = ['{"type":"mark","t_ns":%d,"kind":%s' % (t_ns, json.dumps(kind))]
    for k, v in fields.items():
        if v is None:
            continue
        if isinstance(v, str):
            parts.append(',"%s":%s' % (k, json.dumps(v)))
        else:
            parts.append(',"%s":%d' % (k, int(v)))
    parts.append("}\n")
    return "".join(parts)
