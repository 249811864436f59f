"""Which GPU a CUDA device is: memrec's device samples use NVML's index."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional


def _uuid_key(u: str) -> str:
    """A GPU UUID without its "GPU-" prefix and dashes, in lower case: the
    form NVML ("GPU-8a1b...") and torch ("8a1b...") agree on."""
    u = u.strip().lower()
    if u.startswith("gpu-"):
        u = u[4:]
    return u.replace("-", "")


def nvml_index(torch: Any, device: int, env: Optional[Mapping[str, str]] = None) -> int:
    """The NVML index of CUDA device ``device``. memrec record lists its GPUs
    in MEMREC_GPUS ("0=GPU-uuid,1=GPU-uuid"); the device's UUID finds it
    there. Without a UUID, CUDA_VISIBLE_DEVICES ("2,3" or UUID prefixes)
    tells; without that, CUDA and NVML number alike."""
    env = os.environ if env is None else env
    table = {}
    for part in env.get("MEMREC_GPUS", "").split(","):
        index, _, uuid = part.partition("=")
        if uuid and index.strip().isdigit():
            table[_uuid_key(uuid)] = int(index)
    try:
        uuid = _uuid_key(str(torch.cuda.get_device_properties(device).uuid))
        if uuid in table:
            return table[uuid]
    except Exception:
        pass
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if device < len(visible):
        v = visible[device]
        if v.isdigit():
            return int(v)
        key = _uuid_key(v)
        found = [i for u, i in table.items() if key and u.startswith(key)]
        if len(found) == 1:
            return found[0]
    return device
