"""Score findings.json against a simulator's truth.json: recall, precision, rank-1 accuracy.

Matching rule: an injected fault is *found* when a finding of severity medium or worse has its category
and node (null for a fleet-wide fault) and, where the fault names a GPU and the category is GPU-level,
the same GPU. A finding of medium or worse is *real* when it matches an injected fault (strict), or
points at a node where a fault was injected (lenient: a second symptom of a real problem). The rank-1
finding is *right* when it matches an injected fault. A healthy bundle passes when it yields no critical
or high finding. A fault `truth.json` marks `"observable": false` (it left no trace) is not counted as
missed; a bundle whose faults are all such is judged as a healthy one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SERIOUS = ("critical", "high", "medium")
GPU_LEVEL = {"gpu_hardware", "gpu_memory", "nvlink", "thermal_power", "pcie"}


@dataclass
class Score:
    """The score of one bundle."""

    faults: int = 0
    found: int = 0
    serious: int = 0
    real_strict: int = 0
    real_lenient: int = 0
    top1_right: bool | None = None
    healthy_ok: bool | None = None
    misses: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)


def _matches(f: dict[str, Any], fault: dict[str, Any]) -> bool:
    if f["category"] != fault["category"]:
        return False
    if (f.get("node") or None) != (fault.get("node") or None):
        return False
    if fault.get("gpu_index") is not None and fault["category"] in GPU_LEVEL and f.get("gpu_index") is not None:
        return int(f["gpu_index"]) == int(fault["gpu_index"])
    return True


def score(findings: dict[str, Any], truth: dict[str, Any]) -> Score:
    """Score one bundle's findings against its truth (see module docstring)."""
    faults = [f for f in truth.get("faults", []) if f.get("kind") != "none"]
    # (a fault that left no trace, e.g. a thermal one begun after the job was gone, is not expected to be
    # found; a finding that matches it is still real)
    seen = [f for f in faults if f.get("observable", True)]
    serious = [f for f in findings["findings"] if f["severity"] in SERIOUS]
    s = Score(faults=len(seen), serious=len(serious))
    for fault in seen:
        if any(_matches(f, fault) for f in serious):
            s.found += 1
        else:
            s.misses.append(f"{fault['kind']} on {fault.get('node')} gpu {fault.get('gpu_index')} ({fault['category']})")
    fault_nodes = {f.get("node") for f in faults}
    for f in serious:
        strict = any(_matches(f, fault) for fault in faults)
        s.real_strict += strict
        lenient = strict or (f.get("node") is not None and f.get("node") in fault_nodes)
        s.real_lenient += lenient
        if not lenient:
            s.false.append(f"[{f['severity']}] {f['title']}")
    if seen:
        top = findings["findings"][0] if findings["findings"] else None
        s.top1_right = bool(top and top["severity"] in SERIOUS and any(_matches(top, fault) for fault in faults))
    else:
        s.healthy_ok = not any(f["severity"] in ("critical", "high") for f in findings["findings"])
    return s
