"""Build the report context from OUT (findings.json, manifest.json, tables) and render it with jinja2.

`build_context(out) -> ReportContext` gathers; `render(ctx) -> str` renders `templates/report.html`
through one strict, autoescaping environment. No HTML is built in Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from forensics import __version__
from forensics.findings import read_findings
from forensics.outputs import read_tables, require_ingested, write_text

TICKET_ATTRIBUTES = (
    "name",
    "serial",
    "uuid",
    "bus_id",
    "vbios",
    "board_part_number",
    "pcie_gen_max",
    "pcie_width_max",
    "ecc_mode",
    "power_limit",
)


@dataclass(frozen=True)
class Suspect:
    """One suspect node/GPU with everything a vendor ticket needs."""

    node: str
    gpu_index: int | None
    gpu_bus_id: str | None
    identity: dict[str, str]
    """GPU attributes from the inventory (name, serial, uuid, vbios, ...)."""
    node_info: dict[str, str]
    """Node attributes (driver, CUDA, kernel, NIC firmware, NCCL, ...)."""
    events: list[dict[str, Any]]
    """Hardware events of this GPU (or node) with UTC time and the verbatim line."""
    files: list[dict[str, Any]]
    """The bundle files that belong to the node, with sha256."""
    finding_ids: list[str]

    @property
    def slug(self) -> str:
        return f"{self.node}-gpu{self.gpu_index}" if self.gpu_index is not None else self.node


@dataclass(frozen=True)
class ReportContext:
    """Everything the template shows; each field is documented where it is built."""

    title: str
    generated_at: str
    tool_version: str
    bundle: str
    job: dict[str, Any]
    verdict: str
    findings: list[dict[str, Any]]
    suspects: list[Suspect]
    coverage: dict[str, Any]
    files: list[dict[str, Any]]
    unrecognized: list[dict[str, Any]]
    notes: list[str]
    css: str = field(default="")


def _env() -> Environment:
    return Environment(
        loader=PackageLoader("reports", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _verdict(doc: dict[str, Any]) -> str:
    top = [f for f in doc["findings"] if f["severity"] in ("critical", "high", "medium")]
    job = doc["job"]
    size = f"{job.get('nodes', 0)} nodes / {job.get('gpus', 0)} GPUs"
    if not top:
        return f"No fault found in this bundle ({size}). Nothing above 'info' was detected; see Coverage for what was read."
    f = top[0]
    where = f["node"] or "the whole fleet"
    if f.get("gpu_index") is not None:
        where += f" GPU {f['gpu_index']}"
    if f.get("gpu_serial"):
        where += f" (serial {f['gpu_serial']})"
    since = f" since {f['first_seen']}" if f.get("first_seen") else ""
    cost = []
    imp = f.get("impact") or {}
    if imp.get("step_time_slowdown_pct") is not None:
        cost.append(f"steps {imp['step_time_slowdown_pct']:.1f}% slower")
    if imp.get("lost_gpu_hours") is not None:
        cost.append(f"about {imp['lost_gpu_hours']:.1f} GPU-hours lost")
    cost_txt = f" It cost {', '.join(cost)}." if cost else ""
    more = f" {len(top) - 1} other finding(s) follow." if len(top) > 1 else ""
    return (
        f"Most likely root cause: {f['title']} — on {where}{since} ({f['severity']}, confidence "
        f"{f['confidence']:.0%}, {size}).{cost_txt} What to do now: {f['recommended_action']}{more}"
    )


def _suspects(doc: dict[str, Any], tables: dict[str, pl.DataFrame]) -> list[Suspect]:
    inv, events, files = tables["inventory"], tables["events"], tables["files"]
    seen: dict[tuple[str, int | None], list[str]] = {}
    for f in doc["findings"]:
        if f["node"] and f["severity"] in ("critical", "high", "medium"):
            seen.setdefault((f["node"], f.get("gpu_index")), []).append(f["id"])
    out = []
    for (node, gpu), ids in seen.items():
        node_inv = inv.filter(pl.col("node") == node)
        gpu_rows = node_inv.filter((pl.col("component") == "gpu") & (pl.col("gpu_index") == gpu)) if gpu is not None else node_inv.head(0)
        ident = {a: v for a, v in gpu_rows.select("attribute", "value").unique(subset="attribute", keep="first").iter_rows()}
        bus = ident.get("bus_id")
        nb = gpu_rows.get_column("gpu_bus_id").drop_nulls()
        gpu_bus = nb[0] if len(nb) else None
        node_info = {
            f"{c}:{d}:{a}" if d else (a if c in ("node", "software") else f"{c}:{a}"): v
            for c, d, a, v in node_inv.filter(pl.col("component") != "gpu")
            .select("component", "device", "attribute", "value")
            .unique(subset=["component", "device", "attribute"], keep="first")
            .sort("component", "device", "attribute", nulls_last=True)
            .iter_rows()
        }
        ev = events.filter(pl.col("node") == node)
        if gpu is not None:
            ev = ev.filter((pl.col("gpu_index") == gpu) | pl.col("gpu_index").is_null())
        ev = ev.filter(~pl.col("kind").is_in(["nccl_warn", "nccl_info"])).sort("ts", "file", "line", nulls_last=True)
        evs = [
            {
                "ts": r["ts"].isoformat().replace("+00:00", "Z") if r["ts"] else "(no time)",
                "kind": r["kind"],
                "code": r["code"] or "",
                "file": r["file"],
                "line": r["line"],
                "message": r["message"],
            }
            for r in ev.head(200).iter_rows(named=True)
        ]
        fl = [
            {"path": r["path"], "sha256": r["sha256"] or "", "bytes": r["bytes"], "status": r["status"]}
            for r in files.filter(pl.col("node") == node).sort("path").iter_rows(named=True)
        ]
        out.append(Suspect(node, gpu, bus or gpu_bus, ident, node_info, evs, fl, ids))
    return out


def build_context(out: Path) -> ReportContext:
    """Gather findings, manifest and tables of OUT into the report's context."""
    manifest = require_ingested(out)
    doc = read_findings(out)
    tables = read_tables(out)
    files = [
        {k: f.get(k) for k in ("path", "node", "format", "lines", "parsed", "unrecognized", "status")}
        for f in manifest["files"]
    ]
    unrec = [
        {"path": f["path"], "count": f.get("unrecognized") or 0, "examples": f.get("unrecognized_examples") or []}
        for f in manifest["files"]
        if (f.get("unrecognized") or 0) > 0
    ]
    unrec.sort(key=lambda u: -u["count"])
    css = (Path(__file__).parent / "templates" / "style.css").read_text(encoding="utf-8")
    return ReportContext(
        title=f"GPU forensics report — {Path(str(doc.get('bundle') or out)).name}",
        generated_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        tool_version=__version__,
        bundle=str(doc.get("bundle") or ""),
        job=doc["job"],
        verdict=_verdict(doc),
        findings=doc["findings"],
        suspects=_suspects(doc, tables),
        coverage=doc["coverage"],
        files=files,
        unrecognized=unrec[:50],
        notes=list(manifest.get("notes", []))[:200],
        css=css,
    )


def render(ctx: ReportContext) -> str:
    """Render the HTML report."""
    return _env().get_template("report.html").render(ctx=ctx)


def render_ticket(ctx: ReportContext, suspect: Suspect) -> str:
    """Render the plain-text ticket appendix of one suspect."""
    env = _env()
    env.autoescape = False  # plain text, never served as HTML
    return env.get_template("ticket.txt").render(ctx=ctx, s=suspect, attrs=TICKET_ATTRIBUTES)


def write_report(out: Path, redact: bool = False) -> Path:
    """Write OUT/report.html and OUT/ticket-<node>[-gpu<N>].txt; return the report's path."""
    ctx = build_context(out)
    if redact:
        from reports.redact import redact_context

        ctx = redact_context(ctx)
    target = out / "report.html"
    write_text(target, render(ctx))
    for s in ctx.suspects:
        write_text(out / f"ticket-{s.slug}.txt", render_ticket(ctx, s))
    return target
