"""Findings: typed records of root causes with their evidence, and findings.json (schema_version 1)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

from forensics.errors import OutputError
from forensics.outputs import write_json

FINDINGS_SCHEMA_VERSION = 1


class Severity(str, Enum):
    """How bad a finding is; `rank` orders them (critical first)."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)

    def at_least(self, other: Severity) -> bool:
        """True when this severity is `other` or worse."""
        return self.rank <= other.rank


SEVERITY_WEIGHT = {
    Severity.CRITICAL: 1.0,
    Severity.HIGH: 0.8,
    Severity.MEDIUM: 0.55,
    Severity.LOW: 0.3,
    Severity.INFO: 0.1,
}


class Category(str, Enum):
    """What kind of root cause (DESIGN.md)."""

    GPU_HARDWARE = "gpu_hardware"
    GPU_MEMORY = "gpu_memory"
    NVLINK = "nvlink"
    PCIE = "pcie"
    NETWORK = "network"
    THERMAL_POWER = "thermal_power"
    CONFIG_DRIFT = "config_drift"
    SOFTWARE = "software"
    STRAGGLER = "straggler"
    HANG = "hang"


@dataclass(frozen=True)
class Evidence:
    """One verbatim log line (or measurement) that supports a finding."""

    source: str
    file: str | None
    line: int | None
    ts: str | None
    text: str

    @staticmethod
    def from_event(row: dict[str, Any]) -> Evidence:
        """The evidence of one `events` row: its verbatim message, where it was read and when."""
        return Evidence(source=row["source"], file=row["file"], line=row["line"], ts=iso(row["ts"]), text=row["message"])


@dataclass(frozen=True)
class Impact:
    """What the root cause cost."""

    step_time_slowdown_pct: float | None = None
    lost_gpu_hours: float | None = None


@dataclass(frozen=True)
class Finding:
    """One root cause: where, what, when, what it cost, the proof and what to do."""

    id: str
    rank: int
    severity: Severity
    confidence: float
    category: Category
    node: str | None
    gpu_index: int | None
    gpu_bus_id: str | None
    gpu_serial: str | None
    gpu_uuid: str | None
    title: str
    summary: str
    first_seen: str | None
    last_seen: str | None
    impact: Impact = field(default_factory=Impact)
    evidence: tuple[Evidence, ...] = ()
    consequences: tuple[str, ...] = ()
    recommended_action: str = ""
    alternatives: tuple[str, ...] = ()
    """Other explanations considered and why they were ranked lower (shown in the report)."""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        d["category"] = self.category.value
        d["evidence"] = [asdict(e) for e in self.evidence]
        d["consequences"] = list(self.consequences)
        d["alternatives"] = list(self.alternatives)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Finding:
        return Finding(
            id=d["id"],
            rank=d["rank"],
            severity=Severity(d["severity"]),
            confidence=float(d["confidence"]),
            category=Category(d["category"]),
            node=d.get("node"),
            gpu_index=d.get("gpu_index"),
            gpu_bus_id=d.get("gpu_bus_id"),
            gpu_serial=d.get("gpu_serial"),
            gpu_uuid=d.get("gpu_uuid"),
            title=d["title"],
            summary=d["summary"],
            first_seen=d.get("first_seen"),
            last_seen=d.get("last_seen"),
            impact=Impact(**(d.get("impact") or {})),
            evidence=tuple(Evidence(**e) for e in d.get("evidence", [])),
            consequences=tuple(d.get("consequences", [])),
            recommended_action=d.get("recommended_action", ""),
            alternatives=tuple(d.get("alternatives", [])),
        )


def iso(ts: datetime | None) -> str | None:
    """ISO-8601 UTC text of a datetime, or None."""
    return ts.isoformat().replace("+00:00", "Z") if ts is not None else None


NAMED_NODES = 20
"""Nodes a finding on many nodes names in its summary (all are counted)."""


def name_nodes(nodes: list[str]) -> str:
    """'a, b, c' or, past `NAMED_NODES`, the first of them 'and N more'."""
    more = len(nodes) - NAMED_NODES
    return ", ".join(nodes[:NAMED_NODES]) + (f" and {more} more" if more > 0 else "")


def write_findings(out: Path, doc: dict[str, Any]) -> Path:
    """Write findings.json atomically."""
    target = out / "findings.json"
    write_json(target, doc)
    return target


def read_findings(out: Path) -> dict[str, Any]:
    """Read OUT/findings.json; raise OutputError when it is missing or not ours."""
    p = out / "findings.json"
    if not p.is_file():
        raise OutputError(f"'{out}' has no findings.json; run 'forensics analyze {out}' first")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OutputError(f"cannot read '{p}': {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != FINDINGS_SCHEMA_VERSION:
        raise OutputError(f"'{p}' is not a findings.json of schema version {FINDINGS_SCHEMA_VERSION}")
    return doc
