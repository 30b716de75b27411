"""Knowledge as data: the NVIDIA XID/SXid catalog (`xid.csv`, `sxid.csv`) and its loader."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class CatalogEntry:
    """One XID or SXid code as the catalog describes it."""

    kind: str
    """'xid' or 'sxid'."""
    code: int
    name: str
    meaning: str
    category: str
    """DESIGN.md finding category: gpu_hardware, gpu_memory, nvlink, pcie, software, ..."""
    severity: str
    """critical | high | medium | low | info, for a single occurrence."""
    blame: str
    """hardware | firmware | driver | application | consequence | mixed"""
    action: str
    """What a vendor expects to be done."""
    source: str
    """Where the facts come from (NVIDIA XID documentation section / URL)."""
    mnemonic: str = ""
    """NVIDIA's mnemonic for the code (e.g. ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS), when known."""


CATEGORIES = (
    "gpu_hardware",
    "gpu_memory",
    "nvlink",
    "pcie",
    "network",
    "thermal_power",
    "config_drift",
    "software",
    "straggler",
    "hang",
)
SEVERITIES = ("critical", "high", "medium", "low", "info")
BLAMES = ("hardware", "firmware", "driver", "application", "consequence", "mixed")


@cache
def _load(kind: str) -> dict[int, CatalogEntry]:
    text = resources.files(__name__).joinpath(f"{kind}.csv").read_text(encoding="utf-8")
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return {
        int(r["code"]): CatalogEntry(
            kind=kind,
            code=int(r["code"]),
            name=r["name"],
            meaning=r["meaning"],
            category=r["category"],
            severity=r["severity"],
            blame=r["blame"],
            action=r["action"],
            source=r["source"],
            mnemonic=r.get("mnemonic") or "",
        )
        for r in rows
    }


def find_entry(kind: str, code: int) -> CatalogEntry | None:
    """Return the catalog entry of an XID ('xid') or SXid ('sxid') code, or None when not catalogued."""
    if kind not in ("xid", "sxid"):
        return None
    return _load(kind).get(code)


def entries(kind: str) -> list[CatalogEntry]:
    """All entries of one catalog, by code."""
    return sorted(_load(kind).values(), key=lambda e: e.code)


def describe(kind: str, code: int) -> str | None:
    """Human-readable text of one catalog entry, for `forensics explain`; None when not catalogued."""
    e = find_entry(kind, code)
    if e is None:
        return None
    mnemonic = f" ({e.mnemonic})" if e.mnemonic else ""
    return (
        f"{e.kind.upper()} {e.code}: {e.name}{mnemonic}\n"
        f"  meaning:  {e.meaning}\n"
        f"  category: {e.category}   severity: {e.severity}   usually: {e.blame}\n"
        f"  action:   {e.action}\n"
        f"  source:   {e.source}"
    )
