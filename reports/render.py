"""Build the report context from OUT (findings.json, manifest.json, tables) and render it with jinja2.

`build_context(out) -> ReportContext` gathers; `render(ctx) -> str` renders `templates/report.html`
through one strict, autoescaping environment. No HTML is built in Python: this module computes values
(and `reports.charts` pixel coordinates); the templates write every tag.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from forensics import __version__
from forensics.findings import read_findings
from forensics.outputs import read_analysis_tables, require_ingested, write_text
from forensics.schema import WEIGHT, with_weight
from reports import charts

SERIOUS = ("critical", "high", "medium")
MAX_FILES_SHOWN = 2000
MAX_TEMPLATES = 30
MAX_CONTEXT_EVENTS = 14
LIMITS = {"minor_rows": 200, "minor_detailed": 30}
MAX_TELEMETRY = 4  # suspects whose telemetry is drawn (the first, i.e. best-ranked, ones)
CONTEXT_WINDOW = timedelta(minutes=10)
NOISE_KINDS = ("nccl_info",)

# Ticket identity: (label, inventory attribute(s) of the GPU, first found wins).
GPU_FIELDS = (
    ("UUID", ("uuid",)),
    ("board serial", ("serial", "board_serial")),
    ("product name", ("name", "product_name")),
    ("board part number", ("board_part_number",)),
    ("VBIOS", ("vbios", "vbios_version")),
    ("GSP firmware", ("gsp_firmware",)),
    ("InfoROM image", ("inforom_image",)),
    ("memory", ("memory_total",)),
)
NODE_FIELDS = (
    ("driver", ("driver_version", "driver")),
    ("CUDA", ("cuda_version", "cuda")),
    ("kernel", ("kernel", "kernel_version")),
    ("NCCL", ("nccl_version",)),
    ("DCGM", ("dcgm_version",)),
    ("Fabric Manager", ("fabricmanager_version", "fabric_manager_version")),
)
SAMPLE_STATE = (
    ("ECC corrected (volatile / aggregate)", ("ecc_corrected_volatile", "ecc_corrected_aggregate")),
    ("ECC uncorrected (volatile / aggregate)", ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate")),
    ("retired pages (SBE / DBE)", ("retired_pages_sbe", "retired_pages_dbe")),
    ("retired pages pending", ("retired_pages_pending",)),
    ("remapped rows (correctable / uncorrectable)", ("remapped_rows_correctable", "remapped_rows_uncorrectable")),
    ("row remap pending", ("remap_pending",)),
    ("row remap FAILURE", ("remap_failure",)),
)
THROTTLE_PREFIX = "throttle_"


@dataclass(frozen=True)
class Suspect:
    """One suspect node/GPU with everything a vendor ticket needs."""

    node: str
    gpu_index: int | None
    gpu_bus_id: str | None
    identity: dict[str, str]
    """Labelled identity lines in ticket order: host, GPU index, bus id, UUID, serial, ..., driver, CUDA, NIC fw."""
    state: dict[str, str]
    """Labelled health state from the latest telemetry sample: ECC, retired pages, row remap, PCIe, throttle."""
    xids: list[dict[str, Any]]
    """Every XID/SXid of this GPU (or node-wide SXid) with UTC time and the verbatim line."""
    events: list[dict[str, Any]]
    """Other hardware events of this GPU/node (PCIe, NVLink, ECC, thermal, NIC)."""
    dcgm: list[dict[str, Any]]
    """DCGM diagnostic/health results found in the bundle for the node (events with source 'dcgm')."""
    files: list[dict[str, Any]]
    """The bundle files that belong to the node, with sha256."""
    finding_ids: list[str]
    dcgm_files: list[str] = field(default_factory=list)
    """The node's DCGM outputs (format 'dcgm*'), named even when they report no failure."""
    telemetry: dict[str, Any] | None = None
    """Per-GPU telemetry of the suspect against the fleet (charts.telemetry)."""

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
    verdict: dict[str, Any]
    findings: list[dict[str, Any]]
    suspects: list[Suspect]
    coverage: dict[str, Any]
    files: list[dict[str, Any]]
    files_total: int
    unrecognized: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    ts_quality: dict[str, list[tuple[str, int]]]
    notes: list[str]
    step_chart: dict[str, Any] | None = None
    heatmap: dict[str, Any] | None = None
    timeline: dict[str, Any] | None = None
    limits: dict[str, int] = field(default_factory=lambda: dict(LIMITS))
    """How much of a long list the page shows (the rest stays in findings.json / manifest.json)."""
    nodes: tuple[str, ...] = ()
    """Every node named anywhere in the tables (redaction replaces all of them, shown or not)."""


@cache
def _env(html: bool = True) -> Environment:
    """The one strict environment: autoescaping for HTML; plain text (tickets) only with html=False."""
    return Environment(
        loader=PackageLoader("reports", "templates"),
        extensions=["jinja2.ext.do"],
        autoescape=select_autoescape(default=True, default_for_string=True) if html else False,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _iso(ts: datetime | None) -> str:
    return ts.isoformat().replace("+00:00", "Z") if ts is not None else "(no time)"


def _parse_iso(s: str | None) -> datetime | None:
    if not s:
        return None
    try:
        d = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    return d if d.tzinfo else d.replace(tzinfo=UTC)


# ------------------------------------------------------------------------------------------- verdict


def estimate_impact(steps: pl.DataFrame, since: datetime | None, gpus: int) -> dict[str, float] | None:
    """Fleet median step time after `since` vs before, and the GPU-hours the extra time cost.

    Used only where findings.json carries no impact for the top finding; labelled as the report's estimate.
    """
    s = steps.filter(pl.col("ts").is_not_null() & pl.col("step_time_s").is_not_null() & pl.col("step").is_not_null())
    if since is None or s.height == 0:
        return None
    per = s.group_by("step").agg(t=pl.col("step_time_s").median(), ts=pl.col("ts").min())
    before = per.filter(pl.col("ts") < since).get_column("t")
    after = per.filter(pl.col("ts") >= since).get_column("t")
    if len(before) < 3 or len(after) < 1:
        return None
    base = float(before.median())  # type: ignore[arg-type]
    if base <= 0:
        return None
    slow = (float(after.median()) / base - 1) * 100  # type: ignore[arg-type]
    extra_s = float((after - base).clip(lower_bound=0).sum())
    return {"step_time_slowdown_pct": round(slow, 1), "lost_gpu_hours": round(extra_s * max(gpus, 1) / 3600, 1)}


def _verdict(doc: dict[str, Any], steps: pl.DataFrame) -> dict[str, Any]:
    """The paragraph a manager reads: what, where, since when, what it cost, what to do now."""
    job = doc["job"]
    size = f"{job.get('nodes') or 0} nodes / {job.get('gpus') or 0} GPUs"
    top = [f for f in doc["findings"] if f["severity"] in SERIOUS]
    failed = [e for e in doc["coverage"].get("analysis_errors") or [] if isinstance(e, dict)]
    incomplete = (
        f" The analysis is incomplete: {len(failed)} step(s) failed "
        f"({', '.join(str(e.get('step')) for e in failed)}), and what they look for is not in this report."
        if failed
        else ""
    )
    if not top:
        if failed:
            return {
                "ok": False,
                "headline": "No fault found by the analysis steps that ran: the analysis is incomplete.",
                "text": f"Nothing above 'low' severity was detected in this bundle ({size}).{incomplete}",
                "cost": "unknown",
                "action": "Do not read this as a healthy job: see 'Analysis steps that failed' under Coverage.",
                "estimated": False,
            }
        return {
            "ok": True,
            "headline": "No fault found.",
            "text": f"Nothing above 'low' severity was detected in this bundle ({size}). "
            "See Coverage below for what was read and what was not understood.",
            "cost": "",
            "action": "",
            "estimated": False,
        }
    f = top[0]
    where = f["node"] or "the whole fleet"
    if f.get("gpu_index") is not None:
        where += f", GPU {f['gpu_index']}"
    ids = [x for x in (f.get("gpu_bus_id"), f.get("gpu_serial") and f"serial {f['gpu_serial']}") if x]
    if ids:
        where += f" ({', '.join(ids)})"
    imp = {k: v for k, v in (f.get("impact") or {}).items() if v is not None}
    estimated = False
    if not imp:
        est = estimate_impact(steps, _parse_iso(f.get("first_seen")), int(job.get("gpus") or 0))
        if est:
            imp, estimated = est, True
    cost = []
    if imp.get("step_time_slowdown_pct") is not None:
        cost.append(f"steps {imp['step_time_slowdown_pct']:.1f} % slower")
    if imp.get("lost_gpu_hours") is not None:
        cost.append(f"about {imp['lost_gpu_hours']:.1f} GPU-hours lost")
    since = f" since {f['first_seen']}" if f.get("first_seen") else ""
    others = len(top) - 1
    text = (
        f"On {where}{since}. {f['summary']} ({f['severity']}, confidence {f['confidence']:.0%}, "
        f"{f['category'].replace('_', ' ')}.)"
    )
    if f.get("consequences"):
        text += f" It explains: {'; '.join(f['consequences'][:3])}."
    if others:
        text += f" {others} other finding(s) of medium or higher severity follow."
    text += incomplete
    return {
        "ok": False,
        "headline": f"Most likely root cause: {f['title']}",
        "text": text,
        "cost": (", ".join(cost) + (" (estimated from the step times before and after)" if estimated else ""))
        if cost
        else "not measured (no step times in the bundle)",
        "action": f.get("recommended_action") or "",
        "estimated": estimated,
        "size": size,
    }


# ------------------------------------------------------------------------------------------ suspects


def _gpu_filter(node: str, gpu: int | None, bus: str | None) -> pl.Expr:
    cond = pl.col("node") == node
    sel = pl.lit(False)
    if gpu is not None:
        sel = sel | (pl.col("gpu_index") == gpu)
    if bus is not None:
        sel = sel | (pl.col("gpu_bus_id") == bus)
    return cond & sel


def _first(d: dict[str, str], keys: tuple[str, ...]) -> str | None:
    for k in keys:
        v = d.get(k)
        if v not in (None, "", "N/A", "None"):
            return v
    return None


def _event_row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "ts": _iso(r["ts"]),
        "kind": r["kind"],
        "code": r["code"] or "",
        "source": r["source"],
        "file": r["file"],
        "line": r["line"],
        "message": r["message"],
    }


TICKET_FIRST = 40
TICKET_LAST = 10
"""Events a ticket lists of one kind: the first and the last (a flood of thousands of Xid lines would bury the
ticket; each distinct code's first line is listed as well, and every line stays in OUT/tables/events)."""


def _ticket_rows(ev: pl.DataFrame, what: str) -> list[dict[str, Any]]:
    """The rows of `ev` (in time order) a ticket lists: all, or the first `TICKET_FIRST`, each distinct
    (kind, code)'s first, a row saying how many are left out, and the last `TICKET_LAST`.

    Positions count the rows a row of thinned events stands for (`WEIGHT`): the rows left out of a flood
    before the analysis read it are counted with those the ticket leaves out."""
    ev = with_weight(ev)
    if ev.height <= TICKET_FIRST + TICKET_LAST and ev.get_column(WEIGHT).sum() == ev.height:
        return [_event_row(r) for r in ev.iter_rows(named=True)]
    at = pl.col("_i")
    total = ev.get_column(WEIGHT).sum()
    rows = ev.with_columns(_i=pl.col(WEIGHT).cum_sum() - pl.col(WEIGHT)).filter(
        (at < TICKET_FIRST) | (at >= total - TICKET_LAST) | (at == at.min().over("kind", "code"))
    )
    out: list[dict[str, Any]] = []
    last = -1

    def left_out(gap: int) -> None:
        out.append(
            {"ts": "", "kind": "…", "code": "", "source": "", "file": "", "line": "",
             "message": f"{gap} more {what} event(s) here, left out of the ticket (all are in "
             "OUT/tables/events and the report's timeline)"}
        )

    for r in rows.iter_rows(named=True):
        if r["_i"] > last + 1:
            left_out(r["_i"] - last - 1)
        out.append(_event_row(r))
        last = r["_i"]
    if total > last + 1:  # (a thinned row last: the rows it stands for)
        left_out(total - last - 1)
    return out


def _below(cur: Any, mx: Any) -> bool:
    """True when both are integers and cur < mx (inventory values may be 'N/A')."""
    try:
        return cur is not None and mx is not None and int(cur) < int(mx)
    except (TypeError, ValueError):
        return False


def _state(sample: dict[str, Any] | None, inv: dict[str, str], gpu_known: bool = True) -> dict[str, str]:
    out: dict[str, str] = {}
    if sample is None:
        if not gpu_known:
            return {"telemetry": "node-level finding: no single GPU identified"}
        return {"telemetry": "no nvidia-smi sample of this GPU in the bundle"}
    out["latest sample"] = (
        f"{_iso(sample['ts'])} (latest value of each field over {sample.get('_n', 1)} sample(s) from "
        f"{sample.get('_sources') or sample['source']})"
    )
    for label, cols in SAMPLE_STATE:
        vals = [sample.get(c) for c in cols]
        if all(v is None for v in vals):
            continue
        out[label] = " / ".join("n/a" if v is None else ("yes" if v is True else "no" if v is False else str(v)) for v in vals)
    if sample.get("pcie_gen") is not None or sample.get("pcie_width") is not None:
        gmax = sample.get("pcie_gen_max") or inv.get("pcie_gen_max")
        wmax = sample.get("pcie_width_max") or (inv.get("pcie_width_max") or "").rstrip("x") or None
        cur = f"Gen{sample.get('pcie_gen') or '?'} x{sample.get('pcie_width') or '?'}"
        mx = f"Gen{gmax or '?'} x{wmax or '?'}"
        idle = bool(sample.get("throttle_gpu_idle")) or (
            sample.get("utilization_pct") is not None and sample["utilization_pct"] < 5
        )
        note = ""
        if _below(sample.get("pcie_width"), wmax) or (_below(sample.get("pcie_gen"), gmax) and not idle):
            note = " — DEGRADED"
        elif _below(sample.get("pcie_gen"), gmax):
            note = " (GPU idle: the link slows down at idle, normal)"
        out["PCIe link (current / max)"] = f"{cur} / {mx}{note}"
    extra = {}
    if sample.get("extra"):
        try:
            extra = json.loads(sample["extra"])
        except ValueError:
            extra = {}
    for k in ("pcie_replays", "pcie_replay_rollovers"):
        if k in extra:
            out[k.replace("_", " ")] = str(extra[k])
    nvl = {k: v for k, v in extra.items() if "nvlink" in k.lower()}
    if nvl:
        out["NVLink counters"] = ", ".join(f"{k}={v}" for k, v in sorted(nvl.items()))
    active = [c[len(THROTTLE_PREFIX) :].replace("_", " ") for c, v in sample.items() if c.startswith(THROTTLE_PREFIX) and v]
    known = any(v is not None for c, v in sample.items() if c.startswith(THROTTLE_PREFIX))
    if known:
        out["throttle reasons active"] = ", ".join(active) if active else "none"
    for c, label in (("sm_clock_mhz", "SM clock (MHz)"), ("power_w", "power (W)"), ("temperature_c", "temperature (°C)")):
        if sample.get(c) is not None:
            out[label] = f"{round(sample[c], 1):g}"
    return out


def _grouped_notes(notes: list[str], mfiles: list[dict[str, Any]]) -> list[str]:
    """The manifest's notes with one line for a message noted of several files (`PATH: message`, PATH a
    file of the manifest): `N files: message (the first three paths, …)`, where the first of them was. A
    bundle of a thousand nodes notes the same thing of a thousand files (a rank's timer log each), which
    would fill the list and push the others out."""
    paths = {str(f.get("path")) for f in mfiles}
    by_message: dict[str, list[str]] = {}
    order: list[tuple[bool, str]] = []
    for n in notes:
        path, sep, message = n.partition(": ")
        if sep and path in paths:
            if message not in by_message:
                by_message[message] = []
                order.append((True, message))
            by_message[message].append(path)
        else:
            order.append((False, n))
    out = []
    for grouped, text in order:
        if not grouped:
            out.append(text)
            continue
        ps = by_message[text]
        if len(ps) == 1:
            out.append(f"{ps[0]}: {text}")
        else:
            more = ", …" if len(ps) > 3 else ""
            out.append(f"{len(ps)} files: {text} ({', '.join(ps[:3])}{more})")
    return out


def _suspects(doc: dict[str, Any], tables: dict[str, pl.DataFrame]) -> list[Suspect]:
    """One suspect per (node, GPU) of the medium-or-worse findings that name a node."""
    inv, events, files, samples = tables["inventory"], tables["events"], tables["files"], tables["gpu_samples"]
    seen: dict[tuple[str, int | None], dict[str, Any]] = {}
    for f in doc["findings"]:
        if not f.get("node") or f["severity"] not in SERIOUS:
            continue
        gpu, bus = f.get("gpu_index"), f.get("gpu_bus_id")
        if gpu is None and bus is not None:  # resolve the index from the bus id
            idx = inv.filter(_gpu_filter(f["node"], None, bus)).get_column("gpu_index").drop_nulls()
            if len(idx) == 0:
                idx = samples.filter(_gpu_filter(f["node"], None, bus)).get_column("gpu_index").drop_nulls()
            gpu = int(idx[0]) if len(idx) else None
        s = seen.setdefault((f["node"], gpu), {"ids": [], "bus": bus, "serial": None, "uuid": None})
        s["ids"].append(f["id"])
        s["bus"] = s["bus"] or bus
        s["serial"] = s["serial"] or f.get("gpu_serial")
        s["uuid"] = s["uuid"] or f.get("gpu_uuid")
    out = []
    for (node, gpu), info in seen.items():
        bus = info["bus"]
        node_inv = inv.filter(pl.col("node") == node)
        gpu_inv = (
            node_inv.filter((pl.col("component") == "gpu") & _gpu_filter(node, gpu, bus))
            if gpu is not None or bus is not None
            else node_inv.head(0)
        )
        g = {a: v for a, v in gpu_inv.select("attribute", "value").iter_rows() if a}
        if bus is None:
            b = gpu_inv.get_column("gpu_bus_id").drop_nulls()
            bus = b[0] if len(b) else None
        gs = (
            samples.filter(_gpu_filter(node, gpu, bus)).sort("ts", "file", "line", nulls_last=False)
            if gpu is not None or bus is not None
            else samples.head(0)
        )
        # the latest known value of each field: a CSV query may lack what the last `nvidia-smi -q` had
        latest = gs.select(pl.all().drop_nulls().last()).row(0, named=True) if gs.height else None
        if latest is not None:
            latest["_sources"] = ", ".join(sorted(set(gs.get_column("source").drop_nulls().to_list())))
            latest["_n"] = gs.height
        if bus is None and latest is not None:
            bus = latest["gpu_bus_id"]
        ident: dict[str, str] = {"host": node}
        if gpu is not None:
            ident["GPU index"] = str(gpu)
        ident["PCI bus id"] = bus or "unknown"
        for label, keys in GPU_FIELDS:
            v = _first(g, keys)
            if label == "UUID":
                v = v or info["uuid"] or (latest or {}).get("gpu_uuid")
            if label == "board serial":
                v = v or info["serial"]
            if v is not None:
                ident[label] = v
        nodeattrs = node_inv.filter(pl.col("component").is_in(["node", "software"]))
        n = {a: v for a, v in nodeattrs.select("attribute", "value").iter_rows()}
        for label, keys in NODE_FIELDS:
            v = _first(n, keys)
            if v is not None:
                ident[label] = v
        shown = {k for _, keys in NODE_FIELDS for k in keys}
        for a, v in sorted(n.items()):
            if a not in shown and v:
                ident[a.replace("_", " ")] = v
        nic = node_inv.filter(
            (pl.col("component") == "nic")
            & (pl.col("attribute").str.contains("(?i)fw|firmware|psid|board_id|part"))
        ).unique(subset=["device", "attribute"], keep="first").sort("device", "attribute", nulls_last=True)
        for dev, a, v in nic.select("device", "attribute", "value").iter_rows():
            ident[f"NIC {dev or ''} {a.replace('_', ' ')}".replace("  ", " ")] = v
        ev = events.filter(pl.col("node") == node)
        if gpu is not None or bus is not None:
            ev = ev.filter(_gpu_filter(node, gpu, bus) | (pl.col("gpu_index").is_null() & pl.col("gpu_bus_id").is_null()))
        ev = ev.sort("ts", "file", "line", nulls_last=True)
        is_xid = pl.col("kind").is_in(["xid", "sxid"])
        is_dcgm = pl.col("source") == "dcgm"
        xids = _ticket_rows(ev.filter(is_xid), "XID/SXid")
        dcgm = [_event_row(r) for r in events.filter((pl.col("node") == node) & is_dcgm).sort("ts", "line", nulls_last=True).head(200).iter_rows(named=True)]
        other = ev.filter(
            ~is_xid & ~is_dcgm & ~pl.col("kind").is_in(list(charts.CONSEQUENCE_KINDS) + list(NOISE_KINDS))
        )
        other_rows = _ticket_rows(other, "hardware")
        fl = [
            {"path": r["path"], "sha256": r["sha256"] or "", "bytes": r["bytes"], "status": r["status"]}
            for r in files.filter(pl.col("node") == node).sort("path").iter_rows(named=True)
        ]
        state = _state(latest, g, gpu is not None or bus is not None)
        for label, cond in (
            ("NVLink errors", pl.col("kind").str.contains("(?i)nvlink") | ((pl.col("kind") == "xid") & (pl.col("code") == "74"))
             | (pl.col("kind") == "sxid")),
            ("PCIe AER / link events", pl.col("kind").str.starts_with("pcie")),
        ):
            hits = ev.filter(cond)
            if hits.height:
                kinds = ", ".join(sorted({f"{k} {c}".strip() if k == "xid" else k for k, c in hits.select("kind", pl.col("code").fill_null("")).iter_rows()}))
                state[label] = f"{hits.height} event(s) ({kinds}), first {_iso(hits.get_column('ts').min())}"  # type: ignore[arg-type]
            else:
                state[label] = "none in the bundle"
        out.append(
            Suspect(
                node=node,
                gpu_index=gpu,
                gpu_bus_id=bus,
                identity=ident,
                state=state,
                xids=xids,
                events=other_rows,
                dcgm=dcgm,
                files=fl,
                dcgm_files=[
                    f"{r['path']} ({r['status']})"
                    for r in files.filter((pl.col("node") == node) & pl.col("format").str.starts_with("dcgm"))
                    .sort("path")
                    .iter_rows(named=True)
                ],
                finding_ids=info["ids"],
                telemetry=charts.telemetry(samples, node, gpu) if gpu is not None and len(out) < MAX_TELEMETRY else None,
            )
        )
    return out


# ------------------------------------------------------------------------------------------ findings


FINDING_DEFAULTS: dict[str, Any] = {
    "rank": 0, "severity": "info", "confidence": 0.0, "category": "software", "node": None, "gpu_index": None,
    "gpu_bus_id": None, "gpu_serial": None, "gpu_uuid": None, "title": "(untitled)", "summary": "",
    "first_seen": None, "last_seen": None, "impact": {}, "evidence": [], "consequences": [],
    "recommended_action": "", "alternatives": [],
}
"""Keys the template reads; a findings.json from an older analysis may lack some."""
def _norm_finding(f: dict[str, Any]) -> dict[str, Any]:
    """Defaults for missing keys, and no None where the page needs a value (a hand-edited findings.json)."""
    f = {**FINDING_DEFAULTS, **f}
    for k in ("severity", "category", "title", "summary", "recommended_action"):
        if f[k] is None:
            f[k] = FINDING_DEFAULTS[k]
    try:
        f["confidence"] = float(f["confidence"] or 0.0)
    except (TypeError, ValueError):
        f["confidence"] = 0.0
    return f


JOB_DEFAULTS: dict[str, Any] = {"nodes": 0, "gpus": 0, "start": None, "end": None, "step_time_baseline_s": None}
COVERAGE_DEFAULTS: dict[str, Any] = {
    "files": 0,
    "parsed_lines": 0,
    "unrecognized_lines": 0,
    "skipped_files": 0,
    "error_files": 0,
    "by_format": {},
    "analysis_errors": [],
}


def _with_context(findings: list[dict[str, Any]], events: pl.DataFrame) -> list[dict[str, Any]]:
    """Add to each finding `context`: the events around its first evidence line (same node, ±10 min)."""
    out = []
    n_minor = 0
    ev = events.filter(pl.col("ts").is_not_null() & ~pl.col("kind").is_in(list(NOISE_KINDS)))
    for f in findings:
        f = {**FINDING_DEFAULTS, **f}
        f["impact"] = {"step_time_slowdown_pct": None, "lost_gpu_hours": None, **(f.get("impact") or {})}
        for k in ("consequences", "alternatives"):
            f[k] = [str(x) for x in f.get(k) or []]
        f["evidence"] = [
            {"source": "", "file": None, "line": None, "ts": None, "text": "", **e} for e in f.get("evidence") or []
        ]
        anchor = next((_parse_iso(e.get("ts")) for e in f["evidence"] if e.get("ts")), None) or _parse_iso(
            f.get("first_seen")
        )
        ctx: list[dict[str, Any]] = []
        minor = f["severity"] not in SERIOUS
        if minor:
            n_minor += 1
        if anchor is not None and ev.height and (not minor or n_minor <= LIMITS["minor_detailed"]):
            near = ev.filter((pl.col("ts") >= anchor - CONTEXT_WINDOW) & (pl.col("ts") <= anchor + CONTEXT_WINDOW))
            if f.get("node"):
                near = near.filter(pl.col("node") == f["node"])
            ev_keys = {(e.get("file"), e.get("line")) for e in f["evidence"]}
            near = near.sort("ts", "file", "line")
            # keep the evidence lines plus the nearest others, in time order
            near = near.with_columns(
                dist=(pl.col("ts") - anchor).dt.total_microseconds().abs(),
            ).sort("dist").head(MAX_CONTEXT_EVENTS).sort("ts", "file", "line")
            for r in near.iter_rows(named=True):
                row = _event_row(r)
                row["node"] = r["node"]
                row["is_evidence"] = (r["file"], r["line"]) in ev_keys
                ctx.append(row)
        f["context"] = ctx
        f["context_window"] = f"±{int(CONTEXT_WINDOW.total_seconds() // 60)} min around {_iso(anchor)}" if anchor else ""
        out.append(f)
    return out


# ------------------------------------------------------------------------------------------ coverage

MASKS = (
    (r"(?:[A-Za-z]:)?(?:/[\w.@+~-]+){2,}/?", "<*>"),  # paths
    (r"\b[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b", "<*>"),  # PCI bus ids
    (r"\b(?:GPU|MIG)-[0-9A-Fa-f-]{8,}\b", "<*>"),  # GPU UUIDs
    (r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b", "<*>"),  # UUIDs
    (r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b", "<*>"),  # IPv4 (+port)
    (r"\b0x[0-9A-Fa-f]+\b", "<*>"),  # hex literals
    (r"\b[0-9A-Fa-f]{8,}\b", "<*>"),  # long hex
    (r"\d+(?:[.,]\d+)*", "<*>"),  # numbers, also inside names (node17, mlx5_0)
    (r"<\*>(?:[\s:.,/+-]*<\*>)+", "<*>"),  # runs of masks (times, dates)
)


def mask_templates(lines: pl.Series, hosts: list[str] | tuple[str, ...] = ()) -> pl.Series:
    """Mask variable tokens (host names, numbers, hex, IPs, bus ids, UUIDs, paths) so like lines group together."""
    e = pl.col("l").str.strip_chars()
    names = sorted({h for h in hosts if h and h != "unknown"}, key=len, reverse=True)
    if names:
        e = e.str.replace_all(r"\b(?:" + "|".join(re.escape(h) for h in names) + r")\b", "<*>")
    for pat, rep in MASKS:
        e = e.str.replace_all(pat, rep)
    return pl.DataFrame({"l": lines}).select(e.str.slice(0, 300)).to_series()


def _unrecognized(manifest_files: list[dict[str, Any]], hosts: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Unrecognised lines grouped by template; each file's count is spread over its examples' templates."""
    rows = []
    for f in manifest_files:
        ex = f.get("unrecognized_examples") or []
        n = f.get("unrecognized") or 0
        if not n or not ex:
            continue
        for line, text in ex:
            rows.append({"path": f["path"], "line": line, "text": str(text), "w": n / len(ex)})
    if not rows:
        return []
    df = pl.DataFrame(rows).with_columns(template=mask_templates(pl.Series([r["text"] for r in rows]), hosts))
    g = (
        df.group_by("template")
        .agg(
            n=pl.col("w").sum(),
            files=pl.col("path").n_unique(),
            path=pl.col("path").first(),
            line=pl.col("line").first(),
            example=pl.col("text").first(),
        )
        .sort("n", "template", descending=[True, False])
        .head(MAX_TEMPLATES)
    )
    return [
        {
            "template": r["template"],
            "count": max(1, round(r["n"])),
            "files": r["files"],
            "path": r["path"],
            "line": r["line"],
            "example": r["example"],
        }
        for r in g.iter_rows(named=True)
    ]


def _skipped(manifest_files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[str, list[str]] = {}
    for f in manifest_files:
        st = str(f.get("status") or "")
        if st.startswith(("skipped", "error")):
            by.setdefault(st, []).append(f["path"])
    return [{"reason": k, "count": len(v), "paths": sorted(v)[:20]} for k, v in sorted(by.items(), key=lambda kv: -len(kv[1]))]


def _ts_quality(tables: dict[str, pl.DataFrame]) -> dict[str, list[tuple[str, int]]]:
    out = {}
    for t in ("events", "steps", "gpu_samples"):
        df = tables[t]
        if df.height:
            n = pl.col(WEIGHT).sum() if WEIGHT in df.columns else pl.len()  # (events: the rows a thinned row stands for)
            c = df.group_by(pl.col("ts_quality").fill_null("(not set)")).agg(n=n).sort("n", descending=True)
            out[t] = [(q, int(n)) for q, n in c.iter_rows()]
    return out


# --------------------------------------------------------------------------------------------- build


def build_context(out: Path) -> ReportContext:
    """Gather findings, manifest and tables of OUT into the report's context."""
    manifest = require_ingested(out)
    doc = read_findings(out)
    doc["job"] = {**JOB_DEFAULTS, **(doc.get("job") or {})}
    doc["coverage"] = {**COVERAGE_DEFAULTS, **(doc.get("coverage") or {})}
    doc["coverage"]["by_format"] = {
        str(k): {"files": 0, "parsed_lines": 0, "unrecognized_lines": 0, **(v if isinstance(v, dict) else {})}
        for k, v in (doc["coverage"].get("by_format") or {}).items()
    }
    doc["findings"] = [_norm_finding(f) for f in doc.get("findings") or [] if isinstance(f, dict)]
    tables, thinned = read_analysis_tables(out)
    nodes = tuple(
        sorted(
            set().union(
                *(
                    set(tables[t].get_column("node").drop_nulls().unique().to_list())
                    for t in ("files", "events", "steps", "gpu_samples", "inventory", "comms")
                )
            )
            - {"unknown"}
        )
    )
    mfiles = manifest.get("files") or []
    files = [
        {k: f.get(k) for k in ("path", "node", "format", "lines", "parsed", "unrecognized", "status")}
        for f in mfiles[:MAX_FILES_SHOWN]
    ]
    findings = _with_context(doc["findings"], tables["events"])
    suspects = _suspects(doc, tables)
    top = next((f for f in findings if f["severity"] in SERIOUS), None)
    incident = (
        {"node": top.get("node"), "ts": _parse_iso(top.get("first_seen")), "label": f"{top['id']} first seen"}
        if top
        else None
    )
    return ReportContext(
        title=f"GPU forensics report — {Path(str(doc.get('bundle') or out)).name}",
        generated_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        tool_version=__version__,
        bundle=str(doc.get("bundle") or ""),
        job=doc["job"],
        verdict=_verdict(doc, tables["steps"]),
        findings=findings,
        suspects=suspects,
        coverage=doc["coverage"],
        files=files,
        files_total=len(mfiles),
        unrecognized=_unrecognized(mfiles, nodes),
        skipped=_skipped(mfiles),
        ts_quality=_ts_quality(tables),
        notes=[*thinned, *_grouped_notes([str(n) for n in manifest.get("notes", [])], mfiles)[:200]],
        step_chart=charts.step_chart(tables["steps"], tables["anomalies"], incident),
        heatmap=charts.heatmap(tables["steps"], tables["gpu_samples"], [s.node for s in suspects]),
        nodes=nodes,
        timeline=charts.timeline(tables["events"], [f for f in findings if f["severity"] in SERIOUS] or findings),
    )


def render(ctx: ReportContext) -> str:
    """Render the HTML report."""
    return _env().get_template("report.html").render(ctx=ctx)


def render_ticket(ctx: ReportContext, suspect: Suspect) -> str:
    """Render the plain-text ticket appendix of one suspect (no escaping: plain text, never served as HTML)."""
    return _env(html=False).get_template("ticket.txt").render(ctx=ctx, s=suspect)


def write_report(out: Path, redact: bool = False) -> Path:
    """Write OUT/report.html and OUT/ticket-<node>[-gpu<N>].txt; return the report's path."""
    ctx = build_context(out)
    if redact:
        from reports.redact import redact_context

        ctx = redact_context(ctx)
    target = out / "report.html"
    write_text(target, render(ctx))
    for old in out.glob("ticket-*.txt"):  # tickets of an earlier run whose suspect is gone
        old.unlink()
    for s in ctx.suspects:
        write_text(out / f"ticket-{s.slug}.txt", render_ticket(ctx, s))
    return target
