"""Analysis: read OUT's tables, find root-cause candidates, rank them, write findings.json and anomalies.

Each analysis is a function from tables to candidates (forensics/hardware.py, forensics/timing.py, ...);
this module only gathers, ranks (severity × confidence, cause before consequence) and serialises.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from forensics import __version__
from forensics.findings import (
    FINDINGS_SCHEMA_VERSION,
    SEVERITY_WEIGHT,
    Finding,
    Impact,
    iso,
    write_findings,
)
from forensics.hardware import Candidate, candidates_from_events
from forensics.outputs import read_tables, require_ingested, write_table
from forensics.schema import empty

CONSEQUENCE_KINDS = ("nccl_warn", "nccl_ib_error", "nccl_timeout", "watchdog_timeout", "nccl_error", "torch_error")


def job_summary(tables: dict[str, pl.DataFrame]) -> dict[str, Any]:
    """Nodes, GPUs, time span and step-time baseline of the job, from whatever tables have them."""
    files = tables["files"]
    nodes = sorted(
        set(files.get_column("node").drop_nulls().to_list())
        | set(tables["events"].get_column("node").drop_nulls().to_list())
        | set(tables["inventory"].get_column("node").drop_nulls().to_list())
        | set(tables["steps"].get_column("node").drop_nulls().to_list())
        - {"unknown"}
    )
    nodes = [n for n in nodes if n != "unknown"]
    inv = tables["inventory"]
    gpus = inv.filter(pl.col("component") == "gpu").select("node", "gpu_index").unique().drop_nulls().height
    if gpus == 0:
        gpus = tables["gpu_samples"].select("node", "gpu_index").unique().drop_nulls().height
    times = [
        tables[t].get_column("ts").drop_nulls() for t in ("events", "steps", "gpu_samples") if tables[t].height
    ]
    allts = pl.concat(times) if times else pl.Series([], dtype=pl.Datetime("us", "UTC"))
    steps = tables["steps"].get_column("step_time_s").drop_nulls()
    return {
        "nodes": len(nodes),
        "node_names": nodes,
        "gpus": gpus,
        "start": iso(allts.min()) if len(allts) else None,  # type: ignore[arg-type]
        "end": iso(allts.max()) if len(allts) else None,  # type: ignore[arg-type]
        "step_time_baseline_s": round(float(steps.median()), 4) if len(steps) else None,  # type: ignore[arg-type]
    }


def gpu_identity(inventory: pl.DataFrame, node: str | None, gpu_index: int | None, bus: str | None) -> dict:
    """Serial, UUID, bus id, name, VBIOS of one GPU from the inventory (matched by index or bus id)."""
    if node is None or inventory.height == 0:
        return {}
    inv = inventory.filter((pl.col("node") == node) & (pl.col("component") == "gpu"))
    cond = pl.lit(False)
    if gpu_index is not None:
        cond = cond | (pl.col("gpu_index") == gpu_index)
    if bus is not None:
        cond = cond | (pl.col("gpu_bus_id") == bus)
    rows = inv.filter(cond)
    out: dict[str, Any] = {}
    for attr, value in rows.select("attribute", "value").iter_rows():
        out.setdefault(attr, value)
    idx = rows.get_column("gpu_index").drop_nulls()
    if len(idx):
        out.setdefault("_index", int(idx[0]))
    b = rows.get_column("gpu_bus_id").drop_nulls()
    if len(b):
        out.setdefault("_bus", b[0])
    return out


def _consequences(c: Candidate, events: pl.DataFrame) -> list[str]:
    """Communication errors after the candidate's first sign, on other ranks/nodes: what it explains."""
    if c.first_seen is None or events.height == 0:
        return []
    after = events.filter(pl.col("kind").is_in(CONSEQUENCE_KINDS) & (pl.col("ts") >= c.first_seen))
    if after.height == 0:
        return []
    out = []
    for kind, rows in after.group_by("kind", maintain_order=True):
        out.append(
            f"{rows.height} {kind[0].replace('_', ' ')} event(s) on {rows.get_column('node').n_unique()} node(s) "
            f"after {iso(c.first_seen)}"
        )
    return out


def rank_candidates(cands: list[Candidate]) -> list[Candidate]:
    """Order by severity × confidence, then earliest first (a cause precedes its consequences)."""
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(
        cands,
        key=lambda c: (-SEVERITY_WEIGHT[c.severity] * c.confidence, c.first_seen or far, c.node or ""),
    )


def analyze(out: Path) -> dict[str, Any]:
    """Run every analysis over OUT's tables; write findings.json and the anomalies table; return the doc."""
    manifest = require_ingested(out)
    tables = read_tables(out)
    job = job_summary(tables)
    cands = candidates_from_events(tables["events"], job["node_names"])
    anomalies = empty("anomalies")
    ranked = rank_candidates(cands)
    findings = []
    for i, c in enumerate(ranked, start=1):
        ident = gpu_identity(tables["inventory"], c.node, c.gpu_index, c.gpu_bus_id)
        findings.append(
            Finding(
                id=f"F{i}",
                rank=i,
                severity=c.severity,
                confidence=round(c.confidence, 2),
                category=c.category,
                node=c.node,
                gpu_index=c.gpu_index if c.gpu_index is not None else ident.get("_index"),
                gpu_bus_id=c.gpu_bus_id or ident.get("_bus") or ident.get("bus_id"),
                gpu_serial=ident.get("serial"),
                gpu_uuid=ident.get("uuid"),
                title=c.title,
                summary=c.summary,
                first_seen=iso(c.first_seen),
                last_seen=iso(c.last_seen),
                impact=Impact(),
                evidence=tuple(c.evidence),
                consequences=tuple(c.consequences or _consequences(c, tables["events"])),
                recommended_action=c.action,
                alternatives=tuple(c.alternatives),
            ).to_json()
        )
    files = tables["files"]
    by_format = (
        files.filter(pl.col("format").is_not_null())
        .group_by("format")
        .agg(files=pl.len(), parsed_lines=pl.col("parsed").sum(), unrecognized_lines=pl.col("unrecognized").sum())
        .sort("format")
    )
    doc = {
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "bundle": manifest.get("bundle"),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "tool_version": __version__,
        "job": {k: v for k, v in job.items() if k != "node_names"},
        "findings": findings,
        "coverage": {
            "files": files.height,
            "parsed_lines": int(files.get_column("parsed").fill_null(0).sum()),
            "unrecognized_lines": int(files.get_column("unrecognized").fill_null(0).sum()),
            "skipped_files": int(files.get_column("status").str.starts_with("skipped").sum()),
            "error_files": int(files.get_column("status").str.starts_with("error").sum()),
            "by_format": {r["format"]: {k: v for k, v in r.items() if k != "format"} for r in by_format.iter_rows(named=True)},
        },
    }
    write_table(anomalies, "anomalies", out / "tables")
    write_findings(out, doc)
    return doc
