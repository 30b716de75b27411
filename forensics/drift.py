"""Configuration drift: a node whose driver, CUDA, VBIOS, NIC firmware or NCCL version differs from the fleet.

Method: for each attribute in DRIFT_ATTRIBUTES, the set of values each node reports (over its GPUs or
NICs); the fleet's majority value; nodes whose values differ from it are drifted. Only decided when at
least MIN_NODES nodes report the attribute and the majority holds ≥ MAJORITY of them (a fleet split in
half has no "normal" to drift from).
"""

from __future__ import annotations

import polars as pl

from forensics.findings import Category, Evidence, Severity
from forensics.hardware import Candidate

DRIFT_ATTRIBUTES = {
    "driver_version": "NVIDIA driver",
    "cuda_version": "CUDA version",
    "vbios": "GPU VBIOS",
    "vbios_version": "GPU VBIOS",
    "fw_ver": "NIC firmware",
    "firmware_version": "NIC firmware",
    "nccl_version": "NCCL version",
    "kernel_version": "kernel",
}
MIN_NODES = 3
MAJORITY = 0.6


def drift_table(inventory: pl.DataFrame) -> pl.DataFrame:
    """Rows (attribute, node, value, majority, file, line) for every node that differs from the fleet."""
    inv = inventory.filter(pl.col("attribute").is_in(list(DRIFT_ATTRIBUTES)) & pl.col("value").is_not_null() & (pl.col("node") != "unknown"))
    if inv.height == 0:
        return pl.DataFrame()
    inv = inv.with_columns(value=pl.col("value").str.strip_chars())
    # one value per (node, attribute): the set of distinct values, joined
    per_node = inv.group_by("attribute", "node").agg(
        value=pl.col("value").unique().sort().str.join(" / "), file=pl.col("file").first(), line=pl.col("line").first()
    )
    rows = []
    for (attr,), g in per_node.group_by("attribute", maintain_order=True):
        if g.height < MIN_NODES:
            continue
        counts = g.group_by("value").len().sort("len", descending=True)
        top_value, top_n = counts.row(0)
        if top_n < MAJORITY * g.height:
            continue
        for r in g.filter(pl.col("value") != top_value).iter_rows(named=True):
            rows.append({**r, "attribute": attr, "majority": top_value, "majority_nodes": top_n, "nodes": g.height})
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def candidates(inventory: pl.DataFrame) -> list[Candidate]:
    """One config_drift candidate per drifted node, listing every attribute that differs."""
    d = drift_table(inventory)
    if d.height == 0:
        return []
    out = []
    for (node,), g in d.group_by("node", maintain_order=True):
        diffs = [
            f"{DRIFT_ATTRIBUTES[r['attribute']]} {r['value']} (fleet: {r['majority']} on {r['majority_nodes']} of {r['nodes']} nodes)"
            for r in g.iter_rows(named=True)
        ]
        out.append(
            Candidate(
                category=Category.CONFIG_DRIFT,
                severity=Severity.MEDIUM,
                node=node,
                gpu_index=None,
                gpu_bus_id=None,
                title=f"{node} runs a different {', '.join(sorted({DRIFT_ATTRIBUTES[a] for a in g['attribute']}))} than the fleet",
                summary=f"{node} differs from the rest of the fleet: " + "; ".join(diffs) + ".",
                first_seen=None,
                last_seen=None,
                evidence=[
                    Evidence(source="inventory", file=r["file"], line=r["line"], ts=None, text=f"{r['attribute']}: {r['value']}")
                    for r in g.iter_rows(named=True)
                ],
                action="Align the node's driver, firmware and library versions with the fleet (or drain it until then).",
                confidence=0.7,
                kinds={f"drift:{a}" for a in g["attribute"]},
            )
        )
    return out
