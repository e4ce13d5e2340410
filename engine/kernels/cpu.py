"""The CPU this process runs on, as the compiled kernels' block sizes need it: its model name and
its per-core data cache sizes, from the OS (``sysconf``, else Linux's sysfs), with the common
sizes when neither says (48 KiB L1d, 1 MiB L2)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

#: Per-core sizes assumed when the OS does not report them.
DEFAULT_L1D = 48 * 1024
DEFAULT_L2 = 1024 * 1024
_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class Host:
    """``model``: the CPU's name; ``l1d``, ``l2``: bytes of one core's L1 data and L2 cache."""

    model: str
    l1d: int
    l2: int


def _sysconf(name: str) -> int:
    try:
        return max(0, int(os.sysconf(name)))
    except (ValueError, OSError, AttributeError):
        return 0


def _sysfs_size(level: int) -> int:
    """Bytes of cpu0's data or unified cache of ``level`` from sysfs (0 when not readable)."""
    try:
        for index in sorted(_SYSFS.glob("index*")):
            if (int((index / "level").read_text()) == level
                    and (index / "type").read_text().strip() in ("Data", "Unified")):
                text = (index / "size").read_text().strip().upper()
                scale = {"K": 1024, "M": 1024**2}.get(text[-1:], 1)
                return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return 0


def model_name(cpuinfo: str) -> str:
    """The first processor's name in the text of ``/proc/cpuinfo``, with its x86 family and
    model numbers where given (virtual machines often name only the vendor's line, "AMD EPYC",
    whatever its generation: family 25 is Zen 3/4, 26 Zen 5); "" when it names none."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block ends
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name", "")
    if name and fields.get("cpu family", "").isdigit() and fields.get("model", "").isdigit():
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


def _model() -> str:
    try:
        name = model_name(Path("/proc/cpuinfo").read_text())
    except OSError:
        name = ""
    if name:
        return name
    import platform

    return platform.processor() or platform.machine() or "unknown CPU"


@functools.cache
def host() -> Host:
    """This machine's :class:`Host` (read once)."""
    l1d = _sysconf("SC_LEVEL1_DCACHE_SIZE") or _sysfs_size(1) or DEFAULT_L1D
    l2 = _sysconf("SC_LEVEL2_CACHE_SIZE") or _sysfs_size(2) or DEFAULT_L2
    return Host(_model(), l1d, l2)
