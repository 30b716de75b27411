"""Analysis: read OUT's tables, find root-cause candidates, correlate them with the job's timeline, rank.

Each analysis is a function from tables to candidates or anomalies (hardware.py, telemetry.py,
network.py, drift.py, stragglers.py, timing.py, hangs.py); this module correlates and serialises:
1. The timeline (timing.py) says *that* and *when* the job slowed or hung, and what it cost.
2. Localisation (stragglers.py, telemetry outliers) says *which* node is slow.
3. Evidence candidates say *why*. A slowdown or hang is attributed to the candidate on the slow (or
   silent) node that started before it; the cost goes onto that candidate, and the NCCL/watchdog errors
   elsewhere become its consequences. A slowdown nobody explains stays a `straggler` finding (node
   known) or a fleet-wide slowdown (node unknown), with the measurements that show it.
4. Evidence that ended before the job began is history, not the cause: demoted to `info`.
5. Ranking: severity × confidence, then the earliest first (a cause precedes its consequences).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from forensics import __version__, clocks, drift, hangs, network, stragglers, telemetry, timing
from forensics.errors import CONTAINED
from forensics.findings import (
    FINDINGS_SCHEMA_VERSION,
    SEVERITY_WEIGHT,
    Category,
    Evidence,
    Finding,
    Impact,
    Severity,
    iso,
    name_nodes,
    write_findings,
)
from forensics.hardware import FLEET_SHARE, Candidate, candidates_from_events
from forensics.outputs import read_analysis_tables, require_ingested, write_table
from forensics.schema import WEIGHT, conform, empty, with_weight

CONSEQUENCE_KINDS = (
    "nccl_warn",
    "nccl_ib_error",
    "nccl_timeout",
    "nccl_error",
    "watchdog_timeout",
    "torch_error",
    "torch_exception",
    "elastic_failure",
    "nccl_async_error",
)
CAUSE_CATEGORIES = {
    Category.GPU_HARDWARE,
    Category.GPU_MEMORY,
    Category.NVLINK,
    Category.PCIE,
    Category.NETWORK,
    Category.THERMAL_POWER,
    Category.CONFIG_DRIFT,
}
HISTORY_MARGIN = timedelta(hours=1)
"""Evidence that ended more than this before the job's first step is history (info)."""
HANG_LOOKBACK = timedelta(hours=2)
"""A hang is attributed to a fatal event at most this long before the job stopped progressing."""


# ----------------------------------------------------------------------------- job


def job_summary(tables: dict[str, pl.DataFrame]) -> dict[str, Any]:
    """Nodes, GPUs, time span and step-time baseline of the job, from whatever tables have them."""
    names: set[str] = set()
    for t in ("files", "events", "inventory", "steps", "gpu_samples"):
        names |= set(tables[t].get_column("node").drop_nulls().unique().to_list())
    nodes = sorted(names - {"unknown"})
    inv = tables["inventory"]
    gpus = inv.filter(pl.col("component") == "gpu").select("node", "gpu_index").unique().drop_nulls().height
    gpus = max(gpus, tables["gpu_samples"].select("node", "gpu_index").unique().drop_nulls().height)
    ranks = tables["comms"].filter(pl.col("record") == "rank").get_column("nranks").max()
    if ranks is not None:
        gpus = max(gpus, int(ranks))  # type: ignore[arg-type]
    # The job's span: its steps when they carry times, else telemetry, else events (kernel logs reach
    # back to the boot, weeks before the job).
    allts = pl.Series([], dtype=pl.Datetime("us", "UTC"))
    for t in ("steps", "gpu_samples", "events"):
        ts = tables[t].get_column("ts").drop_nulls()
        if len(ts):
            allts = ts
            break
    return {
        "nodes": len(nodes),
        "node_names": nodes,
        "gpus": gpus,
        "start": iso(allts.min()) if len(allts) else None,  # type: ignore[arg-type]
        "end": iso(allts.max()) if len(allts) else None,  # type: ignore[arg-type]
    }


def gpu_identity(inventory: pl.DataFrame, node: str | None, gpu_index: int | None, bus: str | None) -> dict:
    """Serial, UUID, bus id, name, VBIOS of one GPU from the inventory (matched by index or bus id)."""
    if node is None or node == "unknown" or inventory.height == 0 or (gpu_index is None and bus is None):
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


def resolve_rank_nodes(df: pl.DataFrame, comms: pl.DataFrame) -> pl.DataFrame:
    """Give rows of an unknown node (a job-level log) the node of their rank, from NCCL's rank map.

    A straggler detector line names the slow rank; a `[rankN]:` prefixed line names its writer: either
    way NCCL's init lines say where that rank ran.
    """
    if df.height == 0 or "rank" not in df.columns:
        return df
    m = hangs.world_rank_nodes(comms)
    if m.height == 0:
        return df
    return (
        df.join(m.select(pl.col("global_rank").alias("rank"), "map_node"), on="rank", how="left")
        .with_columns(
            node=pl.when((pl.col("node") == "unknown") & pl.col("map_node").is_not_null()).then("map_node").otherwise("node")
        )
        .drop("map_node")
    )


# ----------------------------------------------------------------------------- candidates


def merge(cands: list[Candidate]) -> list[Candidate]:
    """One candidate per (node, GPU, category): evidence pooled, worst severity, corroboration raises confidence."""
    groups: dict[tuple, list[Candidate]] = {}
    # a node-wide thermal/power candidate (all its GPUs throttle: the chassis) absorbs the per-GPU ones
    node_wide = {(c.node, c.category) for c in cands if c.category == Category.THERMAL_POWER and c.gpu_index is None and c.gpu_bus_id is None}
    for c in cands:
        # network faults are the node's (a NIC's PCI address is no GPU); the rest are per GPU
        if c.category == Category.NETWORK or (c.node, c.category) in node_wide:
            gkey = None
        else:
            gkey = c.gpu_index if c.gpu_index is not None else c.gpu_bus_id
        groups.setdefault((c.node, gkey, c.category), []).append(c)
    out = []
    for (node, gkey, category), group in groups.items():
        group.sort(key=lambda c: (c.severity.rank, -c.confidence))
        main = group[0]
        wide = gkey is None and (node, category) in node_wide
        if len(group) == 1:
            out.append(main)
            continue
        ev = []
        seen = set()
        for c in group:
            for e in c.evidence:
                if (e.file, e.line, e.text) not in seen:
                    seen.add((e.file, e.line, e.text))
                    ev.append(e)
        firsts = [c.first_seen for c in group if c.first_seen]
        lasts = [c.last_seen for c in group if c.last_seen]
        others = [c.title for c in group[1:]]
        out.append(
            replace(
                main,
                evidence=ev[:12],
                first_seen=min(firsts) if firsts else None,
                last_seen=max(lasts) if lasts else None,
                confidence=min(0.98, main.confidence + 0.05 * (len(group) - 1)),
                summary=main.summary + " Corroborated by: " + "; ".join(others) + ".",
                kinds=set().union(*(c.kinds for c in group)),
                gpu_index=None if wide else (main.gpu_index if main.gpu_index is not None else next((c.gpu_index for c in group if c.gpu_index is not None), None)),
                gpu_bus_id=None if wide else (main.gpu_bus_id or next((c.gpu_bus_id for c in group if c.gpu_bus_id), None)),
                title=main.title if not wide else next((c.title for c in group if c.gpu_index is None), main.title),
            )
        )
    return out


def demote_history(cands: list[Candidate], job_start: datetime | None) -> list[Candidate]:
    """Evidence that ended well before the job began is history: severity info, reason given."""
    if job_start is None:
        return cands
    out = []
    for c in cands:
        if c.last_seen is not None and c.last_seen < job_start - HISTORY_MARGIN and c.severity != Severity.INFO:
            out.append(
                replace(
                    c,
                    severity=Severity.INFO,
                    summary=c.summary + f" It ended at {iso(c.last_seen)}, before this job began ({iso(job_start)}): history, not the cause.",
                    alternatives=[*c.alternatives, "Ranked as history: it predates the job."],
                )
            )
        else:
            out.append(c)
    return out


def _consequences_after(
    first: datetime | None, events: pl.DataFrame, exclude_node: str | None, until: datetime | None = None
) -> list[str]:
    """The consequence events (and XID 45 clean-ups) from `first` on, on nodes other than `exclude_node`; only
    those before `until` when given (where a hang's consequences belong to another finding)."""
    if first is None or events.height == 0:
        return []
    events = with_weight(events)
    if until is not None:
        events = events.filter(pl.col("ts") < until)
    after = events.filter(pl.col("kind").is_in(CONSEQUENCE_KINDS) & (pl.col("ts") >= first))
    if exclude_node:
        after = after.filter(pl.col("node") != exclude_node)
    out = []
    for (kind,), rows in after.group_by("kind", maintain_order=True):
        out.append(
            f"{rows[WEIGHT].sum()} {kind.replace('_', ' ')} event(s) on {rows['node'].n_unique()} other node(s) after {iso(first)}"
        )
    xid45 = events.filter((pl.col("kind") == "xid") & (pl.col("code") == "45") & (pl.col("ts") >= first))
    if xid45.height:
        out.append(f"{xid45[WEIGHT].sum()} XID 45 clean-up(s) on {xid45['node'].n_unique()} node(s) after it")
    return out


def _raise(c: Candidate, to: Severity) -> Severity:
    return to if to.rank < c.severity.rank else c.severity


def hang_culprits(events: pl.DataFrame, comms: pl.DataFrame) -> pl.DataFrame:
    """Culprit ranks of a hang from watchdog reports, Flight Recorder dumps and COLL counters (hangs.py)."""
    readings = (
        hangs.culprit_from_watchdog(events, comms=comms),
        hangs.culprit_from_flight_recorder(comms),
        hangs.culprit_from_coll(comms),
    )
    parts = [df.filter(pl.col("role") == "culprit") for df in readings if df.height]
    parts = [p for p in parts if p.height]
    return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()


def attribute_hang(
    cands: list[Candidate],
    tl: timing.Timeline,
    events: pl.DataFrame,
    gpus: int,
    nodes: list[str],
    comms: pl.DataFrame | None = None,
) -> tuple[list[Candidate], dict | None]:
    """Attribute a hang to the fatal event before it, else report the culprit ranks' node as a hang.

    Culprits: the ranks hangs.py finds behind or absent (watchdog sequence numbers, Flight Recorder,
    COLL opCounts); failing those, the nodes from which no watchdog report came (dead ranks log nothing).
    """
    wd = events.filter(pl.col("kind").is_in(["watchdog_timeout", "nccl_timeout"]))
    if tl.hang is None and wd.height == 0:
        return cands, None
    if tl.hang is not None:
        stop = tl.hang["last_ts"]
    else:
        stop = wd["ts"].min()
    # (the last timeout ended the processes: what came after it is no longer the job's cost)
    lost = timing.hang_gpu_hours(tl, gpus, teardown=wd["ts"].max() if wd.height else None)  # type: ignore[arg-type]
    reporters = set(wd["node"].drop_nulls().to_list())
    culprits = hang_culprits(events, comms) if comms is not None else pl.DataFrame()
    named = sorted(set(culprits["node"].drop_nulls().to_list()) - {"unknown"}) if culprits.height else []
    silent = named or ([n for n in nodes if n not in reporters] if reporters else [])
    info = {"stop": stop, "reporters": sorted(reporters), "silent": silent, "lost": lost}
    fatal = [
        c
        for c in cands
        if (c.category in CAUSE_CATEGORIES or (c.category == Category.SOFTWARE and c.node is None))
        and c.severity.rank <= Severity.HIGH.rank
        and c.first_seen is not None
        and (stop is None or (stop - HANG_LOOKBACK <= c.first_seen <= stop + timedelta(minutes=45)))
    ]
    if fatal:
        # the first fatal event, preferring the silent node (dead ranks log nothing)
        fatal.sort(key=lambda c: (c.node not in silent, c.first_seen))
        cause = fatal[0]
        idx = cands.index(cause)
        cons = [
            f"the job stopped progressing at step {tl.hang['last_step']} ({iso(tl.hang['last_ts'])})" if tl.hang else "the job stopped progressing",
            *_consequences_after(cause.first_seen, events, cause.node),
        ]
        cands[idx] = replace(
            cause,
            severity=Severity.CRITICAL,
            confidence=min(0.98, cause.confidence + 0.05),
            consequences=[*cause.consequences, *cons],
            impact={**cause.impact, "lost_gpu_hours": lost},
        )
        return cands, info
    where = silent[0] if len(silent) == 1 else None
    ev = [
        Evidence.from_event(r)
        for r in wd.sort("ts", nulls_last=True).unique(subset="node", keep="first", maintain_order=True).head(6).iter_rows(named=True)
    ]
    title = (
        f"Job hung: {where} stopped responding; {len(reporters)} other node(s) timed out waiting for it"
        if where
        else "Job hung: every rank timed out in a collective; no node-level cause found"
    )
    c = Candidate(
        category=Category.HANG,
        severity=Severity.HIGH,
        node=where,
        gpu_index=None,
        gpu_bus_id=None,
        title=title,
        summary=(
            (f"The job made no progress after step {tl.hang['last_step']} ({iso(tl.hang['last_ts'])}). " if tl.hang else "")
            + (f"Watchdog/NCCL timeouts came from {len(reporters)} node(s); " if reporters else "")
            + (
                f"culprit rank(s) behind or absent on: {', '.join(silent[:10])}."
                if silent
                else "no rank was behind or silent."
            )
        ),
        first_seen=stop,
        last_seen=tl.hang["until"] if tl.hang else wd["ts"].max(),  # type: ignore[arg-type]
        evidence=ev,
        action="Inspect the silent rank (py-spy dump, flight recorder, its kernel log); restart the job without that node.",
        confidence=0.7 if where else 0.5,
        kinds={"hang"},
        impact={"lost_gpu_hours": lost},
        consequences=_consequences_after(stop, events, where),
    )
    cands.append(c)
    return cands, info


ONSET_LEAD = timedelta(minutes=30)
"""A cause may show up to this long before the steps slow down (telemetry sampled every minute or so)."""
ONSET_LAG = timedelta(minutes=5)
"""...and, on a node other than the one found slow, at most this long after the slowdown's start (as the
change point of the step times and sampled telemetry place it)."""


SNAPSHOT_SLACK = timedelta(minutes=15)
"""A state seen in a snapshot (nvidia-smi -q at the end of the job) may be first *observed* after the slowdown."""


def _best_explanation(
    pool: list[Candidate], regime: timing.Regime, slow_set: set[str], used: set[int]
) -> Candidate | None:
    """The candidate that best explains one slow regime.

    Preference: on a node localised as slow; then whose first sign is closest to the regime's start
    (from ONSET_LEAD before it to its end); then not yet used for another regime; then severity and
    confidence. Candidates without a time (drift, a link width) explain a regime only as a fallback. Where
    a node was localised as slow, a candidate on another node must begin by ONSET_LAG after the start.
    """
    start, end = regime.ts_start, regime.ts_end

    def timed(c: Candidate) -> bool:
        return (
            c.first_seen is not None
            and start is not None
            and end is not None
            and start - ONSET_LEAD <= c.first_seen <= end + SNAPSHOT_SLACK
        )

    def key(c: Candidate) -> tuple:
        gap = abs((c.first_seen - start).total_seconds()) if timed(c) else float("inf")  # type: ignore[operator]
        return (c.node not in slow_set, not timed(c), id(c) in used, gap, c.severity.rank, -c.confidence)

    def near_start(c: Candidate) -> bool:
        return timed(c) and c.first_seen <= start + ONSET_LAG  # type: ignore[operator]

    eligible = [c for c in pool if timed(c) or c.first_seen is None or start is None or c.node in slow_set]
    if slow_set:
        # a node was found slow: a candidate elsewhere explains the regime only when it began with it (a crash
        # at the end of a slowdown stopped the job, it did not slow it; the late snapshot's allowance is for
        # the slow node's own state)
        eligible = [c for c in eligible if c.node in slow_set or near_start(c)]
    return min(eligible, key=key) if eligible else None


def attribute_slowdowns(
    cands: list[Candidate], tl: timing.Timeline, slow_nodes: pl.DataFrame, gpus: int
) -> list[Candidate]:
    """Put each lasting slowdown on the candidate that explains it, else report a straggler / fleet slowdown."""
    slow_set = set(slow_nodes["node"].to_list()) if slow_nodes.height else set()
    used: set[int] = set()
    for regime in tl.slow:
        b = tl.baseline_s or regime.level_s
        pct = (regime.level_s / b - 1) * 100
        lost = timing.lost_gpu_hours(tl, gpus, regime)

        # timing is judged by _best_explanation (a snapshot may observe the state after the regime)
        pool = [c for c in cands if c.category in CAUSE_CATEGORIES and c.severity != Severity.INFO]
        pick = _best_explanation(pool, regime, slow_set, used)
        cons = f"steps {pct:.1f}% slower than the {b:.3g} s baseline from step {regime.step_start} to {regime.step_end}"
        if pick is not None:
            c = pick
            used.add(id(c))
            i = cands.index(c)
            extra_ev: list[Evidence] = []
            first = c.first_seen
            if c.node in slow_set:
                # the localisation is evidence too, and dates the onset better than a late snapshot
                r = slow_nodes.filter(pl.col("node") == c.node).row(0, named=True)
                extra_ev.append(Evidence(source="telemetry" if str(r["method"]).startswith("GPU telemetry") else "steps",
                                         file=r.get("file"), line=r.get("line"), ts=iso(r.get("first_ts")), text=f"{c.node}: {r['method']}"))
                if regime.ts_start is not None and (first is None or regime.ts_start < first):
                    first = regime.ts_start
            new = replace(
                c,
                severity=_raise(c, Severity.HIGH) if pct >= 5 else c.severity,
                confidence=min(0.98, c.confidence + (0.1 if c.node in slow_set else 0.05)),
                consequences=[*c.consequences, cons],
                impact={"step_time_slowdown_pct": round(pct, 1), "lost_gpu_hours": lost},
                evidence=[*c.evidence, *extra_ev],
                first_seen=first,
            )
            cands[i] = new
            continue
        if slow_set:
            for node in sorted(slow_set):
                prior = next((c for c in cands if c.category == Category.STRAGGLER and c.node == node), None)
                if prior is not None:
                    # the same straggler in another regime: one finding, its cost added up
                    i = cands.index(prior)
                    lost_all = (prior.impact.get("lost_gpu_hours") or 0) + (lost or 0)
                    cands[i] = replace(
                        prior,
                        consequences=[*prior.consequences, cons],
                        last_seen=regime.ts_end or prior.last_seen,
                        impact={"step_time_slowdown_pct": max(prior.impact.get("step_time_slowdown_pct") or 0, round(pct, 1)),
                                "lost_gpu_hours": lost_all},
                    )
                    continue
                r = slow_nodes.filter(pl.col("node") == node).row(0, named=True)
                c = Candidate(
                    category=Category.STRAGGLER,
                    severity=Severity.HIGH,
                    node=node,
                    gpu_index=None,
                    gpu_bus_id=None,
                    title=f"{node} is a straggler: the job runs {pct:.1f}% slower waiting for it",
                    summary=(
                        f"From step {regime.step_start} the job's steps take {regime.level_s:.3g} s instead of {b:.3g} s; "
                        f"{node} is the slowest ({r['method']}"
                        + (f", median robust z {r['z']:.1f}" if r.get("z") is not None else "")
                        + (f", slowest in {r['slowest_share']:.0%} of the steps" if r.get("slowest_share") is not None else "")
                        + "). No hardware event explains it."
                    ),
                    first_seen=r.get("first_ts") or regime.ts_start,
                    last_seen=r.get("last_ts") or regime.ts_end,
                    evidence=[Evidence(source="steps", file=r.get("file"), line=r.get("line"), ts=iso(r.get("first_ts")), text=f"{node}: {r['method']} shows it slowest")],
                    action="Drain the node and run DCGM diagnostics (dcgmi diag -r 3) and nccl-tests against a healthy peer; check CPU, memory and storage of the host.",
                    confidence=0.75,
                    consequences=[cons],
                    kinds={"straggler"},
                    impact={"step_time_slowdown_pct": round(pct, 1), "lost_gpu_hours": lost},
                )
                cands.append(c)
            continue
        c = Candidate(
            category=Category.STRAGGLER,
            severity=Severity.MEDIUM,
            node=None,
            gpu_index=None,
            gpu_bus_id=None,
            title=f"The job slowed down {pct:.1f}% from step {regime.step_start}; no node could be singled out",
            summary=(
                f"Steps {regime.step_start}–{regime.step_end} took {regime.level_s:.3g} s against a baseline of {b:.3g} s. "
                "The bundle has no per-rank timings, telemetry or hardware event that points to one node."
            ),
            first_seen=regime.ts_start,
            last_seen=regime.ts_end,
            evidence=[],
            action="Collect per-rank timings (Megatron straggler detector, NVRx) or nvidia-smi telemetry of every node and re-run.",
            confidence=0.5,
            consequences=[cons],
            kinds={"slowdown"},
            impact={"step_time_slowdown_pct": round(pct, 1), "lost_gpu_hours": lost},
        )
        cands.append(c)
    return cands


def fold_witnessed(cands: list[Candidate]) -> list[Candidate]:
    """Fold NCCL peer errors that name a node into that node's own earlier fault: its peers saw it die.

    A peer named by many reporters is only a network suspect when nothing on that node explains it;
    after a GPU or memory fault there (which kills the rank and its connections), the reporters' errors
    are consequences of that fault.
    """
    result = list(cands)

    def is_cause(x: Candidate, witness: Candidate) -> bool:
        return (
            x.node == witness.node
            and x.category in (Category.GPU_HARDWARE, Category.GPU_MEMORY, Category.NVLINK)
            and x.severity.rank <= Severity.HIGH.rank
            and (x.first_seen is None or witness.first_seen is None or x.first_seen <= witness.first_seen + timedelta(minutes=5))
        )

    for w in [c for c in cands if c.kinds == {"nccl_ib_error"} and c.node is not None]:
        j = next((i for i, x in enumerate(result) if x is not w and is_cause(x, w)), None)
        if j is None:
            continue
        result[j] = replace(result[j], consequences=[*result[j].consequences, f"{w.title} (witnesses of the failure)"])
        result = [x for x in result if x is not w]
    return result


ONSET_SLACK = timedelta(minutes=10)
"""A straggler first seen within this of the job's first step was slow from the start (telemetry buckets are up
to 5 minutes; the whole job's window starts at its first step)."""


def attribute_stragglers(
    cands: list[Candidate], slow_nodes: pl.DataFrame, tl: timing.Timeline, gpus: int
) -> list[Candidate]:
    """Slow nodes that no slowdown regime covered (slow from the job's start, or turned slow when the job's step
    time hardly changed): attach to their cause or report.

    A node slow for the whole job leaves no change point: the job's "baseline" is already the slow
    speed. Its cost is estimated from how much longer it computes than the fleet (per-rank timings),
    or, from telemetry alone, left unquantified.
    """
    if slow_nodes.height == 0:
        return cands
    covered = {c.node for c in cands if c.impact} | {c.node for c in cands if c.category == Category.STRAGGLER}
    job_start = tl.series["ts"].drop_nulls().min() if tl.series.height else None
    for r in slow_nodes.iter_rows(named=True):
        node = r["node"]
        if node in covered:
            continue
        pct = None
        if r.get("value") is not None and r.get("baseline"):
            pct = round((r["value"] / r["baseline"] - 1) * 100, 1)
        lost = None
        if pct is not None and tl.baseline_s and gpus:
            steps = tl.series.height
            lost = steps * tl.baseline_s * (pct / 100) / (1 + pct / 100) * gpus / 3600
        cons = f"{node} measured slower than the fleet ({r['method']})"
        # (from the start: no later than a telemetry bucket after the first step)
        since_start = r.get("first_ts") is None or job_start is None or r["first_ts"] <= job_start + ONSET_SLACK
        own = [c for c in cands if c.node == node and c.category in CAUSE_CATEGORIES and c.severity != Severity.INFO]
        if own:
            c = min(own, key=lambda c: (c.severity.rank, -c.confidence))
            i = cands.index(c)
            cands[i] = replace(
                c,
                severity=_raise(c, Severity.HIGH),
                confidence=min(0.98, c.confidence + 0.1),
                consequences=[*c.consequences, cons],
                impact={"step_time_slowdown_pct": pct, "lost_gpu_hours": lost} if pct is not None else c.impact,
            )
            continue
        cands.append(
            Candidate(
                category=Category.STRAGGLER,
                severity=Severity.HIGH,
                node=node,
                gpu_index=None,
                gpu_bus_id=None,
                title=f"{node} is a straggler: the whole job waits for it",
                summary=(
                    f"{node} is the slowest node of the job ({r['method']}"
                    + (f", median robust z {r['z']:.1f}" if r.get("z") is not None else "")
                    + (
                        "). It was slow from the start, so the step times show no change point"
                        if since_start
                        else f"). It turned slow at {iso(r['first_ts'])}, and the step times changed too little to show it"
                    )
                    + "; no hardware event explains it."
                ),
                first_seen=r.get("first_ts") or job_start,
                last_seen=r.get("last_ts"),
                evidence=[
                    Evidence(source="telemetry" if str(r["method"]).startswith("GPU telemetry") else "steps", file=r.get("file"), line=r.get("line"),
                             ts=iso(r.get("first_ts")), text=f"{node}: {r['method']}")
                ],
                action="Drain the node and run DCGM diagnostics (dcgmi diag -r 3) and nccl-tests against a healthy peer; check CPU, memory and storage of the host.",
                confidence=0.7,
                consequences=[cons],
                kinds={"straggler"},
                impact={"step_time_slowdown_pct": pct, "lost_gpu_hours": lost} if pct is not None else {},
            )
        )
    return cands


FLEET_MIN_NODES = 4
"""The fewest nodes one finding must stand on to be folded into a fleet-wide one (with `FLEET_SHARE` of them:
a 2-node bundle's two findings stay two)."""


def fold_fleet(cands: list[Candidate], nodes: list[str]) -> list[Candidate]:
    """The same finding on most nodes is one fleet-wide finding, not one per node.

    Candidates of one category, severity and event kinds standing on at least `FLEET_SHARE` of the bundle's
    nodes (and `FLEET_MIN_NODES`) point to what the nodes share (the fabric, the cooling, the software, the
    way the logs were made: DESIGN.md's analysis principles), not to each node's hardware: a report of a
    thousand identical findings hides the one that differs. Candidates a slowdown, hang or consequence was put
    on keep their own finding."""
    known = sorted({n for n in nodes if n and n != "unknown"})
    if len(known) < FLEET_MIN_NODES:
        return cands
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(cands):
        if c.node is None or c.impact or c.consequences:
            continue
        groups.setdefault((c.category, c.severity, frozenset(c.kinds)), []).append(i)
    folded: dict[int, Candidate] = {}
    drop: set[int] = set()
    for at in groups.values():
        group = [cands[i] for i in at]
        on = sorted({c.node for c in group if c.node})
        if len(on) < max(FLEET_MIN_NODES, FLEET_SHARE * len(known)):
            continue
        group.sort(key=lambda c: (c.first_seen is None, c.first_seen or datetime.min.replace(tzinfo=UTC), c.node))
        rep = group[0]
        assert rep.node is not None
        what = rep.title.replace(f" on {rep.node}", "").replace(rep.node, "a node")
        evidence = [e for c in group[:8] for e in c.evidence[:1]]
        firsts = [c.first_seen for c in group if c.first_seen]
        lasts = [c.last_seen for c in group if c.last_seen]
        folded[at[0]] = replace(
            rep,
            node=None,
            gpu_index=None,
            gpu_bus_id=None,
            title=f"{what}: on {len(on)} of {len(known)} nodes",
            summary=(
                f"The same finding stands on {len(on)} of the bundle's {len(known)} nodes "
                f"({name_nodes(on)}); on the first of them: {rep.summary} On most of the fleet at once it "
                "points to what the nodes share (the fabric, the cooling, the software or how the logs were "
                "collected), not to each node's hardware."
            ),
            first_seen=min(firsts) if firsts else None,
            last_seen=max(lasts) if lasts else None,
            evidence=evidence,
            action=f"Look for the cause the nodes share first. On one node: {rep.action}",
            kinds=set().union(*(c.kinds for c in group)),
        )
        drop.update(at[1:])
    return [folded.get(i, c) for i, c in enumerate(cands) if i not in drop]


def _slow_nodes(
    steps: pl.DataFrame, events: pl.DataFrame, samples: pl.DataFrame, tl: timing.Timeline, span: tuple
) -> pl.DataFrame:
    """The nodes (or GPUs) slower than the rest: by rank lateness, detector votes and telemetry."""
    lateness = stragglers.rank_lateness(steps)
    votes = stragglers.detector_votes(events)
    # telemetry while the job was slow, and over the whole job (a node slow from the start has no regime):
    # while it made progress, not the idle time around it nor a hang (everyone waits then)
    windows = [(r.ts_start, r.ts_end) for r in tl.slow] + [span]
    # ... and where a node stood apart for a while only (it turned slow when the step times hardly showed it)
    windows += [w for w in stragglers.telemetry_onsets(samples, *span) if w not in windows]
    tele_parts = [stragglers.telemetry_lateness(samples, a, b) for a, b in windows]
    tele_parts = [t for t in tele_parts if t.height]
    tele = pl.concat(tele_parts, how="diagonal_relaxed") if tele_parts else pl.DataFrame()
    slow_nodes = stragglers.flag_stragglers(lateness, votes, tele if tele.height else None)
    gpu_parts = [g for r in tl.slow if (g := stragglers.slow_gpus(samples, r.ts_start, r.ts_end)).height]
    if gpu_parts:
        known = set(slow_nodes["node"].to_list()) if slow_nodes.height else set()
        extra = pl.concat(gpu_parts, how="diagonal_relaxed").unique(subset="node", keep="first").filter(~pl.col("node").is_in(list(known)))
        slow_nodes = pl.concat([slow_nodes, extra], how="diagonal_relaxed") if slow_nodes.height else extra
    return slow_nodes


def rank_candidates(cands: list[Candidate]) -> list[Candidate]:
    """Order by severity × confidence, then earliest first (a cause precedes its consequences)."""
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(
        cands,
        key=lambda c: (-SEVERITY_WEIGHT[c.severity] * c.confidence, c.first_seen or far, c.node or ""),
    )


# ----------------------------------------------------------------------------- entry point


_NO_OFFSETS = pl.DataFrame(schema={"node": pl.String, "offset_s": pl.Float64, "anchors": pl.UInt32})
"""`clocks.estimate_offsets` of a bundle without anchors."""
STRICT_ENV = "FORENSICS_STRICT"
"""Set (to anything but empty), a failing analysis step fails the analysis (the tests set it)."""
_T = TypeVar("_T")


class _Guard:
    """Runs the analysis' steps: a step that fails (an exception, or a panic inside polars) costs its own
    evidence, not the analysis. Its default stands in for its result, and the failure is named in
    `coverage.analysis_errors` (the report and the CLI say the analysis is incomplete)."""

    def __init__(self) -> None:
        self.errors: list[dict[str, str]] = []

    def run(self, step: str, default: Callable[[], _T], fn: Callable[..., _T], *args: Any) -> _T:
        try:
            return fn(*args)
        except CONTAINED as exc:  # noqa: BLE001 - one step's failure is recorded, the others' evidence kept
            if os.environ.get(STRICT_ENV):
                raise
            self.errors.append({"step": step, "error": f"{type(exc).__name__}: {exc}"[:500]})
            return default()


def analyze(out: Path) -> dict[str, Any]:
    """Run every analysis over OUT's tables; write findings.json and the anomalies table; return the doc.

    Each step runs under a `_Guard`: where one fails, the findings of the others are still written, with the
    failed steps in `coverage.analysis_errors`."""
    manifest = require_ingested(out)
    tables, thinned = read_analysis_tables(out)
    guard = _Guard()
    job = job_summary(tables)
    events, steps, samples, comms, inv = (tables[t] for t in ("events", "steps", "gpu_samples", "comms", "inventory"))
    events = guard.run("ranks to nodes (events)", lambda: events, resolve_rank_nodes, events, comms)
    steps = guard.run("ranks to nodes (steps)", lambda: steps, resolve_rank_nodes, steps, comms)
    offsets = guard.run("clock offsets", lambda: _NO_OFFSETS, clocks.estimate_offsets, events, comms)
    events = guard.run("clock correction", lambda: events, clocks.correct, events, offsets)
    # The end of the evidence (how long a hang lasted) comes from what was still logging: telemetry,
    # steps and communication errors. Kernel lines are left out: a year-less syslog time inferred
    # wrongly must not stretch a hang over a year.
    live = events.filter(pl.col("kind").is_in(CONSEQUENCE_KINDS))
    ends = [df["ts"].max() for df in (live, samples, steps) if df.height]
    end_of_evidence = max((e for e in ends if e is not None), default=None)
    tl = guard.run(
        "step timeline",
        timing.no_timeline,
        lambda: timing.timeline(steps, end_of_evidence=end_of_evidence),  # type: ignore[arg-type]
    )
    start, end = timing.window(tl)
    span = timing.progress_span(tl)

    def tele() -> tuple[pl.DataFrame, list[Candidate]]:
        windowed = telemetry.in_window(samples, start, end)
        profile = telemetry.gpu_profile(windowed)
        return profile, telemetry.candidates(windowed, profile)

    def hot_clocks() -> list[Candidate]:
        # clocks down on a hot GPU, where the telemetry names no throttle reason: while the job was slow or
        # ran (a GPU once, from the first window that shows it)
        hot: dict[tuple, Candidate] = {}
        for a, b in [(r.ts_start, r.ts_end) for r in tl.slow] + [span]:
            for c in telemetry.hot_clock_candidates(samples, a, b):
                hot.setdefault((c.node, c.gpu_index), c)
        return list(hot.values())

    cands: list[Candidate] = []
    nodes = job["node_names"]
    cands += guard.run("hardware and software events", list, candidates_from_events, events, nodes)
    profile, tele_cands = guard.run("telemetry", lambda: (None, []), tele)
    cands += tele_cands
    cands += guard.run("hot GPU clocks", list, hot_clocks)
    growth = guard.run("network counters", pl.DataFrame, network.counter_growth, comms)
    cands += guard.run("network counters", list, network.counter_candidates, growth)
    cands += guard.run("network peers", list, network.peer_candidates, events, inv)
    cands += guard.run("configuration drift", list, drift.candidates, inv)
    merged = guard.run("merging evidence", lambda: cands, lambda: fold_witnessed(merge(cands)))
    cands = guard.run("history", lambda: merged, demote_history, merged, span[0])
    slow_nodes = guard.run("stragglers", pl.DataFrame, _slow_nodes, steps, events, samples, tl, span)
    gpus = job["gpus"] or 0
    # (a default reads `cands` when its step fails, before the step's result is assigned: the step's input)
    cands, _hang = guard.run(
        "hang attribution", lambda: (cands, None), attribute_hang, cands, tl, events, gpus, nodes, comms
    )
    cands = guard.run("slowdown attribution", lambda: cands, attribute_slowdowns, cands, tl, slow_nodes, gpus)
    cands = guard.run("straggler attribution", lambda: cands, attribute_stragglers, cands, slow_nodes, tl, gpus)

    anomalies = [timing.to_anomalies(tl)]
    outl = pl.DataFrame()
    if profile is not None:
        outl = guard.run("telemetry outliers", pl.DataFrame, telemetry.outliers, profile)
    if outl.height:
        anomalies.append(
            conform(
                outl.select(
                    pl.lit("telemetry_outlier").alias("kind"),
                    "node",
                    pl.col("gpu_index").cast(pl.Int32),
                    "metric",
                    "value",
                    "baseline",
                    pl.col("z").alias("deviation"),
                    pl.col("z").abs().alias("score"),
                    pl.lit('{"deviation": "robust z vs fleet"}').alias("detail"),
                ),
                "anomalies",
            )
        )
    if slow_nodes.height:
        anomalies.append(
            conform(
                slow_nodes.select(
                    pl.lit("straggler").alias("kind"),
                    "node",
                    pl.lit("compute_time").alias("metric"),
                    pl.col("z").cast(pl.Float64).alias("deviation") if "z" in slow_nodes.columns else pl.lit(None, pl.Float64).alias("deviation"),
                    pl.col("slowest_share").cast(pl.Float64).alias("score"),
                    pl.col("method").alias("detail"),
                ),
                "anomalies",
            )
        )
    anomalies_df = pl.concat([a for a in anomalies if a.height], how="vertical") if any(a.height for a in anomalies) else empty("anomalies")

    ranked = guard.run("ranking", lambda: cands, lambda: rank_candidates(fold_fleet(cands, nodes)))
    # where the job hung, what followed the stop (watchdog timeouts, clean-ups) is the hang's: listed under
    # the finding it was attributed to (or the hang's own), not under every finding that began before it
    hang_stop = _hang["stop"] if _hang else None
    findings = []
    for i, c in enumerate(ranked, start=1):
        ident = guard.run("GPU identity", dict, gpu_identity, inv, c.node, c.gpu_index, c.gpu_bus_id)
        imp = c.impact
        findings.append(
            Finding(
                id=f"F{i}",
                rank=i,
                severity=c.severity,
                confidence=round(c.confidence, 2),
                category=c.category,
                node=c.node,
                gpu_index=c.gpu_index if c.gpu_index is not None else ident.get("_index"),
                gpu_bus_id=c.gpu_bus_id or ident.get("_bus"),
                gpu_serial=ident.get("serial"),
                gpu_uuid=ident.get("uuid"),
                title=c.title,
                summary=c.summary,
                first_seen=iso(c.first_seen),
                last_seen=iso(c.last_seen),
                impact=Impact(
                    step_time_slowdown_pct=imp.get("step_time_slowdown_pct"),
                    lost_gpu_hours=round(imp["lost_gpu_hours"], 2) if imp.get("lost_gpu_hours") is not None else None,
                ),
                evidence=tuple(c.evidence),
                consequences=tuple(c.consequences or _consequences_after(c.first_seen, events, c.node, hang_stop) if c.severity != Severity.INFO else c.consequences),
                recommended_action=c.action,
                alternatives=tuple(c.alternatives) + tuple(
                    f"{o.title} — ranked lower ({o.severity.value}, confidence {o.confidence:.0%})"
                    for o in ranked[i:i + 3]
                    if i == 1 and o.severity != Severity.INFO
                ),
            ).to_json()
        )
    files = tables["files"]
    by_format = (
        files.filter(pl.col("format").is_not_null())
        .group_by("format")
        .agg(files=pl.len(), parsed_lines=pl.col("parsed").sum(), unrecognized_lines=pl.col("unrecognized").sum())
        .sort("format")
    )
    job_out = {k: v for k, v in job.items() if k != "node_names"}
    job_out["step_time_baseline_s"] = round(tl.baseline_s, 4) if tl.baseline_s else None
    job_out["clock_offsets"] = [
        {"node": r["node"], "offset_s": round(r["offset_s"], 3), "anchors": r["anchors"], "applied": abs(r["offset_s"]) >= clocks.MIN_SKEW_S}
        for r in offsets.filter(pl.col("offset_s").abs() >= 1.0).iter_rows(named=True)
    ]
    doc = {
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "bundle": manifest.get("bundle"),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "tool_version": __version__,
        "job": job_out,
        "findings": findings,
        "coverage": {
            "files": files.height,
            "parsed_lines": int(files.get_column("parsed").fill_null(0).sum()),
            "unrecognized_lines": int(files.get_column("unrecognized").fill_null(0).sum()),
            "skipped_files": int(files.get_column("status").str.starts_with("skipped").sum()),
            "error_files": int(files.get_column("status").str.starts_with("error").sum()),
            "by_format": {
                r["format"]: {k: v for k, v in r.items() if k != "format"} for r in by_format.iter_rows(named=True)
            },
            "thinned": thinned,
            "analysis_errors": guard.errors,
        },
    }
    write_table(anomalies_df, "anomalies", out / "tables")
    write_findings(out, doc)
    return doc


