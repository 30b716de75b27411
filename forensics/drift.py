"""Configuration drift: a node whose driver, CUDA, VBIOS, NIC firmware or NCCL version differs from the fleet.

Method: for each attribute in DRIFT_ATTRIBUTES, the set of values each node reports (over its GPUs or
NICs); the fleet's majority value; nodes whose values differ from it are drifted. Only decided when at
least MIN_NODES nodes report the attribute and the majority holds ≥ MAJORITY of them (a fleet split in
half has no "normal" to drift from).
"""

from __future__ import annotations

import polars as pl

from forensics.findings import Category, Evidence, Severity, name_nodes
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


GROUP_MIN = 3
"""Nodes that differ from the fleet in the same way (the same values) from which they are one finding."""


def candidates(inventory: pl.DataFrame) -> list[Candidate]:
    """A config_drift candidate per drifted node, listing every attribute that differs; nodes that differ in
    the same way (the same attributes with the same values, `GROUP_MIN` or more: a rolling upgrade left
    half-done, an image of their own) are one candidate, in the order of their first node."""
    d = drift_table(inventory)
    if d.height == 0:
        return []
    per_node = [(node, g) for (node,), g in d.group_by("node", maintain_order=True)]
    alike: dict[tuple, list[tuple[str, pl.DataFrame]]] = {}
    for node, g in per_node:
        alike.setdefault(tuple(sorted(g.select("attribute", "value").iter_rows())), []).append((node, g))
    out = []
    for members in alike.values():
        if len(members) < GROUP_MIN:
            out += [(node, _candidate(node, g)) for node, g in members]
            continue
        members.sort(key=lambda m: m[0])
        nodes = [node for node, _ in members]
        first, g = members[0]
        c = _candidate(first, g)
        c.node = None
        c.title = f"{len(nodes)} nodes run a different {_what(g)} than the fleet"
        c.summary = (
            f"{len(nodes)} nodes ({name_nodes(nodes)}) differ from the rest of the fleet in the same way: "
            + "; ".join(_diffs(g))
            + "."
        )
        c.evidence = [_evidence(m)[0] for _, m in members[:8]]
        c.action = (
            "Align these nodes' driver, firmware and library versions with the fleet "
            "(or drain them until then)."
        )
        out.append((first, c))
    order = {node: i for i, (node, _) in enumerate(per_node)}
    return [c for _, c in sorted(out, key=lambda x: order[x[0]])]


def _candidate(node: str, g: pl.DataFrame) -> Candidate:
    """The candidate of one drifted node (`g`: its rows of `drift_table`)."""
    return Candidate(
        category=Category.CONFIG_DRIFT,
        severity=Severity.MEDIUM,
        node=node,
        gpu_index=None,
        gpu_bus_id=None,
        title=f"{node} runs a different {_what(g)} than the fleet",
        summary=f"{node} differs from the rest of the fleet: " + "; ".join(_diffs(g)) + ".",
        first_seen=None,
        last_seen=None,
        evidence=_evidence(g),
        action="Align the node's driver, firmware and library versions with the fleet (or drain it until then).",
        confidence=0.7,
        kinds={f"drift:{a}" for a in g["attribute"]},
    )


def _diffs(g: pl.DataFrame) -> list[str]:
    """How a drifted node differs (`g`: its rows of `drift_table`), an attribute a phrase."""
    return [
        f"{DRIFT_ATTRIBUTES[r['attribute']]} {r['value']} "
        f"(fleet: {r['majority']} on {r['majority_nodes']} of {r['nodes']} nodes)"
        for r in g.iter_rows(named=True)
    ]


def _what(g: pl.DataFrame) -> str:
    """What a drifted node's rows of `drift_table` (`g`) differ in: 'NVIDIA driver, NIC firmware'."""
    return ", ".join(sorted({DRIFT_ATTRIBUTES[a] for a in g["attribute"]}))


def _evidence(g: pl.DataFrame) -> list[Evidence]:
    """The inventory lines that show how a drifted node differs (`g`: its rows of `drift_table`)."""
    return [
        Evidence(
            source="inventory", file=r["file"], line=r["line"], ts=None, text=f"{r['attribute']}: {r['value']}"
        )
        for r in g.iter_rows(named=True)
    ]
